/* Host pieces shared by both COSNet engines (parCosnet(), cvParCosnet()):
 * the learning of (alpha, c) from the labelled points (the CPU engine's,
 * and the GPU engine's for the jobs its device cannot summarise), the
 * same picks over the summaries that the GPU engine's device makes of the
 * points (so that both engines learn the same line), the colouring
 * priorities and the regularisation constants. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cosnet.h"
#include "omp_compat.h"
#include "philox.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* F-score with COSNet's conventions: an empty precision or recall is 0. */
static double f_score(int64_t tp, int64_t fn, int64_t fp) {
  double prec = tp + fp != 0 ? (double)tp / (double)(tp + fp) : 0.0;
  double rec = tp + fn != 0 ? (double)tp / (double)(tp + fn) : 0.0;
  return prec + rec != 0 ? (2 * prec * rec) / (prec + rec) : 0.0;
}

/* Whether f_score(tp, fn, fp) may exceed `best`, without its three
 * divisions (the sweeps ask this for every group, and most groups are far
 * from the best): the exact F is 2 tp / (2 tp + fp + fn), and f_score()
 * rounds it by a few units in the last place (five roundings: a relative
 * error below 1e-15), so an exact F below best (1 - 1e-12) cannot round
 * above best.  The counts are exact in doubles (below 2^53), the product's
 * rounding is again far inside the margin.  A 1 asks f_score() itself. */
static inline int may_beat(int64_t tp, int64_t fn, int64_t fp, double best) {
  return 2 * (double)tp >= best * (1 - 1e-12) * (double)(2 * tp + fp + fn);
}

/* The double of an order key (sbg_cosnet_order_key(), cosnet.h). */
static inline double order_value(uint64_t b) {
  b = (b >> 63) ? (b & 0x7fffffffffffffffull) : ~b;
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

/* A value with its point's position: the position breaks ties, so the
 * order is that of R's (stable) order(). */
typedef struct keyed {
  double v;
  int64_t i;
} keyed;

/* Interrupt polls of the learning step: on the calling thread only (ctx
 * NULL inside parallel regions: no polls), every 2^18 points of work
 * (well under 0.1 s), so that Ctrl-C stops even a step on millions of
 * labelled nodes. */
/* Scratch of the learning steps of one thread, for up to cap points, kept
 * from job to job: allocating it per step cost page faults worth a good
 * part of the step (the buffers are larger than malloc's mmap threshold). */
typedef struct {
  int64_t cap;
  uint64_t *u;   /* 2 cap: the positives' keys of a grouped sweep and scratch */
  double *v;     /* cap: the values of a sweep, in point order */
  int64_t *gc;   /* 3 (cap + 1): the counts of a sweep's groups */
  keyed *pa;     /* 2 cap: the sorts of pos_above(), made when first needed */
  uint8_t *on;   /* cap: its points on the y axis, made with pa */
  double *px, *py; /* the points of a job (learn_job()), when asked for */
  int8_t *pl;
} learn_ws;

static int learn_ws_alloc(learn_ws *ws, int64_t cap, int points) {
  size_t c = (size_t)(cap > 0 ? cap : 1);
  ws->cap = cap;
  ws->u = (uint64_t *)malloc(2 * c * sizeof(uint64_t));
  ws->v = (double *)malloc(c * sizeof(double));
  ws->gc = (int64_t *)malloc(3 * (c + 1) * sizeof(int64_t));
  ws->pa = NULL;
  ws->on = NULL;
  ws->px = points ? (double *)malloc(2 * c * sizeof(double)) : NULL;
  ws->py = ws->px ? ws->px + c : NULL;
  ws->pl = points ? (int8_t *)malloc(c) : NULL;
  return ws->u && ws->v && ws->gc && (!points || (ws->px && ws->pl));
}

static void learn_ws_free(learn_ws *ws) {
  free(ws->u);
  free(ws->v);
  free(ws->gc);
  free(ws->pa);
  free(ws->on);
  free(ws->px);
  free(ws->pl);
}

typedef struct {
  sbg_ctx *ctx;
  double done;
  int64_t work;
  int nt;        /* threads for the sorts and the keys of one step (ctx NULL when > 1) */
  learn_ws *ws;  /* scratch, or NULL: each step allocates its own */
} learn_poll;

/* Fewest points for which one step's sorts and keys use several threads. */
#define LEARN_PAR_POINTS ((int64_t)1 << 16)

static int learn_threads(const learn_poll *lp, int64_t m) {
  return lp && lp->nt > 1 && !lp->ctx && m >= LEARN_PAR_POINTS ? lp->nt : 1;
}

static int learn_tick(learn_poll *lp, int64_t add) {
  if (!lp || !lp->ctx) return 0;
  lp->work += add;
  if (lp->work < ((int64_t)1 << 18)) return 0;
  lp->work = 0;
  return sbg_poll(lp->ctx, lp->done) != SBG_OK;
}

/* Stable least-significant-digit radix sorts by a 64-bit key: 11 bits a
 * pass (6 passes, each moving every element; 8-bit digits take 8), or 8
 * below 4096 elements, where 2048 counts a pass would cost more than the
 * elements; passes where every key has the same digit are skipped.
 * NAME(a, m, tmp, lp) on one thread (1 = interrupted, a then half sorted
 * and unused), NAME##_threads(a, m, tmp, nt) with each thread counting and
 * then scattering a contiguous block of the current order (blocks in
 * thread order: as stable as one thread, the same result).  tmp: m scratch
 * elements.  For bare keys (the positives' keys of the grouped sweeps) and
 * for values with their positions (the stable orders of pos_above()). */
#define RADIX_BUCKETS 2048 /* the most: 11-bit digits */
#define RADIX_SETUP(m)                                                                             \
  const int bits = (m) < 4096 ? 8 : 11, passes = (64 + bits - 1) / bits;                           \
  const int buckets = 1 << bits;                                                                   \
  int64_t cnt[8][RADIX_BUCKETS];                                                                   \
  for (int p = 0; p < passes; p++) memset(cnt[p], 0, (size_t)buckets * sizeof(int64_t));
#define LEARN_RADIX_SORT(NAME, T, KEY)                                                             \
  static int NAME(T *a, int64_t m, T *tmp, learn_poll *lp) {                                       \
    if (m < 2) return 0;                                                                           \
    if (m <= 32) { /* insertion sort, stable */                                                    \
      for (int64_t i = 1; i < m; i++) {                                                            \
        T x = a[i];                                                                                \
        int64_t j = i;                                                                             \
        while (j > 0 && KEY(a[j - 1]) > KEY(x)) { a[j] = a[j - 1]; j--; }                          \
        a[j] = x;                                                                                  \
      }                                                                                            \
      return 0;                                                                                    \
    }                                                                                              \
    RADIX_SETUP(m)                                                                                 \
    for (int64_t i = 0; i < m; i++) {                                                              \
      uint64_t b = KEY(a[i]);                                                                      \
      for (int p = 0; p < passes; p++) cnt[p][(b >> (bits * p)) & (buckets - 1)]++;                \
    }                                                                                              \
    T *src = a, *dst = tmp;                                                                        \
    for (int p = 0; p < passes; p++) {                                                             \
      if (learn_tick(lp, m)) return 1;                                                             \
      int trivial = 0;                                                                             \
      for (int d = 0; d < buckets; d++)                                                            \
        if (cnt[p][d] == m) { trivial = 1; break; }                                                \
      if (trivial) continue;                                                                       \
      int64_t off = 0;                                                                             \
      for (int d = 0; d < buckets; d++) { int64_t c = cnt[p][d]; cnt[p][d] = off; off += c; }      \
      for (int64_t i = 0; i < m; i++) dst[cnt[p][(KEY(src[i]) >> (bits * p)) & (buckets - 1)]++] = src[i]; \
      T *t = src; src = dst; dst = t;                                                              \
    }                                                                                              \
    if (src != a) memcpy(a, src, (size_t)m * sizeof(T));                                           \
    return 0;                                                                                      \
  }                                                                                                \
  static int NAME##_threads(T *a, int64_t m, T *tmp, int nt) {                                     \
    int64_t(*hist)[RADIX_BUCKETS] = (int64_t(*)[RADIX_BUCKETS])malloc((size_t)nt * sizeof *hist);  \
    if (!hist) return NAME(a, m, tmp, NULL);                                                       \
    RADIX_SETUP(m)                                                                                 \
    int odd = 0; /* passes made: the result is in tmp when odd */                                  \
    _Pragma("omp parallel num_threads(nt)") {                                                      \
      int T_ = omp_get_num_threads(), t = omp_get_thread_num();                                    \
      int64_t lo = m * t / T_, hi = m * (t + 1) / T_;                                              \
      int64_t loc[8][RADIX_BUCKETS];                                                               \
      for (int p = 0; p < passes; p++) memset(loc[p], 0, (size_t)buckets * 8);                     \
      for (int64_t i = lo; i < hi; i++) {                                                          \
        uint64_t b = KEY(a[i]);                                                                    \
        for (int p = 0; p < passes; p++) loc[p][(b >> (bits * p)) & (buckets - 1)]++;              \
      }                                                                                            \
      _Pragma("omp critical(sbg_cosnet_sort_counts)")                                              \
      for (int p = 0; p < passes; p++)                                                             \
        for (int d = 0; d < buckets; d++) cnt[p][d] += loc[p][d];                                  \
      _Pragma("omp barrier")                                                                       \
      T *src = a, *dst = tmp;                                                                      \
      int made = 0;                                                                                \
      for (int p = 0; p < passes; p++) {                                                           \
        int trivial = 0;                                                                           \
        for (int d = 0; d < buckets; d++)                                                          \
          if (cnt[p][d] == m) { trivial = 1; break; }                                              \
        if (trivial) continue;                                                                     \
        int64_t *h = hist[t];                                                                      \
        for (int d = 0; d < buckets; d++) h[d] = 0;                                                \
        for (int64_t i = lo; i < hi; i++) h[(KEY(src[i]) >> (bits * p)) & (buckets - 1)]++;        \
        _Pragma("omp barrier")                                                                     \
        int64_t off[RADIX_BUCKETS], base = 0;                                                      \
        for (int d = 0; d < buckets; d++) {                                                        \
          int64_t o = base;                                                                        \
          for (int u = 0; u < t; u++) o += hist[u][d];                                             \
          off[d] = o;                                                                              \
          base += cnt[p][d];                                                                       \
        }                                                                                          \
        for (int64_t i = lo; i < hi; i++) dst[off[(KEY(src[i]) >> (bits * p)) & (buckets - 1)]++] = src[i]; \
        _Pragma("omp barrier")                                                                     \
        T *sw = src; src = dst; dst = sw;                                                          \
        made++;                                                                                    \
      }                                                                                            \
      if (t == 0) odd = made & 1;                                                                  \
    }                                                                                              \
    if (odd) memcpy(a, tmp, (size_t)m * sizeof(T));                                                \
    free(hist);                                                                                    \
    return 0;                                                                                      \
  }

#define BARE_KEY(e) (e)
#define KEYED_KEY(e) sbg_cosnet_order_key((e).v)
LEARN_RADIX_SORT(sort_bare, uint64_t, BARE_KEY)
LEARN_RADIX_SORT(sort_keyed, keyed, KEYED_KEY)

/* The sorts on the threads of lp. */
static int sort_bare_lp(uint64_t *a, int64_t m, uint64_t *tmp, learn_poll *lp) {
  int nt = learn_threads(lp, m);
  return nt > 1 ? sort_bare_threads(a, m, tmp, nt) : sort_bare(a, m, tmp, lp);
}

static int sort_keyed_lp(keyed *k, int64_t m, keyed *tmp, learn_poll *lp) {
  int nt = learn_threads(lp, m);
  return nt > 1 ? sort_keyed_threads(k, m, tmp, nt) : sort_keyed(k, m, tmp, lp);
}

/* Why the sweeps need the negatives counted, not sorted.  With tp > 0,
 * f_score() is F = 2 tp / D, D = 2 tp + fp + fn <= 2 m < 2^32, to within
 * 1e-15 (relative).  A negative entering the positive half-plane (fp + 1)
 * lowers F by a factor of at most 1 - 1/D (more than 2e-10), one leaving
 * it (fp - 1) raises F as much; a positive entering raises F.  Hence, in
 * a run of points of one order that are all negatives:
 *  - where negatives enter, no line of the run beats the best so far: each
 *    is below the line before it, which was compared already (or has
 *    tp = 0, F = 0);
 *  - where negatives leave ("over" in the angle sweep), the computed F
 *    rise strictly, so the run's last line wins whenever any of its lines
 *    would, and is then the best: the run's other lines change nothing.
 * So the sweeps look only at the positives (their groups of equal keys,
 * with the negatives of the same key; or the positives one by one) and at
 * the last line of each run of negatives, and the negatives are only
 * counted per run, by a binary search among the sorted keys of the
 * positives (far fewer than the negatives in COSNet's unbalanced
 * classes), the largest key of each run kept. */

/* The grouped sweeps' view of the points: the G distinct keys of the
 * positives, ascending, with their positives and the negatives of equal
 * key; the runs of negatives between them (run g before key g, run G after
 * the last), their sizes and largest keys (0 for none: no point has key 0,
 * a NaN's).  A group's value is its key's double, except for the group of
 * zeros, which takes the value of its first point (a -0 or a +0) as a
 * stable sort by value would. */
typedef struct {
  int64_t n_keys, kept;
  uint64_t *key, *top;
  int64_t *pos, *eq, *run;
  double zero;
} sweep_groups;

static double group_value(const sweep_groups *s, uint64_t key) {
  return key == sbg_cosnet_order_key(0.0) ? s->zero : order_value(key);
}

static inline void count_negative(uint64_t k, const uint64_t *keys, int64_t G, int64_t *eq,
                                  int64_t *run, uint64_t *top) {
  int64_t b = sbg_cosnet_keys_below(keys, G, k);
  if (b < G && keys[b] == k) { eq[b]++; return; }
  run[b]++;
  if (k > top[b]) top[b] = k;
}

/* The groups of the values v[0..m) (in point order; with stop_on, only
 * those below `stop`): u holds m keys, tmp m scratch keys, gc 3 (m + 1)
 * counts.  1: interrupted, -1: out of memory. */
static int sweep_groups_build(const double *v, const int8_t *lab, int64_t m, int stop_on,
                              double stop, uint64_t *u, uint64_t *tmp, int64_t *gc,
                              sweep_groups *s, learn_poll *lp) {
  int64_t a = 0, kept = 0;
  int zero_seen = 0;
  s->zero = 0.0;
  for (int64_t i = 0; i < m; i++) {
    double x = v[i];
    if (stop_on && !(x < stop)) continue;
    kept++;
    if (x == 0 && !zero_seen) { s->zero = x; zero_seen = 1; }
    if (lab[i] > 0) u[a++] = sbg_cosnet_order_key(x);
  }
  s->kept = kept;
  if (learn_tick(lp, m) || sort_bare_lp(u, a, tmp, lp)) return 1;
  int64_t G = 0;
  for (int64_t j = 0; j < a;) {
    uint64_t k = u[j];
    int64_t c = 0;
    while (j < a && u[j] == k) { j++; c++; }
    u[G] = k;
    gc[G] = c;
    G++;
  }
  s->n_keys = G;
  s->key = u;
  s->pos = gc;
  s->eq = gc + G;
  s->run = gc + 2 * G;
  s->top = tmp; /* the sort's scratch, free again */
  memset(s->eq, 0, (size_t)(2 * G + 1) * sizeof(int64_t));
  memset(s->top, 0, (size_t)(G + 1) * sizeof(uint64_t));
  int nt = learn_threads(lp, m);
  if (nt == 1) {
    for (int64_t i = 0; i < m; i++) {
      if (lab[i] > 0 || (stop_on && !(v[i] < stop))) continue;
      count_negative(sbg_cosnet_order_key(v[i]), u, G, s->eq, s->run, s->top);
    }
    return learn_tick(lp, m);
  }
  int failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
  {
    /* each thread counts its share; sums and maxima merged afterwards (the
     * same whatever the threads) */
    int64_t *c = (int64_t *)calloc((size_t)(2 * G + 1), sizeof(int64_t));
    uint64_t *t = (uint64_t *)calloc((size_t)(G + 1), sizeof(uint64_t));
    if (!c || !t) failed = 1;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < m; i++) {
      if (!c || !t || lab[i] > 0 || (stop_on && !(v[i] < stop))) continue;
      count_negative(sbg_cosnet_order_key(v[i]), u, G, c, c + G, t);
    }
#pragma omp critical(sbg_cosnet_sweep_groups)
    if (c && t) {
      for (int64_t g = 0; g < 2 * G + 1; g++) s->eq[g] += c[g];
      for (int64_t g = 0; g <= G; g++)
        if (t[g] > s->top[g]) s->top[g] = t[g];
    }
    free(c);
    free(t);
  }
  return failed ? -1 : 0;
}

/* The positives among the values v[0..m) (with on, only the points i
 * with on[i]; with limit_on, only those not above limit) in their stable order (value, then position) in pk[0..*n_p),
 * and nb[j] the negatives before positive j in that order and after
 * positive j - 1 (nb[*n_p] after the last).  tmp: m scratch. */
static int stable_build(const double *v, const int8_t *lab, int64_t m, const uint8_t *on, int limit_on,
                        double limit, keyed *pk, keyed *tmp, int64_t *nb, int64_t *n_p, learn_poll *lp) {
  int64_t P = 0;
  for (int64_t i = 0; i < m; i++)
    if (lab[i] > 0 && (!on || on[i]) && !(limit_on && v[i] > limit)) { pk[P].v = v[i]; pk[P].i = i; P++; }
  *n_p = P;
  if (learn_tick(lp, m) || sort_keyed_lp(pk, P, tmp, lp)) return 1;
  /* the keys of the positives, for the binary searches (in tmp) */
  uint64_t *pkey = (uint64_t *)(void *)tmp;
  for (int64_t j = 0; j < P; j++) pkey[j] = sbg_cosnet_order_key(pk[j].v);
  memset(nb, 0, (size_t)(P + 1) * sizeof(int64_t));
  int nt = learn_threads(lp, m), failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
  {
    int64_t *c = nt == 1 ? nb : (int64_t *)calloc((size_t)(P + 1), sizeof(int64_t));
    if (!c) failed = 1;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < m; i++) {
      if (lab[i] > 0 || (on && !on[i]) || (limit_on && v[i] > limit)) continue;
      uint64_t k = sbg_cosnet_order_key(v[i]);
      /* positives before (k, i) in the stable order: those of smaller
       * keys, then those of key k at earlier positions */
      int64_t b = sbg_cosnet_keys_below(pkey, P, k), e = b;
      if (b < P && pkey[b] == k) {
        int64_t len = sbg_cosnet_keys_below(pkey + b, P - b, k + 1);
        while (len > 0) {
          int64_t half = len / 2;
          if (pk[e + half].i < i) { e += half + 1; len -= half + 1; } else len = half;
        }
      }
      if (c) c[e]++;
    }
    if (nt > 1) {
#pragma omp critical(sbg_cosnet_stable_build)
      if (c) for (int64_t j = 0; j <= P; j++) nb[j] += c[j];
      free(c);
    }
  }
  return failed ? -1 : 0;
}

/* The intercept sweep over the groups g of the values y - slope x: points
 * at or below the line are positive; groups of equal intercepts enter
 * together; a later line wins only with a strictly larger F (only the
 * positives' groups can: see sweep_groups). */
static void intercept_pick(const sweep_groups *g, int64_t n_pos, double *q_best, double *f_best) {
  int64_t tp = 0, fp = 0, fn = n_pos;
  double best = f_score(tp, fn, fp), qb = 0;
  for (int64_t h = 0; h < g->n_keys; h++) {
    tp += g->pos[h]; fn -= g->pos[h]; fp += g->run[h] + g->eq[h];
    if (may_beat(tp, fn, fp, best)) {
      double f = f_score(tp, fn, fp);
      if (f > best) { best = f; qb = group_value(g, g->key[h]); }
    }
  }
  *q_best = qb;
  *f_best = best;
}

/* Best intercept for the slope `slope` (intercept_pick). */
static int intercept_sweep(const double *x, const double *y, const int8_t *lab, int64_t m,
                           int64_t n_pos, double slope, learn_ws *ws, double *q_best,
                           double *f_best, learn_poll *lp) {
  double *v = ws->v;
#pragma omp parallel for num_threads(learn_threads(lp, m)) schedule(static)
  for (int64_t i = 0; i < m; i++) v[i] = y[i] - slope * x[i];
  sweep_groups g;
  int r = sweep_groups_build(v, lab, m, 0, 0.0, ws->u, ws->u + ws->cap, ws->gc, &g, lp);
  if (r) return r;
  intercept_pick(&g, n_pos, q_best, f_best);
  return 0;
}

/* The three sweeps of the branch below (pos_above), each over the
 * positives of a stable order (their values val[0..P) in that order, and
 * nb[j] the negatives between positive j - 1 and j), shared by the host's
 * and the device's learning.  Step 1, the points on the y axis by
 * ordinate: for the line through the r-th positive (1-based position pos),
 * TP = r, FP = pos - r; the best one's ordinate y1, its position and
 * rank. */
static void axis_pick(const double *val, const int64_t *nb, int64_t P, double *y1, int64_t *best_pos,
                      int64_t *best_rank) {
  double best = 0;
  int64_t neg = 0;
  *best_pos = 0; *best_rank = 0; *y1 = 0;
  for (int64_t j = 0; j < P; j++) {
    neg += nb[j];
    int64_t rank = j + 1;
    double f = f_score(rank, P - rank, neg);
    if (f > best) { best = f; *best_pos = rank + neg; *best_rank = rank; *y1 = val[j]; }
  }
}

/* Step 2: the slopes from (0, y1) to the points off the axis, at most -1,
 * ascending, each line adding its point below it; COSNet scores the start
 * without the off-axis positives (up_pos of them). */
static double slope_pick(const double *val, const int64_t *nb, int64_t P, int64_t nz_pos,
                         int64_t up_pos, int64_t best_pos, int64_t best_rank) {
  int64_t tp = best_rank, fn = nz_pos - best_rank, fp = best_pos - best_rank;
  double best = f_score(tp, fn, fp);
  fn += up_pos;
  double slope = tan(1.58); /* COSNet's default: an almost vertical line */
  for (int64_t j = 0; j < P; j++) {
    fp += nb[j]; tp++; fn--;
    if (!may_beat(tp, fn, fp, best)) continue;
    double f = f_score(tp, fn, fp);
    if (f > best) { best = f; slope = val[j]; }
  }
  return slope;
}

/* Step 3: the intercept for that slope, no grouping of ties. */
static void stable_line_pick(const double *val, const int64_t *nb, int64_t P, int64_t n_pos_all,
                             double *q_best, double *f_best) {
  int64_t tp = 0, fp = 0, fn = n_pos_all;
  double best = 0, q = 0;
  for (int64_t j = 0; j < P; j++) {
    fp += nb[j]; tp++; fn--;
    if (!may_beat(tp, fn, fp, best)) continue;
    double f = f_score(tp, fn, fp);
    if (f > best) { best = f; q = val[j]; }
  }
  *q_best = q;
  *f_best = best;
}

/* COSNet's branch for a positive half-plane above the line (its
 * optimize_pos_above): the line passes through the best positive point on
 * the y axis, its slope (at most -1) is chosen among the lines through the
 * other points, and then the intercept; no grouping of ties here, points in
 * their stable order (value, then position), where only the lines through
 * positives can win (see sweep_groups; stable_build()).  Changes nothing
 * when no positive lies on the y axis. */
static sbg_status pos_above(const double *x, const double *y, const int8_t *lab, int64_t m,
                            int64_t n_pos_all, double *alpha, double *c, double *fscore,
                            learn_ws *ws, learn_poll *lp) {
  int64_t nz_pos = 0;
  for (int64_t i = 0; i < m; i++) nz_pos += x[i] == 0 && lab[i] > 0;
  if (nz_pos == 0) return SBG_OK;
  if (!ws->pa) {
    size_t c2 = (size_t)(ws->cap > 0 ? ws->cap : 1);
    ws->pa = (keyed *)malloc(2 * c2 * sizeof(keyed));
    ws->on = (uint8_t *)malloc(c2);
  }
  if (!ws->pa || !ws->on) return SBG_ERR_ALLOC;
  keyed *z = ws->pa, *tmp = ws->pa + ws->cap;
  double *v = ws->v, *val = (double *)(void *)ws->u; /* (u: free while the steps below run) */
  int64_t *nb = ws->gc, P;

  /* Step 1: the points on the y axis by ordinate */
  for (int64_t i = 0; i < m; i++) { v[i] = y[i]; ws->on[i] = x[i] == 0; }
  int r = stable_build(v, lab, m, ws->on, 0, 0.0, z, tmp, nb, &P, lp);
  if (r) return r < 0 ? SBG_ERR_ALLOC : SBG_ERR_INTERRUPTED;
  for (int64_t j = 0; j < P; j++) val[j] = z[j].v;
  double y1;
  int64_t best_pos, best_rank;
  axis_pick(val, nb, P, &y1, &best_pos, &best_rank);

  /* Step 2: slopes from that point to the points off the axis (the axis's
   * points get slope 0: left out with the others above -1) */
  int64_t up_pos = 0;
  for (int64_t i = 0; i < m; i++) {
    if (x[i] == 0) { v[i] = 0.0; continue; }
    if (lab[i] > 0) up_pos++;
    v[i] = (y[i] - y1) / (x[i] - 0.0);
  }
  r = stable_build(v, lab, m, NULL, 1, -1.0, z, tmp, nb, &P, lp);
  if (r) return r < 0 ? SBG_ERR_ALLOC : SBG_ERR_INTERRUPTED;
  for (int64_t j = 0; j < P; j++) val[j] = z[j].v;
  double slope = slope_pick(val, nb, P, nz_pos, up_pos, best_pos, best_rank);

  /* Step 3: intercept for that slope */
#pragma omp parallel for num_threads(learn_threads(lp, m)) schedule(static)
  for (int64_t i = 0; i < m; i++) v[i] = y[i] - slope * x[i];
  r = stable_build(v, lab, m, NULL, 0, 0.0, z, tmp, nb, &P, lp);
  if (r) return r < 0 ? SBG_ERR_ALLOC : SBG_ERR_INTERRUPTED;
  for (int64_t j = 0; j < P; j++) val[j] = z[j].v;
  double q, best;
  stable_line_pick(val, nb, P, n_pos_all, &q, &best);
  *alpha = atan(slope) + M_PI;
  *c = -q * cos(*alpha);
  *fscore = best;
  return SBG_OK;
}

/* The angle sweep over the groups g of the angles (those below 1.57 kept
 * of the m points, n_pos of them positive): upwards, a group of equal
 * angles at a time; the points at or below the line are positive
 * ("under") or those above it ("over").  As COSNet: a line must strictly
 * beat the best F so far, and a last point standing alone at the end of
 * the order (at m - 1: none left out) is not counted.  Only the positives'
 * groups and, over, the last group of each run of negatives can win (see
 * sweep_groups).  *theta: the best line's angle; returns 1 when it has the
 * positives above it (over won). */
static int angle_pick(const sweep_groups *g, int64_t m, int64_t n_pos, double *theta) {
  int64_t n_neg = m - n_pos;
  int64_t tp_u = 0, fp_u = 0, fn_u = n_pos;
  int64_t tp_o = n_pos, fp_o = n_neg, fn_o = 0;
  double best_u = 0, best_o = 0, ang_u = 0, ang_o = 0;
  /* The last positives' group ends the order when no point was left out
   * and no negative comes after it.  A lone negative ending the order
   * needs no such care: with no point left out, the positives are all
   * below the line there (over: tp = 0, F = 0), and under, negatives
   * cannot win. */
  int64_t G = g->n_keys;
  int whole = g->kept == m && g->run[G] == 0;
  for (int64_t h = 0; h <= G; h++) {
    if (g->run[h] > 0) {
      fp_u += g->run[h];
      fp_o -= g->run[h];
      if (may_beat(tp_o, fn_o, fp_o, best_o)) {
        double fo = f_score(tp_o, fn_o, fp_o);
        if (fo > best_o) { best_o = fo; ang_o = group_value(g, g->top[h]); }
      }
    }
    if (h == G) break;
    int64_t pos = g->pos[h], neg = g->eq[h];
    if (h == G - 1 && whole && pos + neg == 1) break; /* the lone last point */
    tp_u += pos; fn_u -= pos; fp_u += neg;
    tp_o -= pos; fn_o += pos; fp_o -= neg;
    if (may_beat(tp_u, fn_u, fp_u, best_u)) {
      double fu = f_score(tp_u, fn_u, fp_u);
      if (fu > best_u) { best_u = fu; ang_u = group_value(g, g->key[h]); }
    }
    if (may_beat(tp_o, fn_o, fp_o, best_o)) {
      double fo = f_score(tp_o, fn_o, fp_o);
      if (fo > best_o) { best_o = fo; ang_o = group_value(g, g->key[h]); }
    }
  }
  int above = best_o > best_u;
  *theta = above ? ang_o : ang_u;
  return above;
}

/* The learning step (sbg_cosnet_learn) with the polls and threads of lp,
 * in lp's scratch or (too small, or none) its own. */
static sbg_status learn_step(const double *x, const double *y, const int8_t *lab, int64_t m,
                             double *alpha, double *c, double *fscore, learn_poll *lp) {
  sbg_status st = SBG_OK;
  sbg_ctx *ctx = lp->ctx;
  double done = lp->done;
  learn_ws own_ws, *ws = lp->ws;
  int own = !(ws && ws->cap >= m);
  if (own) {
    ws = &own_ws;
    if (!learn_ws_alloc(ws, m, 0)) { learn_ws_free(ws); return SBG_ERR_ALLOC; }
  }
  int64_t n_pos = 0;
  for (int64_t i = 0; i < m; i++) n_pos += lab[i] > 0;
  double *v = ws->v;

  /* Step 1: angles of the lines through the origin and each point; a point
   * on the y axis gets pi/2 (COSNet: pi/2 - DBL_MIN, the same double).
   * The sweep stops at the first angle >= 1.57 (as COSNet's), so those
   * points, the y axis's among them, are left out; a ratio y / x >= 1300
   * has an angle >= atan(1300) = 1.570027 (tan(1.57) is 1255.8), far
   * beyond any rounding of atan, so its atan is not needed. */
#pragma omp parallel for num_threads(learn_threads(lp, m)) schedule(static)
  for (int64_t i = 0; i < m; i++) {
    double r = x[i] != 0 ? y[i] / x[i] : HUGE_VAL;
    v[i] = r < 1300 ? atan(r) : M_PI / 2;
  }
  sweep_groups g;
  int r = sweep_groups_build(v, lab, m, 1, 1.57, ws->u, ws->u + ws->cap, ws->gc, &g, lp);
  if (r) { st = r < 0 ? SBG_ERR_ALLOC : SBG_ERR_INTERRUPTED; goto finish; }
  double theta;
  int above = angle_pick(&g, m, n_pos, &theta);

  /* Step 2: the intercept, with the positive half-plane below the line. */
  double q = 0, f = 0;
  r = intercept_sweep(x, y, lab, m, n_pos, tan(theta), ws, &q, &f, lp);
  if (r) { st = r < 0 ? SBG_ERR_ALLOC : SBG_ERR_INTERRUPTED; goto finish; }
  *alpha = theta + DBL_MIN;
  *c = -q * cos(*alpha);
  *fscore = f;
  if (above) {
    st = pos_above(x, y, lab, m, n_pos, alpha, c, fscore, ws, lp);
    if (st == SBG_OK && ctx && sbg_poll(ctx, done) != SBG_OK) st = SBG_ERR_INTERRUPTED;
  }
finish:
  if (own) learn_ws_free(ws);
  return st; /* interrupted: ctx->errbuf set by sbg_poll */
}

sbg_status sbg_cosnet_learn(const double *x, const double *y, const int8_t *lab,
                            int64_t m, double *alpha, double *c, double *fscore, sbg_ctx *ctx,
                            double done) {
  learn_poll lp = {ctx, done, 0, 1, NULL};
  return learn_step(x, y, lab, m, alpha, c, fscore, &lp);
}

uint64_t sbg_cosnet_priority(uint64_t seed, int32_t node) {
  sbg_philox g;
  sbg_philox_init(&g, seed, (uint64_t)node, 0);
  uint64_t hi = sbg_philox_next(&g);
  uint64_t lo = sbg_philox_next(&g);
  return (hi << 32) | lo;
}

sbg_cosnet_reg sbg_cosnet_regularisation(double cost, double alpha, int64_t n_pos_train,
                                         int64_t n_train, int64_t n_unlab) {
  sbg_cosnet_reg r = {0, 0.0, 0.0};
  if (!(cost > 0) || !(alpha > M_PI / 4)) return r;
  /* The penalty eta * (sum of z - k)^2 on the 0/1 form z of the states,
   * written out as COSNet's reg_data() does. */
  double hi = sin(alpha), lo = -cos(alpha);
  double eta = cost * fabs(tan((alpha - M_PI / 4) * 2));
  double a = 1 / (hi - lo);
  double b = -lo / (hi - lo);
  double k = ceil(((double)n_pos_train / (double)n_train) * (double)n_unlab);
  r.on = 1;
  r.theta_add = eta * a * (2 * b * (double)(n_unlab - 1) - 2 * k + 1);
  r.r = 2 * eta * (a * a);
  return r;
}

/* The node codes of job j (see sbg_cosnet_input). */
void sbg_cosnet_job_codes(const sbg_cosnet_input *in, int32_t j, int8_t *jl) {
  int32_t n = in->g.n;
  int32_t nf = in->n_folds > 0 ? in->n_folds : 1;
  int32_t k = j / nf, f = in->n_folds > 0 ? 1 + j % nf : 0;
  const int8_t *lab = in->v_labels + (size_t)k * n;
  const int32_t *fold = in->v_folds ? in->v_folds + (size_t)k * n : NULL;
  for (int32_t v = 0; v < n; v++) {
    if (f == 0) jl[v] = lab[v] == 0 ? SBG_COSNET_REPORT : lab[v];
    else if (fold[v] == f) jl[v] = SBG_COSNET_REPORT;
    else jl[v] = lab[v] == 0 ? SBG_COSNET_QUIET : lab[v];
  }
}

/* Nodes sorted by colour (counting sort, by index within a colour). */
sbg_status sbg_cosnet_colour_order(const int32_t *colour, int32_t n, int32_t n_colours,
                               int32_t **nodes, int64_t **cptr) {
  *nodes = (int32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
  *cptr = (int64_t *)calloc((size_t)n_colours + 2, sizeof(int64_t));
  if (!*nodes || !*cptr) return SBG_ERR_ALLOC;
  for (int32_t v = 0; v < n; v++) (*cptr)[colour[v] + 1]++;
  for (int32_t cl = 0; cl < n_colours; cl++) (*cptr)[cl + 1] += (*cptr)[cl];
  int64_t *fill = (int64_t *)malloc(((size_t)n_colours + 1) * sizeof(int64_t));
  if (!fill) return SBG_ERR_ALLOC;
  memcpy(fill, *cptr, ((size_t)n_colours + 1) * sizeof(int64_t));
  for (int32_t v = 0; v < n; v++) (*nodes)[fill[colour[v]]++] = v;
  free(fill);
  return SBG_OK;
}


/* Job j's labelled points and its learning step on nt threads (1, or
 * several for one job at a time), in the scratch ws (cap >= n). */
static sbg_status learn_job(int32_t j, int32_t n, const int8_t *codes, const double *x,
                            const double *y, double *alpha, double *c, double *fscore,
                            int64_t *n_pos, int64_t *n_lab, int nt, learn_ws *ws) {
  const int8_t *jl = codes + (size_t)j * n;
  double *px = ws->px, *py = ws->py;
  int8_t *pl = ws->pl;
  int64_t m = 0, np = 0;
  for (int32_t v = 0; v < n; v++)
    if (jl[v] == SBG_COSNET_POS || jl[v] == SBG_COSNET_NEG) {
      px[m] = x[(size_t)j * n + v];
      py[m] = y[(size_t)j * n + v];
      pl[m] = jl[v] == SBG_COSNET_POS;
      np += pl[m];
      m++;
    }
  n_pos[j] = np;
  n_lab[j] = m;
  if (np == 0 || np == m) return SBG_ERR_INPUT;
  learn_poll lp = {NULL, 0.0, 0, nt, ws};
  return learn_step(px, py, pl, m, &alpha[j], &c[j], &fscore[j], &lp);
}

sbg_status sbg_cosnet_learn_some(int32_t n_which, const int32_t *which, int32_t n, const int8_t *codes,
                                 const double *x, const double *y, double *alpha, double *c,
                                 double *fscore, int64_t *n_pos, int64_t *n_lab, int n_threads) {
  sbg_status st = SBG_OK;
  if (2 * (int64_t)n_which <= n_threads) {
    /* few jobs (large networks): one at a time, each step's sorts on all
     * the threads; the same steps, so the same lines */
    learn_ws ws;
    if (!learn_ws_alloc(&ws, n, 1)) st = SBG_ERR_ALLOC;
    for (int32_t k = 0; k < n_which && st != SBG_ERR_ALLOC; k++) {
      int32_t j = which ? which[k] : k;
      sbg_status sj = learn_job(j, n, codes, x, y, alpha, c, fscore, n_pos, n_lab, n_threads, &ws);
      if (sj != SBG_OK && (st == SBG_OK || sj == SBG_ERR_ALLOC)) st = sj;
    }
    learn_ws_free(&ws);
    return st;
  }
#pragma omp parallel num_threads(n_threads)
  {
    learn_ws ws;
    int ok = learn_ws_alloc(&ws, n, 1);
#pragma omp for schedule(dynamic, 1)
    for (int32_t k = 0; k < n_which; k++) {
      int32_t j = which ? which[k] : k;
      sbg_status sj = ok ? learn_job(j, n, codes, x, y, alpha, c, fscore, n_pos, n_lab, 1, &ws)
                         : SBG_ERR_ALLOC;
      if (sj != SBG_OK) {
#pragma omp critical(sbg_cosnet_learn_jobs)
        if (st == SBG_OK || sj == SBG_ERR_ALLOC) st = sj;
      }
    }
    learn_ws_free(&ws);
  }
  return st;
}

sbg_status sbg_cosnet_learn_jobs(int32_t n_jobs, int32_t n, const int8_t *codes,
                                 const double *x, const double *y, double *alpha,
                                 double *c, double *fscore, int64_t *n_pos, int64_t *n_lab,
                                 int n_threads) {
  return sbg_cosnet_learn_some(n_jobs, NULL, n, codes, x, y, alpha, c, fscore, n_pos, n_lab, n_threads);
}

/* ---- the learning step from the device's summaries (cosnet.h) ---- */

size_t sbg_cosnet_sums_bytes(int32_t cap) {
  size_t c = (size_t)cap;
  return sizeof(sbg_cosnet_sum) + c * (sizeof(uint64_t) + 2 * sizeof(int32_t)) +
         (c + 1) * (2 * sizeof(uint64_t) + sizeof(int32_t));
}

sbg_cosnet_sums sbg_cosnet_sums_at(void *base, int32_t nb, int32_t cap) {
  size_t b = (size_t)nb, c = (size_t)cap;
  char *at = (char *)base;
  sbg_cosnet_sums s;
  s.sum = (sbg_cosnet_sum *)(void *)at; at += b * sizeof(sbg_cosnet_sum);
  s.key = (uint64_t *)(void *)at; at += b * c * sizeof(uint64_t);
  s.top = (uint64_t *)(void *)at; at += b * (c + 1) * sizeof(uint64_t);
  s.bot = (uint64_t *)(void *)at; at += b * (c + 1) * sizeof(uint64_t);
  s.pos = (int32_t *)(void *)at; at += b * c * sizeof(int32_t);
  s.eq = (int32_t *)(void *)at; at += b * c * sizeof(int32_t);
  s.run = (int32_t *)(void *)at;
  return s;
}

double sbg_cosnet_ratio_stop(void) {
  /* the host's step keeps r < 1300 && atan(r) < 1.57; atan(1000) < 1.57 <=
   * atan(1300): bisect the doubles between (their keys are consecutive
   * integers in value order) */
  uint64_t lo = sbg_cosnet_order_key(1000.0), hi = sbg_cosnet_order_key(1300.0);
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (atan(order_value(mid)) < 1.57) lo = mid; else hi = mid;
  }
  return order_value(hi);
}

/* Scratch of dlearn_round's jobs on one thread: a job's groups or stable
 * list in the host's types. */
typedef struct {
  uint64_t *key, *top;
  int64_t *pos, *eq, *run;
  double *val;
} dl_ws;

/* dl_ws for summaries of up to cap positives (val only with vals); 0 when
 * out of memory.  dl_ws_free() either way. */
static int dl_ws_alloc(dl_ws *w, int32_t cap, int vals) {
  size_t c1 = (size_t)cap + 1;
  w->key = (uint64_t *)malloc(2 * c1 * sizeof(uint64_t));
  w->top = w->key ? w->key + c1 : NULL;
  w->pos = (int64_t *)malloc(3 * c1 * sizeof(int64_t));
  w->eq = w->pos ? w->pos + c1 : NULL;
  w->run = w->pos ? w->pos + 2 * c1 : NULL;
  w->val = vals ? (double *)malloc(c1 * sizeof(double)) : NULL;
  return w->key && w->pos && (!vals || w->val);
}

static void dl_ws_free(dl_ws *w) {
  free(w->key);
  free(w->pos);
  free(w->val);
}

static double sum_value(uint64_t key, double zero) {
  return key == sbg_cosnet_order_key(0.0) ? zero : order_value(key);
}

/* The angle sweep's groups from job b's ratio groups: equal ratios have
 * equal angles and a larger ratio no smaller an angle (atan increases),
 * so the angles' groups are the ratios', with the neighbours whose angles
 * round alike merged (the negatives between them joining the merged
 * group).  Returns 1 when a negative's angle equals a positive's while
 * their ratios differ: the groups' counts do not tell where it goes. */
static int angle_groups(const sbg_cosnet_sums *R, int32_t b, int32_t cap, dl_ws *w, sweep_groups *g) {
  const sbg_cosnet_sum *S = &R->sum[b];
  const uint64_t *K = R->key + (size_t)b * cap, *top = R->top + (size_t)b * (cap + 1),
                 *bot = R->bot + (size_t)b * (cap + 1);
  const int32_t *pos = R->pos + (size_t)b * cap, *eq = R->eq + (size_t)b * cap,
                *run = R->run + (size_t)b * (cap + 1);
  double zero = S->zero;
#define ANGLE_KEY(k) sbg_cosnet_order_key(atan(sum_value((k), zero)))
  int64_t og = 0, prun = run[0];
  uint64_t ptop = top[0], pbot = bot[0];
  for (int32_t h = 0; h < S->n_keys; h++) {
    uint64_t ka = ANGLE_KEY(K[h]);
    if (og > 0 && ka == w->key[og - 1]) {
      w->eq[og - 1] += prun + eq[h];
      w->pos[og - 1] += pos[h];
    } else {
      if (prun > 0 && ((og > 0 && ANGLE_KEY(pbot) == w->key[og - 1]) || ANGLE_KEY(ptop) == ka)) return 1;
      w->run[og] = prun;
      w->top[og] = prun > 0 ? ANGLE_KEY(ptop) : 0;
      w->key[og] = ka;
      w->pos[og] = pos[h];
      w->eq[og] = eq[h];
      og++;
    }
    prun = run[h + 1];
    ptop = top[h + 1];
    pbot = bot[h + 1];
  }
  if (prun > 0 && og > 0 && ANGLE_KEY(pbot) == w->key[og - 1]) return 1;
  w->run[og] = prun;
  w->top[og] = prun > 0 ? ANGLE_KEY(ptop) : 0;
#undef ANGLE_KEY
  g->n_keys = og;
  g->kept = S->kept;
  g->key = w->key;
  g->top = w->top;
  g->pos = w->pos;
  g->eq = w->eq;
  g->run = w->run;
  g->zero = zero;
  return 0;
}

int64_t sbg_cosnet_angle_groups(const sbg_cosnet_sums *R, int32_t cap, double *key, int64_t *pos, int64_t *eq,
                                int64_t *run, double *top) {
  dl_ws w;
  sweep_groups g;
  int64_t G = -2; /* (out of memory) */
  if (dl_ws_alloc(&w, cap, 0)) G = angle_groups(R, 0, cap, &w, &g) ? -1 : g.n_keys;
  for (int64_t h = 0; h < G; h++) {
    key[h] = group_value(&g, g.key[h]);
    pos[h] = g.pos[h];
    eq[h] = g.eq[h];
  }
  for (int64_t h = 0; h <= G && G >= 0; h++) {
    run[h] = g.run[h];
    top[h] = g.run[h] > 0 ? group_value(&g, g.top[h]) : NAN;
  }
  dl_ws_free(&w);
  return G;
}

/* Job b's groups of a LINE summary as the host's. */
static void line_groups(const sbg_cosnet_sums *L, int32_t b, int32_t cap, dl_ws *w, sweep_groups *g) {
  const sbg_cosnet_sum *S = &L->sum[b];
  int64_t G = S->n_keys;
  for (int64_t h = 0; h < G; h++) {
    w->pos[h] = L->pos[(size_t)b * cap + h];
    w->eq[h] = L->eq[(size_t)b * cap + h];
  }
  for (int64_t h = 0; h <= G; h++) w->run[h] = L->run[(size_t)b * (cap + 1) + h];
  g->n_keys = G;
  g->kept = S->kept;
  g->key = L->key + (size_t)b * cap;
  g->top = L->top + (size_t)b * (cap + 1);
  g->pos = w->pos;
  g->eq = w->eq;
  g->run = w->run;
  g->zero = S->zero;
}

/* Job b's stable list: values into w->val, counts into w->run. */
static int64_t stable_list(const sbg_cosnet_sums *T, int32_t b, int32_t cap, dl_ws *w) {
  int64_t P = T->sum[b].n_keys;
  for (int64_t j = 0; j < P; j++) memcpy(&w->val[j], &T->key[(size_t)b * cap + j], sizeof(double));
  for (int64_t j = 0; j <= P; j++) w->run[j] = T->run[(size_t)b * (cap + 1) + j];
  return P;
}

/* One job's round (sbg_cosnet_dlearn_round). */
static void dlearn_job(int round, int32_t b, int32_t cap, const sbg_cosnet_sums *in,
                       const sbg_cosnet_sums *in2, sbg_cosnet_dlearn *st, double *line_param,
                       double *slope_param, double *alpha, double *c, double *fscore, dl_ws *w) {
  sweep_groups g;
  st->need = 0;
  if (round == 1) {
    const sbg_cosnet_sum *S = &in->sum[b];
    st->host = st->input = st->above = 0;
    st->n_pos = S->n_pos;
    st->n_lab = S->n_lab;
    st->nz_pos = S->nz_pos;
    /* (over the cap, the device stops counting: the host counts) */
    if (S->n_keys < 0) { st->host = 1; return; }
    if (S->n_pos == 0 || S->n_pos == S->n_lab) { st->input = 1; return; }
    if (angle_groups(in, b, cap, w, &g)) { st->host = 1; return; }
    st->above = angle_pick(&g, S->n_lab, S->n_pos, &st->theta);
    line_param[b] = tan(st->theta);
    st->need = 1 << SBG_COSNET_SUM_LINE;
    if (st->above && st->nz_pos > 0) {
      if (in2->sum[b].n_keys < 0) { st->host = 1; st->need = 0; return; }
      int64_t P = stable_list(in2, b, cap, w);
      axis_pick(w->val, w->run, P, &st->y1, &st->best_pos, &st->best_rank);
      slope_param[b] = st->y1;
      st->need |= 1 << SBG_COSNET_SUM_SLOPE;
    }
  } else if (round == 2) {
    if (in->sum[b].n_keys < 0) { st->host = 1; return; }
    line_groups(in, b, cap, w, &g);
    double q, f;
    intercept_pick(&g, st->n_pos, &q, &f);
    alpha[b] = st->theta + DBL_MIN;
    c[b] = -q * cos(alpha[b]);
    fscore[b] = f;
    if (st->above && st->nz_pos > 0) {
      if (in2->sum[b].n_keys < 0) { st->host = 1; return; }
      int64_t P = stable_list(in2, b, cap, w);
      st->slope = slope_pick(w->val, w->run, P, st->nz_pos, st->n_pos - st->nz_pos, st->best_pos,
                             st->best_rank);
      line_param[b] = st->slope;
      st->need = 1 << SBG_COSNET_SUM_LINE_STABLE;
    }
  } else {
    if (in->sum[b].n_keys < 0) { st->host = 1; return; }
    int64_t P = stable_list(in, b, cap, w);
    double q, best;
    stable_line_pick(w->val, w->run, P, st->n_pos, &q, &best);
    alpha[b] = atan(st->slope) + M_PI;
    c[b] = -q * cos(alpha[b]);
    fscore[b] = best;
  }
}

void sbg_cosnet_dlearn_round(int round, int32_t nb, int32_t cap, const sbg_cosnet_sums *in,
                             const sbg_cosnet_sums *in2, sbg_cosnet_dlearn *st, double *line_param,
                             double *slope_param, double *alpha, double *c, double *fscore,
                             int n_threads) {
#pragma omp parallel num_threads(n_threads)
  {
    dl_ws w;
    int ok = dl_ws_alloc(&w, cap, 1);
#pragma omp for schedule(dynamic, 4)
    for (int32_t b = 0; b < nb; b++) {
      if (round > 1 && !st[b].need) continue;
      if (!ok) { /* (out of memory: the host's way) */
        if (round == 1) st[b].input = st[b].above = 0;
        st[b].host = 1;
        st[b].need = 0;
        continue;
      }
      dlearn_job(round, b, cap, in, in2, &st[b], line_param, slope_param, alpha, c, fscore, &w);
    }
    dl_ws_free(&w);
  }
}

void sbg_cosnet_copy(void *dst, const void *src, size_t bytes, int n_threads) {
  const size_t block = (size_t)1 << 20;
  int64_t n_blocks = (int64_t)((bytes + block - 1) / block);
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int64_t b = 0; b < n_blocks; b++) {
    size_t at = (size_t)b * block, len = bytes - at < block ? bytes - at : block;
    memcpy((char *)dst + at, (const char *)src + at, len);
  }
}

void sbg_cosnet_batch_codes(const sbg_cosnet_input *in, int32_t j0, int32_t nb, int8_t *codes,
                            int n_threads) {
  int32_t n = in->g.n;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int32_t b = 0; b < nb; b++) sbg_cosnet_job_codes(in, j0 + b, codes + (size_t)b * n);
}

void sbg_cosnet_batch_collect(const int8_t *codes, int32_t j0, int32_t nb, int32_t n, int32_t nf,
                              const double *field, const int8_t *state, double *scores,
                              int32_t *pred, int n_threads) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int32_t b = 0; b < nb; b++) {
    int32_t k = (j0 + b) / nf;
    const int8_t *jl = codes + (size_t)b * n;
    double *sc = scores + (size_t)k * n;
    int32_t *pr = pred + (size_t)k * n;
    for (int32_t v = 0; v < n; v++)
      if (jl[v] == SBG_COSNET_REPORT) {
        sc[v] = field[(size_t)b * n + v];
        pr[v] = state[(size_t)b * n + v] > 0;
      }
  }
}

/* The problem of column j (0 fine, 1..4 hard, 5/6 soft: the first hard
 * one, else 5 if any entry is symmetric only up to rounding, else 6 for a
 * stored zero). */
static int check_column(int32_t j, const int32_t *cp, const int32_t *ci, const double *cx,
                        double tol) {
  int soft = 0;
  for (int32_t k = cp[j]; k < cp[j + 1]; k++) {
    double a = cx[k];
    int32_t r = ci[k];
    if (isnan(a) || !isfinite(a)) return 1;
    if (a < 0) return 2;
    if (r == j) {
      if (a != 0) return 3;
      continue;
    }
    if (a == 0 && soft == 0) soft = 6;
    /* the mirror entry (j, r) lives in column r (rows sorted in a column) */
    int32_t lo = cp[r], hi = cp[r + 1] - 1, found = -1;
    while (lo <= hi) {
      int32_t mid = lo + (hi - lo) / 2;
      if (ci[mid] == j) { found = mid; break; }
      if (ci[mid] < j) lo = mid + 1; else hi = mid - 1;
    }
    if (found < 0) {
      if (a != 0) return 4;
      continue;
    }
    double b = cx[found];
    if (a != b) {
      double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
      if (fabs(a - b) > tol * m) return 4;
      soft = 5;
    }
  }
  return soft;
}

/* The exact check: the mirror of every entry found by a binary search in
 * its column (a few random reads per entry, slow on hundreds of millions
 * of entries: only for inputs that the fast pass below does not clear). */
static void check_exact(int32_t n, const int32_t *cp, const int32_t *ci, const double *cx,
                        double tol, int n_threads, int32_t *res) {
  /* The first column (in column order) with a hard problem wins; else the
   * first with a rounding asymmetry; else the first with a stored zero.
   * Columns are checked in parallel, so the answer does not depend on the
   * thread count. */
  int32_t first[7];
  for (int t = 0; t < 7; t++) first[t] = n;
#pragma omp parallel num_threads(n_threads > 0 ? n_threads : 1)
  {
    int32_t mine[7];
    for (int t = 0; t < 7; t++) mine[t] = n;
#pragma omp for schedule(dynamic, 1024)
    for (int32_t j = 0; j < n; j++) {
      if (j > mine[0]) continue; /* a hard problem earlier already */
      int c = check_column(j, cp, ci, cx, tol);
      if (c >= 1 && c <= 4) { if (j < mine[0]) { mine[0] = j; mine[c] = j; } }
      else if (c > 0 && j < mine[c]) mine[c] = j;
    }
#pragma omp critical(sbg_cosnet_check)
    for (int t = 0; t < 7; t++)
      if (mine[t] < first[t]) first[t] = mine[t];
  }
  res[0] = 0;
  res[1] = 0;
  if (first[0] < n) {
    res[0] = check_column(first[0], cp, ci, cx, tol);
    res[1] = first[0] + 1;
  } else if (first[5] < n) {
    res[0] = 5;
    res[1] = first[5] + 1;
  } else if (first[6] < n) {
    res[0] = 6;
    res[1] = first[6] + 1;
  }
}

void sbg_cosnet_gather(const sbg_cosnet_graph *g, const int32_t *nodes, int64_t t0, int64_t t1,
                       const int64_t *cro, int32_t *col, double *w, int n_threads) {
  int64_t base = cro[t0];
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 64) if (t1 - t0 > 256)
  for (int64_t t = t0; t < t1; t++) {
    int32_t v = nodes[t];
    int64_t b = g->v_rowptr[v], d = g->v_rowptr[v + 1] - b;
    memcpy(col + (cro[t] - base), g->v_col + b, (size_t)d * sizeof(int32_t));
    memcpy(w + (cro[t] - base), g->v_w + b, (size_t)d * sizeof(double));
  }
}

/* Two 64-bit finalisers (splitmix64's and murmur3's), for the hash of an
 * entry in the fast symmetry pass. */
static inline uint64_t mix_a(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static inline uint64_t mix_b(uint64_t z) {
  z = (z ^ (z >> 33)) * 0xff51afd7ed558ccdULL;
  z = (z ^ (z >> 33)) * 0xc4ceb9fe1a85ec53ULL;
  return z ^ (z >> 33);
}

/* The first column whose row indices leave 0..n-1 or do not increase
 * (serial: for the message only, once the fast pass has seen one). */
static int32_t first_bad_rows(int32_t n, const int32_t *cp, const int32_t *ci) {
  for (int32_t j = 0; j < n; j++) {
    int32_t prev = -1;
    for (int32_t k = cp[j]; k < cp[j + 1]; k++) {
      if (ci[k] <= prev || ci[k] >= n) return j;
      prev = ci[k];
    }
  }
  return n; /* # nocov (called only when there is one) */
}

void sbg_cosnet_check(int32_t n, const int32_t *cp, const int32_t *ci, const double *cx,
                      double tol, int n_threads, int32_t *res, double *v_degree) {
  /* Fast pass, one streaming read of the entries (memory bandwidth, no
   * random reads): the row indices (in range, increasing in a column, as
   * Matrix's validity wants), NA / negative / diagonal / stored zeros per
   * entry, the column sums, and symmetry as the equality of two multisets:
   * the entries (r, j, x) above the diagonal against the mirrored entries
   * (j, r, x) below it, compared by sums of a 128-bit hash of each (two
   * independent 64-bit sums, wrapping).  A symmetric matrix always passes;
   * an asymmetric one passes only on a 2^-128 collision.  Anything else
   * (any problem, any difference) goes to the exact check, so the codes
   * and columns reported are those of the exact check.  The sums are
   * commutative: thread count and order do not matter.  A column's sum
   * adds its entries in row order: for a symmetric matrix, the additions
   * of Matrix::rowSums() for that row, in its order, so the same bits. */
  uint64_t up_a = 0, up_b = 0, lo_a = 0, lo_b = 0;
  int64_t n_up = 0, n_lo = 0;
  int bad = 0, bad_rows = 0;
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1024) \
    reduction(+ : up_a, up_b, lo_a, lo_b, n_up, n_lo) reduction(| : bad, bad_rows)
  for (int32_t j = 0; j < n; j++) {
    uint64_t sa_u = 0, sb_u = 0, sa_l = 0, sb_l = 0;
    int64_t cu = 0, cl = 0;
    int b = 0, br = 0;
    int32_t prev = -1;
    double sum = 0;
    for (int32_t k = cp[j]; k < cp[j + 1]; k++) {
      double a = cx[k];
      int32_t r = ci[k];
      br |= (r <= prev) | (r >= n);
      prev = r;
      sum += a;
      /* !(a > 0): zero, negative or NaN; infinite: any problem goes to the
       * exact check (also a stored zero, whose mirror may be absent) */
      b |= !(a > 0) | !isfinite(a) | (r == j);
      uint64_t xb;
      memcpy(&xb, &a, sizeof xb);
      uint64_t lo = (uint64_t)(r < j ? r : j), hi = (uint64_t)(r < j ? j : r);
      uint64_t key = (lo << 32) | hi;
      uint64_t ha = mix_a(key ^ mix_a(xb + 0x9e3779b97f4a7c15ULL));
      uint64_t hb = mix_b(xb ^ mix_b(key + 0x632be59bd9b4e019ULL));
      if (r < j) { sa_u += ha; sb_u += hb; cu++; }
      else { sa_l += ha; sb_l += hb; cl++; }
    }
    if (v_degree) v_degree[j] = sum;
    up_a += sa_u; up_b += sb_u; lo_a += sa_l; lo_b += sb_l;
    n_up += cu; n_lo += cl;
    bad |= b;
    bad_rows |= br;
  }
  if (bad_rows) {
    /* before the exact check, whose binary searches need sorted rows */
    res[0] = 7;
    res[1] = first_bad_rows(n, cp, ci) + 1;
    return;
  }
  if (!bad && n_up == n_lo && up_a == lo_a && up_b == lo_b) {
    res[0] = 0;
    res[1] = 0;
    return;
  }
  check_exact(n, cp, ci, cx, tol, n_threads, res);
}

int sbg_cosnet_normalize(int32_t n, const int32_t *cp, const int32_t *ci, const double *cx,
                         const double *v_degree, double *v_scale, double *v_out, int n_threads) {
  for (int32_t j = 0; j < n; j++) v_scale[j] = v_degree[j] > 0 ? 1.0 / sqrt(v_degree[j]) : 0.0;
  int bad = 0;
  /* s_i * s_j first, as R's x * (s[i] * s[j]) did: symmetric to the last bit */
#pragma omp parallel for num_threads(n_threads > 0 ? n_threads : 1) schedule(dynamic, 1024) reduction(| : bad)
  for (int32_t j = 0; j < n; j++) {
    double sj = v_scale[j];
    for (int32_t k = cp[j]; k < cp[j + 1]; k++) {
      int32_t r = ci[k];
      if (r < 0 || r >= n) { bad = 1; continue; }
      v_out[k] = cx[k] * (v_scale[r] * sj);
    }
  }
  return bad;
}
