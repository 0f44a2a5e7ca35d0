/* R side of the engine context: interrupts, progress, errors (glue.h). */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "glue.h"
#include "threads.h"

static double monotonic_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* R_CheckUserInterrupt() longjmps on Ctrl-C, which would skip the engine's
 * cleanup.  Inside R_ToplevelExec the jump stops here and we learn of it
 * through the return value instead. */
static void check_interrupt(void *unused) {
  (void)unused;
  R_CheckUserInterrupt();
}

static int interrupt_pending(void) {
  return R_ToplevelExec(check_interrupt, NULL) == FALSE;
}

/* A verbose run opens its progress bar (cli, through R/progress.R) at its
 * first poll, so that cli's clock and ETA start with the run; cli draws it
 * only once the run has lasted `cli.progress_show_after` (2 s). */
#define SBG_PROGRESS_AFTER 0.0

/* Evaluates fun(args...) in the namespace inside R_ToplevelExec, so that an
 * error in the progress code cannot jump over the engine's cleanup; the
 * bar is cosmetic, so a failure only turns it off. */
typedef struct progress_call {
  SEXP call;
  SEXP value;
} progress_call;

static void eval_in_namespace(void *data) {
  progress_call *pc = (progress_call *)data;
  SEXP ns = PROTECT(R_FindNamespace(PROTECT(Rf_mkString("sysbioGPU"))));
  pc->value = Rf_eval(pc->call, ns);
  UNPROTECT(2);
}

static SEXP progress_eval(sbg_progress *pr, SEXP call) {
  progress_call pc = {call, R_NilValue};
  if (!R_ToplevelExec(eval_in_namespace, &pc)) {
    pr->verbose = 0;
    return R_NilValue;
  }
  return pc.value;
}

static void draw_bar(sbg_progress *pr, double done) {
  if (done < 0) done = 0;
  if (done > 1) done = 1;
  if (pr->bar == NULL) {
    SEXP call = PROTECT(Rf_lang2(Rf_install("progress_open"), PROTECT(Rf_mkString(pr->label))));
    SEXP bar = progress_eval(pr, call);
    UNPROTECT(2);
    if (!Rf_isEnvironment(bar)) return;
    R_PreserveObject(bar);
    pr->bar = bar;
  }
  SEXP call = PROTECT(Rf_lang3(Rf_install("progress_set"), pr->bar,
                               PROTECT(Rf_ScalarReal(100 * done))));
  progress_eval(pr, call);
  UNPROTECT(2);
}

static int r_poll(void *data, double done) {
  sbg_progress *pr = (sbg_progress *)data;
  if (interrupt_pending()) return 1;
  if (pr->verbose) {
    double now = monotonic_seconds();
    if (now - pr->t_start > SBG_PROGRESS_AFTER && now - pr->t_last_draw > 0.2) {
      draw_bar(pr, done);
      pr->t_last_draw = now;
    }
  }
  return 0;
}

void sbg_ctx_setup(sbg_ctx *ctx, sbg_progress *pr, int threads, const int *devices, int n_devices,
                   int verbose, const char *label) {
  SBG_ASSERT(devices != NULL && n_devices >= 1);
  pr->verbose = verbose;
  pr->t_start = monotonic_seconds();
  pr->t_last_draw = 0;
  pr->bar = NULL;
  pr->label = label;
  ctx->n_threads = sbg_threads_clamp(threads);
  ctx->device = devices[0];
  ctx->devices = devices;
  ctx->n_devices = n_devices;
  ctx->poll = r_poll;
  ctx->poll_data = pr;
  ctx->errbuf[0] = '\0';
}

void sbg_ctx_from_run(sbg_ctx *ctx, sbg_progress *pr, const sbg_run *r, const char *label) {
  sbg_ctx_setup(ctx, pr, r->threads, r->devices, r->n_devices, r->verbose, label);
}

/* ---- named lists (the run contract) ---- */

static void NORET bad_elt(const char *name, const char *what, SEXP x) {
  char msg[SBG_ERRBUF];
  if (x == NULL)
    snprintf(msg, sizeof msg, ".Call list has no element '%s'", name);
  else
    snprintf(msg, sizeof msg, ".Call list element '%s' must be %s, not a %s of length %.0f", name, what,
             Rf_type2char(TYPEOF(x)), (double)XLENGTH(x));
  sbg_stop(SBG_ERR_INTERNAL, msg);
}

SEXP sbg_elt_or_null(SEXP list, const char *name) {
  if (TYPEOF(list) != VECSXP) bad_elt(name, "in a list", list);
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  if (TYPEOF(names) != STRSXP) return NULL;
  for (R_xlen_t i = 0; i < XLENGTH(list); i++)
    if (strcmp(CHAR(STRING_ELT(names, i)), name) == 0) return VECTOR_ELT(list, i);
  return NULL;
}

SEXP sbg_elt(SEXP list, const char *name) {
  SEXP x = sbg_elt_or_null(list, name);
  if (x == NULL) bad_elt(name, "present", NULL);
  return x;
}

SEXP sbg_vec_elt(SEXP list, const char *name, SEXPTYPE type, R_xlen_t len) {
  SEXP x = sbg_elt(list, name);
  if ((SEXPTYPE)TYPEOF(x) != type || (len >= 0 && XLENGTH(x) != len)) {
    char what[80];
    snprintf(what, sizeof what, "a %s vector%s", Rf_type2char(type), len == 1 ? " of length 1" : "");
    bad_elt(name, what, x);
  }
  return x;
}

int sbg_int_elt(SEXP list, const char *name) {
  SEXP x = sbg_vec_elt(list, name, INTSXP, 1);
  if (INTEGER(x)[0] == NA_INTEGER) bad_elt(name, "a non-missing integer", x);
  return INTEGER(x)[0];
}

double sbg_real_elt(SEXP list, const char *name) {
  return REAL(sbg_vec_elt(list, name, REALSXP, 1))[0];
}

int sbg_lgl_elt(SEXP list, const char *name) {
  SEXP x = sbg_vec_elt(list, name, LGLSXP, 1);
  if (LOGICAL(x)[0] == NA_LOGICAL) bad_elt(name, "TRUE or FALSE", x);
  return LOGICAL(x)[0];
}

SEXP sbg_named_list(int n, const char *const *names) {
  SEXP ans = PROTECT(Rf_allocVector(VECSXP, n));
  SEXP nm = Rf_allocVector(STRSXP, n);
  Rf_setAttrib(ans, R_NamesSymbol, nm);
  for (int i = 0; i < n; i++) SET_STRING_ELT(nm, i, Rf_mkChar(names[i]));
  UNPROTECT(1);
  return ans;
}

SEXP sbg_set(SEXP list, const char *name, SEXP value) {
  SEXP names = Rf_getAttrib(list, R_NamesSymbol);
  for (R_xlen_t i = 0; i < XLENGTH(list); i++)
    if (strcmp(CHAR(STRING_ELT(names, i)), name) == 0) {
      SET_VECTOR_ELT(list, i, value);
      return value;
    }
  bad_elt(name, "present", NULL);
}

void sbg_run_decode(SEXP run, sbg_run *r) {
  r->gpu = sbg_lgl_elt(run, "gpu");
  r->threads = sbg_int_elt(run, "threads");
  r->verbose = sbg_lgl_elt(run, "verbose");
  SEXP dev = sbg_vec_elt(run, "devices", INTSXP, -1);
  if (XLENGTH(dev) < 1 || XLENGTH(dev) > 64) bad_elt("devices", "1 to 64 device indices", dev);
  r->devices = INTEGER(dev);
  r->n_devices = (int)XLENGTH(dev);
}

void sbg_progress_end(sbg_progress *pr) {
  if (pr->bar != NULL) {
    SEXP bar = pr->bar;
    pr->bar = NULL;
    SEXP call = PROTECT(Rf_lang2(Rf_install("progress_close"), bar));
    progress_eval(pr, call);
    UNPROTECT(1);
    R_ReleaseObject(bar);
  }
}

void sbg_stop(sbg_status st, const char *msg) {
  SEXP pkg = PROTECT(Rf_mkString("sysbioGPU"));
  SEXP ns = PROTECT(R_FindNamespace(pkg));
  SEXP code = PROTECT(Rf_ScalarInteger((int)st));
  SEXP text = PROTECT(Rf_mkString(msg));
  SEXP call = PROTECT(Rf_lang3(Rf_install("stop_engine"), code, text));
  Rf_eval(call, ns);
  UNPROTECT(5); /* # nocov: stop_engine() never returns */
  Rf_error("%s", msg);
}

void sbg_reserve_heap(double bytes) {
  if (bytes >= 1) (void)Rf_allocVector(RAWSXP, (R_xlen_t)bytes);
}

static void scratch_free(SEXP holder) {
  free(R_ExternalPtrAddr(holder));
  R_ClearExternalPtr(holder);
}

SEXP sbg_scratch_holder(void) {
  SEXP holder = PROTECT(R_MakeExternalPtr(NULL, R_NilValue, R_NilValue));
  R_RegisterCFinalizerEx(holder, scratch_free, TRUE);
  UNPROTECT(1);
  return holder;
}

SEXP sbg_scratch(size_t bytes, void **at) {
  /* the holder first: if making it fails, nothing is allocated yet */
  SEXP holder = PROTECT(sbg_scratch_holder());
  *at = malloc(bytes ? bytes : 1);
  R_SetExternalPtrAddr(holder, *at);
  UNPROTECT(1);
  return holder;
}

void sbg_scratch_release(SEXP holder) { scratch_free(holder); }
