# Benchmark of lassieSimulate() (issue 7): the LASSIE paper's synthetic
# mass-action models against deSolve's lsoda (right-hand side compiled in
# C, called from R), CPU and GPU engines in the same run; a batch of
# parameter sets; and, where the shared data are present, BCR (stiff)
# against lsodes.  Usage: Rscript inst/bench/lassie.R [quick]
# Environment: LASSIE_SIZES (comma list), LASSIE_LSODA_MAX (largest size
# given to lsoda, default 4096), LASSIE_BATCH (parameter sets, default 1000),
# LASSIE_CHEN_BATCH (Chen parameter sets, default 100), LASSIE_DATA (folder
# with sbml/ and bionetgen/, default ../shared/data/lassie), LASSIE_BCR=0
# skips BCR.  LASSIE_DEVICES="0;0,1" (device sets separated by ";", "all"
# allowed) times the Chen batch (LASSIE_CHEN_BATCH sets, LASSIE_CHEN_METHOD)
# and the Haugh2b batch (LASSIE_BATCH sets) on each set of GPUs, best of
# LASSIE_DEVICE_REPS (default 3) runs, and a batch of a non-stiff synthetic
# network whose device work grows with the batch (LASSIE_SCALE_N species,
# default 2048, LASSIE_SCALE_BATCH parameter sets, default 8192; 0 skips
# it; LASSIE_SCALE_TEND the horizons, default 50,500; LASSIE_SCALE_METHOD
# the method, default auto), and prints the speed-up and the efficiency (speed-up / devices)
# against the first set.
suppressPackageStartupMessages(library(sysbioGPU))
args <- commandArgs(trailingOnly = TRUE)
quick <- "quick" %in% args
env_num <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) as.numeric(strsplit(x, ",")[[1]]) else d }
sizes <- env_num("LASSIE_SIZES", if (quick) c(64, 256, 1024) else c(64, 256, 1024, 4096, 8192, 16384, 65536))
lsoda_max <- env_num("LASSIE_LSODA_MAX", 4096)
n_batch <- env_num("LASSIE_BATCH", if (quick) 100 else 1000)
cpu_work <- env_num("LASSIE_CPU_WORK", Inf)   # skip the CPU where species x samples exceed it
has_desolve <- requireNamespace("deSolve", quietly = TRUE)
gpu <- hasGPU()
cat(sprintf("lassieSimulate benchmark, %s; CPU threads %d; GPU: %s; deSolve: %s\n",
            format(Sys.time(), "%Y-%m-%d %H:%M"), parallel::detectCores(),
            if (gpu) gpuInfo()$name[1] else "none",
            if (has_desolve) as.character(utils::packageVersion("deSolve")) else "absent"))

# The paper's generator: reactants A, A+B or 2A; products none, one or two;
# distinct species within a reaction; k log-uniform in [1e-8, 1); initial
# amounts uniform in [0, 1).
synthetic <- function(n, seed) {
  set.seed(seed)
  sp <- matrix(sample.int(n, 4L * n, replace = TRUE), n, 4)
  dup <- function(sp) apply(sp, 1, anyDuplicated) > 0
  while (any(d <- dup(sp))) sp[d, ] <- sample.int(n, 4L * sum(d), replace = TRUE)
  rt <- sample.int(3L, n, replace = TRUE)          # A, A + B, 2A
  pt <- sample.int(3L, n, replace = TRUE) - 1L     # none, one, two products
  ri <- c(seq_len(n), which(rt == 2L)); rj <- c(sp[, 1], sp[rt == 2L, 2])
  rv <- c(ifelse(rt == 3L, 2, 1), rep(1, sum(rt == 2L)))
  pi_ <- c(which(pt >= 1L), which(pt == 2L)); pj <- c(sp[pt >= 1L, 3], sp[pt == 2L, 4])
  A <- Matrix::sparseMatrix(i = ri, j = rj, x = rv, dims = c(n, n))
  B <- Matrix::sparseMatrix(i = pi_, j = pj, x = 1, dims = c(n, n))
  reactionModel(A, B, rates = 10^runif(n, -8, 0), initial = runif(n), species = paste0("S", seq_len(n)))
}

timed <- function(expr) { t0 <- proc.time()[["elapsed"]]; v <- force(expr); list(v = v, s = proc.time()[["elapsed"]] - t0) }

lsoda_run <- function(m, times, fun = deSolve::lsoda, ...) {
  arr <- sysbioGPU:::lassie_arrays(m)
  k <- m$rates
  rhs <- function(t, y, p) list(.Call(sysbioGPU:::ffi_lassie_rhs, arr$r_ptr, arr$r_sp, arr$r_ord,
                                      arr$h_ptr, arr$h_rx, arr$h_val, k, y))
  fun(m$initial, times, rhs, NULL, rtol = 1e-6, atol = 1e-12, maxsteps = 1e6, ...)
}

rows <- list()
add <- function(...) rows[[length(rows) + 1L]] <<- data.frame(..., stringsAsFactors = FALSE)
for (n in sizes) {
  m <- synthetic(n, seed = n)
  for (ns in c(10, 1000)) {
    tt <- seq(0, 50, length.out = ns)
    g <- if (gpu) timed(lassieSimulate(m, tt, backend = "gpu", verbose = FALSE)) else NULL
    cpu <- if (n * ns <= cpu_work) timed(lassieSimulate(m, tt, backend = "cpu", verbose = FALSE)) else g
    if (is.null(cpu)) next
    st <- attr(cpu$v, "stats")
    ls <- if (has_desolve && n <= lsoda_max) timed(lsoda_run(m, tt)) else NULL
    cpu_ran <- n * ns <= cpu_work
    agree <- if (!is.null(ls)) max(abs(cpu$v[, -1] - ls$v[, -1]) / pmax(abs(ls$v[, -1]), 1e-6)) else NA
    gdiff <- if (!is.null(g) && cpu_ran) max(abs(cpu$v[, -1] - g$v[, -1]) / pmax(abs(cpu$v[, -1]), 1e-300)) else NA
    add(model = sprintf("synthetic %d", n), samples = ns, steps = st[["steps"]],
        implicit = st[["implicitSteps"]], cpu_s = if (cpu_ran) cpu$s else NA, lsoda_s = if (is.null(ls)) NA else ls$s,
        cpu_speedup = if (is.null(ls) || !cpu_ran) NA else ls$s / cpu$s, gpu_s = if (is.null(g)) NA else g$s,
        gpu_speedup = if (is.null(ls) || is.null(g)) NA else ls$s / g$s, rel_vs_lsoda = agree, gpu_vs_cpu = gdiff)
    cat(sprintf("  %-16s %5d samples: cpu %s s, lsoda %s s, gpu %s s\n", sprintf("synthetic %d", n), ns,
                if (cpu_ran) format(cpu$s, digits = 3) else "-",
                if (is.null(ls)) "-" else format(ls$s, digits = 3), if (is.null(g)) "-" else format(g$s, digits = 3)))
  }
}

# The LASSIE repository's 4096 model (SBML; its homodimerisations are
# written as stochastic propensities, read by their deterministic limit)
# and the Chen 2009 ErbB model (shipped), through readSBML().
data_dir <- Sys.getenv("LASSIE_DATA", "../shared/data/lassie")
sbml4096 <- file.path(data_dir, "sbml", "copasi_test_4096.sbml")
if (sbmlAvailable() && file.exists(sbml4096)) {
  m <- readSBML(sbml4096, propensities = TRUE)
  for (ns in c(10, 1000)) {
    tt <- seq(0, 50, length.out = ns)
    g <- if (gpu) timed(lassieSimulate(m, tt, backend = "gpu", verbose = FALSE)) else NULL
    cpu <- timed(lassieSimulate(m, tt, backend = "cpu", verbose = FALSE))
    st <- attr(cpu$v, "stats")
    ls <- if (has_desolve) timed(lsoda_run(m, tt)) else NULL
    add(model = "LASSIE copasi 4096 (SBML)", samples = ns, steps = st[["steps"]],
        implicit = st[["implicitSteps"]], cpu_s = cpu$s, lsoda_s = if (is.null(ls)) NA else ls$s,
        cpu_speedup = if (is.null(ls)) NA else ls$s / cpu$s, gpu_s = if (is.null(g)) NA else g$s,
        gpu_speedup = if (is.null(ls) || is.null(g)) NA else ls$s / g$s,
        rel_vs_lsoda = if (is.null(ls)) NA else max(abs(cpu$v[, -1] - ls$v[, -1]) / pmax(abs(ls$v[, -1]), 1e-6)),
        gpu_vs_cpu = if (is.null(g)) NA else max(abs(cpu$v[, -1] - g$v[, -1]) / pmax(abs(cpu$v[, -1]), 1e-300)))
  }
}
n_chen <- env_num("LASSIE_CHEN_BATCH", if (quick) 10 else 100)
if (sbmlAvailable() && n_chen > 0) {
  m <- readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU"))
  set.seed(11)
  K <- t(replicate(n_chen, m$rates * 2^runif(length(m$rates), -1, 1)))
  tt <- seq(0, 3600, by = 60)
  # Chen is stiff from the start: the batch runs BDF unless
  # LASSIE_CHEN_METHOD says otherwise ("auto" switches after a few hundred
  # explicit steps since the stiffness estimate uses the weighted norm)
  chen_method <- Sys.getenv("LASSIE_CHEN_METHOD", "bdf")
  cpu <- timed(lassieSimulate(m, tt, rates = K, method = chen_method, backend = "cpu", verbose = FALSE))
  g <- if (gpu) timed(lassieSimulate(m, tt, rates = K, method = chen_method, backend = "gpu", verbose = FALSE)) else NULL
  n1 <- min(n_chen, 5)
  ls <- if (has_desolve) timed(for (s in seq_len(n1)) { mm <- m; mm$rates <- K[s, ]; lsoda_run(mm, tt) }) else NULL
  add(model = sprintf("Chen 2009 batch %d (%s)", n_chen, chen_method), samples = length(tt),
      steps = sum(vapply(cpu$v, function(o) attr(o, "stats")[["steps"]], 0)),
      implicit = sum(vapply(cpu$v, function(o) attr(o, "stats")[["implicitSteps"]], 0)),
      cpu_s = cpu$s, lsoda_s = if (is.null(ls)) NA else ls$s * n_chen / n1,
      cpu_speedup = if (is.null(ls)) NA else ls$s * n_chen / n1 / cpu$s, gpu_s = if (is.null(g)) NA else g$s,
      gpu_speedup = if (is.null(ls) || is.null(g)) NA else ls$s * n_chen / n1 / g$s, rel_vs_lsoda = NA,
      gpu_vs_cpu = if (is.null(g)) NA else max(mapply(function(a, b) max(abs(a[, -1] - b[, -1]) / pmax(abs(a[, -1]), 1e-300)), cpu$v, g$v)))
}

# Batch: Haugh2b with rates scaled log-uniformly by up to 2x
m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
set.seed(7)
K <- t(replicate(n_batch, m$rates * 2^runif(length(m$rates), -1, 1)))
tt <- seq(0, 50, by = 1)
cpu <- timed(lassieSimulate(m, tt, rates = K, backend = "cpu", verbose = FALSE))
g <- if (gpu) timed(lassieSimulate(m, tt, rates = K, backend = "gpu", verbose = FALSE)) else NULL
n1 <- min(n_batch, 100)
ls <- if (has_desolve) timed(for (s in seq_len(n1)) { mm <- m; mm$rates <- K[s, ]; lsoda_run(mm, tt) }) else NULL
add(model = sprintf("Haugh2b batch %d", n_batch), samples = length(tt), steps = NA, implicit = NA,
    cpu_s = cpu$s, lsoda_s = if (is.null(ls)) NA else ls$s * n_batch / n1,
    cpu_speedup = if (is.null(ls)) NA else ls$s * n_batch / n1 / cpu$s, gpu_s = if (is.null(g)) NA else g$s,
    gpu_speedup = if (is.null(ls) || is.null(g)) NA else ls$s * n_batch / n1 / g$s, rel_vs_lsoda = NA,
    gpu_vs_cpu = if (is.null(g)) NA else max(mapply(function(a, b) max(abs(a[, -1] - b[, -1]) / pmax(abs(a[, -1]), 1e-300)), cpu$v, g$v)))

# BCR (stiff; 1,122 species, 24,388 reactions) over BioNetGen's time span
bcr <- file.path(data_dir, "bionetgen", "bcr.net")
if (!quick && file.exists(bcr) && Sys.getenv("LASSIE_BCR", "1") != "0") {
  m <- readBioNetGen(bcr)
  tt <- seq(0, 10000, length.out = 101)
  cpu <- timed(lassieSimulate(m, tt, backend = "cpu", verbose = FALSE))
  st <- attr(cpu$v, "stats")
  ls <- if (has_desolve) timed(lsoda_run(m, tt, fun = deSolve::lsodes)) else NULL
  add(model = "BCR (stiff)", samples = length(tt), steps = st[["steps"]], implicit = st[["implicitSteps"]],
      cpu_s = cpu$s, lsoda_s = if (is.null(ls)) NA else ls$s,
      cpu_speedup = if (is.null(ls)) NA else ls$s / cpu$s, gpu_s = NA, gpu_speedup = NA,
      rel_vs_lsoda = if (is.null(ls)) NA else max(abs(cpu$v[, 2:(1 + length(m$species))] - ls$v[, -1]) /
                                                  pmax(abs(ls$v[, -1]), 1e-3)),
      gpu_vs_cpu = NA)
  # against BioNetGen's own trajectories (its CVODE run): relative error
  # with a floor of 1e-6 of each observable's largest value
  gd <- sub("\\.net$", ".gdat", bcr)
  if (file.exists(gd)) {
    l <- readLines(gd)
    g <- utils::read.table(text = l[-1], col.names = strsplit(trimws(sub("^#", "", l[1])), "\\s+")[[1]])
    obs <- colnames(g)[-1]
    G <- as.matrix(g[match(tt, g$time), obs])
    fl <- rep(1e-6 * apply(abs(as.matrix(g[, obs])), 2, max), each = nrow(G))
    # and the measure of the test: a timing allowance of 0.01 s for the
    # .gdat at steep fronts (its CVODE run is off by 0.0025 s on the
    # PAG1_Csk switch at t = 9500; see test-lassieSimulate.R)
    ix <- match(tt, g$time); n <- nrow(g)
    lo <- pmax(ix - 1, 1); hi <- pmin(ix + 1, n)
    dG <- (as.matrix(g[hi, obs]) - as.matrix(g[lo, obs])) / (g$time[hi] - g$time[lo])
    d <- abs(cpu$v[, obs] - G)
    cat(sprintf("BCR: %.1f s, %d steps; largest relative error against BioNetGen's .gdat %.3g (%.3g with 0.01 s timing allowance)\n",
                cpu$s, as.integer(st[["steps"]]), max(d / pmax(abs(G), fl)),
                max(pmax(d - 0.01 * abs(dG), 0) / pmax(abs(G), fl))))
  }
}

tab <- do.call(rbind, rows)
cat("\n(lsoda_s: deSolve lsoda, lsodes for BCR, same rtol 1e-6 / atol 1e-12, RHS in C;",
    "for the batch, lsoda's time for the first", n1, "sets scaled to all)\n")
print(format(tab, digits = 3), row.names = FALSE)
out <- Sys.getenv("OUT")
if (nzchar(out)) utils::write.csv(tab, file.path(out, "bench-lassie.csv"), row.names = FALSE)

# Several GPUs: the same batches on each device set of LASSIE_DEVICES, the
# results checked identical to the first set's.  The Chen batch's implicit
# steps run on the host (all its threads, whatever the devices), so only
# its explicit part can scale; Haugh2b's batch runs entirely on the devices.
dev_sets <- Sys.getenv("LASSIE_DEVICES")
if (gpu && nzchar(dev_sets)) {
  sets <- lapply(strsplit(strsplit(dev_sets, ";")[[1]], ","), function(d) if (identical(d, "all")) "all" else as.integer(d))
  reps <- env_num("LASSIE_DEVICE_REPS", 3)
  core <- function(b) lapply(b, function(o) list(unclass(o)[, ], attr(o, "stats")))
  work <- list()
  chen_method <- Sys.getenv("LASSIE_CHEN_METHOD", "bdf")
  if (sbmlAvailable() && n_chen > 0) {
    m <- readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU"))
    set.seed(11)
    K <- t(replicate(n_chen, m$rates * 2^runif(length(m$rates), -1, 1)))
    work[[sprintf("Chen 2009 batch %d (%s)", n_chen, chen_method)]] <-
      list(m = m, K = K, tt = seq(0, 3600, by = 60), method = chen_method)
  }
  m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
  set.seed(7)
  work[[sprintf("Haugh2b batch %d", n_batch)]] <-
    list(m = m, K = t(replicate(n_batch, m$rates * 2^runif(length(m$rates), -1, 1))), tt = seq(0, 50, by = 1),
         method = "auto")
  # a batch whose device work grows with the batch (the explicit steps of a
  # non-stiff synthetic network): what splitting over GPUs can speed up
  n_scale <- env_num("LASSIE_SCALE_N", 2048); b_scale <- env_num("LASSIE_SCALE_BATCH", 8192)
  if (n_scale > 0 && b_scale > 0) {
    m <- synthetic(n_scale, seed = n_scale)
    set.seed(13)
    K <- t(replicate(b_scale, m$rates * 2^runif(length(m$rates), -1, 1)))
    scale_method <- Sys.getenv("LASSIE_SCALE_METHOD", "auto")
    for (t_end in env_num("LASSIE_SCALE_TEND", c(50, 500)))
      work[[sprintf("synthetic %d batch %d, t 0-%g (%s)", n_scale, b_scale, t_end, scale_method)]] <-
        list(m = m, K = K, tt = c(0, t_end / 2, t_end), method = scale_method)
  }
  cat(sprintf("\nSeveral GPUs (%s), %d CPU threads for the host's work, best of %d runs:\n",
              paste(unique(gpuInfo()$name), collapse = ", "), resolveBackend("cpu")$threads, reps))
  drows <- list()
  for (w in names(work)) {
    x <- work[[w]]
    ref <- NULL
    t1 <- NA
    for (d in sets) {
      run <- function(K) lassieSimulate(x$m, x$tt, rates = K, method = x$method, backend = "gpu", device = d,
                                        verbose = FALSE)
      invisible(run(x$K[rep(1, 4), , drop = FALSE]))   # each device's context, outside the timing
      best <- Inf; engine <- Inf
      for (r in seq_len(reps)) {
        tr <- timed(run(x$K)); best <- min(best, tr$s); engine <- min(engine, attr(tr$v[[1]], "elapsed"))
      }
      same <- if (is.null(ref)) { ref <- core(tr$v); NA } else identical(core(tr$v), ref)
      nd <- length(resolveBackend("gpu", device = d)$devices)
      if (is.na(t1)) { t1 <- best; e1 <- engine; n1d <- nd }
      sp <- t1 / best
      drows[[length(drows) + 1L]] <- data.frame(workload = w, devices = paste(d, collapse = ","), gpus = nd,
                                                seconds = best, speedup = sp, efficiency = sp / (nd / n1d),
                                                engine = engine, engine_eff = e1 / engine / (nd / n1d),
                                                identical = same,
                                                implicit = sum(vapply(tr$v, function(o) attr(o, "stats")[["implicitSteps"]], 0)),
                                                stringsAsFactors = FALSE)
      cat(sprintf("  %-32s device %-6s %.3f s, speed-up %.2f, efficiency %.2f%s\n", w, paste(d, collapse = ","),
                  best, sp, sp / (nd / n1d), if (is.na(same)) "" else if (same) ", identical" else ", DIFFERENT"))
    }
  }
  dtab <- do.call(rbind, drows)
  print(format(dtab, digits = 3), row.names = FALSE)
  if (nzchar(out)) utils::write.csv(dtab, file.path(out, "bench-lassie-devices.csv"), row.names = FALSE)
}
