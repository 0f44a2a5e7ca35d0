# Kinetic laws that are not mass action (readSBML() compiles each to a
# program both engines evaluate; the Jacobian of the implicit steps by
# finite differences): against deSolve with the right-hand side written
# here in R, and against hand-derived values.

# Michaelis-Menten A -> B, law cell * V * A / (Km + A) (an amount per time:
# the concentrations change by V A / (Km + A))
mm_file <- function(V = 1.5, Km = 0.7, A0 = 3) {
  sbml_model(2, c(A = A0, B = 0), c(V = V, Km = Km),
             list(r = list(re = "A", pr = "B",
                           law = ap("divide", ap("times", ci("cell"), ci("V"), ci("A")),
                                    ap("plus", ci("Km"), ci("A"))))))
}

test_that("Michaelis-Menten runs on the CPU, explicit and implicit, as deSolve", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_not_installed("deSolve")
  m <- readSBML(mm_file())
  expect_false(is.null(m$laws))
  tt <- c(0, 0.5, 1, 2, 5)
  ref <- deSolve::ode(c(A = 3, B = 0), tt, function(t, y, p) {
    v <- 1.5 * y[["A"]] / (0.7 + y[["A"]])
    list(c(-v, v))
  }, NULL, rtol = 1e-12, atol = 1e-14)
  for (meth in c("auto", "bdf")) {
    out <- lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-14, method = meth, backend = "cpu",
                          verbose = FALSE)
    expect_lt(max(abs(out[, c("A", "B")] - ref[, c("A", "B")])), 1e-7)
  }
  # a batch varies the laws' factor: twice the factor, twice the speed
  b <- lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-14, rates = rbind(0.5, 1), backend = "cpu",
                      verbose = FALSE)
  expect_lt(max(abs(b[[2]][, "A"] - lassieSimulate(m, 2 * tt, rtol = 1e-10, atol = 1e-14,
                                                   backend = "cpu", verbose = FALSE)[, "A"])), 1e-7)
})

test_that("a Hill law with a modifier, next to mass action, as deSolve; stiff on BDF", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_not_installed("deSolve")
  # A -> B at V E A^h / (K^h + A^h) (E a modifier, decaying by mass
  # action), B -> A at kb B (mass action); h = 2.5 is no polynomial.  kb is
  # large: the problem turns stiff.
  hill <- ap("divide", ap("times", ci("cell"), ci("V"), ci("E"), ap("power", ci("A"), ci("h"))),
             ap("plus", ap("power", ci("K"), ci("h")), ap("power", ci("A"), ci("h"))))
  f <- sbml_model(1, c(A = 2, B = 0, E = 1), c(V = 3, K = 0.5, h = 2.5, kb = 1000, kd = 0.3),
                  list(act = list(re = "A", pr = "B", mod = "E", law = hill),
                       back = list(re = "B", pr = "A", law = ap("times", ci("kb"), ci("B"))),
                       dec = list(re = "E", law = ap("times", ci("kd"), ci("E")))))
  m <- readSBML(f)
  expect_equal(m$laws$start >= 0, c(TRUE, FALSE, FALSE))
  # the law's reactions read A and E: the Jacobian's pattern, its values
  # by differences, against the hand-derived derivatives
  x <- c(A = 0.8, B = 0.1, E = 0.6)
  J <- as.matrix(sysbioGPU:::lassie_jacobian(m, x))
  g <- function(a) 0.5^2.5 + a^2.5
  dvdA <- 3 * 0.6 * (2.5 * 0.8^1.5 * g(0.8) - 0.8^2.5 * 2.5 * 0.8^1.5) / g(0.8)^2
  dvdE <- 3 * 0.8^2.5 / g(0.8)
  expect_equal(J[1, ], c(-dvdA - 0, 1000, -dvdE), tolerance = 1e-8)
  expect_equal(J[2, ], c(dvdA, -1000, dvdE), tolerance = 1e-8)
  expect_equal(J[3, ], c(0, 0, -0.3))
  tt <- c(0, 0.1, 1, 5, 20)
  ref <- deSolve::ode(c(A = 2, B = 0, E = 1), tt, function(t, y, p) {
    v <- 3 * y[["E"]] * y[["A"]]^2.5 / (0.5^2.5 + y[["A"]]^2.5)
    w <- 1000 * y[["B"]]
    list(c(v * -1 + w, v - w, -0.3 * y[["E"]]))
  }, NULL, method = "lsoda", rtol = 1e-12, atol = 1e-14)
  out <- lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-14, backend = "cpu", verbose = FALSE)
  expect_gte(attr(out, "stats")[["implicitSteps"]], 1)
  expect_lt(max(abs(out[, c("A", "B", "E")] - ref[, c("A", "B", "E")])), 1e-7)
})

test_that("the programs' operators are SBML's functions", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # one law per operator family, each in a reaction 0 -> P_i that reads A
  # and B; the right-hand side at a few states against R's value
  laws <- list(
    pw = list(paste0("<piecewise><piece>", ap("times", cn(2), ci("A")), ap("gt", ci("A"), ci("B")), "</piece>",
                     "<otherwise>", ap("times", cn(3), ci("B")), "</otherwise></piecewise>"),
              function(A, B) if (A > B) 2 * A else 3 * B),
    logic = list(ap("plus", ap("and", ap("lt", ci("A"), cn(1)), ap("geq", ci("B"), cn(0.5))),
                    ap("times", cn(2), ap("or", ap("eq", ci("A"), ci("B")), ap("not", ap("leq", ci("B"), cn(2))))),
                    ap("times", cn(4), ap("xor", ap("gt", ci("A"), cn(0)), ap("neq", ci("B"), cn(0.5))))),
                 function(A, B) (A < 1 && B >= 0.5) + 2 * (A == B || !(B <= 2)) + 4 * xor(A > 0, B != 0.5)),
    mm = list(ap("plus", ap("min", ci("A"), ci("B")), ap("times", cn(10), ap("max", ci("A"), ci("B"), cn(1)))),
              function(A, B) min(A, B) + 10 * max(A, B, 1)),
    fun = list(ap("plus", ap("exp", ci("A")), ap("ln", ci("B")), ap("log", "<logbase>", cn(10), "</logbase>", ci("B")),
                  ap("root", ci("A")), ap("abs", ap("minus", ci("B"))), ap("floor", ci("A")),
                  ap("ceiling", ci("B")), ap("sin", ci("A")), ap("cos", ci("B")), ap("tanh", ci("A")),
                  ap("arctan", ci("B")), ap("sec", ci("A")), ap("power", ci("B"), cn(1.7))),
               function(A, B) exp(A) + log(B) + log10(B) + sqrt(A) + abs(-B) + floor(A) + ceiling(B) +
                 sin(A) + cos(B) + tanh(A) + atan(B) + 1 / cos(A) + B^1.7))
  rx <- lapply(seq_along(laws), function(i) list(pr = paste0("P", i), mod = c("A", "B"), law = laws[[i]][[1]]))
  names(rx) <- names(laws)
  sp <- c(A = 1, B = 1, stats::setNames(rep(0, length(laws)), paste0("P", seq_along(laws))))
  m <- readSBML(sbml_model(1, sp, c(k = 1), rx))
  expect_true(all(m$laws$start >= 0))
  for (st in list(c(0.3, 0.7), c(1.6, 0.4), c(0.5, 0.5), c(2.2, 3.1))) {
    x <- c(st, rep(0, length(laws)))
    f <- sysbioGPU:::lassie_rhs(m, x)
    want <- vapply(laws, function(l) l[[2]](st[1], st[2]), 0)
    expect_equal(f[-(1:2)], unname(want), tolerance = 1e-14, label = paste(st, collapse = ","))
  }
})

test_that("kinetic laws run where auto resolves to; the glue checks each program", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(mm_file())
  expect_output(print(summary(m)), "1 kinetic law\\(s\\) that are not mass action\n")
  out <- lassieSimulate(m, c(0, 1), backend = "auto", verbose = FALSE)
  expect_equal(runInfo(out)$backend, resolveBackend("auto")$backend)
  # the glue checks each program before the engine runs it
  bad <- m
  bad$laws$code[length(bad$laws$code)] <- 99L
  expect_error(lassieSimulate(bad, c(0, 1), backend = "cpu", verbose = FALSE), "unknown operator",
               class = "sysbioGPU_error_input")
  # laws that still cannot run are refused by name
  f <- sbml_model(1, c(A = 1), c(k = 1),
                  list(r = list(re = "A", law = ap("times", ci("k"), ap("factorial", ci("A"))))))
  expect_error(readSBML(f), "r: .*the function factorial of species", class = "sysbioGPU_sbml_unsupported")
})

test_that("a compartment whose size is not a finite number > 0 is refused by name (NaN too)", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # a size of "nan" once reached `if` as NA ("missing value where
  # TRUE/FALSE needed": found by tools/fuzz.R); 0, -1 and INF as well
  for (size in c("nan", "0", "-1", "INF")) {
    f <- sbml_model(size, c(A = 1, B = 0), c(k = 1),
                    list(r = list(re = "A", pr = "B", law = ap("times", ci("k"), ci("A")))))
    expect_error(readSBML(f), "compartments whose size is not a finite number > 0 \\(A, B\\)",
                 class = "sysbioGPU_sbml_unsupported", label = size)
  }
  # a positive size reads
  f <- sbml_model("2", c(A = 1, B = 0), c(k = 1),
                  list(r = list(re = "A", pr = "B", law = ap("times", ci("k"), ci("A")))))
  expect_s3_class(readSBML(f), "reactionModel")
})

test_that("a name of blanks in a law's math is refused by name", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # <ci> </ci> reached Rf_install("") and R's unclassed "attempt to use
  # zero-length variable name" (found by tools/fuzz.R)
  f <- sbml_model(1, c(A = 1, B = 0), c(k = 1),
                  list(r = list(re = "A", pr = "B", law = ap("times", ci("k"), ci(" ")))))
  expect_error(readSBML(f), "r: .*a name without a name", class = "sysbioGPU_sbml_unsupported")
})

test_that("readSBML(fluxes =) reports each reaction's law at the output's states, and guards its parameters", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # a Michaelis-Menten law (not mass action), a reversible mass-action
  # reaction (two reactions of the engine, one flux) in a compartment of
  # size 2: a flux is the law as written, amount per time
  rev <- paste0('<reaction id="rv" reversible="true"><listOfReactants>',
                '<speciesReference species="B" stoichiometry="1" constant="true"/></listOfReactants>',
                '<listOfProducts><speciesReference species="C" stoichiometry="1" constant="true"/></listOfProducts>',
                '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">',
                ap("times", ci("cell"), ap("minus", ap("times", ci("kf"), ci("B")), ap("times", ci("kr"), ci("C")))),
                "</math></kineticLaw></reaction>")
  f <- sbml_model(2, c(A = 3, B = 0, C = 0.5), c(V = 1.5, Km = 0.7, kf = 0.4, kr = 0.9),
                  list(mm = list(re = "A", pr = "B",
                                 law = ap("divide", ap("times", ci("cell"), ci("V"), ci("A")),
                                          ap("plus", ci("Km"), ci("A"))))))
  txt <- readLines(f)
  writeLines(sub("</listOfReactions>", paste0(rev, "</listOfReactions>"), txt, fixed = TRUE), f)
  tt <- c(0, 0.5, 1, 3)
  plain <- lassieSimulate(readSBML(f), tt, rtol = 1e-10, backend = "cpu", verbose = FALSE)
  expect_false(any(c("mm", "rv") %in% colnames(plain)))
  m <- readSBML(f, fluxes = TRUE)
  expect_identical(m$fluxes, c("mm", "rv"))
  out <- lassieSimulate(m, tt, rtol = 1e-10, backend = "cpu", verbose = FALSE)
  # the states are those of the model without fluxes
  expect_identical(unclass(out)[, c("A", "B", "C")], unclass(plain)[, c("A", "B", "C")])
  # each flux from the states' columns, by hand
  A <- out[, "A"]; B <- out[, "B"]; C <- out[, "C"]
  expect_equal(unname(out[, "mm"]), unname(2 * 1.5 * A / (0.7 + A)), tolerance = 1e-14)
  expect_equal(unname(out[, "rv"]), unname(2 * (0.4 * B - 0.9 * C)), tolerance = 1e-14)
  # one flux asked for
  one <- lassieSimulate(readSBML(f, fluxes = "rv"), tt, rtol = 1e-10, backend = "cpu", verbose = FALSE)
  expect_true("rv" %in% colnames(one) && !"mm" %in% colnames(one))
  # other rates would leave the fluxes behind: refused; the model's own pass
  expect_error(lassieSimulate(m, tt, rates = m$rates * 2, backend = "cpu", verbose = FALSE),
               "fluxes", class = "sysbioGPU_error_input")
  expect_silent(lassieSimulate(m, tt, rates = m$rates, backend = "cpu", verbose = FALSE))
  expect_error(readSBML(f, fluxes = c("mm", "nope")), "nope", class = "sysbioGPU_error_input")
  expect_error(readSBML(f, fluxes = NA), "`fluxes`", class = "sysbioGPU_error_input")
})

test_that("a law's positive part of a species, piecewise(x, x > 0, 0), is one operator with the same values", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # A -> B and C -> D at k times the positive part of the reactant: A
  # decays as A0 exp(-k t); C, drained at a constant rate r from 0, is
  # -r t, where the law is 0 (D stays 0)
  pos <- function(s, cond) paste0("<piecewise><piece>", ci(s), cond, "</piece><otherwise>", cn(0),
                                  "</otherwise></piecewise>")
  laws <- function(cond) list(ra = list(re = "A", pr = "B", law = ap("times", ci("cell"), ci("k"), pos("A", cond("A")))),
                              rc = list(re = "C", pr = "D", law = ap("times", ci("cell"), ci("k"), pos("C", cond("C")))),
                              drain = list(re = "C", law = ap("times", ci("cell"), ci("r"))))
  fused <- readSBML(sbml_model(2, c(A = 2, B = 0, C = 0, D = 0), c(k = 0.8, r = 0.3),
                               laws(function(s) ap("gt", ci(s), cn(0)))))
  # the same math written 0 < x: the general piecewise (a selection)
  plain <- readSBML(sbml_model(2, c(A = 2, B = 0, C = 0, D = 0), c(k = 0.8, r = 0.3),
                               laws(function(s) ap("lt", cn(0), ci(s)))))
  ops <- sysbioGPU:::lassie_ops
  expect_true(ops[["SPEC_POS"]] %in% fused$laws$code)
  expect_false(ops[["SELECT"]] %in% fused$laws$code)
  expect_true(ops[["SELECT"]] %in% plain$laws$code)
  expect_lt(length(fused$laws$code), length(plain$laws$code))
  tt <- c(0, 0.5, 1, 2, 4)
  for (meth in c("auto", "bdf")) {
    a <- lassieSimulate(fused, tt, rtol = 1e-10, atol = 1e-12, method = meth, backend = "cpu", verbose = FALSE)
    b <- lassieSimulate(plain, tt, rtol = 1e-10, atol = 1e-12, method = meth, backend = "cpu", verbose = FALSE)
    expect_identical(unclass(a)[, ], unclass(b)[, ])
    expect_lt(max(abs(a[, "A"] - 2 * exp(-0.8 * tt))), 1e-8)
    expect_lt(max(abs(a[, "B"] - 2 * (1 - exp(-0.8 * tt)))), 1e-8)
    expect_lt(max(abs(a[, "C"] + 0.3 * tt)), 1e-10)
    expect_equal(unname(a[, "D"]), rep(0, length(tt)))
  }
  # the glue checks the operator's species as SPEC's
  bad <- fused
  bad$laws$code[which(bad$laws$code == ops[["SPEC_POS"]])[1L] + 1L] <- 99L
  expect_error(lassieSimulate(bad, tt, backend = "cpu", verbose = FALSE), "operand is out of range",
               class = "sysbioGPU_error_input")
})

test_that("a law whose species decayed to a denormal (4.9e-324) is differenced over a finite step", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # Michaelis-Menten A -> B alone (its law reads A only): at A = 4.9e-324
  # the step of eps^(1/3) A was 0, the Jacobian NaN and every implicit
  # step's factorisation failed.  dv/dA = V Km / (Km + A)^2 = V / Km there.
  m <- readSBML(mm_file(A0 = 1))
  tiny <- 4.9e-324
  expect_gt(tiny, 0)
  J <- as.matrix(sysbioGPU:::lassie_jacobian(m, c(A = tiny, B = 1)))
  expect_true(all(is.finite(J)))
  expect_equal(J[, 1], c(-1.5 / 0.7, 1.5 / 0.7), tolerance = 1e-6)
  # implicit steps from there: A stays at 0 (within atol), B at 1
  out <- lassieSimulate(m, c(0, 1, 2), initial = c(A = tiny, B = 1), rtol = 1e-8, atol = 1e-12,
                        method = "bdf", backend = "cpu", verbose = FALSE)
  expect_identical(attr(out, "status"), 0L)
  expect_lt(max(abs(out[, "A"])), 1e-12)
  expect_lt(max(abs(out[, "B"] - 1)), 1e-12)
})
