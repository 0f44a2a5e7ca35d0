/* CPU engine of grnEvolve() (OpenMP over individuals and islands), plus the
 * deterministic helpers behind grnSimulate() and the tests' evaluator.  The
 * operators live in grn_model.h, shared with the GPU engine. */
#include <math.h>
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

/* A block of islands [first, first + count) on the CPU: its individuals
 * with local indices, the random streams with global ones (koff), so that
 * any split of the islands gives the single run.  One block of all the
 * islands is the plain run. */
typedef struct cpu_block {
  int first, count, size, K;
  int64_t np, koff;
  grn_pop cur, nxt, mig;
  int64_t *score, *mig_score;
  uint64_t *keys, *cum;
  int32_t *ord;
} cpu_block;

static void block_free(cpu_block *b) {
  pop_free(&b->cur); pop_free(&b->nxt); pop_free(&b->mig);
  free(b->score); free(b->mig_score); free(b->keys); free(b->cum); free(b->ord);
  memset(b, 0, sizeof(*b));
}

static int block_alloc(cpu_block *b, const sbg_grn_problem *pb, const sbg_grn_params *gp,
                       int first, int count) {
  memset(b, 0, sizeof(*b));
  b->first = first;
  b->count = count;
  b->size = (int)(gp->pop / gp->islands);
  b->K = gp->islands > 1 ? gp->migrants : 0;
  b->np = (int64_t)count * b->size;
  b->koff = (int64_t)first * b->size;
  size_t np = (size_t)b->np, nk = (size_t)count * b->K + 1;
  int ok = pop_alloc(&b->cur, b->np, pb->n, pb->w) && pop_alloc(&b->nxt, b->np, pb->n, pb->w) &&
           pop_alloc(&b->mig, (int64_t)nk, pb->n, pb->w);
  b->score = malloc(np * sizeof(int64_t));
  b->keys = malloc(np * sizeof(uint64_t));
  b->cum = malloc(np * sizeof(uint64_t));
  b->ord = malloc(np * sizeof(int32_t));
  b->mig_score = malloc(nk * sizeof(int64_t));
  if (ok && b->score && b->keys && b->cum && b->ord && b->mig_score) return 1;
  block_free(b);
  return 0;
}

static void block_sort(cpu_block *b, int nt) {
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int isl = 0; isl < b->count; isl++) sort_island(isl, b->size, b->score, b->keys, b->ord);
}

/* Generation 0 of the block's individuals, from their global streams. */
static void block_init(const sbg_grn_problem *pb, const sbg_grn_params *gp, cpu_block *b, int nt,
                       int path) {
  const int n = pb->n, w = pb->w;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t k = 0; k < b->np; k++)
    grn_init_individual(pb, grn_view_at(&b->cur, n, w, k), gp->seed,
                        grn_stream(0, gp->pop, b->koff + k));
  eval_all(pb, &b->cur, b->np, b->score, NULL, NULL, nt, path);
  block_sort(b, nt);
}

/* The block's best (local index), ties by lowest island. */
static int64_t block_best(const cpu_block *b) {
  int64_t kb = b->ord[0];
  for (int isl = 1; isl < b->count; isl++) {
    int64_t k = b->ord[(int64_t)isl * b->size];
    if (b->score[k] < b->score[kb]) kb = k;
  }
  return kb;
}

static void block_history(const cpu_block *b, double *hist, int64_t ld, int64_t row) {
  for (int isl = 0; isl < b->count; isl++)
    hist[(int64_t)isl * ld + row] = (double)b->score[b->ord[(int64_t)isl * b->size]];
}

/* Migration, first half: a snapshot of the K best of every island of the
 * block (slot isl K + r), so that every island sends what it had before
 * any island received.  The last island's are the block's outgoing ones. */
static void block_gather(const sbg_grn_problem *pb, cpu_block *b) {
  const int n = pb->n, w = pb->w, K = b->K, size = b->size;
  for (int isl = 0; isl < b->count; isl++)
    for (int r = 0; r < K; r++) {
      int64_t src = b->ord[(int64_t)isl * size + r], slot = (int64_t)isl * K + r;
      grn_copy(pb, grn_view_at(&b->mig, n, w, slot), grn_view_at(&b->cur, n, w, src));
      b->mig_score[slot] = b->score[src];
    }
}

/* Second half: island p's migrants replace the K worst of island p + 1;
 * the first island gets `in` (K individuals, CPU layout, from the previous
 * block on the ring), or the block's own last island's when `in` is NULL. */
static void block_scatter(const sbg_grn_problem *pb, cpu_block *b, const grn_pop *in,
                          const int64_t *in_score, int nt) {
  const int n = pb->n, w = pb->w, K = b->K, size = b->size, C = b->count;
  for (int isl = 0; isl < C; isl++) {
    int to = (isl + 1) % C;
    for (int r = 0; r < K; r++) {
      int64_t dst = b->ord[(int64_t)to * size + size - 1 - r], slot = (int64_t)isl * K + r;
      if (to == 0 && in) {
        grn_copy(pb, grn_view_at(&b->cur, n, w, dst), grn_view_at(in, n, w, r));
        b->score[dst] = in_score[r];
      } else {
        grn_copy(pb, grn_view_at(&b->cur, n, w, dst), grn_view_at(&b->mig, n, w, slot));
        b->score[dst] = b->mig_score[slot];
      }
    }
  }
  block_sort(b, nt);
}

/* Breeding, evaluation and sorting of generation g. */
static void block_breed(const sbg_grn_problem *pb, const sbg_grn_params *gp, cpu_block *b,
                        int64_t g, int nt, int path) {
  if (gp->roulette)
    for (int isl = 0; isl < b->count; isl++) roulette_sums(isl, b->size, b->score, b->ord, b->cum);
  const int64_t pairs = b->np / 2, half = b->size / 2;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t q = 0; q < pairs; q++)
    grn_breed_pair(pb, gp, &b->cur, &b->nxt, b->ord, b->cum, (int)(q / half), (int)(q % half), g,
                   b->koff);
  grn_pop tmp = b->cur; b->cur = b->nxt; b->nxt = tmp;
  eval_all(pb, &b->cur, b->np, b->score, NULL, NULL, nt, path);
  block_sort(b, nt);
}

static int is_migration(const sbg_grn_params *gp, int64_t g) {
  return gp->islands > 1 && gp->migrants > 0 && g % gp->migration_interval == 0;
}

/* The single run: gp->blocks blocks of contiguous islands (1 unless a test
 * asks for more) in lockstep, migration crossing blocks on the ring. */
sbg_status sbg_grn_evolve_cpu(const sbg_grn_problem *pb_in, const sbg_grn_params *gp,
                              sbg_grn_result *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  uint8_t *lut = NULL;
  const sbg_grn_problem pbl = with_lut(pb_in, &lut), *pb = &pbl;
  const int n = pb->n, w = pb->w, nt = ctx->n_threads, I = gp->islands;
  const int NB = gp->blocks <= 1 ? 1 : gp->blocks > I ? I : gp->blocks;
  const int64_t G = gp->generations;
  const int path = sbg_grn_cpu_eval_path(pb);
  cpu_block *bl = calloc((size_t)NB, sizeof(cpu_block));
  double t0 = now_seconds(), t_poll = t0;
  int64_t g = 0;

  if (!bl) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the blocks"); goto done; }
  for (int b = 0; b < NB; b++) {
    int first = (int)((int64_t)I * b / NB), last = (int)((int64_t)I * (b + 1) / NB);
    if (!block_alloc(&bl[b], pb, gp, first, last - first)) {
      st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the population (%lld individuals)",
                    (long long)gp->pop);
      goto done;
    }
  }
  for (int b = 0; b < NB; b++) {
    block_init(pb, gp, &bl[b], nt, path);
    block_history(&bl[b], out->history + (int64_t)bl[b].first * (G + 1), G + 1, 0);
  }

  out->stop_reason = SBG_GRN_STOP_GENERATIONS;
  for (;;) {
    int64_t best = -1;
    for (int b = 0; b < NB; b++) {
      int64_t s = bl[b].score[block_best(&bl[b])];
      if (best < 0 || s < best) best = s;
    }
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
    if (is_migration(gp, g)) {
      for (int b = 0; b < NB; b++) block_gather(pb, &bl[b]);
      for (int b = 0; b < NB; b++) {
        /* the previous block's last island's snapshot */
        const cpu_block *p = &bl[(b + NB - 1) % NB];
        int64_t off = (int64_t)(p->count - 1) * p->K;
        grn_pop in = {p->mig.act + off * n * w, p->mig.rep + off * n * w, p->mig.rule + off * n,
                      p->K, 0};
        block_scatter(pb, &bl[b], &in, p->mig_score + off, nt);
      }
    }
    for (int b = 0; b < NB; b++) {
      block_breed(pb, gp, &bl[b], g, nt, path);
      block_history(&bl[b], out->history + (int64_t)bl[b].first * (G + 1), G + 1, g);
    }
  }
  out->generations_run = g;

  {
    /* the best of all islands, ties by index */
    int bb = 0;
    int64_t kb = block_best(&bl[0]);
    for (int b = 1; b < NB; b++) {
      int64_t k = block_best(&bl[b]);
      if (bl[b].score[k] < bl[bb].score[kb]) { bb = b; kb = k; }
    }
    grn_view v = grn_view_at(&bl[bb].cur, n, w, kb);
    out->best_score = grn_evaluate(pb, v, &out->best_dn, &out->best_dl);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) out->best_links[i + (int64_t)j * n] = grn_link_get(pb, v, i, j);
      out->best_rules[i] = GRN_RULE(v, i);
    }
  }
done:
  if (bl)
    for (int b = 0; b < NB; b++) block_free(&bl[b]);
  free(bl);
  free(lut);
  return st;
}

/* One BPPARAM worker's round (see sbg_grn_round in grn.h). */
sbg_status sbg_grn_round_cpu(const sbg_grn_problem *pb_in, const sbg_grn_params *gp,
                             sbg_grn_round *rd, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  uint8_t *lut = NULL;
  const sbg_grn_problem pbl = with_lut(pb_in, &lut), *pb = &pbl;
  const int n = pb->n, w = pb->w, nt = ctx->n_threads;
  const int64_t nw = (int64_t)n * w, rows = rd->g_to - rd->g_from + 1;
  const int path = sbg_grn_cpu_eval_path(pb);
  cpu_block b = {0};
  int64_t *in_score = NULL;
  grn_pop in = {0};
  double t_poll = now_seconds();
  int64_t g = rd->g_from;

  if (!block_alloc(&b, pb, gp, rd->first, rd->count) ||
      !(in_score = malloc(((size_t)b.K + 1) * sizeof(int64_t)))) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the block of islands");
    goto done;
  }
  for (int64_t e = 0; e < rows * rd->count; e++) rd->history[e] = NAN;
  if (rd->init) {
    block_init(pb, gp, &b, nt, path);
  } else {
    memcpy(b.cur.act, rd->state.act, (size_t)(b.np * nw) * sizeof(uint32_t));
    memcpy(b.cur.rep, rd->state.rep, (size_t)(b.np * nw) * sizeof(uint32_t));
    memcpy(b.cur.rule, rd->state.rule, (size_t)(b.np * n));
    for (int64_t k = 0; k < b.np; k++) b.score[k] = (int64_t)rd->state.score[k];
    block_sort(&b, nt);
  }
  block_history(&b, rd->history, rows, 0);
  if (rd->incoming) {
    in.act = rd->incoming->act;
    in.rep = rd->incoming->rep;
    in.rule = rd->incoming->rule;
    in.count = b.K;
    for (int r = 0; r < b.K; r++) in_score[r] = (int64_t)rd->incoming->score[r];
  }
  rd->stopped = 0;
  for (;;) {
    if (gp->target >= 0 && b.score[block_best(&b)] <= gp->target) { rd->stopped = 1; break; }
    if (g >= rd->g_to) break;
    double t = now_seconds();
    if (t - t_poll > 0.1) {
      st = sbg_poll(ctx, (double)(g - rd->g_from) / (double)(rd->g_to - rd->g_from));
      if (st != SBG_OK) goto done;
      t_poll = t;
    }
    g++;
    if (is_migration(gp, g)) {
      block_gather(pb, &b);
      block_scatter(pb, &b, g == rd->g_from + 1 && rd->incoming ? &in : NULL, in_score, nt);
    }
    block_breed(pb, gp, &b, g, nt, path);
    block_history(&b, rd->history, rows, g - rd->g_from);
  }
  rd->g_done = g;
  rd->best_index = block_best(&b);
  rd->best_score = b.score[rd->best_index];
  memcpy(rd->state.act, b.cur.act, (size_t)(b.np * nw) * sizeof(uint32_t));
  memcpy(rd->state.rep, b.cur.rep, (size_t)(b.np * nw) * sizeof(uint32_t));
  memcpy(rd->state.rule, b.cur.rule, (size_t)(b.np * n));
  for (int64_t k = 0; k < b.np; k++) rd->state.score[k] = (double)b.score[k];
  for (int r = 0; r < b.K; r++) {
    int64_t src = b.ord[(int64_t)(b.count - 1) * b.size + r];
    memcpy(rd->outgoing.act + r * nw, b.cur.act + src * nw, (size_t)nw * sizeof(uint32_t));
    memcpy(rd->outgoing.rep + r * nw, b.cur.rep + src * nw, (size_t)nw * sizeof(uint32_t));
    memcpy(rd->outgoing.rule + (int64_t)r * n, b.cur.rule + src * n, (size_t)n);
    rd->outgoing.score[r] = (double)b.score[src];
  }
done:
  block_free(&b);
  free(in_score);
  free(lut);
  return st;
}

int64_t sbg_grn_decode(const sbg_grn_problem *pb_in, const sbg_grn_state *s, int64_t k,
                       int *links, int *rules, int *dn, int *dl) {
  uint8_t *lut = NULL;
  const sbg_grn_problem pbl = with_lut(pb_in, &lut), *pb = &pbl;
  const int n = pb->n, w = pb->w;
  grn_pop p = {s->act, s->rep, s->rule, k + 1, 0};
  grn_view v = grn_view_at(&p, n, w, k);
  int64_t score = grn_evaluate(pb, v, dn, dl);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) links[i + (int64_t)j * n] = grn_link_get(pb, v, i, j);
    rules[i] = GRN_RULE(v, i);
  }
  free(lut);
  return score;
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
