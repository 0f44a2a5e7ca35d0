# The device's implicit steps of a small model by team size: Haugh2b (12
# species) batches, method "auto", on GPU 0 and on GPUs 0 and 1, for each
# number of threads a simulation (option sysbioGPU.lassieBdfTeam, 1 to 32;
# 0: the option unset, the package's choice, which for fewer than 32
# species sizes the teams launch by launch), with the results checked
# identical to the first team size's on one GPU.  Seconds from the
# R call and the engine's, best of 3 after a warm-up call on each device
# set; efficiency = one GPU's time / (2 x two GPUs' time).
#
# Usage: Rscript inst/bench/lassie-teams.R
# Environment: NH (parameter sets, comma-separated; default 20000), TEAMS
# (team sizes; default "0,1,2,4,8"), TAG (a label for the lines printed).
suppressPackageStartupMessages(library(sysbioGPU))
m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
tag <- Sys.getenv("TAG", "")
tt <- seq(0, 50, by = 1)
for (nh in as.integer(strsplit(Sys.getenv("NH", "20000"), ",")[[1]])) {
  set.seed(7)
  K <- t(replicate(nh, m$rates * 2^runif(length(m$rates), -1, 1)))
  ref <- NULL
  for (team in as.integer(strsplit(Sys.getenv("TEAMS", "0,1,2,4,8"), ",")[[1]])) {
    options(sysbioGPU.lassieBdfTeam = if (team > 0) team)
    res <- list()
    for (dev in list(0L, c(0L, 1L))) {
      run <- function(K) lassieSimulate(m, tt, rates = K, method = "auto", backend = "gpu", device = dev,
                                        verbose = FALSE, output = "array")
      invisible(run(K[rep(1, 4), , drop = FALSE]))
      w <- e <- Inf
      for (r in 1:3) {
        t <- system.time(x <- run(K))
        w <- min(w, t[["elapsed"]]); e <- min(e, attr(x, "elapsed"))
      }
      core <- list(unclass(x)[, , ], attr(x, "stats"))
      if (is.null(ref)) ref <- core
      res[[length(res) + 1]] <- c(w, e, identical(core, ref))
    }
    cat(sprintf("%s Haugh2b %d team %4s: 1 GPU %.3f s (engine %.3f), 2 GPUs %.3f s (%.3f), efficiency %.2f (engine %.2f), identical %s\n",
                tag, nh, if (team > 0) team else "auto", res[[1]][1], res[[1]][2], res[[2]][1], res[[2]][2], res[[1]][1] / res[[2]][1] / 2,
                res[[1]][2] / res[[2]][2] / 2, all(c(res[[1]][3], res[[2]][3]) == 1)))
  }
}
options(sysbioGPU.lassieBdfTeam = NULL)
