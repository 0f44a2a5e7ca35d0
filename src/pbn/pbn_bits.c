/* Bit-sliced CPU engine of pbnSteadyState() (engine = "bits"; the step
 * code in pbn_bits.h, shared with the GPU engine): OpenMP over groups of 32
 * chains, each group's state 32-bit bit planes (one word moves 32 chains),
 * and the host side shared by both engines (the function records, the
 * sets' literals, the groups' start). */
#include <stdlib.h>
#include <string.h>

#include "omp_compat.h"
#include "pbn.h"
#include "pbn_bits.h"

int32_t sbg_pbn_bits_usable(const sbg_pbn_net *net) {
  if (net->async || net->n > SBG_PBN_BITS_MAX_N) return 0;
  for (int32_t f = 0; f < net->fun_start[net->n]; f++)
    if (net->fun_k[f] > SBG_PBN_BITS_K) return 0;
  return 1;
}

sbg_status sbg_pbn_bits_build(const sbg_pbn_net *net, const sbg_pbn_sets *sets, uint64_t seed,
                              sbg_pbn_bits_host *h, sbg_ctx *ctx) {
  memset(h, 0, sizeof *h);
  if (!sbg_pbn_bits_usable(net))
    return sbg_fail(ctx, SBG_ERR_INPUT, "engine \"bits\" needs synchronous updates, at most %d inputs per "
                    "function and at most %d simulated nodes", SBG_PBN_BITS_K, SBG_PBN_BITS_MAX_N);
  const int32_t nf = net->fun_start[net->n], S = sets->n_sets;
  int32_t n_lit = 0;
  for (int32_t e = 0; e < sets->set_start[S]; e++) {
    for (int b = 0; b < 64; b++) n_lit += (int32_t)(((sets->pos[e] | sets->neg[e]) >> b) & 1u);
  }
  h->fun = (sbg_pbn_bfun *)calloc((size_t)(nf > 0 ? nf : 1), sizeof(sbg_pbn_bfun));
  h->set_start = (int32_t *)malloc(sizeof(int32_t) * (size_t)(S + 1));
  h->set_lit = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n_lit > 0 ? n_lit : 1));
  if (!h->fun || !h->set_start || !h->set_lit) {
    sbg_pbn_bits_free(h);
    return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the bit-sliced network");
  }
  int32_t kw = 0;
  for (int32_t f = 0; f < nf; f++) {
    const int32_t k = net->fun_k[f];
    const int32_t *in = net->inputs + net->in_start[f];
    uint32_t t = net->tables[net->tab_start[f]];
    const uint32_t rows = 1u << k;
    if (rows < 32) t &= (1u << rows) - 1u;
    for (uint32_t w = rows; w < 32; w *= 2) t |= t << w;
    h->fun[f].tab = t;
    /* bit j of the row index is input k-1-j (the first is the most significant) */
    for (int32_t j = 0; j < k; j++) h->fun[f].in[j] = (uint16_t)in[k - 1 - j];
    if (k > kw) kw = k;
  }
  int32_t at = 0;
  for (int32_t s = 0; s < S; s++) {
    h->set_start[s] = at;
    for (int32_t e = sets->set_start[s]; e < sets->set_start[s + 1]; e++)
      for (int b = 0; b < 64; b++) {
        const int32_t node = 64 * sets->word[e] + b;
        if ((sets->pos[e] >> b) & 1u) h->set_lit[at++] = (int32_t)((uint32_t)node | 0x80000000u);
        else if ((sets->neg[e] >> b) & 1u) h->set_lit[at++] = node;
      }
  }
  h->set_start[S] = at;
  h->b.kw = kw;
  h->b.key0 = (uint32_t)seed;
  h->b.key1 = (uint32_t)(seed >> 32);
  h->b.fun = h->fun;
  h->b.set_start = h->set_start;
  h->b.set_lit = h->set_lit;
  return SBG_OK;
}

void sbg_pbn_bits_free(sbg_pbn_bits_host *h) {
  free(h->fun);
  free(h->set_start);
  free(h->set_lit);
  memset(h, 0, sizeof *h);
}

void sbg_pbn_bits_start(const sbg_pbn_net *net, uint64_t seed, int64_t g0, int64_t g1, const uint64_t *from,
                        uint32_t *planes, sbg_philox *rng, int32_t *gap, int threads) {
  const int32_t n = net->n;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t g = g0; g < g1; g++) {
    uint32_t *x = planes + (g - g0) * n;
    memset(x, 0, sizeof(uint32_t) * (size_t)n);
    for (uint32_t j = 0; j < 32; j++) {
      const int64_t l = (g - g0) * 32 + j;
      pbnb_start_lane(net, seed, 32 * g + j, j, from, x, rng + l, gap + l);
    }
  }
}

void sbg_pbn_bits_unpack(const sbg_pbn_net *net, int64_t g0, int64_t g1, const uint32_t *planes, int64_t n_chains,
                         int64_t steps, int64_t t, uint64_t *out) {
  const int32_t n = net->n, W = net->n_words;
  for (int64_t g = g0; g < g1; g++)
    for (uint32_t j = 0; j < 32 && 32 * g + j < n_chains; j++) {
      uint64_t *o = out + ((32 * g + j) * (steps + 1) + t) * W;
      memset(o, 0, sizeof(uint64_t) * (size_t)W);
      for (int32_t i = 0; i < n; i++)
        o[i >> 6] |= (uint64_t)((planes[(g - g0) * n + i] >> j) & 1u) << (i & 63);
    }
}

typedef struct pbnb_cpu {
  sbg_pbn_engine base;
  const sbg_pbn_net *net;
  int32_t n_sets;
  sbg_pbn_bits_host h;
  int64_t n_chains, n_groups;
  uint32_t *planes;   /* n_groups * n */
  uint32_t *scratch;  /* threads * n: the other half of each step */
  sbg_philox *rng;    /* n_groups * 32: lane streams */
  int32_t *gap;       /* n_groups * 32 */
  uint32_t *cnt;      /* n_chains * n_sets * 3, as the chain engine's */
  uint64_t t;         /* steps taken so far (the selection streams' step) */
} pbnb_cpu;

/* len steps of group g from step t (kw a constant at the call sites);
 * with count, its valid lanes' counters (of an advance of len steps). */
PBN_HD void pbnb_group_run(pbnb_cpu *e, int64_t g, uint32_t *a, uint32_t *b, uint64_t t, int64_t len,
                           int count, int32_t kw) {
  const sbg_pbn_net *net = e->net;
  const sbg_pbn_bnet *bn = &e->h.b;
  const int32_t n = net->n, S = e->n_sets;
  sbg_philox *rng = e->rng + 32 * g;
  int32_t *gap = e->gap + 32 * g;
  const int64_t left_chains = e->n_chains - 32 * g;
  const uint32_t valid = left_chains >= 32 ? ~0u : (1u << left_chains) - 1u;
  uint32_t *cur = a, *nxt = b;
  if (count)
    for (int32_t s = 0; s < S; s++)
      for (uint32_t m = pbnb_in_set(bn, s, cur) & valid; m; m &= m - 1) {
        const int j = __builtin_ctz(m);
        e->cnt[((32 * g + j) * S + s) * 3] += (uint32_t)len;
      }
  for (int64_t tt = 0; tt < len; tt++) {
    uint32_t P = 0;
    for (uint32_t j = 0; j < 32; j++) P |= (uint32_t)(gap[j] == 0) << j;
    if (P != ~0u) {
      for (int32_t i = 0; i < n; i++) {
        const uint32_t v = pbnb_node(net, bn, kw, i, cur, (uint32_t)g, t + (uint64_t)tt);
        nxt[i] = (v & ~P) | (cur[i] & P);
      }
    } else {
      memcpy(nxt, cur, sizeof(uint32_t) * (size_t)n);
    }
    for (uint32_t j = 0; j < 32; j++) {
      if ((P >> j) & 1u) {
        pbnb_perturb(net, rng + j, nxt, 1u << j);
        gap[j] = pbn_draw_gap(net, rng + j);
      } else {
        gap[j] = pbn_gap_advance(net, rng + j, gap[j], 1);
      }
    }
    if (count)
      for (int32_t s = 0; s < S; s++) {
        const uint32_t m1 = pbnb_in_set(bn, s, nxt);
        for (uint32_t d = (pbnb_in_set(bn, s, cur) ^ m1) & valid; d; d &= d - 1) {
          const int j = __builtin_ctz(d);
          pbnb_count_switch(e->cnt + (32 * g + j) * S * 3, 1, s, (int)((m1 >> j) & 1u), (uint32_t)(len - tt));
        }
      }
    uint32_t *tmp = cur; cur = nxt; nxt = tmp;
  }
  if (cur != a) memcpy(a, cur, sizeof(uint32_t) * (size_t)n);
}

static sbg_status pbnb_cpu_advance(sbg_pbn_engine *eng, int64_t steps, int count, uint64_t *sums,
                                   double lo, double hi, sbg_ctx *ctx) {
  pbnb_cpu *e = (pbnb_cpu *)eng;
  const int32_t n = e->net->n, S = e->n_sets, kw = e->h.b.kw;
  const int64_t ng = e->n_groups;
  if (count) memset(e->cnt, 0, sizeof(uint32_t) * (size_t)e->n_chains * S * 3);
  /* about 2e8 plane updates per thread between polls (~0.1 s) */
  double per = (double)ng / ctx->n_threads;
  double ch = 2e8 / ((per < 1 ? 1 : per) * (n + 40.0));
  int64_t chunk = ch < 1 ? 1 : ch > (1 << 24) ? (1 << 24) : (int64_t)ch;
  for (int64_t done = 0; done < steps; done += chunk) {
    const int64_t len = steps - done < chunk ? steps - done : chunk;
    const uint64_t t = e->t + (uint64_t)done;
#pragma omp parallel for schedule(static) num_threads(ctx->n_threads)
    for (int64_t g = 0; g < ng; g++) {
      uint32_t *a = e->planes + g * n, *b = e->scratch + (int64_t)omp_get_thread_num() * n;
      switch (kw) {  /* a constant width: the multiplexer tree unrolled */
        case 0: pbnb_group_run(e, g, a, b, t, len, count, 0); break;
        case 1: pbnb_group_run(e, g, a, b, t, len, count, 1); break;
        case 2: pbnb_group_run(e, g, a, b, t, len, count, 2); break;
        case 3: pbnb_group_run(e, g, a, b, t, len, count, 3); break;
        case 4: pbnb_group_run(e, g, a, b, t, len, count, 4); break;
        default: pbnb_group_run(e, g, a, b, t, len, count, 5); break;
      }
    }
    sbg_status st = sbg_poll(ctx, lo + (hi - lo) * (double)(done + len) / (double)steps);
    if (st != SBG_OK) return st;
  }
  e->t += (uint64_t)steps;
  if (count) sbg_pbn_sum_counts(e->cnt, e->n_chains, S, sums);
  return SBG_OK;
}

static void pbnb_cpu_close(pbnb_cpu *e) {
  sbg_pbn_bits_free(&e->h);
  free(e->planes);
  free(e->scratch);
  free(e->rng);
  free(e->gap);
  free(e->cnt);
}

sbg_status sbg_pbn_bits_steady_cpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                                   const sbg_pbn_params *p, sbg_pbn_result *out, sbg_ctx *ctx) {
  pbnb_cpu e;
  memset(&e, 0, sizeof e);
  sbg_status st = sbg_pbn_bits_build(net, sets, p->seed, &e.h, ctx);
  if (st != SBG_OK) return st;
  const int32_t n = net->n, S = sets->n_sets;
  e.base.self = &e;
  e.base.advance = pbnb_cpu_advance;
  e.net = net;
  e.n_sets = S;
  e.n_chains = p->n_chains;
  e.n_groups = (p->n_chains + 31) / 32;
  e.planes = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)e.n_groups * n);
  e.scratch = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)ctx->n_threads * n);
  e.rng = (sbg_philox *)malloc(sizeof(sbg_philox) * (size_t)e.n_groups * 32);
  e.gap = (int32_t *)malloc(sizeof(int32_t) * (size_t)e.n_groups * 32);
  e.cnt = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)e.n_chains * (S > 0 ? S : 1) * 3);
  if (!e.planes || !e.scratch || !e.rng || !e.gap || !e.cnt) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the state of %lld trajectories", (long long)e.n_chains);
  } else {
    sbg_pbn_bits_start(net, p->seed, 0, e.n_groups, NULL, e.planes, e.rng, e.gap, ctx->n_threads);
    st = sbg_pbn_two_state(&e.base, p, S, out, ctx);
  }
  pbnb_cpu_close(&e);
  return st;
}

sbg_status sbg_pbn_bits_simulate_cpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains, int64_t steps,
                                     const uint64_t *from, uint64_t *out, sbg_ctx *ctx) {
  const int32_t no_set_start = 0;
  const sbg_pbn_sets none = {0, &no_set_start, NULL, NULL, NULL};
  pbnb_cpu e;
  memset(&e, 0, sizeof e);
  sbg_status st = sbg_pbn_bits_build(net, &none, seed, &e.h, ctx);
  if (st != SBG_OK) return st;
  const int32_t n = net->n, kw = e.h.b.kw;
  e.net = net;
  e.n_chains = n_chains;
  e.n_groups = (n_chains + 31) / 32;
  const int64_t ng = e.n_groups;
  e.planes = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)ng * n);
  e.scratch = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)ctx->n_threads * n);
  e.rng = (sbg_philox *)malloc(sizeof(sbg_philox) * (size_t)ng * 32);
  e.gap = (int32_t *)malloc(sizeof(int32_t) * (size_t)ng * 32);
  if (!e.planes || !e.scratch || !e.rng || !e.gap) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the state of %lld trajectories", (long long)n_chains);
    goto done;
  }
  sbg_pbn_bits_start(net, seed, 0, ng, from, e.planes, e.rng, e.gap, ctx->n_threads);
  sbg_pbn_bits_unpack(net, 0, ng, e.planes, n_chains, steps, 0, out);
  for (int64_t t = 0; t < steps && st == SBG_OK; t++) {
#pragma omp parallel for schedule(static) num_threads(ctx->n_threads)
    for (int64_t g = 0; g < ng; g++)
      pbnb_group_run(&e, g, e.planes + g * n, e.scratch + (int64_t)omp_get_thread_num() * n, (uint64_t)t, 1, 0, kw);
    sbg_pbn_bits_unpack(net, 0, ng, e.planes, n_chains, steps, t + 1, out);
    st = sbg_poll(ctx, (double)(t + 1) / (double)steps);
  }
done:
  pbnb_cpu_close(&e);
  return st;
}
