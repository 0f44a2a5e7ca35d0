# Benchmark of rapidGSEA() on the rapidGSEA paper's workload (Hundt et al.
# 2016, Table 2): 20,639 genes x 200 samples (183 vs 17; synthetic normal
# data), MSigDB v5.0 C2 (4,725 sets) and hallmark (50 sets) mapped onto the
# synthetic genes, signal2noise, q = 1, full statistics, timed from the R
# call to the returned table.  Prints one table row per run.
#
#   Rscript inst/bench/gsea.R                      # defaults below
#   SBG_BENCH_GSEA="c2:10,12,14 h:10,14" SBG_BENCH_BACKEND=cpu Rscript inst/bench/gsea.R
#   SBG_BENCH_DEVICES="0;0,1" Rscript inst/bench/gsea.R   # 1 GPU, then 2 GPUs
#   SBG_BENCH_GSEA=none SBG_BENCH_PRERANKED=10000 FGSEA_LIB=/tmp/fgsea-lib Rscript inst/bench/gsea.R
#   SBG_BENCH_GSEA=none SBG_BENCH_MULTISIG=20 SBG_BENCH_MULTISIG_LOOP=1 FGSEA_LIB=/tmp/fgsea-lib Rscript inst/bench/gsea.R
#   SBG_BENCH_GSEA=none SBG_BENCH_MULTILEVEL=101,151,201,301 SBG_BENCH_REPS=5 FGSEA_LIB=/tmp/fgsea-lib Rscript inst/bench/gsea.R
#   SBG_BENCH_GSEA=none SBG_BENCH_MULTILEVEL=101,151,201,301 SBG_BENCH_ML_VS_FGSEA=0 SBG_BENCH_ML_TOP=10 Rscript inst/bench/gsea.R
#   SBG_BENCH_GSEA=none SBG_BENCH_OVERHEAD=5 Rscript inst/bench/gsea.R   # the time outside the engine
#
# The preranked section (SBG_BENCH_PRERANKED = nperm) compares
# rapidGSEA with fgsea on C2 (sets of 15-500 genes) on its own genes, a
# random preranked list, the same threads (SBG_BENCH_THREADS, default 2),
# runs interleaved (SBG_BENCH_REPS rounds; SBG_BENCH_PRERANKED_CHECK=1 then
# checks that the CPU gives the same table); then multilevel p-values
# (eps = 0) against fgsea::fgsea() on a list with planted signal, with the
# agreement of the p-values below 1e-6.  fgsea is not in Debian: it is
# used when installed (in FGSEA_LIB or the default library) and skipped
# otherwise; this script never builds it.
# The multilevel part alone: SBG_BENCH_MULTILEVEL (our sample sizes), see
# its comment below; SBG_BENCH_ML_TOP: p of the top genes against the
# exact answer.
#
# The MSigDB files are benchmark inputs only and are never shipped: set
# SBG_GSEA_MSIGDB to a folder holding MSigDB v5.0's h.v5.gmt and c2.v5.gmt
# (gene symbols: h.all.v5.0.symbols.gmt and c2.all.v5.0.symbols.gmt from
# https://www.gsea-msigdb.org/gsea/downloads_archive.jsp, renamed; the
# cudaGSEA repository, https://github.com/gravitino/cudaGSEA, has them
# too).  MSigDB's terms allow their use in benchmarks only.
suppressMessages(library(sysbioGPU))

backend <- Sys.getenv("SBG_BENCH_BACKEND", "auto")
# device sets to compare, ";"-separated (each a ","-separated list or "all")
device_sets <- lapply(strsplit(Sys.getenv("SBG_BENCH_DEVICES", "0"), ";")[[1L]], function(d) {
  if (d == "all") "all" else as.integer(strsplit(d, ",")[[1L]])
})
spec <- Sys.getenv("SBG_BENCH_GSEA", if (hasGPU()) "h:10,14,16,18,20 c2:10,14,16,18" else "h:10,12 c2:10")
dir <- Sys.getenv("SBG_GSEA_MSIGDB")
if (!nzchar(dir) || !all(file.exists(file.path(dir, c("h.v5.gmt", "c2.v5.gmt"))))) {
  message("inst/bench/gsea.R needs MSigDB v5.0's H and C2 collections: set SBG_GSEA_MSIGDB to ",
          "a folder holding h.v5.gmt and c2.v5.gmt (h.all.v5.0.symbols.gmt and ",
          "c2.all.v5.0.symbols.gmt from https://www.gsea-msigdb.org/gsea/downloads_archive.jsp, ",
          "renamed). They are not shipped: MSigDB's licence does not allow it.")
  quit(save = "no", status = 1)
}

c2 <- readGMT(file.path(dir, "c2.v5.gmt"))
h <- readGMT(file.path(dir, "h.v5.gmt"))
# 20,639 synthetic genes named after the most used symbols of H and C2
freq <- sort(table(c(unlist(h), unlist(c2))), decreasing = TRUE)
genes <- unique(c(unique(unlist(h)), names(freq)))[1:20639]
set.seed(2016)
# held to 9 significant digits, so that the GCT file written for cudaGSEA
# (below) holds the numbers that rapidGSEA gets (to a unit in the last place)
x <- signif(matrix(rnorm(20639 * 200), 20639, dimnames = list(genes, NULL)), 9)
y <- rep(c("MDS", "control"), c(183, 17))

# The paper's reference times (seconds): rapidGSEA on a GTX Titan X and on a
# 10-core Xeon E5-2660 v3, Table 2.
paper <- list(
  h = c(`10` = 1.6, `12` = 1.9, `14` = 3.1, `16` = 8.3, `18` = 28.2, `20` = 105.2),
  c2 = c(`10` = 10.3, `12` = 20.8, `14` = 61.9, `16` = 214.0, `18` = 895.9, `20` = 3447.3))
paper_cpu <- list(
  h = c(`10` = 3.0, `12` = 7.0, `14` = 22.7, `16` = 85.8, `18` = 339.4, `20` = 1357.8),
  c2 = c(`10` = 89.3, `12` = 282.9, `14` = 1084.8, `16` = 4266.2, `18` = 17069.0, `20` = 68682.3))

# SBG_BENCH_BUDGET (seconds): skip a run whose time, extrapolated linearly
# in nperm from the previous run of the same collection, would not fit.
budget <- as.numeric(Sys.getenv("SBG_BENCH_BUDGET", "Inf"))
t_bench <- proc.time()[["elapsed"]]

# ---- cudaGSEA side by side ----
# CUDAGSEA_BIN: the command-line program of cudaGSEA (gravitino/cudaGSEA,
# the paper's code), built by tools/build-cudagsea.sh; this script never
# builds it. When set, cudaGSEA runs on the same x, y and C2 (written once
# as GCT, CLS and GMT files) for each C2 row whose nperm is 2^e with e in
# CUDAGSEA_SIZES (default "10,14,16,18,20"), on that row's device (-gpu, or -cpu for CPU
# rows, its OpenMP path on as many threads as ours), with its defaults
# (single precision, onepass_signal2noise).
# cudaGSEA_s is the wall clock of its process; cudaGSEA_own_s its own
# "overall" timing (GPU rows; it starts after CUDA's set-up and includes
# reading the files). Its runs count against SBG_BENCH_BUDGET: one is
# skipped when the time expected from its previous runs (affine in nperm)
# does not fit. At its first size its observed ES are checked against ours
# with diff_of_classes (its signal2noise takes the biased standard
# deviation without Broad's fix-low rule, so only class differences rank
# alike), both sides run at nperm 2^10 (or the size, if smaller): the
# observed ES do not depend on nperm, and cudaGSEA writes every
# permutation's ES to its dump (4,725 x 2^20 doubles are 40 GB).
# Without CUDAGSEA_BIN the column shows cudaGSEA's times measured once on
# an H200 with CUDAGSEA_BIN set: cited, not measured by this run.
cg_bin <- Sys.getenv("CUDAGSEA_BIN", "")
if (nzchar(cg_bin) && !file_test("-x", cg_bin)) stop("CUDAGSEA_BIN: '", cg_bin, "' is not an executable file")
cg_sizes <- as.integer(strsplit(Sys.getenv("CUDAGSEA_SIZES", "10,14,16,18,20"), ",")[[1L]])
cg_cited <- c(`10` = 5.9, `14` = 7.8, `16` = 16.2, `20` = 180.8)
cg_dir <- NULL
cg_runs <- list()  # by "e where": list(s, own, src)
cg_hist <- data.frame(n = numeric(), t = numeric())
cg_failed <- FALSE  # after a failed run it is not tried again

# The benchmark's inputs in the formats cudaGSEA reads (once).
cg_files <- function() {
  if (is.null(cg_dir)) {
    cg_dir <<- tempfile("cudagsea-")
    dir.create(cg_dir)
    vals <- matrix(sprintf("%.9g", x), nrow(x))
    writeLines(c("#1.2", sprintf("%d\t%d", nrow(x), ncol(x)),
                 paste(c("NAME", "Description", sprintf("s%d", seq_len(ncol(x)))), collapse = "\t"),
                 do.call(paste, c(list(rownames(x), "na"), as.data.frame(vals), sep = "\t"))),
               file.path(cg_dir, "x.gct"))
    writeLines(c(sprintf("%d 2 1", length(y)), paste("#", paste(unique(y), collapse = " ")),
                 paste(y, collapse = " ")), file.path(cg_dir, "y.cls"))
    writeGMT(c2, file.path(cg_dir, "c2.gmt"))
  }
  stats::setNames(file.path(cg_dir, c("x.gct", "y.cls", "c2.gmt")), c("gct", "cls", "gmt"))
}

# One cudaGSEA run: wall and own seconds and its table (set, ES, NES, NP,
# FWER), or NULL (and the end of its output) when it fails.
cg_run <- function(nperm, where, extra = character()) {
  # CPU rows: its OpenMP path on as many threads as ours
  env <- if (where[[1L]] == "-cpu") sprintf("OMP_NUM_THREADS=%d", resolveBackend("cpu")$threads) else character()
  f <- cg_files()
  log <- file.path(cg_dir, "run.log")
  args <- c("-res", shQuote(f[["gct"]]), "-cls", shQuote(f[["cls"]]), "-gmx", shQuote(f[["gmt"]]),
            "-nperm", format(nperm, scientific = FALSE), where, extra)
  t0 <- proc.time()[["elapsed"]]
  rc <- suppressWarnings(system2(cg_bin, args, stdout = log, stderr = log, env = env))
  wall <- proc.time()[["elapsed"]] - t0
  out <- readLines(log)
  res <- grep("^RESULT:", out, value = TRUE)
  if (rc != 0 || length(res) != length(c2)) {
    cat(sprintf("cudaGSEA %s failed (exit status %d, %d of %d results); the end of its output:\n",
                paste(where, collapse = " "), rc, length(res), length(c2)))
    writeLines(utils::tail(out, 15))
    return(NULL)
  }
  own <- regmatches(out, regexpr("(?<=^TIMING: )[0-9.eE+-]+(?= ms \\(overall\\))", out, perl = TRUE))
  fld <- do.call(rbind, regmatches(res, regexec("ES: (\\S+) NES: (\\S+) NP: (\\S+) FWER: (\\S+)\t\\((.*)\\)$", res)))
  tab <- data.frame(set = fld[, 6L], suppressWarnings(apply(fld[, 2:5], 2, as.numeric)))
  names(tab)[-1L] <- c("ES", "NES", "NP", "FWER")
  list(wall = wall, own = if (length(own) && where[[1L]] == "-gpu") as.numeric(own) / 1000 else NA_real_, tab = tab)
}

# cudaGSEA's observed ES with diff_of_classes, read at full precision from
# its dump (a sets x permutations table; permutation 0 is the identity).
cg_es <- function(nperm, where, precision) {
  dump <- file.path(cg_dir, paste0("es-", precision))
  r <- cg_run(nperm, where, c("-metric", "stable_diff_of_classes", "-precision", precision, "-dump", shQuote(dump)))
  if (is.null(r)) return(NULL)
  bits <- if (precision == "single") 32L else 64L
  es <- readBin(sprintf("%s_%d_%d_%d.es", dump, length(c2), nperm, bits), "numeric", size = bits %/% 8L,
                n = length(c2) * nperm)
  r$es <- stats::setNames(es[(seq_along(c2) - 1) * nperm + 1], names(c2))
  r
}

# Sanity check at cudaGSEA's first size: its ES against ours with
# diff_of_classes, in its single and double precision; then the timed
# signal2noise run's ES, which differ by its biased sd.
cg_check <- function(nperm, where, dev, s2n_ours, s2n_cg) {
  ours <- rapidGSEA(x, y, c2, nperm = nperm, metric = "diff_of_classes", minSize = 1, maxSize = 20638, seed = 1,
                    backend = backend, device = dev, verbose = FALSE)
  for (prec in c("single", "double")) {
    r <- cg_es(nperm, where, prec)
    if (is.null(r)) next
    d <- abs(ours$ES - r$es[ours$set])
    cat(sprintf(paste0("cudaGSEA check, diff_of_classes, %s precision, nperm %d: %d sets, max |ES diff| %.3g (%s),",
                       " %d sets beyond 1e-6; NES correlation %.4f\n"),
                prec, nperm, length(d), max(d), ours$set[which.max(d)], sum(d > 1e-6),
                stats::cor(ours$NES, r$tab$NES[match(ours$set, r$tab$set)], use = "complete.obs")))
  }
  cat(sprintf(paste0("  (a set beyond 1e-6 in single precision: two genes whose float metrics swap ranks, a step of about 1/N = %.2g;",
                     " cudaGSEA's NES divides by the mean |ES| over all permutations, the observed included)\n"),
              1 / nrow(x)))
  d2 <- abs(s2n_ours$ES - s2n_cg$ES[match(s2n_ours$set, s2n_cg$set)])
  cat(sprintf("cudaGSEA check, signal2noise (the timed run): max |ES diff| %.3g, median %.3g (its biased sd ranks otherwise)\n",
              max(d2), stats::median(d2)))
}

# cudaGSEA's time for a C2 row of rapidGSEA result `res` at nperm 2^e.
cg_measure <- function(nm, e, res, dev) {
  none <- list(s = NA_real_, own = NA_real_, src = NA_character_)
  gpu <- attr(res, "backend") == "gpu"
  if (nm != "c2") return(none)
  if (!nzchar(cg_bin)) {
    if (!gpu || !(as.character(e) %in% names(cg_cited))) return(none)
    return(list(s = cg_cited[[as.character(e)]], own = NA_real_, src = "CITED: H200"))
  }
  if (!(e %in% cg_sizes) || cg_failed) return(none)
  where <- if (gpu) c("-gpu", attr(res, "device")[[1L]]) else "-cpu"
  key <- paste(e, paste(where, collapse = " "))
  if (!is.null(cg_runs[[key]])) return(cg_runs[[key]])
  k <- nrow(cg_hist)
  want <- if (k == 0L) 0 else if (k == 1L) cg_hist$t[[1L]] * 2^e / cg_hist$n[[1L]] else
    cg_hist$t[[k]] + (cg_hist$t[[k]] - cg_hist$t[[k - 1L]]) / (cg_hist$n[[k]] - cg_hist$n[[k - 1L]]) * (2^e - cg_hist$n[[k]])
  left <- budget - (proc.time()[["elapsed"]] - t_bench)
  if (want > left) {
    cat(sprintf("skipped cudaGSEA 2^%d: about %.0f s expected, %.0f s of budget left\n", e, want, left))
    return(none)
  }
  r <- cg_run(2^e, where)
  if (is.null(r)) {
    cg_failed <<- TRUE
    return(none)
  }
  if (k == 0L) cg_check(min(2^e, 2^10), where, dev, res, r$tab)
  cg_hist[k + 1L, ] <<- c(2^e, r$wall)
  cg_runs[[key]] <<- list(s = round(r$wall, 2), own = round(r$own, 2), src = paste("measured,", paste(where, collapse = " ")))
  cg_runs[[key]]
}

rows <- list()
first_tab <- list()
for (dev in if (spec == "none") list() else device_sets) {
  for (part in strsplit(spec, " ")[[1L]]) {
    nm <- sub(":.*", "", part)
    sets <- if (nm == "h") h else c2
    last <- NULL
    for (e in as.integer(strsplit(sub(".*:", "", part), ",")[[1L]])) {
      left <- budget - (proc.time()[["elapsed"]] - t_bench)
      if (!is.null(last) && last[["t"]] * 2^(e - last[["e"]]) > left) {
        cat(sprintf("skipped %s 2^%d: about %.0f s expected, %.0f s of budget left\n", nm, e,
                    last[["t"]] * 2^(e - last[["e"]]), left))
        next
      }
      gc()
      mem0 <- sum(gc()[, 2])
      res <- rapidGSEA(x, y, sets, nperm = 2^e, minSize = 1, maxSize = 20638, seed = 1,
                       backend = backend, device = dev, verbose = FALSE)
      st <- attr(res, "stageTime")
      tabref <- if (attr(res, "backend") == "gpu") paper[[nm]] else paper_cpu[[nm]]
      ref <- if (as.character(e) %in% names(tabref)) tabref[[as.character(e)]] else NA_real_
      cg <- cg_measure(nm, e, res, dev)
      rows[[length(rows) + 1L]] <- data.frame(
        sets = sprintf("%s (%d)", toupper(nm), nrow(res)), nperm = sprintf("2^%d", e),
        backend = attr(res, "backend"),
        device = if (attr(res, "backend") == "gpu") attr(res, "deviceName") else sprintf("%d threads", resolveBackend("cpu")$threads),
        gpus = if (attr(res, "backend") == "gpu") length(attr(res, "device")) else 0L,
        seconds = round(attr(res, "time"), 2), pass1 = round(st[[1]], 2), pass2 = round(st[[2]], 2),
        stats = round(st[[3]], 2), paper_s = ref, speedup = round(ref / attr(res, "time"), 1),
        cudaGSEA_s = cg$s, cudaGSEA_own_s = cg$own, vs_cudaGSEA = round(cg$s / attr(res, "time"), 1),
        cudaGSEA = cg$src)
      print(rows[[length(rows)]], row.names = FALSE)
      # every device set must give the first one's table, bit for bit
      key <- paste(nm, e)
      cols <- c("ES", "NES", "pval", "FDR", "FWER")
      if (is.null(first_tab[[key]])) {
        first_tab[[key]] <- as.data.frame(res)[cols]
      } else {
        cat(sprintf("%s 2^%d on device(s) %s: table identical to the first device set's: %s\n", toupper(nm), e,
                    paste(dev, collapse = ","), identical(as.data.frame(res)[cols], first_tab[[key]])))
      }
      last <- c(t = attr(res, "time"), e = e)
    }
  }
}
if (length(rows)) {
tab <- do.call(rbind, rows)
cat("\nrapidGSEA benchmark (paper workload; paper_s = rapidGSEA paper Table 2: Titan X for GPU rows, 10-core Xeon for CPU rows)\n")
if (nzchar(cg_bin)) {
  cat("cudaGSEA_s: cudaGSEA run by this script on the same data and device (wall clock of its process, reading a",
      if (is.null(cg_dir)) "GCT file);" else sprintf("%.0f MB GCT file);", file.size(file.path(cg_dir, "x.gct")) / 2^20),
      "cudaGSEA_own_s: its own overall timing; vs_cudaGSEA = cudaGSEA_s / seconds\n")
} else {
  cat("cudaGSEA_s: CITED, not measured by this run: cudaGSEA's times measured once on an H200 (2^10, 2^14, 2^16, 2^20);",
      "set CUDAGSEA_BIN to run it side by side\n")
}
print(tab, row.names = FALSE)
}

# ---- what a call spends outside its engine ----
# SBG_BENCH_OVERHEAD = runs (default 0: none): the C2 call's wall time
# minus the engine's stages, on the CPU backend at nperm 64 (the stages
# short, the rest R's), SBG_BENCH_THREADS threads, and the R steps before
# the engine timed alone (the matrix's checks, the sets' index); medians.
overhead_reps <- as.integer(Sys.getenv("SBG_BENCH_OVERHEAD", "0"))
if (overhead_reps > 0) {
  th <- as.integer(Sys.getenv("SBG_BENCH_THREADS", "2"))
  elapsed <- function(expr) {
    t0 <- proc.time()[["elapsed"]]
    force(expr)
    proc.time()[["elapsed"]] - t0
  }
  outside <- vapply(seq_len(overhead_reps), function(i) {
    t <- elapsed(r <- rapidGSEA(x, y, c2, nperm = 64, minSize = 1, seed = 1, backend = "cpu", threads = th,
                                verbose = FALSE))
    t - sum(attr(r, "stageTime"))
  }, 0)
  ns <- asNamespace("sysbioGPU")
  sets_t <- vapply(seq_len(overhead_reps), function(i) elapsed(ns$gsea_sets(c2, rownames(x), 1, Inf)), 0)
  data_t <- vapply(seq_len(overhead_reps), function(i) elapsed(ns$gsea_data(x)), 0)
  cat(sprintf("\nC2 call outside the engine's stages (CPU, %d threads, nperm 64): median %.3f s (%s)\n",
              th, stats::median(outside), paste(sprintf("%.3f", outside), collapse = " ")))
  cat(sprintf("the sets' index (C2): median %.3f s; the matrix's checks: median %.3f s\n",
              stats::median(sets_t), stats::median(data_t)))
}

# ---- preranked: rapidGSEA vs fgsea ----
pre_nperm <- as.numeric(Sys.getenv("SBG_BENCH_PRERANKED", "0"))
# multilevel sample sizes of ours to compare (","-separated); by default the
# one of rapidGSEA() when the preranked section runs, none otherwise
ml_sizes <- as.integer(strsplit(Sys.getenv("SBG_BENCH_MULTILEVEL",
                                           if (pre_nperm > 0) as.character(formals(rapidGSEA)$sampleSize) else ""),
                                ",")[[1L]])
# fgsea from the library FGSEA_LIB names (it is not in Debian), else an
# installed one; TRUE when it loads
load_fgsea <- function() {
  flib <- Sys.getenv("FGSEA_LIB", "")
  if (nzchar(flib)) requireNamespace("fgsea", lib.loc = flib, quietly = TRUE) else
    requireNamespace("fgsea", quietly = TRUE)
}
if (pre_nperm > 0 || length(ml_sizes)) {
  th <- as.integer(Sys.getenv("SBG_BENCH_THREADS", "2"))
  reps <- as.integer(Sys.getenv("SBG_BENCH_REPS", "2"))
  have_fgsea <- load_fgsea()
  pg <- unique(unlist(c2))
  set.seed(14)
  rk <- stats::setNames(rnorm(length(pg)), pg)
  pw <- c2[lengths(c2) >= 15 & lengths(c2) <= 500]
}
if (pre_nperm > 0) {
  cat(sprintf("\npreranked C2: %d genes, %d sets of 15-500 genes, nperm %d, %d threads, %s\n",
              length(pg), length(pw), pre_nperm, th, if (have_fgsea) paste("fgsea", utils::packageVersion("fgsea")) else "fgsea not installed: rapidGSEA only"))
  tm <- list(rapid = numeric(), fgseaSimple = numeric())
  for (i in seq_len(reps)) {
    if (have_fgsea) {
      tm$fgseaSimple[i] <- system.time(fs <- fgsea::fgseaSimple(pw, rk, nperm = pre_nperm, minSize = 15, maxSize = 500,
                                                                 nproc = th))[["elapsed"]]
    }
    tm$rapid[i] <- system.time(rg <- rapidGSEA(rk, geneSets = pw, nperm = pre_nperm, minSize = 15, maxSize = 500,
                                               pvalue = "permutation", # as fgseaSimple
                                               seed = i, backend = backend, threads = th, verbose = FALSE))[["elapsed"]]
  }
  pr <- data.frame(run = c("rapidGSEA", if (have_fgsea) "fgseaSimple"), backend = c(attr(rg, "backend"), if (have_fgsea) "cpu"),
                   seconds = c(stats::median(tm$rapid), if (have_fgsea) stats::median(tm$fgseaSimple)),
                   all = c(paste(round(tm$rapid, 2), collapse = " "), if (have_fgsea) paste(round(tm$fgseaSimple, 2), collapse = " ")))
  if (have_fgsea) {
    pr$ratio_to_fgseaSimple <- round(pr$seconds / pr$seconds[[2]], 3)
    m <- match(rg$set, fs$pathway)
    cat(sprintf("sets in both: %d of %d; max abs ES difference %.3g\n", sum(!is.na(m)), nrow(rg),
                max(abs(rg$ES - fs$ES[m]), na.rm = TRUE)))
  }
  print(pr, row.names = FALSE)
  # SBG_BENCH_PRERANKED_CHECK=1: the last run once more on the CPU (same
  # seed and threads); the two tables must be identical
  if (identical(Sys.getenv("SBG_BENCH_PRERANKED_CHECK"), "1")) {
    tc <- system.time(rc <- rapidGSEA(rk, geneSets = pw, nperm = pre_nperm, minSize = 15, maxSize = 500,
                                      seed = reps, backend = "cpu", threads = th, verbose = FALSE,
                                      pvalue = "permutation"))[["elapsed"]]
    cols <- c("set", "ES", "NES", "pval", "FDR", "FWER")
    cat(sprintf("same seed on the CPU (%d threads, %.2f s): table identical to the %s run: %s\n", th, tc,
                attr(rg, "backend"), identical(as.data.frame(rc)[cols], as.data.frame(rg)[cols])))
  }
  cat("load average at the end:", readLines("/proc/loadavg"), "\n")
}

# ---- multilevel p-values vs fgsea ----
# When fgsea is installed: a list with planted signal (the genes of 60
# random C2 sets shifted by +-0.8, so that sets reach p < 1e-6),
# rapidGSEA(pvalue = "multilevel", eps = 0) at each sample size of
# SBG_BENCH_MULTILEVEL vs fgsea::fgsea(eps = 0) with its defaults (samples
# of 101), 1,000 simple permutations on both sides, the same threads, runs
# interleaved (SBG_BENCH_REPS rounds; ours with seeds s, s + 1, ..., s =
# SBG_BENCH_ML_SEED, default 1).
# Agreement: the share of sets whose p is within a factor 2^1.5 of the
# reference's, by the reference's p.  A default fgsea run is as noisy as
# ours (log2 sd about 0.8 below 1e-8), so the reference is fgsea with a
# sample SBG_BENCH_ML_REF times larger (default 1001: log2 sd about a
# third), run once; 0 leaves it out (then fgsea's first default run).
# SBG_BENCH_ML_VS_FGSEA=0 skips this part.  Without fgsea (the GPU
# machine), ours alone on the same list: seconds at each sample size on
# SBG_BENCH_THREADS threads (the host's cores a GPU run leaves to it).
if (length(ml_sizes)) {
  # the planted-signal list of both parts below
  set.seed(15)
  rml <- rk
  pick <- sample(length(pw), 60)
  for (i in seq_along(pick)) rml[pw[[pick[[i]]]]] <- rml[pw[[pick[[i]]]]] + if (i <= 30) 0.8 else -0.8
}
if (length(ml_sizes) && !have_fgsea && Sys.getenv("SBG_BENCH_ML_VS_FGSEA") != "0") {
  # on a GPU machine the members' moves on the GPU too, interleaved with the
  # CPU runs of the same seeds; the two tables must be identical
  ml_backends <- c("cpu", if (hasGPU()) "gpu")
  for (n in ml_sizes) {
    tt <- matrix(NA_real_, reps, length(ml_backends), dimnames = list(NULL, ml_backends))
    same <- TRUE
    for (i in seq_len(reps)) {
      r <- list()
      for (b in ml_backends) {
        tt[i, b] <- system.time(r[[b]] <- rapidGSEA(
          rml, geneSets = pw, nperm = 1000, minSize = 15, maxSize = 500, pvalue = "multilevel", eps = 0,
          sampleSize = n, seed = i, backend = b, threads = th, verbose = FALSE))[["elapsed"]]
      }
      if (length(r) == 2L) same <- same && identical(r$cpu$pval, r$gpu$pval) && identical(r$cpu$log2err, r$gpu$log2err)
    }
    for (b in ml_backends) {
      cat(sprintf("multilevel p, C2 with planted signal, eps = 0, sampleSize %d, %s, %d host threads (fgsea absent): %.2f s (median of %s), %d sets with p < 1e-6\n",
                  n, toupper(b), th, stats::median(tt[, b]), paste(round(tt[, b], 2), collapse = " "),
                  sum(r[[b]]$pval < 1e-6)))
    }
    if (length(ml_backends) == 2L) {
      cat(sprintf("  GPU / CPU time %.3f; p and log2err identical on every seed: %s\n",
                  stats::median(tt[, "gpu"]) / stats::median(tt[, "cpu"]), same))
    }
  }
}
if (length(ml_sizes) && have_fgsea && Sys.getenv("SBG_BENCH_ML_VS_FGSEA") != "0") {
  ref_size <- as.integer(Sys.getenv("SBG_BENCH_ML_REF", "1001"))
  seed0 <- as.integer(Sys.getenv("SBG_BENCH_ML_SEED", "1"))
  ours_name <- sprintf("ours_%d", ml_sizes)
  tml <- stats::setNames(rep(list(numeric()), length(ml_sizes) + 1L), c(ours_name, "fgsea"))
  res <- stats::setNames(rep(list(list()), length(ml_sizes) + 1L), names(tml))
  for (i in seq_len(reps)) {
    tml$fgsea[i] <- system.time(res$fgsea[[i]] <- fgsea::fgsea(pw, rml, minSize = 15, maxSize = 500, eps = 0,
                                                               nproc = th))[["elapsed"]]
    for (j in seq_along(ml_sizes)) {
      tml[[ours_name[j]]][i] <- system.time(
        res[[ours_name[j]]][[i]] <- rapidGSEA(rml, geneSets = pw, nperm = 1000, minSize = 15, maxSize = 500,
                                              pvalue = "multilevel", eps = 0, sampleSize = ml_sizes[j], seed = seed0 + i - 1L,
                                              backend = "cpu", threads = th, verbose = FALSE))[["elapsed"]]
    }
    cat(sprintf("round %d: %s; load average %s\n", i,
                paste(sprintf("%s %.2f s", names(tml), vapply(tml, `[`, 0, i)), collapse = ", "),
                readLines("/proc/loadavg")))
  }
  sets <- res[[1L]][[1L]]$set
  fgsea_1 <- res$fgsea[[1L]]
  fgsea_rest <- res$fgsea[-1L]
  fgp <- function(r) r$pval[match(sets, r$pathway)]
  if (ref_size > 0) {
    tref <- system.time(fref <- fgsea::fgsea(pw, rml, minSize = 15, maxSize = 500, eps = 0, sampleSize = ref_size,
                                             nproc = th))[["elapsed"]]
    ref <- fgp(fref)
    ref_err <- fref$log2err[match(sets, fref$pathway)]
    ref_name <- sprintf("fgsea(sampleSize = %d)", ref_size)
    cat(sprintf("reference %s: %.1f s, median log2err %.2f for p < 1e-6; load average %s\n", ref_name, tref,
                stats::median(ref_err[ref < 1e-6], na.rm = TRUE), readLines("/proc/loadavg")))
  } else {
    ref <- fgp(res$fgsea[[1L]])
    ref_name <- "fgsea run 1"
  }
  # without a separate reference, fgsea's run 1 is left out of its own rows
  if (ref_size <= 0 && reps >= 2) res$fgsea <- res$fgsea[-1L]
  pv <- lapply(res, function(rs) lapply(rs, function(r) if (inherits(r, "rapidGSEA")) r$pval else fgp(r)))
  cat(sprintf("\nmultilevel p, C2 with planted signal (%d sets), eps = 0, %d threads; reference %s: %d sets with p < 1e-6, smallest %.2g\n",
              length(sets), th, ref_name, sum(ref < 1e-6, na.rm = TRUE), min(ref, na.rm = TRUE)))
  bands <- list(c(0, 1e-6), c(1e-15, 1e-6), c(0, 1e-15), c(1e-6, 1e-2))
  band_names <- c("< 1e-6", "1e-15 to 1e-6", "< 1e-15", "1e-6 to 1e-2")
  # share within 2^1.5 of b over all runs in `runs` (each a p vector), by
  # the band of `by`; with the lowest and highest share of one run
  agree <- function(runs, b, by = ref) {
    vapply(bands, function(bd) {
      s <- which(by < bd[2] & by >= bd[1])
      per <- vapply(runs, function(a) mean(abs(log2(a[s] / b[s])) <= 1.5), 0)
      sprintf("%5.1f%% (%d; %.0f-%.0f%%)", 100 * mean(per), length(s), 100 * min(per), 100 * max(per))
    }, "")
  }
  lo <- ref < 1e-6
  ag <- data.frame(ref_p = band_names)
  for (nm in names(pv)) ag[[paste0(nm, "_vs_ref")]] <- agree(pv[[nm]], ref)
  if (reps >= 2) {
    # two default estimates of each tool, by fgsea run 1's p: the noise of both counts
    f1 <- fgp(fgsea_1)
    ag$fgsea_vs_fgsea <- agree(lapply(fgsea_rest, fgp), f1, by = f1)
    for (nm in ours_name) ag[[paste0(nm, "_vs_fgsea1")]] <- agree(pv[[nm]], f1, by = f1)
  }
  cat(sprintf("  share of p within a factor 2^1.5 of the reference, mean over the %d runs (sets in the band; lowest-highest run):\n", reps))
  old <- options(width = 200)
  print(ag, row.names = FALSE)
  # bias and spread below 1e-6: median log2 ratio to the reference, its
  # observed sd, and the sd expected from both sides' log2err
  st <- do.call(rbind, lapply(names(pv), function(nm) {
    lr <- unlist(lapply(pv[[nm]], function(a) log2(a / ref)[lo]))
    err <- unlist(lapply(res[[nm]], function(r) {
      if (inherits(r, "rapidGSEA")) r$log2err[lo] else r$log2err[match(sets, r$pathway)][lo]
    }))
    data.frame(run = nm, median_log2_vs_ref = round(stats::median(lr, na.rm = TRUE), 2),
               mean_log2 = round(mean(lr, na.rm = TRUE), 2), sd_log2 = round(stats::sd(lr, na.rm = TRUE), 2),
               expected_sd = if (ref_size > 0) round(sqrt(mean(err^2 + ref_err[lo]^2, na.rm = TRUE)), 2) else NA,
               median_log2err = round(stats::median(err, na.rm = TRUE), 2),
               seconds = round(stats::median(tml[[nm]]), 2), all = paste(round(tml[[nm]], 2), collapse = " "))
  }))
  st$ratio_to_fgsea <- round(st$seconds / st$seconds[st$run == "fgsea"], 3)
  cat(sprintf("  sets with reference p < 1e-6, log2(p / reference) over all runs; times (s), median of %d, interleaved:\n", reps))
  print(st, row.names = FALSE)
  options(old)
  cat("load average at the end:", readLines("/proc/loadavg"), "\n")
}

# SBG_BENCH_ML_TOP = number of seeds (default 0: none): multilevel p of the
# top and bottom 15 genes of a list, where p is known: only those sets
# reach ES+ = 1, so P(ES+ >= ES) = 1 / choose(G, 15); P(ES >= 0) and
# P(ES <= 0) from 20,000 random sets scored here in plain R.  Two lists:
# the 8,000 rnorm genes of tests/testthat/test-gsea-multilevel.R's
# top-genes test and the random C2 list above (21,086 genes).
ml_top <- as.integer(Sys.getenv("SBG_BENCH_ML_TOP", "0"))
if (length(ml_sizes) && ml_top > 0) {
  set.seed(8)
  lists <- list(test_8000 = stats::setNames(sort(stats::rnorm(8000), decreasing = TRUE), paste0("g", 1:8000)),
                c2_random = sort(rk, decreasing = TRUE))
  for (ln in names(lists)) {
    r0 <- lists[[ln]]
    G <- length(r0)
    es_r <- function(p) { # Broad's ES of the set at 1-based rank positions p (ascending)
      w <- abs(r0[p]) / sum(abs(r0[p]))
      hi <- cumsum(w) - (p - seq_along(p)) / (G - 15)  # running sum at each hit
      lo <- hi - w                                     # just before it
      if (max(hi) >= -min(lo)) max(hi) else min(lo)
    }
    set.seed(16)
    es0 <- vapply(seq_len(20000), function(i) es_r(sort(sample.int(G, 15))), 0)
    exact <- 1 / choose(G, 15) / c(mean(es0 >= 0), mean(es0 <= 0))
    top <- list(top15 = names(r0)[1:15], bottom15 = names(r0)[(G - 14):G])
    cat(sprintf("
%s: top and bottom 15 of %d genes, exact p %.3g and %.3g; log2(p / exact) for seeds 1-%d, %d threads
",
                ln, G, exact[1], exact[2], ml_top, th))
    for (n in ml_sizes) {
      tt <- numeric()
      lr <- err <- NULL
      for (s in seq_len(ml_top)) {
        tt[s] <- system.time(a <- rapidGSEA(r0, geneSets = top, nperm = 1000, minSize = 15, eps = 0, sampleSize = n,
                                            seed = s, backend = "cpu", threads = th, verbose = FALSE))[["elapsed"]]
        lr <- cbind(lr, log2(a$pval / exact))
        err <- cbind(err, a$log2err)
      }
      cat(sprintf("  sampleSize %d: mean %.2f (sd %.2f, of %d), mean log2err %.2f, median %.1f s a run
    top: %s
    bottom: %s
",
                  n, mean(lr), stats::sd(as.vector(lr)), length(lr), mean(err), stats::median(tt),
                  paste(round(lr[1, ], 2), collapse = " "), paste(round(lr[2, ], 2), collapse = " ")))
    }
  }
}
# ---- many signatures in one call vs fgseaSimple looped ----
# SBG_BENCH_MULTISIG = number of signatures (random preranked lists on C2's
# own genes, sets of 15-500 genes), nperm SBG_BENCH_MULTISIG_NPERM (default
# 10,000), permutation p-values (as fgseaSimple), SBG_BENCH_THREADS threads
# on both sides: rapidGSEA(stats = <genes x signatures matrix>) in one call
# against fgsea::fgseaSimple() called once per signature, and (with
# SBG_BENCH_MULTISIG_LOOP=1) rapidGSEA called once per signature, whose
# tables must equal the one call's (SBG_BENCH_MULTISIG_CHECK = k: only the
# first k signatures' calls, untimed).  fgsea runs with the same nperm,
# sets and nproc (its BiocParallel workers) as our threads.  Prints the
# seconds, the seconds per signature, the ratio to fgsea, the largest ES
# difference from fgsea and the load average before and after.
ms_n <- as.integer(Sys.getenv("SBG_BENCH_MULTISIG", "0"))
if (ms_n > 0) {
  th <- as.integer(Sys.getenv("SBG_BENCH_THREADS", "2"))
  ms_nperm <- as.numeric(Sys.getenv("SBG_BENCH_MULTISIG_NPERM", "10000"))
  have_fgsea <- load_fgsea()
  pg <- unique(unlist(c2))
  pw <- c2[lengths(c2) >= 15 & lengths(c2) <= 500]
  set.seed(35)
  sig <- matrix(rnorm(length(pg) * ms_n), length(pg), dimnames = list(pg, paste0("sig", seq_len(ms_n))))
  cat(sprintf("\nmany signatures: %d signatures x C2 (%d genes, %d sets of 15-500 genes), nperm %d, %d threads, %s\n",
              ms_n, length(pg), length(pw), ms_nperm, th,
              if (have_fgsea) paste("fgsea", utils::packageVersion("fgsea")) else "fgsea not installed"))
  run1 <- function(st, seed = 1) rapidGSEA(stats = st, geneSets = pw, nperm = ms_nperm, minSize = 15, maxSize = 500,
                                           pvalue = "permutation", seed = seed, backend = backend, threads = th,
                                           verbose = FALSE)
  cat("load average before:", readLines("/proc/loadavg"), "\n")
  t_one <- system.time(rm <- run1(sig))[["elapsed"]]
  cat(sprintf("one call's stages: %s\n", paste(names(attr(rm, "stageTime")), round(attr(rm, "stageTime"), 2),
                                               sep = " ", collapse = " s, ")))
  ms_check <- as.integer(Sys.getenv("SBG_BENCH_MULTISIG_CHECK", "0"))
  if (ms_check > 0) {
    same <- all(vapply(seq_len(min(ms_check, ms_n)), function(j) {
      identical(as.data.frame(run1(sig[, j])), as.data.frame(gseaSignature(rm, j)))
    }, TRUE))
    cat(sprintf("the first %d signatures' tables identical to their own calls: %s\n", min(ms_check, ms_n), same))
  }
  ms <- data.frame(run = "rapidGSEA(stats = matrix), one call", backend = attr(rm, "backend"), signatures = ms_n,
                   seconds = t_one, stringsAsFactors = FALSE)
  if (identical(Sys.getenv("SBG_BENCH_MULTISIG_LOOP"), "1")) {
    same <- TRUE
    t_loop <- system.time(for (j in seq_len(ms_n)) {
      one <- run1(sig[, j])
      same <- same && identical(as.data.frame(one), as.data.frame(gseaSignature(rm, j)))
    })[["elapsed"]]
    ms <- rbind(ms, data.frame(run = "rapidGSEA looped", backend = attr(rm, "backend"), signatures = ms_n,
                               seconds = t_loop))
    cat("each signature's table identical to its own call:", same, "\n")
  }
  if (have_fgsea) {
    t_f <- system.time(fl <- lapply(seq_len(ms_n), function(j) {
      fgsea::fgseaSimple(pw, sig[, j], nperm = ms_nperm, minSize = 15, maxSize = 500, nproc = th)
    }))[["elapsed"]]
    ms <- rbind(ms, data.frame(run = "fgseaSimple looped", backend = "cpu", signatures = ms_n, seconds = t_f))
    d <- vapply(seq_len(ms_n), function(j) {
      r <- rm[rm$signature == colnames(sig)[[j]], ]
      f <- fl[[j]]
      max(abs(r$ES - f$ES[match(r$set, f$pathway)]))
    }, 0)
    cat(sprintf("ES: largest difference from fgsea over all signatures and sets %.3g\n", max(d)))
  }
  ms$per_signature <- ms$seconds / ms$signatures
  if (have_fgsea) ms$ratio_to_fgsea <- round(ms$seconds / ms$seconds[ms$run == "fgseaSimple looped"], 3)
  print(ms, row.names = FALSE)
  cat("load average at the end:", readLines("/proc/loadavg"), "\n")
}
hwm <- grep("^VmHWM", readLines("/proc/self/status"), value = TRUE)
cat("peak host memory of this R process:", sub("VmHWM:\\s*", "", hwm), "\n")
