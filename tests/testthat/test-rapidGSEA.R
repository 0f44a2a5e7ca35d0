# rapidGSEA(), gseaStats() and the GCT/CLS/GMT readers.

cpu <- function(...) rapidGSEA(..., backend = "cpu", verbose = FALSE)
# for tests of ES, rankings and identities that run few permutations on
# purpose: the warning that NES, FDR and FWER are undefined for some sets is
# expected there (its own tests are in test-odd-inputs.R)
cpu_few <- function(...) withCallingHandlers(cpu(...), sysbioGPU_warning_undefined = function(w) invokeRestart("muffleWarning"))

# ---- readers -----------------------------------------------------------

test_that("GCT, CLS and GMT files are read; GMT round-trips", {
  x <- readGCT(system.file("extdata", "leukemia_small.gct", package = "sysbioGPU"))
  expect_equal(dim(x), c(2000L, 48L))
  expect_false(anyNA(x))
  y <- readCLS(system.file("extdata", "leukemia_small.cls", package = "sysbioGPU"))
  expect_equal(levels(y), c("ALL", "AML"))
  expect_equal(as.vector(table(y)), c(24L, 24L))
  sets <- readGMT(system.file("extdata", "gsea_edb", "gene_sets.gmt", package = "sysbioGPU"))
  expect_length(sets, 7L)
  expect_equal(sets[["ES-SPECIFIC"]][1:3], c("ACTA1", "CALML4", "CORO1A"))
  f <- tempfile(fileext = ".gmt")
  writeGMT(sets, f)
  expect_identical(readGMT(f), sets)
  cls <- tempfile(fileext = ".cls")
  writeLines(c("6 2 1", "# a b", "0 0 1 1 1 0"), cls)
  expect_equal(as.character(readCLS(cls)), c("a", "a", "b", "b", "b", "a"))
})

test_that("malformed files give errors naming the file and line", {
  bad <- function(lines, ext) {
    f <- tempfile(fileext = ext)
    writeLines(lines, f)
    f
  }
  f <- bad(c("#1.3", "1\t2", "NAME\tDescription\ta\tb", "g1\tx\t1\t2"), ".gct")
  expect_error(readGCT(f), "line 1: the first line must be '#1.2'", class = "sysbioGPU_error_input")
  f <- bad(c("#1.2", "2\t2", "NAME\tDescription\ta\tb", "g1\tx\t1\t2", "g2\tx\t1"), ".gct")
  expect_error(readGCT(f), "line 5: has 3 fields, expected 4", class = "sysbioGPU_error_input")
  f <- bad(c("#1.2", "2\t2", "NAME\tDescription\ta\tb", "g1\tx\t1\t2", "g2\tx\t1\tzz"), ".gct")
  expect_error(readGCT(f), "line 5: value 'zz' is not a number", class = "sysbioGPU_error_input")
  f <- bad(c("#1.2", "3\t2", "NAME\tDescription\ta\tb", "g1\tx\t1\t2"), ".gct")
  expect_error(readGCT(f), "announces 3 rows but the file has 1", class = "sysbioGPU_error_input")
  f <- bad(c("6 2 1", "# a b", "a a b b b"), ".cls")
  expect_error(readCLS(f), "line 3: has 5 labels, line 1 announces 6", class = "sysbioGPU_error_input")
  f <- bad(c("6 2 1", "# a b", "a a b b b c"), ".cls")
  expect_error(readCLS(f), "label 'c' is not one of the classes", class = "sysbioGPU_error_input")
  f <- bad(c("6 2", "# a b", "a a b b b a"), ".cls")
  expect_error(readCLS(f), basename(f), class = "sysbioGPU_error_input")
  f <- bad(c("s1\td\tA\tB", "s2 d A B"), ".gmt")
  expect_error(readGMT(f), "line 2: a gene set line needs", class = "sysbioGPU_error_input")
  f <- bad(c("s1\td\tA\tB", "s1\td\tC"), ".gmt")
  expect_error(readGMT(f), "line 2: gene set 's1' appears twice", class = "sysbioGPU_error_input")
  expect_error(readGMT(tempfile()), "does not exist", class = "sysbioGPU_error_input")
})

# ---- enrichment scores -------------------------------------------------

test_that("analytic ES: members at the top give 1, at the bottom -1, reversal negates", {
  r <- stats::setNames(seq(2, 0.01, length.out = 200), paste0("g", 1:200))
  sets <- list(top = paste0("g", 1:20), bottom = paste0("g", 181:200),
               mid = paste0("g", seq(3, 200, by = 7)))
  res <- cpu_few(r, geneSets = sets, nperm = 10, minSize = 1, seed = 1)
  expect_equal(res$ES[1:2], c(1, -1), tolerance = 1e-12)
  expect_equal(res$rankAtMax[1:2], c(20L, 180L))
  rev <- cpu_few(stats::setNames(-rev(r), rev(names(r))), geneSets = sets, nperm = 10, minSize = 1, seed = 1)
  expect_equal(rev$ES, -res$ES, tolerance = 1e-12)
})

test_that("hits-only ES equals the full running sum on random cases", {
  set.seed(42)
  G <- 150
  for (q in c(0, 1, 1.5, 2)) {
    r <- stats::setNames(stats::rnorm(G), paste0("g", 1:G))
    sets <- lapply(1:100, function(i) paste0("g", sample(G, sample(2:60, 1))))
    names(sets) <- paste0("s", 1:100)
    res <- cpu_few(r, geneSets = sets, nperm = 1, minSize = 1, weight = q, seed = 1)
    ranked <- sort(r, decreasing = TRUE)
    ref <- vapply(sets, function(s) gsea_ref_es(ranked, s, q), numeric(2))
    expect_equal(res$ES, unname(ref["ES", ]), tolerance = 1e-12)
    expect_equal(res$rankAtMax, unname(as.integer(ref["pos", ])))
    le <- mapply(function(s, e, p) {
      pos <- match(s, names(ranked))
      sort(names(ranked)[if (e >= 0) pos[pos <= p] else pos[pos > p]])
    }, sets, res$ES, res$rankAtMax, SIMPLIFY = FALSE)
    expect_equal(lapply(res$leadingEdge, sort), unname(le))
  }
})

test_that("running sums in runs: the ES have the bits of R's additions in that order", {
  # A set of k > 32 hits adds its weights in 32 runs of ceil(k / 32) (each
  # run from 0 in order, then the runs' totals in order): its total over
  # its members in gene order, its running sum over its hits in rank order.
  # Both engines add so; R's additions in that order give the same doubles.
  runs <- function(w) { # the sums so far
    len <- if (length(w) > 32) ceiling(length(w) / 32) else 1
    off <- 0; loc <- 0; out <- numeric(length(w))
    for (i in seq_along(w)) {
      if (i > 1 && (i - 1) %% len == 0) { off <- off + loc; loc <- 0 }
      loc <- loc + w[[i]]
      out[[i]] <- off + loc
    }
    out
  }
  es_bits <- function(r, set, q, add) {
    G <- length(r)
    idx <- sort(match(set, names(r)))
    w <- abs(r)^q
    nr <- utils::tail(add(w[idx]), 1L)
    ord <- order(-r)
    rank <- sort(match(idx, ord)) - 1
    cum <- add(w[ord[rank + 1]])
    inv_nr <- 1 / nr; inv_nmiss <- 1 / (G - length(idx))
    best <- 0; c0 <- 0
    for (i in seq_along(rank)) {
      miss <- (rank[[i]] - (i - 1)) * inv_nmiss
      for (v in c(c0 * inv_nr - miss, cum[[i]] * inv_nr - miss))
        if (abs(v) > abs(best) * 1.000000000001) best <- v
      c0 <- cum[[i]]
    }
    best
  }
  set.seed(17)
  G <- 3000
  r <- stats::setNames(stats::rnorm(G), paste0("g", seq_len(G)))
  sizes <- c(20, 32, 33, 64, 100, 257, 700, 1500)
  sets <- lapply(sizes, function(k) sample(names(r), k))
  names(sets) <- paste0("s", sizes)
  for (q in c(1, 2)) {
    res <- cpu_few(r, geneSets = sets, nperm = 1, minSize = 1, maxSize = 2000, weight = q, seed = 1)
    ref <- vapply(sets, es_bits, 0, r = r, q = q, add = runs)
    expect_identical(res$ES, unname(ref), info = q)
    # the premise: another order of the same additions changes some bits
    other <- vapply(sets, es_bits, 0, r = r, q = q, add = function(w) Reduce(`+`, w, accumulate = TRUE))
    expect_false(identical(unname(other), unname(ref)))
    expect_equal(unname(other), unname(ref), tolerance = 1e-13)
  }
})

test_that("each metric equals a plain R computation of Broad's formula", {
  set.seed(3)
  x <- matrix(stats::rexp(200 * 9) + 0.1, 200, dimnames = list(paste0("g", 1:200), NULL))
  x[5, ] <- 1              # constant gene: the fix-low rule decides
  x[6, 1:4] <- 0.5
  lab <- c(0, 0, 0, 0, 1, 1, 1, 1, 1)
  sets <- list(a = paste0("g", 1:30))
  for (m in c("signal2noise", "t_test", "diff_of_classes", "ratio_of_classes", "log2_ratio_of_classes")) {
    res <- cpu_few(x, ifelse(lab == 0, "A", "B"), sets, nperm = 1, metric = m, seed = 1)
    ref <- gsea_ref_metric(x, lab, m)
    got <- attr(res, "ranking")[rownames(x)]
    expect_equal(unname(got), unname(ref), tolerance = 1e-10, info = m)
    # ranking: descending, ties by row
    o <- order(-round(ref, 10), seq_along(ref))
    expect_equal(names(attr(res, "ranking")), rownames(x)[o], info = m)
  }
  # a mean of exactly 0 raises the sd to 0.2
  z <- rbind(g1 = c(0, 0, 0, 1, 2, 3), g2 = c(1, 2, 3, 1, 1, 1), g3 = 3:8)
  res <- cpu_few(z, c(0, 0, 0, 1, 1, 1) == 0, list(s = "g1"), minSize = 1, nperm = 1, seed = 1)
  expect_equal(attr(res, "ranking")[["g1"]], (0 - 2) / (0.2 + 1))
})

test_that("FWER is the fraction of permutations whose extreme null NES passes the NES", {
  set.seed(5)
  es <- c(0.5, -0.4, 0.1, -0.05, 0.3, 0.5)
  null <- matrix(runif(6 * 400, -0.6, 0.6), 6)
  st <- gseaStats(es, null)
  mpos <- apply(null, 1, function(v) mean(v[v >= 0]))
  mneg <- apply(null, 1, function(v) -mean(v[v <= 0]))
  z <- ifelse(null >= 0, null / mpos, null / mneg)
  nes <- ifelse(es >= 0, es / mpos, es / mneg)
  mx <- apply(z, 2, max)
  mn <- apply(z, 2, min)
  ref <- ifelse(nes >= 0, vapply(nes, function(v) mean(mx > v), 0), vapply(nes, function(v) mean(mn < v), 0))
  expect_equal(st$FWER, ref)
  expect_true(all(st$FWER > 0 & st$FWER < 1))
})

# ---- Broad's own run ---------------------------------------------------

test_that("the Broad tool's run (edb) is reproduced", {
  e <- gsea_edb()
  rnk <- sysbioGPU:::read_rnk(file.path(e$dir, "gsea_data.gsea_data.rnk"))
  sets <- file.path(e$dir, "gene_sets.gmt")
  res <- cpu(rnk, geneSets = sets, nperm = 100, minSize = 1, seed = 1)
  i <- match(e$set, res$set)
  expect_equal(round(res$ES[i], 4), e$ES)
  expect_equal(res$rankAtMax[i] - 1, e$rank)
  st <- gseaStats(e$ES, e$rnd)
  expect_equal(st$NES, e$NES, tolerance = 5e-4)   # RND_ES are printed to 4 decimals
  expect_equal(round(st$pval, 4), e$NP)
  expect_equal(round(st$FDR, 4), e$FDR)
  expect_equal(round(st$FWER, 4), e$FWER)
  # file paths work too
  res2 <- cpu(file.path(e$dir, "gsea_data.gsea_data.rnk"), geneSets = sets, nperm = 100,
              minSize = 1, seed = 1)
  expect_identical(res2$ES, res$ES)
})

test_that("streaming statistics equal gseaStats() on the kept null, and a plain-R run", {
  d <- gsea_toy(G = 400)
  res <- cpu(d$x, d$y, d$sets, nperm = 300, minSize = 5, seed = 7, keepNull = TRUE, threads = 2)
  null <- attr(res, "nullES")
  expect_equal(dim(null), c(4L, 300L))
  # independent of the engine's C code: the null from the labels that
  # philoxShuffle() draws, Broad's metric and running sum, and the
  # statistics, all in plain R
  ref_null <- gsea_ref_null(d$x, d$y, d$sets, 300, seed = 7)
  expect_equal(unname(null), unname(ref_null), tolerance = 1e-12)
  ref <- gsea_ref_stats(res$ES, ref_null)
  expect_equal(res$NES, ref$NES, tolerance = 1e-12)
  expect_equal(res$pval, ref$pval)
  expect_equal(res$FWER, ref$FWER)
  expect_equal(res$FDR, ref$FDR, tolerance = 1e-8)
  st <- gseaStats(res$ES, null)
  expect_identical(res$NES, st$NES)
  expect_identical(res$pval, st$pval)
  expect_identical(res$FDR, st$FDR)
  expect_identical(res$FWER, st$FWER)
  res2 <- cpu(d$x, d$y, d$sets, nperm = 300, minSize = 5, seed = 7, keepNull = FALSE, threads = 2)
  expect_identical(res2[c("ES", "NES", "pval", "FDR", "FWER")], res[c("ES", "NES", "pval", "FDR", "FWER")])
  expect_null(attr(res2, "nullES"))
  expect_lt(res$pval[[1L]], 0.05)
})

# ---- permutations ------------------------------------------------------

test_that("4 vs 4: Monte Carlo p-values fall in the binomial interval of the exact ones", {
  set.seed(11)
  x <- matrix(stats::rnorm(60 * 8), 60, dimnames = list(paste0("g", 1:60), NULL))
  x[1:10, 1:4] <- x[1:10, 1:4] + 0.8
  sets <- list(a = paste0("g", 1:10), b = paste0("g", c(3:6, 30:40)), c = paste0("g", 41:55))
  y <- rep(c("A", "B"), each = 4)
  splits <- utils::combn(8, 4)
  es_split <- apply(splits, 2, function(idx) {
    lab <- rep(1, 8); lab[idx] <- 0
    m <- gsea_ref_metric(x, lab, "signal2noise")
    ranked <- sort(m, decreasing = TRUE)
    vapply(sets, function(s) gsea_ref_es(ranked, s)[["ES"]], 0)
  })
  res <- cpu(x, y, sets, nperm = 4000, minSize = 5, seed = 5, threads = 2, keepNull = TRUE)
  es0 <- es_split[, 1] # combn's first split is samples 1:4 = class A
  expect_equal(res$ES, unname(es0), tolerance = 1e-12)
  for (s in 1:3) {
    v <- es_split[s, ]
    e <- es0[[s]]
    exact <- if (e >= 0) sum(v > e & v >= 0) / sum(v >= 0) else sum(v < e & v <= 0) / sum(v <= 0)
    null <- attr(res, "nullES")[s, ]
    n <- if (e >= 0) sum(null >= 0) else sum(null <= 0)
    ci <- stats::qbinom(c(0.0005, 0.9995), n, exact) / n
    expect_true(res$pval[[s]] >= ci[[1]] && res$pval[[s]] <= ci[[2]], info = s)
  }
  # every permutation is one of the 70 splits, each drawn about equally often
  key <- apply(round(es_split, 9), 2, paste, collapse = ",")
  got <- apply(round(attr(res, "nullES"), 9), 2, paste, collapse = ",")
  expect_true(all(got %in% key))
  expect_gt(stats::chisq.test(table(factor(got, levels = unique(key))))$p.value, 0.001)
})

test_that("random labels on the leukemia data give uniform nominal p-values", {
  x <- readGCT(system.file("extdata", "leukemia_small.gct", package = "sysbioGPU"))
  set.seed(123)
  y <- sample(rep(c("a", "b"), 24))
  sets <- lapply(1:200, function(i) sample(rownames(x), 20))
  names(sets) <- paste0("r", 1:200)
  res <- cpu(x, y, sets, nperm = 200, seed = 9, threads = 2)
  # p-values are discrete (multiples of 1/#same-sign nulls): ties are expected
  expect_gt(suppressWarnings(stats::ks.test(res$pval, "punif"))$p.value, 0.01)
})

test_that("same seed, same table; threads and batches do not matter", {
  d <- gsea_toy(G = 300, n = c(5, 7))
  a <- cpu(d$x, d$y, d$sets, nperm = 200, minSize = 5, seed = 3, threads = 1)
  b <- cpu(d$x, d$y, d$sets, nperm = 200, minSize = 5, seed = 3, threads = 2)
  old <- options(sysbioGPU.gseaBatch = 64)
  on.exit(options(old))
  c <- cpu(d$x, d$y, d$sets, nperm = 200, minSize = 5, seed = 3, threads = 2)
  options(old)
  cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
  expect_identical(a[cols], b[cols])
  expect_identical(a[cols], c[cols])
  d2 <- cpu(d$x, d$y, d$sets, nperm = 200, minSize = 5, seed = 4, threads = 2)
  expect_false(identical(a$pval, d2$pval))
  set.seed(1); e1 <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, threads = 1)
  set.seed(1); e2 <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, threads = 1)
  expect_identical(e1$NES, e2$NES)
  # gene permutation on a matrix: the metric is fixed, genes are shuffled
  g <- cpu(d$x, d$y, d$sets, nperm = 100, minSize = 5, seed = 3, permutation = "gene", threads = 2)
  expect_identical(g$ES, a$ES)
  expect_equal(attr(g, "permutation"), "gene")
})

test_that("CPU: pass 2 reads pass 1's ES kept in memory (all, some or none), same table", {
  d <- gsea_toy(G = 400, n = c(5, 7))
  cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
  # the kept table: pass 2 reads it (the statistics test above checks its
  # null against plain R)
  ref <- cpu(d$x, d$y, d$sets, nperm = 300, minSize = 5, seed = 5, keepNull = TRUE, threads = 2)
  # batches of 64: none kept, the first batch (100 rounds down to whole
  # batches), the first two, all (unset)
  for (keep in list(0, 100, 128, NULL)) {
    old <- options(sysbioGPU.gseaBatch = 64, sysbioGPU.gseaCache = keep)
    r <- cpu(d$x, d$y, d$sets, nperm = 300, minSize = 5, seed = 5, threads = 2)
    options(old)
    expect_identical(r[cols], ref[cols], info = format(keep))
  }
  # gene permutations keep their null by set size under the same option
  gref <- cpu(d$x, d$y, d$sets, nperm = 300, minSize = 5, seed = 5, permutation = "gene", keepNull = TRUE,
              threads = 2)
  for (keep in list(0, NULL)) {
    old <- options(sysbioGPU.gseaCache = keep)
    r <- cpu(d$x, d$y, d$sets, nperm = 300, minSize = 5, seed = 5, permutation = "gene", threads = 2)
    options(old)
    expect_identical(r[cols], gref[cols], info = format(keep))
  }
})

# ---- result object -----------------------------------------------------

test_that("result, print, summary and plot", {
  d <- gsea_toy(G = 300)
  res <- cpu(d$x, factor(d$y), d$sets, nperm = 100, minSize = 5, seed = 1, threads = 1)
  expect_s3_class(res, "rapidGSEA")
  expect_named(res, c("set", "size", "ES", "NES", "pval", "padj", "FDR", "FWER", "log2err", "rankAtMax", "leadingEdge"))
  expect_equal(res$size, c(20L, 24L, 25L, 40L))
  expect_equal(attr(res, "backend"), "cpu")
  expect_equal(attr(res, "seed"), 1)
  expect_equal(attr(res, "classes"), c("A", "B"))
  expect_true(all(res$leadingEdge[[1L]] %in% d$sets$up))
  expect_output(print(res), "rapidGSEA")
  expect_output(print(summary(res)), "enriched in class A")
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(res, "up"))
  expect_silent(plot(res))
  expect_error(plot(res, "nope"), "not a set", class = "sysbioGPU_error_input")
  # logical phenotype: TRUE is class A
  res2 <- cpu(d$x, d$y == "A", d$sets, nperm = 10, minSize = 5, seed = 1)
  expect_equal(res2$ES, res$ES)
})

# ---- bad input ---------------------------------------------------------

test_that("bad input gives errors naming the problem", {
  d <- gsea_toy(G = 100)
  e <- function(..., msg) expect_error(cpu(...), msg, class = "sysbioGPU_error_input")
  e(d$x, d$y[-1], d$sets, msg = "11 labels but `expr` has 12 samples")
  e(d$x, rep("A", 12), d$sets, msg = "exactly 2 classes, it has 1")
  e(d$x, rep(c("A", "B"), c(10, 2)), d$sets, msg = "at least 3 samples; class 'B' has 2")
  x <- d$x; x[3, 2] <- NA
  e(x, d$y, d$sets, msg = "NA, NaN or infinite")
  x <- d$x; x[3, 2] <- Inf
  e(x, d$y, d$sets, msg = "NA, NaN or infinite")
  x <- d$x; rownames(x)[2] <- "G1"
  e(x, d$y, d$sets, msg = "duplicated gene names")
  e(d$x, d$y, list(a = c("zz", "yy")), msg = "no gene set left after filtering")
  e(d$x, d$y, d$sets, minSize = 50, msg = "no gene set left after filtering")
  e(d$x, d$y, d$sets, nperm = 0, msg = "`nperm` must be a single whole number")
  e(d$x, d$y, d$sets, metric = "foo", msg = "`metric` must be one of")
  e(d$x, d$y, d$sets, weight = -1, msg = "`weight` must be a single number >= 0")
  e(d$x, d$y, d$sets, metric = "log2_ratio_of_classes", msg = "needs positive expression values")
  e(d$x, d$y, "no-such-file.gmt", msg = "does not exist")
  e(stats::setNames(1:3 + 0, c("a", "b", "c")), geneSets = list(s = "a"), permutation = "phenotype",
    msg = "preranked")
  e(d$x, d$y, unname(d$sets), msg = "named list")
  e("not-there.gct", d$y, d$sets, msg = "does not exist")
  expect_error(gseaStats(1:2 + 0.1, matrix(0, 3, 5)), "one row per element", class = "sysbioGPU_error_input")
})

# ---- R workers (BPPARAM) ----------------------------------------------

test_that("R workers share the permutations: the same table as one process", {
  skip_if_not_installed("BiocParallel")
  d <- gsea_toy(G = 800, n = c(6, 7))
  sets <- c(d$sets, lapply(1:30, function(i) sample(rownames(d$x), sample(10:80, 1))))
  names(sets)[-(1:4)] <- paste0("r", 1:30)
  cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
  one <- cpu(d$x, d$y, sets, nperm = 700, minSize = 5, seed = 12, threads = 1)
  ser <- cpu(d$x, d$y, sets, nperm = 700, minSize = 5, seed = 12, threads = 1,
             BPPARAM = BiocParallel::SerialParam())
  expect_identical(ser[cols], one[cols])
  if (.Platform$OS.type != "windows") {
    mc <- cpu(d$x, d$y, sets, nperm = 700, minSize = 5, seed = 12, threads = 1,
              BPPARAM = BiocParallel::MulticoreParam(3))
    expect_identical(mc[cols], one[cols])
  }
  snow <- cpu(d$x, d$y, sets, nperm = 700, minSize = 5, seed = 12, threads = 1,
              BPPARAM = BiocParallel::SnowParam(2))
  expect_identical(snow[cols], one[cols])
  # gene permutation, fewer permutations than workers
  r <- stats::setNames(stats::rnorm(800), rownames(d$x))
  g1 <- cpu_few(r, geneSets = sets, nperm = 2, minSize = 5, seed = 4, threads = 1)
  g3 <- cpu_few(r, geneSets = sets, nperm = 2, minSize = 5, seed = 4, threads = 1,
            BPPARAM = if (.Platform$OS.type == "unix") BiocParallel::MulticoreParam(3) else BiocParallel::SerialParam())
  expect_identical(g3[cols], g1[cols])
  expect_error(cpu(d$x, d$y, sets, nperm = 10, BPPARAM = 3), "BiocParallel back-end",
               class = "sysbioGPU_error_input")
  expect_error(cpu(d$x, d$y, sets, nperm = 10, keepNull = TRUE, BPPARAM = BiocParallel::SerialParam()),
               "keepNull", class = "sysbioGPU_error_input")
})

# ---- GPU ---------------------------------------------------------------

test_that("GPU and CPU: identical permutations, ES within 1e-9", {
  skip_if_no_gpu()
  d <- gsea_toy(G = 3000, n = c(9, 14))
  sets <- lapply(1:200, function(i) sample(rownames(d$x), sample(15:200, 1)))
  names(sets) <- paste0("s", 1:200)
  for (m in c("signal2noise", "t_test", "diff_of_classes")) {
    a <- cpu(d$x, d$y, sets, nperm = 500, metric = m, seed = 2, keepNull = TRUE, threads = 2)
    g <- rapidGSEA(d$x, d$y, sets, nperm = 500, metric = m, seed = 2, keepNull = TRUE,
                   backend = "gpu", verbose = FALSE)
    expect_equal(attr(g, "backend"), "gpu")
    expect_equal(attr(g, "nullES"), attr(a, "nullES"), tolerance = 1e-9, info = m)
    expect_identical(g$ES, a$ES)
    expect_equal(g[c("NES", "pval", "FDR", "FWER")], a[c("NES", "pval", "FDR", "FWER")], tolerance = 1e-9)
  }
  xp <- abs(d$x) + 1
  a <- cpu(xp, d$y, sets, nperm = 300, metric = "log2_ratio_of_classes", weight = 1.5, seed = 2,
           keepNull = TRUE, threads = 2)
  g <- rapidGSEA(xp, d$y, sets, nperm = 300, metric = "log2_ratio_of_classes", weight = 1.5, seed = 2,
                 keepNull = TRUE, backend = "gpu", verbose = FALSE)
  expect_equal(attr(g, "nullES"), attr(a, "nullES"), tolerance = 1e-9)
  # gene permutation, streaming (no kept table), several batches
  r <- stats::setNames(stats::rnorm(3000), rownames(d$x))
  a <- cpu(r, geneSets = sets, nperm = 1000, seed = 4, threads = 2)
  g <- rapidGSEA(r, geneSets = sets, nperm = 1000, seed = 4, backend = "gpu", verbose = FALSE)
  expect_equal(g[c("ES", "NES", "pval", "FDR", "FWER")], a[c("ES", "NES", "pval", "FDR", "FWER")],
               tolerance = 1e-9)
  # phenotype permutation, streaming: both passes' statistics on the device
  cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
  a <- cpu(d$x, d$y, sets, nperm = 3000, seed = 5, threads = 2)
  g <- rapidGSEA(d$x, d$y, sets, nperm = 3000, seed = 5, backend = "gpu", verbose = FALSE)
  expect_equal(g[cols], a[cols], tolerance = 1e-9)
  expect_equal(g$pval, a$pval) # counts of nulls: exact when the ES agree
})

test_that("GPU: genes in two record chunks, an odd number of permutations: the CPU's null", {
  skip_if_no_gpu()
  # 13,001 genes (k_records builds the records in two chunks of genes),
  # 301 permutations (the last pair of records has one permutation), 150
  # samples, each class the smaller once
  for (n in list(c(97, 53), c(53, 97))) {
    d <- gsea_toy(G = 13001, n = n, seed = 11)
    sets <- lapply(1:120, function(i) sample(rownames(d$x), sample(15:400, 1)))
    names(sets) <- paste0("s", 1:120)
    a <- cpu(d$x, d$y, sets, nperm = 301, seed = 12, keepNull = TRUE, threads = 2)
    g <- rapidGSEA(d$x, d$y, sets, nperm = 301, seed = 12, keepNull = TRUE, backend = "gpu", verbose = FALSE)
    expect_identical(attr(g, "nullES"), attr(a, "nullES"), info = paste(n, collapse = "/"))
    expect_identical(g$ES, a$ES)
  }
})

test_that("GPU: more genes than a block ranks (the device-wide sort): the CPU's null", {
  skip_if_no_gpu()
  # a block ranks up to 20,992 genes of a permutation in shared memory;
  # 24,000 take the segmented sort over the whole batch
  d <- gsea_toy(G = 24000, n = c(5, 6), seed = 13)
  sets <- lapply(1:40, function(i) sample(rownames(d$x), sample(15:300, 1)))
  names(sets) <- paste0("s", 1:40)
  a <- cpu(d$x, d$y, sets, nperm = 101, seed = 14, keepNull = TRUE, threads = 2)
  g <- rapidGSEA(d$x, d$y, sets, nperm = 101, seed = 14, keepNull = TRUE, backend = "gpu", verbose = FALSE)
  expect_identical(attr(g, "nullES"), attr(a, "nullES"))
})

test_that("GPU: sets for both tile sizes (2,048 members in two permutations, 8,192 in one), or walked", {
  skip_if_no_gpu()
  d <- gsea_toy(G = 12000, n = c(6, 7))
  sets <- c(list(big = sample(rownames(d$x), 6000), mid = sample(rownames(d$x), 3000)),
            lapply(1:300, function(i) sample(rownames(d$x), 15)))
  names(sets)[-(1:2)] <- paste0("t", 1:300)
  a <- cpu(d$x, d$y, sets, nperm = 200, seed = 8, maxSize = 10000, keepNull = TRUE, threads = 2)
  # the tiles (no set walks), then the default: big and mid walk
  for (walk in list(0, NULL)) {
    old <- options(sysbioGPU.gseaWalk = walk)
    g <- rapidGSEA(d$x, d$y, sets, nperm = 200, seed = 8, maxSize = 10000, keepNull = TRUE,
                   backend = "gpu", verbose = FALSE)
    options(old)
    expect_identical(attr(g, "nullES"), attr(a, "nullES"), info = format(walk))
    expect_identical(g$NES, a$NES, info = format(walk))
  }
  # a set of more than 8,192 genes takes the walk (up to 23,244 genes)
  huge <- c(list(huge = sample(rownames(d$x), 9000)), sets[-(1:2)])
  a <- cpu(d$x, d$y, huge, nperm = 100, seed = 8, maxSize = 10000, keepNull = TRUE, threads = 2)
  g <- rapidGSEA(d$x, d$y, huge, nperm = 100, seed = 8, maxSize = 10000, keepNull = TRUE,
                 backend = "gpu", verbose = FALSE)
  expect_identical(attr(g, "nullES"), attr(a, "nullES"))
  old <- options(sysbioGPU.gseaWalk = 0)
  expect_error(rapidGSEA(d$x, d$y, huge, nperm = 100, seed = 8, maxSize = 10000, backend = "gpu", verbose = FALSE),
               "8192")
  options(old)
})

test_that("GPU: sets of more than 256 members (a warp a set) have the CPU's ES, near ties too", {
  skip_if_no_gpu()
  # Unit weights (weight = 0) on 1,800 genes: a set of 600 has running
  # sums i/600 - d/1,200, equal in exact arithmetic wherever 2i - d is,
  # and apart by rounding; about one permutation in ten has such a near
  # tie at its largest value, which the sequential rule must settle.
  d <- gsea_toy(G = 1800, n = c(7, 8), seed = 5)
  sets <- c(list(a = sample(rownames(d$x), 600), b = sample(rownames(d$x), 700),
                 c = sample(rownames(d$x), 513)),
            lapply(1:20, function(i) sample(rownames(d$x), sample(15:512, 1))))
  names(sets)[-(1:3)] <- paste0("s", 1:20)
  # (sets of more than 128 members walk the ranking unless told not to:
  # the warps' search first, then the walk)
  for (walk in list(0, NULL)) for (w in c(0, 1)) {
    info <- paste(w, format(walk))
    a <- cpu(d$x, d$y, sets, nperm = 600, weight = w, seed = 3, maxSize = 1000, keepNull = TRUE, threads = 2)
    old <- options(sysbioGPU.gseaWalk = walk)
    g <- rapidGSEA(d$x, d$y, sets, nperm = 600, weight = w, seed = 3, maxSize = 1000, keepNull = TRUE,
                   backend = "gpu", verbose = FALSE)
    options(old)
    expect_identical(attr(g, "nullES"), attr(a, "nullES"), info = info)
    expect_identical(g$ES, a$ES, info = info)
    # the sequential rule runs for the near ties of unit weights alone: a
    # search that took its first value within the tie factor without
    # checking that it is the largest would never call it (walked sets
    # always take the sequential rule, and count none)
    if (w == 0 && identical(walk, 0)) expect_gt(attr(g, "sequentialES"), 0, label = info)
    else expect_identical(attr(g, "sequentialES"), 0, info = info)
    expect_identical(attr(a, "sequentialES"), 0)
  }
})

test_that("GPU: sets that walk the ranking (32 a warp) have the CPU's ES", {
  skip_if_no_gpu()
  d <- gsea_toy(G = 2500, n = c(8, 9), seed = 7)
  # 70 sets of 33-400 members walk with the option at 32 (three groups of
  # 32, the last partial), the 10 smaller ones take the tiles
  set.seed(4)
  sets <- lapply(1:80, function(i) sample(rownames(d$x), if (i <= 70) sample(33:400, 1) else sample(5:32, 1)))
  names(sets) <- paste0("s", 1:80)
  walked <- function(code) with_opts(list(sysbioGPU.gseaWalk = 32), code)
  for (w in c(0, 1, 2)) {
    a <- cpu(d$x, d$y, sets, nperm = 300, weight = w, seed = 5, keepNull = TRUE, threads = 2)
    g <- walked(rapidGSEA(d$x, d$y, sets, nperm = 300, weight = w, seed = 5, keepNull = TRUE,
                          backend = "gpu", verbose = FALSE))
    expect_identical(attr(g, "nullES"), attr(a, "nullES"), info = w)
    expect_identical(g[c("ES", "NES", "pval", "FDR")], a[c("ES", "NES", "pval", "FDR")], info = w)
  }
  # every set walks (no tiles), on two devices or one GPU's two shares,
  # in batches of 64 permutations, pass 2 recomputing them; 301
  # permutations leave an odd batch (its last permutation without a pair
  # in k_walk_nr)
  big <- sets[lengths(sets) > 32]
  a <- cpu(d$x, d$y, big, nperm = 301, seed = 6, keepNull = TRUE, threads = 2)
  old <- options(sysbioGPU.gseaBatch = 64, sysbioGPU.gseaCache = 0)
  g <- walked(on_devices(rapidGSEA(d$x, d$y, big, nperm = 301, seed = 6, keepNull = TRUE, backend = "gpu",
                                   device = gpu_pair(), verbose = FALSE)))
  options(old)
  expect_identical(attr(g, "nullES"), attr(a, "nullES"))
  expect_identical(g$FDR, a$FDR)
})

test_that("GPU: sets of every size class of a thread each have the CPU's ES, at the most genes that allows and beyond", {
  skip_if_no_gpu()
  # Sets of up to 128 members take a thread each, their ranks sorted in
  # registers by networks of 16, 32, 64 or 128 keys (each side of every
  # boundary here); 40 constant genes make two sets whose weights are all
  # 0 (unit weights instead); 62 sets leave the last group of 32 partial,
  # and the walked sets (more than 128) a partial group too.
  d <- gsea_toy(G = 3000, n = c(7, 8), seed = 21)
  d$x[1:40, ] <- 0
  sizes <- c(1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 300)
  set.seed(22)
  sets <- c(list(zero = rownames(d$x)[1:20], zero40 = rownames(d$x)[1:40]),
            lapply(rep(sizes, 3), function(k) sample(rownames(d$x)[-(1:40)], k)))
  names(sets)[-(1:2)] <- paste0("s", seq_len(length(sets) - 2))
  # (with the walk from 16 members, which the engine raises to 32, the
  # set of 40 constant genes walks: its hits weigh 1)
  for (w in c(0, 1, 2)) for (walk in list(NULL, 16)) {
    info <- paste(w, format(walk))
    a <- cpu(d$x, d$y, sets, nperm = 300, weight = w, seed = 23, minSize = 1, keepNull = TRUE, threads = 2)
    g <- with_opts(list(sysbioGPU.gseaWalk = walk),
                   rapidGSEA(d$x, d$y, sets, nperm = 300, weight = w, seed = 23, minSize = 1, keepNull = TRUE,
                             backend = "gpu", verbose = FALSE))
    expect_identical(attr(g, "nullES"), attr(a, "nullES"), info = info)
    expect_identical(g[c("ES", "NES", "pval")], a[c("ES", "NES", "pval")], info = info)
  }
  # 23,000 genes: a permutation's ranks and weights take 230,000 bytes of
  # a block's shared memory, which an H100 or H200 has (232,448); 23,300
  # do not fit, so every set takes the tiles
  for (G in c(23000, 23300)) {
    d <- gsea_toy(G = G, n = c(6, 7), seed = 24)
    sets <- lapply(c(5, 40, 128, 129, 400), function(k) sample(rownames(d$x), k))
    names(sets) <- paste0("b", seq_along(sets))
    a <- cpu(d$x, d$y, sets, nperm = 100, seed = 25, minSize = 1, keepNull = TRUE, threads = 2)
    g <- rapidGSEA(d$x, d$y, sets, nperm = 100, seed = 25, minSize = 1, keepNull = TRUE, backend = "gpu",
                   verbose = FALSE)
    expect_identical(attr(g, "nullES"), attr(a, "nullES"), info = G)
  }
})

test_that("GPU: a large set whose ES lies at its first hits or its last has the CPU's ES", {
  skip_if_no_gpu()
  # 699 of b's genes share one profile (plus noise far below the genes'
  # spread), so every permutation ranks them in one run; its 700th, x, is
  # independent.  b's running sum bottoms out just before x or the run,
  # or peaks at the run's end: its ES lies at one of its first two hits
  # or its last, the ends of the first and last lanes' runs of hits; the
  # value just before b's second hit adds x's weight.
  d <- gsea_toy(G = 1800, n = c(7, 8), seed = 6)
  g <- rownames(d$x)
  run <- g[1101:1799]
  d$x[run, ] <- matrix(d$x[run[[1]], ], length(run), ncol(d$x), byrow = TRUE) +
    1e-7 * rnorm(length(run) * ncol(d$x))
  sets <- list(a = g[1:600], b = c(run, g[[1000]]))
  a <- cpu(d$x, d$y, sets, nperm = 300, seed = 4, maxSize = 1000, keepNull = TRUE, threads = 2)
  expect_gt(mean(attr(a, "nullES")["b", ] < 0), 0.2) # the premise: many ES at b's first hits
  gp <- rapidGSEA(d$x, d$y, sets, nperm = 300, seed = 4, maxSize = 1000, keepNull = TRUE,
                  backend = "gpu", verbose = FALSE)
  expect_identical(attr(gp, "nullES"), attr(a, "nullES"))
  expect_identical(gp$ES, a$ES)
  # no near ties here: every ES from the one-pass search
  expect_identical(attr(gp, "sequentialES"), 0)
})

test_that("GPU: a batch of an odd number of permutations (a block's second one absent) has the CPU's ES", {
  skip_if_no_gpu()
  d <- gsea_toy(G = 1500, n = c(7, 9))
  sets <- lapply(1:40, function(i) sample(rownames(d$x), sample(15:300, 1)))
  names(sets) <- paste0("s", 1:40)
  a <- cpu(d$x, d$y, sets, nperm = 1001, seed = 9, keepNull = TRUE, threads = 2)
  # batches of 256: the last one holds 233
  old <- options(sysbioGPU.gseaBatch = 256)
  on.exit(options(old))
  g <- rapidGSEA(d$x, d$y, sets, nperm = 1001, seed = 9, keepNull = TRUE, backend = "gpu", verbose = FALSE)
  expect_identical(attr(g, "nullES"), attr(a, "nullES"))
  expect_identical(g[c("ES", "NES", "pval", "FDR")], a[c("ES", "NES", "pval", "FDR")])
})

test_that("GPU: pass 1's tallies, added over chunks of 512 permutations in a batch, are the CPU's", {
  skip_if_no_gpu()
  d <- gsea_toy(G = 1200, n = c(6, 8))
  sets <- lapply(1:30, function(i) sample(rownames(d$x), sample(10:200, 1)))
  names(sets) <- paste0("s", 1:30)
  cols <- c("ES", "NES", "pval", "FDR", "FWER")
  a <- cpu(d$x, d$y, sets, nperm = 5000, seed = 4, threads = 2)
  # batches of 2,048, 2,048 and 904 permutations: 4, 4 and 2 chunks (the
  # last one of 392), each chunk's 128-bit sums merged on the device; no
  # kept ES, so pass 2 recomputes them
  old <- options(sysbioGPU.gseaBatch = 2048, sysbioGPU.gseaCache = 0)
  on.exit(options(old))
  g <- rapidGSEA(d$x, d$y, sets, nperm = 5000, seed = 4, backend = "gpu", verbose = FALSE)
  expect_identical(g[cols], a[cols])
})

test_that("GPU: pass 2 reads kept ES, recomputes the rest, same statistics", {
  skip_if_no_gpu()
  d <- gsea_toy(G = 2000, n = c(8, 9))
  sets <- lapply(1:60, function(i) sample(rownames(d$x), sample(15:150, 1)))
  names(sets) <- paste0("s", 1:60)
  cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
  a <- cpu(d$x, d$y, sets, nperm = 3000, seed = 6, threads = 2)
  # batches of 512: none kept, the first two kept, all kept
  for (keep in c(0, 1024, -1)) {
    old <- options(sysbioGPU.gseaBatch = 512, sysbioGPU.gseaCache = keep)
    g <- rapidGSEA(d$x, d$y, sets, nperm = 3000, seed = 6, backend = "gpu", verbose = FALSE)
    options(old)
    expect_identical(g[cols], a[cols], info = keep)
  }
})

test_that("several GPUs share the permutations: the same table as one", {
  skip_if_no_gpu()
  d <- gsea_toy(G = 3000, n = c(9, 14))
  sets <- lapply(1:100, function(i) sample(rownames(d$x), sample(15:200, 1)))
  names(sets) <- paste0("s", 1:100)
  cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
  run <- function(device, ...) {
    on_devices(rapidGSEA(d$x, d$y, sets, nperm = 5000, seed = 3, backend = "gpu", device = device,
                         verbose = FALSE, ...))
  }
  one <- run(0)
  two <- run(gpu_pair())
  expect_identical(two[cols], one[cols])
  expect_identical(attr(two, "device"), gpu_pair())
  # three shares (5,000 permutations do not split evenly in three)
  expect_identical(run(c(gpu_pair(), 0L))[cols], one[cols])
  if (two_gpus()) expect_identical(run("all")[cols], one[cols])
  # kept table, host statistics, small batches: the same again
  old <- options(sysbioGPU.gseaBatch = 512)
  k2 <- run(rev(gpu_pair()), keepNull = TRUE)
  options(old)
  expect_identical(k2[cols], one[cols])
  c1 <- rapidGSEA(d$x, d$y, sets, nperm = 5000, seed = 3, backend = "cpu", threads = 2, verbose = FALSE)
  expect_identical(c1[cols], one[cols])
})

test_that("GPU workers (SnowParam) give the single-process table", {
  skip_if_no_gpu()
  skip_if_not_installed("BiocParallel")
  d <- gsea_toy(G = 3000, n = c(9, 14))
  sets <- lapply(1:80, function(i) sample(rownames(d$x), sample(15:200, 1)))
  names(sets) <- paste0("s", 1:80)
  cols <- c("ES", "NES", "pval", "FDR", "FWER", "rankAtMax")
  one <- rapidGSEA(d$x, d$y, sets, nperm = 4000, seed = 3, backend = "gpu", verbose = FALSE)
  two <- rapidGSEA(d$x, d$y, sets, nperm = 4000, seed = 3, backend = "gpu", verbose = FALSE,
                   device = "all", BPPARAM = BiocParallel::SnowParam(2))
  expect_identical(two[cols], one[cols])
  expect_error(rapidGSEA(d$x, d$y, sets, nperm = 100, backend = "gpu", BPPARAM = BiocParallel::MulticoreParam(2)),
               "SnowParam", class = "sysbioGPU_error_input")
})

test_that("GPU: the CPU's ranking, ties included", {
  skip_if_no_gpu()
  # (the ties are the point here: their warning has its own tests, in
  # test-gsea-inputs.R)
  quiet <- function(expr) withCallingHandlers(expr, sysbioGPU_warning_ties = function(w) invokeRestart("muffleWarning"))
  # Constant genes (metric 0), repeated rows (equal metrics) and scaled
  # rows (signal2noise equal up to rounding: same float key, exact keys
  # apart) exercise the exact tie order.
  # 70,000 genes: 64-bit sort keys in the tiles (32-bit up to 65,536)
  for (G in c(14000, 70000)) {
    np <- if (G > 65536) 100 else 300
    d <- gsea_toy(G = G, n = c(6, 7), seed = 3)
    d$x[1:300, ] <- 0
    d$x[301:600, ] <- d$x[rep(601:630, 10), ]
    d$x[701:1000, ] <- d$x[1001:1300, ] * 3.7
    sets <- c(list(const = rownames(d$x)[c(1:40, 2001:2040)], rep = rownames(d$x)[c(301:360, 601:630)],
                   scaled = rownames(d$x)[c(701:760, 1001:1060)]),
              lapply(1:30, function(i) sample(rownames(d$x), sample(15:300, 1))))
    names(sets)[-(1:3)] <- paste0("r", 1:30)
    # one-gene sets next to a 2,000-gene one: a tile whose keys need
    # cutting, in the tiles of two permutations (up to 2,048 members)
    sets <- c(sets, stats::setNames(as.list(sample(rownames(d$x), 200)), paste0("one", 1:200)),
              list(wide = sample(rownames(d$x), 2000)))
    a <- quiet(cpu(d$x, d$y, sets, nperm = np, seed = 9, minSize = 1, maxSize = 5000, keepNull = TRUE, threads = 2))
    g <- quiet(rapidGSEA(d$x, d$y, sets, nperm = np, seed = 9, minSize = 1, maxSize = 5000, keepNull = TRUE,
                         backend = "gpu", verbose = FALSE))
    expect_identical(attr(g, "nullES"), attr(a, "nullES"), info = G)
    s <- quiet(cpu(d$x, d$y, sets, nperm = np, seed = 9, minSize = 1, maxSize = 5000, threads = 2))
    h <- quiet(rapidGSEA(d$x, d$y, sets, nperm = np, seed = 9, minSize = 1, maxSize = 5000, backend = "gpu",
                         verbose = FALSE))
    expect_identical(h[c("ES", "NES", "pval", "FDR", "FWER")], s[c("ES", "NES", "pval", "FDR", "FWER")], info = G)
  }
})

# ---- Bioconductor containers ------------------------------------------

test_that("ExpressionSet, SummarizedExperiment and GeneSetCollection inputs", {
  d <- gsea_toy(G = 200)
  ref <- cpu(d$x, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)
  if (requireNamespace("Biobase", quietly = TRUE)) {
    es <- Biobase::ExpressionSet(d$x)
    expect_identical(cpu(es, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)$NES, ref$NES)
  }
  if (requireNamespace("SummarizedExperiment", quietly = TRUE)) {
    se <- SummarizedExperiment::SummarizedExperiment(list(counts = d$x))
    expect_identical(cpu(se, d$y, d$sets, nperm = 50, minSize = 5, seed = 1, threads = 1)$NES, ref$NES)
  }
  skip_if_not_installed("GSEABase")
  gsc <- GSEABase::GeneSetCollection(mapply(function(g, n) GSEABase::GeneSet(g, setName = n),
                                            d$sets, names(d$sets)))
  expect_identical(cpu(d$x, d$y, gsc, nperm = 50, minSize = 5, seed = 1, threads = 1)$NES, ref$NES)
})

test_that("subsets of a result print as data frames", {
  d <- gsea_toy(G = 200)
  res <- cpu(d$x, d$y, d$sets, nperm = 20, minSize = 5, seed = 1, threads = 1)
  expect_output(print(res[, c("set", "NES")]), "NES")
  expect_error(plot(res[, c("set", "NES")]), "lost its ranking", class = "sysbioGPU_error_input")
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(res[3:1, ], "up")) # rows reordered: members found by name
})

# ---- long runs ---------------------------------------------------------

test_that("Ctrl-C stops a long rapidGSEA run", {
  skip_on_os("windows")
  d <- gsea_toy(G = 2000, n = c(10, 10))
  sets <- lapply(1:300, function(i) sample(rownames(d$x), 100))
  names(sets) <- paste0("s", 1:300)
  interrupt_after(2) # after the R-side preparation, even on a loaded machine
  t0 <- Sys.time()
  expect_error(cpu(d$x, d$y, sets, nperm = 1e6, seed = 1, threads = 2),
               "interrupted by the user", class = "sysbioGPU_error_interrupted")
  expect_lt(as.numeric(difftime(Sys.time(), t0, units = "secs")), 15)
  expect_s3_class(cpu(d$x, d$y, sets[1:2], nperm = 10, seed = 1, threads = 1), "rapidGSEA")
})
