# COSNet's learning step alone, the host's part of every (class, fold) job
# of parCosnet() and cvParCosnet() on either engine (on a GPU it runs on the
# host's threads while the devices sweep, and more GPUs do not shorten it).
# The jobs of the mouse-like CV of inst/bench/cosnet.R (21,151 nodes,
# degree 596, 50-500 positives a class, the first fold held out): each
# job's training points (x: the weight to the training positives, y: to the
# training negatives) are made once, then the step is timed on one thread,
# job after job, in rounds.  Prints the time a job and a digest of the
# learned lines, which two builds must share.
#   COSNET_LEARN_JOBS    jobs (default 100)
#   COSNET_LEARN_ROUNDS  rounds over the jobs, the best one kept (default 5)
#   Rscript inst/bench/cosnet-learn.R
suppressPackageStartupMessages({library(sysbioGPU); library(Matrix)})
jobs <- as.integer(Sys.getenv("COSNET_LEARN_JOBS", "100"))
rounds <- as.integer(Sys.getenv("COSNET_LEARN_ROUNDS", "5"))
nm <- 21151
W <- sysbioGPU:::cosnet_random_network(nm, 596, 3)
set.seed(4)
pts <- lapply(seq_len(jobs), function(k) {
  y <- numeric(nm)
  y[sample.int(nm, sample(50:500, 1))] <- 1
  train <- sample.int(5, nm, replace = TRUE) != 1
  pos <- as.numeric(train & y == 1)
  neg <- as.numeric(train & y == 0)
  list(x = as.numeric(W %*% pos)[train], y = as.numeric(W %*% neg)[train], lab = as.integer(y[train]))
})
learn <- function(p) .Call(sysbioGPU:::ffi_cosnet_learn, p$x, p$y, p$lab, 1L)
best <- Inf
for (r in seq_len(rounds)) {
  t <- system.time(lines <- lapply(pts, learn))[["elapsed"]]
  best <- min(best, t)
}
f <- tempfile()
saveRDS(lines, f)
cat(sprintf("learning step, %d mouse-like jobs (%.0f training points, %.0f positives a job): %.3f ms a job (best of %d rounds), digest of the lines %s\n",
            jobs, mean(vapply(pts, function(p) length(p$x), 0)), mean(vapply(pts, function(p) sum(p$lab), 0)),
            1e3 * best / jobs, rounds, unname(tools::md5sum(f))))
