# The SBML Test Suite's settings file of a case (NNNNN-settings.txt): the
# output grid, the variables asked for, the tolerances and the variables
# compared as amounts or concentrations.  Used by test-sbml-suite.R and by
# the whole suite's harness, tools/sbml-suite.R, which sources this file.
suite_settings <- function(f) {
  l <- readLines(f, warn = FALSE)
  kv <- regmatches(l, regexec("^\\s*([A-Za-z]+)\\s*:\\s*(.*)$", l))
  kv <- kv[lengths(kv) == 3L]
  s <- stats::setNames(lapply(kv, function(x) trimws(x[3])), vapply(kv, `[`, "", 2))
  lst <- function(x) if (is.null(x) || !nzchar(x)) character() else trimws(strsplit(x, ",")[[1]])
  list(start = as.double(s$start), duration = as.double(s$duration), steps = as.integer(s$steps),
       variables = lst(s$variables), atol = as.double(s$absolute), rtol = as.double(s$relative),
       amount = lst(s$amount), concentration = lst(s$concentration))
}
