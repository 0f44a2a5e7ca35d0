# lassieSimulate(output = "array"): the batch in one array, times x
# (species, observables) x simulations.  The oracle is the default output
# of the same call (a matrix per simulation, itself checked against R's
# constructor and against deSolve elsewhere): the same numbers, counters,
# status and messages, for a batch with a failure, with and without
# observables (the engine writes the array in place only without them), a
# single simulation and BiocParallel's blocks.

arr_model <- function(observables = TRUE) {
  reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)),
                rates = c(2, 1), initial = c(1, 0), species = c("A", "B"),
                observables = if (observables) Matrix::Matrix(rbind(Total = c(1, 1)), sparse = TRUE))
}

# the array's simulation s against matrix mat of the default output
expect_block <- function(a, s, mat) {
  expect_identical(a[, , s], unclass(mat)[, -1L, drop = FALSE])
  expect_identical(attr(a, "stats")[, s], attr(mat, "stats"))
}

test_that("an array holds the matrices' numbers, counters, status and messages", {
  tt <- seq(0, 2, by = 0.5)
  # the stiff third set exhausts maxSteps of the explicit method
  k <- cbind(c(0.5, 2, 1e6, 3), 1)
  run <- function(model, output) {
    lassieSimulate(model, tt, rates = k, method = "rkf45", maxSteps = 200, backend = "cpu", threads = 2,
                   verbose = FALSE, output = output)
  }
  for (obs in c(TRUE, FALSE)) {
    m <- arr_model(obs)
    expect_warning(b <- run(m, "matrices"), "1 of 4", class = "sysbioGPU_warning_lassie")
    expect_warning(a <- run(m, "array"), "1 of 4 simulation\\(s\\) failed.*simulation 3: `maxSteps`",
                   class = "sysbioGPU_warning_lassie")
    cols <- if (obs) c("A", "B", "Total") else c("A", "B")
    expect_s3_class(a, "lassieArray")
    expect_identical(dim(a), c(length(tt), length(cols), 4L))
    expect_identical(dimnames(a), list(NULL, cols, NULL))
    expect_identical(attr(a, "times"), tt)
    for (s in 1:4) expect_block(a, s, b[[s]])
    expect_identical(rownames(attr(a, "stats")), names(attr(b[[1]], "stats")))
    expect_identical(attr(a, "status"), c(0L, 0L, 1L, 0L))
    expect_identical(attr(a, "messages"), attr(b, "messages"))
    expect_true(all(is.nan(a[-1, , 3])))
    for (nm in c("method", "rtol", "atol", "backend", "device", "nSpecies")) {
      expect_identical(attr(a, nm), attr(b[[1]], nm), label = nm)
    }
    expect_true(is.numeric(attr(a, "elapsed")) && attr(a, "elapsed") >= 0)
    # species A over time (rows) and simulations (columns)
    expect_identical(a[, "A", ], vapply(b, function(x) unclass(x)[, "A"], numeric(length(tt))))
  }
  expect_output(print(a), "<lassieArray> 5 times x 2 columns x 4 simulations; rkf45 on cpu; 1 failed")
})

test_that("a batch's array is filled on several threads with each simulation's own block", {
  # the glue copies the species and adds the observables of each
  # simulation on all threads: every block against the matrices' output
  # (filled by another code), on uneven shares of 3 threads
  m <- arr_model()
  k <- cbind(seq(0.25, 4, length.out = 101), seq(2, 0.5, length.out = 101))
  tt <- seq(0, 2, by = 0.25)
  b <- lassieSimulate(m, tt, rates = k, backend = "cpu", threads = 3, verbose = FALSE)
  a <- lassieSimulate(m, tt, rates = k, backend = "cpu", threads = 3, verbose = FALSE, output = "array")
  for (s in seq_len(nrow(k))) expect_block(a, s, b[[s]])
  # the observable Total = A + B, here by R
  expect_identical(a[, "Total", ], a[, "A", ] + a[, "B", ])
})

test_that("a single simulation is an array of one, and a bad `output` is an error", {
  m <- arr_model()
  tt <- c(0, 0.25, 1)
  one <- lassieSimulate(m, tt, backend = "cpu", threads = 1, verbose = FALSE)
  a <- lassieSimulate(m, tt, backend = "cpu", threads = 1, verbose = FALSE, output = "array")
  expect_identical(dim(a), c(3L, 3L, 1L))
  expect_block(a, 1, one)
  expect_error(lassieSimulate(m, tt, backend = "cpu", verbose = FALSE, output = "list"),
               "`output` must be one of", class = "sysbioGPU_error_input")
})

test_that("an output R cannot allocate is a memory error, for every output, and R goes on", {
  # the engine asks the glue for the output (an R allocation inside
  # R_ToplevelExec): R's error becomes the call's, with nothing left behind.
  # R's vector heap capped 400 MB above its use; the conditions are caught
  # by base R and looked at once the cap is gone
  skip_if_not(exists("mem.maxVSize", baseenv()), "no mem.maxVSize in this R")
  m <- arr_model(observables = FALSE)
  K <- matrix(seq(0.5, 2, length.out = 20000), ncol = 2, nrow = 20000)
  tt <- seq(0, 1, length.out = 5000)   # 20,000 x 5,000 x 2 doubles: 1.6 GB
  old <- mem.maxVSize()
  on.exit(mem.maxVSize(old), add = TRUE)
  mem.maxVSize(ceiling(gc()[2L, 2L]) + 400)
  caught <- lapply(c("array", "matrices"), function(out) {
    tryCatch(lassieSimulate(m, tt, rates = K, backend = "cpu", threads = 1, verbose = FALSE, output = out),
             error = function(e) e)
  })
  mem.maxVSize(old)
  for (e in caught) {
    expect_s3_class(e, "sysbioGPU_error_memory")
    expect_match(conditionMessage(e), "cannot allocate the output")
  }
  a <- lassieSimulate(m, tt[1:10], rates = K[1:3, ], backend = "cpu", threads = 1, verbose = FALSE, output = "array")
  expect_identical(dim(a), c(10L, 2L, 3L))
  expect_false(anyNA(a))
})

test_that("GPU: an output R cannot allocate stops the device's thread, and the device works afterwards", {
  # the calling thread makes the output while a host thread of its own
  # drives the device: R's failure there cancels that thread, and the run
  # ends with R's error
  skip_if_no_gpu()
  skip_if_not(exists("mem.maxVSize", baseenv()), "no mem.maxVSize in this R")
  m <- arr_model(observables = FALSE)
  K <- matrix(seq(0.5, 2, length.out = 20000), ncol = 2, nrow = 20000)
  tt <- seq(0, 1, length.out = 5000)
  old <- mem.maxVSize()
  on.exit(mem.maxVSize(old), add = TRUE)
  mem.maxVSize(ceiling(gc()[2L, 2L]) + 400)
  caught <- lapply(c("array", "matrices"), function(out) {
    tryCatch(lassieSimulate(m, tt, rates = K, backend = "gpu", verbose = FALSE, output = out),
             error = function(e) e)
  })
  mem.maxVSize(old)
  for (e in caught) {
    expect_s3_class(e, "sysbioGPU_error_memory")
    expect_match(conditionMessage(e), "cannot allocate the output")
  }
  g <- lassieSimulate(m, tt[1:10], rates = K[1:3, ], backend = "gpu", verbose = FALSE, output = "array")
  c0 <- lassieSimulate(m, tt[1:10], rates = K[1:3, ], backend = "cpu", threads = 1, verbose = FALSE,
                       output = "array")
  expect_identical(unclass(g)[, , ], unclass(c0)[, , ])
})

test_that("BiocParallel's blocks make the array of one process", {
  skip_if_not_installed("BiocParallel")
  skip_on_os("windows")   # MulticoreParam forks
  m <- arr_model()
  k <- cbind(c(0.5, 1, 2, 4, 8), 1)
  run <- function(...) lassieSimulate(m, c(0, 1, 2), rates = k, backend = "cpu", threads = 1,
                                      verbose = FALSE, output = "array", ...)
  a <- run()
  for (bp in list(BiocParallel::SerialParam(), BiocParallel::MulticoreParam(2))) {
    b <- run(BPPARAM = bp)
    attr(b, "elapsed") <- attr(a, "elapsed")
    expect_identical(b, a)
  }
})

test_that("GPU: the array is the CPU's, bit for bit, implicit steps included", {
  skip_if_no_gpu()
  # the device's implicit steps, whatever the batch's size
  old <- options(sysbioGPU.lassieDeviceBDF = TRUE)
  on.exit(options(old))
  m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
  set.seed(3)
  k <- t(replicate(40, m$rates * 2^runif(length(m$rates), -1, 1)))
  run <- function(backend) lassieSimulate(m, seq(0, 20, by = 2), rates = k, backend = backend, threads = 2,
                                          verbose = FALSE, output = "array")
  g <- run("gpu")
  cp <- run("cpu")
  expect_identical(unclass(g)[, , ], unclass(cp)[, , ])
  expect_identical(attr(g, "stats"), attr(cp, "stats"))
  expect_gt(sum(attr(g, "stats")["implicitSteps", ]), 0)
})
