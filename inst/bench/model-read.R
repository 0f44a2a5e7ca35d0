# How the readers' time grows with the model: readSBML() and
# readBioNetGen() on synthetic rings of n species and n mass-action
# reactions (S_i -> S_{i+1}, rate k_i S_i, a parameter each), readPBN() on
# rings of n nodes (G_i = G_{i-1} & !G_{i+1}; in ASSA-PBN's format, "pbn",
# with a second function G_{i-1} of probability 0.4), written to temporary files by
# this script. Seconds of the reader's call alone (best of READ_REPS,
# default 1), and per reaction or node; each model then runs once on the
# CPU to check it (for the Boolean rings that run of pbnSteadyState(), 8
# steps a trajectory, is timed too: its R side).
#
# Usage: Rscript inst/bench/model-read.R
# Environment: READ_SIZES (default "1000,4000,16000"), READ_REPS,
# READ_FORMATS ("sbml,bngl,bnet,pbn" by default).
suppressPackageStartupMessages(library(sysbioGPU))
env_chr <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) x else d }
sizes <- as.numeric(strsplit(env_chr("READ_SIZES", "1000,4000,16000"), ",")[[1]])
reps <- as.integer(env_chr("READ_REPS", "1"))
formats <- strsplit(env_chr("READ_FORMATS", "sbml,bngl,bnet,pbn"), ",")[[1]]

ring_sbml <- function(n) {
  f <- tempfile(fileext = ".xml")
  i <- seq_len(n); nxt <- i %% n + 1L
  writeLines(c(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">',
    '<model id="ring"><listOfCompartments>',
    '<compartment id="cell" size="1" spatialDimensions="3" constant="true"/>',
    "</listOfCompartments><listOfSpecies>",
    sprintf('<species id="S%d" compartment="cell" initialConcentration="1" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>', i),
    "</listOfSpecies><listOfParameters>",
    sprintf('<parameter id="k%d" value="0.1" constant="true"/>', i),
    "</listOfParameters><listOfReactions>",
    sprintf(paste0('<reaction id="r%d" reversible="false">',
                   '<listOfReactants><speciesReference species="S%d" stoichiometry="1" constant="true"/></listOfReactants>',
                   '<listOfProducts><speciesReference species="S%d" stoichiometry="1" constant="true"/></listOfProducts>',
                   '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">',
                   "<apply><times/><ci>k%d</ci><ci>S%d</ci></apply></math></kineticLaw></reaction>"),
            i, i, nxt, i, i),
    "</listOfReactions></model></sbml>"), f)
  f
}

ring_bngl <- function(n) {
  f <- tempfile(fileext = ".net")
  i <- seq_len(n)
  writeLines(c("begin parameters", sprintf("%d k%d 0.1", i, i), "end parameters",
               "begin species", sprintf("%d S%d() 1", i, i), "end species",
               "begin reactions", sprintf("%d %d %d k%d", i, i, i %% n + 1L, i), "end reactions"), f)
  f
}

ring_bnet <- function(n) {
  f <- tempfile(fileext = ".bnet")
  g <- paste0("G", seq_len(n))
  writeLines(c("targets, factors", paste0(g, ", ", g[c(n, seq_len(n - 1L))], " & !", g[c(seq_len(n)[-1L], 1L)])), f)
  f
}

ring_assa <- function(n) {
  f <- tempfile(fileext = ".pbn")
  g <- paste0("G", seq_len(n)); prev <- g[c(n, seq_len(n - 1L))]
  writeLines(c("perturbation = 0.001", "nodeNames", g, "endNodeNames",
               as.vector(rbind(paste("node", g), paste0("0.6 : ", prev, " & !", g[c(seq_len(n)[-1L], 1L)]),
                               paste0("0.4 : ", prev), "endNode"))), f)
  f
}

rows <- list()
for (fmt in formats) {
  if (fmt == "sbml" && !sbmlAvailable()) { message("no libSBML: SBML skipped"); next }
  for (n in sizes) {
    f <- switch(fmt, sbml = ring_sbml(n), bngl = ring_bngl(n), bnet = ring_bnet(n), pbn = ring_assa(n))
    rd <- switch(fmt, sbml = readSBML, bngl = readBioNetGen, bnet = , pbn = readPBN)
    t <- Inf
    for (r in seq_len(reps)) t <- min(t, system.time(m <- rd(f))[["elapsed"]])
    if (fmt %in% c("bnet", "pbn")) {
      stopifnot(length(m$nodes) == n)
      # a steady-state call of 8 steps a trajectory: its R side (the
      # ancestors, the engine's tables, the checks) and little else
      t_run <- system.time(suppressWarnings(
        pbnSteadyState(m, c(G1 = TRUE), r = 0.01, trajectories = 64, maxSteps = 64 * 8, backend = "cpu",
                       verbose = FALSE)))[["elapsed"]]
    } else {
      out <- lassieSimulate(m, c(0, 1), backend = "cpu", verbose = FALSE)
      stopifnot(length(m$reactions) == n, abs(sum(out[2, -1]) - n) < 1e-6 * n)   # the ring keeps its mass
    }
    rows[[length(rows) + 1L]] <- data.frame(format = fmt, size = n, seconds = round(t, 2),
                                            ms_each = round(1000 * t / n, 3))
    if (fmt %in% c("bnet", "pbn")) {
      rows[[length(rows) + 1L]] <- data.frame(format = paste0(fmt, ", pbnSteadyState()"), size = n,
                                              seconds = round(t_run, 2), ms_each = round(1000 * t_run / n, 3))
    }
    unlink(f)
  }
}
cat("\n## Reading synthetic rings of n reactions (sbml, bngl) or n nodes (bnet, pbn)\n")
print(do.call(rbind, rows), row.names = FALSE)
