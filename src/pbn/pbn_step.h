/* One PBN step, the random start state and set membership, shared verbatim
 * by the CPU (pbn_cpu.c) and GPU (pbn_gpu.cu) engines of pbnSteadyState()
 * and pbnSimulate(): same code, same Philox draws, same trajectories.
 * States are read through a stride (1 on the CPU, the chain count on the
 * GPU, where chains are interleaved for coalesced access). */
#ifndef SBG_PBN_STEP_H
#define SBG_PBN_STEP_H

#include "philox.h"
#include "pbn.h"

/* Inlined into the chain loops so that the CPU's stride of 1 is a
 * constant there. */
#ifdef __CUDACC__
#define PBN_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define PBN_HD static inline __attribute__((always_inline))
#else
#define PBN_HD static inline
#endif

#if defined(__CUDACC__)
#define PBN_UNROLL
#elif defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define PBN_UNROLL _Pragma("GCC unroll 8")
#elif defined(__clang__)
#define PBN_UNROLL _Pragma("unroll")
#else
#define PBN_UNROLL
#endif

/* Position of the next word in the chain's stream, and a jump to any
 * position (the step's function-selection block is read by rank, so that a
 * reduced network consumes the stream exactly as the full one). */
PBN_HD uint64_t pbn_rng_pos(const sbg_philox *g) {
  uint64_t block = ((uint64_t)g->ctr[1] << 32) | g->ctr[0];
  return (block << 2) + g->lane;
}

PBN_HD void pbn_rng_seek(sbg_philox *g, uint64_t pos) {
  uint64_t block = pos >> 2;
  uint64_t cur = ((uint64_t)g->ctr[1] << 32) | g->ctr[0];
  g->lane = (uint32_t)(pos & 3u);
  if (block != cur) {
    g->ctr[0] = (uint32_t)block;
    g->ctr[1] = (uint32_t)(block >> 32);
    sbg_philox_refill(g);
  }
}

/* A function step's selection block (the draws of the nodes with several
 * functions, by rank) starts at a 4-word boundary and covers whole blocks
 * of the generator: all chains then compute a new Philox block at the same
 * ranks, so the threads of a GPU warp do it together instead of each at
 * its own lane (which made the warp compute about one block per node). */
PBN_HD uint64_t pbn_sel_base(const sbg_pbn_net *net, const sbg_philox *g) {
  uint64_t pos = pbn_rng_pos(g);
  return net->n_sel_total ? (pos + 3u) & ~(uint64_t)3u : pos;
}

PBN_HD uint64_t pbn_sel_len(const sbg_pbn_net *net) {
  return ((uint64_t)net->n_sel_total + 3u) & ~(uint64_t)3u;
}

/* Smallest g in [1, rem] with u >= T[g] (T non-increasing): the gap to the
 * next flipped perturbable position; 0 when none of the next rem flips. */
PBN_HD int32_t pbn_gap(const uint64_t *T, uint64_t u, int32_t rem) {
  if (u < T[rem]) return 0;
  int32_t lo = 1, hi = rem;
  while (lo < hi) {
    int32_t mid = (lo + hi) >> 1;
    if (u >= T[mid]) hi = mid; else lo = mid + 1;
  }
  return lo;
}

/* The next perturbed position after *pos in a step that perturbs (the
 * first was drawn from the step's first word): one draw per further
 * position, 0 when there is none.  Both step functions walk it this way,
 * so they draw the same words. */
PBN_HD int pbn_next_pert(const uint64_t *T, sbg_philox *g, int32_t NP, int32_t *pos) {
  int32_t rem = NP - 1 - *pos;
  if (rem <= 0) return 0;
  int32_t gap = pbn_gap(T, sbg_philox_next(g), rem);
  if (gap == 0) return 0;
  *pos += gap;
  return 1;
}

/* The chain's count of function steps before its next event, drawn from
 * one word: s >= 0: s function steps, then a perturbation step; s < 0: -s
 * function steps, then a fresh draw (the table covers n_skip steps; memory-
 * less, so drawing again is exact).  Replaces the per-step draw that
 * decided whether a step perturbs: a function step of a network whose
 * nodes have one function each draws nothing. */
PBN_HD int32_t pbn_draw_gap(const sbg_pbn_net *net, sbg_philox *g) {
  const int32_t L = net->n_skip;
  int32_t j = pbn_gap(net->skip_thresh, sbg_philox_next(g), L);
  return j ? j - 1 : -L;
}

/* The count after m function steps, 1 <= m <= |s|; at the end of a block
 * (s < 0 reaching 0) the next count is drawn. */
PBN_HD int32_t pbn_gap_advance(const sbg_pbn_net *net, sbg_philox *g, int32_t s, int32_t m) {
  if (s > 0) return s - m;
  s += m;
  return s == 0 ? pbn_draw_gap(net, g) : s;
}

/* The first function f of node i with u < thresh[f]: the thresholds are
 * non-decreasing, so that is the count of the node's thresholds (the last,
 * 2^32, excepted) that u reaches; counted without a data-dependent branch. */
PBN_HD int32_t pbn_pick(const sbg_pbn_net *net, int32_t i, uint32_t u) {
  int32_t f0 = net->fun_start[i], f1 = net->fun_start[i + 1] - 1, f = f0;
  for (int32_t j = f0; j < f1; j++) f += (uint64_t)u >= net->fun_thresh[j];
  return f;
}

PBN_HD uint64_t pbn_eval(const sbg_pbn_net *net, int32_t f, const uint64_t *x, int64_t stride) {
  int32_t k = net->fun_k[f];
  const int32_t *in = net->inputs + net->in_start[f];
  uint32_t idx = 0;
  for (int32_t j = 0; j < k; j++) {
    int32_t v = in[j];
    idx = (idx << 1) | (uint32_t)((x[(int64_t)(v >> 6) * stride] >> (v & 63)) & 1u);
  }
  return (net->tables[net->tab_start[f] + (idx >> 5)] >> (idx & 31u)) & 1u;
}

/* Uniform random start: two draws per word of the full network's nodes,
 * each simulated node taking the bit of its node in the full network, so
 * that a reduced run starts, and draws everything after, as the unreduced
 * run does (simulated nodes keep the full network's order: without
 * reduction the mapping is the identity and the words are the state). */
PBN_HD void pbn_random_state(const sbg_pbn_net *net, sbg_philox *g, uint64_t *x, int64_t stride) {
  if (net->n_total == net->n) {
    for (int32_t w = 0; w < net->n_words; w++) {
      uint64_t lo = sbg_philox_next(g);
      uint64_t hi = sbg_philox_next(g);
      uint64_t v = lo | (hi << 32);
      int32_t left = net->n - 64 * w;
      if (left < 64) v &= (((uint64_t)1) << left) - 1u;
      x[(int64_t)w * stride] = v;
    }
    return;
  }
  for (int32_t w = 0; w < net->n_words; w++) x[(int64_t)w * stride] = 0;
  for (int32_t w = 0; 64 * w < net->n_total; w++) {
    uint64_t lo = sbg_philox_next(g);
    uint64_t hi = sbg_philox_next(g);
    uint64_t v = lo | (hi << 32);
    for (int32_t b = 0; b < 64 && 64 * w + b < net->n_total; b++) {
      const int32_t i = net->node_of_full[64 * w + b];
      if (i >= 0 && ((v >> b) & 1u)) x[(int64_t)(i >> 6) * stride] |= ((uint64_t)1) << (i & 63);
    }
  }
}

/* One step from cur to nxt; *gs is the chain's count (pbn_draw_gap).  At
 * 0 the step perturbs: one draw gives the first flipped perturbable
 * position, further flips follow by geometric gaps, then the next count
 * is drawn; a flip blocks every function update.  Otherwise (synchronous)
 * every node applies a function to the old state; nodes with several
 * functions read their selection draw from the step's block by rank.
 * Asynchronous: one uniformly chosen node is updated. */
PBN_HD void pbn_step(const sbg_pbn_net *net, const uint64_t *cur, uint64_t *nxt,
                     int64_t stride, sbg_philox *g, int32_t *gs) {
  const int32_t W = net->n_words;
  const int32_t NP = net->n_pert_total;
  const uint64_t *T = net->gap_thresh;
  if (*gs == 0) {
    for (int32_t w = 0; w < W; w++) nxt[(int64_t)w * stride] = cur[(int64_t)w * stride];
    int32_t pos = pbn_gap(net->first_thresh, sbg_philox_next(g), NP) - 1;
    do {
      int32_t node = net->pert_node[pos];
      if (node >= 0) nxt[(int64_t)(node >> 6) * stride] ^= ((uint64_t)1) << (node & 63);
    } while (pbn_next_pert(T, g, NP, &pos));
    *gs = pbn_draw_gap(net, g);
    return;
  }
  if (net->async) {
    uint32_t j = sbg_philox_below(g, (uint32_t)net->n_total);
    uint32_t uf = sbg_philox_next(g);
    for (int32_t w = 0; w < W; w++) nxt[(int64_t)w * stride] = cur[(int64_t)w * stride];
    int32_t i = net->node_of_full[j];
    if (i >= 0) {
      uint64_t b = pbn_eval(net, pbn_pick(net, i, uf), cur, stride);
      uint64_t *wp = nxt + (int64_t)(i >> 6) * stride;
      *wp = (*wp & ~(((uint64_t)1) << (i & 63))) | (b << (i & 63));
    }
    *gs = pbn_gap_advance(net, g, *gs, 1);
    return;
  }
  uint64_t base = pbn_sel_base(net, g);
  for (int32_t w = 0; w < W; w++) {
    uint64_t acc = 0;
    int32_t i0 = 64 * w, i1 = i0 + 64 < net->n ? i0 + 64 : net->n;
    for (int32_t i = i0; i < i1; i++) {
      int32_t f = net->fun_start[i];
      int32_t rank = net->sel_rank[i];
      if (rank >= 0) {
        pbn_rng_seek(g, base + (uint64_t)rank);
        f = pbn_pick(net, i, sbg_philox_next(g));
      }
      acc |= pbn_eval(net, f, cur, stride) << (i - i0);
    }
    nxt[(int64_t)w * stride] = acc;
  }
  pbn_rng_seek(g, base + pbn_sel_len(net));
  *gs = pbn_gap_advance(net, g, *gs, 1);
}

/* After a function step of a `det` network that kept the state (a fixed
 * point): the function steps up to the chain's next event (at most `room`)
 * keep it too; they are taken at once, the stream moved past their
 * selection blocks exactly as stepping would.  Returns how many. */
PBN_HD int32_t pbn_skip_fixed(const sbg_pbn_net *net, sbg_philox *g, int32_t *gs, int64_t room) {
  int32_t s = *gs;
  int64_t m = s < 0 ? -(int64_t)s : s;
  if (m > room) m = room;
  if (m <= 0) return 0;
  if (net->n_sel_total) pbn_rng_seek(g, pbn_sel_base(net, g) + (uint64_t)m * pbn_sel_len(net));
  *gs = pbn_gap_advance(net, g, s, (int32_t)m);
  return (int32_t)m;
}

PBN_HD int pbn_in_set(const sbg_pbn_sets *S, int32_t s, const uint64_t *x, int64_t stride) {
  for (int32_t e = S->set_start[s]; e < S->set_start[s + 1]; e++) {
    uint64_t v = x[(int64_t)S->word[e] * stride];
    if ((v & S->pos[e]) != S->pos[e] || (v & S->neg[e]) != 0) return 0;
  }
  return 1;
}

/* ---- networks of at most 128 simulated nodes -------------------------
 * The state is two 64-bit words passed by value (registers on the GPU),
 * and each function is a compact record (sbg_pbn_frec, built by
 * sbg_pbn_frecs): up to 5 inputs packed 7 bits each with the truth table
 * inline.  Same draws in the same order as pbn_step(), same result. */

/* two: the network has a second word (a constant at the CPU's call sites,
 * so that a one-word network reads no second register) */
PBN_HD uint32_t pbn_bit2(uint64_t a, uint64_t b, uint32_t v, int two) {
  return (uint32_t)(((two && (v & 64u)) ? b : a) >> (v & 63u)) & 1u;
}

/* kw: inputs gathered for a packed function: 0 = exactly its k (GPU: the
 * warp runs the same function, a uniform loop); else the CPU's packing
 * width, the same count for every packed function (no mispredicted loop
 * exits; the padding inputs read node 0 and the replicated table ignores
 * them). */
PBN_HD uint32_t pbn_eval2(const sbg_pbn_net *net, const sbg_pbn_frec *r, int32_t kw, int two,
                          uint64_t a, uint64_t b) {
  uint32_t idx = 0;
  if (r->in_start < 0) {
    const int32_t m = kw ? kw : r->k;
    const uint64_t pos = r->pos;
    /* unrolled where kw is a constant (the CPU's call sites) */
    PBN_UNROLL
    for (int32_t j = 0; j < m; j++) idx |= pbn_bit2(a, b, (uint32_t)(pos >> (7 * j)) & 127u, two) << j;
    return (uint32_t)(r->tab >> idx) & 1u;
  }
  const int32_t k = r->k;
  const int32_t *in = net->inputs + r->in_start;
  for (int32_t j = 0; j < k; j++) idx = (idx << 1) | pbn_bit2(a, b, (uint32_t)in[j], two);
  return (net->tables[r->tab + (idx >> 5)] >> (idx & 31u)) & 1u;
}

PBN_HD void pbn_step2(const sbg_pbn_net *net, const sbg_pbn_frec *rec, int32_t kw, int two,
                      uint64_t *x0, uint64_t *x1, sbg_philox *g, int32_t *gs) {
  const int32_t NP = net->n_pert_total;
  const uint64_t *T = net->gap_thresh;
  const uint64_t a = *x0, b = *x1;
  if (*gs == 0) {
    uint64_t fa = 0, fb = 0;
    int32_t pos = pbn_gap(net->first_thresh, sbg_philox_next(g), NP) - 1;
    do {
      int32_t node = net->pert_node[pos];
      if (node >= 0) {
        uint64_t m = ((uint64_t)1) << (node & 63);
        if (node & 64) fb ^= m; else fa ^= m;
      }
    } while (pbn_next_pert(T, g, NP, &pos));
    *x0 = a ^ fa;
    *x1 = b ^ fb;
    *gs = pbn_draw_gap(net, g);
    return;
  }
  if (net->async) {
    uint32_t j = sbg_philox_below(g, (uint32_t)net->n_total);
    uint32_t uf = sbg_philox_next(g);
    int32_t i = net->node_of_full[j];
    if (i >= 0) {
      uint64_t v = pbn_eval2(net, rec + pbn_pick(net, i, uf), kw, two, a, b);
      uint64_t m = ((uint64_t)1) << (i & 63);
      if (i & 64) *x1 = (b & ~m) | (v << (i & 63));
      else *x0 = (a & ~m) | (v << (i & 63));
    }
    *gs = pbn_gap_advance(net, g, *gs, 1);
    return;
  }
  const uint64_t base = pbn_sel_base(net, g);
  uint64_t na = 0, nb = 0;
  const int32_t n = net->n, n0 = n < 64 ? n : 64;
  for (int32_t i = 0; i < n0; i++) {
    int32_t f = net->fun_start[i];
    int32_t rank = net->sel_rank[i];
    if (rank >= 0) {
      pbn_rng_seek(g, base + (uint64_t)rank);
      f = pbn_pick(net, i, sbg_philox_next(g));
    }
    na |= (uint64_t)pbn_eval2(net, rec + f, kw, two, a, b) << i;
  }
  if (two)
  for (int32_t i = 64; i < n; i++) {
    int32_t f = net->fun_start[i];
    int32_t rank = net->sel_rank[i];
    if (rank >= 0) {
      pbn_rng_seek(g, base + (uint64_t)rank);
      f = pbn_pick(net, i, sbg_philox_next(g));
    }
    nb |= (uint64_t)pbn_eval2(net, rec + f, kw, two, a, b) << (i - 64);
  }
  pbn_rng_seek(g, base + pbn_sel_len(net));
  *x0 = na;
  *x1 = nb;
  *gs = pbn_gap_advance(net, g, *gs, 1);
}

PBN_HD int pbn_in_set2(const sbg_pbn_sets *S, int32_t s, uint64_t a, uint64_t b) {
  for (int32_t e = S->set_start[s]; e < S->set_start[s + 1]; e++) {
    uint64_t v = S->word[e] ? b : a;
    if ((v & S->pos[e]) != S->pos[e] || (v & S->neg[e]) != 0) return 0;
  }
  return 1;
}

/* `steps` steps of one chain with pbn_step2(); with `count`, adds to its
 * counters k[(3 s + j) kst] (j: n1, n01, n10 of set s) over the samples
 * after the start state.  Up to 64 sets the indicators are a bit mask,
 * recomputed only when the state changes (rare near attractors), and the
 * counters are touched only at switches: n1 gets the steps left at a switch
 * on and loses them at a switch off (exact modulo 2^32; the total fits).
 * A `det` network takes the function steps at a fixed point at once
 * (pbn_skip_fixed); with more than 64 sets each skipped step is counted. */
PBN_HD void pbn_run2(const sbg_pbn_net *net, const sbg_pbn_frec *rec, int32_t kw, int two,
                     const sbg_pbn_sets *sets, int64_t steps, int count, uint64_t *x0p, uint64_t *x1p,
                     sbg_philox *g, int32_t *gsp, uint32_t *k, int64_t kst) {
  const int32_t S = sets->n_sets;
  const int det = net->det;
  uint64_t x0 = *x0p, x1 = *x1p;
  int32_t gs = *gsp;
  if (count && S <= 64) {
    uint64_t m = 0;
    for (int32_t s = 0; s < S; s++)
      if (pbn_in_set2(sets, s, x0, x1)) {
        m |= ((uint64_t)1) << s;
        k[(3 * s) * kst] += (uint32_t)steps;
      }
    for (int64_t t = 0; t < steps; t++) {
      const uint64_t o0 = x0, o1 = x1;
      const int fstep = gs != 0;
      pbn_step2(net, rec, kw, two, &x0, &x1, g, &gs);
      if (o0 == x0 && o1 == x1) {
        if (det && fstep) t += pbn_skip_fixed(net, g, &gs, steps - 1 - t);
        continue;
      }
      uint64_t m2 = 0;
      for (int32_t s = 0; s < S; s++) m2 |= (uint64_t)pbn_in_set2(sets, s, x0, x1) << s;
      for (uint64_t d = m ^ m2; d; d &= d - 1) {
        int32_t s = 0;
        while (!((d >> s) & 1u)) s++;
        const uint32_t left = (uint32_t)(steps - t);
        if ((m2 >> s) & 1u) {
          k[(3 * s + 1) * kst] += 1u;
          k[(3 * s) * kst] += left;
        } else {
          k[(3 * s + 2) * kst] += 1u;
          k[(3 * s) * kst] -= left;
        }
      }
      m = m2;
    }
  } else {
    for (int64_t t = 0; t < steps; t++) {
      const uint64_t o0 = x0, o1 = x1;
      const int fstep = gs != 0;
      pbn_step2(net, rec, kw, two, &x0, &x1, g, &gs);
      const int same = o0 == x0 && o1 == x1;
      int32_t skipped = det && fstep && same ? pbn_skip_fixed(net, g, &gs, steps - 1 - t) : 0;
      t += skipped;
      if (count) {
        for (int32_t s = 0; s < S; s++) {
          int y0 = pbn_in_set2(sets, s, o0, o1), y1 = same ? y0 : pbn_in_set2(sets, s, x0, x1);
          k[(3 * s) * kst] += (uint32_t)y1 * (uint32_t)(1 + skipped);
          if (y0 != y1) k[(3 * s + 1 + y0) * kst] += 1u;  /* 0 -> 1 or 1 -> 0 */
        }
      }
    }
  }
  *x0p = x0;
  *x1p = x1;
  *gsp = gs;
}

#endif /* SBG_PBN_STEP_H */
