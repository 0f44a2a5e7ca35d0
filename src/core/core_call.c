/* .Call glue of the shared machinery: gpuInfo(), thread counts, the Philox
 * draws behind philoxDraws()/philoxShuffle(), and the busy run of the
 * interrupt tests. */
#include <stdint.h>

#include "device.h"
#include "philox.h"
#include "glue.h"
#include "selftest.h"
#include "threads.h"

/* gpu_warm() (R/backend.R): the contexts of these devices (0-based, known
 * to exist) begun on a thread of their own; see sbg_device_warm_begin. */
SEXP ffi_device_warm(SEXP devices) {
  SBG_ASSERT(TYPEOF(devices) == INTSXP);
  sbg_device_warm_begin(INTEGER(devices), (int)XLENGTH(devices));
  return R_NilValue;
}

/* list(cuda, availability, message, driver, runtime, nDevices, devices),
 * devices a list of columns, one row per device; free memory only when
 * `details` (it needs each device's context). */
SEXP ffi_gpu_info(SEXP details) {
  int nprot = 0;
  SBG_ASSERT(TYPEOF(details) == LGLSXP && XLENGTH(details) == 1);
  int with_memory = LOGICAL(details)[0] == TRUE;
  sbg_gpu_summary sum;
  sbg_gpu_summary_get(&sum);
  int n = sum.availability == SBG_GPU_USABLE ? sum.n_devices : 0;

  SEXP dev = PROTECT(Rf_allocVector(VECSXP, 8)); nprot++;
  SEXP name = Rf_allocVector(STRSXP, n);        SET_VECTOR_ELT(dev, 0, name);
  SEXP total = Rf_allocVector(REALSXP, n);      SET_VECTOR_ELT(dev, 1, total);
  SEXP freeb = Rf_allocVector(REALSXP, n);      SET_VECTOR_ELT(dev, 2, freeb);
  SEXP ccmaj = Rf_allocVector(INTSXP, n);       SET_VECTOR_ELT(dev, 3, ccmaj);
  SEXP ccmin = Rf_allocVector(INTSXP, n);       SET_VECTOR_ELT(dev, 4, ccmin);
  SEXP sms = Rf_allocVector(INTSXP, n);         SET_VECTOR_ELT(dev, 5, sms);
  SEXP err = Rf_allocVector(STRSXP, n);         SET_VECTOR_ELT(dev, 6, err);
  SEXP idx = Rf_allocVector(INTSXP, n);         SET_VECTOR_ELT(dev, 7, idx);
  for (int i = 0; i < n; i++) {
    sbg_device_info info;
    sbg_ctx ctx = {0};
    ctx.device = i;
    sbg_status st = sbg_gpu_device_info(i, with_memory, &info, &ctx);
    INTEGER(idx)[i] = i;
    SET_STRING_ELT(name, i, Rf_mkChar(st == SBG_OK ? info.name : "(unavailable)"));
    REAL(total)[i] = st == SBG_OK && with_memory ? info.total_bytes : NA_REAL;
    REAL(freeb)[i] = st == SBG_OK && with_memory ? info.free_bytes : NA_REAL;
    INTEGER(ccmaj)[i] = st == SBG_OK ? info.cc_major : NA_INTEGER;
    INTEGER(ccmin)[i] = st == SBG_OK ? info.cc_minor : NA_INTEGER;
    INTEGER(sms)[i] = st == SBG_OK ? info.multiprocessors : NA_INTEGER;
    SET_STRING_ELT(err, i, st == SBG_OK ? NA_STRING : Rf_mkChar(ctx.errbuf));
  }

  const char *dev_names[] = {"name", "total", "free", "ccMajor", "ccMinor",
                             "multiprocessors", "error", "index"};
  SEXP dn = Rf_allocVector(STRSXP, 8);
  Rf_setAttrib(dev, R_NamesSymbol, dn);
  for (int i = 0; i < 8; i++) SET_STRING_ELT(dn, i, Rf_mkChar(dev_names[i]));

  SEXP ans = PROTECT(Rf_allocVector(VECSXP, 7)); nprot++;
  SET_VECTOR_ELT(ans, 0, Rf_ScalarLogical(sum.built_with_cuda));
  SET_VECTOR_ELT(ans, 1, Rf_ScalarInteger(sum.availability));
  SET_VECTOR_ELT(ans, 2, Rf_mkString(sum.message));
  SET_VECTOR_ELT(ans, 3, Rf_ScalarInteger(sum.driver_version));
  SET_VECTOR_ELT(ans, 4, Rf_ScalarInteger(sum.runtime_version));
  SET_VECTOR_ELT(ans, 5, Rf_ScalarInteger(sum.n_devices));
  SET_VECTOR_ELT(ans, 6, dev);
  UNPROTECT(nprot);
  return ans;
}

/* .Call(ffi_reserve_heap, bytes): sbg_reserve_heap() for R code that is
 * about to make large vectors. */
SEXP ffi_reserve_heap(SEXP bytes) {
  SBG_ASSERT(TYPEOF(bytes) == REALSXP && XLENGTH(bytes) == 1);
  sbg_reserve_heap(REAL(bytes)[0]);
  return R_NilValue;
}

/* c(available threads, OpenMP compiled in) */
SEXP ffi_threads_info(void) {
  SEXP ans = PROTECT(Rf_allocVector(INTSXP, 2));
  INTEGER(ans)[0] = sbg_threads_available();
  INTEGER(ans)[1] = sbg_have_openmp();
  UNPROTECT(1);
  return ans;
}

/* The context of a helper entry from its integer scalars `threads` and
 * `device` (validated in R). */
static void ctx_from_scalars(sbg_ctx *ctx, sbg_progress *pr, SEXP threads, SEXP device, int verbose,
                             const char *label) {
  SBG_ASSERT(TYPEOF(threads) == INTSXP && XLENGTH(threads) == 1);
  SBG_ASSERT(TYPEOF(device) == INTSXP && XLENGTH(device) == 1);
  sbg_ctx_setup(ctx, pr, INTEGER(threads)[0], INTEGER(device), 1, verbose, label);
}

/* R doubles carry the 64-bit seed, subsequence and offset; R has checked
 * they are whole numbers in [0, 2^53]. */
static uint64_t as_u64(SEXP x) {
  SBG_ASSERT(TYPEOF(x) == REALSXP && XLENGTH(x) == 1);
  double v = REAL(x)[0];
  SBG_ASSERT(v >= 0 && v <= 9007199254740992.0);
  return (uint64_t)v;
}

/* The bare Philox4x32-10 bijection, for the known-answer tests: counter and
 * key as 32-bit words held in doubles. */
SEXP ffi_philox_block(SEXP counter, SEXP key) {
  SBG_ASSERT(TYPEOF(counter) == REALSXP && XLENGTH(counter) == 4);
  SBG_ASSERT(TYPEOF(key) == REALSXP && XLENGTH(key) == 2);
  sbg_u32x4 c;
  for (int i = 0; i < 4; i++) c.v[i] = (uint32_t)REAL(counter)[i];
  sbg_u32x4 o = sbg_philox4x32_10(c, (uint32_t)REAL(key)[0], (uint32_t)REAL(key)[1]);
  SEXP ans = PROTECT(Rf_allocVector(REALSXP, 4));
  for (int i = 0; i < 4; i++) REAL(ans)[i] = (double)o.v[i];
  UNPROTECT(1);
  return ans;
}

SEXP ffi_rng_fill(SEXP seed, SEXP subsequence, SEXP offset, SEXP n_streams,
                  SEXP n_per_stream, SEXP kind, SEXP bound, SEXP gpu,
                  SEXP threads, SEXP device) {
  SBG_ASSERT(TYPEOF(n_streams) == REALSXP && TYPEOF(n_per_stream) == REALSXP);
  SBG_ASSERT(TYPEOF(kind) == INTSXP && TYPEOF(bound) == REALSXP);
  SBG_ASSERT(TYPEOF(gpu) == LGLSXP);
  sbg_rng_params p;
  p.seed = as_u64(seed);
  p.subsequence = as_u64(subsequence);
  p.offset = as_u64(offset);
  p.n_streams = (int64_t)REAL(n_streams)[0];
  p.n_per_stream = (int64_t)REAL(n_per_stream)[0];
  p.kind = INTEGER(kind)[0];
  p.bound = (uint32_t)REAL(bound)[0];
  SBG_ASSERT(p.n_streams >= 0 && p.n_per_stream >= 0);
  SBG_ASSERT(p.kind != SBG_RNG_SHUFFLE || p.n_per_stream <= INT32_MAX);

  SEXP ans = PROTECT(Rf_allocVector(REALSXP, (R_xlen_t)(p.n_streams * p.n_per_stream)));
  sbg_ctx ctx;
  sbg_progress pr;
  ctx_from_scalars(&ctx, &pr, threads, device, 0, "draws");
  sbg_status st = LOGICAL(gpu)[0] ? sbg_rng_fill_gpu(&p, REAL(ans), &ctx)
                                  : sbg_rng_fill_cpu(&p, REAL(ans), &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(1);
  return ans;
}

SEXP ffi_busy(SEXP seconds, SEXP bytes, SEXP gpu, SEXP threads, SEXP device,
              SEXP verbose) {
  SBG_ASSERT(TYPEOF(seconds) == REALSXP && TYPEOF(bytes) == REALSXP);
  SBG_ASSERT(TYPEOF(gpu) == LGLSXP);
  SEXP ans = PROTECT(Rf_allocVector(REALSXP, 1));
  sbg_ctx ctx;
  sbg_progress pr;
  SBG_ASSERT(TYPEOF(verbose) == LGLSXP && XLENGTH(verbose) == 1);
  ctx_from_scalars(&ctx, &pr, threads, device, LOGICAL(verbose)[0] == TRUE, "busy");
  sbg_status st = LOGICAL(gpu)[0]
                      ? sbg_busy_gpu(REAL(seconds)[0], REAL(bytes)[0], REAL(ans), &ctx)
                      : sbg_busy_cpu(REAL(seconds)[0], REAL(bytes)[0], REAL(ans), &ctx);
  sbg_progress_end(&pr);
  if (st != SBG_OK) sbg_stop(st, ctx.errbuf);
  UNPROTECT(1);
  return ans;
}
