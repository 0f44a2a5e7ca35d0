/* GPU engine of parCosnet() and cvParCosnet(): the same computation as
 * cosnet_cpu.c (same colouring, the same learnt lines, the same canonical
 * row sums).  The learning step's sorts and counts run on the device
 * (k_learn_sums), its picks on the host (cosnet_common.c, the CPU
 * engine's own code), and the dynamics as one launch per colour for a
 * batch of (class, fold) jobs, a warp per (job, node) and a block of 8
 * warps per (job, hub).  The colouring (greedy in priority order) runs on
 * one host thread, or as Jones-Plassmann rounds on the device for large
 * resident networks.  A network larger than the device's memory stays on
 * the host: it is coloured there and streamed in parts (runs of nodes of
 * one colour) through two pinned buffers, the gather of a part on the host
 * overlapping the work on the previous one.  Workers, host threads with a
 * stream each (CUDA and C only, no R: the calling thread polls for
 * interrupts), take batches of jobs from one queue: one a device, or two
 * when the jobs are many, so that one's host work (codes, the learning's
 * picks, collecting) overlaps the other's sweeps; the devices
 * are those of parCosnet(device = c(0, 1)).
 * The first worker colours the network and shares the colouring; the
 * first of each device uploads the network and shares it with the other.
 * Built with SBG_COSNET_PROFILE defined, each worker prints the time of
 * its phases to stderr (for tuning; the phases then wait for the device). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda_check.cuh"
#include "philox.h"
#include "cosnet.h"

#ifdef SBG_COSNET_PROFILE
#include <stdio.h>
static double prof_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
enum { PR_OPEN, PR_COLOUR, PR_PARTS, PR_ALLOC, PR_CODES, PR_POINTS, PR_LEARN, PR_PREP, PR_THRESH, PR_SWEEPS,
       PR_COLLECT, PR_N };
static const char *prof_names[PR_N] = {"open", "colour", "parts", "alloc", "codes", "points", "learn", "prep",
                                       "thresh", "sweeps", "collect"};
#define PROF_MARK(R, ph) do { cudaStreamSynchronize((R)->stream); double t_ = prof_now(); \
    (R)->prof[ph] += t_ - (R)->prof_t; (R)->prof_t = t_; } while (0)
#else
#define PROF_MARK(R, ph) do { } while (0)
#endif

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

/* lane_sum() of the positive (tm = 0, tp = 1) and of the negative
 * neighbours (tm = 1, tp = 0) in one pass over the row, each with
 * lane_sum()'s own operations: a training point reads its row once. */
static __device__ __forceinline__ void lane_sum_pn(const csr_view &g, int64_t b, int64_t e, int lane,
                                                   int stride, const int8_t *code, double *pos,
                                                   double *neg) {
  double p = 0.0, q = 0.0;
  for (int64_t k = b + lane; k < e; k += stride) {
    int8_t s = code[g.col[k]];
    double w = g.w[k];
    p = __dadd_rn(p, __dmul_rn(w, s == 1 ? 1.0 : 0.0));
    q = __dadd_rn(q, __dmul_rn(w, s == -1 ? 1.0 : 0.0));
  }
  *pos = p;
  *neg = q;
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
 * nodes `nodes` (or 0..m-1 when NULL), hubs left to k_points_hub.  The
 * warps go node after node, the batch's jobs of a node side by side
 * (node-major), so that a row read for one job is still in cache for the
 * others: job-major, every job read the whole network from device memory
 * (mouse-like CV on one H200: engine 0.68 s job-major, 0.59-0.64 s
 * node-major; BENCHMARKS.md, parCosnet). */
static __global__ void k_points(int32_t n, int32_t n_jobs, int32_t m, const int32_t *nodes,
                                csr_view g, const int8_t *codes, double *x, double *y) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= (int64_t)m * n_jobs) return;
  int32_t t = (int32_t)(warp / n_jobs), b = (int32_t)(warp % n_jobs); /* node-major */
  int32_t v = nodes ? nodes[t] : t;
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_POS && jl[v] != SBG_COSNET_NEG) return;
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  if (re - rb > SBG_COSNET_HUB_DEGREE) return;
  double px, py;
  lane_sum_pn(g, rb, re, lane, 32, jl, &px, &py);
  px = warp_tree(px);
  py = warp_tree(py);
  if (lane == 0) {
    x[(size_t)b * n + v] = px;
    y[(size_t)b * n + v] = py;
  }
}

/* ---- the learning step's summaries (cosnet.h, "from the device's
 * summaries") ---- */

#define LEARN_THREADS 256
#define LEARN_IPT (SBG_COSNET_LEARN_CAP / LEARN_THREADS)
#ifndef LEARN_NODES
#define LEARN_NODES 4 /* nodes a thread takes at a time in the first pass */
#endif
typedef cub::BlockRadixSort<unsigned long long, LEARN_THREADS, LEARN_IPT, int32_t> learn_sort;
typedef cub::BlockScan<int32_t, LEARN_THREADS> learn_scan;

/* A labelled point's value in a summary of `kind`, and whether the sweep
 * keeps it: the host's arithmetic (learn_step(), pos_above()), operation
 * for operation (the build does not fuse products and sums). */
static __device__ __forceinline__ bool learn_value(int kind, double x, double y, double param, double rstop,
                                                   double *v) {
  switch (kind) {
  case SBG_COSNET_SUM_RATIO:
    if (x == 0) return false;
    *v = y / x;
    return *v < rstop;
  case SBG_COSNET_SUM_AXIS:
    *v = y;
    return x == 0;
  case SBG_COSNET_SUM_SLOPE:
    if (x == 0) return false;
    *v = (y - param) / (x - 0.0);
    return !(*v > -1.0);
  default: /* LINE, LINE_STABLE */
    *v = y - param * x;
    return true;
  }
}

/* Entries of the ascending a[0..len) below k. */
template <typename T>
static __device__ __forceinline__ int32_t dev_below(const T *a, int32_t len, T k) {
  int32_t lo = 0;
  while (len > 0) {
    int32_t half = len >> 1;
    if (a[lo + half] < k) { lo += half + 1; len -= half + 1; } else len = half;
  }
  return lo;
}

struct learn_smem {
  union {
    learn_sort::TempStorage sort;
    learn_scan::TempStorage scan;
    unsigned long long tb[2][SBG_COSNET_LEARN_CAP + 1]; /* top, bot */
  } u;
  unsigned long long key[SBG_COSNET_LEARN_CAP];
  int32_t node[SBG_COSNET_LEARN_CAP];
  int32_t pos[SBG_COSNET_LEARN_CAP], eq[SBG_COSNET_LEARN_CAP], run[SBG_COSNET_LEARN_CAP + 1];
  int32_t n_lab, n_pos, nz_pos, kept, zero_at, G;
};

/* One block a job (list[blockIdx.x], or blockIdx.x): the summary of `kind`
 * of its labelled points (codes POS / NEG) into out, job b's arrays at b *
 * cap.  The kept positives in node order (block scans over tiles of
 * nodes), a stable radix sort of their keys (equal keys stay in node
 * order), then each kept negative placed among them by a binary search;
 * the counts are integers, so the atomics leave the same summary in any
 * order. */
static __global__ void __launch_bounds__(LEARN_THREADS)
k_learn_sums(int kind, int32_t n, int32_t cap, const int32_t *list, const int8_t *codes, const double *x,
             const double *y, const double *param, double rstop, sbg_cosnet_sums out) {
  __shared__ learn_smem sm;
  const int tid = threadIdx.x;
  const int32_t b = list ? list[blockIdx.x] : (int32_t)blockIdx.x;
  const int8_t *jl = codes + (size_t)b * n;
  const double *xb = x + (size_t)b * n, *yb = y + (size_t)b * n;
  const double pa = param ? param[b] : 0.0;
  const bool stable = kind >= SBG_COSNET_SUM_AXIS;
  if (tid == 0) { sm.n_lab = sm.n_pos = sm.nz_pos = sm.kept = 0; sm.zero_at = n; }
  __syncthreads();
  int32_t my_lab = 0, my_pos = 0, my_nz = 0, my_kept = 0, my_zero = n, P = 0;
  /* the kept positives, in node order: tiles of LEARN_NODES consecutive
   * nodes a thread, a block scan a tile */
  for (int32_t t0 = 0; t0 < n; t0 += LEARN_THREADS * LEARN_NODES) {
    unsigned long long k[LEARN_NODES];
    int32_t cnt = 0;
    unsigned fl = 0; /* bit i: node i a kept positive */
#pragma unroll
    for (int i = 0; i < LEARN_NODES; i++) {
      int32_t v = t0 + tid * LEARN_NODES + i;
      k[i] = 0;
      if (v < n && (jl[v] == SBG_COSNET_POS || jl[v] == SBG_COSNET_NEG)) {
        bool p = jl[v] == SBG_COSNET_POS;
        double xv = xb[v], val;
        my_lab++;
        my_pos += p;
        my_nz += p && xv == 0;
        if (learn_value(kind, xv, yb[v], pa, rstop, &val)) {
          my_kept++;
          if (val == 0 && v < my_zero) my_zero = v;
          if (p) { k[i] = sbg_cosnet_order_key(val); fl |= 1u << i; cnt++; }
        }
      }
    }
    int32_t off, total;
    learn_scan(sm.u.scan).ExclusiveSum(cnt, off, total);
#pragma unroll
    for (int i = 0; i < LEARN_NODES; i++) {
      if (!(fl >> i & 1u)) continue;
      int32_t at = P + off++;
      if (at < SBG_COSNET_LEARN_CAP && at < cap) { sm.key[at] = k[i]; sm.node[at] = t0 + tid * LEARN_NODES + i; }
    }
    P += total;
    __syncthreads(); /* (the scan's storage again) */
    if (P > cap || P > SBG_COSNET_LEARN_CAP) break; /* (the whole block: the host learns the job) */
  }
  atomicAdd(&sm.n_lab, my_lab);
  atomicAdd(&sm.n_pos, my_pos);
  atomicAdd(&sm.nz_pos, my_nz);
  atomicAdd(&sm.kept, my_kept);
  atomicMin(&sm.zero_at, my_zero);
  __syncthreads();
  sbg_cosnet_sum *S = out.sum + b;
  if (tid == 0) {
    S->n_lab = sm.n_lab; S->n_pos = sm.n_pos; S->nz_pos = sm.nz_pos; S->kept = sm.kept;
    S->zero_at = sm.zero_at;
    double zv = 0.0;
    if (sm.zero_at < n) learn_value(kind, xb[sm.zero_at], yb[sm.zero_at], pa, rstop, &zv);
    S->zero = zv;
    if (P > cap || P > SBG_COSNET_LEARN_CAP) S->n_keys = -1;
  }
  if (P > cap || P > SBG_COSNET_LEARN_CAP) return; /* (the whole block) */
  /* sort the positives' keys; equal keys keep their node order */
  {
    unsigned long long kk[LEARN_IPT];
    int32_t nn[LEARN_IPT];
#pragma unroll
    for (int i = 0; i < LEARN_IPT; i++) {
      int32_t j = tid * LEARN_IPT + i;
      kk[i] = j < P ? sm.key[j] : ~0ull;
      nn[i] = j < P ? sm.node[j] : n;
    }
    learn_sort(sm.u.sort).Sort(kk, nn);
    __syncthreads(); /* (the sort's storage becomes top and bot) */
#pragma unroll
    for (int i = 0; i < LEARN_IPT; i++) {
      int32_t j = tid * LEARN_IPT + i;
      if (j < P) { sm.key[j] = kk[i]; sm.node[j] = nn[i]; }
    }
  }
  __syncthreads();
  int32_t G = P;
  if (!stable) {
    /* the groups of equal keys: heads, their indices, then the keys in place */
    int32_t head[LEARN_IPT], gi[LEARN_IPT];
    unsigned long long kk[LEARN_IPT];
#pragma unroll
    for (int i = 0; i < LEARN_IPT; i++) {
      int32_t j = tid * LEARN_IPT + i;
      kk[i] = j < P ? sm.key[j] : 0;
      head[i] = j < P && (j == 0 || sm.key[j - 1] != kk[i]);
    }
    int32_t groups;
    learn_scan(sm.u.scan).ExclusiveSum(head, gi, groups);
    __syncthreads(); /* every key read before any is moved */
#pragma unroll
    for (int i = 0; i < LEARN_IPT; i++)
      if (head[i]) { sm.key[gi[i]] = kk[i]; sm.node[gi[i]] = tid * LEARN_IPT + i; }
    G = groups;
    __syncthreads();
    for (int32_t g = tid; g < G; g += LEARN_THREADS) sm.pos[g] = (g + 1 < G ? sm.node[g + 1] : P) - sm.node[g];
  }
  for (int32_t g = tid; g <= G; g += LEARN_THREADS) {
    if (g < G) sm.eq[g] = 0;
    sm.run[g] = 0;
    sm.u.tb[0][g] = 0;
    sm.u.tb[1][g] = ~0ull;
  }
  __syncthreads();
  /* the kept negatives among the positives' keys */
  for (int32_t v = tid; v < n; v += LEARN_THREADS) {
    if (jl[v] != SBG_COSNET_NEG) continue;
    double val;
    if (!learn_value(kind, xb[v], yb[v], pa, rstop, &val)) continue;
    unsigned long long k = sbg_cosnet_order_key(val);
    int32_t at = dev_below(sm.key, G, k);
    if (stable) {
      /* after the positives of smaller keys, and those of key k at
       * smaller nodes */
      if (at < G && sm.key[at] == k) {
        int32_t len = dev_below(sm.key + at, G - at, k + 1);
        at += dev_below(sm.node + at, len, v);
      }
      atomicAdd(&sm.run[at], 1);
    } else if (at < G && sm.key[at] == k) {
      atomicAdd(&sm.eq[at], 1);
    } else {
      atomicAdd(&sm.run[at], 1);
      atomicMax(&sm.u.tb[0][at], k);
      atomicMin(&sm.u.tb[1][at], k);
    }
  }
  __syncthreads();
  const size_t o = (size_t)b * cap, o1 = (size_t)b * (cap + 1);
  for (int32_t g = tid; g <= G; g += LEARN_THREADS) {
    if (g < G) {
      if (stable) {
        /* the positive's value itself (its key takes -0 as +0) */
        double val = 0;
        int32_t v = sm.node[g];
        learn_value(kind, xb[v], yb[v], pa, rstop, &val);
        out.key[o + g] = (unsigned long long)__double_as_longlong(val);
      } else {
        out.key[o + g] = sm.key[g];
        out.pos[o + g] = sm.pos[g];
        out.eq[o + g] = sm.eq[g];
      }
    }
    out.run[o1 + g] = sm.run[g];
    if (!stable) {
      out.top[o1 + g] = sm.run[g] > 0 ? sm.u.tb[0][g] : 0;
      out.bot[o1 + g] = sm.run[g] > 0 ? sm.u.tb[1][g] : ~0ull;
    }
  }
  if (tid == 0) S->n_keys = G;
}

/* The same for the hubs: a block per (job, hub), node-major. */
static __global__ void k_points_hub(int32_t n, int32_t n_jobs, int32_t m, const int32_t *hubs,
                                    csr_view g, const int8_t *codes, double *x, double *y) {
  __shared__ double sh[HUB_THREADS];
  int64_t item = blockIdx.x;
  if (item >= (int64_t)m * n_jobs) return;
  int32_t b = (int32_t)(item % n_jobs), v = hubs[item / n_jobs]; /* node-major */
  const int8_t *jl = codes + (size_t)b * n;
  if (jl[v] != SBG_COSNET_POS && jl[v] != SBG_COSNET_NEG) return; /* whole block */
  int64_t rb, re;
  row_bounds(g, v, &rb, &re);
  double px, py;
  lane_sum_pn(g, rb, re, threadIdx.x, HUB_THREADS, jl, &px, &py);
  px = block_tree(px, sh);
  py = block_tree(py, sh);
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

/* Thresholds of the unlabelled nodes (warp per (job, node), node-major as
 * k_points, hubs apart). */
static __global__ void k_thresholds(int32_t n, int32_t n_jobs, int32_t m, const int32_t *nodes,
                                    csr_view g, const int8_t *codes, const job_consts *jc,
                                    double *theta) {
  int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= (int64_t)m * n_jobs) return;
  int32_t t = (int32_t)(warp / n_jobs), b = (int32_t)(warp % n_jobs); /* node-major */
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
  int32_t b = (int32_t)(item % n_jobs), v = hubs[item / n_jobs]; /* node-major */
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

/* ---- the batch's work items, built on the device ------------------------- */

/* The items are the (job, node) pairs of the unlabelled nodes (codes
 * REPORT or QUIET) in the order part, then light nodes before hubs, then
 * job, then node in colour order: the items of slot 2s (part s's light
 * nodes) or 2s + 1 (its hubs) for job b start at off[slot x nb + b], the
 * exclusive sum of the counts in that order.  A block a (part, job) counts
 * them (k_item_count), then writes them in colour order (k_item_fill).
 * The jobs' codes are on the device already, so only the slots' first
 * items and the jobs' counts cross to the host (k_item_meta).  With the
 * items built on the host and copied (16 MB a batch of 472 mouse-like
 * jobs), preparing a batch took 11-13 ms (a build with
 * SBG_COSNET_PROFILE); the mouse-like CV's engine took 0.61-0.62 s on one
 * H200 then, 0.54 s with the items built here (BENCHMARKS.md). */
#define ITEM_THREADS 256

static __device__ __forceinline__ unsigned long long item_flag(const int8_t *jl, const uint8_t *is_hub,
                                                               int32_t v) {
  int8_t c = jl[v];
  if (c != SBG_COSNET_REPORT && c != SBG_COSNET_QUIET) return 0ull;
  return is_hub[v] ? 1ull << 32 : 1ull; /* hubs counted in the high word */
}

static __global__ void __launch_bounds__(ITEM_THREADS)
k_item_count(int32_t n, int32_t nb, const int64_t *t0, const int32_t *nodes, const uint8_t *is_hub,
             const int8_t *codes, long long *cnt) {
  __shared__ typename cub::BlockReduce<unsigned long long, ITEM_THREADS>::TempStorage tmp;
  int32_t s = blockIdx.x, b = blockIdx.y;
  const int8_t *jl = codes + (size_t)b * n;
  unsigned long long f = 0;
  for (int64_t t = t0[s] + threadIdx.x; t < t0[s + 1]; t += ITEM_THREADS) f += item_flag(jl, is_hub, nodes[t]);
  f = cub::BlockReduce<unsigned long long, ITEM_THREADS>(tmp).Sum(f);
  if (threadIdx.x == 0) {
    cnt[2 * (size_t)s * nb + b] = (long long)(f & 0xffffffffull);
    cnt[(2 * (size_t)s + 1) * nb + b] = (long long)(f >> 32);
  }
}

static __global__ void __launch_bounds__(ITEM_THREADS)
k_item_fill(int32_t n, int32_t nb, const int64_t *t0, const int32_t *nodes, const uint8_t *is_hub,
            const int8_t *codes, const long long *off, int32_t *item_job, int32_t *item_node) {
  typedef cub::BlockScan<unsigned long long, ITEM_THREADS> scan;
  __shared__ typename scan::TempStorage tmp;
  int32_t s = blockIdx.x, b = blockIdx.y;
  const int8_t *jl = codes + (size_t)b * n;
  long long at_light = off[2 * (size_t)s * nb + b], at_hub = off[(2 * (size_t)s + 1) * nb + b];
  for (int64_t c = t0[s]; c < t0[s + 1]; c += ITEM_THREADS) {
    int64_t t = c + threadIdx.x;
    int32_t v = t < t0[s + 1] ? nodes[t] : 0;
    unsigned long long f = t < t0[s + 1] ? item_flag(jl, is_hub, v) : 0ull, before, all;
    scan(tmp).ExclusiveSum(f, before, all);
    if (f) {
      long long at = (f >> 32) ? at_hub + (long long)(before >> 32) : at_light + (long long)(before & 0xffffffffull);
      item_job[at] = b;
      item_node[at] = v;
    }
    at_light += (long long)(all & 0xffffffffull);
    at_hub += (long long)(all >> 32);
    __syncthreads(); /* tmp again */
  }
}

/* meta: the first item of each of the slots, the items' count, then the
 * unlabelled nodes of each job. */
static __global__ void k_item_meta(int32_t slots, int32_t nb, const long long *cnt, const long long *off,
                                   long long *meta) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t last = (size_t)slots * nb - 1;
  if (i < slots) {
    meta[i] = off[(size_t)i * nb];
  } else if (i == slots) {
    meta[i] = off[last] + cnt[last];
  } else if (i < (int64_t)slots + 1 + nb) {
    int32_t b = (int32_t)(i - slots - 1);
    long long total = 0;
    for (int32_t q = 0; q < slots; q++) total += cnt[(size_t)q * nb + b];
    meta[i] = total;
  }
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
  std::condition_variable cv; /* colour_state, the devices' network states and n_finished */
  int colour_state;           /* 0 pending, 1 shared, 2 the owner failed */
  int n_finished;
};

/* What the workers of one device share: the network, uploaded once by
 * the device's first worker (the lead) and read by the others. */
struct dev_share {
  int state;                  /* 0 pending, 1 resident (readable), 2 none to share (streamed,
                               * failed, or the lead is done) */
  int users;                  /* other workers reading the lead's network */
  int64_t *d_rowptr;
  int32_t *d_col;
  double *d_w;
};

/* The owner's host colouring, started on a thread of its own when the call
 * begins (early_colour_start()), so that it runs while the devices open
 * and the network is uploaded instead of after them: about 0.08 s of the
 * mouse-like CV of inst/bench/cosnet.R, which the other workers waited for
 * too (builds with SBG_COSNET_PROFILE, two H200s' host: engine 1.06-1.08 s
 * on one GPU, 0.81-0.83 s on two, against 1.15-1.21 and 0.86-0.92 s).  Only networks that are coloured on the
 * host whether or not they stay on the device (at most host_colour_max
 * entries); one thread, the same colouring as any number (greedy in
 * priority order). */
struct early_colour {
  std::thread th;
  std::atomic<int> stop; /* set when the call ends first */
  sbg_status st;
  char errbuf[SBG_ERRBUF];
};

static int early_colour_poll(void *data, double done) {
  (void)done;
  return ((early_colour *)data)->stop.load();
}

/* Maximum entries of a network coloured by one host thread (see dr_colour). */
static double host_colour_max(const sbg_cosnet_params *p);

static void early_colour_start(early_colour *ec, const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                               sbg_cosnet_result *out, const sbg_ctx *ctx) {
  ec->stop.store(0);
  ec->st = SBG_OK;
  ec->errbuf[0] = 0;
  if ((double)in->g.v_rowptr[in->g.n] > host_colour_max(p)) return;
  sbg_ctx one = *ctx;
  one.n_threads = 1;
  one.poll = early_colour_poll; /* (never R's: this is not the calling thread) */
  one.poll_data = ec;
  one.errbuf[0] = 0;
  try {
    ec->th = std::thread([ec, in, p, out, one]() mutable {
      ec->st = sbg_cosnet_colour_host(&in->g, p->seed, out->v_colour, &out->n_colours, &one);
      memcpy(ec->errbuf, one.errbuf, sizeof ec->errbuf);
    });
  } catch (...) {
    /* no thread: the owner colours in dr_colour() */
  }
}

/* Joined on every way out of the call (a no-op once the owner joined it). */
static void early_colour_end(early_colour *ec) {
  if (!ec->th.joinable()) return;
  ec->stop.store(1);
  ec->th.join();
}

/* One worker: a host thread with its own stream and batch buffers on one
 * device.  The workers take batches of jobs from one queue, so that a
 * device whose jobs converge sooner takes more, and the two workers of a
 * device overlap one's host work (learning, bookkeeping, transfers) with
 * the other's sweeps. */
struct dev_worker {
  early_colour *ec;           /* the colouring started at entry (owner only; NULL: none) */
  multi_run *mr;              /* NULL: one worker, on the calling thread */
  dev_share *share;           /* its device's; NULL: the only worker of its device */
  int owner;                  /* colours the network (and shares it) */
  int lead;                   /* uploads the network of its device */
  std::atomic<int32_t> *next; /* the queue: first job not yet taken */
  int32_t n_jobs;             /* of the whole call */
  int n_workers;              /* of the whole call */
  std::atomic<double> frac;   /* jobs done, in jobs (progress) */
  int stopped;                /* stopped by another worker's failure */
  int32_t n_parts;
  sbg_ctx ctx;
  sbg_status st;
};

/* sbg_poll() on the calling thread; a device thread only publishes its
 * progress (jobs done, with fractions) and looks at the stop flag (the
 * calling thread polls R). */
static sbg_status dev_poll(dev_worker *w, sbg_ctx *ctx, double jobs) {
  if (!w->mr) return sbg_poll(ctx, jobs / w->n_jobs);
  w->frac.store(jobs);
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

/* Everything one device's run owns: the network (whole on the device, or
 * in parts), the colour order, and the buffers of a batch of jobs.  Every
 * pointer starts at NULL; dr_close() frees what was made. */
struct dev_run {
  const sbg_cosnet_input *in;
  const sbg_cosnet_params *p;
  sbg_cosnet_result *out;
  dev_worker *w;
  const sbg_cosnet_graph *g;
  int32_t n, nf;
  int64_t nnz, n_hubs, maxdeg;
  double budget;
  cudaStream_t stream;
  /* the network, when resident */
  int64_t *d_rowptr;
  int32_t *d_col;
  double *d_w;
  /* colour order and parts */
  int32_t *nodes, *pos, *hubs;
  int64_t *cptr;
  parts P;
  csr_view view;
  int64_t *d_cro;
  int32_t *d_pos, *d_nodes, *d_hubs;
  /* a batch of B jobs: device side */
  int32_t B;
  int8_t *d_codes, *d_state, *d_done;
  double *d_x, *d_y;
  int32_t *d_item_job, *d_item_node;
  uint8_t *d_is_hub;
  int64_t *d_t0;                        /* the parts' first colour-order positions */
  long long *d_icnt, *d_ioff, *d_imeta; /* the items' counts, offsets and meta (k_item_*) */
  void *d_iscan;                        /* the offsets' scan's scratch */
  size_t iscan_bytes;
  long long *imeta;                     /* (host) */
  int *d_changed;
  unsigned long long *d_cnt_b, *d_cnt_a;
  long long *d_tot;
  job_consts *d_jc;
  /* ... and its host mirrors */
  int8_t *codes, *state, *done;
  double *hx, *alpha, *cc, *fs;
  double *hy;           /* (the points of jobs learnt on the host: made when first needed) */
  int32_t *changed;
  int64_t *iptr, *npos, *nlab, *nunl;
  uint8_t *is_hub;      /* n: more than SBG_COSNET_HUB_DEGREE entries */
  job_consts *jc;
  /* the learning step's summaries (k_learn_sums): two sets of a batch on
   * the device (d_sums) and their pinned mirrors (in host_block), each
   * laid out for the batch in hand (sbg_cosnet_sums_at) */
  int32_t lcap;
  double rstop;
  void *d_sums, *h_sums;
  sbg_cosnet_sums dsum[2], hsum[2];
  sbg_cosnet_dlearn *dl;
  double *lparam, *sparam, *d_param; /* d_param: 2 B, a set's B after the other's */
  int32_t *list, *d_list;            /* list: B; d_list: 2 B */
  /* the batch in hand: jobs j0 .. j0 + nb - 1 */
  int32_t j0, nb;
  int any_reg;
  int borrowed;         /* the network arrays are the lead's (not freed here) */
  void *host_block;     /* the summaries, hx, codes, state */
  int host_pinned, host_huge; /* (pin_alloc()) */
  void *early_block;    /* pinned while the network is uploaded and coloured (early_pin()) */
  int early_huge;
  size_t early_bytes;
  int idle;             /* nothing to share: this worker takes no jobs */
  double jobs_done;     /* by this worker, for the progress */
#ifdef SBG_COSNET_PROFILE
  double prof[PR_N], prof_t, prof_t0;
  int32_t prof_batches, prof_sweeps;
#endif
};

/* Pinned host memory (the batches' mirrors, the upload's staging).  Pinning costs about a
 * millisecond a megabyte in 4 kB pages (cudaHostAlloc), and the devices'
 * opening waited for it; memory of transparent huge pages (2 MB, asked
 * for with madvise where the system allows it) registered with
 * cudaHostRegister took a quarter of that: on the mouse-like CV of
 * inst/bench/cosnet.R (two H200s' host, a profile build) each worker's
 * opening took 0.023-0.027 s instead of 0.093-0.104 s, and the engine
 * 0.73-0.74 s on one GPU and 0.49-0.50 s on two instead of 0.78-0.80 and
 * 0.55. *huge tells pin_free() which way the block was made. */
static int huge_pages_allowed() {
  char buf[128] = {0};
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  int allowed = f && fgets(buf, sizeof buf, f) && !strstr(buf, "[never]");
  if (f) fclose(f);
  return allowed;
}

static cudaError_t pin_alloc(void **p, size_t bytes, int *huge) {
  *huge = 0;
#ifdef MADV_HUGEPAGE
  const size_t page = (size_t)2 << 20, sz = (bytes + page - 1) / page * page;
  if (huge_pages_allowed() && posix_memalign(p, page, sz) == 0) {
    madvise(*p, sz, MADV_HUGEPAGE);
    memset(*p, 0, sz); /* (the pages, huge ones, made now) */
    if (cudaHostRegister(*p, sz, cudaHostRegisterDefault) == cudaSuccess) {
      *huge = 1;
      return cudaSuccess;
    }
    cudaGetLastError(); /* (clears the failure: cudaHostAlloc below) */
    free(*p);
  }
#endif
  return cudaHostAlloc(p, bytes, cudaHostAllocDefault);
}

static void pin_free(void *p, int huge) {
  if (!p) return;
  if (huge) {
    cudaHostUnregister(p);
    free(p);
  } else {
    cudaFreeHost(p);
  }
}

/* Host to device copies of more than this many bytes go through pinned
 * buffers of this size, filled by all the worker's threads while the
 * previous one is on its way: a pageable copy runs at the speed of one
 * thread's staging in the driver (about 5 GB/s, a second for 5 GB). */
#define STAGE_BYTES ((size_t)64 << 20)

static sbg_status upload(void *dst, const void *src, size_t bytes, cudaStream_t stream, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  void *pin[2] = {NULL, NULL};
  int huge[2] = {0, 0};
  cudaEvent_t ev[2];
  int n_ev = 0;
  if (bytes <= 2 * STAGE_BYTES || ctx->n_threads < 2) {
    SBG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    return SBG_OK;
  }
  for (int sl = 0; sl < 2; sl++)
    if (pin_alloc(&pin[sl], STAGE_BYTES, &huge[sl]) != cudaSuccess) {
      cudaGetLastError();
      pin[sl] = NULL;
    }
  if (!pin[0] || !pin[1]) { /* no pinned memory: the plain copy */
    SBG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    goto done;
  }
  for (; n_ev < 2; n_ev++) SBG_CUDA_CHECK(cudaEventCreateWithFlags(&ev[n_ev], cudaEventDisableTiming));
  for (size_t at = 0, i = 0; at < bytes; at += STAGE_BYTES, i++) {
    int sl = (int)(i & 1);
    size_t len = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
    if (i >= 2) SBG_CUDA_CHECK(cudaEventSynchronize(ev[sl]));
    sbg_cosnet_copy(pin[sl], (const char *)src + at, len, ctx->n_threads);
    SBG_CUDA_CHECK(cudaMemcpyAsync((char *)dst + at, pin[sl], len, cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaEventRecord(ev[sl], stream));
  }
done:
  /* the buffers must outlive the copies */
  cudaStreamSynchronize(stream);
  for (int e = 0; e < n_ev; e++) cudaEventDestroy(ev[e]);
  for (int sl = 0; sl < 2; sl++)
    pin_free(pin[sl], huge[sl]);
  return st;
}

/* Device, stream, degrees, and the network on the device when it fits
 * with room for the colouring and one job (about 60 bytes per node), else
 * streamed later. */
static sbg_status dr_open(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const sbg_cosnet_graph *g = R->g;
  int32_t n = R->n;
  int64_t nnz = R->nnz;
  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&R->stream, cudaStreamNonBlocking));
  for (int32_t v = 0; v < n; v++) {
    int64_t d = g->v_rowptr[v + 1] - g->v_rowptr[v];
    if (d > R->maxdeg) R->maxdeg = d;
    R->n_hubs += d > SBG_COSNET_HUB_DEGREE;
  }
  if (R->w->share && !R->w->lead) {
    /* a second worker of the device reads the lead's network, or takes no
     * jobs when there is none to read (streamed, or the lead stopped) */
    multi_run *mr = R->w->mr;
    dev_share *sh = R->w->share;
    std::unique_lock<std::mutex> lk(mr->m);
    while (sh->state == 0 && !mr->stop.load()) mr->cv.wait_for(lk, std::chrono::milliseconds(50));
    if (sh->state != 1) {
      R->idle = 1;
      return SBG_OK;
    }
    sh->users++;
    R->borrowed = 1;
    R->P.resident = 1;
    R->d_rowptr = sh->d_rowptr;
    R->d_col = sh->d_col;
    R->d_w = sh->d_w;
    return SBG_OK;
  }
  {
    size_t free_b = 0, total_b = 0;
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    R->budget = R->p->device_budget > 0 ? R->p->device_budget : 0.9 * (double)free_b;
    double whole = 8.0 * (n + 1) + 12.0 * (double)nnz + 64.0 * n;
    R->P.resident = whole <= R->budget;
  }
  if (R->P.resident) {
    SBG_TRY(sbg_device_alloc((void **)&R->d_rowptr, (size_t)(n + 1) * sizeof(int64_t), "the network's row offsets", ctx));
    SBG_TRY(sbg_device_alloc((void **)&R->d_col, (size_t)(nnz > 0 ? nnz : 1) * sizeof(int32_t), "the network's columns", ctx));
    SBG_TRY(sbg_device_alloc((void **)&R->d_w, (size_t)(nnz > 0 ? nnz : 1) * sizeof(double), "the network's weights", ctx));
    SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_rowptr, g->v_rowptr, (size_t)(n + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, R->stream));
    if (nnz > 0) {
      SBG_TRY(upload(R->d_col, g->v_col, (size_t)nnz * sizeof(int32_t), R->stream, ctx));
      SBG_TRY(upload(R->d_w, g->v_w, (size_t)nnz * sizeof(double), R->stream, ctx));
    }
  }
  if (R->w->share) {
    /* the others read it on their own streams: it must be there */
    SBG_CUDA_CHECK(cudaStreamSynchronize(R->stream));
    std::lock_guard<std::mutex> lk(R->w->mr->m);
    dev_share *sh = R->w->share;
    sh->d_rowptr = R->d_rowptr;
    sh->d_col = R->d_col;
    sh->d_w = R->d_w;
    sh->state = R->P.resident ? 1 : 2;
    R->w->mr->cv.notify_all();
  }
done:
  return st;
}

/* Colouring of the resident network: Jones-Plassmann rounds, frontier
 * after frontier, into out->v_colour. */
static sbg_status dr_colour_device(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t n = R->n;
  cudaStream_t stream = R->stream;
  int32_t *d_colour = NULL, *d_wait = NULL, *d_front = NULL, *d_next = NULL, *d_counts = NULL;
  uint64_t *d_prio = NULL;
  int32_t counts[2] = {0, 0}, coloured = 0, n_front = 0;
  SBG_TRY(sbg_device_alloc((void **)&d_colour, (size_t)n * sizeof(int32_t), "the colours", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_prio, (size_t)n * sizeof(uint64_t), "the priorities", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_wait, (size_t)n * sizeof(int32_t), "the colouring counts", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_front, (size_t)n * sizeof(int32_t), "the colouring frontier", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_next, (size_t)n * sizeof(int32_t), "the colouring frontier", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_counts, 2 * sizeof(int32_t), "counters", ctx));
  k_prio<<<blocks_for(n, 256), 256, 0, stream>>>(n, R->p->seed, d_prio, d_colour);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemsetAsync(d_counts, 0, 2 * sizeof(int32_t), stream));
  k_jp_wait<<<blocks_for(n, 256), 256, 0, stream>>>(n, R->d_rowptr, R->d_col, d_prio, d_wait, d_front, d_counts);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemcpyAsync(counts, d_counts, 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  n_front = counts[0];
  while (n_front > 0) {
    k_jp_assign<<<blocks_for(n_front, 256), 256, 0, stream>>>(n_front, d_front, R->d_rowptr, R->d_col, d_colour);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemsetAsync(d_counts + 1, 0, sizeof(int32_t), stream));
    k_jp_release<<<blocks_for(n_front, 256), 256, 0, stream>>>(n_front, d_front, R->d_rowptr, R->d_col,
                                                                d_prio, d_wait, d_next, d_counts + 1);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(counts + 1, d_counts + 1, sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    coloured += n_front;
    int32_t *sw = d_front; d_front = d_next; d_next = sw;
    n_front = counts[1];
    SBG_TRY(dev_poll(R->w, ctx, 0.0));
  }
  if (coloured != n) {
    st = sbg_fail(ctx, SBG_ERR_INTERNAL, "colouring left %d node(s)", (int)(n - coloured));
    goto done;
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->out->v_colour, d_colour, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  R->out->n_colours = 0;
  for (int32_t v = 0; v < n; v++)
    if (R->out->v_colour[v] + 1 > R->out->n_colours) R->out->n_colours = R->out->v_colour[v] + 1;
done:
  cudaFree(d_colour); cudaFree(d_prio); cudaFree(d_wait); cudaFree(d_front); cudaFree(d_next); cudaFree(d_counts);
  return st;
}

/* Networks of at most this many entries are coloured by one host thread
 * (one pass over the edges, tens of milliseconds), larger resident ones
 * on the device, whose rounds of Jones-Plassmann cost a launch and a
 * synchronisation each (some 0.6 s on 2e4 nodes of degree 600). */
#define HOST_COLOUR_ENTRIES ((int64_t)1 << 26)

static double host_colour_max(const sbg_cosnet_params *p) {
  return p->host_colour_max >= 0 ? p->host_colour_max : (double)HOST_COLOUR_ENTRIES;
}

/* The colouring (one worker colours: on the device when the network is
 * resident and large, else on the host; greedy in priority order either
 * way; the others wait for it) and the nodes in colour order. */
static sbg_status dr_colour(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int own_colour = !R->w->mr || R->w->owner;
  double host_max = host_colour_max(R->p);
  early_colour *ec = R->w->ec;
  if (own_colour && ec && ec->th.joinable()) {
    ec->th.join();
    st = ec->st;
    if (st == SBG_ERR_ALLOC) st = sbg_fail(ctx, st, "out of memory while colouring the network");
    else if (st != SBG_OK) memcpy(ctx->errbuf, ec->errbuf, sizeof ctx->errbuf);
    if (st != SBG_OK) goto done;
  } else if (own_colour && R->P.resident && (double)R->nnz > host_max) {
    SBG_TRY(dr_colour_device(R, ctx));
  } else if (own_colour && R->P.resident) {
    sbg_ctx one = *ctx;
    one.n_threads = 1; /* the greedy pass itself, no rounds */
    st = sbg_cosnet_colour_host(R->g, R->p->seed, R->out->v_colour, &R->out->n_colours, &one);
    if (st == SBG_ERR_ALLOC) st = sbg_fail(ctx, st, "out of memory while colouring the network");
    else if (st != SBG_OK) memcpy(ctx->errbuf, one.errbuf, sizeof ctx->errbuf);
    if (st != SBG_OK) goto done;
  } else if (own_colour) {
    SBG_TRY(sbg_cosnet_colour_host(R->g, R->p->seed, R->out->v_colour, &R->out->n_colours, ctx));
  }
  if (R->w->mr) SBG_TRY(share_colouring(R->w, ctx));
  if (sbg_cosnet_colour_order(R->out->v_colour, R->n, R->out->n_colours, &R->nodes, &R->cptr) != SBG_OK)
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory while ordering the colours");
done:
  return st;
}

/* Parts: one per colour, or (streamed) runs of at most P.cap entries in a
 * colour, with the offsets of the rows in colour order. */
static sbg_status dr_parts(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  parts &P = R->P;
  const sbg_cosnet_graph *g = R->g;
  int32_t n = R->n, nc = R->out->n_colours, np = 0;
  if (!P.resident) {
    /* two buffers in half of the budget */
    P.cap = (int64_t)(0.5 * R->budget / (2.0 * 12.0));
    /* at most 2^27 entries (1.5 GB) a buffer: the pinned host copies
     * stay modest, and parts stay many enough to overlap */
    if (P.cap > ((int64_t)1 << 27)) P.cap = (int64_t)1 << 27;
    if (P.cap > R->nnz) P.cap = R->nnz;
    if (P.cap < R->maxdeg || P.cap < 1) {
      P.cap = R->maxdeg > 0 ? R->maxdeg : 1;
      if (R->p->device_budget <= 0) {
        st = sbg_fail(ctx, SBG_ERR_DEVICE_ALLOC, "the device cannot hold two rows of %lld entries",
                      (long long)R->maxdeg);
        goto done;
      }
    }
    P.cro = (int64_t *)malloc(((size_t)n + 1) * sizeof(int64_t));
    if (!P.cro) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory"); goto done; }
    P.cro[0] = 0;
    for (int32_t t = 0; t < n; t++) {
      int32_t v = R->nodes[t];
      P.cro[t + 1] = P.cro[t] + (g->v_rowptr[v + 1] - g->v_rowptr[v]);
    }
  }
  /* count, then fill */
  for (int pass = 0; pass < 2; pass++) {
    np = 0;
    for (int32_t cl = 0; cl < nc; cl++) {
      int64_t a = R->cptr[cl];
      while (a < R->cptr[cl + 1]) {
        int64_t e = R->cptr[cl + 1];
        if (!P.resident) {
          /* as many rows as fit (at least one) */
          e = a + 1;
          while (e < R->cptr[cl + 1] && P.cro[e + 1] - P.cro[a] <= P.cap) e++;
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
  R->w->n_parts = P.resident ? 0 : np;
done:
  return st;
}

/* The hubs in colour order (each part's hubs contiguous) and what the
 * kernels read the network through: the resident arrays, or the colour
 * order and two pinned buffers for the parts. */
static sbg_status dr_parts_upload(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  parts &P = R->P;
  const sbg_cosnet_graph *g = R->g;
  int32_t n = R->n;
  int64_t n_hubs = R->n_hubs, h = 0;
  cudaStream_t stream = R->stream;
  R->hubs = (int32_t *)malloc((size_t)(n_hubs > 0 ? n_hubs : 1) * sizeof(int32_t));
  R->pos = (int32_t *)malloc((size_t)n * sizeof(int32_t));
  if (!R->hubs || !R->pos) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory"); goto done; }
  for (int32_t s = 0; s < P.n_parts; s++) {
    P.hub0[s] = h;
    for (int64_t t = P.t0[s]; t < P.t0[s + 1]; t++) {
      int32_t v = R->nodes[t];
      R->pos[v] = (int32_t)t;
      if (g->v_rowptr[v + 1] - g->v_rowptr[v] > SBG_COSNET_HUB_DEGREE) R->hubs[h++] = v;
    }
  }
  P.hub0[P.n_parts] = h;
  SBG_TRY(sbg_device_alloc((void **)&R->d_hubs, (size_t)(n_hubs > 0 ? n_hubs : 1) * sizeof(int32_t), "the hub list", ctx));
  if (n_hubs > 0)
    SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_hubs, R->hubs, (size_t)n_hubs * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  /* the colour order: the parts' nodes, and the work items (k_item_count) */
  SBG_TRY(sbg_device_alloc((void **)&R->d_nodes, (size_t)n * sizeof(int32_t), "the colour order", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_nodes, R->nodes, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  if (P.resident) {
    R->view.rowptr = R->d_rowptr;
    R->view.pos = NULL;
    R->view.base = 0;
    R->view.col = R->d_col;
    R->view.w = R->d_w;
    goto done;
  }
  SBG_TRY(sbg_device_alloc((void **)&R->d_cro, (size_t)(n + 1) * sizeof(int64_t), "the row offsets in colour order", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_pos, (size_t)n * sizeof(int32_t), "the colour positions", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_cro, P.cro, (size_t)(n + 1) * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_pos, R->pos, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  for (int sl = 0; sl < 2; sl++) {
    SBG_CUDA_CHECK(cudaHostAlloc((void **)&P.h_col[sl], (size_t)P.cap * sizeof(int32_t), cudaHostAllocDefault));
    SBG_CUDA_CHECK(cudaHostAlloc((void **)&P.h_w[sl], (size_t)P.cap * sizeof(double), cudaHostAllocDefault));
    SBG_TRY(sbg_device_alloc((void **)&P.d_col[sl], (size_t)P.cap * sizeof(int32_t), "a part of the network", ctx));
    SBG_TRY(sbg_device_alloc((void **)&P.d_w[sl], (size_t)P.cap * sizeof(double), "a part of the network", ctx));
    SBG_CUDA_CHECK(cudaEventCreateWithFlags(&P.ev[sl], cudaEventDisableTiming));
    P.ev_ok[sl] = 1;
    SBG_CUDA_CHECK(cudaEventRecord(P.ev[sl], stream));
  }
done:
  return st;
}

/* Smallest first batch of several workers (batch_cap()), and a worker's
 * jobs below which a device takes one worker. */
#define MIN_BATCH 16
#ifndef COSNET_PINNED_NODE_JOBS
#define COSNET_PINNED_NODE_JOBS 2e7
#endif

/* The most jobs a batch of worker w can hold whatever the device's
 * memory: the queue's first batch, the host mirrors' cap (pinned:
 * host_block_bytes(), about 10 bytes per node and job plus the learning's
 * summaries; over several workers COSNET_PINNED_NODE_JOBS node-jobs in
 * huge pages, half that in small pages;
 * 1.5e8 node-jobs for one), 4096 and the max_batch setting; at least 1.
 * Pinning comes before the first batch: on the mouse-like CV of
 * inst/bench/cosnet.R (two H200s' host, huge pages) a cap of 2e7 gave
 * engine times of 0.71-0.73 s on one GPU and 0.48-0.49 s on two, 4e7
 * 0.73 and 0.49-0.50 s, 1e7 0.74 and 0.52-0.54 s (fewer batches, fewer
 * launches a sweep); in small pages, where pinning took about a
 * millisecond a megabyte, 1e7 had been the best (1e7 node-jobs were 260
 * MB then: 0.98-1.00 and 0.72-0.78 s, against 1.10-1.17 and 0.85-0.98 s
 * for twice that).  With batches of one size (dr_take()), alternating
 * builds, two H200s' host: 2e7 0.44-0.47 s on one GPU and 0.30-0.31 s on
 * two, 4e7 0.49-0.52 and 0.31-0.34 s, 1e7 a worker however many workers
 * (batches of 472 jobs on two GPUs too) 0.43-0.48 and 0.31-0.33 s. */
static int32_t batch_cap(const dev_worker *w, int32_t n, const sbg_cosnet_params *p) {
  int nw = w->n_workers;
  int32_t n_jobs = w->n_jobs;
  if (nw > 1) {
    int32_t first = (int32_t)((n_jobs + 2 * (int64_t)nw - 1) / (2 * nw));
    n_jobs = first > MIN_BATCH ? first : MIN_BATCH;
  }
  double pinned = huge_pages_allowed() ? COSNET_PINNED_NODE_JOBS : COSNET_PINNED_NODE_JOBS / 2;
  double host_cap = (nw > 1 ? pinned : 1.5e8) / (double)n / nw;
  int32_t B = n_jobs;
  if (B > host_cap) B = (int32_t)host_cap;
  if (B > 4096) B = 4096;
  if (p->max_batch > 0 && B > p->max_batch) B = p->max_batch;
  return B < 1 ? 1 : B;
}

/* Positives a job may have for the device's learning (its summaries' cap). */
static int32_t learn_cap(int32_t n) { return n < SBG_COSNET_LEARN_CAP ? n : SBG_COSNET_LEARN_CAP; }

/* The bytes of one set of the learning's summaries for B jobs. */
static size_t sums_set_bytes(int32_t B, int32_t n) {
  return ((size_t)B * sbg_cosnet_sums_bytes(learn_cap(n)) + 15) / 16 * 16;
}

/* The bytes of the host mirrors of a batch of B jobs (dr_batch_alloc). */
static size_t host_block_bytes(int32_t B, int32_t n) {
  return 2 * sums_set_bytes(B, n) + (size_t)B * (size_t)n * (sizeof(double) + 2);
}


/* Pinning the mirrors took each of four workers on two GPUs at least as
 * long as each of two on one GPU, though each pinned half as much
 * (BENCHMARKS.md, "Several GPUs and R workers", parCosnet): with several
 * workers, each pins the mirrors of its largest batch on a host thread of
 * its own while it uploads the network and the colouring is made, and
 * dr_batch_alloc() takes that block when the batch fits it.  Pinned for
 * the worker's device, as its own allocation would be. */
static void early_pin(dev_run *R, int device) {
  size_t bytes = host_block_bytes(batch_cap(R->w, R->n, R->p), R->n);
  if (bytes > ((size_t)1 << 30)) return; /* (dr_batch_alloc() does not pin those) */
  if (cudaSetDevice(device) != cudaSuccess ||
      pin_alloc(&R->early_block, bytes, &R->early_huge) != cudaSuccess) {
    cudaGetLastError(); /* (clears the failure: the worker pins or mallocs its own) */
    R->early_block = NULL;
    return;
  }
  R->early_bytes = bytes;
}

/* Jobs per batch: about 30 bytes per node and job on the device, within
 * half of the free memory (and of what the budget leaves), shared by the
 * device's workers; the host mirrors (host_block_bytes()) stay near 4
 * GB over all workers.  With several workers, no more than the queue's
 * first batch, and then evened out: the fewest batches a worker that
 * this size allows, every batch of one size (see dr_take). */
static sbg_status dr_batch_size(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t n = R->n;
  size_t free_b = 0, total_b = 0;
  SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  {
    double avail = (double)free_b;
    if (R->p->device_budget > 0) {
      double used = R->P.resident ? 8.0 * (n + 1) + 12.0 * (double)R->nnz
                                  : 24.0 * (double)R->P.cap + 16.0 * n;
      double left = R->p->device_budget - used;
      if (left < avail) avail = left;
    }
    double per_job = 30.0 * (double)n + 64 + 2.0 * (double)sbg_cosnet_sums_bytes(learn_cap(n)) + 24;
    double fit = avail * 0.5 / per_job / (R->w->share ? 2 : 1);
    int32_t cap = batch_cap(R->w, n, R->p);
    R->B = fit < 1 ? 1 : fit > cap ? cap : (int32_t)fit;
  }
  if (R->w->n_workers > 1) {
    const int64_t J = R->w->n_jobs, nw = R->w->n_workers;
    const int64_t per_worker = (J + nw * R->B - 1) / (nw * R->B);
    const int64_t even = (J + nw * per_worker - 1) / (nw * per_worker);
    if (even < R->B) R->B = (int32_t)even;
  }
done:
  return st;
}

/* The buffers of a batch of B jobs, on the device and on the host. */
static sbg_status dr_batch_alloc(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t B = (size_t)R->B, n = (size_t)R->n;
  SBG_TRY(sbg_device_alloc((void **)&R->d_codes, B * n, "the job labels", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_state, B * n, "the states", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_x, B * n * sizeof(double), "the points / fields", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_y, B * n * sizeof(double), "the points / thresholds", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_item_job, B * n * sizeof(int32_t), "the work items", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_item_node, B * n * sizeof(int32_t), "the work items", ctx));
  {
    size_t slots = 2 * (size_t)R->P.n_parts;
    SBG_TRY(sbg_device_alloc((void **)&R->d_is_hub, n, "the work items", ctx));
    SBG_TRY(sbg_device_alloc((void **)&R->d_t0, (slots / 2 + 1) * sizeof(int64_t), "the work items", ctx));
    SBG_TRY(sbg_device_alloc((void **)&R->d_icnt, slots * B * sizeof(long long), "the work items", ctx));
    SBG_TRY(sbg_device_alloc((void **)&R->d_ioff, slots * B * sizeof(long long), "the work items", ctx));
    SBG_TRY(sbg_device_alloc((void **)&R->d_imeta, (slots + 1 + B) * sizeof(long long), "the work items", ctx));
    SBG_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(NULL, R->iscan_bytes, R->d_icnt, R->d_ioff, (int64_t)(slots * B)));
    SBG_TRY(sbg_device_alloc(&R->d_iscan, R->iscan_bytes, "the work items", ctx));
    R->imeta = (long long *)malloc((slots + 1 + B) * sizeof(long long));
  }
  SBG_TRY(sbg_device_alloc((void **)&R->d_done, B, "the job flags", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_changed, B * sizeof(int), "the job flags", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_cnt_b, 2 * B * sizeof(unsigned long long), "counters", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_cnt_a, 2 * B * sizeof(unsigned long long), "counters", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_tot, 2 * B * sizeof(long long), "counters", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_jc, B * sizeof(job_consts), "the job constants", ctx));
  SBG_TRY(sbg_device_alloc(&R->d_sums, 2 * sums_set_bytes(R->B, R->n), "the learning's summaries", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_param, 2 * B * sizeof(double), "the learning's summaries", ctx));
  SBG_TRY(sbg_device_alloc((void **)&R->d_list, 2 * B * sizeof(int32_t), "the learning's summaries", ctx));
  R->lcap = learn_cap(R->n);
  R->rstop = sbg_cosnet_ratio_stop();
  {
    /* the mirrors that travel to and from the device, in one pinned block
     * (pageable memory when pinning fails): copies at the link's speed,
     * and no page faults after the first batch */
    size_t bn = B * n, bytes = host_block_bytes(R->B, R->n);
    if (R->early_block && bytes <= R->early_bytes) { /* pinned ahead (early_pin()) */
      R->host_block = R->early_block;
      R->host_huge = R->early_huge;
      R->early_block = NULL;
      R->host_pinned = 1;
    } else if (bytes <= ((size_t)1 << 30) && /* (pinning takes time: not the GBs of one worker) */
               pin_alloc(&R->host_block, bytes, &R->host_huge) == cudaSuccess) {
      R->host_pinned = 1;
    } else {
      cudaGetLastError(); /* (clears the failure) */
      R->host_block = malloc(bytes);
    }
    if (R->host_block) {
      char *at = (char *)R->host_block;
      R->h_sums = at; at += 2 * sums_set_bytes(R->B, R->n);
      R->hx = (double *)at; at += bn * sizeof(double);
      R->codes = (int8_t *)at; at += bn;
      R->state = (int8_t *)at;
    }
  }
  /* items of part s: light ones iptr[2s] .. iptr[2s+1], hubs .. iptr[2s+2] */
  R->iptr = (int64_t *)malloc((2 * (size_t)R->P.n_parts + 1) * sizeof(int64_t));
  R->nunl = (int64_t *)malloc(B * sizeof(int64_t));
  R->is_hub = (uint8_t *)malloc(n);
  R->npos = (int64_t *)malloc(B * sizeof(int64_t));
  R->nlab = (int64_t *)malloc(B * sizeof(int64_t));
  R->alpha = (double *)malloc(B * sizeof(double));
  R->cc = (double *)malloc(B * sizeof(double));
  R->fs = (double *)malloc(B * sizeof(double));
  R->jc = (job_consts *)malloc(B * sizeof(job_consts));
  R->done = (int8_t *)malloc(B);
  R->changed = (int32_t *)malloc(B * sizeof(int32_t));
  R->dl = (sbg_cosnet_dlearn *)malloc(B * sizeof(sbg_cosnet_dlearn));
  R->lparam = (double *)malloc(2 * B * sizeof(double));
  R->sparam = R->lparam ? R->lparam + B : NULL;
  R->list = (int32_t *)malloc(B * sizeof(int32_t));
  if (!R->dl || !R->lparam || !R->list ||
      !R->codes || !R->state || !R->hx || !R->iptr || !R->npos || !R->nlab || !R->alpha || !R->cc ||
      !R->fs || !R->jc || !R->done || !R->changed || !R->nunl || !R->is_hub || !R->imeta) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory for the GPU job batches");
    goto done;
  }
  for (size_t v = 0; v < n; v++)
    R->is_hub[v] = R->g->v_rowptr[v + 1] - R->g->v_rowptr[v] > SBG_COSNET_HUB_DEGREE;
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_is_hub, R->is_hub, n, cudaMemcpyHostToDevice, R->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_t0, R->P.t0, ((size_t)R->P.n_parts + 1) * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, R->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(R->stream)); /* (is_hub is pageable) */
done:
  return st;
}

/* A kernel over the nodes of the batch's jobs, part after part (resident:
 * all nodes at once): the points (x, y) or the thresholds into d_y. */
enum node_pass { PASS_POINTS, PASS_THRESHOLDS };

static sbg_status dr_node_pass(dev_run *R, node_pass what, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  parts &P = R->P;
  int32_t n = R->n, nb = R->nb;
  for (int32_t s = 0; s < (P.resident ? 1 : P.n_parts); s++) {
    /* thresholds: only parts with an unlabelled node */
    if (what == PASS_THRESHOLDS && !P.resident && R->iptr[2 * s + 2] == R->iptr[2 * s]) continue;
    part_span sp = span_of(P, s, n, R->n_hubs, R->d_nodes);
    SBG_TRY(load_part(&P, s, R->g, R->nodes, R->d_cro, R->d_pos, &R->view, R->stream, ctx));
    unsigned grid = blocks_for((int64_t)sp.m * nb * 32, 32 * WARPS_PER_BLOCK);
    if (what == PASS_POINTS)
      k_points<<<grid, 32 * WARPS_PER_BLOCK, 0, R->stream>>>(n, nb, sp.m, sp.nodes, R->view, R->d_codes, R->d_x, R->d_y);
    else
      k_thresholds<<<grid, 32 * WARPS_PER_BLOCK, 0, R->stream>>>(n, nb, sp.m, sp.nodes, R->view, R->d_codes, R->d_jc,
                                                                  R->d_y);
    SBG_CUDA_CHECK(cudaGetLastError());
    if (sp.n_hubs > 0) {
      unsigned hgrid = (unsigned)(sp.n_hubs * nb);
      const int32_t *hubs = R->d_hubs + sp.h0;
      if (what == PASS_POINTS)
        k_points_hub<<<hgrid, HUB_THREADS, 0, R->stream>>>(n, nb, (int32_t)sp.n_hubs, hubs, R->view, R->d_codes,
                                                           R->d_x, R->d_y);
      else
        k_thresholds_hub<<<hgrid, HUB_THREADS, 0, R->stream>>>(n, nb, (int32_t)sp.n_hubs, hubs, R->view, R->d_codes,
                                                               R->d_jc, R->d_y);
      SBG_CUDA_CHECK(cudaGetLastError());
    }
  }
done:
  return st;
}

/* The worker's next batch of B jobs from the queue into j0, nb (nb = 0:
 * none left; the last may be short).  Several workers take batches of one
 * size, the fewest a worker that the buffers allow (dr_batch_size(); every
 * worker about the same number): a batch's sweeps cost
 * about the same whatever its jobs (a launch a colour and sweep), so
 * batches that shrink towards the end, as they did (half of what was left
 * over the workers, down to MIN_BATCH), added about as many small batches
 * as there were full ones, and their launches did not split over GPUs.
 * On the mouse-like CV (two H200s' host) a worker then took 11-12
 * batches, one GPU or two; now 6 (engine 0.44-0.49 s on one GPU and
 * 0.30-0.32 s on two over five runs, against 0.50-0.51 and 0.33-0.34 s
 * for the shrinking batches in the same calls). */
static void dr_take(dev_run *R) {
  dev_worker *w = R->w;
  int32_t j0 = w->next->fetch_add(R->B);
  R->j0 = j0;
  R->nb = j0 >= w->n_jobs ? 0 : (w->n_jobs - j0 < R->B ? w->n_jobs - j0 : R->B);
}

/* The summary of `kind` of the batch's jobs in list (k of them; NULL: all
 * nb) into set `set`, its params (nb, or NULL) uploaded first, and its
 * copy to the host mirror (waited for by the caller). */
static sbg_status dr_sums(dev_run *R, int kind, int set, const int32_t *list, int32_t k, const double *param,
                          sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t nb = R->nb;
  cudaStream_t stream = R->stream;
  int32_t *d_list = list ? R->d_list + (size_t)set * R->B : NULL;
  double *d_param = param ? R->d_param + (size_t)set * R->B : NULL;
  if (k == 0) return SBG_OK;
  if (list) SBG_CUDA_CHECK(cudaMemcpyAsync(d_list, list, (size_t)k * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  if (param) SBG_CUDA_CHECK(cudaMemcpyAsync(d_param, param, (size_t)nb * sizeof(double), cudaMemcpyHostToDevice, stream));
  k_learn_sums<<<(unsigned)k, LEARN_THREADS, 0, stream>>>(kind, R->n, R->lcap, d_list, R->d_codes, R->d_x, R->d_y,
                                                            d_param, R->rstop, R->dsum[set]);
  SBG_CUDA_CHECK(cudaGetLastError());
  {
    size_t off = (size_t)set * sums_set_bytes(R->B, R->n), bytes = (size_t)nb * sbg_cosnet_sums_bytes(R->lcap);
    SBG_CUDA_CHECK(cudaMemcpyAsync((char *)R->h_sums + off, (char *)R->d_sums + off, bytes, cudaMemcpyDeviceToHost,
                                   stream));
  }
done:
  return st;
}

/* The jobs whose next round needs the summary of `kind`, into R->list. */
static int32_t dr_needing(dev_run *R, int kind) {
  int32_t k = 0;
  for (int32_t b = 0; b < R->nb; b++)
    if (R->dl[b].need & (1 << kind)) R->list[k++] = b;
  return k;
}

/* The batch's labels to the device, its points there, and each job's
 * line learnt from the device's summaries of them (three rounds at most;
 * see cosnet.h), the points staying on the device; the few jobs that the
 * summaries cannot settle are learnt on the host from their points (as
 * the CPU engine). */
static sbg_status dr_batch_learn(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t n = R->n, nb = R->nb, cap = R->lcap;
  int nt = ctx->n_threads;
  sbg_cosnet_batch_codes(R->in, R->j0, nb, R->codes, nt);
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_codes, R->codes, (size_t)nb * n, cudaMemcpyHostToDevice, R->stream));
  PROF_MARK(R, PR_CODES);
  SBG_TRY(dr_node_pass(R, PASS_POINTS, ctx));
  for (int set = 0; set < 2; set++) {
    size_t off = (size_t)set * sums_set_bytes(R->B, n);
    R->dsum[set] = sbg_cosnet_sums_at((char *)R->d_sums + off, nb, cap);
    R->hsum[set] = sbg_cosnet_sums_at((char *)R->h_sums + off, nb, cap);
  }
  SBG_TRY(dr_sums(R, SBG_COSNET_SUM_RATIO, 0, NULL, nb, NULL, ctx));
  SBG_TRY(dr_sums(R, SBG_COSNET_SUM_AXIS, 1, NULL, nb, NULL, ctx));
  SBG_CUDA_CHECK(cudaStreamSynchronize(R->stream));
  PROF_MARK(R, PR_POINTS);
  for (int round = 1; round <= 3; round++) {
    sbg_cosnet_dlearn_round(round, nb, cap, &R->hsum[0], &R->hsum[1], R->dl, R->lparam, R->sparam, R->alpha,
                            R->cc, R->fs, nt);
    if (round == 3) break;
    int32_t k = dr_needing(R, round == 1 ? SBG_COSNET_SUM_LINE : SBG_COSNET_SUM_LINE_STABLE);
    int32_t k2 = 0;
    SBG_TRY(dr_sums(R, round == 1 ? SBG_COSNET_SUM_LINE : SBG_COSNET_SUM_LINE_STABLE, 0, R->list, k, R->lparam, ctx));
    if (round == 1) {
      k2 = dr_needing(R, SBG_COSNET_SUM_SLOPE);
      SBG_TRY(dr_sums(R, SBG_COSNET_SUM_SLOPE, 1, R->list, k2, R->sparam, ctx));
    }
    if (k + k2 == 0) break;
    SBG_CUDA_CHECK(cudaStreamSynchronize(R->stream));
  }
  {
    int32_t k = 0, bad = 0;
    for (int32_t b = 0; b < nb; b++) {
      bad |= R->dl[b].input;
      R->npos[b] = R->dl[b].n_pos;
      R->nlab[b] = R->dl[b].n_lab;
      if (R->dl[b].host) R->list[k++] = b;
    }
    if (bad) {
      st = sbg_fail(ctx, SBG_ERR_INPUT, "a training set needs labelled positives and negatives");
      goto done;
    }
    /* the jobs left to the host: their points */
    if (k > 0 && !R->hy && !(R->hy = (double *)malloc((size_t)R->B * n * sizeof(double)))) {
      st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory while learning");
      goto done;
    }
    for (int32_t i = 0; i < k; i++) {
      size_t at = (size_t)R->list[i] * n;
      SBG_CUDA_CHECK(cudaMemcpyAsync(R->hx + at, R->d_x + at, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost,
                                     R->stream));
      SBG_CUDA_CHECK(cudaMemcpyAsync(R->hy + at, R->d_y + at, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost,
                                     R->stream));
    }
    if (k > 0) {
      SBG_CUDA_CHECK(cudaStreamSynchronize(R->stream));
      st = sbg_cosnet_learn_some(k, R->list, n, R->codes, R->hx, R->hy, R->alpha, R->cc, R->fs, R->npos,
                                 R->nlab, nt);
      if (st == SBG_ERR_INPUT) st = sbg_fail(ctx, st, "a training set needs labelled positives and negatives");
      else if (st != SBG_OK) st = sbg_fail(ctx, st, "out of memory while learning");
    }
  }
  PROF_MARK(R, PR_LEARN);
done:
  return st;
}

/* The batch's work items on the device (k_item_count, k_item_fill); the
 * slots' first items into iptr and each job's unlabelled nodes into nunl. */
static sbg_status dr_items(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = R->stream;
  int32_t nb = R->nb, slots = 2 * R->P.n_parts;
  dim3 grid((unsigned)R->P.n_parts, (unsigned)nb);
  size_t bytes = R->iscan_bytes;
  k_item_count<<<grid, ITEM_THREADS, 0, stream>>>(R->n, nb, R->d_t0, R->d_nodes, R->d_is_hub, R->d_codes, R->d_icnt);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(R->d_iscan, bytes, R->d_icnt, R->d_ioff, (int64_t)slots * nb, stream));
  k_item_fill<<<grid, ITEM_THREADS, 0, stream>>>(R->n, nb, R->d_t0, R->d_nodes, R->d_is_hub, R->d_codes, R->d_ioff,
                                                 R->d_item_job, R->d_item_node);
  SBG_CUDA_CHECK(cudaGetLastError());
  k_item_meta<<<blocks_for((int64_t)slots + 1 + nb, 256), 256, 0, stream>>>(slots, nb, R->d_icnt, R->d_ioff,
                                                                             R->d_imeta);
  SBG_CUDA_CHECK(cudaGetLastError());
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->imeta, R->d_imeta, ((size_t)slots + 1 + nb) * sizeof(long long),
                                 cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int32_t q = 0; q <= slots; q++) R->iptr[q] = (int64_t)R->imeta[q];
  for (int32_t b = 0; b < nb; b++) R->nunl[b] = (int64_t)R->imeta[slots + 1 + b];
done:
  return st;
}

/* Each job's constants (threshold line, regularisation). */
static void dr_job_consts(dev_run *R) {
  R->any_reg = 0;
  for (int32_t b = 0; b < R->nb; b++) {
    int64_t nu = R->nunl[b];
    sbg_cosnet_reg reg = sbg_cosnet_regularisation(R->p->cost, R->alpha[b], R->npos[b], R->nlab[b], nu);
    R->jc[b].hi = sin(R->alpha[b]);
    R->jc[b].lo = -cos(R->alpha[b]);
    R->jc[b].c = R->cc[b];
    R->jc[b].reg = reg.on;
    R->jc[b].theta_add = reg.theta_add;
    R->jc[b].r = reg.r;
    R->any_reg |= reg.on;
    R->done[b] = 0;
  }
}

/* Items, constants and cleared states on the device, then the thresholds
 * into d_y (the points are no longer needed); the fields go in d_x. */
static sbg_status dr_batch_prepare(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = R->stream;
  int32_t nb = R->nb;
  SBG_TRY(dr_items(R, ctx));
  dr_job_consts(R);
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_jc, R->jc, (size_t)nb * sizeof(job_consts), cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_done, R->done, (size_t)nb, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(R->d_state, 0, (size_t)nb * R->n, stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(R->d_tot, 0, (size_t)2 * nb * sizeof(long long), stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(R->d_cnt_b, 0, (size_t)2 * nb * sizeof(unsigned long long), stream));
  PROF_MARK(R, PR_PREP);
  SBG_TRY(dr_node_pass(R, PASS_THRESHOLDS, ctx));
  PROF_MARK(R, PR_THRESH);
done:
  return st;
}

/* The states of one colour's items (i0 .. i1) counted into cnt. */
static sbg_status dr_count(dev_run *R, int64_t i0, int64_t i1, unsigned long long *cnt, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  SBG_CUDA_CHECK(cudaMemsetAsync(cnt, 0, (size_t)2 * R->nb * sizeof(unsigned long long), R->stream));
  k_count<<<blocks_for(i1 - i0, 256), 256, 0, R->stream>>>(i1 - i0, R->d_item_job + i0, R->d_item_node + i0, R->n,
                                                            R->d_state, cnt);
  SBG_CUDA_CHECK(cudaGetLastError());
done:
  return st;
}

/* One colour's update: its parts s0 .. s1 - 1, light items then hubs. */
static sbg_status dr_sweep_colour(dev_run *R, int32_t s0, int32_t s1, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = R->stream;
  int32_t n = R->n, nb = R->nb;
  int64_t i0 = R->iptr[2 * s0], i1 = R->iptr[2 * s1];
  if (i1 <= i0) return SBG_OK;
  /* the penalty reads the other colours' states before this colour
   * updates: count this colour's states first */
  if (R->any_reg) SBG_TRY(dr_count(R, i0, i1, R->d_cnt_b, ctx));
  for (int32_t s = s0; s < s1; s++) {
    int64_t a = R->iptr[2 * s], hb = R->iptr[2 * s + 1], e = R->iptr[2 * s + 2];
    if (e == a) continue;
    SBG_TRY(load_part(&R->P, s, R->g, R->nodes, R->d_cro, R->d_pos, &R->view, stream, ctx));
    if (hb > a) {
      k_sweep<<<blocks_for((hb - a) * 32, 32 * WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, 0, stream>>>(
          hb - a, R->d_item_job + a, R->d_item_node + a, n, R->view, R->d_jc, R->d_y, R->d_done, R->d_cnt_b,
          R->d_tot, R->d_state, R->d_x, R->d_changed);
      SBG_CUDA_CHECK(cudaGetLastError());
    }
    if (e > hb) {
      k_sweep_hub<<<(unsigned)(e - hb), HUB_THREADS, 0, stream>>>(
          e - hb, R->d_item_job + hb, R->d_item_node + hb, n, R->view, R->d_jc, R->d_y, R->d_done, R->d_cnt_b,
          R->d_tot, R->d_state, R->d_x, R->d_changed);
      SBG_CUDA_CHECK(cudaGetLastError());
    }
  }
  if (R->any_reg) {
    SBG_TRY(dr_count(R, i0, i1, R->d_cnt_a, ctx));
    k_totals<<<blocks_for(nb, 128), 128, 0, stream>>>(nb, R->d_cnt_b, R->d_cnt_a, R->d_tot);
    SBG_CUDA_CHECK(cudaGetLastError());
  }
done:
  return st;
}

/* Sweeps over the colours until every job of the batch is stable or
 * max_sweeps; each job's sweeps and convergence into out. */
static sbg_status dr_batch_sweeps(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaStream_t stream = R->stream;
  const parts &P = R->P;
  int32_t nb = R->nb, j0 = R->j0, n_left = nb, sweep = 0;
  while (n_left > 0 && sweep < R->p->max_sweeps) {
    sweep++;
    SBG_CUDA_CHECK(cudaMemsetAsync(R->d_changed, 0, (size_t)nb * sizeof(int), stream));
    for (int32_t s0 = 0; s0 < P.n_parts;) {
      int32_t s1 = s0 + 1;
      while (s1 < P.n_parts && P.colour[s1] == P.colour[s0]) s1++;
      SBG_TRY(dr_sweep_colour(R, s0, s1, ctx));
      s0 = s1;
    }
    SBG_CUDA_CHECK(cudaMemcpyAsync(R->changed, R->d_changed, (size_t)nb * sizeof(int), cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int32_t b = 0; b < nb; b++) {
      if (R->done[b]) continue;
      if (!R->changed[b]) {
        R->done[b] = 1;
        n_left--;
        R->out->v_sweeps[j0 + b] = sweep;
        R->out->v_converged[j0 + b] = 1;
      }
    }
    SBG_CUDA_CHECK(cudaMemcpyAsync(R->d_done, R->done, (size_t)nb, cudaMemcpyHostToDevice, stream));
    SBG_TRY(dev_poll(R->w, ctx, R->jobs_done + nb * (1.0 - 1.0 / (sweep + 1.0))));
  }
  for (int32_t b = 0; b < nb; b++)
    if (!R->done[b]) {
      R->out->v_sweeps[j0 + b] = sweep;
      R->out->v_converged[j0 + b] = 0;
    }
  PROF_MARK(R, PR_SWEEPS);
#ifdef SBG_COSNET_PROFILE
  R->prof_sweeps += sweep;
#endif
done:
  return st;
}

/* Scores and predictions of the reported nodes, and each job's learnt
 * line, into out. */
static sbg_status dr_batch_collect(dev_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t n = R->n, nb = R->nb;
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->hx, R->d_x, (size_t)nb * n * sizeof(double), cudaMemcpyDeviceToHost, R->stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(R->state, R->d_state, (size_t)nb * n, cudaMemcpyDeviceToHost, R->stream));
  SBG_CUDA_CHECK(cudaStreamSynchronize(R->stream));
  sbg_cosnet_batch_collect(R->codes, R->j0, nb, n, R->nf, R->hx, R->state, R->out->v_scores, R->out->v_pred,
                           ctx->n_threads);
  for (int32_t b = 0; b < nb; b++) {
    int32_t j = R->j0 + b;
    R->out->v_alpha[j] = R->alpha[b];
    R->out->v_c[j] = R->cc[b];
    R->out->v_fscore[j] = R->fs[b];
  }
done:
  return st;
}

static void dr_close(dev_run *R, sbg_status st) {
  dev_worker *w = R->w;
  if (w->mr && w->owner && st != SBG_OK) {
    /* the others must not wait for a colouring that will not come */
    std::lock_guard<std::mutex> lk(w->mr->m);
    if (w->mr->colour_state == 0) w->mr->colour_state = 2;
    w->mr->cv.notify_all();
  }
  /* the pinned buffers may still be read by a copy in flight */
  if (R->stream) cudaStreamSynchronize(R->stream);
  if (w->share) {
    multi_run *mr = w->mr;
    dev_share *sh = w->share;
    std::unique_lock<std::mutex> lk(mr->m);
    if (R->borrowed) {
      sh->users--;
    } else if (w->lead) {
      /* the others of the device may still read the network: on a
       * failure they stop too; a worker that has not attached yet never
       * will (state 2) */
      if (st != SBG_OK) mr->stop.store(1);
      sh->state = 2;
      while (sh->users > 0) mr->cv.wait_for(lk, std::chrono::milliseconds(20));
    }
    mr->cv.notify_all();
  }
  if (!R->borrowed) {
    cudaFree(R->d_rowptr); cudaFree(R->d_col); cudaFree(R->d_w);
  }
  cudaFree(R->d_codes); cudaFree(R->d_state); cudaFree(R->d_x); cudaFree(R->d_y);
  cudaFree(R->d_item_job); cudaFree(R->d_item_node); cudaFree(R->d_done);
  cudaFree(R->d_is_hub); cudaFree(R->d_t0); cudaFree(R->d_icnt); cudaFree(R->d_ioff); cudaFree(R->d_imeta);
  cudaFree(R->d_iscan);
  cudaFree(R->d_changed); cudaFree(R->d_cnt_b); cudaFree(R->d_cnt_a); cudaFree(R->d_tot); cudaFree(R->d_jc);
  cudaFree(R->d_sums); cudaFree(R->d_param); cudaFree(R->d_list);
  cudaFree(R->d_cro); cudaFree(R->d_pos); cudaFree(R->d_nodes); cudaFree(R->d_hubs);
  parts &P = R->P;
  for (int sl = 0; sl < 2; sl++) {
    if (P.h_col[sl]) cudaFreeHost(P.h_col[sl]);
    if (P.h_w[sl]) cudaFreeHost(P.h_w[sl]);
    cudaFree(P.d_col[sl]);
    cudaFree(P.d_w[sl]);
    if (P.ev_ok[sl]) cudaEventDestroy(P.ev[sl]);
  }
  if (R->stream) cudaStreamDestroy(R->stream);
  free(P.t0); free(P.colour); free(P.hub0); free(P.cro);
  if (R->host_pinned) pin_free(R->host_block, R->host_huge);
  else free(R->host_block);
  free(R->hy);
  if (R->early_block) pin_free(R->early_block, R->early_huge);
  free(R->nodes); free(R->cptr); free(R->iptr); free(R->npos); free(R->nlab); free(R->alpha); free(R->cc); free(R->fs);
  free(R->jc); free(R->dl); free(R->lparam); free(R->list); free(R->done); free(R->changed); free(R->pos); free(R->hubs);
  free(R->imeta); free(R->nunl); free(R->is_hub);
}

/* One worker on device ctx->device: open (or borrow the device's
 * network), colour, lay out the parts, then batch after batch of jobs
 * from the queue. */
static sbg_status cosnet_gpu_device(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                                    sbg_cosnet_result *out, sbg_ctx *ctx, dev_worker *w) {
  sbg_status st = SBG_OK;
  dev_run R;
  memset(&R, 0, sizeof(R));
  R.in = in;
  R.p = p;
  R.out = out;
  R.w = w;
  R.g = &in->g;
  R.n = in->g.n;
  R.nnz = in->g.v_rowptr[R.n];
  R.nf = in->n_folds > 0 ? in->n_folds : 1;
  R.P.loaded = -1;
  std::thread pinner;
#ifdef SBG_COSNET_PROFILE
  R.prof_t = R.prof_t0 = prof_now();
#endif
  /* several workers: their mirrors pinned meanwhile (early_pin()); joined
   * before they are used and on every way out */
  if (w->mr) {
    try {
      pinner = std::thread(early_pin, &R, ctx->device);
    } catch (...) {
    }
  }
  SBG_TRY(dr_open(&R, ctx));
  PROF_MARK(&R, PR_OPEN);
  if (R.idle) goto done;
  SBG_TRY(dr_colour(&R, ctx));
  PROF_MARK(&R, PR_COLOUR);
  SBG_TRY(dr_parts(&R, ctx));
  SBG_TRY(dr_parts_upload(&R, ctx));
  PROF_MARK(&R, PR_PARTS);
  SBG_TRY(dr_batch_size(&R, ctx));
  if (pinner.joinable()) pinner.join();
  SBG_TRY(dr_batch_alloc(&R, ctx));
  PROF_MARK(&R, PR_ALLOC);
  for (;;) {
    dr_take(&R);
    if (R.nb == 0) break;
    SBG_TRY(dr_batch_learn(&R, ctx));
    SBG_TRY(dr_batch_prepare(&R, ctx));
    SBG_TRY(dr_batch_sweeps(&R, ctx));
    SBG_TRY(dr_batch_collect(&R, ctx));
    R.jobs_done += R.nb;
    PROF_MARK(&R, PR_COLLECT);
#ifdef SBG_COSNET_PROFILE
    R.prof_batches++;
#endif
  }
done:
#ifdef SBG_COSNET_PROFILE
  {
    double tot = prof_now() - R.prof_t0;
    fprintf(stderr, "cosnet-prof device %d jobs %d B %d batches %d sweeps %d total %.3f:", ctx->device,
            (int)R.jobs_done, (int)R.B, (int)R.prof_batches, (int)R.prof_sweeps, tot);
    for (int q = 0; q < PR_N; q++) fprintf(stderr, " %s %.3f", prof_names[q], R.prof[q]);
    fprintf(stderr, "\n");
  }
#endif
  if (pinner.joinable()) pinner.join();
#ifdef SBG_COSNET_PROFILE
  double close_t = prof_now();
#endif
  dr_close(&R, st);
#ifdef SBG_COSNET_PROFILE
  fprintf(stderr, "cosnet-prof device %d close %.3f\n", ctx->device, prof_now() - close_t);
#endif
  return st;
}

/* ---- entry ---------------------------------------------------------------- */

extern "C" sbg_status sbg_cosnet_gpu(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                                     sbg_cosnet_result *out, sbg_ctx *ctx) {
  int32_t nf = in->n_folds > 0 ? in->n_folds : 1;
  int32_t n_jobs = in->n_classes * nf;
  int nd = sbg_ctx_n_devices(ctx);
  if (nd > n_jobs) nd = n_jobs;
  /* Two workers a device when there are jobs enough for several batches
   * each: while one does its batch's host work (codes, items, the
   * learning's rounds, collecting), the other's sweeps keep the device
   * busy. */
  int wpd = n_jobs >= 4 * MIN_BATCH * nd ? 2 : 1;
#ifdef SBG_COSNET_PROFILE
  fprintf(stderr, "cosnet-prof entry: %d device(s), %d worker(s) each, %d jobs, %d threads\n", nd, wpd, n_jobs,
          ctx->n_threads);
#endif
  int nw = nd * wpd;
#ifdef SBG_COSNET_PROFILE
  double entry_t = prof_now();
#endif
  std::atomic<int32_t> next(0);
  early_colour ec;
  early_colour_start(&ec, in, p, out, ctx);
  if (nw <= 1) {
    dev_worker w;
    w.ec = &ec;
    w.mr = NULL;
    w.share = NULL;
    w.owner = 1;
    w.lead = 1;
    w.next = &next;
    w.n_jobs = n_jobs;
    w.n_workers = 1;
    w.frac.store(0.0);
    w.stopped = 0;
    w.n_parts = 0;
    sbg_status st = cosnet_gpu_device(in, p, out, ctx, &w);
    early_colour_end(&ec);
    out->n_parts = w.n_parts;
    return st;
  }

  /* Several workers: batches of the (class, fold) jobs from one queue, a
   * host thread each.  Every job is independent of the others and of how
   * the jobs are batched, so the results are those of one worker. */
  multi_run mr;
  mr.stop.store(0);
  mr.colour_state = 0;
  mr.n_finished = 0;
  /* (no C++ exception may leave this function: R would abort) */
  std::unique_ptr<dev_worker[]> ws(new (std::nothrow) dev_worker[nw]);
  std::unique_ptr<dev_share[]> shares(new (std::nothrow) dev_share[nd]);
  if (!ws || !shares) {
    early_colour_end(&ec);
    return sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory");
  }
  for (int d = 0; d < nd; d++) {
    shares[d].state = 0;
    shares[d].users = 0;
    shares[d].d_rowptr = NULL;
    shares[d].d_col = NULL;
    shares[d].d_w = NULL;
  }
  for (int i = 0; i < nw; i++) {
    dev_worker &w = ws[i];
    int d = i % nd; /* the leads first: 0 .. nd - 1 */
    w.ec = i == 0 ? &ec : NULL;
    w.mr = &mr;
    w.share = wpd > 1 ? &shares[d] : NULL;
    w.owner = i == 0;
    w.lead = i < nd;
    w.next = &next;
    w.n_jobs = n_jobs;
    w.n_workers = nw;
    w.frac.store(0.0);
    w.stopped = 0;
    w.n_parts = 0;
    w.ctx = *ctx; /* one device each */
    w.ctx.device = sbg_ctx_device_at(ctx, d);
    w.ctx.devices = NULL;
    w.ctx.n_devices = 0;
    /* the host work of each worker (learning, bookkeeping, gathering
     * parts) gets its share of the threads */
    w.ctx.n_threads = ctx->n_threads / nw > 1 ? ctx->n_threads / nw : 1;
    w.ctx.poll = dev_stop_hook;
    w.ctx.poll_data = &w;
    w.ctx.errbuf[0] = 0;
    w.st = SBG_OK;
  }
  std::vector<std::thread> th;
  int started = 0;
  try {
    th.reserve(nw);
    for (int d = 0; d < nw; d++) {
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
    early_colour_end(&ec);
    return sbg_fail(ctx, SBG_ERR_INTERNAL, "could not start a host thread per device");
  }

  /* The calling thread polls (interrupts, progress) until all are done. */
  int user_stop = 0;
  {
    std::unique_lock<std::mutex> lk(mr.m);
    while (mr.n_finished < nw) {
      mr.cv.wait_for(lk, std::chrono::milliseconds(100));
      if (mr.n_finished >= nw) break;
      lk.unlock();
      double f = 0;
      for (int d = 0; d < nw; d++) f += ws[d].frac.load();
      if (!user_stop && sbg_poll(ctx, f / n_jobs) != SBG_OK) {
        user_stop = 1;
        mr.stop.store(1);
        mr.cv.notify_all();
      }
      lk.lock();
    }
  }
  for (int d = 0; d < nw; d++) th[d].join();
  early_colour_end(&ec);
#ifdef SBG_COSNET_PROFILE
  fprintf(stderr, "cosnet-prof entry to exit %.3f\n", prof_now() - entry_t);
#endif

  out->n_parts = 0;
  for (int d = 0; d < nw; d++)
    if (ws[d].n_parts > out->n_parts) out->n_parts = ws[d].n_parts;
  if (user_stop) return SBG_ERR_INTERRUPTED; /* ctx->errbuf set by sbg_poll */
  /* the first failure that was not a consequence of another */
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < nw; d++)
      if (ws[d].st != SBG_OK && (pass == 1 || !ws[d].stopped))
        return sbg_fail(ctx, ws[d].st, "GPU %d: %s", ws[d].ctx.device, ws[d].ctx.errbuf);
  return SBG_OK;
}
