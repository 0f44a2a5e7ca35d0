# The CPU engine of lassieSimulate() (src/lassie/lassie_cpu.c and the
# headers it shares with the GPU engine) against oracles that do not come
# from it: closed forms, hand-derived derivatives, the step-size rules
# recomputed in R from their definitions on the engine's own step sequence,
# and invariants (the species' order).  Written for the survivors of
# `make mutants-auto` (tools/mutants-auto-triage-lassie-engine.tsv).

sim1 <- function(m, times, ...) {
  lassieSimulate(m, times, backend = "cpu", threads = 1, verbose = FALSE, ...)
}
# the time a run that stops on `maxSteps` names in its error
time_reached <- function(m, times, ...) {
  msg <- tryCatch({
    sim1(m, times, ...)
    NA_character_
  }, error = function(e) conditionMessage(e))
  expect_match(msg, "exhausted at t = ", fixed = TRUE)
  as.numeric(sub(".* at t = ([-0-9.eE+]+).*", "\\1", msg))
}

test_that("implicit steps keep tiny amounts to their tolerance (weights follow atol, not 1)", {
  # m10185.  A -> 0 at amounts of 1e-15 with atol 1e-27: the relative
  # error must be that of amounts of 1 with atol 1e-12 (the weights of the
  # Newton test and of the error test scale with the amounts)
  tt <- c(0, 1, 2, 5)
  for (a0 in c(1e-15, 1)) {
    m <- reactionModel(matrix(1), matrix(0), rates = 1, initial = a0, species = "A")
    out <- sim1(m, tt, method = "bdf", rtol = 1e-6, atol = a0 * 1e-12)
    expect_lt(max(abs(out[, "A"] / (a0 * exp(-tt)) - 1)), 1e-4, label = a0)
    expect_gt(attr(out, "stats")[["steps"]], 20)
  }
})

test_that("the species' order changes neither the steps nor the values", {
  # m10705 (the order selection of the BDF steps skipped every fourth
  # species).  S + E -> E + P fast, E -> 0, D -> 0 slow: stiff, then calm;
  # the same model with its species in three orders
  sp <- c("S", "E", "P", "D")
  R <- rbind(c(1, 1, 0, 0), c(0, 1, 0, 0), c(0, 0, 0, 1))
  P <- rbind(c(0, 1, 1, 0), c(0, 0, 0, 0), c(0, 0, 0, 0))
  tt <- c(0, 1, 10, 100, 1000)
  runs <- lapply(list(1:4, c(4, 1, 2, 3), c(2, 1, 3, 4)), function(o) {
    m <- reactionModel(R[, o, drop = FALSE], P[, o, drop = FALSE], rates = c(1e4, 1, 0.01),
                       initial = c(1, 1, 0, 1)[o], species = sp[o])
    sim1(m, tt)
  })
  for (r in runs[-1]) {
    expect_identical(attr(r, "stats"), attr(runs[[1]], "stats"))
    expect_equal(unclass(r)[, c("time", sp)], unclass(runs[[1]])[, c("time", sp)], tolerance = 1e-12)
  }
  expect_gte(attr(runs[[1]], "stats")[["switches"]], 1)
  expect_lt(abs(runs[[1]][5, "D"] / exp(-10) - 1), 1e-4)
})

test_that("a kinetic law's Jacobian is its derivative, one-sided at a species at 0", {
  # m12129.  A -> B at k1 A / (1 + C), C -> 0 at kc C (cell of size 1):
  # dv1/dA = k1 / (1 + C), dv1/dC = -k1 A / (1 + C)^2; at C = 0 the
  # difference is taken forward (a law may not be defined below 0)
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- tempfile(fileext = ".xml")
  on.exit(unlink(f))
  law1 <- paste0("<apply><divide/><apply><times/><ci>cell</ci><ci>k1</ci><ci>A</ci></apply>",
                 "<apply><plus/><cn>1</cn><ci>C</ci></apply></apply>")
  law2 <- "<apply><times/><ci>cell</ci><ci>kc</ci><ci>C</ci></apply>"
  sp <- function(id, x0) {
    sprintf(paste0('<species id="%s" compartment="cell" initialConcentration="%s" ',
                   'hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>'), id, x0)
  }
  ref <- function(s) sprintf('<speciesReference species="%s" stoichiometry="1" constant="true"/>', s)
  writeLines(c(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">',
    '<model id="law">',
    '<listOfCompartments><compartment id="cell" size="1" spatialDimensions="3" constant="true"/></listOfCompartments>',
    "<listOfSpecies>", sp("A", 1), sp("B", 0), sp("C", 1), "</listOfSpecies>",
    '<listOfParameters><parameter id="k1" value="1" constant="true"/>',
    '<parameter id="kc" value="1000" constant="true"/></listOfParameters>',
    "<listOfReactions>",
    '<reaction id="r1" reversible="false">',
    "<listOfReactants>", ref("A"), "</listOfReactants><listOfProducts>", ref("B"), "</listOfProducts>",
    '<listOfModifiers><modifierSpeciesReference species="C"/></listOfModifiers>',
    '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">', law1, "</math></kineticLaw></reaction>",
    '<reaction id="r2" reversible="false">',
    "<listOfReactants>", ref("C"), "</listOfReactants>",
    '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">', law2, "</math></kineticLaw></reaction>",
    "</listOfReactions></model></sbml>"), f)
  m <- readSBML(f)
  expect_false(is.null(m$laws))
  for (x in list(c(0.8, 0.2, 0), c(0.8, 0.2, 0.5), c(2, 0, 1e-12))) {
    J <- as.matrix(sysbioGPU:::lassie_jacobian(m, x))
    v1A <- 1 / (1 + x[3]); v1C <- -x[1] / (1 + x[3])^2
    Jref <- rbind(c(-v1A, 0, -v1C), c(v1A, 0, v1C), c(0, 0, -1000))
    expect_lt(max(abs(J - Jref)), 1e-6 * max(abs(Jref)), label = paste(x, collapse = ","))
  }
  # and the implicit steps follow the closed form
  # A = exp(-k1 (t + log((1 + exp(-kc t)) / 2) / kc))
  tt <- c(0, 0.5, 1, 2, 5)
  out <- sim1(m, tt, method = "bdf", rtol = 1e-8, atol = 1e-14)
  expect_lt(max(abs(out[, "A"] - exp(-(tt + log((1 + exp(-1000 * tt)) / 2) / 1000)))), 1e-6)
})

test_that("the first step is 1% of the time the fastest species needs to change by its tolerance", {
  # m13680.  h0 = 0.01 d0 / d1 with d0 = max |x| / sc, d1 = max |f| / sc,
  # sc = atol + rtol |x| (1e-6 of the span when d0 or d1 < 1e-5); one
  # accepted attempt (maxSteps = 1) ends at t = h0
  m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(0, 0)), rates = c(2, 0.5),
                     initial = c(3, 1), species = c("A", "B"))
  x <- c(3, 1); f <- c(-2 * 3, 2 * 3 - 0.5 * 1)
  sc <- 1e-12 + 1e-6 * abs(x)
  h0 <- 0.01 * max(abs(x) / sc) / max(abs(f) / sc)
  expect_equal(time_reached(m, c(0, 10), method = "dopri5", maxSteps = 1), h0, tolerance = 1e-9)
  # all at 0: 1e-6 of the span
  m0 <- reactionModel(rbind(0), rbind(1), rates = 1, initial = 0, species = "A")
  expect_equal(time_reached(m0, c(0, 10), method = "dopri5", maxSteps = 1), 1e-5, tolerance = 1e-9)
})

# Dormand-Prince's scaled error of one step of size h from x, recomputed
# from the published tableau (Dormand and Prince 1980): the estimate
# |h sum E_i k_i| / (atol + rtol max(|x|, |y|)) of a one-species model
dp5_error <- function(rhs, x, h, rtol, atol) {
  A <- matrix(0, 7, 7)
  A[2, 1] <- 1 / 5
  A[3, 1:2] <- c(3 / 40, 9 / 40)
  A[4, 1:3] <- c(44 / 45, -56 / 15, 32 / 9)
  A[5, 1:4] <- c(19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729)
  A[6, 1:5] <- c(9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656)
  A[7, 1:6] <- c(35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
  E <- c(71 / 57600, 0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)
  k <- numeric(7)
  k[1] <- rhs(x)
  for (s in 2:7) k[s] <- rhs(x + h * sum(A[s, 1:(s - 1)] * k[1:(s - 1)]))
  y <- x + h * sum(A[7, 1:6] * k[1:6])
  abs(h * sum(E * k)) / (atol + rtol * max(abs(x), abs(y)))
}

test_that("after a rejected explicit step the next attempt is 0.9 err^(-1/4) of it", {
  # m13903.  0 -> A (1), A -> 0 (10) from A = 0 over 1e5: the first attempt
  # (1e-6 of the span) fails Dormand-Prince's error test; the retry is
  # 0.9 err^(-1/4) (within [0.1, 0.9]) of it, accepted
  h <- 0.1
  err <- dp5_error(function(a) 1 - 10 * a, 0, h, 1e-6, 1e-12)
  expect_gt(err, 1)
  fac <- min(0.9, max(0.1, 0.9 * err^(-1 / 4)))
  m <- reactionModel(rbind(0, 1), rbind(1, 0), rates = c(1, 10), initial = 0, species = "A")
  expect_equal(time_reached(m, c(0, 1e5), method = "dopri5", maxSteps = 1), 0)
  expect_equal(time_reached(m, c(0, 1e5), method = "dopri5", maxSteps = 2), h * fac, tolerance = 1e-8)
})

test_that("a retry below 64 ulps of t is a step size underflow, one above is taken", {
  # m11571.  The model above started at t0 instead of 0 (its rates do not
  # depend on t): the retry after the first rejection is h1 = 0.1 fac; the
  # smallest step at t0 is 64 ulps of t0 (64 DBL_EPSILON t0).  Placed 0.5%
  # on either side of h1 = 64 DBL_EPSILON t0, the run fails there or goes on.
  err <- dp5_error(function(a) 1 - 10 * a, 0, 0.1, 1e-6, 1e-12)
  h1 <- 0.1 * min(0.9, max(0.1, 0.9 * err^(-1 / 4)))
  t_edge <- h1 / (64 * .Machine$double.eps)
  m <- reactionModel(rbind(0, 1), rbind(1, 0), rates = c(1, 10), initial = 0, species = "A")
  t0 <- t_edge * 1.005
  expect_error(sim1(m, c(t0, t0 + 1e5), method = "dopri5"), "step size underflow")
  t0 <- t_edge * 0.995
  out <- sim1(m, c(t0, t0 + 1e5), method = "dopri5")
  expect_lt(abs(out[2, "A"] - 0.1), 1e-6)
})

test_that("RKF45's steps grow as the tolerance to the -1/5 (a 4(5) pair)", {
  # m11854.  A -> 0 over 10 time constants: a million times tighter
  # tolerance costs about 10^(6/5) = 16 times the steps for a 4(5) pair
  m <- reactionModel(matrix(1), matrix(0), rates = 1, initial = 1, species = "A")
  n <- vapply(c(1e-4, 1e-10), function(rt) {
    out <- sim1(m, c(0, 10), method = "rkf45", rtol = rt, atol = 1e-20)
    expect_lt(abs(out[2, "A"] / exp(-10) - 1), 20 * rt)
    attr(out, "stats")[["steps"]]
  }, 0)
  expect_lt(n[2] / n[1], 30)
  expect_gt(n[2] / n[1], 8)
})

test_that("the dense LU fallback solves exactly (closed form, few rejections), also for larger models", {
  # m10539, m12399, m12469.  A <-> B at 1e12 / 5e11, B -> C at 1, from
  # equilibrium: A + B = exp(-2 t / 3).  The diagonal pivots of the sparse
  # LU cancel, so the steps factor I - gamma J densely.  The model is
  # linear, so J is exact and constant: with an exact solve the Newton
  # iterations converge and steps are rejected by the error test alone.
  # 30 inert species make the dense factors larger.
  tt <- c(0, 0.5, 1, 2, 5)
  s <- exp(-2 * tt / 3)
  for (nE in c(0, 30)) {
    R <- cbind(matrix(0, 3, nE), rbind(c(1, 0, 0), c(0, 1, 0), c(0, 1, 0)))
    P <- cbind(matrix(0, 3, nE), rbind(c(0, 1, 0), c(1, 0, 0), c(0, 0, 1)))
    m <- reactionModel(R, P, rates = c(1e12, 5e11, 1), initial = c(rep(1, nE), 1 / 3, 2 / 3, 0),
                       species = c(if (nE) paste0("E", seq_len(nE)), "A", "B", "C"))
    for (meth in c("bdf", "auto")) {
      out <- sim1(m, tt, method = meth, rtol = 1e-8)
      lab <- paste(nE, meth)
      expect_lt(max(abs(out[, "A"] / (s / 3) - 1)), 1e-5, label = lab)
      expect_lt(max(abs(out[, "C"] - (1 - s))), 1e-6, label = lab)
      if (nE) expect_lt(max(abs(out[, paste0("E", seq_len(nE))] - 1)), 1e-12, label = lab)
      st <- attr(out, "stats")
      expect_lt(st[["rejected"]], 30, label = lab)
      expect_lt(st[["jacobians"]], 15, label = lab)
    }
  }
})

test_that("explicit steps turn to BDF once h rho > 3 on 15 accepted steps (rule recomputed from the steps)", {
  # m11546, m13824, m11613.  A -> 0 (k = 1000) from amounts near atol: the
  # explicit steps soon run at Dormand-Prince's stability limit, h k
  # about 3.3.  For one linear species the estimate of rho is k, so
  # h rho = h k for every accepted step h.  The attempts one by one (a
  # run stopped by maxSteps = n reports its time and counters): the
  # documented rule, replayed on them in R, must switch at the attempt
  # where the engine did.  (Counting: a run of 6 accepted steps at or
  # below 3 clears the count; 6 rejections of the last 16 attempts switch
  # too.)
  k <- 1000
  rules <- character(0)
  # amounts far below atol make the error test pass until the step is
  # well past the stability limit, and then fail often: there the
  # rejections switch first (1e-20, 1e-28), elsewhere the 15 steps
  for (a0 in c(1e-10, 1e-12, 1e-20, 1e-28)) {
    m <- reactionModel(matrix(1), matrix(0), rates = k, initial = a0, species = "A")
    r <- t(vapply(1:40, function(n) {
      b <- suppressWarnings(lassieSimulate(m, c(0, 1), rates = rbind(k, k), maxSteps = n,
                                           backend = "cpu", threads = 1, verbose = FALSE,
                                           output = "array"))
      s <- attr(b, "stats")[, 1]
      c(t = suppressWarnings(as.numeric(sub(".* at t = ([-0-9.eE+]+).*", "\\1", attr(b, "messages")[1]))),
        steps = s[["steps"]], switches = s[["switches"]])
    }, numeric(3)))
    observed <- which(r[, "switches"] > 0)[1]
    expect_false(is.na(observed), label = a0)
    t_prev <- 0; prev_h <- 0; count <- 0; calm <- 0; rej <- integer(0); steps_prev <- 0
    predicted <- NA
    for (n in seq_len(nrow(r))) {
      if (prev_h > 0) {   # the check before attempt n
        if (prev_h * k > 3) { count <- count + 1; calm <- 0 }
        else { calm <- calm + 1; if (calm >= 6) count <- 0 }
        if (count >= 15) { predicted <- n; rules <- c(rules, "stiff"); break }
      }
      if (r[n, "steps"] > steps_prev) {
        prev_h <- r[n, "t"] - t_prev; t_prev <- r[n, "t"]; rej <- c(rej, 0L)
      } else {
        prev_h <- 0; rej <- c(rej, 1L)
        if (sum(utils::tail(rej, 16)) >= 6) { predicted <- n; rules <- c(rules, "rejections"); break }
      }
      steps_prev <- r[n, "steps"]
    }
    expect_equal(observed, predicted, label = a0)
    expect_gt(observed, 16)
  }
  expect_setequal(rules, c("stiff", "rejections"))
})

test_that("a stiff transient that dies out hands back to explicit steps (Gershgorin h rho < 1)", {
  # m10271.  S + E -> E + P at 1e4 is stiff while E lasts; E -> 0 at 0.01
  # and D -> 0 at 1e-4 are slow.  Once S is spent and E has decayed, the
  # Gershgorin bound on rho(J) is about the slow rates (<= 0.01 + 1e4 S),
  # so implicit steps shorter than 100 have h rho < 1: the run must return
  # to explicit steps.  E and D follow their closed forms.
  m <- reactionModel(rbind(c(1, 1, 0, 0), c(0, 1, 0, 0), c(0, 0, 0, 1)),
                     rbind(c(0, 1, 1, 0), c(0, 0, 0, 0), c(0, 0, 0, 0)),
                     rates = c(1e4, 0.01, 1e-4), initial = c(1, 1, 0, 1), species = c("S", "E", "P", "D"))
  tt <- c(0, 10, 100, 1000, 3000, 10000, 30000)
  out <- sim1(m, tt)
  st <- attr(out, "stats")
  expect_gte(st[["switches"]], 2)
  expect_gt(st[["implicitSteps"]], 20)
  expect_lt(st[["implicitSteps"]], st[["steps"]])
  expect_lt(max(abs(out[, "E"] - exp(-0.01 * tt))), 1e-5)
  expect_lt(max(abs(out[, "D"] - exp(-1e-4 * tt))), 1e-5)
  expect_lt(max(abs(out[, "S"] + out[, "P"] - 1)), 1e-6)
})

test_that("atol = 0 is refused by name: a species that stays at 0 would have no error weight", {
  # A -> B and C -> D with C = D = 0: with atol = 0 the weight of C and D is
  # 0 and their error 0 / 0; the call is refused before the engine runs, and
  # a tiny atol gives A = exp(-t) with C and D at 0
  m <- reactionModel(rbind(c(1, 0, 0, 0), c(0, 0, 1, 0)), rbind(c(0, 1, 0, 0), c(0, 0, 0, 1)),
                     rates = c(1, 1), initial = c(1, 0, 0, 0), species = c("A", "B", "C", "D"))
  tt <- c(0, 1, 2, 5)
  expect_error(sim1(m, tt, rtol = 1e-8, atol = 0), "`atol` must be > 0", class = "sysbioGPU_error_input")
  for (meth in c("dopri5", "rkf45", "auto", "bdf")) {
    out <- sim1(m, tt, method = meth, rtol = 1e-8, atol = 1e-300)
    expect_lt(max(abs(out[, "A"] / exp(-tt) - 1)), 1e-5, label = meth)
    expect_true(all(out[, c("C", "D")] == 0), label = meth)
  }
})

test_that("implicit steps hand back after 10 steps in a row with h rho < 1, not at h rho just above 1", {
  # m11558.  S + E -> E + P (1e4), E -> 0 (0.03), D -> 0 (1e-4) at rtol
  # 1e-8: after the stiff start the implicit steps are kept for a long
  # stretch at h rho(J) just above 1, then the bound falls below 1.  rho is
  # Gershgorin's bound at the last Jacobian, max(k (E + S), ke, kd), from
  # the closed forms E = exp(-ke t), S = exp(-k (1 - E) / ke) at the time
  # of that Jacobian; h the next step (the size of the next attempt).  The
  # attempts one by one (runs stopped by maxSteps = n): the switch back
  # must follow the 10th step in a row with h rho < 1.
  k <- 1e4; ke <- 0.03; kd <- 1e-4
  m <- reactionModel(rbind(c(1, 1, 0, 0), c(0, 1, 0, 0), c(0, 0, 0, 1)),
                     rbind(c(0, 1, 1, 0), c(0, 0, 0, 0), c(0, 0, 0, 0)),
                     rates = c(k, ke, kd), initial = c(1, 1, 0, 1), species = c("S", "E", "P", "D"))
  probe <- function(n) {
    b <- suppressWarnings(lassieSimulate(m, c(0, 1e4), rates = rbind(m$rates, m$rates), maxSteps = n,
                                         rtol = 1e-8, backend = "cpu", threads = 1, verbose = FALSE,
                                         output = "array"))
    s <- attr(b, "stats")[, 1]
    c(t = as.numeric(sub(".* at t = ([-0-9.eE+]+).*", "\\1", attr(b, "messages")[1])),
      s[c("steps", "switches", "implicitSteps", "jacobians")])
  }
  # the attempt that switches back (the second switch)
  lo <- 1; hi <- 1000
  expect_gte(probe(hi)[["switches"]], 2)
  while (hi - lo > 1) {
    mid <- (lo + hi) %/% 2
    if (probe(mid)[["switches"]] >= 2) hi <- mid else lo <- mid
  }
  nsb <- hi
  n <- (nsb - 50):(nsb + 1)
  r <- t(vapply(n, probe, numeric(5)))
  prev <- rbind(probe(nsb - 51), r[-nrow(r), ])
  acc <- r[, "steps"] > prev[, "steps"]
  G <- function(t) {
    E <- exp(-ke * t)
    max(k * (E + exp(-k * (1 - E) / ke)), ke, kd)
  }
  rho <- rep(NA_real_, length(n)); cur <- NA_real_
  for (i in seq_along(n)) {
    if (r[i, "jacobians"] > prev[i, "jacobians"]) cur <- G(prev[i, "t"])
    rho[i] <- cur
  }
  # accepted implicit steps up to the switch, each with its next step
  imp <- which(acc & r[, "implicitSteps"] > prev[, "implicitSteps"])
  expect_true(acc[length(n)])   # the first explicit step after the switch is taken
  nxt <- vapply(imp, function(i) { j <- i + which(acc[-(1:i)])[1]; r[j, "t"] - prev[j, "t"] }, 0)
  hrho <- nxt * rho[imp]
  last <- length(imp)
  expect_equal(unname(n[imp[last]]), nsb)
  calm <- hrho[(last - 9):last]
  expect_true(all(!is.na(calm) & calm < 1), label = paste(signif(calm, 4), collapse = " "))
  expect_gte(hrho[last - 10], 1)
  expect_gte(r[imp[last - 10], "implicitSteps"], 20)
})

test_that("a batch's first bad value in matrix order decides the message: negative before NaN", {
  # m13775: rows are simulations, columns reactions; the first bad value
  # in R's column-major order is [1, 2] (negative), a later row's [3, 2]
  # is NaN and must not take its place, in either order of kinds
  m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(0, 0)), rates = c(2, 0.5),
                     initial = c(10, 0), species = c("A", "B"))
  r <- matrix(1, 3, 2)
  r[1, 2] <- -1
  r[3, 2] <- NaN
  expect_error(lassieSimulate(m, c(0, 1), rates = r, backend = "cpu", threads = 1), class = "sysbioGPU_error_input",
               regexp = "`rates` must not be negative", fixed = TRUE)
  r[1, 2] <- NaN
  r[3, 2] <- -1
  expect_error(lassieSimulate(m, c(0, 1), rates = r, backend = "cpu", threads = 1), class = "sysbioGPU_error_input",
               regexp = "`rates` must not contain NA, NaN or Inf", fixed = TRUE)
})

test_that("a reactant order of 1000 runs to the closed form; 1001 is refused by name", {
  # m13210: the engine's bound on orders is the reader's, 1000.
  # dA/dt = -k A^1000 from A(0) = 1: A(t) = (1 + 999 k t)^(-1/999)
  k <- 0.5
  m <- reactionModel(matrix(1000), matrix(999), rates = k, initial = 1, species = "A")
  r <- lassieSimulate(m, c(0, 0.5, 1), backend = "cpu", threads = 1)
  expect_equal(unname(r[, "A"]), (1 + 999 * k * c(0, 0.5, 1))^(-1 / 999), tolerance = 1e-6)
  m2 <- reactionModel(matrix(1001), matrix(0), rates = 1, initial = 1, species = "A")
  expect_error(lassieSimulate(m2, c(0, 1), backend = "cpu", threads = 1), class = "sysbioGPU_error_input",
               regexp = "a reactant order of 1001 (more than 1000", fixed = TRUE)
})
