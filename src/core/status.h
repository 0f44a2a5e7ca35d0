/* Engine status codes, the call context every engine receives, and the
 * polling hook engines call between chunks of work.  Plain C, no R: the glue
 * (src/core/glue.c) turns a status into an R error. */
#ifndef SBG_STATUS_H
#define SBG_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sbg_status {
  SBG_OK = 0,
  SBG_ERR_INPUT = 1,       /* input the engine cannot use (message says which) */
  SBG_ERR_ALLOC = 2,       /* host allocation failed */
  SBG_ERR_DEVICE_ALLOC = 3,/* device allocation failed */
  SBG_ERR_CUDA = 4,        /* a CUDA runtime, cuBLAS or cuRAND call failed */
  SBG_ERR_NO_CUDA = 5,     /* the package was built without CUDA */
  SBG_ERR_NO_DEVICE = 6,   /* no usable GPU (message says why) */
  SBG_ERR_INTERRUPTED = 7, /* the user interrupted the run */
  SBG_ERR_NUMERIC = 8,     /* the method failed numerically */
  SBG_ERR_INTERNAL = 9     /* a bug: please report */
} sbg_status;

#define SBG_ERRBUF 512

/* Returns nonzero when the run must stop (user interrupt).  `done` is the
 * fraction of the work finished, in [0, 1], for the progress display. */
typedef int (*sbg_poll_fn)(void *poll_data, double done);

/* What an engine gets besides its own input: resources and the way back. */
typedef struct sbg_ctx {
  int n_threads;          /* OpenMP threads for CPU work, >= 1 */
  int device;             /* CUDA device index for GPU work: the run's first,
                           * or the one a per-device worker runs on */
  const int *devices;     /* the run's devices (NULL: `device` alone) */
  int n_devices;          /* their count, >= 1 when devices is set */
  sbg_poll_fn poll;       /* may be NULL: never stop, no progress */
  void *poll_data;
  char errbuf[SBG_ERRBUF];/* message for a status other than SBG_OK */
} sbg_ctx;

/* The run's device count (1 when it names no set: ctx->device alone) and
 * its i-th device. */
static inline int sbg_ctx_n_devices(const sbg_ctx *ctx) {
  return ctx->devices && ctx->n_devices > 0 ? ctx->n_devices : 1;
}
static inline int sbg_ctx_device_at(const sbg_ctx *ctx, int i) {
  return ctx->devices && ctx->n_devices > 0 ? ctx->devices[i] : ctx->device;
}

/* Sets ctx->errbuf from a printf-style message; returns `status`. */
sbg_status sbg_fail(sbg_ctx *ctx, sbg_status status, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Called by engines on the calling thread only, never inside an OpenMP
 * region.  Returns SBG_ERR_INTERRUPTED (with its message) when the run must
 * stop, else SBG_OK. */
sbg_status sbg_poll(sbg_ctx *ctx, double done);

#ifdef __cplusplus
}
#endif

#endif /* SBG_STATUS_H */
