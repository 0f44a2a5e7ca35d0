/* GPU entry points of rapidGSEA() in a build without CUDA: each returns
 * SBG_ERR_NO_CUDA (resolveBackend() keeps R from getting here). */
#include <stddef.h>

#include "gsea.h"

sbg_status sbg_gsea_gpu_open(const sbg_gsea_input *in, const sbg_gsea_params *p,
                             const sbg_gsea_prep *prep, int device, int64_t max_batch, int64_t cache_perms,
                             sbg_gsea_gpu **h, sbg_ctx *ctx) {
  (void)in; (void)p; (void)prep; (void)device; (void)max_batch; (void)cache_perms;
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

sbg_status sbg_gsea_gpu_pass1(sbg_gsea_gpu *h, const double *es_obs, int64_t n, sbg_ctx *ctx) {
  (void)h; (void)es_obs; (void)n;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_gpu_pass1_result(sbg_gsea_gpu *h, gsea_acc *sum_pos, gsea_acc *sum_neg,
                                     int64_t *n_pos, int64_t *n_neg, int64_t *n_ext,
                                     sbg_ctx *ctx) {
  (void)h; (void)sum_pos; (void)sum_neg; (void)n_pos; (void)n_neg; (void)n_ext;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_gpu_sequential(sbg_gsea_gpu *h, int64_t *n, sbg_ctx *ctx) {
  (void)h; (void)n;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

int sbg_gsea_gpu_pass2_fits(const sbg_gsea_gpu *h, int32_t kp, int32_t kn) {
  (void)h; (void)kp; (void)kn;
  return 0;
}

sbg_status sbg_gsea_gpu_pass2(sbg_gsea_gpu *h, int64_t first, int64_t n, const double *mpos,
                              const double *mneg, const double *opos, int32_t kp,
                              const double *oneg, int32_t kn, int fbits, double *pmax,
                              double *pmin, sbg_ctx *ctx) {
  (void)h; (void)first; (void)n; (void)mpos; (void)mneg; (void)opos; (void)kp; (void)oneg;
  (void)kn; (void)fbits; (void)pmax; (void)pmin;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

sbg_status sbg_gsea_gpu_pass2_result(sbg_gsea_gpu *h, uint64_t *hp, uint64_t *hn,
                                     int64_t *valid_pos, int64_t *valid_neg, sbg_ctx *ctx) {
  (void)h; (void)hp; (void)hn; (void)valid_pos; (void)valid_neg;
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}
