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

# How a method shares `n` units among the R workers of BPPARAM: at most one
# worker per unit, contiguous blocks as even as can be (worker w takes the
# units cuts[w] + 1 .. cuts[w + 1]), and each worker's GPU of `devices`,
# round robin (with `several`, and more devices than workers, every
# nw-th device from the w-th).
bp_split <- function(BPPARAM, n, devices, several = FALSE) {
  nw <- as.integer(min(BiocParallel::bpnworkers(BPPARAM), n))
  nd <- length(devices)
  devs <- lapply(seq_len(nw), function(w) {
    if (several && nd > nw) devices[seq(w, nd, by = nw)] else devices[[(w - 1L) %% nd + 1L]]
  })
  list(n = nw, cuts = floor(n * (0:nw) / nw), devices = devs)
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
