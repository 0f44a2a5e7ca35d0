# Reports of grnEvolve() results: as.data.frame() (one row per island, or
# the history or the changed links in long form) and the plot of the best
# fitness per island over the generations.

#' Convert a grnEvolve result to a plain data frame
#'
#' @param x A [grnEvolve()] result.
#' @param row.names,optional Unused, for the generic.
#' @param what `"islands"` (default): one row per island, its best at the
#'   end of the run; `"history"`: one row per generation and island (long
#'   form of `x$history`); `"changes"`: one row per link of the best network
#'   that differs from the reference (`x$changes`).
#' @param ... Unused.
#' @return A `data.frame` of atomic columns (so [utils::write.csv()] works).
#'   `"islands"`: `island`, `fitness` (the island's best at the end),
#'   `reachedAt` (the first generation at which the island had that
#'   fitness), `holdsBest` (whether it equals the best of the run, which
#'   `x$network` has). `"history"`: `generation`, `island`, `fitness`.
#'   `"changes"`: `source`, `target`, `reference`, `best`.
#' @seealso [plot.grnEvolve()], [runInfo()] for how the run was computed.
#' @examples
#' eye <- grnMouseEye()
#' fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 256, islands = 4,
#'                  generations = 50, seed = 1, backend = "cpu", threads = 1)
#' as.data.frame(fit)
#' head(as.data.frame(fit, what = "history"))
#' write.csv(as.data.frame(fit), tempfile(fileext = ".csv"), row.names = FALSE)
#' @export
as.data.frame.grnEvolve <- function(x, row.names = NULL, optional = FALSE, ...,
                                    what = c("islands", "history", "changes")) {
  what <- check_choice(what, c("islands", "history", "changes"), "what")
  h <- x$history
  gen <- as.integer(rownames(h))
  switch(what,
    islands = {
      last <- h[nrow(h), ]
      reached <- vapply(seq_len(ncol(h)), function(i) gen[match(last[i], h[, i])], 0L)
      data.frame(island = seq_len(ncol(h)), fitness = unname(last), reachedAt = reached,
                 holdsBest = unname(last == x$fitness))
    },
    history = data.frame(generation = rep(gen, ncol(h)), island = rep(seq_len(ncol(h)), each = nrow(h)),
                         fitness = as.vector(h)),
    changes = {
      ch <- x$changes
      rownames(ch) <- NULL
      ch
    })
}

# 1-2-5 ticks over a positive range, written without exponents (0.0005,
# 0.001, ...): a log axis that reads as fitness values.
grn_log_ticks <- function(lim) {
  dec <- 10^(floor(log10(lim[1])):ceiling(log10(lim[2])))
  at <- sort(unique(c(outer(c(1, 2, 5), dec))))
  at <- at[at >= lim[1] / 1.0001 & at <= lim[2] * 1.0001]
  if (length(at) < 2L) at <- signif(lim, 2)
  list(at = at, labels = format(at, scientific = FALSE, drop0trailing = TRUE, trim = TRUE))
}

# The outline of a step function (values y at generations x) for polygon().
grn_step_xy <- function(x, y) {
  n <- length(x)
  list(x = c(rep(x, each = 2)[-1], x[n]), y = c(rep(y, each = 2)[-2 * n], y[n]))
}

#' Plot the best fitness per island over the generations
#'
#' Draws the best fitness of each island at every generation (a step line
#' per island, row 1 of the history being the initial population), on a log
#' axis by default with ticks written as plain numbers. Islands that
#' exchange migrants often share their best: their lines are drawn in
#' distinct colours and line types, each thinner than the one before, so
#' that lines lying on each other stay visible. With more than `maxIslands`
#' islands the plot shows the range over the islands (a band) and the best
#' island instead. The target, when the run had one, is a dotted line.
#'
#' @param x A [grnEvolve()] result.
#' @param log `"y"` (default) draws the fitness axis on a log scale (a
#'   fitness of 0 is left out), `""` on a linear one.
#' @param maxIslands Most islands drawn one by one (default 8).
#' @param main Plot title (default: the genes off the goal and the links
#'   changed by the best network).
#' @param ... Passed to [graphics::plot()].
#' @return `x`, invisibly.
#' @seealso [as.data.frame.grnEvolve()]
#' @examples
#' eye <- grnMouseEye()
#' fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 256, islands = 4,
#'                  generations = 100, seed = 1, backend = "cpu", threads = 1)
#' plot(fit)
#' @export
plot.grnEvolve <- function(x, log = "y", maxIslands = 8, main = NULL, ...) {
  log <- check_choice(log, c("y", ""), "log")
  h <- x$history
  gen <- as.numeric(rownames(h))
  if (log == "y") h[h <= 0] <- NA
  I <- ncol(h)
  many <- I > maxIslands
  target <- x$settings$target
  yl <- range(c(h, if (!is.null(target) && (log == "" || target > 0)) target), na.rm = TRUE, finite = TRUE)
  if (!all(is.finite(yl))) yl <- c(1e-3, 1) # every fitness 0 on a log axis
  if (yl[1] == yl[2]) yl <- yl * c(0.9, 1.1) + c(-1e-3, 1e-3) * (yl[1] == 0)
  if (is.null(main)) {
    main <- sprintf("grnEvolve: %d gene(s) off the goal, %d link(s) changed", x$dn, x$dl)
  }
  op <- graphics::par(mar = c(4.5, 5.5, 3, 1) + 0.1)
  on.exit(graphics::par(op))
  graphics::plot(NA, xlim = range(gen), ylim = yl, log = log, yaxt = "n", xaxt = "n",
                 xlab = "generation", ylab = "", main = main, ...)
  graphics::title(ylab = "best fitness", line = 4)
  tk <- if (log == "y") grn_log_ticks(yl) else {
    at <- pretty(yl)
    list(at = at, labels = format(at, scientific = FALSE, drop0trailing = TRUE, trim = TRUE))
  }
  graphics::axis(2, at = tk$at, labels = tk$labels, las = 1, cex.axis = 0.85)
  xa <- pretty(gen)
  graphics::axis(1, at = xa, labels = format(xa, big.mark = ",", scientific = FALSE, trim = TRUE))
  graphics::grid(nx = NA, ny = NULL, col = "grey90", lty = 1)
  if (many) {
    lo <- apply(h, 1, min, na.rm = TRUE)
    hi <- apply(h, 1, max, na.rm = TRUE)
    ok <- is.finite(lo) & is.finite(hi)
    band <- grn_step_xy(gen[ok], hi[ok])
    low <- grn_step_xy(gen[ok], lo[ok])
    graphics::polygon(c(band$x, rev(low$x)), c(band$y, rev(low$y)), col = "grey80", border = NA)
    graphics::lines(gen[ok], lo[ok], type = "s", lwd = 2)
    leg <- list(legend = c("best island", sprintf("range over the %d islands", I)),
                col = c("black", "grey80"), lty = c(1, NA), lwd = c(2, NA), pch = c(NA, 15), pt.cex = 2)
  } else {
    cols <- if (I == 1L) "black" else grDevices::hcl.colors(I, "Dark 3")
    lty <- rep_len(seq_len(4L), I)
    lwd <- if (I == 1L) 2 else seq(4, 1.2, length.out = I)
    for (i in seq_len(I)) graphics::lines(gen, h[, i], type = "s", col = cols[i], lty = lty[i], lwd = lwd[i])
    leg <- list(legend = paste("island", seq_len(I)), col = cols, lty = lty, lwd = lwd, pch = NA,
                pt.cex = 1)
  }
  if (!is.null(target) && (log == "" || target > 0)) {
    graphics::abline(h = target, lty = 3, col = "grey30")
    leg <- Map(c, leg, list(legend = "target", col = "grey30", lty = 3, lwd = 1, pch = NA, pt.cex = 1))
  }
  graphics::legend("topright", legend = leg$legend, col = leg$col, lty = leg$lty, lwd = leg$lwd,
                   pch = leg$pch, pt.cex = leg$pt.cex, bg = "white", cex = 0.8)
  invisible(x)
}
