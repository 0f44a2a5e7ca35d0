# ---- PBN objects and the expression parser ---------------------------------

test_that("expressions become truth tables with the first input most significant", {
  net <- pbn(list(A = "B & !C", B = "A | C", C = "1"))
  fA <- net$functions$A[[1]]
  expect_equal(fA$inputs, c("B", "C"))
  # rows (B, C) = 00, 01, 10, 11
  expect_equal(pbn_fun_table(fA), c(FALSE, FALSE, TRUE, FALSE))
  expect_equal(net$functions$C[[1]]$inputs, character())
  expect_equal(pbn_fun_table(net$functions$C[[1]]), TRUE)
  net2 <- pbn(list(A = "!(B | C) & (B | !C)", B = "B", C = "C"))
  expect_equal(pbn_fun_table(net2$functions$A[[1]]), c(TRUE, FALSE, FALSE, FALSE))
})

test_that("tables of many inputs are right in every row (no off-by-one at row 32)", {
  net <- pbn(list(A = "(B & C) | (!D & E) | (F & !G)"), identityForMissing = TRUE)
  tab <- pbn_fun_table(net$functions$A[[1]])
  j <- 0:63
  bit <- function(v) (j %/% 2^(6 - v)) %% 2 == 1  # B is the most significant of 6
  expect_equal(tab, (bit(1) & bit(2)) | (!bit(3) & bit(4)) | (bit(5) & !bit(6)))
  big <- pbn(list(A = paste0("x", 1:20, collapse = " & ")), identityForMissing = TRUE)
  t20 <- pbn_fun_table(big$functions$A[[1]])
  expect_equal(length(t20), 2^20)
  expect_equal(which(t20), 2^20)
  x <- pbnSimulate(big, 1, from = c(rep(FALSE, 1), rep(TRUE, 20)), p = 0, seed = 1, backend = "cpu")
  expect_true(x[2, "A"])
  expect_error(pbn(list(A = paste0("x", 1:25, collapse = " | ")), identityForMissing = TRUE),
               "at most 24 inputs", class = "sysbioGPU_error_input")
})

test_that("pbn() takes truth tables and probabilities; print and summary work", {
  net <- pbn(list(
    A = c("B & C" = 0.6, "!B" = 0.4),
    B = list(functions = list("A", list(inputs = "C", table = c(1, 0))), probabilities = c(0.5, 0.5)),
    C = list(inputs = "A", table = c(TRUE, FALSE))
  ), perturbable = c(C = FALSE))
  expect_s3_class(net, "pbn")
  expect_equal(net$probabilities$A, c(0.6, 0.4))
  expect_equal(unname(net$perturbable), c(TRUE, TRUE, FALSE))
  expect_output(print(net), "3 node\\(s\\), 5 function")
  expect_output(print(summary(net)), "2 node\\(s\\) with several functions")
})

test_that("bad PBN definitions are input errors naming the problem", {
  expect_error(pbn(list(A = c("B" = 0.5, "!B" = 0.4), B = "B")), "sum to 0.9", class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = "B & Z", B = "B")), "unknown node name.*Z", class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = "B &", B = "B")), "unexpected end", class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = "(B", B = "B")), "missing '\\)'", class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = "B + B", B = "B")), "unexpected character '\\+'", class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = list(inputs = "B", table = c(1, 0, 1)), B = "B")), "needs? 2", class = "sysbioGPU_error_input")
  expect_error(pbn(list("B")), "named", class = "sysbioGPU_error_input")
  # unknown names become identity inputs only where asked (as readPBN does)
  net <- pbn(list(A = "B"), identityForMissing = TRUE)
  expect_equal(net$nodes, c("A", "B"))
  expect_equal(pbn_fun_table(net$functions$B[[1]]), c(FALSE, TRUE))
})

# ---- files -------------------------------------------------------------------

test_that("readPBN reads .bnet with several rules per target and reports syntax errors with the line", {
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  net <- readPBN(f)
  expect_equal(length(net$nodes), 7)
  expect_equal(net$probabilities$Survival, c(0.8, 0.2))
  tf <- tempfile(fileext = ".bnet")
  writeLines(c("targets, factors", "A, B & C", "B, A", "B, !A", "C, (A | B"), tf)
  expect_error(readPBN(tf), "line 5.*missing '\\)'", class = "sysbioGPU_error_input")
  writeLines(c("targets, factors", "A, B & D", "B, A", "B, !A"), tf)
  net <- readPBN(tf)
  expect_equal(net$probabilities$B, c(0.5, 0.5))
  expect_equal(net$nodes, c("A", "B", "D"))  # D: an input, becomes identity
  expect_equal(pbn_fun_table(net$functions$D[[1]]), c(FALSE, TRUE))
})

test_that("readPBN reads ASSA-PBN .pbn files", {
  tf <- tempfile(fileext = ".pbn")
  writeLines(c("type=synchronous", "n=2", "perturbation=0.01",
               "nodeNames", "x1", "x2", "endNodeNames",
               "node x1", "0.3 : x2", "0.6 : !x2", "endNode",
               "node x2", "1 : x1 & x2", "endNode",
               "npNode", "x2", "endNpNode"), tf)
  net <- readPBN(tf)
  expect_equal(net$p, 0.01)
  expect_equal(net$probabilities$x1, c(1, 2) / 3)
  expect_equal(unname(net$perturbable), c(TRUE, FALSE))
  writeLines(c("node x1", "0.3 x2", "endNode"), tf)
  expect_error(readPBN(tf), "line 2", class = "sysbioGPU_error_input")
})

test_that("the example network in ASSA-PBN's format reads as its .bnet, and so do the readers' errors", {
  # two files written apart, two readers: the same pbn object
  ex <- function(f) system.file("extdata", f, package = "sysbioGPU")
  expect_identical(readPBN(ex("pbn-example.pbn")), readPBN(ex("pbn-example.bnet")))
  lines <- readLines(ex("pbn-example.pbn"))
  tf <- tempfile(fileext = ".pbn")
  bad <- function(at, text) { l <- lines; l[at] <- text; writeLines(l, tf); tf }
  at <- grep("^0.8 : Signal & !Caspase$", lines)
  expect_error(readPBN(bad(at, "0.8 : Signal & !Caspase)")), sprintf("pbn, line %d: unexpected '\\)'", at),
               class = "sysbioGPU_error_input")
  expect_error(readPBN(bad(at, "0.8 Signal")), sprintf("line %d: expected 'probability : expression'", at),
               class = "sysbioGPU_error_input")
  expect_error(readPBN(bad(at, "-0.8 : Signal")), sprintf("line %d: bad probability '-0.8'", at),
               class = "sysbioGPU_error_input")
  expect_error(readPBN(bad(at, "0.8 :   ")), sprintf("line %d: expected", at), class = "sysbioGPU_error_input")
  expect_error(readPBN(bad(at, "0.8 : Signal $ Caspase")), sprintf("line %d: unexpected character '\\$'", at),
               class = "sysbioGPU_error_input")
  expect_error(readPBN(bad(grep("^node Death$", lines), "node Signal")), "node 'Signal' defined twice",
               class = "sysbioGPU_error_input")
})

test_that("as.pbn converts BoolNet networks", {
  skip_if_not_installed("BoolNet")
  data(examplePBN, package = "BoolNet", envir = environment())
  net <- as.pbn(examplePBN)
  expect_equal(net$nodes, examplePBN$genes)
  expect_equal(net$probabilities[[1]], vapply(examplePBN$interactions[[1]], `[[`, 0, "probability"))
  data(cellcycle, package = "BoolNet", envir = environment())
  cc <- as.pbn(cellcycle)
  expect_equal(length(cc$nodes), 10)
})

# ---- simulation -----------------------------------------------------------

test_that("pbnSimulate follows the functions at p = 0 and is reproducible", {
  net <- pbn(list(A = "!B", B = "A"))
  x <- pbnSimulate(net, 4, from = c(A = TRUE, B = FALSE), p = 0, seed = 1, backend = "cpu")
  expect_equal(unname(x[, "A"]), c(TRUE, TRUE, FALSE, FALSE, TRUE))
  expect_equal(unname(x[, "B"]), c(FALSE, TRUE, TRUE, FALSE, FALSE))
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  ex <- readPBN(f)
  a <- pbnSimulate(ex, 200, trajectories = 3, p = 0.05, seed = 7, backend = "cpu", threads = 1)
  b <- pbnSimulate(ex, 200, trajectories = 3, p = 0.05, seed = 7, backend = "cpu", threads = 2)
  expect_identical(a, b)
  expect_equal(dim(a), c(201, 7, 3))
  # trajectory i is the same whatever the number of trajectories
  one <- pbnSimulate(ex, 200, trajectories = 1, p = 0.05, seed = 7, backend = "cpu")
  expect_identical(unname(unclass(one)[, ]), unname(a[, , 1]))
  # asynchronous: at most one node changes per unperturbed step
  as <- pbnSimulate(ex, 300, p = 0, update = "asynchronous", seed = 3, backend = "cpu")
  expect_true(all(rowSums(abs(diff(as * 1))) <= 1))
})

test_that("a network with more than 64 nodes simulates correctly (multi-word states)", {
  n <- 150
  nodes <- c(list(x1 = "x150"), setNames(as.list(paste0("x", 1:(n - 1))), paste0("x", 2:n)))
  net <- pbn(nodes)  # a shift register
  start <- rep(FALSE, n); start[1] <- TRUE
  x <- pbnSimulate(net, 130, from = start, p = 0, seed = 1, backend = "cpu")
  expect_true(x[131, 131])
  expect_equal(sum(x[131, ]), 1)
})

test_that("the default trajectory count depends on r, s and the sets only: threads do not change results", {
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  net <- readPBN(f)
  sets <- list(c(Apoptosis = TRUE), c(Survival = TRUE, Death = FALSE))
  a <- pbnSteadyState(net, sets, p = 0.01, r = 0.01, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  b <- pbnSteadyState(net, sets, p = 0.01, r = 0.01, seed = 3, backend = "cpu", threads = 2, verbose = FALSE)
  cols <- setdiff(names(a), "seconds")
  expect_identical(as.data.frame(unclass(a)[cols]), as.data.frame(unclass(b)[cols]))
  expect_equal(a$trajectories, c(64, 64))
  # the documented rule: 2^floor(log2((z / r)^2 / 4096)) in [64, 2^18]
  expect_equal(pbn_auto_trajectories(1e-4, 0.95, 1), 65536)
  expect_equal(pbn_auto_trajectories(1e-3, 0.95, 1), 512)
  expect_equal(pbn_auto_trajectories(5e-6, 0.95, 7), 2^18)
  expect_equal(pbn_auto_trajectories(0.1, 0.95, 1), 64)
  expect_equal(pbn_auto_trajectories(1e-6, 0.95, 10000), 4096)  # counter memory
})

test_that("the register step (<= 128 nodes) gives exactly the general step's results", {
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  ex <- readPBN(f)
  sets <- list(c(Apoptosis = TRUE), c(Survival = TRUE, Death = FALSE))
  big <- pbn_random(100, 4, maxfun = 3, maxk = 7)  # two words, functions of up to 7 inputs
  wide <- pbn_random(70, 8, maxfun = 2, maxk = 6)
  cases <- list(list(ex, sets, "synchronous"), list(ex, sets, "asynchronous"),
                list(big, list(c(x1 = TRUE), c(x70 = TRUE, x3 = FALSE), c(x99 = FALSE)), "synchronous"),
                list(big, list(c(x2 = TRUE)), "asynchronous"),
                list(wide, "marginals", "synchronous"))  # 70 sets: the per-step counting
  for (cs in cases) {
    run <- function() pbnSteadyState(cs[[1]], cs[[2]], p = 0.01, update = cs[[3]], r = 0.02, seed = 11,
                                     trajectories = 40, backend = "cpu", threads = 2, verbose = FALSE)
    a <- run()
    old <- options(sysbioGPU.pbnGeneralStep = TRUE)
    b <- run()
    options(old)
    cols <- setdiff(names(a), "seconds")
    expect_identical(as.data.frame(unclass(a)[cols]), as.data.frame(unclass(b)[cols]))
  }
})

test_that("fixed points take their function steps at once: the same results as stepping", {
  mono <- pbn_monotone(100, 4)    # two words; y (two functions) dropped by the reduction
  big <- pbn_monotone(150, 5)     # the general step (more than 128 nodes)
  cases <- list(list(mono, list(c(x1 = TRUE), c(x5 = TRUE, x7 = FALSE)), TRUE),
                list(mono, list(c(x3 = TRUE)), FALSE),         # y kept: not skipped
                list(mono, lapply(paste0("x", 1:70), function(v) setNames(TRUE, v)), TRUE),  # 70 sets
                list(big, list(c(x1 = TRUE), c(x9 = FALSE)), TRUE))
  for (cs in cases) {
    run <- function(...) {
      x <- pbnSteadyState(cs[[1]], cs[[2]], p = 0.01, r = 0.02, seed = 7, trajectories = 40,
                          reduce = cs[[3]], backend = "cpu", threads = 2, verbose = FALSE, ...)
      as.data.frame(unclass(x)[setdiff(names(x), "seconds")])
    }
    a <- run()
    old <- options(sysbioGPU.pbnNoSkip = TRUE, sysbioGPU.pbnGeneralStep = NULL)
    b <- run()
    options(sysbioGPU.pbnGeneralStep = TRUE)
    c <- run()
    options(sysbioGPU.pbnNoSkip = NULL)
    d <- run()
    options(old)
    expect_identical(a, b)
    expect_identical(a, c)
    expect_identical(a, d)
  }
})

test_that("perturbation steps come at rate 1 - (1 - p)^n, also for tiny p", {
  flips <- function(x) apply(x, 3, function(m) rowSums(abs(diff(m * 1))))
  idn <- pbn(list(A = "A", B = "B", C = "C"))  # only perturbations change the state
  f <- flips(pbnSimulate(idn, 20000, trajectories = 10, p = 0.05, seed = 1, backend = "cpu"))
  q <- 1 - 0.95^3
  expect_lt(abs(mean(f > 0) - q), 4 * sqrt(q * (1 - q) / length(f)))
  expect_lt(abs(mean(f) - 0.15), 4 * sqrt(3 * 0.05 * 0.95 / length(f)))
  # p = 1e-4: the count table covers 4096 steps, (1 - q)^4096 = 0.44: most
  # counts take several draws
  two <- pbn(list(A = "A", B = "B"))
  f2 <- flips(pbnSimulate(two, 1e5, trajectories = 10, p = 1e-4, seed = 2, backend = "cpu"))
  ev <- sum(f2 > 0)
  q2 <- 1 - (1 - 1e-4)^2
  expect_lt(abs(ev - q2 * length(f2)), 5 * sqrt(q2 * length(f2)))
  # no perturbation at p = 0
  expect_equal(sum(flips(pbnSimulate(two, 5000, trajectories = 2, p = 0, seed = 1, backend = "cpu"))), 0)
})

test_that("two-state estimates on a network with fixed points match the exact method", {
  net <- pbn_monotone(10, 3)
  sets <- list(c(x1 = TRUE), c(x2 = TRUE, x4 = FALSE))
  ex <- pbnSteadyState(net, sets, p = 0.02, method = "exact", verbose = FALSE)
  tr <- pbnSteadyState(net, sets, p = 0.02, r = 0.01, seed = 4, backend = "cpu", verbose = FALSE)
  expect_true(all(abs(tr$probability - ex$probability) <= 0.01))
})

# ---- exact method ------------------------------------------------------------

test_that("exact method matches a brute-force stationary distribution on random PBNs", {
  for (sd in 1:4) {
    net <- pbn_random(4, sd)
    for (async in c(FALSE, TRUE)) {
      p <- c(0.01, 0.2)[1 + async]
      P <- pbn_brute_P(net, p, async)
      pi <- pbn_brute_pi(P)
      ex <- pbnSteadyState(net, "marginals", p = p, method = "exact",
                           update = if (async) "asynchronous" else "synchronous", verbose = FALSE)
      expect_equal(attr(ex, "stationary"), pi, tolerance = 1e-9)
      states <- 0:15
      marg <- vapply(1:4, function(i) sum(pi[(states %/% 2^(i - 1)) %% 2 == 1]), 0)
      expect_equal(ex$probability, marg, tolerance = 1e-9)
    }
  }
})

test_that("constant nodes: P(on) = a / (a + b); identity nodes: uniform", {
  p <- 0.1; c <- 0.3; n <- 3
  net <- pbn(list(A = c("1" = c, "0" = 1 - c), B = c("1" = 0.5, "0" = 0.5), C = c("1" = 0.9, "0" = 0.1)))
  a <- p + (1 - p)^n * c; b <- p + (1 - p)^n * (1 - c)
  ex <- pbnSteadyState(net, c(A = TRUE), p = p, method = "exact", verbose = FALSE)
  expect_equal(ex$probability, a / (a + b), tolerance = 1e-10)
  expect_equal(a / (a + b), 0.3430570506, tolerance = 1e-9)
  idn <- pbn(list(A = "A", B = "B", C = "C", D = "D"))
  ex2 <- pbnSteadyState(idn, "marginals", p = 0.05, method = "exact", verbose = FALSE)
  expect_equal(attr(ex2, "stationary"), rep(1 / 16, 16), tolerance = 1e-10)
  tr <- pbnSteadyState(idn, c(A = TRUE, B = FALSE), p = 0.05, r = 0.01, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  expect_lt(abs(tr$probability - 0.25), 0.01)
})

test_that("exact method agrees with BoolNet's markovSimulation at p = 0", {
  skip_if_not_installed("BoolNet")
  data(examplePBN, package = "BoolNet", envir = environment())
  sim <- BoolNet::markovSimulation(examplePBN, returnTable = FALSE)
  ref <- sim$reachedStates
  net <- as.pbn(examplePBN)
  ex <- pbnSteadyState(net, "marginals", p = 0, method = "exact", verbose = FALSE)
  pi <- attr(ex, "stationary")
  # BoolNet's state columns are genes; rows are reached states with probabilities
  for (i in seq_len(nrow(ref))) {
    bits <- unlist(ref[i, examplePBN$genes])
    idx <- sum(bits * 2^(seq_along(bits) - 1))
    expect_equal(pi[idx + 1], ref$Probability[i], tolerance = 1e-6)
  }
})

test_that("the exact method refuses networks that are too large", {
  big <- pbn(setNames(as.list(paste0("x", c(2:21, 1))), paste0("x", 1:21)))
  expect_error(pbnSteadyState(big, c(x1 = TRUE), method = "exact"), "at most 20 simulated nodes",
               class = "sysbioGPU_error_input")
})

# ---- two-state estimate ----------------------------------------------------

test_that("two-state estimates cover the exact value (coverage over 50 seeds)", {
  p <- 0.1; c <- 0.3
  net <- pbn(list(A = c("1" = c, "0" = 1 - c), B = c("1" = 0.5, "0" = 0.5), C = c("1" = 0.9, "0" = 0.1)))
  a <- p + (1 - p)^3 * c; b <- p + (1 - p)^3 * (1 - c)
  truth <- a / (a + b)
  r <- 0.01
  est <- vapply(1:50, function(sd) {
    pbnSteadyState(net, c(A = TRUE), p = p, r = r, seed = sd, trajectories = 8,
                   backend = "cpu", threads = 1, verbose = FALSE)$probability
  }, 0)
  expect_gte(mean(abs(est - truth) <= r), 0.9)
  one <- pbnSteadyState(net, c(A = TRUE), p = p, r = r, seed = 1, trajectories = 8, backend = "cpu", verbose = FALSE)
  # alpha and beta of this meta-state are exactly a and b
  expect_lt(abs(one$alpha - a), 0.03)
  expect_lt(abs(one$beta - b), 0.03)
})

test_that("two-state agrees with the exact method on the example network", {
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  net <- readPBN(f)
  sets <- list(apoptosis = c(Apoptosis = TRUE), c(Survival = TRUE, Death = FALSE))
  # Raftery-Lewis' N alone (a first-order two-state indicator) is optimistic
  # here (slow modes: identity inputs flipping at rate p); N also follows the
  # chains' spread, so the estimate is within r itself.
  ex <- pbnSteadyState(net, sets, p = 0.1, method = "exact", verbose = FALSE)
  tr <- pbnSteadyState(net, sets, p = 0.1, r = 0.01, seed = 11, backend = "cpu", verbose = FALSE)
  expect_equal(tr$set, c("apoptosis", "Survival=1,Death=0"))
  expect_true(all(abs(tr$probability - ex$probability) <= 0.01))
  expect_true(all(tr$converged))
  expect_true(all(tr$samples >= tr$N))
  expect_s3_class(tr, "pbnSteadyState")
  expect_output(print(tr), "two-state Markov chain")
  exa <- pbnSteadyState(net, sets, p = 0.1, update = "asynchronous", method = "exact", verbose = FALSE)
  tra <- pbnSteadyState(net, sets, p = 0.1, update = "asynchronous", r = 0.01, seed = 2,
                        backend = "cpu", verbose = FALSE)
  expect_true(all(abs(tra$probability - exa$probability) <= 0.01))
})

test_that("same seed, same result; threads do not change it; reduction does not change it", {
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  net <- readPBN(f)
  run <- function(...) {
    x <- pbnSteadyState(net, c(Survival = TRUE), p = 0.01, r = 0.01, seed = 5, trajectories = 12,
                        backend = "cpu", verbose = FALSE, ...)
    as.data.frame(unclass(x)[setdiff(names(x), "seconds")])
  }
  a <- run(threads = 1)
  expect_identical(a, run(threads = 2))
  # Survival's ancestors exclude Inhibitor (two functions) and Apoptosis
  red <- pbnSteadyState(net, c(Survival = TRUE), p = 0.01, r = 0.01, seed = 5, trajectories = 12,
                        backend = "cpu", verbose = FALSE)
  expect_equal(attr(red, "nodesSimulated"), 5)
  expect_identical(a, run(threads = 1, reduce = FALSE))
  set.seed(3); s1 <- pbnSteadyState(net, c(Survival = TRUE), r = 0.02, backend = "cpu", verbose = FALSE)
  set.seed(3); s2 <- pbnSteadyState(net, c(Survival = TRUE), r = 0.02, backend = "cpu", verbose = FALSE)
  expect_identical(s1$probability, s2$probability)
})

test_that("reduction does not change the estimate when a dropped node comes first", {
  # X (first in node order) cannot influence A: dropped.  The start state
  # is drawn over the full network, so the reduced run is the unreduced one.
  net <- pbn(list(X = "X | A", A = "B", B = "!A & !(A & B)"))
  run <- function(...) {
    x <- pbnSteadyState(net, c(A = TRUE), p = 0.05, r = 0.01, seed = 7, trajectories = 12,
                        backend = "cpu", threads = 1, verbose = FALSE, ...)
    list(n = attr(x, "nodesSimulated"), est = as.data.frame(unclass(x)[setdiff(names(x), "seconds")]))
  }
  red <- run()
  full <- run(reduce = FALSE)
  expect_equal(red$n, 2)
  expect_equal(full$n, 3)
  expect_identical(red$est, full$est)
})

test_that("a run that hits maxSteps warns and reports converged = FALSE", {
  net <- pbn(list(A = "A", B = "B"))
  expect_warning(x <- pbnSteadyState(net, c(A = TRUE), p = 0.001, r = 1e-4, maxSteps = 4000, seed = 1,
                                     trajectories = 4, backend = "cpu", verbose = FALSE),
                 "did not reach")
  expect_false(x$converged)
  expect_lte(x$steps, 4000)
})

test_that("maxSteps inside the burn-in: no samples, probability NaN, a warning that says so", {
  # a = b = p = 0.001: Raftery-Lewis' burn-in log(eps (a + b) / a) / log(1 - a - b)
  # is about 11,000 steps a trajectory, beyond maxSteps' 8,000
  net <- pbn(list(A = "A", B = "B"))
  expect_warning(x <- pbnSteadyState(net, c(A = TRUE), p = 0.001, r = 0.05, maxSteps = 64 * 8000, seed = 1,
                                     trajectories = 64, backend = "cpu", verbose = FALSE),
                 "no samples after the burn-in .*probability NaN: raise maxSteps")
  expect_gt(x$M, 8000)
  expect_equal(x$samples, 0)
  expect_true(is.nan(x$probability))
  expect_false(x$converged)
})

test_that("steps larger than the CPU engine's work between polls still advance, one a chunk", {
  # 2^18 chains of a 100-node ring on one thread: a step is about 3.7e7
  # node updates, above the 2e7 that the engine runs between two polls, so
  # every chunk is a single step (a chunk of none would never end)
  nodes <- setNames(as.list(paste0("!x", c(100, 1:99))), paste0("x", 1:100))
  expect_warning(x <- pbnSteadyState(pbn(nodes), c(x1 = TRUE), p = 0.001, r = 1e-4, trajectories = 2^18,
                                     maxSteps = 2^18 * 4, seed = 1, backend = "cpu", threads = 1,
                                     verbose = FALSE),
                 "no samples after the burn-in")
  expect_equal(x$steps, 2^20)
  expect_false(x$converged)
})

test_that("a set that never switches (a fixed node) stops early, not converged", {
  net <- pbn(list(A = "A", B = "!B"), perturbable = c(A = FALSE))
  expect_warning(x <- pbnSteadyState(net, list(c(A = TRUE), c(B = TRUE)), p = 0.1, r = 0.01, seed = 1,
                                     trajectories = 16, backend = "cpu", verbose = FALSE), "did not reach")
  expect_equal(x$converged, c(FALSE, TRUE))
  expect_equal(x$probability[[2]], 0.5)
  # stopped at the first check past 16 (z/r)^2 samples (the sample doubles
  # between checks), far below maxSteps
  bound <- 16 * (stats::qnorm(0.975) / 0.01)^2
  expect_gte(x$samples[[1]], bound)
  expect_lt(x$samples[[1]], 2 * bound)
  expect_lt(x$steps[[1]], 2e6)
})

test_that("bad arguments of pbnSteadyState are input errors naming the argument", {
  net <- pbn(list(A = "!B", B = "A"))
  err <- function(expr, msg) expect_error(expr, msg, class = "sysbioGPU_error_input")
  err(pbnSteadyState(net, c(Z = TRUE)), "unknown node\\(s\\) Z")
  err(pbnSteadyState(net, c(TRUE)), "named logical")
  err(pbnSteadyState(net, c(A = TRUE), p = 1), "`p` must be a number in \\[0, 1\\)")
  err(pbnSteadyState(net, c(A = TRUE), p = -0.1), "`p`")
  err(pbnSteadyState(net, c(A = TRUE), r = 0), "`r`")
  err(pbnSteadyState(net, c(A = TRUE), s = 1), "`s`")
  err(pbnSteadyState(net, c(A = TRUE), trajectories = 1), "`trajectories`")
  err(pbnSteadyState(net, c(A = TRUE), method = "foo"), "`method`")
  err(pbnSteadyState(list(), c(A = TRUE)), "`pbn` must be a pbn object")
  err(pbnSimulate(net, -1), "`steps`")
  err(pbnSimulate(net, 3, from = c(TRUE)), "`from`")
  err(readPBN(tempfile()), "`file`")
})

# ---- GPU parity -----------------------------------------------------------------

test_that("GPU trajectories and estimates are identical to the CPU's", {
  skip_if_no_gpu()
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  net <- readPBN(f)
  for (upd in c("synchronous", "asynchronous")) {
    a <- pbnSimulate(net, 500, trajectories = 5, p = 0.05, update = upd, seed = 9, backend = "cpu")
    g <- pbnSimulate(net, 500, trajectories = 5, p = 0.05, update = upd, seed = 9, backend = "gpu")
    expect_identical(unclass(a)[seq_along(a)], unclass(g)[seq_along(g)])
  }
  sets <- list(c(Apoptosis = TRUE), c(Survival = TRUE, Death = FALSE))
  for (traj in c(64, 300)) {
    cpu <- pbnSteadyState(net, sets, p = 0.01, r = 0.005, seed = 4, trajectories = traj, backend = "cpu", verbose = FALSE)
    gpu <- pbnSteadyState(net, sets, p = 0.01, r = 0.005, seed = 4, trajectories = traj, backend = "gpu", verbose = FALSE)
    cols <- setdiff(names(cpu), "seconds")
    expect_identical(as.data.frame(unclass(cpu)[cols]), as.data.frame(unclass(gpu)[cols]))
  }
  # every node's marginal, reduction off, a multi-word network (state in global memory)
  big <- pbn_random(300, 1)
  cpu <- pbnSteadyState(big, list(c(x1 = TRUE), c(x2 = TRUE, x3 = FALSE)), p = 0.001, r = 0.01, seed = 2,
                        trajectories = 256, backend = "cpu", verbose = FALSE)
  gpu <- pbnSteadyState(big, list(c(x1 = TRUE), c(x2 = TRUE, x3 = FALSE)), p = 0.001, r = 0.01, seed = 2,
                        trajectories = 256, backend = "gpu", verbose = FALSE)
  expect_identical(cpu$probability, gpu$probability)
  expect_identical(cpu$steps, gpu$steps)
  # the register kernels: two words, functions of up to 7 inputs, > 64 sets
  big2 <- pbn_random(100, 4, maxfun = 3, maxk = 7)
  wide <- pbn_random(70, 8, maxfun = 2, maxk = 6)
  for (cs in list(list(big2, list(c(x1 = TRUE), c(x70 = TRUE, x3 = FALSE), c(x99 = FALSE)), "synchronous"),
                  list(big2, list(c(x2 = TRUE)), "asynchronous"),
                  list(wide, "marginals", "synchronous"))) {
    cpu <- pbnSteadyState(cs[[1]], cs[[2]], p = 0.01, update = cs[[3]], r = 0.02, seed = 11, trajectories = 300,
                          backend = "cpu", verbose = FALSE)
    gpu <- pbnSteadyState(cs[[1]], cs[[2]], p = 0.01, update = cs[[3]], r = 0.02, seed = 11, trajectories = 300,
                          backend = "gpu", verbose = FALSE)
    cols <- setdiff(names(cpu), "seconds")
    expect_identical(as.data.frame(unclass(cpu)[cols]), as.data.frame(unclass(gpu)[cols]))
  }
  # two words and 7.5 blocks of 128 chains an SM: more chains than the
  # 7-block kernel holds at once, so the 8-block one runs them
  sms <- gpuInfo()$multiprocessors[[1]]
  traj <- 128 * ceiling(7.5 * sms)
  cpu <- suppressWarnings(pbnSteadyState(big2, list(c(x1 = TRUE), c(x7 = FALSE)), p = 0.01, r = 1e-6, seed = 21,
                                         trajectories = traj, maxSteps = 600 * traj, backend = "cpu", verbose = FALSE))
  gpu <- suppressWarnings(pbnSteadyState(big2, list(c(x1 = TRUE), c(x7 = FALSE)), p = 0.01, r = 1e-6, seed = 21,
                                         trajectories = traj, maxSteps = 600 * traj, backend = "gpu", verbose = FALSE))
  cols <- setdiff(names(cpu), "seconds")
  expect_identical(as.data.frame(unclass(cpu)[cols]), as.data.frame(unclass(gpu)[cols]))
  # one function per node: fixed points skipped to the next perturbation on
  # both (register kernel, reduced with y's selection block, > 64 sets;
  # general kernel), and p = 1e-6 (event counts drawn in several pieces)
  mono <- pbn_monotone(100, 4)
  mbig <- pbn_monotone(150, 5)
  for (cs in list(list(mono, list(c(x1 = TRUE), c(x5 = TRUE, x7 = FALSE)), 0.01),
                  list(mono, lapply(paste0("x", 1:70), function(v) setNames(TRUE, v)), 0.01),
                  list(mono, list(c(x2 = TRUE)), 1e-6),
                  list(mbig, list(c(x1 = TRUE), c(x9 = FALSE)), 0.01))) {
    cpu <- suppressWarnings(pbnSteadyState(cs[[1]], cs[[2]], p = cs[[3]], r = 0.02, seed = 3, trajectories = 300,
                          maxSteps = 3e6, backend = "cpu", verbose = FALSE))
    gpu <- suppressWarnings(pbnSteadyState(cs[[1]], cs[[2]], p = cs[[3]], r = 0.02, seed = 3, trajectories = 300,
                          maxSteps = 3e6, backend = "gpu", verbose = FALSE))
    cols <- setdiff(names(cpu), "seconds")
    expect_identical(as.data.frame(unclass(cpu)[cols]), as.data.frame(unclass(gpu)[cols]))
  }
  m1 <- pbnSteadyState(net, "marginals", p = 0.01, r = 0.01, seed = 1, trajectories = 128, backend = "cpu", verbose = FALSE)
  m2 <- pbnSteadyState(net, "marginals", p = 0.01, r = 0.01, seed = 1, trajectories = 128, backend = "gpu", verbose = FALSE)
  expect_identical(m1$probability, m2$probability)
})

test_that("several GPUs share the trajectories: the estimates of one", {
  skip_if_no_gpu()
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  sets <- list(c(Apoptosis = TRUE), "marginals")[[1L]]
  run <- function(dev, traj) on_devices(pbnSteadyState(net, sets, r = 2e-3, trajectories = traj, seed = 4,
                                                       backend = "gpu", device = dev, verbose = FALSE))
  cols <- c("probability", "N", "M", "alpha", "beta", "samples", "rhat", "steps")
  for (traj in c(4096, 4097)) { # an odd count: unequal blocks
    one <- run(0, traj)
    expect_identical(run(gpu_pair(), traj)[cols], one[cols], info = traj)
    expect_identical(run(c(gpu_pair(), 0L), traj)[cols], one[cols], info = traj)
    if (two_gpus()) expect_identical(run("all", traj)[cols], one[cols], info = traj)
    expect_identical(attr(run(rev(gpu_pair()), traj), "device"), rev(gpu_pair()))
  }
  m1 <- pbnSteadyState(net, "marginals", r = 5e-3, trajectories = 2048, seed = 5, backend = "gpu",
                       device = 0, verbose = FALSE)
  m2 <- on_devices(pbnSteadyState(net, "marginals", r = 5e-3, trajectories = 2048, seed = 5, backend = "gpu",
                                  device = gpu_pair(), verbose = FALSE))
  expect_identical(m2[cols], m1[cols])
})

test_that("the exact method gives the CPU's distribution on the GPU", {
  skip_if_no_gpu()
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  ex <- readPBN(f)
  cases <- list(
    list(net = ex, p = 0.01, update = "synchronous"),
    list(net = ex, p = 0.1, update = "asynchronous"),
    list(net = pbn_random(6, 2), p = 0, update = "synchronous"),
    # more than 10 nodes: bits above the shared-memory tile are separate passes
    list(net = pbn_random(13, 5), p = 0.02, update = "synchronous"),
    list(net = pbn_random(12, 6), p = 0.05, update = "asynchronous"))
  for (cs in cases) {
    a <- pbnSteadyState(cs$net, "marginals", p = cs$p, update = cs$update, method = "exact",
                        backend = "cpu", verbose = FALSE)
    g <- pbnSteadyState(cs$net, "marginals", p = cs$p, update = cs$update, method = "exact",
                        backend = "gpu", verbose = FALSE)
    expect_equal(attr(g, "backend"), "gpu")
    expect_lt(max(abs(attr(a, "stationary") - attr(g, "stationary"))), 1e-12)
    expect_lt(max(abs(a$probability - g$probability)), 1e-12)
    expect_true(all(abs(a$steps - g$steps) < 0.01 * a$steps + 5))  # iterations to the same tolerance
  }
  big <- pbn(setNames(as.list(paste0("x", c(2:21, 1))), paste0("x", 1:21)))
  expect_error(pbnSteadyState(big, c(x1 = TRUE), method = "exact", backend = "gpu"), "at most 20 simulated nodes",
               class = "sysbioGPU_error_input")
})

# ---- interrupts -------------------------------------------------------------------

test_that("Ctrl-C stops a long pbnSteadyState run (CPU and GPU)", {
  skip_on_os("windows")
  f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
  net <- readPBN(f)
  backends <- "cpu"
  if (hasGPU()) backends <- c(backends, "gpu")
  for (be in backends) {
    interrupt_after(1)
    t0 <- Sys.time()
    expect_error(pbnSteadyState(net, c(Apoptosis = TRUE), p = 0.01, r = 1e-7, seed = 1, backend = be,
                                trajectories = if (be == "cpu") 16 else "auto", maxSteps = 1e15, verbose = FALSE),
                 "interrupted by the user", class = "sysbioGPU_error_interrupted")
    expect_lt(as.numeric(difftime(Sys.time(), t0, units = "secs")), 15)
  }
  expect_equal(nrow(pbnSteadyState(net, c(Apoptosis = TRUE), method = "exact")), 1)
})

test_that("edited pbn objects are refused with classed errors, in R and in C", {
  net <- pbn(list(A = c("!B" = 0.5, "B" = 0.5), B = "A", C = "A & B"))
  run <- function(z) pbnSteadyState(z, r = 0.05, s = 0.9, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  edits <- list(
    probs = function(z) { z$probabilities$A <- c(5, -4); z },
    probsNA = function(z) { z$probabilities$B <- NA_real_; z },
    sum = function(z) { z$probabilities$A <- c(0.2, 0.2); z },
    words = function(z) { z$functions$C[[1]]$words <- NA_integer_; z },
    wordRange = function(z) { z$functions$C[[1]]$words <- 70000L; z },
    input = function(z) { z$functions$C[[1]]$inputs <- c("A", "Q"); z },
    dup = function(z) { z$nodes <- c("A", "A", "C"); z },
    missing = function(z) { z$functions$C <- NULL; z },
    emptyFun = function(z) { z$functions$C <- list(); z },
    notList = function(z) { z$functions$C <- list("A & B"); z },
    nodesNA = function(z) { z$nodes[2] <- NA; z },
    probsList = function(z) { z$probabilities <- NULL; z },
    pert = function(z) { z$perturbable[1] <- NA; z })
  for (nm in names(edits)) {
    expect_error(run(edits[[nm]](net)), "not a valid pbn object", class = "sysbioGPU_error_input", info = nm)
    expect_error(pbnSimulate(edits[[nm]](net), 3, seed = 1, backend = "cpu"), class = "sysbioGPU_error_input",
                 info = nm)
  }
  # the C side checks the flattened lists itself (sizes, index ranges, thresholds)
  flat <- pbn_flatten(net, rep(TRUE, 3), 0.01, FALSE)
  sets <- pbn_sets_list(list(c(A = TRUE)), flat$node_of_full, net$nodes)
  call <- function(fl) .Call(ffi_pbn_simulate, list(net = fl, from = NULL),
                             list(seed = 1, chains = 1, steps = 2, bits = FALSE),
                             list(gpu = FALSE, threads = 1L, devices = 0L, verbose = FALSE))
  expect_type(call(flat)$states, "integer")
  bad <- list(function(z) { z$fun_thresh[1:2] <- z$fun_thresh[2:1]; z },
              function(z) { z$inputs[1] <- 7L; z }, function(z) { z$tab_start[1] <- NaN; z },
              function(z) { z$fun_start[4] <- -5L; z }, function(z) { z$n <- 0L; z },
              function(z) { z$pert_node[1] <- -9L; z }, function(z) { z$fun_k[1] <- 30L; z },
              function(z) { z$tables <- integer(0); z }, function(z) { z$inputs <- NULL; z })
  for (i in seq_along(bad)) expect_error(call(bad[[i]](flat)), "invalid network", class = "sysbioGPU_error_input", info = i)
})

test_that("pbn(), readPBN(), as.pbn() and pbnSimulate(from) refuse bad input", {
  expect_error(pbn(list(A = NA_character_)), "nodes\\$A", class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = "  ")), class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = stats::setNames(1, NA_character_))), class = "sysbioGPU_error_input")
  deep <- paste0(strrep("(", 5000), "A", strrep(")", 5000))
  expect_error(pbn(list(A = deep)), "nesting deeper than 64", class = "sysbioGPU_error_input")
  expect_error(pbn(list(A = paste0(strrep("!", 65), "A"))), "nesting", class = "sysbioGPU_error_input")
  ok <- pbn(list(A = paste0(strrep("(", 63), "!A", strrep(")", 63))))
  expect_identical(pbn_fun_table(ok$functions$A[[1]]), c(TRUE, FALSE))
  f <- tempfile(fileext = ".bnet")
  writeBin(c(charToRaw("targets, factors\nA, !A\nB, A\xff\n")), f)
  expect_error(readPBN(f), "line 3: invalid UTF-8", class = "sysbioGPU_error_input")
  writeBin(as.raw(c(0:255, 0:255)), f)
  expect_error(readPBN(f), "invalid UTF-8", class = "sysbioGPU_error_input")
  net <- pbn(list(A = "!B", B = "A", C = "A & B"))
  expect_error(pbnSimulate(net, 3, from = c(2, 0, 1), seed = 1, backend = "cpu"), "`from`",
               class = "sysbioGPU_error_input")
  expect_error(pbnSimulate(net, 3, from = 2, seed = 1, backend = "cpu"), "`from`", class = "sysbioGPU_error_input")
  skip_if_not_installed("BoolNet")
  g <- tempfile(fileext = ".txt")
  writeLines(c("targets, factors", "A, !B", "B, A"), g)
  bn <- BoolNet::loadNetwork(g)
  z <- bn; z$interactions$A$func <- c(1L, 0L, 1L)
  expect_error(as.pbn(z), "gene 'A'.*3 entries", class = "sysbioGPU_error_input")
  z <- bn; z$interactions$A$func <- c(1L, NA)
  expect_error(as.pbn(z), "0/1", class = "sysbioGPU_error_input")
  z <- bn; z$interactions$B$input <- 5L
  expect_error(as.pbn(z), "gene 'B'", class = "sysbioGPU_error_input")
})

test_that("the accuracy promise holds at r: coverage over 100 seeds, binomial bound", {
  # A slice of tools/pbn-coverage.R (make pbn-coverage: 3 networks, 2 p, 200
  # seeds).  The truth comes from the exact method (power iteration over all
  # states).  With s = 0.95 and 100 seeds, fewer than 88 within r has
  # probability < 0.002 if the promise holds.
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  sets <- list(c(Apoptosis = TRUE), c(Survival = TRUE, Death = FALSE))
  r <- 0.01; s <- 0.95
  ex <- pbnSteadyState(net, sets, p = 0.01, method = "exact", verbose = FALSE)$probability
  runs <- lapply(1:100, function(sd) pbnSteadyState(net, sets, p = 0.01, r = r, s = s, seed = sd,
                                                    backend = "cpu", threads = 1, verbose = FALSE))
  bound <- stats::qbinom(0.002, 100, s)
  expect_equal(bound, 88)
  for (j in 1:2) {
    est <- vapply(runs, function(z) z$probability[[j]], 0)
    lo <- vapply(runs, function(z) z$lower[[j]], 0)
    hi <- vapply(runs, function(z) z$upper[[j]], 0)
    expect_gte(sum(abs(est - ex[[j]]) <= r), bound)
    expect_gte(sum(lo <= ex[[j]] & ex[[j]] <= hi), bound)
    # se is the size of the actual error (against the exact value): an se
    # too large would pass the two checks above at a needless cost (measured
    # ratios 1.00 and 0.98; the bounds are about 4 standard errors of it)
    se <- vapply(runs, function(z) z$se[[j]], 0)
    ratio <- sqrt(mean((est - ex[[j]])^2)) / sqrt(mean(se^2))
    expect_gt(ratio, 0.75)
    expect_lt(ratio, 1.33)
  }
  for (z in runs) {
    expect_true(all(z$converged))
    # the interval lies within +-r, and N is at least Raftery-Lewis' N from
    # the returned alpha and beta (first-order two-state chain, k = 1)
    expect_true(all(z$upper - z$probability <= r + 1e-12 & z$probability - z$lower <= r + 1e-12))
    a <- z$alpha; b <- z$beta
    n_rl <- ceiling(a * b * (2 - a - b) / (a + b)^3 * (stats::qnorm((1 + s) / 2) / r)^2)
    expect_true(all(z$N >= n_rl & z$samples >= z$N))
  }
})

test_that("summary(), as.data.frame() and plot() of pbnSteadyState results", {
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  sets <- list(A = c(Apoptosis = TRUE), S = c(Survival = TRUE, Death = FALSE))
  est <- pbnSteadyState(net, sets, p = 0.1, r = 0.02, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  ex <- pbnSteadyState(net, sets, p = 0.1, method = "exact", verbose = FALSE)
  df <- as.data.frame(est)
  expect_identical(class(df), "data.frame")
  expect_null(attr(df, "seed"))
  expect_identical(df$probability, est$probability)
  expect_identical(names(df)[1:5], c("set", "probability", "lower", "upper", "se"))
  sm <- summary(est)
  expect_s3_class(sm, "summary.pbnSteadyState")
  expect_equal(sm$halfWidth, max(est$upper - est$lower) / 2)
  expect_lte(sm$halfWidth, 0.02)
  expect_output(print(sm), "2 set\\(s\\), 2 converged")
  expect_output(print(summary(ex)), "exact stationary distribution")
  pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  expect_invisible(plot(est, exact = ex))
  expect_invisible(plot(ex))
  expect_error(plot(est, exact = ex[1, ]), "same sets", class = "sysbioGPU_error_input")
})
