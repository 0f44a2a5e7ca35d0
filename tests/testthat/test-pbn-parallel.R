# pbnSteadyState(BPPARAM =): the trajectories in blocks over R workers give
# the estimates of one process (same seed), whatever the back-end and the
# number of workers; the blocks' state round trip is exact.

pbn_par_run <- function(net, traj, ..., seed = 5, sets = c(Survival = TRUE)) {
  x <- pbnSteadyState(net, sets, p = 0.01, r = 0.01, seed = seed, trajectories = traj,
                      verbose = FALSE, ...)
  list(res = as.data.frame(unclass(x)[setdiff(names(x), "seconds")]), burnin = attr(x, "burnin"))
}

test_that("a block's exported state continues exactly as one engine advancing straight", {
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  keep <- rep(TRUE, length(net$nodes))
  flat <- sysbioGPU:::pbn_flatten(net, keep, 0.01, FALSE)
  sets_l <- sysbioGPU:::pbn_sets_list(list(c(Survival = TRUE), c(Apoptosis = TRUE)), flat$node_of_full, net$nodes)
  params <- list(seed = 7, chains = 10, r = 0.01, z = 1.96, epsilon = 1e-10, psi0 = 128, rhatMax = 1.01,
                 maxLen = 1e6, minSwitches = 20, small = TRUE, skip = TRUE, bits = FALSE, t = stats::qt(0.975, 9))
  blk <- function(range, state, steps, count = TRUE, small = 1) {
    params$small <- small == 1
    params <- c(params, list(range = as.double(range), steps = steps, count = count))
    run <- list(gpu = FALSE, threads = 1L, devices = 0L, verbose = FALSE)
    r <- .Call(sysbioGPU:::ffi_pbn_block, list(net = flat, sets = sets_l, state = state), params, run)
    expect_named(r, c("state", "sums"))
    r
  }
  # the run contract: a list element missing or of the wrong type is a
  # classed error that names it
  run <- list(gpu = FALSE, threads = 1L, devices = 0L, verbose = FALSE)
  call <- function(params, run) .Call(sysbioGPU:::ffi_pbn_block, list(net = flat, sets = sets_l, state = NULL),
                                      c(params, list(range = c(0, 10), steps = 10, count = TRUE)), run)
  expect_error(call(params[setdiff(names(params), "rhatMax")], run), "no element 'rhatMax'",
               class = "sysbioGPU_error_internal")
  expect_error(call(params, run[-3]), "no element 'devices'", class = "sysbioGPU_error_internal")
  expect_error(call(replace(params, "seed", list(7L)), run), "'seed' must be a double vector",
               class = "sysbioGPU_error_internal")
  expect_error(call(params, replace(run, "threads", list(NA_integer_))), "'threads' must be a non-missing integer",
               class = "sysbioGPU_error_internal")
  for (small in 0:1) {
    s <- function(r) matrix(readBin(r, "integer", n = length(r) %/% 4, size = 4), 2)
    w <- function(r) colSums(s(r) * c(1, 2^32)) # uint64 sums, exact below 2^53 here
    straight <- blk(c(0, 10), NULL, 300, small = small)
    a <- blk(c(0, 10), NULL, 100, small = small)
    b <- blk(c(0, 10), a[[1L]], 200, small = small)
    expect_identical(b[[1L]], straight[[1L]])
    # n1, n01, n10 add up over time (the sum of squares does not)
    cnt <- rep(c(TRUE, TRUE, TRUE, FALSE), 2)
    expect_identical((w(a[[2L]]) + w(b[[2L]]))[cnt], w(straight[[2L]])[cnt])
    expect_false(identical(a[[1L]], straight[[1L]]))
    # blocks [0, 3) and [3, 10): their states concatenate to the whole, their sums add up
    p1 <- blk(c(0, 3), NULL, 300, small = small)
    p2 <- blk(c(3, 10), NULL, 300, small = small)
    expect_identical(w(p1[[2L]]) + w(p2[[2L]]), w(straight[[2L]]))
    expect_identical(length(p1[[1L]]) + length(p2[[1L]]), length(straight[[1L]]))
    # the state is chain-major: the blocks' words are the whole's
    W8 <- 8 * ((flat$n + 63) %/% 64) # state bytes per chain
    expect_identical(c(p1[[1L]][seq_len(3 * W8)], p2[[1L]][seq_len(7 * W8)]), straight[[1L]][seq_len(10 * W8)])
  }
  expect_error(blk(c(0, 10), as.raw(1:3), 10), "internal error")
})

test_that("BPPARAM: SerialParam, MulticoreParam and SnowParam give the one-process estimates", {
  skip_if_not_installed("BiocParallel")
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  for (traj in c(7, 2)) { # 7: not divisible by 2 or 3 workers; 2: fewer chains than 3 workers
    one <- pbn_par_run(net, traj, backend = "cpu", threads = 1)
    expect_true(one$burnin > 128) # Gelman-Rubin doubled its window at least once
    expect_true(one$res$samples[[1L]] > (one$res$steps[[1L]] / traj - one$burnin) * traj - 1)
    expect_identical(pbn_par_run(net, traj, backend = "cpu", threads = 1,
                                 BPPARAM = BiocParallel::SerialParam()), one, info = traj)
    expect_identical(pbn_par_run(net, traj, backend = "cpu",
                                 BPPARAM = BiocParallel::MulticoreParam(3)), one, info = traj)
  }
  snow <- BiocParallel::SnowParam(2)
  BiocParallel::bpstart(snow)
  on.exit(BiocParallel::bpstop(snow))
  one <- pbn_par_run(net, 7, backend = "cpu", threads = 2, sets = "marginals")
  expect_identical(pbn_par_run(net, 7, backend = "cpu", threads = 1, sets = "marginals", BPPARAM = snow), one)
})

test_that("BPPARAM: an error in a worker is an R error naming what failed", {
  skip_if_not_installed("BiocParallel")
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  # a worker whose block fails (here: replaced by one that fails on its
  # second round, after the driver has buffers to free)
  ns <- asNamespace("sysbioGPU")
  orig <- get("pbn_block", ns)
  calls <- 0
  unlockBinding("pbn_block", ns)
  assign("pbn_block", function(...) {
    calls <<- calls + 1
    if (calls > 1) stop("block exploded") else orig(...)
  }, envir = ns)
  on.exit({ assign("pbn_block", orig, envir = ns); lockBinding("pbn_block", ns) })
  expect_error(pbn_par_run(net, 7, backend = "cpu", threads = 1, BPPARAM = BiocParallel::SerialParam()),
               "BPPARAM worker failed.*block exploded", class = "sysbioGPU_error_worker")
  expect_error(pbnSteadyState(net, c(Survival = TRUE), backend = "cpu", BPPARAM = 3, verbose = FALSE),
               class = "sysbioGPU_error_input")
})

test_that("BPPARAM with GPU workers (SnowParam): the estimates of one GPU and of the CPU", {
  skip_if_no_gpu()
  skip_if_not_installed("BiocParallel")
  net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
  ngpu <- nrow(gpuInfo())
  dev <- if (ngpu >= 2) c(0L, 1L) else 0L
  snow <- BiocParallel::SnowParam(2)
  BiocParallel::bpstart(snow)
  on.exit(BiocParallel::bpstop(snow))
  for (traj in c(4096, 4097)) {
    cpu <- pbn_par_run(net, traj, backend = "cpu", sets = c(Apoptosis = TRUE))
    gpu <- pbn_par_run(net, traj, backend = "gpu", device = 0, sets = c(Apoptosis = TRUE))
    expect_identical(gpu, cpu)
    expect_identical(pbn_par_run(net, traj, backend = "gpu", device = dev, sets = c(Apoptosis = TRUE),
                                 BPPARAM = snow), cpu, info = traj)
  }
  expect_error(pbnSteadyState(net, c(Survival = TRUE), backend = "gpu", verbose = FALSE,
                              BPPARAM = BiocParallel::MulticoreParam(2)),
               class = "sysbioGPU_error_input")
})
