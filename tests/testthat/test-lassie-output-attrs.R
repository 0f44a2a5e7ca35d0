# The matrices' attributes are set in C: they must be what R's
# constructor made before, attribute by attribute and in order, for one
# simulation and a batch, successes and failures.  The reference is built
# here in R, independently of the package's code.

out_model <- function() {
  reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)),
                rates = c(2, 1), initial = c(1, 0), species = c("A", "B"),
                observables = Matrix::Matrix(rbind(Total = c(1, 1)), sparse = TRUE))
}

# What R's constructor gave a simulation x (its numbers) with counters st
# (unnamed, in the engine's order), status and message.
ref_attributes <- function(x, st, status, message, cn, common) {
  N <- common$nSpecies
  nobs <- length(cn[[2L]]) - 1L - N
  names(st) <- c("steps", "rejected", "switches", "implicitSteps", "newtonIterations",
                 "factorisations", "jacobians", "rhsEvaluations")
  cap <- function(v) as.integer(min(v, .Machine$integer.max))
  is <- rep(NA_integer_, 21L)
  is[1L] <- if (status == 0L) 2L else -1L
  is[2L] <- cap(st[["steps"]])
  is[3L] <- cap(st[["rhsEvaluations"]])
  is[4L] <- cap(st[["jacobians"]])
  is[10L] <- cap(st[["factorisations"]])
  is[11L] <- cap(st[["newtonIterations"]])
  is[13L] <- cap(st[["rejected"]])
  lv <- c(N, rep.int(1L, nobs))
  names(lv) <- c("", utils::tail(cn[[2L]], nobs))
  c(list(dim = dim(x), dimnames = cn, class = c("lassieSimulation", "deSolve", "matrix", "array"),
         stats = st, istate = is,
         rstate = c(NA_real_, NA_real_, if (status == 0L) as.vector(x)[nrow(x)] else NA_real_, NA_real_, NA_real_),
         type = "lassie", lengthvar = lv, status = status, message = message),
    common)
}

expect_attrs_as_ref <- function(x, ref) {
  a <- attributes(x)
  expect_identical(names(a), names(ref))            # the order
  for (nm in names(ref)) expect_identical(a[[nm]], ref[[nm]], label = nm)
}

test_that("one simulation's attributes are R's constructor's", {
  m <- out_model()
  tt <- c(0, 0.5, 1, 2)
  out <- lassieSimulate(m, tt, rtol = 1e-8, atol = 1e-10, backend = "cpu", threads = 1, verbose = FALSE)
  e <- attr(out, "elapsed")
  expect_true(is.double(e) && length(e) == 1L && is.finite(e) && e >= 0)
  common <- list(method = "auto", rtol = 1e-8, atol = 1e-10, backend = "cpu", device = NA_character_,
                 elapsed = e, nSpecies = 2L)
  cn <- list(NULL, c("time", "A", "B", "Total"))
  expect_attrs_as_ref(out, ref_attributes(out, unname(attr(out, "stats")), 0L, "", cn, common))
  expect_identical(out[, "time"], tt)
  # a stiff one has every counter: Robertson with implicit steps
  rob <- reactionModel(rbind(c(1, 0, 0), c(0, 2, 0), c(0, 1, 1)), rbind(c(0, 1, 0), c(0, 1, 1), c(1, 0, 1)),
                       rates = c(0.04, 3e7, 1e4), initial = c(1, 0, 0), species = c("y1", "y2", "y3"))
  r <- lassieSimulate(rob, c(0, 0.4, 4, 40), method = "bdf", backend = "cpu", threads = 1, verbose = FALSE)
  st <- unname(attr(r, "stats"))
  expect_true(all(st[c(1, 4:8)] > 0) && length(unique(st[5:8])) == 4L)
  common <- list(method = "bdf", rtol = 1e-6, atol = 1e-12, backend = "cpu", device = NA_character_,
                 elapsed = attr(r, "elapsed"), nSpecies = 3L)
  expect_attrs_as_ref(r, ref_attributes(r, st, 0L, "", list(NULL, c("time", "y1", "y2", "y3")), common))
})

test_that("a batch's attributes are R's constructor's, failures included", {
  m <- out_model()
  tt <- seq(0, 2, by = 0.5)
  # the stiff third set exhausts maxSteps of the explicit method
  k <- cbind(c(0.5, 2, 1e6), 1)
  expect_warning(b <- lassieSimulate(m, tt, rates = k, method = "rkf45", maxSteps = 200, rtol = 1e-6,
                                     atol = 1e-12, backend = "cpu", threads = 2, verbose = FALSE),
                 "1 of 3 simulation", class = "sysbioGPU_warning_lassie")
  expect_identical(attr(b, "status"), c(0L, 0L, 1L))
  e <- attr(b, "info")$seconds
  common <- list(method = "rkf45", rtol = 1e-6, atol = 1e-12, backend = "cpu", device = NA_character_,
                 elapsed = e, nSpecies = 2L)
  cn <- list(NULL, c("time", "A", "B", "Total"))
  msgs <- attr(b, "messages")
  expect_identical(msgs[1:2], c("", ""))
  expect_match(msgs[3], "maxSteps")
  for (s in 1:3) {
    expect_attrs_as_ref(b[[s]], ref_attributes(b[[s]], unname(attr(b[[s]], "stats")), attr(b, "status")[s],
                                               msgs[s], cn, common))
  }
  expect_true(is.na(b[[3]][length(tt), "A"]))
  # each simulation alone (no attributes set in a batch copy) has the same numbers
  for (s in 1:2) {
    one <- lassieSimulate(m, tt, rates = k[s, ], method = "rkf45", maxSteps = 200, rtol = 1e-6,
                          atol = 1e-12, backend = "cpu", threads = 1, verbose = FALSE)
    expect_identical(as.vector(unclass(one)), as.vector(unclass(b[[s]])))
    expect_identical(unname(one[, "Total"]), unname(one[, "A"] + one[, "B"]))
  }
})

test_that("matrices made in R (workers' blocks) get copies with the attributes", {
  x1 <- matrix(c(0, 1, 1, 0.5, 0, 0.5, 1, 1), 2)
  x2 <- matrix(c(0, 1, 1, NaN, 0, NaN, 1, NaN), 2)
  # distinct counters, one past the integer range and one NA
  st <- cbind(as.double(1:8), c(3e9, 5, 6, 7, 8, 9, 10, NA))
  res <- list(list(x1, x2), st, status = c(0L, 2L), messages = c("", "step size too small at t = 0.3"))
  cn <- list(NULL, c("time", "A", "B", "Total"))
  common <- list(method = "auto", rtol = 1e-6, atol = 1e-12, backend = "cpu", device = NA_character_,
                 elapsed = 0.25, nSpecies = 2L)
  expect_warning(b <- sysbioGPU:::new_lassie_output(res, cn, common, single = FALSE),
                 class = "sysbioGPU_warning_lassie")
  expect_attrs_as_ref(b[[1]], ref_attributes(x1, st[, 1], 0L, "", cn, common))
  expect_attrs_as_ref(b[[2]], ref_attributes(x2, st[, 2], 2L, res$messages[2], cn, common))
  expect_identical(attr(b[[2]], "istate")[c(2, 3)], c(.Machine$integer.max, NA_integer_))
  # the inputs are left alone
  expect_identical(attributes(res[[1]][[1]]), list(dim = c(2L, 4L)))
  expect_identical(res[[1]][[2]], x2)
  one <- sysbioGPU:::new_lassie_output(list(list(x1), st[, 1, drop = FALSE]), cn, common, single = TRUE)
  expect_attrs_as_ref(one, ref_attributes(x1, st[, 1], 0L, "", cn, common))
})

test_that("BPPARAM's blocks give the attributes of one process's run", {
  skip_if_not_installed("BiocParallel")
  m <- out_model()
  k <- cbind(c(0.5, 1, 2, 4), 1)
  a <- lassieSimulate(m, c(0, 1, 2), rates = k, backend = "cpu", threads = 1, verbose = FALSE)
  b <- lassieSimulate(m, c(0, 1, 2), rates = k, backend = "cpu", threads = 1, verbose = FALSE,
                      BPPARAM = BiocParallel::SerialParam())
  strip <- function(x) { attr(x, "elapsed") <- NULL; x }
  for (s in 1:4) expect_identical(strip(b[[s]]), strip(a[[s]]))
  expect_identical(attr(b[[4]], "elapsed"), attr(b, "info")$seconds)
})

test_that("the attributes the simulations share are copied when one is changed", {
  m <- out_model()
  b <- lassieSimulate(m, c(0, 1, 2), rates = cbind(c(0.5, 1, 2), 1), backend = "cpu", threads = 1,
                      verbose = FALSE)
  keep <- lapply(unclass(b), attributes)
  x <- b[[1]]
  attr(x, "lengthvar")[1] <- 99L
  attr(x, "rtol")[1] <- 0.5
  attr(x, "class")[1] <- "other"
  attr(x, "stats")[1] <- -1
  colnames(x)[2] <- "Z"
  # a simulation's own attributes
  attr(x, "status")[1] <- 3L
  attr(x, "message")[1] <- "changed"
  attr(x, "rstate")[3] <- -1
  attr(b[[2]], "rstate")[1] <- 5
  attr(b[[2]], "atol")[1] <- 7
  names(attr(b[[2]], "lengthvar"))[2] <- "W"
  expect_identical(attr(x, "lengthvar")[[1]], 99L)
  expect_identical(attr(x, "status"), 3L)
  expect_identical(attr(x, "message"), "changed")
  expect_identical(attr(x, "rstate")[3], -1)
  expect_identical(attr(b[[2]], "rstate"), c(5, NA, 2, NA, NA))
  expect_identical(attr(b[[2]], "atol"), 7)
  expect_identical(attributes(b[[1]]), keep[[1]])
  expect_identical(attributes(b[[3]]), keep[[3]])
  expect_identical(attr(b[[2]], "lengthvar"), stats::setNames(c(2L, 1L), c("", "W")))
  expect_identical(attr(b[[2]], "rtol"), keep[[2]]$rtol)
  expect_identical(colnames(b[[3]]), c("time", "A", "B", "Total"))
})
