# parCosnet(): hubs (rows of more than 1024 entries, summed with 256
# partials on both engines, a block each on the GPU) and the GPU path for
# networks larger than the device (streamed in parts from the host).

# A random graph plus `hubs` nodes joined to `hub_deg` random others each.
cosnet_hub_graph <- function(n, density, hubs, hub_deg, seed) {
  W <- cosnet_random_graph(n, density, seed)
  set.seed(seed + 1)
  for (h in seq_len(hubs)) {
    nb <- sample(setdiff(seq_len(n), h), hub_deg)
    x <- runif(hub_deg, 0.01, 1)
    W[h, nb] <- x
    W[nb, h] <- x
  }
  methods::as(W, "generalMatrix")
}

test_that("hubs: the 256-partial sums give the sequential dynamics' answer", {
  W <- cosnet_hub_graph(2500, 0.004, 3, 1500, 31)
  expect_true(Matrix::isSymmetric(W))
  expect_gt(max(diff(W@p)), 1024)
  y <- cosnet_random_labels(2500, 250, 900, 32)
  y[1:2] <- NA  # two hubs unlabelled, one labelled
  y[3] <- 1
  fit <- parCosnet(W, y, seed = 3, backend = "cpu", threads = 2, verbose = FALSE)
  ref <- cosnet_sequential(W, y, fit$classes$alpha, fit$classes$c, fit$colours)
  expect_identical(unname(fit$predictions[ref$U, 1]), ref$pred)
  expect_equal(unname(fit$scores[ref$U, 1]), ref$scores, tolerance = 1e-12)
  expect_identical(fit$classes$sweeps, as.integer(ref$sweeps))
  expect_identical(fit$deviceParts, 0L)
  # threads do not change the hub sums
  fit1 <- parCosnet(W, y, seed = 3, backend = "cpu", threads = 1, verbose = FALSE)
  expect_identical(fit1$scores, fit$scores)
})

test_that("GPU: hubs and the streamed path give the CPU's answer bit for bit", {
  skip_if_no_gpu()
  W <- cosnet_hub_graph(2500, 0.004, 3, 1500, 31)
  Y <- sapply(1:4, function(k) cosnet_random_labels(2500, 100 + 40 * k, 800, 40 + k))
  Y[1:2, ] <- NA
  cpu <- parCosnet(W, Y, seed = 5, backend = "cpu", verbose = FALSE)
  gpu <- parCosnet(W, Y, seed = 5, backend = "gpu", verbose = FALSE)
  expect_identical(gpu$deviceParts, 0L)
  expect_identical(gpu$colours, cpu$colours)
  expect_identical(gpu$classes, cpu$classes)
  expect_identical(gpu$scores, cpu$scores)
  # a device budget far below the network's size forces the streamed path
  bytes <- 12 * length(W@x)
  old <- options(sysbioGPU.cosnetDeviceBytes = bytes / 4)
  on.exit(options(old))
  str <- parCosnet(W, Y, seed = 5, backend = "gpu", verbose = FALSE)
  expect_gt(str$deviceParts, str$nColours)
  expect_identical(str$colours, cpu$colours)
  expect_identical(str$classes, cpu$classes)
  expect_identical(str$predictions, cpu$predictions)
  expect_identical(str$scores, cpu$scores)
  # with the regularisation (colour-synchronous penalty over split colours)
  options(old)
  cpu2 <- parCosnet(W, Y, cost = 1e-3, seed = 5, backend = "cpu", verbose = FALSE)
  options(sysbioGPU.cosnetDeviceBytes = bytes / 4)
  str2 <- parCosnet(W, Y, cost = 1e-3, seed = 5, backend = "gpu", verbose = FALSE)
  expect_gt(str2$deviceParts, 1L)
  expect_identical(str2$scores, cpu2$scores)
  expect_identical(str2$classes, cpu2$classes)
  # cross-validation, several job batches, rows bigger than the budget's
  # buffers (the buffers then take the largest row)
  options(sysbioGPU.cosnetDeviceBytes = 2000, sysbioGPU.cosnetBatch = 3L)
  cvs <- cvParCosnet(W, Y[, 1:2], seed = 2, backend = "gpu", verbose = FALSE)
  options(old)
  cvc <- cvParCosnet(W, Y[, 1:2], seed = 2, backend = "cpu", verbose = FALSE)
  expect_gt(cvs$deviceParts, 1L)
  expect_identical(cvs$scores, cvc$scores)
  expect_identical(cvs$jobs, cvc$jobs)
})

test_that("the one-thread greedy colouring equals the parallel Jones-Plassmann rounds", {
  W <- sysbioGPU:::cosnet_random_network(3000, 40, seed = 9, threads = 2)
  y <- cosnet_random_labels(3000, 200, 1000, 10)
  f1 <- parCosnet(W, y, seed = 4, backend = "cpu", threads = 1, verbose = FALSE)
  f2 <- parCosnet(W, y, seed = 4, backend = "cpu", threads = 2, verbose = FALSE)
  expect_identical(f1$colours, f2$colours)
  expect_identical(f1$colours, cosnet_greedy_colours(W, 4))
  expect_identical(f1$scores, f2$scores)
})
