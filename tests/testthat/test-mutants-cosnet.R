# Behaviours of parCosnet(), its network readers and its C glue that the
# other COSNet tests left open (tools/mutants-auto-triage-cosnet.tsv names
# the one-line mutants each test kills).  Oracles: values derived by hand,
# the plain-R sequential dynamics and greedy colouring of helper-cosnet.R.

test_that("an edge listed twice with different weights is named, with both weights", {
  # m0121
  cls <- "sysbioGPU_error_input"
  f <- tempfile(fileext = ".txt")
  on.exit(unlink(f))
  # a-b twice (1, then 2 as b-a); b-c and c-d consistent
  writeLines(c("a b 1", "b c 0.5", "c d 3", "b a 2", "c b 0.5"), f)
  expect_error(readNetwork(f), class = cls,
               regexp = "lists the edge a - b more than once with different weights (1 and 2)", fixed = TRUE)
  # nodes by number; of two conflicting pairs the first in node order (2 - 3) is named
  E <- data.frame(from = c(3, 1, 2, 2, 4), to = c(4, 2, 3, 1, 3), weight = c(7, 1, 5, 1, 8))
  E <- rbind(E, data.frame(from = 3, to = 2, weight = 6))
  expect_error(parCosnet(E, c(1, 0, NA, 0), seed = 1, backend = "cpu", threads = 1, verbose = FALSE),
               class = cls, regexp = "lists the edge 2 - 3 more than once with different weights (5 and 6)",
               fixed = TRUE)
})

test_that("the glue's check of hand-edited slots gives the valid row range 0..n-1", {
  # m2482: a dgCMatrix of n nodes has 0-based row indices 0..n-1
  W <- cosnet_random_graph(7, 0.6, 3)
  chk <- function(i) .Call(sysbioGPU:::ffi_cosnet_check, W@p, i, W@x, 1e-12, 1L)
  # "row index <value> (entry <position in slot i>) outside 0..n-1"
  msg <- function(value, pos) sprintf("row index %d (%s %d) outside 0..%d", value, "entry", pos, nrow(W) - 1L)
  expect_error(chk(replace(W@i, 2, 7L)), class = "sysbioGPU_error_input", regexp = msg(7L, 2L), fixed = TRUE)
  expect_error(chk(replace(W@i, 1, -1L)), class = "sysbioGPU_error_input", regexp = msg(-1L, 1L), fixed = TRUE)
  ok <- chk(W@i)
  expect_identical(c(ok$code, ok$node), c(0L, 0L))
  # the weighted degrees of the same pass are Matrix's row sums
  expect_equal(ok$degree, unname(Matrix::rowSums(W)), tolerance = 1e-14)
})

test_that("the learning step alone polls for Ctrl-C but opens no progress bar", {
  # m2543: the test entry of the learning step runs quiet (verbose off);
  # cli's logger handler reports a bar as soon as one is created
  old <- options(cli.progress_show_after = 0, cli.progress_handlers_only = "logger")
  on.exit(options(old))
  set.seed(11)
  m <- 3e5 # more than the 2^18 points of work between two polls
  x <- runif(m); y <- runif(m); l <- as.integer(runif(m) < 0.3)
  out <- utils::capture.output(msg <- utils::capture.output(r <- cosnet_learn(x, y, l), type = "message"))
  expect_length(c(out, msg), 0)
  expect_length(r, 3)
})

test_that("fields of nodes with 32 to 1024 neighbours are the plain-R fields of the dynamics", {
  # m3505: rows of 32..1024 entries go through the 8-lane loop of the
  # canonical row sum; the oracle is the sequential sweep in colour order
  # with plain R sums (helper-cosnet.R)
  n <- 120
  W <- cosnet_random_graph(n, 0.6, 21)
  deg <- diff(W@p)
  expect_true(all(deg >= 32 & deg <= 1024))
  y <- cosnet_random_labels(n, 25, 45, 22)
  for (th in 1:2) {
    fit <- parCosnet(W, y, seed = 3, backend = "cpu", threads = th, verbose = FALSE)
    ref <- cosnet_sequential(W, y, fit$classes$alpha, fit$classes$c, fit$colours)
    expect_equal(unname(fit$scores[ref$U, 1]), ref$scores, tolerance = 1e-10, info = th)
    expect_identical(unname(fit$predictions[ref$U, 1]), ref$pred, info = th)
    expect_identical(fit$classes$sweeps, as.integer(ref$sweeps), info = th)
  }
  # the labelled neighbours' pull alone: on an independent set of
  # unlabelled nodes the field is sum_j w_ij s_j - c over the labelled j
  # (s_j = sin(alpha) for a positive, -cos(alpha) for a negative)
  U <- which(is.na(y))
  Wi <- W; Wi[U, U] <- 0
  Wi <- methods::as(Matrix::drop0(Wi), "generalMatrix")
  expect_true(all(diff(Wi@p)[U] >= 32))
  fit <- parCosnet(Wi, y, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  a <- fit$classes$alpha; S <- which(!is.na(y))
  field <- as.vector(Wi[U, S] %*% ifelse(y[S] == 1, sin(a), -cos(a))) - fit$classes$c
  expect_equal(unname(fit$scores[U, 1]), field, tolerance = 1e-12)
})

test_that("nColours counts the colours of a one-thread run (the greedy colouring)", {
  # m4075: the one-thread colouring is the greedy colouring in priority
  # order directly; nColours must be its number of colours, as with threads
  W <- cosnet_random_graph(150, 0.06, 31)
  y <- cosnet_random_labels(150, 20, 40, 32)
  f1 <- parCosnet(W, y, seed = 8, backend = "cpu", threads = 1, verbose = FALSE)
  expect_identical(f1$colours, cosnet_greedy_colours(W, 8))
  expect_identical(f1$nColours, max(f1$colours))
  expect_identical(f1$nColours, length(unique(f1$colours)))
  f2 <- parCosnet(W, y, seed = 8, backend = "cpu", threads = 2, verbose = FALSE)
  expect_identical(f2$nColours, f1$nColours)
  cv <- cvParCosnet(W, ifelse(is.na(y), 0, y), nfolds = 3, seed = 8, backend = "cpu", threads = 1,
                    verbose = FALSE)
  expect_identical(cv$nColours, max(f1$colours))
})

test_that("an edge data.frame without a weight column gives every edge the weight 1", {
  # m0130: the network of from / to alone is the hand-built one of unit
  # weights (both directions of each edge)
  E <- data.frame(from = c(1, 2, 3, 1), to = c(2, 3, 4, 4))
  W <- sysbioGPU:::as_cosnet_network(E)
  ref <- matrix(0, 4, 4)
  ref[cbind(c(1, 2, 3, 1), c(2, 3, 4, 4))] <- 1
  ref <- ref + t(ref)
  expect_identical(unname(as.matrix(W)), ref)
})

test_that("the glue refuses a slot p of length 1 and a slot p that decreases, naming the column", {
  # m2782 (and the check of p's length beside m2765's): the structure
  # checks that run before any entry is read
  chk <- function(p, i, x) .Call(sysbioGPU:::ffi_cosnet_check, p, i, x, 1e-12, 1L)
  cls <- "sysbioGPU_error_input"
  expect_error(chk(0L, integer(), numeric()), class = cls, regexp = "(slot p of length < 2)", fixed = TRUE)
  expect_error(chk(c(0L, 3L, 2L, 4L), c(1L, 2L, 0L, 0L), rep(1, 4)), class = cls,
               regexp = "slot p decreases at column 2", fixed = TRUE)
  expect_error(chk(c(0L, 1L, 2L, 4L, 3L, 4L), c(1L, 0L, 3L, 4L), rep(1, 4)), class = cls,
               regexp = "slot p decreases at column 4", fixed = TRUE)
})

test_that("the engine's result list has its ten fields, then the run's workers and seconds, and no other", {
  # m2884: a list allocated one longer carries an eleventh field (and reads
  # a name past the end of the names)
  W <- cosnet_random_graph(9, 0.5, 4)
  y <- c(1, 0, 1, 0, 0, 1, 0, 0, 1)
  ns <- asNamespace("sysbioGPU")
  lab <- ns$as_cosnet_labels(cbind(a = y), W)
  folds <- ns$cosnet_folds(lab, 2L, 1, 1L)
  b <- resolveBackend("cpu", 1)
  r <- ns$cosnet_run(W, lab, folds, 2L, 0, 1000L, 1, b, NULL, FALSE)
  expect_identical(names(r), c("scores", "pred", "alpha", "c", "fscore", "sweeps", "converged", "colour",
                               "nColours", "parts", "workers", "seconds"))
})
