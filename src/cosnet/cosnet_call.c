/* .Call glue of parCosnet() and cvParCosnet() (R/parCosnet.R): R vectors
 * to the engine structs of cosnet.h, the backend's engine, and the result
 * as an R list.  R has validated the arguments. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cosnet.h"
#include "glue.h"
#include "omp_compat.h"

/* p, i, x of a dgCMatrix as they reach C: users edit slots by hand, so
 * the structure is checked here too (a bad one would read out of bounds).
 * This part reads no entry: the types, length(p) = n + 1 >= 2, p[0] = 0,
 * p non-decreasing, p[n] = length(i) = length(x).  Stops with an input
 * error naming W. */
static void check_csc_slots(SEXP p, SEXP i, SEXP x) {
  if (TYPEOF(p) != INTSXP || TYPEOF(i) != INTSXP || TYPEOF(x) != REALSXP)
    sbg_stop(SBG_ERR_INPUT, "`W` is not a valid dgCMatrix (slots p, i, x of the wrong type)");
  char msg[200];
  R_xlen_t np = XLENGTH(p), nnz = XLENGTH(i);
  if (np < 2 || np - 1 > INT32_MAX) sbg_stop(SBG_ERR_INPUT, "`W` is not a valid dgCMatrix (slot p of length < 2)");
  if (XLENGTH(x) != nnz) {
    snprintf(msg, sizeof msg, "`W` is not a valid dgCMatrix: slot i has %.0f entries, slot x %.0f",
             (double)nnz, (double)XLENGTH(x));
    sbg_stop(SBG_ERR_INPUT, msg);
  }
  const int *pp = INTEGER(p);
  int32_t n = (int32_t)(np - 1);
  if (pp[0] != 0 || pp[n] != nnz)
    sbg_stop(SBG_ERR_INPUT, "`W` is not a valid dgCMatrix: slot p must start at 0 and end at length(i)");
  for (int32_t v = 0; v < n; v++) {
    if (pp[v + 1] < pp[v]) {
      snprintf(msg, sizeof msg, "`W` is not a valid dgCMatrix: slot p decreases at column %d", (int)v + 1);
      sbg_stop(SBG_ERR_INPUT, msg);
    }
  }
}

/* The error for the first bad row index of column j (0-based): outside
 * 0..n-1, or not above the one before it (Matrix's validity wants the rows
 * of a column increasing). */
static void NORET stop_bad_rows(SEXP p, SEXP i, int32_t j) {
  const int *pp = INTEGER(p), *ii = INTEGER(i);
  int32_t n = (int32_t)(XLENGTH(p) - 1);
  char msg[200];
  snprintf(msg, sizeof msg, "`W` is not a valid dgCMatrix: bad row indices in column %d", (int)j + 1);
  for (int32_t k = pp[j], prev = -1; k < pp[j + 1]; prev = ii[k], k++) {
    if (ii[k] < 0 || ii[k] >= n) {
      snprintf(msg, sizeof msg, "`W` is not a valid dgCMatrix: row index %d (entry %.0f) outside 0..%d",
               ii[k], (double)k + 1, (int)n - 1);
      break;
    }
    if (ii[k] <= prev) {
      snprintf(msg, sizeof msg,
               "`W` is not a valid dgCMatrix: row indices not increasing in column %d (entry %.0f)",
               (int)j + 1, (double)k + 1);
      break;
    }
  }
  sbg_stop(SBG_ERR_INPUT, msg);
}

/* check_csc_slots(), then the row indices: 0 <= i < n and increasing
 * within each column, in one threaded streaming read of up to billions of
 * entries (the first bad column wins, whatever the threads). */
static void check_csc(SEXP p, SEXP i, SEXP x, int nth) {
  check_csc_slots(p, i, x);
  const int *pp = INTEGER(p), *ii = INTEGER(i);
  int32_t n = (int32_t)(XLENGTH(p) - 1), first = n;
#pragma omp parallel for num_threads(nth > 0 ? nth : 1) schedule(dynamic, 1024) reduction(min : first)
  for (int32_t j = 0; j < n; j++) {
    int b = 0;
    for (int32_t k = pp[j], prev = -1; k < pp[j + 1]; prev = ii[k], k++) b |= (ii[k] <= prev) | (ii[k] >= n);
    if (b && j < first) first = j;
  }
  if (first < n) stop_bad_rows(p, i, first);
}

/* The compressed columns p, i, x of a symmetric dgCMatrix, which are also
 * its rows, checked (check_csc()) into g; the row offsets live in R_alloc
 * memory until the .Call returns. */
static void graph_decode(SEXP p, SEXP i, SEXP x, int nth, sbg_cosnet_graph *g) {
  check_csc(p, i, x, nth);
  int32_t n = (int32_t)(XLENGTH(p) - 1);
  int64_t *rowptr = (int64_t *)R_alloc((size_t)n + 1, sizeof(int64_t));
  const int *pv = INTEGER(p);
#pragma omp parallel for num_threads(nth > 0 ? nth : 1) schedule(static)
  for (int32_t v = 0; v <= n; v++) rowptr[v] = pv[v];
  g->n = n;
  g->v_rowptr = rowptr;
  g->v_col = INTEGER(i);
  g->v_w = REAL(x);
}

/* data = list(p, i, x: the compressed columns of a symmetric dgCMatrix,
 * which are also its rows; labels: n x K integer (1, -1, 0); folds: n x K
 * integer or NULL) -> the engine's input; the arrays live in R_alloc
 * memory until the .Call returns. */
static void input_decode(SEXP data, SEXP params, int nth, sbg_cosnet_input *in) {
  SEXP p = sbg_elt(data, "p"), i = sbg_elt(data, "i"), x = sbg_elt(data, "x");
  graph_decode(p, i, x, nth, &in->g);
  SEXP labels = sbg_vec_elt(data, "labels", INTSXP, -1), folds = sbg_elt(data, "folds");
  int32_t n = (int32_t)(XLENGTH(p) - 1);
  SBG_ASSERT(n >= 1 && XLENGTH(labels) % n == 0);
  int32_t nf = sbg_int_elt(params, "nfolds");
  SBG_ASSERT(nf >= 0 && (nf == 0) == Rf_isNull(folds));
  SBG_ASSERT(Rf_isNull(folds) || (TYPEOF(folds) == INTSXP && XLENGTH(folds) == XLENGTH(labels)));
  int8_t *lab = (int8_t *)R_alloc((size_t)XLENGTH(labels), 1);
  /* threaded: nodes x classes is tens of millions on large runs */
  const int *lv = INTEGER(labels);
  R_xlen_t n_lab = XLENGTH(labels), bad = 0;
#pragma omp parallel for num_threads(nth > 0 ? nth : 1) schedule(static) reduction(+ : bad)
  for (R_xlen_t t = 0; t < n_lab; t++) {
    int l = lv[t];
    bad += !(l == 1 || l == -1 || l == 0);
    lab[t] = (int8_t)l;
  }
  SBG_ASSERT(bad == 0);
  in->n_classes = (int32_t)(XLENGTH(labels) / n);
  in->v_labels = lab;
  in->v_folds = Rf_isNull(folds) ? NULL : INTEGER(folds);
  in->n_folds = nf;
}

/* params = list(nfolds, cost, maxSweeps, seed, batch, budget). */
static void params_decode(SEXP params, sbg_cosnet_params *par) {
  par->cost = sbg_real_elt(params, "cost");
  par->max_sweeps = sbg_int_elt(params, "maxSweeps");
  par->seed = (uint64_t)sbg_real_elt(params, "seed");
  par->max_batch = sbg_int_elt(params, "batch");
  par->device_budget = sbg_real_elt(params, "budget");
  par->host_colour_max = sbg_real_elt(params, "hostColour");
}

static const char *const result_names[] = {"scores", "pred", "alpha", "c", "fscore", "sweeps",
                                           "converged", "colour", "nColours", "parts"};

/* The result list, its vectors the engine's output (scores and pred NA
 * where the engine writes nothing; with the dimnames of the labels, set
 * here, where the matrices are new, so that no assignment in R can copy
 * them). */
static SEXP result_alloc(int32_t n, int32_t K, int32_t n_jobs, SEXP dimnames,
                         sbg_cosnet_result *out, int nth) {
  SEXP ans = PROTECT(sbg_named_list(10, result_names));
  SEXP scores = sbg_set(ans, "scores", Rf_allocMatrix(REALSXP, n, K));
  SEXP pred = sbg_set(ans, "pred", Rf_allocMatrix(LGLSXP, n, K));
  Rf_setAttrib(scores, R_DimNamesSymbol, dimnames);
  Rf_setAttrib(pred, R_DimNamesSymbol, dimnames);
  out->v_scores = REAL(scores);
  out->v_pred = LOGICAL(pred);
  /* nodes x classes, tens of millions: fresh pages, first touched below */
  sbg_hint_huge_pages(out->v_scores, sizeof(double) * (size_t)n * (size_t)K);
  sbg_hint_huge_pages(out->v_pred, sizeof(int) * (size_t)n * (size_t)K);
#pragma omp parallel for num_threads(nth > 0 ? nth : 1) schedule(static)
  for (R_xlen_t t = 0; t < (R_xlen_t)n * K; t++) {
    out->v_scores[t] = NA_REAL;
    out->v_pred[t] = NA_LOGICAL;
  }
  out->v_alpha = REAL(sbg_set(ans, "alpha", Rf_allocVector(REALSXP, n_jobs)));
  out->v_c = REAL(sbg_set(ans, "c", Rf_allocVector(REALSXP, n_jobs)));
  out->v_fscore = REAL(sbg_set(ans, "fscore", Rf_allocVector(REALSXP, n_jobs)));
  out->v_sweeps = INTEGER(sbg_set(ans, "sweeps", Rf_allocVector(INTSXP, n_jobs)));
  out->v_converged = LOGICAL(sbg_set(ans, "converged", Rf_allocVector(LGLSXP, n_jobs)));
  out->v_colour = INTEGER(sbg_set(ans, "colour", Rf_allocVector(INTSXP, n)));
  out->n_colours = 0;
  out->n_parts = 0;
  UNPROTECT(1);
  return ans;
}

/* parCosnet's engine call: data, params and run as above; a named list. */
SEXP ffi_cosnet(SEXP data, SEXP params, SEXP run) {
  sbg_run r;
  sbg_run_decode(run, &r);
  sbg_cosnet_input in;
  input_decode(data, params, r.threads, &in);
  sbg_cosnet_params par;
  params_decode(params, &par);
  int32_t n_jobs = in.n_classes * (in.n_folds > 0 ? in.n_folds : 1);
  sbg_cosnet_result out;
  SEXP dn = Rf_getAttrib(sbg_elt(data, "labels"), R_DimNamesSymbol);
  SEXP ans = PROTECT(result_alloc(in.g.n, in.n_classes, n_jobs, dn, &out, r.threads));

  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_from_run(&ctx, &pr, &r, "parCosnet");
  sbg_status st = r.gpu ? sbg_cosnet_gpu(&in, &par, &out, &ctx) : sbg_cosnet_cpu(&in, &par, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  sbg_set(ans, "nColours", Rf_ScalarInteger(out.n_colours));
  sbg_set(ans, "parts", Rf_ScalarInteger(out.n_parts));
  UNPROTECT(1);
  return ans;
}

/* The learning step alone, on given points: list(alpha, c, F).  threads >
 * 1: as the GPU engine learns a run of few jobs (sbg_cosnet_learn_jobs(),
 * each step's sorts on all threads), without interrupt polls. */
SEXP ffi_cosnet_learn(SEXP x, SEXP y, SEXP lab, SEXP threads) {
  SBG_ASSERT(TYPEOF(x) == REALSXP && TYPEOF(y) == REALSXP && TYPEOF(lab) == INTSXP);
  SBG_ASSERT(XLENGTH(x) == XLENGTH(y) && XLENGTH(x) == XLENGTH(lab));
  SBG_ASSERT(TYPEOF(threads) == INTSXP && XLENGTH(threads) == 1);
  R_xlen_t m = XLENGTH(x);
  int8_t *l = (int8_t *)R_alloc((size_t)(m > 0 ? m : 1), 1);
  for (R_xlen_t t = 0; t < m; t++) l[t] = INTEGER(lab)[t] > 0;
  double v[3] = {0, 0, 0};
  const char *nm[] = {"alpha", "c", "F"};
  if (INTEGER(threads)[0] > 1) {
    SBG_ASSERT(m <= 2147483647);
    int8_t *codes = (int8_t *)R_alloc((size_t)(m > 0 ? m : 1), 1);
    for (R_xlen_t t = 0; t < m; t++) codes[t] = l[t] ? SBG_COSNET_POS : SBG_COSNET_NEG;
    int64_t n_pos = 0, n_lab = 0;
    sbg_status st = sbg_cosnet_learn_jobs(1, (int32_t)m, codes, REAL(x), REAL(y), &v[0], &v[1], &v[2], &n_pos,
                                          &n_lab, INTEGER(threads)[0]);
    if (st != SBG_OK) sbg_stop(st, "the learning step failed");
    SEXP ans = PROTECT(sbg_named_list(3, nm));
    for (int k = 0; k < 3; k++) sbg_set(ans, nm[k], Rf_ScalarReal(v[k]));
    UNPROTECT(1);
    return ans;
  }
  /* with the interrupt polls of a run (tests of Ctrl-C) */
  sbg_ctx ctx;
  sbg_progress pr;
  const int no_device = 0;
  sbg_ctx_setup(&ctx, &pr, 1, &no_device, 1, 0, "parCosnet");
  sbg_status st = sbg_cosnet_learn(REAL(x), REAL(y), l, (int64_t)m, &v[0], &v[1], &v[2], &ctx, 0.0);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, st == SBG_ERR_INTERRUPTED ? ctx.errbuf : "out of memory while learning");
  SEXP ans = PROTECT(sbg_named_list(3, nm));
  for (int k = 0; k < 3; k++) sbg_set(ans, nm[k], Rf_ScalarReal(v[k]));
  UNPROTECT(1);
  return ans;
}

/* The host colouring of a network (slots p, i, x of a symmetric
 * dgCMatrix, as parCosnet() passes them) from seed, on `threads` threads
 * (one: the greedy pass; more: the Jones-Plassmann rounds; the same
 * colours), for the tests and the colouring's benchmark
 * (cosnet_colours()). */
SEXP ffi_cosnet_colour(SEXP p, SEXP i, SEXP x, SEXP seed, SEXP threads) {
  SBG_ASSERT(TYPEOF(seed) == REALSXP && XLENGTH(seed) == 1 && TYPEOF(threads) == INTSXP && XLENGTH(threads) == 1);
  sbg_cosnet_graph g;
  graph_decode(p, i, x, INTEGER(threads)[0], &g);
  int32_t n = g.n;
  SEXP ans = PROTECT(Rf_allocVector(INTSXP, n));
  sbg_ctx ctx;
  sbg_progress pr;
  const int no_device = 0;
  sbg_ctx_setup(&ctx, &pr, INTEGER(threads)[0], &no_device, 1, 0, "parCosnet");
  int32_t n_colours = 0;
  sbg_status st = sbg_cosnet_colour_host(&g, (uint64_t)REAL(seed)[0], INTEGER(ans), &n_colours, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, st == SBG_ERR_ALLOC ? "out of memory while colouring the network" : ctx.errbuf);
  UNPROTECT(1);
  return ans;
}

/* The angle groups that the GPU engine's learning makes of one job's
 * ratio groups (sbg_cosnet_angle_groups(), tests): key (the positives'
 * distinct ratios, ascending), pos, eq (their positives and negatives),
 * run, top, bot (the runs of negatives between them and after the last,
 * with their largest and smallest ratios), kept, zero (the first kept
 * zero's value).  list(G, angle, pos, eq, run, top); G -1: the host must
 * learn the job. */
SEXP ffi_cosnet_angle_groups(SEXP key, SEXP pos, SEXP eq, SEXP run, SEXP top, SEXP bot, SEXP kept, SEXP zero) {
  R_xlen_t G = XLENGTH(key);
  SBG_ASSERT(TYPEOF(key) == REALSXP && TYPEOF(pos) == INTSXP && TYPEOF(eq) == INTSXP && TYPEOF(run) == INTSXP &&
             TYPEOF(top) == REALSXP && TYPEOF(bot) == REALSXP && XLENGTH(pos) == G && XLENGTH(eq) == G &&
             XLENGTH(run) == G + 1 && XLENGTH(top) == G + 1 && XLENGTH(bot) == G + 1 && G >= 1 && G < 65536 &&
             TYPEOF(zero) == REALSXP && TYPEOF(kept) == INTSXP);
  int32_t cap = (int32_t)G;
  sbg_cosnet_sums s = sbg_cosnet_sums_at(R_alloc(sbg_cosnet_sums_bytes(cap), 1), 1, cap);
  s.sum->n_keys = cap;
  s.sum->kept = INTEGER(kept)[0];
  s.sum->zero = REAL(zero)[0];
  for (R_xlen_t h = 0; h <= G; h++) {
    if (h < G) {
      s.key[h] = sbg_cosnet_order_key(REAL(key)[h]);
      s.pos[h] = INTEGER(pos)[h];
      s.eq[h] = INTEGER(eq)[h];
    }
    s.run[h] = INTEGER(run)[h];
    s.top[h] = s.run[h] > 0 ? sbg_cosnet_order_key(REAL(top)[h]) : 0;
    s.bot[h] = s.run[h] > 0 ? sbg_cosnet_order_key(REAL(bot)[h]) : ~0ull;
  }
  double *ak = (double *)R_alloc((size_t)G * 2 + 1, sizeof(double));
  int64_t *ip = (int64_t *)R_alloc((size_t)G * 3 + 1, sizeof(int64_t));
  int64_t got = sbg_cosnet_angle_groups(&s, cap, ak, ip, ip + G, ip + 2 * G, ak + G);
  if (got == -2) sbg_stop(SBG_ERR_ALLOC, "out of memory");
  const char *nm[] = {"G", "angle", "pos", "eq", "run", "top"};
  SEXP ans = PROTECT(sbg_named_list(6, nm));
  sbg_set(ans, "G", Rf_ScalarReal((double)got));
  if (got >= 0) {
    SEXP v[5];
    for (int k = 0; k < 5; k++) v[k] = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)got + (k >= 3)));
    for (int64_t h = 0; h <= got; h++) {
      if (h < got) {
        REAL(v[0])[h] = ak[h];
        REAL(v[1])[h] = (double)ip[h];
        REAL(v[2])[h] = (double)ip[G + h];
      }
      REAL(v[3])[h] = (double)ip[2 * G + h];
      REAL(v[4])[h] = ak[G + h];
    }
    for (int k = 0; k < 5; k++) sbg_set(ans, nm[k + 1], v[k]);
    UNPROTECT(5);
  }
  UNPROTECT(1);
  return ans;
}

/* Checks a dgCMatrix for parCosnet() without copying it (R/cosnet-io.R),
 * its entries in one pass that also sums the columns: list(code, node,
 * degree), see sbg_cosnet_check() for the codes; degree (the weighted
 * degrees) for code 0, else NULL.  Bad row indices (code 7) stop here. */
SEXP ffi_cosnet_check(SEXP p, SEXP i, SEXP x, SEXP tol, SEXP threads) {
  SBG_ASSERT(TYPEOF(tol) == REALSXP && TYPEOF(threads) == INTSXP && XLENGTH(threads) >= 1);
  check_csc_slots(p, i, x);
  int32_t n = (int32_t)(XLENGTH(p) - 1), res[2];
  SEXP degree = PROTECT(Rf_allocVector(REALSXP, n));
  sbg_cosnet_check(n, INTEGER(p), INTEGER(i), REAL(x), REAL(tol)[0], INTEGER(threads)[0], res,
                   REAL(degree));
  if (res[0] == 7) stop_bad_rows(p, i, res[1] - 1);
  const char *nm[] = {"code", "node", "degree"};
  SEXP ans = PROTECT(sbg_named_list(3, nm));
  sbg_set(ans, "code", Rf_ScalarInteger(res[0]));
  sbg_set(ans, "node", Rf_ScalarInteger(res[1]));
  if (res[0] == 0) sbg_set(ans, "degree", degree);
  UNPROTECT(2);
  return ans;
}

/* normalize = TRUE (R/cosnet-io.R): the x slot of D^-1/2 W D^-1/2, a new
 * vector (W stays as it is), for a W that ffi_cosnet_check() has passed
 * and its degrees. */
SEXP ffi_cosnet_normalize(SEXP p, SEXP i, SEXP x, SEXP degree, SEXP threads) {
  SBG_ASSERT(TYPEOF(degree) == REALSXP && TYPEOF(threads) == INTSXP && XLENGTH(threads) >= 1);
  check_csc_slots(p, i, x);
  int32_t n = (int32_t)(XLENGTH(p) - 1);
  SBG_ASSERT(XLENGTH(degree) == n);
  SEXP out = PROTECT(Rf_allocVector(REALSXP, XLENGTH(x)));
  double *scale = (double *)R_alloc((size_t)n, sizeof(double));
  int bad = sbg_cosnet_normalize(n, INTEGER(p), INTEGER(i), REAL(x), REAL(degree), scale, REAL(out),
                                 INTEGER(threads)[0]);
  SBG_ASSERT(!bad); /* R has checked the row indices */
  UNPROTECT(1);
  return out;
}

/* The benchmark's random network (cosnet_random_network(), R/parCosnet.R):
 * list(p, i, x) of a symmetric dgCMatrix, G(n, prob) with U(0,1) weights.
 * A dgCMatrix holds at most 2^31 - 1 entries (integer p): larger networks
 * are refused here, although the engines themselves use 64-bit offsets. */
SEXP ffi_cosnet_random_network(SEXP n_, SEXP prob_, SEXP seed_, SEXP threads_) {
  SBG_ASSERT(TYPEOF(n_) == INTSXP && TYPEOF(prob_) == REALSXP && TYPEOF(seed_) == REALSXP);
  SBG_ASSERT(TYPEOF(threads_) == INTSXP);
  int32_t n = INTEGER(n_)[0];
  double prob = REAL(prob_)[0];
  SBG_ASSERT(n >= 1 && prob >= 0 && prob <= 1);
  sbg_cosnet_er er;
  if (sbg_cosnet_er_init(&er, n, prob, (uint64_t)REAL(seed_)[0], INTEGER(threads_)[0]) != SBG_OK)
    sbg_stop(SBG_ERR_ALLOC, "out of memory for the random network");
  int64_t *rowptr = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
  if (!rowptr) {
    sbg_cosnet_er_free(&er);
    sbg_stop(SBG_ERR_ALLOC, "out of memory for the random network");
  }
  sbg_cosnet_er_count(&er, rowptr);
  int64_t nnz = rowptr[n];
  if (nnz > 2147483647) {
    char msg[200];
    snprintf(msg, sizeof msg, "the random network has %.0f stored entries; a dgCMatrix holds at most 2^31 - 1",
             (double)nnz);
    free(rowptr);
    sbg_cosnet_er_free(&er);
    sbg_stop(SBG_ERR_INPUT, msg);
  }
  /* (an R allocation failure here leaks the C buffers: an error path only) */
  SEXP p = NULL, i = NULL, x = NULL;
  p = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)n + 1));
  i = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)nnz));
  x = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)nnz));
  for (int32_t v = 0; v <= n; v++) INTEGER(p)[v] = (int)rowptr[v];
  sbg_cosnet_er_fill(&er, rowptr, INTEGER(i), REAL(x));
  free(rowptr);
  sbg_cosnet_er_free(&er);
  const char *nm[] = {"p", "i", "x"};
  SEXP ans = PROTECT(sbg_named_list(3, nm));
  sbg_set(ans, "p", p);
  sbg_set(ans, "i", i);
  sbg_set(ans, "x", x);
  UNPROTECT(4);
  return ans;
}

/* Labels (a logical, integer or double vector or matrix, n rows) to codes
 * 1, -1, 0, straight into the n x K integer matrix that R keeps (no copy
 * there: it gets its dimnames in place), with the attribute "bad": the
 * 1-based position of the first value that is not 1, 0 or NA (0: none).
 * Threaded: nodes x classes is tens of millions on large runs. */
SEXP ffi_cosnet_labels(SEXP x, SEXP nrow, SEXP threads) {
  SBG_ASSERT(TYPEOF(nrow) == INTSXP && TYPEOF(threads) == INTSXP);
  R_xlen_t len = XLENGTH(x), first = len;
  int n = INTEGER(nrow)[0], nth = INTEGER(threads)[0];
  SBG_ASSERT(n > 0 && len % n == 0);
  SEXP codes = PROTECT(Rf_allocMatrix(INTSXP, n, (int)(len / n)));
  int *c = INTEGER(codes);
  sbg_hint_huge_pages(c, sizeof(int) * (size_t)len);
  if (TYPEOF(x) == REALSXP) {
    const double *v = REAL(x);
#pragma omp parallel for num_threads(nth > 0 ? nth : 1) schedule(static) reduction(min : first)
    for (R_xlen_t t = 0; t < len; t++) {
      c[t] = sbg_cosnet_label_code(v[t]);
      if (c[t] == 2 && t < first) first = t;
    }
  } else {
    SBG_ASSERT(TYPEOF(x) == LGLSXP || TYPEOF(x) == INTSXP);
    const int *v = TYPEOF(x) == LGLSXP ? LOGICAL(x) : INTEGER(x);
#pragma omp parallel for num_threads(nth > 0 ? nth : 1) schedule(static) reduction(min : first)
    for (R_xlen_t t = 0; t < len; t++) {
      c[t] = sbg_cosnet_label_code(v[t] == NA_INTEGER ? NAN : v[t]);
      if (c[t] == 2 && t < first) first = t;
    }
  }
  Rf_setAttrib(codes, Rf_install("bad"), Rf_ScalarReal(first < len ? (double)(first + 1) : 0.0));
  UNPROTECT(1);
  return codes;
}

/* What R needs of the coded labels lab (n x K: 1, -1, 0) in one pass:
 * list(truth: logical n x K, TRUE / FALSE / NA, with lab's dimnames;
 * positives, negatives, unlabelled: per class, doubles named by class, as
 * colSums() gives them). */
SEXP ffi_cosnet_label_summary(SEXP lab, SEXP threads) {
  SBG_ASSERT(TYPEOF(lab) == INTSXP && Rf_isMatrix(lab) && TYPEOF(threads) == INTSXP);
  int nth = INTEGER(threads)[0];
  int32_t n = Rf_nrows(lab), K = Rf_ncols(lab);
  const char *nm[] = {"truth", "positives", "negatives", "unlabelled"};
  SEXP ans = PROTECT(sbg_named_list(4, nm));
  SEXP truth = sbg_set(ans, "truth", Rf_allocMatrix(LGLSXP, n, K));
  SEXP dn = Rf_getAttrib(lab, R_DimNamesSymbol);
  if (!Rf_isNull(dn)) Rf_setAttrib(truth, R_DimNamesSymbol, Rf_duplicate(dn));
  SEXP cn = Rf_isNull(dn) ? R_NilValue : VECTOR_ELT(dn, 1);
  double *cnt[3];
  for (int q = 0; q < 3; q++) {
    SEXP v = sbg_set(ans, nm[q + 1], Rf_allocVector(REALSXP, K));
    if (!Rf_isNull(cn)) Rf_setAttrib(v, R_NamesSymbol, cn);
    cnt[q] = REAL(v);
  }
  const int *l = INTEGER(lab);
  int *t = LOGICAL(truth);
  sbg_hint_huge_pages(t, sizeof(int) * (size_t)n * (size_t)K);
#pragma omp parallel for num_threads(nth > 0 ? nth : 1) schedule(static)
  for (int32_t k = 0; k < K; k++) {
    int64_t c[3] = {0, 0, 0};
    for (int64_t a = (int64_t)k * n, e = a + n; a < e; a++) {
      int v = l[a];
      t[a] = v == 1 ? 1 : v == 0 ? NA_LOGICAL : 0;
      c[v == 1 ? 0 : v == -1 ? 1 : 2] += v == 1 || v == -1 || v == 0;
    }
    for (int q = 0; q < 3; q++) cnt[q][k] = (double)c[q];
  }
  UNPROTECT(1);
  return ans;
}

/* Stratified folds of every class of lab (n x K codes): n x K integers,
 * with lab's dimnames. */
SEXP ffi_cosnet_folds(SEXP lab, SEXP nfolds, SEXP seed, SEXP threads) {
  SBG_ASSERT(TYPEOF(lab) == INTSXP && Rf_isMatrix(lab) && TYPEOF(nfolds) == INTSXP);
  SBG_ASSERT(TYPEOF(seed) == REALSXP && TYPEOF(threads) == INTSXP);
  int32_t n = Rf_nrows(lab), K = Rf_ncols(lab);
  SEXP folds = PROTECT(Rf_allocMatrix(INTSXP, n, K));
  sbg_hint_huge_pages(INTEGER(folds), sizeof(int) * (size_t)n * (size_t)K);
  /* lab's dimnames here, where the matrix is new (an assignment in R could
   * copy it) */
  Rf_setAttrib(folds, R_DimNamesSymbol, Rf_getAttrib(lab, R_DimNamesSymbol));
  if (sbg_cosnet_folds(INTEGER(lab), n, K, INTEGER(nfolds)[0], (uint64_t)REAL(seed)[0],
                       INTEGER(folds), INTEGER(threads)[0]) != 0)
    sbg_stop(SBG_ERR_ALLOC, "cannot allocate the folds' buffers");
  UNPROTECT(1);
  return folds;
}

/* Mean per-fold precision, recall, F and AUPRC of every class: K x 4. */
SEXP ffi_cosnet_cv_metrics(SEXP lab, SEXP folds, SEXP pred, SEXP scores, SEXP nfolds,
                           SEXP threads) {
  SBG_ASSERT(TYPEOF(lab) == INTSXP && Rf_isMatrix(lab) && TYPEOF(folds) == INTSXP);
  SBG_ASSERT(TYPEOF(pred) == LGLSXP && TYPEOF(scores) == REALSXP && TYPEOF(nfolds) == INTSXP);
  SBG_ASSERT(XLENGTH(folds) == XLENGTH(lab) && XLENGTH(pred) == XLENGTH(lab));
  SBG_ASSERT(XLENGTH(scores) == XLENGTH(lab) && TYPEOF(threads) == INTSXP);
  int32_t n = Rf_nrows(lab), K = Rf_ncols(lab), nf = INTEGER(nfolds)[0];
  const int *f = INTEGER(folds);
  /* on the threads: nodes x classes is tens of millions after a GPU run,
   * and this check is part of the call's serial time */
  const R_xlen_t n_f = XLENGTH(folds);
  const int nth = INTEGER(threads)[0] > 0 ? INTEGER(threads)[0] : 1;
  R_xlen_t bad = 0;
#pragma omp parallel for num_threads(nth) schedule(static) reduction(+ : bad)
  for (R_xlen_t t = 0; t < n_f; t++) bad += f[t] < 0 || f[t] > nf;
  SBG_ASSERT(bad == 0);
  SEXP out = PROTECT(Rf_allocMatrix(REALSXP, K, 4));
  if (sbg_cosnet_cv_metrics(INTEGER(lab), f, LOGICAL(pred), REAL(scores), n, K, nf, REAL(out),
                            INTEGER(threads)[0]) != 0)
    sbg_stop(SBG_ERR_ALLOC, "cannot allocate the metrics' buffers");
  UNPROTECT(1);
  return out;
}
