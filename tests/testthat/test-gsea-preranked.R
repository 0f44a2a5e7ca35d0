# Preranked nulls shared across sets (issue 14, point 1): permutation j
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
  null <- attr(a, "nullES")
  for (s in seq_along(sets)) {
    e <- a$ES[[s]]
    ns <- if (e >= 0) null[s, null[s, ] >= 0] else null[s, null[s, ] <= 0]
    expect_equal(a$pval[[s]], ((if (e >= 0) sum(ns > e) else sum(ns < e)) + 1) / (length(ns) + 1))
  }
})

test_that("GPU gene permutations give the CPU's table", {
  skip_if_no_gpu()
  set.seed(4)
  r <- stats::setNames(rnorm(500), paste0("g", 1:500))
  sets <- lapply(c(15, 20, 33, 60, 100), function(k) sample(names(r), k))
  names(sets) <- paste0("s", seq_along(sets))
  a <- rapidGSEA(r, geneSets = sets, nperm = 500, seed = 2, backend = "cpu", threads = 2,
                 keepNull = TRUE, verbose = FALSE)
  g <- rapidGSEA(r, geneSets = sets, nperm = 500, seed = 2, backend = "gpu",
                 keepNull = TRUE, verbose = FALSE)
  expect_identical(attr(a, "nullES"), attr(g, "nullES"))
  cols <- c("ES", "NES", "pval", "FDR", "FWER")
  expect_identical(as.data.frame(a)[cols], as.data.frame(g)[cols])
})
