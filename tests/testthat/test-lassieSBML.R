# readSBML(): mass-action SBML through libSBML, against a model written by
# hand, against the kinetic laws evaluated directly, against deSolve, and
# its errors.  Skipped where sysbioGPU was built without libSBML.

sbml_small <- function() lassie_extdata("lassie_small.sbml")

test_that("sbmlAvailable() says what the linker says: TRUE exactly when the library needs libSBML", {
  # the other tests of readSBML() skip when sbmlAvailable() is FALSE, so a
  # build that linked libSBML but denied it would pass them all unseen
  so <- system.file("libs", paste0("sysbioGPU", .Platform$dynlib.ext), package = "sysbioGPU")
  skip_if(!nzchar(so) || !nzchar(Sys.which("readelf")), "no readelf or no shared library")
  needed <- grep("NEEDED", suppressWarnings(system2("readelf", c("-d", shQuote(so)), stdout = TRUE)),
                 value = TRUE)
  skip_if(length(needed) == 0L, "readelf lists no NEEDED entries")
  expect_identical(sbmlAvailable(), any(grepl("libsbml", needed)))
})

test_that("readSBML reads the small example as the model written by hand", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(sbml_small())
  # laws are multiplied by the compartment (size 2) except `decay`'s, which
  # is therefore divided by it
  ref <- reactionModel(
    reactants = rbind(c(1, 1, 0, 0), c(0, 0, 1, 0), c(0, 0, 1, 1), c(2, 0, 0, 0), c(0, 1, 0, 0)),
    products  = rbind(c(0, 0, 1, 0), c(1, 1, 0, 0), c(0, 1, 0, 1), c(0, 0, 0, 0), c(0, 0, 0, 0)),
    rates = c(3, 0.7, 0.5, 0.25, 0.05), initial = c(1, 0.5, 0, 0.2),
    species = c("A", "B", "C", "E"), fixed = "E")
  expect_equal(m$reactions, c("bind", "bind_rev", "convert", "dimer", "decay"))
  expect_equal(unname(m$rates), unname(ref$rates))
  expect_equal(m$initial, ref$initial)
  expect_equal(m$fixed, ref$fixed)
  expect_equal(as.matrix(m$reactants), as.matrix(ref$reactants), ignore_attr = TRUE)
  expect_equal(as.matrix(m$products), as.matrix(ref$products), ignore_attr = TRUE)
  expect_equal(attr(m, "speciesNames"), c("ligand", "receptor", "complex", "enzyme"))
})

test_that("readSBML's model follows SBML's semantics (deSolve)", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_not_installed("deSolve")
  m <- readSBML(sbml_small())
  # the SBML file's laws (amount per time) divided by the size 2 of `cell`
  rhs <- function(t, y, p) {
    A <- y[1]; B <- y[2]; C <- y[3]; E <- y[4]
    bind <- 2 * (3 * A * B - 0.7 * C); conv <- 2 * 0.5 * E * C
    dim <- 2 * 0.25 * A^2; dec <- 0.1 * B
    list(c(-bind - 2 * dim, -bind + conv - dec, bind - conv, 0) / 2)
  }
  tt <- c(0, 0.5, 1, 2, 5, 10)
  ref <- deSolve::lsoda(m$initial, tt, rhs, NULL, rtol = 1e-11, atol = 1e-14)
  out <- lassieSimulate(m, tt, rtol = 1e-9, backend = "cpu", verbose = FALSE)
  expect_lt(max(abs(out[, -1] - ref[, -1])), 1e-7)
  out2 <- lassieSimulate(m, tt, rtol = 1e-9, method = "bdf", backend = "cpu", verbose = FALSE)
  expect_lt(max(abs(out2[, -1] - ref[, -1])), 1e-5)
})

test_that("the Chen 2009 ErbB model: right-hand side equals its kinetic laws", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- lassie_extdata("Chen2009_ErbB_A431.xml.gz")
  m <- readSBML(f)
  expect_equal(length(m$species), 504L)
  expect_equal(sum(m$fixed), 4L)
  # every law evaluated as written, at a random state (compartment size 1)
  d <- .Call(sysbioGPU:::ffi_lassie_read_sbml, f)
  env <- list2env(as.list(stats::setNames(d$parameters$value, d$parameters$id)))
  set.seed(1)
  x <- stats::setNames(runif(504, 0, 2), d$species$id)
  list2env(as.list(x), envir = env)
  f_ref <- stats::setNames(numeric(504), d$species$id)
  for (r in d$reactions) {
    v <- eval(parse(text = r$law)[[1]], env)
    # one entry at a time: a species may be listed twice (A + A)
    for (e in seq_along(r$reactants$species)) {
      s <- r$reactants$species[e]; f_ref[s] <- f_ref[s] - r$reactants$stoichiometry[e] * v
    }
    for (e in seq_along(r$products$species)) {
      s <- r$products$species[e]; f_ref[s] <- f_ref[s] + r$products$stoichiometry[e] * v
    }
  }
  f_ref[d$species$constant | d$species$boundaryCondition] <- 0
  f_ours <- sysbioGPU:::lassie_rhs(m, x)
  expect_lt(max(abs(f_ours - f_ref)) / max(abs(f_ref)), 1e-12)
})

# The Chen model against deSolve: test-lassie-oracle.R, with a right-hand
# side written independently in R (this file's former lsode test gave
# deSolve our own C right-hand side and Jacobian, and took 2 minutes).

test_that("the Chen model (stiff from the start) turns to BDF early with method = \"auto\"", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  m <- readSBML(lassie_extdata("Chen2009_ErbB_A431.xml.gz"))
  tt <- c(0, 60, 600)
  a <- lassieSimulate(m, tt, backend = "cpu", verbose = FALSE)
  b <- lassieSimulate(m, tt, method = "bdf", backend = "cpu", verbose = FALSE)
  st <- attr(a, "stats")
  # the explicit steps' h rho(J), in the error test's weighted norm, sees
  # the stiffness after a few hundred steps (unweighted, the large slow
  # species hid it for 46,000); we measure 275 explicit steps, and 9e-8
  # between the two runs
  expect_gte(st[["switches"]], 1)
  expect_lt(st[["steps"]] - st[["implicitSteps"]], 2000)
  big <- abs(b[, -1]) > 1e-6 * max(abs(b[, -1]))
  expect_lt(max(abs(a[, -1] - b[, -1])[big] / abs(b[, -1])[big]), 1e-5)
})

test_that("non-mass-action laws run as written; propensities read by their limit", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- tempfile(fileext = ".xml")
  txt <- readLines(sbml_small())
  # Michaelis-Menten instead of the degradation's law
  i <- grep("<cn>0.1</cn>", txt, fixed = TRUE)
  txt2 <- txt
  txt2[i] <- "<apply><divide/><apply><times/><cn>0.1</cn><ci>B</ci></apply><apply><plus/><cn>1</cn><ci>B</ci></apply></apply>"
  writeLines(txt2, f)
  # a kinetic law: rate (0.1 B / (1 + B)) / 2 (an amount per time in a
  # compartment of size 2), the other reactions mass action
  m <- readSBML(f)
  dec <- m$reactions == "decay"
  expect_equal(m$laws$start >= 0, dec)
  expect_equal(unname(m$rates[dec]), 0.5)
  x <- c(A = 1, B = 0.8, C = 0.3, E = 0.2)[m$species]
  only <- ifelse(dec, m$rates, 0)
  f_b <- sysbioGPU:::lassie_rhs(m, x, rates = only)[m$species == "B"]
  expect_equal(f_b, -0.5 * 0.1 * 0.8 / 1.8)
  # a stochastic propensity for 2A -> 0: c A (A - 1)
  txt3 <- sub("<apply><power/><ci>A</ci><cn type=\"integer\">2</cn></apply>",
              "<ci>A</ci><apply><minus/><ci>A</ci><cn>1</cn></apply>", txt, fixed = TRUE)
  writeLines(txt3, f)
  # as written: a kinetic law; with `propensities`, its mass-action limit
  m <- readSBML(f)
  expect_true(m$laws$start[m$reactions == "dimer"] >= 0)
  m <- readSBML(f, propensities = TRUE)
  expect_null(m$laws)
  expect_equal(unname(m$rates[m$reactions == "dimer"]), 0.25)
  expect_error(readSBML(f, propensities = NA), "`propensities` must be TRUE or FALSE",
               class = "sysbioGPU_error_input")
  expect_error(readSBML(tempfile()), "does not exist", class = "sysbioGPU_error_input")
  writeLines("<sbml>not really", f)
  expect_error(readSBML(f), "libSBML reports", class = "sysbioGPU_error_input")
})

test_that("without libSBML, readSBML says so", {
  skip_if(sbmlAvailable(), "built with libSBML")
  expect_error(readSBML(sbml_small()), "libSBML, which was not found", class = "sysbioGPU_error_input")
})

test_that("the GPU agrees with the CPU on the (stiff) Chen model", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  m <- readSBML(lassie_extdata("Chen2009_ErbB_A431.xml.gz"))
  tt <- c(0, 10, 60, 600)
  a <- lassieSimulate(m, tt, backend = "cpu", verbose = FALSE)
  b <- lassieSimulate(m, tt, backend = "gpu", verbose = FALSE)
  expect_equal(attr(b, "backend"), "gpu")
  expect_lt(max(abs(b[, -1] - a[, -1]) / pmax(abs(a[, -1]), 1e-300)), 1e-9)
  expect_equal(attr(b, "stats")[["implicitSteps"]], attr(a, "stats")[["implicitSteps"]])
})

test_that("laws that would expand without end, and negative rates, run as kinetic laws", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- tempfile(fileext = ".xml")
  txt <- readLines(sbml_small())
  i <- grep("<cn>0.1</cn>", txt, fixed = TRUE)
  law <- function(mathml) { t2 <- txt; t2[i] <- mathml; writeLines(t2, f); f }
  # 0.1 B (A + E)^40: before the bound, readSBML never finished
  law(paste0("<apply><times/><cn>0.1</cn><ci>B</ci><apply><power/><apply><plus/>",
             "<ci>A</ci><ci>E</ci></apply><cn type=\"integer\">40</cn></apply></apply>"))
  is_law <- function(m) m$laws$start[m$reactions == "decay"] >= 0
  expect_true(is_law(readSBML(f)))
  law("<apply><power/><ci>B</ci><cn>100000000</cn></apply>")
  expect_true(is_law(readSBML(f)))
  # a low power of a sum is expanded, its like terms merged: 0.1 B (A + E)^2
  # = 0.1 (A^2 B + 2 A B E + B E^2), three reactions with catalysts
  law(paste0("<apply><times/><cn>0.1</cn><ci>B</ci><apply><power/><apply><plus/>",
             "<ci>A</ci><ci>E</ci></apply><cn type=\"integer\">2</cn></apply></apply>"))
  m <- readSBML(f)
  dec <- grep("^decay", m$reactions)
  expect_equal(length(dec), 3L)
  expect_equal(sort(unname(m$rates[dec])), c(0.05, 0.05, 0.1))   # divided by the size 2
  # a negative rate: the law as written (the reaction runs backwards)
  law("<apply><times/><cn>-0.1</cn><ci>B</ci></apply>")
  expect_true(is_law(readSBML(f)))
  # a huge stoichiometry is never expanded: B changes by 1e9 times the
  # law (divided by the size 2), a program read once
  t2 <- txt
  t2 <- sub('<speciesReference species="B"/>', '<speciesReference species="B" stoichiometry="1000000000"/>', t2, fixed = TRUE)
  writeLines(t2, f)
  m <- readSBML(f)
  expect_equal(unname(m$rates[m$reactions == "decay_B"]), 1e9 / 2)
  expect_true(m$laws$start[m$reactions == "decay_B"] >= 0)
  law("<apply><times/><cn>0</cn><ci>B</ci></apply>")
  m <- readSBML(f)
  expect_true(length(m$reactions) >= 4L)
})

# A one-reaction SBML model written out: A -> B in compartment `cell`, law
# and species attributes as given.
sbml_one <- function(size, law, species_attrs, extra = "", reaction_attrs = "fast=\"false\"") {
  f <- tempfile(fileext = ".xml")
  writeLines(c(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version1/core" level="3" version="1">',
    '<model id="one">',
    '<listOfCompartments>',
    sprintf('<compartment id="cell" size="%s" spatialDimensions="3" constant="true"/>', size),
    '</listOfCompartments>',
    '<listOfSpecies>',
    sprintf('<species id="A" compartment="cell" %s boundaryCondition="false" constant="false"/>', species_attrs[1]),
    sprintf('<species id="B" compartment="cell" %s boundaryCondition="false" constant="false"/>', species_attrs[2]),
    '</listOfSpecies>',
    '<listOfParameters><parameter id="k" value="0.5" constant="true"/>', extra, '</listOfParameters>',
    '<listOfReactions>',
    sprintf('<reaction id="r" reversible="false" %s>', reaction_attrs),
    '<listOfReactants><speciesReference species="A" stoichiometry="1" constant="true"/></listOfReactants>',
    '<listOfProducts><speciesReference species="B" stoichiometry="1" constant="true"/></listOfProducts>',
    '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">', law, '</math></kineticLaw>',
    '</reaction>',
    '</listOfReactions>',
    '</model>',
    '</sbml>'), f)
  f
}

test_that("an initial amount in a compartment of size 2: concentrations and amounts in closed form", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  tt <- c(0, 0.5, 1, 2, 4)
  law_kA <- "<apply><times/><ci>k</ci><ci>A</ci></apply>"
  # A's symbol is its concentration [A] = 3 / 2; the law k [A] is a rate of
  # amount, so d[A]/dt = -k [A] / 2: [A](t) = 1.5 exp(-k t / 2)
  f <- sbml_one(2, law_kA, c('initialAmount="3" hasOnlySubstanceUnits="false"',
                             'initialAmount="0" hasOnlySubstanceUnits="false"'))
  m <- readSBML(f)
  expect_equal(unname(m$initial), c(1.5, 0))
  out <- lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-14, backend = "cpu", verbose = FALSE)
  a <- 1.5 * exp(-0.5 * tt / 2)
  expect_equal(unname(out[, "A"]), a, tolerance = 1e-8)
  expect_equal(unname(out[, "B"]), 1.5 - a, tolerance = 1e-8)
  expect_equal(unname(attr(m, "compartmentSize")), 2)
  expect_false(any(attr(m, "substanceUnits")))
  # with hasOnlySubstanceUnits the symbol and the state are amounts:
  # A(t) = 3 exp(-k t)
  f <- sbml_one(2, law_kA, c('initialAmount="3" hasOnlySubstanceUnits="true"',
                             'initialAmount="0" hasOnlySubstanceUnits="true"'))
  m <- readSBML(f)
  expect_equal(unname(m$initial), c(3, 0))
  out <- lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-14, backend = "cpu", verbose = FALSE)
  expect_equal(unname(out[, "A"]), 3 * exp(-0.5 * tt), tolerance = 1e-8)
  # an initial concentration with an amount law k * A * cell: [A](t) = 3 exp(-k t)
  f <- sbml_one(2, "<apply><times/><ci>k</ci><ci>A</ci><ci>cell</ci></apply>",
                c('initialConcentration="3" hasOnlySubstanceUnits="false"',
                  'initialConcentration="0" hasOnlySubstanceUnits="false"'))
  out <- lassieSimulate(readSBML(f), tt, rtol = 1e-10, atol = 1e-14, backend = "cpu", verbose = FALSE)
  expect_equal(unname(out[, "A"]), 3 * exp(-0.5 * tt), tolerance = 1e-8)
})

test_that("SBML constructs the engine cannot run are refused by name, none ignored", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  sa <- c('initialAmount="1" hasOnlySubstanceUnits="false"', 'initialAmount="0" hasOnlySubstanceUnits="false"')
  law_kA <- "<apply><times/><ci>k</ci><ci>A</ci></apply>"
  cls <- "sysbioGPU_sbml_unsupported"
  # a species' conversion factor, and the model's: a reaction per species
  # it changes, the factor in its rate (test-lassie-sbml-constructs.R
  # simulates them)
  f <- sbml_one(1, law_kA, c(paste(sa[1], 'conversionFactor="cf"'), sa[2]),
                extra = '<parameter id="cf" value="2" constant="true"/>')
  expect_equal(readSBML(f)$rates, c(r_A = 2, r_B = 1))
  f <- sbml_one(1, law_kA, sa, extra = '<parameter id="cf" value="1" constant="true"/>')
  txt <- sub('<model id="one">', '<model id="one" conversionFactor="cf">', readLines(f), fixed = TRUE)
  writeLines(txt, f)
  expect_equal(readSBML(f)$reactions, "r")   # a factor of 1 changes nothing
  writeLines(sub('value="1"', 'value="3"', txt, fixed = TRUE), f)
  expect_equal(readSBML(f)$rates, c(r_A = 3, r_B = 3))
  # a fast reaction
  f <- sbml_one(1, law_kA, sa, reaction_attrs = 'fast="true"')
  expect_error(readSBML(f), "fast reaction\\(s\\) \\(r\\)", class = cls)
  # a delay
  f <- sbml_one(1, paste0('<apply><times/><ci>k</ci><apply><csymbol encoding="text" ',
                          'definitionURL="http://www.sbml.org/sbml/symbols/delay">delay</csymbol>',
                          '<ci>A</ci><cn>1</cn></apply></apply>'), sa)
  expect_error(readSBML(f), "r: .*delay csymbol", class = cls)
  # a law that is 0 keeps its reaction, with rate 0
  m <- readSBML(sbml_one(1, "<cn>0</cn>", sa))
  expect_equal(m$reactions, "r")
  expect_equal(unname(m$rates), 0)
  # the avogadro csymbol is not the local parameter called avogadro
  f <- sbml_one(1, paste0('<apply><times/><apply><divide/><csymbol encoding="text" ',
                          'definitionURL="http://www.sbml.org/sbml/symbols/avogadro">avogadro</csymbol>',
                          '<ci>avogadro</ci></apply><ci>A</ci></apply>'), sa)
  txt <- sub("</math></kineticLaw>", paste0('</math><listOfLocalParameters><localParameter id="avogadro" ',
                                            'value="1e24"/></listOfLocalParameters></kineticLaw>'), readLines(f), fixed = TRUE)
  writeLines(txt, f)
  expect_equal(unname(readSBML(f)$rates), 6.02214179e23 / 1e24)
})
