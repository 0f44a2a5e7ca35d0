/* GPU engine of parCosnet() and cvParCosnet(): the same computation as
 * cosnet_cpu.c (same colouring, same learning on the host, the same
 * canonical row sums), with Jones-Plassmann rounds on the device and the
 * dynamics as one launch per colour for a batch of (class, fold) jobs, a
 * warp per (job, node). */
#include <stdlib.h>
#include <string.h>

#include "cuda_check.cuh"
#include "philox.h"
#include "cosnet.h"

#define WARPS_PER_BLOCK 8
#define FULL_MASK 0xffffffffu

/* ---- colouring ---------------------------------------------------------- */

static __device__ __forceinline__ bool higher(uint64_t pa, int32_t a, uint64_t pb, int32_t b) {
  return pa > pb || (pa == pb && a > b);
}

static __global__ void k_prio(int32_t n, uint64_t seed, uint64_t *prio, int32_t *colour) {
  int32_t v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= n) return;
  sbg_philox g; /* as sbg_cosnet_priority() */
  sbg_philox_init(&g, seed, (uint64_t)v, 0);
  uint64_t hi = sbg_philox_next(&g);
  uint64_t lo = sbg_philox_next(&g);
  prio[v] = (hi << 32) | lo;
  colour[v] = -1;
}

/* Counts each node's higher-priority neighbours; nodes with none form the
 * first frontier. */
static __global__ void k_jp_wait(int32_t n, const int64_t *rowptr, const int32_t *col,
                                 const uint64_t *prio, int32_t *wait, int32_t *front,
                                 int32_t *n_front) {
  int32_t v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= n) return;
  int32_t cnt = 0;
  uint64_t pv = prio[v];
  for (int64_t k = rowptr[v]; k < rowptr[v + 1]; k++) {
    int32_t u = col[k];
    cnt += higher(prio[u], u, pv, v);
  }
  wait[v] = cnt;
  if (cnt == 0) front[atomicAdd(n_front, 1)] = v;
}

/* The frontier (pairwise non-adjacent) takes the smallest colours absent
 * among its neighbours, found 64 colours at a time. */
static __global__ void k_jp_assign(int32_t n_front, const int32_t *front, const int64_t *rowptr,
                                   const int32_t *col, int32_t *colour) {
  int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_front) return;
  int32_t v = front[t];
  for (int32_t base = 0;; base += 64) {
    unsigned long long used = 0;
    for (int64_t k = rowptr[v]; k < rowptr[v + 1]; k++) {
      int32_t cu = colour[col[k]];
      if (cu >= base && cu < base + 64) used |= 1ull << (cu - base);
    }
    if (used != ~0ull) {
      colour[v] = base + __ffsll((long long)~used) - 1;
      return;
    }
  }
}

/* Counts down the lower-priority neighbours of the frontier; those that
 * reach 0 form the next frontier. */
static __global__ void k_jp_release(int32_t n_front, const int32_t *front, const int64_t *rowptr,
                                    const int32_t *col, const uint64_t *prio, int32_t *wait,
                                    int32_t *next, int32_t *n_next) {
  int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_front) return;
  int32_t v = front[t];
  uint64_t pv = prio[v];
  for (int64_t k = rowptr[v]; k < rowptr[v + 1]; k++) {
    int32_t u = col[k];
    if (!higher(pv, v, prio[u], u)) continue;
    if (atomicSub(&wait[u], 1) == 1) next[atomicAdd(n_next, 1)] = u;
  }
}

/* ---- canonical row sums -------------------------------------------------- */

/* The butterfly of SBG_COSNET_LANES partials; every lane ends with the sum. */
static __device__ __forceinline__ double warp_tree(double part) {
  for (int off = 16; off > 0; off >>= 1)
    part = __dadd_rn(part, __shfl_xor_sync(FULL_MASK, part, off));
  return part;
}

/* Training points of every labelled node of every job of the batch. */
static __global__ void k_points(int32_t n, int32_t n_jobs, const int64_t *rowptr,
                                const int32_t *col, const double *w, const int8_t *codes,
                                double *x, double *y) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= (int64_t)n * n_jobs) return;
  int32_t b = (int32_t)(warp / n), v = (int32_t)(warp % n);
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_POS && jl[v] != SBG_COSNET_NEG) return;
  double px = 0.0, py = 0.0;
  for (int64_t k = rowptr[v] + lane; k < rowptr[v + 1]; k += 32) {
    int8_t s = jl[col[k]];
    px = __dadd_rn(px, __dmul_rn(w[k], s == SBG_COSNET_POS ? 1.0 : 0.0));
    py = __dadd_rn(py, __dmul_rn(w[k], s == SBG_COSNET_NEG ? 1.0 : 0.0));
  }
  px = warp_tree(px);
  py = warp_tree(py);
  if (lane == 0) {
    x[(size_t)b * n + v] = px;
    y[(size_t)b * n + v] = py;
  }
}

struct job_consts {
  double hi, lo, c;   /* neuron states sin(alpha), -cos(alpha); threshold c */
  int reg;            /* regularisation on */
  double theta_add, r;
};

/* Thresholds of the unlabelled nodes. */
static __global__ void k_thresholds(int32_t n, int32_t n_jobs, const int64_t *rowptr,
                                    const int32_t *col, const double *w, const int8_t *codes,
                                    const job_consts *jc, double *theta) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= (int64_t)n * n_jobs) return;
  int32_t b = (int32_t)(warp / n), v = (int32_t)(warp % n);
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_REPORT && jl[v] != SBG_COSNET_QUIET) return;
  double hi = jc[b].hi, lo = jc[b].lo, part = 0.0;
  for (int64_t k = rowptr[v] + lane; k < rowptr[v + 1]; k += 32) {
    int8_t s = jl[col[k]];
    part = __dadd_rn(part, __dmul_rn(w[k], s == SBG_COSNET_POS ? hi : s == SBG_COSNET_NEG ? lo : 0.0));
  }
  part = warp_tree(part);
  if (lane == 0) {
    double th = __dsub_rn(jc[b].c, part);
    if (jc[b].reg) th = __dadd_rn(th, jc[b].theta_add);
    theta[(size_t)b * n + v] = th;
  }
}

/* State counts of the (job, node) items of one colour: cnt[2b] positives,
 * cnt[2b+1] negatives. */
static __global__ void k_count(int64_t n_items, const int32_t *item_job, const int32_t *item_node,
                               int32_t n, const int8_t *state, unsigned long long *cnt) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_items) return;
  int32_t b = item_job[i];
  int8_t s = state[(size_t)b * n + item_node[i]];
  if (s > 0) atomicAdd(&cnt[2 * b], 1ull);
  else if (s < 0) atomicAdd(&cnt[2 * b + 1], 1ull);
}

static __global__ void k_totals(int32_t n_jobs, const unsigned long long *before,
                                const unsigned long long *after, long long *tot) {
  int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= n_jobs) return;
  tot[2 * b] += (long long)after[2 * b] - (long long)before[2 * b];
  tot[2 * b + 1] += (long long)after[2 * b + 1] - (long long)before[2 * b + 1];
}

/* One colour of one sweep: every (job, node) item of the colour at once,
 * a warp each.  Nodes of a colour are not adjacent, so this is the
 * sequential update in any order. */
static __global__ void k_sweep(int64_t n_items, const int32_t *item_job, const int32_t *item_node,
                               int32_t n, const int64_t *rowptr, const int32_t *col,
                               const double *w, const job_consts *jc, const double *theta,
                               const int8_t *done, const unsigned long long *cnt_col,
                               const long long *tot, int8_t *state, double *score,
                               int *changed) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= n_items) return;
  int32_t b = item_job[warp];
  if (done[b]) return;
  int32_t v = item_node[warp];
  const int8_t *st = state + (size_t)b * n;
  double hi = jc[b].hi, lo = jc[b].lo, part = 0.0;
  for (int64_t k = rowptr[v] + lane; k < rowptr[v + 1]; k += 32) {
    int8_t s = st[col[k]];
    part = __dadd_rn(part, __dmul_rn(w[k], s > 0 ? hi : s < 0 ? lo : 0.0));
  }
  part = warp_tree(part);
  if (lane == 0) {
    double h = part;
    if (jc[b].reg) {
      double np = (double)(tot[2 * b] - (long long)cnt_col[2 * b]);
      double nn = (double)(tot[2 * b + 1] - (long long)cnt_col[2 * b + 1]);
      double pen = __dmul_rn(jc[b].r, __dadd_rn(__dmul_rn(np, hi), __dmul_rn(nn, lo)));
      h = __dsub_rn(h, pen);
    }
    h = __dsub_rn(h, theta[(size_t)b * n + v]);
    int8_t s = h > 0 ? 1 : -1;
    size_t at = (size_t)b * n + v;
    if (s != state[at]) changed[b] = 1;
    state[at] = s;
    score[at] = h;
  }
}

static unsigned blocks_for(int64_t threads, int per_block) {
  return (unsigned)((threads + per_block - 1) / per_block);
}

/* ---- entry ---------------------------------------------------------------- */

extern "C" sbg_status sbg_cosnet_gpu(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                                     sbg_cosnet_result *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const sbg_cosnet_graph *g = &in->g;
  int32_t n = g->n;
  int64_t nnz = g->v_rowptr[n];
  int32_t nf = in->n_folds > 0 ? in->n_folds : 1;
  int32_t n_jobs = in->n_classes * nf;
  cudaStream_t stream = NULL;
  int64_t *d_rowptr = NULL;
  int32_t *d_col = NULL, *d_colour = NULL, *d_item_job = NULL, *d_item_node = NULL;
  double *d_w = NULL, *d_x = NULL, *d_y = NULL;
  uint64_t *d_prio = NULL;
  int32_t *d_wait = NULL, *d_front = NULL, *d_next = NULL, *d_counts = NULL;
  int8_t *d_codes = NULL, *d_state = NULL, *d_done = NULL;
  unsigned long long *d_cnt_b = NULL, *d_cnt_a = NULL;
  long long *d_tot = NULL;
  int *d_changed = NULL;
  job_consts *d_jc = NULL;
  /* host */
  int32_t *nodes = NULL, *item_job = NULL, *item_node = NULL, *changed = NULL;
  int64_t *cptr = NULL, *iptr = NULL, *npos = NULL, *nlab = NULL;
  int8_t *codes = NULL, *state = NULL, *done = NULL;
  double *hx = NULL, *hy = NULL, *alpha = NULL, *cc = NULL, *fs = NULL;
  job_consts *jc = NULL;
  int32_t B = 1;

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SBG_TRY(sbg_device_alloc((void **)&d_rowptr, (size_t)(n + 1) * sizeof(int64_t), "the network's row offsets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_col, (size_t)(nnz > 0 ? nnz : 1) * sizeof(int32_t), "the network's columns", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_w, (size_t)(nnz > 0 ? nnz : 1) * sizeof(double), "the network's weights", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_colour, (size_t)n * sizeof(int32_t), "the colours", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_prio, (size_t)n * sizeof(uint64_t), "the priorities", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_wait, (size_t)n * sizeof(int32_t), "the colouring counts", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_front, (size_t)n * sizeof(int32_t), "the colouring frontier", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_next, (size_t)n * sizeof(int32_t), "the colouring frontier", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_counts, 2 * sizeof(int32_t), "counters", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_rowptr, g->v_rowptr, (size_t)(n + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  if (nnz > 0) {
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_col, g->v_col, (size_t)nnz * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_w, g->v_w, (size_t)nnz * sizeof(double), cudaMemcpyHostToDevice, stream));
  }

  /* Colouring: Jones-Plassmann rounds, frontier after frontier. */
  k_prio<<<blocks_for(n, 256), 256, 0, stream>>>(n, p->seed, d_prio, d_colour);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemsetAsync(d_counts, 0, 2 * sizeof(int32_t), stream));
  k_jp_wait<<<blocks_for(n, 256), 256, 0, stream>>>(n, d_rowptr, d_col, d_prio, d_wait, d_front, d_counts);
  SBG_CUDA_CHECK(cudaGetLastError());
  {
    int32_t counts[2] = {0, 0}, coloured = 0;
    SBG_CUDA_CHECK(cudaMemcpyAsync(counts, d_counts, 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    int32_t n_front = counts[0];
    while (n_front > 0) {
      k_jp_assign<<<blocks_for(n_front, 256), 256, 0, stream>>>(n_front, d_front, d_rowptr, d_col, d_colour);
      SBG_CUDA_CHECK(cudaGetLastError());
      SBG_CUDA_CHECK(cudaMemsetAsync(d_counts + 1, 0, sizeof(int32_t), stream));
      k_jp_release<<<blocks_for(n_front, 256), 256, 0, stream>>>(n_front, d_front, d_rowptr, d_col,
                                                                  d_prio, d_wait, d_next, d_counts + 1);
      SBG_CUDA_CHECK(cudaGetLastError());
      SBG_CUDA_CHECK(cudaMemcpyAsync(counts + 1, d_counts + 1, sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
      SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
      coloured += n_front;
      int32_t *sw = d_front; d_front = d_next; d_next = sw;
      n_front = counts[1];
      SBG_TRY(sbg_poll(ctx, 0.0));
    }
    if (coloured != n) {
      st = sbg_fail(ctx, SBG_ERR_INTERNAL, "colouring left %d node(s)", (int)(n - coloured));
      goto done;
    }
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(out->v_colour, d_colour, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  out->n_colours = 0;
  for (int32_t v = 0; v < n; v++)
    if (out->v_colour[v] + 1 > out->n_colours) out->n_colours = out->v_colour[v] + 1;
  if (sbg_cosnet_colour_order(out->v_colour, n, out->n_colours, &nodes, &cptr) != SBG_OK) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory while ordering the colours");
    goto done;
  }
  cudaFree(d_prio); d_prio = NULL;
  cudaFree(d_wait); d_wait = NULL;
  cudaFree(d_front); d_front = NULL;
  cudaFree(d_next); d_next = NULL;

  {
    /* Jobs per batch: about 30 bytes per node and job on the device, within
     * half of the free memory.  A network that does not fit the device at
     * all fails above with a message naming what could not be allocated. */
    size_t free_b = 0, total_b = 0;
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    double per_job = 30.0 * (double)n + 64;
    double fit = (double)free_b * 0.5 / per_job;
    B = fit < 1 ? 1 : fit > n_jobs ? n_jobs : (int32_t)fit;
    /* the host mirrors (about 26 bytes per node and job) stay near 4 GB */
    double host_cap = 1.5e8 / (double)n;
    if (B > host_cap) B = (int32_t)host_cap;
    if (B > 4096) B = 4096;
    if (p->max_batch > 0 && B > p->max_batch) B = p->max_batch;
    if (B < 1) B = 1;
  }
  SBG_TRY(sbg_device_alloc((void **)&d_codes, (size_t)B * n, "the job labels", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_state, (size_t)B * n, "the states", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_x, (size_t)B * n * sizeof(double), "the points / fields", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_y, (size_t)B * n * sizeof(double), "the points / thresholds", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_item_job, (size_t)B * n * sizeof(int32_t), "the work items", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_item_node, (size_t)B * n * sizeof(int32_t), "the work items", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_done, (size_t)B, "the job flags", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_changed, (size_t)B * sizeof(int), "the job flags", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_cnt_b, (size_t)2 * B * sizeof(unsigned long long), "counters", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_cnt_a, (size_t)2 * B * sizeof(unsigned long long), "counters", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_tot, (size_t)2 * B * sizeof(long long), "counters", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_jc, (size_t)B * sizeof(job_consts), "the job constants", ctx));

  codes = (int8_t *)malloc((size_t)B * n);
  state = (int8_t *)malloc((size_t)B * n);
  hx = (double *)malloc((size_t)B * n * sizeof(double));
  hy = (double *)malloc((size_t)B * n * sizeof(double));
  item_job = (int32_t *)malloc((size_t)B * n * sizeof(int32_t));
  item_node = (int32_t *)malloc((size_t)B * n * sizeof(int32_t));
  iptr = (int64_t *)malloc(((size_t)out->n_colours + 1) * sizeof(int64_t));
  npos = (int64_t *)malloc((size_t)B * sizeof(int64_t));
  nlab = (int64_t *)malloc((size_t)B * sizeof(int64_t));
  alpha = (double *)malloc((size_t)B * sizeof(double));
  cc = (double *)malloc((size_t)B * sizeof(double));
  fs = (double *)malloc((size_t)B * sizeof(double));
  jc = (job_consts *)malloc((size_t)B * sizeof(job_consts));
  done = (int8_t *)malloc((size_t)B);
  changed = (int32_t *)malloc((size_t)B * sizeof(int32_t));
  if (!codes || !state || !hx || !hy || !item_job || !item_node || !iptr || !npos || !nlab ||
      !alpha || !cc || !fs || !jc || !done || !changed) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory for the GPU job batches");
    goto done;
  }

  for (int32_t j0 = 0; j0 < n_jobs; j0 += B) {
    int32_t nb = j0 + B < n_jobs ? B : n_jobs - j0;
    for (int32_t b = 0; b < nb; b++) sbg_cosnet_job_codes(in, j0 + b, codes + (size_t)b * n);
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_codes, codes, (size_t)nb * n, cudaMemcpyHostToDevice, stream));

    /* Points on the device, learning on the host (as the CPU engine). */
    int64_t nw = (int64_t)nb * n;
    k_points<<<blocks_for(nw * 32, 32 * WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, 0, stream>>>(
        n, nb, d_rowptr, d_col, d_w, d_codes, d_x, d_y);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(hx, d_x, (size_t)nw * sizeof(double), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(hy, d_y, (size_t)nw * sizeof(double), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    st = sbg_cosnet_learn_jobs(nb, n, codes, hx, hy, alpha, cc, fs, npos, nlab, ctx->n_threads);
    if (st == SBG_ERR_INPUT) {
      st = sbg_fail(ctx, st, "a training set needs labelled positives and negatives");
      goto done;
    }
    if (st != SBG_OK) { st = sbg_fail(ctx, st, "out of memory while learning"); goto done; }

    /* Work items: (job, unlabelled node) by colour, then job, then node. */
    int64_t ni = 0;
    for (int32_t cl = 0; cl < out->n_colours; cl++) {
      iptr[cl] = ni;
      for (int32_t b = 0; b < nb; b++) {
        const int8_t *jl = codes + (size_t)b * n;
        for (int64_t t = cptr[cl]; t < cptr[cl + 1]; t++) {
          int32_t v = nodes[t];
          if (jl[v] == SBG_COSNET_REPORT || jl[v] == SBG_COSNET_QUIET) {
            item_job[ni] = b;
            item_node[ni] = v;
            ni++;
          }
        }
      }
    }
    iptr[out->n_colours] = ni;
    int any_reg = 0;
    for (int32_t b = 0; b < nb; b++) {
      int64_t nu = 0;
      const int8_t *jl = codes + (size_t)b * n;
      for (int32_t v = 0; v < n; v++) nu += jl[v] == SBG_COSNET_REPORT || jl[v] == SBG_COSNET_QUIET;
      sbg_cosnet_reg reg = sbg_cosnet_regularisation(p->cost, alpha[b], npos[b], nlab[b], nu);
      jc[b].hi = sin(alpha[b]);
      jc[b].lo = -cos(alpha[b]);
      jc[b].c = cc[b];
      jc[b].reg = reg.on;
      jc[b].theta_add = reg.theta_add;
      jc[b].r = reg.r;
      any_reg |= reg.on;
      done[b] = 0;
    }
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_jc, jc, (size_t)nb * sizeof(job_consts), cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_item_job, item_job, (size_t)(ni > 0 ? ni : 1) * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_item_node, item_node, (size_t)(ni > 0 ? ni : 1) * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_done, done, (size_t)nb, cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemsetAsync(d_state, 0, (size_t)nw, stream));
    SBG_CUDA_CHECK(cudaMemsetAsync(d_tot, 0, (size_t)2 * nb * sizeof(long long), stream));
    SBG_CUDA_CHECK(cudaMemsetAsync(d_cnt_b, 0, (size_t)2 * nb * sizeof(unsigned long long), stream));
    /* thresholds into d_y (the points are no longer needed), fields in d_x */
    k_thresholds<<<blocks_for(nw * 32, 32 * WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, 0, stream>>>(
        n, nb, d_rowptr, d_col, d_w, d_codes, d_jc, d_y);
    SBG_CUDA_CHECK(cudaGetLastError());

    int32_t n_left = nb, sweep = 0;
    while (n_left > 0 && sweep < p->max_sweeps) {
      sweep++;
      SBG_CUDA_CHECK(cudaMemsetAsync(d_changed, 0, (size_t)nb * sizeof(int), stream));
      for (int32_t cl = 0; cl < out->n_colours; cl++) {
        int64_t i0 = iptr[cl], cnt = iptr[cl + 1] - iptr[cl];
        if (cnt == 0) continue;
        if (any_reg) {
          SBG_CUDA_CHECK(cudaMemsetAsync(d_cnt_b, 0, (size_t)2 * nb * sizeof(unsigned long long), stream));
          k_count<<<blocks_for(cnt, 256), 256, 0, stream>>>(cnt, d_item_job + i0, d_item_node + i0, n, d_state, d_cnt_b);
          SBG_CUDA_CHECK(cudaGetLastError());
        }
        k_sweep<<<blocks_for(cnt * 32, 32 * WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, 0, stream>>>(
            cnt, d_item_job + i0, d_item_node + i0, n, d_rowptr, d_col, d_w, d_jc, d_y, d_done,
            d_cnt_b, d_tot, d_state, d_x, d_changed);
        SBG_CUDA_CHECK(cudaGetLastError());
        if (any_reg) {
          SBG_CUDA_CHECK(cudaMemsetAsync(d_cnt_a, 0, (size_t)2 * nb * sizeof(unsigned long long), stream));
          k_count<<<blocks_for(cnt, 256), 256, 0, stream>>>(cnt, d_item_job + i0, d_item_node + i0, n, d_state, d_cnt_a);
          SBG_CUDA_CHECK(cudaGetLastError());
          k_totals<<<blocks_for(nb, 128), 128, 0, stream>>>(nb, d_cnt_b, d_cnt_a, d_tot);
          SBG_CUDA_CHECK(cudaGetLastError());
        }
      }
      SBG_CUDA_CHECK(cudaMemcpyAsync(changed, d_changed, (size_t)nb * sizeof(int), cudaMemcpyDeviceToHost, stream));
      SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
      for (int32_t b = 0; b < nb; b++) {
        if (done[b]) continue;
        if (!changed[b]) {
          done[b] = 1;
          n_left--;
          out->v_sweeps[j0 + b] = sweep;
          out->v_converged[j0 + b] = 1;
        }
      }
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_done, done, (size_t)nb, cudaMemcpyHostToDevice, stream));
      SBG_TRY(sbg_poll(ctx, ((double)j0 + nb * (1.0 - 1.0 / (sweep + 1.0))) / n_jobs));
    }
    for (int32_t b = 0; b < nb; b++)
      if (!done[b]) {
        out->v_sweeps[j0 + b] = sweep;
        out->v_converged[j0 + b] = 0;
      }

    SBG_CUDA_CHECK(cudaMemcpyAsync(hx, d_x, (size_t)nw * sizeof(double), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(state, d_state, (size_t)nw, cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int32_t b = 0; b < nb; b++) {
      int32_t j = j0 + b, k = j / nf;
      const int8_t *jl = codes + (size_t)b * n;
      double *sc = out->v_scores + (size_t)k * n;
      int32_t *pr = out->v_pred + (size_t)k * n;
      for (int32_t v = 0; v < n; v++)
        if (jl[v] == SBG_COSNET_REPORT) {
          sc[v] = hx[(size_t)b * n + v];
          pr[v] = state[(size_t)b * n + v] > 0;
        }
      out->v_alpha[j] = alpha[b];
      out->v_c[j] = cc[b];
      out->v_fscore[j] = fs[b];
    }
  }

done:
  cudaFree(d_rowptr); cudaFree(d_col); cudaFree(d_w); cudaFree(d_colour); cudaFree(d_prio);
  cudaFree(d_wait); cudaFree(d_front); cudaFree(d_next); cudaFree(d_counts); cudaFree(d_codes); cudaFree(d_state); cudaFree(d_x);
  cudaFree(d_y); cudaFree(d_item_job); cudaFree(d_item_node); cudaFree(d_done);
  cudaFree(d_changed); cudaFree(d_cnt_b); cudaFree(d_cnt_a); cudaFree(d_tot); cudaFree(d_jc);
  if (stream) cudaStreamDestroy(stream);
  free(nodes); free(cptr); free(codes); free(state); free(hx); free(hy); free(item_job);
  free(item_node); free(iptr); free(npos); free(nlab); free(alpha); free(cc); free(fs);
  free(jc); free(done); free(changed);
  return st;
}
