/* .Call glue of parCosnet() and cvParCosnet() (R/parCosnet.R): R vectors
 * to the engine structs of cosnet.h, the backend's engine, and the result
 * as an R list.  R has validated the arguments. */
#include <math.h>
#include <stdint.h>

#include "cosnet.h"
#include "glue.h"

/* p, i, x: the compressed columns of a symmetric dgCMatrix, which are also
 * its rows.  labels: n x K integer (1, -1, 0); folds: n x K integer or
 * NULL. */
SEXP ffi_cosnet(SEXP p, SEXP i, SEXP x, SEXP labels, SEXP folds, SEXP n_folds, SEXP cost,
                SEXP max_sweeps, SEXP seed, SEXP max_batch, SEXP gpu, SEXP threads,
                SEXP device, SEXP verbose) {
  int nprot = 0;
  SBG_ASSERT(TYPEOF(p) == INTSXP && TYPEOF(i) == INTSXP && TYPEOF(x) == REALSXP);
  SBG_ASSERT(XLENGTH(i) == XLENGTH(x) && XLENGTH(p) >= 1);
  SBG_ASSERT(TYPEOF(labels) == INTSXP && TYPEOF(n_folds) == INTSXP);
  SBG_ASSERT(TYPEOF(cost) == REALSXP && TYPEOF(max_sweeps) == INTSXP);
  SBG_ASSERT(TYPEOF(seed) == REALSXP && TYPEOF(gpu) == LGLSXP && TYPEOF(max_batch) == INTSXP);
  int32_t n = (int32_t)(XLENGTH(p) - 1);
  SBG_ASSERT(n >= 1 && XLENGTH(labels) % n == 0);
  SBG_ASSERT(INTEGER(p)[n] == XLENGTH(i));
  int32_t K = (int32_t)(XLENGTH(labels) / n);
  int32_t nf = INTEGER(n_folds)[0];
  SBG_ASSERT(nf >= 0 && (nf == 0) == Rf_isNull(folds));
  SBG_ASSERT(Rf_isNull(folds) || (TYPEOF(folds) == INTSXP && XLENGTH(folds) == XLENGTH(labels)));
  int32_t n_jobs = K * (nf > 0 ? nf : 1);

  int64_t *rowptr = (int64_t *)R_alloc((size_t)n + 1, sizeof(int64_t));
  for (int32_t v = 0; v <= n; v++) rowptr[v] = INTEGER(p)[v];
  int8_t *lab = (int8_t *)R_alloc((size_t)XLENGTH(labels), 1);
  for (R_xlen_t t = 0; t < XLENGTH(labels); t++) {
    int l = INTEGER(labels)[t];
    SBG_ASSERT(l == 1 || l == -1 || l == 0);
    lab[t] = (int8_t)l;
  }
  const int32_t *ci = INTEGER(i);
  for (R_xlen_t t = 0; t < XLENGTH(i); t++) SBG_ASSERT(ci[t] >= 0 && ci[t] < n);

  sbg_cosnet_input in;
  in.g.n = n;
  in.g.v_rowptr = rowptr;
  in.g.v_col = ci;
  in.g.v_w = REAL(x);
  in.n_classes = K;
  in.v_labels = lab;
  in.v_folds = Rf_isNull(folds) ? NULL : INTEGER(folds);
  in.n_folds = nf;
  sbg_cosnet_params par;
  par.cost = REAL(cost)[0];
  par.max_sweeps = INTEGER(max_sweeps)[0];
  par.seed = (uint64_t)REAL(seed)[0];
  par.max_batch = INTEGER(max_batch)[0];

  SEXP scores = PROTECT(Rf_allocMatrix(REALSXP, n, K)); nprot++;
  SEXP pred = PROTECT(Rf_allocMatrix(LGLSXP, n, K)); nprot++;
  for (R_xlen_t t = 0; t < XLENGTH(scores); t++) {
    REAL(scores)[t] = NA_REAL;
    LOGICAL(pred)[t] = NA_LOGICAL;
  }
  SEXP alpha = PROTECT(Rf_allocVector(REALSXP, n_jobs)); nprot++;
  SEXP c = PROTECT(Rf_allocVector(REALSXP, n_jobs)); nprot++;
  SEXP fs = PROTECT(Rf_allocVector(REALSXP, n_jobs)); nprot++;
  SEXP sweeps = PROTECT(Rf_allocVector(INTSXP, n_jobs)); nprot++;
  SEXP conv = PROTECT(Rf_allocVector(LGLSXP, n_jobs)); nprot++;
  SEXP colour = PROTECT(Rf_allocVector(INTSXP, n)); nprot++;

  sbg_cosnet_result out;
  out.v_scores = REAL(scores);
  out.v_pred = LOGICAL(pred);
  out.v_alpha = REAL(alpha);
  out.v_c = REAL(c);
  out.v_fscore = REAL(fs);
  out.v_sweeps = INTEGER(sweeps);
  out.v_converged = LOGICAL(conv);
  out.v_colour = INTEGER(colour);
  out.n_colours = 0;

  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "parCosnet");
  sbg_status st = LOGICAL(gpu)[0] ? sbg_cosnet_gpu(&in, &par, &out, &ctx)
                                  : sbg_cosnet_cpu(&in, &par, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);

  const char *nm[] = {"scores", "pred", "alpha", "c", "fscore", "sweeps", "converged",
                      "colour", "nColours"};
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 9)); nprot++;
  SET_VECTOR_ELT(ans, 0, scores);
  SET_VECTOR_ELT(ans, 1, pred);
  SET_VECTOR_ELT(ans, 2, alpha);
  SET_VECTOR_ELT(ans, 3, c);
  SET_VECTOR_ELT(ans, 4, fs);
  SET_VECTOR_ELT(ans, 5, sweeps);
  SET_VECTOR_ELT(ans, 6, conv);
  SET_VECTOR_ELT(ans, 7, colour);
  SET_VECTOR_ELT(ans, 8, Rf_ScalarInteger(out.n_colours));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, 9)); nprot++;
  for (int t = 0; t < 9; t++) SET_STRING_ELT(names, t, Rf_mkChar(nm[t]));
  Rf_setAttrib(ans, R_NamesSymbol, names);
  UNPROTECT(nprot);
  return ans;
}

/* The learning step alone, on given points: c(alpha, c, F). */
SEXP ffi_cosnet_learn(SEXP x, SEXP y, SEXP lab) {
  SBG_ASSERT(TYPEOF(x) == REALSXP && TYPEOF(y) == REALSXP && TYPEOF(lab) == INTSXP);
  SBG_ASSERT(XLENGTH(x) == XLENGTH(y) && XLENGTH(x) == XLENGTH(lab));
  R_xlen_t m = XLENGTH(x);
  int8_t *l = (int8_t *)R_alloc((size_t)(m > 0 ? m : 1), 1);
  for (R_xlen_t t = 0; t < m; t++) l[t] = INTEGER(lab)[t] > 0;
  SEXP ans = PROTECT(Rf_allocVector(REALSXP, 3));
  sbg_status st = sbg_cosnet_learn(REAL(x), REAL(y), l, (int64_t)m, REAL(ans), REAL(ans) + 1,
                                   REAL(ans) + 2);
  if (st != SBG_OK) {
    UNPROTECT(1);
    sbg_stop(st, "out of memory while learning");
  }
  UNPROTECT(1);
  return ans;
}

/* Checks a dgCMatrix for parCosnet() without copying it (R/cosnet-io.R):
 * returns c(code, column) where code is 0 fine, 1 NA or infinite weight,
 * 2 negative weight, 3 non-zero diagonal, 4 not symmetric, 5 symmetric up
 * to rounding (|a - b| <= tol * max(|a|, |b|)), 6 stored zeros; the first
 * problem found wins except 5 and 6, which are reported only when nothing
 * worse is.  Row indices within a column are sorted (dgCMatrix validity). */
SEXP ffi_cosnet_check(SEXP p, SEXP i, SEXP x, SEXP tol) {
  SBG_ASSERT(TYPEOF(p) == INTSXP && TYPEOF(i) == INTSXP && TYPEOF(x) == REALSXP);
  SBG_ASSERT(TYPEOF(tol) == REALSXP && XLENGTH(i) == XLENGTH(x) && XLENGTH(p) >= 1);
  const int *cp = INTEGER(p), *ci = INTEGER(i);
  const double *cx = REAL(x);
  double t = REAL(tol)[0];
  int n = (int)(XLENGTH(p) - 1), code = 0, where = 0, soft = 0, soft_at = 0;
  for (int j = 0; j < n && code == 0; j++) {
    for (int k = cp[j]; k < cp[j + 1]; k++) {
      double a = cx[k];
      int r = ci[k];
      if (ISNAN(a) || !R_FINITE(a)) { code = 1; where = j + 1; break; }
      if (a < 0) { code = 2; where = j + 1; break; }
      if (r == j) {
        if (a != 0) { code = 3; where = j + 1; break; }
        continue;
      }
      if (a == 0 && soft == 0) { soft = 6; soft_at = j + 1; }
      /* the mirror entry (j, r) lives in column r */
      int lo = cp[r], hi = cp[r + 1] - 1, found = -1;
      while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (ci[mid] == j) { found = mid; break; }
        if (ci[mid] < j) lo = mid + 1; else hi = mid - 1;
      }
      if (found < 0) {
        if (a != 0) { code = 4; where = j + 1; break; }
        continue;
      }
      double b = cx[found];
      if (a != b) {
        double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
        if (fabs(a - b) > t * m) { code = 4; where = j + 1; break; }
        if (soft != 5) { soft = 5; soft_at = j + 1; }
      }
    }
  }
  SEXP ans = PROTECT(Rf_allocVector(INTSXP, 2));
  INTEGER(ans)[0] = code ? code : soft;
  INTEGER(ans)[1] = code ? where : soft_at;
  UNPROTECT(1);
  return ans;
}
