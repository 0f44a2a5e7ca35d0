/* Test-only entry points into grnEvolve's operators, so that tests can
 * check an operator's law in plain R (tests/testthat/test-grn-properties.R);
 * not used by the package's R functions. */
#include "glue.h"
#include "grn_model.h"

/* `n` roulette spins over the inclusive cumulative weights `cum` (whole
 * numbers, increasing), each from its own Philox subsequence of `seed`:
 * the 0-based positions drawn. */
SEXP ffi_grn_spin(SEXP cum, SEXP n, SEXP seed) {
  SBG_ASSERT(TYPEOF(cum) == REALSXP && XLENGTH(cum) >= 1 && XLENGTH(cum) < INT32_MAX);
  SBG_ASSERT(TYPEOF(n) == INTSXP && XLENGTH(n) == 1 && INTEGER(n)[0] >= 0);
  SBG_ASSERT(TYPEOF(seed) == REALSXP && XLENGTH(seed) == 1);
  const int size = (int)XLENGTH(cum), spins = INTEGER(n)[0];
  uint64_t *c = (uint64_t *)R_alloc((size_t)size, sizeof(uint64_t));
  for (int i = 0; i < size; i++) {
    double v = REAL(cum)[i];
    SBG_ASSERT(v >= 1 && v < 9007199254740992.0 && (i == 0 || v >= REAL(cum)[i - 1]));
    c[i] = (uint64_t)v;
  }
  SEXP out = PROTECT(Rf_allocVector(INTSXP, spins));
  for (int s = 0; s < spins; s++) {
    sbg_philox g;
    sbg_philox_init(&g, (uint64_t)REAL(seed)[0], (uint64_t)s, 0);
    INTEGER(out)[s] = grn_spin(&g, c, size);
  }
  UNPROTECT(1);
  return out;
}
