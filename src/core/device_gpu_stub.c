/* Device query of a build without CUDA: there is never a usable GPU. */
#include <stdio.h>
#include <string.h>

#include "device.h"

void sbg_gpu_summary_get(sbg_gpu_summary *out) {
  memset(out, 0, sizeof(*out));
  out->availability = SBG_GPU_NOT_BUILT;
  snprintf(out->message, SBG_ERRBUF,
           "sysbioGPU was built without CUDA (reinstall with nvcc on the PATH or CUDA_HOME set)");
}

sbg_status sbg_gpu_device_info(int device, int with_memory, sbg_device_info *info,
                               sbg_ctx *ctx) {
  (void)device; (void)with_memory;
  memset(info, 0, sizeof(*info));
  return sbg_fail(ctx, SBG_ERR_NO_CUDA, "sysbioGPU was built without CUDA");
}

void sbg_device_warm_begin(const int *devices, int n) {
  (void)devices;
  (void)n;
}

void sbg_device_warm_wait(void) {}
