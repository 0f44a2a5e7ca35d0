/* Multilevel p-values of preranked gene sets (adaptive multilevel
 * splitting, Korotkevich, Sukhov and Sergushichev): gsea_multilevel.c,
 * reached from rapidGSEA(pvalue = "multilevel") through
 * gsea_multilevel_call.c.  Plain C, no R. */
#ifndef SBG_GSEA_MULTILEVEL_H
#define SBG_GSEA_MULTILEVEL_H

#include <stdint.h>

#include "philox.h"
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
  int gpu;             /* members' moves on the GPU ctx->device (gsea_multilevel_gpu.cu) */
  double wave_bytes;   /* GPU: device bytes per wave of rulers; 0: half the free memory
                        * (R option sysbioGPU.gseaWaveBytes, ?`sysbioGPU-options`) */
} sbg_gsea_ml_params;

typedef struct sbg_gsea_ml_result {
  double *pval;    /* S: P(ES+ >= ES | ES >= 0), mirrored for ES < 0 */
  double *log2err; /* S: sd of log2(pval); NaN where pval is a bound */
  double *es;      /* S: the signed ES the engine scored (Broad's rule) */
  int32_t *levels; /* S: levels the set's p went through */
} sbg_gsea_ml_result;

/* The p-values: on ctx->n_threads threads, with the members' moves on the
 * GPU when p->gpu; the same bits either way. */
sbg_status sbg_gsea_multilevel(const sbg_gsea_ml_input *in, const sbg_gsea_ml_params *p, sbg_gsea_ml_result *out,
                               sbg_ctx *ctx);

/* The N plain random sets of n_size sizes k[] on a GPU, from the streams
 * stream[] (one per size): plain[2 s + d] (N, NULL: tail d not wanted) and
 * m[2 s + d], as ml_plain_sets() on the CPU. */
sbg_status sbg_gsea_ml_gpu_plain(int device, int32_t G, const double *w0, const double *w1, int32_t N,
                                 int32_t n_size, const int32_t *k, const sbg_philox *stream, double *const *plain,
                                 int32_t *m, sbg_ctx *ctx);

/* Samples of a GPU engine (built without CUDA: open fails). */
#define SBG_GSEA_ML_GPU_MAX_SAMPLE 2047 /* larger samples move on the CPU */
typedef struct sbg_gsea_ml_gpu sbg_gsea_ml_gpu;
/* Weights of the list and of the reversed list (G each), samples of n,
 * `moves` kept swaps per member; *free_bytes: what the device has free. */
sbg_status sbg_gsea_ml_gpu_open(int device, int32_t G, const double *wf, const double *wb, int32_t n,
                                int32_t moves, size_t *free_bytes, sbg_gsea_ml_gpu **h, sbg_ctx *ctx);
/* Device bytes of one ruler of size k. */
size_t sbg_gsea_ml_gpu_ruler_bytes(int32_t n, int32_t k);
/* A wave of R rulers (replaces the previous one): sizes, tails, first
 * samples (n x k each) and the members' streams (n each). */
sbg_status sbg_gsea_ml_gpu_load(sbg_gsea_ml_gpu *h, int32_t R, const int32_t *k, const int32_t *dir,
                                int32_t *const *pop, const sbg_philox *const *rng, sbg_ctx *ctx);
/* One level of the A rulers act[] of the wave: members copied as map[a]
 * says (NULL: none), moved beyond level[a], scored into score[a] (n). */
sbg_status sbg_gsea_ml_gpu_level(sbg_gsea_ml_gpu *h, int32_t A, const int32_t *act, const double *level,
                                 const int32_t *const *map, double *const *score, double done_frac, sbg_ctx *ctx);
void sbg_gsea_ml_gpu_close(sbg_gsea_ml_gpu *h);

#ifdef __cplusplus
}
#endif

#endif /* SBG_GSEA_MULTILEVEL_H */
