/* Small engines that exercise the shared machinery on both backends: the
 * Philox streams and what is derived from them, and a long busy run for the
 * interrupt and memory tests.  Reached from philoxDraws(), philoxShuffle()
 * and the package's tests. */
#ifndef SBG_SELFTEST_H
#define SBG_SELFTEST_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sbg_rng_kind {
  SBG_RNG_U32 = 0,       /* raw 32-bit words */
  SBG_RNG_UNIF = 1,      /* doubles in (0, 1) */
  SBG_RNG_BELOW = 2,     /* integers in [0, bound) */
  SBG_RNG_SHUFFLE = 3,   /* a permutation of 0..n_per_stream-1 */
  SBG_RNG_CURAND_U32 = 4 /* raw words from cuRAND's own Philox (GPU only) */
} sbg_rng_kind;

typedef struct sbg_rng_params {
  uint64_t seed;
  uint64_t subsequence;  /* stream s uses subsequence + s */
  uint64_t offset;       /* words skipped at the start of every stream */
  int64_t n_streams;
  int64_t n_per_stream;
  int kind;              /* an sbg_rng_kind */
  uint32_t bound;        /* for SBG_RNG_BELOW, >= 1 */
} sbg_rng_params;

/* out: n_streams * n_per_stream doubles, stream after stream. */
sbg_status sbg_rng_fill_cpu(const sbg_rng_params *p, double *out, sbg_ctx *ctx);
sbg_status sbg_rng_fill_gpu(const sbg_rng_params *p, double *out, sbg_ctx *ctx);

/* Busy work for `seconds` in chunks of about 10 ms, holding `bytes` of
 * (host or device) memory and polling between chunks.  out[0] receives the
 * number of chunks run. */
sbg_status sbg_busy_cpu(double seconds, double bytes, double *out, sbg_ctx *ctx);
sbg_status sbg_busy_gpu(double seconds, double bytes, double *out, sbg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SBG_SELFTEST_H */
