# grnSimulate() and grnEvolve(): the model against plain R and BoolNet, the
# search against exhaustive optima and planted problems, reproducibility,
# bad input, and CPU/GPU parity.

# ---- grnSimulate ------------------------------------------------------------

test_that("grnSimulate equals a plain R implementation of the rules", {
  set.seed(11)
  for (n in c(1, 3, 7, 32, 33, 70)) {
    for (rep in 1:3) {
      net <- grn_random_network(n, maxIn = min(n, 6), pLink = 0.25)
      rules <- sample(c("most", "abs", "jact", "jrep"), n, replace = TRUE)
      from <- grn_random_state(n)
      steps <- sample(1:6, 1)
      got <- grnSimulate(net, rules, from, steps)
      want <- grn_oracle_simulate(net, rules, from, steps)
      expect_equal(unname(got), want, info = sprintf("n = %d, rep %d", n, rep))
      expect_identical(colnames(got), rownames(net))
    }
  }
})

test_that("each rule does what the paper says on hand-made cases", {
  # gene c with sources a (activator) and b (repressor), both on
  net <- matrix(0, 3, 3, dimnames = list(c("a", "b", "c"), c("a", "b", "c")))
  net["c", "a"] <- 1
  net["c", "b"] <- -1
  s <- c(a = TRUE, b = TRUE, c = TRUE)
  rules <- function(r) c(a = "most", b = "most", c = r)
  expect_true(grnSimulate(net, rules("most"), s, 1)[2, "c"])   # tie keeps on
  expect_false(grnSimulate(net, rules("abs"), s, 1)[2, "c"])   # a repressor on
  expect_true(grnSimulate(net, rules("jact"), s, 1)[2, "c"])   # keeps
  expect_true(grnSimulate(net, rules("jrep"), s, 1)[2, "c"])   # one repressor only
  s0 <- c(a = TRUE, b = FALSE, c = FALSE)
  expect_true(grnSimulate(net, rules("most"), s0, 1)[2, "c"])  # 1 > 0
  expect_false(grnSimulate(net, rules("jact"), s0, 1)[2, "c"]) # needs two
  # inactive sources do not count: repressor off
  net2 <- net
  net2["c", "c"] <- -1
  expect_false(grnSimulate(net2, rules("jrep"), s, 1)[2, "c"]) # two repressors
  expect_true(grnSimulate(net2, rules("jrep"), c(a = TRUE, b = FALSE, c = TRUE), 1)[2, "c"])
})

test_that("grnSimulate agrees with BoolNet's synchronous simulation", {
  skip_if_not_installed("BoolNet")
  set.seed(5)
  for (rep in 1:6) {
    n <- sample(4:12, 1)
    net <- grn_random_network(n, maxIn = 4, pLink = 0.3)
    rules <- sample(c("most", "abs", "jact", "jrep"), n, replace = TRUE)
    genes <- rownames(net)
    # each gene's rule as a truth table over its sources and itself
    interactions <- lapply(seq_len(n), function(i) {
      inp <- sort(unique(c(which(net[i, ] != 0), i)))
      k <- length(inp)
      # BoolNet's truth tables take the first input as the most significant bit
      grid <- as.matrix(expand.grid(rep(list(c(FALSE, TRUE)), k)))[, k:1, drop = FALSE]
      func <- apply(grid, 1, function(v) {
        s <- rep(FALSE, n)
        s[inp] <- v
        as.integer(grn_oracle_step(net, rules, s)[i])
      })
      list(input = inp, func = func, expression = "")
    })
    names(interactions) <- genes
    bn <- structure(list(interactions = interactions, genes = genes,
                         fixed = stats::setNames(rep(-1L, n), genes)),
                    class = "BooleanNetwork")
    from <- grn_random_state(n)
    s <- as.integer(from)
    for (t in 1:5) s <- BoolNet::stateTransition(bn, s, type = "synchronous")
    got <- grnSimulate(net, rules, from, 5)
    expect_equal(as.integer(got[6, ]), as.integer(s), info = paste("rep", rep))
  }
})

# ---- fitness ----------------------------------------------------------------

test_that("the engine's dn and dl equal plain R counts on random networks", {
  set.seed(3)
  for (n in c(4, 31, 45)) {
    net <- grn_random_network(n, maxIn = 5)
    from <- grn_random_state(n)
    to <- grn_random_state(n)
    count <- 20
    links <- array(sample(c(-1L, 0L, 1L), n * n * count, replace = TRUE, prob = c(0.1, 0.8, 0.1)),
                   c(n, n, count))
    codes <- matrix(sample(0:3, n * count, replace = TRUE), n, count)
    ev <- sysbioGPU:::grn_evaluate(net, from, to, 5, links, codes, threads = 2)
    for (k in seq_len(count)) {
      rules <- c("most", "abs", "jact", "jrep")[codes[, k] + 1]
      tr <- grn_oracle_simulate(links[, , k], rules, unname(from), 5)
      expect_equal(ev$dn[k], sum(tr[6, ] != to))
      expect_equal(ev$dl[k], sum(links[, , k] != net))
    }
  }
})

test_that("every CPU evaluation path gives the same dn and dl", {
  # 1 plain C, 2 popcnt, 3 AVX2, 4 AVX-512 (a path the CPU lacks falls back
  # to the one below it); dense and sparse networks, counts that leave
  # remainders after the vectorised code's groups of individuals, and sizes
  # around the 16- and 32-gene boundaries.
  set.seed(31)
  for (n in c(1, 3, 16, 17, 31, 32, 45)) {
    net <- grn_random_network(n, maxIn = 7)
    from <- grn_random_state(n)
    to <- grn_random_state(n)
    count <- 263
    dens <- stats::runif(count, 0.02, 0.6)
    links <- array(0L, c(n, n, count))
    for (k in seq_len(count)) {
      links[, , k] <- sample(c(-1L, 0L, 1L), n * n, replace = TRUE,
                             prob = c(dens[k] / 2, 1 - dens[k], dens[k] / 2))
    }
    codes <- matrix(sample(0:3, n * count, replace = TRUE), n, count)
    ref <- sysbioGPU:::grn_evaluate(net, from, to, 5, links, codes, threads = 1, path = 1)
    expect_equal(ref$path, 1L)
    for (path in 2:4) {
      ev <- sysbioGPU:::grn_evaluate(net, from, to, 5, links, codes, threads = 2, path = path)
      expect_equal(ev$dn, ref$dn, info = paste("n", n, "path", ev$path))
      expect_equal(ev$dl, ref$dl, info = paste("n", n, "path", ev$path))
      if (n > 32) expect_lte(ev$path, 2L)
    }
    # the plain path itself against the R oracle, on a few individuals
    for (k in c(1, 2, count)) {
      rules <- c("most", "abs", "jact", "jrep")[codes[, k] + 1]
      tr <- grn_oracle_simulate(matrix(links[, , k], n, n), rules, unname(from), 5)
      expect_equal(ref$dn[k], sum(tr[6, ] != to))
    }
  }
})

# ---- grnEvolve: optimum, planted problems -----------------------------------

test_that("with 3 genes grnEvolve reaches the exhaustive optimum", {
  set.seed(21)
  genes <- c("g1", "g2", "g3")
  net <- matrix(c(0, 1, 0,
                  0, 0, -1,
                  1, 0, 1), 3, byrow = TRUE, dimnames = list(genes, genes))
  from <- c(g1 = TRUE, g2 = FALSE, g3 = FALSE)
  to <- c(g1 = FALSE, g2 = TRUE, g3 = TRUE)
  # all 3^9 networks x 4^3 rule vectors
  cells <- as.matrix(expand.grid(rep(list(-1:1), 9)))
  links <- array(t(cells), c(3, 3, nrow(cells)))
  best <- Inf
  for (r in 0:63) {
    codes <- matrix(c(r %% 4, (r %/% 4) %% 4, r %/% 16), 3, nrow(cells))
    ev <- sysbioGPU:::grn_evaluate(net, from, to, 5, links, codes, threads = 2)
    best <- min(best, grn_fitness(ev$dn, ev$dl, 3))
  }
  expect_gt(best, 0) # the goal cannot be reached without changing links
  fit <- grnEvolve(net, from, to, popSize = 256, islands = 2, pLink = 0.3, pRule = 0.3,
                   maxInDegree = 3, generations = 200, seed = 1, backend = "cpu",
                   threads = 2, verbose = FALSE)
  expect_equal(fit$fitness, best)
  expect_equal(fit$fitness, grn_fitness(fit$dn, fit$dl, 3))
  # the reported network really scores that
  tr <- grn_oracle_simulate(fit$network, fit$rules, from, 5)
  expect_equal(fit$dn, sum(tr[6, ] != to))
  expect_equal(fit$dl, sum(fit$network != net))
  expect_equal(nrow(fit$changes), fit$dl)
})

test_that("planted problems reach fitness 0", {
  set.seed(8)
  for (rep in 1:2) {
    n <- 7
    net <- grn_random_network(n, maxIn = 3, pLink = 0.3)
    rules <- sample(c("most", "abs", "jact", "jrep"), n, replace = TRUE)
    from <- grn_random_state(n)
    to <- grnSimulate(net, rules, from, 5)[6, ]
    fit <- grnEvolve(net, from, to, popSize = 512, islands = 4, pLink = 0.3, pRule = 0.3,
                     maxInDegree = 3, generations = 400, target = 0, seed = rep,
                     backend = "cpu", threads = 2, verbose = FALSE)
    expect_equal(fit$fitness, 0, info = paste("rep", rep))
    expect_equal(fit$stopReason, "target")
    expect_identical(fit$network, net)
    expect_equal(unname(fit$trajectory[6, ]), unname(to))
    expect_lt(fit$generations, 400)
    expect_equal(nrow(fit$history), fit$generations + 1)
  }
})

test_that("the mouse eye network is read and a short run improves on the start", {
  eye <- grnMouseEye()
  expect_equal(dim(eye$network), c(32L, 32L))
  expect_equal(sum(eye$network == 1), 75)
  expect_equal(sum(eye$network == -1), 16)
  expect_equal(max(rowSums(eye$network != 0)), 7)
  expect_equal(sum(eye$from), 21)
  expect_equal(sum(eye$to), 27)
  fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 256, islands = 4, generations = 60,
                   seed = 3, backend = "cpu", threads = 2, verbose = FALSE)
  h <- fit$history
  expect_true(all(diff(apply(h, 1, min)) <= 0)) # elitism: the best never gets worse
  expect_lt(min(h[nrow(h), ]), min(h[1, ]))
  expect_equal(fit$fitness, min(h[nrow(h), ]))
  expect_true(all(rowSums(fit$network != 0) <= 7))
  expect_s3_class(fit, "grnEvolve")
  expect_output(print(fit), "best fitness")
  expect_output(print(summary(fit)), "Rules of the best network")
  pdf(NULL)
  expect_invisible(plot(fit))
  dev.off()
})

test_that("the mouse eye optimum: a network with 6 changed links reaches E10.5", {
  # Found by inst/bench/grn-optimum.py, which also proves by SAT that no
  # network within 5 changes (any rules, any in-degree) reaches E10.5: the
  # optimum fitness is 0.1 * 6 / 32^2, the target of inst/bench/grn.R.
  eye <- grnMouseEye()
  net <- eye$network
  net["g4", "g7"] <- -1L
  net["g6", "g8"] <- -1L
  net["g11", "g2"] <- 1L
  net["g16", "g32"] <- -1L
  net["g17", "g11"] <- -1L
  net["g23", "g32"] <- -1L
  rules <- c("jact", "most", "most", "abs", "most", "abs", "most", "most", "jrep", "abs",
             "jact", "most", "jact", "most", "abs", "most", "most", "most", "most", "most",
             "abs", "jact", "most", "most", "jact", "jact", "abs", "jact", "abs", "abs",
             "most", "most")
  expect_equal(sum(net != eye$network), 6)
  expect_lte(max(rowSums(net != 0)), 7) # within grnEvolve's default maxInDegree
  tr <- grnSimulate(net, rules, eye$from, 5)
  expect_equal(unname(tr[6, ]), unname(eye$to))
  expect_equal(unname(grn_oracle_simulate(net, rules, unname(eye$from), 5)[6, ]), unname(eye$to))
  ev <- sysbioGPU:::grn_evaluate(eye$network, eye$from, eye$to, 5, array(net, c(32, 32, 1)),
                                 matrix(match(rules, c("most", "abs", "jact", "jrep")) - 1L))
  expect_equal(c(ev$dn, ev$dl), c(0L, 6L))
  # with the same rules, the reference network does not get there
  expect_gt(sum(grnSimulate(eye$network, rules, eye$from, 5)[6, ] != eye$to), 0)
})

test_that("roulette selection and master-slave runs work and keep the elite", {
  eye <- grnMouseEye()
  for (sel in c("roulette", "elitist")) {
    fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 128, islands = 1, generations = 40,
                     selection = sel, pLink = 0.05, pRule = 0.05, seed = 9, backend = "cpu",
                     threads = 1, verbose = FALSE)
    expect_true(all(diff(fit$history[, 1]) <= 0), info = sel)
    expect_equal(ncol(fit$history), 1)
  }
})

test_that("only allowed rules are used", {
  eye <- grnMouseEye()
  fit <- grnEvolve(eye$network, eye$from, eye$to, rules = c("most", "jact"), popSize = 64,
                   islands = 2, generations = 20, pRule = 0.5, seed = 2, backend = "cpu",
                   threads = 1, verbose = FALSE)
  expect_true(all(fit$rules %in% c("most", "jact")))
})

# ---- reproducibility --------------------------------------------------------

test_that("same seed same run, whatever the threads; another seed differs", {
  eye <- grnMouseEye()
  run <- function(seed, threads, sel = "elitist")
    grnEvolve(eye$network, eye$from, eye$to, popSize = 128, islands = 4, generations = 30,
              selection = sel, pLink = 0.1, pRule = 0.1, seed = seed, backend = "cpu",
              threads = threads, verbose = FALSE)
  for (sel in c("elitist", "roulette")) {
    a <- run(5, 1, sel)
    b <- run(5, 2, sel)
    expect_identical(a$history, b$history)
    expect_identical(a$network, b$network)
    expect_identical(a$rules, b$rules)
    c <- run(6, 2, sel)
    expect_false(identical(a$history, c$history))
  }
  set.seed(1); x <- grnEvolve(eye$network, eye$from, eye$to, popSize = 64, generations = 5,
                              backend = "cpu", verbose = FALSE)
  set.seed(1); y <- grnEvolve(eye$network, eye$from, eye$to, popSize = 64, generations = 5,
                              backend = "cpu", verbose = FALSE)
  expect_identical(x$seed, y$seed)
  expect_identical(x$history, y$history)
})

test_that("an edge data.frame gives the same run as the matrix", {
  eye <- grnMouseEye()
  idx <- which(eye$network != 0, arr.ind = TRUE)
  genes <- rownames(eye$network)
  edges <- data.frame(source = genes[idx[, 2]], target = genes[idx[, 1]],
                      sign = eye$network[idx])
  # the edge list orders genes by first appearance: reorder to compare
  a <- grnSimulate(edges, "most", eye$from)
  b <- grnSimulate(eye$network, "most", eye$from)
  expect_equal(a[, genes], b)
})

# ---- bad input --------------------------------------------------------------

test_that("bad input gives clear errors naming the argument", {
  eye <- grnMouseEye()
  net <- eye$network
  f <- eye$from
  g <- eye$to
  ev <- function(..., popSize = 64) grnEvolve(net, f, g, popSize = popSize, generations = 1,
                                              backend = "cpu", verbose = FALSE, ...)
  cls <- "sysbioGPU_error_input"
  expect_error(grnEvolve(net[, -1], f, g), "square", class = cls)
  bad <- net
  bad[1, 2] <- 2
  expect_error(grnEvolve(bad, f, g), "only -1, 0 and 1", class = cls)
  bad[1, 2] <- NA
  expect_error(grnEvolve(bad, f, g), "only -1, 0 and 1", class = cls)
  f2 <- f
  names(f2)[1] <- "nope"
  expect_error(grnEvolve(net, f2, g), "gene names of `from`", class = cls)
  expect_error(grnEvolve(net, f, g[-1]), "gene names of `to`", class = cls)
  expect_error(ev(popSize = 100, islands = 3), "divisible by `islands`", class = cls)
  expect_error(ev(popSize = 64, islands = 4, migrants = 16), "`migrants`", class = cls)
  expect_error(ev(pLink = 1.5), "`pLink` must be a probability", class = cls)
  expect_error(ev(pRule = -0.1), "`pRule` must be a probability", class = cls)
  expect_error(ev(lambda = 2), "`lambda` must be a probability", class = cls)
  expect_error(grnEvolve(net, f, g, steps = 0), "`steps`", class = cls)
  expect_error(grnSimulate(net, "most", f, steps = 0), "`steps`", class = cls)
  expect_error(ev(maxInDegree = 3), "more than `maxInDegree`", class = cls)
  expect_error(ev(rules = "any"), "`rules`", class = cls)
  expect_error(ev(popSize = 10, islands = 2), "even number", class = cls)
  expect_error(ev(target = -1), "`target`", class = cls)
  expect_error(ev(timeLimit = 0), "`timeLimit`", class = cls)
  expect_error(grnSimulate(net, c("most", "abs"), f), "`rules`", class = cls)
})

# ---- long runs ---------------------------------------------------------------

test_that("timeLimit stops a run", {
  eye <- grnMouseEye()
  fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 1024, generations = 1e6,
                   timeLimit = 0.3, seed = 1, backend = "cpu", threads = 2, verbose = FALSE)
  expect_equal(fit$stopReason, "timeLimit")
  expect_lt(fit$generations, 1e6)
  expect_lt(fit$seconds, 10)
})

test_that("Ctrl-C stops a long CPU run", {
  skip_on_os("windows")
  eye <- grnMouseEye()
  interrupt_after(0.5)
  expect_error(grnEvolve(eye$network, eye$from, eye$to, popSize = 1024, generations = 1e6,
                         seed = 1, backend = "cpu", threads = 2, verbose = FALSE),
               "interrupted", class = "sysbioGPU_error_interrupted")
})

# ---- CPU/GPU parity ----------------------------------------------------------

test_that("CPU and GPU give identical runs for the same seed", {
  skip_if_no_gpu()
  eye <- grnMouseEye()
  set.seed(4)
  big <- grn_random_network(40, maxIn = 5)
  cases <- list(
    list(eye$network, eye$from, eye$to, selection = "elitist", islands = 4),
    list(eye$network, eye$from, eye$to, selection = "roulette", islands = 4),
    list(eye$network, eye$from, eye$to, selection = "elitist", islands = 1),
    list(big, grn_random_state(40), grn_random_state(40), selection = "roulette", islands = 2))
  for (cs in cases) {
    run <- function(backend)
      grnEvolve(cs[[1]], cs[[2]], cs[[3]], popSize = 512, islands = cs$islands,
                selection = cs$selection, generations = 60, pLink = 0.05, pRule = 0.05,
                maxInDegree = 7, seed = 17, backend = backend, verbose = FALSE)
    cpu <- run("cpu")
    gpu <- run("gpu")
    expect_equal(gpu$backend, "gpu")
    expect_identical(gpu$history, cpu$history, info = cs$selection)
    expect_identical(gpu$network, cpu$network)
    expect_identical(gpu$rules, cpu$rules)
    expect_identical(gpu$generations, cpu$generations)
  }
  # larger islands: 3,000 and 6,000 individuals (sorted by a block of 256
  # or 512 threads; 256 to 1,024 above) and 20,000 (by the device-wide sort)
  for (size in c(3000, 6000, 20000)) {
    run <- function(backend)
      grnEvolve(eye$network, eye$from, eye$to, popSize = 2 * size, islands = 2, generations = 12,
                pLink = 0.05, pRule = 0.05, migrationInterval = 3, seed = 5, backend = backend, verbose = FALSE)
    cpu <- run("cpu")
    gpu <- run("gpu")
    expect_identical(gpu$history, cpu$history, info = size)
    expect_identical(gpu$network, cpu$network, info = size)
    expect_identical(gpu$rules, cpu$rules, info = size)
  }
})

test_that("a GPU run stops at the same generation as the CPU on target", {
  skip_if_no_gpu()
  set.seed(8)
  n <- 7
  net <- grn_random_network(n, maxIn = 3, pLink = 0.3)
  rules <- sample(c("most", "abs", "jact", "jrep"), n, replace = TRUE)
  from <- grn_random_state(n)
  to <- grnSimulate(net, rules, from, 5)[6, ]
  run <- function(backend)
    grnEvolve(net, from, to, popSize = 512, islands = 4, pLink = 0.3, pRule = 0.3,
              maxInDegree = 3, generations = 400, target = 0, seed = 1, backend = backend,
              verbose = FALSE)
  cpu <- run("cpu")
  gpu <- run("gpu")
  expect_equal(gpu$stopReason, "target")
  expect_identical(gpu$generations, cpu$generations)
  expect_identical(gpu$history, cpu$history)
  expect_identical(gpu$network, cpu$network)
  # islands of 256, sorted a block each: that sort ends the generation and
  # takes the stop test itself (its last block); on two devices (or one
  # GPU's two shares) each block of islands has its own stop flag
  devs <- list(0L, gpu_pair())
  for (sel in c("elitist", "roulette")) {
    run <- function(backend, device = 0L)
      grnEvolve(net, from, to, popSize = 1536, islands = 6, pLink = 0.3, pRule = 0.3,
                maxInDegree = 3, generations = 400, target = 0, seed = 1, selection = sel,
                backend = backend, device = device, verbose = FALSE)
    cpu <- run("cpu")
    expect_equal(cpu$stopReason, "target")
    expect_gt(cpu$generations, 10)
    for (d in devs) {
      gpu <- on_devices(run("gpu", d))
      info <- paste(sel, paste(d, collapse = ","))
      expect_equal(gpu$stopReason, "target", info = info)
      expect_identical(gpu$generations, cpu$generations, info = info)
      expect_identical(gpu$history, cpu$history, info = info)
      expect_identical(gpu$network, cpu$network, info = info)
      expect_identical(gpu$rules, cpu$rules, info = info)
    }
  }
})

test_that("GPU and CPU evaluate a population identically", {
  skip_if_no_gpu()
  eye <- grnMouseEye()
  cpu <- sysbioGPU:::grn_bench_eval(eye$network, eye$from, eye$to, pop = 5000, reps = 1,
                                    backend = "cpu")
  gpu <- sysbioGPU:::grn_bench_eval(eye$network, eye$from, eye$to, pop = 5000, reps = 1,
                                    backend = "gpu")
  expect_identical(gpu$checksum, cpu$checksum)
})

test_that("Ctrl-C stops a long GPU run", {
  skip_on_os("windows")
  skip_if_no_gpu()
  eye <- grnMouseEye()
  interrupt_after(1)
  expect_error(grnEvolve(eye$network, eye$from, eye$to, popSize = 4096, generations = 1e6,
                         seed = 1, backend = "gpu", verbose = FALSE),
               "interrupted", class = "sysbioGPU_error_interrupted")
})

# ---- several blocks of islands: devices, R workers (BPPARAM) ----------------

# The fields a split run must reproduce exactly.
grn_run_fields <- function(f) {
  f[c("network", "rules", "history", "generations", "fitness", "dn", "dl", "stopReason")]
}

grn_par_case <- function(islands = 6, popSize = 96, selection = "elitist", target = NULL,
                         migrationInterval = 3, generations = 14, seed = 5, ...) {
  eye <- grnMouseEye()
  grnEvolve(eye$network, eye$from, eye$to, popSize = popSize, islands = islands,
            migrationInterval = migrationInterval, migrants = 2, selection = selection,
            pLink = 0.05, pRule = 0.05, generations = generations, target = target,
            seed = seed, verbose = FALSE, ...)
}

# A target that the single run reaches strictly inside, at generation > 0.
grn_mid_target <- function(fit) {
  h <- fit$history
  min(h[nrow(h) %/% 2 + 1, ])
}

test_that("blocks of islands in one process give the single run (CPU)", {
  for (sel in c("elitist", "roulette")) {
    one <- grn_par_case(selection = sel, backend = "cpu", threads = 1)
    old <- options(sysbioGPU.grnBlocks = 4L)
    four <- grn_par_case(selection = sel, backend = "cpu", threads = 2)
    options(sysbioGPU.grnBlocks = 6L)
    six <- grn_par_case(selection = sel, backend = "cpu", threads = 1, migrationInterval = 1)
    options(old)
    six1 <- grn_par_case(selection = sel, backend = "cpu", threads = 1, migrationInterval = 1)
    expect_identical(grn_run_fields(four), grn_run_fields(one), info = sel)
    expect_identical(grn_run_fields(six), grn_run_fields(six1), info = sel)
  }
  # the migrants do cross blocks: without migration the history differs
  one <- grn_par_case(backend = "cpu", threads = 1)
  lone <- grn_par_case(backend = "cpu", threads = 1, migrationInterval = 1e6)
  expect_false(identical(one$history, lone$history))
})

test_that("R workers (BPPARAM) give the single-process run (CPU)", {
  skip_if_not_installed("BiocParallel")
  skip_on_os("windows") # MulticoreParam forks
  ser <- BiocParallel::SerialParam()
  mc3 <- BiocParallel::MulticoreParam(3)
  cases <- list(
    list(islands = 6, selection = "elitist"),
    list(islands = 6, selection = "roulette"),
    list(islands = 7, popSize = 112, selection = "elitist"),      # 7 islands on 3 workers
    list(islands = 2, popSize = 32, selection = "elitist"),       # more workers than islands
    list(islands = 6, selection = "elitist", migrationInterval = 1),
    list(islands = 1, popSize = 32, selection = "roulette"))
  for (cs in cases) {
    one <- do.call(grn_par_case, c(cs, backend = "cpu", threads = 1))
    for (bp in list(ser, mc3)) {
      par <- do.call(grn_par_case, c(cs, backend = "cpu", BPPARAM = bp))
      expect_identical(grn_run_fields(par), grn_run_fields(one),
                       info = paste(class(bp)[[1]], cs$islands, cs$selection))
    }
  }
  # a run that stops on the target inside a round (rounds end before each
  # migration generation: 2, 5, 8, ...)
  for (sel in c("elitist", "roulette")) {
    free <- grn_par_case(selection = sel, backend = "cpu", threads = 1, generations = 30)
    tgt <- grn_mid_target(free)
    one <- grn_par_case(selection = sel, backend = "cpu", threads = 1, generations = 30, target = tgt)
    expect_equal(one$stopReason, "target")
    expect_lt(one$generations, 30)
    par <- grn_par_case(selection = sel, backend = "cpu", generations = 30, target = tgt, BPPARAM = mc3)
    expect_identical(grn_run_fields(par), grn_run_fields(one), info = sel)
    old <- options(sysbioGPU.grnBlocks = 3L)
    blk <- grn_par_case(selection = sel, backend = "cpu", threads = 1, generations = 30, target = tgt)
    options(old)
    expect_identical(grn_run_fields(blk), grn_run_fields(one), info = sel)
  }
  expect_error(grn_par_case(backend = "cpu", BPPARAM = 3), "BPPARAM", class = "sysbioGPU_error_input")
})

test_that("SnowParam workers give the single-process run (CPU)", {
  skip_if_not_installed("BiocParallel")
  snow <- BiocParallel::SnowParam(2)
  BiocParallel::bpstart(snow)
  on.exit(BiocParallel::bpstop(snow), add = TRUE)
  one <- grn_par_case(islands = 5, popSize = 80, backend = "cpu", threads = 1)
  two <- grn_par_case(islands = 5, popSize = 80, backend = "cpu", threads = 1, BPPARAM = snow)
  expect_identical(grn_run_fields(two), grn_run_fields(one))
})

test_that("several GPUs and GPU workers give the single-device and CPU runs", {
  skip_if_no_gpu()
  n_gpu <- nrow(gpuInfo())
  for (sel in c("elitist", "roulette")) {
    cpu <- grn_par_case(selection = sel, backend = "cpu", threads = 1, generations = 40)
    g1 <- grn_par_case(selection = sel, backend = "gpu", device = 0L, generations = 40)
    expect_identical(grn_run_fields(g1), grn_run_fields(cpu), info = sel)
    # stop on the target in the middle
    tgt <- grn_mid_target(cpu)
    cpu_t <- grn_par_case(selection = sel, backend = "cpu", threads = 1, generations = 40, target = tgt)
    # the several-GPU code, on one GPU as well: three blocks of islands
    # (GPU 0 three times where there is one), each with its own stream and
    # stop flag, migrants through host memory
    three <- c(gpu_pair(), 0L)
    b3 <- on_devices(grn_par_case(selection = sel, backend = "gpu", device = three, generations = 40))
    b3t <- on_devices(grn_par_case(selection = sel, backend = "gpu", device = three, generations = 40,
                                   target = tgt))
    b7 <- on_devices(grn_par_case(islands = 7, popSize = 112, selection = sel, backend = "gpu", device = three,
                                  migrationInterval = 1, generations = 20))
    expect_identical(b3$devices, three)
    expect_identical(grn_run_fields(b3), grn_run_fields(cpu), info = sel)
    expect_identical(grn_run_fields(b3t), grn_run_fields(cpu_t), info = sel)
    expect_equal(cpu_t$stopReason, "target")
    cpu7 <- grn_par_case(islands = 7, popSize = 112, selection = sel, backend = "cpu", threads = 1,
                         migrationInterval = 1, generations = 20)
    expect_identical(grn_run_fields(b7), grn_run_fields(cpu7), info = sel)
    g2 <- on_devices(grn_par_case(selection = sel, backend = "gpu", device = gpu_pair(), generations = 40))
    expect_identical(grn_run_fields(g2), grn_run_fields(cpu), info = sel)
    expect_identical(g2$devices, gpu_pair())
    g2t <- on_devices(grn_par_case(selection = sel, backend = "gpu", device = gpu_pair(), generations = 40,
                                   target = tgt))
    expect_identical(grn_run_fields(g2t), grn_run_fields(cpu_t), info = sel)
    g27 <- on_devices(grn_par_case(islands = 7, popSize = 112, selection = sel, backend = "gpu",
                                   device = gpu_pair(), migrationInterval = 1, generations = 20))
    expect_identical(grn_run_fields(g27), grn_run_fields(cpu7), info = sel)
    if (n_gpu >= 2L) {
      gall <- grn_par_case(selection = sel, backend = "gpu", device = "all", generations = 40)
      expect_identical(grn_run_fields(gall), grn_run_fields(cpu), info = sel)
    }
  }
  skip_if_not_installed("BiocParallel")
  snow <- BiocParallel::SnowParam(2)
  BiocParallel::bpstart(snow)
  on.exit(BiocParallel::bpstop(snow), add = TRUE)
  cpu <- grn_par_case(backend = "cpu", threads = 1, generations = 30)
  tgt <- grn_mid_target(cpu)
  cpu_t <- grn_par_case(backend = "cpu", threads = 1, generations = 30, target = tgt)
  w <- grn_par_case(backend = "gpu", device = "all", generations = 30, BPPARAM = snow)
  expect_identical(grn_run_fields(w), grn_run_fields(cpu))
  wt <- grn_par_case(backend = "gpu", device = "all", generations = 30, target = tgt, BPPARAM = snow)
  expect_identical(grn_run_fields(wt), grn_run_fields(cpu_t))
  expect_error(grn_par_case(backend = "gpu", BPPARAM = BiocParallel::MulticoreParam(2)),
               "SnowParam", class = "sysbioGPU_error_input")
})

test_that("defaults fit small networks; bad choices and gene names are classed", {
  net <- matrix(0L, 5, 5, dimnames = list(paste0("h", 1:5), paste0("h", 1:5)))
  net[2, 1] <- 1L; net[3, 2] <- 1L; net[4, 3] <- -1L; net[5, 4] <- 1L; net[1, 5] <- 1L
  f <- stats::setNames(c(TRUE, FALSE, TRUE, FALSE, TRUE), rownames(net))
  g <- stats::setNames(c(FALSE, TRUE, TRUE, FALSE, FALSE), rownames(net))
  ev <- function(...) grnEvolve(net, f, g, popSize = 16, islands = 2, generations = 3, seed = 1,
                                backend = "cpu", threads = 1, verbose = FALSE, ...)
  r <- ev()
  expect_s3_class(r, "grnEvolve")
  expect_identical(r$settings$maxInDegree, 5)
  # the default is 7 where there are 7 genes or more, and an explicit value holds
  expect_identical(ev(maxInDegree = 2)$settings$maxInDegree, 2)
  cls <- "sysbioGPU_error_input"
  for (s in list("nope", NA, 1, character(0), NULL)) {
    expect_error(ev(selection = s), "`selection` must be one of", class = cls)
  }
  expect_identical(ev(selection = "roulette")$settings$selection, "roulette")
  bad <- net
  dimnames(bad) <- list(c("h1", "", "h3", "h4", "h5"), c("h1", "", "h3", "h4", "h5"))
  expect_error(grnEvolve(bad, stats::setNames(f, rownames(bad)), stats::setNames(g, rownames(bad))),
               "must not be NA or empty \\(gene 2\\)", class = cls)
  expect_error(grnEvolve(data.frame(source = c("a", ""), target = c("b", "a"), sign = c(1, -1)),
                         c(a = TRUE, b = FALSE), c(a = FALSE, b = TRUE)),
               "not NA or empty", class = cls)
})

test_that("a huge generations cap cut short by timeLimit costs only what ran", {
  eye <- grnMouseEye()
  r <- grnEvolve(eye$network, eye$from, eye$to, popSize = 16, islands = 2, generations = 1e9,
                 timeLimit = 0.2, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  expect_identical(r$stopReason, "timeLimit")
  expect_lt(r$generations, 1e9)
  # the history holds the generations that ran, not the cap (it used to be
  # allocated as 1e9 + 1 rows per island up front: 16 GB)
  expect_equal(dim(r$history), c(r$generations + 1, 2))
  expect_false(anyNA(r$history))
  # a cap of 1e9 x 4 islands (32 GB by the cap, refused before) runs too
  r <- grnEvolve(eye$network, eye$from, eye$to, popSize = 32, islands = 4, generations = 1e9,
                 timeLimit = 0.2, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  expect_identical(r$stopReason, "timeLimit")
  expect_equal(dim(r$history), c(r$generations + 1, 4))
  expect_false(anyNA(r$history))
})

test_that("a cap too large for one history runs in rounds in this process: the same run", {
  eye <- grnMouseEye()
  ev <- function(...) grnEvolve(eye$network, eye$from, eye$to, popSize = 32, islands = 4,
                                migrationInterval = 3, seed = 5, backend = "cpu", threads = 1,
                                verbose = FALSE, ...)
  one <- ev(generations = 150)
  old <- options(sysbioGPU.grnHistoryRows = 10)
  on.exit(options(old))
  rounds <- ev(generations = 150)
  for (nm in c("network", "rules", "fitness", "history", "generations", "stopReason")) {
    expect_identical(rounds[[nm]], one[[nm]], info = nm)
  }
  # stopped by the target at the same generation
  tgt <- one$history[60, 1]
  a <- ev(generations = 150, target = tgt)
  options(old)
  b <- ev(generations = 150, target = tgt)
  expect_identical(a$generations, b$generations)
  expect_identical(a$network, b$network)
  expect_identical(a$history, b$history)
})
