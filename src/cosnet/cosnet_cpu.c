/* CPU engine of parCosnet() and cvParCosnet(): Jones-Plassmann colouring
 * with Philox priorities, then for every (class, fold) job the training
 * points, the learned (alpha, c), the thresholds and the colour-parallel
 * Hopfield dynamics.  In cross-validation the training points of all folds
 * of a class come from one pass over the rows.  OpenMP over classes (or
 * jobs) when there are enough of them, else over rows and the nodes of a
 * colour; results do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cosnet.h"
#include "omp_compat.h"

/* Products and sums rounded one by one, as on the GPU: no contraction into
 * fused multiply-adds where the target has them (x86-64 without -mfma has
 * none; the pragma would also switch off GCC's vectoriser, so only here). */
#if defined(__GNUC__) && !defined(__clang__) && (defined(__FMA__) || defined(__ARM_FEATURE_FMA))
#pragma GCC optimize("fp-contract=off")
#endif
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

/* The canonical sum of a hub row (more than SBG_COSNET_HUB_DEGREE
 * entries): 256 strided partials, then the halving tree; val2 (may be
 * NULL) gives a second sum in the same pass. */
static void row_sum_hub(const sbg_cosnet_graph *g, int32_t v, const double *val1,
                        const double *val2, double *s1, double *s2) {
  double p1[SBG_COSNET_HUB_LANES] = {0}, p2[SBG_COSNET_HUB_LANES] = {0};
  int64_t b = g->v_rowptr[v], e = g->v_rowptr[v + 1];
  for (int64_t k = b; k < e; k++) {
    int l = (int)((k - b) % SBG_COSNET_HUB_LANES);
    int32_t u = g->v_col[k];
    p1[l] += g->v_w[k] * val1[u];
    if (val2) p2[l] += g->v_w[k] * val2[u];
  }
  for (int off = SBG_COSNET_HUB_LANES / 2; off > 0; off >>= 1)
    for (int l = 0; l < off; l++) {
      p1[l] = p1[l] + p1[l + off];
      p2[l] = p2[l] + p2[l + off];
    }
  *s1 = p1[0];
  if (s2) *s2 = p2[0];
}

/* The canonical row sum (see SBG_COSNET_LANES): 32 strided partials, then
 * the butterfly tree.  Node u contributes w * val[u], where val holds the
 * value of each node's state (or label) for this job: one random load per
 * entry (val of a job stays in the cache).  The lanes are taken 8 at a
 * time over the whole row, so that their partials stay in registers; each
 * lane still adds its own entries in row order, so the result is the same
 * as lane by lane. */
static double row_sum(const sbg_cosnet_graph *g, int32_t v, const double *val) {
  double part[SBG_COSNET_LANES];
  int64_t b = g->v_rowptr[v], e = g->v_rowptr[v + 1];
  if (e - b > SBG_COSNET_HUB_DEGREE) {
    double s;
    row_sum_hub(g, v, val, NULL, &s, NULL);
    return s;
  }
  const int32_t *col = g->v_col;
  const double *w = g->v_w;
  int64_t full = b + (e - b) / SBG_COSNET_LANES * SBG_COSNET_LANES;
  for (int lb = 0; lb < SBG_COSNET_LANES; lb += 8) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (int64_t k = b + lb; k < full; k += SBG_COSNET_LANES) {
      a0 += w[k] * val[col[k]];
      a1 += w[k + 1] * val[col[k + 1]];
      a2 += w[k + 2] * val[col[k + 2]];
      a3 += w[k + 3] * val[col[k + 3]];
      a4 += w[k + 4] * val[col[k + 4]];
      a5 += w[k + 5] * val[col[k + 5]];
      a6 += w[k + 6] * val[col[k + 6]];
      a7 += w[k + 7] * val[col[k + 7]];
    }
    part[lb] = a0; part[lb + 1] = a1; part[lb + 2] = a2; part[lb + 3] = a3;
    part[lb + 4] = a4; part[lb + 5] = a5; part[lb + 6] = a6; part[lb + 7] = a7;
  }
  for (int l = 0; full + l < e; l++) part[l] += w[full + l] * val[col[full + l]];
  for (int off = SBG_COSNET_LANES / 2; off > 0; off >>= 1)
    for (int l = 0; l < off; l++) part[l] = part[l] + part[l + off];
  return part[0];
}

/* Two row sums in one pass (the training points), 4 lanes at a time. */
static void row_sum2(const sbg_cosnet_graph *g, int32_t v, const double *val1,
                     const double *val2, double *s1, double *s2) {
  double p1[SBG_COSNET_LANES], p2[SBG_COSNET_LANES];
  int64_t b = g->v_rowptr[v], e = g->v_rowptr[v + 1];
  if (e - b > SBG_COSNET_HUB_DEGREE) {
    row_sum_hub(g, v, val1, val2, s1, s2);
    return;
  }
  const int32_t *col = g->v_col;
  const double *w = g->v_w;
  int64_t full = b + (e - b) / SBG_COSNET_LANES * SBG_COSNET_LANES;
  for (int lb = 0; lb < SBG_COSNET_LANES; lb += 4) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    for (int64_t k = b + lb; k < full; k += SBG_COSNET_LANES) {
      int32_t u0 = col[k], u1 = col[k + 1], u2 = col[k + 2], u3 = col[k + 3];
      a0 += w[k] * val1[u0];
      c0 += w[k] * val2[u0];
      a1 += w[k + 1] * val1[u1];
      c1 += w[k + 1] * val2[u1];
      a2 += w[k + 2] * val1[u2];
      c2 += w[k + 2] * val2[u2];
      a3 += w[k + 3] * val1[u3];
      c3 += w[k + 3] * val2[u3];
    }
    p1[lb] = a0; p1[lb + 1] = a1; p1[lb + 2] = a2; p1[lb + 3] = a3;
    p2[lb] = c0; p2[lb + 1] = c1; p2[lb + 2] = c2; p2[lb + 3] = c3;
  }
  for (int l = 0; full + l < e; l++) {
    int32_t u = col[full + l];
    p1[l] += w[full + l] * val1[u];
    p2[l] += w[full + l] * val2[u];
  }
  for (int off = SBG_COSNET_LANES / 2; off > 0; off >>= 1)
    for (int l = 0; l < off; l++) {
      p1[l] = p1[l] + p1[l + off];
      p2[l] = p2[l] + p2[l + off];
    }
  *s1 = p1[0];
  *s2 = p2[0];
}

/* Most folds for which the points are batched per class: the folds are a
 * vector of this many doubles (padded). */
#define SBG_COSNET_BATCH_FOLDS 8

/* Pairs of doubles (GCC/Clang vector extension: SSE2 on x86-64, NEON on
 * arm64, plain code elsewhere), so that a lane's folds stay in registers;
 * element-wise + and * round as the scalar operations do. */
typedef double sbg_v2d __attribute__((vector_size(16)));

/* One lane: its entries k = b + l, b + l + L, ... in order; NV pairs of
 * folds (a constant at each call, so that the accumulators are registers). */
static inline __attribute__((always_inline)) void
lane_points_folds(const int32_t *col, const double *w, int64_t k0, int64_t e, int L,
                  const int8_t *code, const sbg_v2d (*M)[SBG_COSNET_BATCH_FOLDS / 2], int NV,
                  double *P, double *Q) {
  sbg_v2d a[SBG_COSNET_BATCH_FOLDS / 2], c[SBG_COSNET_BATCH_FOLDS / 2];
  for (int q = 0; q < NV; q++) a[q] = c[q] = (sbg_v2d){0.0, 0.0};
  for (int64_t k = k0; k < e; k += L) {
    int cc = code[col[k]];
    if (cc == 0) continue;
    sbg_v2d wk = {w[k], w[k]};
    if (cc > 0) {
      for (int q = 0; q < NV; q++) a[q] += wk * M[cc][q];
    } else {
      for (int q = 0; q < NV; q++) c[q] += wk * M[-cc][q];
    }
  }
  for (int q = 0; q < NV; q++) {
    P[2 * q] = a[q][0]; P[2 * q + 1] = a[q][1];
    Q[2 * q] = c[q][0]; Q[2 * q + 1] = c[q][1];
  }
}

/* Cross-validation: the training points of all folds of one class in one
 * pass over the rows, instead of one row_sum2 pass per fold.  code[u]:
 * 0 unlabelled, else +-fv for a labelled positive/negative, fv = 1 + its
 * fold index (or nf + 1: labelled in every job).  M[fv][f] = 1 when a node
 * of fold code fv is labelled in the job of fold f, else 0.  In the job of
 * fold f, neighbour u adds w * 1 to the positive (negative) sum when it is
 * a labelled positive (negative) outside fold f, and w * 0 = +0
 * otherwise, exactly as here; terms that add +0 to both sums (unlabelled
 * u) are skipped, which changes nothing either (a partial sum is never -0:
 * it starts at +0 and only gets terms >= 0).  So each fold gets exactly
 * row_sum2's lanes, each lane adding its entries in row order, and after
 * the same halving tree the same bits.  Lane by lane, the folds of a lane
 * in a short vector (registers).  P, Q: lanes x SBG_COSNET_BATCH_FOLDS
 * scratch; x, y: the sums of row v, one per fold. */
static void row_points_folds(const sbg_cosnet_graph *g, int32_t v, const int8_t *code, int nf,
                             const sbg_v2d (*M)[SBG_COSNET_BATCH_FOLDS / 2], double *P, double *Q,
                             double *x, double *y) {
  enum { F = SBG_COSNET_BATCH_FOLDS };
  int64_t b = g->v_rowptr[v], e = g->v_rowptr[v + 1];
  int L = e - b > SBG_COSNET_HUB_DEGREE ? SBG_COSNET_HUB_LANES : SBG_COSNET_LANES;
  const int32_t *col = g->v_col;
  const double *w = g->v_w;
  /* lanes past the row's end stay 0 */
  if (e - b < L) {
    memset(P, 0, (size_t)L * F * sizeof(double));
    memset(Q, 0, (size_t)L * F * sizeof(double));
  }
  int nl = e - b < L ? (int)(e - b) : L;
  if (nf <= 2)
    for (int l = 0; l < nl; l++) lane_points_folds(col, w, b + l, e, L, code, M, 1, P + l * F, Q + l * F);
  else if (nf <= 4)
    for (int l = 0; l < nl; l++) lane_points_folds(col, w, b + l, e, L, code, M, 2, P + l * F, Q + l * F);
  else if (nf <= 6)
    for (int l = 0; l < nl; l++) lane_points_folds(col, w, b + l, e, L, code, M, 3, P + l * F, Q + l * F);
  else
    for (int l = 0; l < nl; l++) lane_points_folds(col, w, b + l, e, L, code, M, 4, P + l * F, Q + l * F);
  for (int off = L / 2; off > 0; off >>= 1)
    for (int l = 0; l < off; l++)
      for (int f = 0; f < nf; f++) {
        P[l * F + f] = P[l * F + f] + P[(l + off) * F + f];
        Q[l * F + f] = Q[l * F + f] + Q[(l + off) * F + f];
      }
  for (int f = 0; f < nf; f++) {
    x[f] = P[f];
    y[f] = Q[f];
  }
}

/* The points of every fold of class k (see row_points_folds): bx, by are
 * nf x n (fold f at f * n), filled at the labelled nodes; code: n scratch.
 * Rows in parallel over nt threads (1 when classes run in parallel). */
static sbg_status class_points(const sbg_cosnet_input *in, int32_t k, int nt, int8_t *code,
                               double *bx, double *by, sbg_ctx *ctx, int poll, double done) {
  const sbg_cosnet_graph *g = &in->g;
  int32_t n = g->n;
  int nf = in->n_folds;
  const int8_t *lab = in->v_labels + (size_t)k * n;
  const int32_t *fold = in->v_folds + (size_t)k * n;
  for (int32_t v = 0; v < n; v++) {
    /* a labelled node outside 1..nf is labelled in every job (as in
     * sbg_cosnet_job_codes): fold index nf, which no job has */
    int32_t fv = fold[v] >= 1 && fold[v] <= nf ? fold[v] : nf + 1;
    code[v] = (int8_t)(lab[v] == 0 ? 0 : lab[v] > 0 ? fv : -fv);
  }
  /* M[fv][f]: a node of fold code fv is labelled in the job of fold f */
  sbg_v2d M[SBG_COSNET_BATCH_FOLDS + 2][SBG_COSNET_BATCH_FOLDS / 2];
  for (int fv = 0; fv < SBG_COSNET_BATCH_FOLDS + 2; fv++)
    for (int f = 0; f < SBG_COSNET_BATCH_FOLDS; f++) M[fv][f / 2][f % 2] = f != fv - 1 ? 1.0 : 0.0;
  int failed = 0;
  /* chunks of rows, so that a large network still polls often */
  const int32_t chunk = 65536;
  for (int32_t v0 = 0; v0 < n && !failed; v0 += chunk) {
    int32_t v1 = n - v0 > chunk ? v0 + chunk : n;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    double *P = (double *)malloc((size_t)SBG_COSNET_HUB_LANES * SBG_COSNET_BATCH_FOLDS * 2 * sizeof(double));
    double x[SBG_COSNET_BATCH_FOLDS], y[SBG_COSNET_BATCH_FOLDS];
    if (!P) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 256)
    for (int32_t v = v0; v < v1; v++) {
      if (!P || lab[v] == 0) continue;
      row_points_folds(g, v, code, nf, (const sbg_v2d (*)[SBG_COSNET_BATCH_FOLDS / 2])M, P,
                       P + (size_t)SBG_COSNET_HUB_LANES * SBG_COSNET_BATCH_FOLDS, x, y);
      for (int f = 0; f < nf; f++) {
        bx[(size_t)f * n + v] = x[f];
        by[(size_t)f * n + v] = y[f];
      }
    }
    free(P);
  }
    if (poll && !failed) {
      sbg_status st = sbg_poll(ctx, done);
      if (st != SBG_OK) return st;
    }
  }
  return failed ? sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory for the training points") : SBG_OK;
}

/* Monotonic-enough wall clock for sizing blocks of jobs. */
static double now_s(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- colouring ---------------------------------------------------------- */

static int higher(uint64_t pa, int32_t a, uint64_t pb, int32_t b) {
  return pa > pb || (pa == pb && a > b);
}

typedef struct prio_node {
  uint64_t p;
  int32_t v;
} prio_node;

/* Decreasing priority, ties to the larger index (as higher()). */
static int cmp_prio_desc(const void *a, const void *b) {
  const prio_node *x = (const prio_node *)a, *y = (const prio_node *)b;
  if (x->p != y->p) return x->p < y->p ? 1 : -1;
  return (x->v < y->v) - (x->v > y->v);
}

/* The smallest colour that none of v's coloured neighbours has; mk (at
 * least deg(v) + 2 slots) never holds v on entry.  A neighbour's colour
 * marks its slot, and an uncoloured neighbour (or one above deg(v), which
 * cannot be the answer) marks the spare slot deg(v) + 1, so the loop over
 * the row has no branch: about half of a node's neighbours are coloured
 * when it is, in no order a branch predictor learns.  On the 2-core build
 * machine the one-thread colouring of the mouse-like network of
 * inst/bench/cosnet.R took a third of the time it took with the test in
 * the loop (BENCHMARKS.md, parCosnet). */
static inline int32_t smallest_free_colour(const sbg_cosnet_graph *g, int32_t v, const int32_t *colour,
                                           int32_t *mk) {
  int64_t b = g->v_rowptr[v], e = g->v_rowptr[v + 1];
  uint32_t deg = (uint32_t)(e - b), spare = deg + 1;
  for (int64_t k = b; k < e; k++) {
    uint32_t cu = (uint32_t)colour[g->v_col[k]]; /* uncoloured (-1): above any degree */
    mk[cu <= deg ? cu : spare] = v;
  }
  int32_t cv = 0;
  while (mk[cv] == v) cv++;
  return cv;
}

/* Jones-Plassmann: in each round every uncoloured node whose priority beats
 * all its uncoloured neighbours takes the smallest colour its neighbours do
 * not have.  This is the greedy colouring in decreasing priority order, so
 * it does not depend on threads or backend.  Each node counts its
 * higher-priority neighbours; a round colours the nodes whose count is 0
 * and counts down their lower-priority neighbours, O(edges) in all. */
sbg_status sbg_cosnet_colour_host(const sbg_cosnet_graph *g, uint64_t seed, int32_t *colour,
                                  int32_t *n_colours, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t n = g->n;
  int nt = ctx->n_threads;
  size_t nn = (size_t)(n > 0 ? n : 1);
  uint64_t *prio = (uint64_t *)malloc(nn * sizeof(uint64_t));
  int32_t *wait = (int32_t *)malloc(nn * sizeof(int32_t));
  int32_t *front = (int32_t *)malloc(nn * sizeof(int32_t));
  int32_t *next = (int32_t *)malloc(nn * sizeof(int32_t));
  int64_t maxdeg = 0;
  for (int32_t v = 0; v < n; v++) {
    int64_t d = g->v_rowptr[v + 1] - g->v_rowptr[v];
    if (d > maxdeg) maxdeg = d;
  }
  int32_t *mark = (int32_t *)malloc((size_t)nt * (size_t)(maxdeg + 2) * sizeof(int32_t));
  if (!prio || !wait || !front || !next || !mark) { st = SBG_ERR_ALLOC; goto done; }

  if (nt == 1) {
    /* One thread: the greedy colouring in decreasing priority order
     * directly (what the rounds below compute), one pass over the edges. */
    prio_node *ord = (prio_node *)malloc(nn * sizeof(prio_node));
    if (!ord) { st = SBG_ERR_ALLOC; goto done; }
    for (int32_t v = 0; v < n; v++) {
      ord[v].p = sbg_cosnet_priority(seed, v);
      ord[v].v = v;
      colour[v] = -1;
    }
    qsort(ord, nn, sizeof(prio_node), cmp_prio_desc);
    for (int64_t i = 0; i < maxdeg + 2; i++) mark[i] = -1;
    int32_t ncol = 0;
    for (int32_t t = 0; t < n; t++) {
#ifdef __GNUC__
      /* the nodes come in random order: fetch the start of a row to come
       * (a quarter of the pass's time on that machine) */
      if (t + 4 < n) {
        const char *row = (const char *)(g->v_col + g->v_rowptr[ord[t + 4].v]);
        for (int q = 0; q < 8; q++) __builtin_prefetch(row + 64 * q);
      }
#endif
      int32_t v = ord[t].v;
      int32_t cv = smallest_free_colour(g, v, colour, mark);
      colour[v] = cv;
      if (cv + 1 > ncol) ncol = cv + 1;
      if ((t & 65535) == 65535) {
        st = sbg_poll(ctx, 0.0);
        if (st != SBG_OK) { free(ord); goto done; }
      }
    }
    free(ord);
    *n_colours = n > 0 ? ncol : 0;
    goto done;
  }

#pragma omp parallel for num_threads(nt) schedule(static)
  for (int32_t v = 0; v < n; v++) {
    prio[v] = sbg_cosnet_priority(seed, v);
    colour[v] = -1;
  }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 256)
  for (int32_t v = 0; v < n; v++) {
    int32_t cnt = 0;
    for (int64_t k = g->v_rowptr[v]; k < g->v_rowptr[v + 1]; k++) {
      int32_t u = g->v_col[k];
      cnt += higher(prio[u], u, prio[v], v);
    }
    wait[v] = cnt;
  }
  for (int64_t i = 0; i < (int64_t)nt * (maxdeg + 2); i++) mark[i] = -1;
  int32_t n_front = 0, ncol = 0, n_done = 0;
  for (int32_t v = 0; v < n; v++)
    if (wait[v] == 0) front[n_front++] = v;
  while (n_front > 0) {
    /* The frontier is independent: its nodes read only colours fixed in
     * earlier rounds.  Small frontiers stay on one thread. */
#pragma omp parallel for num_threads(nt) if (nt > 1 && n_front > 4096) schedule(dynamic, 256)
    for (int32_t t = 0; t < n_front; t++) {
      int32_t v = front[t];
      colour[v] = smallest_free_colour(g, v, colour, mark + (size_t)omp_get_thread_num() * (size_t)(maxdeg + 2));
    }
    int32_t n_next = 0;
#pragma omp parallel for num_threads(nt) if (nt > 1 && n_front > 4096) schedule(dynamic, 256)
    for (int32_t t = 0; t < n_front; t++) {
      int32_t v = front[t];
      for (int64_t k = g->v_rowptr[v]; k < g->v_rowptr[v + 1]; k++) {
        int32_t u = g->v_col[k];
        if (!higher(prio[v], v, prio[u], u)) continue;
        int32_t left;
#pragma omp atomic capture
        left = --wait[u];
        if (left == 0) {
          int32_t at;
#pragma omp atomic capture
          at = n_next++;
          next[at] = u;
        }
      }
    }
    for (int32_t t = 0; t < n_front; t++)
      if (colour[front[t]] + 1 > ncol) ncol = colour[front[t]] + 1;
    n_done += n_front;
    int32_t *sw = front; front = next; next = sw;
    n_front = n_next;
    st = sbg_poll(ctx, 0.0);
    if (st != SBG_OK) goto done;
  }
  if (n_done != n) { st = sbg_fail(ctx, SBG_ERR_INTERNAL, "colouring left %d node(s)", (int)(n - n_done)); goto done; }
  *n_colours = ncol;
done:
  free(prio);
  free(wait);
  free(front);
  free(next);
  free(mark);
  return st;
}

/* ---- one job ------------------------------------------------------------- */


typedef struct work {
  int8_t *jl;      /* n: node codes */
  double *theta;   /* n: thresholds of U nodes */
  double *score;   /* n: last field of U nodes */
  int8_t *state;   /* n: +1 / -1 / 0 (not yet set) */
  uint8_t *dirty;  /* n: a neighbour changed state since the node's last update */
  double *val1, *val2; /* n: the value each node adds to its neighbours' sums */
  double *px, *py; /* labelled points */
  int8_t *plab;    /* their labels 1/0 */
  int32_t *ulist;  /* U nodes by colour */
  int64_t *uptr;   /* n_colours + 1 */
  int8_t *code;    /* n (batched points only): class_points' node codes */
  double *bx, *by; /* n_folds x n (batched points only) */
} work;

static void work_free(work *w) {
  free(w->jl); free(w->theta); free(w->score); free(w->state);
  free(w->px); free(w->py); free(w->plab); free(w->ulist); free(w->uptr);
  free(w->val1); free(w->val2); free(w->dirty);
  free(w->code); free(w->bx); free(w->by);
  memset(w, 0, sizeof(*w));
}

static sbg_status work_alloc(work *w, int32_t n, int32_t n_colours, int32_t batch_folds) {
  size_t nn = (size_t)(n > 0 ? n : 1);
  memset(w, 0, sizeof(*w));
  w->jl = (int8_t *)malloc(nn);
  w->theta = (double *)malloc(nn * sizeof(double));
  w->score = (double *)malloc(nn * sizeof(double));
  w->state = (int8_t *)malloc(nn);
  w->dirty = (uint8_t *)malloc(nn);
  w->px = (double *)malloc(nn * sizeof(double));
  w->py = (double *)malloc(nn * sizeof(double));
  w->plab = (int8_t *)malloc(nn);
  w->ulist = (int32_t *)malloc(nn * sizeof(int32_t));
  w->uptr = (int64_t *)malloc((size_t)(n_colours + 1) * sizeof(int64_t));
  w->val1 = (double *)malloc(nn * sizeof(double));
  w->val2 = (double *)malloc(nn * sizeof(double));
  if (!w->val1 || !w->val2 || !w->dirty || !w->jl || !w->theta || !w->score || !w->state || !w->px || !w->py ||
      !w->plab || !w->ulist || !w->uptr) {
    work_free(w);
    return SBG_ERR_ALLOC;
  }
  if (batch_folds > 0) {
    w->code = (int8_t *)malloc(nn);
    w->bx = (double *)malloc(nn * (size_t)batch_folds * sizeof(double));
    w->by = (double *)malloc(nn * (size_t)batch_folds * sizeof(double));
    if (!w->code || !w->bx || !w->by) {
      work_free(w);
      return SBG_ERR_ALLOC;
    }
  }
  return SBG_OK;
}

/* Training points of the job whose codes are in w->jl: weight to the
 * labelled positives (px) and negatives (py) of each labelled node, in
 * node order (w->ulist), with its label (w->plab).  bpx/bpy: computed for
 * all folds of the class at once (class_points), else NULL. */
static void job_points(const sbg_cosnet_graph *g, int nt, work *w, const double *bpx, const double *bpy,
                       int64_t *m_out, int64_t *npos_out) {
  int32_t n = g->n;
  const int8_t *jl = w->jl;
  int64_t m = 0, npos = 0;
  for (int32_t v = 0; v < n; v++)
    if (jl[v] == SBG_COSNET_POS || jl[v] == SBG_COSNET_NEG) {
      w->plab[m] = jl[v] == SBG_COSNET_POS;
      npos += jl[v] == SBG_COSNET_POS;
      w->ulist[m++] = v; /* scratch: the labelled nodes in order */
    }
  *m_out = m;
  *npos_out = npos;
  if (npos == 0 || npos == m) return;
  if (bpx) {
    for (int64_t i = 0; i < m; i++) {
      w->px[i] = bpx[w->ulist[i]];
      w->py[i] = bpy[w->ulist[i]];
    }
    return;
  }
  /* value of each node in the sums to positives (val1) and negatives */
  for (int32_t v = 0; v < n; v++) {
    w->val1[v] = jl[v] == SBG_COSNET_POS ? 1.0 : 0.0;
    w->val2[v] = jl[v] == SBG_COSNET_NEG ? 1.0 : 0.0;
  }
  /* (a parallel region only with threads: entering one costs even then) */
  if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 256)
    for (int64_t i = 0; i < m; i++)
      row_sum2(g, w->ulist[i], w->val1, w->val2, &w->px[i], &w->py[i]);
  } else {
    for (int64_t i = 0; i < m; i++)
      row_sum2(g, w->ulist[i], w->val1, w->val2, &w->px[i], &w->py[i]);
  }
}

/* The unlabelled nodes in colour order (w->ulist, w->uptr); their count. */
static int64_t job_unlabelled(const int32_t *cptr_nodes, const int64_t *cptr, int32_t n_colours, work *w) {
  int64_t nu = 0;
  for (int32_t cl = 0; cl < n_colours; cl++) {
    w->uptr[cl] = nu;
    for (int64_t t = cptr[cl]; t < cptr[cl + 1]; t++) {
      int32_t v = cptr_nodes[t];
      if (w->jl[v] == SBG_COSNET_REPORT || w->jl[v] == SBG_COSNET_QUIET) w->ulist[nu++] = v;
    }
  }
  w->uptr[n_colours] = nu;
  return nu;
}

/* Thresholds of the unlabelled nodes: c minus the pull of the labelled
 * neighbours (plus the regularisation's shift). */
static void job_thresholds(const sbg_cosnet_graph *g, int nt, work *w, int64_t nu, double hi, double lo, double c,
                           const sbg_cosnet_reg *reg) {
  double *val = w->val1;
  const int8_t *jl = w->jl;
  for (int32_t v = 0; v < g->n; v++)
    val[v] = jl[v] == SBG_COSNET_POS ? hi : jl[v] == SBG_COSNET_NEG ? lo : 0.0;
  if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 256)
    for (int64_t i = 0; i < nu; i++) {
      int32_t v = w->ulist[i];
      double th = c - row_sum(g, v, val);
      if (reg->on) th = th + reg->theta_add;
      w->theta[v] = th;
    }
  } else {
    for (int64_t i = 0; i < nu; i++) {
      int32_t v = w->ulist[i];
      double th = c - row_sum(g, v, val);
      if (reg->on) th = th + reg->theta_add;
      w->theta[v] = th;
    }
  }
}

/* What the dynamics of one job need besides the work space. */
typedef struct job_dyn {
  double hi, lo;          /* the values of the states +1 and -1 */
  sbg_cosnet_reg reg;
  int nt, poll;
  double done_before, done_share;
  int32_t sweeps, converged;
} job_dyn;

/* Dynamics from the all-unset state (0); labelled nodes keep state 0 and
 * act through the thresholds only.  val: the value of each state (0, hi
 * or lo), kept with the states. */
static sbg_status job_dynamics(const sbg_cosnet_graph *g, const sbg_cosnet_params *p, int32_t n_colours, work *w,
                               job_dyn *d, sbg_ctx *ctx) {
  int32_t n = g->n;
  double *val = w->val1;
  const double hi = d->hi, lo = d->lo;
  const sbg_cosnet_reg reg = d->reg;
  const int nt = d->nt;
  for (int32_t v = 0; v < n; v++) {
    w->state[v] = 0;
    val[v] = 0.0;
    w->dirty[v] = 0;
  }
  int64_t tot_pos = 0, tot_neg = 0;
  int32_t sweep = 0, converged = 0;
  while (sweep < p->max_sweeps && !converged) {
    sweep++;
    int64_t changed = 0;
    for (int32_t cl = 0; cl < n_colours; cl++) {
      int64_t b = w->uptr[cl], e = w->uptr[cl + 1];
      if (b == e) continue;
      double pen = 0;
      int64_t col_pos = 0, col_neg = 0;
      if (reg.on) {
        /* The dense penalty seen by a node of this colour: r times the
         * states of the U nodes of the other colours, which stay fixed
         * while this colour updates (exact dynamics on W - r(J - B)). */
        for (int64_t i = b; i < e; i++) {
          int8_t s = w->state[w->ulist[i]];
          col_pos += s > 0; col_neg += s < 0;
        }
        pen = reg.r * ((double)(tot_pos - col_pos) * hi + (double)(tot_neg - col_neg) * lo);
      }
      int64_t ch = 0;
      /* The nodes of a colour are not adjacent: each reads only the values
       * of other colours, so they may update in any order, in parallel. */
      /* Without the penalty a node's field changes only when a neighbour's
       * state does: from the third sweep on, a node none of whose
       * neighbours changed since its last update keeps its state and score
       * (the same sum of the same values) and is skipped.  Changes from the
       * second sweep on mark the neighbours (of other colours: never one
       * being updated now); every node is updated in sweeps 1 and 2. */
      int skip_clean = !reg.on && sweep >= 3, mark = !reg.on && sweep >= 2;
#define SBG_COSNET_UPDATE(i)                                                 \
  do {                                                                       \
    int32_t v_ = w->ulist[i];                                                \
    if (skip_clean && !w->dirty[v_]) break;                                  \
    w->dirty[v_] = 0;                                                        \
    double h_ = row_sum(g, v_, val);                                         \
    if (reg.on) h_ = h_ - pen;                                               \
    h_ = h_ - w->theta[v_];                                                  \
    /* COSNet's rule: positive only for a strictly positive field. */        \
    int8_t s_ = h_ > 0 ? 1 : -1;                                             \
    if (s_ != w->state[v_]) {                                                \
      ch++;                                                                  \
      w->state[v_] = s_;                                                     \
      val[v_] = s_ > 0 ? hi : lo;                                            \
      if (mark)                                                              \
        for (int64_t k_ = g->v_rowptr[v_]; k_ < g->v_rowptr[v_ + 1]; k_++) { \
          SBG_COSNET_MARK(w->dirty[g->v_col[k_]]);                           \
        }                                                                    \
    }                                                                        \
    w->score[v_] = h_;                                                       \
  } while (0)
      if (nt > 1 && e - b > 512) {
#define SBG_COSNET_MARK(x) _Pragma("omp atomic write") x = 1
#pragma omp parallel for num_threads(nt) schedule(dynamic, 128) reduction(+ : ch)
        for (int64_t i = b; i < e; i++) SBG_COSNET_UPDATE(i);
#undef SBG_COSNET_MARK
      } else {
#define SBG_COSNET_MARK(x) x = 1
        for (int64_t i = b; i < e; i++) SBG_COSNET_UPDATE(i);
#undef SBG_COSNET_MARK
      }
#undef SBG_COSNET_UPDATE
      changed += ch;
      if (reg.on) {
        int64_t np2 = 0, nn2 = 0;
        for (int64_t i = b; i < e; i++) {
          int8_t s = w->state[w->ulist[i]];
          np2 += s > 0; nn2 += s < 0;
        }
        tot_pos += np2 - col_pos;
        tot_neg += nn2 - col_neg;
      }
      if (d->poll) {
        sbg_status st = sbg_poll(ctx, d->done_before + d->done_share * (1.0 - 1.0 / (sweep + 1.0)));
        if (st != SBG_OK) return st;
      }
    }
    if (changed == 0) converged = 1;
  }

  d->sweeps = sweep;
  d->converged = converged;
  return SBG_OK;
}

/* Runs job j with `nt` threads inside (1 when jobs run in parallel);
 * polls only when `poll` (the calling thread outside parallel regions):
 * training points, learning, thresholds, dynamics, results. */
static sbg_status run_job(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                          const int32_t *cptr_nodes, const int64_t *cptr, int32_t n_colours,
                          int32_t j, int nt, work *w, const double *bpx, const double *bpy,
                          sbg_cosnet_result *out, sbg_ctx *ctx, int poll, double done_before,
                          double done_share) {
  const sbg_cosnet_graph *g = &in->g;
  int32_t n = g->n;
  int32_t nf = in->n_folds > 0 ? in->n_folds : 1;
  int32_t k = j / nf;
  sbg_cosnet_job_codes(in, j, w->jl);
  int64_t m = 0, npos = 0;
  job_points(g, nt, w, bpx, bpy, &m, &npos);
  if (npos == 0 || npos == m)
    return sbg_fail(ctx, SBG_ERR_INPUT, "job %d (class %d): the training set needs labelled positives and negatives",
                    (int)j + 1, (int)k + 1);

  double alpha, c, fs;
  sbg_status st = sbg_cosnet_learn(w->px, w->py, w->plab, m, &alpha, &c, &fs, poll ? ctx : NULL,
                                   done_before);
  if (st == SBG_ERR_INTERRUPTED) return st; /* ctx->errbuf set by sbg_poll */
  if (st != SBG_OK) return sbg_fail(ctx, st, "out of memory while learning job %d", (int)j + 1);
  job_dyn d;
  memset(&d, 0, sizeof d);
  d.hi = sin(alpha);
  d.lo = -cos(alpha);
  d.nt = nt;
  d.poll = poll;
  d.done_before = done_before;
  d.done_share = done_share;
  int64_t nu = job_unlabelled(cptr_nodes, cptr, n_colours, w);
  d.reg = sbg_cosnet_regularisation(p->cost, alpha, npos, m, nu);
  job_thresholds(g, nt, w, nu, d.hi, d.lo, c, &d.reg);
  if ((st = job_dynamics(g, p, n_colours, w, &d, ctx)) != SBG_OK) return st;

  out->v_alpha[j] = alpha;
  out->v_c[j] = c;
  out->v_fscore[j] = fs;
  out->v_sweeps[j] = d.sweeps;
  out->v_converged[j] = d.converged;
  double *sc = out->v_scores + (size_t)k * n;
  int32_t *pr = out->v_pred + (size_t)k * n;
  for (int64_t i = 0; i < nu; i++) {
    int32_t v = w->ulist[i];
    if (w->jl[v] != SBG_COSNET_REPORT) continue;
    sc[v] = w->score[v];
    pr[v] = w->state[v] > 0;
  }
  return SBG_OK;
}

/* A unit of work: one job, or (batched points) all folds of one class. */
static sbg_status run_unit(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                           const int32_t *nodes, const int64_t *cptr, int32_t n_colours, int32_t u,
                           int batch, int nt, work *w, sbg_cosnet_result *out, sbg_ctx *ctx,
                           int poll, int32_t n_jobs) {
  if (!batch)
    return run_job(in, p, nodes, cptr, n_colours, u, nt, w, NULL, NULL, out, ctx, poll,
                   (double)u / n_jobs, 1.0 / n_jobs);
  int32_t n = in->g.n, nf = in->n_folds;
  sbg_status st = class_points(in, u, nt, w->code, w->bx, w->by, ctx, poll,
                               (double)u * nf / n_jobs);
  if (st != SBG_OK) return st;
  for (int32_t f = 0; f < nf; f++) {
    int32_t j = u * nf + f;
    st = run_job(in, p, nodes, cptr, n_colours, j, nt, w, w->bx + (size_t)f * n,
                 w->by + (size_t)f * n, out, ctx, poll, (double)j / n_jobs, 1.0 / n_jobs);
    if (st != SBG_OK) return st;
  }
  return SBG_OK;
}

sbg_status sbg_cosnet_cpu(const sbg_cosnet_input *in, const sbg_cosnet_params *p,
                          sbg_cosnet_result *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t *nodes = NULL;
  int64_t *cptr = NULL;
  work *ws = NULL;
  sbg_status *jst = NULL;
  int nt = ctx->n_threads > 0 ? ctx->n_threads : 1;
  int32_t nf = in->n_folds > 0 ? in->n_folds : 1;
  int32_t n_jobs = in->n_classes * nf;
  int32_t n = in->g.n;
  /* Cross-validation batches the training points of a class's folds (one
   * pass over the rows for all folds, same results) when the classes can
   * keep the threads busy or the jobs could not anyway, and the per-thread
   * points (folds x nodes) take at most 1 GiB. */
  int batch = in->n_folds > 1 && in->n_folds <= SBG_COSNET_BATCH_FOLDS &&
              (nt == 1 || in->n_classes >= nt || n_jobs < nt);
  int32_t n_units = batch ? in->n_classes : n_jobs;
  int par = nt > 1 && n_units >= nt;
  if (batch && (double)(par ? nt : 1) * 2.0 * nf * n * sizeof(double) > 1073741824.0) {
    batch = 0;
    n_units = n_jobs;
    par = nt > 1 && n_units >= nt;
  }
  int n_ws = 0;

  out->n_parts = 0;
  st = sbg_cosnet_colour_host(&in->g, p->seed, out->v_colour, &out->n_colours, ctx);
  if (st != SBG_OK) {
    if (st == SBG_ERR_ALLOC) sbg_fail(ctx, st, "out of memory while colouring the network");
    goto done;
  }
  if (sbg_cosnet_colour_order(out->v_colour, n, out->n_colours, &nodes, &cptr) != SBG_OK) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory while ordering the colours");
    goto done;
  }

  n_ws = par ? nt : 1;
  ws = (work *)calloc((size_t)n_ws, sizeof(work));
  jst = (sbg_status *)calloc((size_t)(n_units > 0 ? n_units : 1), sizeof(sbg_status));
  if (!ws || !jst) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory for the job workspaces"); goto done; }
  for (int t = 0; t < n_ws; t++)
    if (work_alloc(&ws[t], n, out->n_colours, batch ? nf : 0) != SBG_OK) {
      st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory for the job workspaces");
      goto done;
    }

  if (!par) {
    for (int32_t u = 0; u < n_units; u++) {
      st = run_unit(in, p, nodes, cptr, out->n_colours, u, batch, nt, &ws[0], out, ctx, 1, n_jobs);
      if (st != SBG_OK) goto done;
    }
  } else {
    /* Units in parallel, a block at a time, polling between blocks.  Each
     * unit writes only its own outputs; messages go to per-unit contexts. */
    /* Blocks of about 0.2 s, so that polls stay frequent while the
     * threads rarely wait for the slowest unit of a block. */
    int32_t max_block = n_units < 1024 ? n_units : 1024;
    int32_t block = 2 * nt < max_block ? 2 * nt : max_block;
    sbg_ctx *jctx = (sbg_ctx *)calloc((size_t)max_block, sizeof(sbg_ctx));
    if (!jctx) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "out of memory"); goto done; }
    for (int32_t u0 = 0, u1 = 0; u0 < n_units && st == SBG_OK; u0 = u1) {
      u1 = u0 + block < n_units ? u0 + block : n_units;
      double t_start = now_s();
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
      for (int32_t u = u0; u < u1; u++) {
        sbg_ctx *cj = &jctx[u - u0];
        cj->n_threads = 1;
        jst[u] = run_unit(in, p, nodes, cptr, out->n_colours, u, batch, 1,
                          &ws[omp_get_thread_num()], out, cj, 0, n_jobs);
      }
      for (int32_t u = u0; u < u1; u++)
        if (jst[u] != SBG_OK) {
          st = sbg_fail(ctx, jst[u], "%s", jctx[u - u0].errbuf);
          break;
        }
      if (st == SBG_OK) st = sbg_poll(ctx, (double)u1 / n_units);
      double per_unit = (now_s() - t_start) / (double)(u1 - u0);
      double want = per_unit > 0 ? 0.2 / per_unit : (double)max_block;
      block = want > max_block ? max_block : (int32_t)want;
      block = (block + nt - 1) / nt * nt;
      if (block < nt) block = nt;
      if (block > max_block) block = max_block;
    }
    free(jctx);
  }
done:
  if (ws)
    for (int t = 0; t < n_ws; t++) work_free(&ws[t]);
  free(ws);
  free(jst);
  free(nodes);
  free(cptr);
  return st;
}
