/* Engine interface of rapidGSEA(): ranking metrics, hits-only enrichment
 * scores over batches of permutations, and the streaming Broad statistics.
 * Plain C, no R; reached from R through ffi_gsea_run (gsea_call.c). */
#ifndef SBG_GSEA_H
#define SBG_GSEA_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sbg_gsea_metric {
  SBG_GSEA_S2N = 0,        /* (muA - muB) / (sdA + sdB) */
  SBG_GSEA_TTEST = 1,      /* (muA - muB) / sqrt(sdA^2/nA + sdB^2/nB) */
  SBG_GSEA_DIFF = 2,       /* muA - muB */
  SBG_GSEA_RATIO = 3,      /* muA / muB */
  SBG_GSEA_LOG2RATIO = 4   /* log2(muA / muB) */
} sbg_gsea_metric;

typedef struct sbg_gsea_input {
  int32_t n_genes;
  int32_t n_samples;
  const double *expr;      /* n_genes x n_samples, column-major; NULL when preranked */
  const int32_t *labels;   /* n_samples: 0 = class A (numerator), 1 = class B */
  const double *ranking;   /* preranked: n_genes metric values; else NULL */
  int32_t n_sets;
  const int32_t *set_start;/* n_sets + 1 offsets into set_genes */
  const int32_t *set_genes;/* 0-based gene indices, distinct within a set */
} sbg_gsea_input;

/* An exact sum of null ES: 128-bit integer in units of 2^-62 (gsea_math.h). */
typedef struct gsea_acc {
  uint64_t lo;
  int64_t hi;
} gsea_acc;

#define SBG_GSEA_MAX_DEVICES 64

/* What pass 2 needs from the merged pass 1 when R workers (BPPARAM) share
 * the permutations: sbg_gsea_combine1() gives it. */
typedef struct sbg_gsea_norm {
  const double *mpos, *mneg; /* n_sets: mean positive / |mean negative| null ES */
  const double *opos, *oneg; /* observed NES >= 0, and -NES for NES <= 0, ascending */
  int32_t kp, kn;
} sbg_gsea_norm;

typedef struct sbg_gsea_params {
  int metric;              /* an sbg_gsea_metric (phenotype permutation) */
  double weight;           /* exponent q >= 0 of the weighted running sum */
  int gene_perm;           /* 1: permute genes (fixed metric), 0: labels */
  uint64_t seed;
  int64_t nperm;           /* >= 1 null permutations, numbered 1..nperm */
  int64_t batch;           /* permutations per batch (multiple of 64; on the GPU at most); 0 = auto */
  int64_t walk_min;        /* GPU: sets of more than this many members walk the ranking (k_es_walk);
                              0 = none, < 0 = the engine's choice */
  int64_t cache_max;       /* at most this many permutations' ES kept for pass 2, on each
                              device (GPU) or in host memory (CPU); < 0 = as many as fit
                              the device, or 1 GiB of host memory (tests set it) */
  /* GPU: the run's devices (ctx) share the permutations */
  /* 0: the whole run.  1: pass 1 of permutations [perm_lo, perm_hi) only,
   * its sums and counts into the result; 2: pass 2 of them given norm, its
   * FDR bins and extremes into the result (a worker's share; nperm is
   * still the run's total). */
  int phase;
  int64_t perm_lo, perm_hi;
  const sbg_gsea_norm *norm;
} sbg_gsea_params;

typedef struct sbg_gsea_result {
  double *metric;          /* n_genes: observed metric */
  int32_t *order;          /* n_genes: 0-based genes in rank order */
  double *es, *nes, *pval, *fdr, *fwer; /* n_sets each */
  int32_t *rank_at_max;    /* n_sets: 0-based position of the ES */
  double *null_es;         /* n_sets x nperm (column j-1 = permutation j), or NULL */
  double seconds[3];       /* observed + pass 1, pass 2, statistics */
  /* GPU: (set, permutation) pairs of pass 1 whose ES the sequential rule
   * settled (large sets, near ties; k_es_tile) */
  int64_t n_sequential;
  /* phase 1: the range's exact sums and counts (n_sets each) */
  gsea_acc *sum_pos, *sum_neg;
  int64_t *n_pos, *n_neg, *n_ext;
  /* phase 2: the range's FDR numerators by bin (kp + 1, kn + 1), the
   * permutations with a null NES of each sign, and each permutation's
   * max / min null NES (perm_hi - perm_lo each) */
  uint64_t *hp, *hn;
  int64_t valid_pos, valid_neg;
  double *pmax, *pmin;
} sbg_gsea_result;

/* The whole run: observed ES, null ES in batches, Broad statistics.  With
 * use_gpu the batches of null ES come from the GPU engine. */
sbg_status sbg_gsea_run(const sbg_gsea_input *in, const sbg_gsea_params *p,
                        sbg_gsea_result *out, int use_gpu, sbg_ctx *ctx);

/* Many preranked signatures (in[0..Q), out[0..Q)), each with the result
 * of its own sbg_gsea_run() with p: gene permutations, phase 0, no kept
 * table.  On the CPU, consecutive signatures with the same gene count and
 * set sizes share each permutation's draw; with use_gpu each runs whole
 * on the GPU engine. */
sbg_status sbg_gsea_multi_run(const sbg_gsea_input *in, int32_t Q, const sbg_gsea_params *p,
                              sbg_gsea_result *out, int use_gpu, sbg_ctx *ctx);

/* What the driver prepares once on the host for both engines. */
typedef struct sbg_gsea_prep {
  const double *xc;        /* n_genes x n_samples, each gene centred on its mean */
  const double *mu;        /* n_genes: gene means */
  const double *t1, *t2;   /* n_genes: sums of xc and xc^2 over all samples */
  const double *metric0;   /* n_genes: observed metric (gene permutation) */
  int32_t n_a, n_b;        /* class sizes */
  int32_t small_label;     /* the class (0/1) summed per permutation */
} sbg_gsea_prep;

/* GPU engine: an opaque handle computing the ES of permutations
 * [first, first + n) into its device buffer, copied into es (n_sets x n,
 * column per permutation) unless es is NULL.  With cache_perms > 0 it keeps
 * the ES of as many of permutations 1..cache_perms as the device holds, and
 * a second request for a kept batch reads them instead of recomputing. */
typedef struct sbg_gsea_gpu sbg_gsea_gpu;
sbg_status sbg_gsea_gpu_open(const sbg_gsea_input *in, const sbg_gsea_params *p,
                             const sbg_gsea_prep *prep, int device, int64_t max_batch,
                             int64_t cache_perms, sbg_gsea_gpu **h, sbg_ctx *ctx);
sbg_status sbg_gsea_gpu_batch(sbg_gsea_gpu *h, int64_t first, int64_t n,
                              double *es, sbg_ctx *ctx);
/* Largest batch the device holds (multiple of 64, >= 64), after open. */
int64_t sbg_gsea_gpu_max_batch(const sbg_gsea_gpu *h);
void sbg_gsea_gpu_close(sbg_gsea_gpu *h);

/* The streaming statistics on the device, on the batch just computed, so
 * the ES table never crosses to the host.  The same arithmetic as the host
 * passes in gsea_cpu.c (see there), with the same bits as the result.
 * Pass 1 accumulates the sign-separated sums and the nominal p counts of
 * the observed ES es_obs; pass1_result adds them into the host arrays. */
sbg_status sbg_gsea_gpu_pass1(sbg_gsea_gpu *h, const double *es_obs, int64_t n, sbg_ctx *ctx);
sbg_status sbg_gsea_gpu_pass1_result(sbg_gsea_gpu *h, gsea_acc *sum_pos, gsea_acc *sum_neg,
                                     int64_t *n_pos, int64_t *n_neg, int64_t *n_ext,
                                     sbg_ctx *ctx);
/* Adds to *n the (set, permutation) pairs whose ES the sequential rule
 * settled so far (k_es_tile's near ties; read at the end of pass 1). */
sbg_status sbg_gsea_gpu_sequential(sbg_gsea_gpu *h, int64_t *n, sbg_ctx *ctx);
/* Whether pass 2 fits the device's shared memory for kp + kn observed NES. */
int sbg_gsea_gpu_pass2_fits(const sbg_gsea_gpu *h, int32_t kp, int32_t kn);
/* Pass 2 over the batch [first, first + n): per permutation max/min null
 * NES into pmax/pmin[first - 1 ...], FDR numerators kept on the device. */
sbg_status sbg_gsea_gpu_pass2(sbg_gsea_gpu *h, int64_t first, int64_t n, const double *mpos,
                              const double *mneg, const double *opos, int32_t kp,
                              const double *oneg, int32_t kn, int fbits, double *pmax,
                              double *pmin, sbg_ctx *ctx);
/* Adds the FDR numerators (kp + 1, kn + 1 bins) and valid permutation
 * counts into the host's. */
sbg_status sbg_gsea_gpu_pass2_result(sbg_gsea_gpu *h, uint64_t *hp, uint64_t *hn,
                                     int64_t *valid_pos, int64_t *valid_neg, sbg_ctx *ctx);

/* Workers' shares merged (BPPARAM): parts of phase 1 (sums and counts,
 * n_parts of each, added exactly) into NES, nominal p (plus1: (b+1)/(m+1)) and what pass 2
 * needs (mpos, mneg: n_sets; opos, oneg: n_sets room, *kp / *kn used). */
sbg_status sbg_gsea_combine1(int32_t n_sets, int64_t nperm, const double *es, int n_parts,
                             const gsea_acc *const *sum_pos, const gsea_acc *const *sum_neg,
                             const int64_t *const *n_pos, const int64_t *const *n_neg,
                             const int64_t *const *n_ext, int plus1, double *nes, double *pval, double *mpos,
                             double *mneg, double *opos, double *oneg, int32_t *kp, int32_t *kn,
                             sbg_ctx *ctx);
/* ... and of phase 2 (bins added, extremes of all nperm permutations in
 * order) into FDR and FWER. */
sbg_status sbg_gsea_combine2(int32_t n_sets, int64_t nperm, const double *nes, const double *opos,
                             int32_t kp, const double *oneg, int32_t kn, int n_parts,
                             const uint64_t *const *hp, const uint64_t *const *hn,
                             int64_t valid_pos, int64_t valid_neg, const double *pmax,
                             const double *pmin, double *fdr, double *fwer, sbg_ctx *ctx);

/* Broad statistics from an ES table (n_sets x nperm, column-major), the
 * same code the streaming engine uses: reached from gseaStats(). */
sbg_status sbg_gsea_stats_table(int32_t n_sets, int64_t nperm, const double *es,
                                const double *null_es, double *nes, double *pval,
                                double *fdr, double *fwer, sbg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SBG_GSEA_H */
