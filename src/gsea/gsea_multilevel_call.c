/* .Call glue of the multilevel p-values of rapidGSEA(pvalue =
 * "multilevel") (R/rapidGSEA.R, gsea_multilevel()): three named lists in
 * (data, params, run: the run contract), the engine of
 * gsea_multilevel.c, a named list out.  R has validated every argument. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "glue.h"
#include "gsea_multilevel.h"

/* data = list(metric (double, rank order), weight, start (S + 1), pos
 * (0-based rank positions)); params = list(seed, sampleSize, nSign, moves, eps);
 * run = run_list() (threads, verbose, gpu, devices: the first moves the members).  Returns list(pval, log2err, es, levels). */
SEXP ffi_gsea_multilevel(SEXP data, SEXP params, SEXP run) {
  int nprot = 0;
  sbg_gsea_ml_input in;
  sbg_gsea_ml_params p;
  SEXP metric = sbg_vec_elt(data, "metric", REALSXP, -1), start = sbg_vec_elt(data, "start", INTSXP, -1);
  SEXP pos = sbg_vec_elt(data, "pos", INTSXP, -1);
  SBG_ASSERT(XLENGTH(metric) >= 2 && XLENGTH(metric) < INT32_MAX && XLENGTH(start) >= 2);
  in.n_genes = (int32_t)XLENGTH(metric);
  in.metric = REAL(metric);
  in.weight = sbg_real_elt(data, "weight");
  SBG_ASSERT(R_FINITE(in.weight));
  in.n_sets = (int32_t)(XLENGTH(start) - 1);
  in.set_start = INTEGER(start);
  in.set_pos = INTEGER(pos);
  SBG_ASSERT(in.set_start[0] == 0 && in.set_start[in.n_sets] == XLENGTH(pos));
  for (int32_t s = 0; s < in.n_sets; s++) {
    int32_t k = in.set_start[s + 1] - in.set_start[s];
    SBG_ASSERT(k >= 1 && k < in.n_genes);
  }
  for (R_xlen_t i = 0; i < XLENGTH(pos); i++) SBG_ASSERT(in.set_pos[i] >= 0 && in.set_pos[i] < in.n_genes);
  double seed = sbg_real_elt(params, "seed");
  SBG_ASSERT(seed >= 0 && seed < 18446744073709551616.0);
  p.seed = (uint64_t)seed;
  p.sample_size = sbg_int_elt(params, "sampleSize");
  SBG_ASSERT(p.sample_size >= 3 && p.sample_size % 2 == 1);
  p.n_sign = sbg_int_elt(params, "nSign");
  SBG_ASSERT(p.n_sign >= 1);
  p.moves = sbg_int_elt(params, "moves");
  SBG_ASSERT(p.moves >= 1);
  p.eps = sbg_real_elt(params, "eps");
  SBG_ASSERT(p.eps >= 0 && p.eps < 1);

  sbg_run rn;
  sbg_run_decode(run, &rn);
  p.gpu = rn.gpu;
  p.wave_bytes = sbg_real_elt(run, "waveBytes");
  SBG_ASSERT(p.wave_bytes >= 0 && p.wave_bytes < 1e18);
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_from_run(&ctx, &pr, &rn, "rapidGSEA multilevel p-values");

  const char *names[] = {"pval", "log2err", "es", "levels", ""};
  SEXP ans = PROTECT(Rf_mkNamed(VECSXP, names)); nprot++;
  SET_VECTOR_ELT(ans, 0, Rf_allocVector(REALSXP, in.n_sets));
  SET_VECTOR_ELT(ans, 1, Rf_allocVector(REALSXP, in.n_sets));
  SET_VECTOR_ELT(ans, 2, Rf_allocVector(REALSXP, in.n_sets));
  SET_VECTOR_ELT(ans, 3, Rf_allocVector(INTSXP, in.n_sets));
  sbg_gsea_ml_result out = {REAL(VECTOR_ELT(ans, 0)), REAL(VECTOR_ELT(ans, 1)), REAL(VECTOR_ELT(ans, 2)),
                            INTEGER(VECTOR_ELT(ans, 3))};
  sbg_status st = sbg_gsea_multilevel(&in, &p, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) {
    char msg[SBG_ERRBUF];
    memcpy(msg, ctx.errbuf, sizeof msg);
    UNPROTECT(nprot);
    sbg_stop(st, msg);
  }
  /* log2err NaN (a bound) reaches R as NA */
  double *e = REAL(VECTOR_ELT(ans, 1));
  for (int32_t s = 0; s < in.n_sets; s++)
    if (isnan(e[s])) e[s] = NA_REAL;
  UNPROTECT(nprot);
  return ans;
}
