#!/usr/bin/env Rscript
# Where a kernel's time goes between its block-wide barriers, from Nsight
# Compute's warp-state sampling per SASS instruction.  A kernel whose
# phases end at __syncthreads() (rapidGSEA's k_es_tile: gather, the tile's
# radix sort passes, the sets' running sums, the large sets' search) is
# cut at each BAR.SYNC; each phase gets its share of the samples (where
# warps were, issued or stalled), of the warp instructions executed, the
# average active threads of its instructions, and its most sampled
# instruction with that instruction's main stall reason.  A warp waiting
# at a barrier is sampled on the instruction after it, so a long wait
# shows as the first instruction of the next phase.
#
#   ncu --clock-control none -k regex:k_es_tile -c 1 --set full -o es \
#     Rscript inst/bench/gsea-profile.R        (NPERM=32768, one batch)
#   ncu -i es.ncu-rep --page source --csv --print-source sass > sass.csv
#   Rscript tools/sass-phases.R sass.csv [min-share, default 0.01]
args <- commandArgs(trailingOnly = TRUE)
if (!length(args)) stop("usage: Rscript tools/sass-phases.R <sass.csv> [min-share]", call. = FALSE)
min_share <- if (length(args) > 1) as.numeric(args[[2]]) else 0.01
lines <- readLines(args[[1]])
starts <- grep('^"Kernel Name"', lines)
if (!length(starts)) stop(args[[1]], ": no \"Kernel Name\" line (ncu --page source --csv --print-source sass)", call. = FALSE)
ends <- c(starts[-1] - 1L, length(lines))
num <- function(x) as.numeric(gsub(",", "", x))
for (k in seq_along(starts)) {
  kernel <- read.csv(text = lines[starts[[k]]], header = FALSE)[[2]]
  tab <- read.csv(text = lines[(starts[[k]] + 1L):ends[[k]]], check.names = FALSE)
  samples <- num(tab[["Warp Stall Sampling (All Samples)"]])
  winst <- num(tab[["Instructions Executed"]])
  tinst <- num(tab[["Thread Instructions Executed"]])
  stall_cols <- grep("^stall_.*[^)]$", names(tab), value = TRUE)
  src <- trimws(tab[["Source"]])
  phase <- cumsum(c(1L, head(grepl("BAR\\.SYNC", src), -1L)))
  cat(sprintf("\n%s: %d instructions, %.0f samples\n", kernel, nrow(tab), sum(samples)))
  cat(sprintf("%-11s %8s %8s %7s  %s\n", "phase", "samples", "w.instr", "threads", "most sampled instruction (main stall)"))
  for (p in unique(phase)) {
    i <- which(phase == p)
    top <- i[which.max(samples[i])]
    why <- vapply(stall_cols, function(s) num(tab[[s]][[top]]), 0)
    share <- sum(samples[i]) / sum(samples)
    if (share < min_share) next
    cat(sprintf("%5d-%-5d %7.1f%% %7.1f%% %7.1f  %s (%s)\n", min(i) - 1L, max(i) - 1L, 100 * share,
                100 * sum(winst[i]) / sum(winst), sum(tinst[i]) / max(sum(winst[i]), 1),
                substr(src[[top]], 1, 48), sub("^stall_", "", names(which.max(why)))))
  }
}
