/* The preranked null shared across sets (gsea_preranked.c) on a GPU: one
 * thread block per permutation.  Thread 0 draws the rank positions of the
 * permutation's Philox subsequence by the CPU's partial Fisher-Yates (the
 * swapped entries of the identity in a small hash table in shared memory,
 * so the G-entry array is never built) and sums the hit weights in draw
 * order; the block sorts the positions with their draw indices; then each
 * thread scores distinct sizes: Broad's sequential rule (gsea_es_hit, the
 * CPU's operations without FMA) over the positions drawn no later than the
 * size.  Same bits as the CPU, so the same table.  The statistics stay on
 * the host (by size, gsea_cpu.c). */
#include <climits>

#include "cuda_check.cuh"
#include "gsea_math.h"
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
};

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
  for (int i = 0; i < 2; i++) {
    SBG_TRY(sbg_device_alloc((void **)&h->d_es[i], (size_t)h->B * h->nz * sizeof(double), "a batch of null ES", ctx));
    SBG_CUDA_CHECK(cudaMallocHost((void **)&h->h_es[i], (size_t)h->B * h->nz * sizeof(double)));
    SBG_CUDA_CHECK(cudaEventCreateWithFlags(&h->ev[i], cudaEventDisableTiming));
  }
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
