# Readers and writers of the Broad GSEA file formats (GCT, CLS, GMT, RNK),
# used by rapidGSEA() when it is given file paths. Every malformed file gives
# an error (class sysbioGPU_error_input) naming the file, the line and what is
# wrong.

stop_file <- function(file, line, ...) {
  where <- if (is.na(line)) sprintf("'%s'", file) else sprintf("'%s', line %d", file, line)
  stop_input(where, ": ", ..., call = NULL)
}

check_file <- function(file, arg) {
  if (!is.character(file) || length(file) != 1L || is.na(file)) {
    stop_input("`", arg, "` must be a single file path, not ", arg_label(file), call = NULL)
  }
  if (!file.exists(file)) stop_input("`", arg, "`: file '", file, "' does not exist", call = NULL)
  file
}

# A gzip file cut short (or damaged) is an error: R's gzfile() would
# return the part it could inflate, the last record cut, without a word.
check_gzip <- function(file) {
  why <- .Call(ffi_gzip_check, file)
  if (!is.null(why)) stop_file(file, NA, "cannot be read: ", why)
  invisible(file)
}

read_lines <- function(file) {
  if (dir.exists(file)) stop_file(file, NA, "cannot be read (it is a folder, not a file)")
  check_gzip(file)
  x <- alloc_guard(tryCatch(suppressWarnings(readLines(file, warn = FALSE, encoding = "UTF-8")),
                            error = function(e) {
                              if (is_alloc_error(e)) stop(e) # classed by alloc_guard()
                              stop_file(file, NA, "cannot be read (", conditionMessage(e), ")")
                            }),
                   "file", bytes = file.size(file), what = paste0("the lines of '", file, "'"))
  bad <- which(!validUTF8(x))
  if (length(bad)) stop_file(file, bad[[1L]], "is not valid UTF-8 text")
  sub("\r$", "", x)
}

# A field quoted in a message: at most 40 characters.
gsea_clip <- function(x) if (nchar(x) > 40L) paste0(substr(x, 1L, 37L), "...") else x

#' Read a GCT expression file
#'
#' Reads the Broad GCT format (version `#1.2`): a version line, a line with
#' the numbers of rows and samples, a header `NAME, Description, sample...`
#' and one tab-separated line per gene.
#'
#' @param file Path of the `.gct` file.
#' @return A numeric matrix, genes x samples, with the gene names (first
#'   column) as row names and the sample names as column names. The
#'   descriptions are kept in the attribute `description`.
#' @seealso [readCLS()], [readGMT()], [rapidGSEA()]
#' @examples
#' f <- system.file("extdata", "leukemia_small.gct", package = "sysbioGPU")
#' x <- readGCT(f)
#' dim(x)
#' @export
readGCT <- function(file) {
  check_file(file, "file")
  x <- read_lines(file)
  if (length(x) < 3L) stop_file(file, NA, "a GCT file needs at least 3 lines, it has ", length(x))
  if (!identical(trimws(x[[1L]]), "#1.2")) {
    stop_file(file, 1L, "the first line must be '#1.2' (GCT version), not '", substr(x[[1L]], 1, 40), "'")
  }
  dims <- suppressWarnings(as.numeric(strsplit(trimws(x[[2L]]), "[ \t]+")[[1L]]))
  if (length(dims) < 2L || anyNA(dims[c(1L, 2L)]) || any(dims[c(1L, 2L)] < 1) || any(dims[c(1L, 2L)] != round(dims[c(1L, 2L)]))) {
    stop_file(file, 2L, "the second line must give the numbers of rows and samples")
  }
  nr <- dims[[1L]]
  nc <- dims[[2L]]
  header <- strsplit(x[[3L]], "\t", fixed = TRUE)[[1L]]
  if (length(header) != nc + 2L) {
    stop_file(file, 3L, "the header has ", length(header), " fields, expected ", nc + 2L,
              " (NAME, Description and ", nc, " samples)")
  }
  body <- x[-seq_len(3L)]
  keep <- nzchar(trimws(body))
  lines <- which(keep) + 3L
  body <- body[keep]
  if (length(body) != nr) {
    stop_file(file, NA, "line 2 announces ", nr, " rows but the file has ", length(body))
  }
  fields <- strsplit(body, "\t", fixed = TRUE)
  nf <- lengths(fields)
  # strsplit drops one trailing empty field: a missing last value is short too
  bad <- which(nf != nc + 2L)
  if (length(bad)) {
    stop_file(file, lines[bad[[1L]]], "has ", nf[bad[[1L]]], " fields, expected ", nc + 2L)
  }
  m <- matrix(unlist(fields, use.names = FALSE), nrow = nc + 2L)
  vals <- suppressWarnings(as.numeric(m[-c(1L, 2L), , drop = FALSE]))
  nonnum <- which(is.na(vals) & !(m[-c(1L, 2L), ] %in% c("NA", "NaN", "")))
  if (length(nonnum)) {
    j <- (nonnum[[1L]] - 1L) %/% nc + 1L
    stop_file(file, lines[[j]], "value '", gsea_clip(m[-c(1L, 2L), ][nonnum[[1L]]]), "' is not a number")
  }
  out <- matrix(vals, nrow = nr, ncol = nc, byrow = TRUE,
                dimnames = list(m[1L, ], header[-c(1L, 2L)]))
  attr(out, "description") <- m[2L, ]
  out
}

#' Read a CLS class file
#'
#' Reads the Broad categorical CLS format: a line `nSamples nClasses 1`, a
#' line `# nameA nameB ...` and a line with one label per sample.
#'
#' @param file Path of the `.cls` file.
#' @return A factor, one element per sample, whose levels are the class names
#'   in the order of the `#` line (the first is class A, the numerator of
#'   the ranking metrics, as in the Broad tool).
#' @seealso [readGCT()], [rapidGSEA()]
#' @examples
#' f <- system.file("extdata", "leukemia_small.cls", package = "sysbioGPU")
#' table(readCLS(f))
#' @export
readCLS <- function(file) {
  check_file(file, "file")
  x <- read_lines(file)
  ln <- which(nzchar(trimws(x)))  # line numbers of the lines kept, for messages
  x <- x[ln]
  if (length(x) < 3L) stop_file(file, NA, "a CLS file needs 3 lines, it has ", length(x))
  h <- suppressWarnings(as.numeric(strsplit(trimws(x[[1L]]), "[ \t]+")[[1L]]))
  if (length(h) != 3L || anyNA(h) || h[[1L]] < 1 || h[[2L]] < 1) {
    stop_file(file, ln[[1L]], "the first line must be 'nSamples nClasses 1'")
  }
  if (!startsWith(trimws(x[[2L]]), "#")) {
    stop_file(file, ln[[2L]], "the second line must start with '#' and name the classes")
  }
  names2 <- strsplit(trimws(sub("^#", "", trimws(x[[2L]]))), "[ \t]+")[[1L]]
  names2 <- names2[nzchar(names2)]
  if (length(names2) != h[[2L]]) {
    stop_file(file, ln[[2L]], "names ", length(names2), " classes, line ", ln[[1L]], " announces ", h[[2L]])
  }
  labs <- strsplit(trimws(paste(x[-c(1L, 2L)], collapse = " ")), "[ \t]+")[[1L]]
  if (length(labs) != h[[1L]]) {
    stop_file(file, ln[[3L]], "has ", length(labs), " labels, line ", ln[[1L]], " announces ", h[[1L]], " samples")
  }
  if (all(labs %in% names2)) {
    lev <- names2
  } else if (all(grepl("^[0-9]+$", labs)) && all(as.numeric(labs) < length(names2))) {
    # numeric labels index the class names from 0 (as.numeric: a huge
    # number is large, not NA)
    labs <- names2[as.integer(labs) + 1L]
    lev <- names2
  } else {
    num <- grepl("^[0-9]+$", labs)
    bad <- if (all(num)) labs[as.numeric(labs) >= length(names2)][[1L]] else labs[!(labs %in% names2)][[1L]]
    at <- ln[-c(1L, 2L)][[which(vapply(strsplit(trimws(x[-c(1L, 2L)]), "[ \t]+"), function(l) bad %in% l, TRUE))[[1L]]]]
    stop_file(file, at, "label '", gsea_clip(bad), "' is not one of the classes named on line ", ln[[2L]],
              if (all(num)) paste0(" (numeric labels count from 0 to ", length(names2) - 1L, ")") else "")
  }
  factor(labs, levels = unique(lev))
}

#' Read and write GMT gene set files
#'
#' GMT: one gene set per line, tab-separated: name, description, genes.
#'
#' @param file Path of the `.gmt` file.
#' @return `readGMT()`: a named list of character vectors (duplicated genes
#'   within a set are dropped), with the descriptions in the attribute
#'   `description`. `writeGMT()`: `file`, invisibly.
#' @seealso [rapidGSEA()]
#' @examples
#' f <- system.file("extdata", "gsea_edb", "gene_sets.gmt", package = "sysbioGPU")
#' sets <- readGMT(f)
#' lengths(sets)
#' tmp <- tempfile(fileext = ".gmt")
#' writeGMT(sets, tmp)
#' identical(readGMT(tmp), sets)
#' @export
readGMT <- function(file) {
  check_file(file, "file")
  x <- read_lines(file)
  lines <- which(nzchar(trimws(x)))
  fields <- strsplit(x[lines], "\t", fixed = TRUE)
  nf <- lengths(fields)
  bad <- which(nf < 2L)
  if (length(bad)) {
    stop_file(file, lines[bad[[1L]]], "a gene set line needs a name, a description and genes, separated by tabs")
  }
  nm <- vapply(fields, `[[`, "", 1L)
  if (any(!nzchar(trimws(nm)))) stop_file(file, lines[which(!nzchar(trimws(nm)))[[1L]]], "empty gene set name")
  dup <- which(duplicated(nm))
  if (length(dup)) stop_file(file, lines[dup[[1L]]], "gene set '", gsea_clip(nm[dup[[1L]]]), "' appears twice")
  sets <- lapply(fields, function(f) {
    g <- trimws(f[-c(1L, 2L)])
    unique(g[nzchar(g)])
  })
  names(sets) <- nm
  attr(sets, "description") <- vapply(fields, `[[`, "", 2L)
  sets
}

#' @rdname readGMT
#' @param sets A named list of character vectors.
#' @param description Descriptions, one per set (default: `"NA"`, or the
#'   attribute `description` of `sets`).
#' @export
writeGMT <- function(sets, file, description = attr(sets, "description")) {
  if (!is.list(sets) || is.null(names(sets)) || anyNA(names(sets)) || any(!nzchar(names(sets))) ||
      !all(vapply(sets, is.character, TRUE))) {
    stop_input("`sets` must be a named list of character vectors", call = NULL)
  }
  if (!is.character(file) || length(file) != 1L || is.na(file)) {
    stop_input("`file` must be a single file path", call = NULL)
  }
  if (is.null(description)) description <- rep("NA", length(sets))
  if (length(description) != length(sets)) {
    stop_input("`description` must have one element per set (", length(sets), ")", call = NULL)
  }
  na <- vapply(sets, anyNA, TRUE)
  if (any(na)) {
    stop_input("`sets`: gene set '", gsea_clip(names(sets)[na][[1L]]), "' has NA genes; a GMT file would name them \"NA\"",
               call = NULL)
  }
  if (!is.character(description) || anyNA(description)) {
    stop_input("`description` must be a character vector without NA", call = NULL)
  }
  bad <- grepl("[\t\n\r]", c(names(sets), description, unlist(sets, use.names = FALSE)))
  if (any(bad)) stop_input("set names, descriptions and genes must not contain tabs or newlines", call = NULL)
  lines <- vapply(seq_along(sets), function(i) {
    paste(c(names(sets)[[i]], description[[i]], sets[[i]]), collapse = "\t")
  }, "")
  writeLines(lines, file)
  invisible(file)
}

# A ranked list (.rnk): gene <tab> value, optional '#' header lines.
read_rnk <- function(file) {
  check_file(file, "file")
  x <- read_lines(file)
  lines <- which(nzchar(trimws(x)) & !startsWith(x, "#"))
  fields <- strsplit(x[lines], "\t", fixed = TRUE)
  bad <- which(lengths(fields) != 2L)
  if (length(bad)) stop_file(file, lines[bad[[1L]]], "a ranked list line must be 'gene<TAB>value'")
  v <- suppressWarnings(as.numeric(vapply(fields, `[[`, "", 2L)))
  if (anyNA(v)) stop_file(file, lines[which(is.na(v))[[1L]]], "the value is not a number")
  stats::setNames(v, vapply(fields, `[[`, "", 1L))
}
