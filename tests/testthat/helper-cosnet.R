# Plain-R references for the parCosnet() tests: random networks, the
# training points, and the sequential Hopfield sweep in colour order.

cosnet_random_graph <- function(n, density, seed) {
  set.seed(seed)
  W <- Matrix::rsparsematrix(n, n, density = density, symmetric = TRUE,
                             rand.x = function(k) runif(k, 0.01, 1))
  Matrix::diag(W) <- 0
  W <- Matrix::drop0(W)
  methods::as(W, "generalMatrix")
}

# Labels 1/0/NA: `pos` positives with homophily-free random placement.
cosnet_random_labels <- function(n, pos, unl, seed) {
  set.seed(seed)
  y <- rep(0, n)
  y[sample(n, pos)] <- 1
  y[sample(n, unl)] <- NA
  y
}

# The sequential dynamics in colour order (by colour, then node index) from
# the all-unset state, with plain R sums: states, last fields, sweeps and
# the energy after each sweep.  pen_r: the regularisation's r (0 = none);
# theta_add: its threshold shift.
cosnet_sequential <- function(W, y, alpha, c, colours, max_sweeps = 1000,
                              pen_r = 0, theta_add = 0) {
  U <- which(is.na(y))
  S <- which(!is.na(y))
  hi <- sin(alpha); lo <- -cos(alpha)
  s_lab <- ifelse(y[S] == 1, hi, lo)
  theta <- c - as.vector(W[U, S, drop = FALSE] %*% s_lab) + theta_add
  WU <- as.matrix(W[U, U, drop = FALSE])
  cu <- colours[U]
  ord <- order(cu, U)
  x <- numeric(length(U)); h <- numeric(length(U))
  energy <- numeric(0)
  sweeps <- 0
  repeat {
    sweeps <- sweeps + 1
    changed <- 0
    for (t in ord) {
      pen <- if (pen_r > 0) pen_r * sum(x[cu != cu[t]]) else 0
      f <- sum(WU[t, ] * x) - pen - theta[t]
      new <- if (f > 0) hi else lo
      if (new != x[t]) changed <- changed + 1
      x[t] <- new
      h[t] <- f
    }
    energy <- c(energy, -0.5 * sum(x * (WU %*% x)) + sum(theta * x))
    if (changed == 0 || sweeps >= max_sweeps) break
  }
  list(U = U, pred = x == hi, scores = h, sweeps = sweeps, energy = energy, theta = theta)
}

# Greedy colouring in decreasing Philox priority (what Jones-Plassmann
# computes): priority of node v (1-based) = Philox(seed, subsequence v - 1),
# first two 32-bit words, ties to the larger index.
cosnet_greedy_colours <- function(W, seed) {
  n <- nrow(W)
  words <- philoxDraws(2, seed, subsequence = 0, streams = n, backend = "cpu")
  ord <- order(words[1, ], words[2, ], seq_len(n), decreasing = TRUE)
  col <- integer(n)
  for (v in ord) {
    nb <- W@i[(W@p[v] + 1L):W@p[v + 1L]] + 1L
    if (W@p[v] == W@p[v + 1L]) nb <- integer(0)
    used <- col[nb]
    k <- 1L
    while (k %in% used) k <- k + 1L
    col[v] <- k
  }
  col
}

# threads > 1: the GPU engine's learning of few large jobs (its sorts
# threaded for 2^16 points or more)
cosnet_learn <- function(x, y, lab, threads = 1L) {
  .Call(sysbioGPU:::ffi_cosnet_learn, as.double(x), as.double(y), as.integer(lab > 0), as.integer(threads))
}

# Plain-R oracles of cvParCosnet()'s bookkeeping (cosnet_cv.c): the folds of
# one class and the per-fold metrics, written the obvious way.
ref_cosnet_folds <- function(lab, nfolds, seed, k) {
  f <- integer(length(lab))
  pos <- which(lab == 1L); neg <- which(lab == -1L)
  deal <- function(idx, sub, start) {
    if (!length(idx)) return(start)
    perm <- if (length(idx) > 1L) philoxShuffle(length(idx), seed, subsequence = sub, threads = 1L) else 1L
    f[idx[perm]] <<- ((start + seq_along(idx) - 1L) %% nfolds) + 1L
    start + length(idx)
  }
  base <- 2^40 + 2 * (k - 1)
  deal(neg, base + 1, deal(pos, base, 0L))
  f
}

ref_average_precision <- function(score, truth) {
  P <- sum(truth)
  if (P == 0) return(NA_real_)
  o <- order(score, decreasing = TRUE)
  s <- score[o]; t <- truth[o]
  last <- c(s[-1] != s[-length(s)], TRUE)
  tp <- cumsum(t)[last]; np <- seq_along(t)[last]
  rec <- tp / P; prec <- tp / np
  sum(diff(c(0, rec)) * prec)
}

ref_cv_metrics <- function(lab, folds, pred, scores, nfolds) {
  truth <- lab == 1L
  t(vapply(seq_len(ncol(lab)), function(k) {
    by_fold <- split(seq_len(nrow(folds)), factor(folds[, k], levels = seq_len(nfolds)))
    m <- vapply(by_fold, function(i) {
      p <- pred[i, k]; t <- truth[i, k]
      tp <- sum(p & t); fp <- sum(p & !t); fn <- sum(!p & t)
      prec <- if (tp + fp > 0) tp / (tp + fp) else 0
      rec <- if (tp + fn > 0) tp / (tp + fn) else NA_real_
      f <- if (!is.na(rec) && prec + rec > 0) 2 * prec * rec / (prec + rec) else if (is.na(rec)) NA_real_ else 0
      c(prec, rec, f, ref_average_precision(scores[i, k], t))
    }, numeric(4))
    rowMeans(m, na.rm = TRUE)
  }, numeric(4)))
}

# A random graph of n nodes (edge density `density`) whose first k are positives linked among
# themselves more densely (so that the learned alpha exceeds pi / 4 and
# the regularisation is on), with `hide` random labels unknown; seeds as
# given.  list(W, y).
cosnet_clustered <- function(n, density, k, hide, graph_seed, label_seed) {
  W <- cosnet_random_graph(n, density, graph_seed)
  set.seed(label_seed)
  y <- rep(0, n); y[1:k] <- 1; y[sample(n, hide)] <- NA
  W[1:k, 1:k] <- W[1:k, 1:k] + 0.5 * (Matrix::rsparsematrix(k, k, 0.3, symmetric = TRUE) != 0)
  Matrix::diag(W) <- 0
  list(W = methods::as(Matrix::drop0(W), "generalMatrix"), y = y)
}
