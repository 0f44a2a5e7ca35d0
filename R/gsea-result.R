# rapidGSEA results for reports: as.data.frame() with atomic columns (so
# write.csv() works) and the printed table, where a probability estimated
# as 0 from permutations shows as the bound it is ("< 1e-03").

#' Convert a rapidGSEA result to a plain data frame
#'
#' One row per gene set, every column atomic: the leading edge becomes one
#' string of gene names joined by `","` (split it back with
#' `strsplit(x, ",")`), so the table can be written with [utils::write.csv()].
#' `write.csv(res)` also works on the result itself, and the file reads
#' back (with [utils::read.csv()]) as `as.data.frame(res)`.
#' The run's attributes (ranking, members, settings) are dropped.
#'
#' @param x A `rapidGSEA` result.
#' @param row.names,optional Unused, for the generic.
#' @param sep Separator of the leading-edge genes (default `","`).
#' @param ... Unused.
#' @return A `data.frame` with the columns of `x`.
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(500 * 8), 500, dimnames = list(paste0("g", 1:500), NULL))
#' x[1:30, 1:4] <- x[1:30, 1:4] + 2
#' res <- rapidGSEA(x, rep(c("A", "B"), each = 4), list(up = paste0("g", 1:30)),
#'                  nperm = 50, seed = 1, backend = "cpu", threads = 1)
#' df <- as.data.frame(res)
#' df$leadingEdge
#' write.csv(res, tempfile(fileext = ".csv"), row.names = FALSE)
#' @export
as.data.frame.rapidGSEA <- function(x, row.names = NULL, optional = FALSE, ..., sep = ",") {
  cols <- unclass(x)
  for (k in names(cols)) {
    if (inherits(cols[[k]], "sbg_genelist")) {
      cols[[k]] <- as.character.sbg_genelist(cols[[k]], sep = sep, quote = FALSE)
    } else if (is.list(cols[[k]])) {
      cols[[k]] <- vapply(cols[[k]], function(g) paste(as.character(g), collapse = sep), "")
    }
  }
  attributes(cols) <- list(names = names(cols))
  data.frame(cols, stringsAsFactors = FALSE, check.names = FALSE)
}

# The columns of a printed table, as strings: probabilities at 3 significant
# digits, and a 0 estimated from nperm permutations as "< 1/nperm" (nominal
# p-values have at most nperm same-sign nulls, FWER exactly nperm).
gsea_format_table <- function(top, nperm) {
  bound <- sprintf("< %.0e", 1 / nperm)
  for (k in intersect(c("pval", "padj", "FDR", "FWER"), names(top))) {
    v <- top[[k]]
    top[[k]] <- ifelse(is.na(v), "NA", ifelse(v == 0, bound, formatC(v, digits = 3, format = "g")))
  }
  for (k in intersect(c("ES", "NES"), names(top))) top[[k]] <- formatC(top[[k]], digits = 3, format = "f")
  top
}

# The leading-edge column: a list of character vectors with a class, so
# that write.table() (which turns classed columns into strings with
# as.character()) writes each set's genes as one field, and row subsets
# keep the class.  write.table() decides which columns to quote before it
# converts them, so the field brings its own quotes: write.csv(res) is a
# valid CSV file that reads back as as.data.frame(res).
gsea_genelist <- function(x) structure(x, class = c("sbg_genelist", "list")) # "list": vctrs/tibble see a list column

# The leading edges of a many-signature table (millions of rows) are not
# built as millions of character vectors, whose allocation and garbage
# collection took longer than the permutations: the column holds row numbers
# into `source`, an environment with what defines each row's leading edge
# (its signature's gene order and genes, its set's members, its ES and the
# ES's rank), and a row's genes are built when asked for (`[`, `[[`,
# as.list(), as.character()), by the engine's function of one signature's
# table (ffi_gsea_leading_edge), so they equal the single call's.  Any
# subset is an ordinary gene list.
gsea_genelist_lazy <- function(source) {
  structure(seq_along(source$es), source = source, class = c("sbg_genelist_lazy", "sbg_genelist"))
}

# Rows of a gene-list column as a plain list of character vectors.
gsea_genelist_items <- function(x, i) {
  if (!inherits(x, "sbg_genelist_lazy")) return(if (missing(i)) unclass(x) else unclass(x)[i])
  # .subset(): the rows' numbers without a copy of the whole column
  gsea_edges_build(attr(x, "source"), if (missing(i)) as.vector(unclass(x)) else .subset(x, i))
}

# The leading edges of the rows `ids` of a lazy column's source (NULL for
# an NA row, as a list's subset gives).  Asked for at least half the rows
# (the table sorted, written, converted), it builds every row once and keeps
# them in the source for later access: the column then costs what a built
# column costs, once.
gsea_edges_build <- function(src, ids) {
  if (is.null(src$all) && length(ids) >= length(src$es) / 2) src$all <- gsea_edges_rows(src, seq_along(src$es))
  if (!is.null(src$all)) return(src$all[ids])
  gsea_edges_rows(src, ids)
}

# The leading edges of rows `ids`, signature by signature.
gsea_edges_rows <- function(src, ids) {
  out <- vector("list", length(ids))
  ok <- which(!is.na(ids))
  by_sig <- split(ok, src$sig[ids[ok]])
  for (v in names(by_sig)) {
    k <- by_sig[[v]]
    r <- ids[k]
    v <- as.integer(v)
    gs <- src$sets[[src$universe[[v]]]]
    s <- src$set[r]
    size <- gs$start[s + 1L] - gs$start[s]
    out[k] <- .Call(ffi_gsea_leading_edge, src$order[[v]], c(0L, cumsum(size)),
                    gs$index[sequence(size, from = gs$start[s] + 1L)], src$es[r], src$pos[r], src$genes[[v]])
  }
  out
}

#' @export
as.list.sbg_genelist <- function(x, ...) gsea_genelist_items(x)

#' @export
as.character.sbg_genelist <- function(x, ..., sep = ",", quote = TRUE) {
  s <- vapply(gsea_genelist_items(x), function(g) paste(as.character(g), collapse = sep), "")
  if (quote) paste0("\"", s, "\"") else s
}

#' @export
`[.sbg_genelist` <- function(x, i, ...) gsea_genelist(gsea_genelist_items(x, i))

#' @export
`[[.sbg_genelist_lazy` <- function(x, i, ...) gsea_edges_build(attr(x, "source"), .subset2(x, i))[[1L]]

# Assigning into a gene-list column (x[i] <- value, as rbind() does) builds
# a lazy column, and a lazy value, first.
#' @export
`[<-.sbg_genelist` <- function(x, i, value) {
  x <- gsea_genelist_items(x)
  x[i] <- if (inherits(value, "sbg_genelist")) gsea_genelist_items(value) else value
  gsea_genelist(x)
}

#' @export
`[[<-.sbg_genelist_lazy` <- function(x, i, value) {
  x <- gsea_genelist_items(x)
  x[[i]] <- value
  gsea_genelist(x)
}

#' @exportS3Method base::lengths
lengths.sbg_genelist_lazy <- function(x, use.names = TRUE) lengths(gsea_genelist_items(x), use.names = FALSE)

# unlist() of a lazy column: its genes, as of a list column (without this,
# the row numbers: `unique(unlist(res$leadingEdge))` is a common idiom)
#' @exportS3Method base::unlist
unlist.sbg_genelist_lazy <- function(x, recursive = TRUE, use.names = TRUE) {
  unlist(gsea_genelist_items(x), recursive = recursive, use.names = use.names)
}

#' @export
format.sbg_genelist <- function(x, ...) {
  s <- as.character.sbg_genelist(x, sep = ", ", quote = FALSE)
  ifelse(nchar(s) > 40, paste0(substr(s, 1, 37), "..."), s)
}

#' @export
print.sbg_genelist <- function(x, ...) {
  print(gsea_genelist_items(x), ...)
  invisible(x)
}

#' A rapidGSEA result as fgsea's table
#'
#' The table in the shape of `fgsea::fgsea()`'s result, for code written
#' for fgsea: columns `pathway`, `pval`, `padj`, `log2err`, `ES`, `NES`,
#' `size` and `leadingEdge` (a list column: one character vector of genes
#' per set), in the order of `x`'s rows; a result of many signatures
#' keeps its first column `signature`. A `data.table` when the
#' data.table package is installed (as fgsea returns), else a `data.frame`.
#' `log2err` is `NA` for permutation p-values. The columns fgsea has no
#' counterpart of (`FDR`, `FWER`, `rankAtMax`) and the run's attributes are
#' left out; [as.data.frame.rapidGSEA()] keeps them.
#'
#' @param x A `rapidGSEA` result.
#' @return A `data.table` (or `data.frame`), one row per gene set.
#' @seealso [rapidGSEA()], [as.data.frame.rapidGSEA()]
#' @examples
#' set.seed(1)
#' stats <- setNames(rnorm(1000), paste0("g", 1:1000))
#' stats[1:40] <- stats[1:40] + 1
#' sets <- list(up = paste0("g", 1:40), random = paste0("g", sample(1000, 40)))
#' res <- rapidGSEA(stats, geneSets = sets, nperm = 100, seed = 1, backend = "cpu", threads = 1)
#' ft <- fgseaTable(res)
#' ft$leadingEdge[[1]]
#' @export
fgseaTable <- function(x) {
  if (!inherits(x, "rapidGSEA")) stop_input("`x` must be a rapidGSEA result, not ", arg_label(x))
  out <- data.frame(pathway = x$set, pval = x$pval, padj = x$padj, log2err = x$log2err, ES = x$ES,
                    NES = x$NES, size = x$size, stringsAsFactors = FALSE)
  out$leadingEdge <- lapply(as.list(x$leadingEdge), as.character)
  if (!is.null(x$signature)) out <- cbind(signature = x$signature, out, stringsAsFactors = FALSE) # many signatures
  if (requireNamespace("data.table", quietly = TRUE)) out <- data.table::as.data.table(out)
  out
}
