/* pbnSteadyState(method = "exact"): the stationary distribution over all
 * 2^n states by power iteration of the lazy chain (I + P) / 2, which has
 * the same stationary distribution and is aperiodic.  Perturbations are
 * applied bit by bit (a product of 2x2 mixings), the function update as a
 * sparse matrix of the few states each state can reach. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pbn.h"

/* Probability that node i outputs 1 in state s (selection by exact
 * probabilities, not the engines' 32-bit thresholds). */
static double pbn_q(const sbg_pbn_net *net, const double *fun_prob, int32_t i, uint64_t s) {
  double q = 0;
  for (int32_t f = net->fun_start[i]; f < net->fun_start[i + 1]; f++) {
    int32_t k = net->fun_k[f];
    const int32_t *in = net->inputs + net->in_start[f];
    uint32_t idx = 0;
    for (int32_t j = 0; j < k; j++) idx = (idx << 1) | (uint32_t)((s >> in[j]) & 1u);
    if ((net->tables[net->tab_start[f] + (idx >> 5)] >> (idx & 31u)) & 1u) q += fun_prob[f];
  }
  return q;
}

/* The update matrix G (no perturbation) in rows by source state:
 * synchronous, the product of the nodes' Bernoulli(q_i(s)); asynchronous,
 * one node among n_total.  Shared by the CPU and GPU power iterations. */
sbg_status sbg_pbn_exact_structure(const sbg_pbn_net *net, const double *fun_prob, int64_t **row_out,
                                   uint32_t **col_out, double **val_out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int32_t n = net->n;
  if (n > SBG_PBN_EXACT_MAX_N) return sbg_fail(ctx, SBG_ERR_INPUT, "exact method: %d nodes, at most %d", n, SBG_PBN_EXACT_MAX_N);
  const int64_t NS = (int64_t)1 << n;
  int64_t *row = NULL;
  uint32_t *col = NULL;
  double *val = NULL, *q = NULL;
  int32_t *unc = NULL;
  int64_t nnz = 0, cap = 0;
  *row_out = NULL;
  *col_out = NULL;
  *val_out = NULL;

  row = (int64_t *)malloc(sizeof(int64_t) * (size_t)(NS + 1));
  q = (double *)malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  unc = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  if (!row || !q || !unc) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "exact method: out of memory"); goto done; }

  for (int64_t s = 0; s < NS; s++) {
    row[s] = nnz;
    int64_t need;
    int32_t nu = 0;
    uint64_t fixed = 0;
    for (int32_t i = 0; i < n; i++) {
      q[i] = pbn_q(net, fun_prob, i, (uint64_t)s);
      if (q[i] >= 1.0 - 1e-15) { q[i] = 1; fixed |= (uint64_t)1 << i; }
      else if (q[i] <= 1e-15) q[i] = 0;
      else unc[nu++] = i;
    }
    need = net->async ? 2 * (int64_t)n + 1 : ((int64_t)1 << nu);
    if (nnz + need > SBG_PBN_EXACT_MAX_NNZ) {
      st = sbg_fail(ctx, SBG_ERR_INPUT, "exact method: the transition structure needs more than %lld entries; use method = \"two-state\"",
                    (long long)SBG_PBN_EXACT_MAX_NNZ);
      goto done;
    }
    if (nnz + need > cap) {
      int64_t nc = cap ? cap * 2 : 1024;
      while (nc < nnz + need) nc *= 2;
      uint32_t *c2 = (uint32_t *)realloc(col, sizeof(uint32_t) * (size_t)nc);
      if (c2) col = c2;
      double *v2 = (double *)realloc(val, sizeof(double) * (size_t)nc);
      if (v2) val = v2;
      if (!c2 || !v2) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "exact method: out of memory"); goto done; }
      cap = nc;
    }
    if (net->async) {
      double w = 1.0 / net->n_total, stay = (double)(net->n_total - n) / net->n_total;
      col[nnz] = (uint32_t)s; val[nnz++] = stay;
      for (int32_t i = 0; i < n; i++) {
        uint64_t b = (uint64_t)1 << i;
        col[nnz] = (uint32_t)((uint64_t)s | b); val[nnz++] = w * q[i];
        col[nnz] = (uint32_t)((uint64_t)s & ~b); val[nnz++] = w * (1 - q[i]);
      }
    } else {
      for (int64_t m = 0; m < ((int64_t)1 << nu); m++) {
        uint64_t t = fixed;
        double pr = 1;
        for (int32_t j = 0; j < nu; j++) {
          if ((m >> j) & 1) { t |= (uint64_t)1 << unc[j]; pr *= q[unc[j]]; }
          else pr *= 1 - q[unc[j]];
        }
        col[nnz] = (uint32_t)t; val[nnz++] = pr;
      }
    }
  }
  row[NS] = nnz;
  *row_out = row;
  *col_out = col;
  *val_out = val;
  row = NULL;
  col = NULL;
  val = NULL;
done:
  free(row);
  free(col);
  free(val);
  free(q);
  free(unc);
  return st;
}

sbg_status sbg_pbn_exact_cpu(const sbg_pbn_net *net, const double *fun_prob, double p,
                             double tol, int64_t max_iter,
                             double *pi, double *iterations, double *delta, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int64_t NS = (int64_t)1 << net->n;
  int64_t *row = NULL;
  uint32_t *col = NULL;
  double *val = NULL, *next = NULL;
  if ((st = sbg_pbn_exact_structure(net, fun_prob, &row, &col, &val, ctx)) != SBG_OK) goto done;
  next = (double *)malloc(sizeof(double) * (size_t)NS);
  if (!next) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "exact method: out of memory"); goto done; }

  {
    const double q0 = pow(1.0 - p, (double)net->n_pert_total);
    for (int64_t s = 0; s < NS; s++) pi[s] = 1.0 / (double)NS;
    int64_t it = 0;
    double d = INFINITY;
    while (it < max_iter) {
      /* next = K pi (flip each simulated perturbable bit with p) */
      memcpy(next, pi, sizeof(double) * (size_t)NS);
      for (int32_t j = 0; j < net->n_pert_total; j++) {
        int32_t node = net->pert_node[j];
        if (node < 0 || p == 0) continue;
        uint64_t b = (uint64_t)1 << node;
        for (int64_t s = 0; s < NS; s++) {
          if ((uint64_t)s & b) continue;
          double x = next[s], y = next[(uint64_t)s | b];
          next[s] = (1 - p) * x + p * y;
          next[(uint64_t)s | b] = p * x + (1 - p) * y;
        }
      }
      /* minus the no-flip part, plus the update: P = K - q0 I + q0 G;
       * then the lazy chain: (pi + pi P) / 2 */
      for (int64_t s = 0; s < NS; s++) next[s] = 0.5 * (pi[s] + next[s] - q0 * pi[s]);
      for (int64_t s = 0; s < NS; s++) {
        double w = 0.5 * q0 * pi[s];
        if (w == 0) continue;
        for (int64_t e = row[s]; e < row[s + 1]; e++) next[col[e]] += w * val[e];
      }
      double tot = 0;
      for (int64_t s = 0; s < NS; s++) tot += next[s];
      d = 0;
      for (int64_t s = 0; s < NS; s++) {
        double v = next[s] / tot;
        d += fabs(v - pi[s]);
        pi[s] = v;
      }
      it++;
      if (d < tol) break;
      if ((it & 63) == 0 && (st = sbg_poll(ctx, (double)it / (double)max_iter)) != SBG_OK) goto done;
    }
    *iterations = (double)it;
    *delta = d;
  }
done:
  free(row);
  free(col);
  free(val);
  free(next);
  return st;
}
