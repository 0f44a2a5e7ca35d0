# Kinetic laws that are not mass action on the GPU engine: the device
# evaluates the laws' programs with the CPU engine's code
# (src/lassie/lassie_common.h), in the explicit steps (the fused kernel and
# the kernels per stage) and in the implicit ones (the device's BDF, rates
# and finite-difference Jacobian; the host's).  The device's exp, log and
# pow are not glibc's, so the GPU agrees with the CPU to rounding, not to
# the bit: within 1e-9 relative here.  Both are checked against closed
# forms of each law's decay.

# One model of six independent decays in a compartment of size 2 (each law
# an amount per time: the concentrations change by law / 2), each with a
# closed form: Michaelis-Menten (A), Hill of order 2 by pow (B), zero order
# switched by a piecewise of relations and logic (C; it reads B too), a law
# of exp and ln (D: exp(-ln(1 + D)) = 1 / (1 + D)), pow 1.5 (E), and mass
# action (F).
laws_params <- c(V = 1.5, Km = 0.7, Vh = 1.2, K = 0.8, k1 = 1, k2 = 0.1, thr = 1, Vd = 0.3,
                 ke = 0.4, kf = 0.3)
laws_initial <- c(A = 3, B = 2, C = 3, D = 1.5, E = 2, F = 1)
laws_model <- function() {
  law <- function(...) ap("times", ci("cell"), ...)
  pw <- function(x, n) ap("power", x, cn(n))
  f <- sbml_model(2, laws_initial, laws_params, list(
    rA = list(re = "A", law = law(ci("V"), ap("divide", ci("A"), ap("plus", ci("Km"), ci("A"))))),
    rB = list(re = "B", law = law(ci("Vh"), ap("divide", pw(ci("B"), 2), ap("plus", pw(ci("K"), 2), pw(ci("B"), 2))))),
    rC = list(re = "C", mod = "B",
              law = law(paste0("<piecewise><piece>", ci("k1"),
                               ap("and", ap("gt", ci("C"), ci("thr")), ap("geq", ci("B"), cn(0))),
                               "</piece><otherwise>", ci("k2"), "</otherwise></piecewise>"))),
    rD = list(re = "D", law = law(ci("Vd"), ap("exp", ap("minus", ap("ln", ap("plus", cn(1), ci("D"))))))),
    rE = list(re = "E", law = law(ci("ke"), pw(ci("E"), 1.5))),
    rF = list(re = "F", law = law(ci("kf"), ci("F")))))
  readSBML(f)
}

# Lambert's W (principal branch, z >= 0) by Halley's iteration
lambert_w0 <- function(z) {
  w <- log1p(z)
  for (i in 1:60) {
    ew <- exp(w)
    f <- w * ew - z
    w <- w - f / (ew * (w + 1) - (w + 2) * f / (2 * w + 2))
  }
  w
}

# The closed forms at times tt, every law sped up c times, initial values x0
laws_exact <- function(tt, c, x0) {
  p <- as.list(laws_params)
  s <- c * tt
  tc <- (x0[["C"]] - p$thr) / p$k1   # C reaches thr
  a0 <- x0[["D"]] + x0[["D"]]^2 / 2
  hb <- x0[["B"]] - p$K^2 / x0[["B"]] - p$Vh * s
  cbind(A = p$Km * lambert_w0(x0[["A"]] / p$Km * exp((x0[["A"]] - p$V * s) / p$Km)),
        B = (hb + sqrt(hb^2 + 4 * p$K^2)) / 2,
        C = ifelse(s <= tc, x0[["C"]] - p$k1 * s, p$thr - p$k2 * (s - tc)),
        D = -1 + sqrt(1 + 2 * (a0 - p$Vd * s)),
        E = (x0[["E"]]^-0.5 + 0.5 * p$ke * s)^-2,
        F = x0[["F"]] * exp(-p$kf * s))
}

# the largest relative difference of b from a over the species, each
# species' floor a millionth of its largest value
laws_rel <- function(a, b) {
  sp <- names(laws_initial)
  fl <- 1e-6 * apply(abs(a[, sp, drop = FALSE]), 2, max)
  max(abs(b[, sp] - a[, sp]) / pmax(abs(a[, sp]), rep(fl, each = nrow(a))))
}

# a batch of four: every law sped up c times, the initial values scaled
laws_batch <- function(m) {
  c <- c(0.5, 1, 1.5, 0.8)
  u <- c(1, 0.9, 1.1, 1.2)
  list(c = c, rates = outer(c, m$rates), initial = outer(u, m$initial))
}

laws_check <- function(m, tt, method, opts, label) {
  bt <- laws_batch(m)
  run <- function(backend) {
    with_opts(opts, lassieSimulate(m, tt, rates = bt$rates, initial = bt$initial, method = method,
                                       rtol = 1e-10, atol = 1e-12, backend = backend, verbose = FALSE))
  }
  cpu <- run("cpu")
  gpu <- run("gpu")
  expect_equal(runInfo(gpu)$backend, "gpu")
  for (s in seq_along(bt$c)) {
    lab <- paste(label, "set", s)
    expect_lt(laws_rel(cpu[[s]], gpu[[s]]), 1e-9, label = lab)
    ex <- laws_exact(tt, bt$c[s], bt$initial[s, ])
    expect_lt(laws_rel(ex, cpu[[s]]), 1e-6, label = paste(lab, "CPU vs closed form"))
    expect_lt(laws_rel(ex, gpu[[s]]), 1e-6, label = paste(lab, "GPU vs closed form"))
  }
  invisible(list(cpu = cpu, gpu = gpu))
}

test_that("the closed forms solve the laws' equations", {
  # (the oracle's own check: its derivative is the laws' right-hand side)
  tt <- seq(0, 4, by = 0.25)
  x0 <- laws_initial
  h <- 1e-5
  d <- (laws_exact(tt + h, 1, x0) - laws_exact(tt - h, 1, x0)) / (2 * h)
  x <- laws_exact(tt, 1, x0)
  p <- as.list(laws_params)
  rhs <- cbind(A = -p$V * x[, "A"] / (p$Km + x[, "A"]), B = -p$Vh * x[, "B"]^2 / (p$K^2 + x[, "B"]^2),
               C = -ifelse(x[, "C"] > p$thr, p$k1, p$k2), D = -p$Vd / (1 + x[, "D"]),
               E = -p$ke * x[, "E"]^1.5, F = -p$kf * x[, "F"])
  keep <- abs(tt - (x0[["C"]] - p$thr) / p$k1) > 2 * h   # C's kink
  expect_lt(max(abs(d[keep, ] - rhs[keep, ])), 1e-6)
  expect_equal(unname(x[1, ]), unname(x0), tolerance = 1e-14)
})

test_that("kinetic laws on the GPU: explicit steps as the CPU's and the closed forms", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  m <- laws_model()
  expect_equal(sum(m$laws$start >= 0L), 5L)   # rF is mass action
  tt <- seq(0, 4, by = 0.5)
  for (fused in c(TRUE, FALSE)) {
    for (method in c("dopri5", "rkf45", "auto")) {
      laws_check(m, tt, method, list(sysbioGPU.lassieFused = fused),
                 paste(method, if (fused) "fused" else "per stage"))
    }
  }
})

test_that("kinetic laws on the GPU: implicit steps on the device and on the host", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  m <- laws_model()
  tt <- seq(0, 4, by = 0.5)
  # the device's team of one lane, of a warp (lanes take reactions), the host's
  for (opts in list(list(sysbioGPU.lassieDeviceBDF = TRUE),
                    list(sysbioGPU.lassieDeviceBDF = TRUE, sysbioGPU.lassieBdfTeam = 32L),
                    list(sysbioGPU.lassieDeviceBDF = FALSE))) {
    r <- laws_check(m, tt, "bdf", opts, paste("bdf", paste(names(opts), unlist(opts), collapse = " ")))
    expect_true(all(vapply(r$gpu, function(o) attr(o, "stats")[["implicitSteps"]], 0) > 0))
  }
})

test_that("a stiff law of arithmetic alone: the device's implicit steps give the CPU's bits", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  # A <-> B by fast Michaelis-Menten laws, both ways (equilibrium A = B):
  # stiff once near equilibrium, where "auto" switches to BDF.  The laws
  # are + * / alone, which the device rounds as the host does, so the
  # results and the solver's statistics are the CPU's bit for bit: a
  # device Jacobian (the laws' finite differences) that served Newton
  # worse would change the steps
  f <- sbml_model(1, c(A = 2, B = 0), c(V = 1e6, Km = 1e3),
                  list(f = list(re = "A", pr = "B", law = ap("divide", ap("times", ci("V"), ci("A")),
                                                             ap("plus", ci("Km"), ci("A")))),
                       b = list(re = "B", pr = "A", law = ap("divide", ap("times", ci("V"), ci("B")),
                                                             ap("plus", ci("Km"), ci("B"))))))
  m <- readSBML(f)
  tt <- c(0, 0.001, 0.01, 0.1, 1, 10)
  rates <- outer(c(1, 0.5, 2), m$rates)
  for (dev in c(TRUE, FALSE)) {
    for (method in c("auto", "bdf")) {
      run <- function(backend) {
        with_opts(list(sysbioGPU.lassieDeviceBDF = dev),
                      lassieSimulate(m, tt, rates = rates, method = method, rtol = 1e-10, atol = 1e-12,
                                     backend = backend, verbose = FALSE))
      }
      cpu <- run("cpu")
      gpu <- run("gpu")
      expect_equal(runInfo(gpu)$backend, "gpu")
      for (s in 1:3) {
        lab <- paste(method, "device BDF", dev, "set", s)
        sc <- attr(cpu[[s]], "stats")
        sg <- attr(gpu[[s]], "stats")
        expect_identical(sg, sc, label = lab)
        expect_identical(gpu[[s]][, c("A", "B")], cpu[[s]][, c("A", "B")], label = lab)
        expect_gt(sg[["implicitSteps"]], 0)
        if (method == "auto") expect_gt(sg[["switches"]], 0)
        # the total stays 2; by t = 10 A - B has decayed (at rate about
        # 2 V / Km per unit of the laws' factor) far below the tolerance
        expect_lt(max(abs(rowSums(gpu[[s]][, c("A", "B")]) - 2)), 1e-9)
        expect_lt(abs(gpu[[s]][6, "A"] - 1), 1e-8)
      }
    }
  }
})

test_that("two GPUs share a batch of a model with kinetic laws, bit for bit as one", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  skip_if_no_gpu()
  # (two GPUs, or one GPU's two shares: gpu_pair())
  m <- laws_model()
  bt <- laws_batch(m)
  run <- function(device, method) {
    with_opts(list(sysbioGPU.lassieDeviceBDF = TRUE),
                  lassieSimulate(m, seq(0, 4, by = 0.5), rates = bt$rates, initial = bt$initial, method = method,
                                 rtol = 1e-10, atol = 1e-12, backend = "gpu", device = device, verbose = FALSE))
  }
  for (method in c("auto", "bdf")) {
    one <- run(0L, method)
    two <- on_devices(run(gpu_pair(), method))
    for (s in seq_along(bt$c)) {
      expect_identical(unclass(two[[s]])[, ], unclass(one[[s]])[, ], label = paste(method, "set", s))
      expect_identical(attr(two[[s]], "stats"), attr(one[[s]], "stats"))
    }
  }
})
