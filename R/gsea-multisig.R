# rapidGSEA(stats = <matrix or list>): many preranked signatures in one
# call (the engine's ffi_gsea_multi, src/gsea/gsea_cpu.c), one table with
# a `signature` column, the "rapidGSEAmulti" class and its methods.

# stats -> the signatures, checked as a preranked `expr` is, with errors
# and warnings that name `stats` and the signature: a matrix stays a double
# matrix (genes x signatures, one gene universe), a list becomes a named
# list of named double vectors.
gsea_signatures <- function(stats, ignoreCase, weight) {
  if (is.data.frame(stats)) stats <- as.matrix(stats)
  if (is.matrix(stats)) {
    if (!is.numeric(stats)) stop_input("`stats` must be a numeric matrix (genes x signatures), not a ", typeof(stats), " matrix")
    if (ncol(stats) < 1L) stop_input("`stats` has no signature (column)")
    rn <- rownames(stats)
    if (is.null(rn)) stop_input("`stats` needs the genes as row names")
    nm <- colnames(stats)
    if (is.null(nm)) stop_input("`stats` needs the signatures' names as column names")
    gsea_check_signature_names(nm)
    storage.mode(stats) <- "double"
    column <- function(v) stats::setNames(stats[, v], rn)
    # the columns share the gene names: checked once, with the first column
    gsea_in_signature(nm[[1L]], gsea_data(column(1L), ignoreCase))
    # the checks of a signature's own call run on the columns that they
    # stop or warn on, found in one pass (ffi_gsea_scan_columns): the same
    # errors and warnings, in the same order, as checking every column
    sc <- .Call(ffi_gsea_scan_columns, stats)
    nonfinite <- sc[1L, ]; tiny <- sc[2L, ]; constant <- sc[3L, ]
    maxabs <- sc[4L, ]; minnz <- sc[5L, ]; ties <- sc[6L, ]
    bad <- which(nonfinite > 0)
    if (length(bad)) gsea_in_signature(nm[[bad[[1L]]]], gsea_data(column(bad[[1L]]), ignoreCase))
    n <- nrow(stats)
    flag <- tiny > 0 | constant == 1 |
      (weight > 0 & maxabs > 1 & weight * log2(maxabs) + log2(n) >= 1023) |
      (weight > 0 & is.finite(minnz) & weight * log2(minnz) < -1022) |
      (ties > 0 & ties >= 0.01 * n)
    for (v in which(flag)) gsea_in_signature(nm[[v]], gsea_check_signature(column(v), weight))
    return(stats)
  }
  if (!is.list(stats)) {
    stop_input("`stats` must be a named numeric vector, a numeric matrix (genes x signatures) or a named list of ",
               "named numeric vectors, not ", describe_value(stats))
  }
  if (length(stats) < 1L) stop_input("`stats` is an empty list: give at least one signature")
  if (is.null(names(stats))) stop_input("`stats` must be a named list (names = signatures)")
  bad <- which(!vapply(stats, function(x) is.numeric(x) && is.null(dim(x)), TRUE))
  if (length(bad)) {
    stop_input("`stats` must hold named numeric vectors; signature ", gsea_sig_label(names(stats)[bad[[1L]]], bad[[1L]]),
               " is ", describe_value(stats[[bad[[1L]]]]))
  }
  stats <- lapply(stats, function(x) stats::setNames(as.double(x), names(x)))
  nm <- names(stats)
  gsea_check_signature_names(nm)
  for (v in seq_along(stats)) gsea_in_signature(nm[[v]], gsea_data(stats[[v]], ignoreCase))
  for (v in seq_along(stats)) gsea_in_signature(nm[[v]], gsea_check_signature(stats[[v]], weight))
  stats
}

gsea_check_signature_names <- function(nm) {
  if (anyNA(nm) || any(!nzchar(nm))) stop_input("`stats` has a signature without a name")
  if (anyDuplicated(nm)) stop_input("`stats` has duplicated signature names, e.g. '", nm[duplicated(nm)][[1L]], "'")
}

# The numeric checks of one signature's own call.
gsea_check_signature <- function(x, weight) {
  gsea_check_numbers(list(expr = NULL, ranking = x), "signal2noise", weight, NULL)
  gsea_check_metric(x, weight)
}

# The signatures' names, and signature v's metric as a named vector, of
# what gsea_signatures() returns.
gsea_signature_names <- function(sigs) if (is.matrix(sigs)) colnames(sigs) else names(sigs)
gsea_signature_stats <- function(sigs, v) {
  if (is.matrix(sigs)) stats::setNames(sigs[, v], rownames(sigs)) else sigs[[v]]
}

gsea_sig_label <- function(name, i) if (is.null(name) || is.na(name) || !nzchar(name)) paste0("#", i) else paste0("'", name, "'")

# Runs expr for one signature: its errors and warnings name `stats` (not
# `expr`) and the signature.
gsea_in_signature <- function(name, expr) {
  relabel <- function(m) paste0("`stats`, signature '", name, "': ", gsub("`expr`", "`stats`", m, fixed = TRUE))
  withCallingHandlers(
    tryCatch(expr, sysbioGPU_error = function(e) {
      e$message <- relabel(conditionMessage(e))
      stop(e)
    }),
    sysbioGPU_warning = function(w) {
      w$message <- relabel(conditionMessage(w))
      warning(w)
      invokeRestart("muffleWarning")
    })
}

# The multi-signature run; the arguments are checked by rapidGSEA().
gsea_multisig <- function(stats, geneSets, nperm, weight, pvalue, eps, sampleSize, minSize, maxSize, seed,
                          backend, threads, device, verbose, ignoreCase, t_start) {
  sigs <- gsea_signatures(stats, ignoreCase, weight)
  snames <- gsea_signature_names(sigs)
  genes <- if (is.matrix(sigs)) rep(list(rownames(sigs)), ncol(sigs)) else lapply(sigs, names)
  if (pvalue == "auto") pvalue <- "multilevel"
  # the sets once per gene universe: the same gene names in the same order
  if (is.character(geneSets) && length(geneSets) == 1L) geneSets <- readGMT(geneSets)
  universe <- integer(length(snames))
  keys <- list()
  sets <- list()
  for (v in seq_along(snames)) {
    g <- genes[[v]]
    u <- 0L
    for (k in seq_along(keys)) if (identical(keys[[k]], g)) { u <- k; break }
    if (!u) {
      u <- length(keys) + 1L
      keys[[u]] <- g
      sets[[u]] <- gsea_in_signature(snames[[v]], gsea_sets(geneSets, g, minSize, maxSize, ignoreCase))
    }
    universe[[v]] <- u
  }
  seed <- resolve_seed(seed)
  b <- resolveBackend(backend, threads, device)
  if (length(b$devices) > 1L) stop_input("many signatures run on one GPU: give one `device`, not ", length(b$devices))
  a <- backend_args(b)
  params <- list(metric = 0L, weight = as.double(weight), gene = TRUE, seed = seed, nperm = nperm,
                 batch = as.double(engine_option("sysbioGPU.gseaBatch", "rapidGSEA") %||% 0),
                 cache = as.double(engine_option("sysbioGPU.gseaCache", "rapidGSEA") %||% -1),
                 keepNull = FALSE, phase = 0L, range = c(0, 0), norm = NULL)
  data <- list(ranking = sigs, start = lapply(sets[universe], `[[`, "start"),
               index = lapply(sets[universe], `[[`, "index"))
  # room for the engine's results (metric and order by gene, 6 columns by
  # set) and the table's 12 columns: one collection here, not one at each
  # fifth of the heap's growth while they are made
  genes_n <- lengths(genes)
  sets_n <- vapply(sets, function(gs) length(gs$names), 1L)[universe]
  reserve_heap(sum(12 * as.double(genes_n) + 44 * as.double(sets_n)) + 96 * sum(as.double(sets_n)), "stats",
               "the signatures' results")
  t_engine <- proc.time()[["elapsed"]]
  rs <- alloc_guard(.Call(ffi_gsea_multi, data, params, run_list(a, verbose)), "stats",
                    what = "the signatures' null statistics")
  t_tables <- proc.time()[["elapsed"]]
  out <- gsea_multisig_table(rs, snames, genes, sets, universe, weight, seed, eps, sampleSize, nperm, pvalue, a, verbose)
  structure(out,
            class = c("rapidGSEAmulti", "rapidGSEA", "data.frame"),
            signatures = snames, stats = sigs, sets = sets, universe = universe,
            nperm = nperm, seed = seed, metric = "preranked", weight = weight,
            permutation = "gene", pvalue = pvalue, eps = eps,
            sampleSize = if (pvalue == "multilevel") as.integer(sampleSize), classes = NULL,
            backend = b$backend, device = b$devices, deviceName = b$deviceName,
            engineSettings = engine_settings("rapidGSEA"),
            stageTime = c(permutations = t_tables - t_engine, tables = proc.time()[["elapsed"]] - t_tables),
            time = proc.time()[["elapsed"]] - t_start)
}

# The signatures' tables, one after another, with a first column
# `signature`: each column in one piece over all signatures; the leading
# edges a lazy column (gsea_genelist_lazy()).  Each signature's rows are
# those of gsea_table() for its own call.
gsea_multisig_table <- function(rs, snames, genes, sets, universe, weight, seed, eps, sampleSize, nperm, pvalue, a,
                                verbose) {
  n_sets <- vapply(sets, function(gs) length(gs$names), 1L)[universe]
  sig <- rep.int(seq_along(snames), n_sets)
  col <- function(k) unlist(lapply(rs, `[[`, k), use.names = FALSE)
  if (pvalue == "multilevel") {
    p <- lapply(seq_along(snames), function(v) {
      gsea_in_signature(snames[[v]], gsea_table_pvalues(rs[[v]], sets[[universe[[v]]]], weight, seed, eps, sampleSize,
                                                        nperm, pvalue, a, verbose))
    })
    pval <- unlist(lapply(p, `[[`, "pval"), use.names = FALSE)
    log2err <- unlist(lapply(p, `[[`, "log2err"), use.names = FALSE)
  } else {
    pval <- col("pval")
    log2err <- rep(NA_real_, length(sig))
  }
  # BH within each signature, as its own call adjusts
  at <- c(0L, cumsum(n_sets))
  padj <- unlist(lapply(seq_along(snames), function(v) stats::p.adjust(pval[seq.int(at[[v]] + 1L, length.out = n_sets[[v]])], "BH")),
                 use.names = FALSE)
  es <- col("es")
  pos <- col("pos")
  source <- new.env(parent = emptyenv())
  list2env(list(sig = sig, set = sequence(n_sets), es = es, pos = pos, order = lapply(rs, `[[`, "order"),
                genes = genes, sets = lapply(sets, `[`, c("start", "index")), universe = universe),
           source)
  out <- list(signature = rep.int(snames, n_sets),
              set = unlist(lapply(sets[universe], `[[`, "names"), use.names = FALSE),
              size = unlist(lapply(sets[universe], `[[`, "size"), use.names = FALSE),
              ES = es, NES = col("nes"), pval = pval, padj = padj, FDR = col("fdr"), FWER = col("fwer"),
              log2err = log2err, rankAtMax = pos + 1L,
              leadingEdge = gsea_genelist_lazy(source))
  out <- structure(out, class = "data.frame", row.names = .set_row_names(length(sig)))
  bad <- which(!is.finite(out$NES) | is.na(out$pval) | is.na(out$FDR) | is.na(out$FWER))
  for (rows in split(bad, sig[bad])) { # the warning of each signature's own call: its undefined rows
    cols <- lapply(unclass(out)[c("set", "NES", "pval", "FDR", "FWER")], `[`, rows)
    gsea_in_signature(snames[[sig[[rows[[1L]]]]]], gsea_warn_undefined(cols, nperm))
  }
  out
}

#' One signature of a many-signature rapidGSEA result
#'
#' Takes the rows of one signature out of a result of
#' `rapidGSEA(stats = <matrix or list>)` as an ordinary `rapidGSEA`
#' result: the table without the `signature` column, with its ranking and
#' members, so that [plot.rapidGSEA()], [gseaOverview()], [fgseaTable()]
#' and `summary()` work on it. Its rows are those of a call of
#' [rapidGSEA()] with that signature alone and the same `seed`.
#'
#' @param x A `rapidGSEAmulti` result.
#' @param signature The signature's name (or its number).
#' @return A data.frame of class `"rapidGSEA"` (see [rapidGSEA()]).
#' @seealso [rapidGSEA()], [plot.rapidGSEAmulti()]
#' @examples
#' set.seed(1)
#' m <- matrix(rnorm(1000 * 3), 1000, dimnames = list(paste0("g", 1:1000), c("c1", "c2", "c3")))
#' m[1:40, "c2"] <- m[1:40, "c2"] + 1
#' sets <- list(up = paste0("g", 1:40), random = paste0("g", sample(1000, 40)))
#' res <- rapidGSEA(stats = m, geneSets = sets, nperm = 200, seed = 1, backend = "cpu", threads = 1)
#' res
#' gseaSignature(res, "c2")
#' @export
gseaSignature <- function(x, signature) {
  if (!inherits(x, "rapidGSEAmulti") || is.null(attr(x, "signatures"))) {
    stop_input("`x` must be a whole result of rapidGSEA(stats = <matrix or list>), not ", arg_label(x))
  }
  v <- gsea_pick_signature(x, signature)
  name <- attr(x, "signatures")[[v]]
  rows <- which(x$signature == name)
  cols <- unclass(x)[setdiff(names(x), "signature")]
  cols <- lapply(cols, function(col) col[rows])
  out <- structure(cols, class = "data.frame", row.names = .set_row_names(length(rows)))
  gs <- attr(x, "sets")[[attr(x, "universe")[[v]]]]
  s <- gsea_signature_stats(attr(x, "stats"), v)
  genes <- names(s)
  metric <- unname(s)
  metric[metric == 0] <- 0 # -0 ranks as 0, as in the engine
  # the engine's order: descending metric, ties by the gene's position
  rm <- gsea_rank_members(order(-metric, method = "radix") - 1L, gs, genes)
  keep <- c("nperm", "seed", "metric", "weight", "permutation", "pvalue", "eps", "sampleSize", "classes", "backend",
            "device", "deviceName", "engineSettings")
  a <- attributes(x)[intersect(keep, names(attributes(x)))]
  do.call(structure, c(list(out, class = c("rapidGSEA", "data.frame"),
                            ranking = stats::setNames(metric[rm$ord], genes[rm$ord]), members = rm$members),
                       a, list(time = attr(x, "time"))))
}

gsea_pick_signature <- function(x, signature, arg = "signature") {
  sn <- attr(x, "signatures")
  if (is.numeric(signature) && length(signature) == 1L && !is.na(signature) && signature >= 1 &&
      signature <= length(sn) && signature == round(signature)) {
    return(as.integer(signature))
  }
  if (is.character(signature) && length(signature) == 1L && !is.na(signature) && signature %in% sn) {
    return(match(signature, sn))
  }
  stop_input("`", arg, "`: ", arg_label(signature), " is not a signature of this result (",
             paste0("'", utils::head(sn, 5L), "'", collapse = ", "), if (length(sn) > 5L) ", ..." else "", ")",
             call = NULL)
}

#' @export
print.rapidGSEAmulti <- function(x, n = 10L, ...) {
  if (is.null(attr(x, "signatures"))) return(NextMethod())
  sn <- attr(x, "signatures")
  cat(sprintf("<rapidGSEA> %d signatures, %d rows (signature x gene set), %s permutations (gene), weight %g\n",
              length(sn), nrow(x), format(attr(x, "nperm"), big.mark = ","), attr(x, "weight")))
  dev <- if (attr(x, "backend") == "gpu") sprintf("GPU %s (%s)", paste(attr(x, "device"), collapse = ", "), attr(x, "deviceName")) else "CPU"
  cat(sprintf("  %s, %.2f s, seed %s\n", dev, attr(x, "time"), format(attr(x, "seed"), scientific = FALSE)))
  if (nrow(x) == 0L) return(invisible(x))
  top <- as.data.frame(unclass(x)[intersect(c("signature", "set", "size", "ES", "NES", "pval", "padj", "FDR"), names(x))])[seq_len(min(n, nrow(x))), ]
  for (k in c("signature", "set")) top[[k]] <- ifelse(nchar(top[[k]]) > 24, paste0(substr(top[[k]], 1, 21), "..."), top[[k]])
  print(gsea_format_table(top, attr(x, "nperm")), right = TRUE, row.names = FALSE)
  if (nrow(x) > n) cat(sprintf("  ... %d more rows; gseaSignature(x, name) gives one signature's result\n", nrow(x) - n))
  invisible(x)
}

#' @export
summary.rapidGSEAmulti <- function(object, ...) {
  if (is.null(attr(object, "signatures"))) return(NextMethod())
  sn <- attr(object, "signatures")
  f <- factor(object$signature, levels = sn)
  cnt <- function(ok) as.integer(tapply(ok, f, sum, na.rm = TRUE, default = 0L))
  s <- data.frame(signature = sn, sets = as.integer(table(f)),
                  up = cnt(object$NES > 0), down = cnt(object$NES < 0),
                  fdr25up = cnt(object$FDR < 0.25 & object$NES > 0), fdr25down = cnt(object$FDR < 0.25 & object$NES < 0),
                  padj05 = cnt(object$padj < 0.05), stringsAsFactors = FALSE)
  structure(list(bySignature = s, nperm = attr(object, "nperm"), pvalue = attr(object, "pvalue"),
                 backend = attr(object, "backend"), time = attr(object, "time")),
            class = "summary.rapidGSEAmulti")
}

#' @export
print.summary.rapidGSEAmulti <- function(x, ...) {
  cat(sprintf("rapidGSEA: %d signatures, %s permutations (%s p-values) on the %s in %.2f s\n",
              nrow(x$bySignature), format(x$nperm, big.mark = ","), x$pvalue, toupper(x$backend), x$time))
  print(x$bySignature, row.names = FALSE)
  invisible(x)
}

#' Plot one set of one signature of a many-signature result
#'
#' The running-sum plot of [plot.rapidGSEA()] for one signature of a
#' result of `rapidGSEA(stats = <matrix or list>)`.
#'
#' @param x A `rapidGSEAmulti` result.
#' @param set Name (or row number within the signature) of the set; default
#'   as [plot.rapidGSEA()].
#' @param signature Name (or number) of the signature; default the
#'   signature of the row with the smallest `pval`.
#' @param ... Passed to [plot.rapidGSEA()] (`main`).
#' @return `x`, invisibly.
#' @seealso [gseaSignature()]
#' @export
plot.rapidGSEAmulti <- function(x, set = NULL, signature = NULL, ...) {
  if (is.null(signature)) signature <- x$signature[[which.min(x$pval)]]
  plot(gseaSignature(x, signature), set = set, ...)
  invisible(x)
}
