/* GPU engine of parCosnet() in a build without CUDA. */
#include "cosnet.h"

sbg_status sbg_cosnet_gpu(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                          sbg_cosnet_result *out, sbg_ctx *ctx) {
  (void)in; (void)p; (void)out;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}
