# Benchmark of pbnSteadyState(): throughput in PBN steps per
# second on random PBNs of the paper's Table 2 classes and on the T-LGL
# networks, the T-LGL steady-state analysis at r = 5e-6, and beyond the
# paper (10,000 nodes, bbm243).  Run: Rscript inst/bench/pbn.R
# Environment: PBN_BENCH_QUICK=1 shortens everything; PBN_NETS (a regular
# expression) keeps the networks whose names match; PBN_DATA points at a
# folder of the biodivine collection's models 014, 025 and 243 saved as
# bbm014.bnet, bbm025.bnet and bbm243.bnet
# (https://github.com/sybila/biodivine-boolean-models).  Those files are not
# shipped (the collection has no licence file): without PBN_DATA their rows
# are skipped.
suppressPackageStartupMessages(library(sysbioGPU))

quick <- Sys.getenv("PBN_BENCH_QUICK") == "1"
data_dir <- Sys.getenv("PBN_DATA")
if (!nzchar(data_dir))
  message("PBN_DATA is not set: the T-LGL and bbm243 rows are skipped (see the head of inst/bench/pbn.R)")
gpu <- hasGPU()
ncores <- resolveBackend("cpu")$threads

# Random independent PBN: nodes draw 1..length(fprob) functions with
# probabilities fprob, each function 1..kmax distinct random inputs and a
# random truth table.  Class "2.7": fprob (0.65, 0.35), kmax 3; class "7.1":
# fprob (0.2, 0.25, 0.55), kmax 5 (the paper's densities D).
random_pbn <- function(n, cls, seed) {
  set.seed(seed)
  fprob <- if (cls == "2.7") c(0.65, 0.35) else c(0.2, 0.25, 0.55)
  kmax <- if (cls == "2.7") 3 else 5
  nm <- paste0("x", seq_len(n))
  nodes <- lapply(seq_len(n), function(i) {
    nf <- sample.int(length(fprob), 1, prob = fprob)
    fl <- lapply(seq_len(nf), function(j) {
      k <- sample.int(kmax, 1)
      list(inputs = sample(nm, k), table = sample(c(TRUE, FALSE), 2^k, replace = TRUE))
    })
    pr <- runif(nf) + 0.2
    list(functions = fl, probabilities = pr / sum(pr))
  })
  names(nodes) <- nm
  pbn(nodes)
}

# Throughput: a run that cannot reach its accuracy simulates exactly
# maxSteps steps (R-hat and two-state counting included); all nodes are
# simulated (reduce = FALSE).  With n nodes a step is a perturbation-only
# step with probability 1 - (1 - p)^n, so the 10,000-node network runs at
# p = 1e-5 (else 99.995% of its steps would only flip bits).
# Networks whose nodes have one function each (the T-LGL and BBM ones) take
# the steps at a fixed point up to the next perturbation at once: their
# steps per second count those steps (they are simulated exactly, with the
# same result as stepping; pbnSteadyState's documentation, Dynamics).
# The CPU runs 64 trajectories per thread (their states stay in cache), the
# GPU the default count (2^18 at this r) or PBN_GPU_TRAJ.
gpu_traj <- Sys.getenv("PBN_GPU_TRAJ", "auto")
# PBN_DEVICE: the GPU(s) of the GPU runs, e.g. "0,1" or "all" (default 0)
gpu_dev <- Sys.getenv("PBN_DEVICE", "0")
gpu_dev <- if (gpu_dev == "all") "all" else as.integer(strsplit(gpu_dev, ",")[[1L]])
if (gpu_traj != "auto") gpu_traj <- as.numeric(gpu_traj)
# PBN_ENGINE: pbnSteadyState's engine(s), e.g. "bits" or "chains,bits" (a
# row per engine; default "chains"); "bits" rows only where that engine runs
# (at most 4096 nodes)
engines <- strsplit(Sys.getenv("PBN_ENGINE", "chains"), ",")[[1L]]
throughput <- function(net, backend, threads, steps, engine = "chains") {
  p <- if (length(net$nodes) >= 5000) 1e-5 else 0.001
  traj <- if (backend == "cpu") 64 * threads else gpu_traj
  args <- list(net, setNames(TRUE, net$nodes[[1]]), p = p, r = 1e-9, trajectories = traj,
               maxSteps = round(steps), reduce = FALSE, seed = 1, backend = backend,
               device = if (backend == "gpu") gpu_dev else 0L, threads = threads, verbose = FALSE)
  # the default engine's runs leave `engine` out, so that the script also
  # times builds that have no such argument (a before/after comparison)
  if (engine != "chains") args$engine <- engine
  x <- suppressWarnings(do.call(pbnSteadyState, args))
  c(steps = x$steps, seconds = x$seconds, trajectories = x$trajectories)
}

nets <- list()
for (n in c(100, 400, 1000)) for (cls in c("2.7", "7.1")) nets[[sprintf("random n=%d D~%s", n, cls)]] <- random_pbn(n, cls, n)
for (f in c("bbm014", "bbm025", "bbm243")) {
  path <- file.path(data_dir, paste0(f, ".bnet"))
  if (file.exists(path)) nets[[paste("T-LGL/BBM", f)]] <- readPBN(path)
}
if (!quick) nets[["random n=10000 D~2.7"]] <- random_pbn(10000, "2.7", 10000)

# PBN_NETS: a regular expression; only the networks whose names match it
# (e.g. "^random n=100 D~2.7$"), default all
keep <- grepl(Sys.getenv("PBN_NETS", "."), names(nets))
if (!any(keep)) stop("PBN_NETS matches none of: ", paste(names(nets), collapse = "; "))
nets <- nets[keep]
rows <- list()
for (nm in names(nets)) for (eng in engines) {
  net <- nets[[nm]]
  s <- summary(net)
  n <- s$nodes
  if (eng == "bits" && n > 4096) next
  cpu1 <- throughput(net, "cpu", 1, (if (quick) 2e5 else 1e6) * 100 / n, eng)
  cpuN <- throughput(net, "cpu", ncores, (if (quick) 2e5 else 1e6) * ncores * 100 / n, eng)
  row <- data.frame(network = nm, engine = eng, nodes = n, density = round(s$density, 2),
                    p = if (n >= 5000) 1e-5 else 0.001,
                    cpu1_steps_per_s = cpu1[["steps"]] / cpu1[["seconds"]],
                    cpu_threads = ncores, cpuN_steps_per_s = cpuN[["steps"]] / cpuN[["seconds"]],
                    gpu_steps_per_s = NA_real_, gpu_trajectories = NA_real_)
  if (gpu) {
    g <- throughput(net, "gpu", NULL, (if (quick) 2e8 else 2e9) * (if (eng == "bits") 5 else 1) * 100 / n, eng)
    row$gpu_steps_per_s <- g[["steps"]] / g[["seconds"]]
    row$gpu_trajectories <- g[["trajectories"]]
  }
  rows[[paste(nm, eng)]] <- row
  cat(sprintf("%-28s %-6s n=%5d  D=%5.2f  CPU 1 thread %.3g steps/s  CPU %d threads %.3g  GPU %s\n",
              nm, eng, n, s$density, row$cpu1_steps_per_s, ncores, row$cpuN_steps_per_s,
              if (gpu) format(row$gpu_steps_per_s, digits = 3) else "-"))
}
tab <- do.call(rbind, rows)
rownames(tab) <- NULL
cat("\nThroughput (PBN steps per second; paper, K80: at most 6.4e7 GPU, 1.6e5 sequential)\n")
print(tab, digits = 3)
if (gpu) cat(sprintf("Device: %s; GPU runs on device(s) %s\n", gpuInfo()$name[[1]], paste(gpu_dev, collapse = ",")))

# The analysis of the paper's apoptosis study, on T-LGL 2011 (bbm025):
# seven steady-state probabilities at r = 5e-6, s = 0.95, p = 0.001.
# Apoptosis is nearly absorbing (it is left only when its own node is
# perturbed: beta ~ p), so the two-state method asks for N ~ 5.1e10 samples
# for it (alpha ~ 0.076, beta ~ 0.001) by Raftery-Lewis' formula, and about
# twice that by the chains' spread (about 2x on the CPU at r = 5e-4): the
# step budget must exceed that.
path <- file.path(data_dir, "bbm025.bnet")
if (file.exists(path)) {
  tlgl <- readPBN(path)
  sets <- list(Apoptosis = c(v_Apoptosis = TRUE),
               S1P = c(v_S1P = TRUE),
               Ceramide = c(v_Ceramide = TRUE),
               "Caspase,!FLIP" = c(v_Caspase = TRUE, v_FLIP = FALSE),
               "DISC,FasT" = c(v_DISC = TRUE, v_FasT = TRUE),
               "!Apoptosis,NFKB" = c(v_Apoptosis = FALSE, v_NFKB = TRUE),
               "BID,!MCL1" = c(v_BID = TRUE, v_MCL1 = FALSE))
  sets <- sets[vapply(sets, function(x) all(names(x) %in% tlgl$nodes), TRUE)]
  r <- if (gpu && !quick) 5e-6 else 1e-3
  be <- if (gpu) "gpu" else "cpu"
  t0 <- proc.time()[["elapsed"]]
  res <- suppressWarnings(pbnSteadyState(tlgl, sets, p = 0.001, r = r, s = 0.95, seed = 1,
                                         backend = be, device = if (gpu) gpu_dev else 0L,
                                         maxSteps = if (gpu) 4e11 else 2e9, verbose = FALSE))
  el <- proc.time()[["elapsed"]] - t0
  cat(sprintf("\nT-LGL 2011 (bbm025), %d sets, r = %g, backend %s: %.2f s in total, %.3g steps (%.3g steps/s), %d node(s) simulated\n",
              length(sets), r, be, el, res$steps[[1]], res$steps[[1]] / el, attr(res, "nodesSimulated")))
  print(as.data.frame(unclass(res))[, c("set", "probability", "alpha", "beta", "N", "M", "samples", "rhat", "converged")], digits = 4)
}
