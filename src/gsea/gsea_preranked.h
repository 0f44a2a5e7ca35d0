/* Preranked nulls shared across sets: the null ES of every distinct set
 * size from one random draw of rank positions per permutation
 * (gsea_preranked.c).  Plain C, no R. */
#ifndef SBG_GSEA_PRERANKED_H
#define SBG_GSEA_PRERANKED_H

#include <stdint.h>

typedef struct sbg_gsea_sizes {
  int32_t n;        /* distinct set sizes */
  int32_t *size;    /* n ascending sizes */
  int32_t *of_set;  /* per set: index of its size in size[] */
} sbg_gsea_sizes;

int sbg_gsea_sizes_make(sbg_gsea_sizes *z, const int32_t *set_start, int32_t S);
void sbg_gsea_sizes_free(sbg_gsea_sizes *z);

/* Null ES of permutation j >= 1 for each distinct size into es_size[z->n]:
 * wr (G): running-sum weight at each rank position; perm (G): the identity
 * on entry and on return; swp, sorted: room for the largest size. */
void sbg_gsea_prerank_null(const sbg_gsea_sizes *z, const double *wr, int32_t G, uint64_t seed,
                           int64_t j, int32_t *perm, int32_t *swp, int32_t *sorted, double *es_size);

#endif /* SBG_GSEA_PRERANKED_H */
