/* The model and the genetic operators of grnEvolve(), written once and
 * compiled for the CPU (grn_cpu.c) and the GPU (grn_gpu.cu): evaluation by
 * popcount over bit-packed states and masks, initialisation, crossover,
 * mutation, roulette spins.  Each function draws only from the Philox
 * stream it is given, so both engines make the same choices. */
#ifndef SBG_GRN_MODEL_H
#define SBG_GRN_MODEL_H

#include <stdint.h>

#include "grn.h"
#include "philox.h"

#ifdef __CUDACC__
#define GRN_HD __host__ __device__ __forceinline__
#define GRN_HOT GRN_HD
#ifdef __CUDA_ARCH__
#define GRN_POPC(x) __popc(x)
#else
#define GRN_POPC(x) __builtin_popcount(x)
#endif
#else
#define GRN_HD static inline
/* Forced inline: the CPU engine compiles the evaluation a second time for
 * the popcnt instruction (grn_cpu.c), which needs these inlined there. */
#if defined(__GNUC__)
#define GRN_HOT static inline __attribute__((always_inline))
#else
#define GRN_HOT static inline
#endif
#define GRN_POPC(x) __builtin_popcount(x)
#endif

/* Tries at drawing an initial network within maxInDegree before taking a
 * copy of the reference instead (the reference itself is within it). */
#define GRN_INIT_TRIES 64

/* Roulette weight of a score: floor(2^40 / (score + 1)), an integer, so that
 * the island's cumulative sums are exact whatever the summation order. */
#define GRN_WEIGHT_ONE ((uint64_t)1 << 40)

/* A population: n*w words of `act` and of `rep` and n rule bytes per
 * individual.  The CPU keeps each individual contiguous (soa = 0); the GPU
 * interleaves them (soa = 1: element e of individual k at [e * count + k]),
 * so that neighbouring threads read neighbouring words. */
typedef struct grn_pop {
  uint32_t *act, *rep;
  uint8_t *rule;
  int64_t count;
  int soa;
} grn_pop;

/* One individual of a population: element e at base[e * stride]. */
typedef struct grn_view {
  uint32_t *act, *rep;
  uint8_t *rule;
  int64_t stride;
} grn_view;

GRN_HD grn_view grn_view_at(const grn_pop *p, int n, int w, int64_t k) {
  grn_view v;
  if (p->soa) {
    v.act = p->act + k; v.rep = p->rep + k; v.rule = p->rule + k; v.stride = p->count;
  } else {
    v.act = p->act + k * n * w; v.rep = p->rep + k * n * w; v.rule = p->rule + k * n;
    v.stride = 1;
  }
  return v;
}

#define GRN_ACT(v, e) ((v).act[(int64_t)(e) * (v).stride])
#define GRN_REP(v, e) ((v).rep[(int64_t)(e) * (v).stride])
#define GRN_RULE(v, i) ((v).rule[(int64_t)(i) * (v).stride])

/* The new value of a gene from its rule, its active activators `a` and
 * repressors `r`, and its current value `cur`.  Branch-free: rules differ
 * from gene to gene, and a branch on them mispredicts half of the time.
 * Bit k of `v` is the outcome under rule k. */
GRN_HOT uint32_t grn_rule_apply(int rule, uint32_t a, uint32_t r, uint32_t cur) {
  uint32_t most = (a > r) | ((a == r) & cur);
  uint32_t abs_ = (r == 0) & cur;
  uint32_t jact = (a >= 2) | cur;
  uint32_t jrep = (r < 2) & cur;
  uint32_t v = most | (abs_ << 1) | (jact << 2) | (jrep << 3);
  return (v >> rule) & 1u;
}

/* The rules' outcomes as a table, for the CPU's evaluation of networks of
 * up to 32 genes (a, r <= 32): entry (rule << 12) | (a << 6) | r has bit 0
 * set when the gene turns on whatever its value, bit 1 when it keeps its
 * value.  A load replaces the ~30 instructions of grn_rule_apply. */
#define GRN_LUT_SIZE (4 << 12)
GRN_HD void grn_fill_lut(uint8_t *lut) {
  for (int rule = 0; rule < 4; rule++)
    for (uint32_t a = 0; a < 64; a++)
      for (uint32_t r = 0; r < 64; r++) {
        uint32_t off = grn_rule_apply(rule, a, r, 0), on = grn_rule_apply(rule, a, r, 1);
        lut[(rule << 12) | (a << 6) | r] = (uint8_t)(off | ((on & ~off) << 1));
      }
}

/* One synchronous step from s to t (w words each, distinct arrays). */
GRN_HOT void grn_step(const sbg_grn_problem *pb, grn_view v, const uint32_t *s, uint32_t *t) {
  const int n = pb->n, w = pb->w;
  for (int x = 0; x < w; x++) t[x] = 0;
  for (int i = 0; i < n; i++) {
    uint32_t a = 0, r = 0;
    for (int x = 0; x < w; x++) {
      a += GRN_POPC(GRN_ACT(v, i * w + x) & s[x]);
      r += GRN_POPC(GRN_REP(v, i * w + x) & s[x]);
    }
    uint32_t cur = (s[i >> 5] >> (i & 31)) & 1u;
    t[i >> 5] |= grn_rule_apply(GRN_RULE(v, i), a, r, cur) << (i & 31);
  }
}

/* Links that differ from the reference. */
GRN_HOT int grn_link_distance(const sbg_grn_problem *pb, grn_view v) {
  const int nw = pb->n * pb->w;
  int dl = 0;
  for (int e = 0; e < nw; e++)
    dl += GRN_POPC((GRN_ACT(v, e) ^ pb->ref_act[e]) | (GRN_REP(v, e) ^ pb->ref_rep[e]));
  return dl;
}

/* The integer score wn*dn + wl*dl of one individual (dn, dl optional). */
GRN_HOT int64_t grn_evaluate(const sbg_grn_problem *pb, grn_view v, int *dn_out, int *dl_out) {
  const int n = pb->n, w = pb->w;
  int dn = 0;
  if (w == 1) {
    /* Networks of up to 32 genes: the state fits in one register. */
    uint32_t s = pb->from[0];
#ifndef __CUDA_ARCH__
    if (pb->lut) {
      const uint8_t *lut = pb->lut;
      for (int step = 0; step < pb->steps; step++) {
        uint32_t t = 0;
        for (int i = 0; i < n; i++) {
          uint32_t a = GRN_POPC(GRN_ACT(v, i) & s);
          uint32_t r = GRN_POPC(GRN_REP(v, i) & s);
          uint32_t o = lut[((uint32_t)GRN_RULE(v, i) << 12) | (a << 6) | r];
          t |= ((o & 1u) | ((o >> 1) & (s >> i))) << i;
        }
        s = t;
      }
    } else
#endif
    {
      for (int step = 0; step < pb->steps; step++) {
        uint32_t t = 0;
        for (int i = 0; i < n; i++) {
          uint32_t a = GRN_POPC(GRN_ACT(v, i) & s);
          uint32_t r = GRN_POPC(GRN_REP(v, i) & s);
          t |= grn_rule_apply(GRN_RULE(v, i), a, r, (s >> i) & 1u) << i;
        }
        s = t;
      }
    }
    dn = GRN_POPC(s ^ pb->to[0]);
  } else {
    uint32_t s[SBG_GRN_MAX_WORDS], t[SBG_GRN_MAX_WORDS];
    for (int x = 0; x < w; x++) s[x] = pb->from[x];
    for (int step = 0; step < pb->steps; step++) {
      grn_step(pb, v, s, t);
      for (int x = 0; x < w; x++) s[x] = t[x];
    }
    for (int x = 0; x < w; x++) dn += GRN_POPC(s[x] ^ pb->to[x]);
  }
  int dl = grn_link_distance(pb, v);
  if (dn_out) *dn_out = dn;
  if (dl_out) *dl_out = dl;
  return pb->wn * dn + pb->wl * dl;
}

GRN_HD int grn_in_degree(const sbg_grn_problem *pb, grn_view v, int i) {
  int d = 0;
  for (int x = 0; x < pb->w; x++)
    d += GRN_POPC(GRN_ACT(v, i * pb->w + x) | GRN_REP(v, i * pb->w + x));
  return d;
}

/* Link from source j to target i: 1, -1 or 0. */
GRN_HD int grn_link_get(const sbg_grn_problem *pb, grn_view v, int i, int j) {
  int e = i * pb->w + (j >> 5);
  uint32_t bit = 1u << (j & 31);
  if (GRN_ACT(v, e) & bit) return 1;
  if (GRN_REP(v, e) & bit) return -1;
  return 0;
}

GRN_HD void grn_link_set(const sbg_grn_problem *pb, grn_view v, int i, int j, int value) {
  int e = i * pb->w + (j >> 5);
  uint32_t bit = 1u << (j & 31);
  GRN_ACT(v, e) = value == 1 ? (GRN_ACT(v, e) | bit) : (GRN_ACT(v, e) & ~bit);
  GRN_REP(v, e) = value == -1 ? (GRN_REP(v, e) | bit) : (GRN_REP(v, e) & ~bit);
}

GRN_HD void grn_copy(const sbg_grn_problem *pb, grn_view dst, grn_view src) {
  const int nw = pb->n * pb->w;
  for (int e = 0; e < nw; e++) {
    GRN_ACT(dst, e) = GRN_ACT(src, e);
    GRN_REP(dst, e) = GRN_REP(src, e);
  }
  for (int i = 0; i < pb->n; i++) GRN_RULE(dst, i) = GRN_RULE(src, i);
}

/* An initial individual from stream `subsequence`: the reference's links
 * put in uniformly random cells with their signs in random order (the same
 * distribution as shuffling all n^2 cells, as the paper does, in O(links)
 * draws: Floyd's sampling of the occupied cells), redrawn while a gene has
 * more than maxInDegree inputs; rules uniform among the allowed ones. */
GRN_HD void grn_init_individual(const sbg_grn_problem *pb, grn_view v, uint64_t seed,
                                uint64_t subsequence) {
  sbg_philox g;
  sbg_philox_init(&g, seed, subsequence, 0);
  const int n = pb->n, w = pb->w, nw = n * w;
  const uint32_t cells = (uint32_t)n * (uint32_t)n;
  const uint32_t links = (uint32_t)(pb->n_ref_act + pb->n_ref_rep);
  int ok = 0;
  for (int attempt = 0; attempt < GRN_INIT_TRIES && !ok; attempt++) {
    for (int e = 0; e < nw; e++) { GRN_ACT(v, e) = 0; GRN_REP(v, e) = 0; }
    uint32_t left_act = (uint32_t)pb->n_ref_act, left = links;
    for (uint32_t j = cells - links; j < cells; j++) {
      uint32_t c = sbg_philox_below(&g, j + 1);
      if (grn_link_get(pb, v, (int)(c / n), (int)(c % n)) != 0) c = j;
      int sign = sbg_philox_below(&g, left) < left_act ? 1 : -1;
      if (sign == 1) left_act--;
      left--;
      grn_link_set(pb, v, (int)(c / n), (int)(c % n), sign);
    }
    ok = 1;
    for (int i = 0; i < n && ok; i++) ok = grn_in_degree(pb, v, i) <= pb->max_in;
  }
  if (!ok)
    for (int e = 0; e < nw; e++) { GRN_ACT(v, e) = pb->ref_act[e]; GRN_REP(v, e) = pb->ref_rep[e]; }
  for (int i = 0; i < n; i++)
    GRN_RULE(v, i) = pb->allowed[sbg_philox_below(&g, (uint32_t)pb->n_allowed)];
}

/* One-point crossover at link cell c (row-major over target, source):
 * child 1 takes cells 0..c of p1 and the rest of p2, and the rules of genes
 * 0..c/n of p1 and the rest of p2; child 2 the other way round.  Only row
 * c/n mixes the parents, so only its in-degree can break maxInDegree; a
 * child that breaks it is replaced by a copy of its first parent. */
GRN_HD void grn_crossover(const sbg_grn_problem *pb, grn_view p1, grn_view p2, grn_view c1,
                          grn_view c2, uint32_t c) {
  const int n = pb->n, w = pb->w;
  const int row = (int)(c / (uint32_t)n), col = (int)(c % (uint32_t)n);
  for (int i = 0; i < n; i++) {
    grn_view a = i < row ? p1 : p2, b = i < row ? p2 : p1;
    for (int x = 0; x < w; x++) {
      int e = i * w + x;
      if (i == row) {
        /* columns 0..col come from the first parent */
        uint32_t m = x < (col >> 5) ? 0xFFFFFFFFu
                   : x > (col >> 5) ? 0u
                   : ((col & 31) == 31 ? 0xFFFFFFFFu : ((1u << ((col & 31) + 1)) - 1u));
        GRN_ACT(c1, e) = (GRN_ACT(p1, e) & m) | (GRN_ACT(p2, e) & ~m);
        GRN_REP(c1, e) = (GRN_REP(p1, e) & m) | (GRN_REP(p2, e) & ~m);
        GRN_ACT(c2, e) = (GRN_ACT(p2, e) & m) | (GRN_ACT(p1, e) & ~m);
        GRN_REP(c2, e) = (GRN_REP(p2, e) & m) | (GRN_REP(p1, e) & ~m);
      } else {
        GRN_ACT(c1, e) = GRN_ACT(a, e); GRN_REP(c1, e) = GRN_REP(a, e);
        GRN_ACT(c2, e) = GRN_ACT(b, e); GRN_REP(c2, e) = GRN_REP(b, e);
      }
    }
    GRN_RULE(c1, i) = i <= row ? GRN_RULE(p1, i) : GRN_RULE(p2, i);
    GRN_RULE(c2, i) = i <= row ? GRN_RULE(p2, i) : GRN_RULE(p1, i);
  }
  if (grn_in_degree(pb, c1, row) > pb->max_in) grn_copy(pb, c1, p1);
  if (grn_in_degree(pb, c2, row) > pb->max_in) grn_copy(pb, c2, p2);
}

/* Mutation of one individual: with probability p_link one random cell takes
 * one of its two other values (not when that gives its gene more than
 * maxInDegree inputs), with probability p_rule one random gene takes another
 * allowed rule.  The same draws are made whatever happens. */
GRN_HD void grn_mutate(const sbg_grn_problem *pb, double p_link, double p_rule, grn_view v,
                       sbg_philox *g) {
  const int n = pb->n;
  if (sbg_philox_unif(g) < p_link) {
    uint32_t c = sbg_philox_below(g, (uint32_t)n * (uint32_t)n);
    uint32_t d = sbg_philox_below(g, 2);
    int i = (int)(c / (uint32_t)n), j = (int)(c % (uint32_t)n);
    int cur = grn_link_get(pb, v, i, j);
    /* the other two of -1, 0, 1, in increasing order */
    int lo = cur == -1 ? 0 : -1, hi = cur == 1 ? 0 : 1;
    int nv = d == 0 ? lo : hi;
    if (!(cur == 0 && grn_in_degree(pb, v, i) >= pb->max_in)) grn_link_set(pb, v, i, j, nv);
  }
  if (sbg_philox_unif(g) < p_rule) {
    int i = (int)sbg_philox_below(g, (uint32_t)n);
    uint32_t d = sbg_philox_below(g, pb->n_allowed > 1 ? (uint32_t)(pb->n_allowed - 1) : 1u);
    if (pb->n_allowed > 1) {
      int cur = GRN_RULE(v, i), k = 0;
      for (int a = 0; a < pb->n_allowed; a++) {
        if (pb->allowed[a] == cur) continue;
        if ((uint32_t)k++ == d) { GRN_RULE(v, i) = pb->allowed[a]; break; }
      }
    }
  }
}

/* At least 1, so that an island's total weight is never 0 (scores above
 * 2^40 arise only for networks of over a thousand genes). */
GRN_HD uint64_t grn_weight(int64_t score) {
  uint64_t w = GRN_WEIGHT_ONE / (uint64_t)(score + 1);
  return w ? w : 1u;
}

/* Uniform integer in [0, total), total >= 1, by rejection on masked 64-bit
 * words (no bias, fewer than two tries on average). */
GRN_HD uint64_t grn_below64(sbg_philox *g, uint64_t total) {
  uint64_t mask = total - 1;
  mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4;
  mask |= mask >> 8; mask |= mask >> 16; mask |= mask >> 32;
  for (;;) {
    uint64_t hi = sbg_philox_next(g);
    uint64_t u = ((hi << 32) | sbg_philox_next(g)) & mask;
    if (u < total) return u;
  }
}

/* A roulette spin over one island: cum[0..size-1] are the inclusive sums of
 * the weights in sorted order; returns the sorted position drawn, with
 * probability proportional to its weight. */
GRN_HD int grn_spin(sbg_philox *g, const uint64_t *cum, int size) {
  uint64_t u = grn_below64(g, cum[size - 1]);
  int lo = 0, hi = size - 1; /* smallest position with cum > u */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (cum[mid] > u) hi = mid; else lo = mid + 1;
  }
  return lo;
}

/* The subsequence of individual (or child slot) k at generation `gen`
 * (0: the initial population): one stream per (seed, generation, island,
 * individual), k = island * islandSize + slot. */
GRN_HD uint64_t grn_stream(int64_t gen, int64_t pop, int64_t k) {
  return (uint64_t)gen * (uint64_t)pop + (uint64_t)k;
}

/* Breeding of pair m (0 .. size/2 - 1) of island `isl` at generation `gen`:
 * pair 0 copies the island's two best (the elite) into slots 0 and 1; pair
 * m >= 1 fills slots 2m and 2m+1 with the children of sorted positions
 * 2m-2 and 2m-1 (elitist) or of two roulette spins, then mutates them.
 * `ord` holds, per island, the global indices of the individuals from best
 * to worst; `cum` the island's cumulative roulette weights (roulette only).
 * The pair's draws come from the stream of slot 2m, child 2's mutation from
 * that of slot 2m+1.  `isl`, `src`, `dst`, `ord` and `cum` are those of a
 * block of islands (grnEvolve over several devices or workers); `koff` is
 * the global index of the block's first individual, so that the streams,
 * and thus the run, do not depend on how the islands are split. */
GRN_HD void grn_breed_pair(const sbg_grn_problem *pb, const sbg_grn_params *gp,
                           const grn_pop *src, const grn_pop *dst, const int32_t *ord,
                           const uint64_t *cum, int isl, int m, int64_t gen, int64_t koff) {
  const int n = pb->n, w = pb->w;
  const int size = (int)(gp->pop / gp->islands);
  const int64_t base = (int64_t)isl * size;
  const int64_t k1 = base + 2 * m, k2 = k1 + 1;
  grn_view c1 = grn_view_at(dst, n, w, k1), c2 = grn_view_at(dst, n, w, k2);
  if (m == 0) {
    grn_copy(pb, c1, grn_view_at(src, n, w, ord[base]));
    grn_copy(pb, c2, grn_view_at(src, n, w, ord[base + 1]));
    return;
  }
  sbg_philox g1, g2;
  sbg_philox_init(&g1, gp->seed, grn_stream(gen, gp->pop, koff + k1), 0);
  sbg_philox_init(&g2, gp->seed, grn_stream(gen, gp->pop, koff + k2), 0);
  int a, b;
  if (gp->roulette) {
    a = grn_spin(&g1, cum + base, size);
    b = grn_spin(&g1, cum + base, size);
  } else {
    a = 2 * m - 2;
    b = 2 * m - 1;
  }
  grn_view p1 = grn_view_at(src, n, w, ord[base + a]);
  grn_view p2 = grn_view_at(src, n, w, ord[base + b]);
  uint32_t cut = sbg_philox_below(&g1, (uint32_t)n * (uint32_t)n);
  grn_crossover(pb, p1, p2, c1, c2, cut);
  grn_mutate(pb, gp->p_link, gp->p_rule, c1, &g1);
  grn_mutate(pb, gp->p_link, gp->p_rule, c2, &g2);
}

#endif /* SBG_GRN_MODEL_H */
