# The SBML Test Suite's semantic cases through readSBML() and
# lassieSimulate() (CPU), each case in a forked child with a time limit.
#
#   Rscript tools/sbml-suite.R SUITE [OUT] [JOBS] [TIMEOUT] [CASES]
#
# SUITE is the suite's cases/semantic folder; OUT (default
# check/sbml-suite-out) receives outcomes.csv (one row per case) and
# table.md (counts by outcome, overall and by the suite's componentTags and
# testTags); JOBS children run at once (default 2); TIMEOUT seconds per case
# (default 60); CASES an optional comma-separated list of case numbers or
# ranges (00001-00100).
#
# Outcomes of a time-course case:
#   pass     every requested variable at every time within the suite's rule
#            |sim - expected| <= absolute + relative * |expected|
#   refused  a classed sysbioGPU error (from readSBML() or lassieSimulate())
#   lacks    the model was read and simulated but a requested variable is
#            neither a species nor a constant the reader reports
#   wrong    a value outside the tolerance, with no error (silently wrong)
#   error    an unclassed R error
#   crash    the child died (a signal) or returned nothing
#   hang     the child ran past TIMEOUT and was killed
# The script exits with status 1 when a case is wrong, an error, a crash or
# a hang.
#
# With SBML_SUITE_GPU=1 in the environment, each case the CPU passes also
# runs on the GPU engine: 64 copies of it in one lassieSimulate() call
# (backend "gpu"), each compared with the CPU's result, every column but
# time, by |gpu - cpu| / max(|cpu|, 1e-6 * the column's largest |cpu|):
#   within   at most 1e-9 everywhere (the table counts those identical too)
#   worse    above 1e-9 somewhere (or a NaN where the CPU has a number)
#   refused  the GPU refuses the model (a classed sysbioGPU refusal)
#   error    any other error
# (models with events included: the table counts them apart too)
# table.md then has these counts, the worse cases, and for the cases with
# the most species the seconds of 64 copies on the GPU and on the CPU (all
# threads), measured after the suite in this process.  A GPU case worse
# or an error also makes the exit status 1.

suppressPackageStartupMessages(library(sysbioGPU))

args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 1L) {
  cat("usage: Rscript tools/sbml-suite.R SUITE [OUT] [JOBS] [TIMEOUT] [CASES]\n", file = stderr())
  quit(status = 2L)
}
suite <- args[1]
out_dir <- if (length(args) >= 2L && nzchar(args[2])) args[2] else "check/sbml-suite-out"
jobs <- if (length(args) >= 3L && nzchar(args[3])) as.integer(args[3]) else 2L
timeout <- if (length(args) >= 4L && nzchar(args[4])) as.double(args[4]) else 60
only <- if (length(args) >= 5L && nzchar(args[5])) args[5] else ""
if (!dir.exists(suite)) stop("no folder ", suite)
if (!sbmlAvailable()) stop("sysbioGPU was built without libSBML")
on_gpu <- identical(Sys.getenv("SBML_SUITE_GPU"), "1")
gpu_copies <- 64L
dir.create(out_dir, recursive = TRUE, showWarnings = FALSE)

# ---- the suite's files ----------------------------------------------------
# (suite_settings(): the same parser as the tests' subset)
local({
  me <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1L])
  sys.source(file.path(dirname(me), "..", "tests", "testthat", "helper-sbml-suite.R"), envir = globalenv())
})
read_tags <- function(f) {
  l <- readLines(f, warn = FALSE)
  tag <- function(key) {
    x <- grep(paste0("^", key, ":"), l, value = TRUE)
    if (!length(x)) return(character())
    v <- trimws(strsplit(sub(paste0("^", key, ":"), "", x[1]), ",")[[1]])
    v[nzchar(v)]
  }
  list(component = tag("componentTags"), test = tag("testTags"), type = tag("testType"))
}
# the highest level and version the case comes in
model_file <- function(dir, id) {
  f <- list.files(dir, pattern = paste0("^", id, "-sbml-l[0-9]v[0-9]\\.xml$"))
  if (!length(f)) return(NA_character_)
  lv <- as.integer(sub(".*-l([0-9])v([0-9])\\.xml$", "\\1\\2", f))
  file.path(dir, f[which.max(lv)])
}

# ---- one case (in the child) ----------------------------------------------
classed <- function(e) inherits(e, "sysbioGPU_error")
outcome <- function(what, reason = "", detail = "") {
  list(outcome = what, reason = reason, detail = detail, gpu = "", gpu_rel = NA_real_, gpu_reason = "",
       n_species = NA_integer_)
}
err_outcome <- function(e, where) {
  msg <- gsub("\\s+", " ", conditionMessage(e))
  if (classed(e)) outcome("refused", paste0(where, ": ", msg), class(e)[1])
  else outcome("error", paste0(where, ": ", msg), class(e)[1])
}

# the reader's conventions: a species' state is its concentration, or its
# amount where it has hasOnlySubstanceUnits; the sizes of the species'
# compartments and the model's constants come with the model (attributes),
# or, from a reader that predates them, from libSBML's raw reading
unit_info <- function(m, file) {
  a <- attributes(m)
  if (!is.null(a$speciesCompartment)) {
    return(list(size = stats::setNames(a$compartmentSize[a$speciesCompartment], names(a$speciesCompartment)),
                amount = a$substanceUnits, constants = a$constants, compartment = a$speciesCompartment))
  }
  d <- .Call(sysbioGPU:::ffi_lassie_read_sbml, path.expand(file))
  cs <- stats::setNames(d$compartments$size, d$compartments$id)
  cs[is.na(cs)] <- 1
  size <- stats::setNames(unname(cs[d$species$compartment]), d$species$id)
  list(size = size, amount = stats::setNames(d$species$hasOnlySubstanceUnits, d$species$id), constants = NULL)
}

# the requested variables that are reactions: their fluxes
flux_vars <- function(file, variables) {
  d <- tryCatch(.Call(sysbioGPU:::ffi_lassie_read_sbml, normalizePath(file)), error = function(e) NULL)
  intersect(variables, vapply(d$reactions, `[[`, "", "id"))
}

run_case <- function(dir, id, st, file) {
  m <- tryCatch(readSBML(file, fluxes = flux_vars(file, st$variables)), error = function(e) e)
  if (inherits(m, "error")) return(err_outcome(m, "readSBML"))
  t_out <- st$start + st$duration * (0:st$steps) / st$steps
  times <- if (st$start > 0) c(0, t_out) else t_out
  sim <- tryCatch(lassieSimulate(m, times, rtol = 1e-10, atol = 1e-14, backend = "cpu",
                                 threads = 1L, verbose = FALSE),
                  error = function(e) e)
  if (inherits(sim, "error")) return(err_outcome(sim, "lassieSimulate"))
  cpu <- sim
  if (st$start > 0) sim <- sim[-1L, , drop = FALSE]
  exp <- utils::read.csv(file.path(dir, paste0(id, "-results.csv")), check.names = FALSE)
  names(exp) <- trimws(names(exp))
  exp <- exp[-1L]   # the time column (a variable may be named like it: Time)
  u <- unit_info(m, file)
  worst <- 0; worst_var <- ""
  for (v in st$variables) {
    if (v %in% colnames(sim) && v %in% names(u$size)) {
      # a species (a state, or an observable where a rule sets it)
      x <- sim[, v]
      # (the size at each time where rules change it: a column)
      cm <- u$compartment[v]
      size <- if (!is.na(cm) && cm %in% colnames(sim)) sim[, cm] else unname(u$size[[v]])
      is_amount <- isTRUE(unname(u$amount[[v]]))
      if (v %in% st$amount && !is_amount) x <- x * size
      if (v %in% st$concentration && is_amount) x <- x / size
    } else if (v %in% colnames(sim) && v != "time") {
      x <- sim[, v]
    } else if (!is.null(u$constants) && v %in% names(u$constants)) {
      x <- rep(u$constants[[v]], nrow(sim))
    } else {
      return(outcome("lacks", paste0("the result lacks the variable ", v)))
    }
    e <- exp[[v]]
    if (is.null(e) || length(e) != length(x)) return(outcome("error", paste0("results.csv lacks ", v)))
    ok <- (is.nan(e) & is.nan(x)) | (is.infinite(e) & !is.na(x) & x == e) |
      (is.finite(e) & is.finite(x) & abs(x - e) <= st$atol + st$rtol * abs(e))
    if (!all(ok)) {
      k <- which(!ok)[1]
      return(outcome("wrong", sprintf("%s at t = %g: %.10g, expected %.10g", v, t_out[k], x[k], e[k])))
    }
    err <- max(abs(x - e) / (st$atol + st$rtol * abs(e)), 0, na.rm = TRUE)
    if (err > worst) { worst <- err; worst_var <- v }
  }
  res <- outcome("pass", sprintf("worst %.3g of the tolerance (%s)", worst, worst_var))
  res$n_species <- length(m$species)
  res$events <- !is.null(m$events)
  if (on_gpu) res[c("gpu", "gpu_rel", "gpu_reason")] <- gpu_compare(m, times, cpu)
  res
}

# The case's model, gpu_copies copies in one call on the GPU, against the
# CPU's result cpu (see the top)
gpu_run <- function(m, times, backend, threads = NULL) {
  rates <- matrix(m$rates, gpu_copies, length(m$rates), byrow = TRUE)
  lassieSimulate(m, times, rates = rates, rtol = 1e-10, atol = 1e-14, backend = backend, threads = threads,
                 verbose = FALSE)
}
gpu_compare <- function(m, times, cpu) {
  g <- tryCatch(gpu_run(m, times, "gpu"), error = function(e) e)
  if (inherits(g, "error")) {
    what <- if (inherits(g, "sysbioGPU_sbml_unsupported")) "refused" else "error"
    return(list(what, NA_real_, gsub("\\s+", " ", conditionMessage(g))))
  }
  cols <- setdiff(colnames(cpu), "time")
  a <- cpu[, cols, drop = FALSE]
  scale <- apply(abs(a), 2, function(x) max(c(x[is.finite(x)], 0)))
  fl <- matrix(1e-6 * scale, nrow(a), ncol(a), byrow = TRUE)
  worst <- 0
  for (s in seq_len(gpu_copies)) {
    b <- g[[s]][, cols, drop = FALSE]
    d <- abs(b - a) / pmax(abs(a), fl)
    d[(is.na(a) & is.na(b)) | (!is.na(a) & !is.na(b) & a == b)] <- 0
    worst <- max(worst, d)   # NA (a NaN on one side only): worse
  }
  list(if (!is.na(worst) && worst <= 1e-9) "within" else "worse", worst, "")
}

# ---- the cases, in forked children ----------------------------------------
ids <- sort(list.files(suite, pattern = "^[0-9]{5}$"))
if (nzchar(only)) {
  want <- unlist(lapply(strsplit(only, ",")[[1]], function(r) {
    b <- as.integer(strsplit(r, "-")[[1]])
    sprintf("%05d", if (length(b) == 2L) seq(b[1], b[2]) else b)
  }))
  ids <- intersect(ids, want)
}
cases <- list()
for (id in ids) {
  dir <- file.path(suite, id)
  tg <- read_tags(file.path(dir, paste0(id, "-model.m")))
  if (!identical(tg$type, "TimeCourse")) next
  file <- model_file(dir, id)
  if (is.na(file)) next
  cases[[id]] <- list(id = id, dir = dir, file = file, tags = tg,
                      settings = suite_settings(file.path(dir, paste0(id, "-settings.txt"))))
}
cat(length(cases), "time-course cases,", jobs, "at a time, time limit", timeout, "s\n")

# Workers are forked children, each running a chunk of cases in turn; a
# case's outcome is saved as it ends, and the worker notes each case it
# starts, so that a worker that dies (a crash) or stops advancing (a hang,
# killed after TIMEOUT s) is charged to the case it was running, and the
# rest of its chunk goes back to the queue.  (A fork per case costs more
# than most cases on a loaded machine.)
res <- vector("list", length(cases)); names(res) <- names(cases)
tmp <- tempfile("sbml-suite-"); dir.create(tmp)
worker <- function(chunk, log) {
  for (id in chunk) {
    cat(id, "\n", file = log, append = TRUE)
    cs <- cases[[id]]
    r <- tryCatch(run_case(cs$dir, cs$id, cs$settings, cs$file),
                  error = function(e) outcome("error", paste("harness:", conditionMessage(e))))
    saveRDS(r, file.path(tmp, paste0(id, ".rds")))
  }
  TRUE
}
running <- list()
queue <- names(cases)
chunk_size <- 25L
t_start <- Sys.time()
done <- 0L; n_workers <- 0L
settle <- function(w, fate) {
  # fate: "exited" (collected) or "hang" (killed)
  started <- if (file.exists(w$log)) trimws(readLines(w$log, warn = FALSE)) else character()
  for (id in w$chunk) {
    f <- file.path(tmp, paste0(id, ".rds"))
    if (file.exists(f)) { res[[id]] <<- readRDS(f); done <<- done + 1L; next }
    if (id %in% started) {
      res[[id]] <<- if (fate == "hang") outcome("hang", sprintf("killed after %g s", timeout))
                    else outcome("crash", "the child died")
      done <<- done + 1L
      next
    }
    queue <<- c(queue, id)
  }
}
while (length(queue) || length(running)) {
  while (length(queue) && length(running) < jobs) {
    chunk <- utils::head(queue, chunk_size); queue <- queue[-seq_along(chunk)]
    n_workers <- n_workers + 1L
    log <- file.path(tmp, paste0("worker", n_workers, ".log"))
    file.create(log)
    job <- parallel::mcparallel(worker(chunk, log), silent = TRUE)
    running[[as.character(job$pid)]] <- list(job = job, chunk = chunk, log = log)
  }
  got <- suppressWarnings(parallel::mccollect(lapply(running, `[[`, "job"), wait = FALSE, timeout = 0.2))
  before <- done
  for (pid in names(running)) {
    w <- running[[pid]]
    if (!is.null(got) && pid %in% names(got)) {
      settle(w, "exited")
    } else if (as.double(difftime(Sys.time(), file.mtime(w$log), units = "secs")) > timeout) {
      tools::pskill(as.integer(pid), tools::SIGKILL)
      suppressWarnings(parallel::mccollect(w$job, wait = TRUE))
      settle(w, "hang")
    } else next
    running[[pid]] <- NULL
  }
  if (done %/% 100L > before %/% 100L) cat(done, "cases done,", format(Sys.time() - t_start, digits = 3), "\n")
}
unlink(tmp, recursive = TRUE)
elapsed <- as.double(difftime(Sys.time(), t_start, units = "secs"))

# ---- tables ---------------------------------------------------------------
levels_out <- c("pass", "refused", "lacks", "wrong", "error", "crash", "hang")
tab <- data.frame(
  case = names(cases),
  file = basename(vapply(cases, `[[`, "", "file")),
  outcome = factor(vapply(res, `[[`, "", "outcome"), levels = levels_out),
  reason = vapply(res, `[[`, "", "reason"),
  componentTags = vapply(cases, function(c) paste(c$tags$component, collapse = " "), ""),
  testTags = vapply(cases, function(c) paste(c$tags$test, collapse = " "), ""),
  stringsAsFactors = FALSE)
if (on_gpu) {
  tab$species <- vapply(res, function(r) as.integer(r$n_species), 0L)
  tab$events <- vapply(res, function(r) isTRUE(r$events), TRUE)
  tab$gpu <- vapply(res, `[[`, "", "gpu")
  tab$gpu_rel <- vapply(res, function(r) as.double(r$gpu_rel), 0)
  tab$gpu_reason <- vapply(res, `[[`, "", "gpu_reason")
}
utils::write.csv(tab, file.path(out_dir, "outcomes.csv"), row.names = FALSE)

md_row <- function(label, o) paste0("| ", label, " | ", paste(as.integer(table(factor(o, levels = levels_out))), collapse = " | "), " | ", length(o), " |")
md_head <- c(paste0("| | ", paste(levels_out, collapse = " | "), " | cases |"),
             paste0("|", strrep("---|", length(levels_out) + 2L)))
by_tag <- function(col) {
  tags <- sort(unique(unlist(strsplit(tab[[col]], " "))))
  tags <- tags[nzchar(tags)]
  vapply(tags, function(t) md_row(t, tab$outcome[vapply(strsplit(tab[[col]], " "), function(x) t %in% x, TRUE)]), "")
}
first_reason <- function(r) {
  r <- sub("^(readSBML|lassieSimulate): ([^:]*\\.xml: )?", "", r)
  sub(" \\(.*$|:.*$|;.*$", "", r)
}
# The construct a refusal names, without the model's ids, so that the table
# counts constructs rather than messages; the first pattern a reason
# matches wins (a rule or an event whose math holds the delay csymbol is a
# delay).  Other reasons are counted by their first words.
refusal_kinds <- c(
  "the delay csymbol (delay equations)" = "delay csymbol",
  "algebraic rules" = "algebraic rule",
  "fast reactions" = "fast reaction",
  "simultaneous events whose order SBML leaves open and matters" = "simultaneous events whose order",
  "the function factorial of species" = "factorial of species",
  "rate rules of variables whose initial value is negative" = "whose initial value is negative",
  "species that rules set in a compartment that rules or events resize" =
    "species that rules set in a compartment that rules or events resize",
  "events' delayed assignments to species of a compartment that rules or events resize" =
    "a species of a compartment that rules or events resize",
  "constants computed from a variable that rules change" = "a constant computed from .*, whose assignment rule",
  "function definitions whose arguments name their own arguments" = "arguments name the function's own arguments")
refusal_kind <- function(r) {
  kind <- rep(NA_character_, length(r))
  for (k in names(refusal_kinds)) kind[is.na(kind) & grepl(refusal_kinds[[k]], r)] <- k
  ifelse(is.na(kind), first_reason(r), kind)
}
refused <- tab[tab$outcome == "refused", ]
reasons <- sort(table(refusal_kind(refused$reason)), decreasing = TRUE)
lines <- c(sprintf("SBML Test Suite, %d time-course cases (%s), %.0f s, %d jobs", nrow(tab), suite, elapsed, jobs), "",
           md_head, md_row("all", tab$outcome), "",
           "By componentTags:", "", md_head, by_tag("componentTags"), "",
           "By testTags:", "", md_head, by_tag("testTags"), "",
           "Refusals by the construct refused (the first reason given):", "", "| construct | cases |", "|---|---|",
           paste0("| ", names(reasons), " | ", as.integer(reasons), " |"), "",
           "Not pass nor refused:", "",
           with(tab[!tab$outcome %in% c("pass", "refused"), ], if (length(case)) paste0("- ", case, " ", outcome, ": ", reason) else "none"))
gpu_bad <- 0L
if (on_gpu) {
  # (CUDA is first used here in this process, after the forks)
  g <- tab[tab$outcome == "pass", ]
  n <- function(x) sum(g$gpu == x)
  worse <- g[g$gpu %in% c("worse", "error"), ]
  gpu_bad <- nrow(worse)
  # the seconds of 64 copies of the cases with the most species, GPU (a
  # call before, so that the device is warm) and CPU on all threads
  big <- utils::head(g[g$gpu == "within", ][order(-g$species[g$gpu == "within"]), ], 8L)
  timing <- vapply(seq_len(nrow(big)), function(i) {
    cs <- cases[[big$case[i]]]
    st <- cs$settings
    m <- readSBML(cs$file, fluxes = flux_vars(cs$file, st$variables))
    t_out <- st$start + st$duration * (0:st$steps) / st$steps
    times <- if (st$start > 0) c(0, t_out) else t_out
    invisible(gpu_run(m, times, "gpu"))
    tg <- system.time(gpu_run(m, times, "gpu"))[["elapsed"]]
    tc <- system.time(gpu_run(m, times, "cpu"))[["elapsed"]]
    sprintf("| %s | %d | %d | %d | %.3f | %.3f |", big$case[i], length(m$species), length(m$reactions),
            if (is.null(m$laws)) 0L else sum(m$laws$start >= 0L), tg, tc)
  }, "")
  gpu_lines <- c(sprintf("GPU engine (%s): every case the CPU passes, %d copies in one call, against the CPU;",
                         tryCatch(resolveBackend("gpu")$deviceName, error = function(e) "no GPU"), gpu_copies),
                 "relative difference, floor 1e-6 of each column's largest value:", "",
                 "| compared | of which with events | within 1e-9 | of which identical | worse | refused on GPU | error |",
                 "|---|---|---|---|---|---|---|",
                 sprintf("| %d | %d | %d | %d | %d | %d | %d |", nrow(g), sum(g$events), n("within"),
                         sum(g$gpu == "within" & g$gpu_rel == 0), n("worse"), n("refused"), n("error")), "",
                 "Worse or error:", "",
                 if (nrow(worse)) sprintf("- %s %s: %.3g %s", worse$case, worse$gpu, worse$gpu_rel, worse$gpu_reason) else "none",
                 "", sprintf("Largest models, %d copies (seconds, each call's own; GPU warm, CPU %d threads):",
                             gpu_copies, resolveBackend("cpu")$threads), "",
                 "| case | species | reactions | kinetic laws | GPU s | CPU s |", "|---|---|---|---|---|---|", timing)
  lines <- c(lines, "", gpu_lines)
}
writeLines(lines, file.path(out_dir, "table.md"))
cat(md_head, md_row("all", tab$outcome), sep = "\n")
if (on_gpu) cat(gpu_lines, sep = "\n")
cat("details:", file.path(out_dir, "table.md"), "\n")
bad <- sum(tab$outcome %in% c("wrong", "error", "crash", "hang")) + gpu_bad
if (bad) quit(status = 1L)
