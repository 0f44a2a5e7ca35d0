/* R side of the engine context: interrupts, progress, errors (glue.h). */
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

void sbg_ctx_init(sbg_ctx *ctx, sbg_progress *pr, SEXP threads, SEXP device,
                  SEXP verbose, const char *label) {
  SBG_ASSERT(TYPEOF(threads) == INTSXP && XLENGTH(threads) == 1);
  SBG_ASSERT(TYPEOF(device) == INTSXP && XLENGTH(device) == 1);
  SBG_ASSERT(TYPEOF(verbose) == LGLSXP && XLENGTH(verbose) == 1);
  pr->verbose = LOGICAL(verbose)[0] == TRUE;
  pr->t_start = monotonic_seconds();
  pr->t_last_draw = 0;
  pr->bar = NULL;
  pr->label = label;
  ctx->n_threads = sbg_threads_clamp(INTEGER(threads)[0]);
  ctx->device = INTEGER(device)[0];
  ctx->poll = r_poll;
  ctx->poll_data = pr;
  ctx->errbuf[0] = '\0';
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
