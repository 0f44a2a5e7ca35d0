# A published model with Michaelis-Menten and Hill kinetic laws (Nakakuki
# 2010, 49 species, 64 laws that are not mass action) on the CPU engine,
# against deSolve integrating the model's own math: the SBML file read by a
# plain-R reader of its own (inst/bench/sbml-plain-ode.R, no libSBML, no
# readSBML()) whose MathML becomes R expressions.  A bug in readSBML()'s
# programs, their constants, the law scaling by `rates`, compartment sizes
# or the engine's evaluation of the programs shows as a mismatch.

nakakuki_file <- function() lassie_extdata("Nakakuki2010_CellFateDecision.xml.gz")

plain_reader <- function() {
  e <- new.env()
  sys.source(system.file("bench", "sbml-plain-ode.R", package = "sysbioGPU"), envir = e)
  e
}

# |ours - theirs| against tol relative to the value (with a floor of 1e-6 of
# each column's largest) plus 1e-10 absolute: the solvers' atol is 1e-12
# and species that start at 0 sit at 1e-13 for a while on either side
laws_mismatch <- function(ours, theirs, tol) {
  o <- unname(unclass(ours)[, -1, drop = FALSE]); r <- unname(theirs[, -1, drop = FALSE])
  scale <- matrix(apply(abs(r), 2, max), nrow(r), ncol(r), byrow = TRUE)
  max((abs(o - r) - 1e-10) / (tol * pmax(abs(r), 1e-6 * scale)))
}

# A file of one reaction r, A -> B (A's stoichiometry stoich_a) in
# compartment c, for the plain reader's own tests
one_reaction_sbml <- function(law, species, parameters, size = 1, stoich_a = 1, rules = "", local = "") {
  f <- tempfile(fileext = ".xml")
  writeLines(paste0('<?xml version="1.0"?><sbml xmlns="http://www.sbml.org/sbml/level2/version4" level="2" version="4">',
                    '<model id="m"><listOfCompartments><compartment id="c" size="', size, '"/></listOfCompartments>',
                    '<listOfSpecies>', species, '</listOfSpecies><listOfParameters>', parameters, '</listOfParameters>',
                    if (nzchar(rules)) paste0('<listOfRules>', rules, '</listOfRules>'), '<listOfReactions>',
                    '<reaction id="r" reversible="false"><listOfReactants><speciesReference species="A" stoichiometry="',
                    stoich_a, '"/></listOfReactants><listOfProducts><speciesReference species="B"/></listOfProducts>',
                    '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">', law, '</math>',
                    if (nzchar(local)) paste0('<listOfParameters>', local, '</listOfParameters>'),
                    '</kineticLaw></reaction></listOfReactions></model></sbml>'), f)
  f
}

test_that("the plain reader reads the model's species, start and laws as written in the file", {
  P <- plain_reader()
  pm <- P$plain_sbml_model(nakakuki_file())
  expect_length(pm$species, 49L)
  expect_length(pm$laws, 78L)
  expect_equal(sum(pm$fixed), 2L)        # EGF and HRG, boundary species
  # reaction re85 (v003): cytoplasm * V3 pERK_c / (K3 (1 + ppERK_c / K4) + pERK_c),
  # its function definition and constants read from the file by hand
  y <- c(pERK_c = 2, ppERK_c = 30)
  expect_equal(eval(pm$laws$re85, as.list(y)), 940 * 0.72 * 2 / (160 * (1 + 30 / 60) + 2))
  # the Hill law of re109 (v007), exponent 3.970849295
  expect_equal(eval(pm$laws$re109, list(ppERK_n = 100)),
               220 * 29.24109258 * 100^3.970849295 / (169.0473748^3.970849295 + 100^3.970849295))
})

test_that("the plain reader's other MathML: numbers, roots, logarithms, local parameters, amounts", {
  P <- plain_reader()
  law <- ap("times", ci("k"), cn("2"),
            '<cn type="e-notation"> 1.5 <sep/> -3 </cn>', '<cn type="rational"> 1 <sep/> 4 </cn>',
            "<apply><root/><degree>", cn("3"), "</degree>", ci("A"), "</apply>",
            ap("ln", ci("B")), ap("exp", ap("minus", ci("A"))),
            "<apply><log/><logbase>", cn("2"), "</logbase>", ci("B"), "</apply>")
  f <- one_reaction_sbml(law, paste0('<species id="A" compartment="c" initialConcentration="3"/>',
                                      '<species id="B" compartment="c" initialAmount="5" hasOnlySubstanceUnits="true"/>'),
                         '<parameter id="k" value="100"/>', size = 2, stoich_a = 2,
                         local = '<parameter id="k" value="7"/>')
  pm <- P$plain_sbml_model(f)
  expect_equal(pm$initial, c(A = 3, B = 5))
  v <- 7 * 2 * 1.5e-3 * 0.25 * 3^(1 / 3) * log(5) * exp(-3) * log(5, 2)   # the local k, not the global
  expect_equal(eval(pm$laws$r, list(A = 3, B = 5)), v)
  # dA/dt = -2 v / size (a concentration), dB/dt = v (an amount)
  expect_equal(P$plain_rhs(pm)(0, c(3, 5), 1)[[1]], c(-2 * v / 2, v))
  unlink(f)
})

# readSBML() against the plain reader (species, start, the count of laws
# that are not mass action), then the CPU engine against deSolve on two
# sets: the published model, and one with each SBML reaction's law scaled
# by a log-uniform factor in [1/2, 2] (a reaction that readSBML() splits
# gets its reaction's factor on every part); and the comparison must see
# a 1% change of the law changed_law.  Returns our runs.
expect_laws_as_desolve <- function(file, n_laws, tt, seed, changed_law) {
  P <- plain_reader()
  pm <- P$plain_sbml_model(file)
  m <- readSBML(file)
  expect_identical(m$species, pm$species)
  expect_equal(unname(m$initial), unname(pm$initial))
  expect_equal(sum(m$laws$start >= 0L), n_laws)
  set.seed(seed)
  f <- rbind(1, exp(stats::runif(length(pm$laws), log(0.5), log(2))))
  rates <- f[, P$plain_reaction_of(m$reactions, pm), drop = FALSE] * rep(m$rates, each = nrow(f))
  colnames(rates) <- m$reactions
  ours <- lassieSimulate(m, tt, rtol = 1e-10, atol = 1e-12, rates = rates, backend = "cpu",
                         threads = 2, verbose = FALSE)
  expect_identical(attr(ours, "status"), c(0L, 0L))
  # the species alone: the outputs of assignment rules are not states
  species_of <- function(s) unclass(ours[[s]])[, c("time", pm$species)]
  rhs <- P$plain_rhs(pm)
  desolve <- function(scale) deSolve::ode(pm$initial, tt, rhs, scale, method = "lsoda", rtol = 1e-11,
                                          atol = 1e-12, maxsteps = 1e6)
  for (s in seq_len(nrow(f))) expect_lt(laws_mismatch(species_of(s), desolve(f[s, ]), tol = 1e-7), 1)
  f1 <- rep(1, length(pm$laws)); f1[names(pm$laws) == changed_law] <- 1.01
  expect_gt(laws_mismatch(species_of(1), desolve(f1), tol = 1e-7), 10)
  ours
}

test_that("lassieSimulate runs Nakakuki 2010 (Michaelis-Menten, Hill) as deSolve on the model's own math", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_not_installed("deSolve")
  # re109: a Hill law
  expect_laws_as_desolve(nakakuki_file(), n_laws = 64L, tt = c(0, 60, 300, 600), seed = 3, changed_law = "re109")
})

# A second published model, larger and of other laws: Birtwistle 2007 (ErbB
# signalling; 118 species, Michaelis-Menten laws and mass action with
# Michaelis-Menten terms), whose two assignment rules set outputs alone.
birtwistle_file <- function() lassie_extdata("Birtwistle2007_ErbB.xml.gz")

test_that("the plain reader reads an assignment rule as an output and stops where a law reads it", {
  P <- plain_reader()
  sbml <- function(law, rule) {
    one_reaction_sbml(law, paste0('<species id="A" compartment="c" initialConcentration="3"/>',
                                  '<species id="B" compartment="c" initialConcentration="0"/>',
                                  '<species id="T" compartment="c" boundaryCondition="true"/>'),
                      '<parameter id="k" value="2"/><parameter id="K" value="5"/>', rules = rule)
  }
  total <- paste0('<assignmentRule variable="T"><math xmlns="http://www.w3.org/1998/Math/MathML">',
                  ap("plus", ci("A"), ci("B")), '</math></assignmentRule>')
  mm <- ap("divide", ap("times", ci("k"), ci("A")), ap("plus", ci("K"), ci("A")))
  f <- sbml(mm, total)
  pm <- P$plain_sbml_model(f)
  expect_identical(pm$species, c("A", "B"))
  expect_equal(eval(pm$laws$r, list(A = 3)), 2 * 3 / (5 + 3))
  expect_error(P$plain_sbml_model(sbml(ap("times", ci("k"), ci("T")), total)), "unknown names T")
  expect_error(P$plain_sbml_model(sbml(mm, sub("assignmentRule", "rateRule", sub("</assignmentRule", "</rateRule", total)))),
               "assignment rules alone")
  unlink(f)
})

test_that("the plain reader reads Birtwistle 2007's species, start and laws as written in the file", {
  P <- plain_reader()
  pm <- P$plain_sbml_model(birtwistle_file())
  expect_length(pm$species, 118L)       # 120 in the file, less the two outputs
  expect_false(any(c("norm_Akt_star", "norm_Erk_star") %in% pm$species))
  expect_length(pm$laws, 102L)
  expect_equal(sum(pm$initial > 0), 20L)
  expect_equal(pm$initial[c("E1", "ERK", "E", "H")], c(E1 = 274, ERK = 750, E = 10, H = 10))
  # Net_Raf_Activation: membrane (kf51 RsT Raf / (Kmf51 + Raf) - Vmaxr51 Rafstar / (Kmrb51 + Rafstar)),
  # its constants read from the file by hand
  y <- list(RsT = 20, Raf = 700, Rafstar = 40)
  expect_equal(eval(pm$laws$Net_Raf_Activation, y),
               1 * (3.6515 * 20 * 700 / (599.7076 + 700) - 16.737 * 40 / (988.4496 + 40)))
  expect_equal(pm$D[c("Raf", "Rafstar"), "Net_Raf_Activation"], c(Raf = -1, Rafstar = 1))
})

test_that("lassieSimulate runs Birtwistle 2007 as deSolve on the model's own math, and its outputs as its rules", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_not_installed("deSolve")
  # Net_Raf_Activation: Michaelis-Menten terms
  ours <- expect_laws_as_desolve(birtwistle_file(), n_laws = 79L, tt = c(0, 30, 120, 600), seed = 5,
                                 changed_law = "Net_Raf_Activation")
  # the file's two assignment rules, at every output time of both sets
  for (x in lapply(ours, unclass)) {
    expect_equal(x[, "norm_Akt_star"], x[, "Aktstar"] / 18.8, tolerance = 1e-14)
    expect_equal(x[, "norm_Erk_star"], (x[, "ERKstar"] + x[, "ERKstar_ERKpase"]) / 589.5, tolerance = 1e-14)
  }
})
