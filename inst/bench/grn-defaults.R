# grnEvolve's default mutation rates: for a few
# candidate settings, the share of seeds whose CPU run reaches the mouse eye
# optimum (6 changed links, no gene off the goal) within a time limit, with
# the seconds and generations each run took.  Generations do not depend on
# the machine's load; wall seconds do (the load average is printed before
# and after each run).  The CPU seconds of the process divided by the threads
# (cpu/thr) is about what the run takes on an unloaded machine: a run
# counts as reaching the optimum within the limit when it did so within
# GRN_DEFAULTS_LIMIT seconds of wall time (column wall) or of CPU time per
# thread (column cpu); runs stop at GRN_DEFAULTS_WALL seconds of wall time
# (default 2 x the limit), so that a loaded machine does not cut them.
#   Rscript inst/bench/grn-defaults.R
# Environment: GRN_DEFAULTS_SEEDS (seeds per candidate, default 8),
# GRN_DEFAULTS_LIMIT (seconds, default 60), GRN_DEFAULTS_WALL (wall seconds
# after which a run stops, default 2 x the limit), GRN_DEFAULTS_THREADS
# (default 2), GRN_DEFAULTS_CANDIDATES (e.g. "4096:0.01,4096:0.05": popSize
# and pLink = pRule; default the five below), GRN_DEFAULTS_CSV (a file for
# the per-run rows).
suppressPackageStartupMessages(library(sysbioGPU))
options(width = 200)
env_num <- function(name, default) {
  v <- Sys.getenv(name)
  if (nzchar(v)) as.numeric(v) else default
}
load_avg <- function() {
  if (file.exists("/proc/loadavg")) strsplit(readLines("/proc/loadavg"), " ")[[1]][1:3] else NA
}
seeds <- seq_len(env_num("GRN_DEFAULTS_SEEDS", 8))
limit <- env_num("GRN_DEFAULTS_LIMIT", 60)
wall <- env_num("GRN_DEFAULTS_WALL", 2 * limit)
threads <- env_num("GRN_DEFAULTS_THREADS", 2)
spec <- Sys.getenv("GRN_DEFAULTS_CANDIDATES", "4096:0.05,4096:0.02,4096:0.1,4096:0.01,4096:0.2")
cand <- do.call(rbind, lapply(strsplit(strsplit(spec, ",")[[1]], ":"), function(s) as.numeric(s)))
colnames(cand) <- c("popSize", "rate")

eye <- grnMouseEye()
fstar <- 0.1 * 6 / 32^2 # the optimum: 6 links changed, dn = 0
cat(sprintf("grnEvolve defaults on the mouse eye network, %s, %d thread(s), limit %g s (runs stop at %g s wall), %d seeds; load average %s\n",
            sysbioGPU:::benchMachine(), threads, limit, wall, length(seeds),
            paste(load_avg(), collapse = " ")))
runs <- list()
for (k in seq_len(nrow(cand))) {
  for (s in seeds) {
    t0 <- proc.time()
    f <- grnEvolve(eye$network, eye$from, eye$to, popSize = cand[k, "popSize"],
                   pLink = cand[k, "rate"], pRule = cand[k, "rate"], target = fstar,
                   timeLimit = wall, seed = s, backend = "cpu", threads = threads, verbose = FALSE)
    cpu <- sum((proc.time() - t0)[c("user.self", "sys.self")]) / threads
    runs[[length(runs) + 1L]] <- data.frame(
      popSize = cand[k, "popSize"], rate = cand[k, "rate"], seed = s,
      reached = f$stopReason == "target", dl = f$dl, dn = f$dn,
      generations = f$generations, seconds = round(f$seconds, 1), cpuPerThread = round(cpu, 1),
      load1 = as.numeric(load_avg()[1]))
    cat(sprintf("  popSize %5d, pLink = pRule = %-5g seed %2d: %-9s dl %2d dn %d, %6d generations, %5.1f s (cpu/thr %5.1f s, load %s)\n",
                cand[k, "popSize"], cand[k, "rate"], s, f$stopReason, f$dl, f$dn, f$generations,
                f$seconds, cpu, load_avg()[1]))
  }
}
runs <- do.call(rbind, runs)
csv <- Sys.getenv("GRN_DEFAULTS_CSV")
if (nzchar(csv)) utils::write.csv(runs, csv, row.names = FALSE)
tab <- do.call(rbind, lapply(split(runs, list(runs$popSize, runs$rate), drop = TRUE), function(r) {
  ok <- r$reached
  data.frame(popSize = r$popSize[1], pLink.pRule = r$rate[1],
             wall = sprintf("%d/%d", sum(ok & r$seconds <= limit), nrow(r)),
             cpu = sprintf("%d/%d", sum(ok & r$cpuPerThread <= limit), nrow(r)),
             reached = sprintf("%d/%d", sum(ok), nrow(r)),
             medianSeconds = if (any(ok)) stats::median(r$seconds[ok]) else NA,
             medianCpuPerThread = if (any(ok)) stats::median(r$cpuPerThread[ok]) else NA,
             medianGenerations = if (any(ok)) stats::median(r$generations[ok]) else NA,
             maxGenerations = if (any(ok)) max(r$generations[ok]) else NA,
             worstDl = if (all(ok)) NA else max(r$dl[!ok]))
}))
cat(sprintf("\nReached the optimum (6 links) within %g s of wall time (wall) or of CPU time per thread (cpu), or at all within %g s of wall time (reached); seconds and generations over the runs that reached it; worstDl: the most links changed by a run that did not (load average at the end %s)\n",
            limit, wall, paste(load_avg(), collapse = " ")))
print(tab, row.names = FALSE)
