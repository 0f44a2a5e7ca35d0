# An SBML reader of its own, in base R, for the oracle of the kinetic-law
# tests and for the deSolve side of inst/bench/lassie-laws.R: it reads the
# file's XML itself (not through libSBML or readSBML()) and turns each
# reaction's kinetic-law MathML into an R expression of the species, so a
# bug in readSBML()'s programs or in the engine's evaluation of them shows as
# a mismatch.  It covers what plain reaction models use (compartments,
# species, global and local parameters, function definitions, the
# arithmetic operators and elementary functions) and stops on anything else
# (rate and algebraic rules, events, initial assignments, piecewise, time).
# An assignment rule is read as an output alone: its variable leaves the
# species and the constants, so a law that reads it stops the reader.

# The XML as a flat table of elements: name, attributes, text, parent.
# Notes and annotations hold arbitrary XML (XHTML, RDF) and are dropped.
plain_xml <- function(file) {
  txt <- paste(readLines(file, warn = FALSE), collapse = "\n")   # a .gz is read through
  txt <- gsub("<!--.*?-->", "", txt, perl = TRUE)
  txt <- gsub("<[?!][^>]*>", "", txt, perl = TRUE)
  txt <- gsub("(?s)<(notes|annotation)\\b[^>]*?/>", "", txt, perl = TRUE)
  txt <- gsub("(?s)<(notes|annotation)\\b.*?</\\1\\s*>", "", txt, perl = TRUE)
  tok <- regmatches(txt, gregexpr("<[^>]*>|[^<]+", txt))[[1]]
  n <- sum(startsWith(tok, "<") & !startsWith(tok, "</"))
  name <- character(n); parent <- integer(n); text <- character(n); attrs <- vector("list", n)
  stack <- 0L; k <- 0L
  for (t in tok) {
    if (startsWith(t, "</")) {
      stack <- stack[-length(stack)]
    } else if (startsWith(t, "<")) {
      k <- k + 1L
      name[k] <- regmatches(t, regexpr("^<\\s*[^[:space:]/>]+", t))
      name[k] <- sub("^<\\s*", "", name[k])
      a <- regmatches(t, gregexpr("[[:alnum:]_:.-]+\\s*=\\s*(\"[^\"]*\"|'[^']*')", t))[[1]]
      attrs[[k]] <- stats::setNames(sub("^[^=]*=\\s*.(.*).$", "\\1", a), trimws(sub("=.*$", "", a)))
      parent[k] <- stack[length(stack)]
      if (!endsWith(t, "/>")) stack <- c(stack, k)
    } else if (length(stack) > 1L) {
      # text split by an element (<cn> 1 <sep/> 3 </cn>) keeps a space
      s <- trimws(t); j <- stack[length(stack)]
      if (nzchar(s)) text[j] <- if (nzchar(text[j])) paste(text[j], s) else s
    }
  }
  list(name = name, parent = parent, text = text, attrs = attrs)
}

plain_kids <- function(x, i, nm = NULL) {
  k <- which(x$parent == i)
  if (is.null(nm)) k else k[x$name[k] == nm]
}
plain_kid <- function(x, i, nm) {
  k <- plain_kids(x, i, nm)
  if (length(k) > 1L) stop("more than one <", nm, ">")
  k
}
plain_attr <- function(x, i, a, default = NA_character_) {
  v <- x$attrs[[i]][a]
  if (is.na(v)) default else unname(v)
}
# the elements of a listOf... below i
plain_list <- function(x, i, list_name, nm) {
  l <- plain_kid(x, i, list_name)
  if (length(l)) plain_kids(x, l, nm) else integer()
}

# MathML to an R call: ci a name, cn a number, apply an operator (or a
# function definition, whose body is substituted) applied to its operands.
plain_math <- function(x, i, fdefs) {
  nm <- x$name[i]
  if (nm == "math") {
    k <- plain_kids(x, i)
    if (length(k) != 1L) stop("<math> with ", length(k), " children")
    return(plain_math(x, k, fdefs))
  }
  if (nm == "ci") return(as.name(trimws(x$text[i])))
  if (nm == "cn") {
    type <- plain_attr(x, i, "type", "real")
    p <- as.numeric(strsplit(x$text[i], "\\s+")[[1]])
    if (type == "e-notation") return(p[1L] * 10^p[2L])
    if (type == "rational") return(p[1L] / p[2L])
    return(as.numeric(x$text[i]))
  }
  if (nm == "lambda") stop("a lambda outside a function definition")
  if (nm != "apply") stop("MathML element <", nm, "> is not handled by the plain reader")
  k <- plain_kids(x, i)
  op <- x$name[k[1L]]
  qual <- k[-1L][x$name[k[-1L]] %in% c("degree", "logbase")]
  args <- lapply(setdiff(k[-1L], qual), plain_math, x = x, fdefs = fdefs)
  qual_arg <- if (length(qual)) plain_math(x, plain_kids(x, qual[1L]), fdefs)
  fold <- function(f) Reduce(function(a, b) call(f, a, b), args)
  switch(op,
    ci = {
      f <- fdefs[[trimws(x$text[k[1L]])]]
      if (is.null(f)) stop("unknown function ", x$text[k[1L]])
      if (length(args) != length(f$args)) stop("function ", x$text[k[1L]], " needs ", length(f$args), " arguments")
      do.call(substitute, list(f$body, stats::setNames(args, f$args)))
    },
    plus = if (length(args)) fold("+") else 0,
    times = if (length(args)) fold("*") else 1,
    minus = if (length(args) == 1L) call("-", args[[1L]]) else call("-", args[[1L]], args[[2L]]),
    divide = call("/", args[[1L]], args[[2L]]),
    power = call("^", args[[1L]], args[[2L]]),
    root = call("^", args[[1L]], call("/", 1, if (is.null(qual_arg)) 2 else qual_arg)),
    exp = call("exp", args[[1L]]),
    ln = call("log", args[[1L]]),
    log = call("log", args[[1L]], if (is.null(qual_arg)) 10 else qual_arg),
    abs = call("abs", args[[1L]]),
    floor = call("floor", args[[1L]]),
    ceiling = call("ceiling", args[[1L]]),
    stop("MathML operator <", op, "/> is not handled by the plain reader"))
}

# The model: species (state: concentration, or amount with
# hasOnlySubstanceUnits), which are fixed (boundary or constant), and per
# reaction its stoichiometry and its law as an R expression of the species
# alone (constants substituted by their values).
plain_sbml_model <- function(file) {
  x <- plain_xml(file)
  sbml <- which(x$name == "sbml")
  model <- plain_kid(x, sbml, "model")
  refused <- c("listOfEvents", "listOfInitialAssignments", "listOfConstraints")
  has <- vapply(refused, function(l) length(plain_list(x, model, l, NULL)) > 0L, TRUE)
  if (any(has)) stop("the plain reader does not handle ", paste(refused[has], collapse = ", "))
  rules <- plain_list(x, model, "listOfRules", NULL)
  if (any(x$name[rules] != "assignmentRule")) stop("the plain reader handles assignment rules alone")
  assigned <- vapply(rules, plain_attr, "", x = x, a = "variable")
  val <- function(i, a) as.numeric(plain_attr(x, i, a))
  comp <- plain_list(x, model, "listOfCompartments", "compartment")
  size <- stats::setNames(vapply(comp, val, 0, a = "size"), vapply(comp, plain_attr, "", x = x, a = "id"))
  size[is.na(size)] <- 1
  if (any(assigned %in% names(size))) stop("the plain reader does not handle compartments that rules set")
  par <- plain_list(x, model, "listOfParameters", "parameter")
  consts <- c(as.list(size), stats::setNames(lapply(par, val, a = "value"),
                                              vapply(par, plain_attr, "", x = x, a = "id")))
  consts <- consts[setdiff(names(consts), assigned)]
  fdefs <- list()
  for (f in plain_list(x, model, "listOfFunctionDefinitions", "functionDefinition")) {
    lam <- plain_kids(x, plain_kid(x, f, "math"), "lambda")
    b <- plain_kids(x, lam, "bvar")
    body <- setdiff(plain_kids(x, lam), b)
    fdefs[[plain_attr(x, f, "id")]] <- list(
      args = vapply(b, function(j) trimws(x$text[plain_kid(x, j, "ci")]), ""),
      body = plain_math(x, body, fdefs))
  }
  sp <- plain_list(x, model, "listOfSpecies", "species")
  sp <- sp[!vapply(sp, plain_attr, "", x = x, a = "id") %in% assigned]
  ids <- vapply(sp, plain_attr, "", x = x, a = "id")
  flag <- function(i, a) identical(plain_attr(x, i, a, "false"), "true")
  amount <- vapply(sp, flag, TRUE, a = "hasOnlySubstanceUnits")
  vol <- unname(size[vapply(sp, plain_attr, "", x = x, a = "compartment")])
  ic <- vapply(sp, val, 0, a = "initialConcentration"); ia <- vapply(sp, val, 0, a = "initialAmount")
  init <- ifelse(amount, ifelse(is.na(ia), ic * vol, ia), ifelse(is.na(ic), ia / vol, ic))
  fixed <- vapply(sp, flag, TRUE, a = "boundaryCondition") | vapply(sp, flag, TRUE, a = "constant")
  rx <- plain_list(x, model, "listOfReactions", "reaction")
  S <- matrix(0, length(ids), length(rx), dimnames = list(ids, vapply(rx, plain_attr, "", x = x, a = "id")))
  laws <- vector("list", length(rx))
  for (r in seq_along(rx)) {
    for (side in c("listOfReactants", "listOfProducts")) {
      for (s in plain_list(x, rx[r], side, "speciesReference")) {
        if (length(plain_kids(x, s))) stop("stoichiometryMath is not handled by the plain reader")
        st <- as.numeric(plain_attr(x, s, "stoichiometry", "1"))
        j <- match(plain_attr(x, s, "species"), ids)
        if (is.na(j)) stop("reaction ", colnames(S)[r], " changes ", plain_attr(x, s, "species"), ", not a state")
        S[j, r] <- S[j, r] + if (side == "listOfReactants") -st else st
      }
    }
    kl <- plain_kid(x, rx[r], "kineticLaw")
    loc <- c(plain_list(x, kl, "listOfParameters", "parameter"), plain_list(x, kl, "listOfLocalParameters", "localParameter"))
    env <- consts
    env[vapply(loc, plain_attr, "", x = x, a = "id")] <- lapply(loc, val, a = "value")
    law <- do.call(substitute, list(plain_math(x, plain_kid(x, kl, "math"), fdefs), env))
    left <- setdiff(all.vars(law), ids)
    if (length(left)) stop("reaction ", colnames(S)[r], ": unknown names ", paste(left, collapse = ", "))
    laws[[r]] <- law
  }
  names(laws) <- colnames(S)
  # d state / dt: the laws are rates of change of amounts; a
  # concentration's divides by its compartment's size
  D <- S / ifelse(amount, 1, vol)
  D[fixed, ] <- 0
  list(species = ids, initial = stats::setNames(init, ids), fixed = stats::setNames(fixed, ids),
       laws = laws, D = D)
}

# The right-hand side for deSolve, in R: func(t, y, scale), where scale
# multiplies each reaction's law (one value per reaction, in the order of
# m$laws).
#
# The laws read the states at max(y, 0): the solution of a reaction model
# stays >= 0, but a solver's step can undershoot 0 by rounding (lsoda by
# 1e-13 on species that start at 0 in Nakakuki 2010), where a Hill law's
# x^n with a non-integer n has no real value and would stop the run.
plain_rhs <- function(m) {
  assign_sp <- lapply(seq_along(m$species), function(j) {
    call("<-", as.name(m$species[j]), call("max", call("[[", quote(y), j), 0))
  })
  rates <- as.function(c(alist(y = ), as.call(c(as.name("{"), assign_sp, as.call(c(as.name("c"), unname(m$laws)))))))
  D <- m$D
  function(t, y, scale) list(as.vector(D %*% (scale * rates(y))))
}

# The same right-hand side as C source for deSolve's compiled-code
# interface: <prefix>_derivs and <prefix>_initmod, which takes the laws'
# scale factors as deSolve's parms.  (A static array holds them, as in
# deSolve's own examples: each forked worker has its own copy.)  With
# clamp = FALSE the laws read the states as they are, below 0 too.
plain_c_expr <- function(e, species) {
  if (is.numeric(e)) return(sprintf("(%.17g)", e))
  if (is.name(e)) return(sprintf("y[%d]", match(as.character(e), species) - 1L))
  op <- as.character(e[[1L]])
  a <- lapply(as.list(e)[-1L], plain_c_expr, species = species)
  if (op %in% c("+", "-", "*", "/")) {
    if (length(a) == 1L) return(sprintf("(%s%s)", op, a[[1L]]))
    return(sprintf("(%s %s %s)", a[[1L]], op, a[[2L]]))
  }
  if (op == "(") return(a[[1L]])
  if (op == "^") return(sprintf("pow(%s, %s)", a[[1L]], a[[2L]]))
  if (op == "log" && length(a) == 2L) return(sprintf("(log(%s) / log(%s))", a[[1L]], a[[2L]]))
  f <- c(exp = "exp", log = "log", abs = "fabs", floor = "floor", ceiling = "ceil")[op]
  if (is.na(f)) stop("no C for ", op)
  sprintf("%s(%s)", f, a[[1L]])
}
plain_c_source <- function(m, prefix = "plain", clamp = TRUE) {
  R <- length(m$laws)
  v <- vapply(seq_len(R), function(r) sprintf("  v[%d] = scale[%d] * %s;", r - 1L, r - 1L,
                                              plain_c_expr(m$laws[[r]], m$species)), "")
  dy <- vapply(seq_along(m$species), function(i) {
    nz <- which(m$D[i, ] != 0)
    if (!length(nz)) return(sprintf("  ydot[%d] = 0;", i - 1L))
    sprintf("  ydot[%d] = %s;", i - 1L, paste(sprintf("(%.17g) * v[%d]", m$D[i, nz], nz - 1L), collapse = " + "))
  }, "")
  c("#include <math.h>",
    sprintf("static double scale[%d];", R),
    sprintf("void %s_initmod(void (*odeparms)(int *, double *)) { int n = %d; odeparms(&n, scale); }", prefix, R),
    sprintf("void %s_derivs(int *neq, double *t, double *y_in, double *ydot, double *yout, int *ip) {", prefix),
    sprintf("  double v[%d], y[%d];", R, length(m$species)),
    # the states at max(y, 0), as plain_rhs() reads them
    sprintf("  for (int i = 0; i < %d; i++) y[i] = %s;", length(m$species),
            if (clamp) "y_in[i] > 0 ? y_in[i] : 0" else "y_in[i]"),
    v, dy, "}")
}

# Which SBML reaction each of readSBML()'s reactions comes from: R itself,
# R_rev (a reversible law split in two) or R_<species> (a law across
# compartments of different sizes, one reaction per species it changes), so
# that one factor per SBML reaction scales both sides alike.
plain_reaction_of <- function(lassie_reactions, m) {
  ids <- names(m$laws)
  i <- match(sub("_rev$", "", lassie_reactions), ids)
  split_names <- outer(ids, m$species, paste, sep = "_")
  miss <- is.na(i)
  i[miss] <- row(split_names)[match(lassie_reactions[miss], split_names)]
  if (anyNA(i)) stop("reactions without an SBML reaction: ", paste(lassie_reactions[is.na(i)], collapse = ", "))
  i
}
