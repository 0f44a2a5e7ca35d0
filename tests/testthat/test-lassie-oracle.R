# An independent oracle for lassieSimulate() (issue 18): deSolve integrates
# a right-hand side written here in plain R from the model's reaction list
# (mass action: flux k_r prod_j x_j^a_rj, dx/dt = (B - A)' v, fixed species
# held), not our C right-hand side or Jacobian.  A bug in the engine's rates,
# stoichiometry, fixed species, observables or readers shows as a mismatch.

oracle_rhs <- function(model) {
  A <- as.matrix(model$reactants); B <- as.matrix(model$products)
  N <- ncol(A); R <- nrow(A)
  # reactant indices with repetition, one row per reaction, padded with a
  # species N + 1 whose amount is 1
  idx <- lapply(seq_len(R), function(r) rep.int(seq_len(N), A[r, ]))
  ord <- max(1L, lengths(idx))
  pad <- t(vapply(idx, function(i) c(i, rep.int(N + 1L, ord - length(i))), integer(ord)))
  pad <- matrix(pad, nrow = R)
  H <- t(B - A)
  H[model$fixed, ] <- 0
  H <- Matrix::Matrix(H, sparse = TRUE)   # Matrix's product, not ours
  k <- unname(model$rates)
  G <- model$observables
  function(t, x, p) {
    xx <- c(x, 1)
    v <- k
    for (c in seq_len(ord)) v <- v * xx[pad[, c]]
    dx <- as.vector(H %*% v)
    if (is.null(G)) list(dx) else list(dx, as.vector(G %*% x))
  }
}

# atol: small against the smallest amounts that matter (the Chen model's
# amounts go from 1e-5 to 1e9; an atol scaled by the largest made lsodes
# itself 15% off on a species of 4e-5)
oracle_compare <- function(model, times, method = "lsoda", tol = 1e-5, atol = 1e-12, rtol = 1e-10,
                           oracle_model = model, expect = TRUE) {
  skip_if_not_installed("deSolve")
  ref <- deSolve::ode(model$initial, times, oracle_rhs(oracle_model), NULL, method = method,
                      rtol = 1e-11, atol = atol, maxsteps = 1e6)
  expect_equal(unname(ref[, "time"]), times)
  out <- lassieSimulate(model, times, rtol = rtol, atol = atol,
                        backend = "cpu", threads = 1, verbose = FALSE)
  r <- unname(ref[, -1, drop = FALSE]); o <- unname(unclass(out)[, -1, drop = FALSE])
  expect_equal(dim(o), dim(r))
  # relative error with a floor of 1e-6 of each column's largest value
  scale <- matrix(pmax(apply(abs(r), 2, max), 1e-300), nrow(r), ncol(r), byrow = TRUE)
  err <- abs(o - r) / pmax(abs(r), 1e-6 * scale)
  if (expect) expect_lt(max(err), tol)
  invisible(max(err))
}

test_that("the oracle's right-hand side is that of mass action (hand-written 2A -> 0)", {
  m <- reactionModel(matrix(2), matrix(0), rates = 0.5, initial = 1, species = "A")
  f <- oracle_rhs(m)
  expect_equal(f(0, 0.3, NULL)[[1]], -2 * 0.5 * 0.3^2)
  oracle_compare(m, c(0, 1, 2, 5))
  # the comparison sees a 1% error in one rate constant of Haugh2b
  h <- readBioNetGen(lassie_extdata("Haugh2b.net"))
  h2 <- h; h2$rates[7] <- 1.01 * h2$rates[7]
  expect_gt(oracle_compare(h, seq(0, 50, by = 5), oracle_model = h2, expect = FALSE), 1e-3)
  # and a species wrongly held fixed
  h2 <- h; h2$fixed[3] <- TRUE
  expect_gt(oracle_compare(h, seq(0, 50, by = 5), oracle_model = h2, expect = FALSE), 1e-3)
})

test_that("lassieSimulate agrees with deSolve on an independent RHS: shipped BioNetGen models", {
  for (f in c("test_fixed.net", "Haugh2b.net")) {
    m <- readBioNetGen(lassie_extdata(f))
    oracle_compare(m, seq(0, 50, by = 5))
  }
  # the repressilator oscillates: a wrong rate shifts its phase
  m <- readBioNetGen(lassie_extdata("Repressilator.net"))
  oracle_compare(m, seq(0, 4000, by = 400), tol = 1e-4)
})

test_that("lassieSimulate agrees with deSolve on an independent RHS: shipped SBML models", {
  skip_if_not(sbmlAvailable(), "built without libSBML")
  oracle_compare(readSBML(lassie_extdata("lassie_small.sbml")), c(0, 0.5, 1, 2, 5, 10))
  # Chen 2009 ErbB (504 species, 828 reactions, stiff): lsodes with its own
  # finite-difference sparse Jacobian
  m <- readSBML(lassie_extdata("Chen2009_ErbB_A431.xml.gz"))
  oracle_compare(m, c(0, 10, 60, 300), method = "lsodes", tol = 1e-4, rtol = 1e-8)
})

test_that("lassieSimulate agrees with deSolve on the project's larger BioNetGen models", {
  d <- "/work/shared/data/lassie/bionetgen"
  skip_if_not(dir.exists(d), "the project's data folder is not here")
  for (f in c("egfr_net.net", "fceri_ji.net")) {
    m <- readBioNetGen(file.path(d, f))
    oracle_compare(m, c(0, 1, 5, 20), method = "lsodes", tol = 1e-4, rtol = 1e-8)
  }
})
