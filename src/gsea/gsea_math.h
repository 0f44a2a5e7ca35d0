/* Per-gene arithmetic shared by the CPU and GPU engines of rapidGSEA(): the
 * Broad ranking metrics from class sums, the running-sum weight and the
 * sort key.  One source so both engines compute bit-identical metrics: on
 * the device every operation is an explicitly rounded intrinsic, so nvcc
 * cannot contract a*b+c into an FMA that the CPU does not do. */
#ifndef SBG_GSEA_MATH_H
#define SBG_GSEA_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gsea.h"

#ifdef __CUDACC__
#define GSEA_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define GSEA_HD static inline __attribute__((always_inline))
#else
#define GSEA_HD static inline
#endif

#ifdef __CUDA_ARCH__
#define G_ADD(a, b) __dadd_rn((a), (b))
#define G_SUB(a, b) __dsub_rn((a), (b))
#define G_MUL(a, b) __dmul_rn((a), (b))
#define G_DIV(a, b) __ddiv_rn((a), (b))
#define G_SQRT(a) __dsqrt_rn(a)
#else
#define G_ADD(a, b) ((a) + (b))
#define G_SUB(a, b) ((a) - (b))
#define G_MUL(a, b) ((a) * (b))
#define G_DIV(a, b) ((a) / (b))
#define G_SQRT(a) sqrt(a)
#endif

/* Broad's standard deviation: unbiased, then the fix-low rule raises it to
 * 0.2 * |mean| (0.2 when the mean is 0), which keeps nearly constant genes
 * from dominating signal2noise and the t-test. */
GSEA_HD double gsea_sd_fixlow(double sum_c, double ss_c, double n, double mu) {
  double m = G_DIV(sum_c, n);
  double v = G_DIV(G_SUB(ss_c, G_MUL(G_MUL(n, m), m)), G_SUB(n, 1.0));
  /* rounding can make v slightly negative; a NaN (overflowed sums) stays
   * NaN so it cannot pass for a variance of 0 (R refuses such data first) */
  if (v < 0) v = 0;
  double sd = G_SQRT(v);
  double mean = G_ADD(mu, m);
  double lo = mean == 0 ? 0.2 : G_MUL(0.2, fabs(mean));
  return sd < lo ? lo : sd;
}

/* The metric of one gene from the centred sums of class A and class B;
 * mu is the gene's mean (added back for the ratio metrics).  -0 becomes +0
 * so that the ranking does not depend on the sign of a zero. */
GSEA_HD double gsea_metric(int metric, double sa, double ssa, double sb, double ssb,
                           double na, double nb, double mu) {
  double ma = G_DIV(sa, na), mb = G_DIV(sb, nb);
  double r;
  switch (metric) {
  case SBG_GSEA_S2N: {
    double da = gsea_sd_fixlow(sa, ssa, na, mu), db = gsea_sd_fixlow(sb, ssb, nb, mu);
    r = G_DIV(G_SUB(ma, mb), G_ADD(da, db));
    break;
  }
  case SBG_GSEA_TTEST: {
    double da = gsea_sd_fixlow(sa, ssa, na, mu), db = gsea_sd_fixlow(sb, ssb, nb, mu);
    r = G_DIV(G_SUB(ma, mb), G_SQRT(G_ADD(G_DIV(G_MUL(da, da), na), G_DIV(G_MUL(db, db), nb))));
    break;
  }
  case SBG_GSEA_DIFF:
    r = G_SUB(ma, mb);
    break;
  case SBG_GSEA_RATIO:
    r = G_DIV(G_ADD(mu, ma), G_ADD(mu, mb));
    break;
  default: /* SBG_GSEA_LOG2RATIO */
    r = log2(G_DIV(G_ADD(mu, ma), G_ADD(mu, mb)));
    break;
  }
  return r == 0 ? 0.0 : r;
}

/* |m|^q with the common exponents exact. */
GSEA_HD double gsea_weight(double m, double q) {
  double a = fabs(m);
  if (q == 0) return 1.0;
  if (q == 1) return a;
  if (q == 2) return G_MUL(a, a);
  return pow(a, q);
}

/* Ascending unsigned order of this key = descending metric; a stable sort
 * of genes in index order then breaks ties by gene index. */
GSEA_HD uint64_t gsea_sort_key(double m) {
#ifdef __CUDA_ARCH__
  uint64_t u = (uint64_t)__double_as_longlong(m);
#else
  uint64_t u;
  memcpy(&u, &m, sizeof u);
#endif
  u = (u >> 63) ? ~u : (u | 0x8000000000000000ull);
  return ~u;
}

/* Running-sum state of one set in one permutation, fed its hits in rank
 * order.  The running sum peaks at hits and bottoms out just before them,
 * so the hits alone give Broad's ES: the first position of the largest
 * |running sum| (strict >, positions visited in order). */
typedef struct gsea_es_state {
  double cum;   /* weight of the hits so far */
  double cur;   /* cum x inv_nr, the hits' part of the running sum */
  double best;  /* running sum of largest magnitude so far */
  double bar;   /* |best| x GSEA_TIE: what a value must pass to replace best */
  int32_t nh;   /* hits so far */
  int32_t pos;  /* 0-based position of best */
} gsea_es_state;

GSEA_HD void gsea_es_init(gsea_es_state *s) {
  s->cum = 0;
  s->cur = 0;
  s->best = 0;
  s->bar = 0;
  s->nh = 0;
  s->pos = 0;
}

/* Running-sum values within 1e-12 (relative) of each other are ties: the
 * arithmetic carries rounding errors far above that, and an exact tie
 * (common with q = 0) must go to the first position, as Broad's rule does
 * on exact values. */
#define GSEA_TIE 1.000000000001

/* The rule at a hit of 0-based rank r whose cumulative hit weight is c1
 * (the state holds the one just before it): inv_nr = 1 / total hit
 * weight, inv_nmiss = 1 / (N - k).  Reciprocals, not divisions: the
 * divisions were most of the CPU engine's time.  The value before the hit
 * reuses the previous hit's product, and the bar changes only with best:
 * the same bits as computing them at every hit, with three
 * multiplications fewer, which the GPU's running sums are short of.  tie:
 * GSEA_TIE (gsea_es_step), which a GPU kernel passes from its parameters:
 * its multiplications then read it from constant memory, where building
 * the 64-bit constant took two instructions before each of them. */
GSEA_HD void gsea_es_step_tie(gsea_es_state *s, int32_t r, double c1, double inv_nr, double inv_nmiss, double tie) {
  double miss = G_MUL((double)(r - s->nh), inv_nmiss);
  double bottom = G_SUB(s->cur, miss); /* at position r - 1 */
  if (fabs(bottom) > s->bar) {
    s->best = bottom;
    s->bar = G_MUL(fabs(bottom), tie);
    s->pos = r - 1;
  }
  s->nh++;
  s->cum = c1;
  s->cur = G_MUL(c1, inv_nr);
  double top = G_SUB(s->cur, miss);    /* at position r */
  if (fabs(top) > s->bar) {
    s->best = top;
    s->bar = G_MUL(fabs(top), tie);
    s->pos = r;
  }
}

GSEA_HD void gsea_es_step(gsea_es_state *s, int32_t r, double c1, double inv_nr, double inv_nmiss) {
  gsea_es_step_tie(s, r, c1, inv_nr, inv_nmiss, GSEA_TIE);
}

/* Hit at 0-based rank r with weight w, the weights added one after the
 * other (the preranked nulls and the multilevel sampler). */
GSEA_HD void gsea_es_hit(gsea_es_state *s, int32_t r, double w, double inv_nr, double inv_nmiss) {
  gsea_es_step(s, r, G_ADD(s->cum, w), inv_nr, inv_nmiss);
}

/* Sums of a set's hit weights in runs.  A set of k hits is cut into
 * GSEA_RUNS runs of ceil(k / GSEA_RUNS) consecutive hits (the last ones
 * shorter or empty); each run is summed from 0 in order, the totals of the
 * runs before it are summed in order (off), and the sum up to a hit is off
 * plus its run's sum so far.  A GPU adds the runs side by side, a warp's
 * lane a run, where adding k weights one after the other was a chain of k
 * dependent additions, half of k_es_tile's time; every engine of the
 * permutation ES (perm_es in gsea_cpu.c, k_es_tile in gsea_gpu.cu) adds in
 * this order, so they give the same bits: the set's total weight over its
 * members in the set's order, the running sum over its hits in rank order.
 * With k <= GSEA_RUNS every run holds one hit and the sums are the plain
 * sums in order.  The CPU adds run after run in nested loops; these
 * functions add a hit at a time, with the same bits. */
#define GSEA_RUNS 32
typedef struct gsea_runs {
  double off;   /* total of the finished runs */
  double loc;   /* the current run's sum */
  int32_t len;  /* hits a run */
  int32_t left; /* hits the current run still takes */
} gsea_runs;

GSEA_HD int32_t gsea_run_len(int32_t k) {
  return k > GSEA_RUNS ? (k + GSEA_RUNS - 1) / GSEA_RUNS : 1;
}

GSEA_HD void gsea_runs_init(gsea_runs *u, int32_t k) {
  u->off = 0;
  u->loc = 0;
  u->len = gsea_run_len(k);
  u->left = u->len;
}

/* Adds w; returns the sum so far. */
GSEA_HD double gsea_runs_add(gsea_runs *u, double w) {
  /* (a GPU predicates the three moves at a run's start, no branch;
   * adding 0 to both sums at every hit instead took five selects a hit) */
  if (u->left == 0) {
    u->off = G_ADD(u->off, u->loc);
    u->loc = 0;
    u->left = u->len;
  }
  u->loc = G_ADD(u->loc, w);
  u->left--;
  return G_ADD(u->off, u->loc);
}

/* Hit at 0-based rank r with weight w, the running sum in runs (u, set up
 * for the set's k hits). */
GSEA_HD void gsea_es_hit_runs(gsea_es_state *s, gsea_runs *u, int32_t r, double w, double inv_nr, double inv_nmiss) {
  gsea_es_step(s, r, gsea_runs_add(u, w), inv_nr, inv_nmiss);
}
/* The same with the tie factor passed in (gsea_es_step_tie). */
GSEA_HD void gsea_es_hit_runs_tie(gsea_es_state *s, gsea_runs *u, int32_t r, double w, double inv_nr,
                                  double inv_nmiss, double tie) {
  gsea_es_step_tie(s, r, gsea_runs_add(u, w), inv_nr, inv_nmiss, tie);
}

/* ---------------------------------------------------------------------- */
/* Statistics shared by the host and the device passes */

/* Sums of null ES (|v| <= 1) for the NES normalisers, exact in units of
 * 2^-62 in 128 bits: each value is cut to that grid once (truncation, the
 * same on both engines) and integer sums do not depend on the order, so
 * the permutations may be split over batches, threads, devices and R
 * workers with the same bits.  2^24 permutations need 86 bits.  (The
 * type is in gsea.h.) */

#define GSEA_ACC_ONE 4611686018427387904.0 /* 2^62 */

/* Whether v can be added: v * 2^62 must fit an int64, so |v| < 2 (NaN
 * not).  The engines' ES are within 1 + rounding; values from users
 * (gseaStats) are checked with this first, since an out-of-range value
 * would wrap around and flip the sign of a sum.  Sums cannot overflow:
 * each term is below 2^63 in magnitude, so 2^64 of them fit 128 bits. */
GSEA_HD int gsea_acc_fits(double v) {
  return fabs(v) < 2.0;
}

/* Adds v, |v| < 2 (gsea_acc_fits). */
GSEA_HD void gsea_acc_add(gsea_acc *a, double v) {
  int64_t x = (int64_t)G_MUL(v, GSEA_ACC_ONE);
  uint64_t lo = a->lo + (uint64_t)x;
  a->hi += (x < 0 ? -1 : 0) + (lo < a->lo ? 1 : 0);
  a->lo = lo;
}

GSEA_HD void gsea_acc_merge(gsea_acc *a, gsea_acc b) {
  uint64_t lo = a->lo + b.lo;
  a->hi += b.hi + (lo < a->lo ? 1 : 0);
  a->lo = lo;
}

GSEA_HD double gsea_acc_value(gsea_acc a) {
  return G_DIV(G_ADD(G_MUL((double)a.hi, 18446744073709551616.0), (double)a.lo), GSEA_ACC_ONE);
}

/* A null ES normalised by the mean of its sign's nulls (NaN when that
 * sign has no usable mean: the caller skips it). */
GSEA_HD double gsea_null_nes(double v, double mpos, double mneg) {
  return v >= 0 ? G_DIV(v, mpos) : G_DIV(v, mneg);
}

/* Number of a[0..n) < x, a ascending (the first index with a >= x), for
 * doubles (gsea_count_lt) and positions (gsea_count_lt_i). */
#define GSEA_COUNT_LT(name, T)                                  \
  GSEA_HD int32_t name(const T *a, int32_t n, T x) {            \
    int32_t lo = 0, hi = n;                                     \
    while (lo < hi) {                                           \
      int32_t mid = lo + (hi - lo) / 2;                         \
      if (a[mid] < x) lo = mid + 1; else hi = mid;              \
    }                                                           \
    return lo;                                                  \
  }
GSEA_COUNT_LT(gsea_count_lt, double)
GSEA_COUNT_LT(gsea_count_lt_i, int32_t)

/* Number of a[0..n) <= x, a ascending. */
GSEA_HD int32_t gsea_count_le(const double *a, int32_t n, double x) {
  int32_t lo = 0, hi = n;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (a[mid] <= x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/* The FDR numerators add 1 / (same-sign nulls of a permutation) per null
 * NES.  They are summed as integers in units of 2^-fbits, so the sum is
 * exact and independent of the order of the permutations, threads and
 * devices; round(2^fbits / k) is off by at most k * 2^-(fbits+1) relative,
 * fbits is as large as the permutation count allows (gsea_fdr_bits). */
GSEA_HD uint64_t gsea_fdr_weight(int32_t k, int fbits) {
  return (((uint64_t)1 << (fbits + 1)) / (uint64_t)k + 1u) >> 1;
}

/* Each permutation adds at most 2^fbits + k/2 to a numerator: keep the
 * total of nperm permutations below 2^63. */
static inline int gsea_fdr_bits(int64_t nperm) {
  int b = 0;
  while (b < 62 && ((int64_t)1 << b) <= nperm) b++; /* 2^b > nperm */
  int f = 61 - b;
  return f > 52 ? 52 : f;
}

#endif /* SBG_GSEA_MATH_H */
