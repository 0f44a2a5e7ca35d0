/* OpenMP when the compiler has it, single-thread stand-ins otherwise, so
 * engines use omp_* calls unconditionally.  Engines pass num_threads() on
 * each parallel region and never call omp_set_num_threads(), which would
 * change the threads of R and of other packages. */
#ifndef SBG_OMP_COMPAT_H
#define SBG_OMP_COMPAT_H

#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_num_procs(void) { return 1; }
static inline int omp_get_thread_limit(void) { return 1; }
#endif

#endif /* SBG_OMP_COMPAT_H */
