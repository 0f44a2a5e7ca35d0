# COSNet's learning of (alpha, c) against a plain-R oracle written from
# COSNet's procedure (Frasca et al.; the steps of its optimizep), on inputs
# full of ties: points on a grid, several on the y axis, repeated angles and
# intercepts.  The stored COSNet outputs (test-parCosnet.R) have no ties, so
# a changed tie-break there passed unnoticed (alpha 0.158 -> 0.942
# on 77 of 3,000 random inputs).

ref_f <- function(tp, fn, fp) {
  prec <- if (tp + fp != 0) tp / (tp + fp) else 0
  rec <- if (tp + fn != 0) tp / (tp + fn) else 0
  if (prec + rec != 0) 2 * prec * rec / (prec + rec) else 0
}

# Best intercept of lines of slope `slope`: points with y - slope x at or
# below the line are positive, equal intercepts enter together, a later
# line must have a strictly larger F.
ref_intercept <- function(x, y, pos, slope) {
  v <- y - slope * x
  o <- order(v)
  tp <- 0; fp <- 0; fn <- sum(pos)
  best <- ref_f(tp, fn, fp); q <- 0
  ends <- cumsum(rle(v[o])$lengths)
  starts <- c(1, utils::head(ends, -1) + 1)
  for (h in seq_along(ends)) {
    g <- o[starts[h]:ends[h]]
    tp <- tp + sum(pos[g]); fn <- fn - sum(pos[g]); fp <- fp + sum(!pos[g])
    f <- ref_f(tp, fn, fp)
    if (f > best) { best <- f; q <- v[g[1]] }
  }
  list(q = q, f = best)
}

# COSNet's branch for positives above the line through the best positive on
# the y axis (no grouping of ties; points in their given order).
ref_above <- function(x, y, pos, r) {
  on <- which(x == 0)
  if (!any(pos[on])) return(r)
  z <- on[order(y[on])]
  nz_pos <- sum(pos[on])
  best <- 0; best_p <- 0; best_r <- 0; rank <- 0
  for (p in seq_along(z)) {
    if (!pos[z[p]]) next
    rank <- rank + 1
    f <- ref_f(rank, nz_pos - rank, p - rank)
    if (f > best) { best <- f; best_p <- p; best_r <- rank }
  }
  y1 <- y[z[best_p]]
  off <- which(x != 0)
  sl <- (y[off] - y1) / x[off]
  so <- off[order(sl)]; sl <- sort(sl)
  tp <- best_r; fn <- nz_pos - best_r; fp <- best_p - best_r
  best <- ref_f(tp, fn, fp)
  fn <- fn + sum(pos[off])
  slope <- tan(1.58)
  for (j in seq_along(so)) {
    if (sl[j] > -1) next
    if (pos[so[j]]) { tp <- tp + 1; fn <- fn - 1 } else fp <- fp + 1
    f <- ref_f(tp, fn, fp)
    if (f > best) { best <- f; slope <- sl[j] }
  }
  v <- y - slope * x
  o <- order(v)
  tp <- 0; fp <- 0; fn <- sum(pos); best <- 0; q <- 0
  for (j in o) {
    if (pos[j]) { tp <- tp + 1; fn <- fn - 1 } else fp <- fp + 1
    f <- if (tp > 0) ref_f(tp, fn, fp) else 0
    if (f > best) { best <- f; q <- v[j] }
  }
  alpha <- atan(slope) + pi
  list(alpha = alpha, c = -q * cos(alpha), F = best)
}

ref_learn <- function(x, y, lab) {
  pos <- lab > 0
  m <- length(x)
  ang <- ifelse(x != 0, atan(y / x), pi / 2 - .Machine$double.xmin)
  o <- order(ang)
  tp_u <- 0; fp_u <- 0; fn_u <- sum(pos)
  tp_o <- sum(pos); fp_o <- sum(!pos); fn_o <- 0
  best_u <- 0; best_o <- 0; ang_u <- 0; ang_o <- 0
  i <- 1
  while (i <= m) {
    a <- ang[o[i]]
    if (a >= 1.57) break
    j <- i
    while (j < m && ang[o[j + 1]] == a) j <- j + 1
    g <- o[i:j]
    # a last point standing alone at the end of the order is not counted
    np <- if (i != m) sum(pos[g]) else 0
    nn <- if (i != m) sum(!pos[g]) else 0
    tp_u <- tp_u + np; fn_u <- fn_u - np; fp_u <- fp_u + nn
    tp_o <- tp_o - np; fn_o <- fn_o + np; fp_o <- fp_o - nn
    fu <- ref_f(tp_u, fn_u, fp_u); fo <- ref_f(tp_o, fn_o, fp_o)
    if (fu > best_u) { best_u <- fu; ang_u <- a }
    if (fo > best_o) { best_o <- fo; ang_o <- a }
    i <- j + 1
  }
  above <- best_o > best_u
  theta <- if (above) ang_o else ang_u
  ic <- ref_intercept(x, y, pos, tan(theta))
  alpha <- theta + .Machine$double.xmin
  r <- list(alpha = alpha, c = -ic$q * cos(alpha), F = ic$f)
  if (above) r <- ref_above(x, y, pos, r)
  r
}

# Points on a small integer grid (ties of angles and intercepts), some on
# the y axis, positives placed to make the "above" branch common.
tie_case <- function(seed) {
  set.seed(seed)
  m <- sample(8:40, 1)
  lab <- ifelse(runif(m) < 0.35, 1, -1); lab[1:2] <- c(1, -1)
  x <- sample(0:3, m, replace = TRUE)
  y <- sample(0:4, m, replace = TRUE)
  if (seed %% 2 == 0) { x[lab > 0] <- sample(0:1, sum(lab > 0), replace = TRUE); y[lab > 0] <- y[lab > 0] + 2 }
  if (seed %% 3 == 0) x[sample(m, 3)] <- 0
  # no point on the y axis and mostly positives: the sweep reaches the end
  # of the order, where a last point standing alone is not counted, and the
  # line through everything can be the best
  if (seed %% 5 == 0) { x <- x + 1; lab <- -lab; lab[1:2] <- c(1, -1) }
  list(x = as.double(x), y = as.double(y), lab = lab)
}

test_that("learning equals the plain-R COSNet procedure on 400 tie-heavy inputs", {
  n_above <- 0
  for (s in 1:400) {
    z <- tie_case(s)
    got <- cosnet_learn(z$x, z$y, z$lab)
    want <- ref_learn(z$x, z$y, z$lab)
    n_above <- n_above + (want$alpha > pi / 2 + 1e-9)
    expect_identical(unlist(got), unlist(want), label = paste("case", s))
  }
  # both branches are exercised
  expect_gt(n_above, 20)
  expect_lt(n_above, 380)
})

test_that("ties of F among the positives on the y axis keep the first (the above branch)", {
  # on the axis, by ordinate: +, -, -, +: F = 2/3 for the line through either
  # positive, so the lower one must stay the pivot of the slope search
  n_above <- 0
  for (s in 1:60) {
    set.seed(1000 + s)
    k <- sample(4:20, 1)
    x <- c(0, 0, 0, 0, runif(k, 0.05, 1))
    y <- c(1, 2, 3, 4, runif(k, 0, 0.6))
    lab <- c(1, -1, -1, 1, ifelse(runif(k) < 0.15, 1, -1))
    got <- cosnet_learn(x, y, lab)
    want <- ref_learn(x, y, lab)
    n_above <- n_above + (want$alpha > pi / 2 + 1e-9)
    expect_identical(unlist(got), unlist(want), label = paste("case", s))
  }
  expect_gt(n_above, 10)
})

test_that("the oracle reproduces COSNet's stored outputs (no ties)", {
  cases <- readRDS(test_path("fixtures", "cosnet-optimizep.rds"))
  for (z in cases) {
    r <- ref_learn(z$x, z$y, z$labels)
    expect_identical(c(r$alpha, r$c, r$F), c(z$alpha, z$c, z$F))
  }
})

test_that("a hand-made tie: two lines with the same F, the first one wins", {
  # positives at angles atan(1/2) and atan(2), negatives at atan(1): the
  # line at atan(1/2) has tp 1, fp 0, fn 1 (F = 2/3), the line at atan(2)
  # tp 2, fp 2, fn 0 (F = 2/3 too); the search keeps atan(1/2)
  x <- c(2, 1, 1, 1, 1); y <- c(1, 1, 1, 2, 9); lab <- c(1L, -1L, -1L, 1L, -1L)
  got <- cosnet_learn(x, y, lab)
  expect_identical(got$alpha, atan(1 / 2) + .Machine$double.xmin)
  expect_identical(unlist(got), unlist(ref_learn(x, y, lab)))
})

test_that("the regularisation's constants follow from eta (sum of z - k)^2", {
  g <- cosnet_clustered(120, 0.06, 30, 45, 81, 82)
  W <- g$W; y <- g$y
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

test_that("the threaded sorts of a large learning step give the one-thread lines", {
  # 2^16 points or more sort on several threads (the GPU engine's runs of
  # few large jobs); the oracle is the one-thread step, itself checked
  # against the plain-R procedure above.  Grid values make many ties (the
  # scatter must keep them in input order), some points lie on the y axis,
  # and positives placed high make the "above" branch and its sorts run.
  for (s in 1:4) {
    set.seed(s)
    m <- 70000L + 1000L * s
    lab <- ifelse(runif(m) < 0.1, 1, -1)
    x <- sample(0:40, m, replace = TRUE) / 4
    y <- sample(0:60, m, replace = TRUE) / 3
    if (s %% 2 == 0) { x[lab > 0] <- sample(0:2, sum(lab > 0), replace = TRUE); y[lab > 0] <- y[lab > 0] + 15 }
    one <- cosnet_learn(x, y, lab)
    for (nt in c(2L, 3L)) expect_identical(cosnet_learn(x, y, lab, threads = nt), one, label = paste("case", s, nt))
  }
})

test_that("angles next to the sweep's stop at 1.57 and signed zeros are learned as the oracle does", {
  # The sweep over the angles leaves out the points at 1.57 or more before
  # sorting (and does not take the atan of ratios y / x of 1300 or more);
  # ratios around tan(1.57) = 1255.8 put the points on both sides of the
  # stop and of that shortcut.  Zero intercepts of both signs (y = -0 on
  # the axis) must give the sign of the first one in the point order, as
  # COSNet's stable sort does: identical() does not see it, 1 / c does.
  n_above <- 0
  for (s in 1:150) {
    set.seed(5000 + s)
    m <- sample(10:300, 1)
    lab <- ifelse(runif(m) < 0.3, 1, -1); lab[1:2] <- c(1, -1)
    x <- runif(m, 0.1, 1)
    y <- x * sample(c(1200, 1250, 1255, 1256, 1260, 1299, 1300, 1301, 1400, runif(3, 1000, 1400)), m, replace = TRUE)
    if (s %% 3 == 0) { x[1:3] <- 0; y[1:3] <- c(-0, 0, 2) }
    if (s %% 4 == 0) { y[sample(m, 5)] <- -0; y[sample(m, 5)] <- 0 }
    got <- cosnet_learn(x, y, lab)
    want <- ref_learn(x, y, lab)
    n_above <- n_above + (want$alpha > pi / 2 + 1e-9)
    expect_identical(unlist(got), unlist(want), label = paste("case", s))
    expect_identical(1 / got$c, 1 / want$c, label = paste("the sign of c, case", s))
  }
  expect_gt(n_above, 5)
  expect_lt(n_above, 145)
})

# The GPU engine learns from what its device makes of the points: for the
# angle sweep, the groups of equal ratios y / x, which the host turns into
# groups of equal angles with the same atan as the host's own step.  Here
# the oracle groups the angles themselves (R's atan is the C library's):
# where ratios differ by a few units in the last place their angles round
# alike, so groups merge (with the negatives between them), and a
# negative whose angle equals a positive's while their ratios differ sends
# the job back to the host.
cosnet_sweep_groups <- function(v, pos) {
  keys <- sort(unique(v[pos]))
  G <- length(keys)
  vn <- v[!pos]
  eq_at <- match(vn, keys)
  b <- findInterval(vn[is.na(eq_at)], keys, left.open = TRUE) + 1L
  rn <- vn[is.na(eq_at)]
  top <- rep(NA_real_, G + 1L); bot <- top
  for (r in unique(b)) { top[r] <- max(rn[b == r]); bot[r] <- min(rn[b == r]) }
  list(key = keys, pos = tabulate(match(v[pos], keys), G), eq = tabulate(eq_at[!is.na(eq_at)], G),
       run = tabulate(b, G + 1L), top = top, bot = bot)
}

test_that("the GPU engine's angle groups from ratio groups: merges, and the host where angles collide", {
  eps <- .Machine$double.eps
  n_merged <- 0; n_host <- 0; n_runs_merged <- 0
  for (s in 1:60) {
    set.seed(600 + s)
    base <- runif(12, 300, 1250)
    # clusters of five ratios a few hundred units in the last place apart
    # (one angle, mostly), labelled by pattern in ratio order: positives
    # only, negatives between positives, negatives only, and (some trials)
    # a negative below positives of its angle
    pat <- list(c(1, 0, 0, 1, 1), c(1, 1, 1, 1, 1), c(0, 0, 0, 0, 0), c(1, 0, 1, 0, 1), c(0, 1, 1, 1, 1))
    use <- sample(if (s %% 3 == 0) 1:5 else 1:4, 12, TRUE)
    cl <- lapply(seq_along(base), function(j) base[j] * (1 + sort(sample(0:400, 5)) * eps))
    r <- c(runif(60, 0.01, 1250), unlist(cl))
    pos <- c(runif(60) < 0.35, unlist(pat[use]) == 1)
    pos[1] <- TRUE; pos[2] <- FALSE
    rg <- cosnet_sweep_groups(r, pos)
    got <- .Call(sysbioGPU:::ffi_cosnet_angle_groups, rg$key, as.integer(rg$pos), as.integer(rg$eq),
                 as.integer(rg$run), ifelse(rg$run > 0, rg$top, 0), ifelse(rg$run > 0, rg$bot, 0),
                 length(r), 0)
    a <- atan(r)
    # a negative of a positive's angle outside the ratios of that angle's
    # positives (between them, it joins their merged group)
    outside <- vapply(which(!pos), function(i) {
      rp <- r[pos & a == a[i]]
      length(rp) > 0 && !(r[i] %in% rp) && (r[i] < min(rp) || r[i] > max(rp))
    }, logical(1))
    if (any(outside)) {
      expect_identical(got$G, -1, info = s)
      n_host <- n_host + 1
      next
    }
    want <- cosnet_sweep_groups(a, pos)
    expect_identical(got$G, as.numeric(length(want$key)), info = s)
    expect_identical(got$angle, want$key, info = s)
    expect_identical(got$pos, as.numeric(want$pos), info = s)
    expect_identical(got$eq, as.numeric(want$eq), info = s)
    expect_identical(got$run, as.numeric(want$run), info = s)
    expect_identical(got$top, want$top, info = s)
    n_merged <- n_merged + (length(want$key) < length(rg$key))
    n_runs_merged <- n_runs_merged + (sum(want$eq) > sum(rg$eq))
  }
  # the trials reach each case
  expect_gt(n_host, 3)
  expect_gt(n_merged, 3)
  expect_gt(n_runs_merged, 3)
})
