#' How a result was computed
#'
#' Every result of the package answers `runInfo()` with the same one-row
#' data frame, whatever the method: which backend and device ran it, on how
#' many threads and R workers, with which seed, how long it took from the R
#' call, and which version of the package computed it. Put it at the end of
#' a report, or `rbind()` the rows of several runs.
#'
#' @param x A result of [rapidGSEA()], [parCosnet()], [cvParCosnet()],
#'   [pbnSteadyState()], [grnEvolve()] or [lassieSimulate()] (matrices,
#'   a batch or, with `output = "array"`, the array).
#' @param ... Unused.
#' @return A data frame with one row and the columns `method`, `backend`
#'   (`"cpu"` or `"gpu"`), `device` (the GPU indices, comma-separated when
#'   several; `NA` on the CPU), `deviceName`, `threads` (CPU threads of the
#'   calling process), `workers` (R workers of `BPPARAM`, 1 without),
#'   `seed` (`NA` for methods without randomness), `seconds` (wall time of
#'   the call), `version` (of sysbioGPU) and `engineSettings` (the engine
#'   settings of [sysbioGPU-options] that were set for the run, as
#'   `"name=value"` separated by `"; "`, `NA` when none was). Fields a
#'   result does not record are `NA`.
#' @examples
#' net <- pbn(list(A = "!B", B = "A"))
#' ss <- pbnSteadyState(net, c(A = TRUE), method = "exact")
#' runInfo(ss)
#' @export
runInfo <- function(x, ...) UseMethod("runInfo")

#' @rdname runInfo
#' @export
runInfo.default <- function(x, ...) {
  method <- intersect(class(x), run_info_methods)
  if (length(method) == 0L) {
    stop_input("`x` must be a result of one of ", paste0(run_info_methods, "()", collapse = ", "),
               ", not an object of class ", class(x)[[1L]])
  }
  backend <- run_field(x, "backend")
  gpu <- identical(backend, "gpu")
  devices <- run_field(x, c("devices", "device"))
  device <- if (gpu && is.numeric(devices)) paste(devices, collapse = ",") else NA_character_
  data.frame(
    method = method[[1L]],
    backend = if (is.null(backend)) NA_character_ else as.character(backend),
    device = device,
    deviceName = if (gpu) run_scalar(run_field(x, "deviceName"), NA_character_) else NA_character_,
    threads = run_scalar(run_field(x, "threads"), NA_integer_),
    workers = run_scalar(run_field(x, "workers"), 1L),
    seed = run_scalar(run_field(x, "seed"), NA_real_),
    seconds = run_scalar(run_field(x, c("seconds", "time", "elapsed")), NA_real_),
    version = as.character(utils::packageVersion("sysbioGPU")),
    engineSettings = run_scalar(run_field(x, "engineSettings"), NA_character_),
    stringsAsFactors = FALSE
  )
}

run_info_methods <- c("rapidGSEA", "parCosnet", "cvParCosnet", "pbnSteadyState", "grnEvolve",
                      "lassieSimulation", "lassieBatch", "lassieArray")

# A result records its run as list elements (parCosnet, grnEvolve), as
# attributes (data frames and matrices), as a column of its `info` table
# (lassieSimulate's batch) or, for pbnSteadyState's sampled estimates, as a
# column repeated on every row; the first name found wins.
run_field <- function(x, names) {
  info <- attr(x, "info", exact = TRUE)
  for (nm in names) {
    v <- if (is.list(x) && !is.data.frame(x)) x[[nm]] else NULL
    if (is.null(v)) v <- attr(x, nm, exact = TRUE)
    if (is.null(v) && is.data.frame(info) && nm %in% names(info)) v <- info[[nm]]
    if (is.null(v) && is.data.frame(x) && nm %in% names(x)) v <- max(x[[nm]])
    if (!is.null(v)) return(v)
  }
  NULL
}

run_scalar <- function(v, na) {
  if (is.null(v) || length(v) == 0L) return(na)
  v <- v[[1L]]
  storage.mode(v) <- storage.mode(na)
  v
}

# The hardware a benchmark ran on, for the first line of inst/bench/*.R's
# output: the CPU's model (from /proc/cpuinfo or sysctl) and the GPUs'
# names.  Never the host's name.
benchMachine <- function() {
  cpu <- NA_character_
  if (file.exists("/proc/cpuinfo")) {
    m <- grep("^model name", readLines("/proc/cpuinfo", warn = FALSE), value = TRUE)
    if (length(m)) cpu <- trimws(sub("^[^:]*:", "", m[[1L]]))
  } else if (nzchar(Sys.which("sysctl"))) {
    m <- tryCatch(system2("sysctl", c("-n", "machdep.cpu.brand_string"), stdout = TRUE, stderr = FALSE),
                  error = function(e) character(), warning = function(w) character())
    if (length(m)) cpu <- trimws(m[[1L]])
  }
  g <- gpuInfo()
  gpus <- if (nrow(g)) paste(vapply(split(g$name, g$name), function(n) sprintf("%d x %s", length(n), n[[1L]]), ""),
                             collapse = ", ") else "none"
  sprintf("CPU: %s; GPU: %s", if (is.na(cpu)) "unknown model" else cpu, gpus)
}
