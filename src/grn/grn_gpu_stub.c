/* Stands in for grn_gpu.cu in a build without CUDA (SYSBIOGPU_CUDA=no):
 * grnEvolve(backend = "gpu") then says the package has no CUDA. */
#include "grn.h"

sbg_status sbg_grn_evolve_gpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                              sbg_grn_result *out, sbg_ctx *ctx) {
  (void)pb; (void)gp; (void)out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_grn_round_gpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                             sbg_grn_round *rd, sbg_ctx *ctx) {
  (void)pb; (void)gp; (void)rd;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_grn_bench_gpu(const sbg_grn_problem *pb, int64_t pop, int reps, uint64_t seed,
                             double *seconds, double *checksum, sbg_ctx *ctx) {
  (void)pb; (void)pop; (void)reps; (void)seed; (void)seconds; (void)checksum;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}
