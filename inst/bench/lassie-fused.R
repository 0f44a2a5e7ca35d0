# The GPU's explicit steps: k_explicit, a block per simulation
# running whole steps with its state, stages and rates in shared memory,
# against the kernels per stage (options(sysbioGPU.lassieFused = FALSE)), in the same
# process on the same batches; the results must be identical.  Seconds from
# the R call and the engine call's share (info$seconds), best of
# LASSIE_FUSED_REPS (default 3).
#
# Usage: Rscript inst/bench/lassie-fused.R
# Environment: LASSIE_FUSED_N (synthetic sizes, default 128,512,1024,2048),
# LASSIE_FUSED_BATCH (their parameter sets, default 4096), LASSIE_BATCH
# (Haugh2b parameter sets, default 20000).
suppressPackageStartupMessages(library(sysbioGPU))
env_num <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) as.numeric(strsplit(x, ",")[[1]]) else d }
if (!hasGPU()) { cat("lassie-fused: no GPU, nothing to time\n"); quit(save = "no") }
reps <- env_num("LASSIE_FUSED_REPS", 3)
sizes <- env_num("LASSIE_FUSED_N", c(128, 512, 1024, 2048))
n_syn <- env_num("LASSIE_FUSED_BATCH", 4096)
n_haugh <- env_num("LASSIE_BATCH", 20000)
# the synthetic networks of inst/bench/lassie.R (its generator, read from there)
f <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- if (length(f)) dirname(f[1]) else system.file("bench", package = "sysbioGPU")
ex <- parse(file.path(here, "lassie.R"))
eval(ex[[which(vapply(ex, function(e) length(e) == 3L && identical(e[[2L]], quote(synthetic)), TRUE))]])
cat(sprintf("lassieSimulate explicit steps on the GPU, %s\n", sysbioGPU:::benchMachine()))
# mode: the option sysbioGPU.lassieFused (NULL: the engine's choice)
mode_run <- function(mode, f) {
  old <- options(sysbioGPU.lassieFused = mode)
  on.exit(options(old))
  s <- Inf; e <- Inf; v <- NULL
  for (i in seq_len(reps)) {
    t0 <- proc.time()[["elapsed"]]; v <- f(); s <- min(s, proc.time()[["elapsed"]] - t0)
    e <- min(e, attr(v, "info")$seconds)
  }
  list(v = v, s = s, e = e)
}
core <- function(b) lapply(b, function(o) list(unclass(o)[, ], attr(o, "stats")))
rows <- list()
work <- function(label, m, tt, K, method) {
  sim <- function() lassieSimulate(m, tt, rates = K, method = method, backend = "gpu", verbose = FALSE)
  invisible(sim())   # the context and the first launches, outside the timing
  per_stage <- mode_run(FALSE, sim); fused <- mode_run(TRUE, sim); dflt <- mode_run(NULL, sim)
  rows[[length(rows) + 1L]] <<- data.frame(
    workload = label, sets = nrow(K), species = length(m$species),
    per_stage_s = per_stage$s, fused_s = fused$s, engine_per_stage = per_stage$e, engine_fused = fused$e,
    engine_ratio = round(fused$e / per_stage$e, 2), default_s = dflt$s,
    identical = identical(core(fused$v), core(per_stage$v)) && identical(core(dflt$v), core(per_stage$v)))
  print(rows[[length(rows)]], row.names = FALSE)
}
m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
set.seed(7)
Kh <- t(replicate(n_haugh, m$rates * 2^runif(length(m$rates), -1, 1)))
for (meth in c("dopri5", "auto")) work(sprintf("Haugh2b (%s), t 0-50", meth), m, seq(0, 50, by = 1), Kh, meth)
for (n in sizes) {
  ms <- synthetic(n, seed = n)
  set.seed(13)
  Ks <- t(replicate(n_syn, ms$rates * 2^runif(length(ms$rates), -1, 1)))
  work(sprintf("synthetic %d (auto), t 0-50", n), ms, c(0, 25, 50), Ks, "auto")
}
cat("\n(seconds from the R call, best of", reps, "runs; engine_*: the engine call's share; per stage: option sysbioGPU.lassieFused = FALSE, fused: TRUE, default: k_explicit where 2 blocks fit a multiprocessor; identical: values and stats of every simulation)\n")
print(do.call(rbind, rows), row.names = FALSE)
