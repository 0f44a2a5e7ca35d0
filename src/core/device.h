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

/* The CUDA contexts of `devices` (n of them), created on a thread of its
 * own while the caller checks and prepares its input on the host: a
 * context takes a few tenths of a second the first time in a process,
 * which the first CUDA call would otherwise wait for.  Errors are left
 * for the engines' own calls to report.  One thread at a time: a begin while one is still
 * at work does nothing.  sbg_device_warm_wait waits for the pending one,
 * if any; an engine calls it before its first CUDA call, or makes that
 * call, which waits for the context anyway (the thread is then reaped by
 * the next begin or wait).  Without CUDA both do nothing. */
void sbg_device_warm_begin(const int *devices, int n);
void sbg_device_warm_wait(void);

#ifdef __cplusplus
}
#endif

#endif /* SBG_DEVICE_H */
