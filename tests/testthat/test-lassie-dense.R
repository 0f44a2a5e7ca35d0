# lassieSimulate() steps by accuracy and interpolates the output times:
# Dormand-Prince 5(4)'s continuous extension for the explicit steps, the
# BDF history's polynomial for the implicit ones; and a simulation that
# fails inside a batch is reported per simulation.

sim <- function(m, times, ...) lassieSimulate(m, times, backend = "cpu", threads = 1, verbose = FALSE, ...)

# Rooted trees up to order p as nested lists of children, each with its
# order and gamma; duplicates (children in another order) are harmless.
rk_trees <- function(p) {
  by_order <- list(list(list(kids = list(), order = 1L, gamma = 1)))
  forests <- function(n) {   # ordered lists of trees whose orders sum to n
    if (n == 0L) return(list(list()))
    out <- list()
    for (k in seq_len(n)) for (t in by_order[[k]]) for (f in forests(n - k)) out[[length(out) + 1L]] <- c(list(t), f)
    out
  }
  for (n in seq_len(p)[-1]) {
    by_order[[n]] <- lapply(forests(n - 1L), function(f) {
      list(kids = f, order = n, gamma = n * prod(vapply(f, `[[`, 0, "gamma")))
    })
  }
  unlist(by_order, recursive = FALSE)
}
# Stage vector of a tree's elementary weight: prod over children of A u(child)
rk_u <- function(t, A) {
  u <- rep(1, nrow(A))
  for (k in t$kids) u <- u * as.vector(A %*% rk_u(k, A))
  u
}
# Largest violation of the conditions sum_i B_i u_i(t) = theta^|t| / gamma(t)
# over the trees of order <= p
rk_defect <- function(B, A, p, theta = 1) {
  max(vapply(rk_trees(p), function(t) abs(sum(B * rk_u(t, A)) - theta^t$order / t$gamma), 0))
}

test_that("Dormand-Prince 5(4): the step has order 5, the estimate 4, the continuous extension 4", {
  # the tableau (Dormand and Prince 1980) and the dense-output constants
  # (Hairer, Norsett and Wanner, Solving ODEs I, II.6) as published, the
  # conditions from the rooted trees: an independent check of the numbers
  # written in src/lassie/lassie_common.h
  A <- matrix(0, 7, 7)
  A[2, 1] <- 1 / 5
  A[3, 1:2] <- c(3 / 40, 9 / 40)
  A[4, 1:3] <- c(44 / 45, -56 / 15, 32 / 9)
  A[5, 1:4] <- c(19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729)
  A[6, 1:5] <- c(9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656)
  A[7, 1:6] <- c(35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
  b <- A[7, ]
  E <- c(71 / 57600, 0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)
  d <- c(-12715105075 / 11282082432, 0, 87487479700 / 32700410799, -10690763975 / 1880347072,
         701980252875 / 199316789632, -1453857185 / 822651844, 69997945 / 29380423)
  expect_lt(rk_defect(b, A, 5), 1e-14)
  expect_gt(rk_defect(b, A, 6), 1e-4)          # and not 6
  expect_lt(rk_defect(b - E, A, 4), 1e-14)     # the embedded solution
  expect_gt(rk_defect(b - E, A, 5), 1e-5)
  # y(t0 + theta h) = y0 + theta r1 + theta (1 - theta) r2 + theta^2 (1 - theta) r3
  #                  + theta^2 (1 - theta)^2 r4 with r1 = h b.k, r2 = h k1 - r1,
  # r3 = r1 - h k7 - r2, r4 = h d.k: weights B(theta) on the stages
  e1 <- c(1, rep(0, 6)); e7 <- c(rep(0, 6), 1)
  B <- function(th) th * b + th * (1 - th) * (e1 - b) + th^2 * (1 - th) * (2 * b - e1 - e7) + th^2 * (1 - th)^2 * d
  for (th in c(0.1, 0.37, 0.5, 0.8, 1)) expect_lt(rk_defect(B(th), A, 4, th), 1e-14, label = th)
  expect_gt(rk_defect(B(0.5), A, 5, 0.5), 1e-5)
  # a typo in one constant breaks the order: the check can fail
  d2 <- d; d2[4] <- d2[4] * (1 + 1e-6)
  B2 <- function(th) th * b + th * (1 - th) * (e1 - b) + th^2 * (1 - th) * (2 * b - e1 - e7) + th^2 * (1 - th)^2 * d2
  expect_gt(rk_defect(B2(0.5), A, 1, 0.5), 1e-8)
})

test_that("samples between steps follow a closed form (the interpolants, explicit and BDF)", {
  # A -> B -> C with k = 1.3, 0.4: 2,001 samples, most of them inside steps
  m <- reactionModel(rbind(c(1, 0, 0), c(0, 1, 0)), rbind(c(0, 1, 0), c(0, 0, 1)),
                     rates = c(1.3, 0.4), initial = c(1, 0, 0), species = c("A", "B", "C"))
  tt <- seq(0, 8, length.out = 2001)
  a <- exp(-1.3 * tt); b <- 1.3 / (0.4 - 1.3) * (exp(-1.3 * tt) - exp(-0.4 * tt))
  for (meth in c("dopri5", "auto", "bdf")) {
    out <- sim(m, tt, method = meth, rtol = 1e-8, atol = 1e-14)
    expect_lt(attr(out, "stats")[["steps"]], 500, label = meth)
    tol <- if (meth == "bdf") 1e-6 else 1e-8
    expect_lt(max(abs(out[, "A"] - a)), tol, label = meth)
    expect_lt(max(abs(out[, "B"] - b)), tol, label = meth)
  }
  # the last row is the state where the last step lands
  expect_equal(unname(sim(m, c(0, 8), method = "dopri5", rtol = 1e-8)[2, "A"]), exp(-1.3 * 8), tolerance = 1e-6)
})

test_that("1,000 output times cost at most 1.5x the steps of 10, every sample within 1e-5 of a tight run", {
  # the reference: LASSIE's RKF45 at rtol 1e-10, stepping onto each output
  # time (no interpolation)
  for (nm in c("Repressilator", "Haugh2b")) {
    m <- readBioNetGen(lassie_extdata(paste0(nm, ".net")))
    tend <- max(read_gdat(lassie_extdata(paste0(nm, ".gdat")))$time)
    t10 <- seq(0, tend, length.out = 10); t1000 <- seq(0, tend, length.out = 1000)
    ref <- sim(m, t1000, method = "rkf45", rtol = 1e-10)
    expect_gte(attr(ref, "stats")[["steps"]], 999)
    N <- length(m$species)
    for (meth in c("auto", "dopri5", "bdf")) {
      s10 <- attr(sim(m, t10, method = meth), "stats")[["steps"]]
      o <- sim(m, t1000, method = meth)
      expect_lte(attr(o, "stats")[["steps"]], 1.5 * s10, label = paste(nm, meth))
      X <- o[, 1 + seq_len(N)]; R <- ref[, 1 + seq_len(N)]
      # relative, with an absolute floor of 10 atol (1e-11) for species near 0;
      # BDF's own global error is larger (we measure up to 6.4e-5)
      rel <- if (meth == "bdf") 2e-4 else 1e-5
      expect_true(all(abs(X - R) <= rel * abs(R) + 1e-11), label = paste(nm, meth))
    }
  }
  # method = "rkf45" keeps LASSIE's scheme: a step onto every output time
  m <- readBioNetGen(lassie_extdata("Haugh2b.net"))
  expect_gte(attr(sim(m, seq(0, 50, length.out = 1000), method = "rkf45"), "stats")[["steps"]], 999)
})

test_that("a simulation that fails inside a batch is reported with its status; the others are unharmed", {
  rob <- robertson_model()
  tt <- c(0, 0.4, 4, 40)
  # set 2 is stiff: 60 attempts are not enough; sets 1 and 3 are slow
  Kr <- rbind(rob$rates * 1e-9, rob$rates, rob$rates * 1e-8)
  expect_warning(b <- lassieSimulate(rob, tt, rates = Kr, maxSteps = 60, backend = "cpu", threads = 2,
                                     verbose = FALSE),
                 "1 of 3 simulation\\(s\\) failed.*simulation 2: `maxSteps` \\(60\\) exhausted at t = ",
                 class = "sysbioGPU_warning_lassie")
  expect_s3_class(b, "lassieBatch")
  expect_identical(attr(b, "status"), c(0L, 1L, 0L))
  expect_match(attr(b, "messages")[2], "^`maxSteps` \\(60\\) exhausted at t = [0-9.e-]+$")
  expect_identical(attr(b, "messages")[c(1, 3)], c("", ""))
  for (s in c(1, 3)) {
    one <- sim(rob, tt, rates = Kr[s, ], maxSteps = 60)
    expect_identical(lassie_core(b[s]), lassie_core(one))
  }
  # its rows up to where it stopped are kept, the rest are NaN
  x2 <- unclass(b[[2]])[, -1]
  expect_equal(unname(x2[1, 1:3]), unname(rob$initial))
  expect_true(all(is.nan(x2[nrow(x2), ])))
  expect_equal(attr(b[[2]], "istate")[1], -1L)
  df <- as.data.frame(b)
  expect_equal(unique(df$status[df$simulation == 2]), 1L)
  expect_equal(attr(b, "info")$failed, 1L)
  # alone, the same simulation is an error
  expect_error(sim(rob, tt, rates = Kr[2, ], maxSteps = 60), "exhausted at t = ",
               class = "sysbioGPU_error_numeric")
  # a solution that blows up (2A -> 3A, A' = k A^2, A(0) = 1: at t = 1 / k)
  # makes the explicit step size underflow: status 2, the other set runs on
  bl <- reactionModel(matrix(2), matrix(3), rates = 1, initial = 1, species = "A")
  expect_warning(bb <- lassieSimulate(bl, c(0, 0.5, 2), rates = cbind(c(1, 0.1)), method = "dopri5",
                                      backend = "cpu", verbose = FALSE),
                 "simulation 1: step size underflow", class = "sysbioGPU_warning_lassie")
  expect_identical(attr(bb, "status"), c(2L, 0L))
  expect_equal(unname(bb[[1]][2, "A"]), 2, tolerance = 1e-6)   # 1 / (1 - t) at t = 0.5
  expect_equal(unname(bb[[2]][, "A"]), 1 / (1 - 0.1 * c(0, 0.5, 2)), tolerance = 1e-6)
})

test_that("the GPU's steps are the CPU's, bit for bit, output rows, switches and failures included", {
  skip_if_no_gpu()
  m <- readBioNetGen(lassie_extdata("Haugh2b.net"))
  set.seed(4)
  K <- t(replicate(9, m$rates * 2^runif(length(m$rates), -1, 1)))
  # "auto" too: the stiffness estimate is summed in the same order on both,
  # so a set switches to implicit steps at the same step and the host's
  # implicit steps continue from the device's bits (Haugh2b switches once)
  for (meth in c("dopri5", "rkf45", "auto")) {
    for (tt in list(seq(0, 50, by = 5), seq(0, 50, length.out = 997))) {
      run <- function(backend) lassieSimulate(m, tt, rates = K, method = meth, backend = backend,
                                              verbose = FALSE)
      expect_identical(lassie_core(run("gpu")), lassie_core(run("cpu")), label = meth)
    }
  }
  rob <- robertson_model()
  tr <- c(0, 10^seq(-4, 4, by = 0.5))
  expect_identical(lassie_core(lassieSimulate(rob, tr, backend = "gpu", verbose = FALSE)),
                   lassie_core(sim(rob, tr)))
  # a failure on the device (maxSteps, explicit) and one on the host's
  # implicit steps after the device's hand-over, each with its status
  rob <- robertson_model()
  Kr <- rbind(rob$rates * 1e-9, rob$rates, rob$rates * 1e-8)
  for (meth in c("dopri5", "auto")) {
    run <- function(backend) {
      suppressWarnings(lassieSimulate(rob, c(0, 0.4, 4, 40), rates = Kr, maxSteps = 60, method = meth,
                                      backend = backend, verbose = FALSE))
    }
    g <- run("gpu"); c <- run("cpu")
    expect_identical(attr(g, "status"), c(0L, 1L, 0L), label = meth)
    expect_identical(attr(g, "messages"), attr(c, "messages"), label = meth)
    expect_lt(max_rel(unclass(g[[1]])[, -1], unclass(c[[1]])[, -1], floor = 1e-300), 1e-9)
  }
})

test_that("the GPU's fused explicit steps and its per-stage kernels both give the CPU's bits", {
  skip_if_no_gpu()
  # k_explicit (a simulation's stages in a block's shared memory, a block
  # of 64 threads for 40 species, 256 for 300) runs small models by
  # default, option sysbioGPU.lassieFused = FALSE the kernels per stage,
  # TRUE k_explicit wherever a block fits (1,000 species; 3,000 do not
  # fit: per stage)
  ring <- function(n, seed) {
    set.seed(seed)
    R <- matrix(0, n, n); P <- matrix(0, n, n)
    R[cbind(1:n, 1:n)] <- 1
    P[cbind(1:n, c(2:n, 1))] <- 1
    j <- sample(n, n %/% 3)   # some A + B -> C
    R[cbind(j, (j + 7) %% n + 1)] <- 1
    reactionModel(R, P, rates = 10^runif(n, -2, 0.5), initial = runif(n), species = paste0("S", 1:n))
  }
  fused_off <- function(code, mode = FALSE) {
    old <- options(sysbioGPU.lassieFused = mode)
    on.exit(options(old))
    force(code)
  }
  for (n in c(40, 300, 1000, 3000)) {
    m <- ring(n, n)
    K <- t(replicate(if (n < 1000) 6 else 2, m$rates * 2^runif(n, -1, 1)))
    tt <- seq(0, 2, length.out = 41)
    for (meth in c("auto", "rkf45")) {
      run <- function(backend) lassieSimulate(m, tt, rates = K, method = meth, backend = backend, verbose = FALSE)
      cpu <- lassie_core(run("cpu"))
      expect_identical(lassie_core(run("gpu")), cpu, label = paste(n, meth))
      expect_identical(lassie_core(fused_off(run("gpu"))), cpu, label = paste(n, meth, "per stage"))
      expect_identical(lassie_core(fused_off(run("gpu"), TRUE)), cpu, label = paste(n, meth, "fused"))
    }
  }
  # switching both ways (explicit -> implicit -> explicit) through the
  # fused kernel and the per-stage kernels
  cat_m <- reactionModel(
    reactants = rbind(c(1, 0, 1, 0, 0), c(0, 1, 1, 0, 0), c(0, 0, 1, 0, 0), c(0, 0, 0, 1, 0), c(0, 0, 0, 0, 1)),
    products  = rbind(c(0, 1, 1, 0, 0), c(1, 0, 1, 0, 0), c(0, 0, 0, 0, 0), c(0, 0, 0, 0, 1), c(0, 0, 0, 1, 0)),
    rates = c(1e4, 5e3, 1, 0.2, 0.1), initial = c(1e-6, 0, 1, 1, 0), species = c("A", "B", "C", "D", "E"))
  Kc <- rbind(cat_m$rates, cat_m$rates * c(1, 1, 2, 1, 1), cat_m$rates / 100)
  tc <- seq(0, 30, by = 0.5)
  run <- function(backend) lassieSimulate(cat_m, tc, rates = Kc, backend = backend, verbose = FALSE)
  g <- run("gpu")
  expect_gt(sum(vapply(g, function(o) attr(o, "stats")[["switches"]], 0)), 1)
  expect_identical(lassie_core(g), lassie_core(run("cpu")))
  expect_identical(lassie_core(fused_off(run("gpu"))), lassie_core(g))
})
