# Rate rules in readSBML(): each is a reaction without reactants whose law
# is the rule, run by the CPU engine.  Against closed forms, against
# deSolve with the right-hand side written here in R, and the refusals of
# what is not simulated.

# An SBML Level 3 Version 2 model in a compartment `cell` of size `size`:
# species (a list per species: init, hosu = hasOnlySubstanceUnits, bc =
# boundaryCondition; the initial value is a concentration, or an amount
# with hosu), parameters (id = value; `const` names the constant ones,
# all by default), reactions (list of re, pr, MathML law) and rules (list
# of type, variable, MathML math).
rr_model <- function(size = 1, species = list(), params = numeric(), const = names(params),
                     reactions = list(), rules = list(), cell_constant = TRUE) {
  f <- tempfile(fileext = ".xml")
  rx <- sbml_reactions_xml(reactions)
  sp <- vapply(names(species), function(id) {
    s <- species[[id]]
    hosu <- isTRUE(s$hosu)
    sprintf('<species id="%s" compartment="cell" %s="%s" hasOnlySubstanceUnits="%s" boundaryCondition="%s" constant="false"/>',
            id, if (hosu) "initialAmount" else "initialConcentration", s$init,
            tolower(hosu), tolower(isTRUE(s$bc)))
  }, "")
  ru <- vapply(rules, function(r) {
    tag <- switch(r$type, rate = "rateRule", assignment = "assignmentRule", algebraic = "algebraicRule")
    paste0(sprintf("<%s%s>", tag, if (r$type == "algebraic") "" else sprintf(' variable="%s"', r$variable)),
           '<math xmlns="http://www.w3.org/1998/Math/MathML">', r$math, sprintf("</math></%s>", tag))
  }, "")
  writeLines(c(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">',
    '<model id="rr">',
    sprintf('<listOfCompartments><compartment id="cell" size="%s" spatialDimensions="3" constant="%s"/></listOfCompartments>',
            size, tolower(cell_constant)),
    if (length(sp)) c("<listOfSpecies>", sp, "</listOfSpecies>"),
    if (length(params)) c("<listOfParameters>",
      sprintf('<parameter id="%s" value="%s" constant="%s"/>', names(params), params,
              tolower(names(params) %in% const)), "</listOfParameters>"),
    if (length(rx)) c("<listOfReactions>", rx, "</listOfReactions>"),
    if (length(ru)) c("<listOfRules>", ru, "</listOfRules>"),
    "</model>", "</sbml>"), f)
  f
}
rr_sim <- function(m, tt, ...) lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-14, backend = "cpu", verbose = FALSE, ...)

test_that("a species' rate rule dS/dt = -k S is S0 exp(-k t), in concentration or amount", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  tt <- c(0, 0.5, 1, 2, 4)
  for (hosu in c(FALSE, TRUE)) {
    # size 2: the rule is d(state)/dt as it is, not divided by the size
    m <- readSBML(rr_model(size = 2, species = list(S = list(init = 3, hosu = hosu)), params = c(k = 0.5),
                           rules = list(list(type = "rate", variable = "S",
                                             math = ap("minus", cn(0), ap("times", ci("k"), ci("S")))))))
    expect_false(is.null(m$laws))
    expect_false(m$fixed[m$species == "S"])
    expect_identical(attr(m, "substanceUnits")[["S"]], hosu)
    for (meth in c("auto", "bdf")) {
      out <- rr_sim(m, tt, method = meth)
      expect_lt(max(abs(out[, "S"] - 3 * exp(-0.5 * tt))), 1e-7)
    }
  }
})

test_that("a parameter with dp/dt = 1 read by a law: A' = -p A is A0 exp(-t^2/2)", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(rr_model(size = 2, species = list(A = list(init = 1.5)), params = c(p = 0), const = character(),
                         reactions = list(deg = list(re = "A", law = ap("times", ci("cell"), ci("p"), ci("A")))),
                         rules = list(list(type = "rate", variable = "p", math = cn(1)))))
  expect_equal(m$species, c("A", "p"))
  expect_false("p" %in% names(attr(m, "constants")))
  tt <- c(0, 0.5, 1, 2, 3)
  for (meth in c("auto", "bdf")) {
    out <- rr_sim(m, tt, method = meth)
    expect_lt(max(abs(out[, "p"] - tt)), 1e-8)
    expect_lt(max(abs(out[, "A"] - 1.5 * exp(-tt^2 / 2))), 1e-7)
  }
})

test_that("a boundary species with a rate rule is changed by the rule only, read by the laws", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # dB/dt = 0.3 (B a reactant with boundaryCondition), B -> C at k B:
  # B = B0 + 0.3 t, C = k (B0 t + 0.15 t^2)
  m <- readSBML(rr_model(species = list(B = list(init = 1, bc = TRUE), C = list(init = 0)), params = c(k = 0.4, c = 0.3),
                         reactions = list(r = list(re = "B", pr = "C", law = ap("times", ci("k"), ci("B")))),
                         rules = list(list(type = "rate", variable = "B", math = ci("c")))))
  tt <- c(0, 1, 2.5, 5)
  out <- rr_sim(m, tt)
  expect_lt(max(abs(out[, "B"] - (1 + 0.3 * tt))), 1e-8)
  expect_lt(max(abs(out[, "C"] - 0.4 * (tt + 0.15 * tt^2))), 1e-7)
})

test_that("rate rules coupled to reactions and to each other, as deSolve", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_not_installed("deSolve")
  # X -> Y at k1 X (mass action, cell of size 2: law cell k1 X), Y -> at
  # kq q Y / (1 + Y); dq/dt = X - q, dr/dt = q - 0.1 r (a rule reading
  # another rule's parameter)
  law2 <- ap("divide", ap("times", ci("cell"), ci("kq"), ci("q"), ci("Y")), ap("plus", cn(1), ci("Y")))
  m <- readSBML(rr_model(size = 2, species = list(X = list(init = 2), Y = list(init = 0.5)),
                         params = c(k1 = 0.7, kq = 1.3, q = 0.2, r = 1), const = c("k1", "kq"),
                         reactions = list(r1 = list(re = "X", pr = "Y", law = ap("times", ci("cell"), ci("k1"), ci("X"))),
                                          r2 = list(re = "Y", law = law2)),
                         rules = list(list(type = "rate", variable = "q", math = ap("minus", ci("X"), ci("q"))),
                                      list(type = "rate", variable = "r",
                                           math = ap("minus", ci("q"), ap("times", cn(0.1), ci("r")))))))
  expect_equal(m$species, c("X", "Y", "q", "r"))
  tt <- c(0, 0.5, 1, 2, 5, 10)
  ref <- deSolve::ode(c(X = 2, Y = 0.5, q = 0.2, r = 1), tt, function(t, y, p) {
    v1 <- 0.7 * y[["X"]]; v2 <- 1.3 * y[["q"]] * y[["Y"]] / (1 + y[["Y"]])
    list(c(-v1, v1 - v2, y[["X"]] - y[["q"]], y[["q"]] - 0.1 * y[["r"]]))
  }, NULL, rtol = 1e-12, atol = 1e-14)
  for (meth in c("auto", "bdf")) {
    out <- rr_sim(m, tt, method = meth)
    expect_lt(max(abs(out[, c("X", "Y", "q", "r")] - ref[, c("X", "Y", "q", "r")])), 1e-6)
  }
})

test_that("a boundary species of a compartment that a rate rule grows keeps its amount", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # cell(t) = 1 + 0.1 t; A (boundary, concentration 1 at t = 0) keeps its
  # amount 1, so its concentration is 1 / (1 + 0.1 t); the reaction that
  # reads it does not change it, and B = 2 exp(-k int A) with int A =
  # 10 log(1 + 0.1 t), its law k A B an amount per time over B's own
  # growing compartment: d(amount_B)/dt = -k A [B]
  m <- readSBML(rr_model(species = list(A = list(init = 1, bc = TRUE), B = list(init = 2)), params = c(k = 1),
                         reactions = list(deg = list(re = c("A", "B"), pr = "A",
                                                     law = ap("times", ci("k"), ci("A"), ci("B")))),
                         cell_constant = FALSE, rules = list(list(type = "rate", variable = "cell", math = cn(0.1)))))
  tt <- c(0, 0.5, 1, 2, 5)
  out <- rr_sim(m, tt)
  expect_equal(unname(out[, "A"]), 1 / (1 + 0.1 * tt), tolerance = 1e-8)
})

test_that("what rate rules cannot do is refused by name", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  bad <- function(f, msg) expect_error(readSBML(f), msg, class = "sysbioGPU_sbml_unsupported")
  A <- list(A = list(init = 1))
  deg <- list(deg = list(re = "A", law = ap("times", ci("k"), ci("A"))))
  # a species that a rule holds at a value in a compartment whose size a
  # rule changes (one whose rule changes in time is an observable)
  bad(rr_model(species = list(A = list(init = 1), B = list(init = 1)), params = c(k = 1),
               reactions = list(deg = list(re = c("A", "B"), pr = "A", law = ap("times", ci("k"), ci("A"), ci("B")))),
               cell_constant = FALSE,
               rules = list(list(type = "rate", variable = "cell", math = cn(0.1)),
                            list(type = "assignment", variable = "A", math = cn(2)))),
      "species that rules set in a compartment that rules or events resize \\(A\\)")
  # a species that reactions also change (no boundary condition)
  bad(rr_model(species = A, params = c(k = 1), reactions = deg,
               rules = list(list(type = "rate", variable = "A", math = cn(0.1)))),
      "a rate rule for species A, which reactions also change")
  # the delay csymbol in the rule
  bad(rr_model(species = A, params = c(k = 1, p = 0), const = "k", reactions = deg,
               rules = list(list(type = "rate", variable = "p",
                                 math = paste0('<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/delay">',
                                               'delay</csymbol>', ci("A"), cn(1), '</apply>')))),
      "the rate rule for p \\(math with the delay csymbol\\)")
  # a parameter that starts below 0 (the engines' states start at >= 0)
  bad(rr_model(species = A, params = c(k = 1, p = -1), const = "k", reactions = deg,
               rules = list(list(type = "rate", variable = "p", math = cn(1)))),
      "a rate rule for a parameter, stoichiometry or compartment whose initial value is negative \\(p\\)")
  # algebraic rules, still
  bad(rr_model(species = A, params = c(k = 1, p = 0), const = "k", reactions = deg,
               rules = list(list(type = "algebraic", math = ap("minus", ci("p"), cn(1))))),
      "1 algebraic rule\\(s\\)")
})
