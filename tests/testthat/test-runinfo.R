# runInfo(): one row with the same columns for every method's result.

run_info_cols <- c("method", "backend", "device", "deviceName", "threads", "workers",
                   "seed", "seconds", "version", "engineSettings")

check_run_info <- function(x, method, seed) {
  ri <- runInfo(x)
  expect_s3_class(ri, "data.frame")
  expect_identical(names(ri), run_info_cols)
  expect_identical(nrow(ri), 1L)
  expect_identical(ri$method, method)
  expect_identical(ri$backend, "cpu")
  expect_true(is.na(ri$device))
  expect_identical(ri$seed, seed)
  expect_true(is.numeric(ri$seconds) && !is.na(ri$seconds) && ri$seconds >= 0)
  expect_identical(ri$version, as.character(utils::packageVersion("sysbioGPU")))
  expect_identical(ri$engineSettings, NA_character_)
  ri
}

test_that("every method's CPU result answers runInfo() the same way", {
  net <- pbn(list(A = "!B", B = "A"))
  check_run_info(pbnSteadyState(net, c(A = TRUE), r = 0.05, seed = 7, backend = "cpu", threads = 1),
                 "pbnSteadyState", 7)

  eye <- grnMouseEye()
  fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 64, islands = 2, generations = 3,
                   seed = 8, backend = "cpu", threads = 1)
  ri <- check_run_info(fit, "grnEvolve", 8)
  expect_identical(ri$threads, 1L)

  set.seed(1)
  n <- 60
  W <- Matrix::rsparsematrix(n, n, density = 0.1, symmetric = TRUE, rand.x = function(k) runif(k))
  Matrix::diag(W) <- 0
  y <- rep(0, n); y[1:10] <- 1; y[51:60] <- NA
  check_run_info(parCosnet(W, y, seed = 9, backend = "cpu", threads = 1), "parCosnet", 9)

  set.seed(2)
  expr <- matrix(rnorm(200 * 8), 200, 8, dimnames = list(paste0("g", 1:200), NULL))
  sets <- list(a = paste0("g", 1:20), b = paste0("g", 50:90))
  gs <- rapidGSEA(expr, rep(0:1, each = 4), sets, nperm = 20, minSize = 5, seed = 10,
                  backend = "cpu", threads = 1)
  check_run_info(gs, "rapidGSEA", 10)

  m <- reactionModel(reactants = rbind(c(1, 0), c(0, 1)), products = rbind(c(0, 1), c(1, 0)),
                     rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
  ri <- runInfo(lassieSimulate(m, times = 0:3, backend = "cpu", threads = 1))
  expect_identical(names(ri), run_info_cols)
  expect_identical(ri$backend, "cpu")
  expect_true(is.na(ri$seed))
})

test_that("runInfo() refuses what is not a result, naming the argument", {
  expect_error(runInfo(data.frame(a = 1)), "`x` must be a result", class = "sysbioGPU_error_input")
})

test_that("engine settings that are set are recorded in runInfo(); bad values are refused", {
  # lassieSimulate: the GPU settings reach the glue through the run list on
  # the CPU too (the glue decodes them on every call), and are recorded
  m <- reactionModel(reactants = rbind(c(1, 0), c(0, 1)), products = rbind(c(0, 1), c(1, 0)),
                     rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
  old <- options(sysbioGPU.lassieFused = FALSE, sysbioGPU.lassieBdfTeam = 16)
  on.exit(options(old))
  one <- lassieSimulate(m, times = 0:3, backend = "cpu", threads = 1)
  expect_identical(runInfo(one)$engineSettings, "sysbioGPU.lassieBdfTeam=16; sysbioGPU.lassieFused=FALSE")
  K <- rbind(c(2, 1), c(1, 2))
  batch <- lassieSimulate(m, times = 0:3, rates = K, backend = "cpu", threads = 1)
  expect_identical(runInfo(batch)$engineSettings, "sysbioGPU.lassieBdfTeam=16; sysbioGPU.lassieFused=FALSE")
  arr <- lassieSimulate(m, times = 0:3, rates = K, backend = "cpu", threads = 1, output = "array")
  expect_identical(attr(arr, "engineSettings"), "sysbioGPU.lassieBdfTeam=16; sysbioGPU.lassieFused=FALSE")
  # the settings do not change the CPU engine's numbers
  options(old)
  expect_identical(unclass(lassieSimulate(m, times = 0:3, backend = "cpu", threads = 1))[, ], unclass(one)[, ])

  options(sysbioGPU.pbnNoSkip = TRUE)
  net <- pbn(list(A = "!B", B = "A"))
  ss <- pbnSteadyState(net, c(A = TRUE), r = 0.05, seed = 7, backend = "cpu", threads = 1)
  expect_identical(runInfo(ss)$engineSettings, "sysbioGPU.pbnNoSkip=TRUE")
  options(sysbioGPU.pbnNoSkip = NULL, sysbioGPU.gseaBatch = 64)
  set.seed(2)
  expr <- matrix(rnorm(200 * 8), 200, 8, dimnames = list(paste0("g", 1:200), NULL))
  gs <- rapidGSEA(expr, rep(0:1, each = 4), list(a = paste0("g", 1:20)), nperm = 20, minSize = 5,
                  seed = 10, backend = "cpu", threads = 1)
  expect_identical(runInfo(gs)$engineSettings, "sysbioGPU.gseaBatch=64")
  options(sysbioGPU.gseaBatch = NULL)

  options(sysbioGPU.lassieBdfTeam = 3)
  expect_error(lassieSimulate(m, times = 0:3, backend = "cpu", threads = 1),
               "option `sysbioGPU.lassieBdfTeam` has an invalid value \\(3\\)", class = "sysbioGPU_error_input")
  options(sysbioGPU.lassieBdfTeam = NULL, sysbioGPU.lassieFused = "yes")
  expect_error(lassieSimulate(m, times = 0:3, backend = "cpu", threads = 1),
               "sysbioGPU.lassieFused", class = "sysbioGPU_error_input")
})

test_that("runInfo() of a lassieSimulate batch reads its info table", {
  m <- reactionModel(matrix(2), matrix(0), rates = 0.5, initial = 1, species = "A")
  b <- lassieSimulate(m, times = c(0, 1), rates = cbind(c(0.5, 1)), backend = "cpu", threads = 2,
                      verbose = FALSE)
  ri <- runInfo(b)
  expect_identical(ri$method, "lassieBatch")
  expect_identical(ri$backend, "cpu")
  expect_identical(ri$threads, 2L)
  expect_identical(ri$seconds, attr(b, "info")$seconds)
  expect_true(is.finite(ri$seconds))
})
