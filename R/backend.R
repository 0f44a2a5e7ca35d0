# Which engine runs a call: backend, threads and device, shared by every
# method (see DESIGN.md, "Backends").

# Begins creating the CUDA contexts of the devices that a GPU run will use,
# on a thread of its own, while R checks the input: a context takes a few
# tenths of a second the first time in a process, which the engine's first
# CUDA call would wait for (it waits for this thread instead).  Best effort
# and silent: resolveBackend() and the engine report any problem.  Not
# with BPPARAM, whose workers, not this process, use the devices.
gpu_warm <- function(backend, device, BPPARAM = NULL) {
  if (!is.null(BPPARAM) || !(identical(backend, "auto") || identical(backend, "gpu"))) return(invisible())
  s <- gpu_status()
  if (s$availability != 0L) return(invisible())
  dev <- if (identical(device, "all")) seq_len(s$nDevices) - 1L else device
  if (!is.numeric(dev) || length(dev) < 1L || anyNA(dev) || any(dev < 0 | dev >= s$nDevices | dev != round(dev))) {
    return(invisible())
  }
  .Call(ffi_device_warm, unique(as.integer(dev)))
  invisible()
}

gpu_status <- function(details = FALSE) {
  s <- .Call(ffi_gpu_info, details)
  names(s) <- c("cuda", "availability", "message", "driver", "runtime", "nDevices", "devices")
  s
}

cuda_version_string <- function(v) {
  ifelse(v > 0, sprintf("%d.%d", v %/% 1000L, (v %% 1000L) %/% 10L), NA_character_)
}

#' GPUs that sysbioGPU can use
#'
#' Lists the CUDA devices visible to the package, one row per device.
#' Reading each device's free memory starts a CUDA context on it, which
#' holds some hundred MB of that device's memory until the R session ends;
#' the methods themselves start one only on the devices they run on, and
#' [hasGPU()] and [resolveBackend()] start none.
#'
#' @return A data.frame with one row per device (zero rows when there is no
#'   usable GPU, or when the package was built without CUDA) and columns
#'   `index` (the CUDA device number, from 0, as used by the `device`
#'   argument of every method), `name`, `memoryGiB` and `freeGiB` (total and
#'   free device memory), `computeCapability`, `multiprocessors`,
#'   `driverVersion` (the CUDA version the driver supports) and
#'   `runtimeVersion` (the CUDA runtime the package was built with).
#'   Attributes: `cuda` (`TRUE` when the package was built with CUDA) and
#'   `reason` (why no GPU can be used, `""` when one can).
#' @seealso [hasGPU()], [resolveBackend()]
#' @examples
#' gpuInfo()
#' attr(gpuInfo(), "cuda")
#' @export
gpuInfo <- function() {
  s <- gpu_status(details = TRUE)
  d <- s$devices
  n <- length(d$index)
  out <- data.frame(
    index = d$index,
    name = d$name,
    memoryGiB = d$total / 2^30,
    freeGiB = d$free / 2^30,
    computeCapability = ifelse(is.na(d$ccMajor), NA_character_, paste0(d$ccMajor, ".", d$ccMinor)),
    multiprocessors = d$multiprocessors,
    driverVersion = rep(cuda_version_string(s$driver), n),
    runtimeVersion = rep(cuda_version_string(s$runtime), n),
    stringsAsFactors = FALSE
  )
  attr(out, "cuda") <- s$cuda
  attr(out, "reason") <- s$message
  out
}

#' Is a GPU usable?
#'
#' @return `TRUE` when the package was built with CUDA and at least one
#'   device can be used, else `FALSE`.
#' @seealso [gpuInfo()]
#' @examples
#' hasGPU()
#' @export
hasGPU <- function() {
  gpu_status()$availability == 0L
}

threads_available <- function() .Call(ffi_threads_info)[[1L]]

# Whether `device` may name a GPU more than once (option
# sysbioGPU.repeatDevices, for tests: each entry then takes its share of
# the work as if it were another GPU, so that one GPU runs the code that
# splits the work over several and merges it).
repeat_devices <- function() {
  v <- getOption("sysbioGPU.repeatDevices")
  if (is.null(v)) return(FALSE)
  if (!is_flag(v)) {
    stop_input("option `sysbioGPU.repeatDevices` must be TRUE or FALSE, not ", arg_label(v))
  }
  v
}

#' Resolve the backend, threads and device of a call
#'
#' Every method of the package takes `backend`, `threads` and `device` and
#' resolves them with this function, which is exported so that you can see
#' what a call would use.
#'
#' @param backend `"auto"` (the GPU when the package was built with CUDA and
#'   a device is usable, else the CPU), `"cpu"` or `"gpu"` (an error when no
#'   GPU can be used, saying why). Default: `getOption("sysbioGPU.backend",
#'   "auto")`.
#' @param threads CPU threads, a whole number >= 1, capped at the processors
#'   available (and at `OMP_THREAD_LIMIT`). `NULL`, the default unless
#'   `getOption("sysbioGPU.threads")` is set, uses them all.
#' @param device The CUDA device number (from 0, as in [gpuInfo()]), or
#'   several distinct ones, or `"all"`: the methods ([rapidGSEA()],
#'   [parCosnet()], [cvParCosnet()], [pbnSteadyState()], [grnEvolve()],
#'   [lassieSimulate()]) split their work over them, with the same result
#'   as one (for [pbnSteadyState()], its trajectory method); the helpers
#'   such as [pbnSimulate()] need a single device. Default:
#'   `getOption("sysbioGPU.device", 0)`.
#' @return A list of class `sysbioGPU_backend`: `backend` (`"cpu"` or
#'   `"gpu"`), `requested`, `threads`, `device` (the first GPU; `NA` on the
#'   CPU), `devices` (all of them), `deviceName` and `reason` (why `"auto"`
#'   chose the CPU, else `""`).
#' @seealso [gpuInfo()]
#' @examples
#' resolveBackend("cpu", threads = 1)
#' resolveBackend()  # what "auto" picks on this machine
#' @export
resolveBackend <- function(backend = getOption("sysbioGPU.backend", "auto"),
                           threads = getOption("sysbioGPU.threads"),
                           device = getOption("sysbioGPU.device", 0L)) {
  backend <- check_choice(backend, c("auto", "cpu", "gpu"), "backend")
  threads <- if (is.null(threads)) threads_available()
             else min(check_whole(threads, "threads", min = 1, max = 2^31 - 1), threads_available())
  all_devices <- identical(device, "all")
  if (!all_devices) {
    if (!is.numeric(device) || length(device) < 1L || anyNA(device) || any(device < 0) ||
        any(device != round(device)) || any(device > 2^31 - 1) ||
        (anyDuplicated(device) && !repeat_devices())) {
      stop_input("`device` must be a GPU index (a whole number >= 0), several distinct ones, or \"all\", not ",
                 arg_label(device))
    }
    device <- as.integer(device)
  }
  use_gpu <- FALSE
  reason <- ""
  # backend = "cpu" asks nothing of CUDA (its first query takes a while
  # with several devices)
  if (backend != "cpu") {
    s <- gpu_status()
    if (s$availability != 0L) {
      if (backend == "gpu") stop_backend('backend = "gpu" cannot be used: ', s$message)
      reason <- s$message
    } else if (!all_devices && any(device >= s$nDevices)) {
      msg <- sprintf("`device` = %d does not exist: %d GPU(s), numbered from 0", device[device >= s$nDevices][[1L]],
                     s$nDevices)
      if (backend == "gpu") stop_backend(msg)
      reason <- msg
    } else {
      use_gpu <- TRUE
    }
  }
  devices <- if (!use_gpu) NA_integer_ else if (all_devices) seq_len(s$nDevices) - 1L else device
  names <- if (use_gpu) s$devices$name[devices + 1L] else ""
  structure(
    list(
      backend = if (use_gpu) "gpu" else "cpu",
      requested = backend,
      threads = as.integer(threads),
      device = devices[[1L]],
      devices = devices,
      deviceName = if (length(names) > 1L) paste0(length(names), " GPUs: ", paste(names, collapse = ", ")) else names,
      reason = if (backend == "cpu") "" else reason
    ),
    class = "sysbioGPU_backend"
  )
}

#' @export
print.sysbioGPU_backend <- function(x, ...) {
  if (x$backend == "gpu") {
    cat(sprintf("<sysbioGPU backend> GPU %s (%s), %d CPU thread(s) for host work\n",
                paste(x$devices, collapse = ", "), x$deviceName, x$threads))
  } else {
    cat(sprintf("<sysbioGPU backend> CPU, %d thread(s)\n", x$threads))
    if (nzchar(x$reason)) cat("  (no GPU: ", x$reason, ")\n", sep = "")
  }
  invisible(x)
}

# What .Call glue expects from a resolved backend.  Methods that split
# their work over several GPUs ask for `multi` and read `devices`; the
# others take one `device`.
# The `run` list of the .Call contract (src/core/glue.h, sbg_run_decode()):
# engine, CPU threads, GPU indices (0 on the CPU) and progress.
run_list <- function(a, verbose = FALSE, threads = a$threads, devices = a$devices) {
  list(gpu = isTRUE(a$gpu), threads = as.integer(threads), devices = as.integer(devices),
       verbose = isTRUE(verbose))
}

backend_args <- function(b, multi = FALSE) {
  if (!multi && length(b$devices) > 1L) {
    caller <- sys.call(-1L)
    fn <- if (is.null(caller)) "this method" else paste0(deparse(caller[[1L]]), "()")
    stop_input(fn, " runs on one GPU: give one `device`, not ", length(b$devices))
  }
  list(gpu = b$backend == "gpu", threads = b$threads,
       device = if (is.na(b$device)) 0L else b$device,
       devices = if (is.na(b$device)) 0L else b$devices)
}
