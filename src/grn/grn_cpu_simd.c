/* Vectorised CPU evaluation of networks of up to 32 genes (grnEvolve(),
 * through eval_all in grn_cpu.c): the genes of one individual in SIMD
 * lanes, compiled for AVX-512 (VPOPCNTDQ) and AVX2 and chosen at run time.
 * The results are those of grn_evaluate() in grn_model.h, bit for bit. */
#include <stdint.h>
#include <string.h>

#include "grn.h"
#include "grn_model.h"
#include "grn_simd.h"

/* The rules over a whole state at once.  With 32-bit masks over the genes
 * (bit i = gene i): gt (a > r), eq (a == r), rz (r == 0), a2 (a >= 2), r2
 * (r >= 2), the current state s and the genes under each rule (mM, mA, mJ,
 * mR), the next state is a few logical operations; genes past n are under
 * no rule and stay 0, as in the scalar code. */
#define GRN_NEXT_STATE(s, gt, eq, rz, a2, r2, mM, mA, mJ, mR) \
  (((mM) & ((gt) | ((eq) & (s)))) | ((mA) & (rz) & (s)) | ((mJ) & ((a2) | (s))) | \
   ((mR) & ~(r2) & (s)))

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

int grn_simd_supported(int path) {
  __builtin_cpu_init();
  switch (path) {
  case GRN_EVAL_AVX2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  case GRN_EVAL_AVX512:
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vpopcntdq") &&
           __builtin_cpu_supports("popcnt");
  default:
    return 0;
  }
}

/* AVX-512: genes 0-15 and 16-31 in two vectors of 32-bit lanes, counted
 * by VPOPCNTD.  The four rules become one test on x = a' - r', where a'
 * counts the activators only under MOST and JACT and r' the repressors
 * only under MOST, ABS and JREP (the masks are cleared once per
 * individual): the gene turns on if x >= on_t (MOST 1, JACT 2; ABS and JREP
 * have x <= 0, so 1 never fires), off if x <= off_t (MOST, ABS -1; JREP -2;
 * JACT has x >= 0, so -1 never fires), else keeps its value.  Two
 * comparisons per vector go straight into mask registers, which are the
 * 32-bit gene masks.  Loads are masked to the n genes, so no word past an
 * individual (or the population) is read; genes past n have no inputs and
 * stay 0.  Two individuals go through the steps together, for
 * instruction-level parallelism across their dependency chains. */
#define GRN_AVX512_SETUP(j, k)                                                       \
  const uint32_t *act##j = pop->act + (k) * n, *rep##j = pop->rep + (k) * n;         \
  const __m512i a0##j = _mm512_maskz_loadu_epi32(m0, act##j);                        \
  const __m512i a1##j = _mm512_maskz_loadu_epi32(m1, act##j + 16);                   \
  const __m512i r0##j = _mm512_maskz_loadu_epi32(m0, rep##j);                        \
  const __m512i r1##j = _mm512_maskz_loadu_epi32(m1, rep##j + 16);                   \
  const __m256i ru##j = _mm256_maskz_loadu_epi8((__mmask32)genes, pop->rule + (k) * n); \
  /* a' under MOST (0) and JACT (2): code & 1 == 0; r' unless JACT */                \
  const uint32_t ka##j = (uint32_t)_mm256_testn_epi8_mask(ru##j, c1);                \
  const uint32_t kj##j = (uint32_t)_mm256_cmpeq_epi8_mask(ru##j, c2);                \
  const uint32_t kr##j = ~kj##j, k3##j = (uint32_t)_mm256_cmpeq_epi8_mask(ru##j, c3); \
  const __m512i e0##j = _mm512_maskz_mov_epi32((__mmask16)ka##j, a0##j);             \
  const __m512i e1##j = _mm512_maskz_mov_epi32((__mmask16)(ka##j >> 16), a1##j);     \
  const __m512i f0##j = _mm512_maskz_mov_epi32((__mmask16)kr##j, r0##j);             \
  const __m512i f1##j = _mm512_maskz_mov_epi32((__mmask16)(kr##j >> 16), r1##j);     \
  const __m512i on0##j = _mm512_mask_mov_epi32(one, (__mmask16)kj##j, two);          \
  const __m512i on1##j = _mm512_mask_mov_epi32(one, (__mmask16)(kj##j >> 16), two);  \
  const __m512i off0##j = _mm512_mask_mov_epi32(mone, (__mmask16)k3##j, mtwo);       \
  const __m512i off1##j = _mm512_mask_mov_epi32(mone, (__mmask16)(k3##j >> 16), mtwo); \
  uint32_t s##j = from;

#define GRN_AVX512_STEP(j)                                                           \
  {                                                                                  \
    const __m512i sv = _mm512_set1_epi32((int)s##j);                                 \
    const __m512i x0 = _mm512_sub_epi32(_mm512_popcnt_epi32(_mm512_and_si512(e0##j, sv)), \
                                        _mm512_popcnt_epi32(_mm512_and_si512(f0##j, sv))); \
    const __m512i x1 = _mm512_sub_epi32(_mm512_popcnt_epi32(_mm512_and_si512(e1##j, sv)), \
                                        _mm512_popcnt_epi32(_mm512_and_si512(f1##j, sv))); \
    const uint32_t on = (uint32_t)_mm512_cmpge_epi32_mask(x0, on0##j) |              \
                        ((uint32_t)_mm512_cmpge_epi32_mask(x1, on1##j) << 16);       \
    const uint32_t off = (uint32_t)_mm512_cmple_epi32_mask(x0, off0##j) |            \
                         ((uint32_t)_mm512_cmple_epi32_mask(x1, off1##j) << 16);     \
    s##j = on | (s##j & ~off);                                                       \
  }

#define GRN_AVX512_FINISH(j, k)                                                      \
  {                                                                                  \
    const __m512i x0 = _mm512_or_si512(_mm512_xor_si512(a0##j, ra0), _mm512_xor_si512(r0##j, rr0)); \
    const __m512i x1 = _mm512_or_si512(_mm512_xor_si512(a1##j, ra1), _mm512_xor_si512(r1##j, rr1)); \
    const int d_l = _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_popcnt_epi32(x0), \
                                                             _mm512_popcnt_epi32(x1))); \
    const int d_n = __builtin_popcount(s##j ^ to);                                   \
    score[k] = wn * d_n + wl * d_l;                                                  \
    if (dn) dn[k] = d_n;                                                             \
    if (dl) dl[k] = d_l;                                                             \
  }

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vpopcntdq,popcnt")))
void grn_eval_range_avx512(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0, int64_t k1,
                           int64_t *score, int *dn, int *dl) {
  const int n = pb->n, steps = pb->steps;
  const uint32_t genes = n == 32 ? 0xFFFFFFFFu : ((1u << n) - 1u);
  const __mmask16 m0 = (__mmask16)(genes & 0xFFFFu), m1 = (__mmask16)(genes >> 16);
  const __m512i ra0 = _mm512_maskz_loadu_epi32(m0, pb->ref_act);
  const __m512i ra1 = _mm512_maskz_loadu_epi32(m1, pb->ref_act + 16);
  const __m512i rr0 = _mm512_maskz_loadu_epi32(m0, pb->ref_rep);
  const __m512i rr1 = _mm512_maskz_loadu_epi32(m1, pb->ref_rep + 16);
  const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2);
  const __m512i mone = _mm512_set1_epi32(-1), mtwo = _mm512_set1_epi32(-2);
  const __m256i c1 = _mm256_set1_epi8(1), c2 = _mm256_set1_epi8(2), c3 = _mm256_set1_epi8(3);
  const uint32_t from = pb->from[0], to = pb->to[0];
  const int64_t wn = pb->wn, wl = pb->wl;
  int64_t k = k0;
  for (; k + 3 < k1; k += 4) {
    GRN_AVX512_SETUP(A, k)
    GRN_AVX512_SETUP(B, k + 1)
    GRN_AVX512_SETUP(C, k + 2)
    GRN_AVX512_SETUP(D, k + 3)
    for (int step = 0; step < steps; step++) {
      GRN_AVX512_STEP(A)
      GRN_AVX512_STEP(B)
      GRN_AVX512_STEP(C)
      GRN_AVX512_STEP(D)
    }
    GRN_AVX512_FINISH(A, k)
    GRN_AVX512_FINISH(B, k + 1)
    GRN_AVX512_FINISH(C, k + 2)
    GRN_AVX512_FINISH(D, k + 3)
  }
  for (; k < k1; k++) {
    GRN_AVX512_SETUP(A, k)
    for (int step = 0; step < steps; step++) GRN_AVX512_STEP(A)
    GRN_AVX512_FINISH(A, k)
  }
}

/* AVX2 has no per-lane popcount: bytes are counted by a nibble table
 * (VPSHUFB), the byte differences a' - r' (as for AVX-512) summed to 32-bit
 * lanes, and the four vectors of 8 genes packed into one vector of 32 byte
 * values x, compared bytewise with the thresholds; MOVMSKB gives the 32-bit
 * gene masks.  The packs interleave 128-bit halves, which a permutation
 * puts back into gene order. */
__attribute__((target("avx2,popcnt")))
static inline __m256i grn_avx2_count_bytes(__m256i x, __m256i nib, __m256i low4) {
  const __m256i lo = _mm256_and_si256(x, low4);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
  return _mm256_add_epi8(_mm256_shuffle_epi8(nib, lo), _mm256_shuffle_epi8(nib, hi));
}

/* 32-bit lanes set where bit q*8 + lane of `bits` is set (genes 8q..8q+7) */
__attribute__((target("avx2,popcnt")))
static inline __m256i grn_avx2_lanes(uint32_t bits, int q, __m256i lanebit) {
  const __m256i b = _mm256_and_si256(_mm256_set1_epi32((int)(bits >> (8 * q))), lanebit);
  return _mm256_cmpeq_epi32(b, lanebit);
}

#define GRN_AVX2_SETUP(j, k)                                                          \
  const uint32_t *act##j = pop->act + (k) * n, *rep##j = pop->rep + (k) * n;          \
  __m256i e##j[4], f##j[4], ru##j;                                                    \
  if (n == 32) {                                                                      \
    ru##j = _mm256_loadu_si256((const __m256i *)(pop->rule + (k) * n));               \
  } else {                                                                            \
    uint8_t buf[32] = {0};                                                            \
    memcpy(buf, pop->rule + (k) * n, (size_t)n);                                      \
    ru##j = _mm256_loadu_si256((const __m256i *)buf);                                 \
  }                                                                                   \
  const __m256i kjv##j = _mm256_cmpeq_epi8(ru##j, c2), k3v##j = _mm256_cmpeq_epi8(ru##j, c3); \
  /* a' under MOST (0) and JACT (2): code & 1 == 0; r' unless JACT */                 \
  const uint32_t ka##j = (uint32_t)_mm256_movemask_epi8(                              \
      _mm256_cmpeq_epi8(_mm256_and_si256(ru##j, c1), zero)) & genes;                  \
  const uint32_t kj##j = (uint32_t)_mm256_movemask_epi8(kjv##j);                      \
  for (int q = 0; q < 4; q++) {                                                       \
    const __m256i a = _mm256_maskload_epi32((const int *)(act##j + 8 * q), lm[q]);    \
    const __m256i r = _mm256_maskload_epi32((const int *)(rep##j + 8 * q), lm[q]);    \
    e##j[q] = _mm256_and_si256(a, grn_avx2_lanes(ka##j, q, lanebit));                 \
    f##j[q] = _mm256_andnot_si256(grn_avx2_lanes(kj##j, q, lanebit), r);              \
  }                                                                                   \
  /* on: x > on_t - 1 (1 under JACT, else 0); off: off_t + 1 > x (-1 under JREP) */  \
  const __m256i onm##j = _mm256_and_si256(kjv##j, c1), offp##j = k3v##j;             \
  uint32_t s##j = from;

#define GRN_AVX2_STEP(j)                                                              \
  {                                                                                   \
    const __m256i sv = _mm256_set1_epi32((int)s##j);                                  \
    __m256i x[4];                                                                     \
    for (int q = 0; q < 4; q++) {                                                     \
      const __m256i d = _mm256_sub_epi8(                                              \
          grn_avx2_count_bytes(_mm256_and_si256(e##j[q], sv), nib, low4),             \
          grn_avx2_count_bytes(_mm256_and_si256(f##j[q], sv), nib, low4));            \
      x[q] = _mm256_madd_epi16(_mm256_maddubs_epi16(c1, d), ones16);                  \
    }                                                                                 \
    const __m256i xb = _mm256_permutevar8x32_epi32(                                   \
        _mm256_packs_epi16(_mm256_packs_epi32(x[0], x[1]), _mm256_packs_epi32(x[2], x[3])), order); \
    const uint32_t on = (uint32_t)_mm256_movemask_epi8(_mm256_cmpgt_epi8(xb, onm##j)); \
    const uint32_t off = (uint32_t)_mm256_movemask_epi8(_mm256_cmpgt_epi8(offp##j, xb)); \
    s##j = on | (s##j & ~off);                                                        \
  }

#define GRN_AVX2_FINISH(j, k)                                                         \
  {                                                                                   \
    __m256i acc = zero;                                                               \
    for (int q = 0; q < 4; q++) {                                                     \
      const __m256i a = _mm256_maskload_epi32((const int *)(act##j + 8 * q), lm[q]);  \
      const __m256i r = _mm256_maskload_epi32((const int *)(rep##j + 8 * q), lm[q]);  \
      const __m256i x = _mm256_or_si256(_mm256_xor_si256(a, ra[q]), _mm256_xor_si256(r, rr[q])); \
      acc = _mm256_add_epi64(acc, _mm256_sad_epu8(grn_avx2_count_bytes(x, nib, low4), zero)); \
    }                                                                                 \
    const int d_l = (int)(_mm256_extract_epi64(acc, 0) + _mm256_extract_epi64(acc, 1) + \
                          _mm256_extract_epi64(acc, 2) + _mm256_extract_epi64(acc, 3)); \
    const int d_n = __builtin_popcount(s##j ^ to);                                    \
    score[k] = wn * d_n + wl * d_l;                                                   \
    if (dn) dn[k] = d_n;                                                              \
    if (dl) dl[k] = d_l;                                                              \
  }

__attribute__((target("avx2,popcnt")))
void grn_eval_range_avx2(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0, int64_t k1,
                         int64_t *score, int *dn, int *dl) {
  const int n = pb->n, steps = pb->steps;
  const uint32_t genes = n == 32 ? 0xFFFFFFFFu : ((1u << n) - 1u);
  const __m256i lanebit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256i lm[4], ra[4], rr[4]; /* lane j of vector q is gene 8q + j */
  for (int q = 0; q < 4; q++) {
    lm[q] = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * q), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    ra[q] = _mm256_maskload_epi32((const int *)(pb->ref_act + 8 * q), lm[q]);
    rr[q] = _mm256_maskload_epi32((const int *)(pb->ref_rep + 8 * q), lm[q]);
  }
  const __m256i nib = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
                                       0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i c1 = _mm256_set1_epi8(1), c2 = _mm256_set1_epi8(2), c3 = _mm256_set1_epi8(3);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const uint32_t from = pb->from[0], to = pb->to[0];
  const int64_t wn = pb->wn, wl = pb->wl;
  int64_t k = k0;
  for (; k + 1 < k1; k += 2) {
    GRN_AVX2_SETUP(A, k)
    GRN_AVX2_SETUP(B, k + 1)
    for (int step = 0; step < steps; step++) {
      GRN_AVX2_STEP(A)
      GRN_AVX2_STEP(B)
    }
    GRN_AVX2_FINISH(A, k)
    GRN_AVX2_FINISH(B, k + 1)
  }
  for (; k < k1; k++) {
    GRN_AVX2_SETUP(A, k)
    for (int step = 0; step < steps; step++) GRN_AVX2_STEP(A)
    GRN_AVX2_FINISH(A, k)
  }
}

#else /* not x86-64 with GCC or clang: the scalar code only */

int grn_simd_supported(int path) {
  (void)path;
  return 0;
}

void grn_eval_range_avx512(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0, int64_t k1,
                           int64_t *score, int *dn, int *dl) {
  (void)pb; (void)pop; (void)k0; (void)k1; (void)score; (void)dn; (void)dl;
}

void grn_eval_range_avx2(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0, int64_t k1,
                         int64_t *score, int *dn, int *dl) {
  (void)pb; (void)pop; (void)k0; (void)k1; (void)score; (void)dn; (void)dl;
}

#endif
