# Tests of parCosnet(), cvParCosnet() and readNetwork(): oracles for the
# learning step (COSNet's own outputs, separable points, scaling), the
# dynamics (sequential sweep in colour order, energy, fixed point, closed
# form on an independent set), the colouring, reproducibility, CPU/GPU
# parity, inputs and errors.

# ---- learning -------------------------------------------------------------

test_that("learning equals COSNet::optimizep on stored cases (incl. the above branch)", {
  cases <- readRDS(test_path("fixtures", "cosnet-optimizep.rds"))
  expect_gt(sum(vapply(cases, function(z) z$above, TRUE)), 5)
  for (z in cases) {
    r <- cosnet_learn(z$x, z$y, z$labels)
    expect_identical(c(r$alpha, r$c, r$F), c(z$alpha, z$c, z$F))
  }
})

test_that("learning equals COSNet where the package is installed", {
  peer <- "COSNet"
  skip_if_not_installed(peer)
  optimizep <- getExportedValue(peer, "optimizep")
  set.seed(5)
  for (it in 1:30) {
    m <- sample(30:150, 1)
    l <- ifelse(runif(m) < 0.2, 1, -1); l[1:2] <- c(1, -1)
    x <- rexp(m); y <- rexp(m)
    if (it %% 2 == 0) { x[l > 0] <- x[l > 0] * 0.1; x[sample(m, 10)] <- 0 }
    r <- utils::capture.output(o <- optimizep(x, y, l))
    expect_identical(unlist(cosnet_learn(x, y, l)), c(alpha = o$alpha, c = o$c, F = o$Fscore))
  }
})

test_that("separable points give F = 1, and scaling keeps alpha and scales c", {
  set.seed(2)
  x <- c(runif(10, 2, 3), runif(30, 0, 1))
  y <- c(runif(10, 0, 0.5), runif(30, 1, 2))
  lab <- rep(c(1, 0), c(10, 30))
  r <- cosnet_learn(x, y, lab)
  expect_identical(r$F, 1)
  for (k in c(4, 0.25)) { # powers of two: scaled points are exact
    rk <- cosnet_learn(k * x, k * y, lab)
    expect_identical(rk$alpha, r$alpha)
    expect_identical(rk$c, k * r$c)
  }
  r3 <- cosnet_learn(3 * x, 3 * y, lab)
  expect_equal(r3$alpha, r$alpha, tolerance = 1e-12)
  expect_equal(r3$c, 3 * r$c, tolerance = 1e-12)
})

test_that("scaling W by k keeps alpha, scales c and keeps the predictions", {
  W <- cosnet_random_graph(150, 0.06, 1)
  y <- cosnet_random_labels(150, 25, 40, 2)
  a <- parCosnet(W, y, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  b <- parCosnet(W * 4, y, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  expect_identical(b$classes$alpha, a$classes$alpha)
  expect_identical(b$classes$c, 4 * a$classes$c)
  expect_identical(b$predictions, a$predictions)
  expect_identical(b$scores, 4 * a$scores)
})

# ---- dynamics ---------------------------------------------------------------

test_that("colour-parallel dynamics equals the sequential sweep in colour order", {
  for (s in 1:4) {
    n <- c(120, 200, 300, 80)[s]
    W <- cosnet_random_graph(n, c(0.08, 0.05, 0.03, 0.2)[s], 10 + s)
    y <- cosnet_random_labels(n, n %/% 8, n %/% 3, 20 + s)
    fit <- parCosnet(W, y, seed = s, backend = "cpu", threads = 2, verbose = FALSE)
    ref <- cosnet_sequential(W, y, fit$classes$alpha, fit$classes$c, fit$colours)
    expect_identical(unname(fit$predictions[ref$U, 1]), ref$pred)
    expect_equal(unname(fit$scores[ref$U, 1]), ref$scores, tolerance = 1e-12)
    expect_identical(fit$classes$sweeps, as.integer(ref$sweeps))
    expect_true(fit$classes$converged)
    expect_true(all(is.na(fit$scores[-ref$U, 1])))
  }
})

test_that("the fixed point agrees with the fields and the energy never increases", {
  W <- cosnet_random_graph(400, 0.03, 7)
  y <- cosnet_random_labels(400, 60, 200, 8)
  fit <- parCosnet(W, y, seed = 9, backend = "cpu", threads = 2, verbose = FALSE)
  U <- which(is.na(y))
  expect_identical(unname(fit$predictions[U, 1]), unname(fit$scores[U, 1] > 0))
  ref <- cosnet_sequential(W, y, fit$classes$alpha, fit$classes$c, fit$colours)
  expect_true(all(diff(ref$energy) <= 1e-12))
  # the engine's own states after each sweep, through maxSweeps
  hi <- sin(fit$classes$alpha); lo <- -cos(fit$classes$alpha)
  WU <- as.matrix(W[U, U])
  e <- vapply(seq_len(fit$classes$sweeps), function(k) {
    f <- suppressWarnings(parCosnet(W, y, maxSweeps = k, seed = 9, backend = "cpu", threads = 1,
                                    verbose = FALSE))
    x <- ifelse(f$predictions[U, 1], hi, lo)
    -0.5 * sum(x * (WU %*% x)) + sum(ref$theta * x)
  }, 0)
  expect_true(all(diff(e) <= 1e-12))
  expect_equal(e, ref$energy, tolerance = 1e-10)
  expect_warning(parCosnet(W, y, maxSweeps = 1, seed = 9, backend = "cpu", verbose = FALSE),
                 "did not converge")
})

test_that("an independent set of unlabelled nodes has the closed-form answer", {
  n <- 150
  W <- cosnet_random_graph(n, 0.1, 31)
  U <- 1:40
  W[U, U] <- 0
  W <- methods::as(Matrix::drop0(W), "generalMatrix")
  y <- cosnet_random_labels(n, 30, 0, 32)
  y[U] <- NA
  fit <- parCosnet(W, y, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  a <- fit$classes$alpha; cc <- fit$classes$c
  S <- which(!is.na(y))
  field <- as.vector(W[U, S] %*% ifelse(y[S] == 1, sin(a), -cos(a))) - cc
  expect_equal(unname(fit$scores[U, 1]), field, tolerance = 1e-12)
  expect_identical(unname(fit$predictions[U, 1]), field > 0)
  expect_identical(fit$classes$sweeps, 2L)
})

test_that("the colouring is proper and is the greedy colouring in priority order", {
  W <- cosnet_random_graph(250, 0.05, 41)
  y <- cosnet_random_labels(250, 30, 80, 42)
  fit <- parCosnet(W, y, seed = 77, backend = "cpu", threads = 2, verbose = FALSE)
  T <- Matrix::summary(W)
  expect_true(all(fit$colours[T$i] != fit$colours[T$j]))
  expect_identical(fit$colours, cosnet_greedy_colours(W, 77))
  expect_identical(fit$nColours, max(fit$colours))
})

test_that("the host colouring alone is the greedy colouring, on one thread and in rounds", {
  # a hub (the spare slot of a node's marks at its degree + 1), isolated
  # nodes, and a network whose first frontiers exceed the 4,096 nodes that
  # the rounds keep on one thread
  W <- cosnet_random_graph(300, 0.03, 43)
  W[1, 2:200] <- 1
  W[2:200, 1] <- 1
  W[250:260, ] <- 0
  W[, 250:260] <- 0
  W <- Matrix::drop0(W)
  for (threads in 1:2) expect_identical(sysbioGPU:::cosnet_colours(W, 5, threads), cosnet_greedy_colours(W, 5))
  B <- sysbioGPU:::cosnet_random_network(20000, 3, 9)
  ref <- cosnet_greedy_colours(B, 11)
  expect_identical(sysbioGPU:::cosnet_colours(B, 11, 1), ref)
  expect_identical(sysbioGPU:::cosnet_colours(B, 11, 2), ref)
})

test_that("regularisation (cost > 0) follows the colour-synchronous scheme", {
  # positives cluster, so that alpha > pi/4 and the penalty is on
  g <- cosnet_clustered(200, 0.05, 40, 70, 51, 52)
  W <- g$W; y <- g$y
  cost <- 1e-3
  fit <- parCosnet(W, y, cost = cost, seed = 4, backend = "cpu", threads = 2, verbose = FALSE)
  a <- fit$classes$alpha
  expect_gt(a, pi / 4)
  hi <- sin(a); lo <- -cos(a)
  U <- which(is.na(y)); nl <- sum(!is.na(y)); np <- sum(y == 1, na.rm = TRUE)
  eta <- cost * abs(tan((a - pi / 4) * 2)); A <- 1 / (hi - lo); B <- -lo / (hi - lo)
  k <- ceiling((np / nl) * length(U))
  ref <- cosnet_sequential(W, y, a, fit$classes$c, fit$colours, pen_r = 2 * eta * A^2,
                           theta_add = eta * A * (2 * B * (length(U) - 1) - 2 * k + 1))
  expect_identical(unname(fit$predictions[U, 1]), ref$pred)
  expect_equal(unname(fit$scores[U, 1]), ref$scores, tolerance = 1e-10)
  expect_identical(fit$classes$sweeps, as.integer(ref$sweeps))
  plain <- parCosnet(W, y, seed = 4, backend = "cpu", threads = 2, verbose = FALSE)
  expect_false(identical(plain$scores, fit$scores))
})

# ---- reproducibility and inputs ---------------------------------------------

test_that("same seed same result; threads do not change it; classes are independent", {
  W <- cosnet_random_graph(300, 0.04, 61)
  Y <- sapply(1:5, function(k) cosnet_random_labels(300, 20 + 5 * k, 90, 60 + k))
  colnames(Y) <- paste0("c", 1:5)
  f1 <- parCosnet(W, Y, seed = 5, backend = "cpu", threads = 1, verbose = FALSE)
  f2 <- parCosnet(W, Y, seed = 5, backend = "cpu", threads = 2, verbose = FALSE)
  f1$seconds <- f2$seconds <- 0; f1$threads <- f2$threads <- 0L; f1$call <- f2$call <- NULL
  expect_identical(f1, f2)
  one <- parCosnet(W, Y[, 3], seed = 5, backend = "cpu", threads = 2, verbose = FALSE)
  expect_identical(unname(one$scores[, 1]), unname(f1$scores[, 3]))
  f3 <- parCosnet(W, Y, seed = 6, backend = "cpu", threads = 2, verbose = FALSE)
  expect_false(identical(f3$colours, f1$colours))
  set.seed(9); a <- parCosnet(W, Y[, 1], backend = "cpu", verbose = FALSE)
  set.seed(9); b <- parCosnet(W, Y[, 1], backend = "cpu", verbose = FALSE)
  expect_identical(a$seed, b$seed)
  expect_identical(a$scores, b$scores)
})

test_that("dgCMatrix, dsCMatrix, dense matrix and edge data.frame give the same answer", {
  W <- cosnet_random_graph(100, 0.08, 71)
  y <- cosnet_random_labels(100, 15, 30, 72)
  ref <- parCosnet(W, y, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  run <- function(x) parCosnet(x, y, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)$scores
  expect_identical(run(methods::as(W, "symmetricMatrix")), ref$scores)
  expect_identical(run(as.matrix(W)), ref$scores)
  T <- Matrix::summary(W)
  both <- data.frame(from = T$i, to = T$j, weight = T$x)
  expect_identical(run(both), ref$scores)
  once <- both[both$from < both$to, ]
  expect_identical(run(once), ref$scores)
  # stored zeros are dropped; symmetric up to rounding is averaged
  Z <- W
  colj <- rep(seq_len(ncol(W)), diff(W@p)); rowi <- W@i + 1L
  mirror <- which(rowi == colj[1] & colj == rowi[1])
  Z@x[c(1, mirror)] <- 0
  expect_identical(length(Z@x), length(W@x))
  expect_identical(run(Z), parCosnet(Matrix::drop0(Z), y, seed = 1, backend = "cpu", threads = 1,
                                     verbose = FALSE)$scores)
  R <- W; R@x[1] <- R@x[1] * (1 + 4 * .Machine$double.eps)
  expect_equal(run(R), ref$scores, tolerance = 1e-12)
  # normalisation: D^-1/2 W D^-1/2
  d <- Matrix::rowSums(W)
  Wn <- Matrix::Diagonal(x = 1 / sqrt(d)) %*% W %*% Matrix::Diagonal(x = 1 / sqrt(d))
  a <- parCosnet(W, y, normalize = TRUE, seed = 1, backend = "cpu", verbose = FALSE)
  b <- parCosnet(methods::as(Wn, "generalMatrix"), y, seed = 1, backend = "cpu", verbose = FALSE)
  expect_equal(a$scores, b$scores, tolerance = 1e-10)
  # made in C: the bits of R's x * (s_i * s_j), s = 1 / sqrt(d), and a new
  # x slot (the caller's W is left as it was)
  S <- W; S@x <- exp(25 * W@x); x0 <- S@x + 0
  s <- 1 / sqrt(Matrix::rowSums(S))
  N <- sysbioGPU:::as_cosnet_network(S, normalize = TRUE, threads = 2L)
  expect_identical(N@x, S@x * (s[S@i + 1L] * s[rep.int(seq_len(ncol(S)), diff(S@p))]))
  expect_identical(S@x, x0)
})

test_that("the fast check of W (hashes of the mirrored entries) agrees with an exact oracle", {
  W <- cosnet_random_graph(200, 0.08, 93)
  chk <- function(M, th = 2L) {
    r <- .Call(sysbioGPU:::ffi_cosnet_check, M@p, M@i, M@x, 64 * .Machine$double.eps, th)
    c(r$code, r$node)
  }
  expect_identical(chk(W), c(0L, 0L))
  # the same pass gives the weighted degrees, bit for bit Matrix's row sums
  # (weights over ten orders of magnitude, where the order of the
  # additions shows); none for a W that does not pass as it is
  S <- W; S@x <- exp(25 * W@x)
  deg <- function(M) .Call(sysbioGPU:::ffi_cosnet_check, M@p, M@i, M@x, 64 * .Machine$double.eps, 2L)$degree
  expect_identical(deg(S), Matrix::rowSums(S))
  expect_null(deg(replace(S, cbind(1, 2), 0.5)))
  colj <- rep(seq_len(ncol(W)), diff(W@p)); rowi <- W@i + 1L
  up <- which(rowi < colj)
  mir <- function(k) which(rowi == colj[k] & colj == rowi[k])
  # first column whose entries differ from their mirrors (the oracle)
  first_asym <- function(M) which(Matrix::colSums(abs(M - Matrix::t(M)) > 0) > 0)[1]
  # two pairs with their upper values swapped: same values, same pattern
  k1 <- up[3]; k2 <- up[which(W@x[up] != W@x[k1])[5]]
  A <- W; A@x[c(k1, k2)] <- W@x[c(k2, k1)]
  for (th in 1:2) expect_identical(chk(A, th), c(4L, as.integer(first_asym(A))))
  # an upper value moved to its mirror's place in another pair of the column
  A <- W; A@x[k1] <- W@x[mir(k1)] + 0.25
  expect_identical(chk(A), c(4L, as.integer(first_asym(A))))
  # rounding only: code 5 (averaged by parCosnet)
  A <- W; A@x[k1] <- W@x[k1] * (1 + 4 * .Machine$double.eps)
  expect_identical(chk(A), c(5L, as.integer(first_asym(A))))
  # a hard problem after an asymmetry: the first column wins, as before
  A <- W; A@x[k1] <- W@x[k1] + 1; A@x[length(A@x)] <- -1
  expect_identical(chk(A), c(4L, as.integer(first_asym(A))))
  # a stored zero with its mirror: code 6 (dropped by parCosnet)
  A <- W; A@x[c(k1, mir(k1))] <- 0
  expect_identical(chk(A), c(6L, as.integer(min(colj[c(k1, mir(k1))]))))
})

test_that("labels: logical, names matched to W, matrix of classes", {
  W <- cosnet_random_graph(80, 0.1, 81)
  nm <- paste0("g", 1:80)
  dimnames(W) <- list(nm, nm)
  y <- cosnet_random_labels(80, 12, 20, 82)
  names(y) <- nm
  a <- parCosnet(W, y, seed = 2, backend = "cpu", verbose = FALSE)
  b <- parCosnet(W, as.logical(y), seed = 2, backend = "cpu", verbose = FALSE)
  expect_identical(unname(a$scores), unname(b$scores))
  perm <- sample(80)
  c2 <- parCosnet(W, y[perm], seed = 2, backend = "cpu", verbose = FALSE)
  expect_identical(a$scores, c2$scores)
  expect_identical(rownames(a$scores), nm)
  expect_output(print(a), "parCosnet")
  expect_output(print(summary(a)), "training F")
})

test_that("bad input gives classed errors naming the argument", {
  W <- cosnet_random_graph(50, 0.1, 91)
  y <- cosnet_random_labels(50, 8, 10, 92)
  err <- function(expr, msg) expect_error(expr, msg, class = "sysbioGPU_error_input")
  err(parCosnet(W[, 1:49], y), "`W` must be square")
  A <- W; A[1, 2] <- A[1, 2] + 1
  err(parCosnet(A, y), "must be symmetric")
  A <- W; A[3, 4] <- A[4, 3] <- -1
  err(parCosnet(A, y), "negative weights")
  A <- as.matrix(W); A[3, 4] <- A[4, 3] <- NA
  err(parCosnet(A, y), "NA or infinite")
  A <- W; A[5, 5] <- 1
  err(parCosnet(A, y), "zero diagonal")
  err(parCosnet(W, y[-1]), "one element per node")
  err(parCosnet(W, y * 2), "must hold 1")
  err(parCosnet(W, "a"), "logical or numeric")
  z <- y; z[!is.na(z)] <- 0
  err(parCosnet(W, z), "no labelled positives")
  z <- y; z[!is.na(z)] <- 1
  err(parCosnet(W, z), "no labelled negatives")
  err(parCosnet(W, ifelse(is.na(y), 0, y)), "nothing to predict")
  nm <- paste0("g", 1:50); dimnames(W) <- list(nm, nm)
  z <- y; names(z) <- paste0("h", 1:50)
  err(parCosnet(W, z), "names of `labels`")
  err(parCosnet(W, y, cost = -1), "`cost`")
  err(parCosnet(W, y, maxSweeps = 0), "`maxSweeps`")
  err(parCosnet(list(), y), "`W` must be")
  err(parCosnet(data.frame(from = 1:2, to = c(2, 1), weight = c(1, 2)), c(1, NA)),
      "different weights")
  err(cvParCosnet(W, y, nfolds = 1), "`nfolds`")
  z <- ifelse(is.na(y), 0, y); z[which(z == 1)[-1]] <- 0
  err(cvParCosnet(W, z), "at least 2 labelled positives")
})

# ---- cross-validation -----------------------------------------------------------

test_that("cvParCosnet: stratified folds, out-of-fold predictions, metrics", {
  W <- cosnet_random_graph(300, 0.04, 101)
  Y <- cbind(a = cosnet_random_labels(300, 40, 30, 102), b = cosnet_random_labels(300, 25, 0, 103))
  cv <- cvParCosnet(W, Y, nfolds = 4, seed = 3, backend = "cpu", threads = 2, verbose = FALSE)
  for (k in 1:2) {
    f <- cv$folds[, k]
    expect_true(all(f[is.na(Y[, k])] == 0))
    pos <- table(f[which(Y[, k] == 1)]); neg <- table(f[which(Y[, k] == 0)])
    expect_lte(diff(range(pos)), 1)
    expect_lte(diff(range(table(f[f > 0]))), 1)
    expect_identical(is.na(cv$scores[, k]), is.na(Y[, k]))
  }
  # fold 2 of class a is parCosnet() with that fold masked
  y2 <- Y[, "a"]; y2[cv$folds[, "a"] == 2] <- NA
  one <- parCosnet(W, y2, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  i <- which(cv$folds[, "a"] == 2)
  expect_identical(unname(cv$scores[i, "a"]), unname(one$scores[i, 1]))
  expect_identical(cv$jobs$alpha[2], one$classes$alpha)
  expect_true(all(cv$metrics$AUPRC >= 0 & cv$metrics$AUPRC <= 1))
  cv2 <- cvParCosnet(W, Y, nfolds = 4, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  expect_identical(cv2$scores, cv$scores)
  expect_identical(cv2$folds, cv$folds)
  expect_output(print(cv), "4-fold")
  pdf(NULL); on.exit(grDevices::dev.off())
  expect_invisible(plot(cv))
})

test_that("cvParCosnet: every fold is parCosnet() with that fold masked (batched points, hubs)", {
  # a hub of more than SBG_COSNET_HUB_DEGREE (1024) neighbours takes the
  # 256-lane sums; 2 to 8 folds take the per-class batched points (pairs of
  # folds in vectors: 1 to 4 pairs), 9 folds the per-job sums
  n <- 1300
  W <- cosnet_random_graph(n, 0.01, 111)
  set.seed(112)
  nb <- sample(2:n, 1100)
  H <- Matrix::sparseMatrix(i = c(rep(1L, 1100), nb), j = c(nb, rep(1L, 1100)),
                            x = rep(runif(1100, 0.01, 1), 2), dims = c(n, n))
  W <- methods::as(W + H, "generalMatrix")
  Y <- cbind(a = cosnet_random_labels(n, 150, 100, 113), b = cosnet_random_labels(n, 90, 0, 114),
             c = cosnet_random_labels(n, 200, 300, 115))
  for (nf in c(2, 3, 5, 7, 9)) {
    cv <- cvParCosnet(W, Y, nfolds = nf, seed = 4, backend = "cpu", threads = 2, verbose = FALSE)
    cv1 <- cvParCosnet(W, Y[, "a"], nfolds = nf, seed = 4, backend = "cpu", threads = 1, verbose = FALSE)
    expect_identical(unname(cv1$scores[, 1]), unname(cv$scores[, "a"]))
    for (f in seq_len(nf)) {
      y2 <- Y[, "a"]; y2[cv$folds[, "a"] == f] <- NA
      one <- parCosnet(W, y2, seed = 4, backend = "cpu", threads = 1, verbose = FALSE)
      i <- which(cv$folds[, "a"] == f)
      expect_identical(unname(cv$scores[i, "a"]), unname(one$scores[i, 1]))
      expect_identical(cv$jobs$alpha[f], one$classes$alpha)
      expect_identical(cv$jobs$c[f], one$classes$c)
    }
  }
})

test_that("average precision: known values", {
  # one class, one fold of three labelled nodes
  ap <- function(score, truth) {
    lab <- matrix(ifelse(truth, 1L, -1L))
    sysbioGPU:::cosnet_cv_metrics(lab, matrix(1L, 3), matrix(TRUE, 3), matrix(score), 1L, 1L)[[1, "AUPRC"]]
  }
  expect_equal(ap(c(3, 2, 1), c(TRUE, FALSE, TRUE)), (1 + 2 / 3) / 2)
  expect_equal(ap(c(1, 1, 1), c(TRUE, FALSE, FALSE)), 1 / 3)
  expect_equal(ap(c(3, 2, 1), c(TRUE, TRUE, FALSE)), 1)
  expect_equal(ap(c(2, 1, 1), c(FALSE, TRUE, TRUE)), 2 / 3)
  expect_equal(ref_average_precision(c(2, 1, 1), c(FALSE, TRUE, TRUE)), 2 / 3)
})

test_that("cvParCosnet's folds and metrics (C) are those of the plain-R oracles, bit for bit", {
  set.seed(2)
  n <- 1500; K <- 12
  lab <- vapply(seq_len(K), function(k) {
    y <- integer(n); l <- sample.int(n, 500); y[l] <- -1L; y[sample(l, sample(3:120, 1))] <- 1L; y
  }, integer(n))
  lab[, 3] <- 0L; lab[1:4, 3] <- 1L; lab[5:6, 3] <- -1L   # tiny class: empty folds for 7 folds
  for (nf in c(2L, 5L, 7L)) {
    folds <- sysbioGPU:::cosnet_folds(lab, nf, 12345, 2L)
    ref <- vapply(seq_len(K), function(k) ref_cosnet_folds(lab[, k], nf, 12345, k), integer(n))
    expect_identical(folds, ref)
    expect_identical(sysbioGPU:::cosnet_folds(lab, nf, 12345, 1L), folds)
    scores <- matrix(round(runif(n * K), 2), n)   # ties
    scores[, 5] <- 0.5                           # all tied
    scores[, 6] <- sample(c(-0, 0, -1, 2), n, replace = TRUE) # signed zeros tie
    pred <- scores > 0.7
    got <- sysbioGPU:::cosnet_cv_metrics(lab, folds, pred, scores, nf, 2L)
    expect_identical(unname(got), unname(ref_cv_metrics(lab, folds, pred, scores, nf)))
    # threaded over (class, fold) jobs: any thread count, one class alone
    expect_identical(sysbioGPU:::cosnet_cv_metrics(lab, folds, pred, scores, nf, 3L), got)
    one <- function(m) m[, 2, drop = FALSE]
    expect_identical(sysbioGPU:::cosnet_cv_metrics(one(lab), one(folds), one(pred), one(scores), nf, 3L),
                     got[2, , drop = FALSE])
  }
})

# ---- readNetwork --------------------------------------------------------------

test_that("readNetwork: header detection, both directions stored once, bad lines", {
  f <- tempfile(fileext = ".txt")
  writeLines(c("protein1 protein2 combined_score", "a b 0.9", "b a 0.9", "b c 0.4", "", "c d 1"), f)
  W <- readNetwork(f)
  expect_s4_class(W, "dgCMatrix")
  expect_identical(rownames(W), c("a", "b", "c", "d"))
  expect_identical(W["a", "b"], 0.9)
  expect_identical(W["b", "a"], 0.9)
  expect_identical(length(W@x), 6L)
  writeLines(c("a b 0.9", "b c x"), f)
  expect_error(readNetwork(f), "line 2.*not a finite number", class = "sysbioGPU_error_input")
  writeLines(c("a b 0.9", "b c"), f)
  expect_error(readNetwork(f), "line 2 .*3 fields", class = "sysbioGPU_error_input")
  writeLines(c("a b 0.9", "b a 0.5"), f)
  expect_error(readNetwork(f), "different weights", class = "sysbioGPU_error_input")
  writeLines(c("a\tb\t2", "b\tc\t-1"), f)
  expect_error(readNetwork(f), "line 2", class = "sysbioGPU_error_input")
  expect_error(readNetwork(tempfile()), "does not exist", class = "sysbioGPU_error_input")
})

# ---- GPU ------------------------------------------------------------------------

test_that("GPU and CPU give identical results (cost = 0 and cost > 0)", {
  skip_if_no_gpu()
  W <- cosnet_random_graph(3000, 0.01, 111)
  Y <- sapply(1:6, function(k) cosnet_random_labels(3000, 60 + 20 * k, 900, 110 + k))
  cpu <- parCosnet(W, Y, seed = 8, backend = "cpu", verbose = FALSE)
  gpu <- parCosnet(W, Y, seed = 8, backend = "gpu", verbose = FALSE)
  expect_identical(gpu$colours, cpu$colours)
  expect_identical(gpu$classes, cpu$classes)
  expect_identical(gpu$predictions, cpu$predictions)
  expect_identical(gpu$scores, cpu$scores)
  cpu <- parCosnet(W, Y, cost = 1e-3, seed = 8, backend = "cpu", verbose = FALSE)
  gpu <- parCosnet(W, Y, cost = 1e-3, seed = 8, backend = "gpu", verbose = FALSE)
  expect_identical(gpu$predictions, cpu$predictions)
  expect_identical(gpu$scores, cpu$scores)
  cvc <- cvParCosnet(W, Y[, 1:3], seed = 2, backend = "cpu", verbose = FALSE)
  cvg <- cvParCosnet(W, Y[, 1:3], seed = 2, backend = "gpu", verbose = FALSE)
  expect_identical(cvg$scores, cvc$scores)
  expect_identical(cvg$jobs, cvc$jobs)
  # several GPU batches of jobs give the same answer
  old <- options(sysbioGPU.cosnetBatch = 4L)
  cvb <- cvParCosnet(W, Y[, 1:3], seed = 2, backend = "gpu", verbose = FALSE)
  options(old)
  expect_identical(cvb$scores, cvc$scores)
  expect_identical(cvb$jobs, cvc$jobs)
  # a hub (warp-strided row of thousands of entries)
  H <- W; H[1, 2:3000] <- H[2:3000, 1] <- 0.5
  H <- methods::as(H, "generalMatrix")
  y <- Y[, 1]; y[1] <- NA
  expect_identical(parCosnet(H, y, seed = 1, backend = "gpu", verbose = FALSE)$scores,
                   parCosnet(H, y, seed = 1, backend = "cpu", verbose = FALSE)$scores)
})

# A network whose training points are chosen: node i's only labelled
# neighbours are P0 (positive in every class, weight a_i) and N0 (negative,
# weight b_i), so its point is exactly (a_i, b_i).  The points tie in
# ratio and in line value, lie on the y axis and on the x axis, lie
# beyond the angle sweep's stop, and come in pairs of neighbouring ratios
# (b and the next double) whose angles round alike; the classes put some
# jobs in COSNet's "positives above" branch and some over the device
# learning's cap of positives (its host path).
cosnet_chosen_points <- function() {
  set.seed(31)
  a <- c(sample(1:3, 1200, TRUE), rep(1, 6), rep(0, 300), runif(300, 0.5, 2), rep(1, 40), 1, 1)
  b <- c(sample(0:4, 1200, TRUE), rep(c(3.7, 51.3, 777.1), 2) * rep(c(1, 1 + .Machine$double.eps), each = 3),
         sample(1:3, 150, TRUE), runif(150, 0.1, 4), rep(0, 300), runif(40, 1200, 1300), 2000, 1e-300)
  k <- length(a)
  unl <- 200
  n <- 2 + k + unl
  tr <- 2 + seq_len(k)
  u <- 2 + k + seq_len(unl)
  ii <- c(tr[a > 0], tr[b > 0], u, u, u)
  jj <- c(rep(1, sum(a > 0)), rep(2, sum(b > 0)), rep(1, unl), rep(2, unl), sample(tr, unl))
  xx <- c(a[a > 0], b[b > 0], runif(3 * unl, 0.1, 1))
  W <- Matrix::sparseMatrix(i = pmax(ii, jj), j = pmin(ii, jj), x = xx, dims = c(n, n), symmetric = TRUE)
  W <- methods::as(methods::as(W, "generalMatrix"), "CsparseMatrix")
  fr <- c(0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75)
  Y <- sapply(seq_len(28), function(cl) {
    y <- c(1, 0, as.numeric(runif(k) < fr[1 + cl %% length(fr)]), rep(NA, unl))
    y
  })
  # a class whose best line in the "above" branch passes through (0, 3)
  # with slope exactly -1, through its positives (1, 2) and (2, 1)
  on <- (a == 0 & b == 3) | (a == 1 & b == 2) | (a == 2 & b == 1)
  Y <- cbind(Y, c(1, 0, as.numeric(on), rep(NA, unl)))
  list(W = W, Y = Y)
}

test_that("the device's learning gives the host's lines on chosen points (ties, axes, near angles, its cap)", {
  skip_if_no_gpu()
  d <- cosnet_chosen_points()
  cpu <- parCosnet(d$W, d$Y, seed = 3, backend = "cpu", verbose = FALSE)
  # the classes reach the branches they are meant to
  expect_gt(sum(cpu$classes$alpha > pi / 2), 2)   # positives above the line
  expect_gt(sum(colSums(d$Y == 1, na.rm = TRUE) > 1024), 2) # more positives than the cap
  expect_equal(cpu$classes$alpha[29], atan(-1) + pi)        # a slope of -1 exactly
  gpu <- parCosnet(d$W, d$Y, seed = 3, backend = "gpu", verbose = FALSE)
  expect_identical(gpu$classes, cpu$classes)
  expect_identical(gpu$scores, cpu$scores)
  cvc <- cvParCosnet(d$W, d$Y, nfolds = 3, seed = 4, backend = "cpu", verbose = FALSE)
  cvg <- cvParCosnet(d$W, d$Y, nfolds = 3, seed = 4, backend = "gpu", verbose = FALSE)
  expect_identical(cvg$jobs, cvc$jobs)
  expect_identical(cvg$scores, cvc$scores)
})

test_that("slots of W edited by hand give a classed error, in R and in C", {
  W <- cosnet_random_graph(30, 0.2, 5)
  y <- stats::setNames(rep(c(1, 0, NA), 10), rownames(W))
  run <- function(M) parCosnet(M, y, seed = 1, maxSweeps = 20, backend = "cpu", threads = 1,
                               verbose = FALSE)
  edits <- list(
    i_negative = function(z) { z@i[1] <- -5L; z },
    i_too_large = function(z) { z@i[1] <- 1000L; z },
    p_too_long = function(z) { z@p <- c(z@p, 0L); z },
    p_decreasing = function(z) { z@p[3] <- 0L; z },
    x_shorter = function(z) { z@x <- z@x[-1]; z },
    dim_lies = function(z) { z@Dim <- c(100L, 100L); z },
    # rows of a column out of order, or one row twice (Matrix's validity)
    i_unsorted = function(z) { k <- which(diff(z@p) >= 2)[1]; z@i[z@p[k] + 1:2] <- z@i[z@p[k] + 2:1]; z },
    i_twice = function(z) { k <- which(diff(z@p) >= 2)[1]; z@i[z@p[k] + 2] <- z@i[z@p[k] + 1]; z },
    dimnames_short = function(z) { z@Dimnames <- list(paste0("g", seq_len(nrow(z) - 1L)), NULL); z },
    # slots removed or retyped past `@<-`'s checks
    i_removed = function(z) { attr(z, "i") <- NULL; z },
    x_removed = function(z) { attr(z, "x") <- NULL; z },
    i_double = function(z) { attr(z, "i") <- as.double(z@i); z },
    x_integer = function(z) { attr(z, "x") <- as.integer(z@x * 10); z })
  for (e in names(edits)) {
    expect_error(run(edits[[e]](W)), class = "sysbioGPU_error_input", info = e)
  }
  expect_error(run(edits$i_unsorted(W)), "not increasing in column", class = "sysbioGPU_error_input")
  # the C glue validates too (objects reach it without validObject() from
  # other callers): p, i, x as they would come from an edited object
  chk <- function(p, i, x) {
    unlist(.Call(sysbioGPU:::ffi_cosnet_check, p, i, x, 1e-12, 1L)[c("code", "node")], use.names = FALSE)
  }
  eng <- function(p, i, x) {
    .Call(sysbioGPU:::ffi_cosnet, list(p = p, i = i, x = x, labels = matrix(c(1L, -1L, 0L), length(p) - 1L, 1L),
                                       folds = NULL),
          list(nfolds = 0L, cost = 0, maxSweeps = 10L, seed = 1, batch = 0L, budget = 0, hostColour = -1),
          list(gpu = FALSE, threads = 1L, devices = 0L, verbose = FALSE))
  }
  p <- W@p; i <- W@i; x <- W@x
  expect_identical(chk(p, i, x), c(0L, 0L))
  k <- p[which(diff(p) >= 2)[1]] + 1:2
  bad <- list(list(p, replace(i, 1, -5L), x), list(p, replace(i, 1, 1000L), x),
              list(p, replace(i, k, i[rev(k)]), x), list(p, replace(i, k[2], i[k[1]]), x),
              list(c(p, 0L), i, x), list(replace(p, 3, 0L), i, x), list(p, i, x[-1]),
              list(replace(p, 1, 1L), i, x), list(0L, integer(0), numeric(0)),
              list(as.double(p), i, x))
  for (b in seq_along(bad)) {
    expect_error(do.call(chk, bad[[b]]), class = "sysbioGPU_error_input", info = b)
    if (length(bad[[b]][[1]]) == length(p) && is.integer(bad[[b]][[1]])) {
      expect_error(do.call(eng, bad[[b]]), class = "sysbioGPU_error_input", info = b)
    }
  }
})

test_that("weights whose sums overflow are refused; the learning step ends on NaN", {
  W <- cosnet_random_graph(30, 0.2, 5)
  y <- stats::setNames(rep(c(1, 0, NA), 10), rownames(W))
  expect_error(parCosnet(W * 1e308, y, seed = 1, backend = "cpu", threads = 1, verbose = FALSE),
               class = "sysbioGPU_error_input", regexp = "weighted degree.*`W`")
  expect_error(cvParCosnet(W * 1e308, y, nfolds = 2, seed = 1, backend = "cpu", threads = 1,
                           verbose = FALSE),
               class = "sysbioGPU_error_input", regexp = "weighted degree")
  # the learning step itself, on points whose keys are NaN (Inf - Inf): it
  # returns (it looped forever on a NaN intercept key)
  r <- cosnet_learn(c(Inf, Inf, 1, 2), c(Inf, Inf, 2, 1), c(1, 0, 1, 0))
  expect_length(r, 3)
  r <- cosnet_learn(c(NaN, 1, NaN, 2), c(NaN, 2, NaN, 1), c(1, 0, 0, 1))
  expect_length(r, 3)
})

test_that("readNetwork refuses NA / empty nodes, non-finite weights and bad UTF-8, with the line", {
  tf <- function(x) { f <- tempfile(fileext = ".txt"); writeLines(x, f); f }
  cls <- "sysbioGPU_error_input"
  expect_error(readNetwork(tf(c("a b 1", "a NA 1", "b c 1"))), "line 2.*node name 'NA'", class = cls)
  expect_error(readNetwork(tf(c("a b 1", ",c 1", "b c 1"))), "line 2.*node name ''", class = cls)
  # a first line whose weight is NaN / Inf / NA is an edge, not a header
  for (w in c("NaN", "Inf", "-Inf", "NA", "nan")) {
    expect_error(readNetwork(tf(c(paste("a b", w), "b c 1"))), "line 1.*not a finite number",
                 class = cls, info = w)
  }
  expect_error(readNetwork(tf(c("x y score", "a b 1", "b c NaN"))), "line 3", class = cls)
  f <- tempfile()
  writeBin(c(charToRaw("a b 1\nc "), as.raw(0xff), charToRaw(" 1\n")), f)
  expect_error(readNetwork(f), "line 2.*UTF-8", class = cls)
  # a header is still recognised; CRLF line ends are fine
  f <- tempfile()
  writeBin(charToRaw("from to weight\r\na b 0.5\r\nb c 1\r\n"), f)
  W <- readNetwork(f)
  expect_identical(rownames(W), c("a", "b", "c"))
  expect_identical(W["a", "b"], 0.5)
  expect_identical(Matrix::nnzero(W), 4L)
})

test_that("Ctrl-C stops the learning step itself", {
  skip_on_os("windows")
  skip_on_cran()
  # 6e6 labelled points: about a second of sorting and sweeping here
  set.seed(3)
  m <- 6e6
  x <- runif(m); y <- runif(m); l <- as.integer(runif(m) < 0.3)
  interrupt_after(0.3)
  expect_error(.Call(sysbioGPU:::ffi_cosnet_learn, x, y, l, 1L), "interrupted",
               class = "sysbioGPU_error_interrupted")
})

test_that("with an edge data.frame of named nodes, labels must be named by node", {
  E <- data.frame(from = c("c", "a", "b", "d"), to = c("a", "b", "d", "c"), weight = c(1, 0.5, 0.8, 0.3))
  run <- function(y, W = E) parCosnet(W, y, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  expect_error(run(c(1, 0, NA, 0)), "must be named by node", class = "sysbioGPU_error_input")
  expect_error(run(matrix(c(1, 0, NA, 0), 4)), "must be named by node", class = "sysbioGPU_error_input")
  # named: the node order (c, a, b, d by first appearance) does not matter
  y <- c(a = 1, b = 0, c = NA, d = 0)
  r <- run(y)
  W <- matrix(0, 4, 4, dimnames = list(letters[1:4], letters[1:4]))
  W[cbind(E$from, E$to)] <- W[cbind(E$to, E$from)] <- E$weight
  ref <- run(y, W)
  expect_identical(r$scores[names(y), , drop = FALSE], ref$scores[names(y), , drop = FALSE])
  expect_identical(run(matrix(y, 4, dimnames = list(names(y), "k")))$scores[names(y), 1],
                   ref$scores[names(y), 1])
  # nodes numbered 1..n: the order is the user's, an unnamed vector is fine
  N <- data.frame(from = c(1, 2), to = c(2, 3), weight = c(1, 1))
  expect_s3_class(run(c(1, 0, NA), N), "parCosnet")
})

test_that("the labels' summary in C equals the comparisons and colSums() in R", {
  set.seed(8)
  lab <- matrix(sample(c(-1L, 0L, 1L), 600, replace = TRUE), 100, 6,
                dimnames = list(paste0("n", 1:100), paste0("c", 1:6)))
  truth <- lab == 1L
  truth[lab == 0L] <- NA
  want <- list(truth = truth, positives = colSums(lab == 1L), negatives = colSums(lab == -1L),
               unlabelled = colSums(lab == 0L))
  expect_identical(cosnet_label_summary(lab), want)
  unnamed <- unname(lab)
  want <- lapply(want, unname)
  expect_identical(cosnet_label_summary(unnamed), want)
})
