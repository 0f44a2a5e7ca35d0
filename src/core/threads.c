/* CPU thread counts for the engines. */
#ifndef _WIN32
#include <pthread.h>
#endif

#include "omp_compat.h"
#include "threads.h"

/* GNU OpenMP is not fork-safe: a forked child (parallel::mclapply,
 * BiocParallel's MulticoreParam) whose parent has run a parallel region
 * hangs in its own first parallel region with more than one thread, waiting
 * for a thread pool that was not copied.  A child therefore runs its
 * engines on one thread (as data.table does); MulticoreParam's workers are
 * the parallelism there. */
static volatile int sbg_in_forked_child = 0;

#ifndef _WIN32
static void sbg_mark_forked_child(void) { sbg_in_forked_child = 1; }
#endif

void sbg_threads_init(void) {
#ifndef _WIN32
  static int registered = 0;
  if (!registered && pthread_atfork(NULL, NULL, sbg_mark_forked_child) == 0) registered = 1;
#endif
}

int sbg_threads_forked(void) { return sbg_in_forked_child; }

int sbg_have_openmp(void) {
#ifdef _OPENMP
  return 1;
#else
  return 0;
#endif
}

int sbg_threads_available(void) {
  if (sbg_in_forked_child) return 1;
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
