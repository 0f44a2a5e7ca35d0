/* .Call glue of pbnSteadyState() and pbnSimulate(): the flattened network
 * and sets built by R (R/pbnSteadyState.R, pbn_flatten()) become the plain C
 * structs of pbn.h; results are written into R vectors. */
#include <stdint.h>
#include <string.h>

#include "glue.h"
#include "pbn.h"

/* Order of the flattened network list (pbn_flatten() in R). */
enum {
  NET_N, NET_FUN_START, NET_FUN_THRESH, NET_FUN_K, NET_IN_START, NET_INPUTS, NET_TAB_START,
  NET_TABLES, NET_SEL_RANK, NET_N_SEL_TOTAL, NET_PERT_NODE, NET_GAP_THRESH, NET_NODE_OF_FULL,
  NET_ASYNC, NET_FUN_PROB, NET_FIRST_THRESH, NET_SKIP_THRESH, NET_LEN
};

/* The flattened network, sets and parameters come from R lists that a user
 * may have edited (through the pbn object): every size, index range and
 * probability threshold is checked, and a failure is a classed input error
 * (sysbioGPU_error_input), never an assertion. */
#define PBN_CHECK(cond)                                                               \
  do {                                                                                \
    if (!(cond)) sbg_stop(SBG_ERR_INPUT, "pbn: invalid network or sets (" #cond "): " \
                                         "build the network with pbn() or readPBN()"); \
  } while (0)

static const int32_t *int_el(SEXP l, int i, R_xlen_t len) {
  SEXP x = VECTOR_ELT(l, i);
  PBN_CHECK(TYPEOF(x) == INTSXP && (len < 0 || XLENGTH(x) == len));
  return (const int32_t *)INTEGER(x);
}

static const double *real_el(SEXP l, int i, R_xlen_t len) {
  SEXP x = VECTOR_ELT(l, i);
  PBN_CHECK(TYPEOF(x) == REALSXP && (len < 0 || XLENGTH(x) == len));
  return REAL(x);
}

static uint64_t *u64_from_real(const double *x, R_xlen_t n) {
  uint64_t *o = (uint64_t *)R_alloc((size_t)(n > 0 ? n : 1), sizeof(uint64_t));
  for (R_xlen_t i = 0; i < n; i++) {
    PBN_CHECK(x[i] >= 0 && x[i] <= 4294967296.0);
    o[i] = (uint64_t)x[i];
  }
  return o;
}

/* 64-bit words given by R as pairs of 32-bit integers (low, high). */
static uint64_t *u64_from_pairs(SEXP x) {
  PBN_CHECK(TYPEOF(x) == INTSXP && XLENGTH(x) % 2 == 0);
  R_xlen_t n = XLENGTH(x) / 2;
  uint64_t *o = (uint64_t *)R_alloc((size_t)(n > 0 ? n : 1), sizeof(uint64_t));
  const uint32_t *v = (const uint32_t *)INTEGER(x);
  for (R_xlen_t i = 0; i < n; i++) o[i] = (uint64_t)v[2 * i] | ((uint64_t)v[2 * i + 1] << 32);
  return o;
}

static void net_from_list(SEXP l, sbg_pbn_net *net) {
  PBN_CHECK(TYPEOF(l) == VECSXP && XLENGTH(l) == NET_LEN);
  memset(net, 0, sizeof *net);
  net->n = int_el(l, NET_N, 1)[0];
  PBN_CHECK(net->n >= 1);
  net->n_words = (net->n + 63) / 64;
  net->fun_start = int_el(l, NET_FUN_START, net->n + 1);
  int32_t nf = net->fun_start[net->n];
  PBN_CHECK(nf >= net->n);
  net->fun_thresh = u64_from_real(real_el(l, NET_FUN_THRESH, nf), nf);
  net->fun_k = int_el(l, NET_FUN_K, nf);
  net->in_start = int_el(l, NET_IN_START, nf);
  net->inputs = int_el(l, NET_INPUTS, -1);
  R_xlen_t n_in = XLENGTH(VECTOR_ELT(l, NET_INPUTS));
  const double *ts = real_el(l, NET_TAB_START, nf);
  int64_t *tab_start = (int64_t *)R_alloc((size_t)(nf > 0 ? nf : 1), sizeof(int64_t));
  R_xlen_t n_tab = XLENGTH(VECTOR_ELT(l, NET_TABLES));
  for (int32_t f = 0; f < nf; f++) {
    PBN_CHECK(ts[f] >= 0 && ts[f] < 9e15);  /* also refuses NaN before the cast */
    tab_start[f] = (int64_t)ts[f];
    int32_t k = net->fun_k[f];
    PBN_CHECK(k >= 0 && k <= 24);
    PBN_CHECK(net->in_start[f] >= 0 && net->in_start[f] + k <= n_in);
    PBN_CHECK(tab_start[f] >= 0 && tab_start[f] + ((((int64_t)1 << k) + 31) / 32) <= n_tab);
    PBN_CHECK(net->fun_thresh[f] <= 4294967296ULL);
  }
  PBN_CHECK(net->fun_start[0] == 0);
  for (int32_t i = 0; i < net->n; i++) {
    PBN_CHECK(net->fun_start[i] < net->fun_start[i + 1]);
    for (int32_t f = net->fun_start[i] + 1; f < net->fun_start[i + 1]; f++)
      PBN_CHECK(net->fun_thresh[f - 1] <= net->fun_thresh[f]);  /* probabilities >= 0 */
    PBN_CHECK(net->fun_thresh[net->fun_start[i + 1] - 1] == 4294967296ULL);
  }
  for (R_xlen_t j = 0; j < n_in; j++) PBN_CHECK(net->inputs[j] >= 0 && net->inputs[j] < net->n);
  net->tab_start = tab_start;
  net->tables = (const uint32_t *)int_el(l, NET_TABLES, -1);
  net->sel_rank = int_el(l, NET_SEL_RANK, net->n);
  net->n_sel_total = int_el(l, NET_N_SEL_TOTAL, 1)[0];
  for (int32_t i = 0; i < net->n; i++) PBN_CHECK(net->sel_rank[i] >= -1 && net->sel_rank[i] < net->n_sel_total);
  SEXP pn = VECTOR_ELT(l, NET_PERT_NODE);
  net->n_pert_total = (int32_t)XLENGTH(pn);
  net->pert_node = int_el(l, NET_PERT_NODE, -1);
  for (int32_t j = 0; j < net->n_pert_total; j++) PBN_CHECK(net->pert_node[j] >= -1 && net->pert_node[j] < net->n);
  net->gap_thresh = u64_from_real(real_el(l, NET_GAP_THRESH, net->n_pert_total + 1), net->n_pert_total + 1);
  SEXP nof = VECTOR_ELT(l, NET_NODE_OF_FULL);
  net->n_total = (int32_t)XLENGTH(nof);
  PBN_CHECK(net->n_total >= net->n);
  net->node_of_full = int_el(l, NET_NODE_OF_FULL, -1);
  for (int32_t j = 0; j < net->n_total; j++) PBN_CHECK(net->node_of_full[j] >= -1 && net->node_of_full[j] < net->n);
  net->async = int_el(l, NET_ASYNC, 1)[0];
  net->first_thresh = u64_from_real(real_el(l, NET_FIRST_THRESH, net->n_pert_total + 1),
                                    net->n_pert_total + 1);
  PBN_CHECK(net->first_thresh[0] == 4294967296ULL && (net->n_pert_total == 0 || net->first_thresh[net->n_pert_total] == 0));
  SEXP sk = VECTOR_ELT(l, NET_SKIP_THRESH);
  net->n_skip = (int32_t)XLENGTH(sk) - 1;
  PBN_CHECK(net->n_skip >= 1 && net->n_skip <= 4096);
  net->skip_thresh = u64_from_real(real_el(l, NET_SKIP_THRESH, -1), net->n_skip + 1);
  PBN_CHECK(net->skip_thresh[0] == 4294967296ULL);
  for (int32_t j = 0; j < net->n_skip; j++) PBN_CHECK(net->skip_thresh[j + 1] <= net->skip_thresh[j]);
  /* a function step is deterministic: its fixed points hold to the next perturbation */
  net->det = !net->async;
  for (int32_t i = 0; i < net->n; i++) if (net->sel_rank[i] >= 0) net->det = 0;
}

static void sets_from_list(SEXP l, int32_t n_words, sbg_pbn_sets *s) {
  PBN_CHECK(TYPEOF(l) == VECSXP && XLENGTH(l) == 4);
  SEXP st = VECTOR_ELT(l, 0);
  PBN_CHECK(TYPEOF(st) == INTSXP && XLENGTH(st) >= 1);
  s->n_sets = (int32_t)XLENGTH(st) - 1;
  s->set_start = INTEGER(st);
  int32_t ne = s->set_start[s->n_sets];
  s->word = int_el(l, 1, ne);
  for (int32_t e = 0; e < ne; e++) PBN_CHECK(s->word[e] >= 0 && s->word[e] < n_words);
  PBN_CHECK(XLENGTH(VECTOR_ELT(l, 2)) == 2 * ne && XLENGTH(VECTOR_ELT(l, 3)) == 2 * ne);
  s->pos = u64_from_pairs(VECTOR_ELT(l, 2));
  s->neg = u64_from_pairs(VECTOR_ELT(l, 3));
}

/* params: seed, chains, r, z, epsilon, psi0, rhat_max, max_len, min_switches, small,
 * skip (0: no fixed-point skip, for the tests: same results), t */
static void params_from_real(SEXP params, sbg_pbn_net *net, sbg_pbn_params *p) {
  PBN_CHECK(TYPEOF(params) == REALSXP && XLENGTH(params) == 12);
  const double *pv = REAL(params);
  memset(p, 0, sizeof *p);
  p->seed = (uint64_t)pv[0];
  p->n_chains = (int64_t)pv[1];
  p->r = pv[2];
  p->z = pv[3];
  p->epsilon = pv[4];
  p->psi0 = (int64_t)pv[5];
  p->rhat_max = pv[6];
  p->max_len = (int64_t)pv[7];
  p->min_switches = (int64_t)pv[8];
  p->small = pv[9] != 0;
  if (pv[10] == 0) net->det = 0;
  p->t = pv[11];
  PBN_CHECK(p->n_chains >= 2 && p->psi0 >= 2 && p->max_len >= 4 && p->t > 0 && p->r > 0);
}

/* prob, alpha, beta, rhat, N, M, samples, converged, c(steps, burnin, psi), se */
static SEXP result_alloc(int32_t S, sbg_pbn_result *out) {
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 10));
  SET_VECTOR_ELT(ans, 9, Rf_allocVector(REALSXP, S));
  out->se = REAL(VECTOR_ELT(ans, 9));
  double *cols[7];
  for (int j = 0; j < 7; j++) {
    SET_VECTOR_ELT(ans, j, Rf_allocVector(REALSXP, S));
    cols[j] = REAL(VECTOR_ELT(ans, j));
  }
  SET_VECTOR_ELT(ans, 7, Rf_allocVector(LGLSXP, S));
  SET_VECTOR_ELT(ans, 8, Rf_allocVector(REALSXP, 3));
  out->prob = cols[0]; out->alpha = cols[1]; out->beta = cols[2]; out->rhat = cols[3];
  out->n_req = cols[4]; out->burnin_req = cols[5]; out->samples = cols[6];
  out->converged = LOGICAL(VECTOR_ELT(ans, 7));
  UNPROTECT(1);
  return ans;
}

static void result_finish(SEXP ans, const sbg_pbn_result *out) {
  double *g = REAL(VECTOR_ELT(ans, 8));
  g[0] = out->steps_per_chain;
  g[1] = out->burnin;
  g[2] = out->psi;
}

SEXP ffi_pbn_steady(SEXP net_l, SEXP sets_l, SEXP params, SEXP gpu, SEXP threads, SEXP device,
                    SEXP verbose) {
  int nprot = 0;
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  net_from_list(net_l, &net);
  sets_from_list(sets_l, net.n_words, &sets);
  SBG_ASSERT(TYPEOF(gpu) == LGLSXP);
  sbg_pbn_params p;
  params_from_real(params, &net, &p);
  /* device: one GPU index or several sharing the chains */
  SBG_ASSERT(TYPEOF(device) == INTSXP && XLENGTH(device) >= 1 && XLENGTH(device) <= SBG_PBN_MAX_DEVICES);
  p.devices = INTEGER(device);
  p.n_devices = (int32_t)XLENGTH(device);

  sbg_pbn_result out;
  SEXP ans = PROTECT(result_alloc(sets.n_sets, &out)); nprot++;
  sbg_ctx ctx;
  sbg_progress pr;
  SEXP first_dev = PROTECT(Rf_ScalarInteger(INTEGER(device)[0])); nprot++;
  sbg_ctx_init(&ctx, &pr, threads, first_dev, verbose, "pbnSteadyState");
  sbg_status st = LOGICAL(gpu)[0] ? sbg_pbn_steady_gpu(&net, &sets, &p, &out, &ctx)
                                  : sbg_pbn_steady_cpu(&net, &sets, &p, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  result_finish(ans, &out);
  UNPROTECT(nprot);
  return ans;
}

/* One block of chains on an R worker (pbn_block() in R/pbnSteadyState.R):
 * range = c(c0, c1) (0-based, c1 exclusive), state = raw or NULL (start
 * from the seed).  Returns list(state (raw), sums (raw: n_sets *
 * SBG_PBN_NSUM uint64, NULL without count)). */
SEXP ffi_pbn_block(SEXP net_l, SEXP sets_l, SEXP params, SEXP range, SEXP state, SEXP steps,
                   SEXP count, SEXP gpu, SEXP threads, SEXP device) {
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  net_from_list(net_l, &net);
  sets_from_list(sets_l, net.n_words, &sets);
  sbg_pbn_params p;
  params_from_real(params, &net, &p);
  SBG_ASSERT(TYPEOF(range) == REALSXP && XLENGTH(range) == 2);
  int64_t c0 = (int64_t)REAL(range)[0], c1 = (int64_t)REAL(range)[1];
  SBG_ASSERT(c0 >= 0 && c1 > c0 && c1 <= p.n_chains);
  size_t bytes = sbg_pbn_block_state_bytes(&net, c1 - c0);
  SBG_ASSERT(Rf_isNull(state) || (TYPEOF(state) == RAWSXP && (size_t)XLENGTH(state) == bytes));
  SBG_ASSERT(TYPEOF(steps) == REALSXP && REAL(steps)[0] >= 0 && REAL(steps)[0] < 2147483648.0);
  SBG_ASSERT(TYPEOF(count) == LGLSXP && TYPEOF(gpu) == LGLSXP);
  SBG_ASSERT(TYPEOF(device) == INTSXP && XLENGTH(device) == 1);
  p.devices = INTEGER(device);
  p.n_devices = 1;
  int cnt = LOGICAL(count)[0];
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(ans, 0, Rf_allocVector(RAWSXP, (R_xlen_t)bytes));
  if (cnt) SET_VECTOR_ELT(ans, 1, Rf_allocVector(RAWSXP, (R_xlen_t)sets.n_sets * SBG_PBN_NSUM * 8));
  uint64_t *sums = cnt ? (uint64_t *)R_alloc((size_t)(sets.n_sets > 0 ? sets.n_sets : 1) * SBG_PBN_NSUM, 8) : NULL;
  SEXP verbose = PROTECT(Rf_ScalarLogical(FALSE));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "pbnSteadyState");
  const unsigned char *in = Rf_isNull(state) ? NULL : RAW(state);
  sbg_status st = LOGICAL(gpu)[0]
                      ? sbg_pbn_block_gpu(&net, &sets, &p, c0, c1, in, (int64_t)REAL(steps)[0], cnt, sums,
                                          RAW(VECTOR_ELT(ans, 0)), &ctx)
                      : sbg_pbn_block_cpu(&net, &sets, &p, c0, c1, in, (int64_t)REAL(steps)[0], cnt, sums,
                                          RAW(VECTOR_ELT(ans, 0)), &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  if (cnt) memcpy(RAW(VECTOR_ELT(ans, 1)), sums, (size_t)sets.n_sets * SBG_PBN_NSUM * 8);
  UNPROTECT(2);
  return ans;
}

/* The engine of pbnSteadyState(BPPARAM =): advance calls the R function
 * fun(steps, count), which runs the blocks on the workers and returns the
 * list of their sums (raw), a character message on error, or NA_character_
 * on Ctrl-C.  The sums are added here as integers (exact: R's doubles
 * would round the sums of squares).  An R error never unwinds through the driver: R_tryEval
 * catches it and the driver gets a failing status. */
typedef struct pbn_r_engine {
  sbg_pbn_engine base;
  SEXP fun, rho;
  int32_t n_sets;
  int worker_failed;  /* the R side holds the error: it raises it (not an internal error) */
} pbn_r_engine;

static sbg_status pbn_r_advance(sbg_pbn_engine *eng, int64_t steps, int count, uint64_t *sums,
                                double lo, double hi, sbg_ctx *ctx) {
  pbn_r_engine *e = (pbn_r_engine *)eng;
  (void)lo;
  SEXP a1 = PROTECT(Rf_ScalarReal((double)steps)), a2 = PROTECT(Rf_ScalarLogical(count));
  SEXP call = PROTECT(Rf_lang3(e->fun, a1, a2));
  int err = 0;
  SEXP r = R_tryEval(call, e->rho, &err);
  if (err) {
    UNPROTECT(3);
    return sbg_fail(ctx, SBG_ERR_INTERNAL, "pbnSteadyState: the BPPARAM round failed");
  }
  PROTECT(r);
  sbg_status st = SBG_OK;
  if (TYPEOF(r) == STRSXP && XLENGTH(r) >= 1 && STRING_ELT(r, 0) == NA_STRING) {
    st = sbg_fail(ctx, SBG_ERR_INTERRUPTED, "pbnSteadyState: interrupted");
  } else if (TYPEOF(r) == STRSXP && XLENGTH(r) >= 1) {
    e->worker_failed = 1;
    st = sbg_fail(ctx, SBG_ERR_INTERNAL, "%s", CHAR(STRING_ELT(r, 0)));
  } else if (count) {
    const R_xlen_t per = (R_xlen_t)e->n_sets * SBG_PBN_NSUM;
    if (TYPEOF(r) != VECSXP) {
      st = sbg_fail(ctx, SBG_ERR_INTERNAL, "pbnSteadyState: a BPPARAM round returned no sums");
    } else {
      memset(sums, 0, sizeof(uint64_t) * (size_t)per);
      for (R_xlen_t w = 0; w < XLENGTH(r) && st == SBG_OK; w++) {
        SEXP x = VECTOR_ELT(r, w);
        if (TYPEOF(x) != RAWSXP || XLENGTH(x) != per * 8) {
          st = sbg_fail(ctx, SBG_ERR_INTERNAL, "pbnSteadyState: worker %d returned malformed sums", (int)w + 1);
          break;
        }
        uint64_t v;
        for (R_xlen_t i = 0; i < per; i++) {
          memcpy(&v, RAW(x) + 8 * i, 8);
          sums[i] += v;
        }
      }
    }
  }
  UNPROTECT(4);
  if (st != SBG_OK) return st;
  return sbg_poll(ctx, hi);
}

SEXP ffi_pbn_steady_bp(SEXP net_l, SEXP sets_l, SEXP params, SEXP fun, SEXP rho, SEXP verbose) {
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  net_from_list(net_l, &net);
  sets_from_list(sets_l, net.n_words, &sets);
  sbg_pbn_params p;
  params_from_real(params, &net, &p);
  SBG_ASSERT(Rf_isFunction(fun) && TYPEOF(rho) == ENVSXP);
  sbg_pbn_result out;
  SEXP ans = PROTECT(result_alloc(sets.n_sets, &out));
  pbn_r_engine e;
  memset(&e, 0, sizeof e);
  e.base.self = &e;
  e.base.advance = pbn_r_advance;
  e.fun = fun;
  e.rho = rho;
  e.n_sets = sets.n_sets;
  SEXP threads = PROTECT(Rf_ScalarInteger(1)), device = PROTECT(Rf_ScalarInteger(0));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "pbnSteadyState");
  sbg_status st = sbg_pbn_two_state(&e.base, &p, sets.n_sets, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK && e.worker_failed) {
    UNPROTECT(3);
    return R_NilValue;  /* the driver has freed its buffers; R raises the worker's error */
  }
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  result_finish(ans, &out);
  UNPROTECT(3);
  return ans;
}

/* States as pairs of 32-bit integers: (steps+1) * n_chains * n_words * 2. */
SEXP ffi_pbn_simulate(SEXP net_l, SEXP seed, SEXP chains, SEXP steps, SEXP from, SEXP gpu,
                      SEXP threads, SEXP device) {
  sbg_pbn_net net;
  net_from_list(net_l, &net);
  SBG_ASSERT(TYPEOF(seed) == REALSXP && TYPEOF(chains) == REALSXP && TYPEOF(steps) == REALSXP);
  SBG_ASSERT(TYPEOF(gpu) == LGLSXP);
  int64_t nc = (int64_t)REAL(chains)[0], ns = (int64_t)REAL(steps)[0];
  SBG_ASSERT(nc >= 1 && ns >= 0);
  const uint64_t *f = NULL;
  if (!Rf_isNull(from)) {
    SBG_ASSERT(XLENGTH(from) == 2 * net.n_words);
    f = u64_from_pairs(from);
  }
  R_xlen_t words = (R_xlen_t)(nc * (ns + 1) * net.n_words);
  SEXP ans = PROTECT(Rf_allocVector(INTSXP, 2 * words));
  SEXP verbose = PROTECT(Rf_ScalarLogical(FALSE));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "pbnSimulate");
  uint64_t *out = (uint64_t *)R_alloc((size_t)words, sizeof(uint64_t));
  sbg_status st = LOGICAL(gpu)[0]
                      ? sbg_pbn_simulate_gpu(&net, (uint64_t)REAL(seed)[0], nc, ns, f, out, &ctx)
                      : sbg_pbn_simulate_cpu(&net, (uint64_t)REAL(seed)[0], nc, ns, f, out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  uint32_t *v = (uint32_t *)INTEGER(ans);
  for (R_xlen_t i = 0; i < words; i++) {
    v[2 * i] = (uint32_t)out[i];
    v[2 * i + 1] = (uint32_t)(out[i] >> 32);
  }
  UNPROTECT(2);
  return ans;
}

/* list(pi, c(iterations, delta)) */
SEXP ffi_pbn_exact(SEXP net_l, SEXP p, SEXP tol, SEXP max_iter, SEXP gpu, SEXP threads, SEXP device,
                   SEXP verbose) {
  sbg_pbn_net net;
  net_from_list(net_l, &net);
  SBG_ASSERT(TYPEOF(p) == REALSXP && TYPEOF(tol) == REALSXP && TYPEOF(max_iter) == REALSXP);
  SBG_ASSERT(net.n <= SBG_PBN_EXACT_MAX_N);
  SBG_ASSERT(TYPEOF(gpu) == LGLSXP);
  const double *fun_prob = real_el(net_l, NET_FUN_PROB, net.fun_start[net.n]);
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(ans, 0, Rf_allocVector(REALSXP, (R_xlen_t)1 << net.n));
  SET_VECTOR_ELT(ans, 1, Rf_allocVector(REALSXP, 2));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "exact");
  double *it = REAL(VECTOR_ELT(ans, 1));
  sbg_status st = (LOGICAL(gpu)[0] ? sbg_pbn_exact_gpu : sbg_pbn_exact_cpu)(
      &net, fun_prob, REAL(p)[0], REAL(tol)[0], (int64_t)REAL(max_iter)[0], REAL(VECTOR_ELT(ans, 0)),
      &it[0], &it[1], &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(1);
  return ans;
}
