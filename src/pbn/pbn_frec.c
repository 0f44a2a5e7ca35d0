/* Compact function records of pbnSteadyState() for networks of at most 128
 * simulated nodes (the register-state step pbn_step2() of pbn_step.h),
 * built once per call by the CPU and GPU engines. */
#include "pbn.h"

int32_t sbg_pbn_frecs(const sbg_pbn_net *net, sbg_pbn_frec *rec, int32_t kp) {
  const int32_t nf = net->fun_start[net->n];
  if (net->n > SBG_PBN_SMALL_N || kp > SBG_PBN_FREC_K) return -1;
  for (int32_t f = 0; f < nf; f++) {
    const int32_t k = net->fun_k[f];
    const int32_t *in = net->inputs + net->in_start[f];
    sbg_pbn_frec *r = rec + f;
    r->k = k;
    r->pos = 0;
    if (k <= kp) {
      /* bit j of the row index is input k-1-j (the first input is the most
       * significant) */
      for (int32_t j = 0; j < k; j++) r->pos |= (uint64_t)(uint32_t)in[k - 1 - j] << (7 * j);
      const uint32_t rows = 1u << k;
      const uint32_t *tw = net->tables + net->tab_start[f];
      uint64_t t = rows > 32 ? (uint64_t)tw[0] | ((uint64_t)tw[1] << 32) : tw[0];
      if (rows < 64) t &= (((uint64_t)1) << rows) - 1u;
      for (uint32_t w = rows; w < 64; w *= 2) t |= t << w;
      r->tab = t;
      r->in_start = -1;
    } else {
      if (net->tab_start[f] > (int64_t)UINT32_MAX) return -1;
      r->tab = (uint64_t)net->tab_start[f];
      r->in_start = net->in_start[f];
    }
  }
  return 0;
}

int32_t sbg_pbn_frec_width(const sbg_pbn_net *net) {
  /* cost in gathers: a packed function costs kw, another its k plus about
   * 4 for the branch to the general path and its loop exit */
  const int32_t nf = net->fun_start[net->n];
  int32_t best = 1;
  double best_cost = 0;
  for (int32_t kw = 1; kw <= SBG_PBN_FREC_K; kw++) {
    double cost = 0;
    for (int32_t f = 0; f < nf; f++) cost += net->fun_k[f] <= kw ? kw : net->fun_k[f] + 4;
    if (kw == 1 || cost < best_cost) { best = kw; best_cost = cost; }
  }
  return best;
}
