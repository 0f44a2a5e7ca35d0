/* Device steps of the preranked null by set size that the one-signature
 * engine (gsea_preranked_gpu.cu) and the many-signature engine
 * (gsea_preranked_multi_gpu.cu) share: a permutation's draw of rank
 * positions, their sort, and pass 1 of the statistics by size.  One code,
 * so both engines draw the same positions and count the same integers. */
#ifndef SBG_GSEA_PRERANKED_GPU_CUH
#define SBG_GSEA_PRERANKED_GPU_CUH

#include <climits>

#include "gsea_math.h"
#include "philox.h"

#define PRE_THREADS 128
#define SLICES 64

/* Room of a draw of kmax positions: H hash slots (a power of 2, at least
 * twice kmax, for short probes) and NP sort slots (a power of 2). */
static inline void pre_draw_room(int32_t kmax, int32_t *H, int32_t *NP) {
  *H = 64;
  while (*H < 2 * kmax) *H <<= 1;
  *NP = 1;
  while (*NP < kmax) *NP <<= 1;
}

/* Linear-probing table of the partial shuffle's swapped entries: key d ->
 * perm[d]; an absent key is the identity. */
static __device__ __forceinline__ uint32_t pre_slot(int32_t key, int32_t H) {
  return ((uint32_t)key * 2654435761u) & (uint32_t)(H - 1);
}

static __device__ __forceinline__ int32_t pre_get(const int32_t *hkey, const int32_t *hval, int32_t H, int32_t key) {
  for (uint32_t h = pre_slot(key, H);; h = (h + 1) & (uint32_t)(H - 1)) {
    if (hkey[h] == key) return hval[h];
    if (hkey[h] < 0) return key;
  }
}

static __device__ __forceinline__ void pre_set(int32_t *hkey, int32_t *hval, int32_t H, int32_t key, int32_t val) {
  uint32_t h = pre_slot(key, H);
  while (hkey[h] >= 0 && hkey[h] != key) h = (h + 1) & (uint32_t)(H - 1);
  hkey[h] = key;
  hval[h] = val;
}

/* The block draws permutation j's kmax rank positions into spos[0..kmax)
 * in draw order (thread 0, the CPU's partial Fisher-Yates from the
 * permutation's Philox subsequence); spos and stix are INT_MAX from kmax to
 * NP (the sort's padding).  hkey, hval: H entries of shared memory. */
static __device__ __forceinline__ void pre_draw_block(int32_t kmax, int32_t G, uint64_t seed, int64_t j, int32_t H,
                                                      int32_t NP, int32_t *hkey, int32_t *hval, int32_t *spos,
                                                      int32_t *stix) {
  for (int32_t i = threadIdx.x; i < H; i += blockDim.x) hkey[i] = -1;
  for (int32_t i = threadIdx.x; i < NP; i += blockDim.x) { spos[i] = INT_MAX; stix[i] = INT_MAX; }
  __syncthreads();
  if (threadIdx.x == 0) {
    sbg_philox r;
    sbg_philox_init(&r, seed, (uint64_t)j, 0);
    for (int32_t i = 0; i < kmax; i++) {
      /* perm[d] <-> perm[i]; perm[i] is never read again (later draws
       * take d > i), so only perm[d] is written */
      int32_t d = i + (int32_t)sbg_philox_below(&r, (uint32_t)(G - i));
      int32_t p = pre_get(hkey, hval, H, d);
      pre_set(hkey, hval, H, d, pre_get(hkey, hval, H, i));
      spos[i] = p;
    }
  }
  __syncthreads();
}

/* Bitonic sort of (position, draw index) by position (distinct), NP a
 * power of 2. */
static __device__ __forceinline__ void pre_sort_block(int32_t *spos, int32_t *stix, int32_t NP) {
  for (int32_t k = 2; k <= NP; k <<= 1) {
    for (int32_t jj = k >> 1; jj > 0; jj >>= 1) {
      for (int32_t i = threadIdx.x; i < NP; i += blockDim.x) {
        int32_t o = i ^ jj;
        if (o > i) {
          int32_t a = spos[i], b = spos[o];
          if ((a > b) == ((i & k) == 0)) {
            spos[i] = b; spos[o] = a;
            int32_t t = stix[i]; stix[i] = stix[o]; stix[o] = t;
          }
        }
      }
      __syncthreads();
    }
  }
}

/* Pass 1 of a batch (the host's zstats_pass1), one thread per (slice, size)
 * (blockIdx.y the slice, 128-thread blocks over the sizes): it adds the
 * null ES of its size in permutations slice, slice + SLICES, ... to its
 * own sums, and 1 to the bin of the sets each null is beyond (atomics:
 * integers, order-free). */
static __device__ __forceinline__ void pre_zpass1(const double *es, int64_t n, int32_t nz, const int32_t *ps,
                                                  const int32_t *ns, const double *pe, const double *ne,
                                                  gsea_acc *sp, gsea_acc *sn, unsigned long long *np,
                                                  unsigned long long *nn, unsigned long long *bp,
                                                  unsigned long long *bn) {
  int32_t q = blockIdx.x * blockDim.x + threadIdx.x, slice = blockIdx.y;
  if (q >= nz) return;
  gsea_acc a = sp[(size_t)slice * nz + q], c = sn[(size_t)slice * nz + q];
  unsigned long long kp = 0, kn = 0;
  int32_t plo = ps[q], pm = ps[q + 1] - plo, nlo = ns[q], nm = ns[q + 1] - nlo;
  for (int64_t b = slice; b < n; b += SLICES) {
    double v = es[(size_t)b * nz + q];
    if (v >= 0) {
      gsea_acc_add(&a, v);
      kp++;
      int32_t lo = 0, hi = pm; /* count of ES < v */
      while (lo < hi) {
        int32_t mid = (lo + hi) >> 1;
        if (pe[plo + mid] < v) lo = mid + 1; else hi = mid;
      }
      if (lo > 0) atomicAdd(&bp[plo + q + lo], 1ull);
    }
    if (v <= 0) {
      gsea_acc_add(&c, v);
      kn++;
      int32_t lo = gsea_count_le(ne + nlo, nm, v);
      if (lo < nm) atomicAdd(&bn[nlo + q + lo], 1ull);
    }
  }
  sp[(size_t)slice * nz + q] = a;
  sn[(size_t)slice * nz + q] = c;
  atomicAdd(&np[q], kp);
  atomicAdd(&nn[q], kn);
}

/* The device's pass-1 results (a: the SLICES x nz sums of the positive
 * nulls, then of the negative ones; c: np, nn (nz each), then the bins,
 * nbp and nbn) added to the host's. */
static inline void pre_merge_pass1(const gsea_acc *a, const unsigned long long *c, int32_t nz, size_t nbp, size_t nbn,
                                   gsea_acc *sp, gsea_acc *sn, int64_t *np, int64_t *nn, int64_t *bp, int64_t *bn) {
  for (int i = 0; i < SLICES; i++)
    for (int32_t q = 0; q < nz; q++) {
      gsea_acc_merge(&sp[q], a[(size_t)i * nz + q]);
      gsea_acc_merge(&sn[q], a[(size_t)(SLICES + i) * nz + q]);
    }
  for (int32_t q = 0; q < nz; q++) { np[q] += (int64_t)c[q]; nn[q] += (int64_t)c[nz + q]; }
  for (size_t i = 0; i < nbp; i++) bp[i] += (int64_t)c[2 * nz + i];
  for (size_t i = 0; i < nbn; i++) bn[i] += (int64_t)c[2 * nz + nbp + i];
}

#endif /* SBG_GSEA_PRERANKED_GPU_CUH */
