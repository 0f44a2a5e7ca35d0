/* The two-state Markov chain method of pbnSteadyState() over the chains of
 * a trajectory engine (CPU or GPU): Gelman-Rubin burn-in on the meta-state
 * indicators, then Raftery-Lewis burn-in M and sample size N from the
 * pooled transition counts, extending until N fits, with the final burn-in
 * re-check.  Works only on exact integer sums, so both backends agree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pbn.h"

#define PBN_PSI_MAX ((int64_t)1 << 22)
#define PBN_ADVANCE_MAX ((int64_t)1 << 30)

/* Brooks-Gelman potential scale reduction sqrt(V/W) of binary indicators
 * from the chains' hit counts over a window of psi steps: K = sum of
 * counts, Q = sum of squared counts.  NaN when no chain varies. */
static double pbn_rhat(double K, double Q, double omega, double psi) {
  double sm = K / psi, sm2 = Q / (psi * psi);
  double B_n = (sm2 - sm * sm / omega) / (omega - 1.0);
  double W = psi / (psi - 1.0) * (sm - sm2) / omega;
  if (!(W > 0)) return NAN;
  if (B_n < 0) B_n = 0;
  double V = (psi - 1.0) / psi * W + (1.0 + 1.0 / omega) * B_n;
  return sqrt(V / W);
}

/* Raftery-Lewis from pooled counts (n1, n01, n10 over `samples` pairs). */
static void pbn_raftery_lewis(const uint64_t *pool, double samples, const sbg_pbn_params *p,
                              double *alpha, double *beta, double *M, double *N, int *ok) {
  double n1 = (double)pool[0], n01 = (double)pool[1], n10 = (double)pool[2];
  double n11 = n1 - n01, n00 = samples - n1 - n10;
  double a = n00 + n01 > 0 ? n01 / (n00 + n01) : 0.0;
  double b = n10 + n11 > 0 ? n10 / (n10 + n11) : 0.0;
  *alpha = a;
  *beta = b;
  *ok = pool[1] >= (uint64_t)p->min_switches && pool[2] >= (uint64_t)p->min_switches;
  if (!*ok) {
    /* Too few switches to estimate alpha and beta: ask for twice the data;
     * but an indicator that never switched in 16 (z/r)^2 samples (16 times
     * the independent-sample size) is taken as constant, so that a set on
     * a fixed node does not run to maxSteps.  It stays not converged. */
    double zr = p->z / p->r;
    *M = 0;
    *N = (pool[1] == 0 && pool[2] == 0 && samples >= 16.0 * zr * zr) ? samples : 2.0 * samples;
    return;
  }
  double lam = fabs(1.0 - a - b);
  double m = 0;
  if (lam > 0) m = ceil(log(p->epsilon * (a + b) / (a > b ? a : b)) / log(lam));
  *M = m > 0 ? m : 0;
  double zr = p->z / p->r;
  double n = ceil(a * b * (2.0 - a - b) / pow(a + b, 3.0) * zr * zr);
  *N = n > 1 ? (n < 1e18 ? n : 1e18) : 1;
}

/* One counted window's share of the variance of the pooled estimate.  The
 * chains are independent, so the spread of their counts c_i (K = sum c_i,
 * Q = sum c_i^2 over omega chains) estimates the variance of the window's
 * total honestly, whatever the chain's correlation structure:
 * L^2 Var(window mean) = (omega Q - K^2) / (omega^2 (omega - 1)).  Windows
 * are added as independent (adjacent windows of a chain correlate over a
 * few mixing times, small next to the windows' lengths).  omega Q - K^2 is
 * formed exactly in 128 bits (doubles would cancel). */
static double pbn_window_var(uint64_t K, uint64_t Q, double omega) {
  unsigned __int128 a = (unsigned __int128)Q * (uint64_t)omega, b = (unsigned __int128)K * K;
  double d = a > b ? (double)(a - b) : 0.0;
  return d / (omega * omega * (omega - 1.0));
}

sbg_status sbg_pbn_two_state(sbg_pbn_engine *e, const sbg_pbn_params *p, int32_t S,
                             sbg_pbn_result *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  const double omega = (double)p->n_chains;
  uint64_t *sums = (uint64_t *)calloc((size_t)(S > 0 ? S : 1) * SBG_PBN_NSUM, sizeof(uint64_t));
  uint64_t *pool = (uint64_t *)calloc((size_t)(S > 0 ? S : 1) * 3, sizeof(uint64_t));
  int *ok = (int *)calloc((size_t)(S > 0 ? S : 1), sizeof(int));
  double *var = (double *)calloc((size_t)(S > 0 ? S : 1), sizeof(double));
  if (!sums || !pool || !ok || !var) {
    st = sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the counts of %d sets", (int)S);
    goto done;
  }
  int64_t psi = p->psi0, len = 0;
  if (psi > p->max_len / 2) psi = p->max_len / 2 > 0 ? p->max_len / 2 : 1;

  /* Gelman-Rubin: run 2 psi steps and judge the second half; when not
   * converged, double psi: the next window is the next psi steps (the second
   * half of the doubled run). */
  if ((st = e->advance(e, psi, 0, NULL, 0.0, 0.02, ctx)) != SBG_OK) goto done;
  len += psi;
  for (;;) {
    if ((st = e->advance(e, psi, 1, sums, 0.02, 0.05, ctx)) != SBG_OK) goto done;
    len += psi;
    double worst = 0;
    for (int32_t s = 0; s < S; s++) {
      double rh = pbn_rhat((double)sums[s * SBG_PBN_NSUM], (double)sums[s * SBG_PBN_NSUM + 3],
                           omega, (double)psi);
      out->rhat[s] = rh;
      if (rh == rh && rh > worst) worst = rh;
    }
    if (worst <= p->rhat_max || 2 * psi > PBN_PSI_MAX || len + 2 * psi > p->max_len) break;
    psi *= 2;
  }
  out->psi = (double)psi;

  /* pooled counts start with the last window */
  int64_t burnin = len - psi, per_chain = psi;
  for (int32_t s = 0; s < S; s++) {
    for (int j = 0; j < 3; j++) pool[s * 3 + j] = sums[s * SBG_PBN_NSUM + j];
    var[s] = pbn_window_var(sums[s * SBG_PBN_NSUM], sums[s * SBG_PBN_NSUM + 3], omega);
  }

  for (;;) {
    double samples = (double)per_chain * omega, need = 0, m_need = 0;
    for (int32_t s = 0; s < S; s++) {
      pbn_raftery_lewis(pool + s * 3, samples, p, &out->alpha[s], &out->beta[s],
                        &out->burnin_req[s], &out->n_req[s], &ok[s]);
      /* Raftery-Lewis' N assumes a first-order two-state indicator; the
       * chains' spread gives the standard error without that assumption:
       * ask for the samples that bring t * se down to r (se ~ 1/sqrt(n)). */
      out->se[s] = per_chain > 0 ? sqrt(var[s]) / (double)per_chain : NAN;
      if (ok[s] && per_chain > 0) {
        double h = p->t * out->se[s] / p->r, nv = ceil(samples * h * h);
        if (nv > out->n_req[s]) out->n_req[s] = nv < 1e18 ? nv : 1e18;
      }
      /* and never less than two windows of psi steps per chain: the last
       * Gelman-Rubin window alone (few events per chain for a rare set)
       * gave skewed chain counts and intervals that covered 93% for 95% */
      if (ok[s] && out->n_req[s] < 2.0 * (double)psi * omega) out->n_req[s] = 2.0 * (double)psi * omega;
      if (out->n_req[s] > need) need = out->n_req[s];
      if (out->burnin_req[s] > m_need) m_need = out->burnin_req[s];
    }
    if (m_need > (double)burnin) {
      /* The burn-in check failed (also after extending: the re-check the
       * reference code omits): discard the pooled samples, run on to M. */
      if ((double)len < m_need) {
        int64_t more = (int64_t)m_need - len;
        if (len + more > p->max_len) more = p->max_len - len;
        while (more > 0) {
          int64_t piece = more < PBN_ADVANCE_MAX ? more : PBN_ADVANCE_MAX;
          if ((st = e->advance(e, piece, 0, NULL, 0.05, 0.05, ctx)) != SBG_OK) goto done;
          len += piece;
          more -= piece;
        }
      }
      burnin = len;
      per_chain = 0;
      memset(pool, 0, sizeof(uint64_t) * (size_t)S * 3);
      memset(var, 0, sizeof(double) * (size_t)S);
      samples = 0;
      if (len >= p->max_len) break;
    } else if (need <= samples) {
      break;  /* sets still !ok here are the constant ones (see above) */
    }
    if (len >= p->max_len) break;
    double ext_d = ceil((need - samples) / omega);
    /* at least a Gelman-Rubin window: no short windows whose correlation
     * with their neighbours the variance sum would miss */
    if (ext_d < (double)psi) ext_d = (double)psi;
    if (need <= samples && per_chain == 0) ext_d = (double)psi;  /* after a reset */
    int64_t ext = ext_d > (double)(p->max_len - len) ? p->max_len - len : (int64_t)ext_d;
    /* counted pieces short enough that the sums of squared counts fit 64 bits */
    double qcap = floor(sqrt(9.2e18 / omega));
    int64_t piece_max = qcap < (double)PBN_ADVANCE_MAX ? (int64_t)qcap : PBN_ADVANCE_MAX;
    while (ext > 0) {
      int64_t piece = ext < piece_max ? ext : piece_max;
      double lo = 0.05 + 0.95 * samples / (need > samples ? need : samples + 1);
      double hi = 0.05 + 0.95 * (samples + (double)piece * omega) / (need > samples ? need : samples + 1);
      if (hi > 1) hi = 1;
      if ((st = e->advance(e, piece, 1, sums, lo, hi, ctx)) != SBG_OK) goto done;
      for (int32_t s = 0; s < S; s++) {
        for (int j = 0; j < 3; j++) pool[s * 3 + j] += sums[s * SBG_PBN_NSUM + j];
        var[s] += pbn_window_var(sums[s * SBG_PBN_NSUM], sums[s * SBG_PBN_NSUM + 3], omega);
      }
      len += piece;
      per_chain += piece;
      samples = (double)per_chain * omega;
      ext -= piece;
    }
  }

  {
    double samples = (double)per_chain * omega;
    for (int32_t s = 0; s < S; s++) {
      out->samples[s] = samples;
      out->prob[s] = samples > 0 ? (double)pool[s * 3] / samples : NAN;
      out->se[s] = per_chain > 0 ? sqrt(var[s]) / (double)per_chain : NAN;
      out->converged[s] = ok[s] && out->n_req[s] <= samples && out->burnin_req[s] <= (double)burnin &&
                          !(out->rhat[s] > p->rhat_max) && p->t * out->se[s] <= p->r;
    }
    out->steps_per_chain = (double)len;
    out->burnin = (double)burnin;
  }
done:
  free(sums);
  free(pool);
  free(ok);
  free(var);
  return st;
}
