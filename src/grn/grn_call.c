/* .Call glue of grnEvolve(), grnSimulate() and their internal helpers
 * (R/grnEvolve.R): R vectors -> sbg_grn_problem / sbg_grn_params, engine
 * call, results back as R vectors.  R has validated every argument. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"
#include "grn.h"

/* Signed n x n integer matrices (column-major, [i + j n] = link from j to
 * target i) to the engines' activator and repressor masks. */
static void links_to_masks(const int *links, int n, int w, uint32_t *act, uint32_t *rep,
                           int *n_act, int *n_rep) {
  memset(act, 0, (size_t)n * w * sizeof(uint32_t));
  memset(rep, 0, (size_t)n * w * sizeof(uint32_t));
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++) {
      int v = links[i + (R_xlen_t)j * n];
      uint32_t bit = 1u << (j & 31);
      if (v == 1) { act[i * w + (j >> 5)] |= bit; if (n_act) (*n_act)++; }
      if (v == -1) { rep[i * w + (j >> 5)] |= bit; if (n_rep) (*n_rep)++; }
    }
}

static void state_to_bits(SEXP x, int n, int w, uint32_t *bits) {
  SBG_ASSERT(TYPEOF(x) == INTSXP && XLENGTH(x) == n);
  memset(bits, 0, (size_t)w * sizeof(uint32_t));
  for (int i = 0; i < n; i++)
    if (INTEGER(x)[i]) bits[i >> 5] |= 1u << (i & 31);
}

/* list(network, from, to, steps, wn, wl, maxIn, allowed) -> problem; the
 * arrays live in R_alloc memory until the .Call returns. */
static void problem_from_list(SEXP p, sbg_grn_problem *pb) {
  SEXP net = sbg_elt(p, "network");
  SBG_ASSERT(TYPEOF(net) == INTSXP);
  int n = Rf_nrows(net);
  SBG_ASSERT(n >= 1 && n <= SBG_GRN_MAX_GENES && Rf_ncols(net) == n);
  int w = (n + 31) / 32;
  uint32_t *act = (uint32_t *)R_alloc((size_t)n * w, sizeof(uint32_t));
  uint32_t *rep = (uint32_t *)R_alloc((size_t)n * w, sizeof(uint32_t));
  uint32_t *from = (uint32_t *)R_alloc(w, sizeof(uint32_t));
  uint32_t *to = (uint32_t *)R_alloc(w, sizeof(uint32_t));
  memset(pb, 0, sizeof(*pb));
  pb->n = n;
  pb->w = w;
  links_to_masks(INTEGER(net), n, w, act, rep, &pb->n_ref_act, &pb->n_ref_rep);
  state_to_bits(sbg_elt(p, "from"), n, w, from);
  state_to_bits(sbg_elt(p, "to"), n, w, to);
  pb->ref_act = act;
  pb->ref_rep = rep;
  pb->from = from;
  pb->to = to;
  pb->steps = sbg_int_elt(p, "steps");
  SBG_ASSERT(pb->steps >= 1);
  pb->wn = (int64_t)sbg_real_elt(p, "wn");
  pb->wl = (int64_t)sbg_real_elt(p, "wl");
  pb->max_in = sbg_int_elt(p, "maxIn");
  SEXP allowed = sbg_elt(p, "allowed");
  SBG_ASSERT(TYPEOF(allowed) == INTSXP && XLENGTH(allowed) >= 1 && XLENGTH(allowed) <= 4);
  pb->n_allowed = (int)XLENGTH(allowed);
  for (int a = 0; a < pb->n_allowed; a++) {
    SBG_ASSERT(INTEGER(allowed)[a] >= 0 && INTEGER(allowed)[a] <= 3);
    pb->allowed[a] = (uint8_t)INTEGER(allowed)[a];
  }
  SEXP path = sbg_elt_or_null(p, "evalPath"); /* CPU evaluation path, tests only */
  if (path) {
    SBG_ASSERT(TYPEOF(path) == INTSXP && XLENGTH(path) == 1);
    pb->eval_path = INTEGER(path)[0];
  }
}

/* list(pop, islands, ...) -> params; R has validated every element. */
static void params_from_list(SEXP ga, sbg_grn_params *gp) {
  memset(gp, 0, sizeof(*gp));
  gp->pop = (int64_t)sbg_real_elt(ga, "pop");
  gp->islands = sbg_int_elt(ga, "islands");
  gp->migration_interval = sbg_int_elt(ga, "migrationInterval");
  gp->migrants = sbg_int_elt(ga, "migrants");
  gp->roulette = sbg_int_elt(ga, "roulette");
  gp->p_link = sbg_real_elt(ga, "pLink");
  gp->p_rule = sbg_real_elt(ga, "pRule");
  gp->generations = (int64_t)sbg_real_elt(ga, "generations");
  /* R clamps the target to the largest score; a value past int64 would
   * make the cast undefined, so the glue clamps too */
  double target = sbg_real_elt(ga, "target");
  gp->target = !(target < 0x1p62) ? ((int64_t)1 << 62) : (int64_t)target;
  gp->time_limit = sbg_real_elt(ga, "timeLimit");
  gp->seed = (uint64_t)sbg_real_elt(ga, "seed");
  SEXP blocks = sbg_elt_or_null(ga, "blocks"); /* CPU blocks in lockstep, tests only */
  gp->blocks = blocks ? Rf_asInteger(blocks) : 1;
  SBG_ASSERT(gp->islands >= 1 && gp->pop % gp->islands == 0);
  SBG_ASSERT((gp->pop / gp->islands) % 2 == 0 && gp->pop / gp->islands >= 4);
  SBG_ASSERT(gp->migrants >= 0 && gp->migrants < gp->pop / gp->islands);
  SBG_ASSERT(gp->migration_interval >= 1 && gp->generations >= 0);
}

/* What evolve and a round decode: the problem, the GA's parameters and
 * the run. */
static void call_decode(SEXP data, SEXP params, SEXP run, sbg_grn_problem *pb, sbg_grn_params *gp,
                        sbg_run *r) {
  problem_from_list(data, pb);
  params_from_list(params, gp);
  sbg_run_decode(run, r);
}

/* The fitness history of a run: (generations + 1) x islands, the engines'
 * layout, reserved with malloc and never cleared, so that only the pages
 * of the generations that run are ever touched (committed): a cap of 1e9
 * generations cut short by a time limit or the target costs what ran, not
 * 8 GB per island.  Held by an external pointer, so that R frees it on
 * every path (an error, an interrupt).  The rows that ran are copied to an
 * R matrix at the end. */
static SEXP history_reserve(int64_t rows, int islands, double **at) {
  double bytes = (double)rows * islands * sizeof(double);
  void *h = NULL;
  SEXP holder = bytes <= (double)SIZE_MAX ? sbg_scratch((size_t)rows * islands * sizeof(double), &h)
                                          : R_NilValue;
  if (!h) {
    char msg[200];
    snprintf(msg, sizeof msg, "cannot reserve %.3g GB for the fitness history (%.0f generations x %d "
             "islands); lower `generations`", bytes / 1e9, (double)rows - 1, islands);
    sbg_stop(SBG_ERR_ALLOC, msg);
  }
  *at = (double *)h;
  return holder;
}

/* data: the problem (problem_from_list()), params: the GA's (params_from
 * _list()), run: its devices share the islands.  A named list. */
SEXP ffi_grn_evolve(SEXP data, SEXP params, SEXP run) {
  int nprot = 0;
  sbg_grn_problem pb;
  sbg_grn_params gp;
  sbg_run r;
  call_decode(data, params, run, &pb, &gp, &r);

  int n = pb.n;
  const char *nm[] = {"links", "rules", "history", "generations", "score", "dn", "dl", "stop"};
  SEXP ans = PROTECT(sbg_named_list(8, nm)); nprot++;
  double *reserved = NULL;
  int64_t rows = gp.generations + 1;
  SEXP hptr = PROTECT(history_reserve(rows, gp.islands, &reserved)); nprot++;
  sbg_grn_result out;
  memset(&out, 0, sizeof(out));
  out.best_links = INTEGER(sbg_set(ans, "links", Rf_allocMatrix(INTSXP, n, n)));
  out.best_rules = INTEGER(sbg_set(ans, "rules", Rf_allocVector(INTSXP, n)));
  out.history = reserved;

  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_from_run(&ctx, &pr, &r, "grnEvolve");
  sbg_status st = r.gpu ? sbg_grn_evolve_gpu(&pb, &gp, &out, &ctx)
                        : sbg_grn_evolve_cpu(&pb, &gp, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  SBG_ASSERT(out.generations_run >= 0 && out.generations_run < rows);
  int64_t ran = out.generations_run + 1;
  SEXP hist = sbg_set(ans, "history", Rf_allocMatrix(REALSXP, (int)ran, gp.islands));
  for (int isl = 0; isl < gp.islands; isl++)
    memcpy(REAL(hist) + (int64_t)isl * ran, reserved + (int64_t)isl * rows, (size_t)ran * sizeof(double));
  sbg_scratch_release(hptr);
  sbg_set(ans, "generations", Rf_ScalarReal((double)out.generations_run));
  sbg_set(ans, "score", Rf_ScalarReal((double)out.best_score));
  sbg_set(ans, "dn", Rf_ScalarInteger(out.best_dn));
  sbg_set(ans, "dl", Rf_ScalarInteger(out.best_dl));
  sbg_set(ans, "stop", Rf_ScalarInteger(out.stop_reason));
  UNPROTECT(nprot);
  return ans;
}

/* A state as an R list(act, rep, rule, score) of `count` individuals:
 * masks as integers (the same 32 bits), rules as raw, scores as doubles. */
static SEXP state_alloc(int64_t count, int n, int w, sbg_grn_state *s) {
  const char *nm[] = {"act", "rep", "rule", "score"};
  SEXP x = PROTECT(sbg_named_list(4, nm));
  s->act = (uint32_t *)INTEGER(sbg_set(x, "act", Rf_allocVector(INTSXP, (R_xlen_t)(count * n * w))));
  s->rep = (uint32_t *)INTEGER(sbg_set(x, "rep", Rf_allocVector(INTSXP, (R_xlen_t)(count * n * w))));
  s->rule = RAW(sbg_set(x, "rule", Rf_allocVector(RAWSXP, (R_xlen_t)(count * n))));
  s->score = REAL(sbg_set(x, "score", Rf_allocVector(REALSXP, (R_xlen_t)count)));
  UNPROTECT(1);
  return x;
}

static void state_view(SEXP x, int64_t count, int n, int w, sbg_grn_state *s) {
  s->act = (uint32_t *)INTEGER(sbg_vec_elt(x, "act", INTSXP, (R_xlen_t)(count * n * w)));
  s->rep = (uint32_t *)INTEGER(sbg_vec_elt(x, "rep", INTSXP, (R_xlen_t)(count * n * w)));
  s->rule = RAW(sbg_vec_elt(x, "rule", RAWSXP, (R_xlen_t)(count * n)));
  s->score = REAL(sbg_vec_elt(x, "score", REALSXP, (R_xlen_t)count));
}

/* One BPPARAM worker's round: data = the problem with state (NULL: draw
 * generation 0) and incoming (the migrants, NULL: none); params = the GA's
 * with block = c(first, count) of islands and gens = c(g_from, g_to); run
 * on its first device.  list(state, outgoing, history, gDone, stopped,
 * bestIndex, bestScore). */
SEXP ffi_grn_round(SEXP data, SEXP params, SEXP run) {
  sbg_grn_problem pb;
  sbg_grn_params gp;
  sbg_run r;
  call_decode(data, params, run, &pb, &gp, &r);
  SEXP block = sbg_vec_elt(params, "block", INTSXP, 2), gens = sbg_vec_elt(params, "gens", REALSXP, 2);
  SEXP state = sbg_elt(data, "state"), incoming = sbg_elt(data, "incoming");
  sbg_grn_round rd;
  memset(&rd, 0, sizeof(rd));
  rd.first = INTEGER(block)[0];
  rd.count = INTEGER(block)[1];
  SBG_ASSERT(rd.first >= 0 && rd.count >= 1 && rd.first + rd.count <= gp.islands);
  rd.g_from = (int64_t)REAL(gens)[0];
  rd.g_to = (int64_t)REAL(gens)[1];
  SBG_ASSERT(rd.g_from >= 0 && rd.g_to >= rd.g_from && rd.g_to <= gp.generations);
  rd.init = Rf_isNull(state);
  SBG_ASSERT(!rd.init || rd.g_from == 0);
  const int n = pb.n, w = pb.w;
  const int64_t size = gp.pop / gp.islands, np = size * rd.count;
  const int K = gp.islands > 1 ? gp.migrants : 0;
  const char *nm[] = {"state", "outgoing", "history", "gDone", "stopped", "bestIndex", "bestScore"};
  SEXP ans = PROTECT(sbg_named_list(7, nm));
  sbg_set(ans, "state", state_alloc(np, n, w, &rd.state));
  if (!rd.init) {
    sbg_grn_state in;
    state_view(state, np, n, w, &in);
    memcpy(rd.state.act, in.act, (size_t)(np * n * w) * sizeof(uint32_t));
    memcpy(rd.state.rep, in.rep, (size_t)(np * n * w) * sizeof(uint32_t));
    memcpy(rd.state.rule, in.rule, (size_t)(np * n));
    memcpy(rd.state.score, in.score, (size_t)np * sizeof(double));
  }
  sbg_grn_state inc;
  if (!Rf_isNull(incoming)) {
    state_view(incoming, K, n, w, &inc);
    rd.incoming = &inc;
  }
  sbg_set(ans, "outgoing", state_alloc(K, n, w, &rd.outgoing));
  rd.history = REAL(sbg_set(ans, "history", Rf_allocMatrix(REALSXP, (int)(rd.g_to - rd.g_from + 1), rd.count)));

  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_setup(&ctx, &pr, r.threads, r.devices, 1, 0, "grnEvolve");
  sbg_status st = r.gpu ? sbg_grn_round_gpu(&pb, &gp, &rd, &ctx) : sbg_grn_round_cpu(&pb, &gp, &rd, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  sbg_set(ans, "gDone", Rf_ScalarReal((double)rd.g_done));
  sbg_set(ans, "stopped", Rf_ScalarLogical(rd.stopped));
  sbg_set(ans, "bestIndex", Rf_ScalarReal((double)rd.best_index));
  sbg_set(ans, "bestScore", Rf_ScalarReal((double)rd.best_score));
  UNPROTECT(1);
  return ans;
}

/* Individual k (0-based) of a state of `count`: list(links, rules, score,
 * dn, dl), as ffi_grn_evolve gives its best. */
SEXP ffi_grn_decode(SEXP problem, SEXP state, SEXP count, SEXP k) {
  sbg_grn_problem pb;
  problem_from_list(problem, &pb);
  const int n = pb.n;
  int64_t cnt = (int64_t)Rf_asReal(count), kk = (int64_t)Rf_asReal(k);
  SBG_ASSERT(kk >= 0 && kk < cnt);
  sbg_grn_state s;
  state_view(state, cnt, n, pb.w, &s);
  const char *nm[] = {"links", "rules", "score", "dn", "dl"};
  SEXP ans = PROTECT(sbg_named_list(5, nm));
  int *links = INTEGER(sbg_set(ans, "links", Rf_allocMatrix(INTSXP, n, n)));
  int *rules = INTEGER(sbg_set(ans, "rules", Rf_allocVector(INTSXP, n)));
  int dn = 0, dl = 0;
  int64_t score = sbg_grn_decode(&pb, &s, kk, links, rules, &dn, &dl);
  sbg_set(ans, "score", Rf_ScalarReal((double)score));
  sbg_set(ans, "dn", Rf_ScalarInteger(dn));
  sbg_set(ans, "dl", Rf_ScalarInteger(dl));
  UNPROTECT(1);
  return ans;
}

/* Rule codes 0..3, one per gene, as engine bytes. */
static uint8_t *rules_bytes(SEXP rules, R_xlen_t count) {
  SBG_ASSERT(TYPEOF(rules) == INTSXP && XLENGTH(rules) == count);
  uint8_t *r = (uint8_t *)R_alloc(count > 0 ? count : 1, 1);
  for (R_xlen_t i = 0; i < count; i++) {
    SBG_ASSERT(INTEGER(rules)[i] >= 0 && INTEGER(rules)[i] <= 3);
    r[i] = (uint8_t)INTEGER(rules)[i];
  }
  return r;
}

/* Trajectory of `network` (the problem's) under `rules`: (steps+1) x n. */
SEXP ffi_grn_simulate(SEXP problem, SEXP rules) {
  sbg_grn_problem pb;
  problem_from_list(problem, &pb);
  uint8_t *r = rules_bytes(rules, pb.n);
  SEXP ans = PROTECT(Rf_allocMatrix(INTSXP, pb.n, pb.steps + 1));
  sbg_grn_simulate(&pb, pb.ref_act, pb.ref_rep, r, INTEGER(ans));
  UNPROTECT(1);
  return ans;
}

/* dn and dl of `count` networks: links an n x n x count integer array,
 * rules an n x count integer matrix of codes. */
SEXP ffi_grn_evaluate(SEXP problem, SEXP links, SEXP rules, SEXP threads) {
  sbg_grn_problem pb;
  problem_from_list(problem, &pb);
  SBG_ASSERT(TYPEOF(links) == INTSXP && TYPEOF(threads) == INTSXP);
  int n = pb.n, w = pb.w;
  R_xlen_t count = XLENGTH(links) / ((R_xlen_t)n * n);
  SBG_ASSERT(count * n * n == XLENGTH(links));
  uint8_t *r = rules_bytes(rules, count * n);
  uint32_t *act = (uint32_t *)R_alloc(count * n * w + 1, sizeof(uint32_t));
  uint32_t *rep = (uint32_t *)R_alloc(count * n * w + 1, sizeof(uint32_t));
  for (R_xlen_t k = 0; k < count; k++)
    links_to_masks(INTEGER(links) + k * n * n, n, w, act + k * n * w, rep + k * n * w, NULL, NULL);
  const char *nm[] = {"dn", "dl", "path"};
  SEXP ans = PROTECT(sbg_named_list(3, nm));
  SEXP dn = sbg_set(ans, "dn", Rf_allocVector(INTSXP, count));
  SEXP dl = sbg_set(ans, "dl", Rf_allocVector(INTSXP, count));
  sbg_set(ans, "path", Rf_ScalarInteger(sbg_grn_cpu_eval_path(&pb)));
  sbg_grn_evaluate(&pb, count, act, rep, r, INTEGER(dn), INTEGER(dl), INTEGER(threads)[0]);
  UNPROTECT(1);
  return ans;
}

/* Evaluation throughput: data the problem, params = list(pop, reps, seed),
 * run on its first device.  list(seconds, checksum, path (the CPU
 * evaluation path), cpuSeconds) of `reps` evaluations of a random
 * population (the last two: CPU engine only). */
SEXP ffi_grn_bench(SEXP data, SEXP params, SEXP run) {
  sbg_grn_problem pb;
  problem_from_list(data, &pb);
  sbg_run r;
  sbg_run_decode(run, &r);
  int64_t np = (int64_t)sbg_real_elt(params, "pop");
  int reps = sbg_int_elt(params, "reps");
  uint64_t seed = (uint64_t)sbg_real_elt(params, "seed");
  double v[4] = {0, 0, sbg_grn_cpu_eval_path(&pb), NA_REAL};
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_setup(&ctx, &pr, r.threads, r.devices, 1, 0, "grn bench");
  sbg_status st = r.gpu ? sbg_grn_bench_gpu(&pb, np, reps, seed, &v[0], &v[1], &ctx)
                        : sbg_grn_bench_cpu(&pb, np, reps, seed, &v[0], &v[1], &v[3], &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  const char *nm[] = {"seconds", "checksum", "path", "cpuSeconds"};
  SEXP ans = PROTECT(sbg_named_list(4, nm));
  for (int i = 0; i < 4; i++) sbg_set(ans, nm[i], Rf_ScalarReal(v[i]));
  UNPROTECT(1);
  return ans;
}
