# rapidGSEA()'s surface: the padj column and printed bounds, Bioconductor
# containers, degenerate and overflowing data, reader errors,
# as.data.frame()/write.csv(), plots, and Broad's statistics
# with ties against a plain-R oracle.

cpu <- function(...) rapidGSEA(..., backend = "cpu", verbose = FALSE)
cols <- c("ES", "NES", "pval", "padj", "FDR", "FWER", "rankAtMax")

# ---- columns and printing ------------------------------------------------

test_that("padj is the Benjamini-Hochberg adjustment of pval", {
  d <- gsea_toy(G = 300)
  sets <- c(d$sets, stats::setNames(lapply(1:8, function(i) sample(rownames(d$x), 20)), paste0("r", 1:8)))
  res <- cpu(d$x, d$y, sets, nperm = 200, minSize = 5, seed = 2, threads = 1)
  expect_identical(res$padj, stats::p.adjust(res$pval, "BH"))
  # BH written out: min over j >= i of p_(j) * m / j, capped at 1
  p <- res$pval
  o <- order(p)
  bh <- pmin(1, rev(cummin(rev(p[o] * length(p) / seq_along(p)))))
  expect_equal(res$padj[o], bh)
  expect_identical(names(res)[5:8], c("pval", "padj", "FDR", "FWER"))
  st <- gseaStats(res$ES, matrix(stats::runif(length(p) * 50, -0.5, 0.5), length(p)))
  expect_identical(st$padj, stats::p.adjust(st$pval, "BH"))
})

test_that("print shows a bound '< 1/nperm' where a probability is estimated as 0", {
  d <- gsea_toy(G = 300, shift = 3)
  res <- cpu(d$x, d$y, d$sets, nperm = 100, minSize = 5, seed = 1, threads = 1)
  expect_equal(res$pval[[1L]], 0)
  out <- capture.output(print(res))
  row <- grep("^ *up ", out, value = TRUE)
  expect_match(row, "< 1e-02")
  expect_false(grepl(" 0 | 0$| 0\\.000", row))
})

# ---- containers ----------------------------------------------------------

test_that("SummarizedExperiment: `assay` by name or index, phenotype from colData", {
  skip_if_not_installed("SummarizedExperiment")
  d <- gsea_toy(G = 200)
  ref <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)
  noise <- d$x[, sample(ncol(d$x))]
  dimnames(noise) <- dimnames(d$x)
  se <- SummarizedExperiment::SummarizedExperiment(list(other = noise, counts = d$x),
                                                   colData = data.frame(group = d$y, batch = 1:12))
  by_name <- cpu(se, "group", d$sets, assay = "counts", nperm = 50, minSize = 5, seed = 1, threads = 1)
  by_index <- cpu(se, d$y, d$sets, assay = 2, nperm = 50, minSize = 5, seed = 1, threads = 1)
  expect_identical(by_name[cols], ref[cols])
  expect_identical(by_index[cols], ref[cols])
  expect_identical(attr(by_name, "classes"), c("A", "B"))
  # today's silent choice of the first assay is now an error that names them
  expect_error(cpu(se, "group", d$sets, nperm = 5, minSize = 5, seed = 1),
               "has 2 assays \\('other', 'counts'\\): choose one with `assay`", class = "sysbioGPU_error_input")
  expect_error(cpu(se, "group", d$sets, assay = "logcounts", nperm = 5, minSize = 5),
               "`assay` = 'logcounts' is not an assay", class = "sysbioGPU_error_input")
  expect_error(cpu(se, "group", d$sets, assay = 3, nperm = 5, minSize = 5),
               "index in \\[1, 2\\]", class = "sysbioGPU_error_input")
  expect_error(cpu(se, "grp", d$sets, assay = 2, nperm = 5, minSize = 5),
               "'grp' is neither a colData column of `expr` \\(columns: 'group', 'batch'\\)",
               class = "sysbioGPU_error_input")
  expect_error(cpu(se, NA_character_, d$sets, assay = 2, nperm = 5, minSize = 5), "`phenotype` is NA",
               class = "sysbioGPU_error_input")
  expect_error(cpu(se, "batch", d$sets, assay = 2, nperm = 5, minSize = 5),
               "exactly 2 classes, it has 12", class = "sysbioGPU_error_input")
  expect_error(cpu(d$x, d$y, d$sets, assay = 1, nperm = 5, minSize = 5),
               "`assay` applies to a SummarizedExperiment", class = "sysbioGPU_error_input")
  one <- SummarizedExperiment::SummarizedExperiment(list(counts = d$x), colData = data.frame(group = d$y))
  expect_identical(cpu(one, "group", d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)[cols], ref[cols])
})

test_that("ExpressionSet: phenotype from pData, `assay` among assayData", {
  skip_if_not_installed("Biobase")
  d <- gsea_toy(G = 200)
  ref <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)
  colnames(d$x) <- paste0("s", 1:12)
  pd <- Biobase::AnnotatedDataFrame(data.frame(group = factor(d$y), row.names = colnames(d$x)))
  es <- Biobase::ExpressionSet(d$x, phenoData = pd)
  got <- cpu(es, "group", d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)
  expect_identical(got[cols], ref[cols])
  expect_identical(cpu(es, "group", d$sets, assay = "exprs", nperm = 50, minSize = 5, seed = 1,
                       threads = 1)[cols], ref[cols])
  expect_error(cpu(es, "type", d$sets, nperm = 5, minSize = 5), "neither a pData column",
               class = "sysbioGPU_error_input")
  expect_error(cpu(es, "group", d$sets, assay = "counts", nperm = 5, minSize = 5), "not an assay",
               class = "sysbioGPU_error_input")
})

test_that("a named list and a GeneSetCollection give the same table", {
  skip_if_not_installed("GSEABase")
  d <- gsea_toy(G = 200)
  ref <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)
  gsc <- GSEABase::GeneSetCollection(mapply(function(g, n) GSEABase::GeneSet(g, setName = n),
                                            d$sets, names(d$sets)))
  expect_identical(cpu(d$x, d$y, gsc, nperm = 50, minSize = 5, seed = 1, threads = 1)[cols], ref[cols])
})

# ---- degenerate data -----------------------------------------------------

test_that("the sets' members: each listed gene once, in gene order, absent ones dropped", {
  set.seed(9)
  genes <- paste0(sample(c("a", "B", "c"), 50, TRUE), 1:50)
  sets <- lapply(1:30, function(i) sample(c(genes, "zz", toupper(genes[1:5])), sample(0:90, 1), TRUE))
  names(sets) <- paste0("s", seq_along(sets))
  for (ic in c(FALSE, TRUE)) {
    idx <- lapply(sets, function(s) {
      h <- match(s, genes)
      if (ic) h[is.na(h)] <- match(toupper(s[is.na(h)]), toupper(genes))
      sort(unique(h[!is.na(h)])) - 1L
    })
    k <- lengths(idx)
    keep <- k >= 3 & k <= 40
    gs <- sysbioGPU:::gsea_sets(sets, genes, 3, 40, ignoreCase = ic)
    expect_identical(gs$names, names(sets)[keep])
    expect_identical(gs$size, unname(k[keep]))
    expect_identical(gs$index, unname(unlist(idx[keep])))
    expect_identical(gs$start, c(0L, cumsum(unname(k[keep]))))
  }
  expect_true(any(vapply(sets, anyDuplicated, 0L) > 0)) # duplicates to drop
})

test_that("the scan of `expr` counts its tiny values, names the first, and finds a single varying value", {
  d <- gsea_toy(G = 300)
  x <- d$x
  x[c(7, 250), 3] <- c(-3e-310, 2e-310)
  x[11, 1] <- 5e-311 # the first tiny value column by column
  expect_error(cpu(x, d$y, d$sets, nperm = 10, minSize = 5, metric = "diff_of_classes"),
               "has 3 values too small for the metric .*e\\.g\\. 5e-311", class = "sysbioGPU_error_numeric")
  # every gene constant but one value in the last sample: not a constant metric
  k <- matrix(rep(seq_len(300), ncol(d$x)), 300, dimnames = dimnames(d$x))
  k[300, ncol(k)] <- 0
  expect_warning(cpu(k, d$y, d$sets, nperm = 10, minSize = 5, metric = "diff_of_classes", seed = 1),
                 "298 of 300 genes", class = "sysbioGPU_warning_ties")
  k[300, ncol(k)] <- 300
  expect_error(cpu(k, d$y, d$sets, nperm = 10, minSize = 5), "every gene of `expr` is constant",
               class = "sysbioGPU_error_input")
  # the largest magnitude in the first gene alone (the scan's first row)
  big <- d$x
  big[1, ] <- d$x[1, ] * 1e160
  expect_error(cpu(big, d$y, d$sets, nperm = 10, minSize = 5), "values up to .*class variances",
               class = "sysbioGPU_error_numeric")
})

test_that("a constant ranking metric is an error", {
  d <- gsea_toy(G = 100)
  flat <- d$x
  flat[] <- 3
  expect_error(cpu(flat, d$y, d$sets, nperm = 10, minSize = 5),
               "every gene of `expr` is constant", class = "sysbioGPU_error_input")
  zero <- stats::setNames(numeric(100), rownames(d$x))
  expect_error(cpu(zero, geneSets = d$sets, nperm = 10, minSize = 5),
               "preranked `expr` is constant \\(every value is 0\\)", class = "sysbioGPU_error_input")
  # every row the same profile: each gene has the same metric
  same <- matrix(rep(stats::rnorm(12), each = 100), 100, dimnames = dimnames(d$x))
  expect_error(cpu(same, d$y, d$sets, nperm = 10, minSize = 5),
               "the ranking metric is the same .* for every gene", class = "sysbioGPU_error_input")
})

test_that("many tied metric values give a warning that says how many", {
  set.seed(4)
  r <- stats::setNames(round(stats::rnorm(400), 1), paste0("g", 1:400))
  sets <- list(a = paste0("g", 1:30), b = paste0("g", 31:80))
  n_dup <- sum(duplicated(r))
  expect_warning(res <- cpu(r, geneSets = sets, nperm = 10, minSize = 5, seed = 1),
                 sprintf("%d of 400 genes \\(%.1f%%\\) tie", n_dup, 100 * n_dup / 400),
                 class = "sysbioGPU_warning_ties")
  expect_s3_class(res, "rapidGSEA")
  # a few ties (below 1% of the genes) pass quietly
  r2 <- stats::setNames(stats::rnorm(400), names(r))
  r2[2:3] <- r2[[1L]]
  expect_no_warning(cpu(r2, geneSets = sets, nperm = 10, minSize = 5, seed = 1))
  # phenotype permutations: the observed metric's ties (constant genes)
  d <- gsea_toy(G = 200)
  d$x[101:150, ] <- 1
  expect_warning(cpu(d$x, d$y, d$sets, nperm = 10, minSize = 5, seed = 1),
                 "49 of 200 genes \\(24.5%\\) tie", class = "sysbioGPU_warning_ties")
})

test_that("overflowing values are an error, or computed exactly: never a changed NES", {
  d <- gsea_toy(G = 300)
  ref <- cpu(d$x, d$y, d$sets, nperm = 100, minSize = 5, seed = 1, threads = 1)
  # signal2noise is scale-free per gene: 2^400 (1e120) scales exactly
  big <- d$x
  big[1:20, ] <- big[1:20, ] * 2^400
  expect_identical(cpu(big, d$y, d$sets, nperm = 100, minSize = 5, seed = 1, threads = 1)[cols], ref[cols])
  # 1e160: the class variances overflow (NES changed by 28% before)
  big[1:20, ] <- d$x[1:20, ] * 1e160
  expect_error(cpu(big, d$y, d$sets, nperm = 100, minSize = 5, seed = 1),
               "class variances of 12 samples overflow", class = "sysbioGPU_error_numeric")
  expect_error(cpu(big, d$y, d$sets, nperm = 10, minSize = 5, metric = "t_test"),
               "overflow", class = "sysbioGPU_error_numeric")
  # the sums of diff_of_classes still fit: computed, and equal to the plain R value
  dd <- cpu(big, d$y, d$sets, nperm = 10, minSize = 5, seed = 1, metric = "diff_of_classes")
  lab <- as.integer(d$y == "B")
  expect_equal(unname(attr(dd, "ranking")[rownames(big)]), unname(gsea_ref_metric(big, lab, "diff_of_classes")),
               tolerance = 1e-12)
  # subnormal values (ratios of 1e-320 gave ES 0, NES NaN)
  tiny <- (abs(d$x) + 0.5) * 1e-320
  expect_error(cpu(tiny, d$y, d$sets, nperm = 10, minSize = 5, metric = "ratio_of_classes"),
               "too small for the metric", class = "sysbioGPU_error_numeric")
  # values whose squares underflow (x 1e-300 changed NES under signal2noise)
  expect_error(cpu(d$x * 1e-300, d$y, d$sets, nperm = 10, minSize = 5),
               "their squares underflow", class = "sysbioGPU_error_numeric")
  pos <- abs(d$x) + 0.1
  pos[1, 1] <- 1e10
  pos[2, 1] <- 1e-300
  expect_error(cpu(pos, d$y, d$sets, nperm = 10, minSize = 5, metric = "log2_ratio_of_classes"),
               "their ratio overflows", class = "sysbioGPU_error_numeric")
  # normal values whose class ratio is 1e-320 (subnormal): refused too
  pos <- abs(d$x) + 0.1
  pos[1, ] <- ifelse(d$y == "A", 1e-300, 1e20)
  expect_error(cpu(pos, d$y, d$sets, nperm = 10, minSize = 5, metric = "ratio_of_classes"),
               "range from 1e-300 to 1e\\+20: their ratio overflows", class = "sysbioGPU_error_numeric")
  pos[1, ] <- ifelse(d$y == "A", 1e-10, 1e10)
  expect_error(cpu(pos, d$y, d$sets, nperm = 10, minSize = 5, metric = "ratio_of_classes", weight = 50),
               "`weight` = 50 underflows", class = "sysbioGPU_error_numeric")
  r20 <- cpu(pos, d$y, d$sets, nperm = 10, minSize = 5, metric = "ratio_of_classes", seed = 1)
  expect_equal(unname(attr(r20, "ranking")[rownames(pos)]),
               unname(gsea_ref_metric(pos, as.integer(d$y == "B"), "ratio_of_classes")), tolerance = 1e-12)
  # weight = 1e6: |metric|^weight overflows (gave ES 0 before)
  expect_error(cpu(d$x, d$y, d$sets, nperm = 10, minSize = 5, weight = 1e6),
               "`weight` = 1e\\+06 overflows", class = "sysbioGPU_error_numeric")
  r <- stats::setNames(stats::runif(300, 0.001, 1), rownames(d$x))
  expect_error(cpu(r, geneSets = d$sets, nperm = 10, minSize = 5, weight = 200),
               "`weight` = 200 underflows", class = "sysbioGPU_error_numeric")
  # a weight that fits is computed: equal to the plain running sum
  res <- cpu(r, geneSets = d$sets, nperm = 10, minSize = 5, weight = 90, seed = 1)
  ranked <- sort(r, decreasing = TRUE)
  expect_equal(res$ES, unname(vapply(d$sets, function(s) gsea_ref_es(ranked, s, 90)[["ES"]], 0)),
               tolerance = 1e-12)
})

test_that("the engine keeps an overflowed variance NaN instead of 0 (gsea_math.h)", {
  d <- gsea_toy(G = 50)
  x <- d$x
  x[1, ] <- x[1, ] * 1e160
  lab <- as.integer(d$y == "B")
  gs <- sysbioGPU:::gsea_sets(d$sets, rownames(x), 5, 500)
  job <- list(expr = x, labels = lab, ranking = NULL, start = gs$start, index = gs$index, metric = 0L,
              weight = 1, gene = FALSE, seed = 1, nperm = 1, batch = 0, cache = -1, keepNull = FALSE,
              gpu = FALSE, threads = 1L, devices = 0L)
  r <- sysbioGPU:::gsea_engine(job, 0L, c(0, 0), NULL, 0L, FALSE)
  expect_true(is.nan(r$metric[[1L]]))      # was a finite, wrong value
  expect_true(all(is.finite(r$metric[-1L])))
  expect_error(sysbioGPU:::gsea_check_metric(r$metric, 1), "not finite for 1 genes",
               class = "sysbioGPU_error_numeric")
})

test_that("gseaStats() refuses ES outside [-1, 1]; the exact sums check |ES| < 2", {
  es <- c(0.5, -0.5)
  null <- matrix(c(2, -2, 0.3, -0.3, 2, -2), 2)
  # the defect: nulls of +-2 wrapped the 128-bit sums and flipped the sign of NES
  expect_error(gseaStats(es, null), "`esNull` has 4 values outside \\[-1, 1\\] \\(e.g. 2\\)",
               class = "sysbioGPU_error_input")
  expect_error(gseaStats(0.5, matrix(1 + 1e-9, 1, 2)), "\\(e.g. 1.000000001\\)", class = "sysbioGPU_error_input")
  expect_error(gseaStats(c(1.5, 0), matrix(0.1, 2, 3)), "`es` has 1 values outside",
               class = "sysbioGPU_error_input")
  # below R's check, the C statistics refuse what the sums cannot hold
  expect_error(.Call(sysbioGPU:::ffi_gsea_stats, es, null, 1L), "set 1, permutation 1 is 2: the exact sums hold",
               class = "sysbioGPU_error_input")
  ok <- null
  ok[abs(ok) == 2] <- sign(ok[abs(ok) == 2]) * (1.999)
  expect_equal(.Call(sysbioGPU:::ffi_gsea_stats, es, ok, 1L)$nes, gsea_ref_stats(es, ok)$NES)
  # 1 and -1 exactly, and rounding just above, are scores
  edge <- matrix(c(1, -1, 1 + 2^-52, -1 - 2^-52, 0.5, -0.5), 2)
  expect_equal(gseaStats(c(1, -1), edge)$NES, gsea_ref_stats(c(1, -1), edge)$NES)
})

# ---- Broad's statistics with ties ----------------------------------------

test_that("statistics with exact ties follow Broad's > and >= (plain-R oracle)", {
  set.seed(8)
  grid <- c(-0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75) # exact in binary
  base <- sample(grid, 400, TRUE)
  # rows are shuffles of one vector: every set has the same normalisers, so
  # observed and null NES tie across sets as well as within them
  null <- t(vapply(1:10, function(i) sample(base), base))
  es <- c(0.75, 0.5, 0.25, 0, -0.25, -0.5, -0.75, 0.5, -0.5, 0.25)
  st <- gseaStats(es, null)
  ref <- gsea_ref_stats(es, null)
  expect_identical(st$NES, ref$NES)
  expect_identical(st$pval, ref$pval)
  expect_identical(st$FWER, ref$FWER)
  expect_equal(st$FDR, ref$FDR, tolerance = 1e-8) # integer units of 2^-52
  # the cases discriminate: >= in place of > (and > for >=) changes them
  ge <- vapply(seq_along(es), function(s) {
    v <- null[s, ]
    if (es[[s]] >= 0) sum(v >= es[[s]] & v >= 0) / sum(v >= 0) else sum(v <= es[[s]] & v <= 0) / sum(v <= 0)
  }, 0)
  expect_gt(sum(ge != st$pval), 5)
  z <- null / rowMeans(ifelse(null >= 0, null, NA), na.rm = TRUE)
  z[null < 0] <- (null / -rowMeans(ifelse(null <= 0, null, NA), na.rm = TRUE))[null < 0]
  fwer_ge <- ifelse(st$NES >= 0, vapply(st$NES, function(v) mean(apply(z, 2, max) >= v), 0),
                    vapply(st$NES, function(v) mean(apply(z, 2, min) <= v), 0))
  expect_gt(sum(fwer_ge != st$FWER), 3)
  fdr_gt <- vapply(st$NES[st$NES > 0], function(v) {
    tot <- colSums(z >= 0)
    min(1, mean((colSums(z > v) / tot)[tot > 0]) / (sum(st$NES > v) / sum(st$NES >= 0)))
  }, 0)
  expect_false(isTRUE(all.equal(fdr_gt, st$FDR[st$NES > 0], tolerance = 1e-6)))
})

# ---- files ---------------------------------------------------------------

test_that("invalid UTF-8, huge labels and NA genes give classed errors naming file and line", {
  bad <- function(lines, ext) {
    f <- tempfile(fileext = ext)
    writeLines(lines, f, useBytes = TRUE)
    f
  }
  latin1 <- "caf\xe9"
  f <- bad(c("#1.2", "1\t2", "NAME\tDescription\ta\tb", paste0("g1\t", latin1, "\t1\t2")), ".gct")
  expect_error(readGCT(f), paste0(basename(f), "', line 4: is not valid UTF-8"), class = "sysbioGPU_error_input")
  f <- bad(c("6 2 1", paste("# a", latin1), "a a a b b b"), ".cls")
  expect_error(readCLS(f), "line 2: is not valid UTF-8", class = "sysbioGPU_error_input")
  f <- bad(c("s1\td\tA\tB", paste0("s2\td\t", latin1)), ".gmt")
  expect_error(readGMT(f), "line 2: is not valid UTF-8", class = "sysbioGPU_error_input")
  f <- bad(c("6 2 1", "# a b", "0 0 1 1 1 99999999999999999999"), ".cls")
  expect_error(readCLS(f), "line 3: label '99999999999999999999' is not one of the classes.*count from 0 to 1",
               class = "sysbioGPU_error_input")
  f <- bad(c("6 2 1", "# a b", paste("a a b b b", strrep("x", 1e5))), ".cls")
  err <- expect_error(readCLS(f), "line 3: label 'xxx.*\\.\\.\\.' is not one of", class = "sysbioGPU_error_input")
  expect_lt(nchar(conditionMessage(err)), 300)
  # line numbers count the blank lines too
  f <- bad(c("6 2 1", "", "# a b", "", "a a b", "b b c"), ".cls")
  expect_error(readCLS(f), "line 6: label 'c' is not one of the classes named on line 3",
               class = "sysbioGPU_error_input")
  expect_error(writeGMT(list(s = c("A", NA)), tempfile()), "gene set 's' has NA genes",
               class = "sysbioGPU_error_input")
  expect_error(writeGMT(list(s = "A"), tempfile(), description = NA_character_), "without NA",
               class = "sysbioGPU_error_input")
  # the readers' R code raises no unclassed error
  for (fn in list(sysbioGPU::readGCT, sysbioGPU::readCLS, sysbioGPU::readGMT, sysbioGPU::writeGMT,
                  sysbioGPU::rapidGSEA, sysbioGPU::gseaStats)) {
    expect_false(any(grepl("\\bstop(ifnot)?\\(", deparse(fn))))
  }
})

# ---- results for reports -------------------------------------------------

test_that("as.data.frame() has atomic columns and write.csv() of the result reads back", {
  d <- gsea_toy(G = 300)
  res <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)
  df <- as.data.frame(res)
  expect_identical(class(df), "data.frame")
  expect_true(all(vapply(df, is.atomic, TRUE)))
  expect_identical(df$leadingEdge, vapply(res$leadingEdge, paste, "", collapse = ","))
  expect_identical(df[cols], as.data.frame(unclass(res)[cols]))
  expect_null(attr(df, "ranking"))
  f <- tempfile(fileext = ".csv")
  utils::write.csv(res, f, row.names = FALSE)
  # log2err is all NA for permutation p-values: read.csv() reads it as logical
  read_back <- function(f) transform(utils::read.csv(f, stringsAsFactors = FALSE), log2err = as.double(log2err))
  back <- read_back(f)
  expect_equal(back, df, tolerance = 1e-14)
  expect_identical(strsplit(back$leadingEdge, ",", fixed = TRUE), unclass(res$leadingEdge))
  # a row subset too, and via as.data.frame()
  utils::write.csv(res[3:2, ], f, row.names = FALSE)
  expect_equal(read_back(f), df[3:2, ], tolerance = 1e-14, ignore_attr = TRUE)
  utils::write.csv(df, f, row.names = FALSE)
  expect_equal(read_back(f), df, tolerance = 1e-14)
  expect_output(print(res[1:2, c("set", "leadingEdge")]), "G")
})

test_that("plots: Broad's figure with classes and metric, and the overview page", {
  d <- gsea_toy(G = 300)
  res <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  on.exit(grDevices::dev.off())
  expect_silent(plot(res, "up"))
  expect_silent(shown <- gseaOverview(res))
  expect_identical(shown$set, res$set[order(res$pval, -abs(res$NES))])
  expect_identical(gseaOverview(res, sets = c("rnd2", "up"))$set, c("rnd2", "up"))
  expect_identical(nrow(gseaOverview(res, n = 2)), 2L)
  expect_error(gseaOverview(res, sets = "nope"), "`sets`: \"nope\" is not a set", class = "sysbioGPU_error_input")
  expect_error(gseaOverview(res[, 1:3]), "lost its ranking", class = "sysbioGPU_error_input")
  expect_error(gseaOverview(1:3), "must be a rapidGSEA result", class = "sysbioGPU_error_input")
  # what the figure says: the classes and the metric's name
  expect_identical(sysbioGPU:::gsea_class_labels(res)[[1L]], "'A' (class A, positively correlated)")
  expect_identical(sysbioGPU:::gsea_metric_label(res), "Ranked list metric (signal2noise)")
  # the compact running sum is the full one at every rank
  rs <- sysbioGPU:::gsea_running_sum(res, 2L)
  ranked <- attr(res, "ranking")
  hit <- names(ranked) %in% d$sets$mixed
  w <- abs(ranked)
  full <- cumsum(ifelse(hit, w / sum(w[hit]), -1 / (length(ranked) - sum(hit))))
  expect_equal(stats::approx(rs$x, rs$y, xout = seq_along(full), ties = "ordered")$y, full, tolerance = 1e-12)
  expect_equal(max(abs(rs$y)), abs(res$ES[[2L]]), tolerance = 1e-12)
})
