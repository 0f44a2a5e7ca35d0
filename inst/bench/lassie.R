# Benchmark of lassieSimulate(): the LASSIE paper's
# synthetic mass-action models, the Chen 2009 ErbB model and a Haugh2b
# batch against deSolve's lsoda and lsodes, CPU and GPU engines in the same
# run; and, where LASSIE_DATA is set, BCR (stiff) against lsodes.
#
# Fair comparison: deSolve gets its compiled-code interface.  This
# script writes a mass-action right-hand side in C (its own, not the
# package's), builds it with R CMD SHLIB at bench time and passes the model's
# arrays to it through rpar/ipar; lsodes also gets the sparsity structure of
# the Jacobian (sparsetype = "sparseusr").  Every parameter set is run (no
# extrapolation); a batch runs deSolve over the sets with
# parallel::mclapply on as many workers as our engine has threads.  Same
# tolerances (rtol 1e-6, atol 1e-12), same input, same machine.
#
# Usage: Rscript inst/bench/lassie.R [quick]
# LASSIE_DENSE_N, LASSIE_DENSE_ONLY: the dense-output section (below).
# Environment: LASSIE_SIZES (comma list), LASSIE_LSODA_MAX (largest size
# given to lsoda/lsodes, default 4096), LASSIE_BATCH (Haugh2b parameter
# sets, default 1000), LASSIE_CHEN_BATCH (Chen parameter sets, default 100),
# LASSIE_THREADS (threads for our CPU engine and deSolve's workers, default
# all processors), LASSIE_DATA (a folder with sbml/copasi_test_4096.sbml
# from the LASSIE repository, https://github.com/aresio/LASSIE, and
# bionetgen/bcr.net and bcr.gdat, the BCR network of
# ReactionNetworkImporters.jl's test data, https://github.com/SciML/ReactionNetworkImporters.jl;
# not shipped: without them those rows are skipped), LASSIE_BCR=0 skips BCR,
# LASSIE_EXTRA_NET further .net files against lsodes (see that section).  LASSIE_DEVICES="0;0,1"
# (device sets separated by ";", "all" allowed) times the Chen batch
# (LASSIE_CHEN_BATCH sets, LASSIE_CHEN_METHOD) and the Haugh2b batch
# (LASSIE_BATCH sets) on each set of GPUs, best of LASSIE_DEVICE_REPS
# (default 3) runs, and a batch of a non-stiff synthetic network whose
# device work grows with the batch (LASSIE_SCALE_N species, default 2048,
# LASSIE_SCALE_BATCH parameter sets, default 8192; 0 skips it;
# LASSIE_SCALE_TEND the horizons, default 50,500; LASSIE_SCALE_METHOD the
# method, default auto), and prints the speed-up and the efficiency
# (speed-up / devices) against the first set.  LASSIE_DEVICES_ONLY=1 runs
# only that section; there LASSIE_DEVICE_CHEN and LASSIE_DEVICE_HAUGH (comma
# lists of batch sizes) replace LASSIE_CHEN_BATCH and LASSIE_BATCH, and
# LASSIE_DEVICE_OUTPUT=array asks for the array output, LASSIE_DEVICE_GC=1
# collects R's heap before each timed run.
suppressPackageStartupMessages(library(sysbioGPU))
args <- commandArgs(trailingOnly = TRUE)
quick <- "quick" %in% args
env_num <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) as.numeric(strsplit(x, ",")[[1]]) else d }
sizes <- env_num("LASSIE_SIZES", if (quick) c(64, 256, 1024) else c(64, 256, 1024, 4096, 8192, 16384, 65536))
lsoda_max <- env_num("LASSIE_LSODA_MAX", 4096)
n_batch <- env_num("LASSIE_BATCH", if (quick) 100 else 1000)
cpu_work <- env_num("LASSIE_CPU_WORK", Inf)   # skip the CPU where species x samples exceed it
threads <- as.integer(env_num("LASSIE_THREADS", parallel::detectCores()))
devices_only <- Sys.getenv("LASSIE_DEVICES_ONLY") == "1"
has_desolve <- requireNamespace("deSolve", quietly = TRUE)
gpu <- hasGPU()
cat(sprintf("lassieSimulate benchmark, %s; %d CPU threads (ours) = %d deSolve workers; deSolve: %s\n",
            sysbioGPU:::benchMachine(), threads, threads,
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

# The diffrax peer: JAX + diffrax in float64, vmap over the
# parameter sets, Tsit5 and Kvaerno5 at our tolerances, on the same
# workloads, when LASSIE_PYTHON (default python3) imports diffrax;
# inst/bench/lassie-diffrax.py reads the model this script exports and
# times each solver (first call: compile; then best of 2).  Skipped
# otherwise.  LASSIE_DIFFRAX_CHUNK: sets per vmap call (default 4096; 0 all
# at once), LASSIE_DIFFRAX_TIMEOUT: seconds per workload (default 600),
# LASSIE_DIFFRAX_SOLVERS (default Tsit5,Kvaerno5).
py <- Sys.getenv("LASSIE_PYTHON", "python3")
py_script <- local({
  f <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  cand <- c(if (length(f)) file.path(dirname(f[1]), "lassie-diffrax.py"),
            system.file("bench", "lassie-diffrax.py", package = "sysbioGPU"))
  cand <- cand[nzchar(cand) & file.exists(cand)]
  if (length(cand)) cand[1] else ""
})
has_diffrax <- nzchar(py_script) && nzchar(Sys.which(py)) &&
  identical(suppressWarnings(system2(py, c("-c", shQuote("import diffrax")), stdout = FALSE, stderr = FALSE)), 0L)
peer_rows <- list()
print_peers <- function() {
  if (length(peer_rows)) {
    ptab <- do.call(rbind, peer_rows)
    cat(sprintf("\ndiffrax (%s, float64, vmap over the sets; rtol 1e-6, atol 1e-12) on the same workloads: diffrax_s the best of 2 calls after the compiling one; rel_first: first set, relative to ours (floor 1e-6 of the largest):\n", py))
    print(format(ptab, digits = 3), row.names = FALSE)
    o <- Sys.getenv("OUT")
    if (nzchar(o)) utils::write.csv(ptab, file.path(o, "bench-lassie-diffrax.csv"), row.names = FALSE)
  } else if (!has_diffrax) cat("\n(diffrax peer skipped: `", py, " -c 'import diffrax'` fails here)\n", sep = "")
}
# the model, the sets (rows of K) and the times as lassie-diffrax.py reads them
export_model <- function(m, tt, K, dir) {
  arr <- sysbioGPU:::lassie_arrays(m)
  put <- function(x, name) writeLines(sprintf("%.17g", as.double(x)), file.path(dir, name))
  put(c(length(m$species), length(m$reactions), nrow(K)), "dims")
  for (nm in names(arr)) put(arr[[nm]], nm)
  put(t(K), "rates")          # row by row
  put(m$initial, "initial"); put(tt, "times")
}
# runs the peer on a workload; ours_s: our time on it, ours: our first set
diffrax_peer <- function(label, m, tt, K, ours_s, ours_backend, ours) {
  if (!has_diffrax) return(invisible())
  d <- tempfile("lassie-diffrax"); dir.create(d); on.exit(unlink(d, recursive = TRUE))
  export_model(m, tt, K, d)
  csv <- file.path(d, "out.csv"); first <- file.path(d, "first.txt")
  chunk <- env_num("LASSIE_DIFFRAX_CHUNK", 4096)
  rc <- suppressWarnings(system2(py, c(shQuote(py_script), shQuote(d), shQuote(csv),
                                       "--solvers", Sys.getenv("LASSIE_DIFFRAX_SOLVERS", "Tsit5,Kvaerno5"),
                                       "--rtol", "1e-6", "--atol", "1e-12", "--chunk", chunk,
                                       "--first-out", shQuote(first)),
                                 timeout = env_num("LASSIE_DIFFRAX_TIMEOUT", 600)))
  if (!file.exists(csv)) {
    peer_rows[[length(peer_rows) + 1L]] <<- data.frame(workload = label, sets = nrow(K), samples = length(tt),
      ours = ours_backend, ours_s = ours_s, solver = "diffrax", diffrax_s = NA, compile_s = NA,
      diffrax_over_ours = NA, steps = NA, rel_first = NA,
      status = if (identical(rc, 124L)) "timed out" else paste("exit", rc), stringsAsFactors = FALSE)
    return(invisible())
  }
  r <- utils::read.csv(csv, colClasses = "character", na.strings = character())
  rel <- NA
  if (file.exists(first)) {
    y <- as.matrix(utils::read.table(first))
    N <- length(m$species)
    x <- unclass(ours)[, 1 + seq_len(N), drop = FALSE]
    if (identical(dim(y), dim(x))) rel <- max(abs(x - y) / pmax(abs(x), 1e-6 * max(abs(x))))
  }
  for (i in seq_len(nrow(r))) {
    peer_rows[[length(peer_rows) + 1L]] <<- data.frame(workload = label, sets = nrow(K), samples = length(tt),
      ours = ours_backend, ours_s = ours_s, solver = r$solver[i], diffrax_s = suppressWarnings(as.numeric(r$run_s[i])),
      compile_s = suppressWarnings(as.numeric(r$compile_s[i])),
      diffrax_over_ours = suppressWarnings(as.numeric(r$run_s[i])) / ours_s,
      steps = suppressWarnings(as.numeric(r$steps[i])), rel_first = rel,
      status = trimws(paste(r$status[i], r$message[i])), stringsAsFactors = FALSE)
  }
}

# Dense output: steps by accuracy and interpolated output times
# against LASSIE's scheme (method = "rkf45": a step onto every output
# time), on the synthetic network of LASSIE_DENSE_N species (default 8192;
# 0 skips), 10 and 1,000 output times over t 0-50, one thread (and the GPU
# when there is one): steps, best of 3 seconds, and the largest difference of
# the 1,000 samples from an rkf45 run at rtol 1e-10, relative to
# max(|x|, 1e-6 max_t |x|) per species.  LASSIE_DENSE_ONLY=1 stops after it.
dense_n <- env_num("LASSIE_DENSE_N", 8192)
if (dense_n > 0 && !devices_only) {
  m <- synthetic(dense_n, seed = dense_n)
  t1000 <- seq(0, 50, length.out = 1000)
  ref <- lassieSimulate(m, t1000, method = "rkf45", rtol = 1e-10, backend = "cpu", threads = 1, verbose = FALSE)
  R <- unclass(ref)[, 1 + seq_len(dense_n)]
  fl <- rep(1e-6 * apply(abs(R), 2, max), each = nrow(R))
  drows <- list()
  for (be in c("cpu", if (gpu) "gpu")) for (meth in c("auto", "rkf45")) for (ns in c(10, 1000)) {
    tt <- seq(0, 50, length.out = ns)
    best <- Inf
    for (r in 1:3) {
      tr <- timed(lassieSimulate(m, tt, method = meth, backend = be, threads = 1, verbose = FALSE))
      best <- min(best, tr$s)
    }
    st <- attr(tr$v, "stats")
    err <- if (ns == 1000) { X <- unclass(tr$v)[, 1 + seq_len(dense_n)]; max(abs(X - R) / pmax(abs(R), fl)) } else NA
    drows[[length(drows) + 1L]] <- data.frame(backend = be, method = meth, samples = ns, steps = st[["steps"]],
                                              rhs = st[["rhsEvaluations"]], seconds = best, rel_vs_tight = err)
  }
  dtab <- do.call(rbind, drows)
  be <- if (gpu) "gpu" else "cpu"
  sel <- dtab$backend == be & dtab$method == "auto" & dtab$samples == 1000
  diffrax_peer(sprintf("synthetic %d, 1 set", dense_n), m, t1000, matrix(m$rates, 1), dtab$seconds[sel], be,
               lassieSimulate(m, t1000, backend = be, threads = 1, verbose = FALSE))
  cat(sprintf("\nDense output, synthetic %d species, t 0-50, rtol 1e-6, atol 1e-12 (best of 3; rel_vs_tight: 1,000 samples against rkf45 at rtol 1e-10):\n", dense_n))
  print(format(dtab, digits = 3), row.names = FALSE)
  out_dir <- Sys.getenv("OUT")
  if (nzchar(out_dir)) utils::write.csv(dtab, file.path(out_dir, "bench-lassie-dense.csv"), row.names = FALSE)
  if (Sys.getenv("LASSIE_DENSE_ONLY") == "1") { print_peers(); quit(save = "no") }
}

# deSolve's side: a mass-action right-hand side in C for its compiled-code
# interface.  ipar = N, M, reactant pointers (M + 1), reactant species and
# orders (per reaction), H's pointers (N + 1) and reactions (per species);
# rpar = rate constants (M), then H's values.  deSolve puts rpar after the
# nout output values in yout and ipar after 3 counts in ip.
rhs_c <- '
#include <stdlib.h>
static double *v_flux = NULL;
static int n_flux = 0;
void lb_derivs(int *neq, double *t, double *y, double *ydot, double *yout, int *ip) {
  const int *ipar = ip + 3;
  const double *k = yout + ip[0];
  int N = ipar[0], M = ipar[1];
  const int *r_ptr = ipar + 2, *r_sp = r_ptr + M + 1, *r_ord = r_sp + r_ptr[M];
  const int *h_ptr = r_ord + r_ptr[M], *h_rx = h_ptr + N + 1;
  const double *h_val = k + M;
  if (n_flux < M) { free(v_flux); v_flux = malloc(sizeof(double) * M); n_flux = M; }
  for (int r = 0; r < M; r++) {
    double f = k[r];
    for (int p = r_ptr[r]; p < r_ptr[r + 1]; p++) {
      double x = y[r_sp[p]];
      for (int o = 0; o < r_ord[p]; o++) f *= x;
    }
    v_flux[r] = f;
  }
  for (int i = 0; i < N; i++) {
    double s = 0;
    for (int p = h_ptr[i]; p < h_ptr[i + 1]; p++) s += h_val[p] * v_flux[h_rx[p]];
    ydot[i] = s;
  }
}
'
build_rhs <- function() {
  d <- tempfile("lassiebench"); dir.create(d)
  src <- file.path(d, "lassiebench.c"); writeLines(rhs_c, src)
  so <- file.path(d, paste0("lassiebench", .Platform$dynlib.ext))
  rc <- system2(file.path(R.home("bin"), "R"), c("CMD", "SHLIB", "-o", shQuote(so), shQuote(src)),
                stdout = FALSE, stderr = FALSE)
  if (rc != 0) stop("R CMD SHLIB failed for the benchmark's right-hand side")
  dyn.load(so)
  "lassiebench"
}
dll <- if (has_desolve) build_rhs() else NULL

# The model's arrays for lb_derivs, from its matrices (fixed species: no
# change), and the sparsity of its Jacobian for lsodes: J[i, j] != 0 when
# species j is a reactant of a reaction that changes species i, plus the
# diagonal.
desolve_model <- function(m) {
  At <- methods::as(Matrix::t(m$reactants), "CsparseMatrix")            # species x reactions
  D <- Matrix::drop0(m$products - m$reactants)                           # reactions x species
  if (any(m$fixed)) D[, m$fixed] <- 0
  D <- methods::as(Matrix::drop0(D), "CsparseMatrix")
  N <- ncol(D); M <- nrow(D)
  ipar <- as.integer(c(N, M, At@p, At@i, At@x, D@p, D@i))
  pat <- (abs(Matrix::t(D)) %*% (m$reactants != 0)) != 0
  pat <- methods::as(pat | Matrix::Diagonal(N) != 0, "CsparseMatrix")
  nz <- Matrix::summary(methods::as(pat, "generalMatrix"))
  inz <- cbind(nz$i, nz$j)
  list(ipar = ipar, hval = as.double(D@x), inz = inz[order(inz[, 2], inz[, 1]), , drop = FALSE])
}
desolve_run <- function(dm, m, times, rates = m$rates, solver = "lsoda", lrw_factor = 20) {
  common <- list(y = m$initial, times = times, func = "lb_derivs", parms = NULL, dllname = dll,
                 initfunc = NULL, rpar = c(as.double(rates), dm$hval), ipar = dm$ipar,
                 rtol = 1e-6, atol = 1e-12, maxsteps = 1e6)
  # lsodes' work array: deSolve's default misses the LU's fill-in with a
  # user-given structure; room for lrw_factor x the Jacobian's nonzeros
  if (solver == "lsodes") {
    lrw <- min(.Machine$integer.max, 100 + 30 * length(m$initial) + lrw_factor * nrow(dm$inz))
    do.call(deSolve::lsodes, c(common, list(sparsetype = "sparseusr", inz = dm$inz, lrw = as.integer(lrw))))
  }
  else do.call(deSolve::lsoda, common)
}
# A batch: every row of K, shared over `threads` forked workers.
desolve_batch <- function(dm, m, times, K, solver) {
  parallel::mclapply(seq_len(nrow(K)), function(s) unclass(desolve_run(dm, m, times, K[s, ], solver)),
                     mc.cores = threads)
}
rel_diff <- function(a, b) max(abs(a[, -1] - b[, -1]) / pmax(abs(b[, -1]), 1e-6))
batch_diff <- function(ours, theirs) {
  n <- length(theirs)
  max(vapply(seq_len(n), function(s) {
    x <- theirs[[s]]
    if (inherits(x, "try-error") || nrow(x) != nrow(ours[[s]])) return(Inf)
    rel_diff(unclass(ours[[s]])[, seq_len(ncol(x))], x)
  }, 0))
}

rows <- list()
add <- function(...) rows[[length(rows) + 1L]] <<- data.frame(..., stringsAsFactors = FALSE)
# one row: our CPU (and GPU) time against lsoda's and lsodes' on the same work
add_row <- function(model, sets, samples, thr, cpu, g, ls, lss, agree) {
  add(model = model, sets = sets, samples = samples, threads = thr, cpu_s = cpu, gpu_s = if (is.null(g)) NA else g,
      lsoda_s = if (is.null(ls)) NA else ls, lsodes_s = if (is.null(lss)) NA else lss,
      lsoda_over_cpu = if (is.null(ls)) NA else ls / cpu, lsodes_over_cpu = if (is.null(lss)) NA else lss / cpu,
      lsodes_over_gpu = if (is.null(lss) || is.null(g)) NA else lss / g, rel_vs_lsodes = agree)
  cat(sprintf("  %-28s %5d sets x %4d samples: cpu %.3g s, lsoda %s s, lsodes %s s\n", model, sets, samples, cpu,
              if (is.null(ls)) "-" else format(ls, digits = 3), if (is.null(lss)) "-" else format(lss, digits = 3)))
}

# One simulation at a time (our engine runs one simulation on one thread;
# so does deSolve).
single <- function(label, m, tt, with_desolve) {
  g <- if (gpu) timed(lassieSimulate(m, tt, backend = "gpu", verbose = FALSE)) else NULL
  cpu <- timed(lassieSimulate(m, tt, backend = "cpu", threads = 1, verbose = FALSE))
  ls <- lss <- NULL; agree <- NA
  if (has_desolve && with_desolve) {
    dm <- desolve_model(m)
    ls <- timed(desolve_run(dm, m, tt, solver = "lsoda"))
    lss <- timed(desolve_run(dm, m, tt, solver = "lsodes"))
    agree <- rel_diff(unclass(cpu$v)[, seq_len(ncol(lss$v))], lss$v)
  }
  add_row(label, 1L, length(tt), 1L, cpu$s, g$s, ls$s, lss$s, agree)
}
for (n in if (devices_only) numeric() else sizes) {
  m <- synthetic(n, seed = n)
  for (ns in c(10, 1000)) {
    if (n * ns > cpu_work) next
    single(sprintf("synthetic %d", n), m, seq(0, 50, length.out = ns), n <= lsoda_max)
  }
}

# The LASSIE repository's 4096 model (SBML; its homodimerisations are
# written as stochastic propensities, read by their deterministic limit).
data_dir <- Sys.getenv("LASSIE_DATA")
if (!nzchar(data_dir)) message("LASSIE_DATA is not set: the LASSIE 4096 (SBML) and BCR rows are skipped (see the head of inst/bench/lassie.R)")
sbml4096 <- file.path(data_dir, "sbml", "copasi_test_4096.sbml")
if (sbmlAvailable() && file.exists(sbml4096) && !devices_only) {
  m <- readSBML(sbml4096, propensities = TRUE)
  for (ns in c(10, 1000)) single("LASSIE copasi 4096 (SBML)", m, seq(0, 50, length.out = ns), TRUE)
}

# Batches: every set run by both sides, ours on `threads` threads, deSolve
# on `threads` workers.
batch <- function(label, m, tt, K, method, peer = FALSE) {
  cpu <- timed(lassieSimulate(m, tt, rates = K, method = method, backend = "cpu", threads = threads,
                              verbose = FALSE))
  g <- if (gpu) timed(lassieSimulate(m, tt, rates = K, method = method, backend = "gpu", verbose = FALSE)) else NULL
  if (peer) {
    if (gpu) diffrax_peer(label, m, tt, K, g$s, "gpu", g$v[[1]])
    else diffrax_peer(label, m, tt, K, cpu$s, sprintf("cpu x%d", threads), cpu$v[[1]])
  }
  ls <- lss <- NULL; agree <- NA
  if (has_desolve) {
    dm <- desolve_model(m)
    ls <- timed(desolve_batch(dm, m, tt, K, "lsoda"))
    lss <- timed(desolve_batch(dm, m, tt, K, "lsodes"))
    agree <- batch_diff(cpu$v, lss$v)
  }
  add_row(label, nrow(K), length(tt), threads, cpu$s, g$s, ls$s, lss$s, agree)
}
n_chen <- env_num("LASSIE_CHEN_BATCH", if (quick) 10 else 100)
chen_method <- Sys.getenv("LASSIE_CHEN_METHOD", "bdf")
if (sbmlAvailable() && n_chen > 0 && !devices_only) {
  m <- readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU"))
  set.seed(11)
  K <- t(replicate(n_chen, m$rates * 2^runif(length(m$rates), -1, 1)))
  # Chen is stiff from the start: the batch runs BDF unless
  # LASSIE_CHEN_METHOD says otherwise
  batch(sprintf("Chen 2009 ErbB (%s)", chen_method), m, seq(0, 3600, by = 60), K, chen_method)
}
# Haugh2b with rates scaled log-uniformly by up to 2x
if (!devices_only) {
  m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
  set.seed(7)
  K <- t(replicate(n_batch, m$rates * 2^runif(length(m$rates), -1, 1)))
  batch("Haugh2b", m, seq(0, 50, by = 1), K, "auto", peer = TRUE)
}

# BCR (stiff; 1,122 species, 24,388 reactions) over BioNetGen's time span
bcr <- file.path(data_dir, "bionetgen", "bcr.net")
if (!quick && !devices_only && file.exists(bcr) && Sys.getenv("LASSIE_BCR", "1") != "0") {
  m <- readBioNetGen(bcr)
  tt <- seq(0, 10000, length.out = 101)
  cpu <- timed(lassieSimulate(m, tt, backend = "cpu", verbose = FALSE))
  st <- attr(cpu$v, "stats")
  lss <- if (has_desolve) timed(desolve_run(desolve_model(m), m, tt, solver = "lsodes")) else NULL
  add_row("BCR (stiff)", 1L, length(tt), 1L, cpu$s, NULL, NULL, lss$s,
          if (is.null(lss)) NA else max(abs(cpu$v[, 2:(1 + length(m$species))] - lss$v[, -1]) /
                                          pmax(abs(lss$v[, -1]), 1e-3)))
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

# Further BioNetGen networks (LASSIE_EXTRA_NET: a comma list of .net
# files, e.g. RuleWorld's fceri_gamma2.net, 3,744 species and 58,276
# reactions; not shipped), one simulation each over t 0-LASSIE_EXTRA_TEND
# (default 100, 11 outputs), our CPU engine on one thread against lsodes
# (compiled right-hand side, the Jacobian's sparsity, room for
# LASSIE_EXTRA_LRW_FACTOR times its nonzeros, default 80, for the fill-in);
# then one factorisation of I - 0.1 J (a perturbed initial state) by the
# CPU engine's elimination and by the device's row-by-row code on one host
# thread: the time of 6 factorisations less that of 1, over 5
lu_seconds <- function(m, passes) {
  set.seed(1)
  x <- m$initial * (1 + stats::runif(length(m$initial))) + 1e-3
  b <- stats::rnorm(length(x))
  one <- timed(sysbioGPU:::lassie_lu_solve(m, x, 0.1, b, by_passes = passes))$s
  (timed(sysbioGPU:::lassie_lu_solve(m, x, rep(0.1, 6), b, by_passes = passes))$s - one) / 5
}
for (f in strsplit(Sys.getenv("LASSIE_EXTRA_NET"), ",", fixed = TRUE)[[1]]) {
  if (quick || devices_only || !file.exists(f)) next
  m <- readBioNetGen(f)
  tt <- seq(0, env_num("LASSIE_EXTRA_TEND", 100), length.out = 11)
  cpu <- timed(lassieSimulate(m, tt, backend = "cpu", threads = 1, rtol = 1e-6, atol = 1e-12, verbose = FALSE))
  st <- attr(cpu$v, "stats")
  lss <- if (has_desolve) timed(desolve_run(desolve_model(m), m, tt, solver = "lsodes",
                                             lrw_factor = env_num("LASSIE_EXTRA_LRW_FACTOR", 80)))
  cat(sprintf("%s (%d species, %d reactions): ours %.3g s on one thread (%d steps, %d factorisations), lsodes %s\n",
              basename(f), length(m$initial), length(m$rates), cpu$s, as.integer(st[["steps"]]),
              as.integer(st[["factorisations"]]),
              if (is.null(lss)) "absent" else sprintf("%.3g s (%d steps), largest relative difference %.2g",
                lss$s, as.integer(attr(lss$v, "istate")[2]),
                max(abs(cpu$v[, 2:(1 + length(m$species))] - lss$v[, -1]) / pmax(abs(lss$v[, -1]), 1e-6)))))
  cat(sprintf("  one factorisation of I - 0.1 J: %.3g s (the device's row-by-row code on one host thread: %.3g s)\n",
              lu_seconds(m, FALSE), lu_seconds(m, TRUE)))
}

tab <- do.call(rbind, rows)
if (!is.null(tab)) cat("\n(seconds, wall; deSolve with its compiled-code interface (RHS in C built here), lsodes with the",
    "Jacobian's sparsity; every set run; batches: ours on", threads, "threads, deSolve on", threads,
    "forked workers; single simulations on one thread each; rtol 1e-6, atol 1e-12;",
    "rel_vs_lsodes: largest relative difference, floor 1e-6)\n")
if (!is.null(tab)) print(format(tab, digits = 3), row.names = FALSE)
out <- Sys.getenv("OUT")
if (nzchar(out) && !is.null(tab)) utils::write.csv(tab, file.path(out, "bench-lassie.csv"), row.names = FALSE)

# Several GPUs: the same batches on each device set of LASSIE_DEVICES, the
# results checked identical to the first set's.  The Chen batch's implicit
# steps run on the host (all its threads, whatever the devices), so only
# its explicit part can scale; Haugh2b's batch runs entirely on the devices.
dev_sets <- Sys.getenv("LASSIE_DEVICES")
if (gpu && nzchar(dev_sets)) {
  sets <- lapply(strsplit(strsplit(dev_sets, ";")[[1]], ","), function(d) if (identical(d, "all")) "all" else as.integer(d))
  reps <- env_num("LASSIE_DEVICE_REPS", 3)
  # LASSIE_DEVICE_GC=1: R's heap collected before each timed run, so that
  # where R's collections fall (a batch of 8,192 matrices crosses its
  # threshold in some runs and not others: 0.1-0.3 s) does not decide
  # which build or device set looks faster
  collect <- Sys.getenv("LASSIE_DEVICE_GC") == "1"
  # the numbers and counters of a batch, either output shape
  core <- function(b) if (inherits(b, "lassieArray")) list(unclass(b)[, , ], attr(b, "stats"))
                      else lapply(b, function(o) list(unclass(o)[, ], attr(o, "stats")))
  elapsed <- function(b) attr(if (inherits(b, "lassieArray")) b else b[[1]], "elapsed")
  implicit <- function(b) if (inherits(b, "lassieArray")) sum(attr(b, "stats")["implicitSteps", ])
                          else sum(vapply(b, function(o) attr(o, "stats")[["implicitSteps"]], 0))
  work <- list()
  chen_method <- Sys.getenv("LASSIE_CHEN_METHOD", "bdf")
  out_kind <- Sys.getenv("LASSIE_DEVICE_OUTPUT", "matrices")
  chen_sizes <- if (devices_only) env_num("LASSIE_DEVICE_CHEN", n_chen) else n_chen
  haugh_sizes <- if (devices_only) env_num("LASSIE_DEVICE_HAUGH", n_batch) else n_batch
  if (sbmlAvailable() && any(chen_sizes > 0)) {
    m <- readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU"))
    for (nc in chen_sizes[chen_sizes > 0]) {
      set.seed(11)
      K <- t(replicate(nc, m$rates * 2^runif(length(m$rates), -1, 1)))
      work[[sprintf("Chen 2009 batch %d (%s)", nc, chen_method)]] <-
        list(m = m, K = K, tt = seq(0, 3600, by = 60), method = chen_method)
    }
  }
  m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
  for (nh in haugh_sizes[haugh_sizes > 0]) {
    set.seed(7)
    work[[sprintf("Haugh2b batch %d", nh)]] <-
      list(m = m, K = t(replicate(nh, m$rates * 2^runif(length(m$rates), -1, 1))), tt = seq(0, 50, by = 1),
           method = "auto")
  }
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
                                        verbose = FALSE, output = out_kind)
      invisible(run(x$K[rep(1, 4), , drop = FALSE]))   # each device's context, outside the timing
      best <- Inf; engine <- Inf
      for (r in seq_len(reps)) {
        if (collect) { tr <- NULL; invisible(gc()) }
        tr <- timed(run(x$K)); best <- min(best, tr$s); engine <- min(engine, elapsed(tr$v))
      }
      same <- if (is.null(ref)) { ref <- core(tr$v); NA } else identical(core(tr$v), ref)
      nd <- length(resolveBackend("gpu", device = d)$devices)
      if (is.na(t1)) {
        t1 <- best; e1 <- engine; n1d <- nd
        # (Haugh2b's peer ran with the batches above)
        if (startsWith(w, "synthetic") && !inherits(tr$v, "lassieArray")) diffrax_peer(w, x$m, x$tt, x$K, best, paste("gpu", paste(d, collapse = ",")), tr$v[[1]])
      }
      sp <- t1 / best
      drows[[length(drows) + 1L]] <- data.frame(workload = w, devices = paste(d, collapse = ","), gpus = nd,
                                                seconds = best, speedup = sp, efficiency = sp / (nd / n1d),
                                                engine = engine, engine_eff = e1 / engine / (nd / n1d),
                                                identical = same,
                                                implicit = implicit(tr$v),
                                                stringsAsFactors = FALSE)
      cat(sprintf("  %-32s device %-6s %.3f s, speed-up %.2f, efficiency %.2f%s\n", w, paste(d, collapse = ","),
                  best, sp, sp / (nd / n1d), if (is.na(same)) "" else if (same) ", identical" else ", DIFFERENT"))
    }
  }
  dtab <- do.call(rbind, drows)
  print(format(dtab, digits = 3), row.names = FALSE)
  if (nzchar(out)) utils::write.csv(dtab, file.path(out, "bench-lassie-devices.csv"), row.names = FALSE)
}

print_peers()
