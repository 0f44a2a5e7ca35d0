/* Hints about large host buffers, for the glue and the engines alike.
 * Plain C, no R. */
#ifndef SBG_HOST_MEMORY_H
#define SBG_HOST_MEMORY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Asks Linux to back a large buffer that nothing has touched yet (an R
 * vector or a malloc() just made) with transparent huge pages, where the
 * system leaves that to madvise: its first touch then faults once per 2 MB
 * instead of once per 4 KB.  A hint; nothing happens elsewhere, nor for
 * buffers under 4 MB. */
void sbg_hint_huge_pages(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* SBG_HOST_MEMORY_H */
