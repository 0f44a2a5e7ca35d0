/* GPU engine of lassieSimulate(), implicit steps: the variable-step BDF
 * (orders 1-5, modified Newton on I - gamma J) of lassie_cpu.c's
 * integrate(), per simulation on the device.  The sparsity pattern of
 * I - gamma J is the model's, shared by the batch, so its fill-reducing
 * order and the LU's pattern are computed once on the host; each
 * simulation factors its own values.  A team of lanes works on one
 * simulation (a warp for models of LASSIE_TEAM_MIN_N species or more; below,
 * where a warp would idle, one to eight lanes, more as fewer simulations
 * run) with the numerics of lassie_bdf.h,
 * the CPU's own code, so both engines get the same bits.  A simulation
 * whose implicit steps turn calm goes back to the explicit steps
 * (lassie_gpu.cu) on the device; one whose sparse LU needs pivoting goes to
 * the host's (which has the dense LU with pivoting). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.cuh"
#include "lassie.h"
#include "lassie_common.h"
#include "lassie_bdf.h"
#include "lassie_gpu.cuh"
#include "portable_math.h"

/* implicit step attempts per simulation and launch: with explicit steps
 * in the batch (the host polls for interrupts between launches), and
 * unpaced (lassie_gpu_bdf_unpaced(): the host polls while a launch runs,
 * and its simulations look every LASSIE_BDF_STOP_EVERY attempts whether
 * the host asked them to stop) */
#define LASSIE_BDF_ATTEMPTS 64
#define LASSIE_BDF_ATTEMPTS_MAX 4096
#define LASSIE_BDF_STOP_EVERY 64
/* the workspace may take at most this share of the device's free memory */
#define LASSIE_BDF_MEM_SHARE 0.5
/* threads of a block, and the most shared memory (bytes) a block takes: two
 * blocks per SM.  Teams smaller than a warp (models of fewer than
 * LASSIE_TEAM_MIN_N species) take blocks of one warp, which spread a batch
 * over all the multiprocessors: Haugh2b's 20,000 simulations, a thread
 * each, made 157 blocks of 128 threads, a multiprocessor one or two of
 * them, and its implicit launches ran with 4-7% of the warps a
 * multiprocessor holds active (Nsight Compute).  With blocks of 32
 * threads the batch's engine took 0.169-0.197 s on one H200 against
 * 0.197-0.210 s (three comparisons, the same bits), on two about the same
 * (0.118-0.125 s against 0.120-0.126 s). */
#define LASSIE_BDF_BLOCK 128
#define LASSIE_BDF_BLOCK_SMALL 32
/* Teams smaller than a warp are sized launch by launch (team_for()): the
 * most lanes, up to LASSIE_BDF_TEAM_MAX, with which the simulations that
 * may take implicit steps keep at most LASSIE_BDF_TEAM_THREADS threads a
 * multiprocessor.  A lane a simulation gives the most throughput, more
 * lanes the shortest chain of steps: with one team size for the whole
 * batch, Haugh2b's 5,000 simulations took one H200 0.096 s with one lane,
 * 0.077 s with two, 0.079 with four, 0.088 with eight, 0.097 with 16
 * (engine, inst/bench/lassie-teams.R).  Teams sized at
 * each launch (one lane while many run, up to eight as they finish), the
 * engine's seconds on one H200 / two H200s against one lane throughout,
 * two runs each of inst/bench/lassie-teams.R: 5,000 simulations 0.073 /
 * 0.057-0.058 against 0.093-0.098 / 0.090-0.091; 10,000 0.106 /
 * 0.074-0.078 against 0.109-0.110 / 0.101-0.103; 20,000 0.156-0.157 /
 * 0.113-0.115 against 0.157-0.164 / 0.118.  A cap of four lanes
 * gave the same within the runs' spread; caps of 16 or 4 lanes at 160
 * threads a multiprocessor were slower than this one.  The results do
 * not depend on the team: every team runs the CPU's code. */
#ifndef LASSIE_BDF_TEAM_MAX
#define LASSIE_BDF_TEAM_MAX 8
#endif
#ifndef LASSIE_BDF_TEAM_THREADS
#define LASSIE_BDF_TEAM_THREADS 80
#endif
#define LASSIE_BDF_SMEM_MAX (96 * 1024)

/* Per simulation, what integrate() keeps across implicit steps. */
struct bdfstate {
  double ht[LASSIE_BDF_HIST];  /* times of the history */
  double gamma_fact, rho;
  int nh, q, q_steps, err_fails, need_jac, jac_fresh, factored, fn_valid;
  int bdf_steps, calm, jac_steps, head;  /* head: ring index of hist[0] */
};

struct lassie_gpu_bdf {
  sbg_lassie_model dm;   /* device arrays */
  int S, T, nnz_lu;
  int *d_pos, *d_ipos, *d_ptr, *d_col, *d_diag, *d_plan;
  int *d_rate_ent, *d_sum_ent, *d_sum_slot, *d_g_order;   /* the residual's plan (sbg_lassie_res_plan()) */
  lassie_res_plan sum;   /* its counts (the pointers set at each launch) */
  lassie_lu lu;          /* the plan's counts (its pointers set at each launch) */
  bdfstate *d_bs;
  double *d_w;           /* S workspaces of `stride` doubles */
  size_t stride, sum_off, pval_off;   /* offsets in a workspace: the parts' sums, the pass order */
  int smem_vecs;         /* per team in shared memory: 0, 2 (lux, ys), 3 (and v) or 4 (and y) */
  int att;               /* attempts per launch */
  int adapt, n_sm;       /* 1: T chosen at each launch (team_for()); the device's multiprocessors */
  int *h_stop, *d_stop;  /* the host's request to stop a launch (mapped pinned memory) */
};

namespace {

/* Offsets (doubles) in a simulation's workspace: the history (a ring of
 * LASSIE_BDF_HIST states), 8 vectors of N, the rates (M), D (nnz of the
 * reactants), the LU's values, the residual's parts' sums (2 x n_slots)
 * and the LU's values in pass order (nnzLU + LASSIE_LU_PAD, the pad 0). */
enum { W_YPRED = 0, W_Y, W_WT, W_YS, W_C, W_FN, W_LUX, W_R, W_NVEC };

/* doubles of a team's vectors in shared memory (the first nv of lux, ys,
 * v, y) */
__host__ __device__ inline size_t lassie_bdf_smem_len(int N, int M, int nv) {
  return 2 * (size_t)N + (nv > 2 ? (size_t)M : 0) + (nv > 3 ? (size_t)N : 0);
}

inline size_t ws_sum_off(int N, int M, int nnzA, int nnzLU) {
  return (size_t)(LASSIE_BDF_HIST + W_NVEC) * N + M + nnzA + nnzLU;
}

inline size_t ws_pval_off(int N, int M, int nnzA, int nnzLU, int n_slots) {
  return ws_sum_off(N, M, nnzA, nnzLU) + 2 * (size_t)n_slots;
}

inline size_t ws_stride(int N, int M, int nnzA, int nnzLU, int n_slots) {
  size_t n = ws_pval_off(N, M, nnzA, nnzLU, n_slots) + (size_t)nnzLU + LASSIE_LU_PAD;
  return (n + 3) & ~(size_t)3;   /* 32-byte aligned */
}

struct bdfargs {
  sbg_lassie_model m;
  lassie_lu lu;
  lassie_res_plan sum;
  const double *k;
  int k_per_sim, nt, method, S, T, max_att;
  const double *times;
  double rtol, atol, max_steps;
  double *x, *out, *w;
  size_t stride, sum_off, pval_off;
  simstate *ss;
  bdfstate *bs;
  int smem_vecs;
  const volatile int *stop;   /* nonzero: leave the launch */
  dwatch watch;               /* the watched conditions (watch.n 0: none) */
};

/* A simulation's team of lanes, as watch_search() takes its unit. */
struct team_unit {
  const lassie_team *tm;
  __device__ int lane() const { return tm->lane; }
  __device__ int size() const { return tm->size; }
  __device__ void sync() const { lassie_team_sync(tm); }
};

/* The state at tq from the history's npts states, as lassie_cpu.c's
 * step_state() for implicit steps; the team's lanes' species. */
struct bdf_state_at {
  const lassie_team *tm;
  int N, npts;
  const double *ht;
  double *const *hp;
  __device__ void operator()(double tq, double *y) const {
    double lw[LASSIE_BDF_HIST];
    lassie_bdf_interp_weights(tq, ht, npts, lw);
    for (int j = tm->lane; j < N; j += tm->size) y[j] = lassie_bdf_interp(lw, hp, npts, j);
  }
};

/* The attempts of one simulation, by its team: integrate()'s implicit
 * attempts line by line (lassie_cpu.c: implicit_attempt() and the
 * functions it calls), its vector loops split over the lanes, the shared
 * parts in lassie_bdf.h.  As on the CPU, each attempt steps towards the
 * end (never more than twice the last step) and the output rows it passes
 * are interpolated from the history.  Every lane keeps the same scalars:
 * they only depend on values all lanes read after a sync. */
template <bool LAWS>
__global__ void k_bdf(bdfargs a) {
  const int T = a.T;
  const int gt = blockIdx.x * blockDim.x + threadIdx.x;
  const int s = gt / T;
  if (s >= a.S) return;
  lassie_team tm;
  tm.lane = gt % T; tm.size = T;
  tm.mask = T == 32 ? 0xffffffffu : ((1u << T) - 1u) << ((threadIdx.x & 31) & ~(T - 1));
  simstate q = a.ss[s];
  if (q.flag != FLAG_TO_CPU && q.flag != FLAG_BDF) return;
  bdfstate b = a.bs[s];
  /* a mass-action model's instance sees law NULL, so the laws' branches
   * of lassie_bdf.h compile away from it */
  sbg_lassie_model mm = a.m;
  if (!LAWS) mm.law = NULL;
  const sbg_lassie_model *m = &mm;
  const int N = m->n_species, M = m->n_reactions, nnzA = m->r_ptr[M], nt = a.nt;
  const int L = tm.lane;
  const double rtol = a.rtol, atol = a.atol;
  const double tend = q.tend;
  const double *k = a.k + (a.k_per_sim ? (size_t)s * M : 0);
  double *x = a.x + (size_t)s * N, *out = a.out + (size_t)s * nt * N;
  double *w = a.w + (size_t)s * a.stride, *histb = w, *wv = w + (size_t)LASSIE_BDF_HIST * N;
  double *ypred = wv + W_YPRED * N, *y = wv + W_Y * N, *wt = wv + W_WT * N,
         *ys = wv + W_YS * N, *c = wv + W_C * N, *fn = wv + W_FN * N,
         *lux = wv + W_LUX * N, *rb = wv + W_R * N;
  double *v = wv + (size_t)W_NVEC * N, *dv = v + M, *val = dv + nnzA;
  double *ps = w + a.sum_off, *pa = ps + a.sum.n_slots;
  /* the warp's substitutions read the factors in pass order */
  double *pval = T == LASSIE_LU_WARP ? w + a.pval_off : NULL;
  const int *pos = a.lu.pos;
  if (a.smem_vecs > 0) {
    /* the vectors that lanes write and other lanes read within a phase
     * (the substitutions' right-hand side, the elimination's row, the
     * rates and the Newton iterate the rates gather from) live in the
     * block's shared memory, out of L2's way; the Newton norm's squares
     * take the rates' place (dead by then), where they fit */
    extern __shared__ double smem[];
    double *sm = smem + (size_t)(threadIdx.x / T) * lassie_bdf_smem_len(N, M, a.smem_vecs);
    lux = sm; ys = sm + N;
    if (a.smem_vecs > 2) { v = sm + 2 * N; if (M >= N) rb = v; }
    if (a.smem_vecs > 3) y = sm + 2 * N + M;
    for (int j = L; j < N; j += T) lux[j] = 0;
    lassie_team_sync(&tm);
  }
  if (q.flag == FLAG_TO_CPU) {
    /* switched in (as the CPU's integrate() continuing from `start`) */
    q.flag = FLAG_BDF;
    b.nh = 0; b.need_jac = 1; b.jac_fresh = 0; b.factored = 0; b.fn_valid = 0;
    b.gamma_fact = 0; b.rho = 0; b.bdf_steps = 0; b.calm = 0; b.jac_steps = 0;
    b.q = 1; b.q_steps = 0; b.err_fails = 0;
  }
#define HIST(i) (histb + (size_t)((b.head + (i)) % LASSIE_BDF_HIST) * N)
  for (int att = 0; att < a.max_att && q.flag == FLAG_BDF; att++) {
    if (att % LASSIE_BDF_STOP_EVERY == LASSIE_BDF_STOP_EVERY - 1) {
      /* the host asked the launch to stop (an interrupt): lane 0 reads its
       * flag over the bus, the team follows */
      const double stop = lassie_team_bcast(&tm, L == 0 ? (double)*a.stop : 0.0);
      if (stop != 0) break;
    }
    if (++q.attempts > a.max_steps) { q.flag = FLAG_MAXSTEPS; break; }
    double hmin = lassie_hmin(q.t, q.span);
    const double h = q.h;
    int hits;
    double hs = lassie_attempt_size(q.t, h, tend, &hits);
    hs = lassie_bdf_cap(hs, b.ht, b.nh, &hits);
    double *hp[LASSIE_BDF_HIST];   /* hist[i], i steps back */
    for (int i = 0; i < LASSIE_BDF_HIST; i++) hp[i] = HIST(i);
    if (b.nh == 0) {   /* (re)start: order 1 from the current state alone */
      double *h0 = HIST(0);
      for (int j = L; j < N; j += T) h0[j] = x[j];
      b.ht[0] = q.t; b.nh = 1; b.q = 1; b.q_steps = 0; b.err_fails = 0;
    }
    const double tnew = hits ? tend : q.t + hs;
    int qq = b.q < b.nh - 1 ? b.q : b.nh - 1;
    if (qq < 1) qq = 1;
    double gamma, errc;
    if (b.nh == 1) {
      if (!b.fn_valid) {
        lassie_rhs_team(&tm, m, k, x, v, fn);
        q.st[SBG_LASSIE_ST_RHS]++; b.fn_valid = 1;
      }
      gamma = hs; errc = 0.5;
      for (int j = L; j < N; j += T) { ypred[j] = x[j] + hs * fn[j]; c[j] = x[j]; }
    } else {
      double dl[LASSIE_BDF_HIST + 1], lp[LASSIE_BDF_HIST + 1];
      gamma = lassie_bdf_formula(tnew, b.ht, b.nh, qq, dl, lp, &errc);
      lassie_bdf_predict(&tm, hp, lp, dl, qq, gamma, N, ypred, c);
    }
    lassie_team_sync(&tm);
    if (b.need_jac) {
      lassie_dvdx_team(&tm, m, k, x, dv);
      q.st[SBG_LASSIE_ST_JAC]++;
      b.rho = lassie_gershgorin(&tm, m, dv, T == 32 ? a.sum.g_order : NULL);
      b.need_jac = 0; b.jac_fresh = 1; b.factored = 0; b.jac_steps = 0;
    }
    if (!b.factored || fabs(gamma / b.gamma_fact - 1) > 0.3) {
      q.st[SBG_LASSIE_ST_FACTOR]++;
      if (lassie_lu_factor(&tm, m, &a.lu, gamma, dv, val, pval, lux) != 0) {
        /* the host's dense LU with pivoting takes over from here; it
         * counts this attempt again */
        q.st[SBG_LASSIE_ST_FACTOR]--;
        q.attempts -= 1;
        q.flag = FLAG_HOST;
        break;
      }
      b.factored = 1; b.gamma_fact = gamma;
    }
    /* modified Newton on G(y) = y - c - gamma f(y) */
    for (int j = L; j < N; j += T) y[j] = ypred[j];
    lassie_team_sync(&tm);
    double scale = 2.0 / (1.0 + gamma / b.gamma_fact), dn_prev = 0;
    int conv = 0;
    for (int it = 0; it < LASSIE_NEWTON_MAXIT; it++) {
      lassie_newton_residual(&tm, m, k, y, x, c, gamma, rtol, atol, pos, &a.sum, v, wt, ys, ps, pa);
      q.st[SBG_LASSIE_ST_RHS]++; q.st[SBG_LASSIE_ST_NEWTON]++;
      lassie_lu_solve_levels(&tm, &a.lu, N, val, pval, ys);
      lassie_newton_update(&tm, N, scale, pos, ys, wt, y, rb);
      lassie_team_sync(&tm);
      double dn = L == 0 ? lassie_serial_sum(rb, N) : 0;
      if (L == 0) dn = sqrt(dn / N);
      dn = lassie_team_bcast(&tm, dn);
      lassie_team_sync(&tm);   /* lane 0 read the squares before the rates take their place */
      if (!isfinite(dn)) break;
      if (dn <= LASSIE_NEWTON_TOL) { conv = 1; break; }
      if (it > 0) {
        double rate = dn / dn_prev;
        if (rate > 2.0) break;
        if (rate < 1.0 && dn * rate / (1 - rate) <= LASSIE_NEWTON_TOL) { conv = 1; break; }
      }
      dn_prev = dn;
    }
    if (!conv) {
      q.st[SBG_LASSIE_ST_REJECTED]++;
      if (!b.jac_fresh) { b.need_jac = 1; continue; }
      q.h = 0.25 * hs; b.factored = 0;
      if (q.h < hmin) { q.flag = FLAG_NEWTON; break; }
      continue;
    }
    double err = lassie_bdf_error(&tm, x, y, ypred, wt, errc, rtol, atol, N);
    if (!(err <= 1.0)) {
      q.st[SBG_LASSIE_ST_REJECTED]++;
      double fac = lassie_bdf_reject_factor(err, qq);
      if (++b.err_fails >= 2 && qq > 1) { b.q = qq - 1; b.q_steps = 0; }
      q.h = hs * fac;
      if (q.h < hmin) { q.flag = FLAG_HMIN; break; }
      lassie_team_sync(&tm);   /* wt and y are rewritten next attempt */
      continue;
    }
    /* accept (implicit_accept()): the new state becomes hist[0] */
    b.head = (b.head + LASSIE_BDF_HIST - 1) % LASSIE_BDF_HIST;
    for (int i = LASSIE_BDF_HIST - 1; i > 0; i--) b.ht[i] = b.ht[i - 1];
    b.ht[0] = tnew;
    for (int i = 0; i < LASSIE_BDF_HIST; i++) hp[i] = HIST(i);
    for (int j = L; j < N; j += T) { hp[0][j] = y[j]; x[j] = y[j]; }
    if (b.nh < LASSIE_BDF_HIST) b.nh++;
    lassie_team_sync(&tm);
    int stopped = 0;
    double t_stop = tnew;
    {
      /* emit_rows(): rows inside the step from the history, a row at tnew
       * the new state itself; with watched conditions, a change within
       * the step stops the simulation there instead, its rows before it */
      const int npts = lassie_bdf_interp_points(qq, b.nh);
      double rows_to = tnew;
      if (a.watch.n > 0) {
        double tstop;
        const bdf_state_at at = {&tm, N, npts, b.ht, hp};
        stopped = watch_search(team_unit{&tm}, a.watch, s, N, q.t, tnew, y, at, &tstop);
        if (stopped) rows_to = t_stop = tstop;
      }
      for (; q.next < nt && a.times[q.next] < rows_to; q.next++) {
        double lw[LASSIE_BDF_HIST];
        lassie_bdf_interp_weights(a.times[q.next], b.ht, npts, lw);
        for (int j = L; j < N; j += T) out[(size_t)j * nt + q.next] = lassie_bdf_interp(lw, hp, npts, j);
      }
      if (!stopped && q.next < nt && a.times[q.next] == tnew) {
        for (int j = L; j < N; j += T) out[(size_t)j * nt + q.next] = y[j];
        q.next++;
      }
      if (stopped) {
        /* the simulation ends at the change, in the state there; the
         * step's bookkeeping below goes on as the CPU's does */
        const double *wx = a.watch.wx + (size_t)s * N;
        for (int j = L; j < N; j += T) x[j] = wx[j];
      }
    }
    b.fn_valid = 0; b.jac_fresh = 0; b.err_fails = 0;
    q.t = tnew;
    q.st[SBG_LASSIE_ST_STEPS]++; q.st[SBG_LASSIE_ST_IMPLICIT]++;
    b.q = qq; b.q_steps++;
    double fac = lassie_bdf_accept_factor(&tm, hp, b.ht, b.nh, &b.q, &b.q_steps, wt, N, err, qq);
    double hn = hs * fac;
    q.h = (hits && hn < h) ? h : hn;
    if (++b.jac_steps >= LASSIE_JAC_REUSE) b.need_jac = 1;
    b.bdf_steps++;
    lassie_team_sync(&tm);   /* wt is rewritten next attempt */
    int back = 0;
    if (a.method == SBG_LASSIE_AUTO) {
      b.calm = (b.bdf_steps >= LASSIE_BDF_MIN_STAY && hn * b.rho < LASSIE_CALM_HRHO) ? b.calm + 1 : 0;
      if (b.calm >= LASSIE_CALM_STEPS) {
        /* to_explicit(): DP5 evaluates f(x) afresh (K's stage 0 is stale) */
        q.st[SBG_LASSIE_ST_SWITCHES]++;
        q.rej = 0; b.calm = 0; b.nh = 0; q.stiff_count = 0; q.calm_rk = 0; q.prev_h = 0;
        q.fsal = 0; q.accepted = 0; q.row0 = q.row1 = q.next; q.t0 = q.t;
        back = 1;
      }
    }
    if (stopped) { q.t = t_stop; q.flag = FLAG_STOP; break; }
    if (q.next >= nt || q.t >= q.tend) { q.flag = FLAG_DONE; break; }
    if (back) {
      /* back to the explicit steps (lassie_gpu.cu), which go on from the
       * top of the CPU's step loop */
      if (++q.attempts > a.max_steps) { q.flag = FLAG_MAXSTEPS; break; }
      q.flag = FLAG_RUN; q.active = 1;
      lassie_next_step(&q, a.times, nt, 1);
      break;
    }
  }
#undef HIST
  lassie_team_sync(&tm);
  if (L == 0) { a.ss[s] = q; a.bs[s] = b; }
}

}  // namespace

int lassie_gpu_bdf_wanted(const sbg_lassie_model *m, const sbg_lassie_params *p, int S, int threads) {
  /* p->device_bdf (tests, inst/bench/lassie-bdf.R): 0 keeps every
   * simulation's implicit steps on the host, 1 puts them on the device
   * whatever the model's and the batch's size */
  if (p->device_bdf == 0 || p->device_bdf == 1) return p->device_bdf;
  return sbg_lassie_device_bdf_pays(m->n_species, S, threads);
}

void lassie_gpu_bdf_unpaced(lassie_gpu_bdf *b) {
  b->att = LASSIE_BDF_ATTEMPTS_MAX;
}

void lassie_gpu_bdf_stop(lassie_gpu_bdf *b) {
  *(volatile int *)b->h_stop = 1;
}

void lassie_gpu_bdf_free(lassie_gpu_bdf *b) {
  if (!b) return;
  if (b->h_stop) cudaFreeHost(b->h_stop);
  cudaFree(b->d_pos); cudaFree(b->d_ipos); cudaFree(b->d_ptr); cudaFree(b->d_col);
  cudaFree(b->d_diag); cudaFree(b->d_plan); cudaFree(b->d_rate_ent); cudaFree(b->d_sum_ent);
  cudaFree(b->d_sum_slot); cudaFree(b->d_g_order);
  cudaFree(b->d_bs); cudaFree(b->d_w);
  free(b);
}

sbg_status lassie_gpu_bdf_setup(const sbg_lassie_model *m, const sbg_lassie_model *dm,
                                const sbg_lassie_params *p, int S, cudaStream_t stream,
                                lassie_gpu_bdf **out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int N = m->n_species, M = m->n_reactions;
  int *pos = NULL, *ipos = NULL, *ptr = NULL, *col = NULL, *diag = NULL, *plan = NULL;
  int *rate_ent = NULL, *sum_ent = NULL, *sum_slot = NULL, *g_order = NULL;
  size_t n_plan = 0;
  lassie_lu lu;
  size_t nnz = 0, free_b = 0, total_b = 0;
  lassie_gpu_bdf *b = NULL;
  *out = NULL;
  pos = (int *)malloc(sizeof(int) * (size_t)N);
  ipos = (int *)malloc(sizeof(int) * (size_t)N);
  b = (lassie_gpu_bdf *)calloc(1, sizeof(lassie_gpu_bdf));
  if (!pos || !ipos || !b ||
      sbg_lassie_res_plan(m, &rate_ent, &sum_ent, &b->sum.len, &sum_slot, &b->sum.n_slots, &g_order) != 0 ||
      sbg_lassie_lu_pattern(m, pos, ipos, &ptr, &col, &diag, &nnz) != 0) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory");
    goto done;
  }
  memset(&lu, 0, sizeof(lu));
  lu.pos = pos; lu.ipos = ipos; lu.ptr = ptr; lu.col = col; lu.diag = diag;
  if (sbg_lassie_lu_plan(m, &lu, &plan) != 0) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory");
    goto done;
  }
  /* the plan's passes pack a row into 21 bits (the host keeps larger ones) */
  if (N >= (1 << 21)) goto done;
  b->dm = *dm; b->S = S; b->nnz_lu = (int)nnz; b->lu = lu;
  b->att = LASSIE_BDF_ATTEMPTS;
  n_plan = lassie_lu_plan_len(&lu, N, nnz);
  b->T = N >= LASSIE_TEAM_MIN_N ? 32 : 1;
  b->adapt = b->T < 32 && p->bdf_team <= 0;
  if (p->bdf_team > 0) b->T = p->bdf_team;   /* tests, measurements */
  {
    int dev = 0;
    SBG_CUDA_CHECK(cudaGetDevice(&dev));
    SBG_CUDA_CHECK(cudaDeviceGetAttribute(&b->n_sm, cudaDevAttrMultiProcessorCount, dev));
  }
  b->stride = ws_stride(N, M, m->r_ptr[M], (int)nnz, b->sum.n_slots);
  b->sum_off = ws_sum_off(N, M, m->r_ptr[M], (int)nnz);
  b->pval_off = ws_pval_off(N, M, m->r_ptr[M], (int)nnz, b->sum.n_slots);
  /* shared memory for a block's teams: as many of lux, ys, the rates and
   * y as fit where two blocks (the registers' limit) still fit an SM;
   * each vector moved there made Chen's batch faster (inst/bench/lassie-bdf.R;
   * the option sysbioGPU.lassieBdfSharedVectors caps the tier) */
  b->smem_vecs = 0;
  if (b->T == 32) {
    const size_t teams = LASSIE_BDF_BLOCK / 32;
    const int most = p->bdf_smem >= 0 ? p->bdf_smem : 4;   /* at most this tier (tests) */
    for (int nv = 4; nv >= 2 && !b->smem_vecs; nv--)
      if (nv <= most && sizeof(double) * teams * lassie_bdf_smem_len(N, M, nv) <= LASSIE_BDF_SMEM_MAX)
        b->smem_vecs = nv;
  }
  SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if ((double)b->stride * sizeof(double) * S > LASSIE_BDF_MEM_SHARE * (double)free_b) goto done;
  SBG_TRY(sbg_device_alloc((void **)&b->d_pos, sizeof(int) * N, "the LU's order", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_ipos, sizeof(int) * N, "the LU's order", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_ptr, sizeof(int) * (N + 1), "the LU's pattern", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_col, sizeof(int) * (nnz ? nnz : 1), "the LU's pattern", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_diag, sizeof(int) * N, "the LU's pattern", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_plan, sizeof(int) * n_plan, "the LU's plan", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_sum_ent,
                           sizeof(int) * LASSIE_LU_ENTRY * ((size_t)b->sum.len * LASSIE_SUM_STREAMS + 1),
                           "the species sums' plan", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_sum_slot, sizeof(int) * ((size_t)N + 1), "the species sums' plan", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_rate_ent, sizeof(int) * LASSIE_LU_ENTRY * ((size_t)M + 1),
                           "the rates' plan", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_g_order, sizeof(int) * ((size_t)N + 1), "the species' order", ctx));
  SBG_TRY(sbg_device_alloc((void **)&b->d_bs, sizeof(bdfstate) * S, "the BDF states", ctx));
  if (cudaHostAlloc((void **)&b->h_stop, sizeof(int), cudaHostAllocMapped) != cudaSuccess) {
    b->h_stop = NULL;
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of host memory for the implicit steps' stop flag");
    goto done;
  }
  *b->h_stop = 0;
  SBG_CUDA_CHECK(cudaHostGetDevicePointer((void **)&b->d_stop, b->h_stop, 0));
  SBG_TRY(sbg_device_alloc((void **)&b->d_w, sizeof(double) * b->stride * S, "the BDF workspaces", ctx));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_pos, pos, sizeof(int) * N, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_ipos, ipos, sizeof(int) * N, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_ptr, ptr, sizeof(int) * (N + 1), cudaMemcpyHostToDevice, stream));
  if (nnz) SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_col, col, sizeof(int) * nnz, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_diag, diag, sizeof(int) * N, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_plan, plan, sizeof(int) * n_plan, cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_sum_ent, sum_ent,
                                 sizeof(int) * LASSIE_LU_ENTRY * ((size_t)b->sum.len * LASSIE_SUM_STREAMS + 1),
                                 cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_sum_slot, sum_slot, sizeof(int) * ((size_t)N + 1),
                                 cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_rate_ent, rate_ent, sizeof(int) * LASSIE_LU_ENTRY * ((size_t)M + 1),
                                 cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemcpyAsync(b->d_g_order, g_order, sizeof(int) * ((size_t)N + 1),
                                 cudaMemcpyHostToDevice, stream));
  SBG_CUDA_CHECK(cudaMemsetAsync(b->d_bs, 0, sizeof(bdfstate) * S, stream));
  /* the LU's scatter row must start zeroed (it is left zeroed) */
  SBG_CUDA_CHECK(cudaMemsetAsync(b->d_w, 0, sizeof(double) * b->stride * S, stream));
  /* the host arrays are freed below: wait for the copies */
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
  *out = b;
  b = NULL;
done:
  lassie_gpu_bdf_free(b);
  free(pos); free(ipos); free(ptr); free(col); free(diag); free(plan); free(rate_ent); free(sum_ent); free(sum_slot); free(g_order);
  return st;
}

/* Lanes a simulation for a launch in which at most n simulations take
 * implicit steps, on n_sm multiprocessors (see LASSIE_BDF_TEAM_THREADS). */
static int team_for(int n, int n_sm) {
  int T = 1;
  while (T < LASSIE_BDF_TEAM_MAX && (long long)n * T * 2 <= (long long)LASSIE_BDF_TEAM_THREADS * n_sm) T *= 2;
  return T;
}

sbg_status lassie_gpu_bdf_launch(lassie_gpu_bdf *b, const sbg_lassie_params *p,
                                 const double *d_k, const double *d_times, double *d_x,
                                 double *d_out, simstate *d_ss, const dwatch &w, int n_run,
                                 cudaStream_t stream, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  if (b->adapt) b->T = team_for(n_run, b->n_sm);
#ifdef SBG_LASSIE_PROFILE
  fprintf(stderr, "lassie-prof implicit launch: %d simulations may run, %d lane(s) each\n", n_run, b->T);
#endif
  bdfargs a;
  a.m = b->dm;
  a.lu = b->lu;
  a.lu.pos = b->d_pos; a.lu.ipos = b->d_ipos; a.lu.ptr = b->d_ptr; a.lu.col = b->d_col;
  a.lu.diag = b->d_diag;
  lassie_lu_plan_view(&a.lu, b->d_plan, b->dm.n_species, (size_t)b->nnz_lu);
  a.sum = b->sum;
  a.sum.rate_ent = b->d_rate_ent; a.sum.ent = b->d_sum_ent; a.sum.slot_ptr = b->d_sum_slot;
  a.sum.g_order = b->d_g_order;
  a.k = d_k; a.k_per_sim = p->rates_per_sim; a.nt = p->n_times; a.method = p->method;
  a.S = b->S; a.T = b->T; a.max_att = b->att;
  a.times = d_times; a.rtol = p->rtol; a.atol = p->atol; a.max_steps = p->max_steps;
  a.x = d_x; a.out = d_out; a.w = b->d_w; a.stride = b->stride; a.sum_off = b->sum_off; a.pval_off = b->pval_off;
  a.ss = d_ss; a.bs = b->d_bs;
  a.smem_vecs = b->smem_vecs;
  a.stop = b->d_stop;
  a.watch = w;
  const int TB = b->T == 32 ? LASSIE_BDF_BLOCK : LASSIE_BDF_BLOCK_SMALL;
  size_t threads = (size_t)b->S * b->T;
  size_t smem = 0;
  auto kb = b->dm.law ? k_bdf<true> : k_bdf<false>;
  if (b->smem_vecs > 0) {
    smem = sizeof(double) * (size_t)(TB / b->T) *
           lassie_bdf_smem_len(b->dm.n_species, b->dm.n_reactions, b->smem_vecs);
    SBG_CUDA_CHECK(cudaFuncSetAttribute(kb, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  }
  kb<<<(unsigned)((threads + TB - 1) / TB), TB, smem, stream>>>(a);
  SBG_CUDA_CHECK(cudaGetLastError());
done:
  return st;
}
