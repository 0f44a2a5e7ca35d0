/* GPU engine of lassieSimulate(): the explicit steps (Dormand-Prince 5(4)
 * with its continuous extension for the output times, or LASSIE's RKF45
 * stepping onto them) of a batch of simulations run on the device,
 * mirroring lassie_cpu.c: for models whose stages fit a block's shared
 * memory, a block per simulation runs whole steps (k_explicit); for larger
 * ones a kernel per stage (one thread per reaction and simulation for the
 * rates, one per species for H v, one block per simulation for the error
 * test and step control); a simulation that turns stiff goes
 * to the device's implicit steps (lassie_gpu_bdf.cu), or to the CPU's where
 * the device has none for the model.  Several devices share a batch in
 * contiguous blocks, one host thread each.  Reached through
 * ffi_lassie_simulate(). */
#include <math.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

#include "cuda_check.cuh"
#include "lassie.h"
#include "lassie_common.h"
#include "lassie_gpu.cuh"
#include "portable_math.h"

/* Built with SBG_LASSIE_PROFILE defined (added to the nvcc flags of this
 * file), each call prints to stderr when (seconds from the engine's start)
 * each part's host thread was done with its phases, with waits for the
 * device added, and its rounds of launches (when the explicit steps were
 * done and 10% and 1% of the simulations were left), and when the calling
 * thread had made the output and had the parts back. */
#ifdef SBG_LASSIE_PROFILE
#include <stdio.h>
static double lp_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
enum { LP_STARTS, LP_ALLOC, LP_UPLOAD, LP_LOOP, LP_OUT, LP_COPY, LP_FREE, LP_N };
static const char *lp_names[LP_N] = {"starts", "alloc", "upload", "loop", "out", "copy", "free"};
static double lp_t0, lp_part[8][LP_N], lp_made, lp_parts, lp_end, lp_at[8][3];
static int lp_iter[8][4];
#define LP_MARK(d, k) do { if ((d) < 8) lp_part[d][k] = lp_now() - lp_t0; } while (0)
#else
#define LP_MARK(d, k) do { } while (0)
#endif

namespace {

struct dmodel {
  int N, M;
  const int *r_ptr, *r_sp, *r_ord, *h_ptr, *h_rx;
  const double *h_val;
  /* the kinetic laws (NULL for a mass-action model, whose kernels are the
   * <false> instances: the mass-action code alone) */
  const int *law, *code;
  const double *cval;
};

/* Reaction i's rate at y: mass action, or with LAWS its kinetic law
 * (lassie_common.h, the CPU engine's code). */
template <bool LAWS>
__device__ inline double rate_at(const dmodel &m, const double *k, const double *y, int i) {
  if (!LAWS) return lassie_rate(m.r_ptr, m.r_sp, m.r_ord, k, y, i);
  sbg_lassie_model lm = {m.N, m.M, m.r_ptr, m.r_sp, m.r_ord, m.h_ptr, m.h_rx, m.h_val,
                         m.law, m.code, m.cval, 0, 0};
  return lassie_law_rate(&lm, k, y, i);
}

/* Products and sums rounded one by one (see lassie_common.h). */
__device__ inline double M_(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double A_(double a, double b) { return __dadd_rn(a, b); }

/* whether simulation q evaluates this stage (DP5 reuses f at its new state) */
__device__ inline bool runs_stage(const simstate *q, int stage) {
  return q->active && !(stage == 0 && q->fsal);
}

/* Species j's input to stage `stage` (>= 1), x_j + hs sum_l a_{stage,l}
 * K_l,j, by lassie_common.h as on the CPU; K's stages `kst` apart.  Shared
 * by the kernels per stage and k_explicit. */
__device__ inline double stage_input_at(int scheme, int stage, const double *x, const double *K,
                                        size_t kst, size_t j, double hs) {
  double kv[LASSIE_MAX_STAGES];
  /* unrolled, so that kv stays in registers */
#pragma unroll
  for (int l = 0; l < LASSIE_MAX_STAGES; l++) kv[l] = l < stage ? K[(size_t)l * kst + j] : 0.0;
  return lassie_stage_input(scheme, stage, x[j], hs, kv);
}

/* (H v)_l, summed in the order of the CPU engine */
__device__ inline double hv_row(const dmodel &m, const double *v, int l) {
  double acc = 0;
  for (int q = m.h_ptr[l]; q < m.h_ptr[l + 1]; q++) acc = A_(acc, M_(m.h_val[q], v[m.h_rx[q]]));
  return acc;
}

/* stage inputs of every species and simulation; the input of the stage
 * kept for the stiffness estimate goes to the second buffer */
__global__ void k_stage(int S, int N, int scheme, const double *x, const double *K, int stage,
                        double *ys, const simstate *ss) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)S * N) return;
  int s = (int)(idx / N);
  if (!ss[s].active) return;
  size_t SN = (size_t)S * N;
  ys[(stage == lassie_stiff_stage(scheme) ? SN : 0) + idx] = stage_input_at(scheme, stage, x, K, SN, idx, ss[s].hs);
}

template <bool LAWS>
__global__ void k_rates(int S, dmodel m, const double *k, int k_per_sim, const double *y,
                        double *v, const simstate *ss, int stage) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)S * m.M) return;
  int s = (int)(idx / m.M), i = (int)(idx % m.M);
  if (!runs_stage(&ss[s], stage)) return;
  v[idx] = rate_at<LAWS>(m, k + (k_per_sim ? (size_t)s * m.M : 0), y + (size_t)s * m.N, i);
}

/* f = H v for every species and simulation */
__global__ void k_spmv(int S, dmodel m, const double *v, double *f, const simstate *ss, int stage) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)S * m.N) return;
  int s = (int)(idx / m.N), l = (int)(idx % m.N);
  if (!runs_stage(&ss[s], stage)) return;
  f[idx] = hv_row(m, v + (size_t)s * m.M, l);
}

/* A block of threads, as watch_search() takes its unit. */
struct block_unit {
  __device__ int lane() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
};

/* The state at tq inside the accepted explicit step from t0 of size h (x
 * to xn, stages K `kst` apart): DP5's continuous extension, as
 * lassie_cpu.c's step_state(); the block's threads' species. */
struct dp5_state_at {
  int N;
  double t0, h;
  const double *x, *xn, *K;
  size_t kst;
  __device__ void operator()(double tq, double *y) const {
    const double theta = (tq - t0) / h;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
      double kv[LASSIE_MAX_STAGES], rc[4];
      for (int l = 0; l < LASSIE_MAX_STAGES; l++) kv[l] = K[(size_t)l * kst + j];
      lassie_dp5_dense_coefs(x[j], xn[j], h, kv, rc);
      y[j] = lassie_dp5_dense(theta, x[j], rc);
    }
  }
};

/* One simulation's attempt end, by its block: the new state, the error
 * test and the step control of lassie_cpu.c's explicit_attempt(), and the
 * output rows the accepted step reaches (DP5: its continuous extension
 * inside the step; the state itself at its end).  x, xn: the simulation's
 * state and new state (RKF45 writes the new state to xn; DP5 finds it
 * there, its last stage's input); K its stages, `kst` apart; os its output
 * block; red (LASSIE_BLOCK) and nanflag shared scratch.  With watched
 * conditions (w, simulation s) a change within the accepted step stops the
 * simulation there instead (FLAG_STOP; watch_search()): the rows before it
 * are written and x becomes the state there.  Global or shared pointers
 * alike: k_control and k_explicit run the same code. */
__device__ inline void control_block(int N, int nt, const double *times, double rtol, double atol,
                              double max_steps, int method, int scheme, int dense, double *x,
                              double *K, size_t kst, double *xn, double *os, simstate *st,
                              double *red, int *nanflag, const dwatch &w, int s) {
  if (threadIdx.x == 0) *nanflag = 0;
  __syncthreads();
  const int NS = lassie_stages(scheme);
  double h = st->hs;
  double err = 0;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    double kv[LASSIE_MAX_STAGES];
    for (int l = 0; l < NS; l++) kv[l] = K[(size_t)l * kst + j];
    double y = xn[j];
    double r = lassie_step_end(scheme, x[j], h, kv, rtol, atol, &y);
    if (!(r <= err)) { if (r != r) *nanflag = 1; else err = r; }
    xn[j] = y;
  }
  red[threadIdx.x] = err;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w && red[threadIdx.x + w] > red[threadIdx.x]) red[threadIdx.x] = red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    err = *nanflag ? NAN : red[0];
    const double tend = st->tend, span = st->span;
    double hmin = lassie_hmin(st->t, span);
    st->st[SBG_LASSIE_ST_RHS] += NS - 1 + (st->fsal ? 0 : 1);
    st->fsal = scheme == LASSIE_DP5;
    st->accepted = 0;
    if (err <= 1.0) {
      st->accepted = 1;
      double target = dense ? tend : times[st->next];
      st->t0 = st->t;
      st->t = st->hits ? target : st->t + h;
      /* rows before the new time are interpolated, a row at it is the state */
      int r1 = st->next;
      while (r1 < nt && times[r1] <= st->t) r1++;
      st->row0 = st->next; st->row1 = r1; st->next = r1;
      st->st[SBG_LASSIE_ST_STEPS]++;
      st->rej <<= 1;
      double fac = err > 0 ? 0.9 * sbg_pow(err, -0.2) : 5.0;
      if (fac > 5.0) fac = 5.0;
      double hn = h * fac;
      st->h = (st->hits && hn < st->h) ? st->h : hn;
      st->prev_h = h;
    } else {
      st->prev_h = 0;
      st->st[SBG_LASSIE_ST_REJECTED]++;
      st->rej = (st->rej << 1) | 1u;
      double fac = isfinite(err) ? 0.9 * sbg_pow(err, -0.25) : 0.1;
      if (fac < 0.1) fac = 0.1;
      if (fac > 0.9) fac = 0.9;
      st->h = h * fac;
      unsigned v = st->rej & 0xFFFFu;
      int c = 0;
      while (v) { c += v & 1u; v >>= 1; }
      int repeated = c >= LASSIE_STIFF_REJECTIONS;
      int collapsed = st->h < LASSIE_STIFF_COLLAPSE * span;
      if (method == SBG_LASSIE_AUTO && (repeated || collapsed)) {
        st->st[SBG_LASSIE_ST_SWITCHES]++;
        st->flag = FLAG_TO_CPU; st->active = 0;
      } else if (st->h < hmin) {
        st->flag = FLAG_HMIN; st->active = 0;
      }
    }
  }
  __syncthreads();
  int stopped = 0;
  if (w.n > 0 && st->accepted) {
    double tstop;
    const dp5_state_at at = {N, st->t0, st->hs, x, xn, K, kst};
    stopped = watch_search(block_unit(), w, s, N, st->t0, st->t, xn, at, &tstop);
    if (stopped && threadIdx.x == 0) {
      int r1 = st->row0;
      while (r1 < nt && times[r1] < tstop) r1++;
      st->row1 = r1; st->next = r1; st->t = tstop;
      st->flag = FLAG_STOP; st->active = 0;
    }
    __syncthreads();
  }
  if (st->accepted) {
    const int row0 = st->row0, row1 = st->row1;
    const double t0 = st->t0, tnew = st->t;
    const double *wx = w.wx + (size_t)s * N;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
      double xv = x[j], y = xn[j];
      if (scheme == LASSIE_DP5 && row0 < row1 && times[row0] < tnew) {   /* rows inside the step */
        double kv[LASSIE_MAX_STAGES], rc[4];
        for (int l = 0; l < LASSIE_MAX_STAGES; l++) kv[l] = K[(size_t)l * kst + j];
        lassie_dp5_dense_coefs(xv, y, h, kv, rc);
        for (int row = row0; row < row1 && times[row] < tnew; row++)
          os[(size_t)j * nt + row] = lassie_dp5_dense((times[row] - t0) / h, xv, rc);
      }
      if (row1 > row0 && times[row1 - 1] == tnew) os[(size_t)j * nt + row1 - 1] = y;
      x[j] = stopped ? wx[j] : y;
      if (scheme == LASSIE_DP5) K[j] = K[6 * kst + j];   /* FSAL: f at the new state */
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && st->active) {
    if (st->next >= nt || st->t >= st->tend) { st->flag = FLAG_DONE; st->active = 0; }
    else if (++st->attempts > max_steps) { st->flag = FLAG_MAXSTEPS; st->active = 0; }
    else lassie_next_step(st, times, nt, dense);
  }
  __syncthreads();
}

/* control_block() for every simulation, a block each, on global memory */
__global__ void k_control(int S, int N, int nt, const double *times, double rtol, double atol,
                          double max_steps, int method, int scheme, int dense, double *x,
                          double *K, double *xn, double *out, simstate *ss, dwatch w) {
  int s = blockIdx.x;
  if (s >= S || !ss[s].active) return;
  __shared__ double red[LASSIE_BLOCK];
  __shared__ int nanflag;
  size_t o = (size_t)s * N;
  control_block(N, nt, times, rtol, atol, max_steps, method, scheme, dense, x + o, K + o,
                (size_t)S * N, xn + o, out + (size_t)s * nt * N, &ss[s], red, &nanflag, w, s);
}

/* Before a step, by the simulation's block: the stiffness estimate of the
 * last accepted step, h |f(x) - f(stage)| / |x - stage| for the stage at
 * the end of the step (K0: f(x), Ksk: that stage's f, ys5 its input), in
 * the error test's weighted norm, and the switch of lassie_cpu.c.  rnum,
 * rden: shared scratch of LASSIE_BLOCK (the CPU sums in this order). */
__device__ inline void stiff_block(int N, int method, int scheme, double rtol, double atol,
                            const double *x, const double *K0, const double *Ksk,
                            const double *ys5, simstate *st, double *rnum, double *rden) {
  double num = 0, den = 0;
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    /* weighted by the error test's scale, as on the CPU */
    double sc = 1.0 / A_(atol, M_(rtol, fabs(x[j])));
    double dk = M_(K0[j] - Ksk[j], sc), dy = M_(x[j] - ys5[j], sc);
    num = A_(num, M_(dk, dk)); den = A_(den, M_(dy, dy));
  }
  rnum[threadIdx.x] = num; rden[threadIdx.x] = den;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) { rnum[threadIdx.x] += rnum[threadIdx.x + w]; rden[threadIdx.x] += rden[threadIdx.x + w]; }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double hrho = rden[0] > 0 ? st->prev_h * sqrt(rnum[0] / rden[0]) : 0.0;
    if (hrho > LASSIE_STIFF_HRHO) { st->stiff_count++; st->calm_rk = 0; }
    else if (++st->calm_rk >= LASSIE_NONSTIFF_RESET) st->stiff_count = 0;
    if (method == SBG_LASSIE_AUTO && st->stiff_count >= LASSIE_STIFF_COUNT) {
      st->st[SBG_LASSIE_ST_SWITCHES]++;
      st->st[SBG_LASSIE_ST_RHS] += st->fsal ? 0 : 1;   /* f(x) of this step, unless DP5's */
      st->flag = FLAG_TO_CPU; st->active = 0;
      st->attempts -= 1;                /* the CPU counts this attempt again */
    }
  }
  __syncthreads();
}

/* stiff_block() for every simulation that has a last step, on global memory */
__global__ void k_stiff(int S, int N, int method, int scheme, double rtol, double atol, const double *x,
                        const double *K, const double *ys5, simstate *ss) {
  int s = blockIdx.x;
  if (s >= S || !ss[s].active || !(ss[s].prev_h > 0)) return;
  __shared__ double rnum[LASSIE_BLOCK], rden[LASSIE_BLOCK];
  size_t SN = (size_t)S * N, o = (size_t)s * N;
  stiff_block(N, method, scheme, rtol, atol, x + o, K + o, K + (size_t)lassie_stiff_stage(scheme) * SN + o,
              ys5 + o, &ss[s], rnum, rden);
}

/* k_explicit runs where at least this many of its blocks fit a
 * multiprocessor's shared memory */
#define LASSIE_FUSED_BLOCKS 2

/* Shared memory of a simulation in k_explicit, in doubles: x, xn, ys5, the
 * stages (n_stages x N) and the rates (M). */
inline size_t explicit_smem(int N, int M, int n_stages) { return (size_t)(3 + n_stages) * N + M; }

/* Up to max_att explicit attempts of each simulation, a block each, with
 * its state, stages and rates in shared memory: the kernels above in one
 * launch (the rates, H v and stage inputs per element as k_rates, k_spmv
 * and k_stage compute them, then stiff_block and control_block), so that a
 * batch of mid-size models makes no round trips to global memory between
 * stages.  What the next launch (or the implicit steps) needs goes back:
 * the state, f(x) (DP5's first stage), the stiffness stage and its input. */
template <bool LAWS>
__global__ void __launch_bounds__(LASSIE_BLOCK)
k_explicit(int S, dmodel m, const double *k, int k_per_sim, int nt, const double *times,
           double rtol, double atol, double max_steps, int method, int scheme, int dense,
           int max_att, double *gx, double *gK, double *gys, double *out, simstate *ss, dwatch w) {
  extern __shared__ double sm[];
  __shared__ double red[LASSIE_BLOCK], red2[LASSIE_BLOCK];
  __shared__ int nanflag;
  __shared__ simstate st;
  const int s = blockIdx.x;
  if (s >= S || !ss[s].active) return;
  const int N = m.N, M = m.M, NS = lassie_stages(scheme), sk = lassie_stiff_stage(scheme);
  const size_t SN = (size_t)S * N, o = (size_t)s * N;
  double *x = sm, *xn = x + N, *ys5 = xn + N, *K = ys5 + N, *v = K + (size_t)NS * N;
  const double *ks = k + (k_per_sim ? (size_t)s * M : 0);
  if (threadIdx.x == 0) st = ss[s];
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    x[j] = gx[o + j]; K[j] = gK[o + j];
    K[(size_t)sk * N + j] = gK[(size_t)sk * SN + o + j]; ys5[j] = gys[SN + o + j];
  }
  __syncthreads();
  for (int att = 0; att < max_att && st.active; att++) {
    for (int stage = 0; stage < NS; stage++) {
      const double *y = x;
      if (stage > 0) {
        double *ys = stage == sk ? ys5 : xn;
        for (int j = threadIdx.x; j < N; j += blockDim.x) ys[j] = stage_input_at(scheme, stage, x, K, N, j, st.hs);
        __syncthreads();
        y = ys;
      }
      if (runs_stage(&st, stage)) {
        for (int i = threadIdx.x; i < M; i += blockDim.x) v[i] = rate_at<LAWS>(m, ks, y, i);
        __syncthreads();
        double *f = K + (size_t)stage * N;
        for (int l = threadIdx.x; l < N; l += blockDim.x) f[l] = hv_row(m, v, l);
        __syncthreads();
      }
      if (stage == 0 && st.prev_h > 0) {
        stiff_block(N, method, scheme, rtol, atol, x, K, K + (size_t)sk * N, ys5, &st, red, red2);
        if (!st.active) break;
      }
    }
    if (!st.active) break;
    control_block(N, nt, times, rtol, atol, max_steps, method, scheme, dense, x, K, N, xn,
                  out + (size_t)s * nt * N, &st, red, &nanflag, w, s);
  }
  for (int j = threadIdx.x; j < N; j += blockDim.x) {
    gx[o + j] = x[j]; gK[o + j] = K[j];
    gK[(size_t)sk * SN + o + j] = K[(size_t)sk * N + j]; gys[SN + o + j] = ys5[j];
  }
  if (threadIdx.x == 0) ss[s] = st;
}

/* n[0]: simulations in the explicit steps, n[1]: waiting for or in the
 * device's implicit steps */
__global__ void k_count_active(int S, const simstate *ss, int *n) {
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= S) return;
  if (ss[s].active) atomicAdd(n, 1);
  else if (ss[s].flag == FLAG_TO_CPU || ss[s].flag == FLAG_BDF) atomicAdd(n + 1, 1);
}

inline unsigned blocks(size_t n, int b) { return (unsigned)((n + b - 1) / b); }

/* One device's share of a batch: the contiguous simulations s0 .. s0 + S - 1.
 * Each simulation's arithmetic does not depend on the others nor on the
 * batch size (every kernel indexes one simulation), so any split gives the
 * bits of one device. */
struct part {
  int device, s0, S;
  sbg_ctx ctx;               /* its own message buffer; never polls */
  sbg_status st;
  std::atomic<int> active;   /* simulations still on the device (progress) */
  std::atomic<int> finished;
};

/* the output's row 0 on the device: the initial states x (before any
 * step) of S simulations of N species, nt rows */
__global__ void k_row0(size_t SN, int N, int nt, const double *x, double *out) {
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < SN) out[(i / N) * nt * N + (i % N) * (size_t)nt] = x[i];
}

/* Each simulation's start (simulations s0 .. s1 of a part): its state hx
 * and its step control hs, the first step from the problem (f, v:
 * scratch of N and M).  As the CPU engine starts its simulations. */
void lassie_start_sims(const sbg_lassie_model *m, const sbg_lassie_params *p, const double *rates,
                       const double *initial, int base, double *hx, simstate *hs, int s0, int s1,
                       double *f, double *v) {
  const int N = m->n_species, M = m->n_reactions, dense = p->method != SBG_LASSIE_RKF45;
  for (int s = s0; s < s1; s++) {
    const double *x0 = initial + (p->initial_per_sim ? (size_t)s * N : 0);
    const double *k = rates + (p->rates_per_sim ? (size_t)s * M : 0);
    simstate *q = &hs[s];
    memcpy(hx + (size_t)s * N, x0, sizeof(double) * N);
    double t0;
    lassie_window(p, base + s, &t0, &q->tend, &q->next);
    q->t = t0;
    q->span = q->tend - t0;
    q->h = sbg_lassie_initial_step(m, p, k, hx + (size_t)s * N, q->span, f, v);
    if (!(p->h_init > 0)) q->st[SBG_LASSIE_ST_RHS] = 1;
    /* the CPU counts its own */
    q->attempts = (p->method == SBG_LASSIE_BDF ? 0 : 1) + (p->attempts0 ? p->attempts0[base + s] : 0);
    q->active = p->method != SBG_LASSIE_BDF;
    /* method = "bdf": every simulation goes to the implicit steps at once */
    q->flag = q->active ? FLAG_RUN : FLAG_TO_CPU;
    q->fsal = 0;
    lassie_next_step(q, p->times, p->n_times, dense);
  }
}

/* Row 0 of S simulations' outputs (nt x N blocks, column-major): their
 * initial states. */
void lassie_write_row0(double *out, const double *initial, int per_sim, int S, int N, int nt) {
  for (int s = 0; s < S; s++) {
    const double *x0 = initial + (per_sim ? (size_t)s * N : 0);
    for (int j = 0; j < N; j++) out[(size_t)s * nt * N + (size_t)j * nt] = x0[j];
  }
}

/* the host looks at an unpaced launch every millisecond (cudaStreamQuery),
 * and whether it was cancelled or the output is there every
 * LASSIE_WAIT_POLL looks */
#define LASSIE_WAIT_POLL 10

/* The explicit steps of a part's simulations on its device, from the
 * initial states to where each finished, failed or turned stiff: fills
 * their entries of hs_all and hx_all (whole-batch arrays) and their rows of
 * r->out.  Free of R: it runs on a host thread of its own, while the
 * calling thread makes r->out (set once *out_made is) and polls; it stops
 * at the next round, or within LASSIE_WAIT_POLL ms of a long launch, once
 * *cancel is set. */
sbg_status run_part(const sbg_lassie_model *m, const sbg_lassie_params *p, part *pt,
                    simstate *hs_all, double *hx_all, sbg_lassie_result *r, sbg_ctx *ctx,
                    const std::atomic<int> *cancel, const std::atomic<int> *out_made) {
  sbg_status st = SBG_OK;
  const int N = m->n_species, M = m->n_reactions, S = pt->S, nt = p->n_times;
  const int nnzA = m->r_ptr[M], nnzH = m->h_ptr[N];
  const size_t SN = (size_t)S * N, SM = (size_t)S * M;
  const size_t nk = p->rates_per_sim ? SM : (size_t)M;
  const double *rates = p->rates + (p->rates_per_sim ? (size_t)pt->s0 * M : 0);
  const double *initial = p->initial + (p->initial_per_sim ? (size_t)pt->s0 * N : 0);
  sbg_lassie_watch *wt = r->watch;
  double *rout = NULL;
  simstate *hs = hs_all + pt->s0;
  double *hx = hx_all + (size_t)pt->s0 * N;
  cudaStream_t stream = NULL;
  int *d_rptr = NULL, *d_rsp = NULL, *d_rord = NULL, *d_hptr = NULL, *d_hrx = NULL, *d_n = NULL;
  int *d_law = NULL, *d_code = NULL;
  double *d_cval = NULL;
  double *d_hval = NULL, *d_k = NULL, *d_x = NULL, *d_K = NULL, *d_ys = NULL, *d_v = NULL,
         *d_out = NULL, *d_times = NULL;
  simstate *d_ss = NULL;
  double *f = NULL, *v = NULL;
  int *d_wstart = NULL, *d_wcode = NULL;
  double *d_wcval = NULL, *d_wbase = NULL, *d_wvals = NULL, *d_wvq = NULL, *d_wx = NULL;
  double *h_wbase = NULL;
  std::thread row0;
  dmodel dm;
  dwatch dw = {0, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  int active = 0, n_bdf = 0, counts[2];
  /* the device's implicit steps, when the model and the batch have them
   * (else the stiff simulations wait for the host's, FLAG_TO_CPU).  The
   * whole batch decides, not this part: the host would take every part's
   * stiff simulations on the same threads, while each device takes its
   * part in about the time of one simulation; and every part chooses
   * alike. */
  lassie_gpu_bdf *bdf = NULL;
  int bdf_unpaced = 0;
  const int want_bdf = p->method != SBG_LASSIE_RKF45 && lassie_gpu_bdf_wanted(m, p, p->n_sims, ctx->n_threads);
  const int TB = LASSIE_BLOCK;   /* k_stiff's reduction order is the CPU's */
  const int scheme = p->method == SBG_LASSIE_RKF45 ? LASSIE_RKF45 : LASSIE_DP5;
  const int dense = p->method != SBG_LASSIE_RKF45;
  const int n_stages = lassie_stages(scheme);
  /* k_explicit when a simulation's stages fit in a block's shared memory
   * and at least LASSIE_FUSED_BLOCKS blocks share a multiprocessor (fewer
   * leave too few warps to hide the model's index loads, which then miss
   * the L1 that the shared memory takes: with one block per
   * multiprocessor the fused kernel was slower, with two faster, as
   * inst/bench/lassie-fused.R measures).  p->fused 0: never, 1: whenever a
   * block fits (tests, measurements).  The block has
   * the fewest threads (a power of 2, 32 to LASSIE_BLOCK) that cover the
   * species: the stiffness sums then add the same nonzero terms in the same
   * tree as LASSIE_BLOCK's. */
  const size_t smem = explicit_smem(N, M, n_stages) * sizeof(double);
  int fused = 0, fb = 32;
  /* the kernels of the model's kind: a mass-action model's never see a law */
  const bool laws = m->law != NULL;
  auto k_fused = laws ? k_explicit<true> : k_explicit<false>;
  auto k_rate = laws ? k_rates<true> : k_rates<false>;

  /* Once the calling thread has made the output, its row 0 (the initial
   * states; the device's copy brings them again) is written on a thread of
   * its own while the device works: its writes fault in every page of the
   * output, fresh memory from R (Chen, 1,000 sets: 246 MB), which would
   * otherwise slow the copy back.  Joined before the output is copied back
   * (and on every way out).  Looked at between launches (have_output);
   * waited for before the copy back (wait_output). */
  auto have_output = [&]() -> bool {
    if (rout) return true;
    if (!out_made->load(std::memory_order_acquire)) return false;
    rout = r->out + (size_t)pt->s0 * nt * N;
    try {
      row0 = std::thread(lassie_write_row0, rout, initial, p->initial_per_sim, S, N, nt);
    } catch (...) {
      lassie_write_row0(rout, initial, p->initial_per_sim, S, N, nt);
    }
    return true;
  };
  auto wait_output = [&]() -> sbg_status {
    while (!have_output()) {
      if (cancel->load()) return SBG_ERR_INTERRUPTED;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return SBG_OK;
  };
  {
    /* the simulations' starts on the host's threads (Chen, 1,000 sets: 8-14
     * ms on one), each thread a block of them with scratch of its own */
    const int nth = ctx->n_threads > 1 && S >= 64 ? (ctx->n_threads < S / 32 ? ctx->n_threads : S / 32) : 1;
    f = (double *)malloc(sizeof(double) * (size_t)N * nth);
    v = (double *)malloc(sizeof(double) * (size_t)M * nth);
    if (!f || !v) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory"); goto done; }
    std::thread *starts = new (std::nothrow) std::thread[nth];
    for (int t = 0; t < nth; t++) {
      const int s0 = (int)((long long)S * t / nth), s1 = (int)((long long)S * (t + 1) / nth);
      double *ft = f + (size_t)N * t, *vt = v + (size_t)M * t;
      bool started = false;
      if (starts && t > 0) {
        try {
          starts[t] = std::thread(lassie_start_sims, m, p, rates, initial, pt->s0, hx, hs, s0, s1, ft, vt);
          started = true;
        } catch (...) {
        }
      }
      if (!started) lassie_start_sims(m, p, rates, initial, pt->s0, hx, hs, s0, s1, ft, vt);
    }
    for (int t = 1; starts && t < nth; t++) if (starts[t].joinable()) starts[t].join();
    delete[] starts;
  }
  for (int s = 0; s < S; s++) active += hs[s].active;
  if (want_bdf) for (int s = 0; s < S; s++) n_bdf += hs[s].flag == FLAG_TO_CPU;
  if (wt && wt->n_conds > 0) {
    /* the watched conditions at the simulations' starts: what a change
     * is a change from, and what a simulation that reaches the end
     * reports (as the CPU engine's) */
    h_wbase = (double *)malloc(sizeof(double) * (size_t)S * wt->n_conds);
    if (!h_wbase) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory"); goto done; }
    for (int s = 0; s < S; s++)
      for (int c = 0; c < wt->n_conds; c++)
        h_wbase[(size_t)s * wt->n_conds + c] =
            lassie_law_eval(wt->code + wt->start[c], wt->cval, hx + (size_t)s * N, -1, 0);
  }
  pt->active.store(active + n_bdf);
  LP_MARK(pt->device, LP_STARTS);
  if (active == 0 && n_bdf == 0) {   /* nothing for the device */
    st = wait_output();
    goto done;
  }

  SBG_TRY(sbg_device_select(pt->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreate(&stream));
  SBG_TRY(sbg_device_alloc((void **)&d_rptr, sizeof(int) * (M + 1), "the reactant offsets", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_rsp, sizeof(int) * (nnzA ? nnzA : 1), "the reactants", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_rord, sizeof(int) * (nnzA ? nnzA : 1), "the reactant orders", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_hptr, sizeof(int) * (N + 1), "the offsets of H", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_hrx, sizeof(int) * (nnzH ? nnzH : 1), "the columns of H", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_hval, sizeof(double) * (nnzH ? nnzH : 1), "the values of H", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_k, sizeof(double) * nk, "the rate constants", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_x, sizeof(double) * SN, "the states", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_ys, sizeof(double) * SN * 2, "the stage states", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_K, sizeof(double) * SN * n_stages, "the explicit stages", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_v, sizeof(double) * SM, "the reaction rates", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_out, sizeof(double) * SN * nt, "the output", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_times, sizeof(double) * nt, "the times", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_ss, sizeof(simstate) * S, "the step control", ctx));
  SBG_TRY(sbg_device_alloc((void **)&d_n, sizeof(int) * 2, "a counter", ctx));
#ifdef SBG_LASSIE_PROFILE
  cudaDeviceSynchronize();
#endif
  LP_MARK(pt->device, LP_ALLOC);
  if (laws) {
    SBG_TRY(sbg_device_alloc((void **)&d_law, sizeof(int) * M, "the kinetic laws", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_code, sizeof(int) * (m->n_code ? m->n_code : 1), "the kinetic laws", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_cval, sizeof(double) * (m->n_cval ? m->n_cval : 1), "the kinetic laws", ctx));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_law, m->law, sizeof(int) * M, cudaMemcpyHostToDevice, stream));
    if (m->n_code)
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_code, m->code, sizeof(int) * m->n_code, cudaMemcpyHostToDevice, stream));
    if (m->n_cval)
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_cval, m->cval, sizeof(double) * m->n_cval, cudaMemcpyHostToDevice, stream));
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_rptr, m->r_ptr, sizeof(int) * (M + 1), cudaMemcpyHostToDevice, stream));
  if (nnzA) {
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_rsp, m->r_sp, sizeof(int) * nnzA, cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_rord, m->r_ord, sizeof(int) * nnzA, cudaMemcpyHostToDevice, stream));
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_hptr, m->h_ptr, sizeof(int) * (N + 1), cudaMemcpyHostToDevice, stream));
  if (nnzH) {
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_hrx, m->h_rx, sizeof(int) * nnzH, cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_hval, m->h_val, sizeof(double) * nnzH, cudaMemcpyHostToDevice, stream));
  }
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_k, rates, sizeof(double) * nk, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_x, hx, sizeof(double) * SN, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_times, p->times, sizeof(double) * nt, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(d_ss, hs, sizeof(simstate) * S, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(d_out, 0, sizeof(double) * SN * nt, stream));
  k_row0<<<blocks(SN, TB), TB, 0, stream>>>(SN, N, nt, d_x, d_out);
#ifdef SBG_LASSIE_PROFILE
  cudaStreamSynchronize(stream);
#endif
  LP_MARK(pt->device, LP_UPLOAD);
  dm.N = N; dm.M = M; dm.r_ptr = d_rptr; dm.r_sp = d_rsp; dm.r_ord = d_rord;
  dm.h_ptr = d_hptr; dm.h_rx = d_hrx; dm.h_val = d_hval;
  dm.law = d_law; dm.code = d_code; dm.cval = d_cval;
  if (h_wbase) {
    const size_t nw = (size_t)S * wt->n_conds;
    SBG_TRY(sbg_device_alloc((void **)&d_wstart, sizeof(int) * wt->n_conds, "the watched conditions", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_wcode, sizeof(int) * (wt->n_code ? wt->n_code : 1), "the watched conditions", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_wcval, sizeof(double) * (wt->n_cval ? wt->n_cval : 1), "the watched conditions", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_wbase, sizeof(double) * nw, "the watched conditions", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_wvals, sizeof(double) * nw, "the watched conditions", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_wvq, sizeof(double) * nw, "the watched conditions", ctx));
    SBG_TRY(sbg_device_alloc((void **)&d_wx, sizeof(double) * SN, "the watched conditions", ctx));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_wstart, wt->start, sizeof(int) * wt->n_conds, cudaMemcpyHostToDevice, stream));
    if (wt->n_code)
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_wcode, wt->code, sizeof(int) * wt->n_code, cudaMemcpyHostToDevice, stream));
    if (wt->n_cval)
      SBG_CUDA_CHECK(cudaMemcpyAsync(d_wcval, wt->cval, sizeof(double) * wt->n_cval, cudaMemcpyHostToDevice, stream));
    SBG_CUDA_CHECK(cudaMemcpyAsync(d_wbase, h_wbase, sizeof(double) * nw, cudaMemcpyHostToDevice, stream));
    dw.n = wt->n_conds; dw.start = d_wstart; dw.code = d_wcode; dw.cval = d_wcval;
    dw.base = d_wbase; dw.vals = d_wvals; dw.vq = d_wvq; dw.wx = d_wx;
  }
  if (want_bdf) {
    sbg_lassie_model dmod = {N, M, d_rptr, d_rsp, d_rord, d_hptr, d_hrx, d_hval,
                             d_law, d_code, d_cval, m->n_code, m->n_cval};
    SBG_TRY(lassie_gpu_bdf_setup(m, &dmod, p, S, stream, &bdf, ctx));
  }
  if (!bdf) n_bdf = 0;
  /* With method "bdf" every simulation takes implicit steps throughout:
   * launches of the most attempts, the host polling while they run.  A
   * launch ends with its slowest simulation, and launches paced to a
   * quarter second cost more than they save.  With explicit steps in the
   * batch (method "auto") longer implicit launches keep the explicit ones
   * waiting, so those stay at 64 attempts a launch (both measured with
   * inst/bench/lassie-bdf.R). */
  bdf_unpaced = bdf && p->method == SBG_LASSIE_BDF;
  if (bdf_unpaced) lassie_gpu_bdf_unpaced(bdf);
  {
    int optin = 0, per_sm = 0;
    cudaFuncAttributes fa;
    SBG_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, pt->device));
    SBG_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, pt->device));
    SBG_CUDA_CHECK(cudaFuncGetAttributes(&fa, k_fused));
    const size_t block_b = smem + fa.sharedSizeBytes;
    const int mode = p->fused;
    fused = mode != 0 && block_b <= (size_t)optin &&
            (mode == 1 || block_b * LASSIE_FUSED_BLOCKS <= (size_t)per_sm);
    while (fb < N && fb < TB) fb *= 2;
    if (fused)
      SBG_CUDA_CHECK(cudaFuncSetAttribute(k_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  }

  /* Steps are queued without waiting; every 64 explicit steps (and the
   * implicit attempts of a launch: 64, or with method "bdf" as many as take
   * about a quarter second) the host counts the simulations still running
   * and looks whether the calling thread cancelled. */
  while (active > 0 || n_bdf > 0) {
    if (fused && active > 0)
      k_fused<<<S, fb, smem, stream>>>(S, dm, d_k, p->rates_per_sim, nt, d_times, p->rtol, p->atol,
                                          p->max_steps, p->method, scheme, dense, 64, d_x, d_K, d_ys,
                                          d_out, d_ss, dw);
    for (int rep = 0; rep < (active > 0 && !fused ? 64 : 0); rep++) {
      for (int stage = 0; stage < n_stages; stage++) {
        const double *y = d_x;
        if (stage > 0) {
          k_stage<<<blocks(SN, TB), TB, 0, stream>>>(S, N, scheme, d_x, d_K, stage, d_ys, d_ss);
          y = stage == lassie_stiff_stage(scheme) ? d_ys + SN : d_ys;
        }
        k_rate<<<blocks(SM, TB), TB, 0, stream>>>(S, dm, d_k, p->rates_per_sim, y, d_v, d_ss, stage);
        k_spmv<<<blocks(SN, TB), TB, 0, stream>>>(S, dm, d_v, d_K + (size_t)stage * SN, d_ss, stage);
        if (stage == 0)
          k_stiff<<<S, TB, 0, stream>>>(S, N, p->method, scheme, p->rtol, p->atol, d_x, d_K, d_ys + SN, d_ss);
      }
      k_control<<<S, TB, 0, stream>>>(S, N, nt, d_times, p->rtol, p->atol, p->max_steps,
                                       p->method, scheme, dense, d_x, d_K, d_ys, d_out, d_ss, dw);
    }
    SBG_CUDA_CHECK(cudaGetLastError());
    /* (the explicit steps just queued may send any of the active ones) */
    if (bdf) SBG_TRY(lassie_gpu_bdf_launch(bdf, p, d_k, d_times, d_x, d_out, d_ss, dw, active + n_bdf, stream, ctx));
    have_output();
    if (bdf_unpaced) {
      /* look at the launch while it runs (before anything that waits for
       * it: the counts' copy to pageable memory does); a cancel stops it
       * within LASSIE_BDF_STOP_EVERY attempts */
      for (int w = 0; cudaStreamQuery(stream) == cudaErrorNotReady; w++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (w % LASSIE_WAIT_POLL != LASSIE_WAIT_POLL - 1) continue;
        have_output();
        if (cancel->load()) {
          st = SBG_ERR_INTERRUPTED;
          lassie_gpu_bdf_stop(bdf);
          cudaStreamSynchronize(stream);
          goto done;
        }
      }
    }
    SBG_CUDA_CHECK(cudaMemsetAsync(d_n, 0, sizeof(int) * 2, stream));
    k_count_active<<<blocks(S, TB), TB, 0, stream>>>(S, d_ss, d_n);
    SBG_CUDA_CHECK(cudaMemcpyAsync(counts, d_n, sizeof(int) * 2, cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    active = counts[0];
    n_bdf = bdf ? counts[1] : 0;
    pt->active.store(active + n_bdf);
#ifdef SBG_LASSIE_PROFILE
    if (pt->device < 8) {
      int d_ = pt->device;
      lp_iter[d_][0]++;
      if (active == 0 && lp_at[d_][0] == 0) { lp_at[d_][0] = lp_now() - lp_t0; lp_iter[d_][1] = lp_iter[d_][0]; }
      if (active + n_bdf <= S / 10 && lp_at[d_][1] == 0) { lp_at[d_][1] = lp_now() - lp_t0; lp_iter[d_][2] = lp_iter[d_][0]; }
      if (active + n_bdf <= S / 100 && lp_at[d_][2] == 0) { lp_at[d_][2] = lp_now() - lp_t0; lp_iter[d_][3] = lp_iter[d_][0]; }
    }
#endif
    if (cancel->load()) { st = SBG_ERR_INTERRUPTED; goto done; }
  }
  LP_MARK(pt->device, LP_LOOP);
  SBG_TRY(wait_output());
  LP_MARK(pt->device, LP_OUT);
  SBG_CUDA_CHECK(cudaMemcpyAsync(hs, d_ss, sizeof(simstate) * S, cudaMemcpyDeviceToHost, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(hx, d_x, sizeof(double) * SN, cudaMemcpyDeviceToHost, stream));
  if (row0.joinable()) row0.join();
  /* every row written by the device, row 0 by k_row0 (the part's blocks
   * are contiguous) */
  SBG_CUDA_CHECK(cudaMemcpyAsync(rout, d_out, sizeof(double) * SN * nt, cudaMemcpyDeviceToHost, stream));
  if (h_wbase) {
    /* the conditions' values: where the simulation stopped, else at its
     * start (the host's implicit steps report their own) */
    double *wv = wt->values + (size_t)pt->s0 * wt->n_conds;
    SBG_CUDA_CHECK(cudaMemcpyAsync(wv, d_wvals, sizeof(double) * S * wt->n_conds, cudaMemcpyDeviceToHost, stream));
    SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int s = 0; s < S; s++)
      if (hs[s].flag != FLAG_STOP)
        memcpy(wv + (size_t)s * wt->n_conds, h_wbase + (size_t)s * wt->n_conds, sizeof(double) * wt->n_conds);
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  LP_MARK(pt->device, LP_COPY);

done:
  if (row0.joinable()) row0.join();
  if (stream) cudaStreamSynchronize(stream);
  cudaFree(d_rptr); cudaFree(d_rsp); cudaFree(d_rord); cudaFree(d_hptr); cudaFree(d_hrx);
  cudaFree(d_hval); cudaFree(d_k); cudaFree(d_x); cudaFree(d_ys); cudaFree(d_K); cudaFree(d_v);
  cudaFree(d_out); cudaFree(d_times); cudaFree(d_ss); cudaFree(d_n);
  cudaFree(d_law); cudaFree(d_code); cudaFree(d_cval);
  cudaFree(d_wstart); cudaFree(d_wcode); cudaFree(d_wcval); cudaFree(d_wbase); cudaFree(d_wvals);
  cudaFree(d_wvq); cudaFree(d_wx);
  lassie_gpu_bdf_free(bdf);
  if (stream) cudaStreamDestroy(stream);
  free(f); free(v); free(h_wbase);
  LP_MARK(pt->device, LP_FREE);
  return st;
}

/* Each part's device run by a host thread of its own (launching kernels
 * of several devices from one thread would serialise the launches, which
 * bound small batches), while this, the calling thread, makes the output
 * when r->out is not there (R's allocator and its collections: 0.2-0.4 s
 * for 20,000 matrices in a fresh process, which the devices' work now
 * hides; the threads wait for it only to copy their rows back), then
 * polls every 0.1 s and cancels them all on an interrupt or when one
 * fails.  The threads touch neither R nor ctx. */
sbg_status run_parts_threaded(const sbg_lassie_model *m, const sbg_lassie_params *p, part *parts,
                              int n_parts, simstate *hs, double *hx, sbg_lassie_result *r,
                              sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  std::atomic<int> cancel(0), out_made(r->out != NULL);
  std::mutex mu;
  std::condition_variable cv;
  int n_started = 0, n_done = 0;
  std::thread *th = new (std::nothrow) std::thread[n_parts];
  if (!th) return sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory");
  for (int d = 0; d < n_parts; d++) {
    part *pt = &parts[d];
    try {
      th[d] = std::thread([=, &cancel, &out_made, &mu, &cv, &n_done]() {
        pt->st = run_part(m, p, pt, hs, hx, r, &pt->ctx, &cancel, &out_made);
        pt->finished.store(1);
        std::lock_guard<std::mutex> lk(mu);
        n_done++;
        cv.notify_all();
      });
      n_started++;
    } catch (...) {
      st = sbg_fail(ctx, SBG_ERR_ALLOC, "could not start a host thread for GPU %d", pt->device);
      cancel.store(1);
      break;
    }
  }
  if (st == SBG_OK && !r->out) {
    st = lassie_out_ready(r, ctx);
    if (st == SBG_OK) out_made.store(1, std::memory_order_release);
    else cancel.store(1);
#ifdef SBG_LASSIE_PROFILE
    lp_made = lp_now() - lp_t0;
#endif
  }
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu);
      if (cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return n_done == n_started; })) break;
    }
    for (int d = 0; d < n_started; d++)
      if (parts[d].finished.load() && parts[d].st != SBG_OK) cancel.store(1);
    if (st == SBG_OK && !cancel.load()) {
      int act = 0;
      for (int d = 0; d < n_parts; d++) act += parts[d].active.load();
      st = sbg_poll(ctx, (double)(p->n_sims - act) / p->n_sims);
      if (st != SBG_OK) cancel.store(1);
    }
  }
  for (int d = 0; d < n_started; d++) th[d].join();
  delete[] th;
  if (st != SBG_OK) return st;
  /* the first failure in device order; a part cancelled because another
   * failed says only "interrupted" */
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < n_parts; d++) {
      sbg_status s = parts[d].st;
      if (s == SBG_OK || (pass == 0 && s == SBG_ERR_INTERRUPTED)) continue;
      memcpy(ctx->errbuf, parts[d].ctx.errbuf, sizeof(ctx->errbuf));
      return s;
    }
  return SBG_OK;
}

}  // namespace

extern "C" sbg_status sbg_lassie_gpu(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                     sbg_lassie_result *r, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int N = m->n_species, S = p->n_sims;
  const int n_dev = p->n_devices > 0 ? p->n_devices : 1;
  const int n_parts = n_dev < S ? n_dev : S;
  simstate *hs = NULL;
  double *hx = NULL;
  part *parts = NULL;
  int *cont_sims = NULL;
  sbg_lassie_start *cont_start = NULL;
  int n_cont = 0;

#ifdef SBG_LASSIE_PROFILE
  lp_t0 = lp_now();
  memset(lp_part, 0, sizeof lp_part);
  memset(lp_at, 0, sizeof lp_at);
  memset(lp_iter, 0, sizeof lp_iter);
  lp_made = 0;
#endif
  hs = (simstate *)calloc((size_t)S, sizeof(simstate));
  hx = (double *)malloc(sizeof(double) * (size_t)S * N);
  parts = new (std::nothrow) part[n_parts];
  cont_sims = (int *)malloc(sizeof(int) * (size_t)S);
  cont_start = (sbg_lassie_start *)malloc(sizeof(sbg_lassie_start) * (size_t)S);
  if (!hs || !hx || !parts || !cont_sims || !cont_start) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory");
    goto done;
  }
  /* contiguous blocks, as even as can be, in the order of `device` */
  for (int d = 0; d < n_parts; d++) {
    part *pt = &parts[d];
    pt->device = p->n_devices > 0 ? p->devices[d] : ctx->device;
    pt->s0 = (int)((long long)S * d / n_parts);
    pt->S = (int)((long long)S * (d + 1) / n_parts) - pt->s0;
    pt->ctx = *ctx;
    pt->ctx.device = pt->device;
    pt->ctx.poll = NULL;
    pt->ctx.poll_data = NULL;
    pt->ctx.errbuf[0] = '\0';
    pt->st = SBG_OK;
    pt->active.store(0);
    pt->finished.store(0);
  }
  /* the output is made while the devices work */
  st = run_parts_threaded(m, p, parts, n_parts, hs, hx, r, ctx);
#ifdef SBG_LASSIE_PROFILE
  lp_parts = lp_now() - lp_t0;
#endif
  if (st != SBG_OK) goto done;

  /* stiff simulations: implicit steps on the host, from where the devices
   * left them, in parallel over simulations (each on one thread, as the
   * CPU engine runs them); the first failure in the batch's order */
  for (int s = 0; s < S; s++) {
    simstate *q = &hs[s];
    memcpy(r->stats + (size_t)s * SBG_LASSIE_N_STATS, q->st, sizeof(q->st));
    if (r->watch && (q->flag == FLAG_DONE || q->flag == FLAG_STOP)) {
      /* where it stopped, or the end: the time, the rows written, the state */
      sbg_lassie_watch *wt = r->watch;
      wt->stopped[s] = q->flag == FLAG_STOP;
      wt->t[s] = q->t;
      wt->next[s] = q->next;
      memcpy(wt->x + (size_t)s * N, hx + (size_t)s * N, sizeof(double) * N);
    }
    if (q->flag == FLAG_DONE || q->flag == FLAG_STOP) continue;
    if (q->flag == FLAG_MAXSTEPS || q->flag == FLAG_HMIN || q->flag == FLAG_NEWTON) {
      /* its own failure: the batch goes on; rows not reached are NaN */
      lassie_record_fail(r->status, r->messages, s, q->flag == FLAG_MAXSTEPS ? LASSIE_FAIL_MAXSTEPS :
                         q->flag == FLAG_HMIN ? LASSIE_FAIL_HMIN : LASSIE_FAIL_NEWTON, q->t, p, N);
      double *o = r->out + (size_t)s * p->n_times * N;
      for (int j = 0; j < N; j++)
        for (int row = q->next; row < p->n_times; row++) o[(size_t)j * p->n_times + row] = NAN;
      continue;
    }
    sbg_lassie_start *start = &cont_start[n_cont];
    start->t = q->t; start->h = q->h; start->attempts = q->attempts; start->next = q->next;
    cont_sims[n_cont++] = s;
  }
  if (n_cont > 0)
    st = sbg_lassie_cpu_continue_many(m, p, n_cont, cont_sims, hx, r->out, r->stats, r->status,
                                      r->messages, cont_start, r->watch, ctx);

done:
  free(hs); free(hx); free(cont_sims); free(cont_start);
  delete[] parts;
#ifdef SBG_LASSIE_PROFILE
  lp_end = lp_now() - lp_t0;
  fprintf(stderr, "lassie-prof S %d parts %d: output made %.4f, parts back %.4f, end %.4f\n", S, n_parts, lp_made,
          lp_parts, lp_end);
  for (int d = 0; d < 8; d++) {
    if (lp_part[d][LP_FREE] == 0) continue;
    fprintf(stderr, "lassie-prof   device %d:", d);
    for (int k = 0; k < LP_N; k++) fprintf(stderr, " %s %.4f", lp_names[k], lp_part[d][k]);
    fprintf(stderr, "; rounds %d, explicit done %.4f (round %d), 10%% left %.4f (%d), 1%% left %.4f (%d)\n",
            lp_iter[d][0], lp_at[d][0], lp_iter[d][1], lp_at[d][1], lp_iter[d][2], lp_at[d][2], lp_iter[d][3]);
  }
#endif
  return st;
}
