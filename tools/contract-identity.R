# The run contract (data, params, run): the results of every method whose R-to-C
# plumbing changed, saved so that two builds (before and after a change of
# the plumbing) can be compared with identical().  R_LIBS picks the build:
#   R_LIBS=<lib> Rscript tools/contract-identity.R save out.rds [cpu|gpu]
#   Rscript tools/contract-identity.R compare before.rds after.rds
# (compare exits with status 1 when a result differs).
args <- commandArgs(TRUE)
if (identical(args[1], "compare")) {
  a <- readRDS(args[2])
  b <- readRDS(args[3])
  ok <- vapply(names(a), function(nm) identical(a[[nm]], b[[nm]]), NA)
  print(ok)
  quit(status = if (all(ok)) 0 else 1)
}
stopifnot(identical(args[1], "save"), length(args) >= 2)
backend <- if (length(args) >= 3) args[3] else "cpu"
suppressMessages(library(sysbioGPU))
bp <- if (requireNamespace("BiocParallel", quietly = TRUE)) BiocParallel::SerialParam() else NULL
# the run's timing is the one part that may differ
untimed <- function(x) {
  x <- as.data.frame(x)
  x$seconds <- NULL
  x
}
# a list result less its timing and call
untimed_list <- function(x) {
  x <- unclass(x)
  x[setdiff(names(x), c("seconds", "call"))]
}
out <- list()

net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
pbn_run <- function(...) pbnSteadyState(net, p = 0.01, r = 0.01, seed = 3, backend = backend, verbose = FALSE, ...)
out$pbn <- untimed(pbn_run(threads = 2))
out$pbnExact <- attr(pbnSteadyState(net, p = 0.01, method = "exact", backend = backend, threads = 2,
                                    verbose = FALSE), "stationary")
out$pbnSimulate <- pbnSimulate(net, 20, trajectories = 3, seed = 4, backend = backend, threads = 1)
if (!is.null(bp)) out$pbnWorkers <- untimed(pbn_run(threads = 1, BPPARAM = bp))

set.seed(1)
n <- 200
W <- Matrix::rsparsematrix(n, n, density = 0.05, symmetric = TRUE, rand.x = function(k) runif(k))
Matrix::diag(W) <- 0
W <- Matrix::drop0(W)
lab <- matrix(rbinom(n * 3, 1, 0.2), n)
lab[sample(n * 3, 150)] <- NA
out$cosnet <- untimed_list(parCosnet(W, lab, seed = 2, backend = backend, threads = 2, verbose = FALSE))
out$cvCosnet <- untimed_list(cvParCosnet(W, lab, nfolds = 3, seed = 2, backend = backend, threads = 2,
                                         verbose = FALSE))

eye <- grnMouseEye()
grn_run <- function(...) {
  untimed_list(grnEvolve(eye$network, eye$from, eye$to, popSize = 256, islands = 2, generations = 50, seed = 1, pLink = 0.001, pRule = 0.001,
                         backend = backend, threads = 1, ...))
}
out$grn <- grn_run()
if (!is.null(bp)) out$grnWorkers <- grn_run(BPPARAM = bp)

set.seed(1)
x <- matrix(rnorm(2000 * 10), 2000, dimnames = list(paste0("g", 1:2000), NULL))
x[1:40, 1:5] <- x[1:40, 1:5] + 1.5
sets <- list(up = paste0("g", 1:40), random = paste0("g", sample(2000, 40)))
cls <- rep(c("A", "B"), each = 5)
gsea_run <- function(...) untimed(rapidGSEA(x, cls, sets, nperm = 200, seed = 1, backend = backend, ...))
out$gsea <- gsea_run(threads = 2)
out$gseaGene <- gsea_run(threads = 2, permutation = "gene")
if (!is.null(bp)) out$gseaWorkers <- gsea_run(threads = 1, BPPARAM = bp)
out$gseaStats <- gseaStats(c(a = 0.6, b = -0.5, c = 0.2), matrix(seq(-0.5, 0.5, length.out = 3000), 3))

saveRDS(out, args[2])
cat("saved", names(out), "\n")
