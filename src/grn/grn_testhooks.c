/* Test-only entry (not exported; tests/testthat/test-grn-operators.R): runs
 * one genetic operator of grn_model.h -- the engine's own functions -- on
 * populations given from R and returns the decoded result, so that the
 * tests can check the operators' properties in plain R.  Links are R
 * integer arrays n x n x count ([i, j, k]: source j -> target i, -1/0/1),
 * rules integer matrices n x count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "glue.h"
#include "grn_model.h"

typedef struct hook_pop {
  grn_pop p;
  int n, w;
} hook_pop;

static void hook_alloc(hook_pop *h, int n, int64_t count) {
  h->n = n;
  h->w = (n + 31) / 32;
  size_t words = (size_t)count * n * h->w;
  h->p.act = (uint32_t *)R_alloc(words + 1, sizeof(uint32_t));
  h->p.rep = (uint32_t *)R_alloc(words + 1, sizeof(uint32_t));
  h->p.rule = (uint8_t *)R_alloc((size_t)count * n + 1, 1);
  memset(h->p.act, 0, (words + 1) * sizeof(uint32_t));
  memset(h->p.rep, 0, (words + 1) * sizeof(uint32_t));
  h->p.count = count;
  h->p.soa = 0;
}

static void hook_encode(const sbg_grn_problem *pb, hook_pop *h, const int *links,
                        const int *rules, int64_t count) {
  int n = pb->n;
  for (int64_t k = 0; k < count; k++) {
    grn_view v = grn_view_at(&h->p, n, h->w, k);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) grn_link_set(pb, v, i, j, links[k * n * n + i + (int64_t)j * n]);
      GRN_RULE(v, i) = (uint8_t)rules[k * n + i];
    }
  }
}

/* list(links = n x n x count, rules = n x count) */
static SEXP hook_decode(const sbg_grn_problem *pb, const hook_pop *h, int64_t count) {
  int n = pb->n;
  SEXP links = PROTECT(Rf_alloc3DArray(INTSXP, n, n, (int)count));
  SEXP rules = PROTECT(Rf_allocMatrix(INTSXP, n, (int)count));
  for (int64_t k = 0; k < count; k++) {
    grn_view v = grn_view_at(&h->p, n, h->w, k);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) INTEGER(links)[k * n * n + i + (int64_t)j * n] = grn_link_get(pb, v, i, j);
      INTEGER(rules)[k * n + i] = GRN_RULE(v, i);
    }
  }
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(ans, 0, links);
  SET_VECTOR_ELT(ans, 1, rules);
  UNPROTECT(3);
  return ans;
}

/* op: "crossover" (inputs: 2 parents; a = cut cell), "mutate" (1 parent,
 * reps copies each mutated from stream (seed, copy); p = p_link, p_rule),
 * "init" (1 reference; reps individuals from streams (seed, k)), "spin"
 * (links unused; p = cumulative weights; reps spins of stream seed),
 * "weight" (p = scores), "stream" (p = (generation, population, individual)
 * triples; the engine's subsequence of each).  max_in and allowed as in sbg_grn_problem. */
SEXP ffi_grn_testhook(SEXP op, SEXP links, SEXP rules, SEXP p, SEXP a, SEXP max_in,
                      SEXP allowed) {
  const char *o = CHAR(STRING_ELT(op, 0));
  SBG_ASSERT(TYPEOF(links) == INTSXP && TYPEOF(rules) == INTSXP && TYPEOF(p) == REALSXP);
  SBG_ASSERT(TYPEOF(a) == REALSXP && XLENGTH(a) == 2 && TYPEOF(allowed) == INTSXP);
  if (strcmp(o, "stream") == 0) { /* p = (gen, pop, k) triples: the subsequences */
    R_xlen_t m = XLENGTH(p) / 3;
    SEXP ans = PROTECT(Rf_allocVector(REALSXP, m));
    for (R_xlen_t t = 0; t < m; t++)
      REAL(ans)[t] = (double)grn_stream((int64_t)REAL(p)[3 * t], (int64_t)REAL(p)[3 * t + 1],
                                        (int64_t)REAL(p)[3 * t + 2]);
    UNPROTECT(1);
    return ans;
  }
  if (strcmp(o, "weight") == 0) {
    SEXP ans = PROTECT(Rf_allocVector(REALSXP, XLENGTH(p)));
    for (R_xlen_t t = 0; t < XLENGTH(p); t++) REAL(ans)[t] = (double)grn_weight((int64_t)REAL(p)[t]);
    UNPROTECT(1);
    return ans;
  }
  uint64_t seed = (uint64_t)REAL(a)[0];
  int64_t reps = (int64_t)REAL(a)[1];
  if (strcmp(o, "spin") == 0) {
    int size = (int)XLENGTH(p);
    uint64_t *cum = (uint64_t *)R_alloc((size_t)size, sizeof(uint64_t));
    for (int t = 0; t < size; t++) cum[t] = (uint64_t)REAL(p)[t];
    SEXP ans = PROTECT(Rf_allocVector(INTSXP, reps));
    sbg_philox g;
    sbg_philox_init(&g, seed, 0, 0);
    for (int64_t t = 0; t < reps; t++) INTEGER(ans)[t] = grn_spin(&g, cum, size);
    UNPROTECT(1);
    return ans;
  }
  SEXP dim = Rf_getAttrib(links, R_DimSymbol);
  int n = INTEGER(dim)[0];
  int64_t count = XLENGTH(links) / ((int64_t)n * n);
  sbg_grn_problem pb;
  memset(&pb, 0, sizeof pb);
  pb.n = n;
  pb.w = (n + 31) / 32;
  pb.max_in = Rf_asInteger(max_in);
  pb.n_allowed = (int)XLENGTH(allowed);
  for (int t = 0; t < pb.n_allowed && t < 4; t++) pb.allowed[t] = (uint8_t)INTEGER(allowed)[t];
  hook_pop in;
  hook_alloc(&in, n, count);
  hook_encode(&pb, &in, INTEGER(links), INTEGER(rules), count);
  int w = in.w;
  hook_pop out;
  if (strcmp(o, "crossover") == 0) {
    SBG_ASSERT(count == 2);
    hook_alloc(&out, n, 2);
    grn_crossover(&pb, grn_view_at(&in.p, n, w, 0), grn_view_at(&in.p, n, w, 1),
                  grn_view_at(&out.p, n, w, 0), grn_view_at(&out.p, n, w, 1), (uint32_t)seed);
    return hook_decode(&pb, &out, 2);
  }
  if (strcmp(o, "mutate") == 0) {
    SBG_ASSERT(count == 1 && XLENGTH(p) == 2);
    hook_alloc(&out, n, reps);
    for (int64_t k = 0; k < reps; k++) {
      grn_view v = grn_view_at(&out.p, n, w, k);
      grn_copy(&pb, v, grn_view_at(&in.p, n, w, 0));
      sbg_philox g;
      sbg_philox_init(&g, seed, (uint64_t)k, 0);
      grn_mutate(&pb, REAL(p)[0], REAL(p)[1], v, &g);
    }
    return hook_decode(&pb, &out, reps);
  }
  if (strcmp(o, "init") == 0) {
    SBG_ASSERT(count == 1);
    pb.ref_act = in.p.act;
    pb.ref_rep = in.p.rep;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        int l = INTEGER(links)[i + (int64_t)j * n];
        pb.n_ref_act += l == 1;
        pb.n_ref_rep += l == -1;
      }
    hook_alloc(&out, n, reps);
    for (int64_t k = 0; k < reps; k++)
      grn_init_individual(&pb, grn_view_at(&out.p, n, w, k), seed, (uint64_t)k);
    return hook_decode(&pb, &out, reps);
  }
  Rf_error("sysbioGPU internal error: unknown test hook '%s'", o);
  return R_NilValue; /* # nocov */
}
