/* The multilevel GPU engine's entry points in a build without CUDA: open
 * returns SBG_ERR_NO_CUDA (resolveBackend() keeps R from getting here);
 * the others are never reached. */
#include <stddef.h>

#include "gsea_multilevel.h"

sbg_status sbg_gsea_ml_gpu_open(int device, int32_t G, const double *wf, const double *wb, int32_t n,
                                int32_t moves, size_t *free_bytes, sbg_gsea_ml_gpu **h, sbg_ctx *ctx) {
  (void)device; (void)G; (void)wf; (void)wb; (void)n; (void)moves; (void)free_bytes;
  *h = NULL;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

size_t sbg_gsea_ml_gpu_ruler_bytes(int32_t n, int32_t k) {
  (void)n; (void)k;
  return 0;
}

sbg_status sbg_gsea_ml_gpu_load(sbg_gsea_ml_gpu *h, int32_t R, const int32_t *k, const int32_t *dir,
                                int32_t *const *pop, const sbg_philox *const *rng, sbg_ctx *ctx) {
  (void)h; (void)R; (void)k; (void)dir; (void)pop; (void)rng;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_ml_gpu_level(sbg_gsea_ml_gpu *h, int32_t A, const int32_t *act, const double *level,
                                 const int32_t *const *map, double *const *score, double done_frac, sbg_ctx *ctx) {
  (void)h; (void)A; (void)act; (void)level; (void)map; (void)score; (void)done_frac;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_ml_gpu_plain(int device, int32_t G, const double *w0, const double *w1, int32_t N,
                                 int32_t n_size, const int32_t *k, const sbg_philox *stream, double *const *plain,
                                 int32_t *m, sbg_ctx *ctx) {
  (void)device; (void)G; (void)w0; (void)w1; (void)N; (void)n_size; (void)k; (void)stream; (void)plain; (void)m;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

void sbg_gsea_ml_gpu_close(sbg_gsea_ml_gpu *h) { (void)h; }
