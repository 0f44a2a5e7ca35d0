# Benchmark of parCosnet()/cvParCosnet() (issue: ParCOSNet, Frasca et al.
# 2018).  Rscript inst/bench/cosnet.R prints one table: workload, backend,
# seconds, and the paper's figure or the peer's time.
#   COSNET_ER_N, COSNET_ER_DEG   Erdos-Renyi nodes and mean degree
#                                (paper, Table 8: 1.5e6 and 300; default here
#                                5e5 and 50, what builds in R within the
#                                GPU check's time)
#   COSNET_MOUSE_CLASSES         classes of the mouse-like CV (default 1000)
#   COSNET_CPU_CLASSES           of them on the CPU (default 32; CPU time is
#                                scaled to all classes)
#   COSNET_PEER=1                also time Bioconductor COSNet (if installed)
#                                on a 6,391-node, degree-314 graph
suppressPackageStartupMessages({library(sysbioGPU); library(Matrix)})
env_num <- function(name, default) as.numeric(Sys.getenv(name, default))

# Random graph with mean degree `deg`: n * deg / 2 node pairs, U(0,1]
# weights, duplicates dropped, assembled directly as compressed columns.
er_graph <- function(n, deg, seed) {
  set.seed(seed)
  m <- round(n * deg / 2)
  a <- sample.int(n, m, replace = TRUE); b <- sample.int(n, m, replace = TRUE)
  keep <- a != b
  a <- a[keep]; b <- b[keep]
  i <- c(a, b); j <- c(b, a)
  x <- 1 - runif(length(a)); x <- c(x, x)
  key <- (as.double(j) - 1) * n + (i - 1)
  o <- order(key, method = "radix")
  key <- key[o]
  d <- c(FALSE, key[-1] == key[-length(key)])
  # a duplicated pair keeps one weight; both directions drop the same copy
  o <- o[!d]
  i <- i[o]; j <- j[o]; x <- x[o]
  rm(key, d, o, a, b)
  # make the two directions of a pair carry the same weight
  lo <- pmin(i, j); hi <- pmax(i, j)
  kk <- (as.double(lo) - 1) * n + hi
  x <- x[match(kk, kk)]
  p <- c(0L, cumsum(tabulate(j, n)))
  methods::new("dgCMatrix", i = as.integer(i - 1L), p = as.integer(p), x = x, Dim = as.integer(c(n, n)))
}

proc_gb <- function(field) {
  s <- readLines("/proc/self/status")
  as.numeric(gsub("[^0-9]", "", s[startsWith(s, field)])) / 2^20
}
peak_rss_gb <- function() proc_gb("VmHWM")
# Linux: writing 5 to clear_refs resets the peak, so that the peak of the
# runs alone can be read afterwards.
reset_peak <- function() invisible(tryCatch(writeLines("5", "/proc/self/clear_refs"), error = function(e) NULL))

rows <- list()
add <- function(...) {
  r <- data.frame(..., stringsAsFactors = FALSE)
  rows[[length(rows) + 1L]] <<- r
  cat("# ", paste(names(r), unlist(r), sep = ": ", collapse = " | "), "\n", sep = "")
}
gpu <- hasGPU()
backends <- c(if (gpu) "gpu", "cpu")
dev <- if (gpu) gpuInfo()$name[1] else "none"

# ---- 0. yeast STRING / FunCat (shipped), all classes, 5-fold CV ----
Wy <- readNetwork(system.file("extdata", "yeast-string-edges.txt.gz", package = "sysbioGPU"))
Yy <- readRDS(system.file("extdata", "yeast-funcat.rds", package = "sysbioGPU"))[rownames(Wy), ]
Yy <- Yy[, colSums(Yy) >= 20 & colSums(!Yy) >= 20]
res_y <- list()
for (be in backends) {
  cv <- cvParCosnet(Wy, Yy, nfolds = 5, normalize = TRUE, seed = 1, backend = be, verbose = FALSE)
  res_y[[be]] <- cv
  add(workload = sprintf("yeast STRING n=%d, %d FunCat classes, 5-fold CV", nrow(Wy), ncol(Yy)),
      backend = be, threads = cv$threads, seconds = round(cv$seconds, 3),
      reference = sprintf("mean F %.3f, AUPRC %.3f", mean(cv$metrics$F), mean(cv$metrics$AUPRC)),
      note = if (be == "cpu" && gpu) sprintf("GPU scores identical to CPU: %s",
                                             identical(res_y$gpu$scores, cv$scores)) else "")
}

# ---- 1. Erdos-Renyi, one class, one full 5-fold CV (paper Table 8) ----
n <- env_num("COSNET_ER_N", 5e5); deg <- env_num("COSNET_ER_DEG", 50)
t0 <- proc.time()[[3]]
W <- er_graph(n, deg, 1)
t_build <- proc.time()[[3]] - t0
set.seed(2)
y <- as.numeric(runif(n) < 0.01)
input_gb <- (length(W@x) * 12 + length(W@p) * 4) / 2^30
invisible(gc())
rss0 <- proc_gb("VmRSS")
reset_peak()
for (be in backends) {
  cv <- cvParCosnet(W, y, nfolds = 5, seed = 1, backend = be, verbose = FALSE)
  paper <- if (n == 5e5 && deg == 50) 45.3 else if (n == 1.5e6 && deg == 300) 609 else NA
  add(workload = sprintf("ER n=%g deg=%g (%.0fM stored), 1 class, 5-fold CV", n, deg, length(W@x) / 1e6),
      backend = be, threads = cv$threads, seconds = round(cv$seconds, 2),
      reference = if (is.na(paper)) "paper Table 8 (1 thread, GTX 980): n/a at this size"
                  else sprintf("paper Table 8: %.1f s", paper),
      note = sprintf("colours %d, sweeps %s, F %.3f", cv$nColours,
                     paste(range(cv$jobs$sweeps), collapse = "-"), cv$metrics$F))
}
add(workload = "ER input dgCMatrix / peak RSS of the R process", backend = "-", threads = NA,
    seconds = round(t_build, 1),
    reference = sprintf("input dgCMatrix %.2f GB; RSS before the runs %.2f GB, peak during them %.2f GB (+%.2f GB, %.2fx the input)",
                        input_gb, rss0, peak_rss_gb(), peak_rss_gb() - rss0, (peak_rss_gb() - rss0) / input_gb),
    note = "seconds = building the graph in R")
rm(W); invisible(gc())

# ---- 2. mouse-like: 21,151 nodes, degree 596, many classes, 5-fold CV ----
nm <- 21151; K <- env_num("COSNET_MOUSE_CLASSES", 1000); Kc <- env_num("COSNET_CPU_CLASSES", 32)
W <- er_graph(nm, 596, 3)
set.seed(4)
Y <- vapply(seq_len(K), function(k) { y <- numeric(nm); y[sample.int(nm, sample(50:500, 1))] <- 1; y }, numeric(nm))
for (be in backends) {
  kk <- if (be == "cpu") min(Kc, K) else K
  cv <- cvParCosnet(W, Y[, seq_len(kk)], nfolds = 5, seed = 1, backend = be, verbose = FALSE)
  add(workload = sprintf("mouse-like n=%d deg=596, %d classes, 5-fold CV", nm, K), backend = be,
      threads = cv$threads,
      seconds = round(cv$seconds * K / kk, 2),
      reference = "paper: 0.28 s/class with 12 threads, ~260 s for 930 classes",
      note = if (kk < K) sprintf("measured %.2f s on %d classes, scaled", cv$seconds, kk)
             else sprintf("%.4f s/class, colours %d", cv$seconds / K, cv$nColours))
}
rm(W, Y); invisible(gc())

# ---- 3. CPU against Bioconductor COSNet (yeast-like graph) ----
peer <- "COSNet"
if (Sys.getenv("COSNET_PEER") == "1" && requireNamespace(peer, quietly = TRUE)) {
  cosnet_cv <- getExportedValue(peer, "cosnet.cross.validation")
  ny <- 6391
  W <- er_graph(ny, 314, 5)
  Wd <- as.matrix(W); dimnames(Wd) <- list(paste0("g", 1:ny), paste0("g", 1:ny))
  set.seed(6)
  y <- numeric(ny); y[sample.int(ny, 120)] <- 1
  lab <- matrix(ifelse(y > 0, 1, -1), ncol = 1, dimnames = list(rownames(Wd), "c1"))
  tp <- system.time(utils::capture.output(cosnet_cv(lab, Wd, nfolds = 5, cost = 0)))[[3]]
  # ours per class: 20 classes in one call (the colouring is shared)
  Yc <- cbind(y, vapply(1:19, function(k) { z <- numeric(ny); z[sample.int(ny, 120)] <- 1; z }, numeric(ny)))
  cv <- cvParCosnet(W, Yc, nfolds = 5, seed = 1, backend = "cpu", verbose = FALSE)
  cv1 <- cvParCosnet(W, y, nfolds = 5, seed = 1, backend = "cpu", verbose = FALSE)
  per <- cv$seconds / ncol(Yc)
  add(workload = "yeast-like n=6391 deg=314, 5-fold CV, seconds per class", backend = "cpu",
      threads = cv$threads, seconds = round(per, 4),
      reference = sprintf("COSNet %.2f s per class (same machine, same graph)", tp),
      note = sprintf("%.0fx faster (20 classes in one call; one class alone: %.3f s, %.0fx)",
                     tp / per, cv1$seconds, tp / cv1$seconds))
}

tab <- do.call(rbind, rows)
cat(sprintf("parCosnet benchmark, %s UTC, device: %s, CPU threads available: %d\n",
            format(Sys.time(), tz = "UTC"), dev, resolveBackend("cpu")$threads))
print(tab, row.names = FALSE, right = FALSE)
