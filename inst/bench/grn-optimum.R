# The exact optimum of the mouse eye problem (E9 -> E10.5, 5 steps,
# lambda 0.9), the target of inst/bench/grn.R: runs grn-optimum.py (SAT,
# needs python3 and the Debian package cadical), then checks the network it
# found with the package's own grnSimulate() and evaluator.
#   Rscript inst/bench/grn-optimum.R
suppressPackageStartupMessages(library(sysbioGPU))
here <- function() {
  f <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  if (length(f)) dirname(normalizePath(f[1])) else system.file("bench", package = "sysbioGPU")
}
script <- file.path(here(), "grn-optimum.py")
if (!nzchar(Sys.which("python3")) || !nzchar(Sys.which("cadical"))) {
  stop("grn-optimum.R needs python3 and cadical (apt-get install cadical)")
}
dir <- system.file("extdata", "grn", package = "sysbioGPU")
out <- tempfile(fileext = ".csv")
t0 <- proc.time()[["elapsed"]]
status <- system2("python3", c(shQuote(script), shQuote(file.path(dir, "mouse_eye_network.csv")),
                               shQuote(file.path(dir, "mouse_eye_states.csv")),
                               "--kmax", "8", "--rows", "--out", shQuote(out)))
cat(sprintf("SAT search: %.1f s\n", proc.time()[["elapsed"]] - t0))
stopifnot(status == 0, file.exists(out))

# the network found, checked by the package
eye <- grnMouseEye()
lines <- readLines(out)
rules <- strsplit(sub("^# rules: ", "", grep("^# rules: ", lines, value = TRUE)), ",")[[1]]
net <- as.matrix(utils::read.csv(text = lines[!grepl("^#", lines)], header = FALSE))
net <- matrix(as.integer(net), 32, 32, dimnames = dimnames(eye$network))
tr <- grnSimulate(net, rules, eye$from, 5)
dn <- sum(tr[6, ] != eye$to)
dl <- sum(net != eye$network)
cat(sprintf("grnSimulate of the network found: dn = %d, dl = %d, largest in-degree %d, fitness %.8g\n",
            dn, dl, max(rowSums(net != 0)), 0.9 * dn / 32 + 0.1 * dl / 32^2))
stopifnot(dn == 0)
