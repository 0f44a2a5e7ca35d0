# The implicit (BDF) steps on the device: each
# simulation of a batch factors its own I - gamma J with the CPU's sparse LU
# code (src/lassie/lassie_bdf.h), so the GPU gives the CPU engine's bits,
# values and solver statistics alike, whatever the simulation's mode.
# The CPU engine is pinned to independent oracles in test-lassieSimulate.R
# (BioNetGen's trajectories, closed forms); here the GPU is also checked
# against BioNetGen's Haugh2b trajectory directly.

gpu_vs_cpu <- function(m, tt, ...) {
  a <- lassieSimulate(m, tt, backend = "cpu", threads = 2L, verbose = FALSE, ...)
  b <- lassieSimulate(m, tt, backend = "gpu", verbose = FALSE, ...)
  list(cpu = a, gpu = b)
}

# A <-> B catalysed by C, fast while C lasts (C decays): stiff at first,
# then calm, so a simulation goes RKF45 -> BDF -> RKF45; slowed down 100x it
# never turns stiff.
catalysed_model <- function() {
  reactionModel(
    reactants = rbind(c(1, 0, 1, 0, 0), c(0, 1, 1, 0, 0), c(0, 0, 1, 0, 0), c(0, 0, 0, 1, 0), c(0, 0, 0, 0, 1)),
    products  = rbind(c(0, 1, 1, 0, 0), c(1, 0, 1, 0, 0), c(0, 0, 0, 0, 0), c(0, 0, 0, 0, 1), c(0, 0, 0, 1, 0)),
    rates = c(1e4, 5e3, 1, 0.2, 0.1), initial = c(1e-6, 0, 1, 1, 0),
    species = c("A", "B", "C", "D", "E"))
}

test_that("the implicit steps go to the device only for batches that keep it busy", {
  pays <- sysbioGPU:::lassie_device_bdf_pays
  # a warp per simulation (32 species or more): 8 simulations per host
  # thread or more; teams smaller than a warp: 32; models of up to 1,024
  # species (the crossover measured in inst/bench/lassie-bdf.R, BENCHMARKS.md)
  expect_false(pays(504, 1, 16))
  expect_false(pays(504, 127, 16))
  expect_true(pays(504, 128, 16))
  expect_true(pays(32, 16, 2))
  expect_false(pays(32, 15, 2))
  expect_false(pays(31, 32, 2))
  expect_true(pays(12, 64, 2))
  expect_false(pays(12, 63, 2))
  expect_true(pays(12, 20000, 16))
  expect_true(pays(1024, 64, 1))
  expect_false(pays(1025, 1e6, 1))
  expect_true(pays(504, 16, 0))   # threads below 1 count as 1
})

# The tests below check the device's implicit steps themselves: their small
# batches would take the host's (the same code, so the same bits), so this
# file forces the device's (the caller's setting is restored at its end).
device_bdf_before <- options(sysbioGPU.lassieDeviceBDF = TRUE)

test_that("stiff batches: the device's implicit steps give the CPU's bits", {
  skip_if_no_gpu()
  rob <- robertson_model()
  set.seed(5)
  K <- t(replicate(8, rob$rates * 2^runif(3, -1, 1)))
  tt <- c(0, 0.4, 4, 40, 400, 4000)
  # also 200 output times: most rows fall inside implicit steps and are
  # interpolated from the BDF history (the steps go by accuracy to the end)
  for (meth in c("bdf", "auto")) for (tts in list(tt, c(0, 10^seq(-5, 4, length.out = 199)))) {
    r <- gpu_vs_cpu(rob, tts, rates = K, method = meth)
    expect_gt(sum(vapply(r$gpu, function(o) attr(o, "stats")[["implicitSteps"]], 0)), 0)
    expect_identical(lassie_core(r$gpu), lassie_core(r$cpu), label = meth)
  }
  # a warp's lanes on a model of 3 species (most lanes idle): the same bits
  r2 <- with_opts(list(sysbioGPU.lassieBdfTeam = 32),
                  lassieSimulate(rob, tt, rates = K, method = "bdf", backend = "gpu", verbose = FALSE))
  r1 <- lassieSimulate(rob, tt, rates = K, method = "bdf", backend = "cpu", threads = 2L, verbose = FALSE)
  expect_identical(lassie_core(r2), lassie_core(r1))
  # the host's implicit steps agree within 1e-9
  h <- with_opts(list(sysbioGPU.lassieDeviceBDF = FALSE),
                 lassieSimulate(rob, tt, rates = K, method = "bdf", backend = "gpu", verbose = FALSE))
  for (s in seq_along(h)) expect_lt(max_rel(h[[s]][, -1], r1[[s]][, -1], floor = 1e-300), 1e-9)

  # Chen 2009 ErbB (504 species, 1,339 reactions: a warp per simulation,
  # the LU's fill in the minimum-degree order)
  skip_if_not(sbmlAvailable(), "no libSBML")
  chen <- readSBML(lassie_extdata("Chen2009_ErbB_A431.xml.gz"))
  set.seed(11)
  Kc <- t(replicate(3, chen$rates * 2^runif(length(chen$rates), -1, 1)))
  rc <- gpu_vs_cpu(chen, seq(0, 600, by = 60), rates = Kc, method = "bdf")
  expect_identical(lassie_core(rc$gpu), lassie_core(rc$cpu))
  # rows of 32 terms or more (Chen's L has rows up to 175) are summed by the
  # warp in 32 partial sums and a tree; half a warp per simulation sums
  # them in turn: the same bits
  r16 <- with_opts(list(sysbioGPU.lassieBdfTeam = 16),
                   lassieSimulate(chen, seq(0, 600, by = 60), rates = Kc[1:2, ], method = "bdf",
                                  backend = "gpu", verbose = FALSE))
  expect_identical(lassie_core(r16), lassie_core(rc$cpu[1:2]))
  # the vectors a warp keeps in shared memory, tier by tier (larger models
  # get the lower ones; 4: the Newton iterate too, its norm's squares in
  # the rates' place): the same bits
  for (tier in c(0, 2, 3)) {
    rt <- with_opts(list(sysbioGPU.lassieBdfSharedVectors = tier),
                    lassieSimulate(chen, seq(0, 600, by = 60), rates = Kc[1:2, ], method = "bdf",
                                   backend = "gpu", verbose = FALSE))
    expect_identical(lassie_core(rt), lassie_core(rc$cpu[1:2]), label = paste("shared-memory tier", tier))
  }
})

test_that("the GPU's implicit steps reproduce BioNetGen's Haugh2b trajectory", {
  skip_if_no_gpu()
  m <- readBioNetGen(lassie_extdata("Haugh2b.net"))
  g <- read_gdat(lassie_extdata("Haugh2b.gdat"))
  out <- lassieSimulate(m, g$time, rtol = 1e-8, method = "bdf", backend = "gpu", verbose = FALSE)
  expect_gt(attr(out, "stats")[["implicitSteps"]], 0)
  obs <- setdiff(colnames(g), "time")
  G <- as.matrix(g[, obs]); O <- out[, obs]
  # as test-lassieSimulate.R: BioNetGen's CVODE ran with atol 1e-8
  expect_true(all(abs(O - G) <= 1e-4 * abs(G) + 2e-8))
  big <- abs(G) > 1e-3 * max(abs(G))
  expect_lt(max(abs(O - G)[big] / abs(G)[big]), 1e-5)
})

test_that("each simulation switches on its own, on the device", {
  skip_if_no_gpu()
  m <- catalysed_model()
  sc <- c(1, 1e-2, 2, 1e-5, 0.5, 1)
  K <- t(vapply(sc, function(s) m$rates * c(s, s, 1, 1, 1), numeric(5)))
  tt <- seq(0, 100, by = 0.5)
  r <- gpu_vs_cpu(m, tt, rates = K)
  sw <- vapply(r$gpu, function(o) attr(o, "stats")[["switches"]], 0)
  # stiff ones go to BDF and back (2 switches or more); slow ones switch at
  # most once, late, when the dense output's steps grow to the stability
  # bound of the explicit steps (then stay: a few implicit steps to the end)
  expect_true(all(sw[sc >= 0.5] >= 2))
  expect_true(all(sw[sc < 0.5] <= 1))
  expect_identical(lassie_core(r$gpu), lassie_core(r$cpu))
  # the same on a warp a simulation, whose Gershgorin bound (the way back
  # to explicit steps) takes the species in the plan's order: the same
  # switches, the same bits
  rw <- with_opts(list(sysbioGPU.lassieBdfTeam = 32),
                  lassieSimulate(m, tt, rates = K, backend = "gpu", verbose = FALSE))
  expect_identical(vapply(rw, function(o) attr(o, "stats")[["switches"]], 0), sw)
  expect_identical(lassie_core(rw), lassie_core(r$cpu))
  # Haugh2b's batch (12 species: a lane per simulation) in automatic mode
  h <- readBioNetGen(lassie_extdata("Haugh2b.net"))
  set.seed(3)
  Kh <- t(replicate(40, h$rates * exp(runif(length(h$rates), -0.7, 0.7))))
  rh <- gpu_vs_cpu(h, seq(0, 50, 5), rates = Kh)
  expect_true(all(vapply(rh$gpu, function(o) attr(o, "stats")[["switches"]], 0) >= 1))
  expect_identical(lassie_core(rh$gpu), lassie_core(rh$cpu))
  # (40 simulations take teams of several lanes; one lane, pinned: the same)
  r1 <- with_opts(list(sysbioGPU.lassieBdfTeam = 1L),
                  lassieSimulate(h, seq(0, 50, 5), rates = Kh, backend = "gpu", verbose = FALSE))
  expect_identical(lassie_core(r1), lassie_core(rh$cpu))
})

test_that("teams sized launch by launch give the CPU's bits", {
  skip_if_no_gpu()
  # 8,000 Haugh2b simulations on one device: a lane each while most run,
  # then teams of 2 to 8 lanes as they finish (on a device of fewer than
  # 200 multiprocessors), whose simulations carry on from their last launch
  h <- readBioNetGen(lassie_extdata("Haugh2b.net"))
  set.seed(5)
  K <- t(replicate(8000, h$rates * 2^runif(length(h$rates), -1, 1)))
  tt <- seq(0, 50, 5)
  run <- function(opts) with_opts(opts, lassieSimulate(h, tt, rates = K, method = "auto", backend = "gpu",
                                                        device = 0L, verbose = FALSE, output = "array"))
  a <- run(list(sysbioGPU.lassieBdfTeam = NULL))
  one <- run(list(sysbioGPU.lassieBdfTeam = 1L))
  expect_gt(sum(attr(a, "stats")["implicitSteps", ]), 0)
  expect_identical(unclass(a)[, , ], unclass(one)[, , ])
  expect_identical(attr(a, "stats"), attr(one, "stats"))
  # the first and the last simulations against the CPU engine (each
  # simulation's arithmetic is its own, whatever the batch)
  idx <- c(1:8, 7993:8000)
  cpu <- lassieSimulate(h, tt, rates = K[idx, ], method = "auto", backend = "cpu", threads = 2L,
                        verbose = FALSE, output = "array")
  expect_identical(unclass(a)[, , idx], unclass(cpu)[, , ])
  expect_identical(attr(a, "stats")[, idx], attr(cpu, "stats"))
})

test_that("Ctrl-C stops the device's implicit steps inside a launch, and the device works afterwards", {
  skip_if_no_gpu()
  skip_on_os("windows")
  skip_if_not(sbmlAvailable(), "no libSBML")
  # method "bdf": the device takes every attempt in launches of 4,096 while
  # the host polls; an interrupt asks the launch to stop
  chen <- readSBML(lassie_extdata("Chen2009_ErbB_A431.xml.gz"))
  set.seed(11)
  K <- t(replicate(512, chen$rates * 2^runif(length(chen$rates), -1, 1)))
  # (about 3,500 steps a simulation: 2.5 s or more on an H100 when not
  # interrupted)
  long <- function() lassieSimulate(chen, seq(0, 36000, by = 600), rates = K, method = "bdf",
                                    rtol = 1e-8, backend = "gpu", verbose = FALSE)
  interrupt_after(0.5)
  t0 <- proc.time()[["elapsed"]]
  expect_error(long(), "interrupted by the user", class = "sysbioGPU_error_interrupted")
  expect_lt(proc.time()[["elapsed"]] - t0, 1.5)
  r <- gpu_vs_cpu(chen, seq(0, 60, by = 30), rates = K[1:2, ], method = "bdf")
  expect_identical(lassie_core(r$gpu), lassie_core(r$cpu))
})

test_that("a simulation failing in the implicit steps is reported as on the CPU; the others finish", {
  skip_if_no_gpu()
  rob <- robertson_model()
  Kr <- rbind(rob$rates * 1e-9, rob$rates * 1e-9, rob$rates * 1e-9, rob$rates)
  run <- function(backend) {
    expect_warning(b <- lassieSimulate(rob, c(0, 0.4, 4, 40), rates = Kr, method = "bdf",
                                       maxSteps = 60, backend = backend, threads = 2L, verbose = FALSE),
                   "1 of 4 simulation\\(s\\) failed.*simulation 4: `maxSteps` \\(60\\) exhausted at t = ",
                   class = "sysbioGPU_warning_lassie")
    b
  }
  g <- run("gpu"); c <- run("cpu")
  expect_identical(attr(g, "status"), c(0L, 0L, 0L, 1L))
  expect_identical(attr(g, "messages"), attr(c, "messages"))
  # the rows it reached, the NaN after them and the others' rows: the CPU's
  expect_identical(lassie_core(g), lassie_core(c))
})

options(device_bdf_before)
