/* What every .Call glue function shares: building the engine context from
 * R arguments, the R side of polling (interrupts, progress), and turning an
 * engine status into a classed R error.  The only core file that sees R. */
#ifndef SBG_GLUE_H
#define SBG_GLUE_H

#define R_NO_REMAP
#include <R.h>
#include <Rinternals.h>

#include "status.h"

/* State of the interrupt check and progress bar of one call. */
typedef struct sbg_progress {
  int verbose;
  double t_start;
  double t_last_draw;
  SEXP bar;           /* the cli bar's environment (preserved), or NULL */
  const char *label;
} sbg_progress;

/* Fills ctx from the already validated R scalars `threads` (integer),
 * `device` (integer) and `verbose` (logical); progress lines are prefixed
 * with `label`. */
void sbg_ctx_init(sbg_ctx *ctx, sbg_progress *pr, SEXP threads, SEXP device,
                  SEXP verbose, const char *label);

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
