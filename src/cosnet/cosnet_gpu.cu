/* GPU engine of parCosnet() and cvParCosnet(): the same computation as
 * cosnet_cpu.c (same colouring, same learning on the host, the same
 * canonical row sums), with Jones-Plassmann rounds on the device and the
 * dynamics as one launch per colour for a batch of (class, fold) jobs, a
 * warp per (job, node) and a block of 8 warps per (job, hub).  A network
 * larger than the device's memory stays on the host: it is coloured there
 * and streamed in parts (runs of nodes of one colour) through two pinned
 * buffers, the gather of a part on the host overlapping the work on the
 * previous one.  Several devices (parCosnet(device = c(0, 1))) take
 * contiguous ranges of the jobs, one host thread each (CUDA and C only, no
 * R: the calling thread polls for interrupts); the first colours the
 * network and shares the colouring. */
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

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

/* The rows the kernels read: by node (the whole network on the device,
 * pos = NULL, base = 0), or by colour-order position (a part streamed from
 * the host: rowptr = offsets in colour order, pos = position of each node,
 * base = offset of the part's first row). */
struct csr_view {
  const int64_t *rowptr;
  const int32_t *pos;
  int64_t base;
  const int32_t *col;
  const double *w;
};

static __device__ __forceinline__ void row_bounds(const csr_view &g, int32_t v, int64_t *b,
                                                  int64_t *e) {
  int64_t r = g.pos ? (int64_t)g.pos[v] : (int64_t)v;
  *b = g.rowptr[r] - g.base;
  *e = g.rowptr[r + 1] - g.base;
}

/* Partial sum of one lane of `stride` lanes over a row: neighbour u counts
 * w * tm when code[u] == -1, w * tp when code[u] == 1, nothing otherwise. */
static __device__ __forceinline__ double lane_sum(const csr_view &g, int64_t b, int64_t e,
                                                  int lane, int stride, const int8_t *code,
                                                  double tm, double tp) {
  double part = 0.0;
  for (int64_t k = b + lane; k < e; k += stride) {
    int8_t s = code[g.col[k]];
    part = __dadd_rn(part, __dmul_rn(g.w[k], s == 1 ? tp : s == -1 ? tm : 0.0));
  }
  return part;
}

/* The butterfly of SBG_COSNET_LANES partials; every lane ends with the sum. */
static __device__ __forceinline__ double warp_tree(double part) {
  for (int off = 16; off > 0; off >>= 1)
    part = __dadd_rn(part, __shfl_xor_sync(FULL_MASK, part, off));
  return part;
}

/* The halving tree of SBG_COSNET_HUB_LANES (= blockDim.x) partials: offsets
 * 128, 64, 32 in shared memory, then the warp butterfly; thread 0 gets the
 * sum.  All threads of the block must call it. */
static __device__ __forceinline__ double block_tree(double part, double *sh) {
  int t = threadIdx.x;
  __syncthreads();
  sh[t] = part;
  __syncthreads();
  for (int off = SBG_COSNET_HUB_LANES / 2; off >= 32; off >>= 1) {
    if (t < off) sh[t] = __dadd_rn(sh[t], sh[t + off]);
    __syncthreads();
  }
  double r = 0.0;
  if (t < 32) r = warp_tree(sh[t]);
  return r;
}

#define HUB_THREADS SBG_COSNET_HUB_LANES

/* Training points of the labelled nodes: a warp per (job, node) of the m
 * nodes `nodes` (or 0..m-1 when NULL), hubs left to k_points_hub. */
static __global__ void k_points(int32_t n, int32_t n_jobs, int32_t m, const int32_t *nodes,
                                csr_view g, const int8_t *codes, double *x, double *y) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= (int64_t)m * n_jobs) return;
  int32_t b = (int32_t)(warp / m), t = (int32_t)(warp % m);
  int32_t v = nodes ? nodes[t] : t;
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_POS && jl[v] != SBG_COSNET_NEG) return;
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  if (re - rb > SBG_COSNET_HUB_DEGREE) return;
  double px = warp_tree(lane_sum(g, rb, re, lane, 32, jl, 0.0, 1.0));
  double py = warp_tree(lane_sum(g, rb, re, lane, 32, jl, 1.0, 0.0));
  if (lane == 0) {
    x[(size_t)b * n + v] = px;
    y[(size_t)b * n + v] = py;
  }
}

/* The same for the hubs: a block per (job, hub). */
static __global__ void k_points_hub(int32_t n, int32_t n_jobs, int32_t m, const int32_t *hubs,
                                    csr_view g, const int8_t *codes, double *x, double *y) {
  __shared__ double sh[HUB_THREADS];
  int64_t item = blockIdx.x;
  if (item >= (int64_t)m * n_jobs) return;
  int32_t b = (int32_t)(item / m), v = hubs[item % m];
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_POS && jl[v] != SBG_COSNET_NEG) return; /* whole block */
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  double px = block_tree(lane_sum(g, rb, re, threadIdx.x, HUB_THREADS, jl, 0.0, 1.0), sh);
  double py = block_tree(lane_sum(g, rb, re, threadIdx.x, HUB_THREADS, jl, 1.0, 0.0), sh);
  if (threadIdx.x == 0) {
    x[(size_t)b * n + v] = px;
    y[(size_t)b * n + v] = py;
  }
}

struct job_consts {
  double hi, lo, c;   /* neuron states sin(alpha), -cos(alpha); threshold c */
  int reg;            /* regularisation on */
  double theta_add, r;
};

static __device__ __forceinline__ double threshold_of(const job_consts &jc, double pull) {
  double th = __dsub_rn(jc.c, pull);
  if (jc.reg) th = __dadd_rn(th, jc.theta_add);
  return th;
}

/* Thresholds of the unlabelled nodes (warp per (job, node), hubs apart). */
static __global__ void k_thresholds(int32_t n, int32_t n_jobs, int32_t m, const int32_t *nodes,
                                    csr_view g, const int8_t *codes, const job_consts *jc,
                                    double *theta) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= (int64_t)m * n_jobs) return;
  int32_t b = (int32_t)(warp / m), t = (int32_t)(warp % m);
  int32_t v = nodes ? nodes[t] : t;
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_REPORT && jl[v] != SBG_COSNET_QUIET) return;
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  if (re - rb > SBG_COSNET_HUB_DEGREE) return;
  double part = warp_tree(lane_sum(g, rb, re, lane, 32, jl, jc[b].lo, jc[b].hi));
  if (lane == 0) theta[(size_t)b * n + v] = threshold_of(jc[b], part);
}

static __global__ void k_thresholds_hub(int32_t n, int32_t n_jobs, int32_t m, const int32_t *hubs,
                                        csr_view g, const int8_t *codes, const job_consts *jc,
                                        double *theta) {
  __shared__ double sh[HUB_THREADS];
  int64_t item = blockIdx.x;
  if (item >= (int64_t)m * n_jobs) return;
  int32_t b = (int32_t)(item / m), v = hubs[item % m];
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_REPORT && jl[v] != SBG_COSNET_QUIET) return; /* whole block */
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  double part = block_tree(lane_sum(g, rb, re, threadIdx.x, HUB_THREADS, jl, jc[b].lo, jc[b].hi), sh);
  if (threadIdx.x == 0) theta[(size_t)b * n + v] = threshold_of(jc[b], part);
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

/* The update of one (job b, node v) from its summed field `part`. */
static __device__ __forceinline__ void update_node(int32_t b, int32_t v, double part, int32_t n,
                                                   const job_consts &jc, const double *theta,
                                                   const unsigned long long *cnt_col,
                                                   const long long *tot, int8_t *state,
                                                   double *score, int *changed) {
  double h = part;
  if (jc.reg) {
    double np = (double)(tot[2 * b] - (long long)cnt_col[2 * b]);
    double nn = (double)(tot[2 * b + 1] - (long long)cnt_col[2 * b + 1]);
    double pen = __dmul_rn(jc.r, __dadd_rn(__dmul_rn(np, jc.hi), __dmul_rn(nn, jc.lo)));
    h = __dsub_rn(h, pen);
  }
  h = __dsub_rn(h, theta[(size_t)b * n + v]);
  int8_t s = h > 0 ? 1 : -1;
  size_t at = (size_t)b * n + v;
  if (s != state[at]) changed[b] = 1;
  state[at] = s;
  score[at] = h;
}

/* One colour (or part of one) of one sweep: every (job, node) item at once,
 * a warp each.  Nodes of a colour are not adjacent, so this is the
 * sequential update in any order. */
static __global__ void k_sweep(int64_t n_items, const int32_t *item_job, const int32_t *item_node,
                               int32_t n, csr_view g, const job_consts *jc, const double *theta,
                               const int8_t *done, const unsigned long long *cnt_col,
                               const long long *tot, int8_t *state, double *score,
                               int *changed) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= n_items) return;
  int32_t b = item_job[warp];
  if (done[b]) return;
  int32_t v = item_node[warp];
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  double part = warp_tree(lane_sum(g, rb, re, lane, 32, state + (size_t)b * n, jc[b].lo, jc[b].hi));
  if (lane == 0) update_node(b, v, part, n, jc[b], theta, cnt_col, tot, state, score, changed);
}

/* The same for hub items, a block each. */
static __global__ void k_sweep_hub(int64_t n_items, const int32_t *item_job,
                                   const int32_t *item_node, int32_t n, csr_view g,
                                   const job_consts *jc, const double *theta, const int8_t *done,
                                   const unsigned long long *cnt_col, const long long *tot,
                                   int8_t *state, double *score, int *changed) {
  __shared__ double sh[HUB_THREADS];
  int64_t item = blockIdx.x;
  if (item >= n_items) return;
  int32_t b = item_job[item];
  if (done[b]) return; /* whole block */
  int32_t v = item_node[item];
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  double part = block_tree(lane_sum(g, rb, re, threadIdx.x, HUB_THREADS, state + (size_t)b * n,
                                    jc[b].lo, jc[b].hi), sh);
  if (threadIdx.x == 0) update_node(b, v, part, n, jc[b], theta, cnt_col, tot, state, score, changed);
}

static unsigned blocks_for(int64_t threads, int per_block) {
  return (unsigned)((threads + per_block - 1) / per_block);
}

/* ---- the network on the device, whole or in parts ------------------------- */

/* Parts: runs of consecutive nodes in colour order, never across a colour
 * boundary.  When the network is resident there is one part per colour and
 * all rows are on the device; otherwise each part's rows are gathered on
 * the host into a pinned buffer and copied to the device before use. */
struct parts {
  int resident;
  int32_t n_parts;
  int64_t *t0;          /* n_parts + 1: first colour-order position */
  int32_t *colour;      /* n_parts: colour of the part */
  int64_t *hub0;        /* n_parts + 1: the part's hubs in the hub list */
  /* streaming */
  int64_t cap;          /* entries per buffer */
  int64_t *cro;         /* host: n + 1 offsets of the rows in colour order */
  int32_t *h_col[2];
  double *h_w[2];
  int32_t *d_col[2];
  double *d_w[2];
  cudaEvent_t ev[2];
  int ev_ok[2];
  int slot;
  int32_t loaded;       /* the part in the current slot, -1 none */
};

/* What the learning-side kernels cover for part s: its nodes (NULL: all n,
 * the network is resident and handled in one go) and its hubs. */
struct part_span {
  int32_t m;
  const int32_t *nodes;
  int64_t h0, n_hubs;
};

static part_span span_of(const parts &P, int32_t s, int32_t n, int64_t n_hubs, const int32_t *d_nodes) {
  if (P.resident) return part_span{n, NULL, 0, n_hubs};
  return part_span{(int32_t)(P.t0[s + 1] - P.t0[s]), d_nodes + P.t0[s], P.hub0[s], P.hub0[s + 1] - P.hub0[s]};
}

/* Makes part s readable by the kernels through *view (streaming mode). */
static sbg_status load_part(parts *P, int32_t s, const sbg_cosnet_graph *g, const int32_t *nodes,
                            const int64_t *d_cro, const int32_t *d_pos, csr_view *view,
                            cudaStream_t stream, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  if (P->resident || P->loaded == s) return SBG_OK;
  {
    int sl = P->slot = 1 - P->slot;
    int64_t a = P->t0[s], e = P->t0[s + 1];
    int64_t base = P->cro[a], len = P->cro[e] - base;
    /* the previous copy out of this pinned buffer must be over */
    SBG_CUDA_CHECK(cudaEventSynchronize(P->ev[sl]));
    sbg_cosnet_gather(g, nodes, a, e, P->cro, P->h_col[sl], P->h_w[sl], ctx->n_threads);
    if (len > 0) {
      SBG_CUDA_CHECK(cudaMemcpyAsync(P->d_col[sl], P->h_col[sl], (size_t)len * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(P->d_w[sl], P->h_w[sl], (size_t)len * sizeof(double),
                                     cudaMemcpyHostToDevice, stream));
    }
    SBG_CUDA_CHECK(cudaEventRecord(P->ev[sl], stream));
    view->rowptr = d_cro;
    view->pos = d_pos;
    view->base = base;
    view->col = P->d_col[sl];
    view->w = P->d_w[sl];
    P->loaded = s;
  }
done:
  return st;
}

/* ---- several devices -------------------------------------------------------- */

/* Shared by the device threads of one call. */
struct multi_run {
  std::atomic<int> stop;      /* a worker failed or the user interrupted */
  std::mutex m;
  std::condition_variable cv; /* colour_state and n_finished changes */
  int colour_state;           /* 0 pending, 1 shared, 2 the owner failed */
  int n_finished;
};

/* One device's share of the jobs. */
struct dev_worker {
  multi_run *mr;              /* NULL: one device, on the calling thread */
  int owner;                  /* colours the network (and shares it) */
  int32_t j_lo, j_hi;         /* its jobs */
  std::atomic<double> frac;   /* fraction of its jobs done */
  int stopped;                /* stopped by another worker's failure */
  int32_t n_parts;
  sbg_ctx ctx;
  sbg_status st;
};

/* sbg_poll() on the calling thread; a device thread only publishes its
 * progress and looks at the stop flag (the calling thread polls R). */
static sbg_status dev_poll(dev_worker *w, sbg_ctx *ctx, double f) {
  if (!w->mr) return sbg_poll(ctx, f);
  w->frac.store(f);
  if (w->mr->stop.load()) {
    w->stopped = 1;
    return sbg_fail(ctx, SBG_ERR_INTERRUPTED, "stopped");
  }
  return SBG_OK;
}

/* The poll hook of a device thread's ctx (for the host colouring, which
 * polls through its ctx): the stop flag only, never R. */
static int dev_stop_hook(void *data, double done) {
  (void)done;
  dev_worker *w = (dev_worker *)data;
  if (!w->mr->stop.load()) return 0;
  w->stopped = 1;
  return 1;
}

/* The owner publishes the colouring (out->v_colour, n_colours); the others
 * wait for it. */
static sbg_status share_colouring(dev_worker *w, sbg_ctx *ctx) {
  multi_run *mr = w->mr;
  std::unique_lock<std::mutex> lk(mr->m);
  if (w->owner) {
    mr->colour_state = 1;
    mr->cv.notify_all();
    return SBG_OK;
  }
  while (mr->colour_state == 0 && !mr->stop.load())
    mr->cv.wait_for(lk, std::chrono::milliseconds(50));
  if (mr->colour_state != 1) {
    w->stopped = 1;
    return sbg_fail(ctx, SBG_ERR_INTERRUPTED, "stopped");
  }
  return SBG_OK;
}

/* ---- one device ------------------------------------------------------------ */

/* Jobs w->j_lo .. w->j_hi - 1 on device ctx->device. */
static sbg_status cosnet_gpu_device(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                                    sbg_cosnet_result *out, sbg_ctx *ctx, dev_worker *w) {
  sbg_status st = SBG_OK;
  const sbg_cosnet_graph *g = &in->g;
  int32_t n = g->n;
  int64_t nnz = g->v_rowptr[n];
  int32_t nf = in->n_folds > 0 ? in->n_folds : 1;
  int32_t j_lo = w->j_lo, j_hi = w->j_hi;
  int32_t n_jobs = j_hi - j_lo;
  /* one device colours; several share its colouring */
  int own_colour = !w->mr || w->owner;
  cudaStream_t stream = NULL;
  int64_t *d_rowptr = NULL, *d_cro = NULL;
  int32_t *d_col = NULL, *d_colour = NULL, *d_item_job = NULL, *d_item_node = NULL;
  int32_t *d_nodes = NULL, *d_pos = NULL, *d_hubs = NULL;
  double *d_w = NULL, *d_x = NULL, *d_y = NULL;
  uint64_t *d_prio = NULL;
  int32_t *d_wait = NULL, *d_front = NULL, *d_next = NULL, *d_counts = NULL;
  int8_t *d_codes = NULL, *d_state = NULL, *d_done = NULL;
  unsigned long long *d_cnt_b = NULL, *d_cnt_a = NULL;
  long long *d_tot = NULL;
  int *d_changed = NULL;
  job_consts *d_jc = NULL;
  /* host */
  int32_t *nodes = NULL, *item_job = NULL, *item_node = NULL, *changed = NULL, *pos = NULL;
  int32_t *hubs = NULL;
  int64_t *cptr = NULL, *iptr = NULL, *hptr = NULL, *npos = NULL, *nlab = NULL;
  int8_t *codes = NULL, *state = NULL, *done = NULL;
  double *hx = NULL, *hy = NULL, *alpha = NULL, *cc = NULL, *fs = NULL;
  job_consts *jc = NULL;
  int32_t B = 1;
  int64_t n_hubs = 0, maxdeg = 0;
  parts P;
  memset(&P, 0, sizeof(P));
  P.loaded = -1;
  csr_view view;
  memset(&view, 0, sizeof(view));
  double budget = 0;

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int32_t v = 0; v < n; v++) {
    int64_t d = g->v_rowptr[v + 1] - g->v_rowptr[v];
    if (d > maxdeg) maxdeg = d;
    n_hubs += d > SBG_COSNET_HUB_DEGREE;
  }
  {
    /* Whole network on the device when it fits with room for the
     * colouring and one job (about 60 bytes per node), else streamed. */
    size_t free_b = 0, total_b = 0;
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    budget = p->device_budget > 0 ? p->device_budget : 0.9 * (double)free_b;
    double whole = 8.0 * (n + 1) + 12.0 * (double)nnz + 64.0 * n;
    P.resident = whole <= budget;
  }

  if (P.resident) {
    SBG_TRY(sbg_device_alloc((void **)&d_rowptr, (size_t)(n + 1) * sizeof(int64_t), "the network's row offsets", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_col, (size_t)(nnz > 0 ? nnz : 1) * sizeof(int32_t), "the network's columns", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_w, (size_t)(nnz > 0 ? nnz : 1) * sizeof(double), "the network's weights", ctx));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_rowptr, g->v_rowptr, (size_t)(n + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    if (nnz > 0) {
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_col, g->v_col, (size_t)nnz * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_w, g->v_w, (size_t)nnz * sizeof(double), cudaMemcpyHostToDevice, stream));
    }
  }
  if (P.resident && own_colour) {
    SBG_TRY(sbg_device_alloc((void **)&d_colour, (size_t)n * sizeof(int32_t), "the colours", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_prio, (size_t)n * sizeof(uint64_t), "the priorities", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_wait, (size_t)n * sizeof(int32_t), "the colouring counts", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_front, (size_t)n * sizeof(int32_t), "the colouring frontier", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_next, (size_t)n * sizeof(int32_t), "the colouring frontier", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_counts, 2 * sizeof(int32_t), "counters", ctx));

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
        SBG_TRY(dev_poll(w, ctx, 0.0));
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
    cudaFree(d_prio); d_prio = NULL;
    cudaFree(d_wait); d_wait = NULL;
    cudaFree(d_front); d_front = NULL;
    cudaFree(d_next); d_next = NULL;
  } else if (own_colour) {
    /* The same colouring on the host (greedy in priority order either way). */
    SBG_TRY(sbg_cosnet_colour_host(g, p->seed, out->v_colour, &out->n_colours, ctx));
  }
  if (w->mr) SBG_TRY(share_colouring(w, ctx));
  if (sbg_cosnet_colour_order(out->v_colour, n, out->n_colours, &nodes, &cptr) != SBG_OK) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory while ordering the colours");
    goto done;
  }

  {
    /* Parts: one per colour, or runs of at most P.cap entries in a colour. */
    int32_t nc = out->n_colours;
    if (!P.resident) {
      /* two buffers in half of the budget */
      P.cap = (int64_t)(0.5 * budget / (2.0 * 12.0));
      /* at most 2^27 entries (1.5 GB) a buffer: the pinned host copies
       * stay modest, and parts stay many enough to overlap */
      if (P.cap > ((int64_t)1 << 27)) P.cap = (int64_t)1 << 27;
      if (P.cap > nnz) P.cap = nnz;
      if (P.cap < maxdeg || P.cap < 1) {
        P.cap = maxdeg > 0 ? maxdeg : 1;
        if (p->device_budget <= 0) {
          st = sbg_fail(ctx, SBG_ERR_DEVICE_ALLOC, "the device cannot hold two rows of %lld entries",
                        (long long)maxdeg);
          goto done;
        }
      }
      P.cro = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
      if (!P.cro) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory"); goto done; }
      P.cro[0] = 0;
      for (int32_t t = 0; t < n; t++) {
        int32_t v = nodes[t];
        P.cro[t + 1] = P.cro[t] + (g->v_rowptr[v + 1] - g->v_rowptr[v]);
      }
    }
    /* count, then fill */
    int32_t np = 0;
    for (int pass = 0; pass < 2; pass++) {
      np = 0;
      for (int32_t cl = 0; cl < nc; cl++) {
        int64_t a = cptr[cl];
        while (a < cptr[cl + 1]) {
          int64_t e = cptr[cl + 1];
          if (!P.resident) {
            /* as many rows as fit (at least one) */
            e = a + 1;
            while (e < cptr[cl + 1] && P.cro[e + 1] - P.cro[a] <= P.cap) e++;
          }
          if (pass == 1) { P.t0[np] = a; P.colour[np] = cl; }
          np++;
          a = e;
        }
      }
      if (pass == 0) {
        P.t0 = (int64_t *)malloc(((size_t)np + 1) * sizeof(int64_t));
        P.colour = (int32_t *)malloc(((size_t)np + 1) * sizeof(int32_t));
        P.hub0 = (int64_t *)malloc(((size_t)np + 1) * sizeof(int64_t));
        if (!P.t0 || !P.colour || !P.hub0) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory"); goto done; }
      }
    }
    P.t0[np] = n;
    P.n_parts = np;
    w->n_parts = P.resident ? 0 : np;

    /* hubs in colour order, so that each part's hubs are contiguous */
    hubs = (int32_t *)malloc((size_t)(n_hubs > 0 ? n_hubs : 1) * sizeof(int32_t));
    pos = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    if (!hubs || !pos) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory"); goto done; }
    int64_t h = 0;
    for (int32_t s = 0; s < np; s++) {
      P.hub0[s] = h;
      for (int64_t t = P.t0[s]; t < P.t0[s + 1]; t++) {
        int32_t v = nodes[t];
        pos[v] = (int32_t)t;
        if (g->v_rowptr[v + 1] - g->v_rowptr[v] > SBG_COSNET_HUB_DEGREE) hubs[h++] = v;
      }
    }
    P.hub0[np] = h;
    SBG_TRY(sbg_device_alloc((void **)&d_hubs, (size_t)(n_hubs > 0 ? n_hubs : 1) * sizeof(int32_t), "the hub list", ctx));
    if (n_hubs > 0)
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_hubs, hubs, (size_t)n_hubs * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    if (P.resident) {
      view.rowptr = d_rowptr;
      view.pos = NULL;
      view.base = 0;
      view.col = d_col;
      view.w = d_w;
    } else {
      SBG_TRY(sbg_device_alloc((void **)&d_cro, (size_t)(n + 1) * sizeof(int64_t), "the row offsets in colour order", ctx));
      SBG_TRY(sbg_device_alloc((void **)&d_pos, (size_t)n * sizeof(int32_t), "the colour positions", ctx));
      SBG_TRY(sbg_device_alloc((void **)&d_nodes, (size_t)n * sizeof(int32_t), "the colour order", ctx));
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_cro, P.cro, (size_t)(n + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_pos, pos, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_nodes, nodes, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
      for (int sl = 0; sl < 2; sl++) {
        SBG_CUDA_CHECK(cudaHostAlloc((void **)&P.h_col[sl], (size_t)P.cap * sizeof(int32_t), cudaHostAllocDefault));
        SBG_CUDA_CHECK(cudaHostAlloc((void **)&P.h_w[sl], (size_t)P.cap * sizeof(double), cudaHostAllocDefault));
        SBG_TRY(sbg_device_alloc((void **)&P.d_col[sl], (size_t)P.cap * sizeof(int32_t), "a part of the network", ctx));
        SBG_TRY(sbg_device_alloc((void **)&P.d_w[sl], (size_t)P.cap * sizeof(double), "a part of the network", ctx));
        SBG_CUDA_CHECK(cudaEventCreateWithFlags(&P.ev[sl], cudaEventDisableTiming));
        P.ev_ok[sl] = 1;
        SBG_CUDA_CHECK(cudaEventRecord(P.ev[sl], stream));
      }
    }
  }

  {
    /* Jobs per batch: about 30 bytes per node and job on the device, within
     * half of the free memory (and of what the budget leaves). */
    size_t free_b = 0, total_b = 0;
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    double avail = (double)free_b;
    if (p->device_budget > 0) {
      double used = P.resident ? 8.0 * (n + 1) + 12.0 * (double)nnz
                               : 24.0 * (double)P.cap + 16.0 * n;
      double left = p->device_budget - used;
      if (left < avail) avail = left;
    }
    double per_job = 30.0 * (double)n + 64;
    double fit = avail * 0.5 / per_job;
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
  /* items of part s: light ones iptr[2s] .. iptr[2s+1], hubs .. iptr[2s+2] */
  iptr = (int64_t *)malloc((2 * (size_t)P.n_parts + 1) * sizeof(int64_t));
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

  for (int32_t j0 = j_lo; j0 < j_hi; j0 += B) {
    int32_t nb = j0 + B < j_hi ? B : j_hi - j0;
    for (int32_t b = 0; b < nb; b++) sbg_cosnet_job_codes(in, j0 + b, codes + (size_t)b * n);
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_codes, codes, (size_t)nb * n, cudaMemcpyHostToDevice, stream));

    /* Points on the device, learning on the host (as the CPU engine).
     * Resident: all nodes at once; streamed: part after part. */
    int64_t nw = (int64_t)nb * n;
    for (int32_t s = 0; s < (P.resident ? 1 : P.n_parts); s++) {
      part_span sp = span_of(P, s, n, n_hubs, d_nodes);
      int32_t m = sp.m;
      const int32_t *nd = sp.nodes;
      int64_t h0 = sp.h0, mh = sp.n_hubs;
      SBG_TRY(load_part(&P, s, g, nodes, d_cro, d_pos, &view, stream, ctx));
      k_points<<<blocks_for((int64_t)m * nb * 32, 32 * WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, 0, stream>>>(
          n, nb, m, nd, view, d_codes, d_x, d_y);
      SBG_CUDA_CHECK(cudaGetLastError());
      if (mh > 0) {
        k_points_hub<<<(unsigned)(mh * nb), HUB_THREADS, 0, stream>>>(n, nb, (int32_t)mh, d_hubs + h0,
                                                                     view, d_codes, d_x, d_y);
        SBG_CUDA_CHECK(cudaGetLastError());
      }
    }
    SBG_CUDA_CHECK(cudaMemcpyAsync(hx, d_x, (size_t)nw * sizeof(double), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(hy, d_y, (size_t)nw * sizeof(double), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    st = sbg_cosnet_learn_jobs(nb, n, codes, hx, hy, alpha, cc, fs, npos, nlab, ctx->n_threads);
    if (st == SBG_ERR_INPUT) {
      st = sbg_fail(ctx, st, "a training set needs labelled positives and negatives");
      goto done;
    }
    if (st != SBG_OK) { st = sbg_fail(ctx, st, "out of memory while learning"); goto done; }

    /* Work items: (job, unlabelled node) by part, then light before hubs,
     * then job, then node.  The parts of a colour follow each other, so
     * the items of a colour are contiguous too. */
    int64_t ni = 0;
    for (int32_t s = 0; s < P.n_parts; s++) {
      for (int hub = 0; hub < 2; hub++) {
        iptr[2 * s + hub] = ni;
        for (int32_t b = 0; b < nb; b++) {
          const int8_t *jl = codes + (size_t)b * n;
          for (int64_t t = P.t0[s]; t < P.t0[s + 1]; t++) {
            int32_t v = nodes[t];
            int is_hub = g->v_rowptr[v + 1] - g->v_rowptr[v] > SBG_COSNET_HUB_DEGREE;
            if (is_hub != hub) continue;
            if (jl[v] == SBG_COSNET_REPORT || jl[v] == SBG_COSNET_QUIET) {
              item_job[ni] = b;
              item_node[ni] = v;
              ni++;
            }
          }
        }
      }
    }
    iptr[2 * P.n_parts] = ni;
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
    for (int32_t s = 0; s < (P.resident ? 1 : P.n_parts); s++) {
      if (!P.resident && iptr[2 * s + 2] == iptr[2 * s]) continue; /* no unlabelled node here */
      part_span sp = span_of(P, s, n, n_hubs, d_nodes);
      int32_t m = sp.m;
      const int32_t *nd = sp.nodes;
      int64_t h0 = sp.h0, mh = sp.n_hubs;
      SBG_TRY(load_part(&P, s, g, nodes, d_cro, d_pos, &view, stream, ctx));
      k_thresholds<<<blocks_for((int64_t)m * nb * 32, 32 * WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, 0, stream>>>(
          n, nb, m, nd, view, d_codes, d_jc, d_y);
      SBG_CUDA_CHECK(cudaGetLastError());
      if (mh > 0) {
        k_thresholds_hub<<<(unsigned)(mh * nb), HUB_THREADS, 0, stream>>>(n, nb, (int32_t)mh, d_hubs + h0,
                                                                         view, d_codes, d_jc, d_y);
        SBG_CUDA_CHECK(cudaGetLastError());
      }
    }

    int32_t n_left = nb, sweep = 0;
    while (n_left > 0 && sweep < p->max_sweeps) {
      sweep++;
      SBG_CUDA_CHECK(cudaMemsetAsync(d_changed, 0, (size_t)nb * sizeof(int), stream));
      for (int32_t s0 = 0; s0 < P.n_parts;) {
        /* the parts s0 .. s1 - 1 of one colour; its items i0 .. i1 */
        int32_t s1 = s0 + 1;
        while (s1 < P.n_parts && P.colour[s1] == P.colour[s0]) s1++;
        int64_t i0 = iptr[2 * s0], i1 = iptr[2 * s1];
        if (i1 > i0) {
          if (any_reg) {
            /* the penalty reads the other colours' states before this
             * colour updates: count this colour's states first */
            SBG_CUDA_CHECK(cudaMemsetAsync(d_cnt_b, 0, (size_t)2 * nb * sizeof(unsigned long long), stream));
            k_count<<<blocks_for(i1 - i0, 256), 256, 0, stream>>>(i1 - i0, d_item_job + i0, d_item_node + i0, n, d_state, d_cnt_b);
            SBG_CUDA_CHECK(cudaGetLastError());
          }
          for (int32_t s = s0; s < s1; s++) {
            int64_t a = iptr[2 * s], hb = iptr[2 * s + 1], e = iptr[2 * s + 2];
            if (e == a) continue;
            SBG_TRY(load_part(&P, s, g, nodes, d_cro, d_pos, &view, stream, ctx));
            if (hb > a) {
              k_sweep<<<blocks_for((hb - a) * 32, 32 * WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, 0, stream>>>(
                  hb - a, d_item_job + a, d_item_node + a, n, view, d_jc, d_y, d_done, d_cnt_b, d_tot,
                  d_state, d_x, d_changed);
              SBG_CUDA_CHECK(cudaGetLastError());
            }
            if (e > hb) {
              k_sweep_hub<<<(unsigned)(e - hb), HUB_THREADS, 0, stream>>>(
                  e - hb, d_item_job + hb, d_item_node + hb, n, view, d_jc, d_y, d_done, d_cnt_b, d_tot,
                  d_state, d_x, d_changed);
              SBG_CUDA_CHECK(cudaGetLastError());
            }
          }
          if (any_reg) {
            SBG_CUDA_CHECK(cudaMemsetAsync(d_cnt_a, 0, (size_t)2 * nb * sizeof(unsigned long long), stream));
            k_count<<<blocks_for(i1 - i0, 256), 256, 0, stream>>>(i1 - i0, d_item_job + i0, d_item_node + i0, n, d_state, d_cnt_a);
            SBG_CUDA_CHECK(cudaGetLastError());
            k_totals<<<blocks_for(nb, 128), 128, 0, stream>>>(nb, d_cnt_b, d_cnt_a, d_tot);
            SBG_CUDA_CHECK(cudaGetLastError());
          }
        }
        s0 = s1;
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
      SBG_TRY(dev_poll(w, ctx, ((double)(j0 - j_lo) + nb * (1.0 - 1.0 / (sweep + 1.0))) / n_jobs));
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
  if (w->mr && w->owner && st != SBG_OK) {
    /* the others must not wait for a colouring that will not come */
    std::lock_guard<std::mutex> lk(w->mr->m);
    if (w->mr->colour_state == 0) w->mr->colour_state = 2;
    w->mr->cv.notify_all();
  }
  /* the pinned buffers may still be read by a copy in flight */
  if (stream) cudaStreamSynchronize(stream);
  cudaFree(d_rowptr); cudaFree(d_col); cudaFree(d_w); cudaFree(d_colour); cudaFree(d_prio);
  cudaFree(d_wait); cudaFree(d_front); cudaFree(d_next); cudaFree(d_counts); cudaFree(d_codes); cudaFree(d_state); cudaFree(d_x);
  cudaFree(d_y); cudaFree(d_item_job); cudaFree(d_item_node); cudaFree(d_done);
  cudaFree(d_changed); cudaFree(d_cnt_b); cudaFree(d_cnt_a); cudaFree(d_tot); cudaFree(d_jc);
  cudaFree(d_cro); cudaFree(d_pos); cudaFree(d_nodes); cudaFree(d_hubs);
  for (int sl = 0; sl < 2; sl++) {
    if (P.h_col[sl]) cudaFreeHost(P.h_col[sl]);
    if (P.h_w[sl]) cudaFreeHost(P.h_w[sl]);
    cudaFree(P.d_col[sl]);
    cudaFree(P.d_w[sl]);
    if (P.ev_ok[sl]) cudaEventDestroy(P.ev[sl]);
  }
  if (stream) cudaStreamDestroy(stream);
  free(P.t0); free(P.colour); free(P.hub0); free(P.cro);
  free(nodes); free(cptr); free(codes); free(state); free(hx); free(hy); free(item_job);
  free(item_node); free(iptr); free(hptr); free(npos); free(nlab); free(alpha); free(cc); free(fs);
  free(jc); free(done); free(changed); free(pos); free(hubs);
  return st;
}

/* ---- entry ---------------------------------------------------------------- */

extern "C" sbg_status sbg_cosnet_gpu(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                                     sbg_cosnet_result *out, sbg_ctx *ctx) {
  int32_t nf = in->n_folds > 0 ? in->n_folds : 1;
  int32_t n_jobs = in->n_classes * nf;
  int nd = p->n_devices > 1 ? p->n_devices : 1;
  if (nd > n_jobs) nd = n_jobs;
  if (nd <= 1) {
    dev_worker w;
    w.mr = NULL;
    w.owner = 1;
    w.j_lo = 0;
    w.j_hi = n_jobs;
    w.frac.store(0.0);
    w.stopped = 0;
    w.n_parts = 0;
    sbg_status st = cosnet_gpu_device(in, p, out, ctx, &w);
    out->n_parts = w.n_parts;
    return st;
  }

  /* Several devices: contiguous ranges of the (class, fold) jobs, a host
   * thread each.  Every job is independent of the others and of how the
   * jobs are batched, so the results are those of one device. */
  multi_run mr;
  mr.stop.store(0);
  mr.colour_state = 0;
  mr.n_finished = 0;
  /* (no C++ exception may leave this function: R would abort) */
  std::unique_ptr<dev_worker[]> ws(new (std::nothrow) dev_worker[nd]);
  if (!ws) return sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory");
  for (int d = 0; d < nd; d++) {
    dev_worker &w = ws[d];
    w.mr = &mr;
    w.owner = d == 0;
    w.j_lo = (int32_t)((int64_t)n_jobs * d / nd);
    w.j_hi = (int32_t)((int64_t)n_jobs * (d + 1) / nd);
    w.frac.store(0.0);
    w.stopped = 0;
    w.n_parts = 0;
    w.ctx = *ctx;
    w.ctx.device = p->devices[d];
    /* the host work of each device (learning, gathering parts) gets its
     * share of the threads */
    w.ctx.n_threads = ctx->n_threads / nd > 1 ? ctx->n_threads / nd : 1;
    w.ctx.poll = dev_stop_hook;
    w.ctx.poll_data = &w;
    w.ctx.errbuf[0] = 0;
    w.st = SBG_OK;
  }
  std::vector<std::thread> th;
  int started = 0;
  try {
    th.reserve(nd);
    for (int d = 0; d < nd; d++) {
      th.emplace_back([&, d]() {
        dev_worker &w = ws[d];
        w.st = cosnet_gpu_device(in, p, out, &w.ctx, &w);
        if (w.st != SBG_OK) mr.stop.store(1);
        std::lock_guard<std::mutex> lk(mr.m);
        mr.n_finished++;
        mr.cv.notify_all();
      });
      started++;
    }
  } catch (...) {
    mr.stop.store(1);
    {
      std::lock_guard<std::mutex> lk(mr.m);
      if (mr.colour_state == 0) mr.colour_state = 2;
      mr.cv.notify_all();
    }
    for (int d = 0; d < started; d++) th[d].join();
    return sbg_fail(ctx, SBG_ERR_INTERNAL, "could not start a host thread per device");
  }

  /* The calling thread polls (interrupts, progress) until all are done. */
  int user_stop = 0;
  {
    std::unique_lock<std::mutex> lk(mr.m);
    while (mr.n_finished < nd) {
      mr.cv.wait_for(lk, std::chrono::milliseconds(100));
      if (mr.n_finished >= nd) break;
      lk.unlock();
      double f = 0;
      for (int d = 0; d < nd; d++) f += ws[d].frac.load() * (ws[d].j_hi - ws[d].j_lo);
      if (!user_stop && sbg_poll(ctx, f / n_jobs) != SBG_OK) {
        user_stop = 1;
        mr.stop.store(1);
        mr.cv.notify_all();
      }
      lk.lock();
    }
  }
  for (int d = 0; d < nd; d++) th[d].join();

  out->n_parts = 0;
  for (int d = 0; d < nd; d++)
    if (ws[d].n_parts > out->n_parts) out->n_parts = ws[d].n_parts;
  if (user_stop) return SBG_ERR_INTERRUPTED; /* ctx->errbuf set by sbg_poll */
  /* the first failure that was not a consequence of another */
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < nd; d++)
      if (ws[d].st != SBG_OK && (pass == 1 || !ws[d].stopped))
        return sbg_fail(ctx, ws[d].st, "GPU %d: %s", ws[d].ctx.device, ws[d].ctx.errbuf);
  return SBG_OK;
}
