/* pbnSteadyState(method = "exact"): the stationary distribution over all
 * 2^n states, by a direct solve for small n (at the end of this file) or
 * else by power iteration of the lazy chain (I + P) / 2, which has the
 * same stationary distribution and is aperiodic.  Perturbations are
 * applied bit by bit (a product of 2x2 mixings), the function update as a
 * sparse matrix of the few states each state can reach. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "omp_compat.h"
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

/* ---------------------------------------------------------------------- */
/* Direct solve of small chains (n <= SBG_PBN_DIRECT_MAX_N): the dense
 * transition matrix and the Grassmann-Taksar-Heyman state reduction.  GTH
 * never subtracts (each state's outflow is the sum of its off-diagonal
 * entries), so it keeps full relative precision however slowly the chain
 * mixes: power iteration needs about 1/p steps for a small perturbation
 * probability p, and stops on a small change long before it converges. */

/* P[s][t] for t != s: the perturbation mixing K (each simulated perturbable
 * bit flips with p, the dropped ones only block the update) plus q0 times
 * the update G, q0 = (1-p)^(all perturbable nodes).  The diagonal is left 0:
 * GTH does not read it. */
static void direct_fill(const sbg_pbn_net *net, double p, const int64_t *row, const uint32_t *col,
                        const double *val, double *A, int64_t NS) {
  uint64_t pm = 0;
  int32_t m = 0;
  for (int32_t j = 0; j < net->n_pert_total; j++) {
    if (net->pert_node[j] < 0) continue;
    pm |= (uint64_t)1 << net->pert_node[j];
    m++;
  }
  double pw[SBG_PBN_DIRECT_MAX_N + 1]; /* P(exactly the h given bits flip), h = 0..m */
  for (int32_t h = 0; h <= m; h++) pw[h] = pow(p, (double)h) * pow(1.0 - p, (double)(m - h));
  const double q0 = pow(1.0 - p, (double)net->n_pert_total);
  for (int64_t s = 0; s < NS; s++) {
    double *a = A + s * NS;
    for (uint64_t sub = pm; sub; sub = (sub - 1) & pm) { /* the nonempty subsets of the perturbable bits */
      int32_t h = 0;
      for (uint64_t v = sub; v; v &= v - 1) h++;
      a[(uint64_t)s ^ sub] = pw[h];
    }
    for (int64_t e = row[s]; e < row[s + 1]; e++)
      if ((int64_t)col[e] != s) a[col[e]] += q0 * val[e];
  }
}

/* A state of a closed class: from c = 0, while some state reachable from
 * c cannot reach c back, move c there (its reachable set is strictly
 * smaller).  mark, queue: NS each. */
static int64_t direct_closed_state(const double *A, int64_t NS, unsigned char *mark, int64_t *queue) {
  int64_t c = 0;
  for (;;) {
    /* states reachable from c (mark bit 1) */
    memset(mark, 0, (size_t)NS);
    int64_t head = 0, tail = 0;
    mark[c] = 1;
    queue[tail++] = c;
    while (head < tail) {
      const double *a = A + queue[head++] * NS;
      for (int64_t t = 0; t < NS; t++)
        if (a[t] > 0 && !(mark[t] & 1)) { mark[t] |= 1; queue[tail++] = t; }
    }
    /* states that reach c (mark bit 2) */
    head = tail = 0;
    mark[c] |= 2;
    queue[tail++] = c;
    while (head < tail) {
      int64_t t = queue[head++];
      for (int64_t s = 0; s < NS; s++)
        if (A[s * NS + t] > 0 && !(mark[s] & 2)) { mark[s] |= 2; queue[tail++] = s; }
    }
    int64_t d = -1;
    for (int64_t s = 0; s < NS && d < 0; s++)
      if (mark[s] == 1) d = s;
    if (d < 0) return c;
    c = d;
  }
}

static void swap_state(double *A, int64_t NS, int64_t a, int64_t b) {
  for (int64_t t = 0; t < NS; t++) { double x = A[a * NS + t]; A[a * NS + t] = A[b * NS + t]; A[b * NS + t] = x; }
  for (int64_t s = 0; s < NS; s++) { double x = A[s * NS + a]; A[s * NS + a] = A[s * NS + b]; A[s * NS + b] = x; }
}

/* GTH with a state of a closed class first: every later state reaches it,
 * so each outflow is positive unless there are several closed classes
 * (then *solved = 0 and pi is not set). */
static sbg_status direct_gth(double *A, int64_t NS, double *pi, int *solved, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  *solved = 0;
  for (int64_t k = NS - 1; k >= 1; k--) {
    const double *ak = A + k * NS;
    double out = 0;
    for (int64_t j = 0; j < k; j++) out += ak[j];
    if (!(out > 0)) return SBG_OK;
    for (int64_t i = 0; i < k; i++) A[i * NS + k] /= out;
#pragma omp parallel for schedule(static) num_threads(ctx->n_threads)
    for (int64_t i = 0; i < k; i++) {
      double *ai = A + i * NS;
      double f = ai[k];
      if (f == 0) continue;
      for (int64_t j = 0; j < k; j++) ai[j] += f * ak[j];
    }
    if ((k & 63) == 0 && (st = sbg_poll(ctx, 1.0 - (double)k / (double)NS)) != SBG_OK) return st;
  }
  pi[0] = 1;
  double tot = 1;
  for (int64_t k = 1; k < NS; k++) {
    double x = 0;
    for (int64_t i = 0; i < k; i++) x += pi[i] * A[i * NS + k];
    pi[k] = x;
    tot += x;
  }
  for (int64_t k = 0; k < NS; k++) pi[k] /= tot;
  *solved = 1;
  return SBG_OK;
}

sbg_status sbg_pbn_exact_direct(const sbg_pbn_net *net, const double *fun_prob, double p, double *pi,
                                int *solved, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const int64_t NS = (int64_t)1 << net->n;
  int64_t *row = NULL, *queue = NULL;
  uint32_t *col = NULL;
  double *val = NULL, *A = NULL;
  unsigned char *mark = NULL;
  *solved = 0;
  if (net->n > SBG_PBN_DIRECT_MAX_N) return sbg_fail(ctx, SBG_ERR_INPUT, "exact method: a direct solve takes at most %d nodes", SBG_PBN_DIRECT_MAX_N);
  if ((st = sbg_pbn_exact_structure(net, fun_prob, &row, &col, &val, ctx)) != SBG_OK) goto done;
  A = (double *)calloc((size_t)(NS * NS), sizeof(double));
  mark = (unsigned char *)malloc((size_t)NS);
  queue = (int64_t *)malloc(sizeof(int64_t) * (size_t)NS);
  if (!A || !mark || !queue) { st = sbg_fail(ctx, SBG_ERR_ALLOC, "exact method: out of memory"); goto done; }
  direct_fill(net, p, row, col, val, A, NS);
  {
    int64_t c = direct_closed_state(A, NS, mark, queue);
    if (c != 0) swap_state(A, NS, 0, c);
    if ((st = direct_gth(A, NS, pi, solved, ctx)) != SBG_OK) goto done;
    if (*solved && c != 0) { double x = pi[0]; pi[0] = pi[c]; pi[c] = x; }
  }
done:
  free(row);
  free(col);
  free(val);
  free(A);
  free(mark);
  free(queue);
  return st;
}
