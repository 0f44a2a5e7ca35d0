/* What CUDA can use on this machine: device query and checked device
 * memory.  Implemented in device_gpu.cu, or by device_gpu_stub.c in a build
 * without CUDA. */
#ifndef SBG_DEVICE_H
#define SBG_DEVICE_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sbg_gpu_availability {
  SBG_GPU_USABLE = 0,
  SBG_GPU_NOT_BUILT = 1,      /* package built without CUDA */
  SBG_GPU_NO_DRIVER = 2,      /* no NVIDIA driver (libcuda) could be loaded */
  SBG_GPU_DRIVER_TOO_OLD = 3, /* driver older than the CUDA runtime */
  SBG_GPU_NO_DEVICE = 4,      /* driver present, no device visible */
  SBG_GPU_QUERY_FAILED = 5    /* any other CUDA error; see message */
} sbg_gpu_availability;

typedef struct sbg_gpu_summary {
  int built_with_cuda;
  int availability;     /* an sbg_gpu_availability */
  int n_devices;
  int driver_version;   /* CUDA version the driver supports, 1000*major + 10*minor; 0 if none */
  int runtime_version;  /* CUDA runtime the package links; 0 if not built with CUDA */
  char message[SBG_ERRBUF]; /* why the GPU cannot be used, "" if it can */
} sbg_gpu_summary;

typedef struct sbg_device_info {
  char name[256];
  double total_bytes;
  double free_bytes;
  int cc_major, cc_minor;
  int multiprocessors;
} sbg_device_info;

void sbg_gpu_summary_get(sbg_gpu_summary *out);

/* Properties of device `device` (0-based).  With `with_memory`, also its
 * total and free memory, which needs the device's context (created here,
 * about 0.1-0.5 s the first time); without, those are 0. */
sbg_status sbg_gpu_device_info(int device, int with_memory, sbg_device_info *info,
                               sbg_ctx *ctx);

/* The run's devices' CUDA contexts, created on a thread of its own while
 * the caller prepares its input on the host: creating a context takes
 * about 0.1 s the first time in a process, and the engine's first CUDA
 * call would otherwise wait for it.  Errors are left for the engine's own
 * calls to report.  sbg_device_warm_join waits for the thread and frees
 * the handle (NULL: nothing to wait for, as without CUDA or where no
 * thread could start); every path out of the engine must call it. */
typedef struct sbg_device_warm sbg_device_warm;
sbg_device_warm *sbg_device_warm_start(const sbg_ctx *ctx);
void sbg_device_warm_join(sbg_device_warm *w);

#ifdef __cplusplus
}
#endif

#endif /* SBG_DEVICE_H */
