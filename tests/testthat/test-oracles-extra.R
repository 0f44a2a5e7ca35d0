# Small independent oracles that pin comparisons the other test files leave
# open (found by `make mutants`, tools/mutants.txt).

test_that("rapidGSEA: a null ES equal to the observed one is not more extreme (both signs)", {
  # 3 + 3 samples: only 20 labelings, so the phenotype permutations redraw the
  # observed labeling (null ES bit-identical to the observed ES) many times.
  # When the observed ES is the most extreme of all labelings (checked here
  # with the plain-R running sum), the nominal p-value, the share of
  # same-sign null ES strictly beyond it, is exactly 0.
  set.seed(21)
  G <- 60
  x <- matrix(stats::rnorm(G * 6), G, dimnames = list(paste0("G", seq_len(G)), NULL))
  x[1:15, 1:3] <- x[1:15, 1:3] - 3   # down in A
  x[16:30, 1:3] <- x[16:30, 1:3] + 3 # up in A
  sets <- list(down = paste0("G", 1:15), up = paste0("G", 16:30))
  labs <- utils::combn(6, 3, function(a) as.integer(!(1:6 %in% a)), simplify = FALSE)
  es <- vapply(labs, function(l) {
    m <- gsea_ref_metric(x, l, "signal2noise")
    r <- sort(m, decreasing = TRUE)
    c(gsea_ref_es(r, sets$down)[["ES"]], gsea_ref_es(r, sets$up)[["ES"]])
  }, numeric(2))
  obs <- which(vapply(labs, function(l) identical(l, rep(0:1, each = 3)), NA))
  expect_true(es[1, obs] < min(es[1, -obs]) && es[1, obs] < 0)
  expect_true(es[2, obs] > max(es[2, -obs]) && es[2, obs] > 0)
  res <- rapidGSEA(x, rep(c("A", "B"), each = 3), sets, nperm = 300, minSize = 5, seed = 3,
                   backend = "cpu", threads = 1, verbose = FALSE)
  res <- res[match(c("down", "up"), res$set), ]
  expect_equal(res$ES, es[, obs], tolerance = 1e-10)
  expect_identical(res$pval, c(0, 0))
})
