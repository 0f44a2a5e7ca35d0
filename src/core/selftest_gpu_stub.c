/* Self-test GPU engines of a build without CUDA. */
#include "selftest.h"

sbg_status sbg_rng_fill_gpu(const sbg_rng_params *p, double *out, sbg_ctx *ctx) {
  (void)p; (void)out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_busy_gpu(double seconds, double bytes, double *out, sbg_ctx *ctx) {
  (void)seconds; (void)bytes; (void)out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}
