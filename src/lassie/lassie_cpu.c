/* CPU engine of lassieSimulate(): explicit Dormand-Prince 5(4) steps (or
 * LASSIE's RKF45) with the error test |err_j| <= atol + rtol |x_j|, stiffness detection with hysteresis, and
 * variable-step BDF (orders 1-5) with modified Newton on I - gamma J, J = H D
 * analytic and sparse, solved by a sparse LU (fill-reducing order and
 * symbolic pattern computed once; a dense LU with pivoting as fallback).  Steps
 * follow the accuracy and the output times are interpolated (DP5's continuous
 * extension, the BDF history).  Simulations of a batch run in parallel (OpenMP).  Reached through ffi_lassie_simulate(). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lassie.h"
#include "lassie_common.h"
#include "lassie_bdf.h"
#include "portable_math.h"
#include "omp_compat.h"

/* Largest N for the implicit steps (the minimum-degree order keeps an
 * N x N bitset; the dense fallback LU an N x N matrix, 2 GiB). */
#define LASSIE_DENSE_MAX 16384

double sbg_lassie_law_eval(const int *code, const double *cval, const double *x, int oj, double ov) {
  return lassie_law_eval(code, cval, x, oj, ov);
}

void sbg_lassie_law_rates(const sbg_lassie_model *m, const double *k, const double *x, double *v) {
  for (int i = 0; i < m->n_reactions; i++) v[i] = lassie_law_rate(m, k, x, i);
}

void sbg_lassie_rates(const sbg_lassie_model *m, const double *k,
                      const double *x, double *v) {
  if (m->law) { sbg_lassie_law_rates(m, k, x, v); return; }
  for (int i = 0; i < m->n_reactions; i++)
    v[i] = lassie_rate(m->r_ptr, m->r_sp, m->r_ord, k, x, i);
}

void sbg_lassie_dvdx(const sbg_lassie_model *m, const double *k,
                     const double *x, double *dv) {
  lassie_team tm = lassie_team_host();
  lassie_dvdx_team(&tm, m, k, x, dv);
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

/* The blocks of LASSIE_LU_BLOCK rows (lu->elim in turn) that
 * lu_eliminate_rows() takes together, each with the union of its rows' L
 * columns k, ascending, and the rows (bits) that have each: block b's are
 * k[first[b]] .. k[first[b + 1] - 1], none for a block taken row by row. */
typedef struct lu_blocks {
  int *first, *k;
  unsigned char *rows;
} lu_blocks;

static void lu_blocks_free(lu_blocks *bl) {
  free(bl->first); free(bl->k); free(bl->rows);
  bl->first = bl->k = NULL; bl->rows = NULL;
}

/* Per-thread workspace; the dense matrix is allocated on the first implicit
 * step only, so non-stiff runs of large models never pay for it. */
typedef struct ws {
  double *x, *xn, *ks[LASSIE_MAX_STAGES], *ys, *ys5, *v, *wt, *yprev, *fn, *ypred, *y, *g, *dv;
  double *P;
  int *piv, *nzbuf;
  int *pos;          /* species -> row of P (fill-reducing order) */
  int *ipos;         /* row -> species */
  /* sparse LU of P in the order pos, pattern from lu_symbolic() (computed
   * once per workspace and model); per row: L columns ascending, then the
   * diagonal (lu_diag), then U's columns */
  int *lu_ptr, *lu_col, *lu_diag;
  int *lu_plan;      /* the plan of the numeric phases (sbg_lassie_lu_plan) */
  lassie_lu lu;      /* all of the above */
  double *lu_val, *lu_x;
  lu_blocks lu_blk;         /* lu_blocks_plan() */
  int dense;         /* 1: the last factorisation is the dense fallback in P */
  /* the dense fallback's factors compressed to their nonzeros (same row
   * layout as the sparse LU: L, diagonal, U), so that each Newton solve
   * costs the fill of the factors and not N^2 */
  int *dz_ptr, *dz_col, *dz_diag;
  double *dz_val;
  size_t dz_cap;
  /* BDF history: hist[0] the current state, hist[j] j accepted steps back */
  double *hist[LASSIE_BDF_HIST], *cvec;
} ws;

static void ws_free(ws *w) {
  if (!w) return;
  free(w->x); free(w->xn); for (int i = 0; i < LASSIE_MAX_STAGES; i++) free(w->ks[i]);
  free(w->ys); free(w->ys5); free(w->v); free(w->wt); free(w->yprev); free(w->fn); free(w->ypred);
  free(w->y); free(w->g); free(w->dv); free(w->P); free(w->piv); free(w->nzbuf); free(w->pos);
  for (int i = 0; i < LASSIE_BDF_HIST; i++) free(w->hist[i]);
  free(w->cvec);
  free(w->ipos); free(w->lu_ptr); free(w->lu_col); free(w->lu_diag); free(w->lu_val); free(w->lu_x); lu_blocks_free(&w->lu_blk); free(w->lu_plan);
  free(w->dz_ptr); free(w->dz_col); free(w->dz_diag); free(w->dz_val);
  memset(w, 0, sizeof(*w));
}

static int ws_alloc(ws *w, int N, int M, int nnzA) {
  memset(w, 0, sizeof(*w));
  size_t n = (size_t)(N > 0 ? N : 1);
  int ok = 1;
#define A(p, cnt) ok &= ((p) = malloc(sizeof(*(p)) * (cnt))) != NULL
  A(w->x, n); A(w->xn, n); for (int i = 0; i < LASSIE_MAX_STAGES; i++) A(w->ks[i], n);
  A(w->ys, n); A(w->ys5, n); A(w->wt, n); A(w->v, (size_t)(M > 0 ? M : 1)); A(w->yprev, n); A(w->fn, n);
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

/* Compresses the dense factors in a (after lu_factor) to their nonzeros,
 * row by row in ascending columns.  Returns 0, or -1 without memory. */
static int lu_compress(const double *a, int n, ws *w) {
  if (!w->dz_ptr) {
    w->dz_ptr = malloc(sizeof(int) * ((size_t)n + 1));
    w->dz_diag = malloc(sizeof(int) * (size_t)n);
    if (!w->dz_ptr || !w->dz_diag) return -1;
  }
  size_t nnz = 0;
  for (size_t q = 0; q < (size_t)n * n; q++) nnz += a[q] != 0;
  nnz += (size_t)n;   /* diagonal entries are kept even when zero-valued */
  if (nnz > w->dz_cap) {
    free(w->dz_col); free(w->dz_val);
    w->dz_col = malloc(sizeof(int) * nnz);
    w->dz_val = malloc(sizeof(double) * nnz);
    w->dz_cap = nnz;
    if (!w->dz_col || !w->dz_val) { free(w->dz_col); free(w->dz_val); w->dz_col = NULL; w->dz_val = NULL; w->dz_cap = 0; return -1; }
  }
  size_t e = 0;
  w->dz_ptr[0] = 0;
  for (int i = 0; i < n; i++) {
    const double *ai = a + (size_t)i * n;
    for (int j = 0; j < n; j++) {
      if (j == i) w->dz_diag[i] = (int)e;
      else if (ai[j] == 0) continue;
      w->dz_col[e] = j; w->dz_val[e] = ai[j]; e++;
    }
    w->dz_ptr[i + 1] = (int)e;
  }
  return 0;
}

/* Solves with the compressed dense factors.  The sums run over the same
 * entries in the same order as a dense substitution less its zero terms,
 * so the result is the dense one's. */
static void lu_solve(const ws *w, int n, double *b) {
  const int *piv = w->piv;
  /* whole rows were swapped during the factorisation, so L is in the final
   * row order: permute b completely first, then substitute */
  for (int k = 0; k < n; k++) {
    int p = piv[k];
    if (p != k) { double t = b[k]; b[k] = b[p]; b[p] = t; }
  }
  lassie_lu_substitute(n, w->dz_ptr, w->dz_col, w->dz_diag, w->dz_val, b);
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

/* Pattern of the LU factors of P = I - gamma J (rows and columns in the
 * order pos) without pivoting, row by row: row i of L+U is row i of P plus,
 * for each k < i in it (ascending, fill included), row k of U.  Computed
 * once; every factorisation reuses it.  Returns 0, or -1 without memory. */
static int lu_symbolic_pattern(const sbg_lassie_model *m, const int *pos, const int *ipos,
                               int **ptr_out, int **col_out, int **diag_out, size_t *nnz_out) {
  const int N = m->n_species;
  size_t cap = (size_t)N * 8 + 64, nnz = 0;
  int *ptr = malloc(sizeof(int) * ((size_t)N + 1)), *diag = malloc(sizeof(int) * (size_t)N);
  int *col = malloc(sizeof(int) * cap);
  int *flag = malloc(sizeof(int) * (size_t)N), *lc = malloc(sizeof(int) * (size_t)N),
      *uc = malloc(sizeof(int) * (size_t)N);
  if (!ptr || !diag || !col || !flag || !lc || !uc) goto fail;
  for (int j = 0; j < N; j++) flag[j] = -1;
  ptr[0] = 0;
  for (int i = 0; i < N; i++) {
    int l = ipos[i], nl = 0, nu = 0;
    flag[i] = i;
    /* row i of P: columns pos[j] of the reactants of the reactions in H's row l */
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
      int r = m->h_rx[q];
      for (int e = m->r_ptr[r]; e < m->r_ptr[r + 1]; e++) {
        int c = pos[m->r_sp[e]];
        if (flag[c] == i) continue;
        flag[c] = i;
        if (c > i) uc[nu++] = c;
        else {   /* insert into the ascending list of L columns */
          int t = nl++;
          while (t > 0 && lc[t - 1] > c) { lc[t] = lc[t - 1]; t--; }
          lc[t] = c;
        }
      }
    }
    /* fill: eliminating with row k brings in U's row k */
    for (int t = 0; t < nl; t++) {
      int k = lc[t];
      for (int p = diag[k] + 1; p < ptr[k + 1]; p++) {
        int c = col[p];
        if (flag[c] == i) continue;
        flag[c] = i;
        if (c > i) uc[nu++] = c;
        else {   /* c > k: lands after position t */
          int u = nl++;
          while (u > t + 1 && lc[u - 1] > c) { lc[u] = lc[u - 1]; u--; }
          lc[u] = c;
        }
      }
    }
    if (nnz + (size_t)nl + (size_t)nu + 1 > cap) {
      while (nnz + (size_t)nl + (size_t)nu + 1 > cap) cap *= 2;
      int *c2 = realloc(col, sizeof(int) * cap);
      if (!c2) goto fail;
      col = c2;
    }
    memcpy(col + nnz, lc, sizeof(int) * (size_t)nl); nnz += (size_t)nl;
    diag[i] = (int)nnz; col[nnz++] = i;
    memcpy(col + nnz, uc, sizeof(int) * (size_t)nu); nnz += (size_t)nu;
    if (nnz > (size_t)INT32_MAX / 2) goto fail;
    ptr[i + 1] = (int)nnz;
  }
  *ptr_out = ptr; *col_out = col; *diag_out = diag; *nnz_out = nnz;
  free(flag); free(lc); free(uc);
  return 0;
fail:
  free(ptr); free(diag); free(col); free(flag); free(lc); free(uc);
  return -1;
}

/* 0 .. n - 1 by count, most first (ties by index): a counting sort */
static int order_by_count(const int *count, int n, int *order) {
  int most = 0;
  for (int j = 0; j < n; j++) if (count[j] > most) most = count[j];
  int *at = calloc((size_t)most + 2, sizeof(int));
  if (!at) return -1;
  for (int j = 0; j < n; j++) at[most - count[j] + 1]++;
  for (int t = 1; t <= most + 1; t++) at[t] += at[t - 1];
  for (int j = 0; j < n; j++) order[at[most - count[j]]++] = j;
  free(at);
  return 0;
}

int sbg_lassie_res_plan(const sbg_lassie_model *m, int **rate_out, int **ent_out, int *len_out,
                        int **slot_ptr_out, int *n_slots_out, int **g_order_out) {
  const int N = m->n_species, M = m->n_reactions, S = LASSIE_SUM_STREAMS;
  int rc = -1, n_slots = 0, len = 0;
  int *slot_ptr = malloc(sizeof(int) * ((size_t)N + 1)), *ent = NULL;
  int *rate = malloc(sizeof(int) * LASSIE_LU_ENTRY * ((size_t)M + 1));
  int *g_order = malloc(sizeof(int) * ((size_t)N + 1)), *g_count = malloc(sizeof(int) * ((size_t)N + 1));
  int *first = NULL, *plen = NULL, *owner = NULL, *by_len = NULL;
  long load[LASSIE_SUM_STREAMS] = {0};
  if (!slot_ptr || !rate || !g_order || !g_count) goto done;
  for (int l = 0; l < N; l++) {
    g_count[l] = 0;
    for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++)
      g_count[l] += m->r_ptr[m->h_rx[q] + 1] - m->r_ptr[m->h_rx[q]];
  }
  if (order_by_count(g_count, N, g_order) != 0) goto done;
  for (int i = 0; i < M; i++) {
    const int b = m->r_ptr[i], n = m->r_ptr[i + 1] - b;
    int *e = rate + (size_t)LASSIE_LU_ENTRY * i;
    e[0] = n > 0 ? m->r_sp[b] : -1; e[1] = n > 0 ? m->r_ord[b] : 0;
    e[2] = n > 1 ? m->r_sp[b + 1] : -1; e[3] = n > 1 ? m->r_ord[b + 1] : 0;
    if (n > 2) e[3] = -e[3];
  }
  slot_ptr[0] = 0;
  for (int j = 0; j < N; j++) slot_ptr[j + 1] = slot_ptr[j] + lassie_sum_parts(m->h_ptr[j + 1] - m->h_ptr[j]);
  n_slots = slot_ptr[N];
  /* each part (slot): its first term and length */
  first = malloc(sizeof(int) * ((size_t)n_slots + 1));
  plen = malloc(sizeof(int) * ((size_t)n_slots + 1));
  owner = malloc(sizeof(int) * ((size_t)n_slots + 1));
  by_len = malloc(sizeof(int) * ((size_t)n_slots + 1));
  if (!first || !plen || !owner || !by_len) goto done;
  for (int j = 0; j < N; j++) {
    const int q0 = m->h_ptr[j], q1 = m->h_ptr[j + 1], pl = lassie_sum_part_len(q1 - q0);
    for (int p = slot_ptr[j]; p < slot_ptr[j + 1]; p++) {
      first[p] = q0 + (p - slot_ptr[j]) * pl;
      plen[p] = first[p] + pl < q1 ? pl : q1 - first[p];
    }
  }
  /* the parts longest first, each to the stream with the fewest terms so
   * far (the first of equals) */
  if (order_by_count(plen, n_slots, by_len) != 0) goto done;
  for (int i = 0; i < n_slots; i++) {
    const int p = by_len[i];
    int best = 0;
    for (int st = 1; st < S; st++) if (load[st] < load[best]) best = st;
    owner[p] = best;
    load[best] += plen[p];
    if (load[best] > len) len = (int)load[best];
  }
  ent = malloc(sizeof(int) * LASSIE_LU_ENTRY * ((size_t)len * S + 1));
  if (!ent) goto done;
  for (long st = 0; st < S; st++) load[st] = 0;
  for (int i = 0; i < n_slots; i++) {
    const int p = by_len[i], st = owner[p];
    for (int q = first[p]; q < first[p] + plen[p]; q++) {
      int *e = ent + LASSIE_LU_ENTRY * ((size_t)load[st]++ * S + st);
      e[0] = m->h_rx[q];
      e[1] = q == first[p] + plen[p] - 1 ? p : -1;
      memcpy(e + 2, m->h_val + q, sizeof(double));   /* the low half, then the high one */
    }
  }
  for (int st = 0; st < S; st++)
    for (long r = load[st]; r < len; r++) {
      int *e = ent + LASSIE_LU_ENTRY * ((size_t)r * S + st);
      e[0] = 0; e[1] = -1; e[2] = 0; e[3] = 0;
    }
  *rate_out = rate; *ent_out = ent; *len_out = len; *slot_ptr_out = slot_ptr; *n_slots_out = n_slots;
  *g_order_out = g_order;
  rate = NULL; ent = NULL; slot_ptr = NULL; g_order = NULL;
  rc = 0;
done:
  free(rate); free(slot_ptr); free(ent); free(g_order); free(g_count); free(first); free(plen); free(owner); free(by_len);
  return rc;
}

int sbg_lassie_lu_pattern(const sbg_lassie_model *m, int *pos, int *ipos, int **ptr,
                          int **col, int **diag, size_t *nnz) {
  if (min_degree_order(m, pos) != 0) return -1;
  for (int j = 0; j < m->n_species; j++) ipos[pos[j]] = j;
  return lu_symbolic_pattern(m, pos, ipos, ptr, col, diag, nnz);
}

/* The device's implicit steps pay once a batch gives each host thread
 * enough simulations.  A simulation's implicit steps take a device team far
 * longer than a host core (the sparse LU's chains of dependent loads), but
 * the device runs a thousand simulations in little more than the time of
 * one.  The thresholds below come from inst/bench/lassie-bdf.R's crossover
 * section (device against host, method "bdf"; see BENCHMARKS.md,
 * lassieSimulate): on models of 354 to 504 species a warp per simulation
 * pays from 8 simulations per host thread (the host wins at 4); teams
 * smaller than a warp (Haugh2b, 12 species: one to eight lanes a
 * simulation, lassie_gpu_bdf.cu) from 32 per thread, where the device took
 * 0.032-0.040 s against the host's 0.039-0.048 s on 8 and 32 threads (at
 * 16 per thread the two were even).  Larger models
 * than LASSIE_DEVICE_BDF_MAX_N keep the host's (on BCR, 1,122 species, the
 * device was slower at every batch size measured). */
#define LASSIE_DEVICE_BDF_PER_THREAD_WARP 8
#define LASSIE_DEVICE_BDF_PER_THREAD_LANE 32
#define LASSIE_DEVICE_BDF_MAX_N 1024
int sbg_lassie_device_bdf_pays(int n_species, int n_sims, int threads) {
  const double per = n_species >= LASSIE_TEAM_MIN_N ? LASSIE_DEVICE_BDF_PER_THREAD_WARP
                                                    : LASSIE_DEVICE_BDF_PER_THREAD_LANE;
  if (threads < 1) threads = 1;
  return n_species <= LASSIE_DEVICE_BDF_MAX_N && (double)n_sims >= per * threads;
}

/* A warp's time in the model the passes are planned by: a pass costs
 * LU_PASS_COST (its loads of the schedule, the rows' bounds, the write),
 * each term a lane adds LU_TERM_COST (a dependent add; its loads overlap),
 * each step of the tree LU_STEP_COST (a shuffle and an add), and each term
 * a lane has beyond the LASSIE_LU_AHEAD loaded ahead LU_SPILL_COST more
 * (its loads in the pass's chain: Chen's factors had 22 of 113 passes with
 * such terms, 1 with this cost, for 21 more steps of the trees). */
#define LU_PASS_COST 18
#define LU_TERM_COST 1
#define LU_STEP_COST 4
#define LU_SPILL_COST 12
static long lu_pass_cost(int most_terms, int tree_steps) {
  const int spill = most_terms > LASSIE_LU_AHEAD ? most_terms - LASSIE_LU_AHEAD : 0;
  return LU_PASS_COST + LU_TERM_COST * most_terms + LU_STEP_COST * tree_steps + LU_SPILL_COST * spill;
}

/* log2 of the lanes for a row of n terms at most `chunk` terms per lane */
static int lu_row_wlog(int n, int chunk) {
  int w = 0;
  while (w < 5 && (1 << w) * chunk < n) w++;
  return w;
}

/* Builds (emit) or costs (!emit) the passes of the level rows[0..nr) (row
 * r's terms rb[r] .. re[r]) with at most `chunk` terms per lane: rows by
 * decreasing width, each pass filled in turn (widths are powers of 2 taken
 * largest first, so each row's lanes stay aligned).  Emitting writes the
 * rows' widths to wl[] and the passes from pass / pass_w[*np] on. */
static long lu_level_passes(const int *rows, const int *rb, const int *re, int nr, int chunk,
                            int emit, int *wl, int *pass, int *pass_w, int *np) {
  long cost = 0;
  int fill = LASSIE_LU_WARP, pmax = 0, pw = 0;
  for (int w = 5; w >= 0; w--)
    for (int r = 0; r < nr; r++) {
      const int i = rows[r], n = re[i] - rb[i];
      if (lu_row_wlog(n, chunk) != w) continue;
      const int W = 1 << w, per = (n + W - 1) / W;
      if (fill + W > LASSIE_LU_WARP) {   /* a new pass */
        if (fill < LASSIE_LU_WARP || pmax || pw) cost += lu_pass_cost(pmax, pw);
        fill = 0; pmax = 0; pw = w;
        if (emit) {
          int *e = pass + (size_t)*np * LASSIE_LU_WARP * LASSIE_LU_ENTRY;
          for (int l = 0; l < LASSIE_LU_WARP; l++, e += LASSIE_LU_ENTRY) {
            e[0] = -1; e[1] = -1; e[2] = 0; e[3] = 1 << 8;
          }
          pass_w[*np] = w;
          (*np)++;
        }
      }
      if (per > pmax) pmax = per;
      if (emit) {
        wl[i] = w;
        int *e = pass + ((size_t)(*np - 1) * LASSIE_LU_WARP + fill) * LASSIE_LU_ENTRY;
        for (int v = 0; v < W; v++, e += LASSIE_LU_ENTRY) {
          e[0] = rb[i] + v; e[1] = re[i]; e[2] = i; e[3] = v << 8 | w;
        }
      }
      fill += W;
    }
  if (fill < LASSIE_LU_WARP || pmax) cost += lu_pass_cost(pmax, pw);
  return cost;
}

/* Levels of the substitution rows (lvl[row], -1 for none; row i's terms
 * rb[i] .. re[i]) as passes: per level the chunk whose passes cost least;
 * lev_pass[0..nl] their offsets (from *np on).  rows, off: scratch of N
 * and N + 2. */
static void lu_plan_passes(int N, const int *lvl, int nl, const int *rb, const int *re, int *wl,
                           int *lev_pass, int *pass, int *pass_w, int *np, int *rows, int *off) {
  /* rows by level (counting sort, ascending within a level) */
  for (int l = 0; l <= nl + 1; l++) off[l] = 0;
  for (int i = 0; i < N; i++) if (lvl[i] >= 0) off[lvl[i] + 2]++;
  for (int l = 0; l < nl; l++) off[l + 2] += off[l + 1];
  for (int i = 0; i < N; i++) if (lvl[i] >= 0) rows[off[lvl[i] + 1]++] = i;
  for (int l = 0; l < nl; l++) {
    const int *lr = rows + off[l], nr = off[l + 1] - off[l];
    int best = 1, maxlen = 1;
    for (int r = 0; r < nr; r++) if (re[lr[r]] - rb[lr[r]] > maxlen) maxlen = re[lr[r]] - rb[lr[r]];
    long best_cost = -1;
    for (int chunk = 1;; chunk = chunk < 4 ? chunk + 1 : chunk + chunk / 2) {
      long c = lu_level_passes(lr, rb, re, nr, chunk, 0, NULL, NULL, NULL, NULL);
      if (best_cost < 0 || c < best_cost) { best_cost = c; best = chunk; }
      if (chunk >= maxlen) break;
    }
    lev_pass[l] = *np;
    lu_level_passes(lr, rb, re, nr, best, 1, wl, pass, pass_w, np);
    if (*np > lev_pass[l]) pass_w[*np - 1] |= LASSIE_LU_SYNC;   /* the level ends */
  }
  lev_pass[nl] = *np;
}

int sbg_lassie_lu_plan(const sbg_lassie_model *m, lassie_lu *lu, int **plan_out) {
  const int N = m->n_species, *ptr = lu->ptr, *col = lu->col, *diag = lu->diag;
  const size_t nnz = (size_t)ptr[N];
  int rc = -1, nf = 0, nb = 0, np = 0, nt = 0;
  int *lf = malloc(sizeof(int) * ((size_t)N + 1)), *lb = malloc(sizeof(int) * ((size_t)N + 1));
  /* each substitution row's terms rb .. re: forward rows, then backward */
  int *rb = malloc(sizeof(int) * 2 * ((size_t)N + 1)), *re = malloc(sizeof(int) * 2 * ((size_t)N + 1));
  int *rows = malloc(sizeof(int) * ((size_t)N + 1));
  int *wl = calloc(2 * (size_t)N + 1, sizeof(int)), *lev_pass = malloc(sizeof(int) * (2 * (size_t)N + 2));
  /* at most a pass per row */
  int *pass = malloc(sizeof(int) * LASSIE_LU_WARP * LASSIE_LU_ENTRY * (2 * (size_t)N + 1));
  int *pass_w = malloc(sizeof(int) * (2 * (size_t)N + 1));
  int *at = malloc(sizeof(int) * ((size_t)N + 2)), *cnt = calloc(nnz + 1, sizeof(int));
  int *plan = NULL;
  if (!lf || !lb || !rb || !re || !rows || !wl || !lev_pass || !pass || !pass_w || !at || !cnt) goto done;
  /* forward: rows with an L part, level 1 + the deepest row they read;
   * backward: every row, level 1 + the deepest later row it reads */
  for (int i = 0; i < N; i++) {
    int d = -1;
    for (int q = ptr[i]; q < diag[i]; q++) if (lf[col[q]] > d) d = lf[col[q]];
    lf[i] = ptr[i] < diag[i] ? d + 1 : -1;
    if (lf[i] + 1 > nf) nf = lf[i] + 1;
    rb[i] = ptr[i]; re[i] = diag[i];
  }
  for (int k = N - 1; k >= 0; k--) {
    int d = -1;
    for (int q = diag[k] + 1; q < ptr[k + 1]; q++) if (lb[col[q]] > d) d = lb[col[q]];
    lb[k] = d + 1;
    if (lb[k] + 1 > nb) nb = lb[k] + 1;
    rb[N + k] = diag[k] + 1; re[N + k] = ptr[k + 1];
  }
  /* the passes pack a row into 21 bits; larger models keep the widths
   * (the CPU's order) but get no passes (the device does not take them) */
  if (N < (1 << 21)) {
    lu_plan_passes(N, lf, nf, rb, re, wl, lev_pass, pass, pass_w, &np, rows, at);
    lu_plan_passes(N, lb, nb, rb + N, re + N, wl + N, lev_pass + nf + 1, pass, pass_w, &np, rows, at);
  } else {
    for (int i = 0; i < 2 * N; i++) wl[i] = lu_row_wlog(re[i] - rb[i], 4);
    nf = nb = 0; lev_pass[0] = lev_pass[1] = 0;
  }
  /* the assembly: P's row i is the identity's 1 on the diagonal, then
   * -gamma H[l, r] D[r, e] for the reactions r of species l = ipos[i] and
   * their reactants e, in this order (the CPU's serial scatter) */
  for (int j = 0; j < N; j++) at[j] = -1;
  for (int pass2 = 0; pass2 < 2; pass2++) {
    if (pass2) {   /* counts to offsets */
      int run = 0;
      for (size_t p = 0; p <= nnz; p++) { int c = cnt[p]; cnt[p] = run; run += c; }
      nt = cnt[nnz];
      lu->n_fwd = nf; lu->n_bwd = nb; lu->n_pass = np; lu->n_terms = nt;
      lu->n_elim = 0;
      for (int i = 0; i < N; i++) lu->n_elim += ptr[i] < diag[i];
      plan = malloc(sizeof(int) * lassie_lu_plan_len(lu, N, nnz));
      if (!plan) goto done;
      lassie_lu_plan_view(lu, plan, N, nnz);
      memcpy((int *)lu->asm_ptr, cnt, sizeof(int) * (nnz + 1));
    }
    for (int i = 0; i < N; i++) {
      const int l = lu->ipos[i];
      for (int p = ptr[i]; p < ptr[i + 1]; p++) at[col[p]] = p;
      if (pass2) { int t = cnt[diag[i]]++; ((int *)lu->asm_q)[t] = -1; ((int *)lu->asm_e)[t] = -1; }
      else cnt[diag[i]]++;
      for (int q = m->h_ptr[l]; q < m->h_ptr[l + 1]; q++) {
        const int r = m->h_rx[q];
        for (int e = m->r_ptr[r]; e < m->r_ptr[r + 1]; e++) {
          const int p = at[lu->pos[m->r_sp[e]]];
          if (pass2) { int t = cnt[p]++; ((int *)lu->asm_q)[t] = q; ((int *)lu->asm_e)[t] = e; }
          else cnt[p]++;
        }
      }
      for (int p = ptr[i]; p < ptr[i + 1]; p++) at[col[p]] = -1;
    }
  }
  {
    /* the pass order: each lane's partial (its terms v, v + W, ... of the
     * row's) in consecutive slots, a backward row's pivot before its first
     * lane's; the entries then name their first slot and count */
    int *perm = (int *)lu->perm, *pcol = (int *)lu->pcol, slot = 0;
    const int fe = lev_pass[nf];
    if (np == 0)   /* no passes (see above): row order, for tidiness */
      for (size_t p = 0; p < nnz; p++) { perm[p] = (int)p; pcol[p] = col[p]; slot++; }
    for (int s = 0; s < np; s++)
      for (int l = 0; l < LASSIE_LU_WARP; l++) {
        int *e = pass + ((size_t)s * LASSIE_LU_WARP + l) * LASSIE_LU_ENTRY;
        if (e[0] < 0) { e[0] = 0; e[1] = 0; continue; }
        const int W = 1 << (e[3] & 31), first = e[0], end = e[1];
        if (s >= fe && e[3] >> 8 == 0) { perm[first - 1] = slot; pcol[slot++] = 0; }
        e[0] = slot;
        for (int q = first; q < end; q += W) { perm[q] = slot; pcol[slot++] = col[q]; }
        e[1] = slot - e[0];
      }
    for (int i = 0; i < LASSIE_LU_PAD; i++) pcol[slot + i] = 0;
    if ((size_t)slot != nnz) goto done;   /* every position once: cannot happen */
  }
  {
    /* the assembly's order: the positions by their terms, most first */
    int *terms = malloc(sizeof(int) * (nnz + 1)), *by_terms = malloc(sizeof(int) * (nnz + 1));
    if (!terms || !by_terms) { free(terms); free(by_terms); goto done; }
    for (size_t p = 0; p < nnz; p++) terms[p] = lu->asm_ptr[p + 1] - lu->asm_ptr[p];
    if (order_by_count(terms, (int)nnz, by_terms) != 0) { free(terms); free(by_terms); goto done; }
    for (size_t i = 0; i < nnz; i++) {
      const int p = by_terms[i];
      int *e = (int *)lu->asm_ent + (size_t)LASSIE_LU_ENTRY * i;
      e[0] = p; e[1] = lu->asm_ptr[p]; e[2] = lu->asm_ptr[p + 1]; e[3] = lu->perm[p];
    }
    free(terms); free(by_terms);
  }
  {
    int *el = (int *)lu->elim, ne = 0;
    for (int i = 0; i < N; i++) if (ptr[i] < diag[i]) el[ne++] = i;
    el[ne] = N;
  }
  memcpy((int *)lu->wlog, wl, sizeof(int) * 2 * (size_t)N);
  memcpy((int *)lu->lev_pass, lev_pass, sizeof(int) * ((size_t)nf + nb + 2));
  memcpy((int *)lu->pass_w, pass_w, sizeof(int) * (size_t)np);
  memcpy((int *)lu->pass, pass, sizeof(int) * LASSIE_LU_WARP * LASSIE_LU_ENTRY * (size_t)np);
  *plan_out = plan;
  plan = NULL;
  rc = 0;
done:
  free(lf); free(lb); free(rb); free(re); free(rows); free(wl); free(lev_pass); free(pass); free(pass_w);
  free(at); free(cnt); free(plan);
  return rc;
}

/* The warp passes of lu's plan on one thread, lane by lane, each
 * shuffle step a read of the lanes' values before the step, the factors
 * from pval (the pass order): the device's order of operations
 * (lassie_lu_passes()), so that the CPU's tests check the device's
 * schedule (its levels, each row's terms covered once, the trees, the
 * pass order and the factorisation's writes to it) against the
 * row-by-row substitution, bit for bit. */
static void lu_solve_by_passes(const lassie_lu *lu, const double *pval, double *b) {
  for (int back = 0; back < 2; back++) {
    const int nl = back ? lu->n_bwd : lu->n_fwd;
    const int *lp = lu->lev_pass + (back ? lu->n_fwd + 1 : 0);
    for (int lv = 0; lv < nl; lv++)
      for (int s = lp[lv]; s < lp[lv + 1]; s++) {
        const int *e = lu->pass + (size_t)s * LASSIE_LU_WARP * LASSIE_LU_ENTRY;
        double p[LASSIE_LU_WARP], t[LASSIE_LU_WARP];
        for (int l = 0; l < LASSIE_LU_WARP; l++) {
          const int *el = e + l * LASSIE_LU_ENTRY;
          p[l] = 0;
          for (int q = el[0]; q < el[0] + el[1]; q++) p[l] += pval[q] * b[lu->pcol[q]];
        }
        for (int o = (1 << (lu->pass_w[s] & LASSIE_LU_TREE)) >> 1; o > 0; o >>= 1) {
          for (int l = 0; l < LASSIE_LU_WARP; l++) t[l] = p[l ^ o];
          for (int l = 0; l < LASSIE_LU_WARP; l++)
            if (o < 1 << (e[l * LASSIE_LU_ENTRY + 3] & 31)) p[l] = p[l] + t[l];
        }
        for (int l = 0; l < LASSIE_LU_WARP; l++) {
          const int *el = e + l * LASSIE_LU_ENTRY, i = el[2];
          if (el[3] >> 8 == 0) b[i] = back ? (b[i] - p[l]) * pval[el[0] - 1] : b[i] - p[l];
        }
      }
  }
}

/* The sparse LU's loops over a block's line of a column, compiled for
 * AVX2 as well as for the generic x86-64 that R's flags target, the
 * processor choosing when the library loads (GCC's function clones on
 * Linux): four doubles an operation instead of two.  Without FMA (which
 * AVX2 does not imply), every result is rounded as in the generic code. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define LASSIE_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LASSIE_VECTOR_CLONES
#endif

/* Rows that lu_eliminate_rows() takes together: each U row it reads
 * serves this many rows, whose entries of a column fill a cache line and
 * two vectors of four doubles (lu_vec). */
#define LASSIE_LU_BLOCK 8

/* Four doubles and their masks (GCC's and clang's vector extensions; two
 * SSE2 registers each where AVX is not compiled for), at any 8-byte
 * alignment. */
typedef double lu_vec __attribute__((vector_size(32), aligned(8)));
typedef int64_t lu_mask __attribute__((vector_size(32), aligned(8)));

/* Row i, number j of its block, of the sparse LU on the host, once the
 * rows before it are done: its pivot, the test on it (lassie_lu_factor()'s),
 * its values gathered from the scratch X (column c of row j at X[c *
 * LASSIE_LU_BLOCK + j]).  Returns -1 when the pivot fails.  Inlined, so
 * that lu_eliminate_rows()'s AVX2 clone calls no code compiled without AVX
 * (each such call from it ran into the processor's AVX-SSE transition:
 * Haugh2b's factorisations took three times as long). */
static inline __attribute__((always_inline)) int lu_finish_row(const lassie_lu *lu, int i, int j, double dterm,
                                                               double *val, const double *X) {
  const double d = X[(size_t)i * LASSIE_LU_BLOCK + j];
  const double recip = 1.0 / d;
  for (int p = lu->ptr[i]; p < lu->ptr[i + 1]; p++)
    val[p] = p == lu->diag[i] ? recip : X[(size_t)lu->col[p] * LASSIE_LU_BLOCK + j];
  return !isfinite(d) || !(fabs(d) > 1e-10 * dterm) ? -1 : 0;
}

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Which blocks go together, by a count of operations (rough nanoseconds
 * on the build machine's core, set from timings of the elimination of
 * Haugh2b, Chen 2009, egfr_net, fceri_ji and bcr each way): row by row,
 * each of a row's L columns k costs LU_ROW_K (its multiplier, its loop)
 * and each entry of U's row k that it updates LU_ROW_ENTRY (a scalar
 * update); together, each k of the union costs LU_WIDE_K (its multipliers
 * and masks) and each entry of its U row LU_WIDE_ENTRY (two vector updates
 * and blends, whichever rows take it).  Rows that share their columns and
 * long rows of U go together: one factorisation of egfr_net took 0.6-0.7
 * ms against 1.5 ms row by row, bcr's 8-9 ms against 25 ms; on the small
 * or sparse factors of Haugh2b and Chen 2009 both ways cost about the
 * same.  Returns 0, or -1 without memory (bl freed). */
#define LU_ROW_K 7
#define LU_ROW_ENTRY 1
#define LU_WIDE_K 20
#define LU_WIDE_ENTRY 2
static int lu_blocks_plan(const lassie_lu *lu, int N, lu_blocks *bl) {
  enum { B = LASSIE_LU_BLOCK };
  const int *ptr = lu->ptr, *col = lu->col, *diag = lu->diag;
  const int nblk = (lu->n_elim + B - 1) / B;
  size_t cap = 0, n = 0;
  for (int e = 0; e < lu->n_elim; e++) cap += (size_t)(diag[lu->elim[e]] - ptr[lu->elim[e]]);
  bl->first = malloc(sizeof(int) * ((size_t)nblk + 1));
  bl->k = malloc(sizeof(int) * (cap + 1));
  bl->rows = malloc(cap + 1);
  int *slot = malloc(sizeof(int) * ((size_t)N + 1)), *owner = malloc(sizeof(int) * ((size_t)N + 1));
  if (!bl->first || !bl->k || !bl->rows || !slot || !owner) goto fail;
  for (int c = 0; c < N; c++) owner[c] = -1;
  for (int bk = 0; bk < nblk; bk++) {
    double rows = 0, together = 0;
    const size_t n0 = n;
    bl->first[bk] = (int)n0;
    for (int e = bk * B; e < lu->n_elim && e < (bk + 1) * B; e++) {
      const int i = lu->elim[e];
      for (int q = ptr[i]; q < diag[i]; q++) {
        const int k = col[q];
        const double len = (double)(ptr[k + 1] - diag[k] - 1);
        rows += LU_ROW_K + LU_ROW_ENTRY * len;
        if (owner[k] != bk) {
          owner[k] = bk;
          bl->k[n++] = k;
          together += LU_WIDE_K + LU_WIDE_ENTRY * len;
        }
      }
    }
    if (!(together < rows)) { n = n0; continue; }   /* row by row */
    qsort(bl->k + n0, n - n0, sizeof(int), cmp_int);
    for (size_t t = n0; t < n; t++) { slot[bl->k[t]] = (int)t; bl->rows[t] = 0; }
    for (int e = bk * B; e < lu->n_elim && e < (bk + 1) * B; e++) {
      const int i = lu->elim[e];
      for (int q = ptr[i]; q < diag[i]; q++) bl->rows[slot[col[q]]] |= (unsigned char)(1u << (e - bk * B));
    }
  }
  bl->first[nblk] = (int)n;
  free(slot); free(owner);
  return 0;
fail:
  free(slot); free(owner);
  lu_blocks_free(bl);
  return -1;
}

/* The elimination of lassie_lu_factor() on one host thread, after
 * lassie_lu_assemble(), with the same operations in the same order on
 * each row, so the same factors to the bit: the rows with an L part
 * (lu->elim, ascending) LASSIE_LU_BLOCK at a time.  A block taken together
 * (bl) goes through the union of its rows' L columns k in ascending order:
 * the rows that have k take their multipliers x[k] / U(k, k) at once (a
 * vector operation), and those whose multiplier is not 0 subtract it
 * times U's row k, in one pass over that row for all of them, each
 * column's line of the block updated by two vector operations (the other
 * rows keep their values: a blend; x - 0 u is not always x: -0, an
 * infinite u).  A row of the block is finished as soon as the next k
 * reaches it (every k before it is then applied), so the rows after it
 * can use it.  Row by row, with one scattered update at a time, the
 * near-dense factors of large rule-based networks (fceri_gamma2: 4
 * million entries for 3,744 species, 2.2e9 updates) took 2.2 s; together,
 * 0.6 s on the same core.  Other blocks go row by row, each row's L
 * columns in turn.  X: a scratch of LASSIE_LU_BLOCK x N (column c of
 * block row j at X[c * LASSIE_LU_BLOCK + j]), in any state: a row reads
 * only its pattern's columns, which its scatter writes first (the pattern
 * holds the fill).  Returns -1 when a pivot fails. */
LASSIE_VECTOR_CLONES
static int lu_eliminate_rows(const lassie_lu *lu, const lu_blocks *bl, double *val, double *X) {
  enum { B = LASSIE_LU_BLOCK };
  _Static_assert(LASSIE_LU_BLOCK == 2 * sizeof(lu_vec) / sizeof(double), "a block is two vectors");
  const int *ptr = lu->ptr, *col = lu->col, *diag = lu->diag;
  const lu_mask bit0 = {1, 2, 4, 8}, bit1 = {16, 32, 64, 128};
  for (int e0 = 0; e0 < lu->n_elim; e0 += B) {
    const int nb = lu->n_elim - e0 < B ? lu->n_elim - e0 : B, bk = e0 / B;
    int row[B];
    double dterm[B];
    for (int j = 0; j < nb; j++) {
      const int i = lu->elim[e0 + j];
      row[j] = i;
      for (int p = ptr[i]; p < ptr[i + 1]; p++) X[(size_t)col[p] * B + j] = val[p];
      dterm[j] = fabs(val[diag[i]]);
    }
    if (bl->first[bk] == bl->first[bk + 1]) {   /* row by row */
      for (int j = 0; j < nb; j++) {
        const int i = row[j];
        for (int q = ptr[i]; q < diag[i]; q++) {
          const int k = col[q];
          double *xk = X + (size_t)k * B + j;
          const double lk = *xk * val[diag[k]];
          *xk = lk;   /* row j's L entry */
          if (lk == 0) continue;
          for (int p = diag[k] + 1; p < ptr[k + 1]; p++) {
            double *xc = X + (size_t)col[p] * B + j;
            *xc = *xc - lk * val[p];
          }
          /* the largest partial sum the pivot went through (dterm only
           * grows with x[i], so taking it after every update of the row
           * is the same as taking it when x[i] changes) */
          const double v = fabs(X[(size_t)i * B + j]);
          if (v > dterm[j]) dterm[j] = v;
        }
        if (lu_finish_row(lu, i, j, dterm[j], val, X) != 0) return -1;
      }
      continue;
    }
    int done = 0;
    for (int t = bl->first[bk]; t < bl->first[bk + 1]; t++) {
      const int k = bl->k[t];
      for (; done < nb && row[done] <= k; done++)
        if (lu_finish_row(lu, row[done], done, dterm[done], val, X) != 0) return -1;
      const int64_t r = bl->rows[t];
      const lu_mask has0 = ((lu_mask){r, r, r, r} & bit0) != 0, has1 = ((lu_mask){r, r, r, r} & bit1) != 0;
      lu_vec *xk = (lu_vec *)(X + (size_t)k * B);
      const lu_vec x0 = xk[0], x1 = xk[1];
      const lu_vec l0 = x0 * val[diag[k]], l1 = x1 * val[diag[k]];
      /* the rows' L entries */
      xk[0] = (lu_vec)(((lu_mask)l0 & has0) | ((lu_mask)x0 & ~has0));
      xk[1] = (lu_vec)(((lu_mask)l1 & has1) | ((lu_mask)x1 & ~has1));
      const lu_mask m0 = has0 & (l0 != 0), m1 = has1 & (l1 != 0);
      unsigned on = 0;
      for (int j = 0; j < 4; j++) on |= (unsigned)(m0[j] & 1) << j | (unsigned)(m1[j] & 1) << (j + 4);
      if (!on) continue;
      for (int p = diag[k] + 1; p < ptr[k + 1]; p++) {
        lu_vec *xc = (lu_vec *)(X + (size_t)col[p] * B);
        const double u = val[p];
        const lu_vec c0 = xc[0], c1 = xc[1];
        const lu_vec t0 = c0 - l0 * u, t1 = c1 - l1 * u;
        xc[0] = (lu_vec)(((lu_mask)t0 & m0) | ((lu_mask)c0 & ~m0));
        xc[1] = (lu_vec)(((lu_mask)t1 & m1) | ((lu_mask)c1 & ~m1));
      }
      for (; on; on &= on - 1) {   /* the pivots' largest partial sums */
        const int j = __builtin_ctz(on);
        const double v = fabs(X[(size_t)row[j] * B + j]);
        if (v > dterm[j]) dterm[j] = v;
      }
    }
    for (; done < nb; done++)
      if (lu_finish_row(lu, row[done], done, dterm[done], val, X) != 0) return -1;
  }
  return 0;
}

/* Solves (I - gamma J(x)) z = b once with the sparse LU of the implicit
 * steps (the fill-reducing order, the CPU engine's factorisation
 * lu_eliminate_rows, lassie_lu_solve_levels on one thread): the check of
 * that code against a dense solver (ffi_lassie_lu_solve).  b is replaced
 * by z, both in species order; by_passes: the device's code instead, its
 * factorisation (lassie_lu_factor, one lane) and its substitution by
 * passes (lu_solve_by_passes), whose z the tests require to be the same.
 * Returns 0, -1 when a pivot fails (the steps would take the dense LU), -2
 * without memory. */
int sbg_lassie_lu_solve_once(const sbg_lassie_model *m, const double *k, const double *x,
                             const double *gamma, int n_gamma, double *b, int by_passes,
                             double **factors, size_t *n_factors) {
  const int N = m->n_species, M = m->n_reactions;
  int *pos = malloc(sizeof(int) * (size_t)N), *ipos = malloc(sizeof(int) * (size_t)N);
  int *ptr = NULL, *col = NULL, *diag = NULL, *plan = NULL, rc = -2;
  double *dv = malloc(sizeof(double) * (size_t)(m->r_ptr[M] > 0 ? m->r_ptr[M] : 1));
  double *scratch = calloc((size_t)N * LASSIE_LU_BLOCK, sizeof(double)), *y = malloc(sizeof(double) * (size_t)N);
  double *val = NULL, *pval = NULL;
  lu_blocks blk = {NULL, NULL, NULL};
  size_t nnz = 0;
  lassie_lu lu;
  if (!pos || !ipos || !dv || !scratch || !y ||
      sbg_lassie_lu_pattern(m, pos, ipos, &ptr, &col, &diag, &nnz) != 0)
    goto done;
  lu = (lassie_lu){.pos = pos, .ipos = ipos, .ptr = ptr, .col = col, .diag = diag};
  if (sbg_lassie_lu_plan(m, &lu, &plan) != 0 || lu_blocks_plan(&lu, N, &blk) != 0 ||
      !(val = malloc(sizeof(double) * (nnz ? nnz : 1))) ||
      !(pval = malloc(sizeof(double) * (nnz + LASSIE_LU_PAD))))
    goto done;
  /* a slot the factorisation misses stays NaN (and fails the check) */
  for (size_t q = 0; q < nnz + LASSIE_LU_PAD; q++) pval[q] = NAN;
  sbg_lassie_dvdx(m, k, x, dv);
  lassie_team tm = lassie_team_host();
  for (int g = 0; g < n_gamma; g++)
    rc = by_passes ? lassie_lu_factor(&tm, m, &lu, gamma[g], dv, val, pval, scratch)
                   : lassie_lu_assemble(&tm, m, &lu, gamma[g], dv, val, NULL) != 0
                         ? -1
                         : lu_eliminate_rows(&lu, &blk, val, scratch);
  if (rc != 0) goto done;
  for (int j = 0; j < N; j++) y[pos[j]] = b[j];
  if (by_passes) lu_solve_by_passes(&lu, pval, y);
  else lassie_lu_solve_levels(&tm, &lu, N, val, NULL, y);
  for (int j = 0; j < N; j++) b[j] = y[pos[j]];
  if (factors) {
    *factors = val;
    *n_factors = nnz;
    val = NULL;
  }
  rc = 0;
done:
  free(pos); free(ipos); free(ptr); free(col); free(diag); free(plan); free(dv); free(scratch);
  free(y); free(val); free(pval); lu_blocks_free(&blk);
  return rc;
}

/* The pattern for this workspace (w->pos, w->ipos set) and its values. */
static int lu_symbolic(const sbg_lassie_model *m, ws *w) {
  size_t nnz;
  if (lu_symbolic_pattern(m, w->pos, w->ipos, &w->lu_ptr, &w->lu_col, &w->lu_diag, &nnz) != 0) return -1;
  w->lu_val = malloc(sizeof(double) * (nnz ? nnz : 1));
  w->lu_x = calloc((size_t)m->n_species * LASSIE_LU_BLOCK, sizeof(double));
  if (!w->lu_val || !w->lu_x) return -1;   /* ws_free() frees the rest */
  lassie_lu lu = {.pos = w->pos, .ipos = w->ipos, .ptr = w->lu_ptr, .col = w->lu_col, .diag = w->lu_diag};
  if (sbg_lassie_lu_plan(m, &lu, &w->lu_plan) != 0 || lu_blocks_plan(&lu, m->n_species, &w->lu_blk) != 0)
    return -1;
  w->lu = lu;
  return 0;
}

/* Numeric LU of P = I - gamma J on the pattern of lu_symbolic()
 * (lassie_lu_assemble, lu_eliminate_rows); -1: the dense LU with
 * pivoting takes over. */
static int lu_sparse_factor(const sbg_lassie_model *m, double gamma, ws *w) {
  lassie_team tm = lassie_team_host();
  if (lassie_lu_assemble(&tm, m, &w->lu, gamma, w->dv, w->lu_val, NULL) != 0) return -1;
  return lu_eliminate_rows(&w->lu, &w->lu_blk, w->lu_val, w->lu_x);
}

/* Solves P z = b in place, b and z in the order pos. */
static void lu_sparse_solve(const ws *w, int N, double *b) {
  lassie_team tm = lassie_team_host();
  lassie_lu_solve_levels(&tm, &w->lu, N, w->lu_val, NULL, b);
}

/* Factorises P = I - gamma J: sparse first, the dense LU with partial
 * pivoting when a diagonal pivot fails (allocated then, N <= LASSIE_DENSE_MAX).
 * Returns 0, -1 when singular, -2 without memory for the dense one. */
static int iter_factor(const sbg_lassie_model *m, double gamma, ws *w) {
  const int N = m->n_species;
  if (lu_sparse_factor(m, gamma, w) == 0) { w->dense = 0; return 0; }
  if (N > LASSIE_DENSE_MAX) return -1;
  if (!w->P) {
    w->P = malloc(sizeof(double) * (size_t)N * N);
    if (!w->P) return -2;
  }
  w->dense = 1;
  build_iteration_matrix(m, gamma, w);
  if (lu_factor(w->P, N, w->piv, w->nzbuf) != 0) return -1;
  return lu_compress(w->P, N, w) == 0 ? 0 : -2;
}

static void iter_solve(const ws *w, int N, double *b) {
  if (w->dense) lu_solve(w, N, b);
  else lu_sparse_solve(w, N, b);
}

static double gershgorin(const sbg_lassie_model *m, const ws *w) {
  lassie_team tm = lassie_team_host();
  return lassie_gershgorin(&tm, m, w->dv, NULL);
}

typedef struct sim_out {
  sbg_status st;
  double t;         /* time reached */
  int what;         /* LASSIE_FAIL_* */
  int cancelled;    /* stopped because the run stops, not by its own failure */
} sim_out;

/* Interrupts of a run.  Only the calling thread (R's main thread, OpenMP's
 * thread 0) may poll, about every LASSIE_POLL_EVERY seconds: inside its own
 * simulation and, once it has none left, while it waits for the others.
 * Every thread reads `stop` at each step attempt, so Ctrl-C ends even one
 * long stiff simulation within a fraction of a second. */
#define LASSIE_POLL_EVERY 0.05
typedef struct lassie_poll {
  sbg_ctx *ctx;
  volatile int stop;   /* set on an interrupt, or when a simulation fails */
  sbg_status st;       /* the poll's status once it said stop */
  double next;         /* monotonic seconds of the next poll */
  int finished;        /* simulations done, for the progress shown */
  int total;
} lassie_poll;

static double lassie_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Thread 0 only: polls when due; `within` is the share of the current
 * simulation done (for the progress of a run of one). */
static int lassie_poll_due(lassie_poll *lp, double within) {
  double now = lassie_now();
  if (now < lp->next) return 0;
  lp->next = now + LASSIE_POLL_EVERY;
  double done = lp->total > 1 ? (double)lp->finished / lp->total : within;
  sbg_status st = sbg_poll(lp->ctx, done);
  if (st == SBG_OK) return 0;
  lp->st = st;
  lp->stop = 1;
  return 1;
}

double sbg_lassie_initial_step(const sbg_lassie_model *m, const sbg_lassie_params *p,
                               const double *k, const double *x, double span, double *f, double *v) {
  const int N = m->n_species;
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

/* Where one simulation stands: its time, step, next output row and
 * counters, and the state of its explicit and implicit steps. */
enum { MODE_EXPLICIT = 0, MODE_IMPLICIT = 1 };
typedef struct sim_run {
  const sbg_lassie_model *m;
  const sbg_lassie_params *p;
  const double *k;       /* its rate constants */
  double *out;           /* its n_times x N block */
  ws *w;
  sim_out *so;
  double tend, span;
  double t, h, attempts;
  int next, mode;
  int scheme;            /* LASSIE_RKF45 or LASSIE_DP5 */
  int dense;             /* 1: steps by accuracy, output times interpolated */
  double st[SBG_LASSIE_N_STATS];
  /* explicit steps */
  int f0_valid;          /* w->ks[0] holds f(x) */
  unsigned rej_hist;     /* last attempts, 1 = rejected */
  int stiff_count, calm_rk;
  double prev_h;         /* size of the last step if accepted explicitly, else 0 */
  /* implicit steps */
  int nh;                /* states in w->hist (0: restart) */
  int need_jac, jac_fresh, factored, fn_valid;
  double gamma_fact, rho;
  int bdf_steps, calm, jac_steps, q, q_steps, err_fails;
  double ht[LASSIE_BDF_HIST];  /* times of the history */
  /* watched conditions (NULL: none): their values at the run's start,
   * scratch for a state and values inside a step, and where this
   * simulation's stop is reported (its state and values in the watch) */
  sbg_lassie_watch *watch;
  double *wv, *wx, *wq;
  int wsim;
  double *wx_out, *wv_out;
} sim_run;

static int sim_fail(sim_run *r, sbg_status st, int what) {
  r->so->st = st; r->so->what = what; r->so->t = r->t;
  return -1;
}

static void to_implicit(sim_run *r) {
  r->mode = MODE_IMPLICIT;
  r->st[SBG_LASSIE_ST_SWITCHES]++;
  r->nh = 0; r->need_jac = 1; r->factored = 0; r->fn_valid = 0;
  r->bdf_steps = 0; r->calm = 0; r->rej_hist = 0; r->stiff_count = 0; r->calm_rk = 0; r->prev_h = 0;
}

static void to_explicit(sim_run *r) {
  r->mode = MODE_EXPLICIT;
  r->st[SBG_LASSIE_ST_SWITCHES]++;
  r->rej_hist = 0; r->calm = 0; r->nh = 0; r->stiff_count = 0; r->calm_rk = 0; r->prev_h = 0;
  r->f0_valid = 0;
}

/* Output rows filled per chunk: the species loop runs outside the rows of
 * a chunk, so that each species' values are written next to each other
 * (the output is column-major, rows x species). */
#define LASSIE_ROW_CHUNK 64

/* Rows r0 .. r1 - 1, all strictly inside the explicit DP5 step from t0 of
 * size hs (state x to xn, stages in w->ks): its continuous extension. */
static void dense_explicit_rows(sim_run *r, int r0, int r1, double t0, double hs,
                                const double *x, const double *xn) {
  const int N = r->m->n_species, nt = r->p->n_times;
  double *const *K = r->w->ks;
  double theta[LASSIE_ROW_CHUNK];
  for (int i = r0; i < r1; i++) theta[i - r0] = (r->p->times[i] - t0) / hs;
  for (int j = 0; j < N; j++) {
    double kv[LASSIE_MAX_STAGES], rc[4];
    for (int l = 0; l < LASSIE_MAX_STAGES; l++) kv[l] = K[l][j];
    lassie_dp5_dense_coefs(x[j], xn[j], hs, kv, rc);
    double *o = r->out + (size_t)j * nt;
    for (int i = r0; i < r1; i++) o[i] = lassie_dp5_dense(theta[i - r0], x[j], rc);
  }
}

/* Rows r0 .. r1 - 1 inside an implicit step: the polynomial through the
 * last npts states of the BDF history (the one whose derivative the
 * step's formula matched). */
static void dense_implicit_rows(sim_run *r, int r0, int r1, int npts) {
  const int N = r->m->n_species, nt = r->p->n_times;
  double L[LASSIE_ROW_CHUNK][LASSIE_BDF_HIST];
  for (int i = r0; i < r1; i++) lassie_bdf_interp_weights(r->p->times[i], r->ht, npts, L[i - r0]);
  for (int j = 0; j < N; j++) {
    double *o = r->out + (size_t)j * nt;
    for (int i = r0; i < r1; i++) o[i] = lassie_bdf_interp(L[i - r0], r->w->hist, npts, j);
  }
}

/* After a step from t0 of size hs with new state xn: the output rows
 * before tlim (<= the step's end), interpolated (explicit steps: DP5's
 * continuous extension from x and the stages in w->ks; implicit ones: the
 * BDF history, npts states). */
static void emit_rows_before(sim_run *r, double t0, double hs, double tlim, const double *x,
                             const double *xn, int npts) {
  const int nt = r->p->n_times;
  const double *times = r->p->times;
  while (r->next < nt && times[r->next] < tlim) {
    int r0 = r->next, r1 = r0;
    while (r1 < nt && r1 - r0 < LASSIE_ROW_CHUNK && times[r1] < tlim) r1++;
    if (r->mode == MODE_IMPLICIT) dense_implicit_rows(r, r0, r1, npts);
    else dense_explicit_rows(r, r0, r1, t0, hs, x, xn);
    r->next = r1;
  }
}

/* The state at tq inside that step, by the same interpolant, into y. */
static void step_state(sim_run *r, double t0, double hs, double tq, const double *x,
                       const double *xn, int npts, double *y) {
  const int N = r->m->n_species;
  if (r->mode == MODE_IMPLICIT) {
    double L[LASSIE_BDF_HIST];
    lassie_bdf_interp_weights(tq, r->ht, npts, L);
    for (int j = 0; j < N; j++) y[j] = lassie_bdf_interp(L, r->w->hist, npts, j);
    return;
  }
  double *const *K = r->w->ks;
  const double theta = (tq - t0) / hs;
  for (int j = 0; j < N; j++) {
    double kv[LASSIE_MAX_STAGES], rc[4];
    for (int l = 0; l < LASSIE_MAX_STAGES; l++) kv[l] = K[l][j];
    lassie_dp5_dense_coefs(x[j], xn[j], hs, kv, rc);
    y[j] = lassie_dp5_dense(theta, x[j], rc);
  }
}

/* The watched conditions at state x into v; whether one of them is, as a
 * truth value, not what it was at the step's start (r->wv). */
static int watch_changed(sim_run *r, const double *x, double *v) {
  const sbg_lassie_watch *wt = r->watch;
  int changed = 0;
  for (int c = 0; c < wt->n_conds; c++) {
    v[c] = sbg_lassie_law_eval(wt->code + wt->start[c], wt->cval, x, -1, 0);
    changed |= (v[c] != 0) != (r->wv[c] != 0);
  }
  return changed;
}

/* After an accepted step from t0 of size hs to tnew (state x to xn): when
 * a watched condition differs within it (at the first of the probes and
 * the end where one does), the first time it differs (the end of a
 * bisection down to adjacent doubles), the state there and the rows
 * before it go to the watch, and the run stops (1). */
static int watch_step(sim_run *r, double t0, double hs, double tnew, const double *x,
                      const double *xn, int npts) {
  sbg_lassie_watch *wt = r->watch;
  const int N = r->m->n_species;
  if (!wt) return 0;
  double *sx = r->wx_out, *sv = r->wv_out;
  double a = t0, b = tnew;
  int found = 0;
  for (int i = 1; i < LASSIE_WATCH_PROBES && !found; i++) {
    const double tq = lassie_watch_probe(t0, tnew, i);
    if (!(tq > a && tq < tnew)) continue;
    step_state(r, t0, hs, tq, x, xn, npts, r->wx);
    if (watch_changed(r, r->wx, sv)) {
      b = tq; found = 1;
      memcpy(sx, r->wx, sizeof(double) * N);
    } else {
      a = tq;
    }
  }
  if (!found) {
    if (!watch_changed(r, xn, sv)) return 0;
    memcpy(sx, xn, sizeof(double) * N);
  }
  for (int it = 0; it < 200; it++) {
    const double mid = lassie_watch_mid(a, b);
    if (!(mid > a && mid < b)) break;
    step_state(r, t0, hs, mid, x, xn, npts, r->wx);
    if (watch_changed(r, r->wx, r->wq)) {
      b = mid;
      memcpy(sx, r->wx, sizeof(double) * N);
      memcpy(sv, r->wq, sizeof(double) * wt->n_conds);
    } else {
      a = mid;
    }
  }
  emit_rows_before(r, t0, hs, b, x, xn, npts);
  wt->stopped[r->wsim] = 1; wt->t[r->wsim] = b; wt->next[r->wsim] = r->next;
  return 1;
}

/* After a step from t0 of size hs to tnew with new state xn: the output
 * rows up to tnew (emit_rows_before()); a row at tnew is xn itself.  With
 * watched conditions, a change within the step stops the run there
 * instead (watch_step()). */
static void emit_rows(sim_run *r, double t0, double hs, double tnew, const double *x,
                      const double *xn, int npts) {
  const int N = r->m->n_species, nt = r->p->n_times;
  const double *times = r->p->times;
  if (watch_step(r, t0, hs, tnew, x, xn, npts)) return;
  emit_rows_before(r, t0, hs, tnew, x, xn, npts);
  if (r->next < nt && times[r->next] == tnew) {
    for (int j = 0; j < N; j++) r->out[(size_t)j * nt + r->next] = xn[j];
    r->next++;
  }
}

/* Stiffness seen by the last accepted explicit step, h rho(J) with rho
 * estimated as |f(x) - f(stage)| / |x - stage| for the stage whose input
 * lies at the end of the step (their difference lies along the fast
 * modes), in the norm of the error test (as LSODA's switch: unweighted,
 * the large slow species hide the fast modes of the small ones; Chen:
 * h rho 0.002 where the step is stability-bound).  Returns 1 when the
 * simulation should switch to implicit steps. */
static int explicit_turns_stiff(sim_run *r) {
  const int N = r->m->n_species, sk = lassie_stiff_stage(r->scheme);
  const double *x = r->w->x, *k0 = r->w->ks[0], *ks = r->w->ks[sk], *ys = r->w->ys5;
  /* summed as the GPU's k_stiff sums them: thread t of the block takes
   * species t, t + LASSIE_BLOCK, ..., then a tree over the threads */
  double pn[LASSIE_BLOCK] = {0}, pd[LASSIE_BLOCK] = {0};
  for (int j = 0; j < N; j++) {
    double sc = 1.0 / (r->p->atol + r->p->rtol * fabs(x[j]));
    double dk = (k0[j] - ks[j]) * sc, dy = (x[j] - ys[j]) * sc;
    pn[j % LASSIE_BLOCK] += dk * dk; pd[j % LASSIE_BLOCK] += dy * dy;
  }
  for (int w = LASSIE_BLOCK / 2; w > 0; w >>= 1)
    for (int t = 0; t < w; t++) { pn[t] += pn[t + w]; pd[t] += pd[t + w]; }
  const double num = pn[0], den = pd[0];
  double hrho = den > 0 ? r->prev_h * sqrt(num / den) : 0.0;
  if (hrho > LASSIE_STIFF_HRHO) { r->stiff_count++; r->calm_rk = 0; }
  else if (++r->calm_rk >= LASSIE_NONSTIFF_RESET) r->stiff_count = 0;
  return r->p->method == SBG_LASSIE_AUTO && r->stiff_count >= LASSIE_STIFF_COUNT;
}

/* The stages and error of one explicit step of size hs from w->x into
 * w->xn (per species by lassie_common.h, as the GPU engine computes them);
 * returns the scaled max-norm error (NaN/Inf when the stages blew up). */
static double explicit_stages(sim_run *r, double hs) {
  const sbg_lassie_model *m = r->m;
  ws *w = r->w;
  const int N = m->n_species, S = lassie_stages(r->scheme), sk = lassie_stiff_stage(r->scheme);
  const double *x = w->x;
  double *const *K = w->ks;
  for (int s = 1; s < S; s++) {
    /* stage sk's input is kept for the stiffness estimate; DP5's last
     * stage's input is the new state */
    double *dst = s == sk ? w->ys5 : (s == 6 ? w->xn : w->ys);
    for (int j = 0; j < N; j++) {
      double kv[LASSIE_MAX_STAGES];
      for (int l = 0; l < s; l++) kv[l] = K[l][j];
      dst[j] = lassie_stage_input(r->scheme, s, x[j], hs, kv);
    }
    sbg_lassie_rhs(m, r->k, dst, w->v, K[s]);
  }
  r->st[SBG_LASSIE_ST_RHS] += S - 1;
  double err = 0;
  for (int j = 0; j < N; j++) {
    double kv[LASSIE_MAX_STAGES], y = w->xn[j];
    for (int l = 0; l < S; l++) kv[l] = K[l][j];
    err = lassie_maxnan(err, lassie_step_end(r->scheme, x[j], hs, kv, r->p->rtol, r->p->atol, &y));
    w->xn[j] = y;
  }
  return err;
}

/* One explicit attempt of size hs (landing on the target when hits).
 * Returns -1 on failure, 1 when the simulation turned stiff before the
 * attempt (the caller takes an implicit step instead), else 0. */
static int explicit_attempt(sim_run *r, double hs, int hits, double target, double hmin) {
  ws *w = r->w;
  if (!r->f0_valid) {
    sbg_lassie_rhs(r->m, r->k, w->x, w->v, w->ks[0]);
    r->st[SBG_LASSIE_ST_RHS]++;
    r->f0_valid = 1;
  }
  if (r->prev_h > 0 && explicit_turns_stiff(r)) { to_implicit(r); return 1; }
  double err = explicit_stages(r, hs);
  /* RKF45 evaluates f(x) at every attempt (as the GPU engine); DP5's last
   * stage is f at the new state (FSAL), and a rejection keeps f(x) */
  r->f0_valid = r->scheme == LASSIE_DP5;
  if (err <= 1.0) {
    const double t0 = r->t, tnew = hits ? target : r->t + hs;
    emit_rows(r, t0, hs, tnew, w->x, w->xn, 0);
    double *tmp = w->x; w->x = w->xn; w->xn = tmp;
    if (r->scheme == LASSIE_DP5) { tmp = w->ks[0]; w->ks[0] = w->ks[6]; w->ks[6] = tmp; }
    r->t = tnew;
    r->st[SBG_LASSIE_ST_STEPS]++;
    r->rej_hist <<= 1;
    r->prev_h = hs;
    double fac = err > 0 ? 0.9 * sbg_pow(err, -0.2) : 5.0;
    if (fac > 5.0) fac = 5.0;
    double hn = hs * fac;
    r->h = (hits && hn < r->h) ? r->h : hn;
    return 0;
  }
  r->st[SBG_LASSIE_ST_REJECTED]++;
  r->rej_hist = (r->rej_hist << 1) | 1u;
  r->prev_h = 0;
  double fac = isfinite(err) ? 0.9 * sbg_pow(err, -0.25) : 0.1;
  if (fac < 0.1) fac = 0.1;
  if (fac > 0.9) fac = 0.9;
  r->h = hs * fac;
  int repeated = lassie_popcount16(r->rej_hist) >= LASSIE_STIFF_REJECTIONS;
  int collapsed = r->h < LASSIE_STIFF_COLLAPSE * r->span;
  if (r->p->method == SBG_LASSIE_AUTO && (repeated || collapsed)) to_implicit(r);
  else if (r->h < hmin) return sim_fail(r, SBG_ERR_NUMERIC, LASSIE_FAIL_HMIN);
  return 0;
}

/* Once per workspace: the fill-reducing order, the LU's pattern and the
 * BDF history.  Returns -1 on failure. */
static int implicit_setup(sim_run *r) {
  const sbg_lassie_model *m = r->m;
  ws *w = r->w;
  const int N = m->n_species;
  if (N > LASSIE_DENSE_MAX) return sim_fail(r, SBG_ERR_INPUT, LASSIE_FAIL_DENSE);
  int ok = 0;
  w->pos = malloc(sizeof(int) * (size_t)N);
  w->ipos = malloc(sizeof(int) * (size_t)N);
  if (w->pos && w->ipos && min_degree_order(m, w->pos) == 0) {
    for (int j = 0; j < N; j++) w->ipos[w->pos[j]] = j;
    ok = lu_symbolic(m, w) == 0;
  }
  for (int i = 0; ok && i < LASSIE_BDF_HIST; i++) ok = (w->hist[i] = malloc(sizeof(double) * (size_t)N)) != NULL;
  if (ok) ok = (w->cvec = malloc(sizeof(double) * (size_t)N)) != NULL;
  if (!ok) {
    free(w->pos); w->pos = NULL; free(w->ipos); w->ipos = NULL;
    return sim_fail(r, SBG_ERR_ALLOC, LASSIE_FAIL_ALLOC);
  }
  return 0;
}

/* The BDF formula of order *qq (the order at hand, limited by the history)
 * for the new point tnew: the predictor in w->ypred, the constant part c
 * of y - c - gamma f(y) = 0 in w->cvec, *gamma and the constant errc of
 * the error estimate errc |y - ypred|. */
static void implicit_formula(sim_run *r, double hs, double tnew, int *qq_out, double *gamma_out,
                             double *errc_out) {
  const sbg_lassie_model *m = r->m;
  ws *w = r->w;
  const int N = m->n_species;
  const double *x = w->x;
  double *c = w->cvec;
  int qq = r->q < r->nh - 1 ? r->q : r->nh - 1;
  if (qq < 1) qq = 1;
  double gamma, errc;
  if (r->nh == 1) {
    /* BDF1 with an explicit Euler predictor: error = (y - ypred) / 2 */
    if (!r->fn_valid) { sbg_lassie_rhs(m, r->k, x, w->v, w->fn); r->st[SBG_LASSIE_ST_RHS]++; r->fn_valid = 1; }
    gamma = hs; errc = 0.5;
    for (int j = 0; j < N; j++) { w->ypred[j] = x[j] + hs * w->fn[j]; c[j] = x[j]; }
  } else {
    double dl[LASSIE_BDF_HIST + 1], L[LASSIE_BDF_HIST + 1];
    lassie_team tm = lassie_team_host();
    gamma = lassie_bdf_formula(tnew, r->ht, r->nh, qq, dl, L, &errc);
    lassie_bdf_predict(&tm, w->hist, L, dl, qq, gamma, N, w->ypred, c);
  }
  *qq_out = qq; *gamma_out = gamma; *errc_out = errc;
}

/* Modified Newton on G(y) = y - c - gamma f(y) from the predictor, into
 * w->y, with the weights of the error test left in w->wt.  Returns 1 when
 * it converged. */
static int implicit_newton(sim_run *r, double gamma) {
  const sbg_lassie_model *m = r->m;
  ws *w = r->w;
  const int N = m->n_species;
  const double rtol = r->p->rtol, atol = r->p->atol, *x = w->x, *c = w->cvec;
  double *y = w->y, *g = w->g;
  memcpy(y, w->ypred, sizeof(double) * N);
  double scale = 2.0 / (1.0 + gamma / r->gamma_fact), dn_prev = 0;
  lassie_team tm = lassie_team_host();
  for (int it = 0; it < LASSIE_NEWTON_MAXIT; it++) {
    lassie_newton_residual(&tm, m, r->k, y, x, c, gamma, rtol, atol, w->pos, NULL, w->v, w->wt, w->ys,
                           NULL, NULL);
    r->st[SBG_LASSIE_ST_RHS]++; r->st[SBG_LASSIE_ST_NEWTON]++;
    iter_solve(w, N, w->ys);
    /* root-mean-square norm: a max norm would ask species near zero to
     * converge below the roundoff of the large ones */
    lassie_newton_update(&tm, N, scale, w->pos, w->ys, w->wt, y, g);
    double dn = sqrt(lassie_serial_sum(g, N) / N);
    if (!isfinite(dn)) return 0;
    if (dn <= LASSIE_NEWTON_TOL) return 1;
    if (it > 0) {
      double rate = dn / dn_prev;
      if (rate > 2.0) return 0;
      if (rate < 1.0 && dn * rate / (1 - rate) <= LASSIE_NEWTON_TOL) return 1;
    }
    dn_prev = dn;
  }
  return 0;
}

/* Accepts the implicit step to tnew (order qq, scaled error err, state in
 * w->y): history, output rows, next step and order, and the way back to
 * explicit steps. */
static void implicit_accept(sim_run *r, double hs, int hits, double tnew, int qq, double err) {
  ws *w = r->w;
  const int N = r->m->n_species;
  double *last = w->hist[LASSIE_BDF_HIST - 1];
  for (int i = LASSIE_BDF_HIST - 1; i > 0; i--) { w->hist[i] = w->hist[i - 1]; r->ht[i] = r->ht[i - 1]; }
  w->hist[0] = last; r->ht[0] = tnew;
  memcpy(last, w->y, sizeof(double) * N);
  if (r->nh < LASSIE_BDF_HIST) r->nh++;
  emit_rows(r, r->t, hs, tnew, w->x, w->y, lassie_bdf_interp_points(qq, r->nh));
  memcpy(w->x, w->y, sizeof(double) * N);
  r->fn_valid = 0; r->jac_fresh = 0; r->err_fails = 0;
  r->t = tnew;
  r->st[SBG_LASSIE_ST_STEPS]++; r->st[SBG_LASSIE_ST_IMPLICIT]++;
  r->q = qq; r->q_steps++;
  lassie_team tm = lassie_team_host();
  double fac = lassie_bdf_accept_factor(&tm, w->hist, r->ht, r->nh, &r->q, &r->q_steps, w->wt, N,
                                        err, qq);
  double hn = hs * fac;
  r->h = (hits && hn < r->h) ? r->h : hn;
  if (++r->jac_steps >= LASSIE_JAC_REUSE) r->need_jac = 1;
  /* hysteresis: leave the implicit mode only after a minimum stay and
   * when explicit steps of this size have been stable for a while */
  r->bdf_steps++;
  if (r->p->method == SBG_LASSIE_AUTO) {
    r->calm = (r->bdf_steps >= LASSIE_BDF_MIN_STAY && hn * r->rho < LASSIE_CALM_HRHO) ? r->calm + 1 : 0;
    if (r->calm >= LASSIE_CALM_STEPS) to_explicit(r);
  }
}

/* One attempt of a variable-coefficient BDF step, orders 1 to 5, of size
 * hs.  Returns -1 on failure, else 0. */
static int implicit_attempt(sim_run *r, double hs, int hits, double target, double hmin) {
  ws *w = r->w;
  const int N = r->m->n_species;
  if (!w->lu_ptr && implicit_setup(r) != 0) return -1;
  if (r->nh == 0) {   /* (re)start: order 1 from the current state alone */
    memcpy(w->hist[0], w->x, sizeof(double) * N);
    r->ht[0] = r->t; r->nh = 1; r->q = 1; r->q_steps = 0; r->err_fails = 0;
  }
  const double tnew = hits ? target : r->t + hs;
  int qq;
  double gamma, errc;
  implicit_formula(r, hs, tnew, &qq, &gamma, &errc);
  if (r->need_jac) {
    sbg_lassie_dvdx(r->m, r->k, w->x, w->dv);
    r->st[SBG_LASSIE_ST_JAC]++;
    r->rho = gershgorin(r->m, w);
    r->need_jac = 0; r->jac_fresh = 1; r->factored = 0; r->jac_steps = 0;
  }
  if (!r->factored || fabs(gamma / r->gamma_fact - 1) > 0.3) {
    r->st[SBG_LASSIE_ST_FACTOR]++;
    int fr = iter_factor(r->m, gamma, w);
    if (fr == -2) return sim_fail(r, SBG_ERR_ALLOC, LASSIE_FAIL_ALLOC);
    if (fr != 0) {
      r->factored = 0;
      r->st[SBG_LASSIE_ST_REJECTED]++;
      r->h = 0.25 * hs;
      return r->h < hmin ? sim_fail(r, SBG_ERR_NUMERIC, LASSIE_FAIL_HMIN) : 0;
    }
    r->factored = 1; r->gamma_fact = gamma;
  }
  if (!implicit_newton(r, gamma)) {
    r->st[SBG_LASSIE_ST_REJECTED]++;
    if (!r->jac_fresh) { r->need_jac = 1; return 0; }
    r->h = 0.25 * hs; r->factored = 0;
    return r->h < hmin ? sim_fail(r, SBG_ERR_NUMERIC, LASSIE_FAIL_NEWTON) : 0;
  }
  lassie_team tm = lassie_team_host();
  double err = lassie_bdf_error(&tm, w->x, w->y, w->ypred, w->wt, errc, r->p->rtol, r->p->atol, N);
  if (!(err <= 1.0)) {
    r->st[SBG_LASSIE_ST_REJECTED]++;
    double fac = lassie_bdf_reject_factor(err, qq);
    /* repeated failures: a lower order */
    if (++r->err_fails >= 2 && qq > 1) { r->q = qq - 1; r->q_steps = 0; }
    r->h = hs * fac;
    return r->h < hmin ? sim_fail(r, SBG_ERR_NUMERIC, LASSIE_FAIL_HMIN) : 0;
  }
  implicit_accept(r, hs, hits, tnew, qq, err);
  return 0;
}

/* Runs one simulation, number `sim` of the batch (its window, its watch's
 * report); with `start` it continues one that another engine (the GPU's
 * explicit steps) brought to start->t, in implicit mode.  Each
 * attempt steps towards the target (the next output time with RKF45, else
 * the end: the output times in between are interpolated), the last one
 * landing on it exactly. */
static void integrate(const sbg_lassie_model *m, const sbg_lassie_params *p,
                      const double *k, const double *x0, double *out, double *stats,
                      ws *w, lassie_poll *lp, int poller, sim_out *so,
                      const sbg_lassie_start *start, sbg_lassie_watch *watch, int sim) {
  const int N = m->n_species, nt = p->n_times;
  sim_run r;
  memset(&r, 0, sizeof(r));
  r.m = m; r.p = p; r.k = k; r.out = out; r.w = w; r.so = so;
  so->st = SBG_OK; so->what = LASSIE_OK; so->cancelled = 0;
  if (watch) {
    const int nc = watch->n_conds > 0 ? watch->n_conds : 1;
    r.wv = malloc(sizeof(double) * (size_t)nc);
    r.wq = malloc(sizeof(double) * (size_t)nc);
    r.wx = malloc(sizeof(double) * (size_t)N);
    if (!r.wv || !r.wq || !r.wx) {
      free(r.wv); free(r.wq); free(r.wx);
      sim_fail(&r, SBG_ERR_ALLOC, LASSIE_FAIL_ALLOC);
      return;
    }
    r.watch = watch; r.wsim = sim;
    r.wx_out = watch->x + (size_t)sim * N;
    r.wv_out = watch->values + (size_t)sim * watch->n_conds;
    watch->stopped[sim] = 0;
    for (int c = 0; c < watch->n_conds; c++)
      r.wv[c] = sbg_lassie_law_eval(watch->code + watch->start[c], watch->cval, x0, -1, 0);
  }
  double t0;
  int row0;
  lassie_window(p, sim, &t0, &r.tend, &row0);
  r.span = r.tend - t0;
  r.t = t0;
  r.scheme = p->method == SBG_LASSIE_RKF45 ? LASSIE_RKF45 : LASSIE_DP5;
  r.dense = p->method != SBG_LASSIE_RKF45;
  r.mode = p->method == SBG_LASSIE_BDF ? MODE_IMPLICIT : MODE_EXPLICIT;
  r.next = row0;
  r.need_jac = 1; r.q = 1;
  memcpy(w->x, x0, sizeof(double) * N);
  if (start) {
    memcpy(r.st, stats, sizeof(r.st));
    r.t = start->t; r.h = start->h; r.next = start->next; r.attempts = start->attempts;
    r.mode = MODE_IMPLICIT;
  } else {
    if (!p->window)
      for (int j = 0; j < N; j++) out[(size_t)j * nt] = x0[j];
    r.h = sbg_lassie_initial_step(m, p, k, x0, r.span, w->ks[0], w->v);
    if (!(p->h_init > 0)) r.st[SBG_LASSIE_ST_RHS]++;
    if (p->attempts0) r.attempts = p->attempts0[sim];
  }
  while (r.next < nt && r.t < r.tend) {
    if (++r.attempts > p->max_steps) { sim_fail(&r, SBG_ERR_NUMERIC, LASSIE_FAIL_MAXSTEPS); break; }
    if (lp->stop || (poller && lassie_poll_due(lp, (r.t - t0) / r.span))) {
      sim_fail(&r, SBG_ERR_INTERRUPTED, LASSIE_FAIL_INTERRUPT);
      so->cancelled = 1;
      break;
    }
    double hmin = lassie_hmin(r.t, r.span);
    /* land exactly on the target; split a near miss in two so no sliver
     * of a step is left */
    const double target = r.dense ? r.tend : p->times[r.next];
    int hits;
    double hs = lassie_attempt_size(r.t, r.h, target, &hits);
    if (r.mode == MODE_IMPLICIT) hs = lassie_bdf_cap(hs, r.ht, r.nh, &hits);
    /* an explicit attempt, or an implicit one (also when the explicit
     * steps turned stiff before attempting) */
    int rc = r.mode == MODE_EXPLICIT ? explicit_attempt(&r, hs, hits, target, hmin) : 1;
    if (rc == 1) rc = implicit_attempt(&r, hs, hits, target, hmin);
    if (rc < 0) break;
    if (r.watch && r.watch->stopped[sim]) break;
  }
  if (watch && !watch->stopped[sim] && so->st == SBG_OK) {
    /* the last time reached: its state, the conditions at the start */
    watch->t[sim] = r.t; watch->next[sim] = r.next;
    memcpy(r.wx_out, w->x, sizeof(double) * N);
    memcpy(r.wv_out, r.wv, sizeof(double) * watch->n_conds);
  }
  if (watch) { free(r.wv); free(r.wq); free(r.wx); }
  if (so->st != SBG_OK) {
    /* rows not reached are NA-like: fill with NaN so nothing stale leaks */
    for (int row = r.next; row < nt; row++)
      for (int j = 0; j < N; j++) out[(size_t)j * nt + row] = NAN;
  }
  memcpy(stats, r.st, sizeof(r.st));
}
/* Simulations sims[0..n) of the batch (NULL: 0..n-1), each on one thread,
 * taken in order by whichever thread is free, so the numbers do not depend
 * on the threads; `x0` holds the starting states (one per simulation of the
 * batch when `x0_per_sim`, else one shared).  Thread 0 polls (lassie_poll).
 * A simulation that fails numerically is recorded in status and messages
 * (whole-batch arrays) and the others go on; a failure of the run (memory,
 * interrupt) stops them all and is the returned status. */
static sbg_status lassie_cpu_run(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                 int n, const int *sims, const double *x0, int x0_per_sim,
                                 double *out, double *stats, int *status, char *messages,
                                 const sbg_lassie_start *starts, sbg_lassie_watch *watch,
                                 sbg_ctx *ctx) {
  const int N = m->n_species, M = m->n_reactions;
  const size_t blk = (size_t)p->n_times * N;
  int nth = ctx->n_threads < n ? ctx->n_threads : n;
  if (nth < 1) nth = 1;
  sbg_status st = SBG_OK;
  ws *w = calloc((size_t)nth, sizeof(ws));
  sim_out *so = calloc((size_t)(n > 0 ? n : 1), sizeof(sim_out));
  if (!w || !so) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory"); goto done; }
  for (int i = 0; i < nth; i++)
    if (!ws_alloc(&w[i], N, M, m->r_ptr[M])) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory"); goto done; }

  lassie_poll lp = {ctx, 0, SBG_OK, lassie_now() + LASSIE_POLL_EVERY, 0, n};
  int next = 0;
#pragma omp parallel num_threads(nth)
  {
    const int tid = omp_get_thread_num();
    for (;;) {
      int i;
#pragma omp atomic capture
      i = next++;
      if (i >= n || lp.stop) break;
      const int s = sims ? sims[i] : i;
      integrate(m, p, p->rates + (p->rates_per_sim ? (size_t)s * M : 0),
                x0 + (x0_per_sim ? (size_t)s * N : 0), out + (size_t)s * blk,
                stats + (size_t)s * SBG_LASSIE_N_STATS, &w[tid], &lp, tid == 0,
                &so[i], starts ? &starts[i] : NULL, watch, s);
      if (so[i].st != SBG_OK && !so[i].cancelled && !lassie_fail_is_per_sim(so[i].what)) lp.stop = 1;
#pragma omp atomic
      lp.finished++;
    }
    /* the calling thread keeps polling while the others finish theirs */
    if (tid == 0) {
      for (;;) {
        int f;
#pragma omp atomic read
        f = lp.finished;
        if (f >= n || lp.stop) break;
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
        lassie_poll_due(&lp, 0);
      }
    }
  }
  for (int i = 0; i < n; i++) {
    if (so[i].st == SBG_OK || so[i].cancelled) continue;
    const int s = sims ? sims[i] : i;
    if (lassie_fail_is_per_sim(so[i].what)) {
      lassie_record_fail(status, messages, s, so[i].what, so[i].t, p, N);
      continue;
    }
    st = lassie_fail(ctx, so[i].st, so[i].what, so[i].t, s, p, N);
    goto done;
  }
  st = lp.st;   /* interrupted (its message is in ctx), or SBG_OK */
done:
  if (w) for (int i = 0; i < nth; i++) ws_free(&w[i]);
  free(w);
  free(so);
  return st;
}

sbg_status sbg_lassie_cpu(const sbg_lassie_model *m, const sbg_lassie_params *p,
                          sbg_lassie_result *r, sbg_ctx *ctx) {
  sbg_status st = lassie_out_ready(r, ctx);
  if (st != SBG_OK) return st;
  return lassie_cpu_run(m, p, p->n_sims, NULL, p->initial, p->initial_per_sim, r->out, r->stats,
                        r->status, r->messages, NULL, r->watch, ctx);
}

sbg_status sbg_lassie_cpu_continue(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                   int sim, const double *x, double *out, double *stats,
                                   const sbg_lassie_start *start, sbg_ctx *ctx) {
  ws w;
  sim_out so;
  if (!ws_alloc(&w, m->n_species, m->n_reactions, m->r_ptr[m->n_reactions]))
    return sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory");
  const double *k = p->rates + (p->rates_per_sim ? (size_t)sim * m->n_reactions : 0);
  lassie_poll lp = {ctx, 0, SBG_OK, lassie_now() + LASSIE_POLL_EVERY, 0, 1};
  integrate(m, p, k, x, out, stats, &w, &lp, 1, &so, start, NULL, sim);
  ws_free(&w);
  if (so.st == SBG_OK) return SBG_OK;
  if (so.cancelled) return lp.st;
  return lassie_fail(ctx, so.st, so.what, so.t, sim, p, m->n_species);
}

sbg_status sbg_lassie_cpu_continue_many(const sbg_lassie_model *m, const sbg_lassie_params *p,
                                        int n, const int *sims, const double *x, double *out,
                                        double *stats, int *status, char *messages,
                                        const sbg_lassie_start *starts, sbg_lassie_watch *watch,
                                        sbg_ctx *ctx) {
  return lassie_cpu_run(m, p, n, sims, x, 1, out, stats, status, messages, starts, watch, ctx);
}
