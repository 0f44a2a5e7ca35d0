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

sbg_status sbg_gsea_pre_gpu_stats(sbg_gsea_pre_gpu *h, const int32_t *ps, const int32_t *ns, const double *pe,
                                  const double *ne, const int32_t *mult, int32_t S, int *on, sbg_ctx *ctx) {
  (void)h; (void)ps; (void)ns; (void)pe; (void)ne; (void)mult; (void)S;
  *on = 0;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_pre_gpu_pass1(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, sbg_ctx *ctx) {
  (void)h; (void)first; (void)n;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_pre_gpu_pass1_result(sbg_gsea_pre_gpu *h, gsea_acc *sp, gsea_acc *sn, int64_t *np, int64_t *nn,
                                         int64_t *bp, int64_t *bn, sbg_ctx *ctx) {
  (void)h; (void)sp; (void)sn; (void)np; (void)nn; (void)bp; (void)bn;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_pre_gpu_pass2(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, const double *mpos,
                                  const double *mneg, const double *opos, int32_t kp, const double *oneg, int32_t kn,
                                  int fbits, double *pmax, double *pmin, sbg_ctx *ctx) {
  (void)h; (void)first; (void)n; (void)mpos; (void)mneg; (void)opos; (void)kp; (void)oneg; (void)kn; (void)fbits;
  (void)pmax; (void)pmin;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_pre_gpu_pass2_result(sbg_gsea_pre_gpu *h, uint64_t *hp, uint64_t *hn, int64_t *valid_pos,
                                         int64_t *valid_neg, sbg_ctx *ctx) {
  (void)h; (void)hp; (void)hn; (void)valid_pos; (void)valid_neg;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}
