# pbnSteadyState on one and two GPUs: the random 100-node network
# (2^18 and 2^20 trajectories) and the 7-set T-LGL analysis at r = 5e-6.
#   PBN_DATA=<folder with bbm025.bnet> Rscript inst/bench/pbn-scale.R   (needs 2 GPUs)
# PBN_DATA as in inst/bench/pbn.R (the T-LGL model is not shipped).
# PBN_SCALE_DEVICES: the device sets, ";" between them (default "0;0,1").
# PBN_SCALE=bpparam: one process on GPU 0 vs BPPARAM = SnowParam(2), a
# worker per GPU (the states travel with every round), seconds and efficiency.
suppressMessages(library(sysbioGPU))
if (nrow(gpuInfo()) < 2) {
  cat("pbn-scale.R: needs 2 GPUs; this machine has", nrow(gpuInfo()), "\n")
  quit(save = "no")
}
src <- readLines("inst/bench/pbn.R")
eval(parse(text = src[grep("^random_pbn <- function", src):(grep("^throughput <- function", src) - 1)]))
net <- random_pbn(100, "2.7", 100)
pbn_data <- Sys.getenv("PBN_DATA")
if (!nzchar(pbn_data) || !file.exists(file.path(pbn_data, "bbm025.bnet"))) {
  cat("pbn-scale.R: set PBN_DATA to a folder holding bbm025.bnet (see the head of inst/bench/pbn.R)\n")
  quit(save = "no", status = 1)
}
tlgl <- readPBN(file.path(pbn_data, "bbm025.bnet"))
sets <- list(Apoptosis = c(v_Apoptosis = TRUE), S1P = c(v_S1P = TRUE), Ceramide = c(v_Ceramide = TRUE),
             "Caspase,!FLIP" = c(v_Caspase = TRUE, v_FLIP = FALSE), "DISC,FasT" = c(v_DISC = TRUE, v_FasT = TRUE),
             "!Apoptosis,NFKB" = c(v_Apoptosis = FALSE, v_NFKB = TRUE), "BID,!MCL1" = c(v_BID = TRUE, v_MCL1 = FALSE))
if (Sys.getenv("PBN_SCALE") == "bpparam") {
  snow <- BiocParallel::SnowParam(2)
  BiocParallel::bpstart(snow)
  cols <- c("probability", "N", "M", "alpha", "beta", "samples", "rhat", "steps")
  run <- function(name, f) {
    one <- f(list(device = 0L))
    two <- f(list(device = c(0L, 1L), BPPARAM = snow))
    s1 <- one$seconds[[1]]; s2 <- two$seconds[[1]]
    cat(sprintf("%s: one process %.2f s, SnowParam(2) GPU workers %.2f s, speed-up %.2f, efficiency %.2f, identical %s\n",
                name, s1, s2, s1 / s2, s1 / s2 / 2, identical(one[cols], two[cols])))
  }
  run("random-100 2^20 traj 8e9 steps", function(a) suppressWarnings(do.call(pbnSteadyState, c(list(
    net, setNames(TRUE, net$nodes[[1]]), p = 0.001, r = 1e-9, trajectories = 2^20, maxSteps = 8e9, reduce = FALSE,
    seed = 1, backend = "gpu", verbose = FALSE), a))))
  run("T-LGL 7 sets r 5e-6", function(a) suppressWarnings(do.call(pbnSteadyState, c(list(
    tlgl, sets, p = 0.001, r = 5e-6, s = 0.95, seed = 1, backend = "gpu", maxSteps = 4e11, verbose = FALSE), a))))
  BiocParallel::bpstop(snow)
  quit(save = "no")
}
dev_sets <- lapply(strsplit(Sys.getenv("PBN_SCALE_DEVICES", "0;0,1"), ";")[[1]], function(d) as.integer(strsplit(d, ",")[[1]]))
for (dev in dev_sets) {
  for (traj in c(2^18, 2^20)) {
    x <- suppressWarnings(pbnSteadyState(net, setNames(TRUE, net$nodes[[1]]), p = 0.001, r = 1e-9, trajectories = traj,
                                         maxSteps = 2e9 * (traj / 2^18), reduce = FALSE, seed = 1, backend = "gpu",
                                         device = dev, verbose = FALSE))
    cat(sprintf("random-100 GPUs %s traj %d: %.3g steps/s (%.2f s)\n", paste(dev, collapse = ","), traj, x$steps / x$seconds, x$seconds))
  }
  t0 <- proc.time()[["elapsed"]]
  res <- suppressWarnings(pbnSteadyState(tlgl, sets, p = 0.001, r = 5e-6, s = 0.95, seed = 1, backend = "gpu",
                                         device = dev, maxSteps = 4e11, verbose = FALSE))
  el <- proc.time()[["elapsed"]] - t0
  cat(sprintf("T-LGL 7 sets r 5e-6 GPUs %s: %.2f s, %.3g steps, all converged %s, Apoptosis %.6f\n",
              paste(dev, collapse = ","), el, res$steps[[1]], all(res$converged), res$probability[[1]]))
}
