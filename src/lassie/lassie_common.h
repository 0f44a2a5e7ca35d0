/* Pieces of lassieSimulate()'s solver shared by the CPU and GPU engines:
 * mass-action rates, the RKF45 (Fehlberg) step, the constants of the
 * stiffness switch and Newton iteration, and the failure messages. */
#ifndef SBG_LASSIE_COMMON_H
#define SBG_LASSIE_COMMON_H

#include <math.h>
#include <stdio.h>
#include "lassie.h"

#ifdef __CUDACC__
#define LASSIE_HD __host__ __device__
#else
#define LASSIE_HD
#endif

/* Stiffness seen by the explicit steps: h rho(J), rho estimated after each
 * accepted step as |f(x_new) - f(stage 5)| / |x_new - stage 5| (both at the
 * end of the step, so their difference lies along the fast modes), above LASSIE_STIFF_HRHO (RKF45 is stable to about 3 on
 * the negative real axis) on LASSIE_STIFF_COUNT accepted steps, a run of
 * LASSIE_NONSTIFF_RESET steps below it clearing the count (hysteresis). */
#define LASSIE_STIFF_HRHO 3.0
#define LASSIE_STIFF_COUNT 15
#define LASSIE_NONSTIFF_RESET 6
/* Switch to BDF when this many of the last 16 RKF attempts were rejected,
 * or when the step collapses below this fraction of the time span. */
#define LASSIE_STIFF_REJECTIONS 6
#define LASSIE_STIFF_COLLAPSE 1e-7
/* Back to RKF45 after at least this many BDF steps and then this many in a
 * row where h * rho(J) (Gershgorin) < LASSIE_CALM_HRHO: well inside the
 * explicit stability region (about 3 for RKF45). */
#define LASSIE_BDF_MIN_STAY 20
#define LASSIE_CALM_STEPS 10
#define LASSIE_CALM_HRHO 1.0
#define LASSIE_NEWTON_MAXIT 5
#define LASSIE_NEWTON_TOL 0.03
#define LASSIE_JAC_REUSE 20
/* implicit steps: weights never below this many ulps of a residual's terms */
#define LASSIE_ROUNDOFF 100.0

enum { LASSIE_OK = 0, LASSIE_FAIL_MAXSTEPS, LASSIE_FAIL_HMIN, LASSIE_FAIL_NEWTON,
       LASSIE_FAIL_DENSE, LASSIE_FAIL_ALLOC, LASSIE_FAIL_INTERRUPT };

static LASSIE_HD inline double lassie_ipow(double x, int a) {
  double r = x;
  for (int i = 1; i < a; i++) r *= x;
  return r;
}

static LASSIE_HD inline double lassie_rate(const int *r_ptr, const int *r_sp,
                                           const int *r_ord, const double *k,
                                           const double *x, int i) {
  double r = k[i];
  for (int e = r_ptr[i]; e < r_ptr[i + 1]; e++) r *= lassie_ipow(x[r_sp[e]], r_ord[e]);
  return r;
}

/* max that keeps a NaN once seen (a NaN error must reject the step) */
static LASSIE_HD inline double lassie_maxnan(double acc, double r) {
  return (r > acc || r != r) ? r : acc;
}

static inline int lassie_popcount16(unsigned v) {
  v &= 0xFFFFu;
  int c = 0;
  while (v) { c += v & 1u; v >>= 1; }
  return c;
}

/* Fehlberg's tableau.  The step propagates the 5th-order solution (local
 * extrapolation); the difference to the 4th-order one is the error. */
#define RKF_A21 (1.0 / 4.0)
#define RKF_A31 (3.0 / 32.0)
#define RKF_A32 (9.0 / 32.0)
#define RKF_A41 (1932.0 / 2197.0)
#define RKF_A42 (-7200.0 / 2197.0)
#define RKF_A43 (7296.0 / 2197.0)
#define RKF_A51 (439.0 / 216.0)
#define RKF_A52 (-8.0)
#define RKF_A53 (3680.0 / 513.0)
#define RKF_A54 (-845.0 / 4104.0)
#define RKF_A61 (-8.0 / 27.0)
#define RKF_A62 (2.0)
#define RKF_A63 (-3544.0 / 2565.0)
#define RKF_A64 (1859.0 / 4104.0)
#define RKF_A65 (-11.0 / 40.0)
#define RKF_B1 (16.0 / 135.0)
#define RKF_B3 (6656.0 / 12825.0)
#define RKF_B4 (28561.0 / 56430.0)
#define RKF_B5 (-9.0 / 50.0)
#define RKF_B6 (2.0 / 55.0)
#define RKF_E1 (1.0 / 360.0)
#define RKF_E3 (-128.0 / 4275.0)
#define RKF_E4 (-2197.0 / 75240.0)
#define RKF_E5 (1.0 / 50.0)
#define RKF_E6 (2.0 / 55.0)

typedef void (*lassie_rhs_fn)(const sbg_lassie_model *, const double *,
                              const double *, double *, double *);

/* One RKF45 step of size h from x into xn (K[0] = f(x) given, stage 5's
 * input left in ys5 for the stiffness estimate); returns the scaled error
 * max_j |err_j| / (atol + rtol max(|x_j|, |xn_j|)) (NaN/Inf when the stages
 * blew up). */
static inline double lassie_rkf45_step(const sbg_lassie_model *m, const double *k,
                                       const double *x, double h, double **K,
                                       double *ys, double *ys5, double *xn, double *v,
                                       double rtol, double atol, lassie_rhs_fn f) {
  const int N = m->n_species;
  /* K[0] = f(x) is already there */
  for (int j = 0; j < N; j++) ys[j] = x[j] + h * RKF_A21 * K[0][j];
  f(m, k, ys, v, K[1]);
  for (int j = 0; j < N; j++) ys[j] = x[j] + h * (RKF_A31 * K[0][j] + RKF_A32 * K[1][j]);
  f(m, k, ys, v, K[2]);
  for (int j = 0; j < N; j++)
    ys[j] = x[j] + h * (RKF_A41 * K[0][j] + RKF_A42 * K[1][j] + RKF_A43 * K[2][j]);
  f(m, k, ys, v, K[3]);
  for (int j = 0; j < N; j++)
    ys5[j] = x[j] + h * (RKF_A51 * K[0][j] + RKF_A52 * K[1][j] + RKF_A53 * K[2][j] +
                         RKF_A54 * K[3][j]);
  f(m, k, ys5, v, K[4]);
  for (int j = 0; j < N; j++)
    ys[j] = x[j] + h * (RKF_A61 * K[0][j] + RKF_A62 * K[1][j] + RKF_A63 * K[2][j] +
                        RKF_A64 * K[3][j] + RKF_A65 * K[4][j]);
  f(m, k, ys, v, K[5]);
  double err = 0;
  for (int j = 0; j < N; j++) {
    xn[j] = x[j] + h * (RKF_B1 * K[0][j] + RKF_B3 * K[2][j] + RKF_B4 * K[3][j] +
                        RKF_B5 * K[4][j] + RKF_B6 * K[5][j]);
    double e = h * (RKF_E1 * K[0][j] + RKF_E3 * K[2][j] + RKF_E4 * K[3][j] +
                    RKF_E5 * K[4][j] + RKF_E6 * K[5][j]);
    double r = fabs(e) / (atol + rtol * fmax(fabs(x[j]), fabs(xn[j])));
    err = lassie_maxnan(err, r);
  }
  return err;
}

#ifdef __cplusplus
extern "C" {
#endif
/* Where the GPU engine hands a simulation over to the CPU's implicit steps. */
typedef struct sbg_lassie_start {
  double t, h, attempts;
  int next;
} sbg_lassie_start;
/* The first step both engines take (lassie_cpu.c); f, v: scratch N, M. */
double sbg_lassie_initial_step(const sbg_lassie_model *m, const sbg_lassie_params *p,
                               const double *k, const double *x, double *f, double *v);
/* Continues simulation `sim` from `start` (state x, out rows before
 * start->next written, stats so far) with implicit steps, on the CPU. */
/* The same for the n simulations sims[] (ascending), states x (N per
 * simulation of the batch), from starts[i], in parallel on ctx->n_threads;
 * out and stats are the whole batch's. */
sbg_status sbg_lassie_cpu_continue_many(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                        int n, const int *sims, const double *x, double *out,
                                        double *stats, const sbg_lassie_start *starts,
                                        sbg_ctx *ctx);
sbg_status sbg_lassie_cpu_continue(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                   int sim, const double *x, double *out, double *stats,
                                   const sbg_lassie_start *start, sbg_ctx *ctx);
#ifdef __cplusplus
}
#endif

/* The message of a failed simulation (sim of the batch p, 0-based),
 * numbered in the whole batch when p is an R worker's block of one. */
static inline sbg_status lassie_fail(sbg_ctx *ctx, sbg_status st, int what, double t,
                                     int sim, const sbg_lassie_params *p, int N) {
  char where[64] = "";
  const double max_steps = p->max_steps;
  int total = p->sim_total > p->n_sims ? p->sim_total : p->n_sims;
  if (total > 1) snprintf(where, sizeof(where), " in simulation %d", sim + p->sim_base + 1);
  switch (what) {
    case LASSIE_FAIL_MAXSTEPS:
      return sbg_fail(ctx, st, "`maxSteps` (%.0f) exhausted at t = %.10g%s", max_steps, t, where);
    case LASSIE_FAIL_HMIN:
      return sbg_fail(ctx, st, "step size underflow at t = %.10g%s: the model may be too stiff for method = \"rkf45\" or its solution blows up", t, where);
    case LASSIE_FAIL_NEWTON:
      return sbg_fail(ctx, st, "Newton iterations fail to converge at t = %.10g%s even with the smallest step", t, where);
    case LASSIE_FAIL_DENSE:
      return sbg_fail(ctx, st, "the model needs implicit steps at t = %.10g%s, and this version orders their sparse LU with a %d x %d bitset, above its limit of 16384 species", t, where, N, N);
    case LASSIE_FAIL_ALLOC:
      return sbg_fail(ctx, st, "out of memory for the %d x %d iteration matrix of the implicit steps", N, N);
    default:
      return st;   /* interrupted: the message is already in ctx */
  }
}

#endif /* SBG_LASSIE_COMMON_H */
