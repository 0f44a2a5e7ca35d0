# Networks for parCosnet(): coercion of W (sparse, dense or an edge list)
# to one symmetric dgCMatrix, and readNetwork() for edge-list files.

# Edges (from, to, weight) to a symmetric dgCMatrix.  An unordered pair
# listed more than once (for instance in both directions, as STRING files
# do) is stored once; its weights must agree.
edges_to_matrix <- function(from, to, weight, nodes = NULL, what = "edge list",
                            lines = NULL) {
  if (is.factor(from)) from <- as.character(from)
  if (is.factor(to)) to <- as.character(to)
  if (is.null(nodes)) {
    nodes <- if (is.character(from) || is.character(to)) unique(c(as.character(from), as.character(to)))
             else NULL
    if (!is.null(nodes) && (anyNA(nodes) || any(!nzchar(nodes)))) {
      stop_input("the ", what, " names a node NA or \"\" (row ",
                 which(is.na(from) | is.na(to) | !nzchar(from) | !nzchar(to))[1], ")")
    }
  }
  if (is.null(nodes)) {
    if (!is.numeric(from) || !is.numeric(to) || anyNA(from) || anyNA(to) ||
        any(from < 1 | to < 1 | from != round(from) | to != round(to))) {
      stop_input("the ", what, " must name nodes by character names or by whole numbers >= 1")
    }
    n <- max(c(from, to, 0))
    i <- as.integer(from); j <- as.integer(to)
  } else {
    n <- length(nodes)
    i <- match(as.character(from), nodes); j <- match(as.character(to), nodes)
    if (anyNA(i) || anyNA(j)) stop_input("the ", what, " has missing node names")
  }
  if (!is.numeric(weight) || anyNA(weight) || any(!is.finite(weight)) || any(weight < 0)) {
    bad <- which(!is.finite(weight) | is.na(weight) | weight < 0)[1]
    where <- if (!is.null(lines)) paste0(" (line ", lines[bad], ")") else paste0(" (row ", bad, ")")
    stop_input("the weights of the ", what, " must be finite and >= 0", where)
  }
  keep <- i != j & weight > 0
  i <- i[keep]; j <- j[keep]; weight <- as.double(weight[keep])
  a <- pmin(i, j); b <- pmax(i, j)
  key <- (as.double(a) - 1) * n + b
  o <- order(key)
  a <- a[o]; b <- b[o]; weight <- weight[o]; key <- key[o]
  dup <- c(FALSE, key[-1] == key[-length(key)])
  if (any(dup)) {
    same <- weight[dup] == weight[which(dup) - 1L]
    if (!all(same)) {
      k <- which(dup)[!same][1]
      nm <- if (is.null(nodes)) c(a[k], b[k]) else nodes[c(a[k], b[k])]
      stop_input("the ", what, " lists the edge ", nm[1], " - ", nm[2],
                 " more than once with different weights (", weight[k - 1L], " and ", weight[k], ")")
    }
    a <- a[!dup]; b <- b[!dup]; weight <- weight[!dup]
  }
  dn <- if (is.null(nodes)) NULL else list(nodes, nodes)
  W <- Matrix::sparseMatrix(i = c(a, b), j = c(b, a), x = c(weight, weight),
                            dims = c(n, n), dimnames = dn)
  methods::as(W, "generalMatrix")
}

# validObject(W), with the error of as_cosnet_network().  A dgCMatrix, the
# form of large networks, is validated without its entries (Matrix reads
# all of them, single-threaded: seconds on a network of a billion): Matrix
# checks the rest (Dim, Dimnames, the length of p) on the same object with
# no entries, and ffi_cosnet_check() the entries (row indices in range and
# increasing within a column, length(x)) in C, in its pass over them.
check_valid_matrix <- function(W, arg) {
  cl <- class(W)
  entries_in_c <- length(cl) == 1L && cl == "dgCMatrix" && identical(attr(cl, "package"), "Matrix") &&
    # (a slot removed by hand: W itself, whose validation says so)
    all(vapply(c("p", "i", "x"), function(s) methods::.hasSlot(W, s), NA))
  V <- W
  if (entries_in_c) {
    # slot by slot: new slots in a shallow copy, W's vectors untouched
    V@p <- integer(length(W@p))
    V@i <- integer(0)
    V@x <- double(0)
  }
  ok <- tryCatch(methods::validObject(V, complete = TRUE), error = function(e) conditionMessage(e))
  if (is.character(ok)) stop_input("`", arg, "` is not a valid ", cl[1], ": ", ok)
}

# Largest weighted degree parCosnet() accepts (see as_cosnet_network()).
cosnet_max_degree <- 1e300

# W in any accepted form to a symmetric dgCMatrix with zero diagonal,
# non-negative finite weights and no stored zeros (checked, never densified
# when sparse).
as_cosnet_network <- function(W, normalize = FALSE, arg = "W", threads = NULL) {
  check_threads <- resolveBackend("cpu", threads)$threads
  if (is.data.frame(W)) {
    if (ncol(W) < 2L) stop_input("`", arg, "` as a data.frame needs columns from, to (and weight)")
    cols <- if (all(c("from", "to") %in% names(W))) c("from", "to") else names(W)[c(1L, 2L)]
    wcol <- if ("weight" %in% names(W)) "weight" else if (ncol(W) >= 3L) setdiff(names(W), cols)[1] else NULL
    wt <- if (is.null(wcol)) rep(1, nrow(W)) else W[[wcol]]
    M <- edges_to_matrix(W[[cols[1]]], W[[cols[2]]], wt, what = paste0("edge data.frame `", arg, "`"))
  } else if (is.matrix(W) || methods::is(W, "Matrix")) {
    # slots edited by hand crash Matrix's own coercions: validate first
    if (isS4(W)) check_valid_matrix(W, arg)
    if (is.matrix(W) && !is.numeric(W) && !is.logical(W)) {
      stop_input("`", arg, "` must be numeric, not a ", typeof(W), " matrix")
    }
    if (nrow(W) != ncol(W)) {
      stop_input("`", arg, "` must be square, not ", nrow(W), " x ", ncol(W))
    }
    M <- methods::as(methods::as(W, "CsparseMatrix"), "generalMatrix")
    if (!methods::is(M, "dgCMatrix")) M <- methods::as(M, "dMatrix")
    if (!methods::is(M, "dgCMatrix")) stop_input("`", arg, "` cannot be turned into a dgCMatrix")
  } else {
    stop_input("`", arg, "` must be a Matrix (dgCMatrix, dsCMatrix), a numeric matrix or an ",
               "edge data.frame (from, to, weight), not ", describe_value(W))
  }
  if (nrow(M) < 1L) stop_input("`", arg, "` has no nodes")
  # In C, threaded, no copy of W (a large network is checked in place): one
  # streaming pass (row indices, values, diagonal, symmetry by hashes of
  # the mirrored entries, and the weighted degrees), and the exact
  # entry-by-entry check only for a W that this pass does not clear, which
  # then names the first bad node.
  # Symmetric up to rounding (as left by, say, D^-1/2 W D^-1/2 computed in
  # two products) is accepted and made exact by averaging the two halves.
  chk <- .Call(ffi_cosnet_check, M@p, M@i, M@x, 64 * .Machine$double.eps, check_threads)
  d <- chk$degree # NULL unless W passed as it is
  at <- if (!is.null(colnames(M))) paste0(" (node ", colnames(M)[chk$node], ")") else paste0(" (node ", chk$node, ")")
  switch(chk$code + 1L,
    NULL,
    stop_input("`", arg, "` has NA or infinite weights", at),
    stop_input("`", arg, "` has negative weights", at),
    stop_input("`", arg, "` must have a zero diagonal (self-loops are not allowed)", at),
    stop_input("`", arg, "` must be symmetric (an undirected network)", at),
    {
      M <- Matrix::drop0(M)
      tM <- Matrix::t(M)
      if (!identical(M@i, tM@i)) stop_input("`", arg, "` must be symmetric (an undirected network)")
      M@x <- (M@x + tM@x) / 2
      rm(tM)
    },
    {
      M <- Matrix::drop0(M)
      chk <- .Call(ffi_cosnet_check, M@p, M@i, M@x, 64 * .Machine$double.eps, check_threads)
      if (chk$code == 4L) stop_input("`", arg, "` must be symmetric (an undirected network)")
      if (chk$code == 5L) {
        tM <- Matrix::t(M)
        M@x <- (M@x + tM@x) / 2
        rm(tM)
      }
    })
  M <- methods::as(M, "generalMatrix")
  rn <- rownames(M); cn <- colnames(M)
  if (!is.null(rn) && !is.null(cn) && !identical(rn, cn)) {
    stop_input("the row and column names of `", arg, "` differ")
  }
  if (is.null(rn) && !is.null(cn)) rownames(M) <- cn
  if (!is.null(rn) && is.null(cn)) colnames(M) <- rn
  # node names are how labels find their nodes: NA, "" or a name given
  # twice would match labels to the wrong node (or none)
  nn <- rownames(M)
  if (!is.null(nn)) {
    if (anyNA(nn) || any(!nzchar(nn))) {
      stop_input("`", arg, "` names node ", which(is.na(nn) | !nzchar(nn))[1], " NA or \"\": ",
                 "every node needs a name (or leave `", arg, "` without dimnames)")
    }
    if (anyDuplicated(nn)) stop_input("`", arg, "` names two nodes '", nn[anyDuplicated(nn)], "'")
  }
  # Weighted degrees: finite weights whose sums overflow would turn the
  # learning step's points into Inf - Inf = NaN.  The learning step also
  # multiplies them by slopes up to tan(1.57) ~ 1256, hence the margin.
  if (is.null(d)) d <- Matrix::rowSums(M) # (W averaged or with zeros dropped)
  big <- which(!(d <= cosnet_max_degree))
  if (length(big)) {
    stop_input("the weighted degree (sum of the weights) of node ",
               if (is.null(rn)) big[1] else rownames(M)[big[1]], " of `", arg, "` is ",
               format(d[big[1]], digits = 3), ": the sums of the weights must stay below ",
               format(cosnet_max_degree), " (rescale `", arg, "`)")
  }
  if (normalize) {
    # in C, one pass into a new x slot: in R, the products and the column
    # and row indices took five temporary vectors as long as x
    M@x <- .Call(ffi_cosnet_normalize, M@p, M@i, M@x, as.double(d), check_threads)
  }
  M
}

#' Read a weighted network from an edge-list file
#'
#' Reads a STRING-style edge list, one edge per line as `a b weight`
#' (separated by spaces, tabs or commas), with or without a header line,
#' into a symmetric sparse matrix for [parCosnet()]. An edge listed in both
#' directions (as STRING files do) is stored once, not summed; its two
#' weights must agree. Self-loops and zero weights are dropped. Node names
#' must not be `NA` or empty; weights must be finite and >= 0; the file must
#' be UTF-8 text. A bad line gives an error naming the file and the line.
#'
#' @param file Path to the file (may be gzip-compressed; a gzip file cut
#'   short or damaged is an error).
#' @param header `NA` (the default) detects a header: the first line is one
#'   when its third field is not a number (`NaN`, `Inf` and `NA` count as
#'   numbers: such a first line is an edge with a bad weight). `TRUE` or
#'   `FALSE` forces it.
#' @return A symmetric `dgCMatrix` with the node names as dimnames, in order
#'   of first appearance.
#' @seealso [parCosnet()]
#' @examples
#' f <- tempfile(fileext = ".txt")
#' writeLines(c("protein1 protein2 combined_score", "a b 0.9", "b a 0.9",
#'              "b c 0.4"), f)
#' readNetwork(f)
#' @export
readNetwork <- function(file, header = NA) {
  if (!is.character(file) || length(file) != 1L || is.na(file)) {
    stop_input("`file` must be a single file path")
  }
  if (!file.exists(file)) stop_input("`file` does not exist: ", file)
  if (!is.logical(header) || length(header) != 1L) stop_input("`header` must be NA, TRUE or FALSE")
  lines <- read_lines(file) # valid UTF-8, CR stripped
  lineno <- seq_along(lines)
  keep <- nzchar(trimws(lines)) & !startsWith(trimws(lines), "#")
  lines <- lines[keep]; lineno <- lineno[keep]
  if (!length(lines)) stop_input("`file` has no edges: ", file)
  fields <- strsplit(trimws(lines), "[[:space:],]+")
  nf <- lengths(fields)
  # a number, NaN, Inf and NA included (a first edge with such a weight is
  # an edge with a bad weight, not a header)
  numeric_field <- function(x) !is.na(suppressWarnings(as.numeric(x))) | toupper(x) %in% c("NA", "NAN")
  if (is.na(header)) header <- nf[1] >= 3L && !numeric_field(fields[[1]][3])
  if (header) { fields <- fields[-1]; nf <- nf[-1]; lineno <- lineno[-1] }
  if (!length(fields)) stop_input("`file` has no edges: ", file)
  bad <- which(nf != 3L)
  if (length(bad)) {
    stop_input("line ", lineno[bad[1]], " of ", file, " must have 3 fields `a b weight`, not ",
               nf[bad[1]])
  }
  m <- matrix(unlist(fields, use.names = FALSE), ncol = 3L, byrow = TRUE)
  bad <- which(m[, c(1L, 2L)] %in% c("NA", "") | is.na(m[, c(1L, 2L)])) # (a matrix's indices, by column)
  if (length(bad)) {
    r <- (bad[1] - 1L) %% nrow(m) + 1L
    stop_file(file, lineno[r], "the node name '", m[bad[1]], "' is not allowed (NA or empty)")
  }
  w <- suppressWarnings(as.numeric(m[, 3]))
  bad <- which(!is.finite(w))
  if (length(bad)) {
    stop_file(file, lineno[bad[1]], "the weight '", gsea_clip(m[bad[1], 3]),
              "' is not a finite number")
  }
  edges_to_matrix(m[, 1], m[, 2], w, what = paste0("file ", file), lines = lineno)
}
