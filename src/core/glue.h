/* What every .Call glue function shares: building the engine context from
 * R arguments, the R side of polling (interrupts, progress), and turning an
 * engine status into a classed R error.  The only core file that sees R. */
#ifndef SBG_GLUE_H
#define SBG_GLUE_H

#define R_NO_REMAP
#include <R.h>
#include <Rinternals.h>

#include "host_memory.h"
#include "status.h"

/* State of the interrupt check and progress bar of one call. */
typedef struct sbg_progress {
  int verbose;
  double t_start;
  double t_last_draw;
  SEXP bar;           /* the cli bar's environment (preserved), or NULL */
  const char *label;
} sbg_progress;

/* The run contract (DESIGN.md): every method crosses to C as
 * .Call(ffi_<m>, data, params, run), three named lists, and returns a named
 * list.  These helpers decode and build them; an element that is missing
 * or of the wrong type is a classed internal error (R builds the lists, so
 * it is a bug) that names the element. */

/* The element `name` of a named list; an error when it has none. */
SEXP sbg_elt(SEXP list, const char *name);
/* The element `name`, or NULL (C NULL) when the list has none. */
SEXP sbg_elt_or_null(SEXP list, const char *name);
/* Scalars: an integer (not NA), a double, a logical (TRUE or FALSE). */
int sbg_int_elt(SEXP list, const char *name);
double sbg_real_elt(SEXP list, const char *name);
int sbg_lgl_elt(SEXP list, const char *name);
/* A vector of `type` and length `len` (len < 0: any length). */
SEXP sbg_vec_elt(SEXP list, const char *name, SEXPTYPE type, R_xlen_t len);

/* A new (unprotected) list with these `n` names, elements NULL. */
SEXP sbg_named_list(int n, const char *const *names);
/* Sets the element `name` of a list made by sbg_named_list(); returns value. */
SEXP sbg_set(SEXP list, const char *name, SEXP value);

/* The `run` list: list(gpu, threads, devices, verbose), from
 * run_list() in R/backend.R.  Plain C values, held by the caller's R list. */
typedef struct sbg_run {
  int gpu;            /* run on the GPU engine */
  int threads;        /* CPU threads */
  const int *devices; /* GPU indices (0 on the CPU) */
  int n_devices;      /* >= 1 */
  int verbose;        /* progress bar */
} sbg_run;

void sbg_run_decode(SEXP run, sbg_run *r);

/* Fills ctx from plain C values: threads, the devices (the first is
 * ctx->device) and whether to show progress, prefixed with `label`. */
void sbg_ctx_setup(sbg_ctx *ctx, sbg_progress *pr, int threads, const int *devices, int n_devices,
                   int verbose, const char *label);
/* The same from a decoded run. */
void sbg_ctx_from_run(sbg_ctx *ctx, sbg_progress *pr, const sbg_run *r, const char *label);

/* Host memory outside R's heap, for a large buffer that only C reads: it
 * does not count towards R's heap (nor towards the collections its size
 * triggers).  Held by the external pointer returned (protect it), which
 * frees it on every path, an error or an interrupt included, when R
 * collects the pointer; sbg_scratch_release() frees it at once.  *at is
 * the memory, or NULL when malloc fails. */
SEXP sbg_scratch(size_t bytes, void **at);
/* An empty holder (address NULL), for memory malloc'ed later and handed to
 * it with R_SetExternalPtrAddr(). */
SEXP sbg_scratch_holder(void);
void sbg_scratch_release(SEXP holder);

/* Grows R's heap once for `bytes` of vectors that a call is about to make:
 * one allocation of their size, dropped at once, so that R collects and
 * grows its heap in one full collection, not in one per 20% of growth as
 * the vectors come (several full collections in a process's first large
 * call).  Nothing is written, so no page is touched.  An R error when R
 * cannot allocate that much (the caller's own allocations would fail
 * too). */
void sbg_reserve_heap(double bytes);

/* Ends the progress display (call on every path, before sbg_stop()). */
void sbg_progress_end(sbg_progress *pr);

/* Raises the R error for a failed engine call: sysbioGPU:::stop_engine()
 * signals a condition classed by status.  Does not return. */
void NORET sbg_stop(sbg_status st, const char *msg);

/* Glue-level assertion of what R code should already have checked. */
#define SBG_ASSERT(cond)                                                      \
  do {                                                                        \
    if (!(cond))                                                              \
      Rf_error("sysbioGPU internal error: %s (%s:%d); please report it",      \
               #cond, __FILE__, __LINE__);                                    \
  } while (0)

#endif /* SBG_GLUE_H */
