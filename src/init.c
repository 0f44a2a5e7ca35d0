/* Registration of the .Call entry points; nothing else lives here.
 *
 * Internal entry points.  Besides the methods' glue, a few entries serve
 * only the tests and the benchmarks; they are marked "internal" below:
 *   ffi_busy                    an interruptible run that holds memory, for
 *                               the tests of Ctrl-C and of memory release
 *                               (busy_run(), src/core/selftest_*.c);
 *   ffi_grn_testhook            one genetic operator of grnEvolve's engine
 *                               on populations given from R
 *                               (test-grn-operators.R, src/grn/grn_testhooks.c);
 *   ffi_grn_bench               timed fitness evaluations of a random
 *                               population (grn_bench_eval(): inst/bench/grn.R
 *                               and a test);
 *   ffi_cosnet_learn            COSNet's learning step alone (tests);
 *   ffi_cosnet_angle_groups     the GPU engine's angle groups of a job (tests);
 *   ffi_cosnet_colour           the host colouring of a network alone (tests,
 *                               inst/bench/cosnet.R);
 *   ffi_cosnet_random_network   the benchmark's random networks
 *                               (cosnet_random_network());
 *   ffi_lassie_rhs, ffi_lassie_jacobian, ffi_lassie_lu_solve,
 *   ffi_lassie_device_bdf_pays  pieces of lassieSimulate()'s engine checked
 *                               one by one against oracles (tests).
 * They ship in every build because R CMD check runs the tests against the
 * installed package.  They cost nothing when not called (no state, no work
 * at load) and no exported R function reaches them: only their internal R
 * wrappers (with `:::`) and the tests, which give them well-formed input;
 * they are not an interface for users. */
#define R_NO_REMAP
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Rdynload.h>

#include "core/threads.h"

SEXP ffi_gpu_info(SEXP);
SEXP ffi_device_warm(SEXP);
SEXP ffi_reserve_heap(SEXP);
SEXP ffi_threads_info(void);
SEXP ffi_philox_block(SEXP, SEXP);
SEXP ffi_rng_fill(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_busy(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_gzip_check(SEXP);
/* parCosnet */
SEXP ffi_cosnet(SEXP, SEXP, SEXP);
SEXP ffi_cosnet_learn(SEXP, SEXP, SEXP, SEXP);
SEXP ffi_cosnet_angle_groups(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_cosnet_colour(SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_cosnet_check(SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_cosnet_normalize(SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_cosnet_random_network(SEXP, SEXP, SEXP, SEXP);
SEXP ffi_cosnet_labels(SEXP, SEXP, SEXP);
SEXP ffi_cosnet_label_summary(SEXP, SEXP);
SEXP ffi_cosnet_folds(SEXP, SEXP, SEXP, SEXP);
SEXP ffi_cosnet_cv_metrics(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);

/* rapidGSEA (src/gsea) */
SEXP ffi_gsea_run(SEXP, SEXP, SEXP);
SEXP ffi_gsea_multi(SEXP, SEXP, SEXP);
SEXP ffi_gsea_scan_columns(SEXP);
SEXP ffi_gsea_scan_matrix(SEXP, SEXP);
SEXP ffi_gsea_set_index(SEXP, SEXP, SEXP);
SEXP ffi_gsea_combine1(SEXP, SEXP, SEXP, SEXP);
SEXP ffi_gsea_combine2(SEXP, SEXP, SEXP, SEXP);
SEXP ffi_gsea_stats(SEXP, SEXP, SEXP);
SEXP ffi_gsea_multilevel(SEXP, SEXP, SEXP);
SEXP ffi_gsea_leading_edge(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);

/* pbnSteadyState(), pbnSimulate() */
SEXP ffi_pbn_steady(SEXP, SEXP, SEXP);
SEXP ffi_pbn_simulate(SEXP, SEXP, SEXP);
SEXP ffi_pbn_exact(SEXP, SEXP, SEXP);
SEXP ffi_pbn_block(SEXP, SEXP, SEXP);
SEXP ffi_pbn_steady_bp(SEXP, SEXP, SEXP);

/* grnEvolve */
SEXP ffi_grn_evolve(SEXP, SEXP, SEXP);
SEXP ffi_grn_simulate(SEXP, SEXP);
SEXP ffi_grn_evaluate(SEXP, SEXP, SEXP, SEXP);
SEXP ffi_grn_bench(SEXP, SEXP, SEXP);
SEXP ffi_grn_round(SEXP, SEXP, SEXP);
SEXP ffi_grn_decode(SEXP, SEXP, SEXP, SEXP);
SEXP ffi_grn_testhook(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);

/* lassieSimulate */
SEXP ffi_lassie_simulate(SEXP, SEXP, SEXP);
SEXP ffi_lassie_batch_values(SEXP, SEXP);
SEXP ffi_lassie_output(SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_lassie_rhs(SEXP, SEXP, SEXP);
SEXP ffi_lassie_jacobian(SEXP, SEXP, SEXP);
SEXP ffi_lassie_lu_solve(SEXP, SEXP, SEXP, SEXP, SEXP, SEXP);
SEXP ffi_lassie_device_bdf_pays(SEXP, SEXP, SEXP);
SEXP ffi_lassie_eval_programs(SEXP, SEXP);
SEXP ffi_lassie_read_sbml(SEXP);
SEXP ffi_lassie_sbml_available(void);

#define CALLDEF(name, n) {#name, (DL_FUNC)&name, n}

static const R_CallMethodDef call_methods[] = {
    CALLDEF(ffi_gpu_info, 1),
    CALLDEF(ffi_device_warm, 1),
    CALLDEF(ffi_reserve_heap, 1),
    CALLDEF(ffi_threads_info, 0),
    CALLDEF(ffi_philox_block, 2),
    CALLDEF(ffi_rng_fill, 10),
    CALLDEF(ffi_busy, 6), /* internal */
    CALLDEF(ffi_gzip_check, 1),
    /* rapidGSEA */
    CALLDEF(ffi_gsea_run, 3),
    CALLDEF(ffi_gsea_multi, 3),
    CALLDEF(ffi_gsea_scan_columns, 1),
    CALLDEF(ffi_gsea_scan_matrix, 2),
    CALLDEF(ffi_gsea_set_index, 3),
    CALLDEF(ffi_gsea_combine1, 4),
    CALLDEF(ffi_gsea_combine2, 4),
    CALLDEF(ffi_gsea_stats, 3),
    CALLDEF(ffi_gsea_multilevel, 3),
    CALLDEF(ffi_gsea_leading_edge, 6),
    /* parCosnet */
    CALLDEF(ffi_cosnet, 3),
    CALLDEF(ffi_cosnet_learn, 4), /* internal */
    CALLDEF(ffi_cosnet_angle_groups, 8), /* internal */
    CALLDEF(ffi_cosnet_colour, 5), /* internal */
    CALLDEF(ffi_cosnet_check, 5),
    CALLDEF(ffi_cosnet_normalize, 5),
    CALLDEF(ffi_cosnet_random_network, 4), /* internal */
    CALLDEF(ffi_cosnet_labels, 3),
    CALLDEF(ffi_cosnet_label_summary, 2),
    CALLDEF(ffi_cosnet_folds, 4),
    CALLDEF(ffi_cosnet_cv_metrics, 6),
    /* pbnSteadyState(), pbnSimulate() */
    CALLDEF(ffi_pbn_steady, 3),
    CALLDEF(ffi_pbn_simulate, 3),
    CALLDEF(ffi_pbn_exact, 3),
    CALLDEF(ffi_pbn_block, 3),
    CALLDEF(ffi_pbn_steady_bp, 3),
    /* grnEvolve */
    CALLDEF(ffi_grn_evolve, 3),
    CALLDEF(ffi_grn_simulate, 2),
    CALLDEF(ffi_grn_evaluate, 4),
    CALLDEF(ffi_grn_bench, 3), /* internal */
    CALLDEF(ffi_grn_round, 3),
    CALLDEF(ffi_grn_decode, 4),
    CALLDEF(ffi_grn_testhook, 7), /* internal */
    /* lassieSimulate */
    CALLDEF(ffi_lassie_simulate, 3),
    CALLDEF(ffi_lassie_batch_values, 2),
    CALLDEF(ffi_lassie_output, 5),
    CALLDEF(ffi_lassie_rhs, 3), /* internal */
    CALLDEF(ffi_lassie_jacobian, 3), /* internal */
    CALLDEF(ffi_lassie_lu_solve, 6), /* internal */
    CALLDEF(ffi_lassie_device_bdf_pays, 3), /* internal */
    CALLDEF(ffi_lassie_eval_programs, 2),
    CALLDEF(ffi_lassie_read_sbml, 1),
    CALLDEF(ffi_lassie_sbml_available, 0),
    {NULL, NULL, 0}};

void R_init_sysbioGPU(DllInfo *dll) {
  R_registerRoutines(dll, NULL, call_methods, NULL, NULL);
  R_useDynamicSymbols(dll, FALSE);
  R_forceSymbols(dll, TRUE);
  sbg_threads_init();
}
