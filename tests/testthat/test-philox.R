hex32 <- sysbioGPU:::hex32
unhex32 <- sysbioGPU:::unhex32

# ---- known answers -----------------------------------------------------------

test_that("Philox4x32-10 passes the Random123 known-answer vectors", {
  block <- function(ctr, key) hex32(sysbioGPU:::philox_block(unhex32(ctr), unhex32(key)))
  expect_equal(block(rep("00000000", 4), rep("00000000", 2)),
               c("6627e8d5", "e169c58d", "bc57ac4c", "9b00dbd8"))
  expect_equal(block(rep("ffffffff", 4), rep("ffffffff", 2)),
               c("408f276d", "41c83b0e", "a20bc7c6", "6d5451fd"))
  expect_equal(block(c("243f6a88", "85a308d3", "13198a2e", "03707344"), c("a4093822", "299f31d0")),
               c("d16cfe09", "94fdcceb", "5001e420", "24126ea1"))
})

test_that("a stream is the bijection over successive counters, subsequence in the high words", {
  # seed 0, subsequence 0: counters (0,0,0,0), (1,0,0,0), ...
  expect_equal(hex32(philoxDraws(4, seed = 0)), c("6627e8d5", "e169c58d", "bc57ac4c", "9b00dbd8"))
  s <- philoxDraws(8, seed = 5, subsequence = 3)
  key <- c(5, 0)
  expect_equal(s[1:4], sysbioGPU:::philox_block(c(0, 0, 3, 0), key))
  expect_equal(s[5:8], sysbioGPU:::philox_block(c(1, 0, 3, 0), key))
  # a 64-bit seed splits into (low, high) key words
  expect_equal(philoxDraws(4, seed = 2^32 + 7),
               sysbioGPU:::philox_block(c(0, 0, 0, 0), c(7, 1)))
})

test_that("offset skips words and streams are consecutive subsequences", {
  expect_identical(philoxDraws(6, 9, offset = 3), philoxDraws(9, 9)[4:9])
  expect_identical(philoxDraws(5, 9, offset = 1e6 + 1), philoxDraws(1e6 + 6, 9)[(1e6 + 2):(1e6 + 6)])
  m <- philoxDraws(7, 9, subsequence = 10, streams = 3)
  expect_equal(dim(m), c(7, 3))
  expect_identical(m[, 3], philoxDraws(7, 9, subsequence = 12))
})

# ---- derived draws -----------------------------------------------------------

test_that("uniform doubles lie in (0, 1) and look uniform", {
  u <- philoxDraws(1e5, seed = 11, type = "uniform")
  expect_true(all(u > 0 & u < 1))
  expect_gt(suppressWarnings(ks.test(u, "punif"))$p.value, 1e-4)
  # 53 bits: two words per double
  w <- philoxDraws(2, seed = 11)
  expect_equal(u[1], ((w[1] %/% 32) * 2^26 + w[2] %/% 64 + 0.5) / 2^53)
})

test_that("bounded integers cover [0, max) evenly", {
  k <- philoxDraws(6e4, seed = 3, type = "integer", max = 6)
  expect_true(all(k %in% 0:5))
  expect_gt(chisq.test(table(factor(k, levels = 0:5)))$p.value, 1e-4)
  # a bound that makes plain modulo badly biased: 3 * 2^30
  big <- philoxDraws(6e4, seed = 4, type = "integer", max = 3 * 2^30)
  expect_true(all(big >= 0 & big < 3 * 2^30))
  expect_gt(chisq.test(table(cut(big, 3 * (0:4) * 2^28, right = FALSE)))$p.value, 1e-4)
  expect_identical(philoxDraws(5, 3, type = "integer", max = 1), rep(0, 5))
})

test_that("the shuffle draws all 24 permutations of 4 items uniformly", {
  p <- philoxShuffle(4, seed = 2024, streams = 24000)
  expect_true(all(apply(p, 2, function(x) setequal(x, 1:4))))
  key <- apply(p, 2, paste, collapse = "")
  expect_equal(length(unique(key)), 24)
  expect_gt(chisq.test(table(key))$p.value, 1e-3)
  expect_identical(philoxShuffle(1, seed = 1), 1L)
})

# ---- reproducibility ---------------------------------------------------------

test_that("draws do not depend on the number of threads", {
  for (type in c("uint32", "uniform")) {
    expect_identical(philoxDraws(300, 8, streams = 5000, type = type, threads = 1),
                     philoxDraws(300, 8, streams = 5000, type = type, threads = 2))
  }
  expect_identical(philoxShuffle(50, 8, streams = 9000, threads = 1),
                   philoxShuffle(50, 8, streams = 9000, threads = 2))
})

test_that("bad arguments are named in the error", {
  expect_error(philoxDraws(-1, 1), "`n` must be a single whole number", class = "sysbioGPU_error_input")
  expect_error(philoxDraws(3, 1.5), "`seed`", class = "sysbioGPU_error_input")
  expect_error(philoxDraws(3, 2^60), "`seed`", class = "sysbioGPU_error_input")
  expect_error(philoxDraws(3, 1, type = "integer"), "`max` is needed")
  expect_error(philoxDraws(3, 1, type = "integer", max = 0), "`max`")
  expect_error(philoxShuffle(0, 1), "`n`")
})

# ---- GPU ---------------------------------------------------------------------

test_that("the C stream is bit-identical to cuRAND's Philox4_32_10 device API", {
  skip_if_no_gpu()
  gpu <- resolveBackend("gpu")
  triples <- list(c(0, 0, 0), c(42, 7, 3), c(2^40 + 5, 2^33 + 1, 1e6 + 1),
                  c(2^53 - 1, 123456, 5), c(20161122, 0, 2^32 + 2))
  for (t in triples) {
    cur <- sysbioGPU:::rng_fill("curand", 1e6, t[1], t[2], t[3], b = gpu)
    ours <- philoxDraws(1e6, t[1], t[2], t[3], backend = "cpu")
    expect_identical(cur, ours, label = paste("cuRAND stream for (seed, subsequence, offset) =",
                                              paste(format(t, scientific = FALSE), collapse = ", ")))
  }
  # many subsequences at once, as kernels use them: one thread per stream
  cur <- sysbioGPU:::rng_fill("curand", 1000, 99, 5, 2, streams = 2000, b = gpu)
  expect_identical(cur, as.vector(philoxDraws(1000, 99, 5, 2, streams = 2000)))
})

test_that("GPU and CPU derive the same doubles, integers and permutations", {
  skip_if_no_gpu()
  expect_identical(philoxDraws(500, 7, streams = 2000, type = "uniform", backend = "gpu"),
                   philoxDraws(500, 7, streams = 2000, type = "uniform", backend = "cpu"))
  expect_identical(philoxDraws(500, 7, streams = 2000, type = "integer", max = 3 * 2^30, backend = "gpu"),
                   philoxDraws(500, 7, streams = 2000, type = "integer", max = 3 * 2^30, backend = "cpu"))
  expect_identical(philoxShuffle(1000, 7, streams = 3000, backend = "gpu"),
                   philoxShuffle(1000, 7, streams = 3000, backend = "cpu"))
})

test_that("a bad `type` is a classed error that names the argument", {
  expect_error(philoxDraws(3, 1, type = "normal"), "`type` must be one of", class = "sysbioGPU_error_input")
  expect_error(philoxDraws(3, 1, type = NA_character_), "`type`", class = "sysbioGPU_error_input")
})
