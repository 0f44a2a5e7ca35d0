/* CPU trajectory engine of pbnSteadyState() and pbnSimulate(): OpenMP over
 * chains, each chain on its own Philox subsequence, the step code shared
 * with the GPU engine (pbn_step.h). */
#include <stdlib.h>
#include <string.h>

#include "omp_compat.h"
#include "pbn.h"
#include "pbn_step.h"
#include "pbn_bits.h"

typedef struct pbn_cpu {
  sbg_pbn_engine base;
  const sbg_pbn_net *net;
  const sbg_pbn_sets *sets;
  int64_t n_chains;
  uint64_t *states;   /* n_chains * W */
  sbg_philox *rng;    /* n_chains */
  int32_t *gap;       /* n_chains: function steps before the next event (pbn_draw_gap) */
  uint32_t *cnt;      /* n_chains * n_sets * 3: n1, n01, n10 of this advance */
  uint64_t *scratch;  /* threads * W: the other half of each step */
  unsigned char *prev;/* threads * n_sets: indicators of the current state */
  sbg_pbn_frec *rec;  /* compact functions for the register step, or NULL */
  int32_t kw;         /* their gather width (pbn_eval2) */
} pbn_cpu;

/* Steps per chunk between polls: about 2e7 node updates per thread (a step
 * costs about 40 node updates more, for its draws), ~0.1 s. */
static int64_t pbn_chunk(const sbg_pbn_net *net, const sbg_pbn_sets *sets, int64_t n_chains,
                         int threads) {
  double work = (double)net->n + 40.0 + (sets ? 2.0 * sets->set_start[sets->n_sets] : 0.0);
  double per = (double)n_chains / threads;
  if (per < 1) per = 1;
  double c = 2e7 / (work * per);
  if (c < 1) c = 1;
  if (c > 1 << 24) c = 1 << 24;
  return (int64_t)c;
}

/* len steps of chain c with the register step (at most 128 nodes), the
 * state in two words; kw and two are constants at each call site. */
PBN_HD void pbn_chain2(pbn_cpu *e, int64_t c, int64_t len, int count, uint32_t *k, int32_t kw, int two) {
  uint64_t *home = e->states + c * (two ? 2 : 1);
  uint64_t x0 = home[0], x1 = two ? home[1] : 0;
  sbg_philox g = e->rng[c];
  int32_t gs = e->gap[c];
  pbn_run2(e->net, e->rec, kw, two, e->sets, len, count, &x0, &x1, &g, &gs, k, 1);
  home[0] = x0;
  if (two) home[1] = x1;
  e->rng[c] = g;
  e->gap[c] = gs;
}

static sbg_status pbn_cpu_advance(sbg_pbn_engine *eng, int64_t steps, int count, uint64_t *sums,
                                  double lo, double hi, sbg_ctx *ctx) {
  pbn_cpu *e = (pbn_cpu *)eng;
  const sbg_pbn_net *net = e->net;
  const sbg_pbn_sets *sets = e->sets;
  const int32_t W = net->n_words, S = sets->n_sets;
  const int64_t nc = e->n_chains;
  if (count) memset(e->cnt, 0, sizeof(uint32_t) * (size_t)nc * S * 3);
  int64_t chunk = pbn_chunk(net, sets, nc, ctx->n_threads);
  for (int64_t done = 0; done < steps; done += chunk) {
    int64_t len = steps - done < chunk ? steps - done : chunk;
    if (e->rec) {
      const int32_t kw = e->kw;
      const int two = W > 1;
      /* constant gather widths and word counts for the compiler */
#pragma omp parallel for schedule(static) num_threads(ctx->n_threads)
      for (int64_t c = 0; c < nc; c++) {
        uint32_t *k = e->cnt + c * S * 3;
        switch (kw * 2 + two) {  /* kw in 1..SBG_PBN_FREC_K */
          case 2: pbn_chain2(e, c, len, count, k, 1, 0); break;
          case 3: pbn_chain2(e, c, len, count, k, 1, 1); break;
          case 4: pbn_chain2(e, c, len, count, k, 2, 0); break;
          case 5: pbn_chain2(e, c, len, count, k, 2, 1); break;
          case 6: pbn_chain2(e, c, len, count, k, 3, 0); break;
          case 7: pbn_chain2(e, c, len, count, k, 3, 1); break;
          case 8: pbn_chain2(e, c, len, count, k, 4, 0); break;
          case 9: pbn_chain2(e, c, len, count, k, 4, 1); break;
          case 10: pbn_chain2(e, c, len, count, k, 5, 0); break;
          case 11: pbn_chain2(e, c, len, count, k, 5, 1); break;
          case 12: pbn_chain2(e, c, len, count, k, 6, 0); break;
          default: pbn_chain2(e, c, len, count, k, 6, 1); break;
        }
      }
    } else {
#pragma omp parallel for schedule(static) num_threads(ctx->n_threads)
    for (int64_t c = 0; c < nc; c++) {
      uint64_t *home = e->states + c * W;
      uint64_t *a = home;
      uint64_t *b = e->scratch + (int64_t)omp_get_thread_num() * W;
      uint32_t *k = e->cnt + c * S * 3;
      /* each set's indicator of the current state, carried from step to
       * step; an unchanged state (common at fixed points) keeps them all */
      unsigned char *prev = e->prev + (int64_t)omp_get_thread_num() * S;
      if (count)
        for (int32_t s = 0; s < S; s++) prev[s] = (unsigned char)pbn_in_set(sets, s, a, 1);
      sbg_philox g = e->rng[c];
      int32_t gs = e->gap[c];
      for (int64_t t = 0; t < len; t++) {
        const int fstep = gs != 0;
        pbn_step(net, a, b, 1, &g, &gs);
        int32_t skipped = 0;
        int same = 1;
        if (count || net->det) {
          for (int32_t w = 0; w < W; w++) same &= a[w] == b[w];
          /* at a fixed point: the function steps up to the next event at once */
          if (net->det && fstep && same) skipped = pbn_skip_fixed(net, &g, &gs, len - 1 - t);
          t += skipped;
        }
        if (count) {
          for (int32_t s = 0; s < S; s++) {
            int x0 = prev[s], x1 = same ? x0 : pbn_in_set(sets, s, b, 1);
            k[3 * s] += (uint32_t)x1 * (uint32_t)(1 + skipped);
            k[3 * s + 1] += (uint32_t)(!x0 & x1);
            k[3 * s + 2] += (uint32_t)(x0 & !x1);
            prev[s] = (unsigned char)x1;
          }
        }
        uint64_t *tmp = a; a = b; b = tmp;  /* the new state becomes current */
      }
      if (a != home) memcpy(home, a, sizeof(uint64_t) * W);
      e->rng[c] = g;
      e->gap[c] = gs;
    }
    }
    sbg_status st = sbg_poll(ctx, lo + (hi - lo) * (double)(done + len) / (double)steps);
    if (st != SBG_OK) return st;
  }
  if (count) sbg_pbn_sum_counts(e->cnt, nc, S, sums);
  return SBG_OK;
}

void sbg_pbn_sum_counts(const uint32_t *cnt, int64_t n_chains, int32_t n_sets, uint64_t *sums) {
  memset(sums, 0, sizeof(uint64_t) * (size_t)n_sets * SBG_PBN_NSUM);
  for (int64_t c = 0; c < n_chains; c++)
    for (int32_t s = 0; s < n_sets; s++) {
      const uint32_t *k = cnt + (c * n_sets + s) * 3;
      sums[s * SBG_PBN_NSUM] += k[0];
      sums[s * SBG_PBN_NSUM + 1] += k[1];
      sums[s * SBG_PBN_NSUM + 2] += k[2];
      sums[s * SBG_PBN_NSUM + 3] += (uint64_t)k[0] * k[0];
    }
}

/* Allocates the engine of chains [c0, c1) of the whole set (chain c on
 * Philox subsequence c); with `state` NULL starts them from the seed, else
 * imports an exported state (pbn_cpu_export). */
static sbg_status pbn_cpu_open(pbn_cpu *e, const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                               const sbg_pbn_params *p, int64_t c0, int64_t c1,
                               const unsigned char *state, sbg_ctx *ctx) {
  memset(e, 0, sizeof *e);
  const int32_t W = net->n_words;
  const int64_t nc = c1 - c0;
  e->base.self = e;
  e->base.advance = pbn_cpu_advance;
  e->net = net;
  e->sets = sets;
  e->n_chains = nc;
  e->states = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)nc * W);
  e->rng = (sbg_philox *)malloc(sizeof(sbg_philox) * (size_t)nc);
  e->gap = (int32_t *)malloc(sizeof(int32_t) * (size_t)nc);
  e->cnt = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)nc * (sets->n_sets > 0 ? sets->n_sets : 1) * 3);
  e->scratch = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)ctx->n_threads * W);
  e->prev = (unsigned char *)malloc((size_t)ctx->n_threads * (sets->n_sets > 0 ? sets->n_sets : 1));
  int rec_failed = 0;
  if (p->small && net->n <= SBG_PBN_SMALL_N) {
    e->rec = (sbg_pbn_frec *)malloc(sizeof(sbg_pbn_frec) * (size_t)net->fun_start[net->n]);
    if (!e->rec) rec_failed = 1;
    else if (sbg_pbn_frecs(net, e->rec, (e->kw = sbg_pbn_frec_width(net))) < 0) {
      free(e->rec);  /* a table offset beyond 32 bits: the general step */
      e->rec = NULL;
    }
  }
  if (!e->states || !e->rng || !e->gap || !e->cnt || !e->scratch || !e->prev || rec_failed)
    return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the state of %lld trajectories", (long long)nc);
  if (state) {
    size_t a = sizeof(uint64_t) * (size_t)nc * W, b = sizeof(sbg_philox) * (size_t)nc;
    memcpy(e->states, state, a);
    memcpy(e->rng, state + a, b);
    memcpy(e->gap, state + a + b, sizeof(int32_t) * (size_t)nc);
    return SBG_OK;
  }
  for (int64_t c = 0; c < nc; c++) {
    sbg_philox_init(&e->rng[c], p->seed, (uint64_t)(c0 + c), 0);
    pbn_random_state(net, &e->rng[c], e->states + c * W, 1);
    e->gap[c] = pbn_draw_gap(net, &e->rng[c]);
  }
  return SBG_OK;
}

static void pbn_cpu_close(pbn_cpu *e) {
  free(e->states);
  free(e->rng);
  free(e->gap);
  free(e->cnt);
  free(e->scratch);
  free(e->prev);
  free(e->rec);
}

size_t sbg_pbn_block_state_bytes(const sbg_pbn_net *net, int64_t n_chains) {
  return (size_t)n_chains * (sizeof(uint64_t) * (size_t)net->n_words + sizeof(sbg_philox) + sizeof(int32_t));
}

sbg_status sbg_pbn_block_cpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets, const sbg_pbn_params *p,
                             int64_t c0, int64_t c1, const unsigned char *state_in, int64_t steps,
                             int count, uint64_t *sums, unsigned char *state_out, sbg_ctx *ctx) {
  pbn_cpu e;
  sbg_status st = pbn_cpu_open(&e, net, sets, p, c0, c1, state_in, ctx);
  if (st == SBG_OK && steps > 0) st = pbn_cpu_advance(&e.base, steps, count, sums, 0.0, 1.0, ctx);
  if (st == SBG_OK && count && steps <= 0)
    memset(sums, 0, sizeof(uint64_t) * (size_t)sets->n_sets * SBG_PBN_NSUM);
  if (st == SBG_OK) {
    const int64_t nc = c1 - c0;
    size_t a = sizeof(uint64_t) * (size_t)nc * net->n_words, b = sizeof(sbg_philox) * (size_t)nc;
    memcpy(state_out, e.states, a);
    memcpy(state_out + a, e.rng, b);
    memcpy(state_out + a + b, e.gap, sizeof(int32_t) * (size_t)nc);
  }
  pbn_cpu_close(&e);
  return st;
}

sbg_status sbg_pbn_steady_cpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                              const sbg_pbn_params *p, sbg_pbn_result *out, sbg_ctx *ctx) {
  if (p->bits) return sbg_pbn_bits_steady_cpu(net, sets, p, out, ctx);
  pbn_cpu e;
  sbg_status st = pbn_cpu_open(&e, net, sets, p, 0, p->n_chains, NULL, ctx);
  if (st == SBG_OK) st = sbg_pbn_two_state(&e.base, p, sets->n_sets, out, ctx);
  pbn_cpu_close(&e);
  return st;
}

sbg_status sbg_pbn_simulate_cpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains,
                                int64_t steps, const uint64_t *from, uint64_t *out, sbg_ctx *ctx) {
  const int32_t W = net->n_words;
  const int64_t rows = steps + 1;
  /* chains' streams kept between chunks of steps, so that interrupts are
   * polled between chunks (never inside the parallel region) */
  sbg_philox *g = (sbg_philox *)malloc(sizeof(sbg_philox) * (size_t)(n_chains > 0 ? n_chains : 1));
  int32_t *gs = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n_chains > 0 ? n_chains : 1));
  if (!g || !gs) {
    free(g);
    free(gs);
    return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the streams of %lld trajectories", (long long)n_chains);
  }
#pragma omp parallel for schedule(static) num_threads(ctx->n_threads)
  for (int64_t c = 0; c < n_chains; c++) {
    sbg_philox_init(&g[c], seed, (uint64_t)c, 0);
    uint64_t *o = out + c * rows * W;
    if (from) memcpy(o, from, sizeof(uint64_t) * W);
    else pbn_random_state(net, &g[c], o, 1);
    gs[c] = pbn_draw_gap(net, &g[c]);
  }
  const int64_t chunk = pbn_chunk(net, NULL, n_chains, ctx->n_threads);
  sbg_status st = SBG_OK;
  for (int64_t t0 = 0; t0 < steps && st == SBG_OK; t0 += chunk) {
    const int64_t t1 = steps - t0 < chunk ? steps : t0 + chunk;
#pragma omp parallel for schedule(static) num_threads(ctx->n_threads)
    for (int64_t c = 0; c < n_chains; c++) {
      uint64_t *o = out + c * rows * W;
      for (int64_t t = t0; t < t1; t++) pbn_step(net, o + t * W, o + (t + 1) * W, 1, &g[c], &gs[c]);
    }
    st = sbg_poll(ctx, (double)t1 / (double)steps);
  }
  free(g);
  free(gs);
  return st == SBG_OK ? sbg_poll(ctx, 1.0) : st;
}
