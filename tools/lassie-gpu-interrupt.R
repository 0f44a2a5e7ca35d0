# Ctrl-C latency of lassieSimulate's implicit steps on the GPU:
# Chen 1,000 sets (method "bdf") and Haugh2b 320,000 sets (method "auto"),
# SIGINT half-way through a run (half of an uninterrupted run's time, so
# that the signal lands inside the call on any card); prints the seconds
# from the signal to the classed error.
#   Rscript tools/lassie-gpu-interrupt.R   (on the GPU machine)
library(sysbioGPU)
set.seed(1)
lat <- function(label, m, tt, K, method) {
  run <- function() lassieSimulate(m, tt, rates = K, method = method, backend = "gpu", verbose = FALSE,
                                   output = "array")
  invisible(lassieSimulate(m, tt, rates = K[1:2, , drop = FALSE], method = method, backend = "gpu", verbose = FALSE))
  after <- system.time(run())[["elapsed"]] / 2
  system2("sh", c("-c", shQuote(sprintf("sleep %.3f; kill -INT %d", after, Sys.getpid()))), wait = FALSE)
  t0 <- Sys.time()
  cls <- tryCatch({ run(); "finished" }, interrupt = function(e) "interrupt", error = function(e) class(e)[1])
  el <- as.numeric(difftime(Sys.time(), t0, units = "secs"))
  # a signal that comes after a call that finished early lands here, not
  # in the next call
  tryCatch(Sys.sleep(max(0, after - el) + 0.5), interrupt = function(e) NULL)
  cat(sprintf("%s: %s after %.3f s, signal at %.3f s, latency %.3f s\n", label, cls, el, after, el - after))
}
m <- readSBML(system.file("extdata", "lassie", "Chen2009_ErbB_A431.xml.gz", package = "sysbioGPU"))
K <- t(replicate(1000, m$rates * 2^runif(length(m$rates), -1, 1)))
for (i in 1:3) lat("Chen 1000 bdf", m, seq(0, 3600, by = 60), K, "bdf")
m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
K <- t(replicate(320000, m$rates * 2^runif(length(m$rates), -1, 1)))
for (i in 1:2) lat("Haugh2b 320000 auto", m, seq(0, 50, by = 1), K, "auto")
