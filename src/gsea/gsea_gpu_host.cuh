/* Host-side steps that rapidGSEA's two GPU engines (gsea_gpu.cu: phenotype
 * and gene permutations per set; gsea_preranked_gpu.cu: the shared null by
 * set size) share: both keep pass 2's per-permutation extremes and its FDR
 * bins on the device in the same layout. */
#ifndef SBG_GSEA_GPU_HOST_CUH
#define SBG_GSEA_GPU_HOST_CUH

#include <stdint.h>
#include <stdlib.h>

#include "cuda_check.cuh"

/* The extremes of permutations [first, first + n) (d_pext: the maxima,
 * then the minima at d_pext + B) into pmax / pmin (indexed from 1). */
static inline sbg_status gsea_gpu_copy_extremes(const double *d_pext, int64_t B, int64_t first, int64_t n,
                                                double *pmax, double *pmin, cudaStream_t stream, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  SBG_CUDA_CHECK(cudaMemcpyAsync(pmax + first - 1, d_pext, n * sizeof(double), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(pmin + first - 1, d_pext + B, n * sizeof(double), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
done:
  return st;
}

/* Pass 2's bins (d_hist: hp (kp + 1), hn (kn + 1), valid_pos, valid_neg)
 * added to the caller's. */
static inline sbg_status gsea_gpu_add_bins(int device, const unsigned long long *d_hist, int32_t kp, int32_t kn,
                                           uint64_t *hp, uint64_t *hn, int64_t *valid_pos, int64_t *valid_neg,
                                           cudaStream_t stream, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  if (kp < 0) kp = 0;
  if (kn < 0) kn = 0;
  size_t nh = (size_t)kp + kn + 4;
  unsigned long long *c = (unsigned long long *)malloc(nh * sizeof(unsigned long long));
  if (!c) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics");
  SBG_TRY(sbg_device_select(device, ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c, d_hist, nh * sizeof(*c), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int32_t i = 0; i <= kp; i++) hp[i] += c[i];
  for (int32_t i = 0; i <= kn; i++) hn[i] += c[kp + 1 + i];
  *valid_pos += (int64_t)c[kp + kn + 2];
  *valid_neg += (int64_t)c[kp + kn + 3];
done:
  free(c);
  return st;
}

#endif /* SBG_GSEA_GPU_HOST_CUH */
