/* .Call glue of rapidGSEA() (ffi_gsea_run) and gseaStats()
 * (ffi_gsea_stats): R vectors in, engine structs, R list out.  R has
 * validated the arguments; this checks only what memory safety needs. */
#include <stdint.h>
#include <string.h>

#include "glue.h"
#include "gsea.h"

/* phase 0 runs everything; 1 and 2 run one BPPARAM worker's share of
 * permutations range = c(lo, hi) (see sbg_gsea_params), phase 2 given
 * norm = list(mpos, mneg, opos, oneg) from ffi_gsea_combine1; their
 * results are the list's 11th element. */
SEXP ffi_gsea_run(SEXP expr, SEXP labels, SEXP ranking, SEXP set_start, SEXP set_genes,
                  SEXP metric, SEXP weight, SEXP gene_perm, SEXP seed, SEXP nperm,
                  SEXP batch, SEXP cache, SEXP phase, SEXP range, SEXP norm, SEXP keep_null,
                  SEXP gpu, SEXP threads, SEXP device, SEXP verbose) {
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
  SBG_ASSERT(TYPEOF(phase) == INTSXP && XLENGTH(phase) == 1 && TYPEOF(range) == REALSXP && XLENGTH(range) == 2);
  p.phase = INTEGER(phase)[0];
  p.perm_lo = (int64_t)REAL(range)[0];
  p.perm_hi = (int64_t)REAL(range)[1];
  SBG_ASSERT(p.phase >= 0 && p.phase <= 2);
  SBG_ASSERT(p.phase == 0 || (p.perm_lo >= 1 && p.perm_hi > p.perm_lo && p.perm_hi <= p.nperm + 1));
  sbg_gsea_norm nm;
  p.norm = NULL;
  if (p.phase == 2) {
    SBG_ASSERT(TYPEOF(norm) == VECSXP && XLENGTH(norm) == 4);
    for (int i = 0; i < 4; i++) SBG_ASSERT(TYPEOF(VECTOR_ELT(norm, i)) == REALSXP);
    SBG_ASSERT(XLENGTH(VECTOR_ELT(norm, 0)) == XLENGTH(set_start) - 1 && XLENGTH(VECTOR_ELT(norm, 1)) == XLENGTH(set_start) - 1);
    nm.mpos = REAL(VECTOR_ELT(norm, 0));
    nm.mneg = REAL(VECTOR_ELT(norm, 1));
    nm.opos = REAL(VECTOR_ELT(norm, 2));
    nm.oneg = REAL(VECTOR_ELT(norm, 3));
    nm.kp = (int32_t)XLENGTH(VECTOR_ELT(norm, 2));
    nm.kn = (int32_t)XLENGTH(VECTOR_ELT(norm, 3));
    SBG_ASSERT(nm.kp < XLENGTH(set_start) && nm.kn < XLENGTH(set_start));
    p.norm = &nm;
  }
  SBG_ASSERT(p.nperm >= 1 && p.metric >= 0 && p.metric <= 4 && p.weight >= 0);
  SBG_ASSERT(in.expr || p.gene_perm);

  int32_t G = in.n_genes, S = in.n_sets;
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 11)); nprot++;
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
  out.sum_pos = out.sum_neg = NULL;
  out.n_pos = out.n_neg = out.n_ext = NULL;
  out.hp = out.hn = NULL;
  out.pmax = out.pmin = NULL;
  out.valid_pos = out.valid_neg = 0;
  SEXP part = R_NilValue;
  if (p.phase == 1) { /* sums as raw bytes: exact 128-bit integers */
    part = Rf_allocVector(VECSXP, 5);
    SET_VECTOR_ELT(ans, 10, part);
    SET_VECTOR_ELT(part, 0, Rf_allocVector(RAWSXP, (R_xlen_t)S * sizeof(gsea_acc)));
    SET_VECTOR_ELT(part, 1, Rf_allocVector(RAWSXP, (R_xlen_t)S * sizeof(gsea_acc)));
    for (int i = 2; i < 5; i++) SET_VECTOR_ELT(part, i, Rf_allocVector(RAWSXP, (R_xlen_t)S * sizeof(int64_t)));
    out.sum_pos = (gsea_acc *)RAW(VECTOR_ELT(part, 0));
    out.sum_neg = (gsea_acc *)RAW(VECTOR_ELT(part, 1));
    out.n_pos = (int64_t *)RAW(VECTOR_ELT(part, 2));
    out.n_neg = (int64_t *)RAW(VECTOR_ELT(part, 3));
    out.n_ext = (int64_t *)RAW(VECTOR_ELT(part, 4));
  } else if (p.phase == 2) {
    R_xlen_t n = (R_xlen_t)(p.perm_hi - p.perm_lo);
    part = Rf_allocVector(VECSXP, 5);
    SET_VECTOR_ELT(ans, 10, part);
    SET_VECTOR_ELT(part, 0, Rf_allocVector(RAWSXP, ((R_xlen_t)nm.kp + 1) * sizeof(uint64_t)));
    SET_VECTOR_ELT(part, 1, Rf_allocVector(RAWSXP, ((R_xlen_t)nm.kn + 1) * sizeof(uint64_t)));
    SET_VECTOR_ELT(part, 2, Rf_allocVector(REALSXP, 2));
    SET_VECTOR_ELT(part, 3, Rf_allocVector(REALSXP, n));
    SET_VECTOR_ELT(part, 4, Rf_allocVector(REALSXP, n));
    out.hp = (uint64_t *)RAW(VECTOR_ELT(part, 0));
    out.hn = (uint64_t *)RAW(VECTOR_ELT(part, 1));
    out.pmax = REAL(VECTOR_ELT(part, 3));
    out.pmin = REAL(VECTOR_ELT(part, 4));
  }

  sbg_ctx ctx;
  sbg_progress pr;
  SEXP first_dev = PROTECT(Rf_ScalarInteger(INTEGER(device)[0])); nprot++;
  sbg_ctx_init(&ctx, &pr, threads, first_dev, verbose, "rapidGSEA");
  sbg_status st = sbg_gsea_run(&in, &p, &out, LOGICAL(gpu)[0] == TRUE, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  for (int i = 0; i < 3; i++) REAL(v_sec)[i] = out.seconds[i];
  if (p.phase == 2) { /* counts of permutations: below 2^53, exact in a double */
    REAL(VECTOR_ELT(part, 2))[0] = (double)out.valid_pos;
    REAL(VECTOR_ELT(part, 2))[1] = (double)out.valid_neg;
  }
  UNPROTECT(nprot);
  return ans;
}

/* BPPARAM: the workers' phase-1 parts (list of lists from ffi_gsea_run)
 * merged into list(nes, pval, norm = list(mpos, mneg, opos, oneg)). */
SEXP ffi_gsea_combine1(SEXP es, SEXP nperm, SEXP parts, SEXP plus1) {
  SBG_ASSERT(TYPEOF(es) == REALSXP && TYPEOF(nperm) == REALSXP && TYPEOF(parts) == VECSXP);
  int32_t S = (int32_t)XLENGTH(es);
  int np = (int)XLENGTH(parts);
  SBG_ASSERT(np >= 1 && np <= 1024);
  const gsea_acc *sp[1024], *sn[1024];
  const int64_t *cp[1024], *cn[1024], *ce[1024];
  for (int i = 0; i < np; i++) {
    SEXP q = VECTOR_ELT(parts, i);
    SBG_ASSERT(TYPEOF(q) == VECSXP && XLENGTH(q) == 5);
    for (int k = 0; k < 5; k++) {
      SBG_ASSERT(TYPEOF(VECTOR_ELT(q, k)) == RAWSXP);
      SBG_ASSERT(XLENGTH(VECTOR_ELT(q, k)) == (R_xlen_t)S * (k < 2 ? (R_xlen_t)sizeof(gsea_acc) : (R_xlen_t)sizeof(int64_t)));
    }
    sp[i] = (const gsea_acc *)RAW(VECTOR_ELT(q, 0));
    sn[i] = (const gsea_acc *)RAW(VECTOR_ELT(q, 1));
    cp[i] = (const int64_t *)RAW(VECTOR_ELT(q, 2));
    cn[i] = (const int64_t *)RAW(VECTOR_ELT(q, 3));
    ce[i] = (const int64_t *)RAW(VECTOR_ELT(q, 4));
  }
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 3));
  SEXP v_nes = Rf_allocVector(REALSXP, S); SET_VECTOR_ELT(ans, 0, v_nes);
  SEXP v_p = Rf_allocVector(REALSXP, S);   SET_VECTOR_ELT(ans, 1, v_p);
  SEXP nm = Rf_allocVector(VECSXP, 4);     SET_VECTOR_ELT(ans, 2, nm);
  for (int k = 0; k < 4; k++) SET_VECTOR_ELT(nm, k, Rf_allocVector(REALSXP, S));
  int32_t kp = 0, kn = 0;
  SEXP dev = PROTECT(Rf_ScalarInteger(0)), thr = PROTECT(Rf_ScalarInteger(1)), verbose = PROTECT(Rf_ScalarLogical(FALSE));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, thr, dev, verbose, "rapidGSEA");
  sbg_status st = sbg_gsea_combine1(S, (int64_t)REAL(nperm)[0], REAL(es), np, sp, sn, cp, cn, ce,
                                    Rf_asLogical(plus1) == TRUE, REAL(v_nes),
                                    REAL(v_p), REAL(VECTOR_ELT(nm, 0)), REAL(VECTOR_ELT(nm, 1)),
                                    REAL(VECTOR_ELT(nm, 2)), REAL(VECTOR_ELT(nm, 3)), &kp, &kn, &ctx);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  SET_VECTOR_ELT(nm, 2, Rf_xlengthgets(VECTOR_ELT(nm, 2), kp));
  SET_VECTOR_ELT(nm, 3, Rf_xlengthgets(VECTOR_ELT(nm, 3), kn));
  UNPROTECT(4);
  return ans;
}

/* BPPARAM: the workers' phase-2 parts (in permutation order) merged into
 * list(fdr, fwer). */
SEXP ffi_gsea_combine2(SEXP nes, SEXP nperm, SEXP norm, SEXP parts) {
  SBG_ASSERT(TYPEOF(nes) == REALSXP && TYPEOF(nperm) == REALSXP && TYPEOF(norm) == VECSXP && XLENGTH(norm) == 4);
  SBG_ASSERT(TYPEOF(parts) == VECSXP);
  int32_t S = (int32_t)XLENGTH(nes);
  int64_t N = (int64_t)REAL(nperm)[0];
  int np = (int)XLENGTH(parts);
  SBG_ASSERT(np >= 1 && np <= 1024);
  int32_t kp = (int32_t)XLENGTH(VECTOR_ELT(norm, 2)), kn = (int32_t)XLENGTH(VECTOR_ELT(norm, 3));
  const uint64_t *hp[1024], *hn[1024];
  double vp = 0, vn = 0;
  int64_t total = 0;
  for (int i = 0; i < np; i++) {
    SEXP q = VECTOR_ELT(parts, i);
    SBG_ASSERT(TYPEOF(q) == VECSXP && XLENGTH(q) == 5);
    SBG_ASSERT(TYPEOF(VECTOR_ELT(q, 0)) == RAWSXP && XLENGTH(VECTOR_ELT(q, 0)) == ((R_xlen_t)kp + 1) * 8);
    SBG_ASSERT(TYPEOF(VECTOR_ELT(q, 1)) == RAWSXP && XLENGTH(VECTOR_ELT(q, 1)) == ((R_xlen_t)kn + 1) * 8);
    SBG_ASSERT(TYPEOF(VECTOR_ELT(q, 2)) == REALSXP && TYPEOF(VECTOR_ELT(q, 3)) == REALSXP &&
               TYPEOF(VECTOR_ELT(q, 4)) == REALSXP && XLENGTH(VECTOR_ELT(q, 3)) == XLENGTH(VECTOR_ELT(q, 4)));
    hp[i] = (const uint64_t *)RAW(VECTOR_ELT(q, 0));
    hn[i] = (const uint64_t *)RAW(VECTOR_ELT(q, 1));
    vp += REAL(VECTOR_ELT(q, 2))[0];
    vn += REAL(VECTOR_ELT(q, 2))[1];
    total += XLENGTH(VECTOR_ELT(q, 3));
  }
  SBG_ASSERT(total == N);
  SEXP ext = PROTECT(Rf_allocVector(REALSXP, 2 * (R_xlen_t)N));
  double *pmax = REAL(ext), *pmin = REAL(ext) + N;
  R_xlen_t at = 0;
  for (int i = 0; i < np; i++) { /* parts in permutation order */
    SEXP q = VECTOR_ELT(parts, i);
    R_xlen_t n = XLENGTH(VECTOR_ELT(q, 3));
    memcpy(pmax + at, REAL(VECTOR_ELT(q, 3)), (size_t)n * sizeof(double));
    memcpy(pmin + at, REAL(VECTOR_ELT(q, 4)), (size_t)n * sizeof(double));
    at += n;
  }
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 2));
  SEXP v_fdr = Rf_allocVector(REALSXP, S); SET_VECTOR_ELT(ans, 0, v_fdr);
  SEXP v_fwer = Rf_allocVector(REALSXP, S); SET_VECTOR_ELT(ans, 1, v_fwer);
  SEXP dev = PROTECT(Rf_ScalarInteger(0)), thr = PROTECT(Rf_ScalarInteger(1)), verbose = PROTECT(Rf_ScalarLogical(FALSE));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, thr, dev, verbose, "rapidGSEA");
  sbg_status st = sbg_gsea_combine2(S, N, REAL(nes), REAL(VECTOR_ELT(norm, 2)), kp, REAL(VECTOR_ELT(norm, 3)), kn,
                                    np, hp, hn, (int64_t)vp, (int64_t)vn, pmax, pmin, REAL(v_fdr),
                                    REAL(v_fwer), &ctx);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(5);
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
