# rapidGSEA as a Bioconductor user meets it: exact gene names, honest
# multilevel p-values near 1, errors that name the function called and
# hint at the argument order, the class of interest named, fgsea's table.

test_that("gene names match exactly: IGK and Igk are two genes", {
  set.seed(3)
  g <- c("IGK", "Igk", sprintf("G%03d", 1:298))  # human and mouse symbols in one list
  stats <- stats::setNames(stats::rnorm(300), g)
  stats[["IGK"]] <- 4
  stats[["Igk"]] <- -4
  sets <- list(human = c("IGK", g[3:22]), mouse = c("Igk", g[23:42]), lower = c("igk", g[43:62]))
  expect_identical(anyDuplicated(names(stats)), 0L)
  res <- rapidGSEA(stats, geneSets = sets, nperm = 200, seed = 1, backend = "cpu", threads = 1)
  m <- attr(res, "members")
  expect_true("IGK" %in% m$human && !("Igk" %in% m$human))
  expect_true("Igk" %in% m$mouse && !("IGK" %in% m$mouse))
  expect_false(any(c("IGK", "Igk", "igk") %in% m$lower))   # no such gene: 'igk' matches nothing
  expect_equal(res$size, c(21L, 21L, 20L))
  ranked <- sort(stats, decreasing = TRUE)
  for (i in 1:3) expect_equal(res$ES[[i]], gsea_ref_es(ranked, sets[[i]])[["ES"]], tolerance = 1e-12)
  # an expression matrix with both names works too
  x <- matrix(stats::rnorm(300 * 6), 300, dimnames = list(g, NULL))
  r2 <- rapidGSEA(x, rep(c("a", "b"), each = 3), sets[1:2], nperm = 20, seed = 1, backend = "cpu", threads = 1)
  expect_true("IGK" %in% attr(r2, "members")$human && !("Igk" %in% attr(r2, "members")$human))
  # Broad's habit on request: case folded, then the two names clash, and
  # the message says why
  expect_error(rapidGSEA(stats, geneSets = sets, ignoreCase = TRUE), "'IGK' and 'Igk'.*ignoreCase",
               class = "sysbioGPU_error_input")
  s2 <- stats[-2]
  r3 <- rapidGSEA(s2, geneSets = sets["lower"], nperm = 20, seed = 1, backend = "cpu", ignoreCase = TRUE)
  expect_true("IGK" %in% attr(r3, "members")$lower)
  # exact duplicates are still an error, with their rows
  expect_error(rapidGSEA(c(stats, G001 = 1), geneSets = sets), "'G001' \\(rows 3 and 301\\)",
               class = "sysbioGPU_error_input")
})

test_that("a random preranked list gets p = 1 only where every same-sign null ES beats the set", {
  # the shape of the failing case: many sets of a random list, several with
  # an ES smaller than most random sets' of their size
  set.seed(42)
  G <- 1000
  stats <- stats::setNames(stats::rnorm(G), paste0("g", seq_len(G)))
  sizes <- rep(c(20L, 45L, 90L), each = 20L)
  sets <- lapply(sizes, function(k) sample(names(stats), k))
  names(sets) <- paste0("s", seq_along(sets))
  res <- rapidGSEA(stats, geneSets = sets, nperm = 100, seed = 1, backend = "cpu", threads = 1)
  # oracle: the same-sign fraction of random sets of the size at or beyond
  # the ES, from 1,000 random sets per size scored in R
  ranked <- sort(stats, decreasing = TRUE)
  null <- lapply(c(20L, 45L, 90L), function(k) replicate(1000, gsea_ref_es(ranked, sample(names(stats), k))[["ES"]]))
  names(null) <- c("20", "45", "90")
  frac <- vapply(seq_along(sets), function(i) {
    nl <- null[[as.character(sizes[[i]])]]
    es <- res$ES[[i]]
    if (es >= 0) mean(nl[nl >= 0] >= es) else mean(nl[nl <= 0] <= es)
  }, 0)
  ones <- res$pval == 1
  # with about 500 same-sign random sets, p = 1 needs a set below (almost) all of them
  expect_true(all(frac[ones] < 0.01))
  expect_lt(sum(ones), 3)
  # where the count decides p, it agrees with the oracle (binomial error)
  mid <- res$pval > 0.1
  expect_gt(sum(mid), 20)
  expect_lt(max(abs(res$pval[mid] - frac[mid])), 0.12)
  expect_true(all(res$pval <= 1))
})

test_that("errors name the function called, and a wrong object by its kind", {
  stats <- stats::setNames(stats::rnorm(100), paste0("g", 1:100))
  e <- tryCatch(rapidGSEA(stats, geneSets = list(a = "nothere"), nperm = 10), error = identity)
  expect_s3_class(e, "sysbioGPU_error_input")
  expect_match(conditionMessage(e), "no gene set left")     # raised in an internal helper
  expect_identical(deparse(conditionCall(e)[[1L]]), "rapidGSEA")
  e <- tryCatch(pbnSteadyState(list(genes = letters, interactions = list(a = 1:3))), error = identity)
  cl <- conditionCall(e)   # no call at all (call. = FALSE) or the function called
  expect_true(is.null(cl) || identical(deparse(cl[[1L]]), "pbnSteadyState"))
  expect_false(grepl("structure\\(|list\\(", conditionMessage(e)))
  expect_match(conditionMessage(e), "a list of length 2")
  # data inline (do.call): the call keeps the function's name only
  e <- tryCatch(do.call(rapidGSEA, list(stats, geneSets = list(a = "nothere"))), error = identity)
  expect_identical(deparse(conditionCall(e)), "rapidGSEA(...)")
  # a check helper's message names the argument, the call the function
  e <- tryCatch(rapidGSEA(stats, geneSets = list(a = names(stats)[1:20]), nperm = -1), error = identity)
  expect_identical(deparse(conditionCall(e)[[1L]]), "rapidGSEA")
  expect_match(conditionMessage(e), "`nperm`")
})

test_that("a phenotype with a preranked vector is an error; swapped arguments get a hint", {
  stats <- stats::setNames(stats::rnorm(200), paste0("g", 1:200))
  sets <- list(a = paste0("g", 1:20), b = paste0("g", 50:80))
  expect_error(rapidGSEA(stats, "cancer", sets), "`phenotype` is given, but `expr` is a preranked",
               class = "sysbioGPU_error_input")
  expect_error(rapidGSEA(sets, stats), "`geneSets` is missing; `expr` looks like gene sets.*rapidGSEA\\(expr, phenotype, geneSets\\)",
               class = "sysbioGPU_error_input")
  expect_error(rapidGSEA(stats, sets), "`geneSets` is missing; the second argument is `phenotype`.*geneSets = sets",
               class = "sysbioGPU_error_input")
  expect_error(rapidGSEA(stats, geneSets = sets, classA = "x"), "`classA`", class = "sysbioGPU_error_input")
})

test_that("classA names the class of interest; the default is the first level", {
  set.seed(5)
  x <- matrix(stats::rnorm(300 * 8), 300, dimnames = list(paste0("G", 1:300), NULL))
  ph <- rep(c("normal", "cancer"), each = 4)
  x[1:25, ph == "cancer"] <- x[1:25, ph == "cancer"] + 1.5   # up in cancer
  sets <- list(upInCancer = paste0("G", 1:25), other = paste0("G", 100:140))
  def <- rapidGSEA(x, ph, sets, nperm = 50, seed = 1, backend = "cpu", threads = 1)
  ca <- rapidGSEA(x, ph, sets, nperm = 50, seed = 1, backend = "cpu", threads = 1, classA = "cancer")
  expect_identical(attr(def, "classes"), c("normal", "cancer"))   # the first value seen
  expect_identical(attr(ca, "classes"), c("cancer", "normal"))
  # oracle: the metric with cancer as the numerator, the running sum in R
  m <- gsea_ref_metric(x, as.integer(ph != "cancer"), "signal2noise")
  ranked <- sort(m, decreasing = TRUE)
  expect_equal(ca$ES, unname(vapply(sets, function(s) gsea_ref_es(ranked, s)[["ES"]], 0)), tolerance = 1e-10)
  expect_gt(ca$ES[[1]], 0.5)
  expect_equal(ca$ES, -def$ES, tolerance = 1e-10)
  # a factor's levels in limma's order (reference first): classA = levels[2]
  f <- factor(ph, levels = c("normal", "cancer"))
  expect_equal(rapidGSEA(x, f, sets, nperm = 50, seed = 1, backend = "cpu", classA = levels(f)[2])$ES, ca$ES)
  expect_error(rapidGSEA(x, ph, sets, classA = "tumour"), "`classA` must name one of the two classes \\('normal', 'cancer'\\)",
               class = "sysbioGPU_error_input")
})

test_that("print() keeps the table's order; fgseaTable() gives fgsea's shape", {
  set.seed(7)
  stats <- stats::setNames(stats::rnorm(500), paste0("g", 1:500))
  stats[1:30] <- stats[1:30] + 2
  sets <- list(random = paste0("g", sample(31:500, 30)), top = paste0("g", 1:30))
  res <- rapidGSEA(stats, geneSets = sets, nperm = 100, seed = 1, backend = "cpu", threads = 1)
  out <- capture.output(print(res))
  rows <- out[grepl("^ *(random|top) ", out)]
  expect_match(rows[[1]], "random")            # the first set given, though its p is larger
  expect_gt(res$pval[[1]], res$pval[[2]])
  srt <- res[order(res$pval), ]
  out <- capture.output(print(srt))
  expect_match(out[grepl("^ *(random|top) ", out)][[1]], "top")
  ft <- fgseaTable(res)
  expect_identical(names(ft), c("pathway", "pval", "padj", "log2err", "ES", "NES", "size", "leadingEdge"))
  expect_identical(ft$pathway, c("random", "top"))
  expect_type(ft$leadingEdge, "list")
  expect_identical(ft$leadingEdge[[2]], as.character(unclass(res$leadingEdge)[[2]]))
  expect_equal(ft$pval, res$pval)
  if (requireNamespace("data.table", quietly = TRUE)) expect_s3_class(ft, "data.table")
  expect_error(fgseaTable(data.frame(a = 1)), "rapidGSEA result", class = "sysbioGPU_error_input")
})
