/* The cross-validation bookkeeping of cvParCosnet() (R/parCosnet.R): the
 * labels' codes, the stratified folds drawn from Philox, and the per-fold
 * precision, recall, F and AUPRC averaged per class.  In C, threaded over
 * classes (the metrics over class x fold jobs), because in R they cost
 * more than the GPU's dynamics on a thousand classes.  No R here; the glue
 * is in cosnet_call.c. */
#include <math.h>
#include <stdlib.h>

#include "cosnet.h"
#include "omp_compat.h"
#include "philox.h"

int32_t sbg_cosnet_label_code(double v) {
  if (isnan(v)) return 0;
  if (v == 1) return 1;
  if (v == 0) return -1;
  return 2;
}

/* The nodes idx[0..m) dealt round robin to folds start, start+1, ... in the
 * order of a Philox shuffle of subsequence `sub`. */
static int64_t deal(const int32_t *idx, int32_t m, int32_t *perm, uint64_t seed, uint64_t sub,
                    int64_t start, int32_t nfolds, int32_t *f) {
  for (int32_t j = 0; j < m; j++) perm[j] = j;
  if (m > 1) {
    sbg_philox g;
    sbg_philox_init(&g, seed, sub, 0);
    sbg_philox_shuffle(&g, perm, (uint32_t)m);
  }
  for (int32_t j = 0; j < m; j++) f[idx[perm[j]]] = (int32_t)((start + j) % nfolds) + 1;
  return start + m;
}

int sbg_cosnet_folds(const int32_t *lab, int32_t n, int32_t K, int32_t nfolds, uint64_t seed,
                     int32_t *folds, int n_threads) {
  int failed = 0;
#pragma omp parallel num_threads(n_threads) reduction(| : failed)
  {
    int32_t *buf = (int32_t *)malloc(sizeof(int32_t) * 3 * (size_t)n + 1);
    if (!buf) failed = 1;
#pragma omp for schedule(dynamic, 8)
    for (int32_t k = 0; k < K; k++) {
      if (!buf) continue;
      const int32_t *l = lab + (int64_t)k * n;
      int32_t *f = folds + (int64_t)k * n, *pos = buf, *neg = buf + n, *perm = buf + 2 * (size_t)n;
      int32_t np = 0, nn = 0;
      for (int32_t i = 0; i < n; i++) {
        f[i] = 0;
        if (l[i] == 1) pos[np++] = i;
        else if (l[i] == -1) neg[nn++] = i;
      }
      /* positives on subsequence 2^40 + 2k, negatives on the next one,
       * continuing the round robin where the positives stopped */
      uint64_t base = ((uint64_t)1 << 40) + 2 * (uint64_t)k;
      int64_t s = deal(pos, np, perm, seed, base, 0, nfolds, f);
      deal(neg, nn, perm, seed, base + 1, s, nfolds, f);
    }
    free(buf);
  }
  return failed ? -1 : 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Average precision of a fold from the score keys (sbg_cosnet_order_key())
 * of its P positives, pk[0..P), and of its N negatives, nk[0..N): the sum
 * over the distinct scores, best first, of (recall step) x precision, tied
 * scores entering together, rounded as R's sum(diff(c(0, rec)) * prec):
 * each term in double, the sum in long double.  Only the scores of
 * positives make a recall step (the others add exactly 0), so the
 * negatives need no sort, only a count of those at or above each positive
 * score: each is binned by the number of the positives' distinct keys at
 * or below its own (a binary search among the few positives).  pk is
 * sorted in place; cnt: 2 (P + 1) scratch. */
static double average_precision(uint64_t *pk, int64_t P, const uint64_t *nk, int64_t N,
                                int64_t *cnt) {
  if (P == 0) return NAN;
  qsort(pk, (size_t)P, sizeof(uint64_t), cmp_u64);
  int64_t *pc = cnt, *below = cnt + P + 1, G = 0;
  for (int64_t j = 0; j < P; j++) {
    if (G > 0 && pk[G - 1] == pk[j]) { pc[G - 1]++; continue; }
    pk[G] = pk[j];
    pc[G++] = 1;
  }
  for (int64_t g = 0; g <= G; g++) below[g] = 0;
  for (int64_t j = 0; j < N; j++) below[sbg_cosnet_keys_below(pk, G, nk[j] + 1)]++;
  long double acc = 0;
  double rec_prev = 0;
  int64_t tp = 0, neg = 0;
  for (int64_t g = G - 1; g >= 0; g--) {
    neg += below[g + 1]; /* the negatives at or above key g */
    tp += pc[g];
    double rec = (double)tp / (double)P, prec = (double)tp / (double)(tp + neg);
    double step = rec - rec_prev;
    acc += step * prec;
    rec_prev = rec;
  }
  return (double)acc;
}

/* Precision, recall, F and AUPRC (NaN where undefined) of fold q of class
 * k, its nodes taken in node order; buf holds 2 (size + 1) keys and as
 * many counts, size the fold's node count. */
static void fold_metrics(const int32_t *l, const int32_t *f, const int *pk, const double *sk,
                         int32_t n, int32_t q, int32_t size, uint64_t *buf, double *met) {
  int64_t tp = 0, fp = 0, fn = 0, P = 0, N = 0;
  uint64_t *pos = buf, *negk = buf + size + 1;
  for (int32_t i = 0; i < n; i++) {
    if (f[i] != q) continue;
    int t = l[i] == 1, p = pk[i] == 1;
    tp += p & t; fp += p & !t; fn += !p & t;
    if (t) pos[P++] = sbg_cosnet_order_key(sk[i]);
    else negk[N++] = sbg_cosnet_order_key(sk[i]);
  }
  double prec = tp + fp > 0 ? (double)tp / (double)(tp + fp) : 0;
  double rec = tp + fn > 0 ? (double)tp / (double)(tp + fn) : NAN;
  met[0] = prec;
  met[1] = rec;
  met[2] = isnan(rec) ? NAN : (prec + rec > 0 ? 2 * prec * rec / (prec + rec) : 0);
  met[3] = average_precision(pos, P, negk, N, (int64_t *)(void *)(buf + 2 * ((int64_t)size + 1)));
}

int sbg_cosnet_cv_metrics(const int32_t *lab, const int32_t *folds, const int *pred,
                          const double *score, int32_t n, int32_t K, int32_t nfolds,
                          double *out, int n_threads) {
  /* Threaded over the (class, fold) jobs, so that one class's folds (the
   * sorts of the AUPRC) run concurrently too; each job's buffer holds the
   * largest fold, and the means over a class's folds are taken afterwards
   * in fold order. */
  int64_t n_jobs = (int64_t)K * nfolds;
  double *met = (double *)malloc(sizeof(double) * 4 * (size_t)n_jobs + 1);
  int32_t *size = (int32_t *)calloc((size_t)n_jobs + 1, sizeof(int32_t));
  int failed = !met || !size;
  if (failed) goto done;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 4)
  for (int32_t k = 0; k < K; k++) {
    const int32_t *f = folds + (int64_t)k * n;
    int32_t *sz = size + (int64_t)k * nfolds;
    for (int32_t i = 0; i < n; i++)
      if (f[i] > 0) sz[f[i] - 1]++;
  }
  int32_t largest = 0;
  for (int64_t t = 0; t < n_jobs; t++)
    if (size[t] > largest) largest = size[t];
#pragma omp parallel num_threads(n_threads) reduction(| : failed)
  {
    /* the fold's keys and the counts of average_precision() */
    uint64_t *v = (uint64_t *)malloc(sizeof(uint64_t) * 4 * ((size_t)largest + 1));
    if (!v) failed = 1;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < n_jobs; t++) {
      if (!v) continue;
      int64_t k = t / nfolds;
      fold_metrics(lab + k * n, folds + k * n, pred + k * n, score + k * n, n,
                   (int32_t)(t % nfolds) + 1, size[t], v, met + 4 * t);
    }
    free(v);
  }
  if (failed) goto done;
  /* R's rowMeans(na.rm = TRUE): long double sums; NaN when all are NA */
  for (int32_t k = 0; k < K; k++) {
    long double sum[4] = {0, 0, 0, 0};
    int cnt[4] = {0, 0, 0, 0};
    for (int32_t q = 0; q < nfolds; q++) {
      const double *mq = met + 4 * ((int64_t)k * nfolds + q);
      for (int j = 0; j < 4; j++)
        if (!isnan(mq[j])) { sum[j] += mq[j]; cnt[j]++; }
    }
    for (int j = 0; j < 4; j++) out[k + (int64_t)j * K] = cnt[j] ? (double)(sum[j] / cnt[j]) : NAN;
  }
done:
  free(met);
  free(size);
  return failed ? -1 : 0;
}
