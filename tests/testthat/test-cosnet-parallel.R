# parCosnet() and cvParCosnet() spread over R workers (BPPARAM) and over
# several GPUs of one process: the same results as one process on one
# device, bit for bit.

# Everything but the bookkeeping of where and how fast the run went (and
# the engine options set, which some comparisons change on purpose).
cosnet_result <- function(x) {
  x[setdiff(names(x), c("seconds", "call", "threads", "workers", "device", "devices", "deviceName",
                        "engineSettings"))]
}

cosnet_par_data <- function(n = 2000L, K = 7L) {
  W <- cosnet_random_network(n, 8, seed = 41, threads = 1)
  Y <- vapply(seq_len(K), function(k) cosnet_random_labels(n, n %/% 50 + 15 * k, n %/% 3, 40 + k), numeric(n))
  colnames(Y) <- paste0("go", seq_len(K))
  list(W = W, Y = Y)
}

test_that("R workers (BPPARAM) give the single-process results", {
  skip_if_not_installed("BiocParallel")
  d <- cosnet_par_data()
  run <- function(BPPARAM = NULL, cost = 0) {
    parCosnet(d$W, d$Y, cost = cost, seed = 7, backend = "cpu", threads = 1,
              BPPARAM = BPPARAM, verbose = FALSE)
  }
  cv <- function(BPPARAM = NULL) {
    cvParCosnet(d$W, d$Y, nfolds = 3, seed = 7, backend = "cpu", threads = 1,
                BPPARAM = BPPARAM, verbose = FALSE)
  }
  one <- run()
  one_cost <- run(cost = 1e-3)
  one_cv <- cv()
  expect_identical(one$workers, 1L)
  serial <- run(BiocParallel::SerialParam())
  expect_identical(cosnet_result(serial), cosnet_result(one))
  # several devices on the CPU backend: the devices play no part
  expect_identical(cosnet_result(parCosnet(d$W, d$Y, seed = 7, backend = "cpu", threads = 1, device = c(0, 1),
                                           verbose = FALSE)),
                   cosnet_result(one))

  snow <- BiocParallel::SnowParam(2)
  BiocParallel::bpstart(snow)
  on.exit(BiocParallel::bpstop(snow), add = TRUE)
  s2 <- run(snow)
  expect_identical(s2$workers, 2L)
  expect_identical(cosnet_result(s2), cosnet_result(one))
  expect_identical(cosnet_result(cv(snow)), cosnet_result(one_cv))

  skip_on_os("windows")
  m3 <- BiocParallel::MulticoreParam(3)
  r3 <- run(m3)
  expect_identical(r3$workers, 3L)
  expect_identical(cosnet_result(r3), cosnet_result(one))
  expect_match(paste(utils::capture.output(print(r3)), collapse = "\n"), "3 R workers")
  expect_identical(cosnet_result(run(m3, cost = 1e-3)), cosnet_result(one_cost))
  c3 <- cv(m3)
  # the folds of each class are those of the single process
  expect_identical(c3$folds, one_cv$folds)
  expect_identical(cosnet_result(c3), cosnet_result(one_cv))
  # more workers than classes: one class each
  two <- parCosnet(d$W, d$Y[, 1:2], seed = 7, backend = "cpu", threads = 1,
                   BPPARAM = m3, verbose = FALSE)
  expect_identical(two$workers, 2L)
  expect_identical(unname(two$scores), unname(one$scores[, 1:2]))
})

test_that("a bad BPPARAM is a clear error", {
  d <- cosnet_par_data(300L, 2L)
  expect_error(parCosnet(d$W, d$Y, seed = 1, backend = "cpu", BPPARAM = 3, verbose = FALSE),
               "BPPARAM", class = "sysbioGPU_error_input")
  expect_error(cvParCosnet(d$W, d$Y, seed = 1, backend = "cpu", BPPARAM = "snow", verbose = FALSE),
               "BPPARAM", class = "sysbioGPU_error_input")
})

# ---- GPU ------------------------------------------------------------------


test_that("several GPUs share the classes (parCosnet): identical to one GPU", {
  skip_if_no_gpu()
  # (two GPUs, or one GPU's shares: gpu_pair())
  d <- cosnet_par_data(4000L, 7L)
  run <- function(device, cost = 0, ...) {
    on_devices(parCosnet(d$W, d$Y, cost = cost, seed = 9, backend = "gpu", device = device,
                         verbose = FALSE, ...))
  }
  one <- run(0L)
  two <- run(gpu_pair())
  expect_identical(two$devices, gpu_pair())
  expect_identical(cosnet_result(two), cosnet_result(one))
  expect_identical(cosnet_result(run(c(gpu_pair(), 0L))), cosnet_result(one))
  if (two_gpus()) expect_identical(cosnet_result(run("all")), cosnet_result(one))
  # the reverse order: device 1 colours and takes the first block
  expect_identical(cosnet_result(run(rev(gpu_pair()))), cosnet_result(one))
  expect_identical(cosnet_result(run(gpu_pair(), cost = 1e-3)), cosnet_result(run(0L, cost = 1e-3)))
  # one class: the first device alone
  single <- on_devices(parCosnet(d$W, d$Y[, 3], seed = 9, backend = "gpu", device = gpu_pair(),
                                 verbose = FALSE))
  expect_identical(unname(single$scores[, 1]), unname(one$scores[, 3]))
  # small batches, and a network streamed in parts on each device
  old <- options(sysbioGPU.cosnetBatch = 2L, sysbioGPU.cosnetDeviceBytes = NULL)
  on.exit(options(old), add = TRUE)
  expect_identical(cosnet_result(run(gpu_pair())), cosnet_result(one))
  options(sysbioGPU.cosnetDeviceBytes = 4e5)
  streamed <- run(gpu_pair())
  expect_gt(streamed$deviceParts, 1L)
  expect_identical(cosnet_result(streamed)[c("scores", "predictions", "classes", "colours")],
                   cosnet_result(one)[c("scores", "predictions", "classes", "colours")])
})

test_that("several GPUs share the class x fold jobs (cvParCosnet): identical to one GPU", {
  skip_if_no_gpu()
  # (two GPUs, or one GPU's shares: gpu_pair())
  d <- cosnet_par_data(4000L, 7L)
  cv <- function(device, cost = 0) {
    on_devices(cvParCosnet(d$W, d$Y, nfolds = 4, cost = cost, seed = 9, backend = "gpu", device = device,
                           verbose = FALSE))
  }
  one <- cv(0L)
  expect_identical(cosnet_result(cv(gpu_pair())), cosnet_result(one))
  expect_identical(cosnet_result(cv(c(gpu_pair(), 0L))), cosnet_result(one))
  if (two_gpus()) expect_identical(cosnet_result(cv("all")), cosnet_result(one))
  expect_identical(cosnet_result(cv(gpu_pair(), cost = 1e-3)), cosnet_result(cv(0L, cost = 1e-3)))
  # and the CPU
  cpu <- cvParCosnet(d$W, d$Y, nfolds = 4, seed = 9, backend = "cpu", verbose = FALSE)
  expect_identical(cosnet_result(cv(gpu_pair()))[c("scores", "predictions", "metrics", "jobs")],
                   cosnet_result(cpu)[c("scores", "predictions", "metrics", "jobs")])
})

test_that("many jobs: two host threads a GPU take batches from one queue, identical to the CPU", {
  skip_if_no_gpu()
  # 40 classes x 4 folds = 160 jobs: two workers on one GPU (64 jobs or
  # more a GPU), and on each of two; batches of at most 3 jobs make many
  # turns of the queue; a host colour limit of 0 colours on the device
  d <- cosnet_par_data(3000L, 40L)
  keep <- c("scores", "predictions", "folds", "metrics", "jobs", "nColours")
  cv <- function(backend, device = 0L) {
    cosnet_result(cvParCosnet(d$W, d$Y, nfolds = 4, seed = 5, backend = backend, device = device,
                              verbose = FALSE))[keep]
  }
  cpu <- cv("cpu")
  expect_identical(cv("gpu"), cpu)
  old <- options(sysbioGPU.cosnetBatch = 3L, sysbioGPU.cosnetHostColour = 0)
  on.exit(options(old), add = TRUE)
  expect_identical(cv("gpu"), cpu)
  # two GPUs, or one GPU's two shares (four host threads on it)
  expect_identical(on_devices(cv("gpu", gpu_pair())), cpu)
  options(old)
  expect_identical(on_devices(cv("gpu", gpu_pair())), cpu)
})

test_that("GPU workers (SnowParam) give the single-process results", {
  skip_if_no_gpu()
  skip_if_not_installed("BiocParallel")
  d <- cosnet_par_data(3000L, 5L)
  one <- parCosnet(d$W, d$Y, seed = 4, backend = "gpu", verbose = FALSE)
  one_cv <- cvParCosnet(d$W, d$Y, nfolds = 3, seed = 4, backend = "gpu", verbose = FALSE)
  snow <- BiocParallel::SnowParam(2)
  BiocParallel::bpstart(snow)
  on.exit(BiocParallel::bpstop(snow), add = TRUE)
  # "all": with one GPU both workers share it, with two each has its own
  two <- parCosnet(d$W, d$Y, seed = 4, backend = "gpu", device = "all", BPPARAM = snow, verbose = FALSE)
  expect_identical(two$workers, 2L)
  expect_identical(cosnet_result(two), cosnet_result(one))
  two_cv <- cvParCosnet(d$W, d$Y, nfolds = 3, seed = 4, backend = "gpu", device = "all",
                        BPPARAM = snow, verbose = FALSE)
  expect_identical(cosnet_result(two_cv), cosnet_result(one_cv))
  expect_error(parCosnet(d$W, d$Y, seed = 4, backend = "gpu", BPPARAM = BiocParallel::MulticoreParam(2),
                         verbose = FALSE),
               "SnowParam", class = "sysbioGPU_error_input")
  expect_error(cvParCosnet(d$W, d$Y, seed = 4, backend = "gpu", BPPARAM = BiocParallel::MulticoreParam(2),
                           verbose = FALSE),
               "SnowParam", class = "sysbioGPU_error_input")
})
