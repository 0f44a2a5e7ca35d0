# engine = "bits": 32 trajectories per word (src/pbn/pbn_bits.h).  Oracles:
# the transition matrix built in plain R from the pbn object
# (helper-pbn.R: pbn_brute_P), its stationary distribution, and the chain
# engine's CPU results only where the same random numbers are drawn (the
# start states).

# Frequencies of the states (0-based codes) of a [step, node, trajectory] array at step i.
pbn_codes <- function(x, i) colSums(x[i, , , drop = TRUE] * 2^(seq_len(dim(x)[2L]) - 1))

# Pearson's chi-square of counts against probabilities (cells with zero
# probability must have zero counts); the upper-tail p-value.
pbn_chisq_p <- function(counts, prob) {
  expect_equal(sum(counts[prob == 0]), 0)
  keep <- prob > 0
  e <- prob[keep] * sum(counts)
  stats::pchisq(sum((counts[keep] - e)^2 / e), df = sum(keep) - 1, lower.tail = FALSE)
}

test_that("one and two bit-sliced steps follow the PBN's transition probabilities", {
  # nodes with 1-3 functions of 1-3 inputs (probabilities with many
  # significant bits: the bitwise comparison runs deep), p large enough that
  # perturbation steps are common
  net <- pbn_random(4, 12, maxfun = 3, maxk = 3)
  expect_gt(max(lengths(net$functions)), 2)
  p <- 0.05
  P <- pbn_brute_P(net, p)
  NS <- nrow(P)
  n_traj <- 40000
  for (s0 in c(0, 5, 14)) {
    from <- as.logical((s0 %/% 2^(0:3)) %% 2)
    x <- pbnSimulate(net, 2, from = from, trajectories = n_traj, p = p, seed = 7 + s0, backend = "cpu",
                     engine = "bits")
    c1 <- pbn_codes(x, 2)
    expect_gt(pbn_chisq_p(tabulate(c1 + 1, NS), P[s0 + 1, ]), 1e-4)
    # the pair of steps: P(x1 = a, x2 = b) = P[s0, a] P[a, b] (a step's
    # draws are new at every step)
    pair <- c1 * NS + pbn_codes(x, 3)
    joint <- as.vector(t(P[s0 + 1, ] * P))
    expect_gt(pbn_chisq_p(tabulate(pair + 1, NS * NS), joint), 1e-4)
  }
  # the test has power: a perturbation rate off by 20% is rejected
  x <- pbnSimulate(net, 1, from = rep(FALSE, 4), trajectories = n_traj, p = p, seed = 7, backend = "cpu",
                   engine = "bits")
  expect_lt(pbn_chisq_p(tabulate(pbn_codes(x, 2) + 1, NS), pbn_brute_P(net, 1.2 * p)[1, ]), 1e-4)
})

test_that("bit-sliced estimates match the stationary distribution of the transition matrix", {
  net <- pbn_random(6, 21, maxfun = 3, maxk = 3)
  p <- 0.01
  pi <- pbn_brute_pi(pbn_brute_P(net, p))
  codes <- seq_along(pi) - 1
  on <- function(i) sum(pi[(codes %/% 2^(i - 1)) %% 2 == 1])
  sets <- list(x1 = c(x1 = TRUE), x3 = c(x3 = TRUE), `x2&!x6` = c(x2 = TRUE, x6 = FALSE))
  truth <- c(on(1), on(3), sum(pi[(codes %/% 2) %% 2 == 1 & (codes %/% 32) %% 2 == 0]))
  r <- 0.01
  hits <- 0
  for (seed in 1:6) {
    est <- pbnSteadyState(net, sets, p = p, r = r, seed = seed, trajectories = 256, backend = "cpu",
                          threads = 2, engine = "bits", verbose = FALSE)
    expect_true(all(est$converged))
    hits <- hits + sum(abs(est$probability - truth) <= r)
    expect_true(all(abs(est$probability - truth) <= 3 * r))
  }
  expect_gte(hits, 15)  # of 18 at s = 0.95
})

test_that("bit-sliced runs: same seed, same result whatever the threads; the chains' start states", {
  net <- pbn_random(40, 3, maxfun = 3, maxk = 5)
  sets <- list(c(x1 = TRUE), c(x2 = TRUE, x30 = FALSE))
  run <- function(threads, traj) pbnSteadyState(net, sets, p = 0.01, r = 0.02, seed = 5, trajectories = traj,
                                                backend = "cpu", threads = threads, engine = "bits", verbose = FALSE)
  for (traj in c(32, 70)) {  # whole groups and a partial last group
    a <- run(1, traj)
    b <- run(2, traj)
    expect_identical(a[setdiff(names(a), "seconds")], b[setdiff(names(b), "seconds")])
    expect_identical(attr(a, "engine"), "bits")
  }
  # trajectory i starts where the chain engine starts it (its own stream)
  s1 <- pbnSimulate(net, 0, trajectories = 70, seed = 2, backend = "cpu", engine = "bits", threads = 2)
  s2 <- pbnSimulate(net, 0, trajectories = 70, seed = 2, backend = "cpu", engine = "chains", threads = 1)
  expect_identical(s1[, , ], s2[, , ])
  t1 <- pbnSimulate(net, 30, trajectories = 70, seed = 2, backend = "cpu", engine = "bits", threads = 1)
  expect_identical(t1, pbnSimulate(net, 30, trajectories = 70, seed = 2, backend = "cpu", engine = "bits",
                                   threads = 2))
})

test_that("engine = \"bits\" refuses what it cannot run, naming the argument", {
  net <- pbn_random(5, 1)
  expect_error(pbnSteadyState(net, c(x1 = TRUE), engine = "bytes", verbose = FALSE), "engine",
               class = "sysbioGPU_error_input")
  expect_error(pbnSteadyState(net, c(x1 = TRUE), update = "asynchronous", engine = "bits", backend = "cpu",
                              verbose = FALSE), "engine = \"bits\".*synchronous", class = "sysbioGPU_error_input")
  wide <- pbn_random(8, 2, maxk = 6)
  skip_if(max(unlist(lapply(wide$functions, function(f) lengths(lapply(f, `[[`, "inputs"))))) < 6)
  expect_error(pbnSteadyState(wide, "marginals", engine = "bits", reduce = FALSE, backend = "cpu", verbose = FALSE),
               "at most 5 inputs", class = "sysbioGPU_error_input")
  expect_error(pbnSimulate(net, 3, update = "asynchronous", engine = "bits", backend = "cpu"),
               "engine = \"bits\"", class = "sysbioGPU_error_input")
})

test_that("bit-sliced GPU trajectories and estimates are identical to the CPU's, on one or two GPUs", {
  skip_if_no_gpu()
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  a <- pbnSimulate(net, 200, trajectories = 70, p = 0.05, seed = 9, backend = "cpu", engine = "bits")
  g <- pbnSimulate(net, 200, trajectories = 70, p = 0.05, seed = 9, backend = "gpu", engine = "bits")
  expect_identical(unclass(a)[seq_along(a)], unclass(g)[seq_along(g)])
  sets <- list(c(Apoptosis = TRUE), c(Survival = TRUE, Death = FALSE))
  cols <- c("probability", "N", "M", "alpha", "beta", "samples", "rhat", "steps", "converged")
  for (traj in c(64, 300)) {
    cpu <- pbnSteadyState(net, sets, p = 0.01, r = 0.005, seed = 4, trajectories = traj, backend = "cpu",
                          engine = "bits", verbose = FALSE)
    gpu <- pbnSteadyState(net, sets, p = 0.01, r = 0.005, seed = 4, trajectories = traj, backend = "gpu",
                          engine = "bits", verbose = FALSE)
    expect_identical(gpu[cols], cpu[cols], info = traj)
  }
  # 300 nodes (several state words), functions of up to 5 inputs, marginals
  big <- pbn_random(300, 1, maxfun = 3, maxk = 5)
  bsets <- list(c(x1 = TRUE), c(x2 = TRUE, x3 = FALSE), c(x299 = FALSE))
  cpu <- pbnSteadyState(big, bsets, p = 0.001, r = 0.01, seed = 2, trajectories = 256, backend = "cpu",
                        engine = "bits", verbose = FALSE)
  gpu <- pbnSteadyState(big, bsets, p = 0.001, r = 0.01, seed = 2, trajectories = 256, backend = "gpu",
                        engine = "bits", verbose = FALSE)
  expect_identical(gpu[cols], cpu[cols])
  # on two GPUs, or one GPU's two shares
  for (traj in c(4096, 4097)) {
    one <- pbnSteadyState(net, sets, r = 2e-3, trajectories = traj, seed = 4, backend = "gpu", device = 0,
                          engine = "bits", verbose = FALSE)
    two <- on_devices(pbnSteadyState(net, sets, r = 2e-3, trajectories = traj, seed = 4, backend = "gpu",
                                     device = gpu_pair(), engine = "bits", verbose = FALSE))
    expect_identical(two[cols], one[cols], info = traj)
  }
})
