# ---- gpuInfo -----------------------------------------------------------------

test_that("gpuInfo() returns one row per device, or none, and says how it was built", {
  g <- gpuInfo()
  expect_s3_class(g, "data.frame")
  expect_named(g, c("index", "name", "memoryGiB", "freeGiB", "computeCapability",
                    "multiprocessors", "driverVersion", "runtimeVersion"))
  expect_type(attr(g, "cuda"), "logical")
  expect_type(attr(g, "reason"), "character")
  expect_equal(nrow(g) > 0, hasGPU())
  if (!hasGPU()) expect_true(nzchar(attr(g, "reason")))
})

test_that("gpuInfo() lists a usable device with its properties", {
  skip_if_no_gpu()
  g <- gpuInfo()
  expect_gte(nrow(g), 1)
  expect_equal(g$index, seq_len(nrow(g)) - 1L)
  expect_true(all(g$memoryGiB > 1 & g$freeGiB > 0 & g$freeGiB <= g$memoryGiB))
  expect_true(all(g$multiprocessors > 0))
  expect_match(g$computeCapability, "^[0-9]+\\.[0-9]+$")
  expect_match(g$runtimeVersion, "^1[0-9]\\.[0-9]$")
  expect_false(nzchar(attr(g, "reason")))
})

test_that("a limit on the address space that keeps CUDA from starting is named", {
  # CUDA reserves address space for all the devices' memory as it starts
  # (more than 6 GB for any H100 or H200), so a fresh R process under
  # ulimit -v 6000000 cannot start it, and the reason says why
  skip_if_no_gpu()
  skip_if(!nzchar(Sys.which("bash")), "no bash")
  code <- "suppressMessages(library(sysbioGPU)); cat(hasGPU(), attr(gpuInfo(), 'reason'), sep = '\n')"
  out <- suppressWarnings(system2("bash", c("-c", shQuote(sprintf("ulimit -v 6000000; exec '%s' --vanilla -e \"%s\"",
    file.path(R.home("bin"), "Rscript"), code))), stdout = TRUE, stderr = TRUE,
    env = c(paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = ":"))), "OPENBLAS_NUM_THREADS=1",
            "OMP_NUM_THREADS=1")))
  expect_identical(out[1], "FALSE")
  expect_match(paste(out[-1], collapse = " "), "address space is limited to 6.14 GB.*lift that limit")
})

test_that("a CPU call leaves the GPUs alone, a GPU call holds only its device", {
  # A device's context holds some hundred MB of it until the process ends:
  # on a shared server, a call must create one only on the devices it
  # runs on.  A fresh R process makes the calls and asks nvidia-smi which
  # devices hold one of its contexts.
  skip_if_no_gpu()
  skip_on_os("windows")
  smi <- Sys.which("nvidia-smi")
  skip_if_not(nzchar(smi), "no nvidia-smi")
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script), add = TRUE)
  writeLines(c(
    "suppressPackageStartupMessages(library(sysbioGPU))",
    sprintf("smi <- %s", deparse(unname(smi))),
    "held <- function() {",
    "  apps <- system2(smi, c('--query-compute-apps=pid,gpu_uuid', '--format=csv,noheader'), stdout = TRUE)",
    "  uuids <- trimws(system2(smi, c('--query-gpu=uuid', '--format=csv,noheader'), stdout = TRUE))",
    "  mine <- trimws(sub('^[^,]*,', '', apps[trimws(sub(',.*$', '', apps)) == as.character(Sys.getpid())]))",
    "  paste(sort(match(mine, uuids) - 1L), collapse = ' ')",
    "}",
    "m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)), rates = c(2, 1), initial = c(1, 0))",
    "invisible(resolveBackend('cpu'))",
    "invisible(lassieSimulate(m, c(0, 1), backend = 'cpu', verbose = FALSE))",
    "g <- matrix(rnorm(480), 60, dimnames = list(paste0('g', 1:60), NULL))",
    "invisible(rapidGSEA(g, rep(c('a', 'b'), 4), list(s = paste0('g', 1:10)), nperm = 10, minSize = 1,",
    "                    backend = 'cpu', verbose = FALSE))",
    "cat('cpu:', held(), '\\n')",
    "invisible(hasGPU()); invisible(resolveBackend('gpu', device = 0))",
    "invisible(lassieSimulate(m, c(0, 1), backend = 'gpu', device = 0, verbose = FALSE))",
    "cat('gpu0:', held(), '\\n')"), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE, stderr = TRUE)
  cpu <- grep("^cpu:", out, value = TRUE)
  gpu0 <- grep("^gpu0:", out, value = TRUE)
  expect_length(cpu, 1L)
  expect_length(gpu0, 1L)
  # nvidia-smi may not see this container's processes: then nothing to check
  skip_if(identical(trimws(gpu0), "gpu0:"), "nvidia-smi lists no process of this container")
  expect_identical(trimws(cpu), "cpu:")
  expect_identical(trimws(gpu0), "gpu0: 0")
})

test_that("gpu_warm() is silent, leaves the checks to the call, and skips CPU and BPPARAM runs", {
  warm <- sysbioGPU:::gpu_warm
  for (dev in list(99L, -1L, "x", NA, 0.5, c(0L, 99L))) expect_silent(expect_null(warm("gpu", dev)))
  expect_null(warm("cpu", 0L))
  expect_null(warm("auto", 0L, BPPARAM = list()))
  skip_if_no_gpu()
  expect_null(warm("gpu", 0L))
  expect_null(warm("auto", "all"))
  g <- matrix(stats::rnorm(480), 60, dimnames = list(paste0("g", 1:60), NULL))
  args <- list(g, rep(c("a", "b"), 4), list(s = paste0("g", 1:10)), nperm = 50, minSize = 1, seed = 1,
               verbose = FALSE)
  expect_identical(as.data.frame(do.call(rapidGSEA, c(args, backend = "gpu"))),
                   as.data.frame(do.call(rapidGSEA, c(args, backend = "cpu"))))
})

# ---- resolution --------------------------------------------------------------

test_that("the CPU backend always resolves, threads are capped at what exists", {
  b <- resolveBackend("cpu", threads = 1)
  expect_s3_class(b, "sysbioGPU_backend")
  expect_equal(b$backend, "cpu")
  expect_identical(b$threads, 1L)
  expect_true(is.na(b$device))
  n <- sysbioGPU:::threads_available()
  expect_identical(resolveBackend("cpu", threads = 10000)$threads, as.integer(n))
  expect_identical(resolveBackend("cpu", threads = NULL)$threads, as.integer(n))
  expect_output(print(b), "CPU, 1 thread")
})

test_that("auto picks the GPU exactly when one is usable, and says why not", {
  b <- resolveBackend("auto")
  expect_equal(b$backend, if (hasGPU()) "gpu" else "cpu")
  if (!hasGPU()) expect_equal(b$reason, attr(gpuInfo(), "reason"))
})

test_that("asking for the GPU where none is usable is an error that says why", {
  skip_if(hasGPU())
  expect_error(resolveBackend("gpu"), 'backend = "gpu" cannot be used',
               class = "sysbioGPU_error_backend")
  why <- if (attr(gpuInfo(), "cuda")) "driver|device" else "built without CUDA"
  expect_error(resolveBackend("gpu"), why)
  expect_error(philoxDraws(3, 1, backend = "gpu"), class = "sysbioGPU_error_backend")
})

test_that("a device number that does not exist is refused for the GPU, ignored for auto", {
  skip_if_no_gpu()
  n <- nrow(gpuInfo())
  expect_error(resolveBackend("gpu", device = n), "does not exist", class = "sysbioGPU_error_backend")
  b <- resolveBackend("auto", device = n)
  expect_equal(b$backend, "cpu")
  expect_match(b$reason, "does not exist")
  g <- resolveBackend("gpu", device = 0)
  expect_equal(g$backend, "gpu")
  expect_identical(g$device, 0L)
  expect_equal(g$deviceName, gpuInfo()$name[1])
})

test_that("options set the defaults", {
  old <- options(sysbioGPU.backend = "cpu", sysbioGPU.threads = 1, sysbioGPU.device = 0)
  on.exit(options(old))
  b <- resolveBackend()
  expect_equal(b$backend, "cpu")
  expect_equal(b$requested, "cpu")
  expect_identical(b$threads, 1L)
  options(sysbioGPU.backend = "fast")
  expect_error(resolveBackend(), '`backend` must be one of "auto", "cpu", "gpu", not "fast"',
               class = "sysbioGPU_error_input")
})

test_that("bad threads and device values are named", {
  expect_error(resolveBackend("cpu", threads = 0), "`threads`", class = "sysbioGPU_error_input")
  expect_error(resolveBackend("cpu", threads = NA), "`threads`")
  expect_error(resolveBackend("cpu", threads = "2"), "`threads`")
  expect_error(resolveBackend("cpu", device = -1), "`device`")
  expect_error(resolveBackend("cpu", device = c(0, 0)), "distinct", class = "sysbioGPU_error_input")
  # tests may name a GPU twice (each entry a share of its work)
  old <- options(sysbioGPU.repeatDevices = TRUE)
  expect_silent(resolveBackend("cpu", device = c(0, 0)))
  options(sysbioGPU.repeatDevices = "yes")
  expect_error(resolveBackend("cpu", device = c(0, 0)), "sysbioGPU.repeatDevices", class = "sysbioGPU_error_input")
  options(old)
  expect_error(resolveBackend("cpu", device = "first"), "`device`", class = "sysbioGPU_error_input")
  expect_error(resolveBackend(c(1, 2)), "`backend`")
})

test_that("several devices, or all of them", {
  b <- resolveBackend("cpu", device = c(0, 1))
  expect_equal(b$backend, "cpu")
  expect_true(is.na(b$device))
  expect_silent(resolveBackend("auto", device = "all"))
  skip_if_no_gpu()
  n <- nrow(gpuInfo())
  g <- resolveBackend("gpu", device = "all")
  expect_identical(g$devices, seq_len(n) - 1L)
  expect_identical(g$device, 0L)
  # a GPU named twice (tests): two entries, both named
  g0 <- on_devices(resolveBackend("gpu", device = c(0, 0)))
  expect_identical(g0$devices, c(0L, 0L))
  expect_match(g0$deviceName, "^2 GPUs")
  skip_if(n < 2, "one GPU")
  g2 <- resolveBackend("gpu", device = c(1, 0))
  expect_identical(g2$devices, c(1L, 0L))
  expect_match(g2$deviceName, "^2 GPUs")
  # methods that run on one GPU say so
  expect_error(sysbioGPU:::backend_args(g2), "one GPU", class = "sysbioGPU_error_input")
})

# ---- seeds -------------------------------------------------------------------

test_that("a missing seed comes from R's RNG, so set.seed() repeats it", {
  set.seed(1)
  a <- sysbioGPU:::resolve_seed(NULL)
  set.seed(1)
  expect_identical(sysbioGPU:::resolve_seed(NULL), a)
  expect_identical(sysbioGPU:::resolve_seed(12), 12)
  expect_error(sysbioGPU:::resolve_seed(-1), "`seed`")
  expect_error(sysbioGPU:::resolve_seed(NA), "`seed`")
})

test_that("a forked child runs its engines on one thread and does not hang", {
  # GNU OpenMP hangs a forked child's parallel region once the parent has
  # run one; the package gives a forked child one thread (threads.c).
  skip_on_os("windows")
  set.seed(3)
  x <- matrix(rnorm(500 * 8), 500, dimnames = list(paste0("g", 1:500), NULL))
  cl <- rep(c("A", "B"), each = 4)
  sets <- list(s1 = paste0("g", 1:20), s2 = paste0("g", 100:140))
  run <- function() rapidGSEA(x, cl, sets, nperm = 4000, seed = 1, backend = "cpu", threads = 2,
                              verbose = FALSE)$NES
  parent <- run()
  job <- parallel::mcparallel(list(threads = sysbioGPU:::threads_available(), nes = run()))
  got <- parallel::mccollect(job, wait = FALSE, timeout = 60)
  if (is.null(got)) tools::pskill(job$pid, tools::SIGKILL)
  expect_false(is.null(got))
  got <- got[[1]]
  expect_identical(got$threads, 1L)
  expect_identical(got$nes, parent)
})
