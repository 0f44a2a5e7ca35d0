/* Error handling for CUDA code: every runtime, cuBLAS and cuRAND call is
 * checked; a failure records what failed and where in ctx->errbuf, sets the
 * status `st` and jumps to the function's `done:` label, which frees what
 * was allocated.  Nothing here aborts or exits. */
#ifndef SBG_CUDA_CHECK_CUH
#define SBG_CUDA_CHECK_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <curand.h>

#include "status.h"

#define SBG_CUDA_CHECK(call)                                                  \
  do {                                                                        \
    cudaError_t sbg_e_ = (call);                                              \
    if (sbg_e_ != cudaSuccess) {                                              \
      st = sbg_fail(ctx, SBG_ERR_CUDA, "CUDA error %s (%s) in %s at %s:%d",  \
                    cudaGetErrorName(sbg_e_), cudaGetErrorString(sbg_e_),     \
                    #call, __FILE__, __LINE__);                               \
      goto done;                                                              \
    }                                                                         \
  } while (0)

#define SBG_CUBLAS_CHECK(call)                                                \
  do {                                                                        \
    cublasStatus_t sbg_e_ = (call);                                           \
    if (sbg_e_ != CUBLAS_STATUS_SUCCESS) {                                    \
      st = sbg_fail(ctx, SBG_ERR_CUDA, "cuBLAS error %s in %s at %s:%d",     \
                    cublasGetStatusName(sbg_e_), #call, __FILE__, __LINE__);  \
      goto done;                                                              \
    }                                                                         \
  } while (0)

#define SBG_CURAND_CHECK(call)                                                \
  do {                                                                        \
    curandStatus_t sbg_e_ = (call);                                           \
    if (sbg_e_ != CURAND_STATUS_SUCCESS) {                                    \
      st = sbg_fail(ctx, SBG_ERR_CUDA, "cuRAND error %d in %s at %s:%d",     \
                    (int)sbg_e_, #call, __FILE__, __LINE__);                  \
      goto done;                                                              \
    }                                                                         \
  } while (0)

/* Propagates a status from a helper: on failure, jump to done. */
#define SBG_TRY(expr)                                                         \
  do {                                                                        \
    st = (expr);                                                              \
    if (st != SBG_OK) goto done;                                              \
  } while (0)

#ifdef __cplusplus
extern "C" {
#endif

/* cudaMalloc that explains itself: on failure the message names `what`, the
 * size asked for and what the device has free.  *ptr is NULL on failure. */
sbg_status sbg_device_alloc(void **ptr, size_t bytes, const char *what, sbg_ctx *ctx);

/* cudaSetDevice with a message naming the device on failure. */
sbg_status sbg_device_select(int device, sbg_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SBG_CUDA_CHECK_CUH */
