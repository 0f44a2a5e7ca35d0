# Benchmark of parCosnet()/cvParCosnet() (ParCOSNet, Frasca et al.
# 2018).  Rscript inst/bench/cosnet.R prints one table: workload, backend,
# seconds (the engine's; `wall` adds the R side: input checks, folds,
# metrics), and the paper's figure or the peer's time.  Each Erdos-Renyi
# run also prints its R side (wall - engine) in a line of its own.
#   COSNET_ER          Erdos-Renyi cases n:degree, comma separated (default
#                      "5e5:50,1.5e6:300"; the paper's Table 8 has both; the
#                      networks are built in C by several threads)
#   COSNET_ER_CPU=0    skip the CPU runs of the Erdos-Renyi cases
#   COSNET_STREAM_GB   also run the largest Erdos-Renyi case on the GPU with
#                      this device budget (GB), so that the network is
#                      streamed from the host in parts (default 2; 0 = skip)
#   COSNET_MOUSE_CLASSES  classes of the mouse-like CV (default 1000)
#   COSNET_CPU_CLASSES    of them on the CPU (default 32; CPU time is
#                         scaled to all classes)
#   COSNET_PEER=1      also time Bioconductor COSNet (if installed) on a
#                      6,391-node, degree-314 graph
#   COSNET_PEER_REPS   rounds of that comparison (default 5; medians)
#   COSNET_ONLY        sections to run, comma separated, among yeast, er,
#                      mouse, peer, colour (default all but colour)
#   colour             the host colouring of the mouse-like network alone,
#                      on one thread (the greedy pass that the GPU engine
#                      runs beside its workers' opening) and on all threads
#                      (the rounds of the CPU engine), best of five each
#   COSNET_STAGES=1    with COSNET_DEVICES: also time the R side's stages of
#                      the mouse-like CV (checks, labels, folds, metrics)
#   COSNET_DEVICES     GPU device sets for the mouse-like CV, ';' between
#                      sets, ',' within one (e.g. "0;0,1"): the CV runs on
#                      each set (the classes split over its devices, one
#                      process) instead of the GPU/CPU pair, and the table
#                      gives the speed-up and efficiency (speed-up per
#                      device) against the first set; a set may come
#                      again, so that the sets alternate.  A 1 -> 2 GPU
#                      run, each set twice, in under 2 minutes:
#                        COSNET_ONLY=mouse COSNET_DEVICES="0;0,1;0;0,1" Rscript inst/bench/cosnet.R
suppressPackageStartupMessages({library(sysbioGPU); library(Matrix)})
env_num <- function(name, default) as.numeric(Sys.getenv(name, default))

# Erdos-Renyi G(n, p) with mean degree `deg` and U(0,1) weights, built in C
# straight into compressed rows (sysbioGPU's internal benchmark generator).
er_graph <- function(n, deg, seed) sysbioGPU:::cosnet_random_network(n, deg, seed)

# Device memory in use (GiB), sampled every 50 ms by nvidia-smi in the
# background while the R process is inside the engine.
gpu_mem_start <- function(device = 0L) {
  if (!nzchar(Sys.which("nvidia-smi"))) return(NULL)
  f <- tempfile()
  system2("sh", c("-c", shQuote(sprintf(
    "nvidia-smi -i %d --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > %s 2>/dev/null & echo $! > %s.pid",
    device, f, f))))
  Sys.sleep(0.3)
  f
}
gpu_mem_peak <- function(f) {
  if (is.null(f)) return(NA_real_)
  system2("kill", readLines(paste0(f, ".pid")))
  x <- suppressWarnings(as.numeric(readLines(f)))
  if (!length(x) || all(is.na(x))) NA_real_ else c(base = x[1] / 1024, peak = max(x, na.rm = TRUE) / 1024)
}

proc_gb <- function(field) {
  s <- readLines("/proc/self/status")
  as.numeric(gsub("[^0-9]", "", s[startsWith(s, field)])) / 2^20
}
peak_rss_gb <- function() proc_gb("VmHWM")
# Linux: writing 5 to clear_refs resets the peak, so that the peak of the
# runs alone can be read afterwards.
reset_peak <- function() invisible(tryCatch(writeLines("5", "/proc/self/clear_refs"), error = function(e) NULL))

only <- strsplit(Sys.getenv("COSNET_ONLY", "yeast,er,mouse,peer"), ",")[[1]]
section <- function(name) name %in% only

rows <- list()
add <- function(workload, backend, threads, seconds, reference, note = "", wall = NA) {
  r <- data.frame(workload = workload, backend = backend, threads = threads, seconds = seconds,
                  wall = wall, reference = reference, note = note, stringsAsFactors = FALSE)
  rows[[length(rows) + 1L]] <<- r
  cat("# ", paste(names(r), unlist(r), sep = ": ", collapse = " | "), "\n", sep = "")
}
# The time around the engine (input checks, labels, folds, metrics,
# result), unrounded.
r_side <- function(workload, backend, wall, engine) {
  cat(sprintf("# R side (wall - engine) of %s on the %s: %.3f s (wall %.3f s, engine %.3f s, %.0f%% of wall)\n",
              workload, toupper(backend), wall - engine, wall, engine, 100 * (wall - engine) / wall))
}
gpu <- hasGPU()
backends <- c(if (gpu) "gpu", "cpu")
dev <- if (gpu) gpuInfo()$name[1] else "none"

# ---- 0. yeast STRING / FunCat (shipped), all classes, 5-fold CV ----
if (section("yeast")) {
Wy <- readNetwork(system.file("extdata", "yeast-string-edges.txt.gz", package = "sysbioGPU"))
Yy <- readRDS(system.file("extdata", "yeast-funcat.rds", package = "sysbioGPU"))[rownames(Wy), ]
Yy <- Yy[, colSums(Yy) >= 20 & colSums(!Yy) >= 20]
res_y <- list()
for (be in backends) {
  wall <- system.time(cv <- cvParCosnet(Wy, Yy, nfolds = 5, normalize = TRUE, seed = 1, backend = be,
                                        verbose = FALSE))[[3]]
  res_y[[be]] <- cv
  add(workload = sprintf("yeast STRING n=%d, %d FunCat classes, 5-fold CV", nrow(Wy), ncol(Yy)),
      backend = be, threads = cv$threads, seconds = round(cv$seconds, 3), wall = round(wall, 2),
      reference = sprintf("mean F %.3f, AUPRC %.3f", mean(cv$metrics$F), mean(cv$metrics$AUPRC)),
      note = if (be == "cpu" && gpu) sprintf("GPU scores identical to CPU: %s",
                                             identical(res_y$gpu$scores, cv$scores)) else "")
}
}

# ---- 1. Erdos-Renyi, one class, one full 5-fold CV (paper Table 8) ----
cases <- strsplit(strsplit(Sys.getenv("COSNET_ER", "5e5:50,1.5e6:300"), ",")[[1]], ":")
if (!section("er")) cases <- list()
stream_gb <- env_num("COSNET_STREAM_GB", 2)
for (ci in seq_along(cases)) {
  n <- as.numeric(cases[[ci]][1]); deg <- as.numeric(cases[[ci]][2])
  invisible(gc())
  t0 <- proc.time()[[3]]
  W <- er_graph(n, deg, 1)
  t_build <- proc.time()[[3]] - t0
  set.seed(2)
  y <- as.numeric(runif(n) < 0.01)
  input_gb <- (length(W@x) * 12 + length(W@p) * 4) / 2^30
  invisible(gc())
  rss0 <- proc_gb("VmRSS")
  reset_peak()
  paper <- if (n == 5e5 && deg == 50) 45.3 else if (n == 1.5e6 && deg == 300) 609 else NA
  what <- sprintf("ER n=%g deg=%g (%.0fM stored), 1 class, 5-fold CV", n, deg, length(W@x) / 1e6)
  res_er <- list()
  bes <- if (Sys.getenv("COSNET_ER_CPU") == "0") intersect(backends, "gpu") else backends
  for (be in bes) {
    mem <- if (be == "gpu") gpu_mem_start() else NULL
    wall <- system.time(cv <- cvParCosnet(W, y, nfolds = 5, seed = 1, backend = be, verbose = FALSE))[[3]]
    gm <- if (be == "gpu") gpu_mem_peak(mem) else NA
    r_side(what, be, wall, cv$seconds)
    res_er[[be]] <- cv
    add(workload = what, backend = be, threads = cv$threads, seconds = round(cv$seconds, 2),
        wall = round(wall, 1),
        reference = if (is.na(paper)) "paper Table 8 (1 thread, GTX 980): n/a at this size"
                    else sprintf("paper Table 8: %.1f s", paper),
        note = paste0(sprintf("colours %d, sweeps %s, F %.3f", cv$nColours,
                              paste(range(cv$jobs$sweeps), collapse = "-"), cv$metrics$F),
                      if (be == "gpu") sprintf("; device memory %.2f GiB (peak in use %.2f, before %.2f)",
                                               gm[2] - gm[1], gm[2], gm[1]) else "",
                      if (be == "cpu" && !is.null(res_er$gpu))
                        sprintf("; GPU scores identical: %s", identical(res_er$gpu$scores, cv$scores)) else ""))
  }
  if (gpu && stream_gb > 0 && ci == length(cases)) {
    old <- options(sysbioGPU.cosnetDeviceBytes = stream_gb * 2^30)
    mem <- gpu_mem_start()
    wall <- system.time(cv <- tryCatch(cvParCosnet(W, y, nfolds = 5, seed = 1, backend = "gpu", verbose = FALSE),
                                       error = function(e) e))[[3]]
    gm <- gpu_mem_peak(mem)
    options(old)
    if (inherits(cv, "error")) {
      add(workload = paste(what, "- streamed"), backend = "gpu", threads = NA, seconds = NA, wall = round(wall, 1),
          reference = "", note = paste("error:", conditionMessage(cv)))
    } else {
      add(workload = sprintf("%s, network streamed from the host (device budget %g GB)", what, stream_gb),
          backend = "gpu", threads = cv$threads, seconds = round(cv$seconds, 2), wall = round(wall, 1),
          reference = "graphs larger than device memory",
          note = sprintf("%d parts; device memory %.2f GiB; scores identical to the resident GPU run: %s",
                         cv$deviceParts, gm[2] - gm[1], identical(res_er$gpu$scores, cv$scores)))
    }
  }
  add(workload = paste(what, "- memory"), backend = "-", threads = NA, seconds = round(t_build, 1), wall = NA,
      reference = sprintf("input dgCMatrix %.2f GB; RSS before the runs %.2f GB, peak during them %.2f GB (+%.2f GB, %.2fx the input)",
                          input_gb, rss0, peak_rss_gb(), peak_rss_gb() - rss0, (peak_rss_gb() - rss0) / input_gb),
      note = "seconds = building the network (C generator)")
  rm(W, res_er, cv); invisible(gc())
}

# ---- the host colouring of the mouse-like network alone ----
if (section("colour")) {
  Wc <- er_graph(21151, 596, 3)
  for (th in unique(c(1L, resolveBackend("cpu")$threads))) {
    t <- min(replicate(5, system.time(sysbioGPU:::cosnet_colours(Wc, 1, th))[[3]]))
    cat(sprintf("# host colouring of the mouse-like network (%d colours), %d thread(s): %.4f s (best of 5)\n",
                max(sysbioGPU:::cosnet_colours(Wc, 1, th)), th, t))
  }
  rm(Wc)
}

# ---- 2. mouse-like: 21,151 nodes, degree 596, many classes, 5-fold CV ----
nm <- 21151; K <- env_num("COSNET_MOUSE_CLASSES", 1000); Kc <- env_num("COSNET_CPU_CLASSES", 32)
dev_sets <- Sys.getenv("COSNET_DEVICES")
if (section("mouse")) {
W <- er_graph(nm, 596, 3)
set.seed(4)
Y <- vapply(seq_len(K), function(k) { y <- numeric(nm); y[sample.int(nm, sample(50:500, 1))] <- 1; y }, numeric(nm))
if (nzchar(dev_sets) && gpu) {
  # 1 -> several GPUs: the same CV on each device set; seconds = the
  # engine's (all devices together), wall adds the folds and metrics in R
  sets <- lapply(strsplit(strsplit(dev_sets, ";")[[1]], ","), as.integer)
  # One whole call first, kept as the reference of every set's result.
  # Every timed call then starts from the same heap (this result, W and Y
  # live, nothing else, collected): R's garbage collection depends on what
  # the heap holds, and a timed call that held one result more or less
  # than another took 0.1-0.25 s more or less in R (two H200s' host), which
  # is no property of the device set.
  first <- cvParCosnet(W, Y, nfolds = 5, seed = 1, backend = "gpu", device = sets[[1]], verbose = FALSE)
  ref <- NULL
  for (ds in sets) {
    # warm-up: CUDA contexts of all devices of the set
    invisible(cvParCosnet(W, Y[, 1:2], nfolds = 5, seed = 1, backend = "gpu", device = ds, verbose = FALSE))
    cv <- NULL
    invisible(gc())
    wall <- system.time(cv <- cvParCosnet(W, Y, nfolds = 5, seed = 1, backend = "gpu", device = ds,
                                          verbose = FALSE))[[3]]
    if (is.null(ref)) ref <- list(seconds = cv$seconds, wall = wall, n = length(ds))
    sp <- ref$seconds / cv$seconds
    add(workload = sprintf("mouse-like n=%d deg=596, %d classes, 5-fold CV, GPU(s) %s", nm, K,
                           paste(ds, collapse = ",")),
        backend = "gpu", threads = cv$threads, seconds = round(cv$seconds, 2), wall = round(wall, 2),
        reference = sprintf("%d device(s); speed-up %.2fx (wall %.2fx), efficiency %.2f vs GPU(s) %s",
                            length(ds), sp, ref$wall / wall, sp / (length(ds) / ref$n),
                            paste(sets[[1]], collapse = ",")),
        note = sprintf("identical to the first set: %s",
                       identical(cv$scores, first$scores) && identical(cv$jobs, first$jobs) &&
                         identical(cv$metrics, first$metrics)))
  }
  # COSNET_STAGES=1: the R side's stages of the last set's call, each
  # timed alone on the same input (wall - engine is about their sum plus
  # R's garbage collection)
  if (Sys.getenv("COSNET_STAGES") == "1") {
    ns <- asNamespace("sysbioGPU")
    stage <- function(label, expr) {
      t <- system.time(v <- expr)[[3]]
      cat(sprintf("# R side stage %-26s %.3f s\n", label, t))
      v
    }
    th <- cv$threads
    W2 <- stage("network check", ns$as_cosnet_network(W, FALSE, threads = th))
    lab <- stage("labels", ns$as_cosnet_labels(Y, W2, threads = th))
    lsum <- stage("label summary", ns$cosnet_label_summary(lab, th))
    folds <- stage("folds", ns$cosnet_folds(lab, 5L, 1, th))
    invisible(stage("metrics", ns$cosnet_cv_metrics(lab, folds, cv$predictions, cv$scores, 5L, th)))
    invisible(stage("garbage collection", gc()))
    rm(W2, lab, lsum, folds)
  }
  rm(first, cv)
  backends_mouse <- character(0)
} else {
  backends_mouse <- backends
}
for (be in backends_mouse) {
  kk <- if (be == "cpu") min(Kc, K) else K
  wall <- system.time(cv <- cvParCosnet(W, Y[, seq_len(kk)], nfolds = 5, seed = 1, backend = be,
                                        verbose = FALSE))[[3]]
  add(workload = sprintf("mouse-like n=%d deg=596, %d classes, 5-fold CV", nm, K), backend = be,
      threads = cv$threads,
      seconds = round(cv$seconds * K / kk, 2), wall = round(wall * K / kk, 2),
      reference = "paper: 0.28 s/class with 12 threads, ~260 s for 930 classes",
      note = if (kk < K) sprintf("measured %.2f s on %d classes, scaled", cv$seconds, kk)
             else sprintf("%.4f s/class, colours %d", cv$seconds / K, cv$nColours))
}
rm(W, Y); invisible(gc())
}

# ---- 3. CPU against Bioconductor COSNet (yeast-like graph) ----
peer <- "COSNet"
if (section("peer") && Sys.getenv("COSNET_PEER") == "1" && requireNamespace(peer, quietly = TRUE)) {
  cosnet_cv <- getExportedValue(peer, "cosnet.cross.validation")
  ny <- 6391
  W <- er_graph(ny, 314, 5)
  Wd <- as.matrix(W); dimnames(Wd) <- list(paste0("g", 1:ny), paste0("g", 1:ny))
  set.seed(6)
  y <- numeric(ny); y[sample.int(ny, 120)] <- 1
  lab <- matrix(ifelse(y > 0, 1, -1), ncol = 1, dimnames = list(rownames(Wd), "c1"))
  # ours per class: 20 classes in one call (the colouring is shared)
  Yc <- cbind(y, vapply(1:19, function(k) { z <- numeric(ny); z[sample.int(ny, 120)] <- 1; z }, numeric(ny)))
  # COSNet and ours in turn, `reps` times, so that both see the same
  # machine load; medians of the per-round ratios (wall: elapsed; CPU:
  # user + system seconds of the R process)
  reps <- env_num("COSNET_PEER_REPS", 5)
  m <- NULL
  for (r in seq_len(reps)) {
    load1 <- tryCatch(as.numeric(strsplit(readLines("/proc/loadavg"), " ")[[1]][1]), error = function(e) NA)
    sp <- system.time(utils::capture.output(cosnet_cv(lab, Wd, nfolds = 5, cost = 0)))
    so <- system.time(cv <- cvParCosnet(W, Yc, nfolds = 5, seed = 1, backend = "cpu", verbose = FALSE))
    s1 <- system.time(cv1 <- cvParCosnet(W, y, nfolds = 5, seed = 1, backend = "cpu", verbose = FALSE))
    m <- rbind(m, c(load = load1, peer = sp[[3]], peer_cpu = sp[[1]] + sp[[2]], eng = cv$seconds / ncol(Yc),
                    wall = so[[3]] / ncol(Yc), cpu = (so[[1]] + so[[2]]) / ncol(Yc), one = s1[[3]],
                    one_cpu = s1[[1]] + s1[[2]]))
  }
  med <- function(x) stats::median(x)
  add(workload = "yeast-like n=6391 deg=314, 5-fold CV, seconds per class", backend = "cpu",
      threads = cv$threads, seconds = round(med(m[, "eng"]), 4), wall = round(med(m[, "wall"]), 4),
      reference = sprintf("COSNet %.2f s per class (median of %d runs, %.2f-%.2f; same machine, graph and folds' sizes)",
                          med(m[, "peer"]), reps, min(m[, "peer"]), max(m[, "peer"])),
      note = sprintf(paste("medians of %d rounds: %.0fx faster (engine), %.0fx wall, %.0fx in CPU seconds",
                           "(COSNet %.2f s, ours %.4f s); 20 classes in one call; one class alone %.3f s wall,",
                           "%.0fx wall, %.0fx CPU; load average %.1f-%.1f"),
                     reps, med(m[, "peer"] / m[, "eng"]), med(m[, "peer"] / m[, "wall"]),
                     med(m[, "peer_cpu"] / m[, "cpu"]), med(m[, "peer_cpu"]), med(m[, "cpu"]),
                     med(m[, "one"]), med(m[, "peer"] / m[, "one"]), med(m[, "peer_cpu"] / m[, "one_cpu"]),
                     min(m[, "load"], na.rm = TRUE), max(m[, "load"], na.rm = TRUE)))
}

tab <- do.call(rbind, rows)
cat(sprintf("parCosnet benchmark, %s; device: %s, CPU threads available: %d\n",
            sysbioGPU:::benchMachine(), dev, resolveBackend("cpu")$threads))
print(tab, row.names = FALSE, right = FALSE)
