# grnEvolve on several GPUs: where the efficiency goes.  Times the mouse
# eye (64 islands, 1,000 generations, migration every 4 generations and
# none) at each population size of GRN_SPLIT_POPS on each device set of
# GRN_SPLIT_DEVICES (';' between sets), best of two runs.  A device's share
# of a run on k GPUs is a population k times smaller on one GPU: when that
# share alone takes as long as the k-GPU run, the kernels of one device,
# not the devices' coordination, set the limit.
#   GRN_SPLIT_DEVICES="0;0,1;0,1,2,3" GRN_SPLIT_POPS=262144,1048576 Rscript inst/bench/grn-split.R
# GRN_SPLIT_GENERATIONS: generations (default 1000).
suppressPackageStartupMessages(library(sysbioGPU))
if (!hasGPU()) { message("no GPU: nothing to time"); quit(save = "no") }
eye <- grnMouseEye()
env <- function(name, default) { v <- Sys.getenv(name); if (nzchar(v)) v else default }
gens <- as.numeric(env("GRN_SPLIT_GENERATIONS", "1000"))
devs <- lapply(strsplit(strsplit(env("GRN_SPLIT_DEVICES", "0"), ";")[[1]], ","), as.integer)
pops <- as.numeric(strsplit(env("GRN_SPLIT_POPS", "262144,1048576"), ",")[[1]])
run <- function(pop, dev, mig = 4, g = gens)
  grnEvolve(eye$network, eye$from, eye$to, popSize = pop, islands = 64, pLink = 0.05, pRule = 0.05,
            generations = g, seed = 1, migrationInterval = mig, backend = "gpu", device = dev,
            verbose = FALSE)$seconds
for (d in devs) invisible(run(2^16, d, g = 4))   # contexts and allocations, outside the timing
cat(sprintf("grnEvolve, mouse eye, 64 islands, %g generations; %s\n", gens,
            paste(unique(gpuInfo()$name), collapse = ", ")))
rows <- list()
for (pop in pops) for (d in devs) for (mig in c(4, 1e9))
  rows[[length(rows) + 1]] <- data.frame(individuals = pop, devices = paste(d, collapse = ","),
                                         migration = if (mig < 1e9) "every 4" else "none",
                                         seconds = min(run(pop, d, mig), run(pop, d, mig)))
print(do.call(rbind, rows), row.names = FALSE)
