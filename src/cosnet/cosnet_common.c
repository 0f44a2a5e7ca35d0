/* Host pieces shared by both COSNet engines (parCosnet(), cvParCosnet()):
 * the learning of (alpha, c) from the labelled points, which always runs on
 * the host so that both engines learn the same line, the colouring
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

/* The order-preserving 64-bit pattern of a double: a < b exactly when
 * key(a) < key(b), and key(a) == key(b) exactly when a == b (-0 taken as
 * +0, so that it ties with 0 as in a comparison).  Not for NaN, which the
 * points (finite sums of finite weights) never give. */
static inline uint64_t order_key(double v) {
  double d = v == 0 ? 0.0 : v;
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

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
  uint64_t *u;   /* 2 cap: the keys of the grouped sweeps and their scratch */
  double *v;     /* cap: the values of a grouped sweep, in point order */
  keyed *pa;     /* 3 cap: the sorts of pos_above(), made when first needed */
  double *px, *py;
  int8_t *pl;
} learn_ws;

static int learn_ws_alloc(learn_ws *ws, int64_t cap) {
  size_t c = (size_t)(cap > 0 ? cap : 1);
  ws->cap = cap;
  ws->u = (uint64_t *)malloc(2 * c * sizeof(uint64_t));
  ws->v = (double *)malloc(c * sizeof(double));
  ws->pa = NULL;
  ws->px = (double *)malloc(2 * c * sizeof(double));
  ws->py = ws->px ? ws->px + c : NULL;
  ws->pl = (int8_t *)malloc(c);
  return ws->u && ws->v && ws->px && ws->pl;
}

static void learn_ws_free(learn_ws *ws) {
  free(ws->u);
  free(ws->v);
  free(ws->pa);
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

/* Stable least-significant-digit radix sorts by a 64-bit key, 11 bits a
 * pass (6 passes; 8-bit digits took 8, each moving every element), passes
 * where every key has the same digit skipped: NAME(a, m, tmp,
 * lp) on one thread (1 = interrupted, a then half sorted and unused), and
 * NAME##_threads(a, m, tmp, nt) with each thread counting and then
 * scattering a contiguous block of the current order (blocks in thread
 * order: as stable as one thread, the same result).  tmp: m scratch
 * elements.  Defined for bare keys (the grouped sweeps, where only the
 * count of each label in a group of equal keys matters) and for keys with
 * their positions (pos_above(), whose sweeps take the points one by one in
 * their stable order). */
#define RADIX_BITS 11
#define RADIX_BUCKETS (1 << RADIX_BITS)
#define RADIX_PASSES ((64 + RADIX_BITS - 1) / RADIX_BITS)
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
    int64_t cnt[RADIX_PASSES][RADIX_BUCKETS];                                                      \
    memset(cnt, 0, sizeof cnt);                                                                    \
    for (int64_t i = 0; i < m; i++) {                                                              \
      uint64_t b = KEY(a[i]);                                                                      \
      for (int p = 0; p < RADIX_PASSES; p++) cnt[p][(b >> (RADIX_BITS * p)) & (RADIX_BUCKETS - 1)]++; \
    }                                                                                              \
    T *src = a, *dst = tmp;                                                                        \
    for (int p = 0; p < RADIX_PASSES; p++) {                                                       \
      if (learn_tick(lp, m)) return 1;                                                             \
      int trivial = 0;                                                                             \
      for (int d = 0; d < RADIX_BUCKETS; d++)                                                      \
        if (cnt[p][d] == m) { trivial = 1; break; }                                                \
      if (trivial) continue;                                                                       \
      int64_t off = 0;                                                                             \
      for (int d = 0; d < RADIX_BUCKETS; d++) { int64_t c = cnt[p][d]; cnt[p][d] = off; off += c; } \
      for (int64_t i = 0; i < m; i++) dst[cnt[p][(KEY(src[i]) >> (RADIX_BITS * p)) & (RADIX_BUCKETS - 1)]++] = src[i]; \
      T *t = src; src = dst; dst = t;                                                              \
    }                                                                                              \
    if (src != a) memcpy(a, src, (size_t)m * sizeof(T));                                           \
    return 0;                                                                                      \
  }                                                                                                \
  static int NAME##_threads(T *a, int64_t m, T *tmp, int nt) {                                     \
    int64_t(*hist)[RADIX_BUCKETS] = (int64_t(*)[RADIX_BUCKETS])malloc((size_t)nt * sizeof *hist);  \
    if (!hist) return NAME(a, m, tmp, NULL);                                                       \
    int64_t cnt[RADIX_PASSES][RADIX_BUCKETS];                                                      \
    memset(cnt, 0, sizeof cnt);                                                                    \
    int odd = 0; /* passes made: the result is in tmp when odd */                                  \
    _Pragma("omp parallel num_threads(nt)") {                                                      \
      int T_ = omp_get_num_threads(), t = omp_get_thread_num();                                    \
      int64_t lo = m * t / T_, hi = m * (t + 1) / T_;                                              \
      int64_t loc[RADIX_PASSES][RADIX_BUCKETS];                                                    \
      memset(loc, 0, sizeof loc);                                                                  \
      for (int64_t i = lo; i < hi; i++) {                                                          \
        uint64_t b = KEY(a[i]);                                                                    \
        for (int p = 0; p < RADIX_PASSES; p++) loc[p][(b >> (RADIX_BITS * p)) & (RADIX_BUCKETS - 1)]++; \
      }                                                                                            \
      _Pragma("omp critical(sbg_cosnet_sort_counts)")                                              \
      for (int p = 0; p < RADIX_PASSES; p++)                                                       \
        for (int d = 0; d < RADIX_BUCKETS; d++) cnt[p][d] += loc[p][d];                            \
      _Pragma("omp barrier")                                                                       \
      T *src = a, *dst = tmp;                                                                      \
      int made = 0;                                                                                \
      for (int p = 0; p < RADIX_PASSES; p++) {                                                     \
        int trivial = 0;                                                                           \
        for (int d = 0; d < RADIX_BUCKETS; d++)                                                    \
          if (cnt[p][d] == m) { trivial = 1; break; }                                              \
        if (trivial) continue;                                                                     \
        int64_t *h = hist[t];                                                                      \
        for (int d = 0; d < RADIX_BUCKETS; d++) h[d] = 0;                                          \
        for (int64_t i = lo; i < hi; i++) h[(KEY(src[i]) >> (RADIX_BITS * p)) & (RADIX_BUCKETS - 1)]++; \
        _Pragma("omp barrier")                                                                     \
        int64_t off[RADIX_BUCKETS], base = 0;                                                      \
        for (int d = 0; d < RADIX_BUCKETS; d++) {                                                  \
          int64_t o = base;                                                                        \
          for (int u = 0; u < t; u++) o += hist[u][d];                                             \
          off[d] = o;                                                                              \
          base += cnt[p][d];                                                                       \
        }                                                                                          \
        for (int64_t i = lo; i < hi; i++) dst[off[(KEY(src[i]) >> (RADIX_BITS * p)) & (RADIX_BUCKETS - 1)]++] = src[i]; \
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
#define KEYED_KEY(e) order_key((e).v)
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

/* The grouped sweeps of the learning step (over the angles, then over the
 * intercepts) walk the points in ascending key order, a group of equal
 * keys at a time, and use only each group's key and its counts of
 * positives and negatives: the order of the points inside a group never
 * matters.  So the keys need no positions: the positives' keys and the
 * negatives' keys are sorted apart, as bare keys (8 bytes a move instead
 * and a position), and merged group by group.  A group's value is its
 * key's double, except for a group of zeros, which takes the value of its
 * first point (a -0 or a +0), as a stable sort of the values would. */
typedef struct {
  uint64_t *pos, *neg; /* sorted keys: n_p of the positives, n_n of the negatives */
  int64_t n_p, n_n, i, j;
  double zero;         /* the value of the group of zeros */
} key_groups;

/* The keys of the values v[0..m) (in point order; with `stop`, only those
 * below `stop`, the others left out) split by label into g (positives
 * from out[0], negatives from out[n_pos]) and sorted; tmp: m scratch. */
static int group_keys(const double *v, const int8_t *lab, int64_t m, int64_t n_pos, int stop_on,
                      double stop, uint64_t *out, uint64_t *tmp, key_groups *g, learn_poll *lp) {
  int64_t a = 0, b = n_pos;
  int zero_seen = 0;
  g->zero = 0.0;
  for (int64_t i = 0; i < m; i++) {
    double x = v[i];
    if (stop_on && !(x < stop)) continue;
    if (x == 0 && !zero_seen) { g->zero = x; zero_seen = 1; }
    uint64_t k = order_key(x);
    if (lab[i] > 0) out[a++] = k; else out[b++] = k;
  }
  g->pos = out;
  g->neg = out + n_pos;
  g->n_p = a;
  g->n_n = b - n_pos;
  g->i = g->j = 0;
  if (learn_tick(lp, m)) return 1;
  return sort_bare_lp(g->pos, g->n_p, tmp, lp) || sort_bare_lp(g->neg, g->n_n, tmp, lp);
}

/* The next group: 0 when none is left, else 1 with its key and counts. */
static int next_group(key_groups *g, uint64_t *key, int64_t *pos, int64_t *neg) {
  if (g->i >= g->n_p && g->j >= g->n_n) return 0;
  uint64_t k = g->j >= g->n_n || (g->i < g->n_p && g->pos[g->i] <= g->neg[g->j]) ? g->pos[g->i]
                                                                                  : g->neg[g->j];
  int64_t i0 = g->i, j0 = g->j;
  while (g->i < g->n_p && g->pos[g->i] == k) g->i++;
  while (g->j < g->n_n && g->neg[g->j] == k) g->j++;
  *key = k;
  *pos = g->i - i0;
  *neg = g->j - j0;
  return 1;
}

static double group_value(const key_groups *g, uint64_t key) {
  return key == order_key(0.0) ? g->zero : order_value(key);
}

/* Best intercept for the slope `slope`: points with y - slope * x at or
 * below the line are positive; groups of equal intercepts enter together;
 * a later line wins only with a strictly larger F. */
static int intercept_sweep(const double *x, const double *y, const int8_t *lab, int64_t m,
                           int64_t n_pos, double slope, uint64_t *u, uint64_t *tmp, double *v,
                           double *q_best, double *f_best, learn_poll *lp) {
#pragma omp parallel for num_threads(learn_threads(lp, m)) schedule(static)
  for (int64_t i = 0; i < m; i++) v[i] = y[i] - slope * x[i];
  key_groups g;
  if (group_keys(v, lab, m, n_pos, 0, 0.0, u, tmp, &g, lp)) return 1;
  int64_t tp = 0, fp = 0, fn = n_pos, pos, neg;
  double best = f_score(tp, fn, fp), qb = 0;
  uint64_t key;
  while (next_group(&g, &key, &pos, &neg)) {
    tp += pos; fn -= pos; fp += neg;
    if (may_beat(tp, fn, fp, best)) {
      double f = f_score(tp, fn, fp);
      if (f > best) { best = f; qb = group_value(&g, key); }
    }
    if (learn_tick(lp, pos + neg)) return 1;
  }
  *q_best = qb;
  *f_best = best;
  return 0;
}

/* The stable positions of a sort, in the keyed scratch of pos_above(). */
static keyed *pos_above_scratch(learn_ws *ws, int64_t m, int *own) {
  if (ws && ws->cap >= m) {
    if (!ws->pa) ws->pa = (keyed *)malloc(3 * (size_t)(ws->cap > 0 ? ws->cap : 1) * sizeof(keyed));
    if (ws->pa) { *own = 0; return ws->pa; }
  }
  *own = 1;
  return (keyed *)malloc(3 * (size_t)(m > 0 ? m : 1) * sizeof(keyed));
}

/* COSNet's branch for a positive half-plane above the line (its
 * optimize_pos_above): the line passes through the best positive point on
 * the y axis, its slope (at most -1) is chosen among the lines through the
 * other points, and then the intercept; no grouping of ties here, points in
 * their stable order (value, then position: sort_keyed()).  Changes
 * nothing when no positive lies on the y axis. */
static sbg_status pos_above(const double *x, const double *y, const int8_t *lab, int64_t m,
                            int64_t n_pos_all, double *alpha, double *c, double *fscore,
                            learn_poll *lp) {
  sbg_status st = SBG_OK;
  int64_t nz = 0, nz_pos = 0;
  for (int64_t i = 0; i < m; i++)
    if (x[i] == 0) { nz++; if (lab[i] > 0) nz_pos++; }
  if (nz_pos == 0) return SBG_OK;
  int own;
  keyed *z = pos_above_scratch(lp->ws, m, &own);
  if (!z) return SBG_ERR_ALLOC;
  keyed *s = z + m, *tmp = s + m;

  /* Step 1: points on the y axis by ordinate; for the line through the
   * r-th positive (position pos, 1-based), TP = r, FP = pos - r. */
  int64_t t = 0;
  for (int64_t i = 0; i < m; i++)
    if (x[i] == 0) { z[t].v = y[i]; z[t].i = i; t++; }
  if (sort_keyed_lp(z, nz, tmp, lp)) { st = SBG_ERR_INTERRUPTED; goto done; }
  double best = 0;
  int64_t best_pos = 0, best_rank = 0, rank = 0;
  for (int64_t p = 0; p < nz; p++) {
    if (lab[z[p].i] <= 0) continue;
    rank++;
    double f = f_score(rank, nz_pos - rank, (p + 1) - rank);
    if (f > best) { best = f; best_pos = p + 1; best_rank = rank; }
  }
  double y1 = z[best_pos - 1].v;

  /* Step 2: slopes from that point to the points off the axis, ascending;
   * only slopes <= -1 are lines, each adding its point below the line (the
   * others are left out before the sort: they would come after them). */
  int64_t nn = 0, up_pos = 0;
  for (int64_t i = 0; i < m; i++) {
    if (x[i] == 0) continue;
    if (lab[i] > 0) up_pos++;
    double sl = (y[i] - y1) / (x[i] - 0.0);
    if (sl > -1) continue;
    s[nn].v = sl;
    s[nn].i = i;
    nn++;
  }
  if (sort_keyed_lp(s, nn, tmp, lp)) { st = SBG_ERR_INTERRUPTED; goto done; }
  int64_t tp = best_rank, fn = nz_pos - best_rank, fp = best_pos - best_rank;
  best = f_score(tp, fn, fp); /* COSNet scores the start without the off-axis positives */
  fn += up_pos;
  double slope = tan(1.58);   /* COSNet's default: an almost vertical line */
  for (int64_t j = 0; j < nn; j++) {
    if (lab[s[j].i] > 0) { tp++; fn--; } else fp++;
    if (!may_beat(tp, fn, fp, best)) continue;
    double f = f_score(tp, fn, fp);
    if (f > best) { best = f; slope = s[j].v; }
  }

  /* Step 3: intercept for that slope, points in stable order, no grouping. */
#pragma omp parallel for num_threads(learn_threads(lp, m)) schedule(static)
  for (int64_t i = 0; i < m; i++) {
    s[i].v = y[i] - slope * x[i];
    s[i].i = i;
  }
  if (sort_keyed_lp(s, m, tmp, lp)) { st = SBG_ERR_INTERRUPTED; goto done; }
  tp = 0; fp = 0; fn = n_pos_all;
  best = 0;
  double q = 0;
  for (int64_t j = 0; j < m; j++) {
    if (lab[s[j].i] > 0) { tp++; fn--; } else fp++;
    if (tp == 0 || !may_beat(tp, fn, fp, best)) continue;
    double f = f_score(tp, fn, fp);
    if (f > best) { best = f; q = s[j].v; }
  }
  *alpha = atan(slope) + M_PI;
  *c = -q * cos(*alpha);
  *fscore = best;
done:
  if (own) free(z);
  return st;
}

/* The learning step (sbg_cosnet_learn) with the polls and threads of lp. */
static sbg_status learn_step(const double *x, const double *y, const int8_t *lab, int64_t m,
                             double *alpha, double *c, double *fscore, learn_poll *lp) {
  sbg_status st = SBG_OK;
  sbg_ctx *ctx = lp->ctx;
  double done = lp->done;
  int own = !(lp->ws && lp->ws->cap >= m);
  size_t c1 = (size_t)(m > 0 ? m : 1);
  uint64_t *u = own ? (uint64_t *)malloc(c1 * 2 * sizeof(uint64_t)) : lp->ws->u;
  double *v = own ? (double *)malloc(c1 * sizeof(double)) : lp->ws->v;
  if (!u || !v) {
    if (own) { free(u); free(v); }
    return SBG_ERR_ALLOC;
  }
  uint64_t *tmp = u + (own ? c1 : (size_t)lp->ws->cap);
  int64_t n_pos = 0;
  for (int64_t i = 0; i < m; i++) n_pos += lab[i] > 0;
  int64_t n_neg = m - n_pos;

  /* Step 1: angles of the lines through the origin and each point; a point
   * on the y axis gets pi/2 (COSNet: pi/2 - DBL_MIN, the same double).
   * The sweep stops at the first angle >= 1.57 (as COSNet's), so those
   * points, the y axis's among them, are left out of the sort; a ratio
   * y / x >= 1300 has an angle >= atan(1300) = 1.570027 (tan(1.57) is
   * 1255.8), far beyond any rounding of atan, so its atan is not needed. */
#pragma omp parallel for num_threads(learn_threads(lp, m)) schedule(static)
  for (int64_t i = 0; i < m; i++) {
    double r = x[i] != 0 ? y[i] / x[i] : HUGE_VAL;
    v[i] = r < 1300 ? atan(r) : M_PI / 2;
  }
  key_groups g;
  if (group_keys(v, lab, m, n_pos, 1, 1.57, u, tmp, &g, lp)) goto interrupted;
  /* Sweep the angles upwards, a group of equal angles at a time; the
   * points at or below the line are positive ("under") or those above it
   * ("over").  As COSNet: a line must strictly beat the best F so far,
   * and a last point standing alone at the end of the order (at m - 1:
   * nothing was left out) is not counted. */
  int64_t tp_u = 0, fp_u = 0, fn_u = n_pos;
  int64_t tp_o = n_pos, fp_o = n_neg, fn_o = 0;
  double best_u = 0, best_o = 0, ang_u = 0, ang_o = 0;
  uint64_t key;
  int64_t pos, neg, seen = 0, kept = g.n_p + g.n_n;
  while (next_group(&g, &key, &pos, &neg)) {
    seen += pos + neg;
    if (kept == m && seen == m && pos + neg == 1) pos = neg = 0;
    tp_u += pos; fn_u -= pos; fp_u += neg;
    tp_o -= pos; fn_o += pos; fp_o -= neg;
    if (may_beat(tp_u, fn_u, fp_u, best_u)) {
      double fu = f_score(tp_u, fn_u, fp_u);
      if (fu > best_u) { best_u = fu; ang_u = group_value(&g, key); }
    }
    if (may_beat(tp_o, fn_o, fp_o, best_o)) {
      double fo = f_score(tp_o, fn_o, fp_o);
      if (fo > best_o) { best_o = fo; ang_o = group_value(&g, key); }
    }
    if (learn_tick(lp, pos + neg)) goto interrupted;
  }
  int above = best_o > best_u;
  double theta = above ? ang_o : ang_u;

  /* Step 2: the intercept, with the positive half-plane below the line. */
  double q = 0, f = 0;
  if (intercept_sweep(x, y, lab, m, n_pos, tan(theta), u, tmp, v, &q, &f, lp)) goto interrupted;
  *alpha = theta + DBL_MIN;
  *c = -q * cos(*alpha);
  *fscore = f;
  if (above) {
    st = pos_above(x, y, lab, m, n_pos, alpha, c, fscore, lp);
    if (st == SBG_OK && ctx && sbg_poll(ctx, done) != SBG_OK) goto interrupted;
  }
  if (own) { free(u); free(v); }
  return st;
interrupted:
  if (own) { free(u); free(v); }
  return SBG_ERR_INTERRUPTED; /* ctx->errbuf set by sbg_poll */
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

sbg_status sbg_cosnet_learn_jobs(int32_t n_jobs, int32_t n, const int8_t *codes,
                                 const double *x, const double *y, double *alpha,
                                 double *c, double *fscore, int64_t *n_pos, int64_t *n_lab,
                                 int n_threads) {
  sbg_status st = SBG_OK;
  if (2 * (int64_t)n_jobs <= n_threads) {
    /* few jobs (large networks): one at a time, each step's sorts on all
     * the threads; the same steps, so the same lines */
    learn_ws ws;
    if (!learn_ws_alloc(&ws, n)) st = SBG_ERR_ALLOC;
    for (int32_t j = 0; j < n_jobs && st != SBG_ERR_ALLOC; j++) {
      sbg_status sj = learn_job(j, n, codes, x, y, alpha, c, fscore, n_pos, n_lab, n_threads, &ws);
      if (sj != SBG_OK && (st == SBG_OK || sj == SBG_ERR_ALLOC)) st = sj;
    }
    learn_ws_free(&ws);
    return st;
  }
#pragma omp parallel num_threads(n_threads)
  {
    learn_ws ws;
    int ok = learn_ws_alloc(&ws, n);
#pragma omp for schedule(dynamic, 1)
    for (int32_t j = 0; j < n_jobs; j++) {
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

static int unlabelled_code(int8_t c) { return c == SBG_COSNET_REPORT || c == SBG_COSNET_QUIET; }

int64_t sbg_cosnet_batch_items(int32_t n, int32_t nb, const int8_t *codes, int32_t n_parts,
                               const int64_t *t0, const int32_t *nodes, const uint8_t *is_hub,
                               int32_t *item_job, int32_t *item_node, int64_t *iptr,
                               int64_t *n_unlab, int64_t *work, int n_threads) {
  /* work[(2s + hub) * nb + b]: items of (part s, hub, job b); counted per
   * job, turned into offsets in the items' order, then filled per job */
  int64_t slots = 2 * (int64_t)n_parts;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int32_t b = 0; b < nb; b++) {
    const int8_t *jl = codes + (size_t)b * n;
    int64_t total = 0;
    for (int64_t q = 0; q < slots; q++) work[q * nb + b] = 0;
    for (int32_t s = 0; s < n_parts; s++)
      for (int64_t t = t0[s]; t < t0[s + 1]; t++) {
        int32_t v = nodes[t];
        if (unlabelled_code(jl[v])) {
          work[(2 * (int64_t)s + is_hub[v]) * nb + b]++;
          total++;
        }
      }
    n_unlab[b] = total;
  }
  int64_t off = 0;
  for (int64_t q = 0; q < slots; q++) {
    iptr[q] = off;
    for (int32_t b = 0; b < nb; b++) {
      int64_t c = work[q * nb + b];
      work[q * nb + b] = off;
      off += c;
    }
  }
  iptr[slots] = off;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int32_t b = 0; b < nb; b++) {
    const int8_t *jl = codes + (size_t)b * n;
    for (int32_t s = 0; s < n_parts; s++)
      for (int64_t t = t0[s]; t < t0[s + 1]; t++) {
        int32_t v = nodes[t];
        if (!unlabelled_code(jl[v])) continue;
        int64_t at = work[(2 * (int64_t)s + is_hub[v]) * nb + b]++;
        item_job[at] = b;
        item_node[at] = v;
      }
  }
  return off;
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
