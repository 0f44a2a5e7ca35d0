/* Preranked nulls shared across gene sets (permutation = "gene").  With a
 * fixed ranking the null ES of a set depends only on its size, so each
 * permutation draws one random subset of rank positions, as large as the
 * largest set, from its own Philox subsequence, and scores its prefixes:
 * the first k positions drawn are a uniform random set of size k.  Every
 * permutation is computed alone from the seed, so threads and batches do
 * not change a bit.  Each size's ES has the bits of Broad's sequential
 * rule on its own positions (prefix_es), computed four sizes at a time
 * (prefix_es_group); gsea_preranked_gpu.cu gives the same bits on a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gsea_preranked.h"
#include "gsea_math.h"
#include "philox.h"

/* ES of a set at the ascending rank positions pos[0..k) (Broad's rule,
 * the same hit function as the full sweep); wr: weight by rank position,
 * nr: their sum.  The reference rule; prefix_es_group() gives its bits
 * faster and falls back to it on near-ties and all-zero weights. */
static double prefix_es(const int32_t *pos, int32_t k, const double *wr, double nr, double inv_nmiss) {
  int unit = nr == 0; /* all weights 0: unit weights, as the sweep does */
  double inv_nr = 1.0 / (unit ? (double)k : nr);
  gsea_es_state s;
  gsea_es_init(&s);
  for (int32_t i = 0; i < k; i++) gsea_es_hit(&s, pos[i], unit ? 1.0 : wr[pos[i]], inv_nr, inv_nmiss);
  return s.best;
}

/* Lanes of the size groups: LANES consecutive distinct sizes are scored in
 * one pass over the ascending draw, each lane skipping the positions drawn
 * after its size; the lanes' running sums are independent chains, which
 * the CPU overlaps, and with AVX2 one instruction serves the four lanes.
 * Lane arithmetic is plain IEEE double (no FMA), so the bits do not depend
 * on the path taken. */
#define LANES 4

/* The running sums of each lane just before and at each of its hits into
 * v (2 k x LANES; +0 where the position is not the lane's) and the largest
 * magnitude per lane into m: prefix_es()'s operations on each lane's
 * subset, so the same bits.  Scalar version. */
static void group_sums_scalar(const int32_t *pos, const int32_t *tix, int32_t k, const double *kd,
                              const double *inv_nr, const double *inv_nmiss, const double *wr, double *v,
                              double *m) {
  double cum[LANES] = {0}, cnt[LANES] = {0};
  for (int q = 0; q < LANES; q++) m[q] = 0;
  for (int32_t i = 0; i < k; i++) {
    double w = wr[pos[i]], p = (double)pos[i], t = (double)tix[i];
    for (int q = 0; q < LANES; q++) {
      int act = t <= kd[q];
      double miss = (p - cnt[q]) * inv_nmiss[q];
      double b = cum[q] * inv_nr[q] - miss;
      cum[q] = cum[q] + (act ? w : 0.0);
      cnt[q] = cnt[q] + (act ? 1.0 : 0.0);
      double top = cum[q] * inv_nr[q] - miss;
      b = act ? b : 0.0;
      top = act ? top : 0.0;
      v[(size_t)(2 * i) * LANES + q] = b;
      v[(size_t)(2 * i + 1) * LANES + q] = top;
      double ab = fabs(b), at = fabs(top);
      m[q] = ab > m[q] ? ab : m[q];
      m[q] = at > m[q] ? at : m[q];
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define SBG_PRERANK_AVX2 1
typedef double vd __attribute__((vector_size(32)));
typedef double vdu __attribute__((vector_size(32), aligned(8)));
typedef int64_t vi __attribute__((vector_size(32)));
#define VSPLAT(x) ((vd){x, x, x, x})
#define VAND(a, m) ((vd)((vi)(a) & (m)))
#define VABS(a) ((vd)((vi)(a) & (vi){INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX}))
#define VMAX(a, b) __builtin_ia32_maxpd256((a), (b)) /* a > b ? a : b, one instruction */

/* group_sums_scalar() with the four lanes in one AVX2 register (only
 * called where the CPU has AVX2; "fma" is not enabled, so nothing is
 * contracted). */
__attribute__((target("avx2"))) static void group_sums_avx2(const int32_t *pos, const int32_t *tix, int32_t k,
                                                            const double *kd, const double *inv_nr,
                                                            const double *inv_nmiss, const double *wr, double *v,
                                                            double *m) {
  vd vinr, vinm, vk, cum = VSPLAT(0.0), cnt = VSPLAT(0.0), mb = VSPLAT(0.0), mt = VSPLAT(0.0);
  memcpy(&vinr, inv_nr, sizeof vinr);
  memcpy(&vinm, inv_nmiss, sizeof vinm);
  memcpy(&vk, kd, sizeof vk);
  for (int32_t i = 0; i < k; i++) {
    vi act = VSPLAT((double)tix[i]) <= vk;
    vd miss = (VSPLAT((double)pos[i]) - cnt) * vinm;
    vd b = cum * vinr - miss;
    cum = cum + VAND(VSPLAT(wr[pos[i]]), act);
    cnt = cnt + VAND(VSPLAT(1.0), act);
    vd t = cum * vinr - miss;
    b = VAND(b, act);
    t = VAND(t, act);
    *(vdu *)(v + (size_t)(2 * i) * LANES) = b;
    *(vdu *)(v + (size_t)(2 * i + 1) * LANES) = t;
    vd ab = VABS(b), at = VABS(t);
    mb = VMAX(ab, mb);
    mt = VMAX(at, mt);
  }
  for (int q = 0; q < LANES; q++) m[q] = mb[q] > mt[q] ? mb[q] : mt[q];
}

/* The first row i >= from of v (n rows of LANES) with a lane's |value| >=
 * near[lane]; n if none. */
__attribute__((target("avx2"))) static int32_t first_near_avx2(const double *v, int32_t from, int32_t n,
                                                              const double *near) {
  vd vn;
  memcpy(&vn, near, sizeof vn);
  int32_t i = from;
  for (; i + 1 < n; i += 2) {
    vd x0 = *(const vdu *)(v + (size_t)i * LANES), x1 = *(const vdu *)(v + (size_t)(i + 1) * LANES);
    vi c = (VABS(x0) >= vn) | (VABS(x1) >= vn);
    if (__builtin_ia32_movmskpd256((vd)c)) break;
  }
  return i < n ? i : n;
}
#endif

/* The same, scalar. */
static int32_t first_near_scalar(const double *v, int32_t from, int32_t n, const double *near) {
  for (int32_t i = from; i < n; i++) {
    const double *x = v + (size_t)i * LANES;
    if ((fabs(x[0]) >= near[0]) | (fabs(x[1]) >= near[1]) | (fabs(x[2]) >= near[2]) | (fabs(x[3]) >= near[3]))
      return i;
  }
  return n;
}

/* The ES of LANES sizes K[q] (0: an unused lane) from the ascending
 * positions pos[0..k) with draw indices tix (1-based; a position belongs
 * to size K when its index is <= K), hit weights nr[q] summed in draw
 * order.  Broad's sequential rule (a running sum replaces the best only
 * when larger in magnitude by the factor GSEA_TIE) picks the first value
 * of the largest magnitude M, unless another value lies within 1e-11 of M
 * without being equal to it before that: only then does the order of
 * near-ties matter, and the lane runs prefix_es() (as it does when its
 * weights are all 0).  So the ES have prefix_es()'s bits. */
static void prefix_es_group(const int32_t *pos, const int32_t *tix, int32_t k, const int32_t *K, const double *nr,
                            const double *wr, int32_t G, double *v, int32_t *sub, double *es) {
  double inv_nr[LANES], inv_nmiss[LANES], m[LANES], near[LANES], kd[LANES];
  int slow[LANES];
  for (int q = 0; q < LANES; q++) {
    inv_nr[q] = nr[q] == 0 ? 0 : 1.0 / nr[q];
    inv_nmiss[q] = 1.0 / ((double)G - (double)K[q]);
    kd[q] = (double)K[q];
    slow[q] = K[q] > 0 && nr[q] == 0;
  }
  int avx2 = 0;
#ifdef SBG_PRERANK_AVX2
  avx2 = __builtin_cpu_supports("avx2");
  if (avx2) group_sums_avx2(pos, tix, k, kd, inv_nr, inv_nmiss, wr, v, m);
  else
#endif
    group_sums_scalar(pos, tix, k, kd, inv_nr, inv_nmiss, wr, v, m);
  /* the first value of magnitude M per lane; M = 0: the ES is 0 */
  int open = 0;
  for (int q = 0; q < LANES; q++) {
    es[q] = 0.0;
    near[q] = m[q] == 0 || slow[q] || K[q] == 0 ? INFINITY : m[q] * (1.0 - 1e-11);
    open += near[q] < INFINITY;
  }
  for (int32_t i = 0; open; i++) {
#ifdef SBG_PRERANK_AVX2
    if (avx2) i = first_near_avx2(v, i, 2 * k, near);
    else
#endif
      i = first_near_scalar(v, i, 2 * k, near);
    if (i >= 2 * k) break;
    const double *x = v + (size_t)i * LANES;
    for (int q = 0; q < LANES; q++) {
      double a = fabs(x[q]);
      if (a < near[q]) continue;
      if (a == m[q]) es[q] = x[q]; else slow[q] = 1;
      near[q] = INFINITY; /* settled: later values cannot replace M */
      open--;
    }
  }
  for (int q = 0; q < LANES; q++) {
    if (!slow[q]) continue;
    int32_t n = 0;
    for (int32_t i = 0; i < k; i++) if (tix[i] <= K[q]) sub[n++] = pos[i];
    es[q] = prefix_es(sub, n, wr, nr[q], inv_nmiss[q]);
  }
}

void sbg_gsea_prerank_null(const sbg_gsea_sizes *z, const double *wr, int32_t G, uint64_t seed, int64_t j,
                           sbg_gsea_prerank_ws *w, double *es_size) {
  double nr[1 + LANES];
  sbg_gsea_prerank_null_multi(z, (const double *const *)&wr, 1, G, seed, j, w, nr, (double *const *)&es_size, 0);
}

/* The draw depends on the seed, j, G and the sizes alone, so one draw
 * serves every weight vector: each gets the operations of its own
 * single draw (hit weights summed in draw order, then prefix_es_group),
 * hence the same bits. */
void sbg_gsea_prerank_null_multi(const sbg_gsea_sizes *z, const double *const *wr, int32_t Q, int32_t G,
                                 uint64_t seed, int64_t j, sbg_gsea_prerank_ws *w, double *nrq,
                                 double *const *es_size, size_t off) {
  sbg_philox r;
  sbg_philox_init(&r, seed, (uint64_t)j, 0);
  int32_t kmax = z->size[z->n - 1], next = 0;
  int32_t *perm = w->perm, *pos = w->pos, *tix = w->tix;
  /* per weight vector: hit weight of the draw so far (nrq[0..Q)), and of
   * the sizes of the open group (LANES after that, Q x LANES) */
  double *nrz = nrq + Q;
  int32_t K[LANES];
  for (int32_t v = 0; v < Q; v++) nrq[v] = 0;
  for (int32_t i = 0; i < kmax; i++) {
    /* partial Fisher-Yates: position i of the draw is uniform over the rest */
    int32_t d = i + (int32_t)sbg_philox_below(&r, (uint32_t)(G - i));
    int32_t p = perm[d];
    perm[d] = perm[i];
    perm[i] = p;
    w->swp[i] = d;
    /* insert p into the ascending draw (the sweep needs rank order) with
     * its draw index: binary search, then block moves */
    const int32_t *at = pos; /* branch-free: the branches' mispredictions were a fifth of the time */
    int32_t len = i;
    while (len > 1) {
      int32_t half = len >> 1;
      at = at[half] < p ? at + half : at;
      len -= half;
    }
    int32_t lo = (int32_t)(at - pos) + (len == 1 && at[0] < p);
    memmove(pos + lo + 1, pos + lo, (size_t)(i - lo) * sizeof(int32_t));
    memmove(tix + lo + 1, tix + lo, (size_t)(i - lo) * sizeof(int32_t));
    pos[lo] = p;
    tix[lo] = i + 1;
    for (int32_t v = 0; v < Q; v++) nrq[v] += wr[v][p];
    if (i + 1 == z->size[next]) {
      int q = next % LANES;
      K[q] = i + 1;
      for (int32_t v = 0; v < Q; v++) nrz[(size_t)v * LANES + q] = nrq[v];
      next++;
      if (q == LANES - 1 || next == z->n) { /* a full group, or the last */
        for (int u = q + 1; u < LANES; u++) {
          K[u] = 0;
          for (int32_t v = 0; v < Q; v++) nrz[(size_t)v * LANES + u] = 0;
        }
        for (int32_t v = 0; v < Q; v++) {
          double e[LANES];
          prefix_es_group(pos, tix, i + 1, K, nrz + (size_t)v * LANES, wr[v], G, w->buf, w->sub, e);
          for (int u = 0; u <= q; u++) es_size[v][off + (size_t)(next - 1 - q + u)] = e[u];
        }
      }
    }
  }
  /* undo the swaps: perm is the identity again for the next permutation */
  for (int32_t i = kmax - 1; i >= 0; i--) {
    int32_t d = w->swp[i], p = perm[d];
    perm[d] = perm[i];
    perm[i] = p;
  }
}

int sbg_gsea_prerank_ws_alloc(sbg_gsea_prerank_ws *w, int32_t G, int32_t kmax) {
  memset(w, 0, sizeof *w);
  size_t g = (size_t)G, k = (size_t)(kmax > 0 ? kmax : 1);
  w->perm = malloc(g * sizeof(int32_t));
  w->swp = malloc(k * sizeof(int32_t));
  w->pos = malloc(k * sizeof(int32_t));
  w->tix = malloc(k * sizeof(int32_t));
  w->sub = malloc(k * sizeof(int32_t));
  w->buf = malloc(2 * LANES * k * sizeof(double));
  if (!w->perm || !w->swp || !w->pos || !w->tix || !w->sub || !w->buf) return 0;
  for (int32_t i = 0; i < G; i++) w->perm[i] = i;
  return 1;
}

void sbg_gsea_prerank_ws_free(sbg_gsea_prerank_ws *w) {
  free(w->perm); free(w->swp); free(w->pos); free(w->tix); free(w->sub); free(w->buf);
  memset(w, 0, sizeof *w);
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int sbg_gsea_sizes_make(sbg_gsea_sizes *z, const int32_t *set_start, int32_t S) {
  memset(z, 0, sizeof *z);
  z->size = malloc((size_t)S * sizeof(int32_t));
  z->of_set = malloc((size_t)S * sizeof(int32_t));
  if (!z->size || !z->of_set) return 0;
  for (int32_t s = 0; s < S; s++) z->size[s] = set_start[s + 1] - set_start[s];
  qsort(z->size, (size_t)S, sizeof(int32_t), cmp_i32);
  int32_t n = 0;
  for (int32_t s = 0; s < S; s++)
    if (n == 0 || z->size[n - 1] != z->size[s]) z->size[n++] = z->size[s];
  z->n = n;
  for (int32_t s = 0; s < S; s++) {
    int32_t k = set_start[s + 1] - set_start[s], lo = 0, hi = n - 1;
    while (lo < hi) { /* binary search of k among the distinct sizes */
      int32_t mid = (lo + hi) / 2;
      if (z->size[mid] < k) lo = mid + 1; else hi = mid;
    }
    z->of_set[s] = lo;
  }
  return 1;
}

void sbg_gsea_sizes_free(sbg_gsea_sizes *z) {
  free(z->size);
  free(z->of_set);
  memset(z, 0, sizeof *z);
}
