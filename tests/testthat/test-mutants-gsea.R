# rapidGSEA() behaviour that the one-line mutants of tools/mutants-auto.R
# showed unpinned (tools/mutants-auto-triage-gsea.tsv): the CLS reader's
# header checks, R workers' two phases against a plain-R oracle, the
# multilevel p-values of sets whose members all have a zero metric, the
# plain-count p-values, and Ctrl-C inside one long level.

# ---- readCLS(): the header line ---------------------------------------------

cls_file <- function(lines) {
  f <- tempfile(fileext = ".cls")
  writeLines(lines, f)
  f
}

test_that("readCLS refuses a header announcing no samples or no classes", {
  # m0455
  for (h in c("0 2 1", "3 0 1", "0 0 1")) {
    expect_error(readCLS(cls_file(c(h, "# A B", "A B A"))),
                 "line 1: the first line must be 'nSamples nClasses 1'", class = "sysbioGPU_error_input")
  }
})

test_that("readCLS names the class line and the header line when the class count disagrees", {
  # m0533; the blank first line shifts both line numbers
  f <- cls_file(c("", "3 3 1", "# A B", "A B A"))
  expect_error(readCLS(f), "line 3: names 2 classes, line 2 announces 3", class = "sysbioGPU_error_input")
})

# ---- R workers: phase 1 and phase 2 against plain R --------------------------

test_that("R workers (SerialParam) give Broad's statistics of the plain-R null", {
  # m6611 (phase 2 without its norm), m8301 (phase 2 skipping pass 2)
  skip_if_not_installed("BiocParallel")
  d <- gsea_toy(G = 80, n = c(4, 5), seed = 3)
  sets <- lapply(d$sets, function(s) intersect(s, rownames(d$x)))
  nperm <- 60
  res <- rapidGSEA(d$x, d$y, sets, nperm = nperm, minSize = 5, seed = 9, backend = "cpu", threads = 1,
                   verbose = FALSE, BPPARAM = BiocParallel::SerialParam())
  ref_null <- gsea_ref_null(d$x, d$y, sets[res$set], nperm, seed = 9)
  ref <- gsea_ref_stats(res$ES, ref_null)
  expect_equal(res$NES, ref$NES, tolerance = 1e-12)
  expect_equal(res$pval, ref$pval)
  expect_equal(res$FWER, ref$FWER)
  expect_equal(res$FDR, ref$FDR, tolerance = 1e-8)
})

# ---- multilevel p-values: exact enumeration of a tiny list with zeros ----------

# Every 3-subset of a 16-gene list whose metric is 5 for the top 3 genes and 0
# below: a set of zero-metric genes has unit hit weights (Broad's rule when
# the hit weights sum to 0). Running sums written the obvious way in R.
ml_zero_list <- function() {
  G <- 16L
  m <- stats::setNames(c(5, 5, 5, rep(0, G - 3L)), paste0("g", seq_len(G)))
  w <- abs(m)
  sub <- utils::combn(G, 3L)
  rs <- apply(sub, 2, function(p) {
    hit <- seq_len(G) %in% p
    ww <- if (sum(w[hit]) == 0) rep(1, G) else w
    cumsum(ifelse(hit, ww / sum(ww[hit]), -1 / (G - 3L)))
  })
  es <- rs[cbind(apply(abs(rs), 2, which.max), seq_len(ncol(rs)))]
  plus <- pmax(0, apply(rs, 2, max))
  minus <- pmin(0, apply(rs, 2, min))
  # p of a set: P(ES+ >= its ES+ | ES >= 0), mirrored for a negative ES
  exact <- function(p) {
    j <- which(colSums(sub == sort(p)) == 3L)
    e <- es[[j]]
    pv <- if (e >= 0) mean(plus >= plus[[j]] - 1e-12 & es >= 0) / mean(es >= 0)
          else mean(minus <= minus[[j]] + 1e-12 & es <= 0) / mean(es <= 0)
    c(es = e, p = min(1, pv))
  }
  # a: all zero metric, ES -0.538 (with hits weighing 1.1 its ES would turn
  # positive); b, d: one hit of metric 5 among zeros; c: the top gene
  pos <- list(a = c(8, 9, 10), b = c(4, 5, 16), c = c(1, 12, 13), d = c(5, 14, 15))
  list(m = m, sets = lapply(pos, function(p) names(m)[p]), exact = t(vapply(pos, exact, c(es = 0, p = 0))))
}

test_that("multilevel p of sets with zero-metric members match exact enumeration", {
  # m8547 (the unit hit weight of the multilevel sign)
  z <- ml_zero_list()
  for (seed in 1:2) {
    r <- suppressWarnings(rapidGSEA(z$m, geneSets = z$sets, nperm = 1000, minSize = 3, maxSize = 3, seed = seed,
                                    backend = "cpu", threads = 1, verbose = FALSE))
    expect_equal(r$ES, unname(z$exact[r$set, "es"]), tolerance = 1e-12)
    lr <- log2(r$pval / z$exact[r$set, "p"])
    expect_true(all(abs(lr) < 4 * r$log2err + 0.02), info = paste(round(lr, 3), round(r$log2err, 3)))
  }
})

# (b + 1) / (m + 1) with m <= nSign, and its log2err sqrt(psi1(b + 1) -
# psi1(m + 2)) / log(2), if p is such a count; else NULL.
ml_plain_count <- function(p, err, n_sign = 1000L) {
  for (den in seq_len(n_sign + 1L)) {
    num <- round(p * den)
    if (num >= 1 && abs(p * den - num) < 1e-9 &&
        abs(err - sqrt(sum(1 / (num:den)^2)) / log(2)) < 1e-12 * err) return(c(num, den))
  }
  NULL
}

test_that("multilevel p above about 0.06 is the plain count (b + 1) / (m + 1) with its log2err", {
  # ?rapidGSEA: where the count of the random sets beyond the ES estimates p
  # as precisely as the levels would, pval is (b + 1) / (m + 1) and no level
  # is run (as fgsea does). m9086
  z <- ml_zero_list()
  r <- suppressWarnings(rapidGSEA(z$m, geneSets = z$sets, nperm = 1000, minSize = 3, maxSize = 3, seed = 1,
                                  backend = "cpu", threads = 1, verbose = FALSE))
  expect_true(all(r$pval > 0.2))
  for (i in seq_len(nrow(r))) {
    expect_false(is.null(ml_plain_count(r$pval[[i]], r$log2err[[i]])), info = r$set[[i]])
  }
})

test_that("multilevel p of a fixed seed stay those of earlier versions", {
  # A regression pin, not an oracle: the counts below are this code's own
  # output for seed 1 (each size's random sets come from a fixed Philox
  # subsequence of the seed; moving it changes every p). m9038
  z <- ml_zero_list()
  r <- suppressWarnings(rapidGSEA(z$m, geneSets = z$sets, nperm = 1000, minSize = 3, maxSize = 3, seed = 1,
                                  backend = "cpu", threads = 1, verbose = FALSE))
  cnt <- vapply(seq_len(nrow(r)), function(i) {
    x <- ml_plain_count(r$pval[[i]], r$log2err[[i]])
    if (is.null(x)) c(NA_real_, NA_real_) else x
  }, c(0, 0))
  expect_identical(r$set, c("a", "b", "c", "d"))
  # b + 1 over m + 1: the sign's counts are those of one draw (588 + 412 of
  # the 1,000 random sets, none with ES 0), shared by the sets of size 3
  expect_equal(cnt, matrix(c(191, 413, 551, 589, 176, 589, 134, 413), 2))
})

# ---- multilevel: Ctrl-C inside a level ---------------------------------------

test_that("Ctrl-C during a long multilevel level stops the run", {
  # One ruler of samples of 2,001 sets with 100 kept swaps per member and
  # level: its levels take seconds each (about 5 of them here, p ~ 0.03),
  # its first sample milliseconds, so the interrupt arrives inside a level,
  # where only the polls of the moves see it. m8749
  skip_on_os("windows")
  set.seed(4)
  G <- 5000L
  m <- sort(stats::rnorm(G), decreasing = TRUE)
  pos <- sort(sample(4800L, 50L) - 1L)
  interrupt_after(1)
  expect_error(sysbioGPU:::gsea_multilevel(m, 1, c(0L, 50L), pos, seed = 1, eps = 0, sampleSize = 2001L,
                                           moves = 100L, threads = 1L),
               "interrupted by the user", class = "sysbioGPU_error_interrupted")
  expect_length(philoxDraws(3, 1), 3) # R is usable afterwards
})

# ---- the RNK reader --------------------------------------------------------

test_that("a ranked list's first value that is not a number is named by its line of the file", {
  # m0466: line 3 of the file (after a comment line), not the list's second entry
  f <- tempfile(fileext = ".rnk")
  on.exit(unlink(f))
  writeLines(c("# a comment", "G1\t1.5", "G2\tabc", "G3\t2", "G4\txyz"), f)
  expect_error(sysbioGPU:::read_rnk(f), class = "sysbioGPU_error_input",
               regexp = "line 3: the value is not a number", fixed = TRUE)
})
