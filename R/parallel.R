# BPPARAM (BiocParallel, in Suggests): the checks shared by the methods that
# split their work over R workers.

# NULL, or a BiocParallelParam with BiocParallel installed.
check_bpparam <- function(BPPARAM) {
  if (is.null(BPPARAM)) return(invisible(NULL))
  if (!requireNamespace("BiocParallel", quietly = TRUE)) {
    stop_input("`BPPARAM` needs the BiocParallel package (Bioconductor; Debian: r-bioc-biocparallel)")
  }
  if (!methods::is(BPPARAM, "BiocParallelParam")) {
    stop_input("`BPPARAM` must be a BiocParallel back-end such as MulticoreParam(4), not ",
               class(BPPARAM)[[1L]])
  }
  invisible(BPPARAM)
}

# CPU threads of each worker when the call gives none: the processors
# shared out among the workers; one for forked workers (MulticoreParam),
# which the engines run on one thread anyway (src/core/threads.c: GNU
# OpenMP hangs in a child forked after the parent ran a parallel region).
bp_threads <- function(BPPARAM) {
  if (methods::is(BPPARAM, "MulticoreParam")) return(1L)
  max(1L, threads_available() %/% BiocParallel::bpnworkers(BPPARAM))
}

# A forked child cannot use CUDA once its parent has (CUDA is not
# fork-safe, and resolving the backend opened it): GPU work needs workers
# that are processes of their own.
check_bpparam_gpu <- function(BPPARAM, b) {
  if (!is.null(BPPARAM) && b$backend == "gpu" && methods::is(BPPARAM, "MulticoreParam")) {
    stop_input("`BPPARAM` is a MulticoreParam, whose forked workers cannot use the GPU this process has open: ",
               "use SnowParam() or BatchtoolsParam() for GPU workers, or backend = \"cpu\"")
  }
  invisible(b)
}
