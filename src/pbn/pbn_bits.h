/* Bit-sliced trajectories of pbnSteadyState() (engine = "bits"), shared
 * verbatim by the CPU (pbn_bits.c) and GPU (pbn_gpu.cu) engines.
 *
 * 32 chains form a group: chain c is lane c % 32 of group c / 32, and the
 * group's state is one 32-bit word per node (a bit plane: lane j's value of
 * node i is bit j of plane i), so bitwise operations move 32 chains at
 * once.  The Markov chain of each lane is the one of pbn_step():
 *  - a lane's perturbations come from its own stream (Philox subsequence c)
 *    exactly as there: the count of function steps before the next
 *    perturbation step (pbn_draw_gap), the flipped positions of that step;
 *  - the function of a node with several functions is drawn for all 32
 *    lanes from one counter-addressed stream of (group, node rank, step):
 *    word w of it gives bit 31 - w of the 32 lanes' uniform 32-bit numbers
 *    u, compared with the node's selection thresholds from the most
 *    significant bit down until every lane is decided (a lane is decided at
 *    the first bit where u and the threshold differ), which is exactly the
 *    comparison u >= threshold of pbn_pick() with u uniform on 32 bits.
 * Every draw is addressed by (lane) or (group, rank, step), never by
 * thread or launch, so the result is the same on any backend, thread count
 * or device split. */
#ifndef SBG_PBN_BITS_H
#define SBG_PBN_BITS_H

#include "pbn_step.h"

#ifdef __CUDACC__
#define PBNB_UNROLL _Pragma("unroll")
#else
#define PBNB_UNROLL PBN_UNROLL
#endif

/* inputs per function at most on this path */
#define SBG_PBN_BITS_K 5
/* nodes at most on this path (a group's two state copies stay in the GPU's
 * shared memory) */
#define SBG_PBN_BITS_MAX_N 4096

/* One function: table replicated to 32 rows; bit j of the row index is
 * node in[j] (padding inputs read node 0, which the replicated table
 * ignores). */
typedef struct sbg_pbn_bfun {
  uint32_t tab;
  uint16_t in[SBG_PBN_BITS_K + 1];
} sbg_pbn_bfun;

/* What the bit-sliced step reads besides the network. */
typedef struct sbg_pbn_bnet {
  int32_t kw;                /* inputs gathered per function: the network's largest k */
  uint32_t key0, key1;       /* the seed */
  const sbg_pbn_bfun *fun;   /* per function */
  const int32_t *set_start;  /* n_sets + 1 */
  const int32_t *set_lit;    /* node, with bit 31 set when the set needs the node on */
} sbg_pbn_bnet;

/* Lanes whose u >= q (q < 2^32 a threshold of pbn_pick()), u uniform on 32
 * bits given most significant bit first by the words of stream (group,
 * rank, t).  Once the threshold's remaining bits are all zero, undecided
 * lanes have u >= q. */
PBN_HD uint32_t pbnb_ge(const sbg_pbn_bnet *b, uint64_t q, uint32_t group, int32_t rank, uint64_t t) {
  if (q >= ((uint64_t)1 << 32)) return 0u;
  if (q == 0) return ~0u;
  const uint32_t q32 = (uint32_t)q;
  int32_t nbits = 32;
  while (!((q32 >> (32 - nbits)) & 1u)) nbits--;  /* bits down to the lowest set one */
  uint32_t und = ~0u, ge = 0u;
  sbg_u32x4 o = {{0u, 0u, 0u, 0u}};
  for (int32_t w = 0; w < nbits && und; w++) {
    if ((w & 3) == 0) {
      sbg_u32x4 c;
      c.v[0] = (uint32_t)t;
      c.v[1] = ((uint32_t)(t >> 32) << 3) | (uint32_t)(w >> 2);
      c.v[2] = (uint32_t)rank;
      c.v[3] = 0x80000000u | group;  /* apart from the lanes' subsequences (< 2^31) */
      o = sbg_philox4x32_10(c, b->key0, b->key1);
    }
    const uint32_t r = (w & 3) == 0 ? o.v[0] : (w & 3) == 1 ? o.v[1] : (w & 3) == 2 ? o.v[2] : o.v[3];
    const uint32_t qb = 0u - ((q32 >> (31 - w)) & 1u);
    const uint32_t d = und & (r ^ qb);
    ge |= d & r;
    und &= ~d;
  }
  return ge | und;
}

/* A function over the planes x: the multiplexer tree of its table, one
 * level per input (kw a constant at the call sites). */
PBN_HD uint32_t pbnb_eval(const sbg_pbn_bfun *f, const uint32_t *x, int32_t kw) {
  uint32_t v[32];
  const uint32_t tab = f->tab;
  PBNB_UNROLL
  for (int32_t j = 0; j < (1 << kw); j++) v[j] = 0u - ((tab >> j) & 1u);
  PBNB_UNROLL
  for (int32_t l = 0; l < kw; l++) {
    const uint32_t xi = x[f->in[l]];
    PBNB_UNROLL
    for (int32_t m = 0; m < (1 << (kw - 1 - l)); m++) v[m] = v[2 * m] ^ (xi & (v[2 * m] ^ v[2 * m + 1]));
  }
  return v[0];
}

/* Node i's next plane: lanes take function f0 + #{thresholds u reaches}. */
PBN_HD uint32_t pbnb_node(const sbg_pbn_net *net, const sbg_pbn_bnet *b, int32_t kw, int32_t i,
                          const uint32_t *x, uint32_t group, uint64_t t) {
  const int32_t f0 = net->fun_start[i], f1 = net->fun_start[i + 1];
  uint32_t v = pbnb_eval(b->fun + f0, x, kw);
  for (int32_t f = f0 + 1; f < f1; f++) {
    const uint32_t ge = pbnb_ge(b, net->fun_thresh[f - 1], group, net->sel_rank[i], t);
    if (ge) v ^= ge & (v ^ pbnb_eval(b->fun + f, x, kw));
  }
  return v;
}

/* Flips of a lane's perturbation step into the planes (pbn_step()'s walk
 * over the perturbable positions, the same draws). */
#if defined(__CUDA_ARCH__)
#define PBNB_XOR(p, m) atomicXor((p), (m))
#else
#define PBNB_XOR(p, m) (*(p) ^= (m))
#endif
PBN_HD void pbnb_perturb(const sbg_pbn_net *net, sbg_philox *g, uint32_t *x, uint32_t lane_bit) {
  const int32_t NP = net->n_pert_total;
  int32_t pos = pbn_gap(net->first_thresh, sbg_philox_next(g), NP) - 1;
  do {
    const int32_t node = net->pert_node[pos];
    if (node >= 0) PBNB_XOR(x + node, lane_bit);
  } while (pbn_next_pert(net->gap_thresh, g, NP, &pos));
}

/* Lanes of set s (a sub-cube) in the planes x. */
PBN_HD uint32_t pbnb_in_set(const sbg_pbn_bnet *b, int32_t s, const uint32_t *x) {
  uint32_t m = ~0u;
  for (int32_t e = b->set_start[s]; e < b->set_start[s + 1]; e++) {
    const int32_t l = b->set_lit[e];
    const uint32_t p = x[l & 0x7fffffff];
    m &= l < 0 ? p : ~p;
  }
  return m;
}

/* The counters of a lane (pbn_run2()'s scheme, k[(3 s + j) kst]): at a
 * change of set s's indicator at step t of an advance of `steps`, n1 gains
 * (switch on) or loses (off) the steps left; the advance's start added
 * them for the sets the lane starts in. */
PBN_HD void pbnb_count_switch(uint32_t *k, int64_t kst, int32_t s, int on, uint32_t left) {
  if (on) {
    k[(3 * s + 1) * kst] += 1u;
    k[(3 * s) * kst] += left;
  } else {
    k[(3 * s + 2) * kst] += 1u;
    k[(3 * s) * kst] -= left;
  }
}

/* Lane `lane` of a group is chain c, started as the chain engines start
 * it (its stream, the given state `from` or a random one, its first
 * count), its state then spread over the group's planes (n words). */
PBN_HD void pbnb_start_lane(const sbg_pbn_net *net, uint64_t seed, int64_t c, uint32_t lane, const uint64_t *from,
                            uint32_t *planes, sbg_philox *g, int32_t *gs) {
  uint64_t x[SBG_PBN_BITS_MAX_N / 64];
  sbg_philox_init(g, seed, (uint64_t)c, 0);
  if (from) for (int32_t w = 0; w < net->n_words; w++) x[w] = from[w];
  else pbn_random_state(net, g, x, 1);
  *gs = pbn_draw_gap(net, g);
  for (int32_t i = 0; i < net->n; i++)
    planes[i] |= (uint32_t)((x[i >> 6] >> (i & 63)) & 1u) << lane;
}

/* The host's copy of the records (sbg_pbn_bits_build). */
typedef struct sbg_pbn_bits_host {
  sbg_pbn_bnet b;
  sbg_pbn_bfun *fun;
  int32_t *set_start, *set_lit;
} sbg_pbn_bits_host;

#ifdef __cplusplus
extern "C" {
#endif
/* 1 when the bit-sliced path can run the network (synchronous, at most
 * SBG_PBN_BITS_K inputs per function, SBG_PBN_BITS_MAX_N nodes). */
int32_t sbg_pbn_bits_usable(const sbg_pbn_net *net);
sbg_status sbg_pbn_bits_build(const sbg_pbn_net *net, const sbg_pbn_sets *sets, uint64_t seed,
                              sbg_pbn_bits_host *h, sbg_ctx *ctx);
void sbg_pbn_bits_free(sbg_pbn_bits_host *h);
/* Groups [g0, g1): planes ((g1 - g0) n), lane streams and counts ((g1 -
 * g0) 32), from the state `from` (n_words) or random ones (NULL). */
void sbg_pbn_bits_start(const sbg_pbn_net *net, uint64_t seed, int64_t g0, int64_t g1, const uint64_t *from,
                        uint32_t *planes, sbg_philox *rng, int32_t *gap, int threads);
/* The chains [32 g0, ...) of groups [g0, g1) (those below n_chains) from
 * their planes into row t of pbnSimulate()'s output (out[(c (steps+1) +
 * t) n_words + w]). */
void sbg_pbn_bits_unpack(const sbg_pbn_net *net, int64_t g0, int64_t g1, const uint32_t *planes, int64_t n_chains,
                         int64_t steps, int64_t t, uint64_t *out);
sbg_status sbg_pbn_bits_simulate_cpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains, int64_t steps,
                                     const uint64_t *from, uint64_t *out, sbg_ctx *ctx);
sbg_status sbg_pbn_bits_simulate_gpu(const sbg_pbn_net *net, uint64_t seed, int64_t n_chains, int64_t steps,
                                     const uint64_t *from, uint64_t *out, sbg_ctx *ctx);
sbg_status sbg_pbn_bits_steady_cpu(const sbg_pbn_net *net, const sbg_pbn_sets *sets,
                                   const sbg_pbn_params *p, sbg_pbn_result *out, sbg_ctx *ctx);
#ifdef __cplusplus
}
#endif

#endif /* SBG_PBN_BITS_H */
