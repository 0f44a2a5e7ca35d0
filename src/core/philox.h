/* Philox4x32-10 counter-based generator (Salmon et al., SC'11), shared by
 * the C and CUDA engines of every method.  The stream of one
 * (seed, subsequence, offset) is bit-identical to cuRAND's
 * curandStatePhilox4_32_10_t after curand_init(seed, subsequence, offset)
 * followed by curand() calls; tests/testthat/test-philox.R checks this. */
#ifndef SBG_PHILOX_H
#define SBG_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define SBG_HD __host__ __device__ __forceinline__
#else
#define SBG_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbg_u32x4 {
  uint32_t v[4];
} sbg_u32x4;

/* The bijection itself: 10 rounds on a 128-bit counter under a 64-bit key. */
SBG_HD sbg_u32x4 sbg_philox4x32_10(sbg_u32x4 ctr, uint32_t k0, uint32_t k1) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  const uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)M0 * ctr.v[0];
    uint64_t p1 = (uint64_t)M1 * ctr.v[2];
    sbg_u32x4 next;
    next.v[0] = (uint32_t)(p1 >> 32) ^ ctr.v[1] ^ k0;
    next.v[1] = (uint32_t)p1;
    next.v[2] = (uint32_t)(p0 >> 32) ^ ctr.v[3] ^ k1;
    next.v[3] = (uint32_t)p0;
    ctr = next;
    k0 += W0;
    k1 += W1;
  }
  return ctr;
}

/* A position in the stream of one (seed, subsequence): the counter's low
 * 64 bits count 4-word blocks, its high 64 bits hold the subsequence, as in
 * cuRAND, so subsequences never overlap (each has 2^66 words). */
typedef struct sbg_philox {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t out[4]; /* the current block's output */
  uint32_t lane;   /* next word of out[] to hand out, 0..3 */
} sbg_philox;

SBG_HD void sbg_philox_refill(sbg_philox *s) {
  sbg_u32x4 c;
  c.v[0] = s->ctr[0]; c.v[1] = s->ctr[1]; c.v[2] = s->ctr[2]; c.v[3] = s->ctr[3];
  sbg_u32x4 o = sbg_philox4x32_10(c, s->key[0], s->key[1]);
  s->out[0] = o.v[0]; s->out[1] = o.v[1]; s->out[2] = o.v[2]; s->out[3] = o.v[3];
}

SBG_HD void sbg_philox_init(sbg_philox *s, uint64_t seed, uint64_t subsequence,
                            uint64_t offset) {
  uint64_t block = offset >> 2;
  s->key[0] = (uint32_t)seed;
  s->key[1] = (uint32_t)(seed >> 32);
  s->ctr[0] = (uint32_t)block;
  s->ctr[1] = (uint32_t)(block >> 32);
  s->ctr[2] = (uint32_t)subsequence;
  s->ctr[3] = (uint32_t)(subsequence >> 32);
  s->lane = (uint32_t)(offset & 3u);
  sbg_philox_refill(s);
}

/* Next 32-bit word.  The block counter wraps within the low 64 bits only,
 * which keeps subsequences disjoint (cuRAND would carry into the
 * subsequence after 2^66 words; no run comes near that). */
SBG_HD uint32_t sbg_philox_next(sbg_philox *s) {
  /* A select rather than out[lane]: a dynamic index would push the state
   * into local memory on the GPU. */
  uint32_t r = s->lane == 0 ? s->out[0]
             : s->lane == 1 ? s->out[1]
             : s->lane == 2 ? s->out[2] : s->out[3];
  if (++s->lane == 4) {
    s->lane = 0;
    if (++s->ctr[0] == 0) ++s->ctr[1];
    sbg_philox_refill(s);
  }
  return r;
}

/* Uniform double in the open interval (0, 1) from 53 random bits (two
 * words); never returns 0 or 1, so log(u) is always finite. */
SBG_HD double sbg_philox_unif(sbg_philox *s) {
  uint32_t a = sbg_philox_next(s) >> 5; /* 27 bits */
  uint32_t b = sbg_philox_next(s) >> 6; /* 26 bits */
  return ((double)a * 67108864.0 + (double)b + 0.5) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n) without modulo bias (Lemire 2019: multiply,
 * then reject the few low products that would over-represent some values).
 * n = 0 returns 0. */
SBG_HD uint32_t sbg_philox_below(sbg_philox *s, uint32_t n) {
  if (n == 0) return 0;
  uint64_t m = (uint64_t)sbg_philox_next(s) * n;
  uint32_t low = (uint32_t)m;
  if (low < n) {
    uint32_t threshold = (uint32_t)(0u - n) % n; /* 2^32 mod n */
    while (low < threshold) {
      m = (uint64_t)sbg_philox_next(s) * n;
      low = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}

/* Fisher-Yates (Durstenfeld) shuffle of v[0..n-1] in place, n < 2^32:
 * for i = n-1 down to 1, swap v[i] with v[j], j uniform in [0, i]. */
SBG_HD void sbg_philox_shuffle(sbg_philox *s, int32_t *v, uint32_t n) {
  for (uint32_t i = n; i > 1; i--) {
    uint32_t j = sbg_philox_below(s, i);
    int32_t t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

#ifdef __cplusplus
}
#endif

#endif /* SBG_PHILOX_H */
