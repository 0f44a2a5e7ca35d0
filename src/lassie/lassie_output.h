/* The attributes of lassieSimulate()'s matrices, set in C (issue 17): a
 * batch of 20,000 simulations took R 0.3-0.6 s to decorate one by one.
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
} lassie_out_shared;

/* Decodes `attrs` into sh (R_alloc'ed; the objects stay held by attrs). */
void lassie_out_decode(SEXP attrs, lassie_out_shared *sh);

/* Gives x (times x columns, only its dim set, protected by the caller) the
 * attributes of simulation s, in the order R's constructor used: dim,
 * dimnames, class, stats, istate, rstate, type, lengthvar, status,
 * message, then the common ones.  st: its SBG_LASSIE_N_STATS counters;
 * message: its CHARSXP. */
void lassie_out_set(SEXP x, const lassie_out_shared *sh, const double *st, int status,
                    SEXP message);

/* Wall-clock seconds (monotonic), for the `elapsed` the glue measures. */
double lassie_out_seconds(void);

#endif /* SBG_LASSIE_OUTPUT_H */
