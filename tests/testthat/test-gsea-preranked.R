# Preranked nulls shared across sets: permutation j
# draws rank positions by a partial Fisher-Yates from Philox subsequence j
# and the first k of them are the null set of every set of size k.

# The positions of permutation j rebuilt in plain R from the raw Philox
# words (Lemire's multiply-high for a uniform integer below n; NULL when
# a word would be rejected, which then shifts the stream).
ref_draw <- function(G, kmax, seed, j) {
  u <- philoxDraws(kmax, seed = seed, subsequence = j, type = "uint32")
  perm <- seq_len(G)
  for (i in seq_len(kmax)) {
    n <- G - i + 1
    m <- u[[i]] * n
    if (m %% 2^32 < (2^32 %% n)) return(NULL)
    d <- i + floor(m / 2^32)
    t <- perm[[i]]; perm[[i]] <- perm[[d]]; perm[[d]] <- t
  }
  perm[seq_len(kmax)]
}

# The nominal p of each set from a kept null table: (b + 1) / (m + 1), b
# same-sign nulls strictly beyond the set's ES among its m same-sign nulls.
expect_kept_null_p <- function(res, null) {
  for (s in seq_len(nrow(res))) {
    e <- res$ES[[s]]
    ns <- if (e >= 0) null[s, null[s, ] >= 0] else null[s, null[s, ] <= 0]
    expect_equal(res$pval[[s]], ((if (e >= 0) sum(ns > e) else sum(ns < e)) + 1) / (length(ns) + 1))
  }
}

test_that("shared-null ES equal brute-force random-set ES in plain R", {
  set.seed(11)
  G <- 120
  r <- stats::setNames(c(rnorm(G - 10), rep(0.5, 6), rep(0, 4)), paste0("g", seq_len(G)))
  sizes <- c(1, 2, 3, 5, 5, 8, 13, 21, 30, 40, 59)
  sets <- lapply(seq_along(sizes), function(i) sample(names(r), sizes[[i]]))
  names(sets) <- paste0("s", seq_along(sets))
  for (q in c(1, 0, 2)) {
    # ties on purpose (the warning about them is tested in test-gsea-inputs.R)
    res <- suppressWarnings(rapidGSEA(r, geneSets = sets, nperm = 40, minSize = 1, weight = q, seed = 5,
                                      backend = "cpu", threads = 2, keepNull = TRUE, verbose = FALSE))
    null <- attr(res, "nullES")
    ranked <- attr(res, "ranking")
    n_case <- 0
    for (j in seq_len(40)) {
      pos <- ref_draw(G, max(sizes), 5, j)
      expect_false(is.null(pos))
      for (s in seq_along(sets)) {
        k <- sizes[[s]]
        ref <- gsea_ref_es(ranked, names(ranked)[pos[seq_len(k)]], q)[["ES"]]
        expect_equal(unname(null[s, j]), ref, tolerance = 1e-12, info = sprintf("q %g perm %d set %d", q, j, s))
        n_case <- n_case + 1
      }
    }
    expect_equal(n_case, 440)
    # sets of one size share their null; the observed ES is untouched
    expect_identical(null[4, ], null[5, ])
    for (s in seq_along(sets)) {
      expect_equal(res$ES[[s]], gsea_ref_es(ranked, sets[[s]], q)[["ES"]], tolerance = 1e-12)
    }
  }
})

test_that("the shared null is the same on 1 and 2 threads and across batches", {
  set.seed(3)
  r <- stats::setNames(rnorm(400), paste0("g", 1:400))
  sets <- lapply(c(15, 20, 20, 33, 60, 60, 60, 100), function(k) sample(names(r), k))
  names(sets) <- paste0("s", seq_along(sets))
  run <- function(threads, keep = FALSE) {
    rapidGSEA(r, geneSets = sets, nperm = 300, seed = 9, backend = "cpu", threads = threads,
              keepNull = keep, verbose = FALSE, pvalue = "permutation")
  }
  a <- run(1, TRUE)
  b <- run(2, TRUE)
  c2 <- run(2)
  expect_identical(attr(a, "nullES"), attr(b, "nullES"))
  cols <- c("ES", "NES", "pval", "FDR", "FWER")
  expect_identical(as.data.frame(a)[cols], as.data.frame(b)[cols])
  expect_identical(as.data.frame(a)[cols], as.data.frame(c2)[cols])
  # sets of one size are scored once per permutation in the passes: the
  # Broad statistics of the whole kept table must come out the same
  st <- gseaStats(a$ES, attr(a, "nullES"))
  for (v in c("NES", "FDR", "FWER")) expect_identical(a[[v]], st[[v]], info = v)
  # the nominal p follows the kept table: (b + 1) / (m + 1), b same-sign nulls
  # strictly beyond the ES of m, so never 0
  expect_kept_null_p(a, attr(a, "nullES"))
})

test_that("near-ties of the running sum go to the first position, as Broad's rule does", {
  # weights equal up to 1e-13: the running sums of a random set tie in
  # exact arithmetic (often +x against -x) and differ here by rounding, so
  # the engine's fast maximum must hand these sets to the sequential rule
  set.seed(21)
  G <- 90
  r <- stats::setNames((1 + stats::runif(G) * 1e-13) * rep(c(1, -1), each = G / 2), paste0("g", seq_len(G)))
  sizes <- c(1, 2, 3, 4, 5, 6, 8, 10, 12, 15)
  sets <- lapply(seq_along(sizes), function(i) sample(names(r), sizes[[i]]))
  names(sets) <- paste0("s", seq_along(sets))
  res <- suppressWarnings(rapidGSEA(r, geneSets = sets, nperm = 60, minSize = 1, seed = 8, backend = "cpu",
                                    threads = 2, keepNull = TRUE, verbose = FALSE))
  null <- attr(res, "nullES")
  ranked <- attr(res, "ranking")
  near_ties <- 0
  for (j in seq_len(60)) {
    pos <- ref_draw(G, max(sizes), 8, j)
    for (s in seq_along(sets)) {
      set <- names(ranked)[pos[seq_len(sizes[[s]])]]
      ref <- gsea_ref_es(ranked, set, 1)[["ES"]]
      expect_equal(unname(null[s, j]), ref, tolerance = 1e-12, info = sprintf("perm %d set %d", j, s))
      # count the cases where another running sum lies within 1e-11
      hit <- names(ranked) %in% set
      rs <- cumsum(ifelse(hit, abs(ranked) / sum(abs(ranked)[hit]), -1 / (G - sum(hit))))
      a <- abs(rs)
      near_ties <- near_ties + (sum(a >= max(a) * (1 - 1e-11)) > 1)
    }
  }
  expect_gt(near_ties, 20) # 37 of the 600 cases with this seed
})

test_that("shared-null ES have the bits of the full sweep's ES of the same sets", {
  # integer weights: every sum of them is exact in any order, so the ES of
  # a drawn null set, computed as an observed set by the sweep over all
  # genes (Broad's sequential rule, another code path), must be the same
  # double; rounding still makes mathematically equal running sums differ
  # in the last bits, the near-ties the engine must settle as that rule does
  set.seed(31)
  G <- 150
  r <- stats::setNames(sample(c(-3:-1, 1:3), G, replace = TRUE), paste0("g", seq_len(G)))
  sizes <- c(1, 2, 3, 4, 6, 9, 13, 20, 30, 45)
  sets <- lapply(seq_along(sizes), function(i) sample(names(r), sizes[[i]]))
  names(sets) <- paste0("s", seq_along(sets))
  for (q in c(1, 0)) {
    res <- suppressWarnings(rapidGSEA(r, geneSets = sets, nperm = 50, minSize = 1, weight = q, seed = 4,
                                      backend = "cpu", threads = 2, keepNull = TRUE, verbose = FALSE))
    null <- attr(res, "nullES")
    ranked <- attr(res, "ranking")
    drawn <- list()
    for (j in seq_len(50)) {
      pos <- ref_draw(G, max(sizes), 4, j)
      for (s in seq_along(sizes)) drawn[[sprintf("p%d_s%d", j, s)]] <- names(ranked)[pos[seq_len(sizes[[s]])]]
    }
    obs <- suppressWarnings(rapidGSEA(r, geneSets = drawn, nperm = 1, minSize = 1, weight = q, seed = 1,
                                      backend = "cpu", threads = 1, verbose = FALSE))
    expect_identical(obs$set, names(drawn))
    expect_identical(obs$ES, as.vector(null), info = sprintf("q %g", q))
  }
})

test_that("passes by set size give the per-set passes' table", {
  # without keepNull the statistics run by size (counts from sorted ES);
  # with it, per set over the kept table: the same bits
  set.seed(5)
  r <- stats::setNames(stats::rnorm(600), paste0("g", 1:600))
  k <- rep(c(15, 16, 40, 41, 90), c(12, 3, 20, 1, 8))
  sets <- lapply(k, function(n) sample(names(r), n))
  sets[[1]] <- names(r)[1:15] # a set far in the tail: few nulls beyond it
  names(sets) <- paste0("s", seq_along(sets))
  run <- function(threads, keep) rapidGSEA(r, geneSets = sets, nperm = 700, seed = 3, backend = "cpu",
                                           threads = threads, keepNull = keep, verbose = FALSE,
                                           pvalue = "permutation")
  a <- run(2, TRUE)
  b <- run(2, FALSE)
  c1 <- run(1, FALSE)
  cols <- c("ES", "NES", "pval", "FDR", "FWER")
  expect_identical(as.data.frame(a)[cols], as.data.frame(b)[cols])
  expect_identical(as.data.frame(c1)[cols], as.data.frame(b)[cols])
  expect_kept_null_p(b, attr(a, "nullES"))
})

test_that("GPU gene permutations give the CPU's table", {
  skip_if_no_gpu()
  set.seed(4)
  G <- 3000
  cases <- list(
    normal = stats::setNames(stats::rnorm(G), paste0("g", seq_len(G))),
    # many zeros: small sets of zero weight take unit weights
    zeros = stats::setNames(c(stats::rnorm(G / 2), rep(0, G / 2)), paste0("g", seq_len(G))),
    # weights equal up to 1e-13: near-ties of the running sum
    near = stats::setNames((1 + stats::runif(G) * 1e-13) * rep(c(1, -1), each = G / 2), paste0("g", seq_len(G))))
  k <- c(1, 2, 3, 15, 15, 20, 33, 60, 100, 100, 250, 500)
  for (nm in names(cases)) {
    r <- cases[[nm]]
    sets <- lapply(k, function(n) sample(names(r), n))
    names(sets) <- paste0("s", seq_along(sets))
    for (q in c(1, 0)) for (keep in c(TRUE, FALSE)) {
      a <- suppressWarnings(rapidGSEA(r, geneSets = sets, nperm = 2000, minSize = 1, weight = q, seed = 2,
                                      backend = "cpu", threads = 2, keepNull = keep, verbose = FALSE,
                                      pvalue = "permutation"))
      g <- suppressWarnings(rapidGSEA(r, geneSets = sets, nperm = 2000, minSize = 1, weight = q, seed = 2,
                                      backend = "gpu", keepNull = keep, verbose = FALSE,
                                      pvalue = "permutation"))
      info <- sprintf("%s q %g keepNull %s", nm, q, keep)
      if (keep) expect_identical(attr(a, "nullES"), attr(g, "nullES"), info = info)
      cols <- c("ES", "NES", "pval", "FDR", "FWER")
      expect_identical(as.data.frame(a)[cols], as.data.frame(g)[cols], info = info)
    }
  }
})
