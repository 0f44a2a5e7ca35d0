# Oracles computed here, independently of the engines, for four claims
# that had none: the stochastic LASSIE folder's unit conversion, grnEvolve's
# reported fitness, the genetic algorithm's random streams and
# pbnSteadyState's Raftery-Lewis sample size.

test_that("a stochastic LASSIE folder converts a homodimer's constant by N_A V / 2", {
  # 2A -> B (homodimer), A + B -> C, C -> A; amounts in molecules
  d <- tempfile(); dir.create(d)
  writeLines(c("2\t0\t0", "1\t1\t0", "0\t0\t1"), file.path(d, "left_side"))
  writeLines(c("0\t1\t0", "0\t0\t1", "1\t0\t0"), file.path(d, "right_side"))
  cs <- c(3e-9, 5e-10, 0.7)
  writeLines(format(cs, digits = 17), file.path(d, "c_vector"))
  x0 <- c(6000, 1200, 0)
  writeLines(format(x0), file.path(d, "M_0"))
  writeLines("stochastic", file.path(d, "modelkind"))
  V <- 2e-15
  writeLines(format(V), file.path(d, "volume"))
  m <- readLASSIE(d)
  # by hand: a2 = c n (n - 1) / 2 molecules per second for 2A -> B, i.e.
  # d[A]/dt = -2 a2 / (N_A V) ~ -c N_A V [A]^2 = -2 k [A]^2, so k = c N_A V / 2;
  # A + B -> C: c n_A n_B = k [A][B] N_A V, so k = c N_A V; first order: k = c
  NAV <- 6.02214076e23 * V
  expect_equal(unname(m$rates), c(3e-9 * NAV / 2, 5e-10 * NAV, 0.7), tolerance = 1e-14)
  expect_equal(unname(m$initial), x0 / NAV, tolerance = 1e-14)
  # and the homodimer alone against its closed form A(t) = A0 / (1 + 2 k A0 t)
  d2 <- tempfile(); dir.create(d2)
  writeLines("2\t0", file.path(d2, "left_side")); writeLines("0\t1", file.path(d2, "right_side"))
  writeLines("4e-9", file.path(d2, "c_vector")); writeLines(c("5000", "0"), file.path(d2, "M_0"))
  writeLines("stochastic", file.path(d2, "modelkind")); writeLines(format(V), file.path(d2, "volume"))
  m2 <- readLASSIE(d2)
  k <- 4e-9 * NAV / 2
  A0 <- 5000 / NAV
  tt <- c(0, 10, 50, 200)
  out <- lassieSimulate(m2, tt, rtol = 1e-9, atol = 1e-14, backend = "cpu", threads = 1, verbose = FALSE)
  expect_equal(unname(out[, "S1"]), A0 / (1 + 2 * k * A0 * tt), tolerance = 1e-6)
  expect_equal(unname(out[, "S2"]), (A0 - A0 / (1 + 2 * k * A0 * tt)) / 2, tolerance = 1e-6)
})

test_that("grnEvolve's fitness is 0.9 dn/N + 0.1 dl/N^2 of the network it returns", {
  eye <- grnMouseEye()
  N <- nrow(eye$network)
  for (sd in 1:3) {
    fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 32, islands = 2, generations = 3, seed = sd,
                     backend = "cpu", threads = 1, verbose = FALSE)
    # the state after `steps` steps of the returned network and rules
    # (grnSimulate: the model of the documentation, not the GA's fitness code)
    traj <- grnSimulate(fit$network, fit$rules, eye$from, steps = 5)
    dn <- sum(traj[nrow(traj), names(eye$to)] != eye$to)
    dl <- sum(fit$network != eye$network)
    expect_gt(dn, 0)
    expect_identical(c(fit$dn, fit$dl), c(dn, dl))
    expect_equal(fit$fitness, 0.9 * dn / N + 0.1 * dl / N^2, tolerance = 1e-12)
    # the history's best at the last generation is that fitness
    expect_equal(min(fit$history[nrow(fit$history), ]), fit$fitness, tolerance = 1e-12)
  }
})

test_that("the genetic algorithm draws one stream per (seed, generation, island, individual)", {
  stream_of <- function(gen, pop, k) {
    .Call(sysbioGPU:::ffi_grn_testhook, "stream", array(0L, c(1, 1, 0)), matrix(0L, 1, 0),
          as.double(rbind(gen, pop, k)), c(0, 0), 1L, 0L)
  }
  islands <- 4; size <- 8; pop <- islands * size
  tup <- expand.grid(individual = 0:(size - 1), island = 0:(islands - 1), generation = 0:40)
  sub <- stream_of(tup$generation, pop, tup$island * size + tup$individual)
  b <- sysbioGPU:::resolveBackend("cpu", 1)
  for (seed in c(1, 2^40 + 3)) {
    # the first draws of each stream (Philox: subsequence = the stream)
    draws <- vapply(sub, function(s) sysbioGPU:::rng_fill("uint32", 4, seed, s, 0, 1, 1, b), numeric(4))
    key <- apply(draws, 2, paste, collapse = ":")
    expect_false(anyDuplicated(key) > 0)
  }
  # the streams of different seeds differ too
  a <- sysbioGPU:::rng_fill("uint32", 4, 1, sub[[5]], 0, 1, 1, b)
  z <- sysbioGPU:::rng_fill("uint32", 4, 2, sub[[5]], 0, 1, 1, b)
  expect_false(identical(a, z))
})

test_that("pbnSteadyState's N is Raftery and Lewis' size where that size binds", {
  # A = !B, B = A is one cycle of period 4 through all four states: with
  # p = 0 every chain spends exactly half of any window of 4k steps in
  # A = 1, so the chains' spread is ~0, while the first-order two-state
  # model (alpha = beta = 1/2) asks for 0.25 (z / r)^2 samples, more than the
  # two windows of 128 steps of 8 chains
  net <- pbn(list(A = "!B", B = "A"))
  r <- 0.01; s <- 0.95; traj <- 8
  z <- qnorm((1 + s) / 2)
  for (sd in 1:3) {
    res <- pbnSteadyState(net, list(c(A = TRUE)), p = 0, r = r, s = s, trajectories = traj, seed = sd,
                          backend = "cpu", threads = 1, verbose = FALSE)
    a <- res$alpha; b <- res$beta
    # Raftery and Lewis (1992), thinning 1: N = a b (2 - a - b) / (a + b)^3 (z / r)^2
    n_rl <- ceiling(a * b * (2 - a - b) / (a + b)^3 * (z / r)^2)
    expect_equal(res$N, n_rl)
    expect_equal(c(a, b), c(0.5, 0.5), tolerance = 0.01)
    expect_equal(n_rl, ceiling(0.25 * (z / r)^2), tolerance = 0.01)
    # it, not the other two terms, sets N
    expect_gt(n_rl, 2 * 128 * traj)
    expect_gt(n_rl, res$samples * (qt((1 + s) / 2, traj - 1) * res$se / r)^2)
    expect_gte(res$samples, res$N)
  }
})
