/* The shared preranked null's GPU entry points in a build without CUDA:
 * open returns SBG_ERR_NO_CUDA (resolveBackend() keeps R from getting
 * here); the others are never reached. */
#include <stddef.h>

#include "gsea_preranked.h"

sbg_status sbg_gsea_pre_gpu_open(const sbg_gsea_sizes *z, const double *wr, int32_t G, uint64_t seed, int device,
                                 int64_t lo, int64_t hi, int64_t max_batch, sbg_gsea_pre_gpu **h, sbg_ctx *ctx) {
  (void)z; (void)wr; (void)G; (void)seed; (void)device; (void)lo; (void)hi; (void)max_batch;
  *h = NULL;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

int64_t sbg_gsea_pre_gpu_max_batch(const sbg_gsea_pre_gpu *h) {
  (void)h;
  return 64;
}

sbg_status sbg_gsea_pre_gpu_batch(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, const double **es, sbg_ctx *ctx) {
  (void)h; (void)first; (void)n; (void)es;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

void sbg_gsea_pre_gpu_close(sbg_gsea_pre_gpu *h) { (void)h; }
