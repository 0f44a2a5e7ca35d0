# One rapidGSEA() call with phenotype permutations on MSigDB C2, the input
# and sets of inst/bench/gsea.R (20,639 genes x 200 samples, all 4,725
# sets), on the GPU, for a profiler to attribute the time to the kernels,
# e.g. (the card's own clocks, not the profiler's base clock)
#   SBG_GSEA_MSIGDB=<folder> NPERM=262144 ncu --clock-control none \
#     --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
#     Rscript inst/bench/gsea-profile.R
# SBG_GSEA_MSIGDB: a folder holding h.v5.gmt and c2.v5.gmt (see gsea.R);
# NPERM: permutations (default 16384); COEXP: a correlation in (0, 1)
# gives the genes of each C2 set of 20-500 members not in an earlier one
# a shared factor with that correlation (real data are co-expressed, so a
# set's ranks bunch together under a permutation; the genes of inst/bench/
# gsea.R are independent); WALKS: values of option sysbioGPU.gseaWalk,
# comma-separated ("def": unset, the default), a call each in this
# process.  Prints each call's seconds, the engine's stages (observed +
# pass 1, pass 2, statistics) and whether its table (ES, NES, p, FDR,
# FWER, rank at max) is identical to the first call's, with its MD5.
suppressMessages(library(sysbioGPU))
dir <- Sys.getenv("SBG_GSEA_MSIGDB")
if (!nzchar(dir) || !all(file.exists(file.path(dir, c("h.v5.gmt", "c2.v5.gmt"))))) {
  message("set SBG_GSEA_MSIGDB to a folder holding h.v5.gmt and c2.v5.gmt (see inst/bench/gsea.R)")
  quit(save = "no", status = 1)
}
if (!hasGPU()) { message("no GPU"); quit(save = "no", status = 1) }
c2 <- readGMT(file.path(dir, "c2.v5.gmt")); h <- readGMT(file.path(dir, "h.v5.gmt"))
freq <- sort(table(c(unlist(h), unlist(c2))), decreasing = TRUE)
genes <- unique(c(unique(unlist(h)), names(freq)))[1:20639]
set.seed(2016)
x <- signif(matrix(rnorm(20639 * 200), 20639, dimnames = list(genes, NULL)), 9)
y <- rep(c("MDS", "control"), c(183, 17))
rho <- as.numeric(Sys.getenv("COEXP", "0"))
if (rho > 0) {
  free <- stats::setNames(rep(TRUE, length(genes)), genes)
  for (s in c2[lengths(c2) >= 20 & lengths(c2) <= 500]) {
    m <- s[s %in% genes]
    m <- m[free[m]]
    if (length(m) < 10) next
    x[m, ] <- sqrt(rho) * matrix(rnorm(200), length(m), 200, byrow = TRUE) + sqrt(1 - rho) * x[m, ]
    free[m] <- FALSE
  }
  cat(sprintf("co-expressed: %d genes in blocks of one factor each, correlation %g\n", sum(!free), rho))
}
np <- as.numeric(Sys.getenv("NPERM", "16384"))
walks <- strsplit(Sys.getenv("WALKS", "def"), ",")[[1]]
cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
first <- NULL
for (w in walks) {
  options(sysbioGPU.gseaWalk = if (w == "def") NULL else as.numeric(w))
  t <- system.time(r <- rapidGSEA(x, y, c2, nperm = np, minSize = 1, maxSize = 20638, seed = 1, backend = "gpu",
                                  verbose = FALSE))
  f <- tempfile()
  saveRDS(r[cols], f, compress = FALSE)
  if (is.null(first)) first <- r[cols]
  cat(sprintf("C2 (%d sets), %g phenotype permutations, %s, gseaWalk %s: %.2f s (stages %s s), table %s the first's (MD5 %s)\n",
              nrow(r), np, resolveBackend("gpu")$deviceName, w, t[["elapsed"]],
              paste(sprintf("%.2f", attr(r, "stageTime")), collapse = ", "),
              if (identical(r[cols], first)) "identical to" else "DIFFERENT from", unname(tools::md5sum(f))))
  unlink(f)
}
