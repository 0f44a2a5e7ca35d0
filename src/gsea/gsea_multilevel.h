/* Multilevel p-values of preranked gene sets (adaptive multilevel
 * splitting, Korotkevich, Sukhov and Sergushichev): gsea_multilevel.c,
 * reached from rapidGSEA(pvalue = "multilevel") through
 * gsea_multilevel_call.c.  Plain C, no R. */
#ifndef SBG_GSEA_MULTILEVEL_H
#define SBG_GSEA_MULTILEVEL_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbg_gsea_ml_input {
  int32_t n_genes;          /* G >= 2 */
  const double *metric;     /* G: the ranking metric in rank order (descending) */
  double weight;            /* q: hits weigh |metric|^q */
  int32_t n_sets;           /* S */
  const int32_t *set_start; /* S + 1 offsets into set_pos */
  const int32_t *set_pos;   /* members' 0-based rank positions, distinct within a set */
} sbg_gsea_ml_input;

typedef struct sbg_gsea_ml_params {
  uint64_t seed;       /* Philox key: same seed, same p on any thread count */
  int32_t sample_size; /* population of random sets per level, odd, >= 3 */
  int32_t n_sign;      /* random sets per size for P(ES >= 0), >= 1 */
  int32_t moves;       /* kept swaps per member per level, >= 1 */
  double eps;          /* smallest p estimated; 0: as small as doubles allow */
} sbg_gsea_ml_params;

typedef struct sbg_gsea_ml_result {
  double *pval;    /* S: P(ES+ >= ES | ES >= 0), mirrored for ES < 0 */
  double *log2err; /* S: sd of log2(pval); NaN where pval is a bound */
  double *es;      /* S: the signed ES the engine scored (Broad's rule) */
  int32_t *levels; /* S: levels the set's p went through */
} sbg_gsea_ml_result;

sbg_status sbg_gsea_multilevel_cpu(const sbg_gsea_ml_input *in, const sbg_gsea_ml_params *p,
                                   sbg_gsea_ml_result *out, sbg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SBG_GSEA_MULTILEVEL_H */
