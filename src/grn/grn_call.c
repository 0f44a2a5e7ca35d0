/* .Call glue of grnEvolve(), grnSimulate() and their internal helpers
 * (R/grnEvolve.R): R vectors -> sbg_grn_problem / sbg_grn_params, engine
 * call, results back as R vectors.  R has validated every argument. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"
#include "grn.h"

static SEXP list_elt(SEXP list, const char *name) {
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  for (R_xlen_t i = 0; i < XLENGTH(list); i++)
    if (strcmp(CHAR(STRING_ELT(names, i)), name) == 0) return VECTOR_ELT(list, i);
  char msg[160];
  snprintf(msg, sizeof msg, "sysbioGPU internal error: no element '%s'; please report it", name);
  sbg_stop(SBG_ERR_INTERNAL, msg);
  return R_NilValue; /* # nocov */
}

/* An optional element: NULL where the list has none. */
static SEXP list_elt_or_null(SEXP list, const char *name) {
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  for (R_xlen_t i = 0; i < XLENGTH(list); i++)
    if (strcmp(CHAR(STRING_ELT(names, i)), name) == 0) return VECTOR_ELT(list, i);
  return NULL;
}

static int int_elt(SEXP list, const char *name) {
  SEXP x = list_elt(list, name);
  SBG_ASSERT(TYPEOF(x) == INTSXP && XLENGTH(x) == 1);
  return INTEGER(x)[0];
}

static double real_elt(SEXP list, const char *name) {
  SEXP x = list_elt(list, name);
  SBG_ASSERT(TYPEOF(x) == REALSXP && XLENGTH(x) == 1);
  return REAL(x)[0];
}

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
  SEXP net = list_elt(p, "network");
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
  state_to_bits(list_elt(p, "from"), n, w, from);
  state_to_bits(list_elt(p, "to"), n, w, to);
  pb->ref_act = act;
  pb->ref_rep = rep;
  pb->from = from;
  pb->to = to;
  pb->steps = int_elt(p, "steps");
  SBG_ASSERT(pb->steps >= 1);
  pb->wn = (int64_t)real_elt(p, "wn");
  pb->wl = (int64_t)real_elt(p, "wl");
  pb->max_in = int_elt(p, "maxIn");
  SEXP allowed = list_elt(p, "allowed");
  SBG_ASSERT(TYPEOF(allowed) == INTSXP && XLENGTH(allowed) >= 1 && XLENGTH(allowed) <= 4);
  pb->n_allowed = (int)XLENGTH(allowed);
  for (int a = 0; a < pb->n_allowed; a++) {
    SBG_ASSERT(INTEGER(allowed)[a] >= 0 && INTEGER(allowed)[a] <= 3);
    pb->allowed[a] = (uint8_t)INTEGER(allowed)[a];
  }
  SEXP path = list_elt_or_null(p, "evalPath"); /* CPU evaluation path, tests only */
  if (path) {
    SBG_ASSERT(TYPEOF(path) == INTSXP && XLENGTH(path) == 1);
    pb->eval_path = INTEGER(path)[0];
  }
}

/* list(pop, islands, ...) -> params; R has validated every element. */
static void params_from_list(SEXP ga, sbg_grn_params *gp) {
  memset(gp, 0, sizeof(*gp));
  gp->pop = (int64_t)real_elt(ga, "pop");
  gp->islands = int_elt(ga, "islands");
  gp->migration_interval = int_elt(ga, "migrationInterval");
  gp->migrants = int_elt(ga, "migrants");
  gp->roulette = int_elt(ga, "roulette");
  gp->p_link = real_elt(ga, "pLink");
  gp->p_rule = real_elt(ga, "pRule");
  gp->generations = (int64_t)real_elt(ga, "generations");
  gp->target = (int64_t)real_elt(ga, "target");
  gp->time_limit = real_elt(ga, "timeLimit");
  gp->seed = (uint64_t)real_elt(ga, "seed");
  SEXP blocks = list_elt_or_null(ga, "blocks"); /* CPU blocks in lockstep, tests only */
  gp->blocks = blocks ? Rf_asInteger(blocks) : 1;
  SBG_ASSERT(gp->islands >= 1 && gp->pop % gp->islands == 0);
  SBG_ASSERT((gp->pop / gp->islands) % 2 == 0 && gp->pop / gp->islands >= 4);
  SBG_ASSERT(gp->migrants >= 0 && gp->migrants < gp->pop / gp->islands);
  SBG_ASSERT(gp->migration_interval >= 1 && gp->generations >= 0);
}

/* The fitness history of a run: (generations + 1) x islands, the engines'
 * layout, reserved with malloc and never cleared, so that only the pages
 * of the generations that run are ever touched (committed): a cap of 1e9
 * generations cut short by a time limit or the target costs what ran, not
 * 8 GB per island.  Held by an external pointer, so that R frees it on
 * every path (an error, an interrupt).  The rows that ran are copied to an
 * R matrix at the end. */
static void history_free(SEXP ptr) {
  free(R_ExternalPtrAddr(ptr));
  R_ClearExternalPtr(ptr);
}

static SEXP history_reserve(int64_t rows, int islands, double **at) {
  double bytes = (double)rows * islands * sizeof(double);
  void *h = bytes <= (double)SIZE_MAX ? malloc((size_t)rows * islands * sizeof(double)) : NULL;
  if (!h) {
    char msg[200];
    snprintf(msg, sizeof msg, "cannot reserve %.3g GB for the fitness history (%.0f generations x %d "
             "islands); lower `generations`", bytes / 1e9, (double)rows - 1, islands);
    sbg_stop(SBG_ERR_ALLOC, msg);
  }
  SEXP ptr = PROTECT(R_MakeExternalPtr(h, R_NilValue, R_NilValue));
  R_RegisterCFinalizerEx(ptr, history_free, TRUE);
  UNPROTECT(1);
  *at = (double *)h;
  return ptr;
}

SEXP ffi_grn_evolve(SEXP problem, SEXP ga, SEXP gpu, SEXP threads, SEXP devices, SEXP verbose) {
  int nprot = 0;
  sbg_grn_problem pb;
  sbg_grn_params gp;
  problem_from_list(problem, &pb);
  params_from_list(ga, &gp);
  SBG_ASSERT(TYPEOF(gpu) == LGLSXP && XLENGTH(gpu) == 1);
  SBG_ASSERT(TYPEOF(devices) == INTSXP && XLENGTH(devices) >= 1);

  int n = pb.n;
  SEXP links = PROTECT(Rf_allocMatrix(INTSXP, n, n)); nprot++;
  SEXP rules = PROTECT(Rf_allocVector(INTSXP, n)); nprot++;
  double *reserved = NULL;
  int64_t rows = gp.generations + 1;
  SEXP hptr = PROTECT(history_reserve(rows, gp.islands, &reserved)); nprot++;
  sbg_grn_result out;
  memset(&out, 0, sizeof(out));
  out.best_links = INTEGER(links);
  out.best_rules = INTEGER(rules);
  out.history = reserved;

  sbg_ctx ctx;
  sbg_progress pr;
  SEXP device = PROTECT(Rf_ScalarInteger(INTEGER(devices)[0])); nprot++;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "grnEvolve");
  sbg_status st = LOGICAL(gpu)[0]
                      ? sbg_grn_evolve_gpu(&pb, &gp, &out, INTEGER(devices), (int)XLENGTH(devices), &ctx)
                      : sbg_grn_evolve_cpu(&pb, &gp, &out, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  SBG_ASSERT(out.generations_run >= 0 && out.generations_run < rows);
  int64_t ran = out.generations_run + 1;
  SEXP hist = PROTECT(Rf_allocMatrix(REALSXP, (int)ran, gp.islands)); nprot++;
  for (int isl = 0; isl < gp.islands; isl++)
    memcpy(REAL(hist) + (int64_t)isl * ran, reserved + (int64_t)isl * rows, (size_t)ran * sizeof(double));
  history_free(hptr);

  const char *nm[] = {"links", "rules", "history", "generations", "score", "dn", "dl", "stop"};
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 8)); nprot++;
  SET_VECTOR_ELT(ans, 0, links);
  SET_VECTOR_ELT(ans, 1, rules);
  SET_VECTOR_ELT(ans, 2, hist);
  SET_VECTOR_ELT(ans, 3, Rf_ScalarReal((double)out.generations_run));
  SET_VECTOR_ELT(ans, 4, Rf_ScalarReal((double)out.best_score));
  SET_VECTOR_ELT(ans, 5, Rf_ScalarInteger(out.best_dn));
  SET_VECTOR_ELT(ans, 6, Rf_ScalarInteger(out.best_dl));
  SET_VECTOR_ELT(ans, 7, Rf_ScalarInteger(out.stop_reason));
  SEXP names = Rf_allocVector(STRSXP, 8);
  Rf_setAttrib(ans, R_NamesSymbol, names);
  for (int i = 0; i < 8; i++) SET_STRING_ELT(names, i, Rf_mkChar(nm[i]));
  UNPROTECT(nprot);
  return ans;
}

/* A state as an R list(act, rep, rule, score) of `count` individuals:
 * masks as integers (the same 32 bits), rules as raw, scores as doubles. */
static SEXP state_alloc(int64_t count, int n, int w, sbg_grn_state *s) {
  SEXP x = PROTECT(Rf_allocVector(VECSXP, 4));
  SET_VECTOR_ELT(x, 0, Rf_allocVector(INTSXP, (R_xlen_t)(count * n * w)));
  SET_VECTOR_ELT(x, 1, Rf_allocVector(INTSXP, (R_xlen_t)(count * n * w)));
  SET_VECTOR_ELT(x, 2, Rf_allocVector(RAWSXP, (R_xlen_t)(count * n)));
  SET_VECTOR_ELT(x, 3, Rf_allocVector(REALSXP, (R_xlen_t)count));
  SEXP names = Rf_allocVector(STRSXP, 4);
  Rf_setAttrib(x, R_NamesSymbol, names);
  const char *nm[] = {"act", "rep", "rule", "score"};
  for (int i = 0; i < 4; i++) SET_STRING_ELT(names, i, Rf_mkChar(nm[i]));
  s->act = (uint32_t *)INTEGER(VECTOR_ELT(x, 0));
  s->rep = (uint32_t *)INTEGER(VECTOR_ELT(x, 1));
  s->rule = RAW(VECTOR_ELT(x, 2));
  s->score = REAL(VECTOR_ELT(x, 3));
  UNPROTECT(1);
  return x;
}

static void state_view(SEXP x, int64_t count, int n, int w, sbg_grn_state *s) {
  SBG_ASSERT(TYPEOF(x) == VECSXP && XLENGTH(x) == 4);
  SEXP a = VECTOR_ELT(x, 0), r = VECTOR_ELT(x, 1), u = VECTOR_ELT(x, 2), c = VECTOR_ELT(x, 3);
  SBG_ASSERT(TYPEOF(a) == INTSXP && XLENGTH(a) == count * n * w);
  SBG_ASSERT(TYPEOF(r) == INTSXP && XLENGTH(r) == count * n * w);
  SBG_ASSERT(TYPEOF(u) == RAWSXP && XLENGTH(u) == count * n);
  SBG_ASSERT(TYPEOF(c) == REALSXP && XLENGTH(c) == count);
  s->act = (uint32_t *)INTEGER(a);
  s->rep = (uint32_t *)INTEGER(r);
  s->rule = RAW(u);
  s->score = REAL(c);
}

/* One BPPARAM worker's round: block c(first, count) of islands, generations
 * c(g_from, g_to), the state (NULL: draw generation 0) and the incoming
 * migrants (NULL: none).  list(state, outgoing, history, gDone, stopped,
 * bestIndex, bestScore). */
SEXP ffi_grn_round(SEXP problem, SEXP ga, SEXP block, SEXP gens, SEXP state, SEXP incoming,
                   SEXP gpu, SEXP threads, SEXP device) {
  int nprot = 0;
  sbg_grn_problem pb;
  sbg_grn_params gp;
  problem_from_list(problem, &pb);
  params_from_list(ga, &gp);
  SBG_ASSERT(TYPEOF(block) == INTSXP && XLENGTH(block) == 2);
  SBG_ASSERT(TYPEOF(gens) == REALSXP && XLENGTH(gens) == 2);
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
  SEXP st_out = PROTECT(state_alloc(np, n, w, &rd.state)); nprot++;
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
  SEXP outg = PROTECT(state_alloc(K, n, w, &rd.outgoing)); nprot++;
  SEXP hist = PROTECT(Rf_allocMatrix(REALSXP, (int)(rd.g_to - rd.g_from + 1), rd.count)); nprot++;
  rd.history = REAL(hist);

  sbg_ctx ctx;
  sbg_progress pr;
  SEXP verbose = PROTECT(Rf_ScalarLogical(FALSE)); nprot++;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "grnEvolve");
  sbg_status st = LOGICAL(gpu)[0] ? sbg_grn_round_gpu(&pb, &gp, &rd, &ctx)
                                  : sbg_grn_round_cpu(&pb, &gp, &rd, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);

  const char *nm[] = {"state", "outgoing", "history", "gDone", "stopped", "bestIndex", "bestScore"};
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 7)); nprot++;
  SET_VECTOR_ELT(ans, 0, st_out);
  SET_VECTOR_ELT(ans, 1, outg);
  SET_VECTOR_ELT(ans, 2, hist);
  SET_VECTOR_ELT(ans, 3, Rf_ScalarReal((double)rd.g_done));
  SET_VECTOR_ELT(ans, 4, Rf_ScalarLogical(rd.stopped));
  SET_VECTOR_ELT(ans, 5, Rf_ScalarReal((double)rd.best_index));
  SET_VECTOR_ELT(ans, 6, Rf_ScalarReal((double)rd.best_score));
  SEXP names = Rf_allocVector(STRSXP, 7);
  Rf_setAttrib(ans, R_NamesSymbol, names);
  for (int i = 0; i < 7; i++) SET_STRING_ELT(names, i, Rf_mkChar(nm[i]));
  UNPROTECT(nprot);
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
  SEXP links = PROTECT(Rf_allocMatrix(INTSXP, n, n));
  SEXP rules = PROTECT(Rf_allocVector(INTSXP, n));
  int dn = 0, dl = 0;
  int64_t score = sbg_grn_decode(&pb, &s, kk, INTEGER(links), INTEGER(rules), &dn, &dl);
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 5));
  SET_VECTOR_ELT(ans, 0, links);
  SET_VECTOR_ELT(ans, 1, rules);
  SET_VECTOR_ELT(ans, 2, Rf_ScalarReal((double)score));
  SET_VECTOR_ELT(ans, 3, Rf_ScalarInteger(dn));
  SET_VECTOR_ELT(ans, 4, Rf_ScalarInteger(dl));
  SEXP names = Rf_allocVector(STRSXP, 5);
  Rf_setAttrib(ans, R_NamesSymbol, names);
  const char *nm[] = {"links", "rules", "score", "dn", "dl"};
  for (int i = 0; i < 5; i++) SET_STRING_ELT(names, i, Rf_mkChar(nm[i]));
  UNPROTECT(3);
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
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 3));
  SEXP dn = Rf_allocVector(INTSXP, count);
  SET_VECTOR_ELT(ans, 0, dn);
  SEXP dl = Rf_allocVector(INTSXP, count);
  SET_VECTOR_ELT(ans, 1, dl);
  SET_VECTOR_ELT(ans, 2, Rf_ScalarInteger(sbg_grn_cpu_eval_path(&pb)));
  sbg_grn_evaluate(&pb, count, act, rep, r, INTEGER(dn), INTEGER(dl), INTEGER(threads)[0]);
  UNPROTECT(1);
  return ans;
}

/* c(seconds, checksum, CPU evaluation path, CPU seconds) of `reps`
 * evaluations of a random population (the last two: CPU engine only). */
SEXP ffi_grn_bench(SEXP problem, SEXP pop, SEXP reps, SEXP seed, SEXP gpu, SEXP threads,
                   SEXP device) {
  sbg_grn_problem pb;
  problem_from_list(problem, &pb);
  SBG_ASSERT(TYPEOF(pop) == REALSXP && TYPEOF(reps) == INTSXP && TYPEOF(seed) == REALSXP);
  SEXP ans = PROTECT(Rf_allocVector(REALSXP, 4));
  REAL(ans)[2] = sbg_grn_cpu_eval_path(&pb);
  REAL(ans)[3] = NA_REAL;
  SEXP verbose = PROTECT(Rf_ScalarLogical(FALSE));
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_init(&ctx, &pr, threads, device, verbose, "grn bench");
  int64_t np = (int64_t)REAL(pop)[0];
  uint64_t s = (uint64_t)REAL(seed)[0];
  sbg_status st = LOGICAL(gpu)[0]
                      ? sbg_grn_bench_gpu(&pb, np, INTEGER(reps)[0], s, REAL(ans), REAL(ans) + 1, &ctx)
                      : sbg_grn_bench_cpu(&pb, np, INTEGER(reps)[0], s, REAL(ans), REAL(ans) + 1,
                                          REAL(ans) + 3, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(2);
  return ans;
}
