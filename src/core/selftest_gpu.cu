/* GPU side of the self-test engines (see selftest.h): the same draws as
 * selftest_cpu.c from the same header, plus cuRAND's own Philox stream for
 * the bit-identity test. */
#include <curand_kernel.h>

#include "cuda_check.cuh"
#include "philox.h"
#include "selftest.h"

static __global__ void rng_fill_kernel(sbg_rng_params p, double *out, int32_t *perm) {
  int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= p.n_streams) return;
  int64_t n = p.n_per_stream;
  double *o = out + s * n;
  if (p.kind == SBG_RNG_CURAND_U32) {
    curandStatePhilox4_32_10_t g;
    curand_init(p.seed, p.subsequence + (uint64_t)s, p.offset, &g);
    for (int64_t i = 0; i < n; i++) o[i] = (double)curand(&g);
    return;
  }
  sbg_philox g;
  sbg_philox_init(&g, p.seed, p.subsequence + (uint64_t)s, p.offset);
  switch (p.kind) {
  case SBG_RNG_U32:
    for (int64_t i = 0; i < n; i++) o[i] = (double)sbg_philox_next(&g);
    break;
  case SBG_RNG_UNIF:
    for (int64_t i = 0; i < n; i++) o[i] = sbg_philox_unif(&g);
    break;
  case SBG_RNG_BELOW:
    for (int64_t i = 0; i < n; i++) o[i] = (double)sbg_philox_below(&g, p.bound);
    break;
  case SBG_RNG_SHUFFLE: {
    int32_t *v = perm + s * n;
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)i;
    sbg_philox_shuffle(&g, v, (uint32_t)n);
    for (int64_t i = 0; i < n; i++) o[i] = (double)v[i];
    break;
  }
  }
}

extern "C" sbg_status sbg_rng_fill_gpu(const sbg_rng_params *p, double *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  double *d_out = NULL;
  int32_t *d_perm = NULL;
  cudaStream_t stream = NULL;
  size_t total = (size_t)p->n_streams * (size_t)p->n_per_stream;
  const int threads = 128;
  unsigned blocks = (unsigned)((p->n_streams + threads - 1) / threads);

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SBG_TRY(sbg_device_alloc((void **)&d_out, total * sizeof(double), "the draws", ctx));
  if (p->kind == SBG_RNG_SHUFFLE)
    SBG_TRY(sbg_device_alloc((void **)&d_perm, total * sizeof(int32_t), "the permutations", ctx));
  if (total > 0) {
    rng_fill_kernel<<<blocks, threads, 0, stream>>>(*p, d_out, d_perm);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaMemcpyAsync(out, d_out, total * sizeof(double), cudaMemcpyDeviceToHost, stream));
  }
  SBG_CUDA_CHECK(cudaStreamSynchronize(stream));
done:
  cudaFree(d_out);
  cudaFree(d_perm);
  if (stream) cudaStreamDestroy(stream);
  return st;
}

static __global__ void busy_kernel(double *buf, size_t n, int reps) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (int r = 0; r < reps; r++)
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
      buf[i] = buf[i] * 0.5 + 1.0;
}

extern "C" sbg_status sbg_busy_gpu(double seconds, double bytes, double *out, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  double *d_buf = NULL;
  cudaStream_t stream = NULL;
  cudaEvent_t t_start = NULL, t_now = NULL;
  size_t n = (size_t)(bytes / sizeof(double));
  if (n < 1) n = 1;
  out[0] = 0;

  SBG_TRY(sbg_device_select(ctx->device, ctx));
  SBG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SBG_CUDA_CHECK(cudaEventCreate(&t_start));
  SBG_CUDA_CHECK(cudaEventCreate(&t_now));
  SBG_TRY(sbg_device_alloc((void **)&d_buf, n * sizeof(double), "the busy buffer", ctx));
  SBG_CUDA_CHECK(cudaMemsetAsync(d_buf, 0, n * sizeof(double), stream));
  SBG_CUDA_CHECK(cudaEventRecord(t_start, stream));
  for (;;) {
    busy_kernel<<<1024, 256, 0, stream>>>(d_buf, n, 4);
    SBG_CUDA_CHECK(cudaGetLastError());
    SBG_CUDA_CHECK(cudaEventRecord(t_now, stream));
    SBG_CUDA_CHECK(cudaEventSynchronize(t_now));
    float ms = 0;
    SBG_CUDA_CHECK(cudaEventElapsedTime(&ms, t_start, t_now));
    out[0] += 1;
    if (ms / 1000.0 >= seconds) break;
    SBG_TRY(sbg_poll(ctx, ms / 1000.0 / seconds));
  }
done:
  cudaFree(d_buf);
  if (t_start) cudaEventDestroy(t_start);
  if (t_now) cudaEventDestroy(t_now);
  if (stream) cudaStreamDestroy(stream);
  return st;
}
