# A subset of the SBML Test Suite's semantic cases (fixtures/sbml-suite,
# LGPL, see its LICENSE.txt): each case is either simulated within the
# suite's tolerance (|sim - expected| <= absolute + relative * |expected|,
# the suite's results being its own, from analytic solutions or agreeing
# simulators) or refused by readSBML() with the class
# sysbioGPU_sbml_unsupported and a message naming the construct (or, for
# what only a run meets, by lassieSimulate()); the
# expected outcome of each case is in cases.csv.  The whole suite runs with
# `make sbml-suite` (tools/sbml-suite.R).

suite_dir <- function() test_path("fixtures", "sbml-suite")

# the variables of a simulation in the units the suite asks for: a
# species' state is its concentration, or its amount with
# hasOnlySubstanceUnits; parameters and compartments are constants
suite_values <- function(m, sim, st) {
  a <- attributes(m)
  vapply(st$variables, function(v) {
    if (v %in% names(a$speciesCompartment)) {
      x <- sim[, v]
      cm <- a$speciesCompartment[[v]]
      # (the size at each time where rules change it: a column)
      size <- function() if (cm %in% colnames(sim)) sim[, cm] else a$compartmentSize[[cm]]
      if (v %in% st$amount && !a$substanceUnits[[v]]) x <- x * size()
      if (v %in% st$concentration && a$substanceUnits[[v]]) x <- x / size()
      x
    } else if (v %in% colnames(sim) && v != "time") {   # (the column time is time)
      sim[, v]
    } else {
      rep(a$constants[[v]], nrow(sim))
    }
  }, numeric(nrow(sim)))
}

test_that("the SBML Test Suite's subset: within tolerance, or refused by name", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  cases <- utils::read.csv(file.path(suite_dir(), "cases.csv"), colClasses = "character")
  expect_gte(nrow(cases), 50L)
  n_pass <- 0L; n_refused <- 0L
  for (k in seq_len(nrow(cases))) {
    id <- cases$case[k]
    dir <- file.path(suite_dir(), id)
    xml <- file.path(dir, cases$file[k])
    if (cases$outcome[k] == "refused") {
      # by readSBML(), or by lassieSimulate() where only running the model
      # meets the construct (simultaneous events whose order matters)
      expect_error(lassieSimulate(readSBML(xml), c(0, 1), backend = "cpu", threads = 1L, verbose = FALSE),
                   cases$reason[k], class = "sysbioGPU_sbml_unsupported", label = id)
      n_refused <- n_refused + 1L
      next
    }
    st <- suite_settings(file.path(dir, paste0(id, "-settings.txt")))
    t_out <- st$start + st$duration * (0:st$steps) / st$steps
    # (every reaction's flux: the cases that ask for one find it, the
    # others are simulated with the flux programs beside)
    m <- readSBML(xml, fluxes = TRUE)
    sim <- lassieSimulate(m, if (st$start > 0) c(0, t_out) else t_out, rtol = 1e-10, atol = 1e-14,
                          backend = "cpu", threads = 1L, verbose = FALSE)
    if (st$start > 0) sim <- sim[-1L, , drop = FALSE]
    got <- suite_values(m, sim, st)
    exp <- utils::read.csv(file.path(dir, paste0(id, "-results.csv")), check.names = FALSE)
    names(exp) <- trimws(names(exp))
    exp <- exp[-1L]   # the time column (a variable may be named like it: Time)
    want <- as.matrix(exp[, st$variables, drop = FALSE])
    # (NaN and infinite values as the suite gives them: the same)
    within <- (is.nan(want) & is.nan(got)) | (is.infinite(want) & !is.na(got) & got == want) |
      (is.finite(want) & is.finite(got) & abs(got - want) <= st$atol + st$rtol * abs(want))
    expect_true(all(within), label = paste(id, "within the suite's tolerance"))
    n_pass <- n_pass + 1L
  }
  # both kinds are there
  expect_gt(n_pass, 20L)
  expect_gt(n_refused, 20L)
})
