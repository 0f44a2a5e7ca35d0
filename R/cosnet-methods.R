# Reports of parCosnet() and cvParCosnet() results: as.data.frame() with
# one row per node and class (atomic columns, so write.csv() works) and
# the plot of the scores by known label around the learned threshold.

# From the engine's coding 1 / -1 / 0 of the labels, in one pass in C
# (in R, the comparisons and colSums() took a good part of a thousand-class
# run): `truth`, the known labels as a logical nodes x classes matrix (TRUE
# positive, FALSE negative, NA unknown, lab's dimnames), and per class the
# `positives`, `negatives` and `unlabelled` (doubles named by class, as
# colSums() would give them).
cosnet_label_summary <- function(lab, threads = NULL) {
  .Call(ffi_cosnet_label_summary, lab, resolveBackend("cpu", threads)$threads)
}

# One row per node and class, node varying fastest; `cols` are nodes x
# classes matrices (or NULL, left out), `nodes` and `classes` their names.
cosnet_long <- function(nodes, classes, cols) {
  cols <- cols[!vapply(cols, is.null, NA)]
  K <- length(classes)
  n <- length(nodes)
  data.frame(c(list(node = rep(nodes, K), class = rep(classes, each = n)),
               lapply(cols, function(m) as.vector(m))),
             stringsAsFactors = FALSE, check.names = FALSE)
}

cosnet_node_names <- function(x) {
  nm <- rownames(x$scores)
  if (is.null(nm)) as.character(seq_len(nrow(x$scores))) else nm
}

#' Convert a parCosnet or cvParCosnet result to a plain data frame
#'
#' One row per node and class (nodes varying fastest), every column atomic,
#' so that the table can be written with [utils::write.csv()] and read back
#' with [utils::read.csv()].
#'
#' @param x A [parCosnet()] or [cvParCosnet()] result.
#' @param row.names,optional Unused, for the generic.
#' @param ... Unused.
#' @return A `data.frame` with the columns `node` (the node's name, or its
#'   index as a string), `class`, `label` (the known label: `TRUE`,
#'   `FALSE`, or `NA` for an unlabelled node), `score` (the node's final
#'   field minus its threshold: positive means predicted positive) and
#'   `prediction` (logical); a parCosnet result adds `colour` (the node's
#'   colour in the dynamics) and leaves `score` and `prediction` `NA` on
#'   labelled nodes; a cvParCosnet result adds `fold` (the fold in which the
#'   node was predicted, 0 for an unlabelled node) and gives the
#'   out-of-fold score and prediction of every labelled node (`NA` for
#'   unlabelled ones). A parCosnet result computed before the labels were
#'   kept in it has no `label` column.
#' @seealso [plot.parCosnet()], [runInfo()] for how the result was computed.
#' @examples
#' set.seed(1)
#' n <- 200
#' W <- Matrix::rsparsematrix(n, n, density = 0.05, symmetric = TRUE,
#'                            rand.x = function(k) runif(k))
#' Matrix::diag(W) <- 0
#' y <- rep(0, n); y[1:20] <- 1; y[sample(n, 40)] <- NA
#' fit <- parCosnet(W, y, seed = 1, backend = "cpu", threads = 1)
#' df <- as.data.frame(fit)
#' head(df[!is.na(df$score), ])
#' write.csv(df, tempfile(fileext = ".csv"), row.names = FALSE)
#' @export
as.data.frame.parCosnet <- function(x, row.names = NULL, optional = FALSE, ...) {
  cosnet_long(cosnet_node_names(x), colnames(x$scores),
              list(label = x$labels, score = x$scores, prediction = x$predictions,
                   colour = matrix(x$colours, nrow(x$scores), ncol(x$scores))))
}

#' @rdname as.data.frame.parCosnet
#' @export
as.data.frame.cvParCosnet <- function(x, row.names = NULL, optional = FALSE, ...) {
  cosnet_long(cosnet_node_names(x), colnames(x$scores),
              list(label = x$labels, fold = x$folds, score = x$scores, prediction = x$predictions))
}

# The class `class` (a name or an index) of a result with classes `names`.
cosnet_pick_class <- function(class, names) {
  k <- if (is.character(class)) match(class, names) else class
  if (length(k) != 1L || is.na(k) || !is.numeric(k) || k < 1 || k > length(names) || k != round(k)) {
    stop_input("`class` must name or index one class of `x` (", length(names), " class(es)), not ",
               arg_label(class), call = NULL)
  }
  as.integer(k)
}

# Known labels over the nodes of x for plot.parCosnet(): a vector (named by
# node, or in node order) or a nodes x classes matrix, 1/0/NA or logical.
cosnet_plot_truth <- function(truth, x, k) {
  nodes <- rownames(x$scores)
  if (is.matrix(truth) || is.data.frame(truth)) {
    truth <- as.matrix(truth)
    cl <- colnames(x$scores)[k]
    j <- if (!is.null(colnames(truth)) && cl %in% colnames(truth)) cl else if (ncol(truth) == 1L) 1L else k
    if (is.numeric(j) && j > ncol(truth)) stop_input("`truth` has no column for class ", cl, call = NULL)
    truth <- stats::setNames(truth[, j], rownames(truth))
  }
  if (!(is.logical(truth) || is.numeric(truth)) || !all(truth %in% c(0, 1, NA))) {
    stop_input("`truth` must hold 1 / 0 / NA or TRUE / FALSE / NA", call = NULL)
  }
  if (!is.null(names(truth)) && !is.null(nodes)) {
    if (!all(names(truth) %in% nodes)) stop_input("names of `truth` must be nodes of the network", call = NULL)
    out <- rep(NA, length(nodes))
    out[match(names(truth), nodes)] <- as.logical(truth)
    return(out)
  }
  if (length(truth) != nrow(x$scores)) {
    stop_input("`truth` must name the nodes or give one value per node (", nrow(x$scores), "), not ",
               length(truth), " values", call = NULL)
  }
  as.logical(truth)
}

# Scores by known label: one jittered strip per group (positive, negative,
# unknown), the threshold (score 0) as a line, the learned line in the
# legend.  s: scores; lab: logical or NA per score.
cosnet_score_strips <- function(s, lab, main, threshold_note, ...) {
  grp <- factor(ifelse(is.na(lab), "unknown", ifelse(lab, "positive", "negative")),
                levels = c("positive", "negative", "unknown"))
  keep <- levels(grp)[table(grp) > 0]
  grp <- factor(grp, levels = keep)
  cols <- c(positive = "#D55E00", negative = "#0072B2", unknown = "grey45")[keep]
  op <- graphics::par(mar = c(4.5, 6, 3, 1) + 0.1)
  on.exit(graphics::par(op))
  lim <- range(c(s, 0), finite = TRUE)
  # room above the strips for the legend
  graphics::stripchart(s ~ grp, method = "jitter", jitter = 0.25, pch = 16, cex = 0.7,
                       col = grDevices::adjustcolor(cols, 0.6), xlim = lim, las = 1,
                       ylim = c(0.6, length(keep) + 0.9),
                       xlab = "score (field minus node threshold)", ylab = "", main = main, ...)
  graphics::abline(v = 0, lty = 2, lwd = 1.5)
  n <- table(grp)
  pos <- vapply(split(s > 0, grp), function(v) sum(v, na.rm = TRUE), 0)
  graphics::legend("topleft", bg = "white", cex = 0.8, pch = c(rep(16, length(keep)), NA),
                   lty = c(rep(NA, length(keep)), 2), col = c(cols, "black"),
                   legend = c(sprintf("%s: %d of %d predicted positive", keep, pos[keep], n[keep]),
                              threshold_note))
}

#' Plot the scores of a parCosnet or cvParCosnet result by known label
#'
#' `plot(<parCosnet>)` draws the scores of the unlabelled nodes of one
#' class: one jittered strip per known label (positive, negative, unknown)
#' and the learned threshold, score 0 (a node is predicted positive when its
#' field exceeds its threshold, `c` minus the pull of its labelled
#' neighbours). The labels of the unlabelled nodes are unknown to the
#' method: give them as `truth` (for example held-out annotations) to see
#' how the scores separate them; without `truth` all scores form one strip.
#' `plot(<cvParCosnet>, type = "scores")` draws the out-of-fold scores of
#' the labelled nodes by their known label the same way (each fold has its
#' own learned line: the legend gives the mean angle and intercept);
#' `type = "pr"` (the default) the precision-recall curves
#' ([plot.cvParCosnet()]).
#'
#' @param x A [parCosnet()] result.
#' @param class The class to draw: a name or an index (default the first).
#' @param truth Optional known labels of the nodes: a vector 1 / 0 / `NA`
#'   (or logical) named by node or in node order, or a nodes x classes
#'   matrix with the classes as column names.
#' @param main Plot title (default names the class).
#' @param ... Passed to [graphics::stripchart()].
#' @return `x`, invisibly.
#' @seealso [as.data.frame.parCosnet()]
#' @examples
#' set.seed(1)
#' n <- 300
#' W <- Matrix::rsparsematrix(n, n, density = 0.05, symmetric = TRUE,
#'                            rand.x = function(k) runif(k))
#' Matrix::diag(W) <- 0
#' truth <- rep(0, n); truth[1:30] <- 1
#' y <- truth; y[sample(n, 100)] <- NA
#' fit <- parCosnet(W, y, seed = 1, backend = "cpu", threads = 1)
#' plot(fit, truth = truth)
#' @export
plot.parCosnet <- function(x, class = 1L, truth = NULL, main = NULL, ...) {
  k <- cosnet_pick_class(class, colnames(x$scores))
  u <- !is.na(x$scores[, k])
  lab <- if (is.null(truth)) rep(NA, sum(u)) else cosnet_plot_truth(truth, x, k)[u]
  cl <- x$classes[k, ]
  if (is.null(main)) main <- sprintf("parCosnet: scores of class %s", cl$class)
  cosnet_score_strips(x$scores[u, k], lab, main,
                      sprintf("threshold 0 (alpha %.3g, c %.3g)", cl$alpha, cl$c), ...)
  invisible(x)
}

#' Precision-recall curves or scores of a cross-validation
#'
#' `type = "pr"` (default) draws, for each chosen class, the
#' precision-recall curve of the pooled out-of-fold scores. `type =
#' "scores"` draws the out-of-fold scores of one class by known label, with
#' the threshold (score 0), as [plot.parCosnet()] does.
#'
#' @param x A `cvParCosnet` object.
#' @param classes Classes to draw (names or indices); default the first 6.
#'   `type = "scores"` draws the first of them.
#' @param type `"pr"` or `"scores"`.
#' @param main Plot title (default says what is drawn).
#' @param ... Passed to [graphics::plot()] (`"pr"`) or
#'   [graphics::stripchart()] (`"scores"`).
#' @return `x`, invisibly.
#' @examples
#' set.seed(2)
#' n <- 300
#' W <- Matrix::rsparsematrix(n, n, density = 0.04, symmetric = TRUE,
#'                            rand.x = function(k) runif(k))
#' Matrix::diag(W) <- 0
#' Y <- cbind(a = rbinom(n, 1, 0.1), b = rbinom(n, 1, 0.2))
#' cv <- cvParCosnet(W, Y, nfolds = 3, seed = 1, backend = "cpu", threads = 1)
#' plot(cv)
#' plot(cv, classes = "b", type = "scores")
#' @export
plot.cvParCosnet <- function(x, classes = utils::head(seq_len(nrow(x$metrics)), 6L),
                             type = c("pr", "scores"), main = NULL, ...) {
  type <- check_choice(type, c("pr", "scores"), "type")
  if (is.character(classes)) classes <- match(classes, x$metrics$class)
  if (!length(classes) || anyNA(classes) || any(classes < 1 | classes > nrow(x$metrics))) {
    stop_input("`classes` must name or index classes of `x`", call = NULL)
  }
  if (type == "scores") {
    k <- classes[[1L]]
    ok <- !is.na(x$labels[, k])
    jb <- x$jobs[x$jobs$class == x$metrics$class[k], ]
    if (is.null(main)) main <- sprintf("cvParCosnet: out-of-fold scores of class %s", x$metrics$class[k])
    cosnet_score_strips(x$scores[ok, k], x$labels[ok, k], main,
                        sprintf("threshold 0 (mean alpha %.3g, c %.3g)", mean(jb$alpha), mean(jb$c)), ...)
    return(invisible(x))
  }
  cols <- grDevices::hcl.colors(max(length(classes), 2L), "Dark 3")
  labs <- sprintf("%s (AUPRC %.2f)", x$metrics$class[classes], x$metrics$AUPRC[classes])
  # the legend goes in a right margin wide enough for it: inside, it would
  # cover the curves (good classes run along the top right)
  op <- graphics::par(mar = graphics::par("mar"))
  on.exit(graphics::par(op))
  mar <- graphics::par("mar")
  mar[[4L]] <- max(mar[[4L]], 0.8 * 0.55 * max(nchar(labs)) + 4)
  graphics::par(mar = mar)
  graphics::plot(NA, xlim = c(0, 1), ylim = c(0, 1), xlab = "recall", ylab = "precision",
                 main = if (is.null(main)) "cvParCosnet: precision-recall" else main, las = 1, ...)
  for (h in seq_along(classes)) {
    k <- classes[h]
    ok <- !is.na(x$labels[, k])
    s <- x$scores[ok, k]; t <- x$labels[ok, k]
    o <- order(s, decreasing = TRUE)
    tp <- cumsum(t[o]); np <- seq_along(o)
    graphics::lines(tp / sum(t), tp / np, col = cols[h], type = "s", lwd = 1.5)
  }
  graphics::legend("topleft", inset = c(1.02, 0), xpd = NA, bty = "n", legend = labs,
                   col = cols[seq_along(classes)], lty = 1, lwd = 1.5, cex = 0.8)
  invisible(x)
}
