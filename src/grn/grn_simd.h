/* The CPU engine's evaluation paths (grn_cpu.c chooses one, grn_cpu_simd.c
 * holds the vectorised ones).  All give the same scores; a request for a
 * path the CPU lacks falls back to the best one below it. */
#ifndef SBG_GRN_SIMD_H
#define SBG_GRN_SIMD_H

#include <stdint.h>

#include "grn.h"
#include "grn_model.h"

enum {
  GRN_EVAL_AUTO = 0,   /* the fastest the CPU has */
  GRN_EVAL_PLAIN = 1,  /* portable C, any network */
  GRN_EVAL_POPCNT = 2, /* the same compiled for the popcnt instruction */
  GRN_EVAL_AVX2 = 3,   /* networks of up to 32 genes */
  GRN_EVAL_AVX512 = 4  /* networks of up to 32 genes, AVX-512 VPOPCNTDQ */
};

/* Whether this CPU runs the vectorised path (GRN_EVAL_AVX2, _AVX512). */
int grn_simd_supported(int path);
void grn_eval_range_avx2(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0, int64_t k1,
                         int64_t *score, int *dn, int *dl);
void grn_eval_range_avx512(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0, int64_t k1,
                           int64_t *score, int *dn, int *dl);

#endif /* SBG_GRN_SIMD_H */
