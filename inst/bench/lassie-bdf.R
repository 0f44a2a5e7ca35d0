# Implicit steps on the GPU: stiff batches with the device's BDF against
# the host's BDF behind the same GPU engine (option sysbioGPU.lassieDeviceBDF = FALSE)
# and against the CPU
# engine on all threads, the results checked bit for bit against the CPU's.
# Seconds from the R call, best of LASSIE_BDF_REPS (default 2) runs, and
# (engine_*) the engine call's share of them; gpu_device_bdf_array: the
# device BDF's run with output = "array" (one array instead of a matrix
# per simulation).
#
# Usage: Rscript inst/bench/lassie-bdf.R [output]
# Environment: LASSIE_CHEN_BATCH (Chen 2009 ErbB parameter sets, default
# 1000, method "bdf" as in lassie.R), LASSIE_BATCH (Haugh2b parameter sets,
# default 20000, method "auto"), LASSIE_THREADS (CPU engine's threads,
# default all processors), LASSIE_BDF_CPU=0 skips the CPU engine (then the
# check is against the host's BDF within 1e-9 only), LASSIE_BDF_TEAMS
# (e.g. "32,16,8": the Chen batch again with that many lanes per
# simulation, option sysbioGPU.lassieBdfTeam), LASSIE_CROSSOVER (the crossover
# of the device's implicit steps with the model's size, below).
suppressPackageStartupMessages(library(sysbioGPU))
env_num <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) as.numeric(x) else d }
n_chen <- env_num("LASSIE_CHEN_BATCH", 1000)
n_haugh <- env_num("LASSIE_BATCH", 20000)
reps <- env_num("LASSIE_BDF_REPS", 2)
threads <- as.integer(env_num("LASSIE_THREADS", parallel::detectCores()))
run_cpu <- Sys.getenv("LASSIE_BDF_CPU", "1") != "0"
# `Rscript inst/bench/lassie-bdf.R output`: how much of a call's time is R
# and the result objects (CPU engine; no GPU needed), best of
# LASSIE_BDF_REPS: LASSIE_CHEN_BATCH and LASSIE_BATCH sets on LASSIE_THREADS,
# and one simulation of the synthetic network of LASSIE_OUTPUT_N species
# (default 8192, 0 skips; lassie.R's generator) with 1,000 output times.
# "engine call": the glue without attributes; "whole": lassieSimulate() from
# the R call.  The result objects are timed on the same call with
# maxSteps = 1 (every simulation stops at once: the same matrices without
# the steps, whose seconds vary more than the objects' on a loaded
# machine): "glue" is that engine call, "result objects" the glue's
# attributes in C (the call with them less the call without, timed in
# turn) and R's batch-level rest;
# and the whole R call of a batch with maxSteps = 1 (R's checks and objects
# around that glue); and the whole R call of the batch over a horizon 1e6
# times shorter (every simulation succeeds in a few steps: R's checks, the
# glue and the objects of successful simulations; median of
# max(LASSIE_BDF_REPS, 5)).  LASSIE_OUTPUT_FULL=0 skips the runs over the
# whole horizon (NA).  Runs on builds before and after the change (it
# looks for lassie_output_attrs()).
if ("output" %in% commandArgs(trailingOnly = TRUE)) {
  ns <- asNamespace("sysbioGPU")
  c_attrs <- exists("lassie_output_attrs", ns)
  secs <- function(f, n = reps) {
    s <- Inf
    # each run from a collected heap, so that a collection of the previous
    # run's garbage does not land in one version's time and not the other's
    for (i in seq_len(n)) {
      invisible(gc())
      t0 <- proc.time()[["elapsed"]]; f(); s <- min(s, proc.time()[["elapsed"]] - t0)
    }
    s
  }
  split_time <- function(label, m, tt, K, method, thr) {
    job <- list(arr = ns$lassie_arrays(m), times = tt, rtol = 1e-6, atol = 1e-12,
                method = match(method, c("auto", "rkf45", "bdf")) - 1L, maxSteps = 1e6, gpu = FALSE,
                threads = thr, total = nrow(K),
                obs = if (!is.null(m$observables)) as.matrix(Matrix::t(m$observables)))
    cn <- list(NULL, c("time", m$species, rownames(m$observables)))
    common <- list(method = method, rtol = 1e-6, atol = 1e-12, backend = "cpu", device = NA_character_,
                   elapsed = NA_real_, nSpecies = length(m$species))
    single <- nrow(K) == 1L
    rates <- as.double(t(K))
    call <- function(j) ns$lassie_engine(j, rates, m$initial, 0L, 0L, FALSE)
    full <- Sys.getenv("LASSIE_OUTPUT_FULL", "1") != "0"
    engine <- if (full) secs(function() call(job)) else NA
    whole <- if (full) secs(function() lassieSimulate(m, tt, rates = if (single) NULL else K, method = method,
                                                      backend = "cpu", threads = thr, verbose = FALSE)) else NA
    job$maxSteps <- 1
    res <- call(job)
    build <- function() suppressWarnings(ns$new_lassie_output(res, cn, common, single))
    if (c_attrs) {
      # the calls with and without attributes in turn, the best of each
      ja <- job
      ja$output <- ns$lassie_output_attrs(cn, common)
      glue <- with_attrs <- Inf
      for (i in seq_len(reps)) {
        glue <- min(glue, secs(function() call(job), 1L))
        with_attrs <- min(with_attrs, secs(function() call(ja), 1L))
      }
      res <- call(ja)
      objects <- with_attrs - glue + secs(build)
    } else {
      glue <- secs(function() call(job))
      objects <- secs(build)
    }
    # (a batch: one simulation that fails is an error)
    whole1 <- if (single) NA else secs(function() suppressWarnings(lassieSimulate(
      m, tt, rates = K, method = method, maxSteps = 1, backend = "cpu", threads = thr, verbose = FALSE)))
    # the same batch over a horizon 1e6 times shorter: every simulation
    # succeeds in a few steps, so the call is R's checks, the glue and the
    # result objects of successful simulations (median: a collection of
    # R's lands in some runs and not in others)
    has_array <- "output" %in% names(formals(lassieSimulate))
    short_call <- function(output) {
      if (single || (output == "array" && !has_array)) return(NA)
      ts <- tt * 1e-6
      args <- list(m, ts, rates = K, method = method, backend = "cpu", threads = thr, verbose = FALSE)
      if (has_array) args$output <- output
      stats::median(vapply(seq_len(max(reps, 5)), function(i) secs(function() do.call(lassieSimulate, args), 1L), 0))
    }
    short <- short_call("matrices")
    short_array <- short_call("array")
    # and the R heap that call takes: vectors at the peak (MB) and the R
    # objects it leaves (the result's)
    heap_of <- function(output) {
      if (single || (output == "array" && !has_array)) return(c(NA, NA))
      args <- list(m, tt * 1e-6, rates = K, method = method, backend = "cpu", threads = thr, verbose = FALSE)
      if (has_array) args$output <- output
      invisible(gc(reset = TRUE)); g0 <- gc(reset = TRUE)
      r <- do.call(lassieSimulate, args)
      g1 <- gc(); rm(r)
      c(g1[2, 6], g1[1, 1] - g0[1, 1])
    }
    heap <- heap_of("matrices")
    heap_array <- heap_of("array")
    cat(sprintf("%s, %d sets x %d times (%d threads, best of %d): engine call %.3f s, whole R call %.3f s; maxSteps = 1: glue %.3f s, result objects %.3f s, whole R call %.3f s; horizon x 1e-6: whole R call %.3f s (median), R vector heap at the peak %.1f MB, R objects made %.0f; the same with output = \"array\": %.3f s, %.1f MB, %.0f objects\n",
                label, nrow(K), length(tt), thr, reps, engine, whole, glue, objects, whole1, short, heap[1], heap[2],
                short_array, heap_array[1], heap_array[2]))
  }
  cat(sprintf("lassieSimulate result objects, %s; attributes set %s; load average %s\n",
              sysbioGPU:::benchMachine(),
              if (c_attrs) "in C" else "in R", paste(readLines("/proc/loadavg", warn = FALSE), collapse = "")))
  if (sbmlAvailable() && n_chen > 0) {
    m <- readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU"))
    set.seed(11)
    split_time("Chen (bdf)", m, seq(0, 3600, by = 60), t(replicate(n_chen, m$rates * 2^runif(length(m$rates), -1, 1))), "bdf", threads)
  }
  if (n_haugh > 0) {
    m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
    set.seed(7)
    split_time("Haugh2b (auto)", m, seq(0, 50, by = 1), t(replicate(n_haugh, m$rates * 2^runif(length(m$rates), -1, 1))), "auto", threads)
  }
  n_syn <- env_num("LASSIE_OUTPUT_N", 8192)
  if (n_syn > 0) {
    # lassie.R's generator, taken from that script rather than copied
    here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]))
    ex <- parse(file.path(here, "lassie.R"))
    eval(ex[[which(vapply(ex, function(e) length(e) == 3L && identical(e[[2L]], quote(synthetic)), TRUE))]])
    m <- synthetic(n_syn, seed = n_syn)
    split_time(sprintf("synthetic %d (auto)", n_syn), m, seq(0, 50, length.out = 1000), matrix(m$rates, 1), "auto", 1L)
  }
  quit(save = "no")
}
if (!hasGPU()) { cat("lassie-bdf: no GPU, nothing to time\n"); quit(save = "no") }
cat(sprintf("lassieSimulate implicit steps on the GPU, %s; CPU engine on %d threads\n",
            sysbioGPU:::benchMachine(), threads))
# e: the engine call's share (attr(, "info")$seconds; the rest is R
# checking the input and building the result objects)
best <- function(f) {
  s <- Inf; e <- Inf; v <- NULL
  for (i in seq_len(reps)) {
    t0 <- proc.time()[["elapsed"]]; v <- f(); s <- min(s, proc.time()[["elapsed"]] - t0)
    e <- min(e, attr(v, "info")$seconds)
  }
  list(v = v, s = s, e = e)
}
# f() with the engine setting `name` (?`sysbioGPU-options`) at val (NULL: unset)
with_opt <- function(name, val, f) {
  old <- options(stats::setNames(list(val), name))
  on.exit(options(old))
  f()
}
core <- function(b) lapply(b, function(o) list(unclass(o)[, ], attr(o, "stats")))
max_rel <- function(a, b) max(mapply(function(x, y) max(abs(x[, -1] - y[, -1]) / pmax(abs(y[, -1]), 1e-300)), a, b))
rows <- list()
work <- function(label, m, tt, K, method) {
  sim <- function(backend, ...) lassieSimulate(m, tt, rates = K, method = method, backend = backend,
                                               verbose = FALSE, ...)
  # one untimed run first: R's heap grows to hold a batch's results during
  # the first such call (collections as it grows), which would otherwise
  # land in whichever column is timed first
  invisible(sim("gpu"))
  dev <- best(function() sim("gpu"))
  # the same run returning one array (output = "array", where this build has it)
  dev_array <- if ("output" %in% names(formals(lassieSimulate))) best(function() sim("gpu", output = "array")) else NULL
  host <- best(function() with_opt("sysbioGPU.lassieDeviceBDF", FALSE, function() sim("gpu")))
  cpu <- if (run_cpu) best(function() sim("cpu", threads = threads)) else NULL
  st <- vapply(dev$v, function(o) attr(o, "stats")[["implicitSteps"]], 0)
  rows[[length(rows) + 1]] <<- data.frame(
    workload = label, sets = nrow(K), implicit_steps = sum(st), gpu_device_bdf = dev$s,
    gpu_device_bdf_array = if (is.null(dev_array)) NA else dev_array$s,
    gpu_host_bdf = host$s, cpu = if (is.null(cpu)) NA else cpu$s,
    engine_device_bdf = dev$e, engine_host_bdf = host$e, engine_cpu = if (is.null(cpu)) NA else cpu$e,
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
  # lanes per simulation (LASSIE_BDF_TEAMS="32,16,8"), one run each
  for (tm in strsplit(Sys.getenv("LASSIE_BDF_TEAMS"), ",")[[1]]) {
    s <- with_opt("sysbioGPU.lassieBdfTeam", as.integer(tm), function() system.time(invisible(
      lassieSimulate(m, seq(0, 3600, by = 60), rates = K, method = "bdf", backend = "gpu", verbose = FALSE)))[["elapsed"]])
    cat(sprintf("Chen %d sets, %s lanes per simulation: %.3f s\n", nrow(K), tm, s))
  }
}
if (n_haugh > 0) {
  m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
  set.seed(7)
  K <- t(replicate(n_haugh, m$rates * 2^runif(length(m$rates), -1, 1)))
  work("Haugh2b (auto), t 0-50", m, seq(0, 50, by = 1), K, "auto")
}
# Where the device's implicit steps stop paying (the crossover of
# LASSIE_DEVICE_BDF_MAX_N and the per-thread thresholds): stiff models of growing size, batches of growing
# size (LASSIE_CROSSOVER_SETS, default 1,32,128,512; parameter sets drawn
# as above), method "bdf", t 0-100 (11 times), with the implicit steps
# forced onto the device (option sysbioGPU.lassieDeviceBDF = TRUE) and kept
# on the host's threads (FALSE), one run each after a warm-up; the two must agree
# bit for bit (the same code); default_s: the engine's own choice
# (sbg_lassie_device_bdf_pays in src/lassie/lassie_cpu.c), with `picked`
# the side its time matches.  LASSIE_CROSSOVER names the folder of
# BioNetGen .net files (fceri_ji.net and egfr_net.net: networks generated
# by BNG2.pl from the models of https://github.com/RuleWorld/bionetgen,
# bng2/Models2; bcr.net: ReactionNetworkImporters.jl's test data; not
# shipped) and turns the section on; LASSIE_CROSSOVER_MODELS the files (default fceri_ji,
# egfr_net, bcr); "Haugh2b.net" and "Chen" (the shipped SBML) also work.
cross_dir <- Sys.getenv("LASSIE_CROSSOVER")
if (nzchar(cross_dir)) {
  files <- strsplit(Sys.getenv("LASSIE_CROSSOVER_MODELS", "fceri_ji.net,egfr_net.net,bcr.net"), ",")[[1]]
  sets <- as.integer(strsplit(Sys.getenv("LASSIE_CROSSOVER_SETS", "1,32,128,512"), ",")[[1]])
  cross <- list()
  for (f in files) {
    m <- if (f == "Chen") readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU")) else
      readBioNetGen(file.path(cross_dir, f))
    tt <- seq(0, 100, length.out = 11)
    run1 <- function(K) {
      t0 <- proc.time()[["elapsed"]]
      r <- lassieSimulate(m, tt, rates = K, method = "bdf", backend = "gpu", verbose = FALSE)
      list(v = r, s = proc.time()[["elapsed"]] - t0)
    }
    run <- function(where, K) with_opt("sysbioGPU.lassieDeviceBDF", where, function() run1(K))
    set.seed(5)
    K1 <- t(replicate(max(sets), m$rates * 2^runif(length(m$rates), -1, 1)))
    invisible(run(TRUE, K1[1:2, , drop = FALSE]))
    for (nb in sets) {
      K <- K1[seq_len(nb), , drop = FALSE]
      dv <- run(TRUE, K); hs <- run(FALSE, K); df <- run(NULL, K)
      pays <- asNamespace("sysbioGPU")$lassie_device_bdf_pays(length(m$species), nb, resolveBackend("gpu")$threads)
      cross[[length(cross) + 1L]] <- data.frame(model = sub("\\.net$", "", f), species = length(m$species), sets = nb,
                                                device_bdf_s = dv$s, host_bdf_s = hs$s,
                                                device_over_host = dv$s / hs$s, default_s = df$s,
                                                picked = if (pays) "device" else "host",
                                                implicit_steps = sum(vapply(dv$v, function(o) attr(o, "stats")[["implicitSteps"]], 0)),
                                                identical = identical(core(dv$v), core(hs$v)))
      cat(sprintf("  %s (%d species), %d sets: device %.3f s, host %.3f s, default (%s) %.3f s\n", f, length(m$species),
                  nb, dv$s, hs$s, if (pays) "device" else "host", df$s))
    }
  }
  cat(sprintf("\nCrossover (method \"bdf\", t 0-100, one run each after a warm-up; seconds from the R call; host: %d threads)\n",
              resolveBackend("cpu")$threads))
  print(format(do.call(rbind, cross), digits = 3), row.names = FALSE)
}
if (length(rows)) {
  tab <- do.call(rbind, rows)
  cat("\n(seconds from the R call, best of", reps, "runs; rtol 1e-6, atol 1e-12; gpu_host_bdf: the",
      "GPU engine with the implicit steps on the host; engine_*: the engine",
      "call's seconds in those runs (the glue's, result attributes included), without R's checks)\n")
  print(format(tab, digits = 3), row.names = FALSE)
  out <- Sys.getenv("OUT")
  if (nzchar(out)) utils::write.csv(tab, file.path(out, "bench-lassie-bdf.csv"), row.names = FALSE)
}
