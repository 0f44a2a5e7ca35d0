# The synthetic 2,048-species x 16,384-set workload (t 0-500, method
# "auto"; lassie.R's generator and LASSIE_SCALE_* sets), timed on the
# build that R_LIBS finds: run it once per build, on the same machine and
# GPU, to compare two builds of the engine.  Prints seconds from the R call and
# the engine's, best of LASSIE_SCALE_REPS (default 2) after a warm-up, the
# steps, and the sum of the final states (a check that the builds agree).
# LASSIE_SCALE_LABEL names the build in the output; LASSIE_SCALE_BATCH the
# sets (default 16384).
suppressPackageStartupMessages(library(sysbioGPU))
if (!hasGPU()) { cat("lassie-scale: no GPU, nothing to time\n"); quit(save = "no") }
here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1]))
ex <- parse(file.path(here, "lassie.R"))
eval(ex[[which(vapply(ex, function(e) length(e) == 3L && identical(e[[2L]], quote(synthetic)), TRUE))]])
num <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) as.numeric(x) else d }
m <- synthetic(2048, seed = 2048)
set.seed(13)
K <- t(replicate(num("LASSIE_SCALE_BATCH", 16384), m$rates * 2^runif(length(m$rates), -1, 1)))
tt <- c(0, 250, 500)
invisible(lassieSimulate(m, tt, rates = K[rep(1, 4), ], backend = "gpu", verbose = FALSE))
g <- function(x) if (is.null(x) || is.na(x)) NA_real_ else as.numeric(x)
for (i in seq_len(num("LASSIE_SCALE_REPS", 2))) {
  t0 <- proc.time()[["elapsed"]]
  r <- lassieSimulate(m, tt, rates = K, method = "auto", backend = "gpu", verbose = FALSE)
  s <- proc.time()[["elapsed"]] - t0
  st <- rowSums(sapply(r, function(o) attr(o, "stats")))
  # builds before the result objects in C kept the engine's seconds elsewhere
  el <- g(attr(r[[1]], "elapsed")); if (is.na(el)) el <- g(attr(r, "info")$seconds)
  cat(sprintf("%s: synthetic 2048 x %d, t 0-500, auto, %s: %.3f s (engine %.3f), steps %.0f, implicit %.0f, sum of final states %.10g\n",
              Sys.getenv("LASSIE_SCALE_LABEL", "this build"), nrow(K), gpuInfo()$name[1], s, el, g(st["steps"]),
              g(st["implicitSteps"]), sum(vapply(r, function(o) sum(o[3, -1]), 0))))
}
