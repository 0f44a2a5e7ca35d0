# Figures of a rapidGSEA() result in base graphics, for reports: Broad's
# enrichment plot of one set (plot.rapidGSEA) and a one-page overview of
# the top sets (gseaOverview), each set's running sum as a small multiple.

# Set i's running sum, exact and compact: it is linear between hits, so its
# values at each hit and just before it (plus both ends) draw it whole.
# list(x, y: the polyline; hits: positions of the members; N)
gsea_running_sum <- function(res, i) {
  ranking <- attr(res, "ranking")
  N <- length(ranking)
  # by name: a row subset keeps the attributes but not the row numbers
  hits <- sort(match(attr(res, "members")[[res$set[[i]]]], names(ranking)))
  w <- abs(ranking[hits])^attr(res, "weight")
  if (sum(w) == 0) w[] <- 1
  k <- length(hits)
  top <- cumsum(w) / sum(w) - (hits - seq_len(k)) / (N - k)
  before <- top - w / sum(w)
  x <- c(0, as.vector(rbind(hits - 1, hits)), N)
  y <- c(0, as.vector(rbind(before, top)), 0)
  list(x = x, y = y, hits = hits, N = N)
}

# The row of `set` in `res` (name or number); default the smallest p.
gsea_pick_set <- function(res, set, arg = "set") {
  if (is.null(attr(res, "ranking"))) {
    stop_input("`x` has lost its ranking: plot the whole rapidGSEA result, not a subset", call = NULL)
  }
  if (is.null(set)) return(order(res$pval, -abs(res$NES))[[1L]])
  i <- if (is.numeric(set)) as.integer(set) else match(set, res$set)
  if (length(i) != 1L || is.na(i) || i < 1L || i > nrow(res)) {
    stop_input("`", arg, "`: ", arg_label(set), " is not a set of this result", call = NULL)
  }
  i
}

# s shortened with "..." until it is at most `width` user units wide.
gsea_fit_text <- function(s, width, cex) {
  if (graphics::strwidth(s, cex = cex) <= width) return(s)
  while (nchar(s) > 4L && graphics::strwidth(paste0(s, "..."), cex = cex) > width) s <- substr(s, 1L, nchar(s) - 1L)
  paste0(s, "...")
}

# The two ends of the ranked list, in words.
gsea_class_labels <- function(res) {
  cl <- attr(res, "classes")
  if (is.null(cl)) return(c("positive metric", "negative metric"))
  c(sprintf("'%s' (class A, positively correlated)", cl[[1L]]),
    sprintf("'%s' (class B, negatively correlated)", cl[[2L]]))
}

gsea_metric_label <- function(res) {
  m <- attr(res, "metric")
  if (identical(m, "preranked")) "Ranked list metric (preranked)" else sprintf("Ranked list metric (%s)", m)
}

# p-value text: 0 from permutations is "< 1/nperm".
gsea_p_text <- function(p, nperm) {
  if (is.na(p)) return("NA")
  if (p == 0) return(sprintf("< %.0e", 1 / nperm))
  formatC(p, digits = 2, format = "g")
}

#' Enrichment plot of one gene set
#'
#' Broad's enrichment plot: the running enrichment score, a tick for each
#' gene of the set in the ranked list, and the ranked metric (named on its
#' axis), with the two classes at the ends of the list and the position
#' where the metric crosses zero.
#'
#' @param x A `rapidGSEA` result.
#' @param set Name (or row number) of the set; default the set with the
#'   smallest nominal p-value.
#' @param main Title (default: the set's name and its statistics).
#' @param ... Unused.
#' @return `x`, invisibly.
#' @seealso [gseaOverview()] for the top sets on one page.
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(500 * 8), 500, dimnames = list(paste0("g", 1:500), NULL))
#' x[1:30, 1:4] <- x[1:30, 1:4] + 2
#' res <- rapidGSEA(x, rep(c("tumour", "normal"), each = 4), list(up = paste0("g", 1:30)),
#'                  nperm = 50, seed = 1, backend = "cpu", threads = 1)
#' plot(res, "up")
#' @export
plot.rapidGSEA <- function(x, set = NULL, main = NULL, ...) {
  i <- gsea_pick_set(x, set)
  rs <- gsea_running_sum(x, i)
  ranking <- attr(x, "ranking")
  N <- rs$N
  nperm <- attr(x, "nperm")
  op <- graphics::par(no.readonly = TRUE)
  on.exit(graphics::par(op))
  graphics::layout(matrix(seq_len(3L)), heights = c(3, 0.7, 2.2))
  graphics::par(mar = c(0, 5, 4, 1), mgp = c(3, 0.7, 0), las = 1)
  if (is.null(main)) {
    main <- sprintf("%s\nES %.3f   NES %.3f   p %s   FDR %s", gsea_clip(x$set[[i]]), x$ES[[i]], x$NES[[i]],
                    gsea_p_text(x$pval[[i]], nperm), gsea_p_text(x$FDR[[i]], nperm))
  }
  graphics::plot(rs$x, rs$y, type = "l", col = "forestgreen", lwd = 2, xaxt = "n", xlab = "",
                 ylab = "Enrichment score (ES)", main = main, xlim = c(0, N), xaxs = "i", cex.main = 1)
  graphics::abline(h = 0, col = "grey50")
  graphics::abline(v = x$rankAtMax[[i]], col = "red", lty = 2)
  graphics::legend(if (x$ES[[i]] >= 0) "topright" else "bottomleft",
                   c("running enrichment score", "position of the ES"), col = c("forestgreen", "red"),
                   lty = c(1, 2), lwd = c(2, 1), bty = "n", cex = 0.85)
  graphics::par(mar = c(0, 5, 0, 1))
  graphics::plot(NA, xlim = c(0, N), ylim = c(0, 1), xaxt = "n", yaxt = "n", xlab = "", ylab = "", xaxs = "i",
                 yaxs = "i")
  # the ranked list as a red (top) to blue (bottom) band under the ticks
  n_band <- min(N, 200L)
  cuts <- round(seq(0, N, length.out = n_band + 1L))
  graphics::rect(cuts[-(n_band + 1L)], 0, cuts[-1L], 0.25, border = NA,
                 col = grDevices::colorRampPalette(c("#D7301F", "white", "#2B8CBE"))(n_band))
  graphics::segments(rs$hits, 0.3, rs$hits, 1, col = "black")
  graphics::mtext("members", side = 2, line = 0.5, cex = 0.7, las = 1)
  graphics::par(mar = c(4.5, 5, 0, 1))
  graphics::plot(seq_len(N), ranking, type = "h", col = "grey60", xlab = "Rank in ordered gene list",
                 ylab = gsea_metric_label(x), xlim = c(0, N), xaxs = "i", cex.lab = 0.95)
  graphics::abline(h = 0, col = "grey30")
  zero <- sum(ranking > 0)
  if (zero > 0 && zero < N) {
    graphics::abline(v = zero + 0.5, col = "grey40", lty = 3)
    graphics::text(zero, 0.25 * max(ranking), sprintf("zero cross at %d", zero), pos = 4, cex = 0.75, col = "grey30")
  }
  lab <- gsea_class_labels(x)
  usr <- graphics::par("usr")
  graphics::text(usr[[1L]], usr[[4L]], lab[[1L]], adj = c(-0.02, 1.3), col = "#B2182B", cex = 0.8)
  graphics::text(usr[[2L]], usr[[3L]], lab[[2L]], adj = c(1.02, -0.5), col = "#2166AC", cex = 0.8)
  invisible(x)
}

#' One-page overview of the top gene sets
#'
#' A table of the top sets, one row each: the set's name, its running
#' enrichment score as a small multiple over the whole ranked list (a tick
#' under it for each member), its NES, nominal p-value and
#' Benjamini-Hochberg adjusted p-value and Broad's FDR. Like fgsea's
#' `plotGseaTable()`, in base graphics.
#'
#' @param x A `rapidGSEA` result.
#' @param sets Names (or row numbers) of the sets to show; default the `n`
#'   sets with the smallest nominal p-values (ties by larger |NES|), in that
#'   order.
#' @param n Number of sets when `sets` is not given (default 10).
#' @param main Title (default: the number of sets, the metric and the
#'   permutations).
#' @param cex Text size of the rows (default 0.8).
#' @return The rows of `x` shown, invisibly.
#' @seealso [plot.rapidGSEA()] for one set in detail.
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(1000 * 8), 1000, dimnames = list(paste0("g", 1:1000), NULL))
#' x[1:30, 1:4] <- x[1:30, 1:4] + 2
#' x[31:60, 5:8] <- x[31:60, 5:8] + 1
#' sets <- c(list(up = paste0("g", 1:30), down = paste0("g", 31:60)),
#'           setNames(lapply(1:6, function(i) paste0("g", sample(1000, 40))), paste0("random", 1:6)))
#' res <- rapidGSEA(x, rep(c("A", "B"), each = 4), sets, nperm = 200, seed = 1,
#'                  backend = "cpu", threads = 1)
#' gseaOverview(res)
#' @export
gseaOverview <- function(x, sets = NULL, n = 10L, main = NULL, cex = 0.8) {
  if (!inherits(x, "rapidGSEA")) stop_input("`x` must be a rapidGSEA result, not ", class(x)[[1L]], call = NULL)
  rows <- if (is.null(sets)) {
    n <- check_whole(n, "n", min = 1, max = 1e4)
    gsea_pick_set(x, NULL)  # checks that x still has its ranking
    utils::head(order(x$pval, -abs(x$NES)), n)
  } else {
    vapply(sets, function(s) gsea_pick_set(x, s, "sets"), 1L, USE.NAMES = FALSE)
  }
  k <- length(rows)
  nperm <- attr(x, "nperm")
  N <- length(attr(x, "ranking"))
  op <- graphics::par(no.readonly = TRUE)
  on.exit(graphics::par(op))
  graphics::par(mar = c(4.5, 1, 3.5, 1))
  # columns, in figure units: name | running sum | NES | p | padj | FDR
  cx <- c(0, 0.33, 0.68, 0.76, 0.86, 0.95, 1.02)
  graphics::plot(NA, xlim = c(0, 1.04), ylim = c(k + 0.1, -0.9), axes = FALSE, xlab = "", ylab = "",
                 xaxs = "i", yaxs = "i")
  if (is.null(main)) {
    main <- sprintf("Top %d of %d gene sets (metric %s, %s %s permutations)", k, nrow(x), attr(x, "metric"),
                    format(nperm, big.mark = ","), attr(x, "permutation"))
  }
  graphics::title(main, cex.main = 1, line = 2)
  graphics::mtext(paste(gsea_class_labels(x), collapse = "  vs  "), side = 3, line = 0.6, cex = 0.75)
  head_y <- -0.45
  graphics::text(cx[[1L]] + 0.005, head_y, "Gene set", adj = 0, font = 2, cex = cex)
  graphics::text((cx[[2L]] + cx[[3L]] - 0.02) / 2, head_y, "Running enrichment score", font = 2, cex = cex)
  graphics::text(cx[4:7] - 0.005, head_y, c("NES", "p-value", "padj", "FDR"), adj = 1, font = 2, cex = cex)
  graphics::segments(0, -0.1, 1.04, -0.1, col = "grey40")
  name_w <- cx[[2L]] - cx[[1L]] - 0.02
  curves <- lapply(rows, function(i) gsea_running_sum(x, i))
  # one scale for all rows: from the lowest to the highest running sum shown
  lo <- min(0, vapply(curves, function(r) min(r$y), 0))
  hi <- max(0, vapply(curves, function(r) max(r$y), 0))
  band <- function(v, y0) y0 + 0.78 - (v - lo) / max(hi - lo, 1e-12) * 0.7
  for (r in seq_len(k)) {
    i <- rows[[r]]
    y0 <- r - 1
    if (r %% 2 == 0) graphics::rect(0, y0, 1.04, y0 + 1, col = "grey95", border = NA)
    graphics::text(cx[[1L]] + 0.005, y0 + 0.5, gsea_fit_text(x$set[[i]], name_w, cex), adj = 0, cex = cex)
    rs <- curves[[r]]
    # rank to [cx2, cx3 - 0.02]; the running sum to the row's band (up is up)
    px <- cx[[2L]] + rs$x / N * (cx[[3L]] - cx[[2L]] - 0.02)
    graphics::segments(cx[[2L]], band(0, y0), cx[[3L]] - 0.02, band(0, y0), col = "grey70")
    graphics::lines(px, band(rs$y, y0),
                    col = if (x$ES[[i]] >= 0) "#B2182B" else "#2166AC", lwd = 1.2)
    hx <- cx[[2L]] + rs$hits / N * (cx[[3L]] - cx[[2L]] - 0.02)
    graphics::segments(hx, y0 + 0.84, hx, y0 + 0.97, col = "black", lwd = 0.5)
    vals <- c(formatC(x$NES[[i]], digits = 2, format = "f"), gsea_p_text(x$pval[[i]], nperm),
              gsea_p_text(if (is.null(x$padj)) NA else x$padj[[i]], nperm), gsea_p_text(x$FDR[[i]], nperm))
    graphics::text(cx[4:7] - 0.005, y0 + 0.5, vals, adj = 1, cex = cex)
  }
  graphics::segments(0, k, 1.04, k, col = "grey40")
  graphics::mtext(sprintf(paste("Running enrichment score (red: ES > 0, blue: ES < 0; grey line at 0; one scale,",
                                "%.2f to %.2f) over ranks 1 to %s; members as ticks"),
                          lo, hi, format(N, big.mark = ",")), side = 1, line = 1, cex = 0.7)
  graphics::mtext("NES: normalised enrichment score; p-value: nominal; padj: Benjamini-Hochberg of p; FDR: Broad's q-value",
                  side = 1, line = 2.2, cex = 0.7)
  invisible(x[rows, ])
}
