#!/usr/bin/env Rscript
# Coverage of pbnSteadyState()'s accuracy promise: over many
# seeds, how often the two-state estimate lies within r of the exact
# stationary probability (pbnSteadyState(method = "exact"), power iteration
# over all states), and how often its interval [lower, upper] holds it.
# Three networks (the shipped example; a random PBN with several functions
# per node; a monotone network with fixed points, whose slow modes break the
# first-order two-state assumption) at two perturbation probabilities.
# A row fails when the count within r, or the count of intervals holding
# the truth, is significantly below s (one-sided binomial, level 0.01).
#
# Usage: Rscript tools/pbn-coverage.R [--seeds=200] [--r=0.005] [--s=0.95]
#          [--threads=1] [--engine=chains|bits] [--out=FILE.csv]    (make pbn-coverage)
suppressPackageStartupMessages(library(sysbioGPU))

args <- commandArgs(trailingOnly = TRUE)
opt <- function(name, default) {
  hit <- grep(paste0("^--", name, "="), args, value = TRUE)
  if (length(hit)) sub(paste0("^--", name, "="), "", hit[[1L]]) else default
}
n_seeds <- as.integer(opt("seeds", 200))
r <- as.numeric(opt("r", 0.005))
s <- as.numeric(opt("s", 0.95))
threads <- as.integer(opt("threads", 1))
engine <- opt("engine", "chains")
out <- opt("out", "")

random_pbn <- function(n, seed) {
  set.seed(seed)
  nm <- paste0("x", seq_len(n))
  nodes <- lapply(seq_len(n), function(i) {
    nf <- sample.int(2, 1)
    fl <- lapply(seq_len(nf), function(j) {
      k <- sample.int(3, 1)
      list(inputs = sample(nm, k), table = sample(c(TRUE, FALSE), 2^k, replace = TRUE))
    })
    pr <- runif(nf)
    list(functions = fl, probabilities = pr / sum(pr))
  })
  names(nodes) <- nm
  pbn(nodes)
}

monotone_pbn <- function(n, seed) {
  set.seed(seed)
  nm <- paste0("x", seq_len(n))
  nodes <- lapply(seq_len(n), function(i) {
    paste(sample(nm, sample.int(3, 1)), collapse = if (runif(1) < 0.5) " & " else " | ")
  })
  names(nodes) <- nm
  pbn(nodes)
}

nets <- list(
  example = list(net = readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")),
                 sets = list(Apoptosis = c(Apoptosis = TRUE), `Survival&!Death` = c(Survival = TRUE, Death = FALSE))),
  random8 = list(net = random_pbn(8, 3), sets = list(x1 = c(x1 = TRUE), `x2&!x5` = c(x2 = TRUE, x5 = FALSE))),
  monotone10 = list(net = monotone_pbn(10, 3), sets = list(x1 = c(x1 = TRUE), `x2&!x4` = c(x2 = TRUE, x4 = FALSE)))
)
ps <- c(0.01, 0.1)

rows <- list()
t_start <- proc.time()[["elapsed"]]
for (nn in names(nets)) {
  for (p in ps) {
    x <- nets[[nn]]
    ex <- pbnSteadyState(x$net, x$sets, p = p, method = "exact", backend = "cpu", verbose = FALSE)
    runs <- lapply(seq_len(n_seeds), function(sd) {
      pbnSteadyState(x$net, x$sets, p = p, r = r, s = s, seed = sd, backend = "cpu", threads = threads,
                     engine = engine, verbose = FALSE)
    })
    for (j in seq_along(x$sets)) {
      est <- vapply(runs, function(z) z$probability[[j]], 0)
      lo <- vapply(runs, function(z) z$lower[[j]], 0)
      hi <- vapply(runs, function(z) z$upper[[j]], 0)
      conv <- vapply(runs, function(z) z$converged[[j]], TRUE)
      smp <- vapply(runs, function(z) z$samples[[j]], 0)
      truth <- ex$probability[[j]]
      k <- sum(abs(est - truth) <= r)
      rows[[length(rows) + 1L]] <- data.frame(
        network = nn, p = p, set = names(x$sets)[[j]], exact = truth, seeds = n_seeds,
        within_r = k / n_seeds, interval = mean(lo <= truth & truth <= hi),
        max_err_over_r = max(abs(est - truth)) / r, converged = mean(conv),
        mean_samples = mean(smp),
        ok = stats::pbinom(k, n_seeds, s) > 0.01 && stats::pbinom(sum(lo <= truth & truth <= hi), n_seeds, s) > 0.01,
        stringsAsFactors = FALSE)
    }
    cat(sprintf("%s p = %g done (%.0f s)\n", nn, p, proc.time()[["elapsed"]] - t_start))
  }
}
tab <- do.call(rbind, rows)
cat(sprintf("\npbnSteadyState coverage: r = %g, s = %g, %d seeds per row, CPU, %d thread(s), engine %s\n",
            r, s, n_seeds, threads, engine))
print(format(tab, digits = 4), row.names = FALSE)
if (nzchar(out)) utils::write.csv(tab, out, row.names = FALSE)
if (!all(tab$ok)) {
  cat("FAILED: coverage significantly below s in", sum(!tab$ok), "row(s)\n")
  quit(status = 1)
}
cat("all rows: coverage within r and of the intervals not significantly below s\n")
