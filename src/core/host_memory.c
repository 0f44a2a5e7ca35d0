/* Hints about large host buffers (host_memory.h). */
#include <stdint.h>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "host_memory.h"

/* Fewer page faults at a large block's first touch, and a faster copy from
 * the GPU (measured on lassieSimulate's output). */
void sbg_hint_huge_pages(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, b = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
  if (bytes >= ((size_t)4 << 20) && b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}
