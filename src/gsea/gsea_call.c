/* .Call glue of rapidGSEA() (ffi_gsea_run) and gseaStats()
 * (ffi_gsea_stats): R vectors in, engine structs, R list out.  R has
 * validated the arguments; this checks only what memory safety needs. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"
#include "gsea.h"

/* data = list(expr, labels, ranking, start, index): an expression matrix
 * with 0/1 labels, or (expr NULL) a ranking; the sets as offsets into
 * their genes' indices. */
static void input_decode(SEXP data, sbg_gsea_input *in) {
  SEXP set_start = sbg_vec_elt(data, "start", INTSXP, -1), set_genes = sbg_vec_elt(data, "index", INTSXP, -1);
  SEXP expr = sbg_elt(data, "expr");
  SBG_ASSERT(XLENGTH(set_start) >= 2);
  in->n_sets = (int32_t)(XLENGTH(set_start) - 1);
  in->set_start = INTEGER(set_start);
  in->set_genes = INTEGER(set_genes);
  SBG_ASSERT(in->set_start[0] == 0 && in->set_start[in->n_sets] == XLENGTH(set_genes));
  for (int32_t s = 0; s < in->n_sets; s++) SBG_ASSERT(in->set_start[s] <= in->set_start[s + 1]);
  if (!Rf_isNull(expr)) {
    SBG_ASSERT(TYPEOF(expr) == REALSXP && Rf_isMatrix(expr));
    in->n_genes = Rf_nrows(expr);
    in->n_samples = Rf_ncols(expr);
    SEXP labels = sbg_vec_elt(data, "labels", INTSXP, in->n_samples);
    for (int32_t i = 0; i < in->n_samples; i++) SBG_ASSERT(INTEGER(labels)[i] == 0 || INTEGER(labels)[i] == 1);
    in->expr = REAL_RO(expr); /* (REAL() would copy an ALTREP wrapper: 0.15 s for 20,639 x 200) */
    in->labels = INTEGER(labels);
    in->ranking = NULL;
  } else {
    SEXP ranking = sbg_vec_elt(data, "ranking", REALSXP, -1);
    in->n_genes = (int32_t)XLENGTH(ranking);
    in->n_samples = 0;
    in->expr = NULL;
    in->labels = NULL;
    in->ranking = REAL_RO(ranking);
  }
}

/* norm = list(mpos, mneg, opos, oneg) from ffi_gsea_combine1. */
static void norm_decode(SEXP norm, int32_t S, sbg_gsea_norm *nm) {
  nm->mpos = REAL(sbg_vec_elt(norm, "mpos", REALSXP, S));
  nm->mneg = REAL(sbg_vec_elt(norm, "mneg", REALSXP, S));
  SEXP opos = sbg_vec_elt(norm, "opos", REALSXP, -1), oneg = sbg_vec_elt(norm, "oneg", REALSXP, -1);
  nm->opos = REAL(opos);
  nm->oneg = REAL(oneg);
  nm->kp = (int32_t)XLENGTH(opos);
  nm->kn = (int32_t)XLENGTH(oneg);
  SBG_ASSERT(nm->kp <= S && nm->kn <= S);
}

/* params = list(metric, weight, gene, seed, nperm, batch, cache, keepNull,
 * phase, range, norm): phase 0 runs everything; 1 and 2 run one BPPARAM
 * worker's share of permutations range = c(lo, hi) (see sbg_gsea_params),
 * phase 2 given norm; the run's devices (ctx) share the permutations. */
static void params_decode(SEXP params, const sbg_run *r, int32_t S, sbg_gsea_norm *nm, sbg_gsea_params *p) {
  p->metric = sbg_int_elt(params, "metric");
  p->weight = sbg_real_elt(params, "weight");
  p->gene_perm = sbg_lgl_elt(params, "gene");
  p->seed = (uint64_t)sbg_real_elt(params, "seed");
  p->nperm = (int64_t)sbg_real_elt(params, "nperm");
  p->batch = (int64_t)sbg_real_elt(params, "batch");
  p->cache_max = (int64_t)sbg_real_elt(params, "cache");
  {
    SEXP walk = sbg_elt_or_null(params, "walk"); /* (rapidGSEA's phenotype and gene permutations) */
    p->walk_min = walk == NULL ? -1 : (int64_t)sbg_real_elt(params, "walk");
  }
  SBG_ASSERT(r->n_devices <= SBG_GSEA_MAX_DEVICES);
  SEXP range = sbg_vec_elt(params, "range", REALSXP, 2);
  p->phase = sbg_int_elt(params, "phase");
  p->perm_lo = (int64_t)REAL(range)[0];
  p->perm_hi = (int64_t)REAL(range)[1];
  SBG_ASSERT(p->phase >= 0 && p->phase <= 2);
  SBG_ASSERT(p->phase == 0 || (p->perm_lo >= 1 && p->perm_hi > p->perm_lo && p->perm_hi <= p->nperm + 1));
  p->norm = NULL;
  if (p->phase == 2) {
    norm_decode(sbg_elt(params, "norm"), S, nm);
    p->norm = nm;
  }
  SBG_ASSERT(p->nperm >= 1 && p->metric >= 0 && p->metric <= 4 && p->weight >= 0);
}

static const char *const part1_names[] = {"sumPos", "sumNeg", "nPos", "nNeg", "nExt"};
static const char *const part2_names[] = {"hp", "hn", "valid", "pmax", "pmin"};

/* A worker's share (phase 1: exact sums as raw bytes, 128-bit integers;
 * phase 2: bins, valid counts and extremes), pointed to by out. */
static SEXP part_alloc(const sbg_gsea_params *p, int32_t S, sbg_gsea_result *out) {
  SEXP part;
  if (p->phase == 1) {
    part = PROTECT(sbg_named_list(5, part1_names));
    R_xlen_t acc = (R_xlen_t)S * sizeof(gsea_acc), cnt = (R_xlen_t)S * sizeof(int64_t);
    out->sum_pos = (gsea_acc *)RAW(sbg_set(part, "sumPos", Rf_allocVector(RAWSXP, acc)));
    out->sum_neg = (gsea_acc *)RAW(sbg_set(part, "sumNeg", Rf_allocVector(RAWSXP, acc)));
    out->n_pos = (int64_t *)RAW(sbg_set(part, "nPos", Rf_allocVector(RAWSXP, cnt)));
    out->n_neg = (int64_t *)RAW(sbg_set(part, "nNeg", Rf_allocVector(RAWSXP, cnt)));
    out->n_ext = (int64_t *)RAW(sbg_set(part, "nExt", Rf_allocVector(RAWSXP, cnt)));
  } else {
    R_xlen_t n = (R_xlen_t)(p->perm_hi - p->perm_lo);
    part = PROTECT(sbg_named_list(5, part2_names));
    out->hp = (uint64_t *)RAW(sbg_set(part, "hp", Rf_allocVector(RAWSXP, ((R_xlen_t)p->norm->kp + 1) * 8)));
    out->hn = (uint64_t *)RAW(sbg_set(part, "hn", Rf_allocVector(RAWSXP, ((R_xlen_t)p->norm->kn + 1) * 8)));
    sbg_set(part, "valid", Rf_allocVector(REALSXP, 2));
    out->pmax = REAL(sbg_set(part, "pmax", Rf_allocVector(REALSXP, n)));
    out->pmin = REAL(sbg_set(part, "pmin", Rf_allocVector(REALSXP, n)));
  }
  UNPROTECT(1);
  return part;
}

static const char *const run_names[] = {"metric", "order", "es", "nes", "pval", "fdr", "fwer", "pos",
                                        "null", "seconds", "part", "sequential"};

/* The result list (null: S x nperm with keepNull), its vectors the
 * engine's output. */
static SEXP result_alloc(const sbg_gsea_input *in, const sbg_gsea_params *p, int keep_null,
                         sbg_gsea_result *out) {
  int32_t G = in->n_genes, S = in->n_sets;
  SEXP ans = PROTECT(sbg_named_list(12, run_names));
  memset(out, 0, sizeof(*out));
  out->metric = REAL(sbg_set(ans, "metric", Rf_allocVector(REALSXP, G)));
  out->order = INTEGER(sbg_set(ans, "order", Rf_allocVector(INTSXP, G)));
  double **cols[] = {&out->es, &out->nes, &out->pval, &out->fdr, &out->fwer};
  for (int j = 0; j < 5; j++) *cols[j] = REAL(sbg_set(ans, run_names[2 + j], Rf_allocVector(REALSXP, S)));
  out->rank_at_max = INTEGER(sbg_set(ans, "pos", Rf_allocVector(INTSXP, S)));
  if (keep_null) out->null_es = REAL(sbg_set(ans, "null", Rf_allocMatrix(REALSXP, S, (int)p->nperm)));
  sbg_set(ans, "seconds", Rf_allocVector(REALSXP, 3));
  REAL(sbg_set(ans, "sequential", Rf_allocVector(REALSXP, 1)))[0] = 0; /* preranked runs: none */
  if (p->phase != 0) sbg_set(ans, "part", part_alloc(p, S, out));
  UNPROTECT(1);
  return ans;
}

/* rapidGSEA's engine call: data, params and run as above; a named list. */
SEXP ffi_gsea_run(SEXP data, SEXP params, SEXP run) {
  sbg_gsea_input in;
  sbg_gsea_params p;
  sbg_gsea_norm nm;
  sbg_run r;
  sbg_run_decode(run, &r);
  input_decode(data, &in);
  params_decode(params, &r, in.n_sets, &nm, &p);
  SBG_ASSERT(in.expr || p.gene_perm);
  sbg_gsea_result out;
  SEXP ans = PROTECT(result_alloc(&in, &p, sbg_lgl_elt(params, "keepNull"), &out));

  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_from_run(&ctx, &pr, &r, "rapidGSEA");
  sbg_status st = sbg_gsea_run(&in, &p, &out, r.gpu, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  memcpy(REAL(sbg_elt(ans, "seconds")), out.seconds, 3 * sizeof(double));
  REAL(sbg_elt(ans, "sequential"))[0] = (double)out.n_sequential; /* below 2^53: exact */
  if (p.phase == 2) { /* counts of permutations: below 2^53, exact in a double */
    double *valid = REAL(sbg_elt(sbg_elt(ans, "part"), "valid"));
    valid[0] = (double)out.valid_pos;
    valid[1] = (double)out.valid_neg;
  }
  UNPROTECT(1);
  return ans;
}

/* What rapidGSEA(stats = <matrix>) checks of each column before a run
 * (gsea_signatures(), R/gsea-multisig.R), in one pass over the matrix
 * instead of R's vector operations a column: a 6 x columns matrix whose
 * rows are the column's non-finite values, its nonzero values below
 * DBL_MIN in magnitude, whether every value equals the first (1 or 0),
 * the largest magnitude, the smallest nonzero magnitude (Inf when none)
 * and the values equal to an earlier one (sum(duplicated(x)): -0 equals
 * 0).  The facts other than the first are those of the finite values. */
SEXP ffi_gsea_scan_columns(SEXP m) {
  SBG_ASSERT(TYPEOF(m) == REALSXP && Rf_isMatrix(m));
  int32_t n = Rf_nrows(m), q = Rf_ncols(m);
  SBG_ASSERT(n >= 1 && n < (1 << 30));
  SEXP ans = PROTECT(Rf_allocMatrix(REALSXP, 6, q));
  /* ties: open addressing on the value's bits, at most half full */
  int lg = 4;
  while (((size_t)1 << lg) < 2 * (size_t)n) lg++;
  size_t cap = (size_t)1 << lg;
  int32_t *slot = (int32_t *)R_alloc(cap, sizeof(int32_t));
  for (int32_t j = 0; j < q; j++) {
    const double *x = REAL_RO(m) + (size_t)j * (size_t)n;
    double nonfinite = 0, tiny = 0, maxabs = 0, minnz = R_PosInf, ties = 0, constant = 1;
    memset(slot, 0xff, cap * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
      double v = x[i], a = fabs(v);
      if (!R_FINITE(v)) {
        nonfinite++;
        continue;
      }
      if (v != x[0]) constant = 0;
      if (a > maxabs) maxabs = a;
      if (a != 0 && a < minnz) minnz = a;
      if (a != 0 && a < DBL_MIN) tiny++;
      double key = v == 0 ? 0.0 : v;
      uint64_t b;
      memcpy(&b, &key, sizeof b);
      b ^= b >> 32;
      size_t h = (size_t)((b * 0x9E3779B97F4A7C15ull) >> (64 - lg));
      while (slot[h] >= 0 && x[slot[h]] != v) h = (h + 1) & (cap - 1);
      if (slot[h] >= 0) ties++;
      else slot[h] = i;
    }
    double *o = REAL(ans) + (size_t)j * 6;
    o[0] = nonfinite;
    o[1] = tiny;
    o[2] = constant;
    o[3] = maxabs;
    o[4] = minnz;
    o[5] = ties;
  }
  UNPROTECT(1);
  return ans;
}

/* What gsea_data() (R/rapidGSEA.R) and gsea_check_numbers()
 * (R/gsea-inputs.R) need of an expression matrix, in one pass (R's vector
 * operations over it were most of the time a call spent outside the
 * engine): for each of the two floors, the values that are nonzero and
 * below it in magnitude and the first of them (column by column; 0 when
 * none); the largest magnitude, the smallest value, the rows that are not
 * constant, and the values that are not finite (the others are
 * meaningful only without these). */
SEXP ffi_gsea_scan_matrix(SEXP m, SEXP floor_) {
  SBG_ASSERT(TYPEOF(m) == REALSXP && Rf_isMatrix(m) && TYPEOF(floor_) == REALSXP && XLENGTH(floor_) == 2);
  const size_t n = (size_t)Rf_nrows(m), q = (size_t)Rf_ncols(m);
  SBG_ASSERT(n >= 1 && q >= 1);
  const double f1 = REAL(floor_)[0], f2 = REAL(floor_)[1], *x = REAL_RO(m);
  const double hi = f1 > f2 ? f1 : f2;
  double tiny1 = 0, first1 = 0, tiny2 = 0, first2 = 0, top = 0, lo = x[0], varying = 0, bad = 0;
  for (size_t j = 0; j < q; j++) {
    const double *c = x + j * n;
    for (size_t i = 0; i < n; i++) {
      double v = c[i], a = fabs(v);
      if (a > top) top = a;
      if (v < lo) lo = v;
      bad += !(a <= DBL_MAX); /* NaN, NA or infinite */
      if (v != 0 && a < hi) { /* rare: the two floors apart */
        if (a < f1 && tiny1++ == 0) first1 = v;
        if (a < f2 && tiny2++ == 0) first2 = v;
      }
    }
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = 1; j < q; j++)
      if (x[j * n + i] != x[i]) {
        varying++;
        break;
      }
  const double out[] = {tiny1, first1, tiny2, first2, top, lo, varying, bad};
  SEXP ans = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)(sizeof out / sizeof out[0])));
  memcpy(REAL(ans), out, sizeof out);
  UNPROTECT(1);
  return ans;
}

/* Many preranked signatures in one engine call: data = list(ranking,
 * start, index): ranking a genes x signatures matrix (one gene universe)
 * or a list with one metric vector a signature; start and index lists
 * with one element a signature (its sets as for ffi_gsea_run); params and
 * run as for ffi_gsea_run (phase 0, no kept table).  A list of the
 * signatures' result lists, each as ffi_gsea_run's. */
SEXP ffi_gsea_multi(SEXP data, SEXP params, SEXP run) {
  SEXP rankings = sbg_elt(data, "ranking");
  const int by_column = TYPEOF(rankings) == REALSXP;
  SBG_ASSERT(by_column ? Rf_isMatrix(rankings) : TYPEOF(rankings) == VECSXP);
  R_xlen_t Q = by_column ? Rf_ncols(rankings) : XLENGTH(rankings);
  SEXP starts = sbg_vec_elt(data, "start", VECSXP, Q), indices = sbg_vec_elt(data, "index", VECSXP, Q);
  SBG_ASSERT(Q >= 1 && Q < INT32_MAX);
  sbg_gsea_input *in = (sbg_gsea_input *)R_alloc((size_t)Q, sizeof(sbg_gsea_input));
  sbg_gsea_result *out = (sbg_gsea_result *)R_alloc((size_t)Q, sizeof(sbg_gsea_result));
  for (R_xlen_t v = 0; v < Q; v++) {
    SEXP st = VECTOR_ELT(starts, v), ix = VECTOR_ELT(indices, v);
    R_xlen_t n = by_column ? Rf_nrows(rankings) : XLENGTH(VECTOR_ELT(rankings, v));
    SBG_ASSERT(by_column || TYPEOF(VECTOR_ELT(rankings, v)) == REALSXP);
    SBG_ASSERT(TYPEOF(st) == INTSXP && TYPEOF(ix) == INTSXP);
    SBG_ASSERT(n >= 2 && n < INT32_MAX && XLENGTH(st) >= 2);
    sbg_gsea_input *a = &in[v];
    memset(a, 0, sizeof *a);
    a->n_genes = (int32_t)n;
    a->ranking = by_column ? REAL_RO(rankings) + (size_t)v * (size_t)n : REAL_RO(VECTOR_ELT(rankings, v));
    a->n_sets = (int32_t)(XLENGTH(st) - 1);
    a->set_start = INTEGER(st);
    a->set_genes = INTEGER(ix);
    SBG_ASSERT(a->set_start[0] == 0 && a->set_start[a->n_sets] == XLENGTH(ix));
    for (int32_t s = 0; s < a->n_sets; s++) SBG_ASSERT(a->set_start[s] <= a->set_start[s + 1]);
  }
  sbg_gsea_params p;
  sbg_gsea_norm nm;
  sbg_run r;
  sbg_run_decode(run, &r);
  params_decode(params, &r, in[0].n_sets, &nm, &p);
  SBG_ASSERT(p.gene_perm && p.phase == 0 && !sbg_lgl_elt(params, "keepNull"));
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, Q));
  for (R_xlen_t v = 0; v < Q; v++) SET_VECTOR_ELT(ans, v, result_alloc(&in[v], &p, 0, &out[v]));

  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_from_run(&ctx, &pr, &r, "rapidGSEA");
  sbg_status st = sbg_gsea_multi_run(in, (int32_t)Q, &p, out, r.gpu, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  for (R_xlen_t v = 0; v < Q; v++)
    memcpy(REAL(sbg_elt(VECTOR_ELT(ans, v), "seconds")), out[v].seconds, 3 * sizeof(double));
  UNPROTECT(1);
  return ans;
}

/* A combine step's context: one thread, no device, no progress. */
static void quiet_ctx(sbg_ctx *ctx, sbg_progress *pr, int threads, const char *label) {
  static const int no_device = 0;
  sbg_ctx_setup(ctx, pr, threads, &no_device, 1, 0, label);
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
    R_xlen_t acc = (R_xlen_t)S * sizeof(gsea_acc), cnt = (R_xlen_t)S * sizeof(int64_t);
    sp[i] = (const gsea_acc *)RAW(sbg_vec_elt(q, "sumPos", RAWSXP, acc));
    sn[i] = (const gsea_acc *)RAW(sbg_vec_elt(q, "sumNeg", RAWSXP, acc));
    cp[i] = (const int64_t *)RAW(sbg_vec_elt(q, "nPos", RAWSXP, cnt));
    cn[i] = (const int64_t *)RAW(sbg_vec_elt(q, "nNeg", RAWSXP, cnt));
    ce[i] = (const int64_t *)RAW(sbg_vec_elt(q, "nExt", RAWSXP, cnt));
  }
  const char *names[] = {"nes", "pval", "norm"}, *norm_names[] = {"mpos", "mneg", "opos", "oneg"};
  SEXP ans = PROTECT(sbg_named_list(3, names));
  double *nes = REAL(sbg_set(ans, "nes", Rf_allocVector(REALSXP, S)));
  double *pval = REAL(sbg_set(ans, "pval", Rf_allocVector(REALSXP, S)));
  SEXP nm = sbg_set(ans, "norm", sbg_named_list(4, norm_names));
  double *v[4];
  for (int k = 0; k < 4; k++) v[k] = REAL(sbg_set(nm, norm_names[k], Rf_allocVector(REALSXP, S)));
  int32_t kp = 0, kn = 0;
  sbg_ctx ctx;
  sbg_progress pr;
  quiet_ctx(&ctx, &pr, 1, "rapidGSEA");
  sbg_status st = sbg_gsea_combine1(S, (int64_t)REAL(nperm)[0], REAL(es), np, sp, sn, cp, cn, ce,
                                    Rf_asLogical(plus1) == TRUE, nes, pval, v[0], v[1], v[2], v[3], &kp, &kn,
                                    &ctx);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  sbg_set(nm, "opos", Rf_xlengthgets(sbg_elt(nm, "opos"), kp));
  sbg_set(nm, "oneg", Rf_xlengthgets(sbg_elt(nm, "oneg"), kn));
  UNPROTECT(1);
  return ans;
}

/* BPPARAM: the workers' phase-2 parts (in permutation order) merged into
 * list(fdr, fwer). */
SEXP ffi_gsea_combine2(SEXP nes, SEXP nperm, SEXP norm, SEXP parts) {
  SBG_ASSERT(TYPEOF(nes) == REALSXP && TYPEOF(nperm) == REALSXP && TYPEOF(parts) == VECSXP);
  int32_t S = (int32_t)XLENGTH(nes);
  int64_t N = (int64_t)REAL(nperm)[0];
  int np = (int)XLENGTH(parts);
  SBG_ASSERT(np >= 1 && np <= 1024);
  sbg_gsea_norm nrm;
  norm_decode(norm, S, &nrm);
  int32_t kp = nrm.kp, kn = nrm.kn;
  const uint64_t *hp[1024], *hn[1024];
  double vp = 0, vn = 0;
  int64_t total = 0;
  for (int i = 0; i < np; i++) {
    SEXP q = VECTOR_ELT(parts, i);
    hp[i] = (const uint64_t *)RAW(sbg_vec_elt(q, "hp", RAWSXP, ((R_xlen_t)kp + 1) * 8));
    hn[i] = (const uint64_t *)RAW(sbg_vec_elt(q, "hn", RAWSXP, ((R_xlen_t)kn + 1) * 8));
    const double *valid = REAL(sbg_vec_elt(q, "valid", REALSXP, 2));
    R_xlen_t n = XLENGTH(sbg_vec_elt(q, "pmax", REALSXP, -1));
    SBG_ASSERT(XLENGTH(sbg_vec_elt(q, "pmin", REALSXP, -1)) == n);
    vp += valid[0];
    vn += valid[1];
    total += n;
  }
  SBG_ASSERT(total == N);
  SEXP ext = PROTECT(Rf_allocVector(REALSXP, 2 * (R_xlen_t)N));
  double *pmax = REAL(ext), *pmin = REAL(ext) + N;
  R_xlen_t at = 0;
  for (int i = 0; i < np; i++) { /* parts in permutation order */
    SEXP q = VECTOR_ELT(parts, i), qmax = sbg_elt(q, "pmax");
    R_xlen_t n = XLENGTH(qmax);
    memcpy(pmax + at, REAL(qmax), (size_t)n * sizeof(double));
    memcpy(pmin + at, REAL(sbg_elt(q, "pmin")), (size_t)n * sizeof(double));
    at += n;
  }
  const char *names[] = {"fdr", "fwer"};
  SEXP ans = PROTECT(sbg_named_list(2, names));
  double *fdr = REAL(sbg_set(ans, "fdr", Rf_allocVector(REALSXP, S)));
  double *fwer = REAL(sbg_set(ans, "fwer", Rf_allocVector(REALSXP, S)));
  sbg_ctx ctx;
  sbg_progress pr;
  quiet_ctx(&ctx, &pr, 1, "rapidGSEA");
  sbg_status st = sbg_gsea_combine2(S, N, REAL(nes), nrm.opos, kp, nrm.oneg, kn, np, hp, hn, (int64_t)vp,
                                    (int64_t)vn, pmax, pmin, fdr, fwer, &ctx);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(2);
  return ans;
}

SEXP ffi_gsea_stats(SEXP es, SEXP null_es, SEXP threads) {
  SBG_ASSERT(TYPEOF(es) == REALSXP && TYPEOF(null_es) == REALSXP && Rf_isMatrix(null_es));
  SBG_ASSERT(Rf_nrows(null_es) == XLENGTH(es) && Rf_ncols(null_es) >= 1);
  int32_t S = (int32_t)XLENGTH(es);
  int64_t N = Rf_ncols(null_es);
  SBG_ASSERT(TYPEOF(threads) == INTSXP && XLENGTH(threads) == 1);
  const char *names[] = {"nes", "pval", "fdr", "fwer"};
  SEXP ans = PROTECT(sbg_named_list(4, names));
  double *v[4];
  for (int k = 0; k < 4; k++) v[k] = REAL(sbg_set(ans, names[k], Rf_allocVector(REALSXP, S)));
  sbg_ctx ctx;
  sbg_progress pr;
  quiet_ctx(&ctx, &pr, INTEGER(threads)[0], "gseaStats");
  sbg_status st = sbg_gsea_stats_table(S, N, REAL(es), REAL(null_es), v[0], v[1], v[2], v[3], &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(1);
  return ans;
}

/* The sets' members as gene indices (gsea_sets() in R/rapidGSEA.R): hit,
 * each listed member's 1-based gene or NA, set after set (len: the
 * members each set lists); G genes.  list(k, index): each set's distinct
 * genes (k) and, set after set, those genes 0-based in ascending order.
 * A counting sort by gene, then by set: linear, where R's radix order of
 * the (set, gene) pairs and the vectors around it took most of the time
 * a call spent outside the engine. */
SEXP ffi_gsea_set_index(SEXP hit, SEXP len, SEXP G_) {
  SBG_ASSERT(TYPEOF(hit) == INTSXP && TYPEOF(len) == INTSXP && TYPEOF(G_) == INTSXP && XLENGTH(G_) == 1);
  const R_xlen_t M = XLENGTH(hit), S = XLENGTH(len);
  const int G = INTEGER(G_)[0], *h = INTEGER(hit), *ln = INTEGER(len);
  SBG_ASSERT(G >= 0 && M < INT_MAX);
  int *gstart = (int *)R_alloc((size_t)G + 2, sizeof(int)); /* gene -> sets listing it, in set order */
  int *gsets = (int *)R_alloc((size_t)M + 1, sizeof(int));
  int *sstart = (int *)R_alloc((size_t)S + 1, sizeof(int)); /* set -> its genes, gene order */
  int *sfill = (int *)R_alloc((size_t)S + 1, sizeof(int));
  int *sgenes = (int *)R_alloc((size_t)M + 1, sizeof(int));
  memset(gstart, 0, ((size_t)G + 2) * sizeof(int));
  R_xlen_t i = 0;
  sstart[0] = 0;
  for (R_xlen_t s = 0; s < S; s++) {
    SBG_ASSERT(ln[s] >= 0 && i + ln[s] <= M);
    int found = 0;
    for (int j = 0; j < ln[s]; j++, i++) {
      if (h[i] == NA_INTEGER) continue;
      SBG_ASSERT(h[i] >= 1 && h[i] <= G);
      gstart[h[i] + 1]++;
      found++;
    }
    sstart[s + 1] = sstart[s] + found;
  }
  SBG_ASSERT(i == M);
  for (int g = 0; g < G; g++) gstart[g + 2] += gstart[g + 1];
  i = 0;
  for (R_xlen_t s = 0; s < S; s++)
    for (int j = 0; j < ln[s]; j++, i++)
      if (h[i] != NA_INTEGER) gsets[gstart[h[i]]++] = (int)s; /* gstart[g + 1]: the end of 0-based gene g once filled */
  /* genes in ascending order into their sets; a set that lists a gene
   * twice has it twice in a row in the gene's list */
  memcpy(sfill, sstart, (size_t)S * sizeof(int));
  for (int g = 0, at = 0; g < G; g++) {
    int last = -1;
    for (; at < gstart[g + 1]; at++) {
      int s = gsets[at];
      if (s != last) sgenes[sfill[s]++] = g;
      last = s;
    }
  }
  SEXP k = PROTECT(Rf_allocVector(INTSXP, S));
  R_xlen_t n = 0;
  for (R_xlen_t s = 0; s < S; s++) n += INTEGER(k)[s] = sfill[s] - sstart[s];
  SEXP index = PROTECT(Rf_allocVector(INTSXP, n));
  int *ix = INTEGER(index);
  for (R_xlen_t s = 0; s < S; s++) {
    memcpy(ix, sgenes + sstart[s], (size_t)INTEGER(k)[s] * sizeof(int));
    ix += INTEGER(k)[s];
  }
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(out, 0, k);
  SET_VECTOR_ELT(out, 1, index);
  UNPROTECT(3);
  return out;
}

/* The leading edge of every set (rapidGSEA()'s leadingEdge column): its
 * members ranked at or before the ES's position (ES >= 0) or after it
 * (ES < 0), in rank order, as character vectors of genes.  order: the
 * genes by rank (0-based); start, index: the sets (0-based genes); es, pos:
 * each set's ES and its 0-based rank.  The genes are visited in rank order
 * through a gene -> sets index, so no set is sorted: a table of many
 * signatures does not spend its time ordering members. */
SEXP ffi_gsea_leading_edge(SEXP order, SEXP start, SEXP index, SEXP es, SEXP pos, SEXP genes) {
  SBG_ASSERT(TYPEOF(order) == INTSXP && TYPEOF(start) == INTSXP && TYPEOF(index) == INTSXP &&
             TYPEOF(es) == REALSXP && TYPEOF(pos) == INTSXP && TYPEOF(genes) == STRSXP);
  R_xlen_t G = XLENGTH(genes), S = XLENGTH(start) - 1, M = XLENGTH(index);
  SBG_ASSERT(XLENGTH(order) == G && S >= 0 && XLENGTH(es) == S && XLENGTH(pos) == S);
  const int *ord = INTEGER(order), *st = INTEGER(start), *ix = INTEGER(index), *ps = INTEGER(pos);
  const double *e = REAL(es);
  SBG_ASSERT(S == 0 || (st[0] == 0 && st[S] == M));
  int *rank_of = (int *)R_alloc((size_t)G + 1, sizeof(int));
  int *gstart = (int *)R_alloc((size_t)G + 2, sizeof(int)); /* gene -> sets (CSR) */
  int *gsets = (int *)R_alloc((size_t)M + 1, sizeof(int));
  int *cnt = (int *)R_alloc((size_t)S + 1, sizeof(int));
  SEXP *v = (SEXP *)R_alloc((size_t)S + 1, sizeof(SEXP));
  for (R_xlen_t r = 0; r < G; r++) {
    SBG_ASSERT(ord[r] >= 0 && ord[r] < G);
    rank_of[ord[r]] = (int)r;
  }
  memset(gstart, 0, ((size_t)G + 2) * sizeof(int));
  for (R_xlen_t s = 0; s < S; s++) {
    SBG_ASSERT(st[s] <= st[s + 1]);
    cnt[s] = 0;
    for (int i = st[s]; i < st[s + 1]; i++) {
      SBG_ASSERT(ix[i] >= 0 && ix[i] < G);
      int rk = rank_of[ix[i]];
      cnt[s] += e[s] >= 0 ? rk <= ps[s] : rk > ps[s];
      gstart[ix[i] + 2]++;
    }
  }
  for (R_xlen_t g = 0; g < G; g++) gstart[g + 2] += gstart[g + 1];
  for (R_xlen_t s = 0; s < S; s++)
    for (int i = st[s]; i < st[s + 1]; i++) gsets[gstart[ix[i] + 1]++] = (int)s; /* gstart[g + 1]: end of g */
  SEXP out = PROTECT(Rf_allocVector(VECSXP, S));
  for (R_xlen_t s = 0; s < S; s++) {
    v[s] = Rf_allocVector(STRSXP, cnt[s]);
    SET_VECTOR_ELT(out, s, v[s]);
    cnt[s] = 0;
  }
  for (R_xlen_t r = 0; r < G; r++) {
    int g = ord[r];
    for (int k = gstart[g]; k < gstart[g + 1]; k++) {
      int s = gsets[k];
      if (e[s] >= 0 ? r <= ps[s] : r > ps[s]) SET_STRING_ELT(v[s], cnt[s]++, STRING_ELT(genes, g));
    }
  }
  UNPROTECT(1);
  return out;
}
