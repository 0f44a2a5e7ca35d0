# One timed lassieSimulate() call for a profiler (Nsight Compute or
# Nsight Systems): a Haugh2b batch, method "auto", output "array", on the
# GPUs of DEV, after a warm-up call of 4 sets; prints its time and the
# engine's.
#
# Usage: ncu --metrics gpu__time_duration.sum,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active \
#          --csv Rscript inst/bench/lassie-profile.R
# Environment: NH (parameter sets, default 20000), DEV (an R expression
# for `device`, default 0).
suppressPackageStartupMessages(library(sysbioGPU))
m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
nh <- as.integer(Sys.getenv("NH", "20000"))
set.seed(7)
K <- t(replicate(nh, m$rates * 2^runif(length(m$rates), -1, 1)))
dev <- eval(parse(text = Sys.getenv("DEV", "0")))
tt <- seq(0, 50, by = 1)
invisible(lassieSimulate(m, tt, rates = K[rep(1, 4), , drop = FALSE], method = "auto", backend = "gpu",
                         device = dev, verbose = FALSE, output = "array"))
t <- system.time(r <- lassieSimulate(m, tt, rates = K, method = "auto", backend = "gpu", device = dev,
                                     verbose = FALSE, output = "array"))
cat(sprintf("Haugh2b %d on %s: %.3f s, engine %.3f s\n", nh, paste(dev, collapse = ","), t[["elapsed"]],
            attr(r, "elapsed")))
