/* Multilevel p-values of preranked gene sets (rapidGSEA(pvalue =
 * "multilevel")), by adaptive multilevel splitting as in Korotkevich,
 * Sukhov and Sergushichev's fgsea paper, written from the paper.
 *
 * With a fixed ranking the null of a set depends only on its size k, so
 * one "ruler" per size and tail serves all its sets.  A population of n
 * uniform random k-sets is scored by ES+ (the largest running sum); the
 * sets at or above the median are kept, copied back to n, and moved by
 * Markov chain swaps (a member for a non-member, accepted when ES+ stays
 * at or above the median): the population is then a sample of the sets
 * beyond that level, and the next level is its median.  P(ES+ >= level t)
 * is the product of the levels' fractions; each fraction c/n is taken as
 * the c-th largest of n uniforms, whose log has mean psi(c) - psi(n + 1)
 * and variance psi1(c) - psi1(n + 1) (hence log2err).  Negative ES use the
 * mirrored list (the least running sum of a list is minus the largest of
 * the reversed one).  p is conditional on the sign, P(ES+ >= ES) /
 * P(ES >= 0), like Broad's nominal p, with P(ES >= 0) from n_sign plain
 * random sets.  Those n_sign sets also give the p of the sets where their
 * plain count is as precise as the levels would be (as fgsea does), so
 * rulers climb only for the smaller p-values.
 *
 * Work unit: one level of one ruler.  Each ruler draws its sample from its
 * own Philox subsequence and each member of the sample its moves from its
 * own, so the levels a ruler goes through do not depend on the threads;
 * threads without a ruler of their own take members' moves (the rulers of
 * the smallest p climb last).  The calling thread polls between rounds of
 * levels and within the moves.
 *
 * With a GPU (p->gpu) the members' moves of all climbing rulers run there,
 * and, when the host has few threads, the plain random sets of every size
 * are drawn there too, a thread per size (gsea_multilevel_gpu.cu); both use
 * gsea_multilevel_core.h, the code this file runs on the CPU, so the
 * p-values are the same bits. */
#include <math.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "gsea_multilevel.h"
#include "gsea_multilevel_core.h"
#include "gsea_math.h"
#include "omp_compat.h"
#include "philox.h"

#define ML_LOG_FLOOR (-700.0) /* exp() of less is subnormal: the last p doubles give */
#define ML_STUCK 3            /* levels without progress before a ruler gives up */
#define ML_LN2 0.69314718055994530942 /* log(2) */
#define ML_SLOTS 4            /* rulers in flight per thread */
/* Philox key of the rulers: the seed mixed with "multilvl", so that they do
 * not replay the draws of the permutations of the same seed */
#define ML_KEY(seed) ((seed) ^ 0x6d756c74696c766cull)
/* and of the members' moves ("members"): a stream per member, so that the
 * members of a ruler move in parallel with the bits of one thread */
#define ML_MEMBER_KEY(seed) ((seed) ^ 0x6d656d62657273ull)
/* members per task of a round's moves (idle threads take tasks) */
#define ML_MEMBER_GRAIN 8
/* host threads up to which the plain random sets are drawn on the GPU (a
 * thread per size there): beyond, the host's threads draw C2's faster than
 * the device (measured with inst/bench/gsea.R's multilevel section) */
#define ML_GPU_PLAIN_THREADS 6

/* One ruler: the sets of one size in one tail (dir 0: ES >= 0, scored on
 * the list; dir 1: ES < 0, scored on the reversed list). */
typedef struct ml_task {
  int32_t k, dir;
  int32_t n_sets;        /* its sets, ascending x, in order[first..] */
  int32_t first;
  /* state, once started */
  int started, done;
  sbg_status st;
  sbg_philox rng;
  double level;          /* current level (-inf before the first) */
  double logp, var;      /* log P(ES+ >= level) and its variance */
  double logf, varf;     /* log P(ES >= 0) (of the tail's sign), variance */
  int32_t next;          /* first set not yet given its p */
  int32_t nlev, stuck;
  int32_t nb;            /* blocks of rank positions for the moves */
  int32_t *pop, *pop2;   /* n x k members, ascending, and the copy buffer */
  double *score, *sorted; /* members' ES+ (mix() scores them again) */
  int32_t *bnd, *cnt;    /* nb block ends; n x nb members per block */
  double *bsum, *nr;     /* n x nb weight per block; n total weights */
  int32_t *cand, *cand_h;/* per set: a member where ES+ reaches the level, hits up to it */
  double *cand_c;        /* and the weight up to it */
  int32_t *tmp;
  double *plain;         /* n_sign plain random sets' ES+ (sorted by task_start, then freed) */
  uint64_t *bits;
  sbg_philox *mrng;      /* per member: its moves' stream */
  int64_t *kept;         /* per member: swaps kept in a round */
  int resampled;         /* next_level left the copy of members to make in tmp */
  int32_t m_sign;        /* plain random sets of the ruler's sign */
} ml_task;

typedef struct ml_shared {
  int32_t G;
  const double *w[2];    /* weight by position: list, reversed list */
  const sbg_gsea_ml_params *p;
  const double *x;       /* per set: ES+ in its tail's frame */
  const int32_t *order;  /* sets by (dir, k, x) */
  sbg_gsea_ml_result *out;
  /* interrupts inside a level (a thin level set can take seconds): the
   * calling thread (thread 0 of the team) polls every ML_POLL_S seconds
   * and raises `stop`, which every thread's moves look at */
  sbg_ctx *ctx;
  volatile int *stop;
  double *last_poll, done;
} ml_shared;

#define ML_POLL_S 0.05

/* On failure, jump to the function's done label. */
#define SBG_TRY_ML(expr)            \
  do {                              \
    st = (expr);                    \
    if (st != SBG_OK) goto done;    \
  } while (0)

static double ml_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether the run is to stop; the calling thread polls when one is due. */
static int ml_stopped(const ml_shared *sh) {
  if (*sh->stop) return 1;
  if (omp_get_thread_num() == 0 && ml_now() - *sh->last_poll > ML_POLL_S) {
    *sh->last_poll = ml_now();
    if (sbg_poll(sh->ctx, sh->done) != SBG_OK) *sh->stop = 1;
  }
  return *sh->stop;
}

/* ---------------------------------------------------------------------- */
/* Scores */

/* sum_{i=c}^{n} 1/i = psi(n + 1) - psi(c), and of 1/i^2 = psi1(c) - psi1(n + 1). */
static double harm(int32_t c, int32_t n) {
  double s = 0;
  for (int32_t i = n; i >= c; i--) s += 1.0 / i;
  return s;
}

static double harm2(int32_t c, int32_t n) {
  double s = 0;
  for (int32_t i = n; i >= c; i--) s += 1.0 / ((double)i * i);
  return s;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* ---------------------------------------------------------------------- */
/* One ruler */

static void task_free(ml_task *t) {
  free(t->pop); free(t->pop2); free(t->score); free(t->sorted);
  free(t->bnd); free(t->cnt); free(t->bsum); free(t->nr);
  free(t->cand); free(t->cand_h); free(t->cand_c); free(t->tmp); free(t->plain);
  free(t->bits); free(t->mrng); free(t->kept);
  t->mrng = NULL; t->kept = NULL;
  t->pop = t->pop2 = t->bnd = t->cnt = t->cand = t->cand_h = t->tmp = NULL;
  t->score = t->sorted = t->bsum = t->nr = t->cand_c = t->plain = NULL;
  t->bits = NULL;
}

/* Set j of the ruler gets p and the sd of log2 p (NaN: p is a bound). */
static void put_result(const ml_shared *sh, const ml_task *t, int32_t j, double pv, double err) {
  int32_t s = sh->order[t->first + j];
  if (pv > 1) pv = 1;
  if (sh->p->eps > 0 && pv < sh->p->eps) {
    pv = sh->p->eps; /* p < eps: eps is the answer, a bound */
    err = NAN;
  }
  sh->out->pval[s] = pv;
  sh->out->log2err[s] = err;
  sh->out->levels[s] = t->nlev;
}

/* From the ruler: log P(ES+ >= x) and its variance. */
static void set_result(const ml_shared *sh, const ml_task *t, int32_t j, double logp, double var, int bound) {
  put_result(sh, t, j, exp(logp - t->logf), bound ? NAN : sqrt(var + t->varf) / ML_LN2);
}

/* The sets not reached get the last level's p as a bound. */
static void finish_bound(const ml_shared *sh, ml_task *t, double logp) {
  for (; t->next < t->n_sets; t->next++) set_result(sh, t, t->next, logp, 0, 1);
  t->done = 1;
}

/* After scoring a population (a sample beyond t->level): gives p to the
 * sets up to the next level, then keeps the sets at or beyond it. */
static void next_level(const ml_shared *sh, ml_task *t) {
  int32_t n = sh->p->sample_size;
  memcpy(t->sorted, t->score, (size_t)n * sizeof(double));
  qsort(t->sorted, (size_t)n, sizeof(double), cmp_double);
  double lnew = t->sorted[(n - 1) / 2];
  if (!(lnew > t->level)) { /* half the sample sits on the level: the next value up */
    int32_t i = gsea_count_lt(t->sorted, n, t->level);
    while (i < n && !(t->sorted[i] > t->level)) i++;
    lnew = i < n ? t->sorted[i] : t->level;
  }
  while (t->next < t->n_sets) {
    double x = sh->x[sh->order[t->first + t->next]];
    if (x > lnew) break;
    int32_t c = n - gsea_count_lt(t->sorted, n, x); /* sample at or beyond x */
    set_result(sh, t, t->next, t->logp - harm(c, n), t->var + harm2(c, n), 0);
    t->next++;
  }
  if (t->next == t->n_sets) { t->done = 1; return; }
  if (!(lnew > t->level)) { /* nothing beyond the level yet: move again */
    if (++t->stuck >= ML_STUCK) finish_bound(sh, t, t->logp);
    return;
  }
  t->stuck = 0;
  int32_t ct = n - gsea_count_lt(t->sorted, n, lnew);
  double logp = t->logp - harm(ct, n);
  if ((sh->p->eps > 0 && logp - t->logf < log(sh->p->eps)) || logp < ML_LOG_FLOOR) {
    finish_bound(sh, t, logp);
    return;
  }
  /* the ct sets at or beyond lnew, copied in turn to fill the sample
   * (t->tmp: where each new member comes from, for the engine's copy) */
  int32_t m = 0;
  for (int32_t e = 0; e < n; e++)
    if (t->score[e] >= lnew) t->tmp[m++] = e;
  for (int32_t e = n - 1; e >= 0; e--) t->tmp[e] = t->tmp[e % m];
  t->resampled = 1;
  t->level = lnew;
  t->logp = logp;
  t->var += harm2(ct, n);
  t->nlev++;
}

/* Member e of the ruler's sample, for the shared arithmetic. */
static ml_member member_of(const ml_task *t, int32_t e) {
  ml_member m = {t->pop + (size_t)e * t->k, t->cnt + (size_t)e * t->nb, t->bsum + (size_t)e * t->nb, t->nr + e,
                 t->cand + e, t->cand_h + e, t->cand_c + e};
  return m;
}

/* One proposed swap in member e: a random member out, a random non-member
 * in, kept when ES+ stays at or beyond the level.  Returns 1 if kept. */
static int move(const ml_task *t, const ml_frame *f, int32_t e) {
  int32_t k = t->k;
  ml_member m = member_of(t, e);
  int32_t *pos = m.pos;
  int32_t i = (int32_t)sbg_philox_below(&t->mrng[e], (uint32_t)k);
  int32_t b = (int32_t)sbg_philox_below(&t->mrng[e], (uint32_t)f->G);
  int32_t a = pos[i];
  int32_t ib = gsea_count_lt_i(pos, k, b);
  if (ib < k && pos[ib] == b) return 0;
  if (ib > i) {
    memmove(pos + i, pos + i + 1, (size_t)(ib - 1 - i) * sizeof(int32_t));
    pos[ib - 1] = b;
  } else {
    memmove(pos + ib + 1, pos + ib, (size_t)(i - ib) * sizeof(int32_t));
    pos[ib] = b;
  }
  if (ml_accept(f, m, a, b)) return 1;
  if (ib > i) {
    memmove(pos + i + 1, pos + i, (size_t)(ib - 1 - i) * sizeof(int32_t));
  } else {
    memmove(pos + ib, pos + ib + 1, (size_t)(i - ib) * sizeof(int32_t));
  }
  pos[i] = a;
  return 0;
}

/* Blocks of about sqrt(k) members each: ends at the sample's medians of
 * every (k / nb)-th member; then each member's counts and sums per block. */
static void make_blocks(ml_task *t, int32_t n, const ml_frame *f) {
  int32_t k = t->k, nb = t->nb;
  for (int32_t j = 0; j + 1 < nb; j++) {
    int32_t idx = (int32_t)((int64_t)(j + 1) * k / nb);
    for (int32_t e = 0; e < n; e++) t->tmp[e] = t->pop[(size_t)e * k + idx];
    qsort(t->tmp, (size_t)n, sizeof(int32_t), cmp_i32);
    t->bnd[j] = t->tmp[n / 2];
    if (j > 0 && t->bnd[j] < t->bnd[j - 1]) t->bnd[j] = t->bnd[j - 1];
  }
  t->bnd[nb - 1] = f->G;
  for (int32_t e = 0; e < n; e++) ml_member_blocks(f, member_of(t, e));
}

/* The ruler's frame at its current level. */
static ml_frame frame_of(const ml_task *t, const ml_shared *sh) {
  ml_frame f = {t->k, t->nb, sh->G, t->bnd, sh->w[t->dir], 1.0 / ((double)sh->G - (double)t->k), t->level};
  return f;
}

/* Markov chain moves at the current level: `moves` kept swaps per member
 * of the sample (each set about moves x k, at least ML_MIN_SWAPS), in rounds of k / 10 proposals
 * per set; a level whose swaps are almost all refused stops after ML_CAP
 * proposals per wanted swap (thin level sets near the largest ES need
 * hundreds: at 50, p of the top genes came out 2^-2.5 too small on average).
 * Too few moves leave the copies near their parents, which sit high in
 * the level set, and bias every level's fraction up. */
static void mix(ml_task *t, const ml_shared *sh) {
  int32_t n = sh->p->sample_size, k = t->k, per;
  ml_frame f = frame_of(t, sh);
  make_blocks(t, n, &f);
  int64_t target, cap, kept = 0, tried = 0;
  ml_budget(k, n, sh->p->moves, &target, &cap, &per);
  while (kept < target && tried < cap && !ml_stopped(sh)) {
    /* a round: each member's proposals from its own stream; threads idle
     * at the rulers' barrier take tasks of members (the rulers of the
     * smallest p climb last and alone) */
#pragma omp taskloop grainsize(ML_MEMBER_GRAIN)
    for (int32_t e = 0; e < n; e++) {
      int64_t c = 0;
      for (int32_t r = 0; r < per; r++) c += move(t, &f, e);
      t->kept[e] = c;
    }
    for (int32_t e = 0; e < n; e++) kept += t->kept[e];
    tried += (int64_t)n * per;
  }
  for (int32_t e = 0; e < n; e++) t->score[e] = ml_es_plus(t->pop + (size_t)e * k, k, f.w, sh->G);
}

static int task_alloc(ml_task *t, int32_t n, int32_t G) {
  size_t nk = (size_t)n * (size_t)t->k;
  t->nb = ml_n_blocks(t->k);
  size_t nb = (size_t)n * (size_t)t->nb;
  t->pop = malloc(nk * sizeof(int32_t));
  t->pop2 = malloc(nk * sizeof(int32_t));
  t->score = malloc((size_t)n * sizeof(double));
  t->sorted = malloc((size_t)n * sizeof(double));
  t->bnd = malloc((size_t)t->nb * sizeof(int32_t));
  t->cnt = malloc(nb * sizeof(int32_t));
  t->bsum = malloc(nb * sizeof(double));
  t->nr = malloc((size_t)n * sizeof(double));
  t->cand = malloc((size_t)n * sizeof(int32_t));
  t->cand_h = malloc((size_t)n * sizeof(int32_t));
  t->cand_c = malloc((size_t)n * sizeof(double));
  t->tmp = malloc((size_t)(n > t->k ? n : t->k) * sizeof(int32_t));
  t->bits = calloc((size_t)(G + 63) / 64, sizeof(uint64_t));
  t->mrng = malloc((size_t)n * sizeof(sbg_philox));
  t->kept = malloc((size_t)n * sizeof(int64_t));
  return t->pop && t->pop2 && t->score && t->sorted && t->bnd && t->cnt && t->bsum &&
         t->nr && t->cand && t->cand_h && t->cand_c && t->tmp && t->bits &&
         t->mrng && t->kept;
}

/* Buffers of the plain random sets of one size, for its rulers t[0..nt)
 * (its tails): plain[dir] (n_sign each) of those there are.  Returns 0
 * when out of memory. */
static int plain_alloc(ml_task *const *t, int nt, int32_t N, double **plain) {
  int ok = 1;
  plain[0] = plain[1] = NULL;
  for (int j = 0; j < nt; j++) {
    t[j]->plain = malloc((size_t)N * sizeof(double));
    plain[t[j]->dir] = t[j]->plain;
    ok = ok && t[j]->plain;
  }
  return ok;
}

/* The Philox stream of a size's plain random sets (the same for both tails). */
static void plain_stream(sbg_philox *r, uint64_t seed, int32_t k) {
  sbg_philox_init(r, ML_KEY(seed), (uint64_t)k * 4u + 2u, 0);
}

/* The n_sign plain random sets of one size, for its rulers t[0..nt) (its
 * tails): their ES+ in each ruler's frame (t->plain, unsorted) and the
 * count of the ruler's sign (t->m_sign).  Returns 0 when out of memory. */
static int plain_sets(ml_task *const *t, int nt, const ml_shared *sh) {
  int32_t k = t[0]->k, G = sh->G, N = sh->p->n_sign, m[2];
  uint64_t *bits = calloc((size_t)(G + 63) / 64, sizeof(uint64_t));
  int32_t *set = malloc((size_t)k * sizeof(int32_t)), *mirror = malloc((size_t)k * sizeof(int32_t));
  double *plain[2];
  int ok = plain_alloc(t, nt, N, plain) && bits && set && mirror;
  if (ok) {
    sbg_philox r;
    plain_stream(&r, sh->p->seed, k);
    ml_plain_sets(&r, G, k, N, sh->w[0], sh->w[1], bits, set, mirror, plain, m);
    for (int j = 0; j < nt; j++) t[j]->m_sign = m[t[j]->dir];
  }
  free(bits); free(set); free(mirror);
  return ok;
}

/* First step of a ruler, from its plain sets: P(ES >= 0) (or <= 0) and,
 * as fgsea does, the p of the sets where their count is at least as
 * precise as the levels would be (about p > 0.06 for 1,000 sets and
 * samples of 151: most sets of most lists, at no further cost); the rest
 * start the first sample and its level. */
static void task_start(ml_task *t, const ml_shared *sh) {
  int32_t n = sh->p->sample_size, k = t->k, G = sh->G, N = sh->p->n_sign, m = t->m_sign;
  t->started = 1;
  qsort(t->plain, (size_t)N, sizeof(double), cmp_double);
  t->logf = log(((double)m + 1) / ((double)N + 1));
  t->varf = harm2(m + 1, N + 1);
  double level_var = harm2((n + 1) / 2, n);
  for (; t->next < t->n_sets; t->next++) {
    double x = sh->x[sh->order[t->first + t->next]];
    int32_t b = N - gsea_count_lt(t->plain, N, x); /* plain sets of the sign at or beyond x */
    if (b > m) b = m;
    double pv = ((double)b + 1) / ((double)m + 1), var = harm2(b + 1, m + 1);
    if (var > (floor(-log2(pv)) + 1) * level_var) break; /* the levels do better from here on */
    put_result(sh, t, t->next, pv, sqrt(var) / ML_LN2);
  }
  free(t->plain);
  t->plain = NULL;
  if (t->next == t->n_sets) {
    t->done = 1;
    return;
  }
  if (!task_alloc(t, n, G)) {
    t->st = SBG_ERR_ALLOC;
    t->done = 1;
    return;
  }
  sbg_philox_init(&t->rng, ML_KEY(sh->p->seed), (uint64_t)k * 4u + (uint64_t)t->dir, 0);
  for (int32_t e = 0; e < n; e++) {
    ml_draw_set(&t->rng, G, k, t->bits, t->pop + (size_t)e * k);
    t->score[e] = ml_es_plus(t->pop + (size_t)e * k, k, sh->w[t->dir], G);
    /* subsequence: ruler (size, tail), then member */
    sbg_philox_init(&t->mrng[e], ML_MEMBER_KEY(sh->p->seed), ((uint64_t)k * 2u + (uint64_t)t->dir) << 32 | (uint64_t)e, 0);
  }
  t->level = -INFINITY;
  t->logp = 0;
  t->var = 0;
  next_level(sh, t);
}

/* The copy next_level asked for: member e from member tmp[e]. */
static void resample(ml_task *t, int32_t n) {
  int32_t k = t->k;
  for (int32_t e = 0; e < n; e++)
    memcpy(t->pop2 + (size_t)e * k, t->pop + (size_t)t->tmp[e] * k, (size_t)k * sizeof(int32_t));
  int32_t *pp = t->pop; t->pop = t->pop2; t->pop2 = pp;
  t->resampled = 0;
}

static void task_step(ml_task *t, const ml_shared *sh) {
  if (!t->started) {
    task_start(t, sh);
  } else {
    mix(t, sh);
    next_level(sh, t);
  }
  if (t->resampled) resample(t, sh->p->sample_size);
}

/* ---------------------------------------------------------------------- */
/* Sets to rulers, rulers to threads */

typedef struct ml_key {
  int32_t dir, k, s;
  double x;
} ml_key;

static int cmp_key(const void *a, const void *b) {
  const ml_key *x = a, *y = b;
  if (x->dir != y->dir) return x->dir - y->dir;
  if (x->k != y->k) return (x->k > y->k) - (x->k < y->k);
  if (x->x != y->x) return (x->x > y->x) - (x->x < y->x);
  return (x->s > y->s) - (x->s < y->s);
}

/* Each set's tail, signed ES and ES+ in its tail's frame. */
static int score_sets(const sbg_gsea_ml_input *in, const ml_shared *sh, ml_key *key, double *x,
                      sbg_gsea_ml_result *out) {
  int32_t G = in->n_genes, kmax = 0;
  for (int32_t s = 0; s < in->n_sets; s++) {
    int32_t k = in->set_start[s + 1] - in->set_start[s];
    if (k > kmax) kmax = k;
  }
  int32_t *buf = malloc((size_t)(kmax > 0 ? kmax : 1) * sizeof(int32_t));
  if (!buf) return 0;
  for (int32_t s = 0; s < in->n_sets; s++) {
    int32_t k = in->set_start[s + 1] - in->set_start[s];
    memcpy(buf, in->set_pos + in->set_start[s], (size_t)k * sizeof(int32_t));
    qsort(buf, (size_t)k, sizeof(int32_t), cmp_i32);
    double es = ml_es_signed(buf, k, sh->w[0], G);
    int dir = es < 0;
    if (dir) { /* mirrored positions, ascending */
      for (int32_t i = 0; i < k / 2; i++) {
        int32_t u = buf[i];
        buf[i] = buf[k - 1 - i];
        buf[k - 1 - i] = u;
      }
      for (int32_t i = 0; i < k; i++) buf[i] = G - 1 - buf[i];
    }
    out->es[s] = es;
    x[s] = ml_es_plus(buf, k, sh->w[dir], G);
    key[s].dir = dir;
    key[s].k = k;
    key[s].s = s;
    key[s].x = x[s];
  }
  free(buf);
  return 1;
}

/* Rulers from the sorted keys; largest sizes first, for balance. */
static int32_t make_tasks(const ml_key *key, int32_t S, int32_t *order, ml_task *task) {
  int32_t n = 0;
  for (int32_t s = 0; s < S; s++) {
    order[s] = key[s].s;
    if (s == 0 || key[s].dir != key[s - 1].dir || key[s].k != key[s - 1].k) {
      memset(&task[n], 0, sizeof task[n]);
      task[n].k = key[s].k;
      task[n].dir = key[s].dir;
      task[n].first = s;
      n++;
    }
    task[n - 1].n_sets++;
  }
  return n;
}

static int cmp_task(const void *a, const void *b) {
  const ml_task *x = a, *y = b;
  if (x->k != y->k) return (x->k < y->k) - (x->k > y->k);
  return x->dir - y->dir;
}

/* Every size's plain random sets on the GPU (group[g]: the first task of
 * size g). */
static sbg_status plain_gpu(ml_task *task, const int32_t *group, int32_t n_group, ml_shared *sh) {
  sbg_status st = SBG_OK;
  int32_t N = sh->p->n_sign;
  if (n_group == 0) return SBG_OK; /* no sets: no launch */
  int32_t *k = malloc((size_t)n_group * sizeof(int32_t)), *m = malloc((size_t)n_group * 2 * sizeof(int32_t));
  sbg_philox *stream = malloc((size_t)n_group * sizeof(sbg_philox));
  double **plain = malloc((size_t)n_group * 2 * sizeof(double *));
  int ok = k && m && stream && plain;
  for (int32_t g = 0; ok && g < n_group; g++) {
    ml_task *t[2] = {&task[group[g]], &task[group[g + 1] - 1]};
    k[g] = t[0]->k;
    plain_stream(&stream[g], sh->p->seed, k[g]);
    ok = plain_alloc(t, group[g + 1] - group[g], N, plain + 2 * g);
  }
  if (!ok) st = sbg_fail(sh->ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel plain sets");
  else st = sbg_gsea_ml_gpu_plain(sh->ctx->device, sh->G, sh->w[0], sh->w[1], N, n_group, k, stream, plain, m,
                                  sh->ctx);
  for (int32_t g = 0; st == SBG_OK && g < n_group; g++)
    for (int32_t i = group[g]; i < group[g + 1]; i++) task[i].m_sign = m[2 * g + task[i].dir];
  free(k); free(m); free(stream); free(plain);
  return st;
}

/* Every size's plain random sets, the sizes in parallel (the tasks are in
 * order of size, a size's tails next to each other), on the CPU's threads
 * or the GPU. */
static sbg_status plain_phase(ml_task *task, int32_t n_task, ml_shared *sh, int nth, int gpu) {
  int32_t *group = malloc((size_t)(n_task + 1) * sizeof(int32_t)), n_group = 0;
  int failed = 0;
  if (!group) return sbg_fail(sh->ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel work space");
  for (int32_t i = 0; i < n_task; i++)
    if (i == 0 || task[i].k != task[i - 1].k) group[n_group++] = i;
  group[n_group] = n_task;
  if (gpu) { /* one thread per size on the device */
    sbg_status st = plain_gpu(task, group, n_group, sh);
    free(group);
    return st == SBG_OK ? sbg_poll(sh->ctx, 0.0) : st;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth) reduction(| : failed)
  for (int32_t g = 0; g < n_group; g++) {
    if (ml_stopped(sh)) continue;
    ml_task *t[2] = {&task[group[g]], &task[group[g + 1] - 1]};
    failed |= !plain_sets(t, group[g + 1] - group[g], sh);
  }
  free(group);
  if (*sh->stop) return SBG_ERR_INTERRUPTED; /* ctx->errbuf set by sbg_poll */
  if (failed) return sbg_fail(sh->ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel plain sets");
  return sbg_poll(sh->ctx, 0.0);
}

/* The rulers on the CPU: ML_SLOTS per thread in flight, each slot a level
 * per pass. */
static sbg_status run_cpu(ml_task *task, int32_t n_task, ml_shared *sh, int nth) {
  sbg_status st = SBG_OK;
  sbg_ctx *ctx = sh->ctx;
  int32_t nslot = nth * ML_SLOTS, *slot = malloc((size_t)nslot * sizeof(int32_t));
  if (!slot) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel work space");
  double work = 0, worked = 0;
  for (int32_t i = 0; i < n_task; i++) work += task[i].k;
  int32_t next = 0, active = 0;
  for (int32_t i = 0; i < nslot; i++) slot[i] = -1;
  for (;;) {
    for (int32_t i = 0; i < nslot; i++)
      if (slot[i] < 0 && next < n_task) { slot[i] = next++; active++; }
    if (active == 0) break;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth)
    for (int32_t i = 0; i < nslot; i++)
      if (slot[i] >= 0) task_step(&task[slot[i]], sh);
    if (*sh->stop) { st = SBG_ERR_INTERRUPTED; break; } /* ctx->errbuf set by sbg_poll */
    for (int32_t i = 0; i < nslot; i++) {
      if (slot[i] < 0 || !task[slot[i]].done) continue;
      ml_task *t = &task[slot[i]];
      if (t->st != SBG_OK && st == SBG_OK) st = sbg_fail(ctx, t->st, "cannot allocate a multilevel sample");
      task_free(t);
      worked += t->k;
      slot[i] = -1;
      active--;
    }
    if (st != SBG_OK) break;
    sh->done = worked / work;
    st = sbg_poll(ctx, sh->done);
    if (st != SBG_OK) break;
  }
  free(slot);
  return st;
}

/* The rulers with the members' moves on the GPU: every ruler's first step
 * (its plain sets and first sample) on the CPU's threads; then waves of
 * the rulers that climb, as many as the device holds, a level of all of a
 * wave's rulers per pass (the device moves and scores, the host takes the
 * levels, as on the CPU).  (A level of a few rulers takes the device
 * about as long as one of hundreds; handing such tails to the host's
 * threads was measured no faster.) */
static sbg_status run_gpu(ml_task *task, int32_t n_task, ml_shared *sh, int nth) {
  sbg_status st = SBG_OK;
  sbg_ctx *ctx = sh->ctx;
  int32_t n = sh->p->sample_size, n_climb = 0;
  size_t free_bytes = 0;
  sbg_gsea_ml_gpu *gpu = NULL;
  int32_t *climb = malloc((size_t)n_task * sizeof(int32_t)), *act = malloc((size_t)n_task * sizeof(int32_t));
  int32_t *wk = malloc((size_t)n_task * sizeof(int32_t)), *wdir = malloc((size_t)n_task * sizeof(int32_t));
  int32_t **wpop = malloc((size_t)n_task * sizeof(int32_t *));
  const sbg_philox **wrng = malloc((size_t)n_task * sizeof(sbg_philox *));
  const int32_t **map = malloc((size_t)n_task * sizeof(int32_t *));
  double **score = malloc((size_t)n_task * sizeof(double *)), *level = malloc((size_t)n_task * sizeof(double));
  if (!climb || !act || !wk || !wdir || !wpop || !wrng || !map || !score || !level) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel work space");
    goto done;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth)
  for (int32_t i = 0; i < n_task; i++)
    if (!ml_stopped(sh)) task_step(&task[i], sh);
  if (*sh->stop) {
    st = SBG_ERR_INTERRUPTED; /* ctx->errbuf set by sbg_poll */
    goto done;
  }
  for (int32_t i = 0; i < n_task; i++) {
    ml_task *t = &task[i];
    if (t->st != SBG_OK && st == SBG_OK) st = sbg_fail(ctx, t->st, "cannot allocate a multilevel sample");
    if (t->done) task_free(t);
    else climb[n_climb++] = i;
  }
  if (st != SBG_OK || n_climb == 0) goto done;
  SBG_TRY_ML(sbg_poll(ctx, 0.0));
  SBG_TRY_ML(sbg_gsea_ml_gpu_open(ctx->device, sh->G, sh->w[0], sh->w[1], n, sh->p->moves, &free_bytes, &gpu, ctx));
  {
    double work = 0, worked = 0;
    size_t budget = free_bytes / 2;
    if (sh->p->wave_bytes > 0) budget = (size_t)sh->p->wave_bytes; /* tests: waves of one ruler */
    for (int32_t i = 0; i < n_climb; i++) work += task[climb[i]].k;
    for (int32_t first = 0; first < n_climb;) {
      /* a wave: the next rulers (largest sizes first) while they fit */
      int32_t R = 0;
      size_t bytes = 0;
      while (first + R < n_climb) {
        ml_task *t = &task[climb[first + R]];
        size_t b = sbg_gsea_ml_gpu_ruler_bytes(n, t->k);
        if (R > 0 && bytes + b > budget) break;
        wk[R] = t->k;
        wdir[R] = t->dir;
        wpop[R] = t->pop;
        wrng[R] = t->mrng;
        bytes += b;
        R++;
      }
      SBG_TRY_ML(sbg_gsea_ml_gpu_load(gpu, R, wk, wdir, wpop, wrng, ctx));
      for (int32_t r = 0; r < R; r++) { /* the samples live on the device now */
        ml_task *t = &task[climb[first + r]];
        free(t->pop); free(t->pop2); free(t->mrng);
        t->pop = t->pop2 = NULL;
        t->mrng = NULL;
      }
      for (;;) {
        int32_t A = 0;
        for (int32_t r = 0; r < R; r++) {
          ml_task *t = &task[climb[first + r]];
          if (t->done) continue;
          act[A] = r;
          level[A] = t->level;
          map[A] = t->resampled ? t->tmp : NULL;
          score[A] = t->score;
          A++;
        }
        if (A == 0) break;
        SBG_TRY_ML(sbg_gsea_ml_gpu_level(gpu, A, act, level, map, score, worked / work, ctx));
        for (int32_t a = 0; a < A; a++) {
          ml_task *t = &task[climb[first + act[a]]];
          t->resampled = 0;
          next_level(sh, t);
          if (t->done) {
            task_free(t);
            worked += t->k;
          }
        }
      }
      first += R;
    }
  }
done:
  sbg_gsea_ml_gpu_close(gpu);
  free(climb); free(act); free(wk); free(wdir); free(wpop); free(wrng); free(map); free(score); free(level);
  return st;
}

sbg_status sbg_gsea_multilevel(const sbg_gsea_ml_input *in, const sbg_gsea_ml_params *p, sbg_gsea_ml_result *out,
                               sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t G = in->n_genes, S = in->n_sets;
  int nth = ctx->n_threads > 0 ? ctx->n_threads : 1;
  double *wf = malloc((size_t)G * sizeof(double)), *wb = malloc((size_t)G * sizeof(double));
  double *x = malloc((size_t)(S > 0 ? S : 1) * sizeof(double));
  ml_key *key = malloc((size_t)(S > 0 ? S : 1) * sizeof(ml_key));
  int32_t *order = malloc((size_t)(S > 0 ? S : 1) * sizeof(int32_t));
  ml_task *task = malloc((size_t)(S > 0 ? S : 1) * sizeof(ml_task));
  int32_t n_task = 0;
  if (!wf || !wb || !x || !key || !order || !task) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel work space");
    goto done;
  }
  for (int32_t r = 0; r < G; r++) wf[r] = gsea_weight(in->metric[r], in->weight);
  for (int32_t r = 0; r < G; r++) wb[r] = wf[G - 1 - r];
  volatile int stop = 0;
  double last_poll = ml_now();
  ml_shared sh = {G, {wf, wb}, p, x, order, out, ctx, &stop, &last_poll, 0.0};
  if (!score_sets(in, &sh, key, x, out)) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the multilevel work space");
    goto done;
  }
  qsort(key, (size_t)S, sizeof(ml_key), cmp_key);
  n_task = make_tasks(key, S, order, task);
  qsort(task, (size_t)n_task, sizeof(ml_task), cmp_task);
  int gpu = p->gpu && p->sample_size <= SBG_GSEA_ML_GPU_MAX_SAMPLE;
  st = plain_phase(task, n_task, &sh, nth, gpu && nth <= ML_GPU_PLAIN_THREADS);
  if (st != SBG_OK) goto done;
  if (gpu) st = run_gpu(task, n_task, &sh, nth);
  else st = run_cpu(task, n_task, &sh, nth);

done:
  if (task)
    for (int32_t i = 0; i < n_task; i++) task_free(&task[i]);
  free(wf); free(wb); free(x); free(key); free(order); free(task);
  return st;
}
