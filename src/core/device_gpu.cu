/* Device query and checked device memory (reached from gpuInfo() and from
 * every GPU engine). */
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "cuda_check.cuh"
#include "device.h"

extern "C" void sbg_gpu_summary_get(sbg_gpu_summary *out) {
  memset(out, 0, sizeof(*out));
  out->built_with_cuda = 1;
  cudaRuntimeGetVersion(&out->runtime_version);
  /* Returns 0 (and success) when no driver can be loaded. */
  if (cudaDriverGetVersion(&out->driver_version) != cudaSuccess)
    out->driver_version = 0;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError(); /* a failed query must not stick to later calls */
  int rt = out->runtime_version, drv = out->driver_version;
  if (e == cudaSuccess && n > 0) {
    out->availability = SBG_GPU_USABLE;
    out->n_devices = n;
  } else if (drv == 0) {
    out->availability = SBG_GPU_NO_DRIVER;
    snprintf(out->message, SBG_ERRBUF,
             "no NVIDIA driver could be loaded (libcuda.so.1 is missing), so no GPU can be used");
  } else if (drv < rt || e == cudaErrorInsufficientDriver) {
    out->availability = SBG_GPU_DRIVER_TOO_OLD;
    snprintf(out->message, SBG_ERRBUF,
             "the NVIDIA driver supports CUDA %d.%d but sysbioGPU was built with CUDA %d.%d; update the driver",
             drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
  } else if (e == cudaSuccess || e == cudaErrorNoDevice) {
    out->availability = SBG_GPU_NO_DEVICE;
    snprintf(out->message, SBG_ERRBUF,
             "the NVIDIA driver reports no CUDA device (check CUDA_VISIBLE_DEVICES)");
  } else {
    out->availability = SBG_GPU_QUERY_FAILED;
    snprintf(out->message, SBG_ERRBUF, "CUDA cannot list the devices: %s (%s)",
             cudaGetErrorName(e), cudaGetErrorString(e));
  }
  /* CUDA reserves address space for all the devices' memory when it
   * starts, so a limit on it (ulimit -v, a scheduler's limit on virtual
   * memory) keeps it from starting, whatever the error it then gives */
  struct rlimit as;
  size_t used = strlen(out->message);
  if (out->availability != SBG_GPU_USABLE && out->availability != SBG_GPU_NO_DRIVER &&
      getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && used < SBG_ERRBUF)
    snprintf(out->message + used, SBG_ERRBUF - used,
             "; this process's address space is limited to %.3g GB (ulimit -v, or a job's limit on virtual "
             "memory), which keeps CUDA from starting: lift that limit",
             (double)as.rlim_cur / 1e9);
}

extern "C" sbg_status sbg_device_select(int device, sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  int n = 0;
  SBG_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n) {
    st = sbg_fail(ctx, SBG_ERR_NO_DEVICE, "GPU %d does not exist: %d device(s), numbered from 0",
                  device, n);
    goto done;
  }
  SBG_CUDA_CHECK(cudaSetDevice(device));
done:
  return st;
}

#define WARM_MAX_DEVICES 64 /* contexts made ahead; any further ones when first used */

typedef struct device_warm {
  pthread_t thread;
  int n;
  int devices[WARM_MAX_DEVICES];
} device_warm;

static pthread_mutex_t warm_lock = PTHREAD_MUTEX_INITIALIZER;
static device_warm *warm_pending = NULL;

static void *device_warm_main(void *arg) {
  const device_warm *w = (const device_warm *)arg;
  for (int i = 0; i < w->n; i++)
    if (cudaSetDevice(w->devices[i]) == cudaSuccess) cudaFree(0); /* creates the primary context */
  cudaGetLastError(); /* this thread's error state only */
  return NULL;
}

extern "C" void sbg_device_warm_begin(const int *devices, int n) {
  pthread_mutex_lock(&warm_lock);
  if (warm_pending && pthread_tryjoin_np(warm_pending->thread, NULL) == 0) { /* a finished one */
    free(warm_pending);
    warm_pending = NULL;
  }
  if (!warm_pending && n > 0) {
    device_warm *w = (device_warm *)malloc(sizeof(device_warm));
    if (w) {
      w->n = n < WARM_MAX_DEVICES ? n : WARM_MAX_DEVICES;
      for (int i = 0; i < w->n; i++) w->devices[i] = devices[i];
      if (pthread_create(&w->thread, NULL, device_warm_main, w) == 0) warm_pending = w;
      else free(w);
    }
  }
  pthread_mutex_unlock(&warm_lock);
}

extern "C" void sbg_device_warm_wait(void) {
  pthread_mutex_lock(&warm_lock);
  device_warm *w = warm_pending;
  warm_pending = NULL;
  pthread_mutex_unlock(&warm_lock);
  if (!w) return;
  pthread_join(w->thread, NULL);
  free(w);
}

extern "C" sbg_status sbg_gpu_device_info(int device, int with_memory, sbg_device_info *info,
                                          sbg_ctx *ctx) {
  sbg_status st = SBG_OK;
  cudaDeviceProp prop;
  size_t free_b = 0, total_b = 0;
  memset(info, 0, sizeof(*info));
  /* The properties need no context; the free memory needs the device's
   * (selecting a device creates its primary context, which holds some
   * hundred MB of that device's memory until the process ends: only when
   * asked, so that a call on GPU 0 leaves a server's other GPUs alone) */
  SBG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (with_memory) {
    SBG_TRY(sbg_device_select(device, ctx));
    SBG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  }
  snprintf(info->name, sizeof(info->name), "%s", prop.name);
  info->total_bytes = (double)total_b;
  info->free_bytes = (double)free_b;
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->multiprocessors = prop.multiProcessorCount;
done:
  return st;
}

extern "C" sbg_status sbg_device_alloc(void **ptr, size_t bytes, const char *what, sbg_ctx *ctx) {
  *ptr = NULL;
  if (bytes == 0) return SBG_OK;
  cudaError_t e = cudaMalloc(ptr, bytes);
  if (e == cudaSuccess) return SBG_OK;
  *ptr = NULL;
  cudaGetLastError(); /* out-of-memory is not sticky; clear it */
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  return sbg_fail(ctx, SBG_ERR_DEVICE_ALLOC,
                  "cannot allocate %.1f MiB on GPU %d for %s: %.1f of %.1f MiB free (%s)",
                  bytes / 1048576.0, ctx->device, what, free_b / 1048576.0,
                  total_b / 1048576.0, cudaGetErrorString(e));
}
