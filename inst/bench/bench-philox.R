# Throughput of the shared Philox4x32-10 streams: CPU (1 thread, all
# threads), GPU with the package's header, and GPU with cuRAND's own device
# API (the reference). Prints one table; run with
#   Rscript inst/bench/bench-philox.R
suppressPackageStartupMessages(library(sysbioGPU))
rng_fill <- sysbioGPU:::rng_fill

best_of <- function(reps, f) min(vapply(seq_len(reps), function(i) system.time(f())[["elapsed"]], 0))

n <- 4000; streams <- 25000 # 1e8 words, one stream per GPU thread
rows <- list()
add <- function(backend, what, seconds) {
  rows[[length(rows) + 1]] <<- data.frame(backend = backend, draws = what, words = n * streams,
                                          seconds = seconds, Gwords_per_s = n * streams / seconds / 1e9)
}
cpu1 <- resolveBackend("cpu", threads = 1)
cpuN <- resolveBackend("cpu", threads = NULL)
add("cpu x1", "uint32", best_of(2, function() rng_fill("uint32", n, 1, streams = streams, b = cpu1)))
add(sprintf("cpu x%d", cpuN$threads), "uint32",
    best_of(3, function() rng_fill("uint32", n, 1, streams = streams, b = cpuN)))
if (hasGPU()) {
  gpu <- resolveBackend("gpu")
  rng_fill("uint32", 10, 1, b = gpu) # warm-up: context, module load
  add(paste("gpu", gpu$device), "uint32 (philox.h)",
      best_of(5, function() rng_fill("uint32", n, 1, streams = streams, b = gpu)))
  add(paste("gpu", gpu$device), "uint32 (cuRAND)",
      best_of(5, function() rng_fill("curand", n, 1, streams = streams, b = gpu)))
}
tab <- do.call(rbind, rows)
tab$vs_cpu1 <- tab$Gwords_per_s / tab$Gwords_per_s[1]
cat("Philox4x32-10 throughput (includes the copy of the draws, as doubles, to R)\n")
if (hasGPU()) cat("device:", gpuInfo()$name[1], "\n")
print(tab, digits = 3, row.names = FALSE)
