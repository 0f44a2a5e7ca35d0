# Benchmark of lassieSimulate() on a published model whose kinetic laws are
# not mass action, shipped in inst/extdata/lassie: Nakakuki 2010
# (Nakakuki2010_CellFateDecision.xml.gz; 49 species, 64 Michaelis-Menten and
# Hill laws; the default) or Birtwistle 2007 (Birtwistle2007_ErbB.xml.gz;
# 118 species, 79 laws with Michaelis-Menten terms), a batch of parameter
# sets over two hours of the model's time, (a) on the GPU, (b) on the CPU
# threads, (c) deSolve with compiled code.
#
# The sets: each SBML reaction's law scaled by its own factor, log-uniform
# in [1/LAWS_SPREAD, LAWS_SPREAD] (default 2), seed LAWS_SEED (default 1);
# the first set is the published model.  Fair comparison: deSolve gets the
# model's right-hand side in C, written from the SBML file's MathML by the
# plain-R reader of inst/bench/sbml-plain-ode.R (not from readSBML(), not the
# package's programs), built with R CMD SHLIB at bench time and run through
# deSolve's compiled-code interface, the factors as its parms; the sets are
# shared over as many forked workers (parallel::mclapply, contiguous
# blocks) as our CPU engine has threads.  Same rtol and atol, same output
# times, same machine; every set is run by every method.
#
# Usage: Rscript inst/bench/lassie-laws.R
# Environment: LAWS_MODEL (the model's file in inst/extdata/lassie, default
# Nakakuki2010_CellFateDecision.xml.gz), LAWS_SETS (parameter sets, default
# 10000), LAWS_THREADS (our
# CPU threads = deSolve's workers, default all processors), LAWS_TEND (end
# time in seconds, default 7200) and LAWS_DT (output step, default 120),
# LAWS_RTOL and LAWS_ATOL (default 1e-6 and 1e-9), LAWS_DESOLVE (deSolve's
# solver: "lsode", its BDF, default, the faster on this stiff model, or
# "lsoda"), LAWS_METHOD (ours: "auto",
# default, "bdf", "dopri5" or "rkf45"), LAWS_CLAMP=0 (every side's laws
# read the species as they are, not at max(x, 0): see below), LAWS_GPU=0
# skips the GPU
# row.  Without deSolve the deSolve row is skipped (and the differences are
# taken against the CPU row); without a GPU, or where the GPU engine
# refuses kinetic laws, the GPU row is skipped with a message.
# LAWS_EVENTS=1 adds two SBML events to the model (the deSolve row is then
# skipped: the plain reader has no events): at half the time the species
# of the largest initial value is set back to it (a time all sets share),
# and the species that falls furthest below its largest value in the
# published set is set back to that value whenever it crosses the midpoint
# of the two downwards, counted in a parameter `resets` (times of each
# set's own).
suppressPackageStartupMessages(library(sysbioGPU))
env_num <- function(v, d) { x <- Sys.getenv(v); if (nzchar(x)) as.numeric(x) else d }
n_sets <- as.integer(env_num("LAWS_SETS", 10000))
threads <- as.integer(env_num("LAWS_THREADS", parallel::detectCores()))
times <- seq(0, env_num("LAWS_TEND", 7200), by = env_num("LAWS_DT", 120))
rtol <- env_num("LAWS_RTOL", 1e-6); atol <- env_num("LAWS_ATOL", 1e-9)
spread <- env_num("LAWS_SPREAD", 2)
solver <- Sys.getenv("LAWS_DESOLVE", "lsode")
method <- Sys.getenv("LAWS_METHOD", "auto")
clamp <- Sys.getenv("LAWS_CLAMP") != "0"
has_desolve <- requireNamespace("deSolve", quietly = TRUE)

model_name <- Sys.getenv("LAWS_MODEL", "Nakakuki2010_CellFateDecision.xml.gz")
file <- system.file("extdata", "lassie", model_name, package = "sysbioGPU")
if (!nzchar(file)) stop("LAWS_MODEL: no file ", model_name, " in the package's extdata/lassie")
plain <- new.env()
sys.source(system.file("bench", "sbml-plain-ode.R", package = "sysbioGPU"), envir = plain)
pm <- plain$plain_sbml_model(file)
# A Hill law's non-integer power of a species is NaN below 0, where a step
# may leave a species that decays to 0 (-1e-15): with LAWS_CLAMP (the
# default) every side reads the species in the kinetic laws at max(x, 0),
# deSolve's C by sbml-plain-ode.R, ours by the SBML given to readSBML(),
# where each species' <ci> inside a <kineticLaw> becomes a piecewise of it
# and 0; the same math on every side.
clamped_sbml <- function(file, species) {
  con <- gzfile(file); on.exit(close(con))
  x <- paste(readLines(con, warn = FALSE), collapse = "\n")
  ci <- sprintf("<ci>\\s*(%s)\\s*</ci>", paste(species, collapse = "|"))
  to <- paste0("<piecewise><piece><ci> \\1 </ci><apply><gt/><ci> \\1 </ci><cn> 0 </cn></apply></piece>",
               "<otherwise><cn> 0 </cn></otherwise></piecewise>")
  laws <- gregexpr("(?s)<kineticLaw.*?</kineticLaw>", x, perl = TRUE)
  regmatches(x, laws) <- list(gsub(ci, to, regmatches(x, laws)[[1L]], perl = TRUE))
  out <- tempfile(fileext = ".xml")
  writeLines(x, out)
  out
}
# The SBML file's text with the two events of LAWS_EVENTS (see the top):
# at t >= tmid, species s0 := v0; when y < level, y := top and resets + 1.
with_events <- function(file, tmid, s0, v0, y, level, top) {
  con <- if (grepl("\\.gz$", file)) gzfile(file) else file(file)
  x <- paste(readLines(con, warn = FALSE), collapse = "\n")
  close(con)
  mml <- function(e) paste0('<math xmlns="http://www.w3.org/1998/Math/MathML">', e, "</math>")
  time <- '<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time"> t </csymbol>'
  num <- function(v) sprintf("<cn> %.17g </cn>", v)
  ev <- paste0(
    "<listOfEvents>",
    '<event id="restore"><trigger>', mml(paste0("<apply><geq/>", time, num(tmid), "</apply>")), "</trigger>",
    '<listOfEventAssignments><eventAssignment variable="', s0, '">', mml(num(v0)),
    "</eventAssignment></listOfEventAssignments></event>",
    '<event id="reset"><trigger>', mml(sprintf("<apply><lt/><ci> %s </ci>%s</apply>", y, num(level))), "</trigger>",
    '<listOfEventAssignments><eventAssignment variable="', y, '">', mml(num(top)), "</eventAssignment>",
    '<eventAssignment variable="resets">', mml("<apply><plus/><ci> resets </ci><cn> 1 </cn></apply>"),
    "</eventAssignment></listOfEventAssignments></event></listOfEvents>")
  x <- sub("<listOfParameters>", '<listOfParameters><parameter id="resets" value="0" constant="false"/>', x,
           fixed = TRUE)
  x <- sub("</model>", paste0(ev, "</model>"), x, fixed = TRUE)
  out <- tempfile(fileext = ".xml")
  writeLines(x, out)
  out
}
m_file <- if (clamp) clamped_sbml(file, pm$species) else file
m <- readSBML(m_file)
laws_at <- if (clamp) " (laws at max(x, 0))" else ""
events <- Sys.getenv("LAWS_EVENTS") == "1"
if (events) {
  one <- unclass(lassieSimulate(m, times, rtol = rtol, atol = atol, backend = "cpu", verbose = FALSE))
  x1 <- one[, pm$species, drop = FALSE]
  top <- apply(x1, 2L, max)
  s0 <- pm$species[which.max(x1[1L, ])]
  y <- pm$species[which.max((top - x1[nrow(x1), ]) / pmax(top, 1e-300))]
  level <- (top[[y]] + x1[nrow(x1), y]) / 2
  m <- readSBML(with_events(m_file, max(times) / 2, s0, x1[1L, s0], y, level, top[[y]]))
  laws_at <- paste0(laws_at, ", with events")
  cat(sprintf("events: %s set back to %.4g at t = %g; %s set back to %.4g below %.4g\n", s0, x1[1L, s0],
              max(times) / 2, y, top[[y]], level))
  has_desolve <- FALSE
}
n_laws <- sum(m$laws$start >= 0L)
cat(sprintf("%s: %d species, %d SBML reactions (%d of readSBML(), %d laws that are not mass action, programs of %d codes)\n",
            sub("\\.xml(\\.gz)?$", "", model_name), length(m$species), length(pm$laws), length(m$reactions), n_laws,
            length(m$laws$code)))
cat(sprintf("%s; %d sets, t 0-%g (%d outputs), rtol %g, atol %g; %d CPU threads (ours) = %d deSolve workers; deSolve: %s\n",
            sysbioGPU:::benchMachine(), n_sets, max(times), length(times), rtol, atol, threads, threads,
            if (has_desolve) paste(utils::packageVersion("deSolve"), solver) else "absent"))

set.seed(env_num("LAWS_SEED", 1))
f <- matrix(exp(stats::runif(n_sets * length(pm$laws), -log(spread), log(spread))), n_sets)
f[1L, ] <- 1
# (the clock that a model's events read, a reaction of its own, stays 1)
law_rx <- setdiff(m$reactions, m$clock$reaction)
rates <- matrix(1, n_sets, length(m$reactions), dimnames = list(NULL, m$reactions))
rates[, law_rx] <- f[, plain$plain_reaction_of(law_rx, pm), drop = FALSE] * rep(m$rates[law_rx], each = n_sets)

# relative difference with a floor of 1e-6 of each species' largest value
# in the set and 1e-6 absolute (1000 atol: a species that stays near 0
# differs by atol), per set (times x species x sets)
rel_diff_sets <- function(a, b) {
  big <- apply(abs(b), c(2L, 3L), max)
  fl <- array(rep(pmax(1e-6 * big, 1e-6), each = dim(b)[1L]), dim(b))
  apply(abs(a - b) / pmax(abs(b), fl), 3L, max)
}

rows <- list()
# x: the species (times x species x sets; the outputs of a model's assignment
# rules are left out, as deSolve's side has none); ok: the sets that ran to
# the end
# (a failed set is reported with its reason here, the count in the table)
add_row <- function(method, secs, x, ok, why = NULL) {
  rows[[length(rows) + 1L]] <<- list(method = method, seconds = secs, x = x, ok = ok)
  if (!all(ok) && length(why)) cat(sprintf("%s: %d set(s) failed, the first: set %d, %s\n", method, sum(!ok),
                                           which(!ok)[1L], why[which(!ok)[1L]]))
}

# (a) the GPU
if (Sys.getenv("LAWS_GPU") == "0") {
  message("GPU row skipped (LAWS_GPU=0)")
} else if (!hasGPU()) {
  message("GPU row skipped: no usable GPU")
} else {
  gpu_run <- function(r) suppressWarnings(lassieSimulate(m, times, rtol = rtol, atol = atol, method = method,
                                                         rates = r, backend = "gpu", output = "array",
                                                         verbose = FALSE))
  # (a first small call starts the device, untimed)
  warm <- tryCatch(gpu_run(rates[1:2, , drop = FALSE]), sysbioGPU_error_kinetics = function(e) e)
  if (inherits(warm, "condition")) {
    message("GPU row skipped: the GPU engine refuses this model: ", conditionMessage(warm))
  } else {
    t0 <- proc.time()[["elapsed"]]
    g <- gpu_run(rates)
    add_row(sprintf("lassieSimulate %s, GPU (%s)%s", method, attr(g, "device"), laws_at), proc.time()[["elapsed"]] - t0,
            unclass(g)[, pm$species, , drop = FALSE], attr(g, "status") == 0L, attr(g, "messages"))
    if (events) gpu_resets <- unclass(g)[length(times), "resets", ]
    rm(g)
  }
}

# (b) the CPU threads
t0 <- proc.time()[["elapsed"]]
cpu <- suppressWarnings(lassieSimulate(m, times, rtol = rtol, atol = atol, method = method, rates = rates,
                                       backend = "cpu", threads = threads, output = "array", verbose = FALSE))
add_row(sprintf("lassieSimulate %s, CPU %d threads%s", method, threads, laws_at), proc.time()[["elapsed"]] - t0,
        unclass(cpu)[, pm$species, , drop = FALSE], attr(cpu, "status") == 0L, attr(cpu, "messages"))
# the work per set, for the comparison with deSolve's below
counts <- list(ours = rowMeans(attr(cpu, "stats")))
if (events) {
  resets <- round(unclass(cpu)[length(times), "resets", ])
  cat(sprintf("events: resets per set %s (mean %.2f)%s\n", paste(range(resets), collapse = "-"), mean(resets),
              if (exists("gpu_resets")) sprintf("; %d set(s) where the GPU's count differs from the CPU's",
                                                 sum(round(gpu_resets) != resets)) else ""))
  # How far the model's answer moves when nothing but the last bits of the
  # rates do: the CPU row again with every rate x (1 + 1e-12).  Events
  # turn such differences (the device's exp and pow round differently
  # from the host's) into differences of event times, and a sharp
  # transient after an event into large ones at the output times.
  r2 <- rates
  r2[, law_rx] <- r2[, law_rx] * (1 + 1e-12)
  cpu2 <- suppressWarnings(lassieSimulate(m, times, rtol = rtol, atol = atol, method = method, rates = r2,
                                          backend = "cpu", threads = threads, output = "array", verbose = FALSE))
  ok <- attr(cpu, "status") == 0L & attr(cpu2, "status") == 0L
  d2 <- rel_diff_sets(unclass(cpu2)[, pm$species, ok, drop = FALSE], unclass(cpu)[, pm$species, ok, drop = FALSE])
  cat(sprintf("events: the CPU row with the rates x (1 + 1e-12): max_rel_diff %.3g against the CPU row (%d of %d sets above 1e-3), %d set(s) whose count of resets differs\n",
              max(d2), sum(d2 > 1e-3), sum(ok), sum(round(unclass(cpu2)[length(times), "resets", ]) != resets)))
  rm(cpu2)
}
rm(cpu)

# (c) deSolve with compiled code
if (!has_desolve) {
  message("deSolve row skipped: deSolve is not installed")
} else {
  d <- tempfile("lassielaws"); dir.create(d)
  src <- file.path(d, "lassielaws.c"); writeLines(plain$plain_c_source(pm, "laws", clamp = clamp), src)
  so <- file.path(d, paste0("lassielaws", .Platform$dynlib.ext))
  rc <- system2(file.path(R.home("bin"), "R"), c("CMD", "SHLIB", "-o", shQuote(so), shQuote(src)),
                stdout = FALSE, stderr = FALSE)
  if (rc != 0) stop("R CMD SHLIB failed for the benchmark's right-hand side")
  dyn.load(so)
  # (a set that stops early: NA from there on)
  one_set <- function(s, rtol. = rtol, atol. = atol) {
    out <- suppressWarnings(deSolve::ode(pm$initial, times, func = "laws_derivs", parms = f[s, ],
                                         dllname = "lassielaws", initfunc = "laws_initmod", method = solver,
                                         rtol = rtol., atol = atol., maxsteps = 1e6))
    x <- matrix(NA_real_, length(times), length(pm$species))
    x[seq_len(nrow(out)), ] <- out[, -1L]
    # lsode's steps, right-hand sides (its finite-difference Jacobians'
    # columns included) and Jacobians (each with its LU)
    attr(x, "counts") <- attr(out, "istate")[c(2L, 3L, 14L)]
    x
  }
  blocks <- split(seq_len(n_sets), cut(seq_len(n_sets), min(threads, n_sets), labels = FALSE))
  t0 <- proc.time()[["elapsed"]]
  res <- parallel::mclapply(blocks, function(b) lapply(b, one_set), mc.cores = threads)
  secs <- proc.time()[["elapsed"]] - t0
  x <- array(unlist(res, use.names = FALSE), c(length(times), length(pm$species), n_sets))
  counts$deSolve <- rowMeans(vapply(unlist(res, recursive = FALSE), attr, numeric(3L), "counts"))
  add_row(sprintf("deSolve %s, compiled C (laws at %s), %d workers", solver,
                  if (clamp) "max(x, 0)" else "x", threads), secs, x, !apply(x, 3L, anyNA))
}

# the table: against deSolve (else against the CPU row)
ref <- rows[[length(rows)]]
# the largest relative difference (rel_diff_sets()) over the sets both ran
# to the end
rel_diff <- function(r) {
  ok <- r$ok & ref$ok
  if (!any(ok)) return(NA_real_)
  max(rel_diff_sets(r$x[, , ok, drop = FALSE], ref$x[, , ok, drop = FALSE]))
}
tab <- data.frame(
  method = vapply(rows, `[[`, "", "method"),
  seconds = vapply(rows, `[[`, 0, "seconds"),
  sets_per_s = n_sets / vapply(rows, `[[`, 0, "seconds"),
  ratio = ref$seconds / vapply(rows, `[[`, 0, "seconds"),
  failed = vapply(rows, function(r) sum(!r$ok), 0L),
  max_rel_diff = vapply(rows, rel_diff, 0))
names(tab)[4L] <- if (has_desolve) "x_deSolve" else "x_CPU"
cat(sprintf("\nx_%s: %s's seconds / the method's (above 1: faster); failed: sets that stopped early; max_rel_diff: against %s, floor 1e-6 of each species' largest value in the set and 1e-6, sets that both ran to the end\n",
            if (has_desolve) "deSolve" else "CPU", if (has_desolve) "deSolve" else "the CPU row",
            if (has_desolve) "deSolve's answer" else "the CPU row"))
print(format(tab, digits = 3), row.names = FALSE)

# The work per set, averaged over the sets: ours (the CPU row; the GPU's
# is the same work) and lsode's, whose right-hand sides include the N of
# each finite-difference Jacobian (the Newton iterations are the rest)
if (has_desolve) {
  o <- counts$ours; d <- counts$deSolve
  cat(sprintf("\nWork per set (mean): ours %.0f steps (%.0f implicit), %.0f rejected, %.0f Newton iterations, %.0f factorisations, %.0f Jacobians, %.0f right-hand sides; %s %.0f steps, %.0f right-hand sides (%.0f besides its Jacobians), %.0f Jacobians and factorisations\n",
              o[["steps"]], o[["implicitSteps"]], o[["rejected"]], o[["newtonIterations"]], o[["factorisations"]],
              o[["jacobians"]], o[["rhsEvaluations"]], solver, d[1L], d[2L], d[2L] - length(pm$species) * d[3L], d[3L]))
}

# Who is off where the methods differ most: the LAWS_CHECK (default 3) sets
# of the largest difference between our CPU row and deSolve, run again by
# deSolve at rtol 1e-10, atol 1e-13, and each method's difference from that
n_check <- as.integer(env_num("LAWS_CHECK", 3))
if (has_desolve && n_check > 0L) {
  cpu_row <- rows[[length(rows) - 1L]]
  ok <- which(cpu_row$ok & ref$ok)
  d <- rel_diff_sets(cpu_row$x[, , ok, drop = FALSE], ref$x[, , ok, drop = FALSE])
  worst <- ok[order(-d)][seq_len(min(n_check, length(ok)))]
  tight <- vapply(worst, one_set, matrix(0, length(times), length(pm$species)), rtol. = 1e-10, atol. = 1e-13)
  cat(sprintf("\nThe %d set(s) where our CPU row and deSolve differ most (%s), against deSolve at rtol 1e-10, atol 1e-13:\n",
              length(worst), paste(worst, collapse = ", ")))
  print(format(data.frame(
    method = vapply(rows, `[[`, "", "method"),
    max_rel_diff_tight = vapply(rows, function(r) {
      if (!all(r$ok[worst]) || anyNA(tight)) return(NA_real_)
      max(rel_diff_sets(r$x[, , worst, drop = FALSE], tight))
    }, 0)), digits = 3), row.names = FALSE)
}
