/* GPU engine of grnEvolve(backend = "gpu"): whole generations run on the
 * device (breeding, evaluation, per-island sort, migration, stop test) with
 * no host round trip; the host polls once per chunk of generations.  The
 * operators are grn_model.h's, as on the CPU, so runs are identical. */
#include <cub/cub.cuh>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_check.cuh"
#include "grn.h"
#include "grn_model.h"

static double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Device state of one run.  The stop flag is set on the device when the
 * best score reaches the target; every kernel of later generations then
 * returns at once, so the device stops at the same generation as the CPU
 * even inside a chunk launched ahead. */
typedef struct grn_dev {
  int *stop;
  int64_t *gens_done;
} grn_dev;

static __global__ void init_kernel(sbg_grn_problem pb, grn_pop pop, uint64_t seed) {
  int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= pop.count) return;
  grn_init_individual(&pb, grn_view_at(&pop, pb.n, pb.w, k), seed, grn_stream(0, pop.count, k));
}

/* score and sort key (score * size + slot: distinct, so the sorted order,
 * ties by slot, does not depend on the sort) of every individual. */
static __global__ void eval_kernel(sbg_grn_problem pb, grn_pop pop, int size, int64_t *score,
                                   uint64_t *keys, const int *stop) {
  if (stop && *stop) return;
  int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= pop.count) return;
  int64_t s = grn_evaluate(&pb, grn_view_at(&pop, pb.n, pb.w, k), NULL, NULL);
  score[k] = s;
  if (keys) keys[k] = (uint64_t)s * (uint64_t)size + (uint64_t)(k % size);
}

/* Sorted keys -> global indices, best first per island. */
static __global__ void order_kernel(const uint64_t *sorted, int64_t pop, int size, int32_t *ord,
                                    const int *stop) {
  if (*stop) return;
  int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pop) return;
  ord[p] = (int32_t)((p / size) * size + (int64_t)(sorted[p] % (uint64_t)size));
}

/* End of generation `gen`: history, generations done, stop on target. */
static __global__ void finish_kernel(const uint64_t *sorted, int islands, int size, int64_t gen,
                                     int64_t rows, int64_t target, double *history, int *stop,
                                     int64_t *gens_done) {
  if (*stop || threadIdx.x != 0) return;
  uint64_t best = ~(uint64_t)0;
  for (int isl = 0; isl < islands; isl++) {
    uint64_t s = sorted[(int64_t)isl * size] / (uint64_t)size;
    history[(int64_t)isl * rows + gen] = (double)s;
    if (s < best) best = s;
  }
  *gens_done = gen;
  if (target >= 0 && best <= (uint64_t)target) *stop = 1;
}

/* Ring migration in two passes through a snapshot, so that every island
 * sends what it had before any island received. */
static __global__ void migrate_gather(sbg_grn_problem pb, grn_pop pop, grn_pop mig,
                                      const int64_t *score, int64_t *mig_score,
                                      const int32_t *ord, int islands, int size, int migrants,
                                      const int *stop) {
  if (*stop) return;
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= islands * migrants) return;
  int isl = t / migrants, r = t % migrants;
  int64_t src = ord[(int64_t)isl * size + r];
  grn_copy(&pb, grn_view_at(&mig, pb.n, pb.w, t), grn_view_at(&pop, pb.n, pb.w, src));
  mig_score[t] = score[src];
}

static __global__ void migrate_scatter(sbg_grn_problem pb, grn_pop pop, grn_pop mig,
                                       int64_t *score, const int64_t *mig_score,
                                       const int32_t *ord, uint64_t *keys, int islands,
                                       int size, int migrants, const int *stop) {
  if (*stop) return;
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= islands * migrants) return;
  int isl = t / migrants, r = t % migrants, to = (isl + 1) % islands;
  int64_t dst = ord[(int64_t)to * size + size - 1 - r];
  grn_copy(&pb, grn_view_at(&pop, pb.n, pb.w, dst), grn_view_at(&mig, pb.n, pb.w, t));
  score[dst] = mig_score[t];
  keys[dst] = (uint64_t)mig_score[t] * (uint64_t)size + (uint64_t)(dst % size);
}

/* Cumulative roulette weights of each island in sorted order: one block
 * per island; integer sums, so the result is that of the CPU's loop. */
#define GRN_SCAN_THREADS 256
static __global__ void roulette_kernel(const int64_t *score, const int32_t *ord, int size,
                                       uint64_t *cum, const int *stop) {
  if (*stop) return;
  typedef cub::BlockScan<unsigned long long, GRN_SCAN_THREADS> scan_t;
  __shared__ typename scan_t::TempStorage tmp;
  __shared__ unsigned long long carry;
  int64_t base = (int64_t)blockIdx.x * size;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int t0 = 0; t0 < size; t0 += GRN_SCAN_THREADS) {
    int r = t0 + threadIdx.x;
    unsigned long long wgt = r < size ? grn_weight(score[ord[base + r]]) : 0ull, incl, total;
    scan_t(tmp).InclusiveSum(wgt, incl, total);
    if (r < size) cum[base + r] = carry + incl;
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

static __global__ void breed_kernel(sbg_grn_problem pb, sbg_grn_params gp, grn_pop src,
                                    grn_pop dst, const int32_t *ord, const uint64_t *cum,
                                    int64_t gen, const int *stop) {
  if (*stop) return;
  int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int half = (int)(gp.pop / gp.islands) / 2;
  if (q >= gp.pop / 2) return;
  grn_breed_pair(&pb, &gp, &src, &dst, ord, cum, (int)(q / half), (int)(q % half), gen);
}

/* One individual of a device population into a contiguous host layout. */
static __global__ void gather_kernel(sbg_grn_problem pb, grn_pop pop, int64_t k, uint32_t *act,
                                     uint32_t *rep, uint8_t *rule) {
  grn_view v = grn_view_at(&pop, pb.n, pb.w, k);
  int nw = pb.n * pb.w;
  for (int e = threadIdx.x; e < nw; e += blockDim.x) {
    act[e] = GRN_ACT(v, e);
    rep[e] = GRN_REP(v, e);
  }
  for (int i = threadIdx.x; i < pb.n; i += blockDim.x) rule[i] = GRN_RULE(v, i);
}

static unsigned blocks_for(int64_t n, int threads) {
  return (unsigned)((n + threads - 1) / threads);
}

/* A population on the device, interleaved (soa = 1). */
static sbg_status pop_device_alloc(grn_pop *p, int64_t count, int n, int w, const char *what,
                                   sbg_ctx *ctx) {
  sbg_status st;
  size_t words = (size_t)count * n * w;
  p->count = count;
  p->soa = 1;
  st = sbg_device_alloc((void **)&p->act, words * sizeof(uint32_t), what, ctx);
  if (st == SBG_OK) st = sbg_device_alloc((void **)&p->rep, words * sizeof(uint32_t), what, ctx);
  if (st == SBG_OK) st = sbg_device_alloc((void **)&p->rule, (size_t)count * n, what, ctx);
  return st;
}

static void pop_device_free(grn_pop *p) {
  cudaFree(p->act);
  cudaFree(p->rep);
  cudaFree(p->rule);
  p->act = p->rep = NULL;
  p->rule = NULL;
}

/* The problem's arrays on the device; `d` gets the same fields with device
 * pointers, for passing to kernels by value. */
static sbg_status problem_to_device(const sbg_grn_problem *pb, sbg_grn_problem *d,
                                    uint32_t **buf, cudaStream_t stream, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t nw = (size_t)pb->n * pb->w;
  size_t words = 2 * nw + 2 * (size_t)pb->w;
  *d = *pb;
  d->lut = NULL; /* the GPU computes the rules */
  SBG_TRY(sbg_device_alloc((void **)buf, words * sizeof(uint32_t), "the reference network", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf, pb->ref_act, nw * 4, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf + nw, pb->ref_rep, nw * 4, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf + 2 * nw, pb->from, pb->w * 4, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(*buf + 2 * nw + pb->w, pb->to, pb->w * 4, cudaMemcpyHostToDevice, stream));
  d->ref_act = *buf;
  d->ref_rep = *buf + nw;
  d->from = *buf + 2 * nw;
  d->to = *buf + 2 * nw + pb->w;
done:
  return st;
}

static int bits_for(uint64_t x) {
  int b = 0;
  while (b < 64 && (x >> b) != 0) b++;
  return b < 1 ? 1 : b;
}

extern "C" sbg_status sbg_grn_evolve_gpu(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                                         sbg_grn_result *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = NULL;
  sbg_grn_problem dpb;
  uint32_t *d_prob = NULL;
  grn_pop buf[2] = {{0}, {0}}, mig = {0};
  int64_t *d_score = NULL, *d_mig_score = NULL, *d_gens = NULL;
  uint64_t *d_keys = NULL, *d_sorted = NULL, *d_cum = NULL;
  int32_t *d_ord = NULL, *d_offsets = NULL;
  int *d_stop = NULL;
  double *d_hist = NULL;
  void *d_temp = NULL;
  size_t temp_bytes = 0;
  int32_t *h_offsets = NULL;
  uint32_t *d_best = NULL, *h_best = NULL;

  const int n = pb->n, w = pb->w, I = gp->islands, K = gp->migrants;
  const int64_t P = gp->pop, G = gp->generations, rows = G + 1;
  const int size = (int)(P / I);
  const int T = 128;
  const uint64_t max_score = (uint64_t)pb->wn * n + (uint64_t)pb->wl * n * n;
  const int end_bit = bits_for(max_score * (uint64_t)size + (uint64_t)size);
  int64_t g = 0, gens_done = 0;
  int stop = 0;
  double t0 = wall_seconds();

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SBG_TRY(problem_to_device(pb, &dpb, &d_prob, stream, ctx));
  SBG_TRY(pop_device_alloc(&buf[0], P, n, w, "the population", ctx));
  SBG_TRY(pop_device_alloc(&buf[1], P, n, w, "the population", ctx));
  if (I > 1 && K > 0) SBG_TRY(pop_device_alloc(&mig, (int64_t)I * K, n, w, "the migrants", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_score, P * sizeof(int64_t), "the scores", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_mig_score, ((size_t)I * K + 1) * sizeof(int64_t), "the migrants", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_keys, P * sizeof(uint64_t), "the sort keys", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_sorted, P * sizeof(uint64_t), "the sort keys", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_cum, P * sizeof(uint64_t), "the roulette", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_ord, P * sizeof(int32_t), "the order", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_offsets, (I + 1) * sizeof(int32_t), "the islands", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_stop, sizeof(int), "the stop flag", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_gens, sizeof(int64_t), "the stop flag", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_hist, (size_t)rows * I * sizeof(double), "the fitness history", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_best, (2 * (size_t)n * w + n + 4) * sizeof(uint32_t), "the best network", ctx));

  h_offsets = (int32_t *)malloc((I + 1) * sizeof(int32_t));
  h_best = (uint32_t *)malloc((2 * (size_t)n * w + n + 4) * sizeof(uint32_t));
  if (!h_offsets || !h_best) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate host buffers"); goto done; }
  for (int i = 0; i <= I; i++) h_offsets[i] = (int32_t)((int64_t)i * size);
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_offsets, h_offsets, (I + 1) * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(d_stop, 0, sizeof(int), stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(d_gens, 0, sizeof(int64_t), stream));
  SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(
      NULL, temp_bytes, d_keys, d_sorted, (int)P, I, d_offsets, d_offsets + 1, 0, end_bit, stream));
  SBG_TRY(sbg_device_alloc(&d_temp, temp_bytes + 1, "the sort's scratch space", ctx));

#define GRN_SORT()                                                                              \
  do {                                                                                          \
    SBG_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortKeys(d_temp, temp_bytes, d_keys, d_sorted, \
                                                          (int)P, I, d_offsets, d_offsets + 1, \
                                                          0, end_bit, stream));                 \
    order_kernel<<<blocks_for(P, T), T, 0, stream>>>(d_sorted, P, size, d_ord, d_stop);         \
    SBG_CUDA_CHECK(cudaGetLastError());                                                         \
  } while (0)

  /* generation 0 */
  init_kernel<<<blocks_for(P, T), T, 0, stream>>>(dpb, buf[0], gp->seed);
  SBG_CUDA_CHECK(cudaGetLastError());
  eval_kernel<<<blocks_for(P, T), T, 0, stream>>>(dpb, buf[0], size, d_score, d_keys, d_stop);
  SBG_CUDA_CHECK(cudaGetLastError());
  GRN_SORT();
  finish_kernel<<<1, 32, 0, stream>>>(d_sorted, I, size, 0, rows, gp->target, d_hist, d_stop, d_gens);
  SBG_CUDA_CHECK(cudaGetLastError());

  out->stop_reason = SBG_GRN_STOP_GENERATIONS;
  {
    int64_t chunk = 4;
    while (g < G) {
      double tc = wall_seconds();
      int64_t g_end = g + chunk < G ? g + chunk : G;
      for (; g < g_end;) {
        g++;
        grn_pop src = buf[(g - 1) & 1], dst = buf[g & 1];
        if (I > 1 && K > 0 && g % gp->migration_interval == 0) {
          migrate_gather<<<blocks_for((int64_t)I * K, T), T, 0, stream>>>(
              dpb, src, mig, d_score, d_mig_score, d_ord, I, size, K, d_stop);
          SBG_CUDA_CHECK(cudaGetLastError());
          migrate_scatter<<<blocks_for((int64_t)I * K, T), T, 0, stream>>>(
              dpb, src, mig, d_score, d_mig_score, d_ord, d_keys, I, size, K, d_stop);
          SBG_CUDA_CHECK(cudaGetLastError());
          GRN_SORT();
        }
        if (gp->roulette) {
          roulette_kernel<<<I, GRN_SCAN_THREADS, 0, stream>>>(d_score, d_ord, size, d_cum, d_stop);
          SBG_CUDA_CHECK(cudaGetLastError());
        }
        breed_kernel<<<blocks_for(P / 2, T), T, 0, stream>>>(dpb, *gp, src, dst, d_ord, d_cum, g, d_stop);
        SBG_CUDA_CHECK(cudaGetLastError());
        eval_kernel<<<blocks_for(P, T), T, 0, stream>>>(dpb, dst, size, d_score, d_keys, d_stop);
        SBG_CUDA_CHECK(cudaGetLastError());
        GRN_SORT();
        finish_kernel<<<1, 32, 0, stream>>>(d_sorted, I, size, g, rows, gp->target, d_hist, d_stop, d_gens);
        SBG_CUDA_CHECK(cudaGetLastError());
      }
      SBG_CUDA_CHECK(cudaMemcpyAsync(&stop, d_stop, sizeof(int), cudaMemcpyDeviceToHost, stream));
      SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (stop) break;
      double t = wall_seconds();
      if (gp->time_limit > 0 && t - t0 >= gp->time_limit) { out->stop_reason = SBG_GRN_STOP_TIME; break; }
      double frac = (double)g / (double)G;
      if (gp->time_limit > 0 && (t - t0) / gp->time_limit > frac) frac = (t - t0) / gp->time_limit;
      SBG_TRY(sbg_poll(ctx, frac));
      /* chunks of about 0.1 s between polls */
      if (t - tc < 0.05 && chunk < (1 << 20)) chunk *= 2;
    }
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(&gens_done, d_gens, sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(&stop, d_stop, sizeof(int), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (stop) out->stop_reason = SBG_GRN_STOP_TARGET;
  out->generations_run = gens_done;
  /* history: rows 0..gens_done of each island (column-major) */
  for (int isl = 0; isl < I; isl++)
    SBG_CUDA_CHECK(cudaMemcpyAsync(out->history + (int64_t)isl * rows, d_hist + (int64_t)isl * rows,
                                   (gens_done + 1) * sizeof(double), cudaMemcpyDeviceToHost, stream));
  {
    /* the best of all islands, ties by index, from the last population */
    int32_t *h_ord = (int32_t *)h_offsets; /* I + 1 >= I entries, reused */
    int64_t *h_first = NULL;
    for (int isl = 0; isl < I; isl++)
      SBG_CUDA_CHECK(cudaMemcpyAsync(h_ord + isl, d_ord + (int64_t)isl * size, sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    h_first = (int64_t *)malloc(I * sizeof(int64_t));
    if (!h_first) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate host buffers"); goto done; }
    int64_t kb = h_ord[0], sb = 0;
    for (int isl = 0; isl < I; isl++) {
      cudaError_t e = cudaMemcpy(h_first + isl, d_score + h_ord[isl], sizeof(int64_t), cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) { free(h_first); SBG_CUDA_CHECK(e); }
    }
    sb = h_first[0];
    for (int isl = 1; isl < I; isl++)
      if (h_first[isl] < sb) { sb = h_first[isl]; kb = h_ord[isl]; }
    free(h_first);
    grn_pop last = buf[gens_done & 1];
    size_t nw = (size_t)n * w;
    gather_kernel<<<1, 256, 0, stream>>>(dpb, last, kb, d_best, d_best + nw, (uint8_t *)(d_best + 2 * nw));
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(h_best, d_best, (2 * nw + n + 4) * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    grn_view v = {h_best, h_best + nw, (uint8_t *)(h_best + 2 * nw), 1};
    out->best_score = grn_evaluate(pb, v, &out->best_dn, &out->best_dl);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) out->best_links[i + (int64_t)j * n] = grn_link_get(pb, v, i, j);
      out->best_rules[i] = GRN_RULE(v, i);
    }
  }
#undef GRN_SORT
done:
  if (stream) cudaStreamSynchronize(stream);
  cudaFree(d_prob);
  pop_device_free(&buf[0]);
  pop_device_free(&buf[1]);
  pop_device_free(&mig);
  cudaFree(d_score); cudaFree(d_mig_score); cudaFree(d_gens);
  cudaFree(d_keys); cudaFree(d_sorted); cudaFree(d_cum);
  cudaFree(d_ord); cudaFree(d_offsets); cudaFree(d_stop);
  cudaFree(d_hist); cudaFree(d_temp); cudaFree(d_best);
  free(h_offsets);
  free(h_best);
  if (stream) cudaStreamDestroy(stream);
  return st;
}

extern "C" sbg_status sbg_grn_bench_gpu(const sbg_grn_problem *pb, int64_t pop, int reps,
                                        uint64_t seed, double *seconds, double *checksum,
                                        sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  sbg_grn_problem dpb;
  uint32_t *d_prob = NULL;
  grn_pop p = {0};
  int64_t *d_score = NULL, *h_score = NULL;
  const int T = 128;
  *seconds = 0;
  *checksum = 0;

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SBG_CUDA_CHECK(cudaEventCreate(&e0));
  SBG_CUDA_CHECK(cudaEventCreate(&e1));
  SBG_TRY(problem_to_device(pb, &dpb, &d_prob, stream, ctx));
  SBG_TRY(pop_device_alloc(&p, pop, pb->n, pb->w, "the population", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_score, pop * sizeof(int64_t), "the scores", ctx));
  h_score = (int64_t *)malloc(pop * sizeof(int64_t) + 1);
  if (!h_score) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the scores"); goto done; }
  init_kernel<<<blocks_for(pop, T), T, 0, stream>>>(dpb, p, seed);
  SBG_CUDA_CHECK(cudaGetLastError());
  /* one warm-up pass, then the timed ones */
  eval_kernel<<<blocks_for(pop, T), T, 0, stream>>>(dpb, p, 1, d_score, NULL, NULL);
  SBG_CUDA_CHECK(cudaGetLastError());
  for (int r = 0; r < reps; r++) {
    float ms = 0;
    SBG_CUDA_CHECK(cudaEventRecord(e0, stream));
    eval_kernel<<<blocks_for(pop, T), T, 0, stream>>>(dpb, p, 1, d_score, NULL, NULL);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaEventRecord(e1, stream));
    SBG_CUDA_CHECK(cudaEventSynchronize(e1));
    SBG_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    *seconds += ms / 1000.0;
    SBG_TRY(sbg_poll(ctx, (r + 1.0) / reps));
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(h_score, d_score, pop * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int64_t k = 0; k < pop; k++) *checksum += (double)h_score[k];
done:
  if (stream) cudaStreamSynchronize(stream);
  cudaFree(d_prob);
  pop_device_free(&p);
  cudaFree(d_score);
  free(h_score);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (stream) cudaStreamDestroy(stream);
  return st;
}
