/* GPU entry points of rapidGSEA() in a build without CUDA: each returns
 * SBG_ERR_NO_CUDA (resolveBackend() keeps R from getting here). */
#include <stddef.h>

#include "gsea.h"

sbg_status sbg_gsea_gpu_open(const sbg_gsea_input *in, const sbg_gsea_params *p,
                             const sbg_gsea_prep *prep, int64_t max_batch,
                             sbg_gsea_gpu **h, sbg_ctx *ctx) {
  (void)in; (void)p; (void)prep; (void)max_batch;
  *h = NULL;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_gpu_batch(sbg_gsea_gpu *h, int64_t first, int64_t n, double *es,
                              sbg_ctx *ctx) {
  (void)h; (void)first; (void)n; (void)es;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

int64_t sbg_gsea_gpu_max_batch(const sbg_gsea_gpu *h) {
  (void)h;
  return 64;
}

void sbg_gsea_gpu_close(sbg_gsea_gpu *h) { (void)h; }
