# Ctrl-C stops a lassieSimulate batch inside its simulations:
# a batch of long stiff simulations used to finish its chunk first (44 s for
# two simulations of BCR).

# A random mass-action network (the LASSIE paper's synthetic kind) with rates
# over eight decades: stiff, and slow under implicit steps (each simulation
# of 4,000 species takes a few seconds here).
stiff_synthetic <- function(n, seed) {
  set.seed(seed)
  sp <- matrix(sample.int(n, 4L * n, replace = TRUE), n, 4)
  dup <- function(sp) apply(sp, 1, anyDuplicated) > 0
  while (any(d <- dup(sp))) sp[d, ] <- sample.int(n, 4L * sum(d), replace = TRUE)
  rt <- sample.int(3L, n, replace = TRUE)
  pt <- sample.int(3L, n, replace = TRUE) - 1L
  ri <- c(seq_len(n), which(rt == 2L)); rj <- c(sp[, 1], sp[rt == 2L, 2])
  rv <- c(ifelse(rt == 3L, 2, 1), rep(1, sum(rt == 2L)))
  pi_ <- c(which(pt >= 1L), which(pt == 2L)); pj <- c(sp[pt >= 1L, 3], sp[pt == 2L, 4])
  A <- Matrix::sparseMatrix(i = ri, j = rj, x = rv, dims = c(n, n))
  B <- Matrix::sparseMatrix(i = pi_, j = pj, x = 1, dims = c(n, n))
  reactionModel(A, B, rates = 10^runif(n, -4, 4), initial = runif(n))
}

interrupted_within <- function(expr_fun, after = 0.5) {
  interrupt_after(after)
  t0 <- proc.time()[["elapsed"]]
  expect_error(expr_fun(), "interrupted by the user", class = "sysbioGPU_error_interrupted")
  proc.time()[["elapsed"]] - t0
}

test_that("Ctrl-C stops a batch of long stiff simulations inside them, on every thread", {
  skip_on_os("windows")
  m <- stiff_synthetic(4000, 1)
  rates <- rbind(m$rates, m$rates * 1.1)
  run <- function(threads) {
    lassieSimulate(m, times = c(0, 1, 10, 100, 1000, 1e4), rates = rates, method = "bdf",
                   rtol = 1e-8, atol = 1e-12, backend = "cpu", threads = threads)
  }
  # a first call before the interrupts: it finds the backends (CUDA's start
  # took more than the half second below on a host of two H200s, and the
  # interrupt then came in R, before the engine)
  small <- lassieSimulate(m, times = c(0, 1e-3), method = "bdf", backend = "cpu", threads = 2)
  expect_true(all(is.finite(small)))
  # two simulations on two threads (each far longer than the second it may
  # take to stop), then both on one thread (the second still to come)
  expect_lt(interrupted_within(function() run(2)), 3)
  expect_lt(interrupted_within(function() run(1)), 3)
  # the package still works afterwards
  small <- lassieSimulate(m, times = c(0, 1e-3), method = "bdf", backend = "cpu", threads = 2)
  expect_true(all(is.finite(small)))
})
