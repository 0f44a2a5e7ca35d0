# Helpers of test-lassieSimulate.R: small models and BioNetGen's .gdat files.
lassie_model <- function(reactants, products, rates, initial, species, ...) {
  reactionModel(rbind(reactants), rbind(products), rates = rates, initial = initial,
                species = species, ...)
}

lassie_extdata <- function(name) system.file("extdata", "lassie", name, package = "sysbioGPU")

read_gdat <- function(f) {
  l <- readLines(f)
  hdr <- strsplit(trimws(sub("^#", "", l[1])), "\\s+")[[1]]
  g <- utils::read.table(text = l[-1])
  colnames(g) <- hdr
  g
}

robertson_model <- function() {
  reactionModel(
    reactants = rbind(c(1, 0, 0), c(0, 2, 0), c(0, 1, 1)),
    products  = rbind(c(0, 1, 0), c(0, 1, 1), c(1, 0, 1)),
    rates = c(0.04, 3e7, 1e4), initial = c(1, 0, 0), species = c("y1", "y2", "y3"))
}

# relative error with a floor, elementwise max
max_rel <- function(a, b, floor = 0) max(abs(a - b) / pmax(abs(b), floor))

# a batch's values and stats, without what depends on the run (elapsed
# seconds, device names): what must not change with devices or workers
lassie_core <- function(b) {
  if (inherits(b, "lassieSimulation")) b <- list(b)
  lapply(b, function(o) list(x = unclass(o)[, ], stats = attr(o, "stats")))
}

# MathML of the hand-written SBML models: a name, a number, an operator
# applied to its operands
ci <- function(x) paste0("<ci>", x, "</ci>")
cn <- function(x) paste0("<cn>", x, "</cn>")
ap <- function(op, ...) paste0("<apply><", op, "/>", ..., "</apply>")

# SBML <reaction> elements for the hand-written models of the SBML tests: a
# named list of reactions, each list(re = reactants, pr = products, mod =
# modifiers, law = the kinetic law's MathML), stoichiometries 1
sbml_reactions_xml <- function(reactions) {
  sref <- function(s) paste0(sprintf('<speciesReference species="%s" stoichiometry="1" constant="true"/>', s),
                             collapse = "")
  vapply(names(reactions), function(id) {
    r <- reactions[[id]]
    paste0(sprintf('<reaction id="%s" reversible="false">', id),
           if (length(r$re)) paste0("<listOfReactants>", sref(r$re), "</listOfReactants>"),
           if (length(r$pr)) paste0("<listOfProducts>", sref(r$pr), "</listOfProducts>"),
           if (length(r$mod)) paste0("<listOfModifiers>",
                                     paste0(sprintf('<modifierSpeciesReference species="%s"/>', r$mod), collapse = ""),
                                     "</listOfModifiers>"),
           '<kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML">', r$law,
           "</math></kineticLaw></reaction>")
  }, "")
}

# An SBML Level 3 Version 2 model (min and max are its functions) in a compartment `cell` of size `size`: species
# (id = initial concentration), parameters (id = value), reactions (list of
# reactants, products, modifiers, MathML law), and `extra` XML (rules,
# initial assignments) before the reactions.
sbml_model <- function(size, species, params, reactions, extra = character()) {
  f <- tempfile(fileext = ".xml")
  rx <- sbml_reactions_xml(reactions)
  writeLines(c(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">',
    '<model id="kin">',
    sprintf('<listOfCompartments><compartment id="cell" size="%s" spatialDimensions="3" constant="true"/></listOfCompartments>', size),
    "<listOfSpecies>",
    sprintf('<species id="%s" compartment="cell" initialConcentration="%s" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>',
            names(species), species),
    "</listOfSpecies>",
    "<listOfParameters>",
    sprintf('<parameter id="%s" value="%s" constant="true"/>', names(params), params),
    "</listOfParameters>",
    extra,
    "<listOfReactions>", rx, "</listOfReactions>",
    "</model>", "</sbml>"), f)
  f
}
