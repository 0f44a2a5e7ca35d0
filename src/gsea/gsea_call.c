/* .Call glue of rapidGSEA() (ffi_gsea_run) and gseaStats()
 * (ffi_gsea_stats): R vectors in, engine structs, R list out.  R has
 * validated the arguments; this checks only what memory safety needs. */
#include <stdint.h>

#include "glue.h"
#include "gsea.h"

SEXP ffi_gsea_run(SEXP expr, SEXP labels, SEXP ranking, SEXP set_start, SEXP set_genes,
                  SEXP metric, SEXP weight, SEXP gene_perm, SEXP seed, SEXP nperm,
                  SEXP batch, SEXP cache, SEXP keep_null, SEXP gpu, SEXP threads, SEXP device,
                  SEXP verbose) {
  int nprot = 0;
  sbg_gsea_input in;
  sbg_gsea_params p;
  SBG_ASSERT(TYPEOF(set_start) == INTSXP && TYPEOF(set_genes) == INTSXP);
  SBG_ASSERT(XLENGTH(set_start) >= 2);
  SBG_ASSERT(TYPEOF(metric) == INTSXP && TYPEOF(weight) == REALSXP);
  SBG_ASSERT(TYPEOF(gene_perm) == LGLSXP && TYPEOF(keep_null) == LGLSXP && TYPEOF(gpu) == LGLSXP);
  SBG_ASSERT(TYPEOF(seed) == REALSXP && TYPEOF(nperm) == REALSXP && TYPEOF(batch) == REALSXP);
  SBG_ASSERT(TYPEOF(cache) == REALSXP && XLENGTH(cache) == 1);
  in.n_sets = (int32_t)(XLENGTH(set_start) - 1);
  in.set_start = INTEGER(set_start);
  in.set_genes = INTEGER(set_genes);
  SBG_ASSERT(in.set_start[0] == 0 && in.set_start[in.n_sets] == XLENGTH(set_genes));
  for (int32_t s = 0; s < in.n_sets; s++) SBG_ASSERT(in.set_start[s] <= in.set_start[s + 1]);
  if (!Rf_isNull(expr)) {
    SBG_ASSERT(TYPEOF(expr) == REALSXP && Rf_isMatrix(expr));
    SBG_ASSERT(TYPEOF(labels) == INTSXP);
    in.n_genes = Rf_nrows(expr);
    in.n_samples = Rf_ncols(expr);
    SBG_ASSERT(XLENGTH(labels) == in.n_samples);
    for (int32_t i = 0; i < in.n_samples; i++) SBG_ASSERT(INTEGER(labels)[i] == 0 || INTEGER(labels)[i] == 1);
    in.expr = REAL(expr);
    in.labels = INTEGER(labels);
    in.ranking = NULL;
  } else {
    SBG_ASSERT(TYPEOF(ranking) == REALSXP);
    in.n_genes = (int32_t)XLENGTH(ranking);
    in.n_samples = 0;
    in.expr = NULL;
    in.labels = NULL;
    in.ranking = REAL(ranking);
  }
  p.metric = INTEGER(metric)[0];
  p.weight = REAL(weight)[0];
  p.gene_perm = LOGICAL(gene_perm)[0] == TRUE;
  p.seed = (uint64_t)REAL(seed)[0];
  p.nperm = (int64_t)REAL(nperm)[0];
  p.batch = (int64_t)REAL(batch)[0];
  p.cache_max = (int64_t)REAL(cache)[0];
  /* device: one GPU index or several sharing the permutations */
  SBG_ASSERT(TYPEOF(device) == INTSXP && XLENGTH(device) >= 1 && XLENGTH(device) <= SBG_GSEA_MAX_DEVICES);
  p.devices = INTEGER(device);
  p.n_devices = (int32_t)XLENGTH(device);
  SBG_ASSERT(p.nperm >= 1 && p.metric >= 0 && p.metric <= 4 && p.weight >= 0);
  SBG_ASSERT(in.expr || p.gene_perm);

  int32_t G = in.n_genes, S = in.n_sets;
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 10)); nprot++;
  SEXP v_metric = Rf_allocVector(REALSXP, G); SET_VECTOR_ELT(ans, 0, v_metric);
  SEXP v_order = Rf_allocVector(INTSXP, G);   SET_VECTOR_ELT(ans, 1, v_order);
  SEXP v_es = Rf_allocVector(REALSXP, S);     SET_VECTOR_ELT(ans, 2, v_es);
  SEXP v_nes = Rf_allocVector(REALSXP, S);    SET_VECTOR_ELT(ans, 3, v_nes);
  SEXP v_p = Rf_allocVector(REALSXP, S);      SET_VECTOR_ELT(ans, 4, v_p);
  SEXP v_fdr = Rf_allocVector(REALSXP, S);    SET_VECTOR_ELT(ans, 5, v_fdr);
  SEXP v_fwer = Rf_allocVector(REALSXP, S);   SET_VECTOR_ELT(ans, 6, v_fwer);
  SEXP v_pos = Rf_allocVector(INTSXP, S);     SET_VECTOR_ELT(ans, 7, v_pos);
  SEXP v_null = R_NilValue;
  if (LOGICAL(keep_null)[0] == TRUE) {
    v_null = Rf_allocMatrix(REALSXP, S, (int)p.nperm);
    SET_VECTOR_ELT(ans, 8, v_null);
  }
  SEXP v_sec = Rf_allocVector(REALSXP, 3);    SET_VECTOR_ELT(ans, 9, v_sec);

  sbg_gsea_result out;
  out.metric = REAL(v_metric);
  out.order = INTEGER(v_order);
  out.es = REAL(v_es);
  out.nes = REAL(v_nes);
  out.pval = REAL(v_p);
  out.fdr = REAL(v_fdr);
  out.fwer = REAL(v_fwer);
  out.rank_at_max = INTEGER(v_pos);
  out.null_es = Rf_isNull(v_null) ? NULL : REAL(v_null);
  for (int i = 0; i < 3; i++) out.seconds[i] = 0;

  sbg_ctx ctx;
  sbg_progress pr;
  SEXP first_dev = PROTECT(Rf_ScalarInteger(INTEGER(device)[0])); nprot++;
  sbg_ctx_init(&ctx, &pr, threads, first_dev, verbose, "rapidGSEA");
  sbg_status st = sbg_gsea_run(&in, &p, &out, LOGICAL(gpu)[0] == TRUE, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  for (int i = 0; i < 3; i++) REAL(v_sec)[i] = out.seconds[i];
  UNPROTECT(nprot);
  return ans;
}

SEXP ffi_gsea_stats(SEXP es, SEXP null_es, SEXP threads) {
  SBG_ASSERT(TYPEOF(es) == REALSXP && TYPEOF(null_es) == REALSXP && Rf_isMatrix(null_es));
  SBG_ASSERT(Rf_nrows(null_es) == XLENGTH(es) && Rf_ncols(null_es) >= 1);
  int32_t S = (int32_t)XLENGTH(es);
  int64_t N = Rf_ncols(null_es);
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 4));
  SEXP v_nes = Rf_allocVector(REALSXP, S); SET_VECTOR_ELT(ans, 0, v_nes);
  SEXP v_p = Rf_allocVector(REALSXP, S);   SET_VECTOR_ELT(ans, 1, v_p);
  SEXP v_fdr = Rf_allocVector(REALSXP, S); SET_VECTOR_ELT(ans, 2, v_fdr);
  SEXP v_fwer = Rf_allocVector(REALSXP, S); SET_VECTOR_ELT(ans, 3, v_fwer);
  SEXP dev = PROTECT(Rf_ScalarInteger(0));
  SEXP verbose = PROTECT(Rf_ScalarLogical(FALSE));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, threads, dev, verbose, "gseaStats");
  sbg_status st = sbg_gsea_stats_table(S, N, REAL(es), REAL(null_es), REAL(v_nes), REAL(v_p),
                                       REAL(v_fdr), REAL(v_fwer), &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(3);
  return ans;
}
