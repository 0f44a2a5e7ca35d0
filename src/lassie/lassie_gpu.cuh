/* What the GPU engine's explicit steps (lassie_gpu.cu) and its implicit
 * steps (lassie_gpu_bdf.cu) share: the per-simulation step control on the
 * device, and the device BDF's entry points. */
#ifndef SBG_LASSIE_GPU_CUH
#define SBG_LASSIE_GPU_CUH

#include <cuda_runtime.h>
#include "lassie.h"
#include "lassie_common.h"
#include "status.h"

/* Per-simulation step control, on the device. */
struct simstate {
  double t, h, hs, attempts, prev_h;
  double st[SBG_LASSIE_N_STATS];
  unsigned rej;
  int stiff_count, calm_rk;
  int next, hits, active, flag;  /* flag: LASSIE_OK running/done, else why it stopped */
  int accepted;
  int fsal;                      /* stage 0 (f(x)) is already in K: DP5 after a step */
  int row0, row1;                /* output rows the accepted step fills */
  double t0;                     /* start of the accepted step */
  double tend, span;             /* the run's end and length (lassie_window()) */
};
/* The next explicit attempt's size towards the target (the next output
 * time with RKF45, else the end: `dense`), as lassie_cpu.c's integrate()
 * chooses it. */
static __host__ __device__ inline void lassie_next_step(simstate *s, const double *times, int nt,
                                                         int dense) {
  (void)nt;
  double target = dense ? s->tend : times[s->next];
  s->hs = lassie_attempt_size(s->t, s->h, target, &s->hits);
}

/* The watched conditions (sbg_lassie_watch) on the device, n 0 for none:
 * their programs, and per simulation (n or N apart) base, their values at
 * the run's start; vals, their values where a change was found; vq,
 * scratch values; wx, scratch for a state inside a step. */
struct dwatch {
  int n;
  const int *start, *code;
  const double *cval;
  double *base, *vals, *vq, *wx;
};

/* lassie_cpu.c's watch_step() on the device, for simulation s after an
 * accepted step from t0 to tnew (state y at its end), by a unit of threads:
 * a block of the explicit steps or a team of the implicit ones (Unit: its
 * lane, size and sync()).  state_at(tq, wx) writes the unit's lanes' part
 * of the step's interpolant at tq.  Whether a watched condition differs
 * within the step (at the first of the probes and the end where one
 * does); if so, the first time it differs (the end of a bisection down to
 * adjacent doubles) into *tstop, the state there into w.wx and the
 * conditions' values into w.vals.  Every lane evaluates the conditions
 * (the same values); lane 0 keeps them. */
template <class Unit, class StateAt>
__device__ inline int watch_search(const Unit &u, const dwatch &w, int s, int N, double t0, double tnew,
                                   const double *y, const StateAt &state_at, double *tstop) {
  double *wx = w.wx + (size_t)s * N, *sv = w.vals + (size_t)s * w.n, *vq = w.vq + (size_t)s * w.n;
  const double *base = w.base + (size_t)s * w.n;
  /* the conditions at xs into v: whether one changed from base */
  auto changed = [&](const double *xs, double *v) {
    int c = 0;
    for (int i = 0; i < w.n; i++) {
      const double val = lassie_law_eval(w.code + w.start[i], w.cval, xs, -1, 0);
      if (u.lane() == 0) v[i] = val;
      c |= (val != 0) != (base[i] != 0);
    }
    u.sync();   /* before the state or the values are written again */
    return c;
  };
  auto interp = [&](double tq) {
    state_at(tq, wx);
    u.sync();
  };
  double a = t0, b = tnew;
  int found = 0, at_end = 0;
  for (int i = 1; i < LASSIE_WATCH_PROBES && !found; i++) {
    const double tq = lassie_watch_probe(t0, tnew, i);
    if (!(tq > a && tq < tnew)) continue;
    interp(tq);
    if (changed(wx, sv)) { b = tq; found = 1; } else a = tq;
  }
  if (!found) {
    if (!changed(y, sv)) return 0;
    at_end = 1;
  }
  for (int it = 0; it < 200; it++) {
    const double mid = lassie_watch_mid(a, b);
    if (!(mid > a && mid < b)) break;
    interp(mid);
    if (changed(wx, vq)) {
      b = mid; at_end = 0;
      if (u.lane() == 0) for (int i = 0; i < w.n; i++) sv[i] = vq[i];
      u.sync();
    } else {
      a = mid;
    }
  }
  /* the state at the change: the step's end, or the interpolant there */
  if (at_end) {
    for (int j = u.lane(); j < N; j += u.size()) wx[j] = y[j];
    u.sync();
  } else {
    interp(b);
  }
  *tstop = b;
  return 1;
}

/* FLAG_TO_CPU: turned stiff (the device's implicit steps take it, or the
 * host's when the device has none for this model); FLAG_BDF: in the
 * device's implicit steps; FLAG_HOST: handed to the host's implicit steps
 * (the sparse LU needs pivoting, which only the host has); FLAG_STOP: a
 * watched condition changed (sbg_lassie_watch), the simulation stopped
 * there. */
enum { FLAG_RUN = 0, FLAG_DONE = 1, FLAG_TO_CPU = 2, FLAG_MAXSTEPS = 3, FLAG_HMIN = 4,
       FLAG_NEWTON = 5, FLAG_BDF = 6, FLAG_HOST = 7, FLAG_STOP = 8 };

/* The device's implicit steps for one part of a batch (S simulations). */
struct lassie_gpu_bdf;

/* Whether the implicit steps of a part of S simulations of model m run on
 * the device rather than on the host's `threads`
 * (sbg_lassie_device_bdf_pays; p->device_bdf 0 or 1 forces host or
 * device). */
int lassie_gpu_bdf_wanted(const sbg_lassie_model *m, const sbg_lassie_params *p, int S, int threads);
/* The symbolic LU on the host, the pattern and the workspace of S
 * simulations on the device; dm holds the model's device arrays.  *out is
 * NULL (and SBG_OK returned) when the workspace does not fit: the host
 * takes the implicit steps then. */
sbg_status lassie_gpu_bdf_setup(const sbg_lassie_model *m, const sbg_lassie_model *dm,
                                const sbg_lassie_params *p, int S, cudaStream_t stream,
                                lassie_gpu_bdf **out, sbg_ctx *ctx);
/* Up to b's number of implicit step attempts of every simulation whose
 * flag is FLAG_TO_CPU or FLAG_BDF; d_k the rates (M per simulation when
 * p->rates_per_sim), d_x the states, d_out the output blocks; n_run: at
 * most this many simulations may take implicit steps (what sizes the
 * teams of small models). */
sbg_status lassie_gpu_bdf_launch(lassie_gpu_bdf *b, const sbg_lassie_params *p,
                                 const double *d_k, const double *d_times, double *d_x,
                                 double *d_out, simstate *d_ss, const dwatch &w, int n_run,
                                 cudaStream_t stream, sbg_ctx *ctx);
/* Launches of LASSIE_BDF_ATTEMPTS_MAX attempts, not paced: the host polls
 * while one runs and stops it with lassie_gpu_bdf_stop(). */
void lassie_gpu_bdf_unpaced(lassie_gpu_bdf *b);
/* Asks b's running launch to stop (its simulations keep their state). */
void lassie_gpu_bdf_stop(lassie_gpu_bdf *b);
void lassie_gpu_bdf_free(lassie_gpu_bdf *b);

#endif /* SBG_LASSIE_GPU_CUH */
