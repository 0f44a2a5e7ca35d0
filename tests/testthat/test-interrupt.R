# Engines poll between chunks; Ctrl-C (SIGINT) must stop them, free their
# memory and come back as an R error of class sysbioGPU_error_interrupted.

test_that("a CPU run finishes when not interrupted", {
  expect_gte(sysbioGPU:::busy_run(0.05), 1)
})

test_that("Ctrl-C stops a long CPU run within about a second", {
  skip_on_os("windows")
  interrupt_after(0.5)
  t0 <- Sys.time()
  expect_error(sysbioGPU:::busy_run(30, bytes = 2^24, threads = 2),
               "interrupted by the user", class = "sysbioGPU_error_interrupted")
  # stopped, rather than running its 30 seconds
  expect_lt(as.numeric(difftime(Sys.time(), t0, units = "secs")), 15)
  # and the package still works afterwards
  expect_length(philoxDraws(3, 1), 3)
})

test_that("Ctrl-C stops a long GPU run and frees its device memory", {
  skip_on_os("windows")
  skip_if_no_gpu()
  before <- gpuInfo()$freeGiB[1]
  interrupt_after(1)
  expect_error(sysbioGPU:::busy_run(30, bytes = 2^30, backend = "gpu"),
               "interrupted by the user", class = "sysbioGPU_error_interrupted")
  after <- gpuInfo()$freeGiB[1]
  expect_lt(abs(after - before), 0.25) # the 1 GiB buffer is gone
  expect_gte(sysbioGPU:::busy_run(0.05, backend = "gpu"), 1)
})

test_that("a device allocation larger than the card is an error, not a crash", {
  skip_if_no_gpu()
  expect_error(sysbioGPU:::busy_run(0.1, bytes = 2^50, backend = "gpu"),
               "cannot allocate .* MiB on GPU 0", class = "sysbioGPU_error_memory")
  expect_gte(sysbioGPU:::busy_run(0.05, backend = "gpu"), 1)
})
