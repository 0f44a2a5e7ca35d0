/* Pieces of lassieSimulate()'s solver shared by the CPU and GPU engines:
 * mass-action rates, the explicit steps per species (RKF45 and
 * Dormand-Prince 5(4) with its continuous extension), the constants of the
 * stiffness switch and Newton iteration, and the failure messages. */
#ifndef SBG_LASSIE_COMMON_H
#define SBG_LASSIE_COMMON_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include "lassie.h"

#ifdef __CUDACC__
#define LASSIE_HD __host__ __device__
#else
#define LASSIE_HD
#endif

/* Threads per block of the GPU engine's per-simulation kernels.  The CPU
 * sums the stiffness estimate in the block's order (strided partial sums,
 * then a tree), so that both engines switch at the same step. */
#define LASSIE_BLOCK 256
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
/* the GPU's implicit steps: a warp per simulation for models of this many
 * species or more, one lane below (where a warp would idle) */
#define LASSIE_TEAM_MIN_N 32

enum { LASSIE_OK = 0, LASSIE_FAIL_MAXSTEPS = SBG_LASSIE_FAIL_MAXSTEPS,
       LASSIE_FAIL_HMIN = SBG_LASSIE_FAIL_HMIN, LASSIE_FAIL_NEWTON = SBG_LASSIE_FAIL_NEWTON,
       LASSIE_FAIL_DENSE = SBG_LASSIE_FAIL_TOO_LARGE, LASSIE_FAIL_ALLOC, LASSIE_FAIL_INTERRUPT };

/* r->out made (sbg_lassie_result's make_out) unless it is there. */
static inline sbg_status lassie_out_ready(sbg_lassie_result *r, sbg_ctx *ctx) {
  if (r->out) return SBG_OK;
  sbg_status st = r->make_out ? r->make_out(r->make_data, &r->out) : SBG_ERR_ALLOC;
  if (st == SBG_OK && r->out) return SBG_OK;
  r->out = NULL;
  if (st == SBG_ERR_INTERRUPTED) return sbg_fail(ctx, st, "interrupted by the user");
  return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the output");
}

/* The smallest step an attempt at t may take in a run over `span`: 64
 * ulps of t, near t = 0 64 ulps of the span's ulp.  Relative to t, not to
 * the run's end: a long run's first steps at tight tolerances lie far
 * below the end's ulps (Chen 2009 to t = 36,000 at rtol 1e-9 needs 2e-10
 * at t = 0, where 64 ulps of the end are 5e-10). */
static LASSIE_HD inline double lassie_hmin(double t, double span) {
  return 64 * DBL_EPSILON * fmax(fabs(t), DBL_EPSILON * fabs(span));
}

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

/* The size of the next attempt from t with step h towards the target (the
 * next output time with RKF45, else the end): it lands exactly on the
 * target (*hits) when within 5% of it, and a near miss is split in two so
 * that no sliver of a step is left.  Both engines choose it here. */
static LASSIE_HD inline double lassie_attempt_size(double t, double h, double target, int *hits) {
  *hits = 0;
  if (t + 1.05 * h >= target) { *hits = 1; return target - t; }
  if (t + 2 * h > target) return 0.5 * (target - t);
  return h;
}

static inline int lassie_popcount16(unsigned v) {
  v &= 0xFFFFu;
  int c = 0;
  while (v) { c += v & 1u; v >>= 1; }
  return c;
}

/* Products and sums rounded one by one: on the device nvcc would contract
 * a * b + c into one fused multiply-add, which the host code does not do,
 * and both engines run the per-species formulas below so as to agree to
 * the last bit. */
#ifdef __CUDA_ARCH__
#define LASSIE_MUL(a, b) __dmul_rn((a), (b))
#define LASSIE_ADD(a, b) __dadd_rn((a), (b))
#else
#define LASSIE_MUL(a, b) ((a) * (b))
#define LASSIE_ADD(a, b) ((a) + (b))
#endif
#define LM_ LASSIE_MUL
#define LA_ LASSIE_ADD

/* The kinetic laws' stack machine (lassie.h: LASSIE_OP_*), one code for
 * both engines: the value of the program at `code` at state x, with
 * species `oj` (-1: none) read as `ov` instead of x[oj].  + - * / are
 * rounded one by one as on the host; the transcendental functions are the
 * platform's (glibc's, CUDA's), which may differ in the last bits. */
static LASSIE_HD inline double lassie_law_eval(const int *code, const double *cval, const double *x,
                                               int oj, double ov) {
  double s[LASSIE_LAW_STACK];
  int n = 0;
  for (int pc = 0;;) {
    const int op = code[pc++];
    if (op >= LASSIE_OP_ADD && op <= LASSIE_OP_XOR) {
      const double b = s[--n], a = s[n - 1];
      double r;
      switch (op) {
        case LASSIE_OP_ADD: r = LA_(a, b); break;
        case LASSIE_OP_SUB: r = LA_(a, -b); break;
        case LASSIE_OP_MUL: r = LM_(a, b); break;
        case LASSIE_OP_DIV: r = a / b; break;
        case LASSIE_OP_POW: r = pow(a, b); break;
        /* R's min/max: a NaN wins */
        case LASSIE_OP_MIN: r = (a != a || b != b) ? NAN : (a < b ? a : b); break;
        case LASSIE_OP_MAX: r = (a != a || b != b) ? NAN : (a > b ? a : b); break;
        case LASSIE_OP_LT: r = a < b; break;
        case LASSIE_OP_LE: r = a <= b; break;
        case LASSIE_OP_GT: r = a > b; break;
        case LASSIE_OP_GE: r = a >= b; break;
        case LASSIE_OP_EQ: r = a == b; break;
        case LASSIE_OP_NE: r = a != b; break;
        case LASSIE_OP_AND: r = a != 0 && b != 0; break;
        case LASSIE_OP_OR: r = a != 0 || b != 0; break;
        default: r = (a != 0) != (b != 0); break;   /* XOR */
      }
      s[n - 1] = r;
      continue;
    }
    if (op >= LASSIE_OP_NEG && op <= LASSIE_OP_ATANH) {
      const double a = s[n - 1];
      double r;
      switch (op) {
        case LASSIE_OP_NEG: r = -a; break;
        case LASSIE_OP_NOT: r = a == 0; break;
        case LASSIE_OP_EXP: r = exp(a); break;
        case LASSIE_OP_LN: r = log(a); break;
        case LASSIE_OP_LOG10: r = log10(a); break;
        case LASSIE_OP_SQRT: r = sqrt(a); break;
        case LASSIE_OP_ABS: r = fabs(a); break;
        case LASSIE_OP_FLOOR: r = floor(a); break;
        case LASSIE_OP_CEIL: r = ceil(a); break;
        case LASSIE_OP_SIN: r = sin(a); break;
        case LASSIE_OP_COS: r = cos(a); break;
        case LASSIE_OP_TAN: r = tan(a); break;
        case LASSIE_OP_SINH: r = sinh(a); break;
        case LASSIE_OP_COSH: r = cosh(a); break;
        case LASSIE_OP_TANH: r = tanh(a); break;
        case LASSIE_OP_ASIN: r = asin(a); break;
        case LASSIE_OP_ACOS: r = acos(a); break;
        case LASSIE_OP_ATAN: r = atan(a); break;
        case LASSIE_OP_ASINH: r = asinh(a); break;
        case LASSIE_OP_ACOSH: r = acosh(a); break;
        default: r = atanh(a); break;   /* ATANH */
      }
      s[n - 1] = r;
      continue;
    }
    switch (op) {
      case LASSIE_OP_CONST: s[n++] = cval[code[pc++]]; break;
      case LASSIE_OP_SPEC: { const int j = code[pc++]; s[n++] = j == oj ? ov : x[j]; break; }
      case LASSIE_OP_SPEC_POS: {
        const int j = code[pc++];
        const double a = j == oj ? ov : x[j];
        s[n++] = a > 0 ? a : 0;
        break;
      }
      case LASSIE_OP_SELECT: { n -= 2; s[n - 1] = s[n - 1] != 0 ? s[n] : s[n + 1]; break; }
      default: return s[0];   /* RET (the glue admits no other code) */
    }
  }
}

/* Reaction i's rate in a model with kinetic laws (m->law not NULL): k_i
 * times its law, or mass action where it has none. */
static LASSIE_HD inline double lassie_law_rate(const sbg_lassie_model *m, const double *k,
                                               const double *x, int i) {
  const int l = m->law[i];
  return l < 0 ? lassie_rate(m->r_ptr, m->r_sp, m->r_ord, k, x, i)
               : LM_(k[i], lassie_law_eval(m->code + l, m->cval, x, -1, 0));
}

/* dv_i/dx_j of reaction i's kinetic law for its entries e (the species it
 * reads) into dv[e], by central differences (forward from a species at 0
 * or where the step would cross 0, where a law may not be defined), with
 * a step of eps^(1/3) of the species' value, or of a thousandth of the
 * largest value the law reads when the species' is smaller: a species at
 * 0 next to others of order 1 is not differenced over 1e-300.  The
 * modified Newton iteration needs J only roughly. */
static LASSIE_HD inline void lassie_law_dvdx(const sbg_lassie_model *m, const double *k,
                                             const double *x, int i, double *dv) {
  const int *code = m->code + m->law[i];
  const int b = m->r_ptr[i], c = m->r_ptr[i + 1];
  double big = 0;
  for (int e = b; e < c; e++) { double a = fabs(x[m->r_sp[e]]); if (a > big) big = a; }
  double v0 = NAN;
  for (int e = b; e < c; e++) {
    const int j = m->r_sp[e];
    const double xj = x[j];
    double sc = fabs(xj) > 1e-3 * big ? fabs(xj) : 1e-3 * big;
    /* at 0, or so near it that the step would not be a normal number: a
     * law reading only a species that decayed to 4.9e-324 was differenced
     * over a step of 0 (a Jacobian of NaN, whose factorisation then failed
     * at every step size) */
    if (!(6.0554544523933395e-06 * sc >= DBL_MIN)) sc = 1e-8;
    double h = 6.0554544523933395e-06 * sc;   /* cbrt(DBL_EPSILON) */
    /* h made exactly representable: xp - xj, each rounded on its own
     * (volatile keeps the host's compiler from folding it to h) */
#ifdef __CUDA_ARCH__
    const double xp = __dadd_rn(xj, h);
    h = __dsub_rn(xp, xj);
#else
    volatile double xp = xj + h;
    h = xp - xj;
#endif
    double d;
    if (xj >= 0 && xj - h < 0) {
      if (v0 != v0) v0 = lassie_law_eval(code, m->cval, x, -1, 0);
      d = (lassie_law_eval(code, m->cval, x, j, xp) - v0) / h;
    } else {
      d = (lassie_law_eval(code, m->cval, x, j, xp) -
           lassie_law_eval(code, m->cval, x, j, xj - h)) / (2 * h);
    }
    dv[e] = LM_(k[i], d);
  }
}

/* The explicit schemes.  RKF45: Fehlberg's pair, stepping onto each output
 * time (method = "rkf45", LASSIE's).  DP5: Dormand and Prince's 5(4) pair
 * (FSAL: its 7th stage is f at the new state), stepping by accuracy alone
 * and filling the output times from its continuous extension. */
enum { LASSIE_RKF45 = 0, LASSIE_DP5 = 1 };
/* stages, new right-hand sides per step, and the stage whose input lies at
 * the end of the step before the new state (the stiffness estimate
 * compares f there with f at the new state) */
#define LASSIE_MAX_STAGES 7
/* Points of a step at which the watched conditions (sbg_lassie_watch) are
 * probed before its end, so that a condition that changes and changes back
 * within one step (a window a large step jumps over) is seen when it lasts
 * longer than a sixteenth of the step: probe i of the step t0 to tnew, and
 * the bisection's midpoint of a and b (both rounded as written on the
 * device too: the engines find the same times). */
#define LASSIE_WATCH_PROBES 16
static LASSIE_HD inline double lassie_watch_probe(double t0, double tnew, int i) {
  return LA_(t0, LM_(tnew - t0, (double)i / LASSIE_WATCH_PROBES));
}
static LASSIE_HD inline double lassie_watch_mid(double a, double b) { return LA_(a, LM_(0.5, b - a)); }

static LASSIE_HD inline int lassie_stages(int scheme) { return scheme == LASSIE_DP5 ? 7 : 6; }
static LASSIE_HD inline int lassie_stiff_stage(int scheme) { return scheme == LASSIE_DP5 ? 5 : 4; }

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

/* Dormand and Prince (1980), RK5(4)7M: nodes 0, 1/5, 3/10, 4/5, 8/9, 1, 1;
 * row 7 of A is the 5th-order weights b (b2 = b7 = 0); E = b - b^, the
 * weights of the error estimate. */
#define DP_A21 (1.0 / 5.0)
#define DP_A31 (3.0 / 40.0)
#define DP_A32 (9.0 / 40.0)
#define DP_A41 (44.0 / 45.0)
#define DP_A42 (-56.0 / 15.0)
#define DP_A43 (32.0 / 9.0)
#define DP_A51 (19372.0 / 6561.0)
#define DP_A52 (-25360.0 / 2187.0)
#define DP_A53 (64448.0 / 6561.0)
#define DP_A54 (-212.0 / 729.0)
#define DP_A61 (9017.0 / 3168.0)
#define DP_A62 (-355.0 / 33.0)
#define DP_A63 (46732.0 / 5247.0)
#define DP_A64 (49.0 / 176.0)
#define DP_A65 (-5103.0 / 18656.0)
#define DP_B1 (35.0 / 384.0)
#define DP_B3 (500.0 / 1113.0)
#define DP_B4 (125.0 / 192.0)
#define DP_B5 (-2187.0 / 6784.0)
#define DP_B6 (11.0 / 84.0)
#define DP_E1 (71.0 / 57600.0)
#define DP_E3 (-71.0 / 16695.0)
#define DP_E4 (71.0 / 1920.0)
#define DP_E5 (-17253.0 / 339200.0)
#define DP_E6 (22.0 / 525.0)
#define DP_E7 (-1.0 / 40.0)
/* The continuous extension of order 4 (Hairer, Norsett and Wanner,
 * Solving ODEs I, sec. II.6; Shampine 1986): with
 *   r1 = y1 - y0, r2 = h k1 - r1, r3 = r1 - h k7 - r2,
 *   r4 = h (D1 k1 + D3 k3 + D4 k4 + D5 k5 + D6 k6 + D7 k7),
 * y(t0 + theta h) = y0 + theta (r1 + (1 - theta) (r2 + theta (r3 +
 * (1 - theta) r4))).  tests/testthat/test-lassie-dense.R checks its order
 * conditions. */
#define DP_D1 (-12715105075.0 / 11282082432.0)
#define DP_D3 (87487479700.0 / 32700410799.0)
#define DP_D4 (-10690763975.0 / 1880347072.0)
#define DP_D5 (701980252875.0 / 199316789632.0)
#define DP_D6 (-1453857185.0 / 822651844.0)
#define DP_D7 (69997945.0 / 29380423.0)

/* Input of stage `stage` (1-based count of the stages before it) for one
 * species: x + h sum_l a_{stage,l} k[l], summed left to right.  For DP5
 * the input of stage 6 (0-based) is the new state. */
static LASSIE_HD inline double lassie_stage_input(int scheme, int stage, double x, double h,
                                                  const double *k) {
  if (scheme == LASSIE_RKF45) {
    switch (stage) {
      case 1: return LA_(x, LM_(LM_(h, RKF_A21), k[0]));
      case 2: return LA_(x, LM_(h, LA_(LM_(RKF_A31, k[0]), LM_(RKF_A32, k[1]))));
      case 3: return LA_(x, LM_(h, LA_(LA_(LM_(RKF_A41, k[0]), LM_(RKF_A42, k[1])), LM_(RKF_A43, k[2]))));
      case 4: return LA_(x, LM_(h, LA_(LA_(LA_(LM_(RKF_A51, k[0]), LM_(RKF_A52, k[1])), LM_(RKF_A53, k[2])),
                                      LM_(RKF_A54, k[3]))));
      default: return LA_(x, LM_(h, LA_(LA_(LA_(LA_(LM_(RKF_A61, k[0]), LM_(RKF_A62, k[1])), LM_(RKF_A63, k[2])),
                                            LM_(RKF_A64, k[3])), LM_(RKF_A65, k[4]))));
    }
  }
  switch (stage) {
    case 1: return LA_(x, LM_(LM_(h, DP_A21), k[0]));
    case 2: return LA_(x, LM_(h, LA_(LM_(DP_A31, k[0]), LM_(DP_A32, k[1]))));
    case 3: return LA_(x, LM_(h, LA_(LA_(LM_(DP_A41, k[0]), LM_(DP_A42, k[1])), LM_(DP_A43, k[2]))));
    case 4: return LA_(x, LM_(h, LA_(LA_(LA_(LM_(DP_A51, k[0]), LM_(DP_A52, k[1])), LM_(DP_A53, k[2])),
                                    LM_(DP_A54, k[3]))));
    case 5: return LA_(x, LM_(h, LA_(LA_(LA_(LA_(LM_(DP_A61, k[0]), LM_(DP_A62, k[1])), LM_(DP_A63, k[2])),
                                          LM_(DP_A64, k[3])), LM_(DP_A65, k[4]))));
    default: return LA_(x, LM_(h, LA_(LA_(LA_(LA_(LM_(DP_B1, k[0]), LM_(DP_B3, k[2])), LM_(DP_B4, k[3])),
                                           LM_(DP_B5, k[4])), LM_(DP_B6, k[5]))));
  }
}

/* The end of a step for one species, all stages k[] evaluated: the new
 * state (RKF45: its 5th-order solution; DP5: stage 6's input, passed in y)
 * and the returned scaled error |err| / (atol + rtol max(|x|, |y|)). */
static LASSIE_HD inline double lassie_step_end(int scheme, double x, double h, const double *k,
                                               double rtol, double atol, double *y) {
  double e;
  if (scheme == LASSIE_RKF45) {
    *y = LA_(x, LM_(h, LA_(LA_(LA_(LA_(LM_(RKF_B1, k[0]), LM_(RKF_B3, k[2])), LM_(RKF_B4, k[3])),
                                LM_(RKF_B5, k[4])), LM_(RKF_B6, k[5]))));
    e = LM_(h, LA_(LA_(LA_(LA_(LM_(RKF_E1, k[0]), LM_(RKF_E3, k[2])), LM_(RKF_E4, k[3])),
                        LM_(RKF_E5, k[4])), LM_(RKF_E6, k[5])));
  } else {
    e = LM_(h, LA_(LA_(LA_(LA_(LA_(LM_(DP_E1, k[0]), LM_(DP_E3, k[2])), LM_(DP_E4, k[3])),
                            LM_(DP_E5, k[4])), LM_(DP_E6, k[5])), LM_(DP_E7, k[6])));
  }
  return fabs(e) / LA_(atol, LM_(rtol, fmax(fabs(x), fabs(*y))));
}

/* DP5's continuous extension for one species over a step (x the state at
 * its start, y at its end, k[] its stages): the coefficients r[0..3]
 * (r1..r4 above), computed once per step, and the value at theta in (0, 1). */
static LASSIE_HD inline void lassie_dp5_dense_coefs(double x, double y, double h, const double *k,
                                                    double *r) {
  r[0] = LA_(y, -x);
  r[1] = LA_(LM_(h, k[0]), -r[0]);
  r[2] = LA_(LA_(r[0], -LM_(h, k[6])), -r[1]);
  r[3] = LM_(h, LA_(LA_(LA_(LA_(LA_(LM_(DP_D1, k[0]), LM_(DP_D3, k[2])), LM_(DP_D4, k[3])),
                              LM_(DP_D5, k[4])), LM_(DP_D6, k[5])), LM_(DP_D7, k[6])));
}

static LASSIE_HD inline double lassie_dp5_dense(double theta, double x, const double *r) {
  double th1 = LA_(1.0, -theta);
  return LA_(x, LM_(theta, LA_(r[0], LM_(th1, LA_(r[1], LM_(theta, LA_(r[2], LM_(th1, r[3]))))))));
}

#ifdef __cplusplus
extern "C" {
#endif
/* Where the GPU engine hands a simulation over to the CPU's implicit steps. */
typedef struct sbg_lassie_start {
  double t, h, attempts;
  int next;
} sbg_lassie_start;
/* The first step both engines take (lassie_cpu.c) over a run of `span`;
 * f, v: scratch N, M. */
double sbg_lassie_initial_step(const sbg_lassie_model *m, const sbg_lassie_params *p,
                               const double *k, const double *x, double span, double *f, double *v);
/* Simulation s's run: from *t0 to *t1 (p->window's, else the batch's first
 * and last times), its first output row after *t0 in *row. */
static inline void lassie_window(const sbg_lassie_params *p, int s, double *t0, double *t1, int *row) {
  const int nt = p->n_times;
  int r = 1;
  if (!p->window) {
    *t0 = p->times[0]; *t1 = p->times[nt - 1];
  } else {
    *t0 = p->window[2 * (size_t)s]; *t1 = p->window[2 * (size_t)s + 1];
    r = 0;
    while (r < nt && p->times[r] <= *t0) r++;
  }
  *row = r;
}
/* Continues simulation `sim` from `start` (state x, out rows before
 * start->next written, stats so far) with implicit steps, on the CPU. */
/* The same for the n simulations sims[] (ascending), states x (N per
 * simulation of the batch), from starts[i], in parallel on ctx->n_threads;
 * out and stats are the whole batch's, and so is watch (NULL: none). */
sbg_status sbg_lassie_cpu_continue_many(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                        int n, const int *sims, const double *x, double *out,
                                        double *stats, int *status, char *messages,
                                        const sbg_lassie_start *starts, sbg_lassie_watch *watch,
                                        sbg_ctx *ctx);
sbg_status sbg_lassie_cpu_continue(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                   int sim, const double *x, double *out, double *stats,
                                   const sbg_lassie_start *start, sbg_ctx *ctx);
#ifdef __cplusplus
}
#endif

/* The message of a simulation that failed (what: LASSIE_FAIL_*) at t,
 * into buf; `where` is appended (" in simulation 3" or ""). */
static inline void lassie_fail_text(char *buf, size_t n, int what, double t, const char *where,
                                    const sbg_lassie_params *p, int N) {
  switch (what) {
    case LASSIE_FAIL_MAXSTEPS:
      snprintf(buf, n, "`maxSteps` (%.0f) exhausted at t = %.10g%s", p->max_steps, t, where); break;
    case LASSIE_FAIL_HMIN:
      snprintf(buf, n, "step size underflow at t = %.10g%s: the model may be too stiff for explicit steps (method \"bdf\" takes implicit ones), its solution may blow up, or the tolerances may be too tight", t, where); break;
    case LASSIE_FAIL_NEWTON:
      snprintf(buf, n, "Newton iterations fail to converge at t = %.10g%s even with the smallest step", t, where); break;
    case LASSIE_FAIL_DENSE:
      snprintf(buf, n, "the model needs implicit steps at t = %.10g%s, and this version orders their sparse LU with a %d x %d bitset, above its limit of 16384 species", t, where, N, N); break;
    case LASSIE_FAIL_ALLOC:
      snprintf(buf, n, "out of memory for the %d x %d iteration matrix of the implicit steps", N, N); break;
    default:
      snprintf(buf, n, "interrupted");
  }
}

/* The error of a failed simulation (sim of the batch p, 0-based),
 * numbered in the whole batch when p is an R worker's block of one. */
static inline sbg_status lassie_fail(sbg_ctx *ctx, sbg_status st, int what, double t,
                                     int sim, const sbg_lassie_params *p, int N) {
  char where[64] = "", msg[SBG_ERRBUF];
  int total = p->sim_total > p->n_sims ? p->sim_total : p->n_sims;
  if (what == LASSIE_FAIL_INTERRUPT) return st;   /* the message is already in ctx */
  if (total > 1) snprintf(where, sizeof(where), " in simulation %d", sim + p->sim_base + 1);
  lassie_fail_text(msg, sizeof(msg), what, t, where, p, N);
  return sbg_fail(ctx, st, "%s", msg);
}

/* A simulation's own failure, kept with its result (the batch goes on):
 * numeric failures and a model too large for implicit steps.  Returns 0
 * for failures of the run (memory, interrupt), which stay errors. */
static inline int lassie_fail_is_per_sim(int what) {
  return what == LASSIE_FAIL_MAXSTEPS || what == LASSIE_FAIL_HMIN || what == LASSIE_FAIL_NEWTON ||
         what == LASSIE_FAIL_DENSE;
}

static inline void lassie_record_fail(int *status, char *messages, int sim, int what, double t,
                                      const sbg_lassie_params *p, int N) {
  status[sim] = what;
  lassie_fail_text(messages + (size_t)sim * SBG_LASSIE_MSG, SBG_LASSIE_MSG, what, t, "", p, N);
}

#endif /* SBG_LASSIE_COMMON_H */
