/* CPU thread counts for the engines. */
#include "omp_compat.h"
#include "threads.h"

int sbg_have_openmp(void) {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}

int sbg_threads_available(void) {
  int n = omp_get_num_procs();
  int limit = omp_get_thread_limit(); /* OMP_THREAD_LIMIT, else INT_MAX */
  if (limit > 0 && limit < n) n = limit;
  return n < 1 ? 1 : n;
}

int sbg_threads_clamp(int requested) {
  int n = sbg_threads_available();
  if (requested < 1) return 1;
  return requested < n ? requested : n;
}
