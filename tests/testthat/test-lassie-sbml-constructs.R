# SBML constructs that readSBML() simulates beyond mass action and kinetic
# laws of species (time, stoichiometries, conversion factors, ...), each
# against an independent oracle: a closed form, or deSolve where installed.

# An SBML Level 3 Version 2 model: compartments (id = size, constant
# unless in `varying`), species (list of id = list(init, comp, hosu, bc,
# cf)), parameters (id = value, constant unless in `varying`), reactions
# (id = list(re, pr: named stoichiometries or species ids, law: MathML,
# sref: ids of species references by species, which are then not
# constant)), rules (list(type, variable, math)), the model's conversion
# factor.
sc_model <- function(comps = c(cell = 1), species = list(), params = numeric(), reactions = list(),
                     rules = list(), varying = character(), conversion = NULL) {
  f <- tempfile(fileext = ".xml")
  cm <- sprintf('<compartment id="%s" size="%s" spatialDimensions="3" constant="%s"/>',
                names(comps), comps, tolower(!names(comps) %in% varying))
  sp <- vapply(names(species), function(id) {
    s <- species[[id]]
    hosu <- isTRUE(s$hosu)
    sprintf('<species id="%s" compartment="%s" %s="%s" hasOnlySubstanceUnits="%s" boundaryCondition="%s" constant="false"%s/>',
            id, if (is.null(s$comp)) names(comps)[1] else s$comp,
            if (hosu) "initialAmount" else "initialConcentration", s$init,
            tolower(hosu), tolower(isTRUE(s$bc)),
            if (is.null(s$cf)) "" else sprintf(' conversionFactor="%s"', s$cf))
  }, "")
  side <- function(x, tag, sref) {
    if (!length(x)) return("")
    st <- if (is.numeric(x)) x else stats::setNames(rep(1, length(x)), x)
    id <- ifelse(names(st) %in% names(sref), sprintf(' id="%s"', sref[names(st)]), "")
    paste0("<", tag, ">", paste0(sprintf('<speciesReference species="%s"%s stoichiometry="%s" constant="%s"/>',
                                         names(st), id, st, tolower(!nzchar(id))), collapse = ""), "</", tag, ">")
  }
  rx <- vapply(names(reactions), function(id) {
    r <- reactions[[id]]
    paste0(sprintf('<reaction id="%s" reversible="false">', id),
           side(r$re, "listOfReactants", r$sref), side(r$pr, "listOfProducts", r$sref),
           '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">', r$law,
           "</math></kineticLaw></reaction>")
  }, "")
  ru <- vapply(rules, function(r) {
    tag <- switch(r$type, rate = "rateRule", assignment = "assignmentRule")
    paste0(sprintf('<%s variable="%s">', tag, r$variable),
           '<math xmlns="http://www.w3.org/1998/Math/MathML">', r$math, sprintf("</math></%s>", tag))
  }, "")
  writeLines(c(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">',
    sprintf('<model id="constructs"%s>', if (is.null(conversion)) "" else sprintf(' conversionFactor="%s"', conversion)),
    "<listOfCompartments>", cm, "</listOfCompartments>",
    if (length(sp)) c("<listOfSpecies>", sp, "</listOfSpecies>"),
    if (length(params)) c("<listOfParameters>",
      sprintf('<parameter id="%s" value="%s" constant="%s"/>', names(params), params,
              tolower(!names(params) %in% varying)), "</listOfParameters>"),
    if (length(rx)) c("<listOfReactions>", rx, "</listOfReactions>"),
    if (length(ru)) c("<listOfRules>", ru, "</listOfRules>"),
    "</model>", "</sbml>"), f)
  f
}
t_sym <- '<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">t</csymbol>'
sc_sim <- function(m, tt, ...) {
  lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-14, backend = "cpu", verbose = FALSE, ...)
}

test_that("time in a law: a species fed at rate t has S0 + (t^2 - t0^2) / 2 from any start t0", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # size 2: the law (an amount per time) feeds the concentration at t / 2
  m <- readSBML(sc_model(comps = c(cell = 2), species = list(S = list(init = 1)),
                         reactions = list(feed = list(pr = "S", law = ap("times", ci("cell"), t_sym)))))
  expect_false(is.null(m$clock))
  for (tt in list(c(0, 0.5, 1, 3), c(1, 2, 4))) {
    for (meth in c("auto", "bdf")) {
      out <- sc_sim(m, tt, method = meth)
      # the clock is hidden: the time column is time
      expect_identical(colnames(out), c("time", "S"))
      expect_equal(attr(out, "nSpecies"), 1L)
      expect_lt(max(abs(out[, "S"] - (1 + (tt^2 - tt[1]^2) / 2))), 1e-8)
    }
  }
  # a batch and an array hide it too, and start it at the first time
  tt <- c(1, 2, 3)
  b <- sc_sim(m, tt, initial = rbind(c(1, 0), c(2, 0)))
  expect_identical(colnames(b[[2]]), c("time", "S"))
  expect_lt(max(abs(b[[2]][, "S"] - (2 + (tt^2 - 1) / 2))), 1e-8)
  a <- sc_sim(m, tt, output = "array")
  expect_identical(dimnames(a)[[2]], "S")
  expect_lt(max(abs(a[, "S", 1] - (1 + (tt^2 - 1) / 2))), 1e-8)
  # the engines' states start at values >= 0: so does time
  expect_error(sc_sim(m, c(-1, 0, 1)), "`times` must start at 0 or later", class = "sysbioGPU_error_input")
  # the clock runs at rate 1, whatever a batch asks
  expect_error(sc_sim(m, tt, rates = rbind(c(1, 1), c(1, 2))), "must be 1.*clock",
               class = "sysbioGPU_error_input")
})

test_that("time as a catalyst is mass action: A' = -k t A is A0 exp(-k t^2 / 2)", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(sc_model(species = list(A = list(init = 2)), params = c(k = 0.8),
                         reactions = list(deg = list(re = "A", law = ap("times", ci("k"), t_sym, ci("A"))))))
  expect_null(m$laws)   # no program: the GPU engine can run it too
  tt <- c(0, 0.5, 1, 2)
  for (meth in c("auto", "bdf")) {
    expect_lt(max(abs(sc_sim(m, tt, method = meth)[, "A"] - 2 * exp(-0.8 * tt^2 / 2))), 1e-8)
  }
})

test_that("time in rules: a rate rule p' = t, an assignment rule q = 3 t", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(sc_model(species = list(A = list(init = 1)), params = c(k = 0.5, p = 0, q = 0),
                         varying = c("p", "q"),
                         reactions = list(deg = list(re = "A", law = ap("times", ci("k"), ci("A")))),
                         rules = list(list(type = "rate", variable = "p", math = t_sym),
                                      list(type = "assignment", variable = "q", math = ap("times", cn(3), t_sym)))))
  tt <- c(0, 1, 2.5)
  out <- sc_sim(m, tt)
  expect_lt(max(abs(out[, "p"] - tt^2 / 2)), 1e-8)
  expect_lt(max(abs(out[, "q"] - 3 * tt)), 1e-8)
  expect_lt(max(abs(out[, "A"] - exp(-0.5 * tt))), 1e-8)
})

test_that("stoichiometries that are not whole numbers: A -> 0.5 B and 1.5 C -> D", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(sc_model(species = list(A = list(init = 2), B = list(init = 0), C = list(init = 1), D = list(init = 0)),
                         params = c(k = 0.7),
                         reactions = list(half = list(re = "A", pr = c(B = 0.5), law = ap("times", ci("k"), ci("A"))),
                                          c2d = list(re = c(C = 1.5), pr = "D", law = ap("times", ci("k"), ci("C"))))))
  tt <- c(0, 0.5, 1, 3)
  for (meth in c("auto", "bdf")) {
    out <- sc_sim(m, tt, method = meth)
    expect_lt(max(abs(out[, "A"] - 2 * exp(-0.7 * tt))), 1e-8)
    expect_lt(max(abs(out[, "B"] - (1 - exp(-0.7 * tt)))), 1e-8)
    # C' = -1.5 k C, D' = k C
    expect_lt(max(abs(out[, "C"] - exp(-1.5 * 0.7 * tt))), 1e-8)
    expect_lt(max(abs(out[, "D"] - (1 - exp(-1.5 * 0.7 * tt)) / 1.5)), 1e-8)
  }
})

test_that("conversion factors multiply a species' change: A -> B with factors 3 (model) and 2 (B)", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(sc_model(species = list(A = list(init = 1), B = list(init = 0, cf = "fb")),
                         params = c(k = 0.4, fb = 2, fm = 3), conversion = "fm",
                         reactions = list(r = list(re = "A", pr = "B", law = ap("times", ci("k"), ci("A"))))))
  tt <- c(0, 1, 2, 5)
  out <- sc_sim(m, tt)
  # A' = -3 k A, B' = 2 k A
  expect_lt(max(abs(out[, "A"] - exp(-1.2 * tt))), 1e-8)
  expect_lt(max(abs(out[, "B"] - 2 * (1 - exp(-1.2 * tt)) / 3)), 1e-8)
})

test_that("species in compartments of different sizes: each concentration by its own size", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # A in c1 (size 2) -> B in c2 (size 0.5), law c1 k A (an amount per time):
  # A' = -k A, B' = c1 k A / c2 = 4 k A
  m <- readSBML(sc_model(comps = c(c1 = 2, c2 = 0.5),
                         species = list(A = list(init = 1.5, comp = "c1"), B = list(init = 0, comp = "c2")),
                         params = c(k = 0.3),
                         reactions = list(r = list(re = "A", pr = "B", law = ap("times", ci("c1"), ci("k"), ci("A"))))))
  tt <- c(0, 1, 4)
  for (meth in c("auto", "bdf")) {
    out <- sc_sim(m, tt, method = meth)
    expect_lt(max(abs(out[, "A"] - 1.5 * exp(-0.3 * tt))), 1e-8)
    expect_lt(max(abs(out[, "B"] - 4 * 1.5 * (1 - exp(-0.3 * tt)))), 1e-8)
  }
})

test_that("stoichiometries that change in time: an assignment rule s = t, a rate rule s' = 1", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  feed <- function(rule) {
    readSBML(sc_model(species = list(B = list(init = 0)), params = c(k = 0.6),
                      reactions = list(r = list(pr = "B", sref = c(B = "s"), law = ci("k"))),
                      rules = list(rule)))
  }
  tt <- c(0, 1, 2.5)
  # B' = k s = k t
  out <- sc_sim(feed(list(type = "assignment", variable = "s", math = t_sym)), tt)
  expect_lt(max(abs(out[, "B"] - 0.6 * tt^2 / 2)), 1e-8)
  # s(0) = 1 (its stoichiometry attribute), s' = 1: B' = k (1 + t)
  out <- sc_sim(feed(list(type = "rate", variable = "s", math = cn(1))), tt)
  expect_lt(max(abs(out[, "B"] - 0.6 * (tt + tt^2 / 2))), 1e-8)
  expect_lt(max(abs(out[, "s"] - (1 + tt))), 1e-8)
})

test_that("parameters alone: rules of time are evaluated at the output times", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # no species, no reactions: the clock alone runs; p = t^2 is no linear
  # observable, a rule evaluated on the output; s jumps at t = 1 exactly
  m <- readSBML(sc_model(params = c(p = 0, q = 0, s = 0), varying = c("p", "q", "s"),
                         rules = list(list(type = "assignment", variable = "p", math = ap("power", t_sym, cn(2))),
                                      list(type = "assignment", variable = "q", math = ap("plus", t_sym, cn(1))),
                                      list(type = "assignment", variable = "s",
                                           math = paste0("<piecewise><piece>", cn(5), ap("lt", t_sym, cn(1)),
                                                         "</piece><otherwise>", cn(10), "</otherwise></piecewise>")))))
  tt <- c(0, 0.5, 1, 2)
  out <- sc_sim(m, tt)
  expect_identical(colnames(out), c("time", "p", "q", "s"))
  expect_equal(unname(out[, "p"]), tt^2, tolerance = 1e-12)
  expect_equal(unname(out[, "q"]), tt + 1, tolerance = 1e-12)
  expect_identical(unname(out[, "s"]), c(5, 5, 10, 10))
  # a batch and an array get them too
  b <- sc_sim(m, tt, initial = rbind(0, 0))
  expect_equal(unname(b[[2]][, "p"]), tt^2, tolerance = 1e-12)
  a <- sc_sim(m, tt, output = "array")
  expect_identical(dimnames(a)[[2]], c("p", "q", "s"))
  expect_equal(unname(a[, "p", 1]), tt^2, tolerance = 1e-12)
  # a model with nothing but a compartment runs too (its size is a constant)
  m0 <- readSBML(sc_model(comps = c(cell = 3)))
  expect_identical(colnames(sc_sim(m0, tt)), "time")
  expect_equal(attr(m0, "constants")[["cell"]], 3)
})

test_that("a rule not linear in the species is evaluated on the output: r = A^2 + 1", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(sc_model(species = list(A = list(init = 2)), params = c(k = 0.5, r = 0), varying = "r",
                         reactions = list(deg = list(re = "A", law = ap("times", ci("k"), ci("A")))),
                         rules = list(list(type = "assignment", variable = "r",
                                           math = ap("plus", ap("power", ci("A"), cn(2)), cn(1))))))
  tt <- c(0, 1, 3)
  out <- sc_sim(m, tt)
  expect_lt(max(abs(out[, "r"] - ((2 * exp(-0.5 * tt))^2 + 1))), 1e-8)
})

test_that("a reaction whose stoichiometries cancel changes nothing", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- sc_model(species = list(A = list(init = 1)),
                reactions = list(r = list(re = c(A = 2), pr = c(A = 2), law = cn(3))))
  # 2 A -> 2 A is mass action with A a catalyst; A + (-1) A -> 0 nets 0
  txt <- sub('stoichiometry="2" constant="true"/></listOfReactants>',
             'stoichiometry="1" constant="true"/><speciesReference species="A" stoichiometry="-1" constant="true"/></listOfReactants>',
             readLines(f), fixed = TRUE)
  txt <- sub("<listOfProducts>.*</listOfProducts>", "", txt)
  writeLines(txt, f)
  out <- sc_sim(readSBML(f), c(0, 1, 2))
  expect_identical(unname(out[, "A"]), c(1, 1, 1))
})

test_that("a function called with arguments that name its own arguments is refused", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # f(y, x) of f(x, y) = x - y: libSBML's expansion replaces x by y, then
  # both y by x, and would give 0 instead of y - x
  f <- sc_model(species = list(A = list(init = 1)), params = c(x = 1, y = 3),
                reactions = list(r = list(pr = "A", law = "<apply><ci>f</ci><ci>y</ci><ci>x</ci></apply>")))
  txt <- sub("<listOfCompartments>", paste0(
    '<listOfFunctionDefinitions><functionDefinition id="f"><math xmlns="http://www.w3.org/1998/Math/MathML">',
    "<lambda><bvar><ci>x</ci></bvar><bvar><ci>y</ci></bvar>", ap("minus", ci("x"), ci("y")),
    "</lambda></math></functionDefinition></listOfFunctionDefinitions><listOfCompartments>"), readLines(f), fixed = TRUE)
  writeLines(txt, f)
  expect_error(readSBML(f), "function definition f whose arguments name the function's own arguments",
               class = "sysbioGPU_sbml_unsupported")
  # called with other names, it is expanded: A' = y - x = 2
  writeLines(gsub("<ci>y</ci><ci>x</ci></apply>", "<ci>k2</ci><ci>k1</ci></apply>", sub(
    '<parameter id="x" value="1" constant="true"/>',
    '<parameter id="x" value="1" constant="true"/><parameter id="k1" value="1" constant="true"/><parameter id="k2" value="3" constant="true"/>',
    txt, fixed = TRUE), fixed = TRUE), f)
  out <- sc_sim(readSBML(f), c(0, 1))
  expect_equal(unname(out[, "A"]), c(1, 3), tolerance = 1e-10)
})

test_that("a variable named time is refused: the output's column time is time", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- sc_model(species = list(time = list(init = 1)), params = c(k = 1),
                reactions = list(deg = list(re = "time", law = ap("times", ci("k"), ci("time")))))
  expect_error(readSBML(f), "a variable named time", class = "sysbioGPU_sbml_unsupported")
})

rate_of <- function(x) {
  paste0('<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/rateOf">rateOf</csymbol>',
         ci(x), "</apply>")
}

test_that("rateOf is the derivative: of a species (its reactions), of a rate rule's variable", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # A in cell (size 2), law cell k A: A' = -k A; r = rateOf(A) = -k A;
  # p' = rateOf(A): p = p0 + A - A0; q' = 2, s = rateOf(q) = 2
  m <- readSBML(sc_model(comps = c(cell = 2), species = list(A = list(init = 3)),
                         params = c(k = 0.5, r = 0, p = 1, q = 0, s = 0), varying = c("r", "p", "q", "s"),
                         reactions = list(deg = list(re = "A", law = ap("times", ci("cell"), ci("k"), ci("A")))),
                         rules = list(list(type = "assignment", variable = "r", math = rate_of("A")),
                                      list(type = "rate", variable = "p", math = rate_of("A")),
                                      list(type = "rate", variable = "q", math = cn(2)),
                                      list(type = "assignment", variable = "s", math = rate_of("q")))))
  tt <- c(0, 1, 2)
  A <- 3 * exp(-0.5 * tt)
  out <- sc_sim(m, tt)
  expect_lt(max(abs(out[, "A"] - A)), 1e-8)
  expect_lt(max(abs(out[, "r"] + 0.5 * A)), 1e-8)
  expect_lt(max(abs(out[, "p"] - (1 + A - 3))), 1e-8)
  expect_equal(attr(m, "constants")[["s"]], 2)   # a constant: reported with the model
})

test_that("rateOf of a variable an assignment rule sets is refused", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- sc_model(species = list(A = list(init = 1)), params = c(k = 1, a = 0, b = 0), varying = c("a", "b"),
                reactions = list(deg = list(re = "A", law = ap("times", ci("k"), ci("A")))),
                rules = list(list(type = "assignment", variable = "a", math = ap("times", cn(2), ci("A"))),
                             list(type = "assignment", variable = "b", math = rate_of("a"))))
  expect_error(readSBML(f), "rateOf csymbol of a, which an assignment rule sets", class = "sysbioGPU_sbml_unsupported")
})

test_that("a reaction's id is its rate; rateOf of a local parameter is 0", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # p' = deg (the rate of deg, k A): p = p0 + A0 - A; B fed at rateOf(k)
  # with a local k (0), not the global k with its rate rule
  f <- sc_model(species = list(A = list(init = 2), B = list(init = 1)), params = c(k = 0.5, p = 0),
                varying = "p",
                reactions = list(deg = list(re = "A", law = ap("times", ci("k"), ci("A"))),
                                 feed = list(pr = "B", law = rate_of("k"))),
                rules = list(list(type = "rate", variable = "p", math = ci("deg"))))
  txt <- sub("</math></kineticLaw></reaction></listOfReactions>",
             '</math><listOfLocalParameters><localParameter id="k" value="3"/></listOfLocalParameters></kineticLaw></reaction></listOfReactions>',
             paste(readLines(f), collapse = "\n"), fixed = TRUE)
  writeLines(txt, f)
  tt <- c(0, 1, 2)
  out <- sc_sim(readSBML(f), tt)
  A <- 2 * exp(-0.5 * tt)
  expect_lt(max(abs(out[, "p"] - (2 - A))), 1e-8)
  expect_equal(unname(out[, "B"]), rep(1, 3))
})

test_that("quotient and rem of species run as programs, as trunc(a / b)", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # B' = quotient(A, 2) + rem(A, 2) with A held at 7 (boundary): 3 + 1
  m <- readSBML(sc_model(species = list(A = list(init = 7, bc = TRUE), B = list(init = 0)),
                         reactions = list(r = list(pr = "B", law = ap("plus", ap("quotient", ci("A"), cn(2)),
                                                                       ap("rem", ci("A"), cn(2)))))))
  out <- sc_sim(m, c(0, 1, 2))
  expect_equal(unname(out[, "B"]), c(0, 4, 8), tolerance = 1e-10)
})

test_that("a compartment growing linearly: amounts are states, concentrations amount / size", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  tt <- c(0, 1, 2, 4)
  # cell' = 1 from 2; S fed at k (an amount per time): its amount
  # 2 * 1.5 + k t, its concentration that over 2 + t
  m <- readSBML(sc_model(comps = c(cell = 2), varying = "cell", species = list(S = list(init = 1.5)),
                         params = c(k = 0.3),
                         reactions = list(feed = list(pr = "S", law = ci("k"))),
                         rules = list(list(type = "rate", variable = "cell", math = cn(1)))))
  out <- sc_sim(m, tt)
  expect_lt(max(abs(out[, "cell"] - (2 + tt))), 1e-8)
  expect_lt(max(abs(out[, "S.amount"] - (3 + 0.3 * tt))), 1e-8)
  expect_lt(max(abs(out[, "S"] - (3 + 0.3 * tt) / (2 + tt))), 1e-8)
  # cell = 1 + t by an assignment rule; S degraded by k S cell (k times
  # its amount): amount 2 exp(-k t), concentration that over 1 + t
  m <- readSBML(sc_model(comps = c(cell = 1), varying = "cell", species = list(S = list(init = 2)),
                         params = c(k = 0.3),
                         reactions = list(deg = list(re = "S", law = ap("times", ci("k"), ci("S"), ci("cell")))),
                         rules = list(list(type = "assignment", variable = "cell", math = ap("plus", cn(1), t_sym)))))
  for (meth in c("auto", "bdf")) {
    out <- sc_sim(m, tt, method = meth)
    expect_lt(max(abs(out[, "S"] - 2 * exp(-0.3 * tt) / (1 + tt))), 1e-8)
    expect_lt(max(abs(out[, "cell"] - (1 + tt))), 1e-8)
  }
})

test_that("a conversion factor that a rate rule changes is refused", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- sc_model(species = list(A = list(init = 1, cf = "f")), params = c(k = 1, f = 1), varying = "f",
                reactions = list(deg = list(re = "A", law = ap("times", ci("k"), ci("A")))),
                rules = list(list(type = "rate", variable = "f", math = cn(1))))
  expect_error(readSBML(f), "a conversion factor f that a rate rule changes", class = "sysbioGPU_sbml_unsupported")
})

test_that("constants: NaN is a value; a constant rule with the delay csymbol is refused, naming it", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  delay <- paste0('<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/delay">',
                  "delay</csymbol>", ci("x"), cn(0.5), "</apply>")
  # y = 2 + delay(x, 0.5), x constant: a constant whose value needs x's past
  f <- sc_model(species = list(A = list(init = 1)), params = c(k = 1, x = 0, y = 0), varying = "y",
                reactions = list(deg = list(re = "A", law = ap("times", ci("k"), ci("A")))),
                rules = list(list(type = "assignment", variable = "y", math = ap("plus", cn(2), delay))))
  expect_error(readSBML(f), "the value of y \\(math with the delay csymbol\\)", class = "sysbioGPU_sbml_unsupported")
  # z = 0/0 by its rule: NaN among the constants, the model runs
  f <- sc_model(species = list(A = list(init = 1)), params = c(k = 1, z = 0), varying = "z",
                reactions = list(deg = list(re = "A", law = ap("times", ci("k"), ci("A")))),
                rules = list(list(type = "assignment", variable = "z", math = ap("divide", cn(0), cn(0)))))
  m <- readSBML(f)
  expect_true(is.nan(attr(m, "constants")[["z"]]))
  out <- lassieSimulate(m, c(0, 1), backend = "cpu", verbose = FALSE)
  expect_equal(unname(out[2, "A"]), exp(-1), tolerance = 1e-6)
})

test_that("long sums and products read as one call, evaluated left to right", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # A' = -k A, A(0) = 2: every law below is k A written another way
  run <- function(law, species = list(A = list(init = 2))) {
    m <- readSBML(sc_model(species = species, params = c(k = 0.8), reactions = list(deg = list(re = "A", law = law))))
    lassieSimulate(m, c(0, 1), rtol = 1e-10, atol = 1e-14, backend = "cpu", verbose = FALSE)[2, "A"]
  }
  zeros <- strrep(cn(0), 3000)
  ones <- strrep(cn(1), 3000)
  nested <- ci("A")
  for (i in 1:2100) nested <- ap("plus", nested, cn(0))
  not_poly <- function(x) ap("divide", x, ap("plus", cn(1), ap("times", cn(0), ci("A"))))
  laws <- list(
    sum = ap("times", ci("k"), ap("plus", ci("A"), zeros)),            # mass action
    product = ap("times", ci("k"), ones, ci("A"), ones),
    program = not_poly(ap("times", ci("k"), ap("plus", ci("A"), zeros))),
    nested = ap("times", ci("k"), nested),                             # ((A + 0) + 0) + ...
    nested_program = not_poly(ap("times", ci("k"), nested)))
  for (nm in names(laws)) expect_equal(unname(run(laws[[nm]])), 2 * exp(-0.8), tolerance = 1e-8, info = nm)
  # left to right: (1e16 + 1) - 1e16 is 0 in doubles, so the sum is k
  # (another order gives k - 1e16, 1 + k or 0); as a constant and, with a
  # fixed species B = 1e16, in the law's program
  big <- ap("times", ap("plus", cn(1e16), cn(1), cn(-1e16), ci("k")), ci("A"))
  expect_equal(unname(run(big)), 2 * exp(-0.8), tolerance = 1e-8)
  fixed_b <- list(A = list(init = 2), B = list(init = 1e16, bc = TRUE))
  big_b <- not_poly(ap("times", ap("plus", ci("B"), cn(1), ap("times", cn(-1), ci("B")), ci("k")), ci("A")))
  expect_equal(unname(run(big_b, fixed_b)), 2 * exp(-0.8), tolerance = 1e-8)
})

test_that("SBML Level 1: a compartment without a volume has Level 1's default, 1", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  # Level 1's volume defaults to 1 (Level 2's and 3's size has no default);
  # species in formulas are concentrations: A' = -k A / V in concentration
  l1 <- function(volume) {
    f <- tempfile(fileext = ".xml")
    writeLines(c(
      '<?xml version="1.0" encoding="UTF-8"?>',
      '<sbml xmlns="http://www.sbml.org/sbml/level1" level="1" version="2"><model name="m">',
      sprintf('<listOfCompartments><compartment name="c"%s/></listOfCompartments>', volume),
      '<listOfSpecies><species name="A" compartment="c" initialAmount="2"/>',
      '<species name="B" compartment="c" initialAmount="0"/></listOfSpecies>',
      '<listOfReactions><reaction name="r" reversible="false">',
      '<listOfReactants><speciesReference species="A"/></listOfReactants>',
      '<listOfProducts><speciesReference species="B"/></listOfProducts>',
      '<kineticLaw formula="k * A"><listOfParameters><parameter name="k" value="0.5"/></listOfParameters>',
      '</kineticLaw></reaction></listOfReactions></model></sbml>'), f)
    f
  }
  tt <- c(0, 1, 2.5)
  out <- sc_sim(readSBML(l1("")), tt)
  expect_equal(unname(out[, "A"]), 2 * exp(-0.5 * tt), tolerance = 1e-8)
  expect_equal(unname(out[, "B"]), 2 - 2 * exp(-0.5 * tt), tolerance = 1e-8)
  out <- sc_sim(readSBML(l1(' volume="2"')), tt)
  expect_equal(unname(out[, "A"]), exp(-0.25 * tt), tolerance = 1e-8)
})
