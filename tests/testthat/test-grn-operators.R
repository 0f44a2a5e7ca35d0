# grnEvolve's genetic operators, one at a time, on decoded populations: the
# engine's own functions (grn_model.h) run through an internal test hook
# (src/grn/grn_testhooks.c) on inputs made here; every property is checked
# in plain R.  Links: arrays [target, source, individual] of -1/0/1.

hook <- function(op, links = array(0L, c(1, 1, 1)), rules = matrix(0L, 1, 1), p = 0,
                 a = c(0, 0), maxIn = 1L, allowed = 0:3)
  .Call(sysbioGPU:::ffi_grn_testhook, op, links, rules, as.double(p), as.double(a),
        as.integer(maxIn), as.integer(allowed))

# A random network with every in-degree at most maxIn.
rand_net <- function(n, maxIn, dens = 0.4) {
  x <- matrix(0L, n, n)
  for (i in seq_len(n)) {
    k <- min(maxIn, stats::rbinom(1, n, dens))
    x[i, sample.int(n, k)] <- sample(c(-1L, 1L), k, replace = TRUE)
  }
  x
}
indeg <- function(net) rowSums(net != 0)

test_that("the roulette weight is floor(2^40 / (score + 1)), at least 1", {
  s <- c(0, 1, 2, 3, 7, 1000, 123456, 2^40 - 1, 2^40, 2^41)
  expect_identical(hook("weight", p = s), pmax(1, floor(2^40 / (s + 1))))
})

test_that("roulette spins draw each position in proportion to its weight", {
  # boundaries: equal unit weights must give each position exactly its share
  # of the integers below the total
  N <- 40000
  for (w in list(c(1, 1, 1, 1), c(5, 1, 3, 1, 10, 2), c(1, 2^20, 1, 3))) {
    got <- hook("spin", p = cumsum(w), a = c(11, N))
    expect_true(all(got >= 0 & got < length(w)))
    cnt <- tabulate(got + 1L, length(w))
    pr <- w / sum(w)
    # each count within 5 binomial standard deviations (and 1 for tiny p)
    expect_true(all(abs(cnt - N * pr) <= 5 * sqrt(N * pr * (1 - pr)) + 1), label = paste(w, collapse = ","))
  }
  # a single positive weight: always drawn
  expect_true(all(hook("spin", p = cumsum(c(0, 0, 7, 0)), a = c(3, 500)) == 2L))
})

test_that("crossover: one cut in row-major cell order, rules up to the cut's gene, in-degree kept", {
  set.seed(1)
  oracle <- function(p1, p2, r1, r2, cut, maxIn) {
    n <- nrow(p1)
    idx <- outer(seq_len(n) - 1, seq_len(n) - 1, function(i, j) i * n + j) # cell of [i, j]
    first <- idx <= cut
    row <- cut %/% n + 1
    rfirst <- seq_len(n) <= row
    c1 <- ifelse(first, p1, p2); c2 <- ifelse(first, p2, p1)
    q1 <- ifelse(rfirst, r1, r2); q2 <- ifelse(rfirst, r2, r1)
    if (sum(c1[row, ] != 0) > maxIn) { c1 <- p1; q1 <- r1 }
    if (sum(c2[row, ] != 0) > maxIn) { c2 <- p2; q2 <- r2 }
    list(c1, c2, q1, q2)
  }
  replaced <- 0
  for (trial in 1:300) {
    n <- if (trial %% 10 == 0) 37L else 5L   # 37 genes: two words per row
    maxIn <- if (n == 5L) 2L else 6L
    p1 <- rand_net(n, maxIn, 0.5); p2 <- rand_net(n, maxIn, 0.5)
    r1 <- sample(0:3, n, TRUE); r2 <- sample(0:3, n, TRUE)
    cut <- sample.int(n * n, 1) - 1
    got <- hook("crossover", array(c(p1, p2), c(n, n, 2)), cbind(r1, r2), a = c(cut, 0), maxIn = maxIn)
    want <- oracle(p1, p2, r1, r2, cut, maxIn)
    expect_identical(got[[1]][, , 1], want[[1]])
    expect_identical(got[[1]][, , 2], want[[2]])
    expect_identical(got[[2]][, 1], want[[3]])
    expect_identical(got[[2]][, 2], want[[4]])
    expect_true(all(indeg(got[[1]][, , 1]) <= maxIn) && all(indeg(got[[1]][, , 2]) <= maxIn))
    replaced <- replaced + (!identical(want[[1]], ifelse(outer(seq_len(n) - 1, seq_len(n) - 1,
                                         function(i, j) i * n + j) <= cut, p1, p2)))
  }
  expect_gt(replaced, 5) # the in-degree rule was exercised
})

test_that("mutation changes at most one link and one rule and never exceeds maxInDegree", {
  set.seed(2)
  n <- 6L; maxIn <- 2L; allowed <- c(0L, 2L, 3L)
  net <- rand_net(n, maxIn, 0.5)
  net[1, ] <- c(1L, -1L, 0L, 0L, 0L, 0L)        # gene 1 at its limit
  net[2, ] <- 0L                                # gene 2 empty
  rules <- rep(c(0L, 2L, 3L), 2)
  R <- 3000
  got <- hook("mutate", array(net, c(n, n, 1)), matrix(rules), p = c(1, 1), a = c(5, R),
              maxIn = maxIn, allowed = allowed)
  L <- got[[1]]; Q <- got[[2]]
  dl <- apply(L, 3, function(x) sum(x != net))
  dr <- colSums(Q != rules)
  expect_true(all(dl <= 1) && all(dr <= 1))
  expect_true(all(apply(L, 3, function(x) max(indeg(x))) <= maxIn))
  expect_true(all(Q %in% allowed))
  # pLink = pRule = 1: a rule always changes (three allowed); a link changes
  # unless the draw would add an input to a gene at its limit
  expect_true(all(dr == 1))
  zero_full <- sum((net == 0) & (indeg(net) == maxIn)[row(net)])
  p_same <- zero_full / n^2                  # chosen cell empty at a full gene
  expect_lt(abs(mean(dl == 0) - p_same), 5 * sqrt(p_same * (1 - p_same) / R) + 1e-9)
  # each changed cell takes one of its two other values, half and half
  ch <- which(apply(L, 3, function(x) any(x != net)))
  newv <- vapply(ch, function(k) { x <- L[, , k]; x[x != net] }, 0L)
  expect_true(all(newv %in% -1:1))
  # probabilities 0: nothing changes
  got0 <- hook("mutate", array(net, c(n, n, 1)), matrix(rules), p = c(0, 0), a = c(5, 50),
               maxIn = maxIn, allowed = allowed)
  expect_true(all(got0[[1]] == as.vector(net)) && all(got0[[2]] == rules))
})

test_that("initial networks keep the reference's signed link counts within maxInDegree", {
  set.seed(3)
  n <- 6L; maxIn <- 2L
  ref <- rand_net(n, maxIn, 0.5)
  got <- hook("init", array(ref, c(n, n, 1)), matrix(0L, n, 1), a = c(9, 400), maxIn = maxIn,
              allowed = c(1L, 3L))
  L <- got[[1]]
  expect_true(all(apply(L, 3, function(x) max(indeg(x))) <= maxIn))
  expect_true(all(apply(L, 3, function(x) sum(x == 1)) == sum(ref == 1)))
  expect_true(all(apply(L, 3, function(x) sum(x == -1)) == sum(ref == -1)))
  expect_true(all(got[[2]] %in% c(1L, 3L)))
  expect_gt(length(unique(apply(L, 3, paste, collapse = ""))), 100) # not all the reference
})

test_that("migration brings each island's best to the next one; the elite is kept", {
  set.seed(4)
  n <- 8L
  net <- rand_net(n, 3L, 0.4)
  dimnames(net) <- list(paste0("g", 1:n), paste0("g", 1:n))
  from <- stats::setNames(rep(c(TRUE, FALSE), 4), rownames(net))
  to <- stats::setNames(rep(c(FALSE, TRUE), 4), rownames(net))
  for (sel in c("elitist", "roulette")) {
    fit <- grnEvolve(net, from, to, popSize = 64, islands = 4, migrants = 1, migrationInterval = 1,
                     selection = sel, pLink = 0.5, pRule = 0.5, maxInDegree = 3, generations = 25,
                     seed = 7, backend = "cpu", threads = 1, verbose = FALSE)
    h <- unclass(fit$history)
    I <- ncol(h)
    for (g in seq_len(nrow(h) - 1)) {
      # the elite: an island's best never gets worse
      expect_true(all(h[g + 1, ] <= h[g, ]), label = paste(sel, "elite at", g))
      # island p's best (before breeding) reached island p + 1 on the ring
      expect_true(all(h[g + 1, c(2:I, 1)] <= h[g, ]), label = paste(sel, "migration at", g))
    }
  }
})

test_that("one generation keeps the two best (the elite) and brings the best migrant", {
  # generation 0 and generation 1 of a block of islands, decoded (internal
  # round entry of the BPPARAM path)
  set.seed(5)
  n <- 7L
  net <- rand_net(n, 3L, 0.4)
  genes <- paste0("g", 1:n)
  dimnames(net) <- list(genes, genes)
  from <- sysbioGPU:::grn_state(stats::setNames(rep(c(TRUE, FALSE), length.out = n), genes), genes, "from")
  to <- sysbioGPU:::grn_state(stats::setNames(rep(c(FALSE, TRUE), length.out = n), genes), genes, "to")
  pb <- sysbioGPU:::grn_problem(net, from, to, 5, 0.9, 3L, 0:3)
  size <- 16; I <- 3L
  ga <- list(pop = size * I, islands = I, migrationInterval = 1L, migrants = 2L, roulette = 0L,
             pLink = 0.5, pRule = 0.5, generations = 1, target = -1, timeLimit = 0, seed = 12,
             blocks = 1L)
  round <- function(gens, state) {
    .Call(sysbioGPU:::ffi_grn_round, c(pb, list(state = state, incoming = NULL)),
          c(ga, list(block = c(0L, I), gens = as.double(gens))),
          list(gpu = FALSE, threads = 1L, devices = 0L, verbose = FALSE))
  }
  r0 <- round(c(0, 0), NULL)
  r1 <- round(c(0, 1), r0$state)
  dec <- function(st, k) .Call(sysbioGPU:::ffi_grn_decode, pb, st, size * I, k)
  ind <- function(st, k) { d <- dec(st, k); list(d$links, d$rules) }
  sc0 <- vapply(0:(size * I - 1), function(k) dec(r0$state, k)$score, 0)
  sc1 <- vapply(0:(size * I - 1), function(k) dec(r1$state, k)$score, 0)
  for (isl in 0:(I - 1)) {
    own <- isl * size + 0:(size - 1)
    src <- ((isl - 1) %% I) * size + 0:(size - 1)
    # before breeding: the island less its 2 worst plus the previous one's 2 best
    o_own <- own[order(sc0[own + 1], own)]
    o_src <- src[order(sc0[src + 1], src)]
    pool <- c(o_own[1:(size - 2)], o_src[1:2])
    best2 <- sort(sc0[pool + 1])[1:2]
    expect_identical(sort(sc1[isl * size + 1:2]), best2)
    # the elite slots are exact copies of individuals of that pool
    for (e in 0:1) {
      x <- ind(r1$state, isl * size + e)
      hit <- vapply(pool, function(k) identical(ind(r0$state, k), x), NA)
      expect_true(any(hit))
    }
  }
})
