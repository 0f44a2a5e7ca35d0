/* Many preranked signatures on one GPU (rapidGSEA(stats = <matrix or
 * list>), gsea_cpu.c's sbg_gsea_multi_run): a permutation's rank positions
 * depend on the seed, the gene count and the set sizes alone, so each
 * permutation is drawn once (k_pm_draw, the one-signature engine's draw)
 * and scored for a whole block of signatures (k_pm_score): a warp per
 * (permutation, signature), a lane per distinct set size, Broad's
 * sequential rule over the sorted positions with the signature's weights
 * (gsea_es_hit, the operations of gsea_preranked_gpu.cu's k_prerank), so
 * each signature's ES have the bits of its own run.  The statistics passes
 * by size run per signature on the device (pre_zpass1, gsea_pass2_block,
 * the one-signature engine's integers).  Pass 1's ES stay on the device
 * for pass 2 where the block's fit its memory; else pass 2 draws again. */
#include "cuda_check.cuh"
#include "gsea_gpu_host.cuh"
#include "gsea_math.h"
#include "gsea_pass2.cuh"
#include "gsea_preranked.h"
#include "gsea_preranked_gpu.cuh"

#define PM_WARPS 8        /* warps of a scoring block (fewer where shared memory is short) */
#define PM_PER_WARP 4     /* signatures each warp of a scoring block scores in turn */
#define PM_UNITS (1 << 21) /* (permutation, signature) pairs per batch: a fraction of a second */

struct sbg_gsea_pm_gpu {
  cudaStream_t stream;
  int device, sms, keep, warps;
  int32_t G, S, nz, kmax, H, NP, Q; /* Q: the signatures it has room for */
  uint64_t seed;
  int64_t nperm, B;
  size_t smem_draw, smem_score, smem_pass2, ldv; /* ldv: doubles of ES per signature */
  int32_t *d_size, *d_pos, *d_tix, *d_dpos;     /* a batch's draws: sorted, draw index, draw order (B x kmax) */
  double *d_wr, *d_es;                            /* per signature: weights by rank (G), null ES by size (ldv) */
  /* per signature, as the one-signature engine's (gsea_preranked_gpu.cu) */
  int32_t *d_ps, *d_ns, *d_mult, *d_kpn;          /* nz + 1, nz + 1, nz, 2 (kp, kn) */
  double *d_pe, *d_ne, *d_obs;                    /* S + 1, S + 1, 2 nz + S */
  gsea_acc *d_sp, *d_sn;                          /* SLICES x nz */
  unsigned long long *d_np, *d_nn, *d_bp, *d_bn;  /* nz, nz, S + nz, S + nz */
  unsigned long long *d_hist;                     /* 2 S + 4 */
  double *d_pext, *h_pext;                        /* 2 B */
  int32_t *h_kpn;
};

/* Draws permutations first + blockIdx.x: sorted positions, their draw
 * indices (1-based) and the positions in draw order, kmax each. */
static __global__ void __launch_bounds__(PRE_THREADS)
k_pm_draw(int32_t kmax, int32_t G, uint64_t seed, int64_t first, int32_t H, int32_t NP, int32_t *pos, int32_t *tix,
          int32_t *dpos) {
  extern __shared__ __align__(16) unsigned char smem[];
  int32_t *hkey = reinterpret_cast<int32_t *>(smem), *hval = hkey + H, *spos = hval + H, *stix = spos + NP;
  size_t o = (size_t)blockIdx.x * kmax;
  pre_draw_block(kmax, G, seed, first + blockIdx.x, H, NP, hkey, hval, spos, stix);
  for (int32_t i = threadIdx.x; i < kmax; i += blockDim.x) {
    dpos[o + i] = spos[i];
    stix[i] = i + 1;
  }
  __syncthreads();
  pre_sort_block(spos, stix, NP);
  for (int32_t i = threadIdx.x; i < kmax; i += blockDim.x) {
    pos[o + i] = spos[i];
    tix[o + i] = stix[i];
  }
}

static __host__ __device__ size_t pm_score_head(int32_t nz, int32_t kmax) {
  return ((size_t)4 * (nz + 3 * (size_t)kmax) + 15) / 16 * 16;
}

/* Null ES of permutation blockIdx.x of the batch for signatures
 * blockIdx.y * warps * PM_PER_WARP on: a warp per signature, which gathers
 * the drawn weights in draw order and sums them in that order (lane 0, as
 * k_prerank's thread 0), then scores 32 sizes at a time, a lane each; the
 * positions drawn after the round's largest size are skipped by the whole
 * warp.  Out: es[v * ldv + (base + b) * nz + q]. */
static __global__ void __launch_bounds__(PM_WARPS * 32)
k_pm_score(const int32_t *size_g, int32_t nz, int32_t kmax, int32_t G, const double *wr, int32_t nb,
           const int32_t *pos_g, const int32_t *tix_g, const int32_t *dpos_g, double *es, size_t ldv, int64_t base) {
  extern __shared__ __align__(16) unsigned char smem[];
  int32_t *size = reinterpret_cast<int32_t *>(smem), *spos = size + nz, *stix = spos + kmax, *dpos = stix + kmax;
  const int warps = blockDim.x >> 5, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  double *wd = reinterpret_cast<double *>(smem + pm_score_head(nz, kmax)) + (size_t)w * (kmax + nz);
  double *nrs = wd + kmax; /* hit weight of each size's draws */
  const int64_t b = blockIdx.x;
  for (int32_t i = threadIdx.x; i < nz; i += blockDim.x) size[i] = size_g[i];
  for (int32_t i = threadIdx.x; i < kmax; i += blockDim.x) {
    spos[i] = pos_g[(size_t)b * kmax + i];
    stix[i] = tix_g[(size_t)b * kmax + i];
    dpos[i] = dpos_g[(size_t)b * kmax + i];
  }
  __syncthreads();
  int32_t v0 = blockIdx.y * warps * PM_PER_WARP, v1 = v0 + warps * PM_PER_WARP < nb ? v0 + warps * PM_PER_WARP : nb;
  for (int32_t v = v0 + w; v < v1; v += warps) {
    const double *wv = wr + (size_t)v * G;
    for (int32_t t = lane; t < kmax; t += 32) wd[t] = wv[dpos[t]];
    __syncwarp();
    if (lane == 0) {
      double nr = 0;
      int32_t q = 0;
      for (int32_t t = 0; t < kmax; t++) {
        nr = G_ADD(nr, wd[t]);
        if (q < nz && size[q] == t + 1) nrs[q++] = nr;
      }
    }
    __syncwarp();
    double *out = es + (size_t)v * ldv + (size_t)(base + b) * nz;
    for (int32_t q0 = 0; q0 < nz; q0 += 32) {
      int32_t q = q0 + lane, on = q < nz, K = on ? size[q] : 0;
      int32_t Kmax = size[q0 + 31 < nz ? q0 + 31 : nz - 1];
      double nr = on ? nrs[q] : 1.0;
      int unit = nr == 0; /* all weights 0: unit weights, as the CPU does */
      double inv_nr = G_DIV(1.0, unit ? (double)K : nr);
      double inv_nmiss = G_DIV(1.0, G_SUB((double)G, (double)K));
      gsea_es_state s;
      gsea_es_init(&s);
      for (int32_t i = 0; i < kmax; i++) {
        int32_t t = stix[i];
        if (t > Kmax) continue; /* the same for the whole warp */
        if (t <= K) gsea_es_hit(&s, spos[i], unit ? 1.0 : wd[t - 1], inv_nr, inv_nmiss);
      }
      if (on) out[q] = s.best;
    }
    __syncwarp(); /* wd and nrs are the next signature's */
  }
}

/* Pass 1 of a batch for signature blockIdx.z (pre_zpass1). */
static __global__ void k_pm_pass1(const double *es, size_t ldv, int64_t base, int64_t n, int32_t nz, int32_t S,
                                  const int32_t *ps, const int32_t *ns, const double *pe, const double *ne,
                                  gsea_acc *sp, gsea_acc *sn, unsigned long long *np, unsigned long long *nn,
                                  unsigned long long *bp, unsigned long long *bn) {
  size_t v = blockIdx.z, z1 = (size_t)nz + 1, s1 = (size_t)S + 1, nbin = (size_t)S + nz;
  pre_zpass1(es + v * ldv + (size_t)base * nz, n, nz, ps + v * z1, ns + v * z1, pe + v * s1, ne + v * s1,
             sp + v * SLICES * nz, sn + v * SLICES * nz, np + v * nz, nn + v * nz, bp + v * nbin, bn + v * nbin);
}

/* Pass 2 of a batch for signature blockIdx.y (gsea_pass2_block). */
static __global__ void __launch_bounds__(PRE_THREADS)
k_pm_pass2(const double *es, size_t ldv, int64_t base, int64_t n, int32_t nz, int32_t S, const int32_t *mult,
           const double *obs, const int32_t *kpn, int fbits, double *pext, int64_t B, unsigned long long *gh) {
  size_t v = blockIdx.y;
  gsea_pass2_block<PRE_THREADS>(es + v * ldv + (size_t)base * nz, n, nz, mult + v * nz,
                                obs + v * (2 * (size_t)nz + S), kpn[2 * v], kpn[2 * v + 1], fbits, pext + v * 2 * B,
                                B, gh + v * (2 * (size_t)S + 4));
}

extern "C" void sbg_gsea_pm_gpu_close(sbg_gsea_pm_gpu *h) {
  if (!h) return;
  cudaSetDevice(h->device);
  if (h->stream) cudaStreamSynchronize(h->stream);
  void *d[] = {h->d_size, h->d_pos, h->d_tix, h->d_dpos, h->d_wr, h->d_es, h->d_ps, h->d_ns, h->d_mult, h->d_kpn,
               h->d_pe, h->d_ne, h->d_obs, h->d_sp, h->d_sn, h->d_np, h->d_nn, h->d_bp, h->d_bn, h->d_hist,
               h->d_pext};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) cudaFree(d[i]);
  if (h->stream) cudaStreamDestroy(h->stream);
  free(h->h_pext);
  free(h->h_kpn);
  free(h);
}

extern "C" int32_t sbg_gsea_pm_gpu_room(const sbg_gsea_pm_gpu *h) { return h->Q; }
extern "C" int64_t sbg_gsea_pm_gpu_max_batch(const sbg_gsea_pm_gpu *h) { return h->B; }

/* Shared memory of the kernels; 0 where a kernel cannot run (the caller
 * then runs each signature alone). */
static int pm_fit(sbg_gsea_pm_gpu *h, int max_smem) {
  h->smem_draw = 8 * ((size_t)h->H + h->NP);
  size_t per_warp = 8 * ((size_t)h->kmax + h->nz);
  h->warps = PM_WARPS;
  while (h->warps > 1 && pm_score_head(h->nz, h->kmax) + h->warps * per_warp > (size_t)max_smem) h->warps--;
  h->smem_score = pm_score_head(h->nz, h->kmax) + h->warps * per_warp;
  return h->smem_draw <= (size_t)max_smem && h->smem_score <= (size_t)max_smem &&
         gsea_pass2_smem(h->S, h->S) + 1024 <= (size_t)max_smem;
}

/* How many signatures fit the device's free memory, and whether pass 1's
 * ES can stay for pass 2 (when at least 64 signatures, or all wanted, fit
 * that way, and keep_max, when >= 0, allows nperm). */
static void pm_room(sbg_gsea_pm_gpu *h, int32_t want, size_t free_b, int64_t keep_max) {
  size_t nz = h->nz, S = h->S;
  size_t fixed = (size_t)h->B * h->kmax * 3 * sizeof(int32_t) + nz * sizeof(int32_t) + ((size_t)64 << 20);
  size_t per = (size_t)h->G * 8 + (2 * (nz + 1) + nz + 2) * 4 + (2 * (S + 1) + 2 * nz + S) * 8 +
               2 * SLICES * nz * sizeof(gsea_acc) + (2 * nz + 2 * (S + nz) + 2 * S + 4) * 8 + 2 * (size_t)h->B * 8;
  double budget = 0.85 * (double)free_b - (double)fixed;
  double keep_q = budget / ((double)per + 8.0 * (double)h->nperm * nz);
  double batch_q = budget / ((double)per + 8.0 * (double)h->B * nz);
  int32_t min_keep = want < 64 ? want : 64;
  h->keep = keep_q >= min_keep && (keep_max < 0 || keep_max >= h->nperm);
  double q = h->keep ? keep_q : batch_q;
  h->Q = q >= want ? want : q < 1 ? 0 : (int32_t)q;
  h->ldv = h->keep ? (size_t)h->nperm * nz : (size_t)h->B * nz;
}

#define PM_ALLOC(ptr, count, what) \
  SBG_TRY(sbg_device_alloc((void **)&(ptr), (size_t)(count) * sizeof(*(ptr)), what, ctx))
#define PM_ZERO(ptr, count) SBG_CUDA_CHECK(cudaMemsetAsync(ptr, 0, (size_t)(count) * sizeof(*(ptr)), h->stream))

/* A handle for up to want signatures whose sets have the sizes z (G genes,
 * S sets), nperm permutations of seed in batches of batch (0: its own
 * choice); *out NULL where the kernels or one
 * signature do not fit the device. */
extern "C" sbg_status sbg_gsea_pm_gpu_open(const sbg_gsea_sizes *z, int32_t G, int32_t S, uint64_t seed, int64_t nperm,
                                           int64_t batch, int64_t keep_max, int device, int32_t want,
                                           sbg_gsea_pm_gpu **out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int max_smem = 0;
  size_t free_b = 0, total_b = 0, Q, nz;
  *out = NULL;
  sbg_gsea_pm_gpu *h = (sbg_gsea_pm_gpu *)calloc(1, sizeof(sbg_gsea_pm_gpu));
  if (!h) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the GPU engine");
  h->device = device;
  h->G = G;
  h->S = S;
  h->nz = z->n;
  h->kmax = z->size[z->n - 1];
  h->seed = seed;
  h->nperm = nperm;
  pre_draw_room(h->kmax, &h->H, &h->NP);
  /* a batch: about PM_UNITS (permutation, signature) pairs (or batch when > 0), whole chunks of 64 */
  h->B = batch > 0 ? batch : (int64_t)PM_UNITS / (want > 0 ? want : 1);
  h->B = h->B < 64 ? 64 : h->B > 65536 ? 65536 : h->B / 64 * 64;
  if (h->B > (nperm + 63) / 64 * 64) h->B = (nperm + 63) / 64 * 64;
  SBG_TRY(sbg_device_select(device, ctx));
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  SBG_CUDA_CHECK(cudaDeviceGetAttribute(&h->sms, cudaDevAttrMultiProcessorCount, device));
  SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  pm_room(h, want, free_b, keep_max);
  if (!pm_fit(h, max_smem) || h->Q < 1) { /* each signature alone */
    sbg_gsea_pm_gpu_close(h);
    return SBG_OK;
  }
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_pm_draw, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)h->smem_draw));
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_pm_score, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)h->smem_score));
  SBG_CUDA_CHECK(cudaFuncSetAttribute(k_pm_pass2, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem - 1024));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking));
  Q = (size_t)h->Q;
  nz = (size_t)h->nz;
  h->h_pext = (double *)malloc(Q * 2 * (size_t)h->B * sizeof(double));
  h->h_kpn = (int32_t *)calloc(2 * Q, sizeof(int32_t));
  if (!h->h_pext || !h->h_kpn) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the signatures' extremes");
    goto done;
  }
  PM_ALLOC(h->d_size, nz, "the set sizes");
  PM_ALLOC(h->d_pos, (size_t)h->B * h->kmax, "a batch of draws");
  PM_ALLOC(h->d_tix, (size_t)h->B * h->kmax, "a batch of draws");
  PM_ALLOC(h->d_dpos, (size_t)h->B * h->kmax, "a batch of draws");
  PM_ALLOC(h->d_wr, Q * h->G, "the signatures' running-sum weights");
  PM_ALLOC(h->d_es, Q * h->ldv, "the signatures' null ES");
  PM_ALLOC(h->d_ps, Q * (nz + 1), "the statistics");
  PM_ALLOC(h->d_ns, Q * (nz + 1), "the statistics");
  PM_ALLOC(h->d_mult, Q * nz, "the statistics");
  PM_ALLOC(h->d_kpn, 2 * Q, "the statistics");
  PM_ALLOC(h->d_pe, Q * (S + 1), "the statistics");
  PM_ALLOC(h->d_ne, Q * (S + 1), "the statistics");
  PM_ALLOC(h->d_obs, Q * (2 * nz + S), "the statistics");
  PM_ALLOC(h->d_sp, Q * SLICES * nz, "the statistics");
  PM_ALLOC(h->d_sn, Q * SLICES * nz, "the statistics");
  PM_ALLOC(h->d_np, Q * nz, "the statistics");
  PM_ALLOC(h->d_nn, Q * nz, "the statistics");
  PM_ALLOC(h->d_bp, Q * (S + nz), "the statistics");
  PM_ALLOC(h->d_bn, Q * (S + nz), "the statistics");
  PM_ALLOC(h->d_hist, Q * (2 * (size_t)S + 4), "the statistics");
  PM_ALLOC(h->d_pext, Q * 2 * (size_t)h->B, "the statistics");
  PM_ZERO(h->d_sp, Q * SLICES * nz);
  PM_ZERO(h->d_sn, Q * SLICES * nz);
  PM_ZERO(h->d_np, Q * nz);
  PM_ZERO(h->d_nn, Q * nz);
  PM_ZERO(h->d_bp, Q * (S + nz));
  PM_ZERO(h->d_bn, Q * (S + nz));
  PM_ZERO(h->d_hist, Q * (2 * (size_t)S + 4));
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->d_size, z->size, nz * sizeof(int32_t), cudaMemcpyHostToDevice, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
done:
  if (st != SBG_OK) {
    sbg_gsea_pm_gpu_close(h);
    return st;
  }
  *out = h;
  return st;
}

#define PM_TO_DEVICE(dst, src, count) \
  SBG_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)(count) * sizeof(*(dst)), cudaMemcpyHostToDevice, h->stream))

/* Signature v's weights by rank (G) and its pass-1 tables (zstats' ps,
 * ns, pe, ne and the sets per size). */
extern "C" sbg_status sbg_gsea_pm_gpu_signature(sbg_gsea_pm_gpu *h, int32_t v, const double *wr, const int32_t *ps,
                                                const int32_t *ns, const double *pe, const double *ne,
                                                const int32_t *mult, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t nz = h->nz, z1 = nz + 1, s1 = (size_t)h->S + 1;
  if (v < 0 || v >= h->Q) return sbg_fail(ctx, SBG_ERR_INTERNAL, "GPU signature %d of %d", (int)v, (int)h->Q);
  SBG_TRY(sbg_device_select(h->device, ctx));
  PM_TO_DEVICE(h->d_wr + (size_t)v * h->G, wr, h->G);
  PM_TO_DEVICE(h->d_ps + v * z1, ps, z1);
  PM_TO_DEVICE(h->d_ns + v * z1, ns, z1);
  PM_TO_DEVICE(h->d_mult + v * nz, mult, nz);
  if (ps[nz]) PM_TO_DEVICE(h->d_pe + v * s1, pe, ps[nz]);
  if (ns[nz]) PM_TO_DEVICE(h->d_ne + v * s1, ne, ns[nz]);
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream)); /* the sources are the caller's */
done:
  return st;
}

/* Draws permutations [first, first + n) and scores them for signatures
 * [0, nb) into their ES at row base. */
static sbg_status pm_null(sbg_gsea_pm_gpu *h, int32_t nb, int64_t first, int64_t n, int64_t base, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t per_block = h->warps * PM_PER_WARP;
  if (n < 1 || n > h->B || nb < 1 || nb > h->Q)
    return sbg_fail(ctx, SBG_ERR_INTERNAL, "GPU batch of %lld permutations, %d signatures", (long long)n, (int)nb);
  SBG_TRY(sbg_device_select(h->device, ctx));
  k_pm_draw<<<(unsigned)n, PRE_THREADS, h->smem_draw, h->stream>>>(h->kmax, h->G, h->seed, first, h->H, h->NP,
                                                                     h->d_pos, h->d_tix, h->d_dpos);
  SBG_CUDA_CHECK(cudaGetLastError());
  {
    dim3 g((unsigned)n, (unsigned)((nb + per_block - 1) / per_block));
    k_pm_score<<<g, h->warps * 32, h->smem_score, h->stream>>>(h->d_size, h->nz, h->kmax, h->G, h->d_wr, nb, h->d_pos,
                                                               h->d_tix, h->d_dpos, h->d_es, h->ldv, base);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
done:
  return st;
}

/* Pass 1 over permutations [first, first + n) for signatures [0, nb). */
extern "C" sbg_status sbg_gsea_pm_gpu_pass1(sbg_gsea_pm_gpu *h, int32_t nb, int64_t first, int64_t n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int64_t base = h->keep ? first - 1 : 0;
  SBG_TRY(pm_null(h, nb, first, n, base, ctx));
  {
    dim3 g((unsigned)((h->nz + 127) / 128), SLICES, (unsigned)nb);
    k_pm_pass1<<<g, 128, 0, h->stream>>>(h->d_es, h->ldv, base, n, h->nz, h->S, h->d_ps, h->d_ns, h->d_pe, h->d_ne,
                                         h->d_sp, h->d_sn, h->d_np, h->d_nn, h->d_bp, h->d_bn);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream)); /* the caller polls between batches */
done:
  return st;
}

/* Signature v's pass-1 sums, counts and bins added to the host's (as
 * sbg_gsea_pre_gpu_pass1_result). */
extern "C" sbg_status sbg_gsea_pm_gpu_pass1_result(sbg_gsea_pm_gpu *h, int32_t v, const int32_t *ps, const int32_t *ns,
                                                   gsea_acc *sp, gsea_acc *sn, int64_t *np, int64_t *nn, int64_t *bp,
                                                   int64_t *bn, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t nz = h->nz, nbp = (size_t)ps[nz] + nz, nbn = (size_t)ns[nz] + nz, nbin = (size_t)h->S + nz;
  gsea_acc *a = (gsea_acc *)malloc(2 * (size_t)SLICES * nz * sizeof(gsea_acc));
  unsigned long long *c = (unsigned long long *)malloc((2 * nz + nbp + nbn) * sizeof(unsigned long long));
  if (!a || !c) { free(a); free(c); return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics"); }
  SBG_TRY(sbg_device_select(h->device, ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(a, h->d_sp + v * SLICES * nz, SLICES * nz * sizeof(gsea_acc), cudaMemcpyDeviceToHost,
                                 h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(a + SLICES * nz, h->d_sn + v * SLICES * nz, SLICES * nz * sizeof(gsea_acc),
                                 cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c, h->d_np + v * nz, nz * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + nz, h->d_nn + v * nz, nz * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + 2 * nz, h->d_bp + v * nbin, nbp * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(c + 2 * nz + nbp, h->d_bn + v * nbin, nbn * 8, cudaMemcpyDeviceToHost, h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  pre_merge_pass1(a, c, (int32_t)nz, nbp, nbn, sp, sn, np, nn, bp, bn);
done:
  free(a);
  free(c);
  return st;
}

/* Signature v's pass-2 tables: per size its mpos and mneg, the observed
 * NES >= 0 ascending (kp) and the negated ones < 0 (kn). */
extern "C" sbg_status sbg_gsea_pm_gpu_pass2_setup(sbg_gsea_pm_gpu *h, int32_t v, const double *mpos,
                                                  const double *mneg, const double *opos, int32_t kp,
                                                  const double *oneg, int32_t kn, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t nz = h->nz;
  double *obs = h->d_obs + (size_t)v * (2 * nz + h->S);
  SBG_TRY(sbg_device_select(h->device, ctx));
  h->h_kpn[2 * v] = kp;
  h->h_kpn[2 * v + 1] = kn;
  PM_TO_DEVICE(obs, mpos, nz);
  PM_TO_DEVICE(obs + nz, mneg, nz);
  if (kp) PM_TO_DEVICE(obs + 2 * nz, opos, kp);
  if (kn) PM_TO_DEVICE(obs + 2 * nz + kp, oneg, kn);
  PM_TO_DEVICE(h->d_kpn + 2 * v, h->h_kpn + 2 * v, 2);
  if (gsea_pass2_smem(kp, kn) > h->smem_pass2) h->smem_pass2 = gsea_pass2_smem(kp, kn);
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
done:
  return st;
}

/* Pass 2 over permutations [first, first + n) for signatures [0, nb):
 * each one's max and min null NES into pmax[v], pmin[v] (index first - 1
 * on). */
extern "C" sbg_status sbg_gsea_pm_gpu_pass2(sbg_gsea_pm_gpu *h, int32_t nb, int64_t first, int64_t n, int fbits,
                                            double *const *pmax, double *const *pmin, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int64_t base = h->keep ? first - 1 : 0;
  size_t B = (size_t)h->B;
  if (!h->keep) SBG_TRY(pm_null(h, nb, first, n, base, ctx));
  SBG_TRY(sbg_device_select(h->device, ctx));
  {
    /* about 8 blocks per multiprocessor in all, each over its share of the batch */
    int64_t per = ((int64_t)h->sms * 8 + nb - 1) / nb;
    dim3 g((unsigned)(per < n ? per : n), (unsigned)nb);
    k_pm_pass2<<<g, PRE_THREADS, h->smem_pass2, h->stream>>>(h->d_es, h->ldv, base, n, h->nz, h->S, h->d_mult,
                                                             h->d_obs, h->d_kpn, fbits, h->d_pext, h->B, h->d_hist);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(h->h_pext, h->d_pext, (size_t)nb * 2 * B * sizeof(double), cudaMemcpyDeviceToHost,
                                 h->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(h->stream));
  for (int32_t v = 0; v < nb; v++) {
    memcpy(pmax[v] + first - 1, h->h_pext + (size_t)v * 2 * B, (size_t)n * sizeof(double));
    memcpy(pmin[v] + first - 1, h->h_pext + (size_t)v * 2 * B + B, (size_t)n * sizeof(double));
  }
done:
  return st;
}

/* Signature v's pass-2 bins and valid counts added to the host's. */
extern "C" sbg_status sbg_gsea_pm_gpu_pass2_result(sbg_gsea_pm_gpu *h, int32_t v, uint64_t *hp, uint64_t *hn,
                                                   int64_t *valid_pos, int64_t *valid_neg, sbg_ctx *ctx) {
  return gsea_gpu_add_bins(h->device, h->d_hist + (size_t)v * (2 * (size_t)h->S + 4), h->h_kpn[2 * v],
                           h->h_kpn[2 * v + 1], hp, hn, valid_pos, valid_neg, h->stream, ctx);
}
