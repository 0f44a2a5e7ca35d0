# The benchmark's random network generator (cosnet_random_network(), C in
# src/cosnet/cosnet_gen.c) and the parallel input check of parCosnet().

test_that("the random network is a valid symmetric G(n, p) with U(0,1) weights", {
  gen <- sysbioGPU:::cosnet_random_network
  n <- 3000; deg <- 20
  W <- gen(n, deg, seed = 7, threads = 2)
  expect_s4_class(W, "dgCMatrix")
  expect_true(methods::validObject(W)) # rows sorted within columns, in range
  expect_equal(dim(W), c(n, n))
  expect_true(Matrix::isSymmetric(W))
  expect_true(all(Matrix::diag(W) == 0))
  expect_true(all(W@x > 0 & W@x < 1))
  # no duplicated pairs: a pattern matrix has only 1s
  expect_equal(max(Matrix::summary(W)$x), max(W@x))
  # mean degree: the sum of degrees is 2 Binomial(n(n-1)/2, p); 6 sd
  m <- n * (n - 1) / 2; p <- deg / (n - 1)
  edges <- length(W@x) / 2
  expect_lt(abs(edges - m * p), 6 * sqrt(m * p * (1 - p)))
  # weights look uniform (a loose check of the mean and of the quartiles)
  expect_lt(abs(mean(W@x) - 0.5), 0.02)
  expect_lt(max(abs(stats::quantile(W@x, c(0.25, 0.75)) - c(0.25, 0.75))), 0.03)
  # the same graph for any thread count; another seed gives another graph
  expect_identical(gen(n, deg, seed = 7, threads = 1), W)
  expect_identical(gen(n, deg, seed = 7, threads = 3), W)
  expect_false(identical(gen(n, deg, seed = 8, threads = 2)@i, W@i))
})

test_that("the random network's edge cases: no edges, all edges", {
  gen <- sysbioGPU:::cosnet_random_network
  E <- gen(50, 0, seed = 1, threads = 2)
  expect_equal(length(E@x), 0L)
  expect_equal(E@p, integer(51))
  K <- gen(40, 39, seed = 1, threads = 2)
  expect_equal(length(K@x), 40L * 39L)
  expect_true(Matrix::isSymmetric(K))
  expect_true(all(Matrix::diag(K) == 0))
  expect_error(gen(1, 3), class = "sysbioGPU_error_input")
  expect_error(gen(10, -1), "degree", class = "sysbioGPU_error_input")
})

test_that("the parallel input check gives the same verdict for any thread count", {
  gen <- sysbioGPU:::cosnet_random_network
  W <- gen(2000, 15, seed = 3, threads = 2)
  chk <- function(M, th) {
    unlist(.Call(sysbioGPU:::ffi_cosnet_check, M@p, M@i, M@x, 1e-12, as.integer(th))[c("code", "node")],
           use.names = FALSE)
  }
  expect_equal(chk(W, 1), c(0L, 0L))
  # a hard problem (asymmetry) in a late column and a rounding asymmetry
  # in an early one: the hard one is reported, whatever the threads
  B <- W
  k <- W@p[1800] + 1L
  B@x[k] <- B@x[k] + 0.5
  k2 <- W@p[10] + 1L
  B@x[k2] <- B@x[k2] * (1 + 1e-15)
  # (the mirror column of the changed entry is asymmetric too)
  hard <- min(1800L, W@i[k] + 1L)
  expect_equal(chk(B, 1), c(4L, hard))
  expect_equal(chk(B, 2), c(4L, hard))
  expect_equal(chk(B, 4), c(4L, hard))
  # only the rounding asymmetry: code 5 at its column
  R <- W
  R@x[k2] <- R@x[k2] * (1 + 1e-15)
  expect_equal(chk(R, 3), c(5L, min(10L, W@i[k2] + 1L)))
  expect_error(parCosnet(B, c(1, 0, rep(NA, 1998)), backend = "cpu", threads = 2),
               "symmetric", class = "sysbioGPU_error_input")
})

test_that("a plain matrix works in a fresh session that never loaded Matrix", {
  f <- tempfile(fileext = ".R")
  writeLines(c(
    "W <- matrix(c(0, 1, 0, 1, 0, 1, 0, 1, 0), 3, dimnames = list(c('a', 'b', 'c'), c('a', 'b', 'c')))",
    "stopifnot(!'Matrix' %in% loadedNamespaces())",
    "r <- sysbioGPU::parCosnet(W, c(a = 1, b = 0, c = NA), backend = 'cpu', threads = 1L, seed = 1)",
    "cat(class(r)[1])"), f)
  out <- suppressWarnings(system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", f),
                                  stdout = TRUE, stderr = TRUE,
                                  env = paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = ":")))))
  expect_identical(tail(out, 1), "parCosnet", info = paste(out, collapse = "\n"))
})
