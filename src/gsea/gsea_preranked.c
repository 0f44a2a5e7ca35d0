/* Preranked nulls shared across gene sets (permutation = "gene").  With a
 * fixed ranking the null ES of a set depends only on its size, so each
 * permutation draws one random subset of rank positions, as large as the
 * largest set, from its own Philox subsequence, and scores its prefixes:
 * the first k positions drawn are a uniform random set of size k.  Every
 * permutation is computed alone from the seed, so threads and batches do
 * not change a bit. */
#include <stdlib.h>
#include <string.h>

#include "gsea_preranked.h"
#include "gsea_math.h"
#include "philox.h"

/* ES of a set at the ascending rank positions pos[0..k) (Broad's rule,
 * the same hit function as the full sweep); wr: weight by rank position,
 * nr: their sum. */
static double prefix_es(const int32_t *pos, int32_t k, const double *wr, double nr, double inv_nmiss) {
  int unit = nr == 0; /* all weights 0: unit weights, as the sweep does */
  double inv_nr = 1.0 / (unit ? (double)k : nr);
  gsea_es_state s;
  gsea_es_init(&s);
  for (int32_t i = 0; i < k; i++) gsea_es_hit(&s, pos[i], unit ? 1.0 : wr[pos[i]], inv_nr, inv_nmiss);
  return s.best;
}

void sbg_gsea_prerank_null(const sbg_gsea_sizes *z, const double *wr, int32_t G, uint64_t seed,
                           int64_t j, int32_t *perm, int32_t *swp, int32_t *sorted, double *es_size) {
  sbg_philox r;
  sbg_philox_init(&r, seed, (uint64_t)j, 0);
  int32_t kmax = z->size[z->n - 1], next = 0;
  double nr = 0; /* hit weight of the draw so far, summed in draw order */
  for (int32_t i = 0; i < kmax; i++) {
    /* partial Fisher-Yates: position i of the draw is uniform over the rest */
    int32_t d = i + (int32_t)sbg_philox_below(&r, (uint32_t)(G - i));
    int32_t p = perm[d];
    perm[d] = perm[i];
    perm[i] = p;
    swp[i] = d;
    /* insert p into the ascending prefix (the sweep needs rank order) */
    int32_t a = i;
    while (a > 0 && sorted[a - 1] > p) { sorted[a] = sorted[a - 1]; a--; }
    sorted[a] = p;
    nr += wr[p];
    if (i + 1 == z->size[next]) {
      es_size[next] = prefix_es(sorted, i + 1, wr, nr, 1.0 / ((double)G - (double)(i + 1)));
      next++;
    }
  }
  /* undo the swaps: perm is the identity again for the next permutation */
  for (int32_t i = kmax - 1; i >= 0; i--) {
    int32_t d = swp[i], p = perm[d];
    perm[d] = perm[i];
    perm[i] = p;
  }
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int sbg_gsea_sizes_make(sbg_gsea_sizes *z, const int32_t *set_start, int32_t S) {
  memset(z, 0, sizeof *z);
  z->size = malloc((size_t)S * sizeof(int32_t));
  z->of_set = malloc((size_t)S * sizeof(int32_t));
  if (!z->size || !z->of_set) return 0;
  for (int32_t s = 0; s < S; s++) z->size[s] = set_start[s + 1] - set_start[s];
  qsort(z->size, (size_t)S, sizeof(int32_t), cmp_i32);
  int32_t n = 0;
  for (int32_t s = 0; s < S; s++)
    if (n == 0 || z->size[n - 1] != z->size[s]) z->size[n++] = z->size[s];
  z->n = n;
  for (int32_t s = 0; s < S; s++) {
    int32_t k = set_start[s + 1] - set_start[s], lo = 0, hi = n - 1;
    while (lo < hi) { /* binary search of k among the distinct sizes */
      int32_t mid = (lo + hi) / 2;
      if (z->size[mid] < k) lo = mid + 1; else hi = mid;
    }
    z->of_set[s] = lo;
  }
  return 1;
}

void sbg_gsea_sizes_free(sbg_gsea_sizes *z) {
  free(z->size);
  free(z->of_set);
  memset(z, 0, sizeof *z);
}
