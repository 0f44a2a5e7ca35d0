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

/* Progress bars appear only for runs that last more than this long. */
#define SBG_PROGRESS_AFTER 2.0

static void draw_bar(sbg_progress *pr, double done, double elapsed) {
  const int width = 40;
  int filled = (int)(done * width + 0.5);
  if (filled < 0) filled = 0;
  if (filled > width) filled = width;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : ' ';
  bar[width] = '\0';
  double eta = done > 0.01 ? elapsed * (1 - done) / done : -1;
  if (eta >= 0)
    REprintf("\r%s [%s] %3.0f%% eta %.0fs ", pr->label, bar, 100 * done, eta);
  else
    REprintf("\r%s [%s] %3.0f%%      ", pr->label, bar, 100 * done);
  pr->drawn = 1;
}

static int r_poll(void *data, double done) {
  sbg_progress *pr = (sbg_progress *)data;
  if (interrupt_pending()) return 1;
  if (pr->verbose) {
    double now = monotonic_seconds();
    double elapsed = now - pr->t_start;
    if (elapsed > SBG_PROGRESS_AFTER && now - pr->t_last_draw > 0.2) {
      draw_bar(pr, done, elapsed);
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
  pr->drawn = 0;
  pr->label = label;
  ctx->n_threads = sbg_threads_clamp(INTEGER(threads)[0]);
  ctx->device = INTEGER(device)[0];
  ctx->poll = r_poll;
  ctx->poll_data = pr;
  ctx->errbuf[0] = '\0';
}

void sbg_progress_end(sbg_progress *pr) {
  if (pr->drawn) {
    draw_bar(pr, 1.0, monotonic_seconds() - pr->t_start);
    REprintf("\n");
    pr->drawn = 0;
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
