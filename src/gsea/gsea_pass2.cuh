/* Pass 2 of rapidGSEA's statistics on a GPU, shared by the per-set engine
 * (gsea_gpu.cu) and the shared null by set size (gsea_preranked_gpu.cu):
 * gsea_cpu.c's stats_pass2, one block per permutation.  A batch holds n
 * permutations of ncol null ES; column c stands for mult[c] sets (NULL:
 * one each).  obs: the columns' mpos, then their mneg, then the observed
 * NES >= 0 (kp, ascending) and the negated ones < 0 (kn).  Out: each
 * permutation's extreme null NES (pext[b], pext[B + b]) and the FDR bins
 * and valid counts added to gh; the bins gather in shared memory (integers:
 * the order does not matter), so both engines give the CPU's bits. */
#ifndef SBG_GSEA_PASS2_CUH
#define SBG_GSEA_PASS2_CUH

#include "gsea_math.h"

/* Shared memory of the bins and the observed NES. */
static inline size_t gsea_pass2_smem(int32_t kp, int32_t kn) {
  return ((size_t)kp + kn + 2) * sizeof(unsigned long long) + ((size_t)kp + kn) * sizeof(double);
}

template <int THREADS>
static __device__ __forceinline__ void gsea_pass2_block(const double *es, int64_t n, int32_t ncol,
                                                        const int32_t *mult, const double *obs, int32_t kp,
                                                        int32_t kn, int fbits, double *pext, int64_t B,
                                                        unsigned long long *gh) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned long long *hp = reinterpret_cast<unsigned long long *>(smem), *hn = hp + kp + 1;
  double *opos = reinterpret_cast<double *>(hn + kn + 1), *oneg = opos + kp;
  __shared__ double rmax[THREADS / 32], rmin[THREADS / 32];
  __shared__ int32_t rp[THREADS / 32], rm[THREADS / 32];
  __shared__ unsigned long long vpos, vneg;
  const double *mpos = obs, *mneg = obs + ncol;
  for (int32_t i = threadIdx.x; i <= kp; i += blockDim.x) hp[i] = 0;
  for (int32_t i = threadIdx.x; i <= kn; i += blockDim.x) hn[i] = 0;
  for (int32_t i = threadIdx.x; i < kp; i += blockDim.x) opos[i] = obs[2 * (size_t)ncol + i];
  for (int32_t i = threadIdx.x; i < kn; i += blockDim.x) oneg[i] = obs[2 * (size_t)ncol + kp + i];
  if (threadIdx.x == 0) vpos = vneg = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  for (int64_t b = blockIdx.x; b < n; b += gridDim.x) {
    const double *col = es + (size_t)b * ncol;
    double mx = -INFINITY, mn = INFINITY;
    int32_t mp = 0, mm = 0;
    for (int32_t c = threadIdx.x; c < ncol; c += blockDim.x) {
      double z = gsea_null_nes(col[c], mpos[c], mneg[c]);
      if (isnan(z)) continue;
      int32_t m = mult ? mult[c] : 1;
      mx = fmax(mx, z);
      mn = fmin(mn, z);
      if (z >= 0) mp += m;
      if (z <= 0) mm += m;
    }
    for (int o = 16; o > 0; o >>= 1) {
      mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      mn = fmin(mn, __shfl_xor_sync(0xffffffffu, mn, o));
      mp += __shfl_xor_sync(0xffffffffu, mp, o);
      mm += __shfl_xor_sync(0xffffffffu, mm, o);
    }
    if (lane == 0) { rmax[wid] = mx; rmin[wid] = mn; rp[wid] = mp; rm[wid] = mm; }
    __syncthreads();
    mx = rmax[0]; mn = rmin[0]; mp = rp[0]; mm = rm[0];
    for (int i = 1; i < THREADS / 32; i++) {
      mx = fmax(mx, rmax[i]); mn = fmin(mn, rmin[i]); mp += rp[i]; mm += rm[i];
    }
    __syncthreads(); /* every thread has read the partials */
    if (threadIdx.x == 0) {
      pext[b] = mx;
      pext[B + b] = mn;
      if (mp) vpos++;
      if (mm) vneg++;
    }
    unsigned long long wpv = mp ? gsea_fdr_weight(mp, fbits) : 0, wnv = mm ? gsea_fdr_weight(mm, fbits) : 0;
    for (int32_t c = threadIdx.x; c < ncol; c += blockDim.x) {
      double z = gsea_null_nes(col[c], mpos[c], mneg[c]);
      if (isnan(z)) continue;
      unsigned long long m = mult ? (unsigned long long)mult[c] : 1ull;
      /* one search a value, in its sign's list (a warp's lanes of both
       * signs took both searches one after the other); 0 counts on both
       * sides */
      const bool pos = z >= 0;
      atomicAdd(&(pos ? hp : hn)[gsea_count_le(pos ? opos : oneg, pos ? kp : kn, pos ? z : -z)], m * (pos ? wpv : wnv));
      if (z == 0) atomicAdd(&hn[gsea_count_le(oneg, kn, -z)], m * wnv);
    }
  }
  __syncthreads();
  for (int32_t i = threadIdx.x; i <= kp; i += blockDim.x) if (hp[i]) atomicAdd(&gh[i], hp[i]);
  for (int32_t i = threadIdx.x; i <= kn; i += blockDim.x) if (hn[i]) atomicAdd(&gh[kp + 1 + i], hn[i]);
  if (threadIdx.x == 0) {
    atomicAdd(&gh[kp + kn + 2], vpos);
    atomicAdd(&gh[kp + kn + 3], vneg);
  }
}

#endif /* SBG_GSEA_PASS2_CUH */
