/* The attributes of lassieSimulate()'s matrices, set in C: R takes far
 * longer to decorate a large batch's matrices one by one.
 * Glue only (R objects); used by lassie_call.c and lassie_output.c. */
#ifndef SBG_LASSIE_OUTPUT_H
#define SBG_LASSIE_OUTPUT_H

#include "glue.h"

/* What all simulations of a call share, from lassie_output_attrs() in
 * R/lassie-output.R: each value is one R object referenced by every
 * matrix, marked not mutable so that R copies it before any change. */
typedef struct lassie_out_shared {
  SEXP dimnames, cls, type, lengthvar, stat_names;
  SEXP common;          /* named list: method, rtol, ..., elapsed, nSpecies */
  SEXP *common_syms;    /* its names as symbols */
  R_xlen_t elapsed_at;  /* the position of "elapsed" in common, or -1 */
  SEXP elapsed;         /* replaces common's "elapsed" when not NULL */
  SEXP sym[7];          /* stats, istate, rstate, type, lengthvar, status, message */
  /* a successful simulation's status, message and rstate (reaching t_end) */
  SEXP ok_status, ok_message, ok_rstate;
  double t_end;
} lassie_out_shared;

/* Decodes `attrs` into sh (R_alloc'ed; the objects stay held by attrs)
 * and makes a success's shared values for simulations that end at t_end;
 * returns them in a list the caller protects while sh is in use. */
SEXP lassie_out_decode(SEXP attrs, double t_end, lassie_out_shared *sh);

/* A simulation's attributes in two parts, so that a batch's objects are
 * all made before the engine's results come (its matrices' 21 R objects
 * each: 20,000 of them cost R 0.2-0.4 s of collections in a fresh
 * process, which the GPU engine overlaps with the device's work).
 * lassie_out_attach() gives x (times x columns, only its dim set, reachable
 * from a protected object) its attributes in the order R's constructor
 * used: dim, dimnames, class, stats, istate, rstate, type, lengthvar,
 * status, message, then the common ones, with a success's values and
 * counters still to fill.  lassie_out_fill() fills them: st its
 * SBG_LASSIE_N_STATS counters, message its CHARSXP; it allocates only for
 * a failure. */
void lassie_out_attach(SEXP x, const lassie_out_shared *sh);
void lassie_out_fill(SEXP x, const lassie_out_shared *sh, const double *st, int status, SEXP message);

/* Wall-clock seconds (monotonic), for the `elapsed` the glue measures. */
double lassie_out_seconds(void);

#endif /* SBG_LASSIE_OUTPUT_H */
