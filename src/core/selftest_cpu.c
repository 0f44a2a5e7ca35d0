/* CPU side of the self-test engines (see selftest.h). */
#include <stdlib.h>
#include <time.h>

#include "omp_compat.h"
#include "philox.h"
#include "selftest.h"

/* One stream's worth of draws; the GPU kernel does the same per thread. */
static void fill_stream(const sbg_rng_params *p, int64_t s, double *out, int32_t *perm) {
  sbg_philox g;
  sbg_philox_init(&g, p->seed, p->subsequence + (uint64_t)s, p->offset);
  int64_t n = p->n_per_stream;
  switch (p->kind) {
  case SBG_RNG_U32:
    for (int64_t i = 0; i < n; i++) out[i] = (double)sbg_philox_next(&g);
    break;
  case SBG_RNG_UNIF:
    for (int64_t i = 0; i < n; i++) out[i] = sbg_philox_unif(&g);
    break;
  case SBG_RNG_BELOW:
    for (int64_t i = 0; i < n; i++) out[i] = (double)sbg_philox_below(&g, p->bound);
    break;
  case SBG_RNG_SHUFFLE:
    for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
    sbg_philox_shuffle(&g, perm, (uint32_t)n);
    for (int64_t i = 0; i < n; i++) out[i] = (double)perm[i];
    break;
  }
}

sbg_status sbg_rng_fill_cpu(const sbg_rng_params *p, double *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int32_t *perm = NULL;
  if (p->kind == SBG_RNG_CURAND_U32)
    return sbg_fail(ctx, SBG_ERR_INPUT, "cuRAND's stream exists on the GPU only");
  if (p->kind < SBG_RNG_U32 || p->kind > SBG_RNG_SHUFFLE)
    return sbg_fail(ctx, SBG_ERR_INTERNAL, "unknown draw kind %d", p->kind);
  int nt = ctx->n_threads;
  if (p->kind == SBG_RNG_SHUFFLE) {
    perm = malloc((size_t)nt * (size_t)p->n_per_stream * sizeof(int32_t) + 1);
    if (!perm) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate the shuffle buffers");
  }
  /* Streams in chunks so that a long fill stays interruptible. */
  const int64_t chunk = 4096;
  for (int64_t s0 = 0; s0 < p->n_streams; s0 += chunk) {
    int64_t s1 = s0 + chunk < p->n_streams ? s0 + chunk : p->n_streams;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t s = s0; s < s1; s++) {
      int32_t *mine = perm ? perm + (size_t)omp_get_thread_num() * (size_t)p->n_per_stream : NULL;
      fill_stream(p, s, out + s * p->n_per_stream, mine);
    }
    st = sbg_poll(ctx, (double)s1 / (double)p->n_streams);
    if (st != SBG_OK) goto done;
  }
done:
  free(perm);
  return st;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

sbg_status sbg_busy_cpu(double seconds, double bytes, double *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  size_t n = (size_t)(bytes / sizeof(double));
  double *buf = NULL;
  if (n < 1) n = 1;
  buf = malloc(n * sizeof(double));
  if (!buf) return sbg_fail(ctx, SBG_ERR_ALLOC, "cannot allocate %.0f bytes", bytes);
  for (size_t i = 0; i < n; i++) buf[i] = (double)i;
  double t0 = now_seconds(), t;
  out[0] = 0;
  while ((t = now_seconds() - t0) < seconds) {
    double t_chunk = now_seconds();
    /* About 10 ms of arithmetic over the buffer. */
    while (now_seconds() - t_chunk < 0.01) {
#pragma omp parallel for num_threads(ctx->n_threads) schedule(static)
      for (int64_t i = 0; i < (int64_t)n; i++) buf[i] = buf[i] * 0.5 + 1.0;
    }
    out[0] += 1;
    st = sbg_poll(ctx, t / seconds);
    if (st != SBG_OK) goto done;
  }
done:
  free(buf);
  return st;
}
