/* Status messages and polling for the engines (no R here). */
#include <stdarg.h>
#include <stdio.h>

#include "status.h"

sbg_status sbg_fail(sbg_ctx *ctx, sbg_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->errbuf, SBG_ERRBUF, fmt, ap);
  va_end(ap);
  return status;
}

sbg_status sbg_poll(sbg_ctx *ctx, double done) {
  if (ctx->poll && ctx->poll(ctx->poll_data, done))
    return sbg_fail(ctx, SBG_ERR_INTERRUPTED, "interrupted by the user");
  return SBG_OK;
}
