/* GPU engine of lassieSimulate() in a build without CUDA. */
#include "lassie.h"

sbg_status sbg_lassie_gpu(const sbg_lassie_model *m, const sbg_lassie_params *p,
                          sbg_lassie_result *r, sbg_ctx *ctx) {
  (void)m; (void)p; (void)r;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}
