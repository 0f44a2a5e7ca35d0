/* .Call glue of pbnSteadyState() and pbnSimulate(): the flattened network
 * and sets built by R (R/pbnSteadyState.R, pbn_flatten()) become the plain C
 * structs of pbn.h; results are written into R vectors. */
#include <stdint.h>
#include <string.h>

#include "glue.h"
#include "pbn.h"
#include "pbn_bits.h"

/* The flattened network, sets and parameters come from R lists that a user
 * may have edited (through the pbn object): every size, index range and
 * probability threshold is checked, and a failure is a classed input error
 * (sysbioGPU_error_input), never an assertion. */
#define PBN_CHECK(cond)                                                               \
  do {                                                                                \
    if (!(cond)) sbg_stop(SBG_ERR_INPUT, "pbn: invalid network or sets (" #cond "): " \
                                         "build the network with pbn() or readPBN()"); \
  } while (0)

/* The element `name` of the flattened network or sets (by name: a list a
 * user edited may lack it, which is an input error like any other). */
static SEXP pbn_el(SEXP l, const char *name, SEXPTYPE type, R_xlen_t len) {
  PBN_CHECK(TYPEOF(l) == VECSXP);
  SEXP x = sbg_elt_or_null(l, name);
  PBN_CHECK(x != NULL && (SEXPTYPE)TYPEOF(x) == type && (len < 0 || XLENGTH(x) == len));
  return x;
}

static const int32_t *int_el(SEXP l, const char *name, R_xlen_t len) {
  return (const int32_t *)INTEGER(pbn_el(l, name, INTSXP, len));
}

static const double *real_el(SEXP l, const char *name, R_xlen_t len) {
  return REAL(pbn_el(l, name, REALSXP, len));
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
  memset(net, 0, sizeof *net);
  net->n = int_el(l, "n", 1)[0];
  PBN_CHECK(net->n >= 1);
  net->n_words = (net->n + 63) / 64;
  net->fun_start = int_el(l, "fun_start", net->n + 1);
  int32_t nf = net->fun_start[net->n];
  PBN_CHECK(nf >= net->n);
  net->fun_thresh = u64_from_real(real_el(l, "fun_thresh", nf), nf);
  net->fun_k = int_el(l, "fun_k", nf);
  net->in_start = int_el(l, "in_start", nf);
  net->inputs = int_el(l, "inputs", -1);
  R_xlen_t n_in = XLENGTH(pbn_el(l, "inputs", INTSXP, -1));
  const double *ts = real_el(l, "tab_start", nf);
  int64_t *tab_start = (int64_t *)R_alloc((size_t)(nf > 0 ? nf : 1), sizeof(int64_t));
  R_xlen_t n_tab = XLENGTH(pbn_el(l, "tables", INTSXP, -1));
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
  net->tables = (const uint32_t *)int_el(l, "tables", -1);
  net->sel_rank = int_el(l, "sel_rank", net->n);
  net->n_sel_total = int_el(l, "n_sel_total", 1)[0];
  for (int32_t i = 0; i < net->n; i++) PBN_CHECK(net->sel_rank[i] >= -1 && net->sel_rank[i] < net->n_sel_total);
  SEXP pn = pbn_el(l, "pert_node", INTSXP, -1);
  net->n_pert_total = (int32_t)XLENGTH(pn);
  net->pert_node = int_el(l, "pert_node", -1);
  for (int32_t j = 0; j < net->n_pert_total; j++) PBN_CHECK(net->pert_node[j] >= -1 && net->pert_node[j] < net->n);
  net->gap_thresh = u64_from_real(real_el(l, "gap_thresh", net->n_pert_total + 1), net->n_pert_total + 1);
  SEXP nof = pbn_el(l, "node_of_full", INTSXP, -1);
  net->n_total = (int32_t)XLENGTH(nof);
  PBN_CHECK(net->n_total >= net->n);
  net->node_of_full = int_el(l, "node_of_full", -1);
  for (int32_t j = 0; j < net->n_total; j++) PBN_CHECK(net->node_of_full[j] >= -1 && net->node_of_full[j] < net->n);
  net->async = int_el(l, "async", 1)[0];
  net->first_thresh = u64_from_real(real_el(l, "first_thresh", net->n_pert_total + 1),
                                    net->n_pert_total + 1);
  PBN_CHECK(net->first_thresh[0] == 4294967296ULL && (net->n_pert_total == 0 || net->first_thresh[net->n_pert_total] == 0));
  SEXP sk = pbn_el(l, "skip_thresh", REALSXP, -1);
  net->n_skip = (int32_t)XLENGTH(sk) - 1;
  PBN_CHECK(net->n_skip >= 1 && net->n_skip <= 4096);
  net->skip_thresh = u64_from_real(real_el(l, "skip_thresh", -1), net->n_skip + 1);
  PBN_CHECK(net->skip_thresh[0] == 4294967296ULL);
  for (int32_t j = 0; j < net->n_skip; j++) PBN_CHECK(net->skip_thresh[j + 1] <= net->skip_thresh[j]);
  /* a function step is deterministic: its fixed points hold to the next perturbation */
  net->det = !net->async;
  for (int32_t i = 0; i < net->n; i++) if (net->sel_rank[i] >= 0) net->det = 0;
}

static void sets_from_list(SEXP l, int32_t n_words, sbg_pbn_sets *s) {
  SEXP st = pbn_el(l, "start", INTSXP, -1);
  PBN_CHECK(XLENGTH(st) >= 1);
  s->n_sets = (int32_t)XLENGTH(st) - 1;
  s->set_start = INTEGER(st);
  int32_t ne = s->set_start[s->n_sets];
  s->word = int_el(l, "word", ne);
  for (int32_t e = 0; e < ne; e++) PBN_CHECK(s->word[e] >= 0 && s->word[e] < n_words);
  s->pos = u64_from_pairs(pbn_el(l, "pos", INTSXP, 2 * (R_xlen_t)ne));
  s->neg = u64_from_pairs(pbn_el(l, "neg", INTSXP, 2 * (R_xlen_t)ne));
}

/* data = list(net, sets): the network always, the sets where `sets`. */
static void data_decode(SEXP data, int with_sets, sbg_pbn_net *net, sbg_pbn_sets *sets) {
  net_from_list(sbg_elt(data, "net"), net);
  if (with_sets) sets_from_list(sbg_elt(data, "sets"), net->n_words, sets);
}

/* params of the two-state method (pbn_params() in R); `skip` FALSE: no
 * fixed-point skip (for the tests: same results). */
static void params_decode(SEXP params, sbg_pbn_net *net, sbg_pbn_params *p) {
  memset(p, 0, sizeof *p);
  p->seed = (uint64_t)sbg_real_elt(params, "seed");
  p->n_chains = (int64_t)sbg_real_elt(params, "chains");
  p->r = sbg_real_elt(params, "r");
  p->z = sbg_real_elt(params, "z");
  p->epsilon = sbg_real_elt(params, "epsilon");
  p->psi0 = (int64_t)sbg_real_elt(params, "psi0");
  p->rhat_max = sbg_real_elt(params, "rhatMax");
  p->max_len = (int64_t)sbg_real_elt(params, "maxLen");
  p->min_switches = (int64_t)sbg_real_elt(params, "minSwitches");
  p->small = sbg_lgl_elt(params, "small");
  p->bits = sbg_lgl_elt(params, "bits");
  if (!sbg_lgl_elt(params, "skip")) net->det = 0;
  p->t = sbg_real_elt(params, "t");
  PBN_CHECK(p->n_chains >= 2 && p->psi0 >= 2 && p->max_len >= 4 && p->t > 0 && p->r > 0);
}

/* What every entry decodes: the network (and sets), the two-state
 * parameters and the run. */
typedef struct pbn_call {
  sbg_pbn_net net;
  sbg_pbn_sets sets;
  sbg_pbn_params p;
  sbg_run r;
} pbn_call;

static void call_decode(SEXP data, SEXP params, SEXP run, pbn_call *c) {
  data_decode(data, 1, &c->net, &c->sets);
  params_decode(params, &c->net, &c->p);
  sbg_run_decode(run, &c->r);
}

static const char *const result_names[] = {"prob", "alpha", "beta", "rhat", "N", "M", "samples",
                                           "converged", "steps", "burnin", "psi", "se"};

static SEXP result_alloc(int32_t S, sbg_pbn_result *out) {
  SEXP ans = PROTECT(sbg_named_list(12, result_names));
  double **cols[] = {&out->prob, &out->alpha, &out->beta, &out->rhat, &out->n_req, &out->burnin_req,
                     &out->samples};
  for (int j = 0; j < 7; j++) *cols[j] = REAL(sbg_set(ans, result_names[j], Rf_allocVector(REALSXP, S)));
  out->converged = LOGICAL(sbg_set(ans, "converged", Rf_allocVector(LGLSXP, S)));
  out->se = REAL(sbg_set(ans, "se", Rf_allocVector(REALSXP, S)));
  UNPROTECT(1);
  return ans;
}

/* The engine's status (an error does not return), then the scalars. */
static void result_finish(SEXP ans, const sbg_pbn_result *out, sbg_status st, const sbg_ctx *ctx) {
  if (st != SBG_OK) sbg_stop(st, ctx->errbuf);
  sbg_set(ans, "steps", Rf_ScalarReal(out->steps_per_chain));
  sbg_set(ans, "burnin", Rf_ScalarReal(out->burnin));
  sbg_set(ans, "psi", Rf_ScalarReal(out->psi));
}

/* data = list(net, sets), params (pbn_params()), run: several devices
 * share the chains. */
SEXP ffi_pbn_steady(SEXP data, SEXP params, SEXP run) {
  pbn_call c;
  call_decode(data, params, run, &c);
  SBG_ASSERT(c.r.n_devices <= SBG_PBN_MAX_DEVICES);
  sbg_pbn_result out;
  SEXP ans = PROTECT(result_alloc(c.sets.n_sets, &out));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_from_run(&ctx, &pr, &c.r, "pbnSteadyState");
  sbg_status st = (c.r.gpu ? sbg_pbn_steady_gpu : sbg_pbn_steady_cpu)(&c.net, &c.sets, &c.p, &out, &ctx);
  sbg_progress_end(&pr);
  result_finish(ans, &out, st, &ctx);
  UNPROTECT(1);
  return ans;
}

/* One block of chains on an R worker (pbn_block() in R/pbnSteadyState.R):
 * data = list(net, sets, state: raw or NULL to start from the seed),
 * params with range = c(c0, c1) (0-based, c1 exclusive), steps and count;
 * run on its first device.  Returns list(state (raw), sums (raw: n_sets *
 * SBG_PBN_NSUM uint64, NULL without count)). */
SEXP ffi_pbn_block(SEXP data, SEXP params, SEXP run) {
  pbn_call c;
  call_decode(data, params, run, &c);
  sbg_pbn_net net = c.net;
  sbg_pbn_sets sets = c.sets;
  sbg_pbn_params p = c.p;
  sbg_run r = c.r;
  SEXP range = sbg_vec_elt(params, "range", REALSXP, 2);
  int64_t c0 = (int64_t)REAL(range)[0], c1 = (int64_t)REAL(range)[1];
  SBG_ASSERT(c0 >= 0 && c1 > c0 && c1 <= p.n_chains);
  size_t bytes = sbg_pbn_block_state_bytes(&net, c1 - c0);
  SEXP state = sbg_elt(data, "state");
  SBG_ASSERT(Rf_isNull(state) || (TYPEOF(state) == RAWSXP && (size_t)XLENGTH(state) == bytes));
  double steps = sbg_real_elt(params, "steps");
  SBG_ASSERT(steps >= 0 && steps < 2147483648.0);
  int cnt = sbg_lgl_elt(params, "count");
  const char *nm[] = {"state", "sums"};
  SEXP ans = PROTECT(sbg_named_list(2, nm));
  unsigned char *state_out = RAW(sbg_set(ans, "state", Rf_allocVector(RAWSXP, (R_xlen_t)bytes)));
  R_xlen_t n_sums = (R_xlen_t)sets.n_sets * SBG_PBN_NSUM;
  if (cnt) sbg_set(ans, "sums", Rf_allocVector(RAWSXP, n_sums * 8));
  uint64_t *sums = cnt ? (uint64_t *)R_alloc((size_t)(n_sums > 0 ? n_sums : 1), 8) : NULL;
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_setup(&ctx, &pr, r.threads, r.devices, 1, 0, "pbnSteadyState");
  const unsigned char *in = Rf_isNull(state) ? NULL : RAW(state);
  sbg_status st = (r.gpu ? sbg_pbn_block_gpu : sbg_pbn_block_cpu)(&net, &sets, &p, c0, c1, in, (int64_t)steps,
                                                                   cnt, sums, state_out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  if (cnt) memcpy(RAW(sbg_elt(ans, "sums")), sums, (size_t)n_sums * 8);
  UNPROTECT(1);
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

/* data = list(net, sets), params, run with round (the R function) and env
 * (where to call it). */
SEXP ffi_pbn_steady_bp(SEXP data, SEXP params, SEXP run) {
  pbn_call c;
  call_decode(data, params, run, &c);
  SEXP fun = sbg_elt(run, "round"), rho = sbg_elt(run, "env");
  SBG_ASSERT(Rf_isFunction(fun) && TYPEOF(rho) == ENVSXP);
  sbg_pbn_result out;
  SEXP ans = PROTECT(result_alloc(c.sets.n_sets, &out));
  pbn_r_engine e;
  memset(&e, 0, sizeof e);
  e.base.self = &e;
  e.base.advance = pbn_r_advance;
  e.fun = fun;
  e.rho = rho;
  e.n_sets = c.sets.n_sets;
  sbg_ctx ctx;
  sbg_progress pr;
  const int no_device = 0;
  sbg_ctx_setup(&ctx, &pr, 1, &no_device, 1, c.r.verbose, "pbnSteadyState");
  sbg_status st = sbg_pbn_two_state(&e.base, &c.p, c.sets.n_sets, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK && e.worker_failed) {
    UNPROTECT(1);
    return R_NilValue;  /* the driver has freed its buffers; R raises the worker's error */
  }
  result_finish(ans, &out, st, &ctx);
  UNPROTECT(1);
  return ans;
}

/* data = list(net, from: NULL or the start state as (low, high) pairs),
 * params = list(seed, chains, steps, bits: the bit-sliced engine).  list(states): pairs of 32-bit
 * integers, (steps+1) * n_chains * n_words * 2. */
SEXP ffi_pbn_simulate(SEXP data, SEXP params, SEXP run) {
  sbg_pbn_net net;
  data_decode(data, 0, &net, NULL);
  sbg_run r;
  sbg_run_decode(run, &r);
  uint64_t seed = (uint64_t)sbg_real_elt(params, "seed");
  int64_t nc = (int64_t)sbg_real_elt(params, "chains"), ns = (int64_t)sbg_real_elt(params, "steps");
  SBG_ASSERT(nc >= 1 && ns >= 0);
  SEXP from = sbg_elt(data, "from");
  const uint64_t *f = NULL;
  if (!Rf_isNull(from)) {
    SBG_ASSERT(XLENGTH(from) == 2 * net.n_words);
    f = u64_from_pairs(from);
  }
  R_xlen_t words = (R_xlen_t)(nc * (ns + 1) * net.n_words);
  const char *nm[] = {"states"};
  SEXP ans = PROTECT(sbg_named_list(1, nm));
  uint32_t *v = (uint32_t *)INTEGER(sbg_set(ans, "states", Rf_allocVector(INTSXP, 2 * words)));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_setup(&ctx, &pr, r.threads, r.devices, 1, 0, "pbnSimulate");
  uint64_t *out = (uint64_t *)R_alloc((size_t)words, sizeof(uint64_t));
  sbg_status st = sbg_lgl_elt(params, "bits")
                      ? (r.gpu ? sbg_pbn_bits_simulate_gpu : sbg_pbn_bits_simulate_cpu)(&net, seed, nc, ns, f, out, &ctx)
                      : (r.gpu ? sbg_pbn_simulate_gpu : sbg_pbn_simulate_cpu)(&net, seed, nc, ns, f, out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  for (R_xlen_t i = 0; i < words; i++) {
    v[2 * i] = (uint32_t)out[i];
    v[2 * i + 1] = (uint32_t)(out[i] >> 32);
  }
  UNPROTECT(1);
  return ans;
}

/* data = list(net), params = list(p, tol, maxIter, direct), run on its
 * first device.  list(pi, iterations, delta, direct): direct = TRUE asks
 * for the direct solve (small networks, on the CPU), which falls back to
 * power iteration when the chain has several closed classes. */
SEXP ffi_pbn_exact(SEXP data, SEXP params, SEXP run) {
  sbg_pbn_net net;
  data_decode(data, 0, &net, NULL);
  SEXP net_l = sbg_elt(data, "net");
  sbg_run r;
  sbg_run_decode(run, &r);
  SBG_ASSERT(net.n <= SBG_PBN_EXACT_MAX_N);
  const double *fun_prob = real_el(net_l, "fun_prob", net.fun_start[net.n]);
  const char *nm[] = {"pi", "iterations", "delta", "direct"};
  SEXP ans = PROTECT(sbg_named_list(4, nm));
  double *pi = REAL(sbg_set(ans, "pi", Rf_allocVector(REALSXP, (R_xlen_t)1 << net.n)));
  double it[2] = {0, 0};
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_setup(&ctx, &pr, r.threads, r.devices, 1, r.verbose, "exact");
  int solved = 0;
  sbg_status st = SBG_OK;
  if (sbg_lgl_elt(params, "direct") && net.n <= SBG_PBN_DIRECT_MAX_N)
    st = sbg_pbn_exact_direct(&net, fun_prob, sbg_real_elt(params, "p"), pi, &solved, &ctx);
  if (st == SBG_OK && !solved)
    st = (r.gpu ? sbg_pbn_exact_gpu : sbg_pbn_exact_cpu)(
        &net, fun_prob, sbg_real_elt(params, "p"), sbg_real_elt(params, "tol"),
        (int64_t)sbg_real_elt(params, "maxIter"), pi, &it[0], &it[1], &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  sbg_set(ans, "iterations", Rf_ScalarReal(it[0]));
  sbg_set(ans, "delta", Rf_ScalarReal(it[1]));
  sbg_set(ans, "direct", Rf_ScalarLogical(solved));
  UNPROTECT(1);
  return ans;
}
