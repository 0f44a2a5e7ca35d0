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

/* Buckets of each sign's list of observed NES: bucket t of width w (a
 * power of two, so that t = floor(x / w) is exact) starts at the count of
 * values below t w.  A value x of bucket t has between that count and the
 * next bucket's values at or below it: the search runs over the values
 * between (about one with C2's lists), not over the whole list (13
 * steps for C2, each waiting on a load from shared memory): k_pass2 took
 * 5.4 ms a batch of 32,768 C2 permutations on an H200 against 7.2 ms,
 * and 3.1 ms with a thread's four values loaded at once (each_nes). */
#ifndef GSEA_PASS2_BUCKETS
#define GSEA_PASS2_BUCKETS 2048
#endif

/* Shared memory of the bins, the observed NES and their buckets. */
static inline size_t gsea_pass2_smem(int32_t kp, int32_t kn) {
  return ((size_t)kp + kn + 2) * sizeof(unsigned long long) + ((size_t)kp + kn) * sizeof(double) +
         2 * (GSEA_PASS2_BUCKETS + 1) * sizeof(int32_t);
}

/* The buckets of a[0..n) (ascending, >= 0) into tab[0..GSEA_PASS2_BUCKETS]
 * by the block's threads; returns 1 / w. */
static __device__ __forceinline__ double gsea_pass2_buckets(const double *a, int32_t n, int32_t *tab) {
  const double top = n > 0 ? a[n - 1] : 0.0;
  int e = 0;
  if (top < 1e300) frexp(top / GSEA_PASS2_BUCKETS, &e); /* top < 2^e x GSEA_PASS2_BUCKETS */
  else e = 1000;                                         /* (infinite: every finite value in bucket 0) */
  if (e < -1000) e = -1000;                              /* (1 / w finite, so that 0 / w is 0, not NaN) */
  const double w = ldexp(1.0, e);
  for (int32_t t = threadIdx.x; t <= GSEA_PASS2_BUCKETS; t += blockDim.x) tab[t] = gsea_count_lt(a, n, t * w);
  return ldexp(1.0, -e);
}

/* The number of a[0..n) <= x (gsea_count_le), x >= 0, by its bucket. */
static __device__ __forceinline__ int32_t gsea_pass2_count_le(const double *a, int32_t n, const int32_t *tab,
                                                               double inv_w, double x) {
  const double f = x * inv_w;
  const int32_t t = f >= GSEA_PASS2_BUCKETS ? GSEA_PASS2_BUCKETS : (int32_t)f;
  const int32_t lo = tab[t], hi = t < GSEA_PASS2_BUCKETS ? tab[t + 1] : n;
  return lo + gsea_count_le(a + lo, hi - lo, x);
}

/* *a += v in shared memory as two 32-bit atomic additions (native ones;
 * the 64-bit addition compiles to a loop of compare-and-swaps, retried
 * while the lanes of a warp hit one bin): the high word takes the low
 * word's carry of this very addition, so the 64-bit total is exact in any
 * order. */
static __device__ __forceinline__ void gsea_shared_add64(unsigned long long *a, unsigned long long v) {
  unsigned *w = reinterpret_cast<unsigned *>(a);
  const unsigned lo = (unsigned)v, old = atomicAdd(w, lo);
  const unsigned hi = (unsigned)(v >> 32) + (old + lo < old ? 1u : 0u);
  if (hi) atomicAdd(w + 1, hi);
}

template <int THREADS>
static __device__ __forceinline__ void gsea_pass2_block(const double *es, int64_t n, int32_t ncol,
                                                        const int32_t *mult, const double *obs, int32_t kp,
                                                        int32_t kn, int fbits, double *pext, int64_t B,
                                                        unsigned long long *gh) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned long long *hp = reinterpret_cast<unsigned long long *>(smem), *hn = hp + kp + 1;
  double *opos = reinterpret_cast<double *>(hn + kn + 1), *oneg = opos + kp;
  int32_t *tpos = reinterpret_cast<int32_t *>(oneg + kn), *tneg = tpos + GSEA_PASS2_BUCKETS + 1;
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
  const double ipos = gsea_pass2_buckets(opos, kp, tpos), ineg = gsea_pass2_buckets(oneg, kn, tneg);
  __syncthreads();
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  for (int64_t b = blockIdx.x; b < n; b += gridDim.x) {
    const double *col = es + (size_t)b * ncol;
    double mx = -INFINITY, mn = INFINITY;
    int32_t mp = 0, mm = 0;
    /* fn(z, c) for each column c's null NES z that is not NaN: a
     * thread's columns c0 + j x THREADS, j < 4, their loads in flight at
     * once (with two blocks an SM, little else covers their latency) */
    auto each_nes = [&](auto &&fn) {
      for (int32_t c0 = threadIdx.x; c0 < ncol; c0 += 4 * THREADS) {
        double e[4], a[4], d[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int32_t c = c0 + j * THREADS;
          e[j] = c < ncol ? col[c] : NAN;
          a[j] = c < ncol ? mpos[c] : 1.0;
          d[j] = c < ncol ? mneg[c] : 1.0;
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const double z = gsea_null_nes(e[j], a[j], d[j]);
          if (!isnan(z)) fn(z, c0 + j * THREADS);
        }
      }
    };
    each_nes([&](double z, int32_t c) {
      const int32_t m = mult ? mult[c] : 1;
      mx = fmax(mx, z);
      mn = fmin(mn, z);
      if (z >= 0) mp += m;
      if (z <= 0) mm += m;
    });
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
    each_nes([&](double z, int32_t c) {
      const unsigned long long m = mult ? (unsigned long long)mult[c] : 1ull;
      /* one search a value, in its sign's list (a warp's lanes of both
       * signs took both searches one after the other); 0 counts on both
       * sides */
      const bool pos = z >= 0;
      const int32_t at = pos ? gsea_pass2_count_le(opos, kp, tpos, ipos, z)
                             : gsea_pass2_count_le(oneg, kn, tneg, ineg, -z);
      gsea_shared_add64(&(pos ? hp : hn)[at], m * (pos ? wpv : wnv));
      if (z == 0) gsea_shared_add64(&hn[gsea_pass2_count_le(oneg, kn, tneg, ineg, -z)], m * wnv);
    });
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
