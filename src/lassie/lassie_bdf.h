/* Numerics of lassieSimulate()'s implicit (BDF) steps shared by the CPU
 * engine (lassie_cpu.c) and the GPU engine (lassie_gpu_bdf.cu): the
 * right-hand side with its roundoff scale, the Jacobian's factor, the
 * sparse LU of I - gamma J on a pattern computed once, its substitution,
 * the BDF coefficients and the error estimates of the order selection.
 *
 * Each function runs on a team: one CPU thread (LASSIE_TEAM_HOST) or the
 * lanes of a warp (or of a part of one) working on one simulation.  Lanes
 * split the loops whose elements are independent; every sum keeps the
 * CPU's order (a lane owns an element and adds its terms in order, or lane
 * 0 adds serially), and the GPU build contracts no multiply-add
 * (--fmad=false), so both engines get the same bits. */
#ifndef SBG_LASSIE_BDF_H
#define SBG_LASSIE_BDF_H

#include <math.h>
#include "lassie.h"
#include "lassie_common.h"
#include "portable_math.h"

/* BDF: highest order, and the past states kept (order q needs q + 1 for
 * its predictor, the estimate for order q + 1 one more) */
#define LASSIE_BDF_MAXORD 5
#define LASSIE_BDF_HIST (LASSIE_BDF_MAXORD + 2)

typedef struct lassie_team {
  int lane, size;   /* this lane, lanes per simulation (a power of 2 <= 32) */
  unsigned mask;    /* the team's lanes in its warp */
} lassie_team;

static LASSIE_HD inline lassie_team lassie_team_host(void) {
  lassie_team t = {0, 1, 1u};
  return t;
}

/* The team's lanes wait for each other (their writes become visible). */
static LASSIE_HD inline void lassie_team_sync(const lassie_team *tm) {
#ifdef __CUDA_ARCH__
  __syncwarp(tm->mask);
#else
  (void)tm;
#endif
}

/* Lane 0's value, on every lane. */
static LASSIE_HD inline double lassie_team_bcast(const lassie_team *tm, double v) {
#ifdef __CUDA_ARCH__
  if (tm->size > 1) v = __shfl_sync(tm->mask, v, 0, tm->size);
#else
  (void)tm;
#endif
  return v;
}

/* The largest of the lanes' values, NaN winning (lassie_maxnan does not
 * depend on the order, so this is the serial maximum). */
static LASSIE_HD inline double lassie_team_max(const lassie_team *tm, double v) {
#ifdef __CUDA_ARCH__
  for (int o = tm->size / 2; o > 0; o >>= 1)
    v = lassie_maxnan(v, __shfl_xor_sync(tm->mask, v, o, tm->size));
#else
  (void)tm;
#endif
  return v;
}

/* The symbolic part of the sparse LU, shared by all simulations of a
 * model: pos[species] = its row (fill-reducing order), ipos the inverse;
 * the factors' pattern row by row (L columns ascending, the diagonal at
 * diag[i], then U's columns). */
typedef struct lassie_lu {
  const int *pos, *ipos, *ptr, *col, *diag;
  /* level schedule of the substitutions (sbg_lassie_lu_levels): lev holds
   * the forward rows by level, then the backward rows by level (in each
   * level its short rows, then its long ones), then the level offsets into
   * them (n_fwd + 1, then n_bwd + 1), then where each level's long rows
   * start (n_fwd, then n_bwd) */
  const int *lev;
  int n_fwd, n_bwd;
} lassie_lu;

#ifdef __cplusplus
extern "C" {
#endif
/* Fill-reducing order and LU pattern of I - gamma J (lassie_cpu.c): pos and
 * ipos of N given; *ptr, *col, *diag malloc'ed (free them); *nnz the
 * factors' entries.  Returns 0, or -1 without memory. */
int sbg_lassie_lu_pattern(const sbg_lassie_model *m, int *pos, int *ipos, int **ptr,
                          int **col, int **diag, size_t *nnz);
/* Level schedule of the substitutions with the factors (ptr, col, diag) of
 * N rows: rows of one level depend only on rows of earlier levels, so a
 * team can share a level's rows, each row's sum still in its own order.
 * *lev malloc'ed (lassie_lu_lev_len() ints, layout in lassie_lu).
 * Returns 0, or -1 without memory. */
int sbg_lassie_lu_levels(int N, const int *ptr, const int *col, const int *diag, int **lev,
                         int *n_fwd, int *n_bwd);
#ifdef __cplusplus
}
#endif
/* Length of that schedule. */
static inline size_t lassie_lu_lev_len(int N, int n_fwd, int n_bwd) {
  return 2 * (size_t)N + 2 * ((size_t)n_fwd + (size_t)n_bwd) + 2;
}

/* dX/dt = H v into f at x (v: the rates, scratch M) and, when fa is not
 * NULL, per species the sum of |terms| f_j is made of: the scale of its
 * roundoff. */
static LASSIE_HD inline void lassie_rhs_team(const lassie_team *tm, const sbg_lassie_model *m,
                                             const double *k, const double *x, double *v,
                                             double *f, double *fa) {
  for (int i = tm->lane; i < m->n_reactions; i += tm->size)
    v[i] = lassie_rate(m->r_ptr, m->r_sp, m->r_ord, k, x, i);
  lassie_team_sync(tm);
  for (int l = tm->lane; l < m->n_species; l += tm->size) {
    double s = 0, a = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      double term = m->h_val[q] * v[m->h_rx[q]];
      s += term; a += fabs(term);
    }
    f[l] = s;
    if (fa) fa[l] = a;
  }
  lassie_team_sync(tm);
}

/* dv_i/dx_j for every reactant entry e of reaction i: the sparse factor D
 * of the Jacobian J = H D. */
static LASSIE_HD inline void lassie_dvdx_team(const lassie_team *tm, const sbg_lassie_model *m,
                                              const double *k, const double *x, double *dv) {
  for (int i = tm->lane; i < m->n_reactions; i += tm->size) {
    int b = m->r_ptr[i], c = m->r_ptr[i + 1];
    for (int e = b; e < c; e++) {
      int a = m->r_ord[e];
      double d = k[i] * a * (a > 1 ? lassie_ipow(x[m->r_sp[e]], a - 1) : 1.0);
      for (int e2 = b; e2 < c; e2++)
        if (e2 != e) d *= lassie_ipow(x[m->r_sp[e2]], m->r_ord[e2]);
      dv[e] = d;
    }
  }
  lassie_team_sync(tm);
}

/* Gershgorin bound on the spectral radius of J: the test for leaving the
 * implicit mode (an explicit step of that size would be stable). */
static LASSIE_HD inline double lassie_gershgorin(const lassie_team *tm, const sbg_lassie_model *m,
                                                 const double *dv) {
  double rho = 0;
  for (int l = tm->lane; l < m->n_species; l += tm->size) {
    double s = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      int i = m->h_rx[q];
      for (int e = m->r_ptr[i]; e < m->r_ptr[i + 1]; e++) s += fabs(m->h_val[q] * dv[e]);
    }
    if (s > rho) rho = s;
  }
  return lassie_team_max(tm, rho);
}

/* Numeric LU of P = I - gamma J (J = H D, D in dv) on the pattern lu,
 * pivots on the diagonal (the fill-reducing order stays; I - gamma J of a
 * reaction network has a diagonal >= 1 wherever a species is only
 * consumed, as in KPP's static sparse LU for chemistry); val the factors,
 * x a zeroed scratch of N (left zeroed).  Row by row: lane 0 scatters the
 * row, the lanes share each update with a row of U (distinct columns).
 * Returns -1 when a pivot is not finite or lost its digits to
 * cancellation (the CPU then takes a dense LU with pivoting). */
static LASSIE_HD inline int lassie_lu_factor(const lassie_team *tm, const sbg_lassie_model *m,
                                             const lassie_lu *lu, double gamma,
                                             const double *dv, double *val, double *x) {
  const int N = m->n_species, L = tm->lane, T = tm->size;
  const int *pos = lu->pos, *ptr = lu->ptr, *col = lu->col, *diag = lu->diag;
  for (int i = 0; i < N; i++) {
    if (L == 0) {
      int l = lu->ipos[i];
      x[i] += 1.0;
      for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
        int r = m->h_rx[q];
        double gh = gamma * m->h_val[q];
        for (int e = m->r_ptr[r]; e < m->r_ptr[r + 1]; e++) x[pos[m->r_sp[e]]] -= gh * dv[e];
      }
    }
    lassie_team_sync(tm);
    /* dterm: the largest partial sum the pivot went through (at least
     * half the largest term it is made of), tracked once per eliminated
     * row and not per update */
    double dterm = fabs(x[i]);
    for (int p = ptr[i]; p < diag[i]; p++) {
      int k = col[p];
      double lk = x[k] / val[diag[k]];
      lassie_team_sync(tm);   /* all lanes read x[k] before lane 0 writes it */
      if (L == 0) x[k] = lk;
      if (lk == 0) continue;
      for (int p2 = diag[k] + 1 + L; p2 < ptr[k + 1]; p2 += T) x[col[p2]] -= lk * val[p2];
      lassie_team_sync(tm);
      double a = fabs(x[i]);
      if (a > dterm) dterm = a;
    }
    lassie_team_sync(tm);
    for (int p = ptr[i] + L; p < ptr[i + 1]; p += T) { val[p] = x[col[p]]; x[col[p]] = 0; }
    lassie_team_sync(tm);
    double d = val[diag[i]];
    /* The test is on cancellation, not on the pivot's size next to its
     * row: rows of species with large amounts carry large off-diagonal
     * entries (Chen's ligand: 1e11 next to a diagonal of 1), which a row
     * scaling would remove and which do not harm the elimination, while
     * the diagonal of I - gamma J is >= 1 before elimination (a species'
     * own consumption), so a small pivot can only come from cancellation:
     * it fails when it lost 10 digits to the terms it is made of. */
    if (!isfinite(d) || !(fabs(d) > 1e-10 * dterm)) {
      for (int j = L; j < N; j += T) x[j] = 0;
      lassie_team_sync(tm);
      return -1;
    }
  }
  return 0;
}

/* Forward and back substitution with unit-lower / upper factors stored
 * row by row (ptr, col, val; diag: each row's diagonal entry), for the
 * sparse LU and the CPU's compressed dense one alike.  Serial. */
static LASSIE_HD inline void lassie_lu_substitute(int n, const int *ptr, const int *col,
                                                  const int *diag, const double *val, double *b) {
  for (int i = 1; i < n; i++) {
    double s = b[i];
    for (int q = ptr[i]; q < diag[i]; q++) s -= val[q] * b[col[q]];
    b[i] = s;
  }
  for (int k = n - 1; k >= 0; k--) {
    double s = b[k];
    for (int q = diag[k] + 1; q < ptr[k + 1]; q++) s -= val[q] * b[col[q]];
    b[k] = s / val[diag[k]];
  }
}

/* Rows of the factors with at least LASSIE_LU_SPLIT terms (a hub species:
 * Chen's longest row of L has 175, and such rows, one per level, made most
 * of a warp's substitution time) sum them as LASSIE_LU_LANES strided
 * partial sums (partial v: terms v, v + 32, ..., in order), added by a
 * fixed pairwise tree; a warp computes them in parallel, the CPU and
 * smaller teams in turn, with the same bits. */
#define LASSIE_LU_SPLIT 32
#define LASSIE_LU_LANES 32

/* sum_{q0 <= q < q1} val[q] b[col[q]] in the order above, on every lane */
static LASSIE_HD inline double lassie_lu_row_sum(const lassie_team *tm, const double *val,
                                                 const double *b, const int *col, int q0, int q1) {
#ifdef __CUDA_ARCH__
  if (tm->size == LASSIE_LU_LANES) {
    double p = 0;
    for (int q = q0 + tm->lane; q < q1; q += LASSIE_LU_LANES) p += val[q] * b[col[q]];
    /* lane l < o holds the tree's entry l after each step (t[l] + t[l + o]) */
    for (int o = LASSIE_LU_LANES / 2; o > 0; o >>= 1) p = p + __shfl_xor_sync(tm->mask, p, o);
    return __shfl_sync(tm->mask, p, 0);
  }
#endif
  (void)tm;
  double t[LASSIE_LU_LANES];
  for (int v = 0; v < LASSIE_LU_LANES; v++) {
    double p = 0;
    for (int q = q0 + v; q < q1; q += LASSIE_LU_LANES) p += val[q] * b[col[q]];
    t[v] = p;
  }
  for (int o = LASSIE_LU_LANES / 2; o > 0; o >>= 1)
    for (int v = 0; v < o; v++) t[v] = t[v] + t[v + o];
  return t[0];
}

/* Solves L U z = b in place (the factors of lassie_lu_factor) by the level
 * schedule of lu: the lanes share each level's short rows, each summed in
 * order as lassie_lu_substitute() does; the team takes its long rows one
 * by one (lassie_lu_row_sum).  The CPU (a team of one) gets the same bits.
 * (Rows of a level are independent, so their order in it does not change
 * a bit; the schedule lists the long rows apart, which spares the team a
 * pass over every row of the level to find them.) */
static LASSIE_HD inline void lassie_lu_solve_levels(const lassie_team *tm, const lassie_lu *lu,
                                                    int N, const double *val, double *b) {
  const int *ptr = lu->ptr, *col = lu->col, *diag = lu->diag;
  const int *fr = lu->lev, *br = lu->lev + N, *fp = lu->lev + 2 * N, *bp = fp + lu->n_fwd + 1;
  const int *fl = bp + lu->n_bwd + 1, *bl = fl + lu->n_fwd;
  for (int lv = 0; lv < lu->n_fwd; lv++) {
    for (int r = fp[lv] + tm->lane; r < fl[lv]; r += tm->size) {
      int i = fr[r];
      double s = b[i];
      for (int q = ptr[i]; q < diag[i]; q++) s -= val[q] * b[col[q]];
      b[i] = s;
    }
    for (int r = fl[lv]; r < fp[lv + 1]; r++) {
      int i = fr[r];
      double t = lassie_lu_row_sum(tm, val, b, col, ptr[i], diag[i]);
      if (tm->lane == 0) b[i] = b[i] - t;
    }
    lassie_team_sync(tm);
  }
  for (int lv = 0; lv < lu->n_bwd; lv++) {
    for (int r = bp[lv] + tm->lane; r < bl[lv]; r += tm->size) {
      int k = br[r];
      double s = b[k];
      for (int q = diag[k] + 1; q < ptr[k + 1]; q++) s -= val[q] * b[col[q]];
      b[k] = s / val[diag[k]];
    }
    for (int r = bl[lv]; r < bp[lv + 1]; r++) {
      int k = br[r];
      double t = lassie_lu_row_sum(tm, val, b, col, diag[k] + 1, ptr[k + 1]);
      if (tm->lane == 0) b[k] = (b[k] - t) / val[diag[k]];
    }
    lassie_team_sync(tm);
  }
}

/* Variable-coefficient BDF of order q on the nodes tau[0] = t_{n+1} (the new
 * point) and tau[1..q] (past points): gamma = 1 / l_0'(tau0) and the
 * weights dl[j] = l_j'(tau0) of the Lagrange basis, so that the formula is
 * y - gamma f(y) = -gamma sum_{j>=1} dl[j] y_j. */
static LASSIE_HD inline double lassie_bdf_coefs(const double *tau, int q, double *dl) {
  double s = 0;
  for (int j = 1; j <= q; j++) s += 1.0 / (tau[0] - tau[j]);
  for (int j = 1; j <= q; j++) {
    double num = 1, den = 1;
    for (int mm = 1; mm <= q; mm++) if (mm != j) num *= tau[0] - tau[mm];
    for (int mm = 0; mm <= q; mm++) if (mm != j) den *= tau[j] - tau[mm];
    dl[j] = num / den;
  }
  return 1.0 / s;
}

/* Scaled local error that BDF of order kk would make on the step just
 * accepted, gamma_k prod_{j=1..k}(tau0 - tau_j) |y[tau0..tau_{k+1}]|
 * (the divided difference of order k + 1 estimates y^(k+1) / (k+1)!),
 * max over species with weights wt; hist[0] is the new point. */
static LASSIE_HD inline double lassie_bdf_err_order(const lassie_team *tm, double *const *hist,
                                                    const double *tau, int kk, const double *wt,
                                                    int N) {
  double c[LASSIE_BDF_HIST];
  double s = 0, p1 = 1;
  for (int j = 1; j <= kk; j++) { s += 1.0 / (tau[0] - tau[j]); p1 *= tau[0] - tau[j]; }
  double gp = p1 / s;
  for (int i = 0; i <= kk + 1; i++) {
    double den = 1;
    for (int j = 0; j <= kk + 1; j++) if (j != i) den *= tau[i] - tau[j];
    c[i] = gp / den;
  }
  double e = 0;
  for (int l = tm->lane; l < N; l += tm->size) {
    double d = 0;
    for (int i = 0; i <= kk + 1; i++) d += c[i] * hist[i][l];
    e = lassie_maxnan(e, fabs(d) / wt[l]);
  }
  return lassie_team_max(tm, e);
}

/* Implicit steps grow at most twice the last one (the interpolation of the
 * output rows and the predictor stay on a history of similar steps): the
 * attempt's size hs, capped; a capped attempt no longer lands on the
 * target. */
static LASSIE_HD inline double lassie_bdf_cap(double hs, const double *ht, int nh, int *hits) {
  if (nh >= 2 && hs > 2 * (ht[0] - ht[1])) { *hits = 0; return 2 * (ht[0] - ht[1]); }
  return hs;
}

/* The scalars of the BDF formula of order qq (1 <= qq <= nh - 1) for the
 * new point tnew after the history's times ht: the weights dl of
 * lassie_bdf_coefs(), the predictor's weights lp[1..qq+1] (the polynomial
 * through the qq + 1 last states, at tnew), *errc, the constant of the
 * local error errc |y - ypred|; returns gamma. */
static LASSIE_HD inline double lassie_bdf_formula(double tnew, const double *ht, int nh, int qq,
                                                  double *dl, double *lp, double *errc) {
  double tau[LASSIE_BDF_HIST + 1];
  tau[0] = tnew;
  for (int j = 1; j <= qq + 1 && j <= nh; j++) tau[j] = ht[j - 1];
  double gamma = lassie_bdf_coefs(tau, qq, dl);
  double p1 = 1, p2 = 1;
  for (int j = 1; j <= qq; j++) p1 *= tau[0] - tau[j];
  for (int j = 1; j <= qq + 1; j++) {
    double lj = 1;
    for (int mm = 1; mm <= qq + 1; mm++) if (mm != j) lj *= (tau[0] - tau[mm]) / (tau[j] - tau[mm]);
    lp[j] = lj;
    p2 *= tau[0] - tau[j];
  }
  /* y - ypred = y[tau0..tau_{qq+1}] p2, local error = gamma p1 times it */
  *errc = gamma * p1 / fabs(p2 - gamma * p1);
  return gamma;
}

/* Per species over the team: the predictor ypred and the constant part c
 * of y - c - gamma f(y) = 0 of that formula (hist[i] i steps back). */
static LASSIE_HD inline void lassie_bdf_predict(const lassie_team *tm, double *const *hist,
                                                const double *lp, const double *dl, int qq,
                                                double gamma, int N, double *ypred, double *c) {
  for (int j = tm->lane; j < N; j += tm->size) {
    double pr = 0, cc = 0;
    for (int i = 1; i <= qq + 1; i++) pr += lp[i] * hist[i - 1][j];
    for (int i = 1; i <= qq; i++) cc += dl[i] * hist[i - 1][j];
    ypred[j] = pr;
    c[j] = -gamma * cc;
  }
}

/* The scaled error errc |y - ypred| of the step from x to y, max over
 * species (NaN winning), in weights that are the Newton test's wt or the
 * tolerance at the larger of x and y; the weights are left in wt for the
 * order selection. */
static LASSIE_HD inline double lassie_bdf_error(const lassie_team *tm, const double *x,
                                                const double *y, const double *ypred, double *wt,
                                                double errc, double rtol, double atol, int N) {
  double err = 0;
  for (int j = tm->lane; j < N; j += tm->size) {
    double wj = atol + rtol * fmax(fabs(x[j]), fabs(y[j]));
    if (wj < wt[j]) wj = wt[j];
    wt[j] = wj;
    err = lassie_maxnan(err, errc * fabs(y[j] - ypred[j]) / wj);
  }
  return lassie_team_max(tm, err);
}

/* After an accepted step of order *q (hist[0] the new state, nh states,
 * wt the error test's weights): the step factor of the order whose
 * estimated error allows the largest next step (biased towards keeping
 * the order, as CVODE), checked after q + 1 steps at an order; fac is the
 * current order's, 0.9 err^(-1/(q+1)).  A new order goes to *q (its
 * steps *q_steps restart). */
static LASSIE_HD inline double lassie_bdf_order(const lassie_team *tm, double *const *hist,
                                                const double *ht, int nh, int *q, int *q_steps,
                                                const double *wt, int N, double fac) {
  const int qc = *q;
  if (!(*q_steps > qc && nh >= qc + 2)) return fac;
  double best = fac;
  int qn = qc;
  if (qc > 1) {
    double e = lassie_bdf_err_order(tm, hist, ht, qc - 1, wt, N);
    double f = e > 0 ? 1.0 / (1.3 * sbg_pow(e, 1.0 / qc)) : 2.0;
    if (f > best) { best = f; qn = qc - 1; }
  }
  if (qc < LASSIE_BDF_MAXORD && nh >= qc + 3) {
    double e = lassie_bdf_err_order(tm, hist, ht, qc + 1, wt, N);
    double f = e > 0 ? 1.0 / (1.4 * sbg_pow(e, 1.0 / (qc + 2))) : 2.0;
    if (f > best) { best = f; qn = qc + 1; }
  }
  if (qn != qc) { *q = qn; *q_steps = 0; return best; }
  return fac;
}

/* The next step's factor after an accepted implicit step of order qq with
 * scaled error err (history nh states, order and its steps in *q and
 * *q_steps, updated by lassie_bdf_order()). */
static LASSIE_HD inline double lassie_bdf_accept_factor(const lassie_team *tm, double *const *hist,
                                                        const double *ht, int nh, int *q,
                                                        int *q_steps, const double *wt, int N,
                                                        double err, int qq) {
  double fac = lassie_bdf_order(tm, hist, ht, nh, q, q_steps, wt, N,
                                err > 0 ? 0.9 * sbg_pow(err, -1.0 / (qq + 1)) : 2.0);
  if (fac > 2.0) fac = 2.0;
  if (fac < 0.2) fac = 0.2;
  /* keep the step (and so gamma and the factorisation) unless it can
   * grow by half: small changes cost a factorisation for nothing */
  if (fac >= 1.0 && fac < 1.5) fac = 1.0;
  return fac;
}

/* The step factor after a rejected implicit step of order qq. */
static LASSIE_HD inline double lassie_bdf_reject_factor(double err, int qq) {
  double fac = isfinite(err) ? 0.9 * sbg_pow(err, -1.0 / (qq + 1)) : 0.1;
  if (fac < 0.1) fac = 0.1;
  if (fac > 0.9) fac = 0.9;
  return fac;
}

/* Output rows inside an implicit step: the weights L[0..npts) at tout of
 * the polynomial through the last npts states of the history (times ht),
 * the one whose derivative the step's formula matched ... */
static LASSIE_HD inline void lassie_bdf_interp_weights(double tout, const double *ht, int npts,
                                                       double *L) {
  for (int a = 0; a < npts; a++) {
    double l = 1;
    for (int b = 0; b < npts; b++) if (b != a) l *= (tout - ht[b]) / (ht[a] - ht[b]);
    L[a] = l;
  }
}

/* ... and its value for species j. */
static LASSIE_HD inline double lassie_bdf_interp(const double *L, double *const *hist, int npts,
                                                 int j) {
  double s = 0;
  for (int a = 0; a < npts; a++) s += L[a] * hist[a][j];
  return s;
}

/* Points of that polynomial after a step of order qq: qq + 1, as many as
 * the history has. */
static LASSIE_HD inline int lassie_bdf_interp_points(int qq, int nh) {
  return qq + 1 < nh ? qq + 1 : nh;
}

#endif /* SBG_LASSIE_BDF_H */
