/* Attributes of lassieSimulate()'s matrices (lassie_output.h) and
 * ffi_lassie_output, which gives them to matrices made in R (the blocks of
 * BiocParallel's workers): deSolve's istate/rstate/type/lengthvar, our
 * counters, status and message, and what the call's simulations share. */
#include <limits.h>
#include <string.h>
#include <time.h>

#include "lassie.h"
#include "lassie_output.h"

double lassie_out_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* A shared value: every matrix references it, so R must copy it before a
 * change (modifying one simulation's attribute leaves the others alone). */
static SEXP shared(SEXP x) {
  if (x != R_NilValue) MARK_NOT_MUTABLE(x);
  return x;
}

/* deSolve's rstate: its third entry the time reached, NA for a failure */
static SEXP rstate(double t_reached) {
  SEXP rs = Rf_allocVector(REALSXP, 5);
  for (int i = 0; i < 5; i++) REAL(rs)[i] = NA_REAL;
  REAL(rs)[2] = t_reached;
  return rs;
}

SEXP lassie_out_decode(SEXP attrs, double t_end, lassie_out_shared *sh) {
  sh->dimnames = shared(sbg_vec_elt(attrs, "dimnames", VECSXP, 2));
  sh->cls = shared(sbg_vec_elt(attrs, "class", STRSXP, -1));
  sh->type = shared(sbg_vec_elt(attrs, "type", STRSXP, 1));
  sh->lengthvar = shared(sbg_elt(attrs, "lengthvar"));
  sh->stat_names = shared(sbg_vec_elt(attrs, "statNames", STRSXP, SBG_LASSIE_N_STATS));
  sh->common = sbg_vec_elt(attrs, "common", VECSXP, -1);
  SEXP nm = Rf_getAttrib(sh->common, R_NamesSymbol);
  R_xlen_t nc = XLENGTH(sh->common);
  SBG_ASSERT(TYPEOF(nm) == STRSXP && XLENGTH(nm) == nc);
  sh->common_syms = (SEXP *)R_alloc((size_t)nc + 1, sizeof(SEXP));
  sh->elapsed_at = -1;
  for (R_xlen_t i = 0; i < nc; i++) {
    sh->common_syms[i] = Rf_installChar(STRING_ELT(nm, i));
    if (strcmp(CHAR(STRING_ELT(nm, i)), "elapsed") == 0) sh->elapsed_at = i;
    shared(VECTOR_ELT(sh->common, i));
  }
  sh->elapsed = NULL;
  const char *sym[7] = {"stats", "istate", "rstate", "type", "lengthvar", "status", "message"};
  for (int i = 0; i < 7; i++) sh->sym[i] = Rf_install(sym[i]);
  SEXP keep = PROTECT(Rf_allocVector(VECSXP, 3));
  sh->ok_status = shared(SET_VECTOR_ELT(keep, 0, Rf_ScalarInteger(0)));
  sh->ok_message = shared(SET_VECTOR_ELT(keep, 1, Rf_ScalarString(R_BlankString)));
  sh->ok_rstate = shared(SET_VECTOR_ELT(keep, 2, rstate(t_end)));
  sh->t_end = t_end;
  UNPROTECT(1);
  return keep;
}

/* as.integer(pmin(v, .Machine$integer.max)) for a counter */
static int count_int(double v) {
  if (ISNAN(v) || v <= INT_MIN) return NA_INTEGER;
  return v >= INT_MAX ? INT_MAX : (int)v;
}

/* deSolve's istate (21 integers, as lsoda's) into v: 2 (lsoda's
 * "successful") or -1, then the counters that have a counterpart; NA
 * elsewhere, which diagnostics() leaves out. */
static void istate(int *v, const double *st, int status) {
  for (int i = 0; i < 21; i++) v[i] = NA_INTEGER;
  v[0] = status == 0 ? 2 : -1;
  v[1] = count_int(st[SBG_LASSIE_ST_STEPS]);
  v[2] = count_int(st[SBG_LASSIE_ST_RHS]);
  v[3] = count_int(st[SBG_LASSIE_ST_JAC]);
  v[9] = count_int(st[SBG_LASSIE_ST_FACTOR]);
  v[10] = count_int(st[SBG_LASSIE_ST_NEWTON]);
  v[12] = count_int(st[SBG_LASSIE_ST_REJECTED]);
}

void lassie_out_attach(SEXP x, const lassie_out_shared *sh) {
  SBG_ASSERT(TYPEOF(x) == REALSXP && Rf_isMatrix(x) && Rf_nrows(x) >= 1);
  Rf_setAttrib(x, R_DimNamesSymbol, sh->dimnames);
  Rf_setAttrib(x, R_ClassSymbol, sh->cls);
  SEXP s = PROTECT(Rf_allocVector(REALSXP, SBG_LASSIE_N_STATS));
  memset(REAL(s), 0, sizeof(double) * SBG_LASSIE_N_STATS);
  Rf_setAttrib(s, R_NamesSymbol, sh->stat_names);
  Rf_setAttrib(x, sh->sym[0], s);
  SEXP is = PROTECT(Rf_allocVector(INTSXP, 21));
  memset(INTEGER(is), 0, sizeof(int) * 21);
  Rf_setAttrib(x, sh->sym[1], is);
  Rf_setAttrib(x, sh->sym[2], sh->ok_rstate);
  Rf_setAttrib(x, sh->sym[3], sh->type);
  Rf_setAttrib(x, sh->sym[4], sh->lengthvar);
  Rf_setAttrib(x, sh->sym[5], sh->ok_status);
  Rf_setAttrib(x, sh->sym[6], sh->ok_message);
  for (R_xlen_t i = 0; i < XLENGTH(sh->common); i++)
    Rf_setAttrib(x, sh->common_syms[i],
                 i == sh->elapsed_at && sh->elapsed ? sh->elapsed : VECTOR_ELT(sh->common, i));
  UNPROTECT(2);
}

/* x's cell of attribute `sym` (attached, so there) */
static SEXP attr_cell(SEXP x, SEXP sym) {
  for (SEXP a = ATTRIB(x); a != R_NilValue; a = CDR(a))
    if (TAG(a) == sym) return a;
  SBG_ASSERT(0);
  return R_NilValue;
}

void lassie_out_fill(SEXP x, const lassie_out_shared *sh, const double *st, int status, SEXP message) {
  /* stats and istate are x's own (lassie_out_attach()): filled in place */
  memcpy(REAL(CAR(attr_cell(x, sh->sym[0]))), st, sizeof(double) * SBG_LASSIE_N_STATS);
  istate(INTEGER(CAR(attr_cell(x, sh->sym[1]))), st, status);
  const double t_reached = REAL(x)[Rf_nrows(x) - 1];
  if (status != 0 || t_reached != sh->t_end) {
    SEXP rs = PROTECT(rstate(status == 0 ? t_reached : NA_REAL));
    SETCAR(attr_cell(x, sh->sym[2]), rs);
    UNPROTECT(1);
  }
  if (status != 0) {
    SEXP v = PROTECT(Rf_ScalarInteger(status));
    SETCAR(attr_cell(x, sh->sym[5]), v);
    UNPROTECT(1);
  }
  if (LENGTH(message) > 0) {
    SEXP v = PROTECT(Rf_ScalarString(message));
    SETCAR(attr_cell(x, sh->sym[6]), v);
    UNPROTECT(1);
  }
}

/* .Call(ffi_lassie_output, sims, stats, status, messages, attrs): copies of
 * the matrices `sims` (times x columns) with their attributes; stats:
 * counters x simulations, status and messages per simulation.  The inputs
 * are R's (other objects may share them), hence copies, not changes. */
SEXP ffi_lassie_output(SEXP sims, SEXP stats, SEXP status, SEXP messages, SEXP attrs) {
  SBG_ASSERT(TYPEOF(sims) == VECSXP && TYPEOF(stats) == REALSXP && TYPEOF(status) == INTSXP &&
             TYPEOF(messages) == STRSXP);
  R_xlen_t n = XLENGTH(sims);
  SBG_ASSERT(XLENGTH(status) == n && XLENGTH(messages) == n &&
             XLENGTH(stats) == (R_xlen_t)SBG_LASSIE_N_STATS * n);
  lassie_out_shared sh;
  /* (a simulation that ends elsewhere gets an rstate of its own) */
  SEXP first = n > 0 ? VECTOR_ELT(sims, 0) : R_NilValue;
  const double t_end = TYPEOF(first) == REALSXP && Rf_isMatrix(first) && Rf_nrows(first) >= 1
                           ? REAL(first)[Rf_nrows(first) - 1] : NA_REAL;
  PROTECT(lassie_out_decode(attrs, t_end, &sh));
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, n));
  for (R_xlen_t s = 0; s < n; s++) {
    SEXP in = VECTOR_ELT(sims, s);
    SBG_ASSERT(TYPEOF(in) == REALSXP && Rf_isMatrix(in));
    SEXP x = Rf_allocMatrix(REALSXP, Rf_nrows(in), Rf_ncols(in));
    SET_VECTOR_ELT(ans, s, x);
    memcpy(REAL(x), REAL(in), sizeof(double) * (size_t)XLENGTH(in));
    lassie_out_attach(x, &sh);
    lassie_out_fill(x, &sh, REAL(stats) + s * SBG_LASSIE_N_STATS, INTEGER(status)[s],
                    STRING_ELT(messages, s));
  }
  UNPROTECT(2);
  return ans;
}
