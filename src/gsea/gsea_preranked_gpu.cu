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
#include "cuda_check.cuh"
#include "gsea_gpu_host.cuh"
#include "gsea_math.h"
#include "gsea_pass2.cuh"
#include "gsea_preranked.h"
#include "gsea_preranked_gpu.cuh"

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

/* Pass 1 of a batch (pre_zpass1): grid (sizes / 128, SLICES). */
static __global__ void k_zpass1(const double *es, int64_t n, int32_t nz, const int32_t *ps, const int32_t *ns,
                                const double *pe, const double *ne, gsea_acc *sp, gsea_acc *sn,
                                unsigned long long *np, unsigned long long *nn, unsigned long long *bp,
                                unsigned long long *bn) {
  pre_zpass1(es, n, nz, ps, ns, pe, ne, sp, sn, np, nn, bp, bn);
}

/* Pass 2 of a batch: gsea_cpu.c's stats_pass2 by size (sets of a size
 * counted mult times), one block per permutation. */
static __global__ void __launch_bounds__(PRE_THREADS)
k_zpass2(const double *es, int64_t n, int32_t nz, const int32_t *mult, const double *obs, int32_t kp, int32_t kn,
         int fbits, double *pext, int64_t B, unsigned long long *gh) {
  gsea_pass2_block<PRE_THREADS>(es, n, nz, mult, obs, kp, kn, fbits, pext, B, gh);
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
  pre_draw_block(kmax, G, seed, first + blockIdx.x, H, NP, hkey, hval, spos, stix);
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
  pre_sort_block(spos, stix, NP);
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
  pre_draw_room(h->kmax, &h->H, &h->NP);
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
  pre_merge_pass1(a, c, nz, nbp, nbn, sp, sn, np, nn, bp, bn);
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
