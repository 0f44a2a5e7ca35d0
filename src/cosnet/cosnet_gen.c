/* Random symmetric networks for the parCosnet() benchmark (inst/bench/
 * cosnet.R, through the internal cosnet_random_network()): an Erdos-Renyi
 * graph G(n, p) with U(0,1) weights, built directly in compressed rows by
 * several threads.  The graph depends on (n, p, seed) only, not on the
 * thread count.  Plain C, no R. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cosnet.h"
#include "omp_compat.h"
#include "philox.h"

/* The upper neighbours v > u of row u, in increasing order, with their
 * weights: geometric skips between successes of G(n, p), drawn from the
 * Philox stream (seed, subsequence u), so any thread regenerates the same
 * row.  Calls emit(v, w) for each. */
#define ER_ROW(er, u, EMIT)                                                      \
  do {                                                                           \
    sbg_philox g_;                                                               \
    sbg_philox_init(&g_, (er)->seed, (uint64_t)(u), 0);                          \
    int64_t v_ = (u);                                                            \
    for (;;) {                                                                   \
      if ((er)->log_q == 0) break; /* p = 0: no edges */                         \
      double r_ = sbg_philox_unif(&g_);                                          \
      double skip_ = floor(log(r_) / (er)->log_q);                               \
      if (skip_ >= (double)((er)->n - v_)) break;                                \
      v_ += (int64_t)skip_ + 1;                                                  \
      if (v_ >= (er)->n) break;                                                  \
      double w_ = sbg_philox_unif(&g_);                                          \
      EMIT((int32_t)v_, w_);                                                     \
    }                                                                            \
  } while (0)

sbg_status sbg_cosnet_er_init(sbg_cosnet_er *er, int32_t n, double prob, uint64_t seed,
                              int n_threads) {
  memset(er, 0, sizeof(*er));
  er->n = n;
  er->seed = seed;
  /* log(1 - p); -inf for p = 1 (every pair) gives skips of 0 */
  er->log_q = prob >= 1 ? -INFINITY : prob <= 0 ? 0.0 : log1p(-prob);
  int nc = n_threads > 0 ? n_threads : 1;
  if (nc > n) nc = n > 0 ? n : 1;
  er->n_chunks = nc;
  er->bounds = (int32_t *)malloc(((size_t)nc + 1) * sizeof(int32_t));
  er->up = (int32_t *)calloc((size_t)(n > 0 ? n : 1), sizeof(int32_t));
  er->cnt = (int32_t *)calloc((size_t)nc * (size_t)(n > 0 ? n : 1), sizeof(int32_t));
  if (!er->bounds || !er->up || !er->cnt) {
    sbg_cosnet_er_free(er);
    return SBG_ERR_ALLOC;
  }
  /* Chunks of rows with equal expected work: row u has n - 1 - u candidate
   * upper neighbours, so early rows are heavier. */
  double total = 0.5 * (double)n * (double)(n - 1), acc = 0;
  int t = 1;
  er->bounds[0] = 0;
  for (int32_t u = 0; u < n && t < nc; u++) {
    acc += (double)(n - 1 - u);
    if (acc >= total * t / nc) er->bounds[t++] = u + 1;
  }
  while (t <= nc) er->bounds[t++] = n;
  return SBG_OK;
}

void sbg_cosnet_er_free(sbg_cosnet_er *er) {
  free(er->bounds);
  free(er->up);
  free(er->cnt);
  er->bounds = NULL;
  er->up = NULL;
  er->cnt = NULL;
}

/* Pass 1: degrees.  Chunk t counts, for every node v, its lower
 * neighbours from the rows of chunk t; these counts become the offsets of
 * chunk t's entries inside row v, so that pass 2 writes every row sorted. */
sbg_status sbg_cosnet_er_count(sbg_cosnet_er *er, int64_t *rowptr) {
  int32_t n = er->n;
  int nc = er->n_chunks;
#pragma omp parallel for num_threads(nc) schedule(static, 1)
  for (int t = 0; t < nc; t++) {
    int32_t *cnt = er->cnt + (size_t)t * n;
    for (int32_t u = er->bounds[t]; u < er->bounds[t + 1]; u++) {
      int32_t d = 0;
#define ER_COUNT(v, w) do { (void)(w); cnt[v]++; d++; } while (0)
      ER_ROW(er, u, ER_COUNT);
#undef ER_COUNT
      er->up[u] = d;
    }
  }
  rowptr[0] = 0;
  for (int32_t v = 0; v < n; v++) {
    int64_t off = 0;
    for (int t = 0; t < nc; t++) {
      int32_t c = er->cnt[(size_t)t * n + v];
      er->cnt[(size_t)t * n + v] = (int32_t)off;
      off += c;
    }
    rowptr[v + 1] = rowptr[v] + off + er->up[v];
  }
  return SBG_OK;
}

/* Pass 2: the entries.  Row v holds its lower neighbours (chunks in order,
 * rows in order within a chunk: increasing) and then its upper ones; both
 * directions of an edge carry the same weight. */
sbg_status sbg_cosnet_er_fill(sbg_cosnet_er *er, const int64_t *rowptr, int32_t *col,
                              double *w) {
  int32_t n = er->n;
  int nc = er->n_chunks;
#pragma omp parallel for num_threads(nc) schedule(static, 1)
  for (int t = 0; t < nc; t++) {
    int32_t *cnt = er->cnt + (size_t)t * n;
    for (int32_t u = er->bounds[t]; u < er->bounds[t + 1]; u++) {
      int64_t at = rowptr[u + 1] - er->up[u];
#define ER_FILL(v, x)                                      \
  do {                                                     \
    col[at] = (v);                                         \
    w[at] = (x);                                           \
    at++;                                                  \
    int64_t lo_ = rowptr[v] + cnt[v]++;                    \
    col[lo_] = u;                                          \
    w[lo_] = (x);                                          \
  } while (0)
      ER_ROW(er, u, ER_FILL);
#undef ER_FILL
    }
  }
  return SBG_OK;
}
