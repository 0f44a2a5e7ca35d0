/* How many CPU threads an engine may use. */
#ifndef SBG_THREADS_H
#define SBG_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Registers the fork handler (once, from R_init_sysbioGPU): a forked
 * child process gets one thread (threads.c says why). */
void sbg_threads_init(void);

/* 1 in a child forked after the package was loaded. */
int sbg_threads_forked(void);

/* Processors OpenMP sees, capped by OMP_THREAD_LIMIT; 1 without OpenMP and
 * in a forked child. */
int sbg_threads_available(void);

/* `requested` clamped to [1, sbg_threads_available()]. */
int sbg_threads_clamp(int requested);

/* 1 when the package was compiled with OpenMP. */
int sbg_have_openmp(void);

#ifdef __cplusplus
}
#endif

#endif /* SBG_THREADS_H */
