# SBML events (readSBML(), lassieSimulate() on the CPU, R/lassie-events.R)
# against closed forms: decays reset by events at known times, a
# threshold whose crossing time is known analytically, delays, values
# taken at trigger or execution time, persistence, priorities, firing at
# the start; and the refusals of what is not simulated.

ev_ci <- function(x) paste0("<ci>", x, "</ci>")
ev_cn <- function(x) paste0("<cn>", x, "</cn>")
ev_ap <- function(op, ...) paste0("<apply><", op, "/>", ..., "</apply>")
ev_time <- '<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">t</csymbol>'
ev_math <- function(x) paste0('<math xmlns="http://www.w3.org/1998/Math/MathML">', x, "</math>")

# A Level 3 model in compartment `cell` (size 1): species (named initial
# concentrations), parameters (named values; `const` the constant ones),
# reactions (sbml_reactions_xml()) and events, each a list of id, trigger
# (MathML), assign (named MathML by variable) and optionally delay,
# priority, persistent, initialValue, useValues.
ev_model <- function(species = c(S = 1), params = c(k = 0.5), const = "k", reactions = list(),
                     events = list(), compartment_constant = TRUE) {
  f <- tempfile(fileext = ".xml")
  ev <- vapply(events, function(e) {
    paste0(sprintf('<event id="%s" useValuesFromTriggerTime="%s">', e$id, tolower(!isFALSE(e$useValues))),
           sprintf('<trigger initialValue="%s" persistent="%s">', tolower(!isFALSE(e$initialValue)),
                   tolower(!isFALSE(e$persistent))), ev_math(e$trigger), "</trigger>",
           if (!is.null(e$priority)) paste0("<priority>", ev_math(e$priority), "</priority>"),
           if (!is.null(e$delay)) paste0("<delay>", ev_math(e$delay), "</delay>"),
           "<listOfEventAssignments>",
           paste0(sprintf('<eventAssignment variable="%s">', names(e$assign)), vapply(e$assign, ev_math, ""),
                  "</eventAssignment>", collapse = ""),
           "</listOfEventAssignments></event>")
  }, "")
  writeLines(c(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">',
    '<model id="events">',
    sprintf('<listOfCompartments><compartment id="cell" size="1" spatialDimensions="3" constant="%s"/></listOfCompartments>',
            tolower(compartment_constant)),
    "<listOfSpecies>",
    sprintf('<species id="%s" compartment="cell" initialConcentration="%s" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>',
            names(species), species),
    "</listOfSpecies>",
    if (length(params)) c("<listOfParameters>",
      sprintf('<parameter id="%s" value="%s" constant="%s"/>', names(params), params,
              tolower(names(params) %in% const)), "</listOfParameters>"),
    if (length(reactions)) c("<listOfReactions>", sbml_reactions_xml(reactions), "</listOfReactions>"),
    if (length(ev)) c("<listOfEvents>", ev, "</listOfEvents>"),
    "</model>", "</sbml>"), f)
  f
}
decay <- list(R1 = list(re = "S", law = ev_ap("times", ev_ci("k"), ev_ci("S"))))
sim <- function(f, times, ...) {
  lassieSimulate(readSBML(f), times, rtol = 1e-11, atol = 1e-14, backend = "cpu", verbose = FALSE, ...)
}

# ---- closed forms ------------------------------------------------------------

test_that("a species reset by an event at a time trigger follows the decay restarted there", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- ev_model(reactions = decay,
                events = list(list(id = "reset", trigger = ev_ap("geq", ev_time, ev_cn(2)),
                                   assign = list(S = ev_cn(1)))))
  tt <- c(0, 0.5, 1, 1.5, 1.9, 2.1, 2.5, 3, 4)
  out <- sim(f, tt)
  want <- ifelse(tt < 2, exp(-0.5 * tt), exp(-0.5 * (tt - 2)))
  expect_equal(unname(out[, "S"]), want, tolerance = 1e-8)
  # the clock is the time column, not a species of the output
  expect_identical(colnames(out), c("time", "S"))
})

test_that("a threshold trigger fires at its analytic crossing time, each time it is crossed", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # S = exp(-k t) crosses 1/4 at t* = log(4) / k; the event resets S to 1,
  # records the time in tc and counts in n: crossings at t*, 2 t*, ...
  k <- 0.5; ts <- log(4) / k
  f <- ev_model(params = c(k = k, tc = 0, n = 0), reactions = decay,
                events = list(list(id = "low", trigger = ev_ap("lt", ev_ci("S"), ev_cn(0.25)),
                                   assign = list(S = ev_cn(1), tc = ev_time,
                                                 n = ev_ap("plus", ev_ci("n"), ev_cn(1))))))
  tt <- c(0, 1, 2, 2.5, 3, 4, 5, 6.5)
  out <- sim(f, tt)
  n <- floor(tt / ts)
  expect_equal(unname(out[, "n"]), n)
  expect_equal(unname(out[, "tc"]), n * ts, tolerance = 1e-8)
  expect_lt(max(abs(out[n > 0, "tc"] - n[n > 0] * ts)), 1e-8)
  expect_equal(unname(out[, "S"]), exp(-k * (tt - n * ts)), tolerance = 1e-8)
})

test_that("a delay, with values taken at the trigger's time or at the execution's", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # triggered at t = 1, executed at t = 2: S = 2 S(1) or S = 2 S(2)
  for (at_trigger in c(TRUE, FALSE)) {
    f <- ev_model(reactions = decay,
                  events = list(list(id = "dbl", trigger = ev_ap("geq", ev_time, ev_cn(1)), delay = ev_cn(1),
                                     useValues = at_trigger,
                                     assign = list(S = ev_ap("times", ev_cn(2), ev_ci("S"))))))
    tt <- c(0, 0.5, 1.5, 1.99, 2.01, 3, 4)
    out <- sim(f, tt)
    s2 <- if (at_trigger) 2 * exp(-0.5) else 2 * exp(-1)
    want <- ifelse(tt < 2, exp(-0.5 * tt), s2 * exp(-0.5 * (tt - 2)))
    expect_equal(unname(out[, "S"]), want, tolerance = 1e-8, label = paste("useValuesFromTriggerTime", at_trigger))
  }
})

test_that("a trigger that turns false during the delay cancels a non-persistent event only", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # true on [1, 1.5), execution due at 2
  window <- ev_ap("and", ev_ap("geq", ev_time, ev_cn(1)), ev_ap("lt", ev_time, ev_cn(1.5)))
  for (persistent in c(TRUE, FALSE)) {
    f <- ev_model(reactions = decay,
                  events = list(list(id = "w", trigger = window, delay = ev_cn(1), persistent = persistent,
                                     assign = list(S = ev_cn(1)))))
    tt <- c(0, 1, 1.75, 2.5, 3)
    out <- sim(f, tt)
    want <- if (persistent) ifelse(tt < 2, exp(-0.5 * tt), exp(-0.5 * (tt - 2))) else exp(-0.5 * tt)
    expect_equal(unname(out[, "S"]), want, tolerance = 1e-8, label = paste("persistent", persistent))
  }
})

test_that("a window shorter than the integrator's steps is seen", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # S' = -1 from 10 (one exact step covers it all): the trigger holds for
  # S in [3, 4.3], i.e. t in [5.7, 7]; executed 2 later, at 7.7
  f <- ev_model(species = c(S = 10), params = c(k = 1),
                reactions = list(R1 = list(re = "S", law = ev_ci("k"))),
                events = list(list(id = "w", delay = ev_cn(2),
                                   trigger = ev_ap("and", ev_ap("leq", ev_ci("S"), ev_cn(4.3)),
                                                   ev_ap("geq", ev_ci("S"), ev_cn(3))),
                                   assign = list(S = ev_cn(10)))))
  tt <- 0:10
  out <- sim(f, tt)
  expect_equal(unname(out[, "S"]), ifelse(tt < 7.7, 10 - tt, 10 - (tt - 7.7)), tolerance = 1e-8)
})

test_that("simultaneous events execute by priority, each seeing the other's assignment", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # both at t = 1, values at execution: a then b gives p = 12, b then a 1
  for (a_first in c(TRUE, FALSE)) {
    f <- ev_model(params = c(k = 0.5, p = 0), reactions = decay,
                  events = list(
                    list(id = "a", trigger = ev_ap("geq", ev_time, ev_cn(1)), useValues = FALSE,
                         priority = ev_cn(if (a_first) 2 else 1), assign = list(p = ev_cn(1))),
                    list(id = "b", trigger = ev_ap("geq", ev_time, ev_cn(1)), useValues = FALSE,
                         priority = ev_cn(if (a_first) 1 else 2),
                         assign = list(p = ev_ap("plus", ev_ap("times", ev_ci("p"), ev_cn(10)), ev_cn(2))))))
    out <- sim(f, c(0, 0.5, 2))
    expect_equal(unname(out[, "p"]), c(0, 0, if (a_first) 12 else 1))
  }
  # equal priorities whose order matters: refused, by name
  f <- ev_model(params = c(k = 0.5, p = 0), reactions = decay,
                events = list(
                  list(id = "a", trigger = ev_ap("geq", ev_time, ev_cn(1)), priority = ev_cn(1),
                       assign = list(p = ev_cn(1))),
                  list(id = "b", trigger = ev_ap("geq", ev_time, ev_cn(1)), priority = ev_cn(1),
                       assign = list(p = ev_cn(2)))))
  expect_error(sim(f, c(0, 2)), "simultaneous events .*a, b", class = "sysbioGPU_sbml_unsupported")
})

test_that("a trigger true at the start fires there when its initialValue is false", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  for (init in c(TRUE, FALSE)) {
    f <- ev_model(reactions = decay,
                  events = list(list(id = "t0", trigger = ev_ap("geq", ev_ci("S"), ev_cn(0.5)), initialValue = init,
                                     assign = list(S = ev_cn(5)))))
    tt <- c(0, 0.5, 1)
    out <- sim(f, tt)
    expect_equal(unname(out[, "S"]), (if (init) 1 else 5) * exp(-0.5 * tt), tolerance = 1e-8,
                 label = paste("initialValue", init))
  }
})

test_that("a batch of rates runs each set with its events", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- ev_model(reactions = decay,
                events = list(list(id = "reset", trigger = ev_ap("geq", ev_time, ev_cn(2)),
                                   assign = list(S = ev_cn(1)))))
  m <- readSBML(f)
  tt <- c(0, 1, 3)
  rates <- rbind(m$rates, m$rates)
  rates[2, "R1"] <- 2 * rates[2, "R1"]
  b <- lassieSimulate(m, tt, rates = rates, rtol = 1e-11, atol = 1e-14, backend = "cpu", verbose = FALSE)
  expect_s3_class(b, "lassieBatch")
  for (s in 1:2) {
    k <- 0.5 * s
    expect_equal(unname(b[[s]][, "S"]), c(1, exp(-k), exp(-k)), tolerance = 1e-8)
  }
  a <- lassieSimulate(m, tt, rates = rates, rtol = 1e-11, atol = 1e-14, backend = "cpu", verbose = FALSE,
                      output = "array")
  expect_equal(unname(a[, "S", ]), unname(cbind(b[[1]][, "S"], b[[2]][, "S"])))
})

test_that("an event that resizes a compartment keeps its species' amounts", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # cell = 1 until t = 1, then 2; the law k [S] is an amount per time, so
  # the amount a = exp(-k t) until 1, then a(1) exp(-k (t - 1) / 2), and
  # the concentration a / cell halves at t = 1
  k <- 0.5
  f <- ev_model(params = c(k = k), reactions = decay, compartment_constant = FALSE,
                events = list(list(id = "grow", trigger = ev_ap("geq", ev_time, ev_cn(1)),
                                   assign = list(cell = ev_cn(2)))))
  tt <- c(0, 0.5, 0.99, 1.01, 1.5, 2, 3)
  out <- sim(f, tt)
  amount <- ifelse(tt < 1, exp(-k * tt), exp(-k) * exp(-k * (tt - 1) / 2))
  expect_equal(unname(out[, "S"]), amount / ifelse(tt < 1, 1, 2), tolerance = 1e-8)
})

test_that("an event that sets a species and resizes its compartment: the amount from the size before", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # at t = 1, S := 0.3 (a concentration) and cell := 2 together: the
  # amount is 0.3 times the size where the values are taken (1, the
  # suite's cases 01779 and 01780), then decays over the new size
  k <- 0.5
  f <- ev_model(params = c(k = k), reactions = decay, compartment_constant = FALSE,
                events = list(list(id = "set", trigger = ev_ap("geq", ev_time, ev_cn(1)),
                                   assign = list(S = ev_cn(0.3), cell = ev_cn(2)))))
  tt <- c(0, 0.5, 0.99, 1.01, 1.5, 2, 3)
  out <- sim(f, tt)
  amount <- ifelse(tt < 1, exp(-k * tt), 0.3 * exp(-k * (tt - 1) / 2))
  expect_equal(unname(out[, "S"]), amount / ifelse(tt < 1, 1, 2), tolerance = 1e-8)
})

# ---- what is refused -------------------------------------------------------

test_that("event constructs that are not simulated are refused by name", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  trig <- ev_ap("geq", ev_time, ev_cn(1))
  expect_error(readSBML(ev_model(reactions = decay,
                                 events = list(list(id = "grow", trigger = trig, assign = list(cell = ev_cn(2)))))),
               "event assignment to cell, a constant compartment \\(event grow\\)",
               class = "sysbioGPU_sbml_unsupported")
  expect_error(readSBML(ev_model(reactions = decay, params = c(k = 0.5),
                                 events = list(list(id = "kk", trigger = trig, assign = list(k = ev_cn(2)))))),
               "event assignment to k, a constant parameter \\(event kk\\)", class = "sysbioGPU_sbml_unsupported")
  dl <- '<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/delay">delay</csymbol>'
  expect_error(readSBML(ev_model(reactions = decay,
                                 events = list(list(id = "late", trigger = ev_ap("gt", paste0("<apply>", dl, ev_ci("S"), ev_cn(1), "</apply>"), ev_cn(2)),
                                                    assign = list(S = ev_cn(1)))))),
               "event late: its trigger \\(math with the delay csymbol", class = "sysbioGPU_sbml_unsupported")
})

test_that("events run with an interpolating method", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(ev_model(reactions = decay,
                         events = list(list(id = "reset", trigger = ev_ap("geq", ev_time, ev_cn(2)),
                                            assign = list(S = ev_cn(1))))))
  out <- lassieSimulate(m, 0:3, backend = "cpu", verbose = FALSE)
  # reset to 1 at t = 2, then a second of decay at rate 0.5
  expect_equal(unname(out[4, "S"]), exp(-0.5), tolerance = 1e-6)
  expect_error(lassieSimulate(m, 0:3, method = "rkf45", backend = "cpu", verbose = FALSE), "rkf45",
               class = "sysbioGPU_error_input")
  # events edited by hand into something else: an input error, never a crash
  bad <- m
  bad$events$events[[1]]$target <- 99L
  expect_error(lassieSimulate(bad, 0:3, backend = "cpu", verbose = FALSE), "model\\$events",
               class = "sysbioGPU_error_input")
})

test_that("a run with events that exhausts maxSteps fails as any run does", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # a trigger that turns at every crossing: many stops, few steps allowed
  k <- 0.5
  f <- ev_model(params = c(k = k), reactions = decay,
                events = list(list(id = "low", trigger = ev_ap("lt", ev_ci("S"), ev_cn(0.9)),
                                   assign = list(S = ev_cn(1)))))
  expect_error(sim(f, c(0, 100), maxSteps = 20), "maxSteps", class = "sysbioGPU_error")
  out <- sim(f, c(0, 100))
  expect_equal(unname(out[2, "S"]), exp(-k * (100 %% (log(1 / 0.9) / k))), tolerance = 1e-6)
})

test_that("a set of a batch that fails keeps its rows up to the failure, the others run on", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- ev_model(params = c(k = 0.5), reactions = decay,
                events = list(list(id = "low", trigger = ev_ap("lt", ev_ci("S"), ev_cn(0.9)),
                                   assign = list(S = ev_cn(1)))))
  m <- readSBML(f)
  tt <- seq(0, 1, by = 0.001)
  rates <- rbind(m$rates, m$rates)
  rates[2, "R1"] <- 50   # 475 crossings, more than the steps allowed
  expect_warning(b <- lassieSimulate(m, tt, rates = rates, maxSteps = 400, rtol = 1e-11, atol = 1e-14,
                                     backend = "cpu", verbose = FALSE),
                 class = "sysbioGPU_warning_lassie")
  expect_identical(attr(b, "status") != 0L, c(FALSE, TRUE))
  for (s in 1:2) {
    k <- c(0.5, 50)[s]
    x <- b[[s]][, "S"]
    ok <- !is.na(x)
    want <- exp(-k * (tt %% (log(1 / 0.9) / k)))
    # near a crossing the closed form's reset and the event's may fall on
    # either side of a row: compare away from them
    away <- abs(want - 0.9) > 1e-6 & abs(want - 1) > 1e-6
    expect_equal(unname(x[ok & away]), want[ok & away], tolerance = 1e-6)
    if (s == 2) expect_true(sum(ok) > 10 && !ok[length(tt)])
    else expect_true(all(ok))
  }
  # the engine itself running out of steps within a run between events:
  # the rows it reached are kept
  f <- ev_model(params = c(k = 0.5), reactions = decay,
                events = list(list(id = "never", trigger = ev_ap("lt", ev_ci("S"), ev_cn(0.01)),
                                   assign = list(S = ev_cn(1)))))
  m <- readSBML(f)
  tt <- seq(0, 1, by = 0.01)
  b <- suppressWarnings(lassieSimulate(m, tt, initial = rbind(m$initial, m$initial), maxSteps = 10,
                                       rtol = 1e-11, atol = 1e-14, backend = "cpu", verbose = FALSE))
  x <- b[[1]][, "S"]
  expect_identical(attr(b, "status")[[1]], 1L)
  expect_gt(sum(!is.na(x)), 10)
  expect_true(all(!is.na(x[seq_len(sum(!is.na(x)))])))
  expect_equal(unname(x[!is.na(x)]), exp(-0.5 * tt[!is.na(x)]), tolerance = 1e-8)
})

# ---- batches: rounds shared by simulations, and the GPU ----------------------

# A threshold reset (S < 1/4 -> S = 1; crossings at multiples of log(4) / k,
# a time of each set's own), a dose at a set time (t >= 3: S + 1, the same
# time for all sets) and a delayed counter: the sets of a batch stop at
# times of their own and at shared ones.
ev_batch_model <- function() {
  readSBML(ev_model(params = c(k = 0.5, n = 0), reactions = decay,
                    events = list(list(id = "low", trigger = ev_ap("lt", ev_ci("S"), ev_cn(0.25)),
                                       assign = list(S = ev_cn(1))),
                                  list(id = "dose", trigger = ev_ap("geq", ev_time, ev_cn(3)),
                                       assign = list(S = ev_ap("plus", ev_ci("S"), ev_cn(1)))),
                                  list(id = "count", trigger = ev_ap("lt", ev_ci("S"), ev_cn(0.5)),
                                       delay = ev_cn(0.25), assign = list(n = ev_ap("plus", ev_ci("n"), ev_cn(1)))))))
}
ev_batch_rates <- function(m) {
  rates <- matrix(m$rates, 5L, length(m$rates), byrow = TRUE, dimnames = list(NULL, names(m$rates)))
  rates[, "R1"] <- rates[, "R1"] * c(1, 1, 1.7, 0.6, 2.3)   # sets 1 and 2 alike
  rates
}
ev_run <- function(m, tt, rates, backend, ...) {
  lassieSimulate(m, tt, rates = rates, rtol = 1e-10, atol = 1e-13, backend = backend, verbose = FALSE, ...)
}

test_that("a batch with events gives each set its own call's bits, on any threads", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- ev_batch_model()
  rates <- ev_batch_rates(m)
  tt <- seq(0, 8, by = 0.5)
  b <- ev_run(m, tt, rates, "cpu", threads = 2L)
  b1 <- ev_run(m, tt, rates, "cpu", threads = 1L)
  for (s in seq_len(nrow(rates))) {
    one <- ev_run(m, tt, rates[s, , drop = FALSE], "cpu", threads = 1L)[[1L]]
    expect_identical(unclass(b[[s]])[, ], unclass(one)[, ], label = paste("set", s))
    expect_identical(attr(b[[s]], "stats"), attr(one, "stats"), label = paste("set", s))
    expect_identical(unclass(b1[[s]])[, ], unclass(one)[, ], label = paste("set", s, "one thread"))
  }
  # the closed form up to the dose: resets at multiples of log(4) / k
  for (s in seq_len(nrow(rates))) {
    k <- 0.5 * rates[s, "R1"] / m$rates[["R1"]]
    ts <- log(4) / k
    early <- tt < 3
    want <- exp(-k * (tt[early] %% ts))
    away <- abs(want - 0.25) > 1e-6 & abs(want - 1) > 1e-6
    expect_equal(unname(b[[s]][early, "S"])[away], want[away], tolerance = 1e-7, label = paste("set", s))
  }
})

test_that("the GPU runs events with the CPU's bits, on one or two devices", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  m <- ev_batch_model()
  rates <- ev_batch_rates(m)
  rates <- rates[rep(seq_len(nrow(rates)), 13), ]   # 65 sets, copies grouped in one call
  tt <- seq(0, 8, by = 0.5)
  cpu <- ev_run(m, tt, rates, "cpu")
  gpu <- ev_run(m, tt, rates, "gpu")
  expect_equal(runInfo(gpu)$backend, "gpu")
  for (s in seq_len(nrow(rates))) {
    expect_identical(unclass(gpu[[s]])[, ], unclass(cpu[[s]])[, ], label = paste("set", s))
    expect_identical(attr(gpu[[s]], "stats"), attr(cpu[[s]], "stats"), label = paste("set", s))
  }
  # the counter's delayed executions and the dose happened
  expect_true(all(vapply(gpu, function(o) o[nrow(o), "n"], 0) > 0))
  # two GPUs, or one GPU's two shares
  two <- on_devices(ev_run(m, tt, rates, "gpu", device = gpu_pair()))
  for (s in seq_len(nrow(rates))) expect_identical(unclass(two[[s]])[, ], unclass(gpu[[s]])[, ])
})

test_that("a stiff model with events on the GPU: the implicit steps watch too, on the device or the host", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  # A <-> B by fast laws (stiff near equilibrium, where "auto" turns to
  # implicit steps); at t = 0.5 an event moves all of B back to A, and a
  # threshold on A - B (crossed in the fast phase) counts in n
  f <- ev_model(species = c(A = 2, B = 0), params = c(kf = 1e4, kb = 1e4, n = 0), const = c("kf", "kb"),
                reactions = list(f = list(re = "A", pr = "B", law = ev_ap("times", ev_ci("kf"), ev_ci("A"))),
                                 b = list(re = "B", pr = "A", law = ev_ap("times", ev_ci("kb"), ev_ci("B")))),
                events = list(list(id = "back", trigger = ev_ap("geq", ev_time, ev_cn(0.5)),
                                   assign = list(A = ev_ap("plus", ev_ci("A"), ev_ci("B")), B = ev_cn(0))),
                              list(id = "half", trigger = ev_ap("lt", ev_ci("A"), ev_cn(1.5)),
                                   assign = list(n = ev_ap("plus", ev_ci("n"), ev_cn(1))))))
  m <- readSBML(f)
  rates <- matrix(m$rates, 3L, length(m$rates), byrow = TRUE, dimnames = list(NULL, names(m$rates)))
  rates[, c("f", "b")] <- rates[, c("f", "b")] * c(1, 0.5, 2)
  tt <- c(0, 0.25, 0.5, 0.75, 1)
  cpu <- ev_run(m, tt, rates, "cpu")
  for (dev in c(TRUE, FALSE)) {
    old <- options(sysbioGPU.lassieDeviceBDF = dev)
    gpu <- ev_run(m, tt, rates, "gpu")
    options(old)
    for (s in 1:3) {
      lab <- paste("set", s, "device BDF", dev)
      expect_identical(unclass(gpu[[s]])[, ], unclass(cpu[[s]])[, ], label = lab)
      expect_identical(attr(gpu[[s]], "stats"), attr(cpu[[s]], "stats"), label = lab)
      expect_gt(attr(gpu[[s]], "stats")[["implicitSteps"]], 0)
      # equilibrium A = B = 1 before and after the event; two crossings
      expect_equal(unname(gpu[[s]][c(2, 5), "A"]), c(1, 1), tolerance = 1e-8)
      expect_equal(unname(gpu[[s]][5, "n"]), 2, tolerance = 1e-9)
    }
  }
})

test_that("on the GPU a set that exhausts maxSteps between events fails as on the CPU", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  # the second set crosses 0.9 about 475 times in t 0-1, more than its
  # steps allow: the attempts of its earlier rounds count against maxSteps
  f <- ev_model(params = c(k = 0.5), reactions = decay,
                events = list(list(id = "low", trigger = ev_ap("lt", ev_ci("S"), ev_cn(0.9)),
                                   assign = list(S = ev_cn(1)))))
  m <- readSBML(f)
  tt <- seq(0, 1, by = 0.01)
  rates <- rbind(m$rates, m$rates, m$rates)
  rates[2, "R1"] <- 50
  rates[3, "R1"] <- 5
  run <- function(backend) {
    suppressWarnings(lassieSimulate(m, tt, rates = rates, maxSteps = 400, rtol = 1e-11, atol = 1e-14,
                                    backend = backend, verbose = FALSE))
  }
  cpu <- run("cpu")
  gpu <- run("gpu")
  expect_identical(attr(gpu, "status"), attr(cpu, "status"))
  expect_identical(attr(cpu, "status") != 0L, c(FALSE, TRUE, FALSE))
  expect_identical(attr(gpu, "messages"), attr(cpu, "messages"))
  for (s in 1:3) {
    expect_identical(unclass(gpu[[s]])[, ], unclass(cpu[[s]])[, ], label = paste("set", s))
    expect_identical(attr(gpu[[s]], "stats"), attr(cpu[[s]], "stats"), label = paste("set", s))
  }
})
