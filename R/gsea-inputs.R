# rapidGSEA()'s inputs beyond the plain matrix: Bioconductor containers
# (an assay chosen by `assay`, the phenotype named as a colData/pData
# column), and the checks that refuse data whose ranking metric would be
# constant or overflow, so that no silently changed NES reaches the user.

# expr, phenotype, assay -> list(expr, phenotype): a SummarizedExperiment
# or an ExpressionSet becomes its chosen assay as a matrix, and a phenotype
# that names one of its sample columns becomes that column.
gsea_container <- function(expr, phenotype, assay) {
  if (methods::is(expr, "SummarizedExperiment")) {
    if (!requireNamespace("SummarizedExperiment", quietly = TRUE)) {
      stop_input("`expr` is a SummarizedExperiment but SummarizedExperiment is not installed", call = NULL)
    }
    nm <- SummarizedExperiment::assayNames(expr)
    k <- gsea_pick_assay(assay, nm, length(SummarizedExperiment::assays(expr)), "SummarizedExperiment")
    m <- as.matrix(SummarizedExperiment::assay(expr, k, withDimnames = TRUE))
    cd <- as.data.frame(SummarizedExperiment::colData(expr))
    return(list(expr = m, phenotype = gsea_sample_column(phenotype, cd, "colData")))
  }
  if (methods::is(expr, "ExpressionSet")) {
    if (!requireNamespace("Biobase", quietly = TRUE)) {
      stop_input("`expr` is an ExpressionSet but Biobase is not installed", call = NULL)
    }
    nm <- Biobase::assayDataElementNames(expr)
    # exprs first, as Biobase::exprs() reads it; the others by name
    nm <- c(intersect("exprs", nm), setdiff(nm, "exprs"))
    k <- gsea_pick_assay(if (is.null(assay)) "exprs" else assay, nm, length(nm), "ExpressionSet")
    m <- Biobase::assayDataElement(expr, if (is.numeric(k)) nm[[k]] else k)
    return(list(expr = as.matrix(m), phenotype = gsea_sample_column(phenotype, Biobase::pData(expr), "pData")))
  }
  if (!is.null(assay)) {
    stop_input("`assay` applies to a SummarizedExperiment or an ExpressionSet; `expr` is a ",
               class(expr)[[1L]], call = NULL)
  }
  list(expr = expr, phenotype = phenotype)
}

# The assay to use: a name or a 1-based index; NULL when there is exactly one.
gsea_pick_assay <- function(assay, names, n, what) {
  have <- if (length(names)) paste0(" (", paste0("'", names, "'", collapse = ", "), ")") else ""
  if (n == 0L) stop_input("`expr` is a ", what, " without assays", call = NULL)
  if (is.null(assay)) {
    if (n > 1L) stop_input("`expr` has ", n, " assays", have, ": choose one with `assay` (a name or an index)",
                           call = NULL)
    return(1L)
  }
  if (is.character(assay) && length(assay) == 1L && !is.na(assay)) {
    if (!(assay %in% names)) stop_input("`assay` = '", assay, "' is not an assay of `expr`", have, call = NULL)
    return(assay)
  }
  if (is.numeric(assay) && length(assay) == 1L && !is.na(assay) && assay == round(assay) &&
      assay >= 1 && assay <= n) {
    return(as.integer(assay))
  }
  stop_input("`assay` must be an assay name or an index in [1, ", n, "], not ", arg_label(assay), call = NULL)
}

# A phenotype given as one string that names a column of the samples'
# table becomes that column; other values pass through (a CLS file path, or
# the labels themselves).
gsea_sample_column <- function(phenotype, table, what) {
  if (identical(phenotype, NA_character_)) stop_input("`phenotype` is NA: give the two classes or a column name", call = NULL)
  if (!(is.character(phenotype) && length(phenotype) == 1L)) return(phenotype)
  if (phenotype %in% names(table)) return(table[[phenotype]])
  if (file.exists(phenotype)) return(phenotype)
  cols <- if (ncol(table)) paste0("'", utils::head(names(table), 10L), "'", collapse = ", ") else "none"
  stop_input("`phenotype` = '", phenotype, "' is neither a ", what, " column of `expr` (columns: ", cols,
             ") nor a CLS file", call = NULL)
}

# ---- degenerate and overflowing data ------------------------------------

stop_numeric <- function(...) stop(sbg_condition("sysbioGPU_error_numeric", paste0(...), call = NULL))

# Before the engine: data whose metric would overflow, lose its precision
# in subnormal numbers, or be constant, and a `weight` that would overflow
# |metric|^weight.  `d` is gsea_data()'s result, `labels` 0/1 or NULL.
gsea_check_numbers <- function(d, metric, weight, labels) {
  big <- .Machine$double.xmax
  v <- if (is.null(d$expr)) d$ranking else d$expr
  # metrics built on variances square the values: below sqrt(xmin) the
  # squares are subnormal or 0 (x 1e-300 would change NES, not refuse)
  sq <- !is.null(d$expr) && metric %in% c("signal2noise", "t_test")
  floor <- if (sq) sqrt(.Machine$double.xmin) else .Machine$double.xmin
  # the tiny values (count, first), max |x|, and for a matrix min x and the
  # rows that vary (a matrix's from gsea_data()'s one pass in C)
  sc <- if (is.null(d$expr)) {
    tiny <- v != 0 & abs(v) < floor
    c(sum(tiny), if (any(tiny)) v[tiny][[1L]] else 0, max(abs(v)))
  } else d$scan[c(if (sq) 3:4 else 1:2, 5:7)]
  if (sc[[1L]] > 0) {
    stop_numeric("`expr` has ", sc[[1L]], " values too small for the metric (nonzero, below ",
                 format(floor, digits = 3), " in magnitude), e.g. ", format(sc[[2L]], digits = 3),
                 if (sq) ": their squares underflow" else ": their ratios and sums lose precision",
                 "; rescale `expr`")
  }
  top <- sc[[3L]]
  if (is.null(d$expr)) {
    if (all(v == v[[1L]])) stop_input("the preranked `expr` is constant (every value is ", v[[1L]],
                                      "): there is no ranking to test", call = NULL)
    bound <- top
  } else {
    n <- ncol(d$expr)
    # the engine sums x and the squares of (x - mean) over the samples
    if ((if (sq) (2 * top)^2 * n else 2 * top * n) >= big) {
      stop_numeric("`expr` has values up to ", format(top, digits = 3), ": the ", if (sq) "class variances" else "class sums",
                   " of ", n, " samples overflow double precision; rescale `expr` (e.g. log-transform it)")
    }
    if (sc[[5L]] == 0) stop_input("every gene of `expr` is constant across the samples: the ranking metric is constant",
                                  call = NULL)
    lo <- sc[[4L]]
    # class means lie in [lo, top]: their ratios in [lo / top, top / lo],
    # which must stay normal doubles both ways
    ratio <- metric %in% c("ratio_of_classes", "log2_ratio_of_classes")
    if (ratio && top / lo >= 1 / .Machine$double.xmin) {
      stop_numeric("`expr` values range from ", format(lo, digits = 3), " to ", format(top, digits = 3),
                   ": their ratio overflows (or its inverse underflows); rescale `expr`")
    }
    if (metric == "ratio_of_classes" && weight * log2(lo / top) < -1022) {
      stop_numeric("`weight` = ", format(weight, digits = 6), " underflows: |metric|^weight is below the smallest ",
                   "double for ratios down to ", format(lo / top, digits = 3), "; use a smaller `weight`")
    }
    na <- sum(labels == 0L)
    # largest |metric| any permutation can reach: class means are at most
    # 5 standard deviations (Broad's fix-low rule), see ?rapidGSEA
    bound <- switch(metric, signal2noise = 5, t_test = 5 * sqrt(2 * max(na, n - na)),
                    diff_of_classes = 2 * top, ratio_of_classes = top / lo,
                    log2_ratio_of_classes = max(1, abs(log2(top / lo))))
  }
  len <- if (is.null(d$expr)) length(v) else nrow(d$expr)
  if (weight > 0 && bound > 1 && weight * log2(bound) + log2(len) >= 1023) {
    stop_numeric("`weight` = ", format(weight, digits = 6), " overflows: |metric|^weight exceeds the largest double ",
                 "for |metric| up to ", format(bound, digits = 3), "; use a smaller `weight`")
  }
  invisible(TRUE)
}

# After the engine: the observed metric must be finite and not constant,
# the weights of its nonzero values must not underflow to 0, and many ties
# are worth a warning (they are ordered by row, which decides the ES).
gsea_check_metric <- function(m, weight) {
  if (any(!is.finite(m))) {
    stop_numeric("the ranking metric is not finite for ", sum(!is.finite(m)), " genes; rescale `expr`")
  }
  if (all(m == m[[1L]])) {
    stop_input("the ranking metric is the same (", format(m[[1L]], digits = 3), ") for every gene: ",
               "there is no ranking to test", call = NULL)
  }
  nz <- abs(m[m != 0])
  if (weight > 0 && length(nz) && weight * log2(min(nz)) < -1022) {
    stop_numeric("`weight` = ", format(weight, digits = 6), " underflows: |metric|^weight is below the smallest ",
                 "double for |metric| down to ", format(min(nz), digits = 3), "; use a smaller `weight`")
  }
  dup <- sum(duplicated(m))
  if (dup > 0L && dup >= 0.01 * length(m)) {
    warning(structure(class = c("sysbioGPU_warning_ties", "sysbioGPU_warning", "warning", "condition"),
                      list(message = sprintf(paste0("%d of %d genes (%.1f%%) tie with another gene's ranking metric; ",
                                                    "tied genes are ranked by their row, which may change the ES"),
                                             dup, length(m), 100 * dup / length(m)), call = NULL)))
  }
  invisible(TRUE)
}

# Enrichment scores lie in [-1, 1]; 2^-40 of slack for rounding.  The
# engine's exact sums (src/gsea/gsea_math.h) hold |ES| < 2 only.
gsea_check_es_range <- function(x, arg) {
  out <- abs(x) > 1 + 2^-40
  if (any(out)) {
    stop_input("`", arg, "` has ", sum(out), " values outside [-1, 1] (e.g. ", format(x[out][[1L]], digits = 15),
               "): enrichment scores lie in [-1, 1]", call = NULL)
  }
  invisible(TRUE)
}
