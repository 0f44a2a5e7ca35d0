# GPU tests run where a device is usable. With SYSBIOGPU_TEST_GPU=1 (set by
# tools/gpu-check.sh on the GPU machine) a missing GPU is a failure, so a
# broken GPU build cannot pass as "skipped".
skip_if_no_gpu <- function() {
  if (hasGPU()) return(invisible(TRUE))
  if (identical(Sys.getenv("SYSBIOGPU_TEST_GPU"), "1")) {
    testthat::fail(paste("SYSBIOGPU_TEST_GPU=1 but no GPU is usable:",
                         attr(gpuInfo(), "reason")))
  }
  testthat::skip("no usable GPU")
}

# Sends Ctrl-C (SIGINT) to this R process after `after` seconds.
interrupt_after <- function(after) {
  cmd <- sprintf("sleep %s; kill -INT %d", format(after), Sys.getpid())
  system2("sh", c("-c", shQuote(cmd)), wait = FALSE)
}

# The devices of the several-GPU tests: GPUs 0 and 1 where there are two;
# on one GPU, GPU 0 twice (each entry a share of the work, as if another
# GPU), so that the split over devices and the merge run there too.  Calls
# with a repeated GPU go through on_devices().
gpu_pair <- function() if (nrow(gpuInfo()) >= 2L) c(0L, 1L) else c(0L, 0L)
two_gpus <- function() nrow(gpuInfo()) >= 2L
on_devices <- function(code) with_opts(list(sysbioGPU.repeatDevices = TRUE), code)

# code evaluated with the options opts (engine settings: ?`sysbioGPU-options`)
with_opts <- function(opts, code) {
  old <- options(opts)
  on.exit(options(old))
  force(code)
}
