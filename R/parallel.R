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
# `ranges` gives each worker's units as c(first, end), 0-based, end
# excluded.
bp_split <- function(BPPARAM, n, devices, several = FALSE) {
  nw <- bp_nworkers(BPPARAM, n)
  nd <- length(devices)
  devs <- lapply(seq_len(nw), function(w) {
    if (several && nd > nw) devices[seq(w, nd, by = nw)] else devices[[(w - 1L) %% nd + 1L]]
  })
  cuts <- floor(n * (0:nw) / nw)
  list(n = nw, cuts = cuts, devices = devs, ranges = lapply(seq_len(nw), function(w) c(cuts[[w]], cuts[[w + 1L]])))
}

# R workers for `n` units (at most one per unit; 1 without BPPARAM).
bp_nworkers <- function(BPPARAM, n) {
  if (is.null(BPPARAM)) 1L else as.integer(min(BiocParallel::bpnworkers(BPPARAM), n))
}

# Every method's map over its workers: fun(share_1[[w]], share_2[[w]], ...,
# <MoreArgs>) on worker w, results in worker order.
bp_map <- function(BPPARAM, fun, ..., MoreArgs = NULL) {
  BiocParallel::bpmapply(fun, ..., MoreArgs = MoreArgs, BPPARAM = BPPARAM, SIMPLIFY = FALSE, USE.NAMES = FALSE)
}

# The round driver of the methods that run in rounds (pbnSteadyState and
# grnEvolve over BPPARAM; grnEvolve's long runs in this process with
# BPPARAM NULL): `n` units in one block per worker (its range and device,
# as bp_split()), each worker's state kept from one round to the next.
# round(fun, ..., MoreArgs) runs fun(range, device, state, ...,
# <MoreArgs>) on every worker (state NULL in the first round) and keeps
# each result's $state for the next; the results in worker order.
bp_rounds <- function(BPPARAM, n, devices) {
  sp <- if (is.null(BPPARAM)) list(n = 1L, ranges = list(c(0, n)), devices = list(devices[[1L]]))
        else bp_split(BPPARAM, n, devices)
  map <- if (is.null(BPPARAM)) {
    function(f, ..., MoreArgs) mapply(f, ..., MoreArgs = MoreArgs, SIMPLIFY = FALSE, USE.NAMES = FALSE)
  } else {
    function(f, ..., MoreArgs) bp_map(BPPARAM, f, ..., MoreArgs = MoreArgs)
  }
  states <- vector("list", sp$n)
  round <- function(fun, ..., MoreArgs = NULL) {
    r <- map(fun, sp$ranges, sp$devices, states, ..., MoreArgs = MoreArgs)
    states <<- lapply(r, `[[`, "state")
    r
  }
  # BiocParallel starts the workers of a back-end that is not up for every
  # call and stops them after it (seconds for SnowParam): the rounds share
  # one start, and the caller's close() stops only what this one started.
  started <- FALSE
  if (!is.null(BPPARAM) && !BiocParallel::bpisup(BPPARAM)) {
    BiocParallel::bpstart(BPPARAM)
    started <- TRUE
  }
  close <- function() {
    if (started) {
      started <<- FALSE
      BiocParallel::bpstop(BPPARAM)
    }
    invisible(NULL)
  }
  list(n = sp$n, ranges = sp$ranges, devices = sp$devices, round = round, close = close)
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
