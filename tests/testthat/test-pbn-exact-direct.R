# pbnSteadyState(method = "exact") solves small chains directly, sets that
# constant nodes decide are exact, and print() is compact.  The oracle is a
# transition matrix written out in this file from the rules of BoolNet's
# examplePBN, solved by base R.

# examplePBN's rules as R functions of the state (x1, x2, x3), with their
# selection probabilities.
example_rules <- list(
  x1 = list(list(f = function(x) (x[1] | x[2] | x[3]) & (!x[1] | x[2] | x[3]), p = 0.6),
            list(f = function(x) (x[1] | x[2] | x[3]) & (x[1] | !x[2] | !x[3]) & (!x[1] | x[2] | x[3]), p = 0.4)),
  x2 = list(list(f = function(x) (x[1] | x[2] | x[3]) & (x[1] | !x[2] | !x[3]) & (!x[1] | !x[2] | x[3]), p = 1)),
  x3 = list(list(f = function(x) (!x[1] & x[2] & x[3]) | (x[1] & !x[2] & x[3]) | (x[1] & x[2] & !x[3]) |
                   (x[1] & x[2] & x[3]), p = 0.5),
            list(f = function(x) x[1] & x[2] & x[3], p = 0.5))
)

# Synchronous PBN with perturbations: with probability 1 - (1-p)^n no node
# flips and every node applies a rule chosen independently; else the
# flipped nodes change and nothing else.  State index: bit i-1 = node i.
example_P <- function(rules, p) {
  n <- length(rules)
  NS <- 2^n
  bits <- function(s) as.logical((s %/% 2^(0:(n - 1))) %% 2)
  P <- matrix(0, NS, NS)
  for (s in 0:(NS - 1)) {
    x <- bits(s)
    q <- vapply(rules, function(fl) sum(vapply(fl, function(r) r$p * r$f(x), 0)), 0)  # P(node -> 1)
    for (t in 0:(NS - 1)) {
      y <- bits(t)
      flips <- sum(x != y)
      if (flips > 0) P[s + 1, t + 1] <- p^flips * (1 - p)^(n - flips)
      P[s + 1, t + 1] <- P[s + 1, t + 1] + (1 - p)^n * prod(ifelse(y, q, 1 - q))
    }
  }
  P
}

stationary_solve <- function(P) {
  NS <- nrow(P)
  A <- t(P) - diag(NS)
  A[NS, ] <- 1
  solve(A, c(numeric(NS - 1), 1))
}

example_net <- function() {
  pbn(list(
    x1 = c("(x1 | x2 | x3) & (!x1 | x2 | x3)" = 0.6,
           "(x1 | x2 | x3) & (x1 | !x2 | !x3) & (!x1 | x2 | x3)" = 0.4),
    x2 = "(x1 | x2 | x3) & (x1 | !x2 | !x3) & (!x1 | !x2 | x3)",
    x3 = c("(!x1 & x2 & x3) | (x1 & !x2 & x3) | (x1 & x2 & !x3) | (x1 & x2 & x3)" = 0.5,
           "x1 & x2 & x3" = 0.5)))
}

test_that("the exact method solves a slowly mixing small chain to 1e-9", {
  net <- example_net()
  for (p in c(1e-6, 0.01)) {
    pi_ref <- stationary_solve(example_P(example_rules, p))
    ex <- expect_silent(pbnSteadyState(net, "marginals", p = p, method = "exact", backend = "cpu", threads = 1,
                                       verbose = FALSE))
    expect_identical(attr(ex, "simulatedNodes"), c("x1", "x2", "x3"))
    expect_equal(attr(ex, "stationary"), pi_ref, tolerance = 1e-9, ignore_attr = TRUE)
    marg <- vapply(1:3, function(i) sum(pi_ref[bitwAnd(0:7, 2^(i - 1)) > 0]), 0)
    expect_equal(ex$probability, marg, tolerance = 1e-9)
    expect_true(all(ex$converged))
    expect_identical(attr(ex, "solver"), "direct")
  }
  # the limit p -> 0: x1 is on in 15/16 of the time (the figure BoolNet users see)
  expect_equal(pbnSteadyState(net, c(x1 = TRUE), p = 1e-6, method = "exact")$probability, 15 / 16, tolerance = 1e-5)
})

test_that("BoolNet's examplePBN converts to the same exact answer", {
  skip_if_not_installed("BoolNet")
  e <- new.env()
  utils::data("examplePBN", package = "BoolNet", envir = e)
  pi_ref <- stationary_solve(example_P(example_rules, 1e-6))
  ex <- pbnSteadyState(e$examplePBN, "marginals", p = 1e-6, method = "exact", backend = "cpu", threads = 1)
  expect_equal(attr(ex, "stationary"), pi_ref, tolerance = 1e-9, ignore_attr = TRUE)
})

test_that("a fixed node: transient states get 0, the rest match the direct solve", {
  # x1 fixed on (constant, never perturbed): states with x1 off are transient
  rules <- example_rules
  rules$x1 <- list(list(f = function(x) TRUE, p = 1))
  p <- 1e-4
  on <- which(bitwAnd(0:7, 1L) > 0)
  # P over those 4 states, only x2 and x3 perturbable
  P <- matrix(0, 4, 4)
  for (a in 1:4) for (b in 1:4) {
    x <- as.logical((on[a] - 1) %/% 2^(0:2) %% 2)
    y <- as.logical((on[b] - 1) %/% 2^(0:2) %% 2)
    flips <- sum(x != y)
    q <- vapply(rules, function(fl) sum(vapply(fl, function(r) r$p * r$f(x), 0)), 0)
    P[a, b] <- (if (flips > 0) p^flips * (1 - p)^(2 - flips) else 0) + (1 - p)^2 * prod(ifelse(y, q, 1 - q))
  }
  pi_ref <- numeric(8)
  pi_ref[on] <- stationary_solve(P)
  net <- example_net()
  net2 <- pbn(list(x1 = "1", x2 = net$functions$x2[[1]]$expression,
                   x3 = c(stats::setNames(net$probabilities$x3, vapply(net$functions$x3, `[[`, "", "expression")))),
              perturbable = c(x1 = FALSE))
  ex <- expect_silent(pbnSteadyState(net2, "marginals", p = p, method = "exact", reduce = FALSE))
  expect_identical(attr(ex, "solver"), "direct")
  expect_equal(attr(ex, "stationary"), pi_ref, tolerance = 1e-9, ignore_attr = TRUE)
  expect_true(all(attr(ex, "stationary")[-on] == 0))
})

test_that("several closed classes fall back to power iteration", {
  # p = 0 and two fixed points (A = B copies): no unique stationary distribution
  net <- pbn(list(A = "B", B = "A"))
  ex <- pbnSteadyState(net, c(A = TRUE), p = 0, method = "exact", backend = "cpu")
  expect_identical(attr(ex, "solver"), "power iteration")
})

test_that("sets decided by fixed nodes are exact and converged, without a warning", {
  net <- pbn(list(A = "1", B = "!B | A", C = "B & !C", D = "0"), perturbable = c(A = FALSE, D = FALSE))
  sets <- list(A = c(A = TRUE), notA = c(A = FALSE), AD = c(A = TRUE, D = FALSE), C = c(C = TRUE),
               Cd = c(C = TRUE, D = TRUE))
  r <- expect_silent(pbnSteadyState(net, sets, p = 0.01, r = 0.02, seed = 1, backend = "cpu", threads = 1,
                                    verbose = FALSE))
  expect_identical(r$probability[c(1, 2, 3, 5)], c(1, 0, 1, 0))
  expect_true(all(r$converged))
  expect_identical(r$lower[1:3], r$upper[1:3])
  ex <- pbnSteadyState(net, sets, p = 0.01, method = "exact")
  expect_lt(abs(r$probability[[4]] - ex$probability[[4]]), 0.02)
  # only decided sets: nothing runs
  r2 <- expect_silent(pbnSteadyState(net, sets[1:2], p = 0.01, seed = 1, backend = "cpu", verbose = FALSE))
  expect_identical(r2$probability, c(1, 0))
  expect_identical(r2$steps, c(0, 0))
})

test_that("BoolNet's fixGenes() node warns nothing", {
  skip_if_not_installed("BoolNet")
  e <- new.env()
  utils::data("cellcycle", package = "BoolNet", envir = e)
  net <- BoolNet::fixGenes(e$cellcycle, "CycD", 1)
  r <- expect_silent(pbnSteadyState(net, list(CycD = c(CycD = TRUE), Rb = c(Rb = TRUE)), p = 0.01, r = 0.02,
                                    seed = 1, backend = "cpu", threads = 1, verbose = FALSE))
  expect_identical(r$probability[[1]], 1)
  expect_true(all(r$converged))
})

test_that("print() of a pbnSteadyState result fits in 80 columns", {
  net <- example_net()
  r <- pbnSteadyState(net, "marginals", p = 0.01, r = 0.02, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  out <- capture.output(print(r))
  expect_true(all(nchar(out) <= 80))
  expect_match(out[[1]], "two-state Markov chain")
  expect_true(any(grepl("probability", out)))
  expect_false(any(grepl("alpha|rhat|trajectories +seconds", out)))
  expect_identical(ncol(as.data.frame(r)), 15L)
  ex <- pbnSteadyState(net, "marginals", p = 0.01, method = "exact")
  out <- capture.output(print(ex))
  expect_true(all(nchar(out) <= 80))
  expect_match(out[[1]], "exact stationary distribution \\(direct\\)")
})
