# Behaviours that the sampled mutants of the PBN engines, the LASSIE SBML
# reader and glue, the GRN engine and the Philox bounded draws showed to be
# unpinned (tools/mutants-auto-triage-pbn-lassieio-grn.tsv).  Each test
# holds the code to an oracle of its own: a value derived by hand, a
# transition matrix solved by base R, a plain-R recomputation from the raw
# Philox words, a formula of the papers or an invariant of the design.

# ---- pbnSteadyState ---------------------------------------------------------

# The transition matrix of a small PBN in plain R (as helper-pbn.R, which
# this file does not rely on being loaded first).
mut_pbn_P <- function(net, p) {
  n <- length(net$nodes)
  NS <- 2^n
  bits <- function(s) (s %/% 2^(0:(n - 1))) %% 2
  tab <- function(f) sysbioGPU:::pbn_fun_table(f)
  q_of <- function(b) vapply(seq_len(n), function(i) {
    sum(vapply(seq_along(net$functions[[i]]), function(j) {
      f <- net$functions[[i]][[j]]
      k <- length(f$inputs)
      row <- if (k == 0) 0 else sum(b[match(f$inputs, net$nodes)] * 2^(k - seq_len(k)))
      tab(f)[[row + 1]] * net$probabilities[[i]][[j]]
    }, 0))
  }, 0)
  P <- matrix(0, NS, NS)
  for (s in 0:(NS - 1)) {
    b <- bits(s)
    q <- q_of(b)
    for (t in 0:(NS - 1)) {
      tb <- bits(t)
      fl <- sum(tb != b)
      P[s + 1, t + 1] <- (if (fl > 0) p^fl * (1 - p)^(n - fl) else 0) +
        (1 - p)^n * prod(ifelse(tb == 1, q, 1 - q))
    }
  }
  P
}
mut_pbn_pi <- function(P) {
  NS <- nrow(P)
  A <- t(P) - diag(NS)
  A[NS, ] <- 1
  solve(A, c(numeric(NS - 1), 1))
}
mut_run <- function() list(gpu = FALSE, threads = 1L, devices = 0L, verbose = FALSE)

test_that("BPPARAM rounds: the sums of every block of trajectories make the one-process estimates", {
  # kills m15104 (the driver skipped the first worker's sums).  The round
  # runs two blocks in this process, as a BiocParallel back-end would.
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  keep <- rep(TRUE, length(net$nodes))
  flat <- sysbioGPU:::pbn_flatten(net, keep, 0.01, FALSE)
  sets_l <- sysbioGPU:::pbn_sets_list(list(c(Survival = TRUE), c(Apoptosis = TRUE)), flat$node_of_full, net$nodes)
  params <- sysbioGPU:::pbn_params(5, 7, 0.01, 0.95, 1e-10, 1e6)
  data <- list(net = flat, sets = sets_l)
  one <- .Call(sysbioGPU:::ffi_pbn_steady, data, params, mut_run())
  ranges <- list(c(0, 3), c(3, 7))
  states <- list(NULL, NULL)
  round <- function(steps, count) {
    out <- lapply(1:2, function(i) {
      r <- sysbioGPU:::pbn_block(ranges[[i]], 0L, states[[i]], data, params, steps, count, FALSE, 1L)
      states[[i]] <<- r$state
      r
    })
    if (count) lapply(out, `[[`, "sums") else NULL
  }
  run <- c(mut_run(), list(round = round, env = environment()))
  two <- .Call(sysbioGPU:::ffi_pbn_steady_bp, data, params, run)
  expect_gt(one$samples[[1]], 0)
  expect_identical(two, one)
})

test_that("the exact method's direct solve stands: three attractors linked only by perturbations", {
  # kills m15191 (power iteration ran after a successful direct solve and
  # overwrote it).  A = A, B = A | B: fixed points 00, 01 (A off, B on) and
  # 11; 10 goes to 11.  As p -> 0 the flows between them are p per flipped
  # bit: 00 -> 01 and 00 -> 10 -> 11 out of 00, 01 -> 00 and 01 -> 11 out of
  # 01, 11 -> 01 out of 11 (its B flip returns): pi(00) = 1/6, pi(01) =
  # 1/3, pi(11) = 1/2.  Power iteration would take ~1/p steps to get there.
  net <- pbn(list(A = "A", B = "A | B"))
  ex <- pbnSteadyState(net, "marginals", p = 1e-8, method = "exact", backend = "cpu", threads = 1,
                       verbose = FALSE)
  expect_identical(attr(ex, "solver"), "direct")
  # state index: bit 0 = A, bit 1 = B
  expect_equal(attr(ex, "stationary"), c(1 / 6, 0, 1 / 3, 1 / 2), tolerance = 1e-6, ignore_attr = TRUE)
  expect_equal(attr(ex, "stationary"), mut_pbn_pi(mut_pbn_P(net, 1e-8)), tolerance = 1e-6, ignore_attr = TRUE)
  expect_equal(ex$probability, c(1 / 2, 5 / 6), tolerance = 1e-6)
})

test_that("power iteration converges to the stationary distribution", {
  # kills m16230, m16236 (the lazy chain's update weighted by q0 / pi).
  # 12 nodes (over the direct solve's 11): x1 draws 1 with probability 0.3,
  # x2..x12 copy their predecessor.  With p = 0 the stationary law is 12
  # independent Bernoulli(0.3) bits.
  cs <- 0.3
  nodes <- c(list(x1 = c("1" = cs, "0" = 1 - cs)), stats::setNames(as.list(paste0("x", 1:11)), paste0("x", 2:12)))
  ex <- pbnSteadyState(pbn(nodes), "marginals", p = 0, method = "exact", reduce = FALSE, backend = "cpu",
                       threads = 1, verbose = FALSE)
  expect_identical(attr(ex, "solver"), "power iteration")
  ones <- vapply(0:4095, function(s) sum(bitwAnd(s, 2^(0:11)) > 0), 0)
  expect_equal(attr(ex, "stationary"), cs^ones * (1 - cs)^(12 - ones), tolerance = 1e-10, ignore_attr = TRUE)
  expect_equal(ex$probability, rep(cs, 12), tolerance = 1e-10)
  # with perturbations: the engine's power iteration (the direct solve
  # switched off) against base R's solve() of the transition matrix
  net <- pbn(list(x1 = c("x2 & !x3" = 0.7, "x4" = 0.3), x2 = "x1 | x4", x3 = c("!x1" = 0.4, "x2 & x3" = 0.6),
                  x4 = "x3 | (x1 & !x2)"))
  flat <- sysbioGPU:::pbn_flatten(net, rep(TRUE, 4), 0.05, FALSE)
  pw <- .Call(sysbioGPU:::ffi_pbn_exact, list(net = flat),
              list(p = 0.05, tol = 1e-13, maxIter = 2e6, direct = FALSE), mut_run())
  expect_false(pw$direct)
  expect_equal(pw$pi, mut_pbn_pi(mut_pbn_P(net, 0.05)), tolerance = 1e-10)
})

test_that("the burn-in M is Raftery and Lewis' from the reported alpha and beta", {
  # kills m15705, m15706 (lambda = |1 - alpha - beta| changed).  M =
  # ceil(log(epsilon (alpha + beta) / max(alpha, beta)) / log|1 - alpha -
  # beta|) (the paper; notes in references/pbnSteadyState.md).
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  r <- pbnSteadyState(net, "marginals", p = 0.01, r = 0.02, seed = 1, trajectories = 16, backend = "cpu",
                      threads = 1, verbose = FALSE)
  expect_true(all(r$converged))
  a <- r$alpha; b <- r$beta
  M <- pmax(0, ceiling(log(1e-10 * (a + b) / pmax(a, b)) / log(abs(1 - a - b))))
  expect_true(all(M > 0))
  expect_equal(r$M, M)
})

test_that("a burn-in that Raftery-Lewis asks for beyond the steps run is run on before counting", {
  # kills m15923 (the steps run to reach M were subtracted).  x alternates
  # (x = !x): R-hat is 1 after the first window, but the indicator's
  # alpha and beta are near 1, so |1 - alpha - beta| is near 1 and M is in
  # the thousands, far beyond the 256 steps of Gelman-Rubin: the driver
  # discards its counts and runs on to M (the final re-check holds).  y,
  # perturbed, stalls x now and then.
  net <- pbn(list(x = "!x", y = "y"))
  r <- pbnSteadyState(net, c(x = TRUE), p = 0.005, r = 0.01, seed = 1, trajectories = 8, backend = "cpu",
                      threads = 1, verbose = FALSE)
  b <- attr(r, "burnin")
  expect_true(r$converged)
  expect_gt(r$M, 1000)
  expect_gte(b, r$M)
  # every step of a chain is burn-in or a pooled sample
  expect_equal(r$steps, (b + r$samples / 8) * 8)
  expect_equal(r$probability, 0.5, tolerance = 0.01)
})

test_that("Gelman-Rubin doubles its window up to 2^22 steps when R-hat never comes down", {
  # kills m15833.  A regression pin of the window cap (PBN_PSI_MAX, a
  # constant of src/pbn/pbn_driver.c): y = y keeps each chain in its
  # attractor (p = 1e-9: no flip in the run), x oscillates where y is on
  # and stays where it is off, so the chains never agree (R-hat ~1.5).
  # The burn-in is the last window's start: psi = 2^22 steps.
  net <- pbn(list(y = "y", x = "(y & !x) | (!y & x)"))
  r <- suppressWarnings(pbnSteadyState(net, c(x = TRUE), p = 1e-9, seed = 2, trajectories = 4,
                                       maxSteps = 4 * (2^23 + 64), backend = "cpu", threads = 1,
                                       verbose = FALSE))
  expect_gt(r$rhat, 1.01)
  expect_false(r$converged)
  expect_identical(attr(r, "burnin"), 2^22)
})

test_that("functions of six inputs: the register step gives the general step's run and the exact answer", {
  # kills m16516 (rows 32..63 of a packed 6-input truth table).  Every node
  # reads all six, so the register step packs them at width 6.
  set.seed(11)
  nm <- paste0("x", 1:6)
  nodes <- lapply(1:6, function(i) list(inputs = nm, table = sample(c(TRUE, FALSE), 64, replace = TRUE)))
  names(nodes) <- nm
  net <- pbn(nodes)
  run <- function() pbnSteadyState(net, "marginals", p = 0.05, r = 0.02, seed = 2, trajectories = 16,
                                   backend = "cpu", threads = 1, verbose = FALSE)
  reg <- run()
  old <- options(sysbioGPU.pbnGeneralStep = TRUE)
  on.exit(options(old))
  gen <- run()
  options(old)
  cols <- c("probability", "se", "N", "M", "alpha", "beta", "samples", "steps")
  expect_identical(as.data.frame(unclass(reg))[cols], as.data.frame(unclass(gen))[cols])
  pi <- mut_pbn_pi(mut_pbn_P(net, 0.05))
  exact <- vapply(1:6, function(i) sum(pi[bitwAnd(0:63, 2^(i - 1)) > 0]), 0)
  expect_true(all(abs(reg$probability - exact) <= 0.02))
})

# ---- Philox bounded integers --------------------------------------------------

test_that("bounded integers are Lemire's method on the raw words, threshold 2^32 mod n", {
  # kills m2330 (threshold (1 - n) mod n).  For n = a 2^k with a odd and
  # small, w * n is exact in doubles: low = (w * n) mod 2^32, draw =
  # floor(w * n / 2^32), redrawn while low < 2^32 mod n.
  lemire <- function(words, n, k) {
    thr <- 2^32 %% n
    out <- numeric(k)
    i <- 1
    for (j in seq_len(k)) {
      repeat {
        m <- words[i] * n
        i <- i + 1
        low <- m %% 2^32
        if (low >= n || low >= thr) break
      }
      out[j] <- floor(m / 2^32)
    }
    out
  }
  for (n in c(3 * 2^30, 5 * 2^29, 6)) {
    w <- philoxDraws(4000, seed = 17, type = "uint32")
    got <- philoxDraws(1000, seed = 17, type = "integer", max = n)
    expect_identical(got, lemire(w, n, 1000), info = n)
  }
})

# ---- grnEvolve ---------------------------------------------------------------

test_that("initial networks of more than 32 genes keep the reference's link counts within maxInDegree", {
  # kills m6321 (only n / w of the n * w mask words cleared before a
  # redraw).  40 genes: two words a row.  100 links with maxInDegree 4
  # need redraws.
  set.seed(5)
  n <- 40L; maxIn <- 4L
  ref <- matrix(0L, n, n)
  cells <- sample.int(n * n, 100)
  ref[cells] <- sample(c(-1L, 1L), 100, replace = TRUE)
  while (any(rowSums(ref != 0) > maxIn)) {
    i <- which(rowSums(ref != 0) > maxIn)[1]
    ref[i, which(ref[i, ] != 0)[1]] <- 0L
  }
  got <- .Call(sysbioGPU:::ffi_grn_testhook, "init", array(ref, c(n, n, 1)), matrix(0L, n, 1), 0,
               c(9, 200), maxIn, 0:3)
  L <- array(got[[1]], c(n, n, 200))
  expect_true(all(apply(L, 3, function(x) max(rowSums(x != 0))) <= maxIn))
  expect_true(all(apply(L, 3, function(x) sum(x == 1)) == sum(ref == 1)))
  expect_true(all(apply(L, 3, function(x) sum(x == -1)) == sum(ref == -1)))
  expect_gt(length(unique(apply(L, 3, paste, collapse = ""))), 150)
})

test_that("rounds give the same run for networks of more than 32 genes", {
  # kills m5136 (a round's returned state sized n / w words per mask).
  set.seed(6)
  n <- 40L
  g <- paste0("g", seq_len(n))
  net <- matrix(0L, n, n, dimnames = list(g, g))
  for (i in seq_len(n)) net[i, sample.int(n, 2)] <- sample(c(-1L, 1L), 2, replace = TRUE)
  from <- stats::setNames(stats::runif(n) < 0.5, g)
  to <- stats::setNames(stats::runif(n) < 0.5, g)
  ev <- function() grnEvolve(net, from, to, popSize = 16, islands = 2, migrationInterval = 2,
                             generations = 12, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  one <- ev()
  old <- options(sysbioGPU.grnHistoryRows = 4)
  on.exit(options(old))
  rounds <- ev()
  options(old)
  for (nm in c("network", "rules", "fitness", "history", "generations")) {
    expect_identical(rounds[[nm]], one[[nm]], info = nm)
  }
})

test_that("roulette spins pick parents in proportion to their weights; children are their crossover", {
  # kills m5704 (the cumulative weights started at 1).  All genes start and
  # end off, so every network scores 0 (lambda = 1: dn only): each weight
  # is 2^40 and an island of 4 weighs 2^42.  A spin masks two words to 42
  # bits, u = (w1 mod 2^10) 2^32 + w2, always below the total, and draws
  # position floor(u / 2^40); the cut is floor(w5 n^2 / 2^32) (Lemire, no
  # rejection for n^2 = 9 here with these words' products), from the
  # stream (seed, generation * popSize + slot) of the pair's first slot.
  # Child 1 takes the cells 0..cut (row-major over target, source) and the
  # rules of genes 0..cut %/% n of parent 1, the rest of parent 2.
  g <- c("g1", "g2", "g3")
  n <- 3L
  net <- matrix(c(0L, 1L, -1L, 1L, 0L, 0L, 0L, -1L, 1L), n, n, dimnames = list(g, g))
  pb <- sysbioGPU:::grn_problem(net, rep(0L, n), rep(0L, n), 3L, lambda = 1, maxIn = n, allowed = 0:3)
  pop <- 16; I <- 4L; seed <- 11
  ga <- list(pop = pop, islands = I, migrationInterval = 1L, migrants = 0L, roulette = 1L, pLink = 0,
             pRule = 0, generations = 1, target = -1, timeLimit = 0, seed = seed, blocks = 1L)
  rnd <- function(state, gens) .Call(sysbioGPU:::ffi_grn_round, c(pb, list(state = state, incoming = NULL)),
                                     c(ga, list(block = c(0L, I), gens = as.double(gens))), mut_run())
  r0 <- rnd(NULL, c(0, 0))
  r1 <- rnd(r0$state, c(0, 1))
  dec <- function(st, k) .Call(sysbioGPU:::ffi_grn_decode, pb, st, pop, k)[c("links", "rules", "score")]
  pop0 <- lapply(seq_len(pop) - 1, function(k) dec(r0$state, k))
  pop1 <- lapply(seq_len(pop) - 1, function(k) dec(r1$state, k))
  expect_true(all(vapply(pop0, `[[`, 0, "score") == 0))
  cell <- outer(0:(n - 1), 0:(n - 1), function(i, j) i * n + j)
  for (isl in seq_len(I) - 1) {
    base <- isl * 4
    k1 <- base + 2
    w <- philoxDraws(5, seed, subsequence = 1 * pop + k1, type = "uint32")
    a <- (w[1] %% 1024) %/% 256
    b <- (w[3] %% 1024) %/% 256
    cut <- floor(w[5] * n^2 / 2^32)
    expect_gte((w[5] * n^2) %% 2^32, 2^32 %% n^2) # no redraw of the cut
    p1 <- pop0[[base + a + 1]]; p2 <- pop0[[base + b + 1]]
    expect_identical(pop1[[k1 + 1]]$links, ifelse(cell <= cut, p1$links, p2$links), info = isl)
    expect_identical(pop1[[k1 + 2]]$links, ifelse(cell <= cut, p2$links, p1$links), info = isl)
    expect_identical(pop1[[k1 + 1]]$rules, ifelse(0:(n - 1) <= cut %/% n, p1$rules, p2$rules), info = isl)
    expect_identical(pop1[[k1 + 2]]$rules, ifelse(0:(n - 1) <= cut %/% n, p2$rules, p1$rules), info = isl)
    # the elite: the island's two best (ties by slot) copied
    expect_identical(pop1[base + 1:2], pop0[base + 1:2])
  }
})

# ---- readSBML ----------------------------------------------------------------

# An SBML Level 3 Version 2 model in a compartment `cell` of size 1
# (helper-lassie.R's sbml_model()), `extra` XML (rules, initial
# assignments) before the reactions.
mut_sbml <- function(species, params, reactions, extra = character()) {
  sbml_model(1, species, params, reactions, extra)
}
mci <- function(x) paste0("<ci>", x, "</ci>")
mcn <- function(x) paste0("<cn>", x, "</cn>")
map <- function(op, ...) paste0("<apply><", op, "/>", ..., "</apply>")
mmath <- function(x) paste0('<math xmlns="http://www.w3.org/1998/Math/MathML">', x, "</math>")

test_that("and, or and xor of one argument are Boolean values in a law", {
  # kills m0731.  SBML: and(x) is true iff x is (non-zero): 1, not x.
  skip_if_not(sbmlAvailable(), "built without libSBML")
  laws <- list(a = map("and", mci("A")), o = map("or", mci("A")), x = map("xor", mci("A")),
               a2 = map("and", mci("A"), map("gt", mci("A"), mcn(0.1))))
  rx <- lapply(seq_along(laws), function(i) list(pr = paste0("P", i), mod = "A",
                                                 law = map("times", mci("k"), laws[[i]])))
  names(rx) <- names(laws)
  m <- readSBML(mut_sbml(c(A = 1, P1 = 0, P2 = 0, P3 = 0, P4 = 0), c(k = 2), rx))
  expect_true(all(m$laws$start >= 0))
  for (A in c(0.3, 0, 4)) {
    f <- sysbioGPU:::lassie_rhs(m, c(A, 0, 0, 0, 0))
    on <- as.double(A != 0)
    expect_equal(f[-1], 2 * c(on, on, on, as.double(A != 0 && A > 0.1)), info = A)
  }
})

test_that("a law nested 64 levels deep runs; a deeper one is refused by name", {
  # kills m0719 (the stack depth counted unary operators as binary ones).
  skip_if_not(sbmlAvailable(), "built without libSBML")
  nest <- function(k) {   # exp(A) + (exp(A) + ( ... + A)): k values on the stack
    e <- mci("A")
    for (i in seq_len(k - 1)) e <- map("plus", map("exp", mci("A")), e)
    e
  }
  m <- readSBML(mut_sbml(c(A = 0.01, B = 0), c(k = 1), list(r = list(pr = "B", mod = "A", law = nest(64)))))
  expect_equal(sysbioGPU:::lassie_rhs(m, c(0.01, 0)), c(0, 63 * exp(0.01) + 0.01), tolerance = 1e-14)
  expect_error(readSBML(mut_sbml(c(A = 0.01, B = 0), c(k = 1), list(r = list(pr = "B", mod = "A", law = nest(65))))),
               "r: .*a law nested more deeply than 64 levels", class = "sysbioGPU_sbml_unsupported")
})

test_that("a rate constant whose parameter is NaN is refused by name", {
  # k = 0/0 by an initial assignment: NaN is a value of k (a constant the
  # output may ask for), and the reaction whose rate constant it makes is
  # refused.
  skip_if_not(sbmlAvailable(), "built without libSBML")
  ia <- paste0('<listOfInitialAssignments><initialAssignment symbol="k">',
               mmath(map("divide", mcn(0), mcn(0))), "</initialAssignment></listOfInitialAssignments>")
  f <- mut_sbml(c(A = 1, B = 0), c(k = 1), list(r = list(re = "A", pr = "B", law = map("times", mci("k"), mci("A")))),
                extra = ia)
  expect_error(readSBML(f), "r: .*a rate constant evaluates to NaN", class = "sysbioGPU_sbml_unsupported")
})

test_that("a rate constant that is not finite is refused with its value", {
  # kills m1572.  k = 1/0 by an initial assignment.
  skip_if_not(sbmlAvailable(), "built without libSBML")
  ia <- paste0('<listOfInitialAssignments><initialAssignment symbol="k">',
               mmath(map("divide", mcn(1), mcn(0))), "</initialAssignment></listOfInitialAssignments>")
  f <- mut_sbml(c(A = 1, B = 0), c(k = 1), list(r = list(re = "A", pr = "B", law = map("times", mci("k"), mci("A")))),
                extra = ia)
  expect_error(readSBML(f), "r: .*a rate constant evaluates to Inf", class = "sysbioGPU_sbml_unsupported")
})

test_that("a reactant that a time-varying assignment rule sets is refused, naming the species", {
  # kills m1218.  C = 2 A is no state; a reaction may not consume it.
  skip_if_not(sbmlAvailable(), "built without libSBML")
  rl <- paste0('<listOfRules><assignmentRule variable="C">', mmath(map("times", mcn(2), mci("A"))),
               "</assignmentRule></listOfRules>")
  f <- mut_sbml(c(A = 1, B = 0, C = 0), c(k = 1),
                list(r = list(re = "C", pr = "B", law = map("times", mci("k"), mci("C")))), extra = rl)
  expect_error(readSBML(f), "r: .*species C is set by an assignment rule", class = "sysbioGPU_sbml_unsupported")
})

test_that("MathML minus, divide and power with the wrong number of operands are refused", {
  # kills m14504 (a one-operand divide or power read as a negation).
  skip_if_not(sbmlAvailable(), "built without libSBML")
  one <- function(law) readSBML(mut_sbml(c(A = 1, B = 0), c(k = 1), list(r = list(re = "A", pr = "B", law = law))))
  expect_error(one(map("divide", mci("A"))), "a binary operator without two operands",
               class = "sysbioGPU_sbml_unsupported")
  expect_error(one(map("power", mci("A"))), "a binary operator without two operands",
               class = "sysbioGPU_sbml_unsupported")
  expect_error(one(map("minus", mci("A"), mci("B"), mci("k"))), "minus with more than two operands",
               class = "sysbioGPU_sbml_unsupported")
  # unary minus is negation: k * -(-A) = k A, mass action
  m <- one(map("times", mci("k"), map("minus", map("minus", mci("A")))))
  expect_equal(sysbioGPU:::lassie_rhs(m, c(2, 0)), c(-2, 2))
})

# ---- readPBN() and print() ---------------------------------------------------

test_that("print() shows a node's single function without a probability", {
  # m2199: one function a node, no "(1)" after it
  f <- tempfile(fileext = ".bnet")
  on.exit(unlink(f))
  writeLines(c("targets, factors", "A, B", "B, !A"), f)
  out <- utils::capture.output(print(readPBN(f)))
  expect_identical(out, c("<pbn> 2 node(s), 2 function(s)", "  A = B", "  B = !A"))
})

test_that("negations and brackets side by side are no nesting; 65 levels of either are", {
  # m2234: the depth comes back down after each '!' and each '(' (64
  # levels allowed)
  f <- tempfile(fileext = ".bnet")
  on.exit(unlink(f))
  rd <- function(rule) {
    writeLines(c("targets, factors", "A, B", paste0("B, ", rule)), f)
    readPBN(f)
  }
  expect_s3_class(rd(paste(rep("!A", 70), collapse = " & ")), "pbn")
  expect_s3_class(rd(paste(rep("(A)", 70), collapse = " | ")), "pbn")
  expect_s3_class(rd(paste0(strrep("!", 64), "A")), "pbn")
  expect_error(rd(paste0(strrep("!", 65), "A")), class = "sysbioGPU_error_input", regexp = "deeper than 64 levels")
  expect_error(rd(paste0(strrep("(", 65), "A", strrep(")", 65))), class = "sysbioGPU_error_input",
               regexp = "deeper than 64 levels")
})

test_that("libSBML's parameters reach R as three named fields", {
  # m16952: the C reader's list of the model's parameters (id, value,
  # constant) and nothing else, as the file gives them
  skip_if_not(sbmlAvailable(), "built without libSBML")
  f <- mut_sbml(c(A = 1, B = 0), c(k = 2, k2 = 0.5), list(r = list(re = "A", pr = "B", law = map("times", mci("k"), mci("A")))))
  d <- .Call(sysbioGPU:::ffi_lassie_read_sbml, normalizePath(f))
  expect_identical(names(d$parameters), c("id", "value", "constant"))
  expect_identical(d$parameters$id, c("k", "k2"))
  expect_identical(d$parameters$value, c(2, 0.5))
})
