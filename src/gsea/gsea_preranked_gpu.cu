/* The preranked null shared across sets (gsea_preranked.c) on a GPU: one
 * thread block per permutation.  Thread 0 draws the rank positions of the
 * permutation's Philox subsequence by the CPU's partial Fisher-Yates (the
 * swapped entries of the identity in a small hash table in shared memory,
 * so the G-entry array is never built) and sums the hit weights in draw
 * order; the block sorts the positions with their draw indices; then each
 * thread scores distinct sizes: Broad's sequential rule (gsea_es_hit, the
 * CPU's operations without FMA) over the positions drawn no later than the
 * size.  Same bits as the CPU, so the same table.  The statistics passes
 * by size run on the device too where pass 2's bins fit a block (the
 * host's zstats_pass1 and stats_pass2, same integers), so no ES leave it;
 * otherwise the batches come to page-locked host memory, the next one
 * drawn while the host runs the statistics of this one. */
#include <climits>

#include "cuda_check.cuh"
#include "gsea_gpu_host.cuh"
#include "gsea_math.h"
#include "gsea_pass2.cuh"
#include "gsea_preranked.h"
#include "philox.h"

#define PRE_THREADS 128

struct sbg_gsea_pre_gpu {
  cudaStream_t stream;
  int device;
  int32_t G, nz, kmax, H, NP;
  uint64_t seed;
  int64_t B, lo, hi;  /* batch size; the range asked for, in order, once per pass */
  size_t smem;
  int32_t *d_size;
  double *d_wr, *d_es[2];
  double *h_es[2];    /* page-locked: B x nz each */
  int64_t pf_first[2], pf_n[2]; /* what each buffer holds or is receiving (n 0: nothing) */
  cudaEvent_t ev[2];
  int cur;            /* the buffer handed out last */
  /* statistics on the device (sbg_gsea_pre_gpu_stats): pass 1 by size in
   * SLICES slices of each batch, each (slice, size) one thread's; pass 2
   * one block per permutation, as gsea_gpu.cu's k_pass2 by set */
  int stats, sms;
  int32_t kp, kn, npos, nneg;
  int32_t *d_ps, *d_ns, *d_mult;
  double *d_pe, *d_ne, *d_obs;         /* observed ES by size; mpos, mneg (nz each), opos, oneg */
  gsea_acc *d_sp, *d_sn;               /* SLICES x nz */
  unsigned long long *d_np, *d_nn, *d_bp, *d_bn, *d_hist;
  double *d_pext;                      /* per permutation max, min (2 x B) */
};

#define SLICES 64

/* Pass 1 of a batch (the host's zstats_pass1): thread (slice, size) adds
 * the null ES of its size in permutations slice, slice + SLICES, ... to its
 * own sums, and 1 to the bin of the sets each null is beyond (atomics:
 * integers, order-free). */
static __global__ void k_zpass1(const double *es, int64_t n, int32_t nz, const int32_t *ps, const int32_t *ns,
                                const double *pe, const double *ne, gsea_acc *sp, gsea_acc *sn,
                                unsigned long long *np, unsigned long long *nn, unsigned long long *bp,
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

/* Pass 2 of a batch: gsea_cpu.c's stats_pass2 by size (sets of a size
 * counted mult times), one block per permutation. */
static __global__ void __launch_bounds__(PRE_THREADS)
k_zpass2(const double *es, int64_t n, int32_t nz, const int32_t *mult, const double *obs, int32_t kp, int32_t kn,
         int fbits, double *pext, int64_t B, unsigned long long *gh) {
  gsea_pass2_block<PRE_THREADS>(es, n, nz, mult, obs, kp, kn, fbits, pext, B, gh);
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

static __global__ void __launch_bounds__(PRE_THREADS)
k_prerank(const int32_t *size, int32_t nz, int32_t kmax, int32_t G, const double *wr, uint64_t seed, int64_t first,
          int32_t H, int32_t NP, double *es) {
  extern __shared__ __align__(16) unsigned char smem[];
  double *wd = reinterpret_cast<double *>(smem); /* weight of the i-th draw */
  double *nrd = wd + kmax;                       /* hit weight of draws 0..i, in draw order */
  int32_t *hkey = reinterpret_cast<int32_t *>(nrd + kmax), *hval = hkey + H;
  int32_t *spos = hval + H, *stix = spos + NP;   /* positions ascending, draw index (1-based) */
  const int tid = threadIdx.x;
  for (int32_t i = tid; i < H; i += blockDim.x) hkey[i] = -1;
  for (int32_t i = tid; i < NP; i += blockDim.x) { spos[i] = INT_MAX; stix[i] = INT_MAX; }
  __syncthreads();
  if (tid == 0) {
    sbg_philox r;
    sbg_philox_init(&r, seed, (uint64_t)(first + blockIdx.x), 0);
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
  /* the weights in parallel, then their sums in draw order, as the CPU */
  for (int32_t i = tid; i < kmax; i += blockDim.x) {
    wd[i] = wr[spos[i]];
    stix[i] = i + 1;
  }
  __syncthreads();
  if (tid == 0) {
    double nr = 0;
    for (int32_t i = 0; i < kmax; i++) {
      nr = G_ADD(nr, wd[i]);
      nrd[i] = nr;
    }
  }
  __syncthreads();
  /* bitonic sort of (position, draw index) by position (distinct) */
  for (int32_t k = 2; k <= NP; k <<= 1) {
    for (int32_t jj = k >> 1; jj > 0; jj >>= 1) {
      for (int32_t i = tid; i < NP; i += blockDim.x) {
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
  for (int32_t q = tid; q < nz; q += blockDim.x) {
    int32_t K = size[q];
    double nr = nrd[K - 1];
    int unit = nr == 0; /* all weights 0: unit weights, as the CPU does */
    double inv_nr = G_DIV(1.0, unit ? (double)K : nr);
    double inv_nmiss = G_DIV(1.0, G_SUB((double)G, (double)K));
    gsea_es_state s;
    gsea_es_init(&s);
    for (int32_t i = 0; i < kmax; i++) {
      int32_t t = stix[i];
      if (t <= K) gsea_es_hit(&s, spos[i], unit ? 1.0 : wd[t - 1], inv_nr, inv_nmiss);
    }
    es[(size_t)blockIdx.x * nz + q] = s.best;
  }
}

extern "C" void sbg_gsea_pre_gpu_close(sbg_gsea_pre_gpu *h) {
  if (!h) return;
  cudaSetDevice(h->device);
  if (h->stream) cudaStreamSynchronize(h->stream);
  cudaFree(h->d_size);
  cudaFree(h->d_wr);
  void *st[] = {h->d_ps, h->d_ns, h->d_mult, h->d_pe, h->d_ne, h->d_obs, h->d_sp, h->d_sn,
                h->d_np, h->d_nn, h->d_bp, h->d_bn, h->d_hist, h->d_pext};
  for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) cudaFree(st[i]);
  for (int i = 0; i < 2; i++) {
    cudaFree(h->d_es[i]);
    if (h->h_es[i]) cudaFreeHost(h->h_es[i]);
    if (h->ev[i]) cudaEventDestroy(h->ev[i]);
  }
  if (h->stream) cudaStreamDestroy(h->stream);
  free(h);
}

extern "C" int64_t sbg_gsea_pre_gpu_max_batch(const sbg_gsea_pre_gpu *h) { return h->B; }


extern "C" sbg_status sbg_gsea_pre_gpu_open(const sbg_gsea_sizes *z, const double *wr, int32_t G, uint64_t seed,
                                            int device, int64_t lo, int64_t hi, int64_t max_batch,
                                            sbg_gsea_pre_gpu **out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int max_smem = 0;
  *out = NULL;
  sbg_gsea_pre_gpu *h = (sbg_gsea_pre_gpu *)calloc(1, sizeof(sbg_gsea_pre_gpu));
  if (!h) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the GPU engine");
  h->device = device;
  h->G = G;
  h->nz = z->n;
  h->kmax = z->size[z->n - 1];
  h->seed = seed;
  h->lo = lo;
  h->hi = hi;
  h->H = 64;
  while (h->H < 2 * h->kmax) h->H <<= 1;
  h->NP = 1;
  while (h->NP < h->kmax) h->NP <<= 1;
  h->smem = 16 * (size_t)h->kmax + 8 * (size_t)h->H + 8 * (size_t)h->NP;
  SBG_TRY(sbg_device_select(device, ctx));
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (h->smem > (size_t)max_smem) { /* sets too large for a block: the caller draws on the CPU */
    sbg_gsea_pre_gpu_close(h);
    return SBG_OK;
  }
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_prerank, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)h->smem));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
  /* batches of up to 2^16 permutations (about 200 MB of ES for C2) */
  h->B = max_batch < 65536 ? (max_batch < 64 ? 64 : max_batch) : 65536;
  SBG_TRY(sbg_device_alloc((void **)&h->d_size, (size_t)h->nz * sizeof(int32_t), "the set sizes", ctx));
  SBG_TRY(sbg_device_alloc((void **)&h->d_wr, (size_t)G * sizeof(double), "the running-sum weights", ctx));
  /* the second buffer and the page-locked ones when the host asks for ES */
  SBG_TRY(sbg_device_alloc((void **)&h->d_es[0], (size_t)h->B * h->nz * sizeof(double), "a batch of null ES", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_size, z->size, (size_t)h->nz * sizeof(int32_t), cudaMemcpyHostToDevice, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_wr, wr, (size_t)G * sizeof(double), cudaMemcpyHostToDevice, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
done:
  if (st != SBG_OK) {
    sbg_gsea_pre_gpu_close(h);
    return st;
  }
  *out = h;
  return st;
}

/* Launches permutations [first, first + n) into buffer i, copies included. */
static sbg_status pre_launch(sbg_gsea_pre_gpu *h, int i, int64_t first, int64_t n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  if (!h->h_es[i]) {
    if (!h->d_es[i])
      SBG_TRY(sbg_device_alloc((void **)&h->d_es[i], (size_t)h->B * h->nz * sizeof(double), "a batch of null ES", ctx));
    SBG_CUDA_CHECK(cudaMallocHost((void **)&h->h_es[i], (size_t)h->B * h->nz * sizeof(double)));
    SBG_CUDA_CHECK(cudaEventCreateWithFlags(&h->ev[i], cudaEventDisableTiming));
  }
  k_prerank<<<(unsigned)n, PRE_THREADS, h->smem, h->stream>>>(h->d_size, h->nz, h->kmax, h->G, h->d_wr, h->seed,
                                                              first, h->H, h->NP, h->d_es[i]);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->h_es[i], h->d_es[i], (size_t)n * h->nz * sizeof(double), cudaMemcpyDeviceToHost,
                                 h->stream));
  SBG_CUDA_CHECK(cudaEventRecord(h->ev[i], h->stream));
  h->pf_first[i] = first;
  h->pf_n[i] = n;
done:
  return st;
}

/* The batches come in order over [lo, hi), once per pass: before handing
 * one out, the next (wrapping to lo for the next pass) is launched into
 * the other buffer, so the GPU draws while the host runs the statistics of
 * this one.  A batch that was not foreseen is drawn on the spot. */
extern "C" sbg_status sbg_gsea_pre_gpu_batch(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, const double **es,
                                             sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int i = -1;
  int64_t nf, nn;
  if (n < 1 || n > h->B) return sbg_fail(ctx, SBG_ERR_INTERNAL, "GPU batch of %lld permutations", (long long)n);
  SBG_TRY(sbg_device_select(h->device, ctx));
  for (int b = 0; b < 2; b++)
    if (h->pf_n[b] == n && h->pf_first[b] == first) i = b;
  if (i < 0) {
    i = 1 - h->cur;
    SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream)); /* the other buffer may be receiving */
    SBG_TRY(pre_launch(h, i, first, n, ctx));
  }
  /* the next batch into the other buffer (the caller is done with it) */
  nf = first + n < h->hi ? first + n : h->lo;
  nn = h->hi - nf < h->B ? h->hi - nf : h->B;
  if (nn > 0 && !(h->pf_first[1 - i] == nf && h->pf_n[1 - i] == nn)) SBG_TRY(pre_launch(h, 1 - i, nf, nn, ctx));
  SBG_CUDA_CHECK(cudaEventSynchronize(h->ev[i]));
  h->cur = i;
  *es = h->h_es[i];
done:
  return st;
}

/* ---------------------------------------------------------------------- */
/* Statistics on the device */

#define PRE_ALLOC(ptr, count, what) \
  SBG_TRY(sbg_device_alloc((void **)&(ptr), (size_t)(count) * sizeof(*(ptr)), what, ctx))
#define PRE_TO_DEVICE(dst, src, count) \
  SBG_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)(count) * sizeof(*(dst)), cudaMemcpyHostToDevice, h->stream))

extern "C" sbg_status sbg_gsea_pre_gpu_stats(sbg_gsea_pre_gpu *h, const int32_t *ps, const int32_t *ns,
                                             const double *pe, const double *ne, const int32_t *mult, int32_t S,
                                             int *on, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t nz = h->nz;
  int max_smem = 0;
  size_t nb;
  *on = 0;
  SBG_TRY(sbg_device_select(h->device, ctx));
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, h->device));
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&h->sms, cudaDevAttrMultiProcessorCount, h->device));
  if (gsea_pass2_smem(S, S) + 1024 > (size_t)max_smem) return SBG_OK; /* pass 2's bins: on the host */
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_zpass2, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem - 1024));
  h->npos = ps[nz];
  h->nneg = ns[nz];
  nb = (size_t)S + nz;
  PRE_ALLOC(h->d_ps, nz + 1, "the statistics");
  PRE_ALLOC(h->d_ns, nz + 1, "the statistics");
  PRE_ALLOC(h->d_mult, nz, "the statistics");
  PRE_ALLOC(h->d_pe, h->npos + 1, "the statistics");
  PRE_ALLOC(h->d_ne, h->nneg + 1, "the statistics");
  PRE_ALLOC(h->d_obs, 2 * (size_t)nz + 2 * (size_t)S, "the statistics");
  PRE_ALLOC(h->d_sp, (size_t)SLICES * nz, "the statistics");
  PRE_ALLOC(h->d_sn, (size_t)SLICES * nz, "the statistics");
  PRE_ALLOC(h->d_np, nz, "the statistics");
  PRE_ALLOC(h->d_nn, nz, "the statistics");
  PRE_ALLOC(h->d_bp, nb, "the statistics");
  PRE_ALLOC(h->d_bn, nb, "the statistics");
  PRE_ALLOC(h->d_hist, 2 * (size_t)S + 4, "the statistics");
  PRE_ALLOC(h->d_pext, 2 * (size_t)h->B, "the statistics");
  PRE_TO_DEVICE(h->d_ps, ps, nz + 1);
  PRE_TO_DEVICE(h->d_ns, ns, nz + 1);
  PRE_TO_DEVICE(h->d_mult, mult, nz);
  if (h->npos) PRE_TO_DEVICE(h->d_pe, pe, h->npos);
  if (h->nneg) PRE_TO_DEVICE(h->d_ne, ne, h->nneg);
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_sp, 0, (size_t)SLICES * nz * sizeof(gsea_acc), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_sn, 0, (size_t)SLICES * nz * sizeof(gsea_acc), h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_np, 0, (size_t)nz * 8, h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_nn, 0, (size_t)nz * 8, h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_bp, 0, nb * 8, h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_bn, 0, nb * 8, h->stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(h->d_hist, 0, (2 * (size_t)S + 4) * 8, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  h->kp = h->kn = -1;
  h->stats = 1;
  *on = 1;
done:
  return st;
}

/* Draws permutations [first, first + n) into the device's buffer (no copy). */
static sbg_status pre_draw(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  if (n < 1 || n > h->B) return sbg_fail(ctx, SBG_ERR_INTERNAL, "GPU batch of %lld permutations", (long long)n);
  SBG_TRY(sbg_device_select(h->device, ctx));
  k_prerank<<<(unsigned)n, PRE_THREADS, h->smem, h->stream>>>(h->d_size, h->nz, h->kmax, h->G, h->d_wr, h->seed,
                                                              first, h->H, h->NP, h->d_es[0]);
  SBG_CUDA_CHECK(cudaGetLastError());
done:
  return st;
}

extern "C" sbg_status sbg_gsea_pre_gpu_pass1(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  SBG_TRY(pre_draw(h, first, n, ctx));
  {
    dim3 g((unsigned)((h->nz + 127) / 128), SLICES);
    k_zpass1<<<g, 128, 0, h->stream>>>(h->d_es[0], n, h->nz, h->d_ps, h->d_ns, h->d_pe, h->d_ne, h->d_sp, h->d_sn,
                                       h->d_np, h->d_nn, h->d_bp, h->d_bn);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream)); /* polls between batches */
done:
  return st;
}

/* Adds the device's pass-1 results to the host's: sums and counts by size
 * (sp, sn, np, nn: nz each), bins (bp, bn: as zstats, npos + nz and
 * nneg + nz). */
extern "C" sbg_status sbg_gsea_pre_gpu_pass1_result(sbg_gsea_pre_gpu *h, gsea_acc *sp, gsea_acc *sn, int64_t *np,
                                                    int64_t *nn, int64_t *bp, int64_t *bn, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t nz = h->nz;
  size_t nbp = (size_t)h->npos + nz, nbn = (size_t)h->nneg + nz;
  gsea_acc *a = (gsea_acc *)malloc(2 * (size_t)SLICES * nz * sizeof(gsea_acc));
  unsigned long long *c = (unsigned long long *)malloc((2 * (size_t)nz + nbp + nbn) * sizeof(unsigned long long));
  if (!a || !c) { free(a); free(c); return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics"); }
  SBG_TRY(sbg_device_select(h->device, ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(a, h->d_sp, (size_t)SLICES * nz * sizeof(gsea_acc), cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(a + (size_t)SLICES * nz, h->d_sn, (size_t)SLICES * nz * sizeof(gsea_acc),
                                 cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c, h->d_np, nz * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + nz, h->d_nn, nz * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + 2 * nz, h->d_bp, nbp * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + 2 * nz + nbp, h->d_bn, nbn * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  for (int i = 0; i < SLICES; i++)
    for (int32_t q = 0; q < nz; q++) {
      gsea_acc_merge(&sp[q], a[(size_t)i * nz + q]);
      gsea_acc_merge(&sn[q], a[(size_t)(SLICES + i) * nz + q]);
    }
  for (int32_t q = 0; q < nz; q++) { np[q] += (int64_t)c[q]; nn[q] += (int64_t)c[nz + q]; }
  for (size_t i = 0; i < nbp; i++) bp[i] += (int64_t)c[2 * nz + i];
  for (size_t i = 0; i < nbn; i++) bn[i] += (int64_t)c[2 * nz + nbp + i];
done:
  free(a);
  free(c);
  return st;
}

extern "C" sbg_status sbg_gsea_pre_gpu_pass2(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, const double *mpos,
                                             const double *mneg, const double *opos, int32_t kp, const double *oneg,
                                             int32_t kn, int fbits, double *pmax, double *pmin, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t nz = h->nz;
  SBG_TRY(pre_draw(h, first, n, ctx));
  if (h->kp < 0) { /* the observed side, once */
    h->kp = kp;
    h->kn = kn;
    PRE_TO_DEVICE(h->d_obs, mpos, nz);
    PRE_TO_DEVICE(h->d_obs + nz, mneg, nz);
    if (kp) PRE_TO_DEVICE(h->d_obs + 2 * nz, opos, kp);
    if (kn) PRE_TO_DEVICE(h->d_obs + 2 * nz + kp, oneg, kn);
  }
  {
    int64_t blocks = (int64_t)h->sms * 8 < n ? (int64_t)h->sms * 8 : n;
    k_zpass2<<<(unsigned)blocks, PRE_THREADS, gsea_pass2_smem(kp, kn), h->stream>>>(
        h->d_es[0], n, nz, h->d_mult, h->d_obs, kp, kn, fbits, h->d_pext, h->B, h->d_hist);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  SBG_TRY(gsea_gpu_copy_extremes(h->d_pext, h->B, first, n, pmax, pmin, h->stream, ctx));
done:
  return st;
}

extern "C" sbg_status sbg_gsea_pre_gpu_pass2_result(sbg_gsea_pre_gpu *h, uint64_t *hp, uint64_t *hn,
                                                    int64_t *valid_pos, int64_t *valid_neg, sbg_ctx *ctx) {
  return gsea_gpu_add_bins(h->device, h->d_hist, h->kp, h->kn, hp, hn, valid_pos, valid_neg, h->stream, ctx);
}
