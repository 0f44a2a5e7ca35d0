# Implicit steps on the GPU (issue 17, point 2): stiff batches with the
# device's BDF against the host's BDF behind the same GPU engine (the state
# before issue 17, SYSBIOGPU_LASSIE_DEVICE_BDF=0) and against the CPU
# engine on all threads, the results checked bit for bit against the CPU's.
# Seconds from the R call, best of LASSIE_BDF_REPS (default 2) runs.
#
# Usage: Rscript inst/bench/lassie-bdf.R
# Environment: LASSIE_CHEN_BATCH (Chen 2009 ErbB parameter sets, default
# 1000, method "bdf" as in lassie.R), LASSIE_BATCH (Haugh2b parameter sets,
# default 20000, method "auto"), LASSIE_THREADS (CPU engine's threads,
# default all processors), LASSIE_BDF_CPU=0 skips the CPU engine (then the
# check is against the host's BDF within 1e-9 only).
suppressPackageStartupMessages(library(sysbioGPU))
env_num <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) as.numeric(x) else d }
n_chen <- env_num("LASSIE_CHEN_BATCH", 1000)
n_haugh <- env_num("LASSIE_BATCH", 20000)
reps <- env_num("LASSIE_BDF_REPS", 2)
threads <- as.integer(env_num("LASSIE_THREADS", parallel::detectCores()))
run_cpu <- Sys.getenv("LASSIE_BDF_CPU", "1") != "0"
if (!hasGPU()) { cat("lassie-bdf: no GPU, nothing to time\n"); quit(save = "no") }
cat(sprintf("lassieSimulate implicit steps on the GPU, %s; %s; GPU %s; CPU engine on %d threads\n",
            format(Sys.time(), "%Y-%m-%d %H:%M %Z"), Sys.info()[["nodename"]], gpuInfo()$name[1], threads))
best <- function(f) {
  s <- Inf; v <- NULL
  for (i in seq_len(reps)) { t0 <- proc.time()[["elapsed"]]; v <- f(); s <- min(s, proc.time()[["elapsed"]] - t0) }
  list(v = v, s = s)
}
with_env <- function(var, val, f) {
  old <- Sys.getenv(var, unset = NA)
  do.call(Sys.setenv, stats::setNames(list(val), var))
  on.exit(if (is.na(old)) Sys.unsetenv(var) else do.call(Sys.setenv, stats::setNames(list(old), var)))
  f()
}
core <- function(b) lapply(b, function(o) list(unclass(o)[, ], attr(o, "stats")))
max_rel <- function(a, b) max(mapply(function(x, y) max(abs(x[, -1] - y[, -1]) / pmax(abs(y[, -1]), 1e-300)), a, b))
rows <- list()
work <- function(label, m, tt, K, method) {
  sim <- function(backend, ...) lassieSimulate(m, tt, rates = K, method = method, backend = backend,
                                               verbose = FALSE, ...)
  dev <- best(function() sim("gpu"))
  host <- best(function() with_env("SYSBIOGPU_LASSIE_DEVICE_BDF", "0", function() sim("gpu")))
  cpu <- if (run_cpu) best(function() sim("cpu", threads = threads)) else NULL
  st <- vapply(dev$v, function(o) attr(o, "stats")[["implicitSteps"]], 0)
  rows[[length(rows) + 1]] <<- data.frame(
    workload = label, sets = nrow(K), implicit_steps = sum(st), gpu_device_bdf = dev$s,
    gpu_host_bdf = host$s, cpu = if (is.null(cpu)) NA else cpu$s,
    speedup_vs_host_bdf = host$s / dev$s,
    identical_to_cpu = if (is.null(cpu)) NA else identical(core(dev$v), core(cpu$v)),
    rel_vs_host_bdf = max_rel(dev$v, host$v))
}
invisible(lassieSimulate(robertson <- reactionModel(rbind(c(1, 0, 0), c(0, 2, 0), c(0, 1, 1)),
                                                  rbind(c(0, 1, 0), c(0, 1, 1), c(1, 0, 1)),
                                                  rates = c(0.04, 3e7, 1e4), initial = c(1, 0, 0)),
                         c(0, 40), backend = "gpu", verbose = FALSE))   # warm-up
if (sbmlAvailable() && n_chen > 0) {
  m <- readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU"))
  set.seed(11)
  K <- t(replicate(n_chen, m$rates * 2^runif(length(m$rates), -1, 1)))
  work("Chen 2009 ErbB (bdf), t 0-3600", m, seq(0, 3600, by = 60), K, "bdf")
}
if (n_haugh > 0) {
  m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
  set.seed(7)
  K <- t(replicate(n_haugh, m$rates * 2^runif(length(m$rates), -1, 1)))
  work("Haugh2b (auto), t 0-50", m, seq(0, 50, by = 1), K, "auto")
}
tab <- do.call(rbind, rows)
cat("\n(seconds from the R call, best of", reps, "runs; rtol 1e-6, atol 1e-12; gpu_host_bdf: the",
    "GPU engine with the implicit steps on the host, as before issue 17)\n")
print(format(tab, digits = 3), row.names = FALSE)
out <- Sys.getenv("OUT")
if (nzchar(out)) utils::write.csv(tab, file.path(out, "bench-lassie-bdf.csv"), row.names = FALSE)
