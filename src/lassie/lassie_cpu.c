/* CPU engine of lassieSimulate(): RKF45 with the error test
 * |err_j| <= atol + rtol |x_j|, stiffness detection with hysteresis, and
 * variable-step BDF (orders 1-2) with modified Newton on I - gamma J, J = H D
 * analytic and sparse, solved by a dense LU that skips zeros.  Simulations of
 * a batch run in parallel (OpenMP).  Reached through ffi_lassie_simulate(). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lassie.h"
#include "lassie_common.h"
#include "portable_math.h"
#include "omp_compat.h"

/* Largest N for the dense iteration matrix of the implicit steps (2 GiB). */
#define LASSIE_DENSE_MAX 16384

void sbg_lassie_rates(const sbg_lassie_model *m, const double *k,
                      const double *x, double *v) {
  for (int i = 0; i < m->n_reactions; i++)
    v[i] = lassie_rate(m->r_ptr, m->r_sp, m->r_ord, k, x, i);
}

void sbg_lassie_dvdx(const sbg_lassie_model *m, const double *k,
                     const double *x, double *dv) {
  for (int i = 0; i < m->n_reactions; i++) {
    int b = m->r_ptr[i], c = m->r_ptr[i + 1];
    for (int e = b; e < c; e++) {
      int a = m->r_ord[e];
      double d = k[i] * a * (a > 1 ? lassie_ipow(x[m->r_sp[e]], a - 1) : 1.0);
      for (int e2 = b; e2 < c; e2++)
        if (e2 != e) d *= lassie_ipow(x[m->r_sp[e2]], m->r_ord[e2]);
      dv[e] = d;
    }
  }
}

void sbg_lassie_rhs(const sbg_lassie_model *m, const double *k, const double *x,
                    double *v, double *f) {
  sbg_lassie_rates(m, k, x, v);
  for (int l = 0; l < m->n_species; l++) {
    double s = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) s += m->h_val[q] * v[m->h_rx[q]];
    f[l] = s;
  }
}

/* f = H v and, per species, the sum of |terms| that f_j is made of: the
 * scale of its roundoff. */
static void rhs_abs(const sbg_lassie_model *m, const double *k, const double *x,
                    double *v, double *f, double *fa) {
  sbg_lassie_rates(m, k, x, v);
  for (int l = 0; l < m->n_species; l++) {
    double s = 0, a = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      double term = m->h_val[q] * v[m->h_rx[q]];
      s += term; a += fabs(term);
    }
    f[l] = s; fa[l] = a;
  }
}

/* Per-thread workspace; the dense matrix is allocated on the first implicit
 * step only, so non-stiff runs of large models never pay for it. */
typedef struct ws {
  double *x, *xn, *ks[6], *ys, *ys5, *v, *fa, *wt, *yprev, *fn, *ypred, *y, *g, *dv;
  double *P;
  int *piv, *nzbuf;
  int *pos;          /* species -> row of P (fill-reducing order) */
} ws;

static void ws_free(ws *w) {
  if (!w) return;
  free(w->x); free(w->xn); for (int i = 0; i < 6; i++) free(w->ks[i]);
  free(w->ys); free(w->ys5); free(w->v); free(w->fa); free(w->wt); free(w->yprev); free(w->fn); free(w->ypred);
  free(w->y); free(w->g); free(w->dv); free(w->P); free(w->piv); free(w->nzbuf); free(w->pos);
  memset(w, 0, sizeof(*w));
}

static int ws_alloc(ws *w, int N, int M, int nnzA) {
  memset(w, 0, sizeof(*w));
  size_t n = (size_t)(N > 0 ? N : 1);
  int ok = 1;
#define A(p, cnt) ok &= ((p) = malloc(sizeof(*(p)) * (cnt))) != NULL
  A(w->x, n); A(w->xn, n); for (int i = 0; i < 6; i++) A(w->ks[i], n);
  A(w->ys, n); A(w->ys5, n); A(w->fa, n); A(w->wt, n); A(w->v, (size_t)(M > 0 ? M : 1)); A(w->yprev, n); A(w->fn, n);
  A(w->ypred, n); A(w->y, n); A(w->g, n); A(w->dv, (size_t)(nnzA > 0 ? nnzA : 1));
  A(w->piv, n); A(w->nzbuf, n);
#undef A
  if (!ok) ws_free(w);
  return ok;
}

/* Minimum-degree order of the pattern of I - gamma J (symmetrised), by
 * explicit elimination on bitsets: eliminating species in this order keeps
 * the fill of the LU small (on BCR, 1,122 species, it makes the
 * factorisation ~100x cheaper than the natural order).  pos[species] =
 * its row.  Returns 0, or -1 without memory. */
static int min_degree_order(const sbg_lassie_model *m, int *pos) {
  const int N = m->n_species;
  const size_t W = ((size_t)N + 63) / 64;
  uint64_t *adj = calloc((size_t)N * W, sizeof(uint64_t));
  uint64_t *alive = malloc(W * sizeof(uint64_t));
  int *deg = malloc(sizeof(int) * (size_t)N), *nb = malloc(sizeof(int) * (size_t)N);
  char *gone = calloc((size_t)N, 1);
  if (!adj || !alive || !deg || !nb || !gone) {
    free(adj); free(alive); free(deg); free(nb); free(gone);
    return -1;
  }
#define SET(a, b) adj[(size_t)(a) * W + (size_t)(b) / 64] |= (uint64_t)1 << ((b) % 64)
  for (int l = 0; l < N; l++)
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      int i = m->h_rx[q];
      for (int e = m->r_ptr[i]; e < m->r_ptr[i + 1]; e++) {
        int j = m->r_sp[e];
        if (j != l) { SET(l, j); SET(j, l); }
      }
    }
#undef SET
  for (size_t b = 0; b < W; b++) alive[b] = ~(uint64_t)0;
  if (N % 64) alive[W - 1] = ((uint64_t)1 << (N % 64)) - 1;
  for (int v = 0; v < N; v++) {
    int d = 0;
    for (size_t b = 0; b < W; b++) d += __builtin_popcountll(adj[(size_t)v * W + b]);
    deg[v] = d;
  }
  for (int step = 0; step < N; step++) {
    int v = -1;
    for (int u = 0; u < N; u++) if (!gone[u] && (v < 0 || deg[u] < deg[v])) v = u;
    pos[v] = step;
    gone[v] = 1;
    alive[v / 64] &= ~((uint64_t)1 << (v % 64));
    uint64_t *av = adj + (size_t)v * W;
    int nn = 0;
    for (size_t b = 0; b < W; b++) {
      uint64_t x = av[b] & alive[b];
      while (x) { int t = __builtin_ctzll(x); nb[nn++] = (int)(b * 64 + t); x &= x - 1; }
    }
    /* the neighbours of v become a clique */
    for (int t = 0; t < nn; t++) {
      int u = nb[t];
      uint64_t *au = adj + (size_t)u * W;
      int d = 0;
      for (size_t b = 0; b < W; b++) { au[b] = (au[b] | av[b]) & alive[b]; }
      au[u / 64] &= ~((uint64_t)1 << (u % 64));
      for (size_t b = 0; b < W; b++) d += __builtin_popcountll(au[b]);
      deg[u] = d;
    }
  }
  free(adj); free(alive); free(deg); free(nb); free(gone);
  return 0;
}

/* LU with partial pivoting (the diagonal is kept while it is within a
 * factor 10 of the largest entry, which preserves the sparsity of
 * I - gamma J), skipping zero multipliers and the zero entries of the pivot
 * row: the cost follows the fill, not N^3.  Returns 0, or -1 when singular. */
static int lu_factor(double *a, int n, int *piv, int *nzbuf) {
  for (int k = 0; k < n; k++) {
    double *ak = a + (size_t)k * n;
    int p = k;
    double amax = fabs(ak[k]);
    for (int i = k + 1; i < n; i++) {
      double t = fabs(a[(size_t)i * n + k]);
      if (t > amax) { amax = t; p = i; }
    }
    if (!(amax > 0) || !isfinite(amax)) return -1;
    if (fabs(ak[k]) >= 0.1 * amax) p = k;
    piv[k] = p;
    if (p != k) {
      double *ap = a + (size_t)p * n;
      for (int j = 0; j < n; j++) { double t = ak[j]; ak[j] = ap[j]; ap[j] = t; }
    }
    int nz = 0;
    for (int j = k + 1; j < n; j++) if (ak[j] != 0) nzbuf[nz++] = j;
    double inv = 1.0 / ak[k];
    for (int i = k + 1; i < n; i++) {
      double *ai = a + (size_t)i * n;
      double l = ai[k];
      if (l == 0) continue;
      l *= inv;
      ai[k] = l;
      for (int t = 0; t < nz; t++) ai[nzbuf[t]] -= l * ak[nzbuf[t]];
    }
  }
  return 0;
}

static void lu_solve(const double *a, int n, const int *piv, double *b) {
  /* whole rows were swapped during the factorisation, so L is in the final
   * row order: permute b completely first, then substitute */
  for (int k = 0; k < n; k++) {
    int p = piv[k];
    if (p != k) { double t = b[k]; b[k] = b[p]; b[p] = t; }
  }
  for (int i = 1; i < n; i++) {
    const double *ai = a + (size_t)i * n;
    double s = b[i];
    for (int k = 0; k < i; k++) s -= ai[k] * b[k];
    b[i] = s;
  }
  for (int k = n - 1; k >= 0; k--) {
    const double *ak = a + (size_t)k * n;
    double s = b[k];
    for (int j = k + 1; j < n; j++) s -= ak[j] * b[j];
    b[k] = s / ak[k];
  }
}

/* P = I - gamma J from the stored factor D (w->dv); J = H D; rows and
 * columns in the order w->pos. */
static void build_iteration_matrix(const sbg_lassie_model *m, double gamma, ws *w) {
  int N = m->n_species;
  const int *pos = w->pos;
  memset(w->P, 0, sizeof(double) * (size_t)N * N);
  for (int l = 0; l < N; l++) {
    double *row = w->P + (size_t)pos[l] * N;
    row[pos[l]] = 1.0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      int i = m->h_rx[q];
      double gh = gamma * m->h_val[q];
      for (int e = m->r_ptr[i]; e < m->r_ptr[i + 1]; e++) row[pos[m->r_sp[e]]] -= gh * w->dv[e];
    }
  }
}

/* Gershgorin bound on the spectral radius of J: the test for leaving the
 * implicit mode (an explicit step of that size would be stable). */
static double gershgorin(const sbg_lassie_model *m, const ws *w) {
  double rho = 0;
  for (int l = 0; l < m->n_species; l++) {
    double s = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      int i = m->h_rx[q];
      for (int e = m->r_ptr[i]; e < m->r_ptr[i + 1]; e++) s += fabs(m->h_val[q] * w->dv[e]);
    }
    if (s > rho) rho = s;
  }
  return rho;
}

typedef struct sim_out {
  sbg_status st;
  double t;         /* time reached */
  int what;         /* LASSIE_FAIL_* */
} sim_out;

double sbg_lassie_initial_step(const sbg_lassie_model *m, const sbg_lassie_params *p,
                               const double *k, const double *x, double *f, double *v) {
  const int N = m->n_species;
  const double span = p->times[p->n_times - 1] - p->times[0];
  if (p->h_init > 0) return p->h_init;
  /* 1% of the time the fastest species needs to change by its own
   * tolerance scale */
  sbg_lassie_rhs(m, k, x, v, f);
  double d0 = 0, d1 = 0;
  for (int j = 0; j < N; j++) {
    double sc = p->atol + p->rtol * fabs(x[j]);
    double a = fabs(x[j]) / sc, b = fabs(f[j]) / sc;
    if (a > d0) d0 = a;
    if (b > d1) d1 = b;
  }
  double h = (d0 < 1e-5 || d1 < 1e-5) ? 1e-6 * span : 0.01 * d0 / d1;
  if (h > span) h = span;
  if (h < 1e-10 * span) h = 1e-10 * span;
  return h;
}

/* Runs one simulation; with `start` it continues one that another engine
 * (the GPU's explicit steps) brought to start->t, in implicit mode. */
static void integrate(const sbg_lassie_model *m, const sbg_lassie_params *p,
                      const double *k, const double *x0, double *out, double *stats,
                      ws *w, sbg_ctx *poll_ctx, int sim, int n_sims, sim_out *so,
                      const sbg_lassie_start *start) {
  const int N = m->n_species, nt = p->n_times;
  const double rtol = p->rtol, atol = p->atol;
  double *x = w->x, *xn = w->xn, **K = w->ks;
  double st[SBG_LASSIE_N_STATS] = {0};
  double t = p->times[0];
  const double tend = p->times[nt - 1], span = tend - t;
  so->st = SBG_OK; so->what = LASSIE_OK;

  memcpy(x, x0, sizeof(double) * N);
  int mode = p->method == SBG_LASSIE_BDF ? SBG_LASSIE_BDF : SBG_LASSIE_RKF45;
  double h;
  int next = 1;
  double attempts = 0;
  if (start) {
    memcpy(st, stats, sizeof(st));
    t = start->t; h = start->h; next = start->next; attempts = start->attempts;
    mode = SBG_LASSIE_BDF;
  } else {
    for (int j = 0; j < N; j++) out[(size_t)j * nt] = x[j];
    h = sbg_lassie_initial_step(m, p, k, x, K[0], w->v);
    if (!(p->h_init > 0)) st[SBG_LASSIE_ST_RHS]++;
  }
  unsigned rej_hist = 0;             /* last attempts of RKF, 1 = rejected */
  int stiff_count = 0, calm_rk = 0;
  double prev_h = 0;                 /* size of the last step if accepted by RKF45 */
  /* BDF state */
  int have_prev = 0, need_jac = 1, jac_fresh = 0, factored = 0, fn_valid = 0;
  double h_prev = 0, gamma_fact = 0, rho = 0;
  int bdf_steps = 0, calm = 0, jac_steps = 0;

  while (next < nt) {
    double tout = p->times[next];
    if (++attempts > p->max_steps) {
      so->st = SBG_ERR_NUMERIC; so->what = LASSIE_FAIL_MAXSTEPS; so->t = t; break;
    }
    if (poll_ctx && ((long)attempts & 255) == 0) {
      sbg_status ps = sbg_poll(poll_ctx, (t - p->times[0]) / span);
      if (ps != SBG_OK) { so->st = ps; so->what = LASSIE_FAIL_INTERRUPT; so->t = t; break; }
    }
    double hmin = 64 * DBL_EPSILON * fmax(fabs(t), fabs(tend));
    /* land exactly on the next output time; split a near miss in two so no
     * sliver of a step is left */
    double hs = h;
    int hits = 0;
    if (t + 1.05 * h >= tout) { hs = tout - t; hits = 1; }
    else if (t + 2 * h > tout) hs = 0.5 * (tout - t);
    if (mode == SBG_LASSIE_BDF && have_prev && hs > 2 * h_prev) { hs = 2 * h_prev; hits = 0; }

    if (mode == SBG_LASSIE_RKF45) {
      sbg_lassie_rhs(m, k, x, w->v, K[0]);
      st[SBG_LASSIE_ST_RHS]++;
      if (prev_h > 0) {
        double num = 0, den = 0;
        for (int j = 0; j < N; j++) {
          double dk = K[0][j] - K[4][j], dy = x[j] - w->ys5[j];
          num += dk * dk; den += dy * dy;
        }
        double hrho = den > 0 ? prev_h * sqrt(num / den) : 0.0;
        if (hrho > LASSIE_STIFF_HRHO) { stiff_count++; calm_rk = 0; }
        else if (++calm_rk >= LASSIE_NONSTIFF_RESET) stiff_count = 0;
        if (p->method == SBG_LASSIE_AUTO && stiff_count >= LASSIE_STIFF_COUNT) {
          mode = SBG_LASSIE_BDF;
          st[SBG_LASSIE_ST_SWITCHES]++;
          have_prev = 0; need_jac = 1; factored = 0; fn_valid = 0;
          bdf_steps = 0; calm = 0; rej_hist = 0; stiff_count = 0; calm_rk = 0; prev_h = 0;
        }
      }
    }
    if (mode == SBG_LASSIE_RKF45) {
      double err = lassie_rkf45_step(m, k, x, hs, K, w->ys, w->ys5, xn, w->v, rtol, atol, sbg_lassie_rhs);
      st[SBG_LASSIE_ST_RHS] += 5;
      if (err <= 1.0) {
        t = hits ? tout : t + hs;
        memcpy(x, xn, sizeof(double) * N);
        st[SBG_LASSIE_ST_STEPS]++;
        rej_hist <<= 1;
        prev_h = hs;
        double fac = err > 0 ? 0.9 * sbg_pow(err, -0.2) : 5.0;
        if (fac > 5.0) fac = 5.0;
        double hn = hs * fac;
        h = (hits && hn < h) ? h : hn;
        if (hits) { for (int j = 0; j < N; j++) out[(size_t)j * nt + next] = x[j]; next++; }
      } else {
        st[SBG_LASSIE_ST_REJECTED]++;
        rej_hist = (rej_hist << 1) | 1u;
        prev_h = 0;
        double fac = isfinite(err) ? 0.9 * sbg_pow(err, -0.25) : 0.1;
        if (fac < 0.1) fac = 0.1;
        if (fac > 0.9) fac = 0.9;
        h = hs * fac;
        int repeated = lassie_popcount16(rej_hist) >= LASSIE_STIFF_REJECTIONS;
        int collapsed = h < LASSIE_STIFF_COLLAPSE * span;
        if (p->method == SBG_LASSIE_AUTO && (repeated || collapsed)) {
          mode = SBG_LASSIE_BDF;
          st[SBG_LASSIE_ST_SWITCHES]++;
          have_prev = 0; need_jac = 1; factored = 0; fn_valid = 0;
          bdf_steps = 0; calm = 0; rej_hist = 0; stiff_count = 0; calm_rk = 0;
        } else if (h < hmin) {
          so->st = SBG_ERR_NUMERIC; so->what = LASSIE_FAIL_HMIN; so->t = t; break;
        }
      }
      continue;
    }

    /* ---- implicit step (BDF1 after a switch or restart, then BDF2) ---- */
    if (!w->P) {
      if (N > LASSIE_DENSE_MAX) {
        so->st = SBG_ERR_INPUT; so->what = LASSIE_FAIL_DENSE; so->t = t; break;
      }
      w->P = malloc(sizeof(double) * (size_t)N * N);
      w->pos = malloc(sizeof(int) * (size_t)N);
      if (w->P && w->pos && min_degree_order(m, w->pos) != 0) { free(w->pos); w->pos = NULL; }
      if (!w->P || !w->pos) {
        free(w->P); w->P = NULL; free(w->pos); w->pos = NULL;
        so->st = SBG_ERR_ALLOC; so->what = LASSIE_FAIL_ALLOC; so->t = t; break;
      }
    }
    if (!fn_valid) { sbg_lassie_rhs(m, k, x, w->v, w->fn); st[SBG_LASSIE_ST_RHS]++; fn_valid = 1; }
    int q = have_prev ? 2 : 1;
    double gamma, a1 = 1, a2 = 0;
    if (q == 1) {
      gamma = hs;
      for (int j = 0; j < N; j++) w->ypred[j] = x[j] + hs * w->fn[j];
    } else {
      double om = hs / h_prev, den = 1 + 2 * om;
      a1 = (1 + om) * (1 + om) / den; a2 = -om * om / den;
      gamma = hs * (1 + om) / den;
      for (int j = 0; j < N; j++) {
        double c = (w->yprev[j] - x[j] + w->fn[j] * h_prev) / (h_prev * h_prev);
        w->ypred[j] = x[j] + w->fn[j] * hs + c * hs * hs;
      }
    }
    if (need_jac) {
      sbg_lassie_dvdx(m, k, x, w->dv);
      st[SBG_LASSIE_ST_JAC]++;
      rho = gershgorin(m, w);
      need_jac = 0; jac_fresh = 1; factored = 0; jac_steps = 0;
    }
    if (!factored || fabs(gamma / gamma_fact - 1) > 0.3) {
      build_iteration_matrix(m, gamma, w);
      st[SBG_LASSIE_ST_FACTOR]++;
      if (lu_factor(w->P, N, w->piv, w->nzbuf) != 0) {
        factored = 0;
        st[SBG_LASSIE_ST_REJECTED]++;
        h = 0.25 * hs;
        if (h < hmin) { so->st = SBG_ERR_NUMERIC; so->what = LASSIE_FAIL_HMIN; so->t = t; break; }
        continue;
      }
      factored = 1; gamma_fact = gamma;
    }
    /* modified Newton on G(y) = y - c - gamma f(y), c = a1 x + a2 yprev */
    double *y = w->y, *g = w->g;
    memcpy(y, w->ypred, sizeof(double) * N);
    double scale = 2.0 / (1.0 + gamma / gamma_fact), dn_prev = 0;
    int conv = 0;
    for (int it = 0; it < LASSIE_NEWTON_MAXIT; it++) {
      rhs_abs(m, k, y, w->v, g, w->fa);
      st[SBG_LASSIE_ST_RHS]++; st[SBG_LASSIE_ST_NEWTON]++;
      for (int j = 0; j < N; j++) {
        double older = q == 2 ? a2 * w->yprev[j] : 0.0;   /* yprev unset at order 1 */
        double c = a1 * x[j] + older;
        /* weights of the Newton and error tests: the tolerance, but never
         * below the roundoff of the residual (atol = 1e-12 next to amounts
         * of 1e6 would otherwise ask for the impossible) */
        double floor = LASSIE_ROUNDOFF * DBL_EPSILON *
                       (fabs(y[j]) + fabs(a1 * x[j]) + fabs(older) + gamma * w->fa[j]);
        double wj = atol + rtol * fabs(x[j]);
        w->wt[j] = wj > floor ? wj : floor;
        g[j] = -(y[j] - c - gamma * g[j]);
      }
      for (int j = 0; j < N; j++) w->ys[w->pos[j]] = g[j];
      lu_solve(w->P, N, w->piv, w->ys);
      for (int j = 0; j < N; j++) g[j] = w->ys[w->pos[j]];
      /* root-mean-square norm: a max norm would ask species near zero to
       * converge below the roundoff of the large ones */
      double dn = 0;
      for (int j = 0; j < N; j++) {
        double d = scale * g[j];
        y[j] += d;
        double r = d / w->wt[j];
        dn += r * r;
      }
      dn = sqrt(dn / N);
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
      st[SBG_LASSIE_ST_REJECTED]++;
      if (!jac_fresh) { need_jac = 1; continue; }
      h = 0.25 * hs; factored = 0;
      if (h < hmin) { so->st = SBG_ERR_NUMERIC; so->what = LASSIE_FAIL_NEWTON; so->t = t; break; }
      continue;
    }
    double cq = q == 1 ? 0.5 : 0.4, err = 0;
    for (int j = 0; j < N; j++) {
      double wj = atol + rtol * fmax(fabs(x[j]), fabs(y[j]));
      double r = cq * fabs(y[j] - w->ypred[j]) / (wj > w->wt[j] ? wj : w->wt[j]);
      err = lassie_maxnan(err, r);
    }
    double expo = -1.0 / (q + 1);
    if (!(err <= 1.0)) {
      st[SBG_LASSIE_ST_REJECTED]++;
      double fac = isfinite(err) ? 0.9 * sbg_pow(err, expo) : 0.1;
      if (fac < 0.1) fac = 0.1;
      if (fac > 0.9) fac = 0.9;
      h = hs * fac;
      if (h < hmin) { so->st = SBG_ERR_NUMERIC; so->what = LASSIE_FAIL_HMIN; so->t = t; break; }
      continue;
    }
    /* accept */
    memcpy(w->yprev, x, sizeof(double) * N);
    memcpy(x, y, sizeof(double) * N);
    h_prev = hs; have_prev = 1; fn_valid = 0; jac_fresh = 0;
    t = hits ? tout : t + hs;
    st[SBG_LASSIE_ST_STEPS]++; st[SBG_LASSIE_ST_IMPLICIT]++;
    double fac = err > 0 ? 0.9 * sbg_pow(err, expo) : 2.0;
    if (fac > 2.0) fac = 2.0;
    if (fac < 0.2) fac = 0.2;
    double hn = hs * fac;
    h = (hits && hn < h) ? h : hn;
    if (hits) { for (int j = 0; j < N; j++) out[(size_t)j * nt + next] = x[j]; next++; }
    if (++jac_steps >= LASSIE_JAC_REUSE) need_jac = 1;
    /* hysteresis: leave the implicit mode only after a minimum stay and
     * when explicit steps of this size have been stable for a while */
    bdf_steps++;
    if (p->method == SBG_LASSIE_AUTO) {
      calm = (bdf_steps >= LASSIE_BDF_MIN_STAY && hn * rho < LASSIE_CALM_HRHO) ? calm + 1 : 0;
      if (calm >= LASSIE_CALM_STEPS) {
        mode = SBG_LASSIE_RKF45;
        st[SBG_LASSIE_ST_SWITCHES]++;
        rej_hist = 0; calm = 0; have_prev = 0; stiff_count = 0; calm_rk = 0; prev_h = 0;
      }
    }
  }
  if (so->st != SBG_OK) {
    /* rows not reached are NA-like: fill with NaN so nothing stale leaks */
    for (int r = next; r < nt; r++)
      for (int j = 0; j < N; j++) out[(size_t)j * nt + r] = NAN;
  }
  (void)sim; (void)n_sims;
  memcpy(stats, st, sizeof(st));
}

sbg_status sbg_lassie_cpu(const sbg_lassie_model *m, const sbg_lassie_params *p,
                          sbg_lassie_result *r, sbg_ctx *ctx) {
  const int N = m->n_species, M = m->n_reactions, S = p->n_sims;
  const int nnzA = m->r_ptr[M];
  int nth = ctx->n_threads < S ? ctx->n_threads : S;
  if (nth < 1) nth = 1;
  sbg_status st = SBG_OK;
  ws *w = calloc((size_t)nth, sizeof(ws));
  sim_out *so = calloc((size_t)S, sizeof(sim_out));
  if (!w || !so) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory"); goto done; }
  for (int i = 0; i < nth; i++)
    if (!ws_alloc(&w[i], N, M, nnzA)) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory"); goto done; }

  const size_t blk = (size_t)p->n_times * N;
  if (S == 1) {
    integrate(m, p, p->rates, p->initial, r->out, r->stats, &w[0], ctx, 0, 1, &so[0], NULL);
  } else {
    /* chunks of simulations between polls, each simulation on one thread */
    int chunk = 4 * nth;
    for (int s0 = 0; s0 < S; s0 += chunk) {
      int s1 = s0 + chunk < S ? s0 + chunk : S;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
      for (int s = s0; s < s1; s++) {
        ws *ww = &w[omp_get_thread_num()];
        integrate(m, p, p->rates + (p->rates_per_sim ? (size_t)s * M : 0),
                  p->initial + (p->initial_per_sim ? (size_t)s * N : 0),
                  r->out + (size_t)s * blk, r->stats + (size_t)s * SBG_LASSIE_N_STATS,
                  ww, NULL, s, S, &so[s], NULL);
      }
      int failed = 0;
      for (int s = s0; s < s1; s++) failed |= so[s].st != SBG_OK;
      if (failed) break;
      st = sbg_poll(ctx, (double)s1 / S);
      if (st != SBG_OK) goto done;
    }
  }
  for (int s = 0; s < S; s++) {
    if (so[s].st == SBG_OK) continue;
    st = lassie_fail(ctx, so[s].st, so[s].what, so[s].t, s, S, p->max_steps, N);
    break;
  }
done:
  if (w) for (int i = 0; i < nth; i++) ws_free(&w[i]);
  free(w);
  free(so);
  return st;
}

sbg_status sbg_lassie_cpu_continue(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                   int sim, const double *x, double *out, double *stats,
                                   const sbg_lassie_start *start, sbg_ctx *ctx) {
  ws w;
  sim_out so;
  if (!ws_alloc(&w, m->n_species, m->n_reactions, m->r_ptr[m->n_reactions]))
    return sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory");
  const double *k = p->rates + (p->rates_per_sim ? (size_t)sim * m->n_reactions : 0);
  integrate(m, p, k, x, out, stats, &w, ctx, sim, p->n_sims, &so, start);
  ws_free(&w);
  if (so.st == SBG_OK) return SBG_OK;
  return lassie_fail(ctx, so.st, so.what, so.t, sim, p->n_sims, p->max_steps, m->n_species);
}
