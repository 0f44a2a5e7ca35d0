/* Preranked nulls shared across sets: the null ES of every distinct set
 * size from one random draw of rank positions per permutation
 * (gsea_preranked.c).  Plain C, no R. */
#ifndef SBG_GSEA_PRERANKED_H
#define SBG_GSEA_PRERANKED_H

#include <stddef.h>
#include <stdint.h>

#include "gsea.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbg_gsea_sizes {
  int32_t n;        /* distinct set sizes */
  int32_t *size;    /* n ascending sizes */
  int32_t *of_set;  /* per set: index of its size in size[] */
} sbg_gsea_sizes;

int sbg_gsea_sizes_make(sbg_gsea_sizes *z, const int32_t *set_start, int32_t S);
void sbg_gsea_sizes_free(sbg_gsea_sizes *z);

/* Per-thread room of the shared null for n_genes G and largest size kmax. */
typedef struct sbg_gsea_prerank_ws {
  int32_t *perm;      /* G: the identity between permutations */
  int32_t *swp;       /* kmax: the swaps of the partial shuffle */
  int32_t *pos, *tix; /* kmax: drawn rank positions ascending, their draw index */
  int32_t *sub;       /* kmax: one size's positions (sequential rule) */
  double *buf;        /* 2 x 4 x kmax: running sums of a group of sizes */
} sbg_gsea_prerank_ws;

int sbg_gsea_prerank_ws_alloc(sbg_gsea_prerank_ws *w, int32_t G, int32_t kmax);
void sbg_gsea_prerank_ws_free(sbg_gsea_prerank_ws *w);

/* Null ES of permutation j >= 1 for each distinct size into es_size[z->n]:
 * wr (G): running-sum weight at each rank position. */
void sbg_gsea_prerank_null(const sbg_gsea_sizes *z, const double *wr, int32_t G, uint64_t seed, int64_t j,
                           sbg_gsea_prerank_ws *w, double *es_size);
/* The same for Q weight vectors wr[v] from one draw: es_size[v] + off gets
 * the ES by size of vector v, with the bits of its own
 * sbg_gsea_prerank_null(); nrq: room for Q x (1 + 4) doubles. */
void sbg_gsea_prerank_null_multi(const sbg_gsea_sizes *z, const double *const *wr, int32_t Q, int32_t G,
                                 uint64_t seed, int64_t j, sbg_gsea_prerank_ws *w, double *nrq,
                                 double *const *es_size, size_t off);

/* The same null on a GPU (gsea_preranked_gpu.cu; gsea_preranked_gpu_stub.c
 * without CUDA), with the bits of sbg_gsea_prerank_null(), for the
 * permutations [lo, hi) asked for in order, batch after batch, once per
 * pass: *es (z->n x n, host memory owned by the handle, valid until the
 * next call) gets the ES of [first, first + n), n <= the max batch.  Open
 * leaves *h NULL, with SBG_OK, when the largest size does not fit a
 * block's shared memory: the caller then draws on the CPU. */
typedef struct sbg_gsea_pre_gpu sbg_gsea_pre_gpu;
sbg_status sbg_gsea_pre_gpu_open(const sbg_gsea_sizes *z, const double *wr, int32_t G, uint64_t seed, int device,
                                 int64_t lo, int64_t hi, int64_t max_batch, sbg_gsea_pre_gpu **h, sbg_ctx *ctx);
int64_t sbg_gsea_pre_gpu_max_batch(const sbg_gsea_pre_gpu *h);
sbg_status sbg_gsea_pre_gpu_batch(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, const double **es, sbg_ctx *ctx);
void sbg_gsea_pre_gpu_close(sbg_gsea_pre_gpu *h);

/* Many signatures of the same gene count and set sizes on one GPU
 * (gsea_preranked_multi_gpu.cu; gsea_preranked_multi_gpu_stub.c without
 * CUDA): each permutation drawn once and scored for every signature of a
 * block, with the bits of each one's sbg_gsea_prerank_null(); the
 * statistics by size per signature as sbg_gsea_pre_gpu_stats and its
 * passes; pass 1's ES stay for pass 2 where they fit and keep_max (< 0:
 * no limit) allows nperm permutations; batch: permutations per batch (0:
 * its own choice).  open gives *h NULL where the kernels or one signature do not
 * fit the device (the caller then runs each signature alone); room: the
 * signatures it takes (<= want), numbered 0.. in signature, pass2_setup
 * and the results; the passes run signatures [0, nb) over permutations
 * [first, first + n), n <= max_batch. */
typedef struct sbg_gsea_pm_gpu sbg_gsea_pm_gpu;
sbg_status sbg_gsea_pm_gpu_open(const sbg_gsea_sizes *z, int32_t G, int32_t S, uint64_t seed, int64_t nperm,
                                int64_t batch, int64_t keep_max, int device, int32_t want, sbg_gsea_pm_gpu **h,
                                sbg_ctx *ctx);
int32_t sbg_gsea_pm_gpu_room(const sbg_gsea_pm_gpu *h);
int64_t sbg_gsea_pm_gpu_max_batch(const sbg_gsea_pm_gpu *h);
sbg_status sbg_gsea_pm_gpu_signature(sbg_gsea_pm_gpu *h, int32_t v, const double *wr, const int32_t *ps,
                                     const int32_t *ns, const double *pe, const double *ne, const int32_t *mult,
                                     sbg_ctx *ctx);
sbg_status sbg_gsea_pm_gpu_pass1(sbg_gsea_pm_gpu *h, int32_t nb, int64_t first, int64_t n, sbg_ctx *ctx);
sbg_status sbg_gsea_pm_gpu_pass1_result(sbg_gsea_pm_gpu *h, int32_t v, const int32_t *ps, const int32_t *ns,
                                        gsea_acc *sp, gsea_acc *sn, int64_t *np, int64_t *nn, int64_t *bp,
                                        int64_t *bn, sbg_ctx *ctx);
sbg_status sbg_gsea_pm_gpu_pass2_setup(sbg_gsea_pm_gpu *h, int32_t v, const double *mpos, const double *mneg,
                                       const double *opos, int32_t kp, const double *oneg, int32_t kn, sbg_ctx *ctx);
sbg_status sbg_gsea_pm_gpu_pass2(sbg_gsea_pm_gpu *h, int32_t nb, int64_t first, int64_t n, int fbits,
                                 double *const *pmax, double *const *pmin, sbg_ctx *ctx);
sbg_status sbg_gsea_pm_gpu_pass2_result(sbg_gsea_pm_gpu *h, int32_t v, uint64_t *hp, uint64_t *hn,
                                        int64_t *valid_pos, int64_t *valid_neg, sbg_ctx *ctx);
void sbg_gsea_pm_gpu_close(sbg_gsea_pm_gpu *h);

/* The statistics passes by size on the device (gsea_cpu.c's zstats_pass1
 * and stats_pass2, same integers), so no ES leave it: stats sets them up
 * from the sizes' sorted observed ES (zstats' ps, ns, pe, ne) and the sets
 * per size, *on = 0 where pass 2's bins do not fit a block (the host then
 * runs them).  pass1_result and pass2_result add the device's sums,
 * counts and bins to the host's; pass2 writes each permutation's max and
 * min null NES into pmax, pmin (index first - 1 on). */
sbg_status sbg_gsea_pre_gpu_stats(sbg_gsea_pre_gpu *h, const int32_t *ps, const int32_t *ns, const double *pe,
                                  const double *ne, const int32_t *mult, int32_t S, int *on, sbg_ctx *ctx);
sbg_status sbg_gsea_pre_gpu_pass1(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, sbg_ctx *ctx);
sbg_status sbg_gsea_pre_gpu_pass1_result(sbg_gsea_pre_gpu *h, gsea_acc *sp, gsea_acc *sn, int64_t *np, int64_t *nn,
                                         int64_t *bp, int64_t *bn, sbg_ctx *ctx);
sbg_status sbg_gsea_pre_gpu_pass2(sbg_gsea_pre_gpu *h, int64_t first, int64_t n, const double *mpos,
                                  const double *mneg, const double *opos, int32_t kp, const double *oneg, int32_t kn,
                                  int fbits, double *pmax, double *pmin, sbg_ctx *ctx);
sbg_status sbg_gsea_pre_gpu_pass2_result(sbg_gsea_pre_gpu *h, uint64_t *hp, uint64_t *hn, int64_t *valid_pos,
                                         int64_t *valid_neg, sbg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SBG_GSEA_PRERANKED_H */
