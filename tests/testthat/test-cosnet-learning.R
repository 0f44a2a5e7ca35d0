# parCosnet's learning step and regularisation against independent plain-R
# oracles: COSNet's F-score search written from its description (angles of
# the lines through the origin swept upwards, groups of equal angles enter
# together, a line must strictly beat the best F so far, so ties keep the
# first line; then the intercept the same way), on tie-rich inputs; and the
# penalty's Hopfield constants fitted numerically from its definition.

# F-score as the harmonic mean of precision and recall (0 when undefined).
fscore_def <- function(tp, fn, fp) {
  p <- if (tp + fp > 0) tp / (tp + fp) else 0
  r <- if (tp + fn > 0) tp / (tp + fn) else 0
  if (p + r > 0) 2 * p * r / (p + r) else 0
}

# The learning step for inputs whose best line has the positives below it
# ("under"); NULL when the positives above the line win (another branch).
learn_oracle <- function(x, y, lab) {
  pos <- lab > 0; m <- length(x); np <- sum(pos)
  ang <- ifelse(x != 0, atan(y / x), pi / 2)
  vals <- sort(unique(ang))
  best_u <- 0; best_o <- 0; ang_u <- 0; tie_u <- 0
  tp_u <- 0; fp_u <- 0; tp_o <- np; fp_o <- m - np
  for (a in vals) {
    if (a >= 1.57) break
    g <- which(ang == a)
    # a single point at the very end of the order does not count (COSNet)
    last_alone <- length(g) == 1 && a == max(ang) && sum(ang < a) == m - 1
    p <- if (last_alone) 0 else sum(pos[g]); q <- if (last_alone) 0 else sum(!pos[g])
    tp_u <- tp_u + p; fp_u <- fp_u + q; tp_o <- tp_o - p; fp_o <- fp_o - q
    fu <- fscore_def(tp_u, np - tp_u, fp_u); fo <- fscore_def(tp_o, np - tp_o, fp_o)
    if (fu > best_u) { best_u <- fu; ang_u <- a; tie_u <- 0 } else if (fu == best_u && fu > 0) tie_u <- tie_u + 1
    if (fo > best_o) best_o <- fo
  }
  if (best_o > best_u) return(NULL)
  key <- y - tan(ang_u) * x
  best <- 0; qb <- 0; tie_q <- 0
  for (v in sort(unique(key))) {
    below <- key <= v
    f <- fscore_def(sum(pos & below), sum(pos & !below), sum(!pos & below))
    if (f > best) { best <- f; qb <- v; tie_q <- 0 } else if (f == best && f > 0) tie_q <- tie_q + 1
  }
  alpha <- ang_u + .Machine$double.xmin
  list(alpha = alpha, c = -qb * cos(alpha), F = best, ties = tie_u + tie_q,
       tie_ou = best_o == best_u)
}

test_that("the plain-R search reproduces COSNet's stored outputs (fixture, under branch)", {
  # fixtures/cosnet-optimizep.rds: COSNet::optimizep outputs (see
  # fixtures/make-cosnet-optimizep.R); the plain-R search is independent of both
  cases <- readRDS(test_path("fixtures", "cosnet-optimizep.rds"))
  under <- Filter(function(z) !z$above, cases)
  expect_gte(length(under), 5)
  for (z in cases) expect_identical(is.null(learn_oracle(z$x, z$y, z$labels)), z$above)
  for (z in under) {
    w <- learn_oracle(z$x, z$y, z$labels)
    expect_identical(c(w$alpha, w$c, w$F), c(z$alpha, z$c, z$F))
  }
})

test_that("learned alpha, c and F equal the plain-R search, ties kept by the first line", {
  set.seed(18)
  compared <- 0; tied <- 0; tie_ou <- 0
  for (it in 1:400) {
    m <- sample(8:40, 1)
    # small integers: many equal angles, equal intercepts and equal F-scores
    x <- sample(0:4, m, TRUE); y <- sample(0:4, m, TRUE)
    if (it %% 3 == 0) { x <- x + 1; y <- y * 2 }
    lab <- ifelse(runif(m) < 0.35, 1L, -1L); lab[1:2] <- c(1L, -1L)
    want <- learn_oracle(x, y, lab)
    if (is.null(want)) next
    got <- cosnet_learn(x, y, lab)
    expect_identical(c(got$alpha, got$c, got$F), c(want$alpha, want$c, want$F),
                     label = paste("case", it))
    compared <- compared + 1
    tied <- tied + (want$ties > 0)
    tie_ou <- tie_ou + want$tie_ou
  }
  expect_gt(compared, 150)
  expect_gt(tied, 10)   # the tie-break decided some of them
  expect_gt(tie_ou, 3)  # and "under" beat "over" on equal F
})

test_that("a hand-made tie: two lines with the same F, the first one wins", {
  # positives at angles atan(1/2) and atan(2), negatives at atan(1): the
  # line at atan(1/2) has tp 1, fp 0, fn 1 (F = 2/3), the line at atan(2)
  # tp 2, fp 2, fn 0 (F = 2/3 too); the search keeps atan(1/2)
  x <- c(2, 1, 1, 1, 1); y <- c(1, 1, 1, 2, 9); lab <- c(1L, -1L, -1L, 1L, -1L)
  want <- learn_oracle(x, y, lab)
  expect_false(is.null(want))
  expect_gt(want$ties, 0)
  got <- cosnet_learn(x, y, lab)
  expect_identical(got$alpha, atan(1 / 2) + .Machine$double.xmin)
  expect_identical(c(got$alpha, got$c, got$F), c(want$alpha, want$c, want$F))
})

test_that("the regularisation's constants follow from eta (sum of z - k)^2", {
  W <- cosnet_random_graph(120, 0.06, 81)
  set.seed(82)
  y <- rep(0, 120); y[1:30] <- 1; y[sample(120, 45)] <- NA
  W[1:30, 1:30] <- W[1:30, 1:30] + 0.5 * (Matrix::rsparsematrix(30, 30, 0.3, symmetric = TRUE) != 0)
  Matrix::diag(W) <- 0
  W <- methods::as(Matrix::drop0(W), "generalMatrix")
  for (cost in c(1e-3, 5e-2)) {
    fit <- parCosnet(W, y, cost = cost, seed = 3, backend = "cpu", threads = 2, verbose = FALSE)
    a <- fit$classes$alpha
    expect_gt(a, pi / 4)
    hi <- sin(a); lo <- -cos(a)
    U <- which(is.na(y)); N <- length(U)
    # COSNet's penalty: eta (sum of z - k)^2, z = 1 for a positive state,
    # k the labelled positive rate times the unlabelled count, rounded up
    eta <- cost * abs(tan(2 * (a - pi / 4)))
    k <- ceiling(sum(y == 1, na.rm = TRUE) / sum(!is.na(y)) * N)
    # it depends on the state only through h, the number of positive states;
    # as a Hopfield energy r sum_{i<j} x_i x_j + t sum_i x_i + const it must
    # hold for every h: fit r, t by least squares (exact) over h = 0..N
    h <- 0:N
    S1 <- h * hi + (N - h) * lo
    S2 <- choose(h, 2) * hi^2 + h * (N - h) * hi * lo + choose(N - h, 2) * lo^2
    P <- eta * (h - k)^2
    co <- stats::coef(stats::lm(P ~ S2 + S1))
    expect_lt(max(abs(stats::residuals(stats::lm(P ~ S2 + S1)))), 1e-8 * max(1, max(P)))
    ref <- cosnet_sequential(W, y, a, fit$classes$c, fit$colours, pen_r = co[["S2"]],
                             theta_add = co[["S1"]])
    expect_identical(unname(fit$predictions[U, 1]), ref$pred)
    expect_equal(unname(fit$scores[U, 1]), ref$scores, tolerance = 1e-7)
  }
})
