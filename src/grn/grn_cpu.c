/* CPU engine of grnEvolve() (OpenMP over individuals and islands), plus the
 * deterministic helpers behind grnSimulate() and the tests' evaluator.  The
 * operators live in grn_model.h, shared with the GPU engine. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grn.h"
#include "grn_model.h"
#include "grn_simd.h"
#include "omp_compat.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* CPU time of the process, all threads (benchmark only). */
static double cpu_seconds_now(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Evaluation of individuals [k0, k1).  R's default flags do not enable the
 * popcnt instruction on x86, and __builtin_popcount is then a slow bit
 * trick; a second copy compiled for popcnt is used where the CPU has it. */
#define GRN_EVAL_RANGE_BODY                                                   \
  const int64_t nw = (int64_t)pb->n * pb->w;                                  \
  for (int64_t k = k0; k < k1; k++) {                                         \
    grn_view v = {pop->act + k * nw, pop->rep + k * nw, pop->rule + k * pb->n, 1}; \
    score[k] = grn_evaluate(pb, v, dn ? dn + k : NULL, dl ? dl + k : NULL);   \
  }

static void eval_range_plain(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0,
                             int64_t k1, int64_t *score, int *dn, int *dl) {
  GRN_EVAL_RANGE_BODY
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define GRN_HAVE_POPCNT_COPY 1
__attribute__((target("popcnt")))
static void eval_range_popcnt(const sbg_grn_problem *pb, const grn_pop *pop, int64_t k0,
                              int64_t k1, int64_t *score, int *dn, int *dl) {
  GRN_EVAL_RANGE_BODY
}
#endif

static int cpu_has_popcnt(void) {
#ifdef GRN_HAVE_POPCNT_COPY
  __builtin_cpu_init();
  return __builtin_cpu_supports("popcnt");
#else
  return 0;
#endif
}

/* The path asked for (pb->eval_path, 0: the fastest), lowered to one this
 * CPU and this network allow: the vectorised ones hold a state in one word
 * (n <= 32). */
int sbg_grn_cpu_eval_path(const sbg_grn_problem *pb) {
  int p = pb->eval_path <= GRN_EVAL_AUTO || pb->eval_path > GRN_EVAL_AVX512 ? GRN_EVAL_AVX512
                                                                             : pb->eval_path;
  if (pb->w != 1 && p > GRN_EVAL_POPCNT) p = GRN_EVAL_POPCNT;
  if (p == GRN_EVAL_AVX512 && !grn_simd_supported(GRN_EVAL_AVX512)) p = GRN_EVAL_AVX2;
  if (p == GRN_EVAL_AVX2 && !grn_simd_supported(GRN_EVAL_AVX2)) p = GRN_EVAL_POPCNT;
  if (p == GRN_EVAL_POPCNT && !cpu_has_popcnt()) p = GRN_EVAL_PLAIN;
  return p;
}

/* All `count` individuals, in fixed blocks over the threads, by `path`
 * (from sbg_grn_cpu_eval_path). */
static void eval_all(const sbg_grn_problem *pb, const grn_pop *pop, int64_t count,
                     int64_t *score, int *dn, int *dl, int n_threads, int path) {
  const int64_t block = 256;
  const int64_t nblocks = (count + block - 1) / block;
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 4)
  for (int64_t b = 0; b < nblocks; b++) {
    int64_t k0 = b * block, k1 = k0 + block < count ? k0 + block : count;
    switch (path) {
    case GRN_EVAL_AVX512: grn_eval_range_avx512(pb, pop, k0, k1, score, dn, dl); break;
    case GRN_EVAL_AVX2: grn_eval_range_avx2(pb, pop, k0, k1, score, dn, dl); break;
#ifdef GRN_HAVE_POPCNT_COPY
    case GRN_EVAL_POPCNT: eval_range_popcnt(pb, pop, k0, k1, score, dn, dl); break;
#endif
    default: eval_range_plain(pb, pop, k0, k1, score, dn, dl);
    }
  }
}

/* A copy of the problem with the rules' outcome table, for networks of up
 * to 32 genes (the caller frees *lut; NULL where the table does not apply
 * or cannot be allocated: the evaluation then computes the rules). */
static sbg_grn_problem with_lut(const sbg_grn_problem *pb, uint8_t **lut) {
  sbg_grn_problem p = *pb;
  p.lut = NULL;
  *lut = NULL;
  if (pb->w == 1 && (*lut = malloc(GRN_LUT_SIZE)) != NULL) {
    grn_fill_lut(*lut);
    p.lut = *lut;
  }
  return p;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorted order of one island, best first, ties by slot: keys score*size +
 * slot are distinct, so any sort gives the same order (as on the GPU). */
static void sort_island(int isl, int size, const int64_t *score, uint64_t *keys, int32_t *ord) {
  int64_t base = (int64_t)isl * size;
  for (int s = 0; s < size; s++) keys[base + s] = (uint64_t)score[base + s] * size + s;
  qsort(keys + base, (size_t)size, sizeof(uint64_t), cmp_u64);
  for (int r = 0; r < size; r++) ord[base + r] = (int32_t)(base + keys[base + r] % size);
}

static void roulette_sums(int isl, int size, const int64_t *score, const int32_t *ord,
                          uint64_t *cum) {
  int64_t base = (int64_t)isl * size;
  uint64_t acc = 0;
  for (int r = 0; r < size; r++) {
    acc += grn_weight(score[ord[base + r]]);
    cum[base + r] = acc;
  }
}

static int pop_alloc(grn_pop *p, int64_t count, int n, int w) {
  size_t words = (size_t)count * n * w;
  p->act = malloc(words * sizeof(uint32_t) + 1);
  p->rep = malloc(words * sizeof(uint32_t) + 1);
  p->rule = malloc((size_t)count * n + 1);
  p->count = count;
  p->soa = 0;
  return p->act && p->rep && p->rule;
}

static void pop_free(grn_pop *p) {
  free(p->act); free(p->rep); free(p->rule);
  p->act = p->rep = NULL; p->rule = NULL;
}

sbg_status sbg_grn_evolve_cpu(const sbg_grn_problem *pb_in, const sbg_grn_params *gp,
                              sbg_grn_result *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  uint8_t *lut = NULL;
  const sbg_grn_problem pbl = with_lut(pb_in, &lut), *pb = &pbl;
  const int n = pb->n, w = pb->w, nt = ctx->n_threads;
  const int64_t P = gp->pop;
  const int I = gp->islands, size = (int)(P / I), K = gp->migrants;
  const int64_t G = gp->generations;
  const int path = sbg_grn_cpu_eval_path(pb);
  grn_pop cur = {0}, nxt = {0}, mig = {0};
  int64_t *score = NULL, *mig_score = NULL;
  uint64_t *keys = NULL, *cum = NULL;
  int32_t *ord = NULL;
  double t0 = now_seconds(), t_poll = t0;
  int64_t g = 0;

  if (!pop_alloc(&cur, P, n, w) || !pop_alloc(&nxt, P, n, w) ||
      (I > 1 && !pop_alloc(&mig, (int64_t)I * K, n, w))) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the population (%lld individuals)", (long long)P);
    goto done;
  }
  score = malloc((size_t)P * sizeof(int64_t));
  keys = malloc((size_t)P * sizeof(uint64_t));
  cum = malloc((size_t)P * sizeof(uint64_t));
  ord = malloc((size_t)P * sizeof(int32_t));
  mig_score = malloc(((size_t)I * K + 1) * sizeof(int64_t));
  if (!score || !keys || !cum || !ord || !mig_score) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the scores (%lld individuals)", (long long)P);
    goto done;
  }

  /* generation 0 */
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t k = 0; k < P; k++)
    grn_init_individual(pb, grn_view_at(&cur, n, w, k), gp->seed, grn_stream(0, P, k));
  eval_all(pb, &cur, P, score, NULL, NULL, nt, path);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int isl = 0; isl < I; isl++) sort_island(isl, size, score, keys, ord);
  for (int isl = 0; isl < I; isl++) out->history[(int64_t)isl * (G + 1)] = (double)score[ord[(int64_t)isl * size]];

  out->stop_reason = SBG_GRN_STOP_GENERATIONS;
  for (;;) {
    int64_t best = score[ord[0]];
    for (int isl = 1; isl < I; isl++)
      if (score[ord[(int64_t)isl * size]] < best) best = score[ord[(int64_t)isl * size]];
    if (gp->target >= 0 && best <= gp->target) { out->stop_reason = SBG_GRN_STOP_TARGET; break; }
    if (g >= G) break;
    double t = now_seconds();
    if (gp->time_limit > 0 && t - t0 >= gp->time_limit) { out->stop_reason = SBG_GRN_STOP_TIME; break; }
    if (t - t_poll > 0.1) {
      double frac = (double)g / (double)G;
      if (gp->time_limit > 0 && (t - t0) / gp->time_limit > frac) frac = (t - t0) / gp->time_limit;
      st = sbg_poll(ctx, frac);
      if (st != SBG_OK) goto done;
      t_poll = t;
    }
    g++;

    /* Ring migration: the K best of island p replace the K worst of p+1,
     * from a snapshot so that every island sends what it had before. */
    if (I > 1 && g % gp->migration_interval == 0) {
      for (int isl = 0; isl < I; isl++)
        for (int r = 0; r < K; r++) {
          int64_t src = ord[(int64_t)isl * size + r], slot = (int64_t)isl * K + r;
          grn_copy(pb, grn_view_at(&mig, n, w, slot), grn_view_at(&cur, n, w, src));
          mig_score[slot] = score[src];
        }
      for (int isl = 0; isl < I; isl++) {
        int to = (isl + 1) % I;
        for (int r = 0; r < K; r++) {
          int64_t dst = ord[(int64_t)to * size + size - 1 - r], slot = (int64_t)isl * K + r;
          grn_copy(pb, grn_view_at(&cur, n, w, dst), grn_view_at(&mig, n, w, slot));
          score[dst] = mig_score[slot];
        }
      }
      for (int isl = 0; isl < I; isl++) sort_island(isl, size, score, keys, ord);
    }
    if (gp->roulette)
      for (int isl = 0; isl < I; isl++) roulette_sums(isl, size, score, ord, cum);

    const int64_t pairs = P / 2, half = size / 2;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t q = 0; q < pairs; q++)
      grn_breed_pair(pb, gp, &cur, &nxt, ord, cum, (int)(q / half), (int)(q % half), g);
    grn_pop tmp = cur; cur = nxt; nxt = tmp;

    eval_all(pb, &cur, P, score, NULL, NULL, nt, path);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int isl = 0; isl < I; isl++) sort_island(isl, size, score, keys, ord);
    for (int isl = 0; isl < I; isl++)
      out->history[(int64_t)isl * (G + 1) + g] = (double)score[ord[(int64_t)isl * size]];
  }
  out->generations_run = g;

  /* the best of all islands, ties by index */
  {
    int64_t kb = ord[0];
    for (int isl = 1; isl < I; isl++) {
      int64_t k = ord[(int64_t)isl * size];
      if (score[k] < score[kb]) kb = k;
    }
    grn_view v = grn_view_at(&cur, n, w, kb);
    out->best_score = grn_evaluate(pb, v, &out->best_dn, &out->best_dl);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) out->best_links[i + (int64_t)j * n] = grn_link_get(pb, v, i, j);
      out->best_rules[i] = GRN_RULE(v, i);
    }
  }
done:
  pop_free(&cur); pop_free(&nxt); pop_free(&mig);
  free(score); free(keys); free(cum); free(ord); free(mig_score);
  free(lut);
  return st;
}

sbg_status sbg_grn_bench_cpu(const sbg_grn_problem *pb_in, int64_t pop, int reps, uint64_t seed,
                             double *seconds, double *checksum, double *cpu_seconds,
                             sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  uint8_t *lut = NULL;
  const sbg_grn_problem pbl = with_lut(pb_in, &lut), *pb = &pbl;
  const int n = pb->n, w = pb->w, nt = ctx->n_threads;
  const int path = sbg_grn_cpu_eval_path(pb);
  grn_pop p = {0};
  int64_t *score = NULL;
  *seconds = 0;
  *checksum = 0;
  *cpu_seconds = 0;
  if (!pop_alloc(&p, pop, n, w) || !(score = malloc((size_t)pop * sizeof(int64_t) + 1))) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate %lld individuals", (long long)pop);
    goto done;
  }
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t k = 0; k < pop; k++)
    grn_init_individual(pb, grn_view_at(&p, n, w, k), seed, grn_stream(0, pop, k));
  for (int r = 0; r < reps; r++) {
    double t = now_seconds(), c = cpu_seconds_now();
    eval_all(pb, &p, pop, score, NULL, NULL, nt, path);
    *seconds += now_seconds() - t;
    *cpu_seconds += cpu_seconds_now() - c;
    st = sbg_poll(ctx, (r + 1.0) / reps);
    if (st != SBG_OK) goto done;
  }
  for (int64_t k = 0; k < pop; k++) *checksum += (double)score[k];
done:
  pop_free(&p);
  free(score);
  free(lut);
  return st;
}

void sbg_grn_simulate(const sbg_grn_problem *pb, const uint32_t *act, const uint32_t *rep,
                      const uint8_t *rules, int *states) {
  const int n = pb->n, w = pb->w;
  uint32_t s[SBG_GRN_MAX_WORDS], t[SBG_GRN_MAX_WORDS];
  grn_view v = {(uint32_t *)act, (uint32_t *)rep, (uint8_t *)rules, 1};
  for (int x = 0; x < w; x++) s[x] = pb->from[x];
  for (int step = 0;; step++) {
    for (int i = 0; i < n; i++) states[(int64_t)step * n + i] = (s[i >> 5] >> (i & 31)) & 1u;
    if (step == pb->steps) break;
    grn_step(pb, v, s, t);
    memcpy(s, t, (size_t)w * sizeof(uint32_t));
  }
}

void sbg_grn_evaluate(const sbg_grn_problem *pb_in, int64_t count, const uint32_t *act,
                      const uint32_t *rep, const uint8_t *rules, int *dn, int *dl,
                      int n_threads) {
  grn_pop p = {(uint32_t *)act, (uint32_t *)rep, (uint8_t *)rules, count, 0};
  uint8_t *lut = NULL;
  const sbg_grn_problem pbl = with_lut(pb_in, &lut), *pb = &pbl;
  int64_t *score = malloc((size_t)count * sizeof(int64_t) + 1);
  if (!score) { /* scores are optional here: evaluate without them */
    for (int64_t k = 0; k < count; k++)
      grn_evaluate(pb, grn_view_at(&p, pb->n, pb->w, k), dn + k, dl + k);
  } else {
    eval_all(pb, &p, count, score, dn, dl, n_threads, sbg_grn_cpu_eval_path(pb));
  }
  free(score);
  free(lut);
}
