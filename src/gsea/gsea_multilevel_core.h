/* The arithmetic of one member of a multilevel sample (gsea_multilevel.c)
 * that the CPU engine and the GPU engine (gsea_multilevel_gpu.cu) share, so
 * that both give the same bits: the plain random sets of a size, the score
 * ES+, the blocks of rank positions a member's weight is summed in, and
 * the test of a proposed swap.  The
 * search for the new member's place and the shift of the members around it
 * are integer work each engine does its own way (memmove on the CPU, the
 * lanes of a warp on the GPU). */
#ifndef SBG_GSEA_MULTILEVEL_CORE_H
#define SBG_GSEA_MULTILEVEL_CORE_H

#include <math.h>
#include <stdint.h>

#include "gsea_math.h"
#include "philox.h"

#define ML_MIN_SWAPS 25 /* kept swaps per set and level, at least (small sets) */
#define ML_CAP 1000     /* proposals per kept swap wanted, at most (thin level sets) */

/* One member of a ruler's sample: its k positions, ascending, and what the
 * swap test keeps of them. */
typedef struct ml_member {
  int32_t *pos;
  int32_t *cnt;     /* nb: members per block of rank positions */
  double *bsum;     /* nb: their weight per block */
  double *nr;       /* the member's whole weight */
  int32_t *cand;    /* a position where ES+ reached the level (-1: none), */
  int32_t *cand_h;  /* hits up to it */
  double *cand_c;   /* and the weight up to it */
} ml_member;

/* What every member of a ruler shares at a level. */
typedef struct ml_frame {
  int32_t k, nb, G;
  const int32_t *bnd; /* nb block ends (the last is G) */
  const double *w;    /* weight by position in the ruler's tail's frame */
  double q1;          /* 1 / (G - k) */
  double level;
} ml_frame;

/* Blocks of rank positions of a ruler of size k: about sqrt(k), of about
 * sqrt(k) members each. */
GSEA_HD int32_t ml_n_blocks(int32_t k) {
  int32_t nb = (int32_t)sqrt((double)k);
  return nb < 1 ? 1 : nb;
}

/* The moves of a level: kept swaps wanted in all (`target`), proposals at
 * most (`cap`) and proposals per member and round (`per`). */
GSEA_HD void ml_budget(int32_t k, int32_t n, int32_t moves, int64_t *target, int64_t *cap, int32_t *per) {
  int64_t per_set = (int64_t)k * moves;
  if (per_set < ML_MIN_SWAPS) per_set = ML_MIN_SWAPS;
  *target = (int64_t)n * per_set;
  *cap = ML_CAP * *target;
  *per = k / 10 > 1 ? k / 10 : 1;
}

/* ES+ of the set at ascending positions pos[0..k): the largest running
 * sum, with gsea_es_hit's arithmetic (0 when it never rises above 0). */
GSEA_HD double ml_es_plus(const int32_t *pos, int32_t k, const double *w, int32_t G) {
  double nr = 0;
  for (int32_t i = 0; i < k; i++) nr = G_ADD(nr, w[pos[i]]);
  int unit = nr == 0; /* all weights 0: unit weights, as the sweep does */
  double inv_nr = G_DIV(1.0, unit ? (double)k : nr), inv_nmiss = G_DIV(1.0, G_SUB((double)G, (double)k));
  double cum = 0, best = 0;
  for (int32_t i = 0; i < k; i++) {
    double miss = G_MUL((double)(pos[i] - i), inv_nmiss);
    cum = G_ADD(cum, unit ? 1.0 : w[pos[i]]);
    double top = G_SUB(G_MUL(cum, inv_nr), miss);
    if (top > best) best = top;
  }
  return best;
}

/* Broad's signed ES (gsea_es_hit, the engines' rule). */
GSEA_HD double ml_es_signed(const int32_t *pos, int32_t k, const double *w, int32_t G) {
  double nr = 0;
  for (int32_t i = 0; i < k; i++) nr = G_ADD(nr, w[pos[i]]);
  int unit = nr == 0;
  double inv_nr = G_DIV(1.0, unit ? (double)k : nr), inv_nmiss = G_DIV(1.0, G_SUB((double)G, (double)k));
  gsea_es_state s;
  gsea_es_init(&s);
  for (int32_t i = 0; i < k; i++) gsea_es_hit(&s, pos[i], unit ? 1.0 : w[pos[i]], inv_nr, inv_nmiss);
  return s.best;
}

GSEA_HD int32_t ml_ctz64(uint64_t v) {
#ifdef __CUDA_ARCH__
  return __ffsll((long long)v) - 1;
#else
  return __builtin_ctzll(v);
#endif
}

/* A uniform random k-subset of [0, G) in ascending order (Floyd's
 * algorithm: k draws, then the bit set read in order; bits is all zero on
 * entry and on return). */
GSEA_HD void ml_draw_set(sbg_philox *r, int32_t G, int32_t k, uint64_t *bits, int32_t *out) {
  for (int32_t j = G - k; j < G; j++) {
    int32_t t = (int32_t)sbg_philox_below(r, (uint32_t)j + 1u);
    if (bits[t >> 6] >> (t & 63) & 1u) t = j;
    bits[t >> 6] |= (uint64_t)1 << (t & 63);
  }
  int32_t n = 0;
  for (int32_t i = 0; i < (G + 63) / 64; i++) {
    uint64_t v = bits[i];
    while (v) {
      out[n++] = i * 64 + ml_ctz64(v);
      v &= v - 1;
    }
    bits[i] = 0;
  }
}

/* The N plain random sets of size k from the stream r, for the tails that
 * want them (plain[d] not NULL; d = 1: the mirrored list): each set's ES+
 * in the tail's frame (plain[d][i]) and the count of the sets of the
 * tail's sign (m[d]).  A set of the other sign gets -infinity: p is
 * conditioned on the sign, and the ES+ of a set whose ES is of the other
 * sign can still pass a small ES (counting it would give b > m, hence
 * p = 1).  Both tails score the same sets.  bits: G bits, all zero; set,
 * mirror: k each. */
GSEA_HD void ml_plain_sets(sbg_philox *r, int32_t G, int32_t k, int32_t N, const double *w0, const double *w1,
                           uint64_t *bits, int32_t *set, int32_t *mirror, double *const *plain, int32_t *m) {
  m[0] = m[1] = 0;
  for (int32_t i = 0; i < N; i++) {
    ml_draw_set(r, G, k, bits, set);
    double es = ml_es_signed(set, k, w0, G);
    m[0] += es >= 0;
    m[1] += es <= 0;
    if (plain[0]) plain[0][i] = es >= 0 ? ml_es_plus(set, k, w0, G) : -INFINITY;
    if (plain[1]) { /* the same set on the reversed list */
      for (int32_t j = 0; j < k; j++) mirror[j] = G - 1 - set[k - 1 - j];
      plain[1][i] = es <= 0 ? ml_es_plus(mirror, k, w1, G) : -INFINITY;
    }
  }
}

/* Block of position x: the first j with x < bnd[j]. */
GSEA_HD int32_t ml_block_of(const int32_t *bnd, int32_t nb, int32_t x) {
  int32_t lo = 0, hi = nb - 1;
  while (lo < hi) {
    int32_t mid = (lo + hi) / 2;
    if (x < bnd[mid]) hi = mid; else lo = mid + 1;
  }
  return lo;
}

/* A member's counts and weights per block, and its whole weight. */
GSEA_HD void ml_member_blocks(const ml_frame *f, ml_member m) {
  for (int32_t j = 0; j < f->nb; j++) {
    m.cnt[j] = 0;
    m.bsum[j] = 0;
  }
  double nr = 0;
  for (int32_t i = 0, j = 0; i < f->k; i++) {
    while (m.pos[i] >= f->bnd[j]) j++;
    m.cnt[j]++;
    m.bsum[j] = G_ADD(m.bsum[j], f->w[m.pos[i]]);
    nr = G_ADD(nr, f->w[m.pos[i]]);
  }
  *m.nr = nr;
  *m.cand = -1;
}

/* Whether ES+ of the member reaches the level, from its block sums: a
 * block whose whole weight, counted at its start, cannot reach the level
 * is skipped.  On success remembers where the level was reached. */
GSEA_HD int ml_reaches(const ml_frame *f, ml_member m, double q2) {
  double C = 0, q1 = f->q1, level = f->level;
  int32_t h = 0, lo = 0;
  for (int32_t j = 0; j < f->nb; j++) {
    if (G_SUB(G_MUL(G_ADD(C, m.bsum[j]), q2), G_MUL((double)(lo - h), q1)) < G_SUB(level, 1e-12)) {
      C = G_ADD(C, m.bsum[j]);
      h += m.cnt[j];
    } else {
      for (int32_t end = h + m.cnt[j]; h < end;) {
        int32_t r = m.pos[h];
        double miss = G_MUL((double)(r - h), q1);
        C = G_ADD(C, f->w[r]);
        h++;
        if (G_SUB(G_MUL(C, q2), miss) >= level) {
          *m.cand = r;
          *m.cand_c = C;
          *m.cand_h = h;
          return 1;
        }
      }
    }
    lo = f->bnd[j];
  }
  return 0;
}

/* The test of a proposed swap, with the member's positions already
 * holding b in place of a: updates the block counts and weights and
 * returns whether ES+ stays at or beyond the level.  On a refusal the
 * blocks are as before and the caller puts a back. */
GSEA_HD int ml_accept(const ml_frame *f, ml_member m, int32_t a, int32_t b) {
  int32_t ja = ml_block_of(f->bnd, f->nb, a), jb = ml_block_of(f->bnd, f->nb, b);
  double wa = f->w[a], wb = f->w[b], sa = m.bsum[ja], sb = m.bsum[jb], nr0 = *m.nr;
  m.cnt[ja]--;
  m.cnt[jb]++;
  m.bsum[ja] = G_SUB(m.bsum[ja], wa);
  m.bsum[jb] = G_ADD(m.bsum[jb], wb);
  *m.nr = G_ADD(G_SUB(nr0, wa), wb);
  int ok = 0;
  if (*m.nr > 0) {
    double q2 = G_DIV(1.0, *m.nr);
    int32_t c = *m.cand;
    if (c >= 0 && c != a) { /* the last crossing point often still crosses */
      double C = G_SUB(G_ADD(*m.cand_c, b < c ? wb : 0), a < c ? wa : 0);
      int32_t H = *m.cand_h + (b < c) - (a < c);
      if (G_SUB(G_MUL(C, q2), G_MUL((double)(c + 1 - H), f->q1)) >= f->level) {
        ok = 1;
        *m.cand_c = C;
        *m.cand_h = H;
      }
    }
    if (!ok) ok = ml_reaches(f, m, q2);
  } else {
    ok = ml_es_plus(m.pos, f->k, f->w, f->G) >= f->level; /* unit weights: rare, slow path */
    *m.cand = -1;
  }
  if (ok) return 1;
  m.cnt[ja]++;
  m.cnt[jb]--;
  m.bsum[ja] = sa;
  m.bsum[jb] = sb;
  *m.nr = nr0;
  return 0;
}

#endif /* SBG_GSEA_MULTILEVEL_CORE_H */
