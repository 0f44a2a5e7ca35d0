/* The many-signature GPU engine's entry points in a build without CUDA:
 * open returns SBG_ERR_NO_CUDA (resolveBackend() keeps R from getting
 * here); the others are never reached. */
#include <stddef.h>

#include "gsea_preranked.h"

#define PM_NO_CUDA sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA")

sbg_status sbg_gsea_pm_gpu_open(const sbg_gsea_sizes *z, int32_t G, int32_t S, uint64_t seed, int64_t nperm,
                                int64_t batch, int64_t keep_max, int device, int32_t want, sbg_gsea_pm_gpu **h,
                                sbg_ctx *ctx) {
  (void)z; (void)G; (void)S; (void)seed; (void)nperm; (void)batch; (void)keep_max; (void)device; (void)want;
  *h = NULL;
  return PM_NO_CUDA;
}

int32_t sbg_gsea_pm_gpu_room(const sbg_gsea_pm_gpu *h) {
  (void)h;
  return 0;
}

int64_t sbg_gsea_pm_gpu_max_batch(const sbg_gsea_pm_gpu *h) {
  (void)h;
  return 64;
}

sbg_status sbg_gsea_pm_gpu_signature(sbg_gsea_pm_gpu *h, int32_t v, const double *wr, const int32_t *ps,
                                     const int32_t *ns, const double *pe, const double *ne, const int32_t *mult,
                                     sbg_ctx *ctx) {
  (void)h; (void)v; (void)wr; (void)ps; (void)ns; (void)pe; (void)ne; (void)mult;
  return PM_NO_CUDA;
}

sbg_status sbg_gsea_pm_gpu_pass1(sbg_gsea_pm_gpu *h, int32_t nb, int64_t first, int64_t n, sbg_ctx *ctx) {
  (void)h; (void)nb; (void)first; (void)n;
  return PM_NO_CUDA;
}

sbg_status sbg_gsea_pm_gpu_pass1_result(sbg_gsea_pm_gpu *h, int32_t v, const int32_t *ps, const int32_t *ns,
                                        gsea_acc *sp, gsea_acc *sn, int64_t *np, int64_t *nn, int64_t *bp,
                                        int64_t *bn, sbg_ctx *ctx) {
  (void)h; (void)v; (void)ps; (void)ns; (void)sp; (void)sn; (void)np; (void)nn; (void)bp; (void)bn;
  return PM_NO_CUDA;
}

sbg_status sbg_gsea_pm_gpu_pass2_setup(sbg_gsea_pm_gpu *h, int32_t v, const double *mpos, const double *mneg,
                                       const double *opos, int32_t kp, const double *oneg, int32_t kn, sbg_ctx *ctx) {
  (void)h; (void)v; (void)mpos; (void)mneg; (void)opos; (void)kp; (void)oneg; (void)kn;
  return PM_NO_CUDA;
}

sbg_status sbg_gsea_pm_gpu_pass2(sbg_gsea_pm_gpu *h, int32_t nb, int64_t first, int64_t n, int fbits,
                                 double *const *pmax, double *const *pmin, sbg_ctx *ctx) {
  (void)h; (void)nb; (void)first; (void)n; (void)fbits; (void)pmax; (void)pmin;
  return PM_NO_CUDA;
}

sbg_status sbg_gsea_pm_gpu_pass2_result(sbg_gsea_pm_gpu *h, int32_t v, uint64_t *hp, uint64_t *hn,
                                        int64_t *valid_pos, int64_t *valid_neg, sbg_ctx *ctx) {
  (void)h; (void)v; (void)hp; (void)hn; (void)valid_pos; (void)valid_neg;
  return PM_NO_CUDA;
}

void sbg_gsea_pm_gpu_close(sbg_gsea_pm_gpu *h) { (void)h; }
