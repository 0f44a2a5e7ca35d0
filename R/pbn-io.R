# Probabilistic Boolean networks in R: the expression parser, the pbn()
# constructor, readPBN() for .bnet / BoolNet / ASSA-PBN files, as.pbn() for
# BoolNet objects, and print/summary.  pbnSteadyState() and pbnSimulate()
# (R/pbnSteadyState.R) flatten these objects for the C engines.

# ---- Boolean expressions --------------------------------------------------

# Tokens: operators, parentheses, constants and node names.
# Spaces separate tokens (never glued: "B C" is two names, which the parser
# then refuses).
pbn_tokenize <- function(text, where) {
  # (the runs of spaces are tokens too, dropped at the end: no trimws(),
  # which took a third of the time of reading a large ASSA-PBN file)
  m <- gregexpr("[A-Za-z0-9_.]+|[!&|()]|[[:space:]]+", text)[[1L]]
  toks <- if (m[[1L]] > 0L) substring(text, m, m + attr(m, "match.length") - 1L) else character()
  if (sum(nchar(toks)) != nchar(text)) {
    bad <- strsplit(gsub("[A-Za-z0-9_.!&|()[:space:]]", "", text), "")[[1L]][1L]
    stop_input(where, ": unexpected character '", bad, "' in \"", text, "\"", call = NULL)
  }
  toks <- toks[!grepl("^[[:space:]]", toks)]
  if (!length(toks)) stop_input(where, ": empty Boolean expression", call = NULL)
  toks
}

# The words an expression reads as constants (any case), which therefore
# cannot name a node.
pbn_is_constant_word <- function(x) x %in% c("0", "1") | toupper(x) %in% c("TRUE", "FALSE")

# A node name as files and pbn() give it: a valid name, and not a word that
# expressions read as a constant (a node `True` could never be referred to).
pbn_check_node_name <- function(nm, where) {
  if (!grepl("^[A-Za-z_.][A-Za-z0-9_.]*$", nm))
    stop_input(where, ": '", nm, "' is not a valid node name", call = NULL)
  if (pbn_is_constant_word(nm))
    stop_input(where, ": '", nm, "' cannot name a node: expressions read it as the constant ",
               toupper(nm), " (any case); rename the node", call = NULL)
  invisible(nm)
}

pbn_max_depth <- 64L

# Recursive descent: expr := term ('|' term)*, term := factor ('&' factor)*,
# factor := '!' factor | '(' expr ')' | constant | name.  The tree is a list:
# list("or"/"and", children), list("not", child), list("var", name),
# list("const", TRUE/FALSE).
pbn_parse_expr <- function(text, where) {
  toks <- pbn_tokenize(text, where)
  pos <- 1L
  depth <- 0L
  fail <- function(msg) {
    shown <- if (nchar(text) > 80L) paste0(substr(text, 1L, 77L), "...") else text
    stop_input(where, ": ", msg, " in \"", shown, "\"", call = NULL)
  }
  peek <- function() if (pos <= length(toks)) toks[[pos]] else ""
  # '!' and '(' recurse: a depth limit keeps R's C stack safe (and the
  # tree walkers below, which recurse as deep as the parser)
  deeper <- function() {
    depth <<- depth + 1L
    if (depth > pbn_max_depth) fail(paste0("nesting deeper than ", pbn_max_depth, " levels of '(' or '!'"))
  }
  factor <- function() {
    t <- peek()
    if (t == "") fail("unexpected end of expression")
    pos <<- pos + 1L
    if (t == "!") {
      deeper()
      on.exit(depth <<- depth - 1L)
      return(list("not", factor()))
    }
    if (t == "(") {
      deeper()
      on.exit(depth <<- depth - 1L)
      e <- expr()
      if (peek() != ")") fail("missing ')'")
      pos <<- pos + 1L
      return(e)
    }
    if (t %in% c(")", "&", "|")) fail(paste0("unexpected '", t, "'"))
    if (pbn_is_constant_word(t))
      return(list("const", t == "1" || toupper(t) == "TRUE"))
    if (grepl("^[0-9]", t)) fail(paste0("'", t, "' is not a node name"))
    list("var", t)
  }
  term <- function() {
    x <- list(factor())
    while (peek() == "&") { pos <<- pos + 1L; x[[length(x) + 1L]] <- factor() }
    if (length(x) == 1L) x[[1L]] else list("and", x)
  }
  expr <- function() {
    x <- list(term())
    while (peek() == "|") { pos <<- pos + 1L; x[[length(x) + 1L]] <- term() }
    if (length(x) == 1L) x[[1L]] else list("or", x)
  }
  tree <- expr()
  if (pos <= length(toks)) fail(paste0("unexpected '", toks[[pos]], "'"))
  tree
}

pbn_expr_vars <- function(tree) {
  switch(tree[[1L]],
         var = tree[[2L]],
         const = character(),
         not = pbn_expr_vars(tree[[2L]]),
         unique(unlist(lapply(tree[[2L]], pbn_expr_vars))))
}

# Truth tables are kept packed, 16 rows per integer word (row j in bit
# j %% 16 of word j %/% 16): R's bitw* functions work on them without
# meeting NA_integer_'s bit pattern, and a 24-input table takes 4 MB.
pbn_pack16 <- function(bits) {
  n <- length(bits)
  nw <- (n + 15L) %/% 16L
  b <- c(as.integer(bits), integer(nw * 16L - n))
  as.integer(colSums(matrix(b, nrow = 16L) * 2^(0:15)))
}

pbn_unpack16 <- function(words, n) {
  as.logical(as.vector(outer(0:15, words, function(j, w) (w %/% 2^j) %% 2)))[seq_len(n)]
}

# Truth table of one function as a logical vector (row j + 1 = inputs
# given by the bits of j, first input most significant).
pbn_fun_table <- function(f) pbn_unpack16(f$words, 2^length(f$inputs))

# Packed column of input v of k (first input = most significant row bit).
pbn_var_words <- function(v, k) {
  nw <- max(1L, 2^k %/% 16L)
  shift <- k - v
  if (shift < 4L) return(rep(c(43690L, 52428L, 61680L, 65280L)[shift + 1L], nw))
  w <- seq_len(nw) - 1
  ifelse((w %/% 2^(shift - 4L)) %% 2 == 1, 65535L, 0L)
}

# Evaluates the tree on packed columns (env: name -> words).
pbn_expr_eval <- function(tree, env, nw) {
  switch(tree[[1L]],
         var = env[[tree[[2L]]]],
         const = rep(if (tree[[2L]]) 65535L else 0L, nw),
         not = bitwXor(pbn_expr_eval(tree[[2L]], env, nw), 65535L),
         and = Reduce(bitwAnd, lapply(tree[[2L]], pbn_expr_eval, env = env, nw = nw)),
         or = Reduce(bitwOr, lapply(tree[[2L]], pbn_expr_eval, env = env, nw = nw)))
}

pbn_max_inputs <- 24L

# Truth table of an expression over its variables in order of appearance;
# row j (0-based) gives the inputs the bits of j, the first input the most
# significant bit (BoolNet's convention).
pbn_expr_function <- function(text, where) {
  tree <- pbn_parse_expr(text, where)
  vars <- pbn_expr_vars(tree)
  k <- length(vars)
  if (k > pbn_max_inputs)
    stop_input(where, ": a function may have at most ", pbn_max_inputs, " inputs, not ", k, call = NULL)
  nw <- max(1L, 2^k %/% 16L)
  env <- list()
  for (v in seq_len(k)) env[[vars[[v]]]] <- pbn_var_words(v, k)
  words <- pbn_expr_eval(tree, env, nw)
  if (k < 4L) words <- bitwAnd(words, as.integer(2^(2^k) - 1))
  list(inputs = vars, words = as.integer(words), expression = text)
}

pbn_table_expression <- function(inputs, table) {
  if (length(inputs) == 0L) return(if (table[[1L]]) "1" else "0")
  if (all(table)) return("1")
  if (!any(table)) return("0")
  k <- length(inputs)
  rows <- which(table) - 1
  terms <- vapply(rows, function(j) {
    bits <- (j %/% 2^(k - seq_len(k))) %% 2 == 1
    paste0(ifelse(bits, "", "!"), inputs, collapse = " & ")
  }, "")
  if (length(terms) > 4L) return(sprintf("<truth table over %s>", paste(inputs, collapse = ", ")))
  paste0("(", terms, ")", collapse = " | ")
}

# ---- constructor ----------------------------------------------------------

#' Probabilistic Boolean networks
#'
#' Builds a probabilistic Boolean network (PBN): every node has one or more
#' predictor functions, each chosen with its selection probability at every
#' step (an independent PBN, as in Shmulevich et al. and the ASSA-PBN paper).
#'
#' Each element of `nodes` (named by its node) gives the functions of one
#' node in one of these forms:
#' * a character string: one Boolean expression, probability 1;
#' * a named numeric vector: names are expressions, values their selection
#'   probabilities, e.g. `c("A & B" = 0.7, "A" = 0.3)`;
#' * a list with `functions` (a character vector of expressions, or a list
#'   of truth tables) and `probabilities`;
#' * a truth table: a list with `inputs` (node names) and `table` (logical or
#'   0/1, length `2^length(inputs)`, the first input being the most
#'   significant bit of the row index, as in BoolNet).
#'
#' Expressions use `!` (not), `&` (and), `|` (or), parentheses, the constants
#' `0`/`1` (or `TRUE`/`FALSE`, in any case) and node names (letters, digits,
#' `_` and `.`); spaces separate tokens (`"B C"` is an error, not the name
#' `BC`), and a node cannot be named `TRUE` or `FALSE` in any case, which
#' expressions read as constants.  A function may have up to 24 inputs.
#'
#' @param nodes A named list, one element per node (see Details).
#' @param perturbable Logical, recycled or named by node: which nodes random
#'   perturbations may flip (default all).
#' @param identityForMissing If `TRUE`, names used in expressions without a
#'   node of their own become input nodes with the identity function (as
#'   BoolNet does when reading files); if `FALSE` (default) they are an error.
#' @return An object of class `pbn`: a list with `nodes` (names), `functions`
#'   (per node, a list of functions, each a list of `inputs`, `words` (the
#'   truth table packed 16 rows per integer, row `j` in bit `j %% 16` of
#'   word `j %/% 16`) and `expression`), `probabilities` (per node),
#'   `perturbable` and `p` (a perturbation read from a file, else `NULL`).
#' @seealso [readPBN()], [pbnSteadyState()], [pbnSimulate()]
#' @examples
#' net <- pbn(list(
#'   A = c("B & C" = 0.6, "!B" = 0.4),
#'   B = "A | C",
#'   C = list(inputs = "A", table = c(1, 0))
#' ))
#' net
#' summary(net)
#' @export
pbn <- function(nodes, perturbable = TRUE, identityForMissing = FALSE) {
  if (!is.list(nodes) || length(nodes) == 0L || is.null(names(nodes)) ||
      any(!nzchar(names(nodes))) || anyNA(names(nodes)))
    stop_input("`nodes` must be a non-empty list named by node", call = NULL)
  nm <- names(nodes)
  if (anyDuplicated(nm))
    stop_input("`nodes` names a node twice: ", nm[anyDuplicated(nm)], call = NULL)
  for (v in nm) pbn_check_node_name(v, "`nodes`")
  funs <- vector("list", length(nm))
  probs <- vector("list", length(nm))
  for (i in seq_along(nm)) {
    where <- paste0("`nodes$", nm[[i]], "`")
    spec <- pbn_node_spec(nodes[[i]], where)
    funs[[i]] <- spec$functions
    probs[[i]] <- spec$probabilities
  }
  names(funs) <- names(probs) <- nm
  pbn_build(nm, funs, probs, perturbable, identityForMissing, where = "`nodes`")
}

# One node's element of pbn(nodes) -> list(functions, probabilities).
pbn_node_spec <- function(x, where) {
  is_table <- function(z) is.list(z) && !is.null(z$table)
  if (is.character(x)) {
    if (!length(x) || anyNA(x) || any(!nzchar(trimws(x))))
      stop_input(where, " must be a Boolean expression, not ", arg_label(x), call = NULL)
    if (length(x) != 1L && is.null(names(x)))
      stop_input(where, ": several expressions need probabilities (a list with `functions` and `probabilities`)", call = NULL)
    return(list(functions = lapply(x, pbn_expr_function, where = where), probabilities = rep(1 / length(x), length(x))))
  }
  if (is.numeric(x) && !is.null(names(x))) {
    if (anyNA(names(x)) || any(!nzchar(trimws(names(x)))))
      stop_input(where, ": every expression must be a non-empty name, not NA or \"\"", call = NULL)
    return(list(functions = lapply(names(x), pbn_expr_function, where = where), probabilities = unname(as.numeric(x))))
  }
  if (is_table(x)) return(list(functions = list(pbn_table_function(x, where)), probabilities = 1))
  if (is.list(x) && !is.null(x$functions)) {
    f <- x$functions
    fl <- if (is.character(f)) lapply(f, pbn_expr_function, where = where)
          else if (is.list(f)) lapply(f, function(z) if (is.character(z)) pbn_expr_function(z, where) else pbn_table_function(z, where))
          else stop_input(where, ": `functions` must be expressions or truth tables", call = NULL)
    pr <- x$probabilities
    if (is.null(pr)) {
      if (length(fl) != 1L) stop_input(where, ": `probabilities` missing", call = NULL)
      pr <- 1
    }
    return(list(functions = fl, probabilities = pr))
  }
  stop_input(where, " must be an expression, a named numeric vector of expressions, ",
             "a truth table or a list with `functions` and `probabilities`", call = NULL)
}

pbn_table_function <- function(x, where) {
  if (!is.list(x) || is.null(x$table))
    stop_input(where, ": a truth table is a list with `inputs` and `table`", call = NULL)
  inputs <- if (is.null(x$inputs)) character() else as.character(x$inputs)
  tab <- x$table
  if (!(is.logical(tab) || is.numeric(tab)) || anyNA(tab) || (is.numeric(tab) && any(!tab %in% c(0, 1))))
    stop_input(where, ": `table` must be logical or 0/1 without NA", call = NULL)
  if (length(inputs) > pbn_max_inputs)
    stop_input(where, ": a function may have at most ", pbn_max_inputs, " inputs, not ", length(inputs), call = NULL)
  if (anyDuplicated(inputs)) stop_input(where, ": input '", inputs[anyDuplicated(inputs)], "' given twice", call = NULL)
  for (v in inputs) pbn_check_node_name(v, where)
  if (length(tab) != 2^length(inputs))
    stop_input(where, ": `table` has ", length(tab), " entries, but ", length(inputs),
               " inputs need ", 2^length(inputs), call = NULL)
  tab <- as.logical(tab)
  list(inputs = inputs, words = pbn_pack16(tab), expression = pbn_table_expression(inputs, tab))
}

# Checks and completes a network: input names, probabilities, identity
# nodes for rule-less inputs, perturbable flags.
pbn_build <- function(nm, funs, probs, perturbable = TRUE, identityForMissing = FALSE,
                      where = "`nodes`", p = NULL) {
  used <- unique(unlist(lapply(funs, function(fl) unlist(lapply(fl, `[[`, "inputs")))))
  missing <- setdiff(used, nm)
  if (length(missing)) {
    if (!identityForMissing)
      stop_input(where, ": unknown node name(s) in functions: ", paste(missing, collapse = ", "), call = NULL)
    for (v in missing) {
      funs[[v]] <- list(list(inputs = v, words = 2L, expression = v))
      probs[[v]] <- 1
    }
    nm <- c(nm, missing)
  }
  for (i in seq_along(nm)) {
    pr <- probs[[i]]
    if (!is.numeric(pr) || length(pr) != length(funs[[i]]) || anyNA(pr) || any(pr < 0))
      stop_input(where, ": the probabilities of node '", nm[[i]], "' must be ",
                 length(funs[[i]]), " non-negative number(s)", call = NULL)
    if (abs(sum(pr) - 1) > 1e-6)
      stop_input(where, ": the probabilities of node '", nm[[i]], "' sum to ",
                 format(sum(pr), digits = 10), ", not 1", call = NULL)
    probs[[i]] <- pr / sum(pr)
  }
  if (is.logical(perturbable) && !is.null(names(perturbable))) {
    pn <- names(perturbable)
    if (anyNA(pn) || any(!nzchar(pn))) stop_input("`perturbable` names some nodes and not others: name each or none", call = NULL)
    # a node given twice (c(A = TRUE, A = FALSE)) contradicts itself
    if (anyDuplicated(pn)) stop_input("`perturbable` names node '", pn[anyDuplicated(pn)], "' more than once", call = NULL)
    unk <- setdiff(pn, nm)
    if (length(unk)) stop_input("`perturbable` names unknown node(s): ", paste(unk, collapse = ", "), call = NULL)
    pf <- rep(TRUE, length(nm)); names(pf) <- nm
    pf[names(perturbable)] <- perturbable
    perturbable <- pf
  }
  if (!is.logical(perturbable) || anyNA(perturbable) || !(length(perturbable) %in% c(1L, length(nm))))
    stop_input("`perturbable` must be TRUE/FALSE, one per node or named by node", call = NULL)
  perturbable <- rep_len(perturbable, length(nm))
  names(perturbable) <- nm
  structure(list(nodes = nm, functions = funs[nm], probabilities = probs[nm],
                 perturbable = perturbable, p = p),
            class = "pbn")
}

# Checks a pbn object as a method receives it (users edit the list by hand):
# unique valid node names, a non-empty list of functions for every node,
# inputs among the nodes, truth tables of 2^k 16-bit words' rows, selection
# probabilities >= 0 summing to 1, one TRUE/FALSE perturbable flag per node.
pbn_validate <- function(net, arg = "pbn") {
  bad <- function(...) stop_input("`", arg, "` is not a valid pbn object: ", ..., call = NULL)
  nm <- net$nodes
  if (!is.character(nm) || !length(nm) || anyNA(nm) || any(!nzchar(nm))) bad("`nodes` must be node names")
  if (anyDuplicated(nm)) bad("node '", nm[anyDuplicated(nm)], "' appears twice in `nodes`")
  n <- length(nm)
  funs <- net$functions; probs <- net$probabilities; pert <- net$perturbable
  if (!is.list(funs) || length(funs) != n || (!is.null(names(funs)) && !identical(names(funs), nm)))
    bad("`functions` must be a list with one element per node, in the order of `nodes`")
  if (!is.list(probs) || length(probs) != n) bad("`probabilities` must be a list with one element per node")
  if (!is.logical(pert) || length(pert) != n || anyNA(pert))
    bad("`perturbable` must be TRUE/FALSE for each of the ", n, " nodes, without NA")
  # inputs against the nodes once (hashing the names per function is slow at 10^4 nodes)
  ins <- unlist(lapply(funs, function(fl) if (is.list(fl)) lapply(fl, function(f) if (is.list(f)) f$inputs)))
  all_known <- (is.character(ins) || is.null(ins)) && !anyNA(match(ins, nm))
  for (i in seq_len(n)) {
    fl <- funs[[i]]
    node <- paste0("node '", nm[[i]], "'")
    if (!is.list(fl) || !length(fl)) bad(node, " has no function")
    for (f in fl) {
      if (!is.list(f)) bad(node, ": a function must be a list of `inputs` and `words`, not ", arg_label(f))
      inp <- f$inputs
      if (!is.character(inp) || anyNA(inp) || (!all_known && any(!inp %in% nm)))
        bad(node, ": function inputs ", arg_label(inp), " are not all nodes")
      k <- length(inp)
      if (k > pbn_max_inputs) bad(node, ": a function has ", k, " inputs, at most ", pbn_max_inputs)
      w <- f$words
      if (!is.integer(w) || length(w) != max(1, 2^k %/% 16) || anyNA(w) || any(w < 0L | w > 65535L))
        bad(node, ": a truth table over ", k, " input(s) must be ", max(1, 2^k %/% 16),
            " integer word(s) in [0, 65535]")
    }
    pr <- probs[[i]]
    if (!is.numeric(pr) || length(pr) != length(fl) || anyNA(pr) || any(!is.finite(pr)) || any(pr < 0) ||
        abs(sum(pr) - 1) > 1e-6)
      bad(node, ": `probabilities` must be ", length(fl), " number(s) >= 0 summing to 1, not ", arg_label(pr))
  }
  invisible(net)
}

#' @rdname pbn
#' @param x,object A `pbn` object.
#' @param ... Unused.
#' @export
print.pbn <- function(x, ...) {
  nf <- lengths(x$functions)
  cat(sprintf("<pbn> %d node(s), %d function(s)%s\n", length(x$nodes), sum(nf),
              if (!is.null(x$p)) sprintf(", perturbation %g (from the file)", x$p) else ""))
  show <- utils::head(seq_along(x$nodes), 20L)
  for (i in show) {
    f <- x$functions[[i]]
    e <- vapply(f, `[[`, "", "expression")
    pr <- x$probabilities[[i]]
    txt <- if (length(f) == 1L) e else paste0(sprintf("%s (%.3g)", e, pr), collapse = "; ")
    cat(sprintf("  %s%s = %s\n", x$nodes[[i]], if (x$perturbable[[i]]) "" else " [fixed]", txt))
  }
  if (length(x$nodes) > 20L) cat(sprintf("  ... and %d more node(s)\n", length(x$nodes) - 20L))
  invisible(x)
}

#' @rdname pbn
#' @export
summary.pbn <- function(object, ...) {
  nf <- lengths(object$functions)
  k <- unlist(lapply(object$functions, function(fl) vapply(fl, function(f) length(f$inputs), 0L)))
  out <- list(nodes = length(object$nodes), functions = sum(nf),
              multiFunctionNodes = sum(nf > 1L), maxInputs = max(c(0L, k)),
              density = sum(k) / length(object$nodes),
              perturbable = sum(object$perturbable))
  class(out) <- "summary.pbn"
  out
}

#' @export
print.summary.pbn <- function(x, ...) {
  cat(sprintf("PBN: %d nodes (%d perturbable), %d functions, %d node(s) with several functions\n",
              x$nodes, x$perturbable, x$functions, x$multiFunctionNodes))
  cat(sprintf("  density (inputs per node, over all functions) %.3g, largest in-degree %d\n",
              x$density, x$maxInputs))
  invisible(x)
}

# ---- files ----------------------------------------------------------------

#' Read a probabilistic Boolean network from a file
#'
#' @param file Path of the file.
#' @param format `"bnet"` (`targets, factors` lines as in PyBoolNet and the
#'   biodivine models; an optional third column gives a probability),
#'   `"boolnet"` (BoolNet's text format, `targets, factors[, probabilities]`)
#'   or `"pbn"` (ASSA-PBN's format with `node ... endNode` blocks).  Default:
#'   from the file name's extension (`.pbn` is ASSA-PBN, else `"bnet"`).
#' @details Several lines for one target give that node several functions;
#'   without probabilities they are equally likely.  Names used only as
#'   inputs become input nodes with the identity function, as in BoolNet.
#'   In `"pbn"` files the probabilities of a node are normalised, nodes of
#'   the `npNode` block are not perturbable, and the `perturbation=` value is
#'   kept as the object's `p` (for information; [pbnSteadyState()] takes its
#'   own `p`).
#' @return A [pbn] object.  Syntax errors are input errors that give the
#'   file and line.
#' @examples
#' f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
#' readPBN(f)
#' # the same network in ASSA-PBN's format
#' g <- system.file("extdata", "pbn-example.pbn", package = "sysbioGPU")
#' identical(readPBN(g), readPBN(f))
#' @export
readPBN <- function(file, format = c("auto", "bnet", "boolnet", "pbn")) {
  if (!is.character(file) || length(file) != 1L || !file.exists(file))
    stop_input("`file` must be the path of an existing file, not ", arg_label(file), call = NULL)
  format <- check_choice(format, c("auto", "bnet", "boolnet", "pbn"), "format")
  if (format == "auto") format <- if (grepl("\\.pbn$", file, ignore.case = TRUE)) "pbn" else "bnet"
  if (dir.exists(file)) stop_input("`file` must be a file, not the folder ", file, call = NULL)
  check_gzip(file) # R/gsea-io.R
  lines <- readLines(file, warn = FALSE, encoding = "UTF-8")
  bad <- which(!validUTF8(lines))
  if (length(bad))
    stop_input(sprintf("%s, line %d", basename(file), bad[[1L]]),
               ": invalid UTF-8 (a binary file, or another encoding?)", call = NULL)
  if (format == "pbn") pbn_read_assa(lines, basename(file)) else pbn_read_bnet(lines, basename(file))
}

pbn_read_bnet <- function(lines, fname) {
  # a slot a line, filled as read (vectors grown a rule at a time, and rules
  # grouped by searching all targets for each, made a network of n nodes
  # take time in n^2)
  targets <- character(length(lines)); exprs <- character(length(lines))
  probs <- rep(NA_real_, length(lines)); lineno <- integer(length(lines)); nr <- 0L
  # every line's fields at once (a regex call a line is slow)
  text <- sub("#.*$", "", lines)
  blank <- !nzchar(trimws(text))
  fields <- strsplit(text, ",", fixed = TRUE)
  fields <- split(trimws(unlist(fields)), factor(rep(seq_along(fields), lengths(fields)), levels = seq_along(fields)))
  for (i in seq_along(lines)) {
    if (blank[[i]]) next
    parts <- fields[[i]]
    if (tolower(parts[[1L]]) == "targets") next
    where <- sprintf("%s, line %d", fname, i)
    if (length(parts) < 2L || length(parts) > 3L || !nzchar(parts[[2L]]))
      stop_input(where, ": expected 'target, factors' or 'target, factors, probability'", call = NULL)
    pbn_check_node_name(parts[[1L]], where)
    pr <- NA_real_
    if (length(parts) == 3L) {
      pr <- suppressWarnings(as.numeric(parts[[3L]]))
      if (is.na(pr) || pr < 0 || pr > 1) stop_input(where, ": bad probability '", parts[[3L]], "'", call = NULL)
    }
    pbn_parse_expr(parts[[2L]], where)  # syntax check with the line number
    nr <- nr + 1L
    targets[nr] <- parts[[1L]]; exprs[nr] <- parts[[2L]]; probs[nr] <- pr; lineno[nr] <- i
  }
  if (!nr) stop_input(fname, ": no rules found", call = NULL)
  targets <- targets[seq_len(nr)]
  nm <- unique(targets)
  rules <- split(seq_len(nr), factor(targets, levels = nm))   # each target's rules, in file order
  built <- Map(function(j, t) {
    f <- lapply(j, function(jj) pbn_expr_function(exprs[[jj]], sprintf("%s, line %d", fname, lineno[[jj]])))
    pr <- probs[j]
    if (all(is.na(pr))) pr <- rep(1 / length(j), length(j))
    else if (anyNA(pr)) stop_input(sprintf("%s, line %d", fname, lineno[j[is.na(pr)][1L]]),
                                   ": probability missing where other rules of '", t, "' give one", call = NULL)
    list(funs = f, probs = pr)
  }, rules, nm)
  pbn_build(nm, lapply(built, `[[`, "funs"), lapply(built, `[[`, "probs"), TRUE, identityForMissing = TRUE,
            where = fname)
}

pbn_read_assa <- function(lines, fname) {
  # each node's functions and probabilities by its position k, the names
  # seen in an environment (a list searched and grown by name at each line
  # made a network of n nodes take time in n^2)
  funs <- list(); pl <- list(); nodes <- character(); seen <- new.env(hash = TRUE, parent = emptyenv())
  np <- character(); p <- NULL
  state <- "top"; k <- 0L
  # all lines at once, what each would give as a node's line (probability
  # : expression) and as a node's header: a regular expression, trimws()
  # or as.numeric() a line took most of the time of a large file
  text <- trimws(sub("//.*$", "", sub("#.*$", "", lines)))
  where_at <- sprintf("%s, line %d", fname, seq_along(lines))
  colon <- regexpr(":", text, fixed = TRUE)
  is_fun <- colon > 1L & colon < nchar(text)
  pr_text <- trimws(substr(text, 1L, colon - 1L))
  pr_all <- suppressWarnings(as.numeric(pr_text))
  expr_text <- trimws(substr(text, colon + 1L, nchar(text)))
  is_header <- grepl("^node[[:space:]]+", text)
  header <- trimws(sub("^node[[:space:]]+", "", text))
  for (i in seq_along(lines)) {
    l <- text[[i]]
    if (!nzchar(l)) next
    where <- where_at[[i]]
    if (state == "names") { if (l == "endNodeNames") state <- "top"; next }
    if (state == "np") {
      if (l == "endNpNode") state <- "top" else np <- c(np, strsplit(l, "[[:space:],]+")[[1L]])
      next
    }
    if (state == "node") {
      if (l == "endNode") { state <- "top"; next }
      if (!is_fun[[i]]) stop_input(where, ": expected 'probability : expression' or 'endNode'", call = NULL)
      pr <- pr_all[[i]]
      if (is.na(pr) || pr < 0) stop_input(where, ": bad probability '", pr_text[[i]], "'", call = NULL)
      funs[[k]][[length(funs[[k]]) + 1L]] <- pbn_expr_function(expr_text[[i]], where)
      pl[[k]] <- c(pl[[k]], pr)
      next
    }
    if (l == "nodeNames") { state <- "names"; next }
    if (l == "npNode") { state <- "np"; next }
    if (is_header[[i]]) {
      cur <- header[[i]]
      pbn_check_node_name(cur, where)
      if (!is.null(seen[[cur]])) stop_input(where, ": node '", cur, "' defined twice", call = NULL)
      assign(cur, TRUE, envir = seen)
      k <- k + 1L; nodes[k] <- cur; funs[k] <- list(list()); pl[[k]] <- numeric(); state <- "node"
      next
    }
    kv <- regmatches(l, regexec("^([A-Za-z]+)[[:space:]]*=[[:space:]]*(.*)$", l))[[1L]]
    if (length(kv) == 3L) {
      if (kv[[2L]] == "perturbation") {
        p <- suppressWarnings(as.numeric(kv[[3L]]))
        if (is.na(p) || p < 0 || p >= 1) stop_input(where, ": bad perturbation '", kv[[3L]], "'", call = NULL)
      }
      next
    }
    stop_input(where, ": unexpected '", l, "'", call = NULL)
  }
  if (state != "top") stop_input(fname, ": file ends inside a block (missing endNode/endNodeNames/endNpNode)", call = NULL)
  if (!k) stop_input(fname, ": no nodes found", call = NULL)
  for (j in seq_len(k)) {
    if (!length(funs[[j]])) stop_input(fname, ": node '", nodes[j], "' has no function", call = NULL)
    if (sum(pl[[j]]) <= 0) stop_input(fname, ": the probabilities of node '", nodes[j], "' are all 0", call = NULL)
    pl[[j]] <- pl[[j]] / sum(pl[[j]])
  }
  names(funs) <- nodes; names(pl) <- nodes
  net <- pbn_build(nodes, funs, pl, TRUE, identityForMissing = TRUE, where = fname, p = p)
  unk <- setdiff(np, net$nodes)
  if (length(unk)) stop_input(fname, ": npNode names unknown node(s): ", paste(unk, collapse = ", "), call = NULL)
  net$perturbable[np] <- FALSE
  net
}

# ---- BoolNet --------------------------------------------------------------

#' Convert a BoolNet network to a PBN
#'
#' @param x A BoolNet `BooleanNetwork` or `ProbabilisticBooleanNetwork`
#'   (package BoolNet), or a `pbn` (returned as is).
#' @param ... Unused.
#' @details BoolNet's truth tables take the first input as the most
#'   significant bit, as [pbn()] does.  Genes that BoolNet fixes (knock-outs
#'   and over-expressions) become constant, non-perturbable nodes.
#' @return A [pbn] object.
#' @examplesIf requireNamespace("BoolNet", quietly = TRUE)
#' data(examplePBN, package = "BoolNet")
#' as.pbn(examplePBN)
#' @export
as.pbn <- function(x, ...) UseMethod("as.pbn")

#' @rdname as.pbn
#' @export
as.pbn.pbn <- function(x, ...) x

#' @rdname as.pbn
#' @export
as.pbn.default <- function(x, ...) {
  stop_input("`x` must be a BoolNet BooleanNetwork or ProbabilisticBooleanNetwork, not an object of class ",
             paste(class(x), collapse = "/"), call = NULL)
}

pbn_from_boolnet_fun <- function(input, func, genes, gene) {
  where <- paste0("`x`: the function of gene '", gene, "'")
  if (!is.numeric(input) || !length(input) || anyNA(input) ||
      (!identical(as.numeric(input), 0) && any(!input %in% seq_along(genes))))
    stop_input(where, " has input indices ", arg_label(input), ", not among the ", length(genes), " genes", call = NULL)
  if (!(is.numeric(func) || is.logical(func)) || anyNA(func) || any(!func %in% c(0, 1)))
    stop_input(where, ": the truth table must hold 0/1 without NA", call = NULL)
  k <- if (identical(as.numeric(input), 0)) 0L else length(input)
  if (length(func) != 2^k)
    stop_input(where, ": the truth table has ", length(func), " entries, but ", k,
               " input(s) need ", 2^k, call = NULL)
  if (k == 0L) {
    return(list(inputs = character(), words = as.integer(func[[1L]] == 1), expression = if (func[[1L]] == 1) "1" else "0"))
  }
  inputs <- genes[input]
  tab <- as.logical(func)
  list(inputs = inputs, words = pbn_pack16(tab), expression = pbn_table_expression(inputs, tab))
}

#' @rdname as.pbn
#' @export
as.pbn.BooleanNetwork <- function(x, ...) {
  genes <- x$genes
  funs <- Map(function(it, g) list(pbn_from_boolnet_fun(it$input, it$func, genes, g)), x$interactions, genes)
  pl <- lapply(funs, function(f) 1)
  pbn_boolnet_fixed(genes, funs, pl, x$fixed)
}

#' @rdname as.pbn
#' @export
as.pbn.ProbabilisticBooleanNetwork <- function(x, ...) {
  genes <- x$genes
  funs <- Map(function(fl, g) lapply(fl, function(it) {
    f <- pbn_from_boolnet_fun(it$input, it$func, genes, g)
    if (!is.null(it$expression)) f$expression <- it$expression
    f
  }), x$interactions, genes)
  pl <- lapply(x$interactions, function(fl) vapply(fl, function(it) it$probability, 0))
  pbn_boolnet_fixed(genes, funs, pl, x$fixed)
}

pbn_boolnet_fixed <- function(genes, funs, pl, fixed) {
  names(funs) <- names(pl) <- genes
  pert <- rep(TRUE, length(genes))
  if (!is.null(fixed)) {
    for (i in which(fixed >= 0)) {
      funs[[i]] <- list(list(inputs = character(), words = as.integer(fixed[[i]] == 1), expression = as.character(fixed[[i]])))
      pl[[i]] <- 1
      pert[[i]] <- FALSE
    }
  }
  pbn_build(genes, funs, pl, pert, identityForMissing = FALSE, where = "`x`")
}
