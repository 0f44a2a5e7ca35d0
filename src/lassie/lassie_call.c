/* .Call glue of lassieSimulate() (ffi_lassie_simulate) and of the internal
 * helpers behind its tests and benchmark: right-hand side and sparse
 * analytic Jacobian (ffi_lassie_rhs, ffi_lassie_jacobian).  R has checked
 * and converted every argument (R/lassieSimulate.R); here only sizes. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "glue.h"
#include "lassie.h"
#include "lassie_output.h"
#include "omp_compat.h"

/* What reaches C is checked here again, because users edit model lists by
 * hand: a bad structure is a classed input error, never a crash or a hang
 * (an order of 1e9 would make each rate a billion multiplications). */
#define LASSIE_MAX_ORDER 1000
#define MODEL_CHECK(cond, what)                                                   \
  do {                                                                            \
    if (!(cond)) sbg_stop(SBG_ERR_INPUT, "`model` is not a valid reactionModel: " what); \
  } while (0)

/* One program at cd + pc0 (nc codes, nk constants, N species), run
 * through once so that the engine's evaluator can trust it: known
 * operators, operands in range, a stack that never underflows nor exceeds
 * LASSIE_LAW_STACK, one value at RET. */
static void check_program(const int *cd, R_xlen_t nc, R_xlen_t nk, int N, R_xlen_t pc0) {
  MODEL_CHECK(pc0 >= 0 && pc0 < nc, "a kinetic law starts beyond its code");
  int depth = 0;
  for (R_xlen_t pc = pc0;;) {
    MODEL_CHECK(pc < nc, "a kinetic law runs beyond its code");
    const int op = cd[pc++];
    MODEL_CHECK(op >= 0 && op < LASSIE_N_OPS, "a kinetic law has an unknown operator");
    if (op == LASSIE_OP_RET) { MODEL_CHECK(depth == 1, "a kinetic law leaves no single value"); break; }
    if (op == LASSIE_OP_CONST || op == LASSIE_OP_SPEC || op == LASSIE_OP_SPEC_POS) {
      MODEL_CHECK(pc < nc, "a kinetic law runs beyond its code");
      const int a = cd[pc++];
      MODEL_CHECK(a >= 0 && (op == LASSIE_OP_CONST ? a < nk : a < N),
                  "a kinetic law's operand is out of range");
      depth++;
    } else if (op <= LASSIE_OP_XOR) depth -= 1;
    else if (op == LASSIE_OP_SELECT) depth -= 2;
    MODEL_CHECK(depth >= 1 && depth <= LASSIE_LAW_STACK, "a kinetic law's stack underflows or is too deep");
  }
}

/* The model's kinetic laws (elements law, code, cval; absent or NULL: mass
 * action), each program checked by check_program(). */
static void law_from_list(sbg_lassie_model *m, SEXP model) {
  m->law = NULL; m->code = NULL; m->cval = NULL; m->n_code = 0; m->n_cval = 0;
  SEXP law = sbg_elt_or_null(model, "law");
  if (law == NULL || Rf_isNull(law)) return;
  SEXP code = sbg_elt(model, "code"), cval = sbg_elt(model, "cval");
  SBG_ASSERT(TYPEOF(law) == INTSXP && TYPEOF(code) == INTSXP && TYPEOF(cval) == REALSXP);
  MODEL_CHECK(XLENGTH(law) == m->n_reactions, "`law` must have one entry per reaction");
  const int *lw = INTEGER(law), *cd = INTEGER(code);
  for (int i = 0; i < m->n_reactions; i++)
    if (lw[i] >= 0) check_program(cd, XLENGTH(code), XLENGTH(cval), m->n_species, lw[i]);
  m->law = lw; m->code = cd; m->cval = REAL(cval);
  m->n_code = (int)XLENGTH(code); m->n_cval = (int)XLENGTH(cval);
}

/* Programs over the state from R, list(start, code, cval) (the watched
 * conditions of lassieSimulate()'s events, R/lassie-events.R), each
 * checked as a kinetic law is; into the watch's program fields. */
static void programs_from_list(sbg_lassie_watch *wt, SEXP progs, int N) {
  SEXP start = sbg_elt(progs, "start"), code = sbg_elt(progs, "code"), cval = sbg_elt(progs, "cval");
  SBG_ASSERT(TYPEOF(start) == INTSXP && TYPEOF(code) == INTSXP && TYPEOF(cval) == REALSXP);
  SBG_ASSERT(XLENGTH(start) < INT32_MAX);
  for (R_xlen_t c = 0; c < XLENGTH(start); c++)
    check_program(INTEGER(code), XLENGTH(code), XLENGTH(cval), N, INTEGER(start)[c]);
  SBG_ASSERT(XLENGTH(code) < INT32_MAX && XLENGTH(cval) < INT32_MAX);
  wt->n_conds = (int)XLENGTH(start);
  wt->start = INTEGER(start); wt->code = INTEGER(code); wt->cval = REAL(cval);
  wt->n_code = (int)XLENGTH(code); wt->n_cval = (int)XLENGTH(cval);
}

/* The model's arrays, list(r_ptr, r_sp, r_ord, h_ptr, h_rx, h_val) from
 * lassie_arrays() in R/lassieSimulate.R. */
static void model_from_list(sbg_lassie_model *m, SEXP model) {
  SEXP r_ptr = sbg_elt(model, "r_ptr"), r_sp = sbg_elt(model, "r_sp"), r_ord = sbg_elt(model, "r_ord");
  SEXP h_ptr = sbg_elt(model, "h_ptr"), h_rx = sbg_elt(model, "h_rx"), h_val = sbg_elt(model, "h_val");
  SBG_ASSERT(TYPEOF(r_ptr) == INTSXP && TYPEOF(r_sp) == INTSXP && TYPEOF(r_ord) == INTSXP);
  SBG_ASSERT(TYPEOF(h_ptr) == INTSXP && TYPEOF(h_rx) == INTSXP && TYPEOF(h_val) == REALSXP);
  MODEL_CHECK(XLENGTH(r_ptr) >= 1 && XLENGTH(h_ptr) >= 1, "no reactions or no species");
  m->n_reactions = (int)XLENGTH(r_ptr) - 1;
  m->n_species = (int)XLENGTH(h_ptr) - 1;
  m->r_ptr = INTEGER(r_ptr); m->r_sp = INTEGER(r_sp); m->r_ord = INTEGER(r_ord);
  m->h_ptr = INTEGER(h_ptr); m->h_rx = INTEGER(h_rx); m->h_val = REAL(h_val);
  int M = m->n_reactions, N = m->n_species;
  MODEL_CHECK(m->r_ptr[0] == 0 && m->r_ptr[M] == XLENGTH(r_sp) && XLENGTH(r_sp) == XLENGTH(r_ord),
              "the reactants' pointers do not match their entries");
  MODEL_CHECK(m->h_ptr[0] == 0 && m->h_ptr[N] == XLENGTH(h_rx) && XLENGTH(h_rx) == XLENGTH(h_val),
              "the stoichiometry's pointers do not match its entries");
  for (int i = 0; i < M; i++) MODEL_CHECK(m->r_ptr[i] <= m->r_ptr[i + 1], "the reactants' pointers decrease");
  for (int l = 0; l < N; l++) MODEL_CHECK(m->h_ptr[l] <= m->h_ptr[l + 1], "the stoichiometry's pointers decrease");
  for (R_xlen_t e = 0; e < XLENGTH(r_sp); e++) {
    MODEL_CHECK(m->r_sp[e] >= 0 && m->r_sp[e] < N, "a reactant index is out of range");
    MODEL_CHECK(m->r_ord[e] >= 1 && m->r_ord[e] <= LASSIE_MAX_ORDER,
                "a reactant's order is not a whole number in [1, 1000]");
  }
  for (R_xlen_t e = 0; e < XLENGTH(h_rx); e++) {
    MODEL_CHECK(m->h_rx[e] >= 0 && m->h_rx[e] < M, "a reaction index of the stoichiometry is out of range");
    MODEL_CHECK(R_FINITE(m->h_val[e]), "a stoichiometric coefficient is not finite");
  }
  law_from_list(m, model);
}

/* The observables of one simulation into y (nt x n_obs, column-major)
 * from its species sp (nt x N): each the sum over its nonzero weights
 * (w: species x observables, column-major), in species order (a sparse
 * product's terms). */
static void observables(const double *sp, R_xlen_t nt, int N, const double *w0, int n_obs, double *y) {
  for (int o = 0; o < n_obs; o++, y += nt) {
    const double *w = w0 + (R_xlen_t)o * N;
    for (R_xlen_t t = 0; t < nt; t++) y[t] = 0;
    for (int j = 0; j < N; j++)
      if (w[j] != 0)
        for (R_xlen_t t = 0; t < nt; t++) y[t] += sp[(R_xlen_t)j * nt + t] * w[j];
  }
}

/* Whether the n values x are all finite and >= 0, on `threads` threads (a
 * batch's rates: 33.5 million for 16,384 sets of 2,048 reactions). */
static int finite_nonneg(const double *x, R_xlen_t n, int threads) {
  int bad = 0;
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static) reduction(| : bad) \
    if (n > 100000)
  for (R_xlen_t e = 0; e < n; e++) bad |= !R_FINITE(x[e]) || x[e] < 0;
  return !bad;
}

/* The simulations' matrices in `sims` (made by make_output()), times x
 * (time, species, observables), from the engine's result r: a batch's get
 * their block of r->out (one simulation's matrix has it already, the
 * engine wrote into it).  obs: NULL or the observables' weights, species x
 * observables.  sh: their attributes (attached by make_output()), or NULL.
 * The matrices are filled on `threads` threads (their first writes fault
 * in R's fresh pages: 1,000 Chen matrices are 246 MB), and their
 * attributes in turn. */
static void fill_matrices(SEXP sims, const sbg_lassie_params *p, const sbg_lassie_result *r, int N,
                          SEXP obs, SEXP messages, const lassie_out_shared *sh, int threads) {
  const R_xlen_t nt = p->n_times, block = nt * (R_xlen_t)N;
  const int n_obs = Rf_isNull(obs) ? 0 : Rf_ncols(obs);
  const int S = p->n_sims;
  double **dst = (double **)R_alloc((size_t)S, sizeof(double *));
  for (int s = 0; s < S; s++) dst[s] = REAL(VECTOR_ELT(sims, s));
  const double *w = n_obs > 0 ? REAL(obs) : NULL;
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static) if (S > 1)
  for (int s = 0; s < S; s++) {
    double *X = dst[s], *sp = X + nt;
    if (S > 1) memcpy(sp, r->out + (R_xlen_t)s * block, (size_t)block * sizeof(double));
    memcpy(X, p->times, (size_t)nt * sizeof(double));
    if (n_obs > 0) observables(sp, nt, N, w, n_obs, sp + block);
  }
  if (sh)
    for (int s = 0; s < S; s++)
      lassie_out_fill(VECTOR_ELT(sims, s), sh, r->stats + (size_t)s * SBG_LASSIE_N_STATS, r->status[s],
                      STRING_ELT(messages, s));
}

/* output = "array": the simulations' species and observables in one
 * array, times x (species, observables) x simulations, without the time
 * column.  Without observables the engine wrote it in place (its blocks
 * are the array's); otherwise its blocks are copied from r->out, on
 * `threads` threads: the copy's first writes fault in the array's fresh
 * pages, and on one thread this copy was most of the host's serial part
 * of a large batch on several GPUs (BENCHMARKS.md, "Several GPUs and R
 * workers"). */
static void fill_array(double *arr, const sbg_lassie_params *p, const sbg_lassie_result *r, int N,
                       SEXP obs, int threads) {
  if (Rf_isNull(obs)) return;
  const int n_obs = Rf_ncols(obs), S = p->n_sims;
  const double *w = REAL(obs);
  const R_xlen_t nt = p->n_times, block = nt * (R_xlen_t)N, cols = N + n_obs;
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static) if (S > 1)
  for (int s = 0; s < S; s++) {
    double *x = arr + (R_xlen_t)s * nt * cols;
    memcpy(x, r->out + (R_xlen_t)s * block, (size_t)block * sizeof(double));
    observables(x, nt, N, w, n_obs, x + block);
  }
}

/* The output of a run, made when the engine asks for it
 * (sbg_lassie_result's make_out): the GPU engine asks once its device has
 * work, so that R's allocator (a full garbage collection when the output
 * outgrows R's heap: 0.1-0.2 s for Chen's 1,000 sets) works meanwhile.
 * held: a list of 3 the caller protects, [0] the array, [1] the staging
 * block's holder (sbg_scratch()), [2] the matrices' shared dim; sims: the
 * list of matrices (made before, their elements here) unless as_array.
 * The engine's blocks (out): the array itself (as_array without
 * observables), the one matrix's species columns (one simulation), else
 * the staging block, which fill_matrices() or fill_array() copy from.  An allocation's error is caught (msg) and
 * ends the run.  collect: a full collection once the output is made
 * (large outputs of the GPU engine with method "bdf", whose device takes
 * one long launch while the host waits), so that R's next ones come in the
 * next call's make_output() too, beside the device, and not in the R code
 * before it (without it, one call in three of a series of calls in one
 * process paid a collection before the engine).  Not with explicit steps
 * in the batch: there the collection cost more than it saved. */
#define LASSIE_COLLECT_BYTES 64e6
typedef struct {
  SEXP held, sims;
  const sbg_lassie_params *p;
  int N, n_obs, as_array, collect;
  const lassie_out_shared *sh;   /* the matrices' attributes, or NULL */
  double *out;
  char msg[200];
} out_maker;

/* Simulation s's matrix in om->sims, with its attributes (to be filled)
 * when om->sh; dim: its dim attribute, shared by the batch. */
static SEXP new_matrix(out_maker *om, int s, SEXP dim) {
  SEXP x = SET_VECTOR_ELT(om->sims, s, Rf_allocVector(REALSXP, (R_xlen_t)INTEGER(dim)[0] * INTEGER(dim)[1]));
  Rf_setAttrib(x, R_DimSymbol, dim);
  if (om->sh) lassie_out_attach(x, om->sh);
  return x;
}

static SEXP make_output_body(void *data) {
  out_maker *om = (out_maker *)data;
  const sbg_lassie_params *p = om->p;
  const int S = p->n_sims, N = om->N, n_obs = om->n_obs;
  const R_xlen_t nt = p->n_times, block = nt * (R_xlen_t)N;
  double *out = NULL;
  if (om->as_array) {
    const R_xlen_t len = nt * (N + n_obs) * (R_xlen_t)S;   /* (checked by the caller) */
    SET_VECTOR_ELT(om->held, 0, Rf_allocVector(REALSXP, len));
    out = REAL(VECTOR_ELT(om->held, 0));
    /* (without observables the array is `out`, hinted below) */
    if (n_obs > 0) sbg_hint_huge_pages(out, sizeof(double) * (size_t)len);
  }
  SEXP dim = R_NilValue;
  if (!om->as_array) {
    dim = SET_VECTOR_ELT(om->held, 2, Rf_allocVector(INTSXP, 2));
    INTEGER(dim)[0] = p->n_times;
    INTEGER(dim)[1] = N + 1 + n_obs;
  }
  if (S == 1 && !om->as_array) {
    out = REAL(new_matrix(om, 0, dim)) + nt;
  } else if (!om->as_array || n_obs > 0) {
    /* outside R's heap, freed once copied: R allocates as much again for
     * the matrices, and the call's peak R heap is then theirs alone
     * (inst/bench/lassie-bdf.R prints that peak) */
    SET_VECTOR_ELT(om->held, 1, sbg_scratch(sizeof(double) * (size_t)block * (size_t)S, (void **)&out));
    if (!out) {
      snprintf(om->msg, sizeof om->msg, "cannot reserve %.3g GB for the output of %d simulations",
               sizeof(double) * (double)block * S / 1e9, S);
      return R_NilValue;
    }
    if (!om->as_array) {
      /* room for the matrices first (sbg_reserve_heap) */
      sbg_reserve_heap(sizeof(double) * (double)(block + nt * (1 + n_obs)) * S);
      for (int s = 0; s < S; s++) new_matrix(om, s, dim);
    }
  }
  sbg_hint_huge_pages(out, sizeof(double) * (size_t)block * (size_t)S);
  if (om->collect) {
    R_gc();
    /* the device's one long launch is ahead: the matrices' fresh pages
     * faulted in now, beside it, and not by fill_matrices() after it */
    if (!om->as_array && S > 1)
      for (int s = 0; s < S; s++) {
        SEXP x = VECTOR_ELT(om->sims, s);
        memset(REAL(x), 0, sizeof(double) * (size_t)XLENGTH(x));
      }
  }
  om->out = out;
  return R_NilValue;
}

static SEXP make_output_error(SEXP cond, void *data) {
  out_maker *om = (out_maker *)data;
  SEXP m = Rf_isVectorList(cond) && XLENGTH(cond) > 0 ? VECTOR_ELT(cond, 0) : R_NilValue;
  snprintf(om->msg, sizeof om->msg, "cannot allocate the output: %s",
           TYPEOF(m) == STRSXP && XLENGTH(m) > 0 ? CHAR(STRING_ELT(m, 0)) : "R's allocator failed");
  return R_NilValue;
}

static void make_output_top(void *data) {
  R_tryCatchError(make_output_body, data, make_output_error, data);
}

/* sbg_lassie_result's make_out: never leaves by a jump (the engine holds
 * device memory and threads), so inside R_ToplevelExec(); a jump that is
 * not an error (caught with its message) is the user's interrupt */
static sbg_status make_output(void *data, double **out) {
  out_maker *om = (out_maker *)data;
  om->out = NULL;
  if (!R_ToplevelExec(make_output_top, om) && !om->msg[0]) return SBG_ERR_INTERRUPTED;
  if (om->msg[0]) return SBG_ERR_ALLOC;
  *out = om->out;
  return SBG_OK;
}

/* .Call(ffi_lassie_simulate, data, params, run): data = list(model, rates,
 * initial, times, obs), params = list(rtol, atol, method, maxSteps, hInit,
 * part, array, output), run = run_list() (the GPUs in run$devices share the
 * batch).  array: TRUE for one array instead of matrices (fill_array; R
 * sets its attributes).  output: NULL, or the attributes the matrices share
 * (lassie_output_attrs() in R/lassie-output.R), which the matrices then
 * get here, each with its own, and `elapsed` the seconds of this call. */
SEXP ffi_lassie_simulate(SEXP data, SEXP params, SEXP run) {
  int nprot = 0;
  const double t_entry = lassie_out_seconds();
  sbg_lassie_model m;
  model_from_list(&m, sbg_elt(data, "model"));
  int N = m.n_species, M = m.n_reactions;
  SEXP rates = sbg_vec_elt(data, "rates", REALSXP, -1), initial = sbg_vec_elt(data, "initial", REALSXP, -1);
  SEXP times = sbg_vec_elt(data, "times", REALSXP, -1), obs = sbg_elt(data, "obs");
  /* watch: NULL, or conditions to stop at (states may then be negative:
   * an event may set a parameter so); attempts0: NULL, or the attempts
   * each simulation made before this run (it continues after an event) */
  SEXP watch_l = sbg_elt_or_null(data, "watch");
  const int watching = watch_l && !Rf_isNull(watch_l);
  SEXP attempts0 = sbg_elt_or_null(data, "attempts0"), window = sbg_elt_or_null(data, "window");
  /* part: this batch's first simulation (0-based) and the size of the
   * whole batch, for messages */
  SEXP part = sbg_vec_elt(params, "part", INTSXP, 2);
  sbg_run rn;
  sbg_run_decode(run, &rn);
  SBG_ASSERT(M > 0 && XLENGTH(rates) % M == 0 && XLENGTH(initial) % (N > 0 ? N : 1) == 0);
  SBG_ASSERT(N > 0 && XLENGTH(times) >= 2);
  sbg_lassie_params p;
  int sr = (int)(XLENGTH(rates) / M), si = (int)(XLENGTH(initial) / N);
  SBG_ASSERT(sr == 1 || si == 1 || sr == si);
  p.n_sims = sr > si ? sr : si;
  p.rates_per_sim = sr > 1;
  p.initial_per_sim = si > 1;
  p.rates = REAL(rates);
  p.initial = REAL(initial);
  p.n_times = (int)XLENGTH(times);
  p.times = REAL(times);
  for (int t = 0; t < p.n_times; t++) {
    if (!R_FINITE(p.times[t]) || (t > 0 && !(p.times[t] > p.times[t - 1])))
      sbg_stop(SBG_ERR_INPUT, "`times` must be finite and strictly increasing");
  }
  if (!finite_nonneg(p.rates, XLENGTH(rates), rn.threads))
    sbg_stop(SBG_ERR_INPUT, "`rates` must be finite and >= 0");
  if (watching) {
    SBG_ASSERT(!sbg_lgl_elt(params, "array") && sbg_int_elt(params, "method") != SBG_LASSIE_RKF45);
    for (R_xlen_t j = 0; j < XLENGTH(initial); j++)
      if (!R_FINITE(p.initial[j])) sbg_stop(SBG_ERR_INPUT, "`initial` must be finite");
  } else if (!finite_nonneg(p.initial, XLENGTH(initial), rn.threads)) {
    sbg_stop(SBG_ERR_INPUT, "`initial` must be finite and >= 0");
  }
  p.rtol = sbg_real_elt(params, "rtol");
  p.atol = sbg_real_elt(params, "atol");
  p.method = sbg_int_elt(params, "method");
  p.max_steps = sbg_real_elt(params, "maxSteps");
  p.h_init = sbg_real_elt(params, "hInit");
  p.attempts0 = NULL;
  if (attempts0 && !Rf_isNull(attempts0)) {
    SBG_ASSERT(TYPEOF(attempts0) == REALSXP && XLENGTH(attempts0) == p.n_sims);
    p.attempts0 = REAL(attempts0);
  }
  /* window: NULL, or each simulation's run (its start and end, a column
   * each), with a watch (lassieSimulate()'s rounds between events) */
  p.window = NULL;
  if (window && !Rf_isNull(window)) {
    SBG_ASSERT(watching && TYPEOF(window) == REALSXP && XLENGTH(window) == 2 * (R_xlen_t)p.n_sims);
    const double *w = REAL(window);
    for (int s = 0; s < p.n_sims; s++)
      SBG_ASSERT(w[2 * s] >= p.times[0] && w[2 * s] < w[2 * s + 1] && w[2 * s + 1] <= p.times[p.n_times - 1]);
    p.window = w;
  }
  p.devices = rn.devices;
  p.n_devices = rn.n_devices;
  p.sim_base = INTEGER(part)[0];
  p.sim_total = INTEGER(part)[1];
  SBG_ASSERT(p.sim_base >= 0 && p.sim_total >= p.sim_base + p.n_sims);
  /* the GPU engine's settings (lassie_settings() in R/options.R) */
  p.device_bdf = sbg_int_elt(run, "deviceBDF");
  p.bdf_team = sbg_int_elt(run, "bdfTeam");
  p.bdf_smem = sbg_int_elt(run, "bdfSharedVectors");
  p.fused = sbg_int_elt(run, "fused");
  SBG_ASSERT(p.device_bdf >= -1 && p.device_bdf <= 1 && p.fused >= -1 && p.fused <= 1);
  SBG_ASSERT(p.bdf_team == -1 || (p.bdf_team >= 1 && p.bdf_team <= 32 && !(p.bdf_team & (p.bdf_team - 1))));
  SBG_ASSERT(p.bdf_smem >= -1 && p.bdf_smem <= 4);

  /* obs: NULL or the observables' weights, species x observables */
  int n_obs = 0;
  if (!Rf_isNull(obs)) {
    SBG_ASSERT(TYPEOF(obs) == REALSXP && Rf_isMatrix(obs) && Rf_nrows(obs) == N);
    n_obs = Rf_ncols(obs);
  }
  /* each simulation as the matrix R returns, times x (time, species,
   * observables).  One simulation: the engine writes its species straight
   * into the matrix's columns 2..N+1 (they are its block of r.out), which
   * spares a copy of the whole output; a batch's blocks are copied (in
   * fill_matrices).  output = "array" (params$array): one R vector, times
   * x (species, observables) x simulations, which the engine fills in
   * place when there are no observables (fill_array). */
  const int as_array = sbg_lgl_elt(params, "array");
  if (as_array && (double)p.n_times * (N + n_obs) * p.n_sims > (double)R_XLEN_T_MAX)
    sbg_stop(SBG_ERR_INPUT, "the output array would be longer than R allows");
  const int collect = rn.gpu && p.method == SBG_LASSIE_BDF &&
                      sizeof(double) * (double)p.n_times * (N + n_obs) * p.n_sims >= LASSIE_COLLECT_BYTES;
  /* the matrices' attributes, attached as they are made */
  SEXP attrs = sbg_elt_or_null(params, "output"), elapsed = R_NilValue;
  lassie_out_shared sh;
  if (attrs && !Rf_isNull(attrs)) {
    PROTECT(lassie_out_decode(attrs, p.times[p.n_times - 1], &sh)); nprot++;
    /* one `elapsed` shared by all, its value set once they are built */
    sh.elapsed = elapsed = PROTECT(Rf_allocVector(REALSXP, 1)); nprot++;
    REAL(elapsed)[0] = NA_REAL;
    MARK_NOT_MUTABLE(elapsed);
  }
  out_maker om = {PROTECT(Rf_allocVector(VECSXP, 3)), R_NilValue, &p, N, n_obs, as_array, collect,
                  elapsed != R_NilValue ? &sh : NULL, NULL, ""};
  nprot++;
  if (!as_array) { om.sims = PROTECT(Rf_allocVector(VECSXP, p.n_sims)); nprot++; }
  SEXP stats = PROTECT(Rf_allocMatrix(REALSXP, SBG_LASSIE_N_STATS, p.n_sims)); nprot++;
  SEXP status = PROTECT(Rf_allocVector(INTSXP, p.n_sims)); nprot++;
  char *msgs = (char *)R_alloc((size_t)p.n_sims, SBG_LASSIE_MSG);
  sbg_lassie_watch wt;
  memset(&wt, 0, sizeof wt);
  SEXP stop_x = R_NilValue, stop_v = R_NilValue, stop_s = R_NilValue, stop_t = R_NilValue,
       stop_r = R_NilValue;
  if (watching) {
    programs_from_list(&wt, watch_l, N);
    stop_x = PROTECT(Rf_allocMatrix(REALSXP, N, p.n_sims)); nprot++;
    stop_v = PROTECT(Rf_allocMatrix(REALSXP, wt.n_conds, p.n_sims)); nprot++;
    stop_s = PROTECT(Rf_allocVector(LGLSXP, p.n_sims)); nprot++;
    stop_t = PROTECT(Rf_allocVector(REALSXP, p.n_sims)); nprot++;
    stop_r = PROTECT(Rf_allocVector(INTSXP, p.n_sims)); nprot++;
    wt.x = REAL(stop_x); wt.values = REAL(stop_v); wt.stopped = LOGICAL(stop_s);
    wt.t = REAL(stop_t); wt.next = INTEGER(stop_r);
    for (int s = 0; s < p.n_sims; s++) { wt.stopped[s] = 0; wt.t[s] = NA_REAL; wt.next[s] = 0; }
  }
  sbg_lassie_result r = {NULL, make_output, &om, REAL(stats), INTEGER(status), msgs,
                         watching ? &wt : NULL};
  memset(r.stats, 0, sizeof(double) * SBG_LASSIE_N_STATS * p.n_sims);
  memset(r.status, 0, sizeof(int) * p.n_sims);
  memset(msgs, 0, (size_t)p.n_sims * SBG_LASSIE_MSG);
  sbg_ctx ctx;
  sbg_progress pr;
  sbg_ctx_from_run(&ctx, &pr, &rn, "lassieSimulate");
  sbg_status st = rn.gpu ? sbg_lassie_gpu(&m, &p, &r, &ctx)
                                  : sbg_lassie_cpu(&m, &p, &r, &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, st == SBG_ERR_ALLOC && om.msg[0] ? om.msg : ctx.errbuf);
  SBG_ASSERT(r.out != NULL);   /* (the engines make it before they write) */
  SEXP sims = as_array ? VECTOR_ELT(om.held, 0) : om.sims, staging = VECTOR_ELT(om.held, 1);
  /* the array's only reference the answer's: R sets its attributes in
   * place (a second one would have R copy its 246 MB) */
  if (as_array) { PROTECT(sims); nprot++; SET_VECTOR_ELT(om.held, 0, R_NilValue); }
  /* a simulation's own failure: its status (SBG_LASSIE_FAIL_*) and message */
  SEXP messages = PROTECT(Rf_allocVector(STRSXP, p.n_sims)); nprot++;
  for (int s = 0; s < p.n_sims; s++) {
    msgs[(size_t)s * SBG_LASSIE_MSG + SBG_LASSIE_MSG - 1] = '\0';
    SET_STRING_ELT(messages, s, Rf_mkChar(msgs + (size_t)s * SBG_LASSIE_MSG));
  }
  if (as_array) fill_array(REAL(sims), &p, &r, N, obs, ctx.n_threads);
  else fill_matrices(sims, &p, &r, N, obs, messages, elapsed != R_NilValue ? &sh : NULL, ctx.n_threads);
  if (staging != R_NilValue) sbg_scratch_release(staging);
  if (elapsed != R_NilValue) REAL(elapsed)[0] = lassie_out_seconds() - t_entry;
  /* elapsed only when the matrices have their attributes; stop only with
   * a watch: list(stopped, t, x, values, rows), per simulation (x and
   * values a column each), where rows counts the output rows written */
  const char *nms[] = {"sims", "stats", "status", "messages", elapsed != R_NilValue ? "elapsed" : watching ? "stop" : "", ""};
  SEXP ans = PROTECT(Rf_mkNamed(VECSXP, nms)); nprot++;
  SET_VECTOR_ELT(ans, 0, sims);
  SET_VECTOR_ELT(ans, 1, stats);
  SET_VECTOR_ELT(ans, 2, status);
  SET_VECTOR_ELT(ans, 3, messages);
  if (elapsed != R_NilValue) SET_VECTOR_ELT(ans, 4, elapsed);
  else if (watching) {
    const char *snm[] = {"stopped", "t", "x", "values", "rows", ""};
    SEXP stop = SET_VECTOR_ELT(ans, 4, Rf_mkNamed(VECSXP, snm));
    SET_VECTOR_ELT(stop, 0, stop_s);
    SET_VECTOR_ELT(stop, 1, stop_t);
    SET_VECTOR_ELT(stop, 2, stop_x);
    SET_VECTOR_ELT(stop, 3, stop_v);
    SET_VECTOR_ELT(stop, 4, stop_r);
  }
  UNPROTECT(nprot);
  return ans;
}

/* The model, its rates and one state x, for the helpers below. */
static void model_at_state(sbg_lassie_model *m, SEXP model, SEXP rates, SEXP x) {
  model_from_list(m, model);
  SBG_ASSERT(TYPEOF(rates) == REALSXP && XLENGTH(rates) == m->n_reactions);
  SBG_ASSERT(TYPEOF(x) == REALSXP && XLENGTH(x) == m->n_species);
}

/* dX/dt at x (one state) */
SEXP ffi_lassie_rhs(SEXP model, SEXP rates, SEXP x) {
  sbg_lassie_model m;
  model_at_state(&m, model, rates, x);
  SEXP v = PROTECT(Rf_allocVector(REALSXP, m.n_reactions));
  SEXP f = PROTECT(Rf_allocVector(REALSXP, m.n_species));
  sbg_lassie_rhs(&m, REAL(rates), REAL(x), REAL(v), REAL(f));
  UNPROTECT(2);
  return f;
}

/* The analytic Jacobian J = H D at x as triplets (i, j, value), 1-based,
 * duplicates to be summed (Matrix::sparseMatrix does). */
SEXP ffi_lassie_jacobian(SEXP model, SEXP rates, SEXP x) {
  sbg_lassie_model m;
  model_at_state(&m, model, rates, x);
  int nnzA = m.r_ptr[m.n_reactions];
  R_xlen_t n = 0;
  for (int l = 0; l < m.n_species; l++)
    for (int q = m.h_ptr[l]; q < m.h_ptr[l + 1]; q++) {
      int i = m.h_rx[q];
      n += m.r_ptr[i + 1] - m.r_ptr[i];
    }
  SEXP dv = PROTECT(Rf_allocVector(REALSXP, nnzA > 0 ? nnzA : 1));
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 3));
  SEXP I = Rf_allocVector(INTSXP, n); SET_VECTOR_ELT(ans, 0, I);
  SEXP J = Rf_allocVector(INTSXP, n); SET_VECTOR_ELT(ans, 1, J);
  SEXP V = Rf_allocVector(REALSXP, n); SET_VECTOR_ELT(ans, 2, V);
  sbg_lassie_dvdx(&m, REAL(rates), REAL(x), REAL(dv));
  R_xlen_t c = 0;
  for (int l = 0; l < m.n_species; l++)
    for (int q = m.h_ptr[l]; q < m.h_ptr[l + 1]; q++) {
      int i = m.h_rx[q];
      for (int e = m.r_ptr[i]; e < m.r_ptr[i + 1]; e++, c++) {
        INTEGER(I)[c] = l + 1;
        INTEGER(J)[c] = m.r_sp[e] + 1;
        REAL(V)[c] = m.h_val[q] * REAL(dv)[e];
      }
    }
  UNPROTECT(2);
  return ans;
}

/* z = (I - gamma J(x))^-1 b by the implicit steps' sparse LU (a check of
 * that code against a dense solver in the tests), with the factors'
 * values as attribute "factors"; NULL when a pivot fails. */
SEXP ffi_lassie_lu_solve(SEXP model, SEXP rates, SEXP x, SEXP gamma, SEXP b, SEXP by_passes) {
  sbg_lassie_model m;
  model_at_state(&m, model, rates, x);
  SBG_ASSERT(TYPEOF(gamma) == REALSXP && XLENGTH(gamma) >= 1 && XLENGTH(gamma) < INT_MAX);
  SBG_ASSERT(TYPEOF(b) == REALSXP && XLENGTH(b) == m.n_species);
  SBG_ASSERT(TYPEOF(by_passes) == LGLSXP && XLENGTH(by_passes) == 1);
  SEXP z = PROTECT(Rf_duplicate(b));
  SEXP hold = PROTECT(sbg_scratch_holder()); /* the factors, until copied */
  double *val = NULL;
  size_t nnz = 0;
  int rc = sbg_lassie_lu_solve_once(&m, REAL(rates), REAL(x), REAL(gamma), (int)XLENGTH(gamma), REAL(z),
                                    LOGICAL(by_passes)[0] == TRUE, &val, &nnz);
  R_SetExternalPtrAddr(hold, val);
  if (rc == -2) sbg_stop(SBG_ERR_ALLOC, "out of memory");
  if (rc == 0) {
    SEXP f = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)nnz));
    if (nnz) memcpy(REAL(f), val, nnz * sizeof(double));
    Rf_setAttrib(z, Rf_install("factors"), f);
    UNPROTECT(1);
  }
  sbg_scratch_release(hold);
  UNPROTECT(2);
  return rc == 0 ? z : R_NilValue;
}

/* Whether the GPU engine takes a batch's implicit steps on the device
 * (sbg_lassie_device_bdf_pays; tests). */
SEXP ffi_lassie_device_bdf_pays(SEXP n_species, SEXP n_sims, SEXP threads) {
  SBG_ASSERT(TYPEOF(n_species) == INTSXP && TYPEOF(n_sims) == INTSXP && TYPEOF(threads) == INTSXP);
  return Rf_ScalarLogical(sbg_lassie_device_bdf_pays(INTEGER(n_species)[0], INTEGER(n_sims)[0],
                                                      INTEGER(threads)[0]));
}

/* A batch's values (rates or initial amounts): an S x n double matrix, one
 * row per simulation, to the engines' layout (simulation s's n values at
 * s n), checked on the way: list(values, first bad value as a 1-based
 * position in x (0: none), 1 when that value is negative, 0 when not
 * finite).  One threaded pass instead of R's checks and t() over a large
 * batch. */
SEXP ffi_lassie_batch_values(SEXP x, SEXP threads) {
  SBG_ASSERT(TYPEOF(x) == REALSXP && Rf_isMatrix(x) && TYPEOF(threads) == INTSXP);
  const R_xlen_t S = Rf_nrows(x), n = Rf_ncols(x);
  const double *in = REAL(x);
  SEXP vals = PROTECT(Rf_allocVector(REALSXP, S * n));
  double *out = REAL(vals);
  /* (fresh pages, faulted in by the threads below: 268 MB for 16,384 sets
   * of 2,048 rates) */
  sbg_hint_huge_pages(out, sizeof(double) * (size_t)(S * n));
  R_xlen_t bad = -1, first_bad = S * n;
  int nth = INTEGER(threads)[0] > 0 ? INTEGER(threads)[0] : 1;
  /* a tiled transpose (32 x 32 tiles stay in cache); a thread per band of
   * simulations, each noting the first bad value of its tiles */
#pragma omp parallel for num_threads(nth) schedule(static) reduction(min : first_bad)
  for (R_xlen_t s0 = 0; s0 < S; s0 += 32) {
    R_xlen_t s1 = s0 + 32 < S ? s0 + 32 : S;
    for (R_xlen_t j0 = 0; j0 < n; j0 += 32) {
      R_xlen_t j1 = j0 + 32 < n ? j0 + 32 : n;
      for (R_xlen_t s = s0; s < s1; s++)
        for (R_xlen_t j = j0; j < j1; j++) {
          const double v = in[s + j * S];
          out[s * n + j] = v;
          if (!R_FINITE(v) || v < 0) first_bad = s + j * S < first_bad ? s + j * S : first_bad;
        }
    }
  }
  if (first_bad < S * n) bad = first_bad;
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 3));
  SET_VECTOR_ELT(ans, 0, vals);
  SET_VECTOR_ELT(ans, 1, Rf_ScalarReal((double)(bad + 1)));
  SET_VECTOR_ELT(ans, 2, Rf_ScalarLogical(bad >= 0 && R_FINITE(in[bad]) && in[bad] < 0));
  UNPROTECT(2);
  return ans;
}

/* The values of programs (list(start, code, cval), as a watch's) at each
 * row of the states x (a matrix, states x species): a matrix, states x
 * programs, with the engine's own arithmetic.  lassieSimulate()'s events
 * evaluate their triggers, delays, priorities and assignments with it, and
 * the assignment rules of a model read by readSBML() on its output. */
SEXP ffi_lassie_eval_programs(SEXP progs, SEXP x) {
  SBG_ASSERT(TYPEOF(x) == REALSXP && Rf_isMatrix(x) && Rf_ncols(x) < INT32_MAX);
  const int n = Rf_nrows(x), N = Rf_ncols(x);
  sbg_lassie_watch wt;
  programs_from_list(&wt, progs, N);
  SEXP v = PROTECT(Rf_allocMatrix(REALSXP, n, wt.n_conds));
  double *xs = (double *)R_alloc(N > 0 ? N : 1, sizeof(double));
  const double *X = REAL(x);
  for (int r = 0; r < n; r++) {
    for (int j = 0; j < N; j++) xs[j] = X[r + (R_xlen_t)n * j];
    for (int c = 0; c < wt.n_conds; c++)
      REAL(v)[r + (R_xlen_t)n * c] = sbg_lassie_law_eval(wt.code + wt.start[c], wt.cval, xs, -1, 0);
  }
  UNPROTECT(1);
  return v;
}
