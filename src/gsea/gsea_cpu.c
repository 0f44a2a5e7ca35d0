/* CPU engine and driver of rapidGSEA(): observed and permuted metrics,
 * ranking (LSD radix sort, ties by gene index), hits-only ES of each set
 * (its hits put in rank order by a sweep over a gene -> sets index, its
 * running sum in runs: gsea_math.h), and the Broad statistics in two
 * streaming passes (the second reads the first's null ES, kept up to a
 * memory limit, and regenerates the permutations beyond it from the seed,
 * so the whole sets x permutations table is held only when asked for).
 * Reached from rapidGSEA() and gseaStats() through gsea_call.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "gsea.h"
#include "gsea_math.h"
#include "gsea_preranked.h"
#include "host_memory.h"
#include "omp_compat.h"
#include "philox.h"

#define CHUNK 64 /* batches are multiples of this many permutations */
#define SBG_TRY(expr)                                                         \
  do {                                                                        \
    st = (expr);                                                              \
    if (st != SBG_OK) goto done;                                              \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------------------- */
/* Per-thread workspace of the CPU engine */

typedef struct ws {
  int32_t *lab, *small;   /* permuted labels, samples of the summed class */
  int32_t *perm;          /* gene permutation */
  double *s, *ss, *m, *w; /* per gene: sums, metric, weight */
  uint64_t *key, *key2;
  int32_t *ord, *ord2;
  int32_t *hit, *fill;    /* every set's hits' ranks, ascending (the sets' slots), and each set's next slot */
  double *wr;             /* weight by rank position */
  sbg_gsea_prerank_ws pr; /* shared null */
  double *esz;            /* shared null: ES by distinct set size */
} ws;

static void ws_free(ws *w) {
  if (!w) return;
  free(w->lab); free(w->small); free(w->perm); free(w->s); free(w->ss); free(w->m);
  free(w->w); free(w->key); free(w->key2); free(w->ord); free(w->ord2); free(w->hit); free(w->fill); free(w->wr);
  sbg_gsea_prerank_ws_free(&w->pr); free(w->esz);
}

static int ws_alloc(ws *w, int32_t G, int32_t P, int32_t S, int64_t M) {
  memset(w, 0, sizeof *w);
  size_t g = (size_t)G, p = (size_t)(P > 0 ? P : 1), s = (size_t)(S > 0 ? S : 1);
  w->lab = malloc(p * sizeof(int32_t));
  w->small = malloc(p * sizeof(int32_t));
  w->perm = malloc(g * sizeof(int32_t));
  w->s = malloc(g * sizeof(double));
  w->ss = malloc(g * sizeof(double));
  w->m = malloc(g * sizeof(double));
  w->w = malloc(g * sizeof(double));
  w->key = malloc(g * sizeof(uint64_t));
  w->key2 = malloc(g * sizeof(uint64_t));
  w->ord = malloc(g * sizeof(int32_t));
  w->ord2 = malloc(g * sizeof(int32_t));
  w->hit = malloc((size_t)(M > 0 ? M : 1) * sizeof(int32_t));
  w->fill = malloc(s * sizeof(int32_t));
  w->wr = malloc(g * sizeof(double));
  w->esz = malloc(s * sizeof(double));
  if (w->perm) for (int32_t i = 0; i < G; i++) w->perm[i] = i;
  return sbg_gsea_prerank_ws_alloc(&w->pr, G, G - 1) && w->esz && w->lab && w->small && w->perm && w->s && w->ss && w->m && w->w && w->key &&
         w->key2 && w->ord && w->ord2 && w->hit && w->fill && w->wr;
}

/* Everything the workers share, read-only during a batch. */
typedef struct shared {
  const sbg_gsea_input *in;
  const sbg_gsea_params *p;
  sbg_gsea_prep prep;
  int32_t *gs_start, *gs_sets; /* gene -> sets index (CSR) */
  double *inv_nmiss;           /* per set: 1 / (N - k) */
  /* gene permutation: the null of each set size from one shared draw */
  const sbg_gsea_sizes *sizes;
  const double *wr;            /* weight at each rank position, or NULL */
} shared;

/* Stable LSD radix sort of the keys, genes in index order on input, so
 * ties keep the smaller index first.  Result in w->ord. */
static void rank_genes(ws *w, int32_t G) {
  for (int32_t g = 0; g < G; g++) {
    w->key[g] = gsea_sort_key(w->m[g]);
    w->ord[g] = g;
  }
  uint64_t *ka = w->key, *kb = w->key2;
  int32_t *oa = w->ord, *ob = w->ord2;
  for (int shift = 0; shift < 64; shift += 8) {
    size_t cnt[257] = {0};
    for (int32_t i = 0; i < G; i++) cnt[((ka[i] >> shift) & 255u) + 1]++;
    int skip = 0;
    for (int b = 1; b <= 256; b++) if (cnt[b] == (size_t)G) skip = 1;
    if (skip) continue; /* every key has this digit: the pass is a no-op */
    for (int b = 1; b <= 256; b++) cnt[b] += cnt[b - 1];
    for (int32_t i = 0; i < G; i++) {
      size_t d = (ka[i] >> shift) & 255u;
      size_t at = cnt[d]++;
      kb[at] = ka[i];
      ob[at] = oa[i];
    }
    uint64_t *kt = ka; ka = kb; kb = kt;
    int32_t *ot = oa; oa = ob; ob = ot;
  }
  if (oa != w->ord) memcpy(w->ord, oa, (size_t)G * sizeof(int32_t));
}

/* The metric of every gene under permutation j (0 = observed) into w->m. */
static void permuted_metric(const shared *sh, ws *w, int64_t j) {
  const sbg_gsea_input *in = sh->in;
  const sbg_gsea_params *p = sh->p;
  int32_t G = in->n_genes, P = in->n_samples;
  if (p->gene_perm) {
    for (int32_t g = 0; g < G; g++) w->perm[g] = g;
    if (j > 0) {
      sbg_philox r;
      sbg_philox_init(&r, p->seed, (uint64_t)j, 0);
      sbg_philox_shuffle(&r, w->perm, (uint32_t)G);
    }
    for (int32_t g = 0; g < G; g++) w->m[g] = sh->prep.metric0[w->perm[g]];
    return;
  }
  memcpy(w->lab, in->labels, (size_t)P * sizeof(int32_t));
  if (j > 0) {
    sbg_philox r;
    sbg_philox_init(&r, p->seed, (uint64_t)j, 0);
    sbg_philox_shuffle(&r, w->lab, (uint32_t)P);
  }
  int32_t ns = 0;
  for (int32_t i = 0; i < P; i++) if (w->lab[i] == sh->prep.small_label) w->small[ns++] = i;
  /* Sums over the smaller class only, in sample order; the other class
   * follows from the totals (the data are centred, so no cancellation). */
  for (int32_t g = 0; g < G; g++) { w->s[g] = 0; w->ss[g] = 0; }
  for (int32_t t = 0; t < ns; t++) {
    const double *x = sh->prep.xc + (size_t)w->small[t] * (size_t)G;
    for (int32_t g = 0; g < G; g++) {
      w->s[g] += x[g];
      w->ss[g] += x[g] * x[g];
    }
  }
  double na = sh->prep.n_a, nb = sh->prep.n_b;
  int small_is_b = sh->prep.small_label == 1;
  for (int32_t g = 0; g < G; g++) {
    double so = sh->prep.t1[g] - w->s[g], sso = sh->prep.t2[g] - w->ss[g];
    double sa = small_is_b ? so : w->s[g], ssa = small_is_b ? sso : w->ss[g];
    double sb = small_is_b ? w->s[g] : so, ssb = small_is_b ? w->ss[g] : sso;
    w->m[g] = gsea_metric(p->metric, sa, ssa, sb, ssb, na, nb, sh->prep.mu[g]);
  }
}

/* ES of every set for permutation j into es[0..S-1] (and the positions of
 * the ES into pos when not NULL). */
static void perm_es(const shared *sh, ws *w, int64_t j, double *es, int32_t *pos) {
  const sbg_gsea_input *in = sh->in;
  int32_t G = in->n_genes, S = in->n_sets;
  if (sh->p->gene_perm && j > 0 && sh->wr) {
    /* the kept table: each set gets its size's null */
    sbg_gsea_prerank_null(sh->sizes, sh->wr, G, sh->p->seed, j, &w->pr, w->esz);
    for (int32_t s = 0; s < S; s++) es[s] = w->esz[sh->sizes->of_set[s]];
    return;
  }
  permuted_metric(sh, w, j);
  rank_genes(w, G);
  for (int32_t g = 0; g < G; g++) w->w[g] = gsea_weight(w->m[g], sh->p->weight);
  /* every set's hits in rank order: the genes, walked in rank order, put
   * their rank in the next slot of each of their sets */
  for (int32_t s = 0; s < S; s++) w->fill[s] = in->set_start[s];
  for (int32_t r = 0; r < G; r++) {
    int32_t g = w->ord[r];
    w->wr[r] = w->w[g];
    for (int32_t i = sh->gs_start[g]; i < sh->gs_start[g + 1]; i++) w->hit[w->fill[sh->gs_sets[i]]++] = r;
  }
  for (int32_t s = 0; s < S; s++) {
    int32_t lo = in->set_start[s], k = in->set_start[s + 1] - lo;
    /* the total weight in runs (gsea_runs_add's bits) over the set's own
     * order, as k_es_tile */
    const int32_t *mem = in->set_genes + lo;
    const int32_t len = gsea_run_len(k);
    double nr = 0;
    for (int32_t r0 = 0; r0 < k; r0 += len) {
      int32_t r1 = r0 + len < k ? r0 + len : k;
      double loc = 0;
      for (int32_t i = r0; i < r1; i++) loc += w->w[mem[i]];
      nr += loc;
    }
    int unit = nr == 0;
    double inv_nr = 1.0 / (unit ? (double)k : nr);
    gsea_es_state st;
    gsea_es_init(&st);
    /* the running sum in runs, run after run (gsea_es_hit_runs's bits,
     * without its test at every hit) */
    const int32_t *h = w->hit + lo;
    if (len == 1) {
      for (int32_t i = 0; i < k; i++) gsea_es_hit(&st, h[i], unit ? 1.0 : w->wr[h[i]], inv_nr, sh->inv_nmiss[s]);
    } else {
      double off = 0;
      for (int32_t r0 = 0; r0 < k; r0 += len) {
        int32_t r1 = r0 + len < k ? r0 + len : k;
        double loc = 0;
        for (int32_t i = r0; i < r1; i++) {
          loc += unit ? 1.0 : w->wr[h[i]];
          gsea_es_step(&st, h[i], off + loc, inv_nr, sh->inv_nmiss[s]);
        }
        off += loc;
      }
    }
    es[s] = st.best;
    if (pos) pos[s] = st.pos;
  }
}

/* ---------------------------------------------------------------------- */
/* Streaming statistics */

typedef struct stats {
  int32_t S;
  int64_t nperm;
  int nth;
  const double *es;          /* observed ES */
  /* pass 1 */
  gsea_acc *sum_pos, *sum_neg;  /* exact, order-free (gsea_acc) */
  int64_t *n_pos, *n_neg, *n_ext;
  double *mpos, *mneg, *nes;
  /* pass 2 */
  double *opos, *oneg;       /* observed NES >= 0 ascending; -NES for NES <= 0 ascending */
  int32_t kp, kn;
  int fbits;                 /* FDR numerators in units of 2^-fbits */
  int plus1;                 /* nominal p = (b + 1) / (m + 1), never 0 (gene permutation) */
  /* Gene permutation: sets of one size share their null ES, hence their
   * sums and null NES, so the passes score one representative per size
   * and count it mult times (integer sums: the same bits). */
  const int32_t *rep;        /* per set: the first set of its size (NULL: none) */
  int32_t *mult;             /* per set: sets of its size if it is the representative, else 0 */
  uint64_t *hp, *hn;         /* FDR numerators by bin (kp + 1, kn + 1) */
  uint64_t *thp, *thn;       /* per-thread partials of the current batch */
  int64_t valid_pos, valid_neg;
  double *pmax, *pmin;       /* per permutation max / min null NES */
  double *zb;                /* per thread: a permutation's null NES (S) */
  /* pass 2's bins: where to search opos / oneg for a value (bucket_find) */
  int32_t nbp, nbn, *bplo, *bphi, *bnlo, *bnhi;
  double sbp, sbn;
} stats;

static void stats_free(stats *t) {
  free(t->sum_pos); free(t->sum_neg); free(t->n_pos); free(t->n_neg); free(t->n_ext);
  free(t->mpos); free(t->mneg); free(t->nes); free(t->opos); free(t->oneg);
  free(t->hp); free(t->hn); free(t->thp); free(t->thn); free(t->pmax); free(t->pmin);
  free(t->zb); free(t->bplo); free(t->bphi); free(t->bnlo); free(t->bnhi);
}

static int stats_alloc(stats *t, int32_t S, int64_t nperm, const double *es, int nth) {
  memset(t, 0, sizeof *t);
  t->S = S;
  t->nperm = nperm;
  t->nth = nth;
  t->es = es;
  t->fbits = gsea_fdr_bits(nperm);
  size_t s = (size_t)S;
  t->sum_pos = calloc(s, sizeof(gsea_acc));
  t->sum_neg = calloc(s, sizeof(gsea_acc));
  t->n_pos = calloc(s, sizeof(int64_t));
  t->n_neg = calloc(s, sizeof(int64_t));
  t->n_ext = calloc(s, sizeof(int64_t));
  t->mpos = malloc(s * sizeof(double));
  t->mneg = malloc(s * sizeof(double));
  t->nes = malloc(s * sizeof(double));
  t->opos = malloc(s * sizeof(double));
  t->oneg = malloc(s * sizeof(double));
  t->hp = calloc(s + 1, sizeof(uint64_t));
  t->hn = calloc(s + 1, sizeof(uint64_t));
  t->thp = malloc((size_t)nth * (s + 1) * sizeof(uint64_t));
  t->thn = malloc((size_t)nth * (s + 1) * sizeof(uint64_t));
  t->pmax = malloc((size_t)nperm * sizeof(double));
  t->pmin = malloc((size_t)nperm * sizeof(double));
  t->zb = malloc((size_t)nth * s * sizeof(double));
  return t->zb && t->sum_pos && t->sum_neg && t->n_pos && t->n_neg && t->n_ext && t->mpos &&
         t->mneg && t->nes && t->opos && t->oneg && t->hp && t->hn && t->thp && t->thn &&
         t->pmax && t->pmin;
}

/* Pass 1 over permutations [first, first + n): sign-separated sums and the
 * nominal p-value counts, all exact integers, so the result does not
 * depend on threads, batches or devices.  Parallel over sets. */
static void stats_pass1(stats *t, const double *nb, int64_t n, int nth) {
  int32_t S = t->S;
#pragma omp parallel for num_threads(nth) schedule(static)
  for (int32_t s = 0; s < S; s++) {
    double e = t->es[s];
    if (t->rep && t->rep[s] != s) { /* its sums are its representative's */
      for (int64_t b = 0; b < n; b++) {
        double v = nb[(size_t)b * S + s];
        t->n_ext[s] += e >= 0 ? v >= 0 && v > e : v <= 0 && v < e;
      }
      continue;
    }
    for (int64_t b = 0; b < n; b++) {
      double v = nb[(size_t)b * S + s];
      if (v >= 0) {
        gsea_acc_add(&t->sum_pos[s], v);
        t->n_pos[s]++;
        if (e >= 0 && v > e) t->n_ext[s]++;
      }
      if (v <= 0) {
        gsea_acc_add(&t->sum_neg[s], v);
        t->n_neg[s]++;
        if (e < 0 && v < e) t->n_ext[s]++;
      }
    }
  }
}

/* Sets share their representative's sums (before pass 1's results leave). */
static void stats_share_sums(stats *t) {
  if (!t->rep) return;
  for (int32_t s = 0; s < t->S; s++) {
    int32_t r = t->rep[s];
    t->sum_pos[s] = t->sum_pos[r];
    t->sum_neg[s] = t->sum_neg[r];
    t->n_pos[s] = t->n_pos[r];
    t->n_neg[s] = t->n_neg[r];
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* NES normalisers, observed NES and nominal p-values; sorted observed NES
 * for the FDR bins. */
static void stats_end_pass1(stats *t, double *nes, double *pval) {
  int32_t S = t->S;
  stats_share_sums(t);
  t->kp = t->kn = 0;
  for (int32_t s = 0; s < S; s++) {
    t->mpos[s] = t->n_pos[s] ? gsea_acc_value(t->sum_pos[s]) / (double)t->n_pos[s] : NAN;
    t->mneg[s] = t->n_neg[s] ? -gsea_acc_value(t->sum_neg[s]) / (double)t->n_neg[s] : NAN;
    double e = t->es[s];
    double v = e >= 0 ? e / t->mpos[s] : e / t->mneg[s];
    if (!isfinite(v)) v = NAN; /* no null ES of that sign (or only zeros) */
    t->nes[s] = nes[s] = v;
    int64_t den = e >= 0 ? t->n_pos[s] : t->n_neg[s];
    pval[s] = t->plus1 ? (double)(t->n_ext[s] + 1) / (double)(den + 1)
                       : den ? (double)t->n_ext[s] / (double)den : NAN;
    if (!isnan(v) && v >= 0) t->opos[t->kp++] = v;
    if (!isnan(v) && v <= 0) t->oneg[t->kn++] = -v;
  }
  qsort(t->opos, (size_t)t->kp, sizeof(double), cmp_double);
  qsort(t->oneg, (size_t)t->kn, sizeof(double), cmp_double);
}


/* ---------------------------------------------------------------------- */
/* Gene permutations: the passes by set size.  Sets of one size share their
 * null ES, so the batches hold one ES per distinct size (nz per
 * permutation) and the passes cost nz, not S, per permutation.  The counts
 * of nulls beyond each set's own ES come from the sets of a size sorted by
 * ES: one binary search per null adds 1 to a bin, and prefix sums over the
 * bins give every set's count.  All integers, so the same bits as the
 * per-set passes (which the kept table still takes). */

typedef struct zstats {
  int32_t nz, nth;
  const int32_t *of_set;   /* per set: its size index */
  int32_t *rep, *mult;     /* per size: first set of that size, sets of that size */
  /* per size: sets with ES >= 0 by ascending ES at [ps[z], ps[z + 1]), and
   * with ES < 0 at [ns[z], ns[z + 1]); bins: one more slot per size */
  int32_t *ps, *ns, *pset, *nset;
  double *pe, *ne;
  /* per thread: sums and counts by size, bins */
  gsea_acc *sp, *sn;
  int64_t *np, *nn, *bp, *bn;
} zstats;

static void zstats_free(zstats *z) {
  free(z->rep); free(z->mult); free(z->ps); free(z->ns); free(z->pset); free(z->nset);
  free(z->pe); free(z->ne); free(z->sp); free(z->sn); free(z->np); free(z->nn); free(z->bp); free(z->bn);
  memset(z, 0, sizeof *z);
}

typedef struct es_idx {
  int32_t q, s; /* size index, set */
  double e;
} es_idx;

static int cmp_es_idx(const void *a, const void *b) {
  const es_idx *x = a, *y = b;
  if (x->q != y->q) return (x->q > y->q) - (x->q < y->q);
  if (x->e != y->e) return (x->e > y->e) - (x->e < y->e);
  return (x->s > y->s) - (x->s < y->s);
}

/* Tables of the sizes z (of_set, nz sizes) for observed ES es of S sets. */
static int zstats_alloc(zstats *z, const sbg_gsea_sizes *sz, const double *es, int32_t S, int nth) {
  memset(z, 0, sizeof *z);
  int32_t nz = sz->n;
  z->nz = nz;
  z->nth = nth;
  z->of_set = sz->of_set;
  size_t n1 = (size_t)nz + 1, s1 = (size_t)S + 1;
  z->rep = malloc((size_t)nz * sizeof(int32_t));
  z->mult = calloc((size_t)nz, sizeof(int32_t));
  z->ps = calloc(n1, sizeof(int32_t));
  z->ns = calloc(n1, sizeof(int32_t));
  z->pset = malloc(s1 * sizeof(int32_t));
  z->nset = malloc(s1 * sizeof(int32_t));
  z->pe = malloc(s1 * sizeof(double));
  z->ne = malloc(s1 * sizeof(double));
  z->sp = calloc((size_t)nth * nz, sizeof(gsea_acc));
  z->sn = calloc((size_t)nth * nz, sizeof(gsea_acc));
  z->np = calloc((size_t)nth * nz, sizeof(int64_t));
  z->nn = calloc((size_t)nth * nz, sizeof(int64_t));
  z->bp = calloc((size_t)nth * (s1 + nz), sizeof(int64_t));
  z->bn = calloc((size_t)nth * (s1 + nz), sizeof(int64_t));
  es_idx *tmp = malloc(s1 * sizeof(es_idx));
  if (!z->rep || !z->mult || !z->ps || !z->ns || !z->pset || !z->nset || !z->pe || !z->ne || !z->sp || !z->sn ||
      !z->np || !z->nn || !z->bp || !z->bn || !tmp) {
    free(tmp);
    return 0;
  }
  for (int32_t q = 0; q < nz; q++) z->rep[q] = -1;
  for (int32_t s = 0; s < S; s++) {
    int32_t q = sz->of_set[s];
    if (z->rep[q] < 0) z->rep[q] = s;
    z->mult[q]++;
    if (es[s] >= 0) z->ps[q + 1]++; else z->ns[q + 1]++;
  }
  for (int32_t q = 0; q < nz; q++) { z->ps[q + 1] += z->ps[q]; z->ns[q + 1] += z->ns[q]; }
  for (int32_t s = 0; s < S; s++) { tmp[s].q = sz->of_set[s]; tmp[s].s = s; tmp[s].e = es[s]; }
  qsort(tmp, (size_t)S, sizeof(es_idx), cmp_es_idx); /* by size, then ES */
  int32_t np = 0, nn = 0;
  for (int32_t i = 0; i < S; i++) {
    if (tmp[i].e >= 0) { z->pe[np] = tmp[i].e; z->pset[np++] = tmp[i].s; }
    else { z->ne[nn] = tmp[i].e; z->nset[nn++] = tmp[i].s; }
  }
  free(tmp);
  return 1;
}

/* Pass 1 over a batch of n permutations, nz ES each (see stats_pass1). */
static void zstats_pass1(zstats *z, const double *nbz, int64_t n) {
  int32_t nz = z->nz;
#pragma omp parallel for num_threads(z->nth) schedule(static)
  for (int64_t b = 0; b < n; b++) {
    int th = omp_get_thread_num();
    gsea_acc *sp = z->sp + (size_t)th * nz, *sn = z->sn + (size_t)th * nz;
    int64_t *np = z->np + (size_t)th * nz, *nn = z->nn + (size_t)th * nz;
    int64_t *bp = z->bp + (size_t)th * ((size_t)z->ps[nz] + nz), *bn = z->bn + (size_t)th * ((size_t)z->ns[nz] + nz);
    const double *row = nbz + (size_t)b * nz;
    for (int32_t q = 0; q < nz; q++) {
      double v = row[q];
      if (v >= 0) { /* beyond the sets of ES in [0, v) */
        gsea_acc_add(&sp[q], v);
        np[q]++;
        int32_t lo = z->ps[q];
        bp[lo + q + gsea_count_lt(z->pe + lo, z->ps[q + 1] - lo, v)]++;
      }
      if (v <= 0) { /* beyond the sets of ES in (v, 0) */
        gsea_acc_add(&sn[q], v);
        nn[q]++;
        int32_t lo = z->ns[q];
        bn[lo + q + gsea_count_le(z->ne + lo, z->ns[q + 1] - lo, v)]++;
      }
    }
  }
}

/* End of pass 1: the threads' sums into the sets of each size, and each
 * set's count of nulls beyond its ES from the bins. */
static void zstats_end1(const zstats *z, stats *t) {
  int32_t nz = z->nz;
  size_t wp = (size_t)z->ps[nz] + nz, wn = (size_t)z->ns[nz] + nz;
  for (int32_t q = 0; q < nz; q++) {
    int32_t s = z->rep[q];
    for (int th = 0; th < z->nth; th++) {
      gsea_acc_merge(&t->sum_pos[s], z->sp[(size_t)th * nz + q]);
      gsea_acc_merge(&t->sum_neg[s], z->sn[(size_t)th * nz + q]);
      t->n_pos[s] += z->np[(size_t)th * nz + q];
      t->n_neg[s] += z->nn[(size_t)th * nz + q];
    }
    /* ES >= 0, ascending: set i is beyond the nulls of bins > i */
    int32_t lo = z->ps[q], m = z->ps[q + 1] - lo;
    int64_t acc = 0;
    for (int32_t i = m; i >= 0; i--) {
      if (i < m) t->n_ext[z->pset[lo + i]] += acc;
      for (int th = 0; th < z->nth; th++) acc += z->bp[(size_t)th * wp + lo + q + i];
    }
    /* ES < 0, ascending: set i is beyond the nulls of bins <= i */
    lo = z->ns[q];
    m = z->ns[q + 1] - lo;
    acc = 0;
    for (int32_t i = 0; i < m; i++) {
      for (int th = 0; th < z->nth; th++) acc += z->bn[(size_t)th * wn + lo + q + i];
      t->n_ext[z->nset[lo + i]] += acc;
    }
  }
}

/* Buckets over a sorted array a[0..n) of values >= 0, so that the count of
 * a <= x needs a search of a few entries only: bucket b of width 1/scale
 * holds that count between lo[b] and hi[b], with a margin of one bucket
 * on each side for the rounding of x * scale (pass 2 counts 2^20 x sizes
 * values; the binary search over all observed NES was most of its time). */
static int bucket_make(const double *a, int32_t n, int32_t *nb, double *scale, int32_t **lo, int32_t **hi) {
  int32_t m = 4 * n + 16;
  double top = n > 0 ? a[n - 1] : 0;
  *nb = m;
  *scale = top > 0 && isfinite(top) ? (double)(m - 2) / top : 1.0;
  *lo = malloc((size_t)m * sizeof(int32_t));
  *hi = malloc((size_t)m * sizeof(int32_t));
  if (!*lo || !*hi) return 0;
  for (int32_t b = 0; b < m; b++) {
    (*lo)[b] = b > 0 ? gsea_count_le(a, n, (double)(b - 1) / *scale) : 0;
    (*hi)[b] = b < m - 1 ? gsea_count_le(a, n, (double)(b + 2) / *scale) : n;
  }
  return 1;
}

/* gsea_count_le(a, n, x) for x >= 0 through the buckets, or with strict
 * gsea_count_lt(a, n, x) for x > 0 (the margins hold for both). */
static inline int32_t bucket_find(const double *a, int32_t nb, double scale, const int32_t *lo, const int32_t *hi,
                                  double x, int strict) {
  double f = x * scale;
  int32_t b = f < (double)(nb - 1) ? (int32_t)f : nb - 1;
  return lo[b] + (strict ? gsea_count_lt(a + lo[b], hi[b] - lo[b], x) : gsea_count_le(a + lo[b], hi[b] - lo[b], x));
}

/* The buckets of opos and oneg, once; without them (no memory) the
 * searches run over the whole arrays. */
static void stats_buckets(stats *t) {
  if (t->bplo) return;
  if (!bucket_make(t->opos, t->kp, &t->nbp, &t->sbp, &t->bplo, &t->bphi) ||
      !bucket_make(t->oneg, t->kn, &t->nbn, &t->sbn, &t->bnlo, &t->bnhi)) {
    free(t->bplo); free(t->bphi); free(t->bnlo); free(t->bnhi);
    t->bplo = t->bphi = t->bnlo = t->bnhi = NULL;
  }
}

/* Pass 2 over permutations [first, first + n): normalised null ES, the per
 * permutation max/min (FWER) and the FDR numerators.  A null NES v >= 0
 * adds 1/#{null NES >= 0 in its permutation} to every observed NES <= v;
 * that weight goes into bin #{observed <= v} and suffix sums finish it.
 * The weights are integers (gsea_fdr_weight), so the sums do not depend on
 * the order: the GPU's pass gives the same bits.  Columns: the S sets, or
 * (colset, colmult) the sizes of a gene permutation (zstats). */
static void stats_pass2(stats *t, const double *nb, int32_t ncol, const int32_t *colset, const int32_t *colmult,
                        int64_t first, int64_t n, int nth) {
  size_t wp = (size_t)t->kp + 1, wn = (size_t)t->kn + 1;
  int64_t vpos = 0, vneg = 0;
  stats_buckets(t);
  memset(t->thp, 0, (size_t)nth * wp * sizeof(uint64_t));
  memset(t->thn, 0, (size_t)nth * wn * sizeof(uint64_t));
#pragma omp parallel for num_threads(nth) schedule(dynamic, 64) reduction(+ : vpos, vneg)
  for (int64_t b = 0; b < n; b++) {
    uint64_t *hp = t->thp + (size_t)omp_get_thread_num() * wp;
    uint64_t *hn = t->thn + (size_t)omp_get_thread_num() * wn;
    double *zs = t->zb + (size_t)omp_get_thread_num() * t->S;
    const double *col = nb + (size_t)b * ncol;
    double mx = -INFINITY, mn = INFINITY;
    int32_t mp = 0, mm = 0;
    for (int32_t c = 0; c < ncol; c++) {
      int32_t s = colset ? colset[c] : c, m = colmult ? colmult[c] : t->rep ? t->mult[s] : 1;
      if (!m) continue;
      double z = gsea_null_nes(col[c], t->mpos[s], t->mneg[s]);
      zs[c] = z;
      if (isnan(z)) continue;
      if (z > mx) mx = z;
      if (z < mn) mn = z;
      if (z >= 0) mp += m;
      if (z <= 0) mm += m;
    }
    t->pmax[first - 1 + b] = mx;
    t->pmin[first - 1 + b] = mn;
    if (mp) vpos++;
    if (mm) vneg++;
    uint64_t wpv = mp ? gsea_fdr_weight(mp, t->fbits) : 0, wnv = mm ? gsea_fdr_weight(mm, t->fbits) : 0;
    for (int32_t c = 0; c < ncol; c++) {
      int32_t s = colset ? colset[c] : c;
      uint64_t m = colmult ? (uint64_t)colmult[c] : t->rep ? (uint64_t)t->mult[s] : 1;
      if (!m) continue;
      double z = zs[c];
      if (isnan(z)) continue;
      if (!t->bplo) {
        if (z >= 0) hp[gsea_count_le(t->opos, t->kp, z)] += m * wpv;
        if (z <= 0) hn[gsea_count_le(t->oneg, t->kn, -z)] += m * wnv;
        continue;
      }
      if (z >= 0) hp[bucket_find(t->opos, t->nbp, t->sbp, t->bplo, t->bphi, z, 0)] += m * wpv;
      if (z <= 0) hn[bucket_find(t->oneg, t->nbn, t->sbn, t->bnlo, t->bnhi, -z, 0)] += m * wnv;
    }
  }
  for (int i = 0; i < nth; i++) {
    for (size_t k = 0; k < wp; k++) t->hp[k] += t->thp[(size_t)i * wp + k];
    for (size_t k = 0; k < wn; k++) t->hn[k] += t->thn[(size_t)i * wn + k];
  }
  t->valid_pos += vpos;
  t->valid_neg += vneg;
}

/* FDR and FWER of every set once all permutations have passed.  FWER:
 * the fraction of permutations whose max null NES exceeds the set's NES
 * (min below it); each permutation's max falls into the bin of the observed
 * NES below it, and suffix sums give every set's count, so the 2^20 maxima
 * need no sort. */
static int stats_finish(stats *t, double *fdr, double *fwer) {
  int32_t S = t->S, kp = t->kp, kn = t->kn;
  int64_t N = t->nperm;
  /* suffix sums: cp[i] = sum of bins > i, the numerator of the i-th
   * smallest observed value; gp[i] = permutations whose max exceeds it */
  uint64_t *cp = malloc(((size_t)kp + 1) * sizeof(uint64_t));
  uint64_t *cn = malloc(((size_t)kn + 1) * sizeof(uint64_t));
  int64_t *gp = calloc((size_t)kp + 1, sizeof(int64_t));
  int64_t *gn = calloc((size_t)kn + 1, sizeof(int64_t));
  if (!cp || !cn || !gp || !gn) {
    free(cp); free(cn); free(gp); free(gn);
    return 0;
  }
  cp[kp] = 0;
  for (int32_t i = kp - 1; i >= 0; i--) cp[i] = cp[i + 1] + t->hp[i + 1];
  cn[kn] = 0;
  for (int32_t i = kn - 1; i >= 0; i--) cn[i] = cn[i + 1] + t->hn[i + 1];
  /* each permutation's max > opos[i] for every i below its bin; the
   * threads count into their own rows of thp / thn (kp, kn <= S) */
  stats_buckets(t);
  size_t wp = (size_t)kp + 1, wn = (size_t)kn + 1;
  memset(t->thp, 0, (size_t)t->nth * wp * sizeof(uint64_t));
  memset(t->thn, 0, (size_t)t->nth * wn * sizeof(uint64_t));
#pragma omp parallel for num_threads(t->nth) schedule(static)
  for (int64_t b = 0; b < N; b++) {
    uint64_t *tp = t->thp + (size_t)omp_get_thread_num() * wp, *tn = t->thn + (size_t)omp_get_thread_num() * wn;
    double x = t->pmax[b], y = -t->pmin[b];
    /* x <= 0 exceeds no opos (all >= 0), and the buckets take x > 0 */
    tp[x <= 0 ? 0 : t->bplo ? bucket_find(t->opos, t->nbp, t->sbp, t->bplo, t->bphi, x, 1) : gsea_count_lt(t->opos, kp, x)]++;
    tn[y <= 0 ? 0 : t->bnlo ? bucket_find(t->oneg, t->nbn, t->sbn, t->bnlo, t->bnhi, y, 1) : gsea_count_lt(t->oneg, kn, y)]++;
  }
  for (int i = 0; i < t->nth; i++) {
    for (size_t k = 0; k < wp; k++) gp[k] += (int64_t)t->thp[(size_t)i * wp + k];
    for (size_t k = 0; k < wn; k++) gn[k] += (int64_t)t->thn[(size_t)i * wn + k];
  }
  for (int32_t i = kp - 1; i >= 0; i--) gp[i] += gp[i + 1]; /* gp[i]: bins >= i */
  for (int32_t i = kn - 1; i >= 0; i--) gn[i] += gn[i + 1];
  for (int32_t s = 0; s < S; s++) {
    double v = t->nes[s];
    if (isnan(v)) { fdr[s] = NAN; fwer[s] = NAN; continue; }
    if (v >= 0) {
      int32_t i = gsea_count_lt(t->opos, kp, v);              /* first observed == v */
      double num = t->valid_pos ? ldexp((double)cp[i], -t->fbits) / (double)t->valid_pos : 0;
      double den = (double)(kp - i) / (double)kp;          /* observed >= v */
      double q = num / den;
      fdr[s] = q < 1 ? q : 1;
      fwer[s] = (double)gp[i + 1] / (double)N;             /* max > v */
    } else {
      int32_t i = gsea_count_lt(t->oneg, kn, -v);
      double num = t->valid_neg ? ldexp((double)cn[i], -t->fbits) / (double)t->valid_neg : 0;
      double den = (double)(kn - i) / (double)kn;
      double q = num / den;
      fdr[s] = q < 1 ? q : 1;
      fwer[s] = (double)gn[i + 1] / (double)N;             /* min < v */
    }
  }
  free(cp); free(cn); free(gp); free(gn);
  return 1;
}

/* ---------------------------------------------------------------------- */

sbg_status sbg_gsea_stats_table(int32_t n_sets, int64_t nperm, const double *es,
                                const double *null_es, double *nes, double *pval,
                                double *fdr, double *fwer, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  stats t;
  int nth = ctx->n_threads > 0 ? ctx->n_threads : 1;
  for (int64_t i = 0; i < (int64_t)n_sets * nperm; i++) /* the exact sums need |ES| < 2 */
    if (!gsea_acc_fits(null_es[i]))
      return sbg_fail(ctx, SBG_ERR_INPUT, "null ES of set %d, permutation %lld is %g: the exact sums hold |ES| < 2 only "
                      "(enrichment scores lie in [-1, 1])", (int)(i % n_sets) + 1, (long long)(i / n_sets) + 1, null_es[i]);
  if (!stats_alloc(&t, n_sets, nperm, es, nth)) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics of %d sets x %lld permutations",
                  (int)n_sets, (long long)nperm);
    goto done;
  }
  stats_pass1(&t, null_es, nperm, nth);
  stats_end_pass1(&t, nes, pval);
  stats_pass2(&t, null_es, n_sets, NULL, NULL, 1, nperm, nth);
  if (!stats_finish(&t, fdr, fwer)) st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the FWER tables");
done:
  stats_free(&t);
  return st;
}

sbg_status sbg_gsea_combine1(int32_t n_sets, int64_t nperm, const double *es, int n_parts,
                             const gsea_acc *const *sum_pos, const gsea_acc *const *sum_neg,
                             const int64_t *const *n_pos, const int64_t *const *n_neg,
                             const int64_t *const *n_ext, int plus1, double *nes, double *pval, double *mpos,
                             double *mneg, double *opos, double *oneg, int32_t *kp, int32_t *kn,
                             sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  stats t;
  if (!stats_alloc(&t, n_sets, nperm, es, 1)) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics of %d sets", (int)n_sets);
    goto done;
  }
  for (int i = 0; i < n_parts; i++)
    for (int32_t s = 0; s < n_sets; s++) {
      gsea_acc_merge(&t.sum_pos[s], sum_pos[i][s]);
      gsea_acc_merge(&t.sum_neg[s], sum_neg[i][s]);
      t.n_pos[s] += n_pos[i][s];
      t.n_neg[s] += n_neg[i][s];
      t.n_ext[s] += n_ext[i][s];
    }
  t.plus1 = plus1;
  stats_end_pass1(&t, nes, pval);
  memcpy(mpos, t.mpos, (size_t)n_sets * sizeof(double));
  memcpy(mneg, t.mneg, (size_t)n_sets * sizeof(double));
  memcpy(opos, t.opos, (size_t)t.kp * sizeof(double));
  memcpy(oneg, t.oneg, (size_t)t.kn * sizeof(double));
  *kp = t.kp;
  *kn = t.kn;
done:
  stats_free(&t);
  return st;
}

sbg_status sbg_gsea_combine2(int32_t n_sets, int64_t nperm, const double *nes, const double *opos,
                             int32_t kp, const double *oneg, int32_t kn, int n_parts,
                             const uint64_t *const *hp, const uint64_t *const *hn,
                             int64_t valid_pos, int64_t valid_neg, const double *pmax,
                             const double *pmin, double *fdr, double *fwer, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  stats t;
  if (!stats_alloc(&t, n_sets, nperm, nes, 1)) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics of %d sets", (int)n_sets);
    goto done;
  }
  memcpy(t.nes, nes, (size_t)n_sets * sizeof(double));
  memcpy(t.opos, opos, (size_t)kp * sizeof(double));
  memcpy(t.oneg, oneg, (size_t)kn * sizeof(double));
  t.kp = kp;
  t.kn = kn;
  for (int i = 0; i < n_parts; i++) {
    for (int32_t k = 0; k <= kp; k++) t.hp[k] += hp[i][k];
    for (int32_t k = 0; k <= kn; k++) t.hn[k] += hn[i][k];
  }
  t.valid_pos = valid_pos;
  t.valid_neg = valid_neg;
  memcpy(t.pmax, pmax, (size_t)nperm * sizeof(double));
  memcpy(t.pmin, pmin, (size_t)nperm * sizeof(double));
  if (!stats_finish(&t, fdr, fwer)) st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the FWER tables");
done:
  stats_free(&t);
  return st;
}

/* ES of permutations [first, first + n) on the CPU into nb (S x n). */
static sbg_status cpu_batch(const shared *sh, ws *wss, int64_t first, int64_t n, double *nb,
                            sbg_ctx *ctx) {
  int32_t S = sh->in->n_sets;
#pragma omp parallel for num_threads(ctx->n_threads) schedule(dynamic, 1)
  for (int64_t b = 0; b < n; b++) {
    perm_es(sh, &wss[omp_get_thread_num()], first + b, nb + (size_t)b * S, NULL);
  }
  return SBG_OK;
}

/* Gene permutations [first, first + n): the null ES of each distinct set
 * size (nz x n) at *out, on the CPU into room or, with pg, on a GPU (into
 * the handle's memory, copied into room unless room is NULL). */
static sbg_status null_sizes_batch(const shared *sh, ws *wss, sbg_gsea_pre_gpu *pg, int64_t first, int64_t n,
                                   double *room, const double **out, sbg_ctx *ctx) {
  int32_t nz = sh->sizes->n;
  if (pg) {
    sbg_status st = sbg_gsea_pre_gpu_batch(pg, first, n, out, ctx);
    if (st == SBG_OK && room) {
      memcpy(room, *out, (size_t)n * (size_t)nz * sizeof(double));
      *out = room;
    }
    return st;
  }
#pragma omp parallel for num_threads(ctx->n_threads) schedule(dynamic, 1)
  for (int64_t b = 0; b < n; b++)
    sbg_gsea_prerank_null(sh->sizes, sh->wr, sh->in->n_genes, sh->p->seed, first + b,
                          &wss[omp_get_thread_num()].pr, room + (size_t)b * nz);
  *out = room;
  return SBG_OK;
}

/* ---------------------------------------------------------------------- */
/* The driver: a run is a sequence of named steps over one struct that
 * owns every buffer (all NULL at the start; run_close() frees them). */

typedef struct gsea_run {
  const sbg_gsea_input *in;
  const sbg_gsea_params *p;
  sbg_gsea_result *out;
  int use_gpu, nth;
  int32_t G, P, S;
  int64_t M, nperm;
  double *xc, *mu, *t1, *t2;   /* centred data and its totals */
  int32_t *gs_start, *gs_sets; /* gene -> sets index */
  double *inv_nmiss, *wr;
  int32_t *repv, *multv;       /* gene permutation: representative sets */
  sbg_gsea_sizes sizes;
  ws *wss;                     /* per-thread workspaces */
  shared sh;
  stats t;
  /* workers: the CPU, or each GPU with permutations [lo, hi) in batches of bw */
  sbg_gsea_gpu *gpus[SBG_GSEA_MAX_DEVICES];
  int64_t lo[SBG_GSEA_MAX_DEVICES], hi[SBG_GSEA_MAX_DEVICES], bw[SBG_GSEA_MAX_DEVICES];
  int nw;
  int64_t B, bmax, r_lo, r_n;
  double *nb;                  /* a host batch of null ES (bmax x S), or NULL */
  double *hcache;              /* CPU: pass 1's ES of permutations [r_lo, r_lo + hcache_cols), for pass 2 */
  int64_t hcache_cols;
  int dev_stats;               /* the statistics run on the devices */
  /* gene permutations: the shared null on the GPUs (gsea_preranked_gpu.cu),
   * the statistics by set size (zstats), on the devices too (zdev) */
  sbg_gsea_pre_gpu *pgs[SBG_GSEA_MAX_DEVICES];
  int pre_gpu, zdev, bysize, zkeep;
  zstats zs;
  double *zbatch, *zcache;     /* a batch of ES by size; pass 1's, kept for pass 2 */
  double *zmpos;               /* per size: mpos, then mneg, for the devices' pass 2 */
  double t0, work, done_w;     /* stage clock; progress */
} gsea_run;

static sbg_status run_check(const gsea_run *R, sbg_ctx *ctx) {
  const sbg_gsea_input *in = R->in;
  int32_t G = R->G, S = R->S;
  if (G < 2 || S < 1 || R->nperm < 1 || (!R->p->gene_perm && (R->P < 2 || !in->expr)) ||
      (R->p->gene_perm && !in->expr && !in->ranking))
    return sbg_fail(ctx, SBG_ERR_INPUT, "gsea engine: inconsistent input");
  for (int32_t s = 0; s < S; s++) {
    int32_t k = in->set_start[s + 1] - in->set_start[s];
    if (k < 1 || k >= G) return sbg_fail(ctx, SBG_ERR_INPUT, "gene set %d has %d genes of %d", s + 1, k, G);
  }
  for (int64_t i = 0; i < R->M; i++)
    if (in->set_genes[i] < 0 || in->set_genes[i] >= G)
      return sbg_fail(ctx, SBG_ERR_INPUT, "gene index out of range in the gene sets");
  return SBG_OK;
}

/* Genes a block of the centring: its sums stay in the L1 cache. */
#define CENTRE_GENES 512

/* Centred data and the totals every permutation shares. */
static sbg_status run_centre(gsea_run *R, sbg_ctx *ctx) {
  const sbg_gsea_input *in = R->in;
  int32_t G = R->G, P = R->P;
  if (in->expr) {
    R->xc = malloc((size_t)G * (size_t)P * sizeof(double));
    R->mu = calloc((size_t)G, sizeof(double));
    R->t1 = calloc((size_t)G, sizeof(double));
    R->t2 = calloc((size_t)G, sizeof(double));
    if (!R->xc || !R->mu || !R->t1 || !R->t2) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the centred data");
    /* blocks of genes on the threads, each gene's sums over the samples
     * in order whatever the threads */
#pragma omp parallel for num_threads(R->nth) schedule(static)
    for (int32_t g0 = 0; g0 < G; g0 += CENTRE_GENES) {
      const int32_t g1 = G - g0 < CENTRE_GENES ? G : g0 + CENTRE_GENES;
      const double *e = in->expr;
      double *mu = R->mu, *t1 = R->t1, *t2 = R->t2, *xc = R->xc;
      for (int32_t i = 0; i < P; i++)
        for (int32_t g = g0; g < g1; g++) mu[g] += e[(size_t)i * G + g];
      for (int32_t g = g0; g < g1; g++) mu[g] /= P;
      for (int32_t i = 0; i < P; i++)
        for (int32_t g = g0; g < g1; g++) {
          double x = e[(size_t)i * G + g] - mu[g];
          xc[(size_t)i * G + g] = x;
          t1[g] += x;
          t2[g] += x * x;
        }
    }
    int32_t na = 0;
    for (int32_t i = 0; i < P; i++) na += in->labels[i] == 0;
    R->sh.prep.n_a = na;
    R->sh.prep.n_b = P - na;
    R->sh.prep.small_label = P - na <= na ? 1 : 0;
  }
  R->sh.prep.xc = R->xc; R->sh.prep.mu = R->mu; R->sh.prep.t1 = R->t1; R->sh.prep.t2 = R->t2;
  R->sh.prep.metric0 = R->out->metric;
  return SBG_OK;
}

/* The gene -> sets index for the sweep, 1 / (N - k) per set, and the
 * per-thread workspaces. */
static sbg_status run_index(gsea_run *R, sbg_ctx *ctx) {
  const sbg_gsea_input *in = R->in;
  int32_t G = R->G, S = R->S;
  R->gs_start = calloc((size_t)G + 1, sizeof(int32_t));
  R->gs_sets = malloc((size_t)(R->M > 0 ? R->M : 1) * sizeof(int32_t));
  R->wss = calloc((size_t)R->nth, sizeof(ws));
  R->inv_nmiss = malloc((size_t)S * sizeof(double));
  int32_t *fill = malloc((size_t)G * sizeof(int32_t));
  if (!R->gs_start || !R->gs_sets || !R->wss || !R->inv_nmiss || !fill) {
    free(fill);
    return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the gene set index");
  }
  for (int64_t i = 0; i < R->M; i++) R->gs_start[in->set_genes[i] + 1]++;
  for (int32_t g = 0; g < G; g++) R->gs_start[g + 1] += R->gs_start[g];
  memcpy(fill, R->gs_start, (size_t)G * sizeof(int32_t));
  for (int32_t s = 0; s < S; s++)
    for (int32_t i = in->set_start[s]; i < in->set_start[s + 1]; i++) R->gs_sets[fill[in->set_genes[i]]++] = s;
  free(fill);
  R->sh.gs_start = R->gs_start;
  R->sh.gs_sets = R->gs_sets;
  for (int32_t s = 0; s < S; s++) R->inv_nmiss[s] = 1.0 / ((double)G - (double)(in->set_start[s + 1] - in->set_start[s]));
  R->sh.inv_nmiss = R->inv_nmiss;
  for (int i = 0; i < R->nth; i++)
    if (!ws_alloc(&R->wss[i], G, R->P, S, R->M)) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the work space");
  return SBG_OK;
}

/* Observed: metric, ranking, ES and its position. */
static void run_observed(gsea_run *R) {
  const sbg_gsea_params *p = R->p;
  sbg_gsea_result *out = R->out;
  int32_t G = R->G;
  if (R->in->ranking) {
    for (int32_t g = 0; g < G; g++) out->metric[g] = R->in->ranking[g] == 0 ? 0.0 : R->in->ranking[g];
  } else {
    sbg_gsea_params p0 = *p;
    p0.gene_perm = 0;
    R->sh.p = &p0;
    permuted_metric(&R->sh, &R->wss[0], 0);
    R->sh.p = p;
    memcpy(out->metric, R->wss[0].m, (size_t)G * sizeof(double));
  }
  /* perm 0 through the same path as the null (gene_perm reads metric0) */
  sbg_gsea_params p0 = *p;
  p0.gene_perm = 1;
  R->sh.p = &p0;
  perm_es(&R->sh, &R->wss[0], 0, out->es, out->rank_at_max);
  R->sh.p = p;
  memcpy(out->order, R->wss[0].ord, (size_t)G * sizeof(int32_t));
}

/* Gene permutation: the null of a set depends on its size alone, so one
 * draw per permutation serves every set (gsea_preranked.c,
 * gsea_preranked_gpu.cu), with the same table on either. */
static sbg_status run_gene_null(gsea_run *R, sbg_ctx *ctx) {
  const sbg_gsea_params *p = R->p;
  int32_t G = R->G;
  R->pre_gpu = R->use_gpu;
  R->use_gpu = 0;
  R->wr = malloc((size_t)G * sizeof(double));
  if (!R->wr || !sbg_gsea_sizes_make(&R->sizes, R->in->set_start, R->S))
    return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the shared null");
  for (int32_t r = 0; r < G; r++) R->wr[r] = gsea_weight(R->out->metric[R->out->order[r]], p->weight);
  R->sh.wr = R->wr;
  R->sh.sizes = &R->sizes;
  return SBG_OK;
}

/* Batch size: about 0.1 s of CPU work per batch, for polling. */
/* A batch of permutations: whole chunks, at most 65536 (the host rounds'
 * and the devices' work per launch). */
static int64_t batch_round(int64_t B) {
  B = (B + CHUNK - 1) / CHUNK * CHUNK;
  if (B < CHUNK) B = CHUNK;
  return B > 65536 ? 65536 : B;
}

static void run_batch_size(gsea_run *R) {
  const sbg_gsea_params *p = R->p;
  int64_t B = p->batch;
  if (B <= 0) {
    const sbg_gsea_prep *pr = &R->sh.prep;
    double ops = (double)R->G * (p->gene_perm ? 20.0 : 2.0 * (pr->n_a < pr->n_b ? pr->n_a : pr->n_b) + 20.0) +
                 6.0 * (double)R->M;
    B = (int64_t)(2e8 * R->nth / ops);
  }
  B = batch_round(B);
  if (B > R->nperm) B = (R->nperm + CHUNK - 1) / CHUNK * CHUNK;
  R->B = B;
}

/* Permutations whose pass-1 null ES (`per` doubles each) the host keeps
 * for pass 2, which then reads them instead of computing them again:
 * cache_max when the caller set it, else as many as fill 1 GiB. */
static int64_t host_keep_perms(const gsea_run *R, int64_t per) {
  return R->p->cache_max >= 0 ? R->p->cache_max : ((int64_t)1 << 27) / per;
}

/* Workers: the CPU, or each GPU with a contiguous range of this call's
 * permutations [lo, hi); every statistic merges exactly (integer sums
 * and counts, per-permutation extremes by index), so the split does not
 * change a bit.  With a phase, the call runs one R worker's share. */
static sbg_status run_workers(gsea_run *R, sbg_ctx *ctx) {
  const sbg_gsea_params *p = R->p;
  const sbg_gsea_result *out = R->out;
  int64_t r_hi = p->phase ? p->perm_hi : R->nperm + 1;
  R->r_lo = p->phase ? p->perm_lo : 1;
  R->r_n = r_hi - R->r_lo;
  if (R->r_lo < 1 || r_hi > R->nperm + 1 || R->r_n < 1 || (p->phase == 2 && !p->norm) || (p->phase && out->null_es))
    return sbg_fail(ctx, SBG_ERR_INPUT, "gsea engine: bad permutation range or phase");
  int nw = R->use_gpu ? sbg_ctx_n_devices(ctx) : 1;
  if (nw > SBG_GSEA_MAX_DEVICES) nw = SBG_GSEA_MAX_DEVICES;
  if (nw > R->r_n) nw = (int)R->r_n;
  R->nw = nw;
  for (int w = 0; w < nw; w++) {
    R->lo[w] = R->r_lo + (int64_t)((double)R->r_n * w / nw);
    R->hi[w] = R->r_lo + (int64_t)((double)R->r_n * (w + 1) / nw);
    R->bw[w] = R->B;
  }
  for (int w = 0; w < nw && R->use_gpu; w++) {
    /* batches of at most 2^15 (grid y <= 65535); without a kept table the
     * device keeps pass 1's ES for pass 2 where it has room */
    int64_t range = R->hi[w] - R->lo[w];
    int64_t max_b = (range + CHUNK - 1) / CHUNK * CHUNK;
    int64_t keep = out->null_es || p->phase ? 0 : p->cache_max >= 0 && p->cache_max < range ? p->cache_max : range;
    int dev = sbg_ctx_device_at(ctx, w);
    if (p->batch > 0 && R->B < max_b) max_b = R->B;
    sbg_status st = sbg_gsea_gpu_open(R->in, p, &R->sh.prep, dev, max_b < (1 << 15) ? max_b : 1 << 15, keep,
                                      &R->gpus[w], ctx);
    if (st != SBG_OK) return st;
    R->bw[w] = sbg_gsea_gpu_max_batch(R->gpus[w]);
  }
  if (R->pre_gpu) {
    nw = sbg_ctx_n_devices(ctx);
    if (nw > SBG_GSEA_MAX_DEVICES) nw = SBG_GSEA_MAX_DEVICES;
    if (nw > R->r_n) nw = (int)R->r_n;
    R->nw = nw;
    for (int w = 0; w < nw; w++) {
      R->lo[w] = R->r_lo + (int64_t)((double)R->r_n * w / nw);
      R->hi[w] = R->r_lo + (int64_t)((double)R->r_n * (w + 1) / nw);
      sbg_status st = sbg_gsea_pre_gpu_open(&R->sizes, R->wr, R->G, p->seed, sbg_ctx_device_at(ctx, w), R->lo[w],
                                            R->hi[w], p->batch > 0 ? R->B : R->hi[w] - R->lo[w], &R->pgs[w], ctx);
      if (st != SBG_OK) return st;
      R->bw[w] = R->pgs[w] ? sbg_gsea_pre_gpu_max_batch(R->pgs[w]) : R->B; /* NULL: sets too large, drawn here */
    }
  }
  R->bmax = 0;
  for (int w = 0; w < nw; w++) if (R->bw[w] > R->bmax) R->bmax = R->bw[w];
  /* gene permutations without a kept table: batches of ES by size, and
   * pass 2 reads pass 1's (nz per permutation, far fewer than the sets)
   * instead of drawing again when they all may be kept */
  R->bysize = p->gene_perm && !out->null_es;
  R->zkeep = R->bysize && !p->phase && R->r_n <= host_keep_perms(R, R->sizes.n);
  if (p->gene_perm) {
    if (R->zkeep) R->zcache = malloc((size_t)R->r_n * (size_t)R->sizes.n * sizeof(double));
    if (R->zkeep && !R->zcache) R->zkeep = 0;
    /* room for a batch where the CPU draws (a GPU's stay in its memory) */
    if (!R->pre_gpu || !R->pgs[0]) {
      R->zbatch = malloc((size_t)R->bmax * (size_t)R->sizes.n * sizeof(double));
      if (!R->zbatch)
        return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate a batch of %lld x %d ES", (long long)R->bmax, (int)R->sizes.n);
    }
  }
  return SBG_OK;
}

/* The statistics' tables: representatives of each set size (gene
 * permutation) and, in phase 2, pass 1's merged results from the caller. */
static sbg_status run_stats_open(gsea_run *R, sbg_ctx *ctx) {
  const sbg_gsea_params *p = R->p;
  stats *t = &R->t;
  int32_t S = R->S;
  if (!stats_alloc(t, S, R->nperm, R->out->es, R->nth)) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics");
  t->plus1 = p->gene_perm;
  if (p->gene_perm) {
    int32_t *first = malloc((size_t)R->sizes.n * sizeof(int32_t));
    R->repv = malloc((size_t)S * sizeof(int32_t));
    R->multv = calloc((size_t)S, sizeof(int32_t));
    if (!first || !R->repv || !R->multv) { free(first); return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics"); }
    for (int32_t z = 0; z < R->sizes.n; z++) first[z] = -1;
    for (int32_t s = 0; s < S; s++) {
      int32_t z = R->sizes.of_set[s];
      if (first[z] < 0) first[z] = s;
      R->repv[s] = first[z];
      R->multv[first[z]]++;
    }
    free(first);
    t->rep = R->repv;
    t->mult = R->multv;
    if (R->bysize && !zstats_alloc(&R->zs, &R->sizes, R->out->es, S, R->nth))
      return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics");
    R->zdev = R->bysize && R->nw > 0 && R->pgs[0];
    for (int w = 0; w < R->nw && R->zdev; w++) {
      int on = 0;
      sbg_status st = sbg_gsea_pre_gpu_stats(R->pgs[w], R->zs.ps, R->zs.ns, R->zs.pe, R->zs.ne, R->zs.mult, S, &on, ctx);
      if (st != SBG_OK) return st;
      R->zdev = on;
    }
    if (R->zdev) R->zkeep = 0;
  }
  if (p->phase == 2) {
    memcpy(t->mpos, p->norm->mpos, (size_t)S * sizeof(double));
    memcpy(t->mneg, p->norm->mneg, (size_t)S * sizeof(double));
    memcpy(t->opos, p->norm->opos, (size_t)p->norm->kp * sizeof(double));
    memcpy(t->oneg, p->norm->oneg, (size_t)p->norm->kn * sizeof(double));
    t->kp = p->norm->kp;
    t->kn = p->norm->kn;
  }
  return SBG_OK;
}

/* The statistics leave the devices when a device's shared memory cannot
 * hold pass 2's observed NES; then (and on the CPU) the null ES of a batch
 * come to a host buffer, unless the whole table is kept. */
static sbg_status run_host_batch(gsea_run *R, sbg_ctx *ctx) {
  for (int w = 0; w < R->nw && R->dev_stats; w++)
    if (!sbg_gsea_gpu_pass2_fits(R->gpus[w], R->t.kp, R->t.kn)) R->dev_stats = 0;
  if (R->dev_stats || R->nb || R->out->null_es || R->bysize) return SBG_OK;
  if (!R->use_gpu && !R->p->phase) {
    /* whole batches (half the time when all fit); a failed allocation
     * only means none are kept */
    int64_t cols = host_keep_perms(R, R->S);
    if (cols >= R->r_n) cols = R->r_n;
    else cols = cols / R->B * R->B;
    if (cols > 0) R->hcache = malloc((size_t)cols * (size_t)R->S * sizeof(double));
    if (R->hcache) sbg_hint_huge_pages(R->hcache, (size_t)cols * (size_t)R->S * sizeof(double));
    R->hcache_cols = R->hcache ? cols : 0;
  }
  R->nb = malloc((size_t)R->bmax * (size_t)R->S * sizeof(double));
  if (!R->nb) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate a batch of %lld x %d ES", (long long)R->bmax, (int)R->S);
  return SBG_OK;
}

/* One round of gene permutations with the statistics by size on the
 * devices (gsea_preranked_gpu.cu): no ES cross to the host. */
static sbg_status run_round_zdev(gsea_run *R, int pass, const int64_t *next, const int64_t *n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  stats *t = &R->t;
  int32_t nz = R->sizes.n;
  if (pass == 2 && !R->zmpos) {
    R->zmpos = malloc(2 * (size_t)nz * sizeof(double));
    if (!R->zmpos) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics");
    for (int32_t q = 0; q < nz; q++) {
      R->zmpos[q] = t->mpos[R->zs.rep[q]];
      R->zmpos[nz + q] = t->mneg[R->zs.rep[q]];
    }
  }
  for (int w = 0; w < R->nw; w++) {
    if (n[w] <= 0) continue;
    if (pass == 1) SBG_TRY(sbg_gsea_pre_gpu_pass1(R->pgs[w], next[w], n[w], ctx));
    else SBG_TRY(sbg_gsea_pre_gpu_pass2(R->pgs[w], next[w], n[w], R->zmpos, R->zmpos + nz, t->opos, t->kp, t->oneg,
                                        t->kn, t->fbits, t->pmax, t->pmin, ctx));
  }
done:
  return st;
}

/* One round of a pass: n[w] permutations from next[w] on every worker.
 * With the statistics on the devices, a batch is launched on every device
 * and then each is waited for; else each batch's ES come to the host. */
static sbg_status run_round(gsea_run *R, int pass, const int64_t *next, const int64_t *n, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  stats *t = &R->t;
  double *null_es = R->out->null_es;
  if (R->dev_stats) {
    for (int w = 0; w < R->nw; w++)
      if (n[w] > 0) SBG_TRY(sbg_gsea_gpu_batch(R->gpus[w], next[w], n[w], NULL, ctx));
    for (int w = 0; w < R->nw; w++) {
      if (n[w] <= 0) continue;
      if (pass == 1) SBG_TRY(sbg_gsea_gpu_pass1(R->gpus[w], R->out->es, n[w], ctx));
      else SBG_TRY(sbg_gsea_gpu_pass2(R->gpus[w], next[w], n[w], t->mpos, t->mneg, t->opos, t->kp, t->oneg, t->kn,
                                      t->fbits, t->pmax, t->pmin, ctx));
    }
    return SBG_OK;
  }
  if (R->zdev) return run_round_zdev(R, pass, next, n, ctx);
  if (R->bysize) {
    for (int w = 0; w < R->nw; w++) {
      if (n[w] <= 0) continue;
      double *room = R->zkeep ? R->zcache + (size_t)(next[w] - R->r_lo) * R->sizes.n : R->pgs[w] ? NULL : R->zbatch;
      const double *zb = room;
      if (pass == 1 || !R->zkeep) SBG_TRY(null_sizes_batch(&R->sh, R->wss, R->pgs[w], next[w], n[w], room, &zb, ctx));
      if (pass == 1) zstats_pass1(&R->zs, zb, n[w]);
      else stats_pass2(t, zb, R->sizes.n, R->zs.rep, R->zs.mult, next[w], n[w], R->nth);
    }
    return SBG_OK;
  }
  for (int w = 0; w < R->nw; w++) {
    if (n[w] <= 0) continue;
    double *batch = null_es ? null_es + (size_t)(next[w] - 1) * R->S : R->nb;
    int kept = null_es != NULL;
    if (!kept && next[w] - R->r_lo + n[w] <= R->hcache_cols) {
      batch = R->hcache + (size_t)(next[w] - R->r_lo) * R->S;
      kept = 1;
    }
    if (pass == 1 || !kept) {
      if (R->use_gpu) SBG_TRY(sbg_gsea_gpu_batch(R->gpus[w], next[w], n[w], batch, ctx));
      else if (R->pgs[w]) { /* the kept table of gene permutations on a GPU */
        const double *zb = NULL;
        SBG_TRY(null_sizes_batch(&R->sh, R->wss, R->pgs[w], next[w], n[w], NULL, &zb, ctx));
        for (int64_t b = 0; b < n[w]; b++)
          for (int32_t s = 0; s < R->S; s++) batch[(size_t)b * R->S + s] = zb[(size_t)b * R->sizes.n + R->sizes.of_set[s]];
      } else SBG_TRY(cpu_batch(&R->sh, R->wss, next[w], n[w], batch, ctx));
    }
    if (pass == 1) stats_pass1(t, batch, n[w], R->nth);
    else stats_pass2(t, batch, R->S, NULL, NULL, next[w], n[w], R->nth);
  }
done:
  return st;
}

/* Pass 1 or 2 over the workers' ranges, round after round (pass 2
 * regenerates the same permutations, or reads the kept table). */
static sbg_status run_pass(gsea_run *R, int pass, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int64_t next[SBG_GSEA_MAX_DEVICES], n[SBG_GSEA_MAX_DEVICES];
  for (int w = 0; w < R->nw; w++) next[w] = R->lo[w];
  for (;;) {
    int any = 0;
    for (int w = 0; w < R->nw; w++) {
      n[w] = R->hi[w] - next[w] < R->bw[w] ? R->hi[w] - next[w] : R->bw[w];
      any |= n[w] > 0;
    }
    if (!any) break;
    SBG_TRY(run_round(R, pass, next, n, ctx));
    for (int w = 0; w < R->nw; w++) {
      next[w] += n[w];
      if (pass == 1 || !R->out->null_es) R->done_w += (double)n[w];
    }
    SBG_TRY(sbg_poll(ctx, R->done_w / R->work));
  }
done:
  return st;
}

/* After pass 1: the devices' sums; in phase 1 the share's sums and counts
 * go to the caller (*last set), else the NES and p-values. */
static sbg_status run_end_pass1(gsea_run *R, int *last, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  stats *t = &R->t;
  sbg_gsea_result *out = R->out;
  int32_t S = R->S;
  for (int w = 0; w < R->nw && R->zdev; w++)
    SBG_TRY(sbg_gsea_pre_gpu_pass1_result(R->pgs[w], R->zs.sp, R->zs.sn, R->zs.np, R->zs.nn, R->zs.bp, R->zs.bn, ctx));
  if (R->bysize) zstats_end1(&R->zs, t);
  if (R->dev_stats)
    for (int w = 0; w < R->nw; w++)
      SBG_TRY(sbg_gsea_gpu_pass1_result(R->gpus[w], t->sum_pos, t->sum_neg, t->n_pos, t->n_neg, t->n_ext, ctx));
  for (int w = 0; w < R->nw && R->use_gpu; w++) SBG_TRY(sbg_gsea_gpu_sequential(R->gpus[w], &out->n_sequential, ctx));
  if (R->p->phase == 1) {
    stats_share_sums(t);
    memcpy(out->sum_pos, t->sum_pos, (size_t)S * sizeof(gsea_acc));
    memcpy(out->sum_neg, t->sum_neg, (size_t)S * sizeof(gsea_acc));
    memcpy(out->n_pos, t->n_pos, (size_t)S * sizeof(int64_t));
    memcpy(out->n_neg, t->n_neg, (size_t)S * sizeof(int64_t));
    memcpy(out->n_ext, t->n_ext, (size_t)S * sizeof(int64_t));
    out->seconds[0] = now_s() - R->t0;
    *last = 1;
    return SBG_OK;
  }
  stats_end_pass1(t, out->nes, out->pval);
  SBG_TRY(run_host_batch(R, ctx));
  out->seconds[0] = now_s() - R->t0;
  R->t0 = now_s();
done:
  return st;
}

/* After pass 2: the devices' bins; in phase 2 the share's bins and
 * extremes go to the caller, else the FDR and FWER. */
static sbg_status run_end_pass2(gsea_run *R, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  stats *t = &R->t;
  sbg_gsea_result *out = R->out;
  if (R->dev_stats)
    for (int w = 0; w < R->nw; w++)
      SBG_TRY(sbg_gsea_gpu_pass2_result(R->gpus[w], t->hp, t->hn, &t->valid_pos, &t->valid_neg, ctx));
  if (R->zdev && R->p->phase != 1)
    for (int w = 0; w < R->nw; w++)
      SBG_TRY(sbg_gsea_pre_gpu_pass2_result(R->pgs[w], t->hp, t->hn, &t->valid_pos, &t->valid_neg, ctx));
  out->seconds[1] = now_s() - R->t0;
  R->t0 = now_s();
  if (R->p->phase == 2) {
    memcpy(out->hp, t->hp, ((size_t)t->kp + 1) * sizeof(uint64_t));
    memcpy(out->hn, t->hn, ((size_t)t->kn + 1) * sizeof(uint64_t));
    out->valid_pos = t->valid_pos;
    out->valid_neg = t->valid_neg;
    memcpy(out->pmax, t->pmax + (R->r_lo - 1), (size_t)R->r_n * sizeof(double));
    memcpy(out->pmin, t->pmin + (R->r_lo - 1), (size_t)R->r_n * sizeof(double));
    return SBG_OK;
  }
  if (!stats_finish(t, out->fdr, out->fwer)) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the FWER tables");
  out->seconds[2] = now_s() - R->t0;
done:
  return st;
}

static void run_close(gsea_run *R) {
  sbg_device_warm_wait();
  for (int w = 0; w < SBG_GSEA_MAX_DEVICES; w++) {
    sbg_gsea_gpu_close(R->gpus[w]);
    sbg_gsea_pre_gpu_close(R->pgs[w]);
  }
  if (R->wss) for (int i = 0; i < R->nth; i++) ws_free(&R->wss[i]);
  free(R->wss); free(R->xc); free(R->mu); free(R->t1); free(R->t2); free(R->nb); free(R->hcache); free(R->gs_start);
  free(R->gs_sets); free(R->inv_nmiss); free(R->wr); free(R->repv); free(R->multv);
  free(R->zbatch); free(R->zcache); free(R->zmpos);
  zstats_free(&R->zs);
  sbg_gsea_sizes_free(&R->sizes);
  stats_free(&R->t);
}

sbg_status sbg_gsea_run(const sbg_gsea_input *in, const sbg_gsea_params *p,
                        sbg_gsea_result *out, int use_gpu, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  gsea_run R;
  memset(&R, 0, sizeof R);
  R.in = in;
  R.p = p;
  R.out = out;
  R.use_gpu = use_gpu;
  R.nth = ctx->n_threads > 0 ? ctx->n_threads : 1;
  R.G = in->n_genes;
  R.P = in->n_samples;
  R.S = in->n_sets;
  R.nperm = p->nperm;
  R.t0 = now_s();
  R.sh.in = in;
  R.sh.p = p;
  if (R.G >= 2 && R.S >= 1) R.M = in->set_start[R.S];
  if ((st = run_check(&R, ctx)) != SBG_OK) return st;
  if (use_gpu) { /* the contexts made meanwhile, unless R began them (gpu_warm()) */
    int devs[SBG_GSEA_MAX_DEVICES], nd = sbg_ctx_n_devices(ctx) < SBG_GSEA_MAX_DEVICES ? sbg_ctx_n_devices(ctx)
                                                                                       : SBG_GSEA_MAX_DEVICES;
    for (int i = 0; i < nd; i++) devs[i] = sbg_ctx_device_at(ctx, i);
    sbg_device_warm_begin(devs, nd);
  }
  SBG_TRY(run_centre(&R, ctx));
  SBG_TRY(run_index(&R, ctx));
  run_observed(&R);
  if (p->gene_perm) SBG_TRY(run_gene_null(&R, ctx));
  run_batch_size(&R);
  sbg_device_warm_wait();
  SBG_TRY(run_workers(&R, ctx));
  SBG_TRY(run_stats_open(&R, ctx));
  /* On the GPUs the statistics run on the devices unless the table is kept
   * or pass 2's observed NES do not fit their shared memory. */
  R.dev_stats = R.use_gpu && !out->null_es;
  R.work = (double)R.r_n * (out->null_es || p->phase ? 1 : 2);
  if (p->phase == 2) SBG_TRY(run_host_batch(&R, ctx));
  else if (!R.dev_stats && !out->null_es) SBG_TRY(run_host_batch(&R, ctx));
  for (int pass = p->phase == 2 ? 2 : 1; pass <= (p->phase == 1 ? 1 : 2); pass++) {
    SBG_TRY(run_pass(&R, pass, ctx));
    if (pass == 1) {
      int last = 0;
      SBG_TRY(run_end_pass1(&R, &last, ctx));
      if (last) goto done;
    }
  }
  SBG_TRY(run_end_pass2(&R, ctx));
done:
  run_close(&R);
  return st;
}

/* ---------------------------------------------------------------------- */
/* Many preranked signatures in one call (sbg_gsea_multi_run).  A gene
 * permutation's random rank positions depend on the seed, the gene count
 * and the set sizes alone, not on the metric, so signatures of the same
 * gene count and set sizes share each draw: every signature has its own
 * run (observed ES, statistics), and the draw of a permutation scores all
 * of a block of them (sbg_gsea_prerank_null_multi), each with the bits of
 * its own run.  Pass 1's null ES by size are kept for pass 2 where a
 * block's fit MULTI_KEEP doubles; else pass 2 draws again. */

#define MULTI_KEEP ((int64_t)1 << 26)
#define MULTI_BLOCK 64

/* One signature's run up to its passes, on one thread (the block's
 * threads share the draws and split the statistics by signature); B: the
 * batch of its host buffer, 0 for none (the GPU's block). */
static sbg_status multi_open(gsea_run *R, const sbg_gsea_input *in, const sbg_gsea_params *p,
                             sbg_gsea_result *out, int64_t B, int keep, sbg_ctx *ctx) {
  memset(R, 0, sizeof *R);
  R->in = in;
  R->p = p;
  R->out = out;
  R->nth = 1;
  R->G = in->n_genes;
  R->S = in->n_sets;
  R->nperm = p->nperm;
  R->t0 = now_s();
  R->sh.in = in;
  R->sh.p = p;
  if (R->G >= 2 && R->S >= 1) R->M = in->set_start[R->S];
  sbg_status st = run_check(R, ctx);
  if (st == SBG_OK) st = run_centre(R, ctx);
  if (st == SBG_OK) st = run_index(R, ctx);
  if (st != SBG_OK) return st;
  run_observed(R);
  /* the sweep's work space and gene index served the observed ES alone
   * (the null comes from the shared draws): a block holds many runs */
  ws_free(&R->wss[0]);
  free(R->wss); free(R->gs_start); free(R->gs_sets);
  R->wss = NULL;
  R->gs_start = R->gs_sets = NULL;
  if ((st = run_gene_null(R, ctx)) != SBG_OK) return st;
  R->r_lo = 1;
  R->r_n = R->nperm;
  R->nw = 1;
  R->lo[0] = 1;
  R->hi[0] = R->nperm + 1;
  R->B = R->bw[0] = R->bmax = B;
  R->bysize = 1;
  R->zkeep = keep;
  if (B > 0) { /* the CPU's batches (a GPU's stay on the device) */
    size_t room = keep ? (size_t)R->nperm * (size_t)R->sizes.n : (size_t)B * (size_t)R->sizes.n;
    double *buf = malloc(room * sizeof(double));
    if (!buf) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the null ES of a signature");
    if (keep) R->zcache = buf; else R->zbatch = buf;
  }
  return run_stats_open(R, ctx);
}

static void multi_close(gsea_run *R) {
  run_close(R);
  memset(R, 0, sizeof *R);
}

/* fn(Rs, v, arg, ctx) for v in [lo, hi) on the threads of ctx, each call
 * with its own messages.  Returns the first v, in order, whose call
 * failed (hi when none did), its status in *st and its message in ctx. */
typedef sbg_status (*multi_step)(gsea_run *Rs, int32_t v, void *arg, sbg_ctx *ctx);

static int32_t multi_each(gsea_run *Rs, int32_t lo, int32_t hi, multi_step fn, void *arg, sbg_status *st,
                          sbg_ctx *ctx) {
  int nth = ctx->n_threads > 0 ? ctx->n_threads : 1;
  int32_t n = hi - lo, first = hi;
  *st = SBG_OK;
  if (n <= 0) return hi;
  sbg_status *sts = malloc((size_t)n * sizeof(sbg_status));
  sbg_ctx *cs = malloc((size_t)n * sizeof(sbg_ctx));
  if (!sts || !cs) {
    free(sts); free(cs);
    *st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the signatures' work space");
    return lo;
  }
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
  for (int32_t i = 0; i < n; i++) {
    cs[i] = *ctx;
    sts[i] = fn(Rs, lo + i, arg, &cs[i]);
  }
  for (int32_t i = 0; i < n; i++) {
    if (sts[i] != SBG_OK) {
      first = lo + i;
      *st = sts[i];
      memcpy(ctx->errbuf, cs[i].errbuf, sizeof ctx->errbuf);
      break;
    }
  }
  free(sts);
  free(cs);
  return first;
}

/* The end of pass 1 (normalisers, NES, nominal p) or pass 2 (FDR, FWER)
 * of a run (multi_step; arg: the pass).  The signatures' ends run on the
 * threads (one after another they took about 2 ms a signature). */
static sbg_status multi_end_step(gsea_run *Rs, int32_t v, void *pass, sbg_ctx *ctx) {
  int last = 0;
  return *(const int *)pass == 1 ? run_end_pass1(&Rs[v], &last, ctx) : run_end_pass2(&Rs[v], ctx);
}

static sbg_status multi_end_pass(gsea_run *Rs, int32_t nb, int pass, sbg_ctx *ctx) {
  sbg_status st;
  multi_each(Rs, 0, nb, multi_end_step, &pass, &st, ctx);
  return st;
}

/* A block of nb signatures' runs through both passes. */
static sbg_status multi_block(gsea_run *Rs, int32_t nb, sbg_gsea_prerank_ws *pws, double *nrq,
                              const double **wrs, double **dst, int64_t B, int keep, double *done,
                              double work, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const sbg_gsea_params *p = Rs[0].p;
  int32_t nz = Rs[0].sizes.n, nth = ctx->n_threads > 0 ? ctx->n_threads : 1;
  int64_t N = p->nperm;
  for (int32_t v = 0; v < nb; v++) wrs[v] = Rs[v].wr;
  for (int pass = 1; pass <= 2; pass++) {
    for (int64_t first = 1; first <= N; first += B) {
      int64_t n = N + 1 - first < B ? N + 1 - first : B;
      for (int32_t v = 0; v < nb; v++) dst[v] = keep ? Rs[v].zcache + (size_t)(first - 1) * nz : Rs[v].zbatch;
      if (pass == 1 || !keep) {
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
        for (int64_t b = 0; b < n; b++) {
          int th = omp_get_thread_num();
          sbg_gsea_prerank_null_multi(&Rs[0].sizes, (const double *const *)wrs, nb, Rs[0].G, p->seed, first + b,
                                      &pws[th], nrq + (size_t)th * nb * 5, (double *const *)dst, (size_t)b * nz);
        }
      }
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
      for (int32_t v = 0; v < nb; v++) {
        if (pass == 1) zstats_pass1(&Rs[v].zs, dst[v], n);
        else stats_pass2(&Rs[v].t, dst[v], nz, Rs[v].zs.rep, Rs[v].zs.mult, first, n, 1);
      }
      *done += (double)n * nb;
      SBG_TRY(sbg_poll(ctx, *done / work));
    }
    SBG_TRY(multi_end_pass(Rs, nb, pass, ctx));
  }
done:
  return st;
}

/* Whether two signatures can share draws: the same gene count and the
 * same distinct set sizes. */
static int multi_same_sizes(const sbg_gsea_sizes *a, const sbg_gsea_sizes *b, int32_t Ga, int32_t Gb) {
  if (Ga != Gb || a->n != b->n) return 0;
  return memcmp(a->size, b->size, (size_t)a->n * sizeof(int32_t)) == 0;
}

/* Opens the runs of in[1..cap) into Rs[1..cap) (Rs[0] is open) on the
 * threads of ctx, each with its own messages.  The block (*nb) ends before
 * the first signature whose gene count, set count or set sizes differ from
 * the first's (that one starts the next block; the runs from it on are
 * closed); the first that failed before that is the error, as a loop in
 * order would give. */
struct multi_open_arg {
  const sbg_gsea_input *in;
  const sbg_gsea_params *p;
  sbg_gsea_result *out;
  int64_t B;
  int keep;
};

static sbg_status multi_open_step(gsea_run *Rs, int32_t v, void *arg, sbg_ctx *ctx) {
  const struct multi_open_arg *a = arg;
  return multi_open(&Rs[v], &a->in[v], a->p, &a->out[v], a->B, a->keep, ctx);
}

static sbg_status multi_open_rest(gsea_run *Rs, int32_t cap, const sbg_gsea_input *in, const sbg_gsea_params *p,
                                  sbg_gsea_result *out, int64_t B, int keep, int32_t *nb, sbg_ctx *ctx) {
  struct multi_open_arg a = {in, p, out, B, keep};
  sbg_status st;
  int32_t bad = multi_each(Rs, 1, cap, multi_open_step, &a, &st, ctx);
  *nb = 1;
  for (int32_t v = 1; v < cap && v != bad; v++) {
    if (Rs[v].S != Rs[0].S || !multi_same_sizes(&Rs[0].sizes, &Rs[v].sizes, Rs[0].G, Rs[v].G)) {
      st = SBG_OK; /* the block ends before a failure */
      break;
    }
    *nb = v + 1;
  }
  for (int32_t v = *nb; v < cap; v++) multi_close(&Rs[v]);
  return st;
}

/* A block of nb signatures' runs through both passes on a GPU (the
 * handle h, gsea_preranked_multi_gpu.cu): the device's sums, bins and
 * extremes go into each run's own tables, which end as its single run's
 * do. */
static sbg_status multi_gpu_block(gsea_run *Rs, int32_t nb, sbg_gsea_pm_gpu *h, double **pmax, double **pmin,
                                  double *done, double work, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t nz = Rs[0].sizes.n;
  int64_t N = Rs[0].nperm, B = sbg_gsea_pm_gpu_max_batch(h);
  double *zm = malloc(2 * (size_t)nz * sizeof(double));
  if (!zm) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the statistics");
  for (int32_t v = 0; v < nb; v++) {
    zstats *z = &Rs[v].zs;
    SBG_TRY(sbg_gsea_pm_gpu_signature(h, v, Rs[v].wr, z->ps, z->ns, z->pe, z->ne, z->mult, ctx));
  }
  for (int pass = 1; pass <= 2; pass++) {
    for (int32_t v = 0; v < nb && pass == 2; v++) { /* the normalisers by size, as run_round_zdev */
      stats *t = &Rs[v].t;
      for (int32_t q = 0; q < nz; q++) {
        zm[q] = t->mpos[Rs[v].zs.rep[q]];
        zm[nz + q] = t->mneg[Rs[v].zs.rep[q]];
      }
      SBG_TRY(sbg_gsea_pm_gpu_pass2_setup(h, v, zm, zm + nz, t->opos, t->kp, t->oneg, t->kn, ctx));
      pmax[v] = t->pmax;
      pmin[v] = t->pmin;
    }
    for (int64_t first = 1; first <= N; first += B) {
      int64_t n = N + 1 - first < B ? N + 1 - first : B;
      if (pass == 1) SBG_TRY(sbg_gsea_pm_gpu_pass1(h, nb, first, n, ctx));
      else SBG_TRY(sbg_gsea_pm_gpu_pass2(h, nb, first, n, Rs[0].t.fbits, pmax, pmin, ctx));
      *done += (double)n * nb;
      SBG_TRY(sbg_poll(ctx, *done / work));
    }
    for (int32_t v = 0; v < nb; v++) {
      zstats *z = &Rs[v].zs;
      stats *t = &Rs[v].t;
      if (pass == 1)
        SBG_TRY(sbg_gsea_pm_gpu_pass1_result(h, v, z->ps, z->ns, z->sp, z->sn, z->np, z->nn, z->bp, z->bn, ctx));
      else
        SBG_TRY(sbg_gsea_pm_gpu_pass2_result(h, v, t->hp, t->hn, &t->valid_pos, &t->valid_neg, ctx));
    }
    SBG_TRY(multi_end_pass(Rs, nb, pass, ctx));
  }
done:
  free(zm);
  return st;
}

/* The signatures on the first device of ctx, in blocks of the same gene
 * count, set count and sizes, as many as its memory takes (at most
 * MULTI_GPU_BLOCK); a signature whose kernels do not fit the device runs
 * alone (sbg_gsea_run, the same bits). */
#define MULTI_GPU_BLOCK 1024

static sbg_status multi_gpu_run(const sbg_gsea_input *in, int32_t Q, const sbg_gsea_params *p, sbg_gsea_result *out,
                                sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int dev = sbg_ctx_device_at(ctx, 0);
  gsea_run *Rs = calloc(MULTI_GPU_BLOCK, sizeof(gsea_run));
  double **pext = malloc(2 * MULTI_GPU_BLOCK * sizeof(double *));
  sbg_gsea_pm_gpu *h = NULL;
  int32_t nb = 0;
  double done_w = 0, work = 2.0 * (double)Q * (double)p->nperm;
  if (!Rs || !pext) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the signatures' work space");
    goto done;
  }
  for (int32_t v0 = 0; v0 < Q; v0 += nb) {
    int32_t want = Q - v0 < MULTI_GPU_BLOCK ? Q - v0 : MULTI_GPU_BLOCK;
    SBG_TRY(multi_open(&Rs[0], &in[v0], p, &out[v0], 0, 0, ctx));
    SBG_TRY(sbg_gsea_pm_gpu_open(&Rs[0].sizes, Rs[0].G, Rs[0].S, p->seed, p->nperm, p->batch, p->cache_max, dev,
                                   want, &h, ctx));
    if (!h) { /* too large for the device's kernels: alone */
      multi_close(&Rs[0]);
      SBG_TRY(sbg_gsea_run(&in[v0], p, &out[v0], 1, ctx));
      nb = 1;
      done_w += 2.0 * (double)p->nperm;
      continue;
    }
    SBG_TRY(multi_open_rest(Rs, sbg_gsea_pm_gpu_room(h), &in[v0], p, &out[v0], 0, 0, &nb, ctx));
    SBG_TRY(multi_gpu_block(Rs, nb, h, pext, pext + MULTI_GPU_BLOCK, &done_w, work, ctx));
    for (int32_t v = 0; v < nb; v++) multi_close(&Rs[v]);
    sbg_gsea_pm_gpu_close(h);
    h = NULL;
  }
done:
  sbg_gsea_pm_gpu_close(h);
  if (Rs)
    for (int32_t v = 0; v < MULTI_GPU_BLOCK; v++) multi_close(&Rs[v]);
  free(Rs);
  free(pext);
  return st;
}

sbg_status sbg_gsea_multi_run(const sbg_gsea_input *in, int32_t Q, const sbg_gsea_params *p,
                              sbg_gsea_result *out, int use_gpu, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  if (Q < 1 || !p->gene_perm || p->phase != 0)
    return sbg_fail(ctx, SBG_ERR_INPUT, "gsea engine: many signatures need gene permutations in one run");
  for (int32_t v = 0; v < Q; v++)
    if (!in[v].ranking || out[v].null_es)
      return sbg_fail(ctx, SBG_ERR_INPUT, "gsea engine: a signature is not preranked or keeps its table");
  if (use_gpu) return multi_gpu_run(in, Q, p, out, ctx);
  int nth = ctx->n_threads > 0 ? ctx->n_threads : 1;
  gsea_run *Rs = calloc(MULTI_BLOCK, sizeof(gsea_run));
  sbg_gsea_prerank_ws *pws = calloc((size_t)nth, sizeof(sbg_gsea_prerank_ws));
  double *nrq = malloc((size_t)nth * MULTI_BLOCK * 5 * sizeof(double));
  const double **wrs = malloc(MULTI_BLOCK * sizeof(double *));
  double **dst = malloc(MULTI_BLOCK * sizeof(double *));
  int32_t nb = 0, kmax = 0, wsG = 0;
  double done_w = 0, work = 2.0 * (double)Q * (double)p->nperm;
  if (!Rs || !pws || !nrq || !wrs || !dst) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the signatures' work space");
    goto done;
  }
  for (int32_t v0 = 0; v0 < Q; v0 += nb) {
    /* block size: as many as keep pass 1's null in MULTI_KEEP doubles
     * (the sizes of the first tell), else MULTI_BLOCK drawing twice */
    nb = 0;
    SBG_TRY(multi_open(&Rs[0], &in[v0], p, &out[v0], CHUNK, 0, ctx));
    double per = (double)p->nperm * Rs[0].sizes.n;
    int keep = per <= (double)MULTI_KEEP;
    int32_t cap = keep ? (int32_t)((double)MULTI_KEEP / per) : MULTI_BLOCK;
    if (cap > MULTI_BLOCK) cap = MULTI_BLOCK;
    if (cap > Q - v0) cap = Q - v0;
    /* the batch: about 0.1 s of work per poll, as run_batch_size() */
    int64_t B = batch_round(p->batch > 0 ? p->batch
                                          : (int64_t)(2e8 * nth / ((double)Rs[0].G * 20.0 / cap + 6.0 * (double)Rs[0].M)));
    multi_close(&Rs[0]);
    SBG_TRY(multi_open(&Rs[0], &in[v0], p, &out[v0], B, keep, ctx));
    SBG_TRY(multi_open_rest(Rs, cap, &in[v0], p, &out[v0], B, keep, &nb, ctx));
    int32_t k = Rs[0].sizes.size[Rs[0].sizes.n - 1];
    if (k > kmax || Rs[0].G != wsG) { /* the draws' work space: G entries, kmax drawn */
      for (int i = 0; i < nth; i++) sbg_gsea_prerank_ws_free(&pws[i]);
      kmax = k > kmax ? k : kmax;
      wsG = Rs[0].G;
      for (int i = 0; i < nth; i++)
        if (!sbg_gsea_prerank_ws_alloc(&pws[i], Rs[0].G, kmax)) {
          st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the work space");
          goto done;
        }
    }
    SBG_TRY(multi_block(Rs, nb, pws, nrq, wrs, dst, B, keep, &done_w, work, ctx));
    for (int32_t v = 0; v < nb; v++) multi_close(&Rs[v]);
  }
done:
  if (Rs)
    for (int32_t v = 0; v < MULTI_BLOCK; v++) multi_close(&Rs[v]);
  if (pws)
    for (int i = 0; i < nth; i++) sbg_gsea_prerank_ws_free(&pws[i]);
  free(Rs); free(pws); free(nrq); free(wrs); free(dst);
  return st;
}
