# lassieSimulate()'s output is deSolve's: deSolve's own
# diagnostics(), plot(), subset() and summary() on it, and a batch's class.

two_state <- function() {
  reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)),
                rates = c(2, 1), initial = c(1, 0), species = c("A", "B"),
                observables = Matrix::Matrix(rbind(Total = c(1, 1)), sparse = TRUE))
}

test_that("one simulation is a deSolve object that deSolve's methods read", {
  skip_if_not_installed("deSolve")
  m <- two_state()
  tt <- seq(0, 3, by = 0.25)
  out <- lassieSimulate(m, tt, rtol = 1e-10, backend = "cpu", threads = 1, verbose = FALSE)
  expect_s3_class(out, "deSolve")
  expect_s3_class(out, "lassieSimulation")
  st <- attr(out, "stats")
  # diagnostics() prints our counters under deSolve's names
  d <- NULL
  txt <- capture.output(d <- deSolve::diagnostics(out))
  expect_true(any(grepl("Integration was successful", txt)))
  expect_equal(d$istate[c(2, 3, 13)], unname(as.integer(st[c("steps", "rhsEvaluations", "rejected")])))
  expect_equal(d$rstate[3], 3)
  # summary(): per variable, as for ode()'s output
  s <- summary(out)
  expect_equal(colnames(s), c("A", "B", "Total"))
  expect_equal(s["Max.", "A"], 1)
  expect_equal(s["N", "B"], length(tt))
  # subset(): by variable and by a condition on the data
  expect_equal(as.vector(subset(out, select = "B")), unname(out[, "B"]))
  sb <- subset(out, time > 1, select = c("A", "Total"))
  expect_equal(unname(sb[, 1]), unname(out[out[, "time"] > 1, "A"]))
  expect_equal(attr(sb, "times"), tt[tt > 1])
  # against ode() with an independent right-hand side, through the same
  # deSolve methods: 2-state A <-> B has A(t) = 1/3 + 2/3 exp(-3 t)
  ref <- deSolve::ode(c(A = 1, B = 0), tt, function(t, y, p) {
    v <- c(2 * y[1], y[2]); list(c(-v[1] + v[2], v[1] - v[2]), Total = sum(y))
  }, NULL, rtol = 1e-10, atol = 1e-12)
  expect_equal(summary(out)[, "A"], summary(ref)[, "A"], tolerance = 1e-7)
  expect_equal(unname(out[, "A"]), 1 / 3 + 2 / 3 * exp(-3 * tt), tolerance = 1e-8)
})

test_that("plot(out, out2, obs =) works as deSolve's, conserved totals drawn flat", {
  skip_if_not_installed("deSolve")
  m <- two_state()
  tt <- seq(0, 3, by = 0.1)
  out <- lassieSimulate(m, tt, backend = "cpu", threads = 1, verbose = FALSE)
  out2 <- lassieSimulate(m, tt, rates = c(1, 1), backend = "cpu", threads = 1, verbose = FALSE)
  ref <- deSolve::ode(c(A = 1, B = 0), tt, function(t, y, p) list(c(-y[1], y[1]), Total = sum(y)), NULL)
  pdf(NULL)
  on.exit(grDevices::dev.off())
  obs <- data.frame(time = c(1, 2), A = c(0.4, 0.35))
  expect_silent(plot(out, out2, ref, obs = obs, which = c("A", "B")))
  # the default panel is the observable Total = A + B, constant up to
  # round-off: its y range is +-5% around 1, not its last digits
  plot(out)
  expect_equal(graphics::par("usr")[3:4], c(0.95, 1.05) + c(-0.004, 0.004), tolerance = 1e-3)
  plot(out, which = "A")
  expect_lt(graphics::par("usr")[3], 0.5)      # a moving series keeps its own range
  expect_error(plot(out, which = "Z"), "unknown columns: Z", class = "sysbioGPU_error_input")
  # without deSolve: base-graphics panels, the total flat as well
  sysbioGPU:::lassie_panels(out, "Total", list())
  expect_equal(graphics::par("usr")[3:4], c(0.95, 1.05) + c(-0.004, 0.004), tolerance = 1e-3)
  expect_error(sysbioGPU:::lassie_panels(out, "A", list(out2)), "needs the deSolve package",
               class = "sysbioGPU_error_input")
})

test_that("a batch is a lassieBatch with status, info, long data and plots", {
  m <- two_state()
  tt <- c(0, 0.5, 1, 2)
  k <- cbind(c(0.5, 1, 2, 4), 1)
  b <- lassieSimulate(m, tt, rates = k, backend = "cpu", threads = 1, verbose = FALSE)
  expect_s3_class(b, "lassieBatch")
  expect_length(b, 4L)
  expect_equal(attr(b, "status"), integer(4))
  info <- attr(b, "info")
  expect_equal(info$simulations, 4)
  expect_equal(info$backend, "cpu")
  df <- as.data.frame(b)
  expect_equal(nrow(df), 4 * length(tt) * 3)
  expect_equal(names(df), c("simulation", "time", "variable", "value", "status"))
  one <- df[df$simulation == 3 & df$variable == "A", ]
  expect_equal(one$value, unname(b[[3]][, "A"]))
  expect_equal(one$time, tt)
  # each simulation against the closed form of A <-> B with rates (k1, 1)
  for (s in 1:4) {
    k1 <- k[s, 1]
    expect_equal(unname(b[[s]][, "A"]), (1 + k1 * exp(-(k1 + 1) * tt)) / (k1 + 1), tolerance = 1e-5)
  }
  sub <- b[2:3]
  expect_s3_class(sub, "lassieBatch")
  expect_equal(attr(sub, "info")$simulations, 2)
  expect_identical(unclass(sub)[[1]], unclass(b)[[2]])
  expect_output(print(b), "4 simulations, 0 failed")
  sm <- summary(b)
  fin <- vapply(1:4, function(s) b[[s]][length(tt), "A"], 0)
  expect_equal(unname(sm["A", c("min", "median", "max")]), c(min(fin), median(fin), max(fin)))
  tf <- tempfile(fileext = ".csv")
  utils::write.csv(df, tf, row.names = FALSE)
  expect_equal(nrow(utils::read.csv(tf)), nrow(df))
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(b, which = c("A", "Total")))
  expect_silent(plot(b, type = "band", probs = c(0.1, 0.9)))
  expect_error(plot(b, type = "violin"), "`type` must be one of", class = "sysbioGPU_error_input")
})

test_that("a failed simulation is a warning and a status, its partial result kept", {
  m <- two_state()
  res <- list(list(matrix(c(0, 1, 1, 0.5, 0, 0.5, 1, 1), 2), matrix(c(0, 1, 1, NA, 0, NA, 1, NA), 2)),
              matrix(1, 8, 2), status = c(0L, 8L), messages = c("", "step size too small at t = 0.3"))
  cn <- list(NULL, c("time", "A", "B", "Total"))
  common <- list(method = "auto", rtol = 1e-6, atol = 1e-12, backend = "cpu", device = NA_character_,
                 elapsed = 0, nSpecies = 2L)
  expect_warning(b <- sysbioGPU:::new_lassie_output(res, cn, common, single = FALSE),
                 "1 of 2 simulation\\(s\\) failed.*simulation 2: step size too small",
                 class = "sysbioGPU_warning_lassie")
  expect_equal(attr(b, "status"), c(0L, 8L))
  expect_equal(attr(b, "info")$failed, 1)
  expect_equal(attr(b[[2]], "istate")[1], -1L)
  expect_true(is.na(attr(b[[2]], "rstate")[3]))
  expect_equal(unique(as.data.frame(b)$status), c(0L, 8L))
  expect_output(print(b), "failed: 2: step size too small")
})
