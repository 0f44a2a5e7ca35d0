# readBioNetGen()'s bounds and errors: rate laws
# that would expand without end are refused, bad lines are named by file
# and line, and a model edited by hand is checked before the engine.

bng_file <- function(rate, pars = "1 k1 2", sp = c("1 A 1", "2 B 2", "3 C 0"),
                     groups = c("1 Tot 1,2", "2 Aobs 1"), funs = NULL) {
  f <- tempfile(fileext = ".net")
  writeLines(c("begin parameters", pars, "end parameters",
               "begin species", sp, "end species",
               "begin groups", groups, "end groups",
               if (length(funs)) c("begin functions", funs, "end functions"),
               "begin reactions", paste("1 1 3", rate), "end reactions"), f)
  f
}

test_that("a power of a sum or a huge exponent is refused, naming file and line", {
  # before the bound these never finished (2^40 terms; 1e8 products)
  f <- bng_file("k1*f()", funs = "1 f() k1*Tot^40")
  expect_error(readBioNetGen(f), paste0(basename(f), ":17: .*degree 40, more than 12"),
               class = "sysbioGPU_error_input")
  f <- bng_file("k1*f()", funs = "1 f() Aobs^1e8")
  expect_error(readBioNetGen(f), "degree 1e\\+08", class = "sysbioGPU_error_input")
  expect_error(readBioNetGen(bng_file("k1*Aobs^100000000")), ":14: .*degree",
               class = "sysbioGPU_error_input")
  # a sum of many species to a low power: too many products of terms
  sp <- sprintf("%d S%d 1", 1:400, 1:400)
  f <- bng_file("k1*Tot^3", sp = sp, groups = paste("1 Tot", paste(1:400, collapse = ",")))
  expect_error(readBioNetGen(f), "products of terms", class = "sysbioGPU_error_input")
})

test_that("like terms are merged: Tot^2 = A^2 + 2 A B + B^2 is three reactions", {
  m <- readBioNetGen(bng_file("k1*f()", funs = "1 f() Tot^2"))
  expect_equal(length(m$reactions), 3L)
  A <- as.matrix(m$reactants); B <- as.matrix(m$products)
  # each reaction is A -> C with catalysts: the monomial's species
  expect_equal(unname(A[, "A"] - B[, "A"]), c(1, 1, 1))
  cats <- apply(B[, c("A", "B")], 1, paste, collapse = "")
  # k1 Tot^2 with k1 = 2: 2 A^2 + 4 A B + 2 B^2
  expect_equal(unname(m$rates[cats == "20"]), 2)
  expect_equal(unname(m$rates[cats == "11"]), 4)
  expect_equal(unname(m$rates[cats == "02"]), 2)
  # and the network it gives has the law's right-hand side
  x <- c(A = 0.3, B = 1.7, C = 0.2)
  expect_equal(sysbioGPU:::lassie_rhs(m, x)[1], -2 * (0.3 + 1.7)^2 * 0.3)
})

test_that("functions and parameters of thousands of terms read: a + b - c ... taken in order", {
  # R parses a + b - c + ... into calls nested a term deep; a law of
  # thousands of terms must not recurse as deep
  x <- c(A = 0.3, B = 1.7, C = 0.2)
  pars <- paste("1 k1", paste(rep("0.002", 1000), collapse = "+"))   # k1 = 2
  # 1000 (Tot - Aobs) = 1000 B: the flux of A is k1 1000 B A
  f <- bng_file("k1*f()", pars = pars, funs = paste("1 f()", paste(rep("Tot - Aobs", 1000), collapse = " + ")))
  expect_equal(sysbioGPU:::lassie_rhs(readBioNetGen(f), x)[1], -2 * 1000 * 1.7 * 0.3, tolerance = 1e-12)
  # Tot * 2 / 2 * 2 / 2 ... = Tot
  f <- bng_file("k1*f()", pars = pars, funs = paste0("1 f() Tot", strrep("*2/2", 1500)))
  expect_equal(sysbioGPU:::lassie_rhs(readBioNetGen(f), x)[1], -2 * (0.3 + 1.7) * 0.3, tolerance = 1e-12)
  # a term of the chain that is no polynomial is refused, named, at the
  # function's line
  f <- bng_file("k1*f()", funs = paste("1 f()", paste(c(rep("Tot", 999), "1/Aobs"), collapse = " + ")))
  expect_error(readBioNetGen(f), paste0(basename(f), ":14: the rate law `1/Aobs` is not mass action"),
               class = "sysbioGPU_error_input")
})

test_that("names that are R's reserved words are names; NA, NaN and Inf are refused as names", {
  # BioNetGen allows any of these as a parameter's name; k2 = name * 0.5
  for (id in c("TRUE", "FALSE", "NULL", "in", "next", "break", "function", "if", "repeat", "T", "pi", "e")) {
    f <- bng_file("k1", pars = c(sprintf("1 %s 2", id), sprintf("2 k1 %s*0.5", id)))
    expect_equal(unname(readBioNetGen(f)$rates), 1, info = id)
  }
  for (id in c("NA", "NaN", "Inf")) {
    f <- bng_file("k1", pars = c(sprintf("1 %s 2", id), "2 k1 1"))
    expect_error(readBioNetGen(f), paste0(basename(f), ":2: the name ", id, " is a number in rate laws; rename the parameter"),
                 class = "sysbioGPU_error_input")
  }
})

test_that("bad indices and parameters in a .net are input errors with file and line", {
  f <- bng_file("k1", pars = "1 k1 NaN")
  expect_error(readBioNetGen(f), paste0(basename(f), ":2: parameter k1 is NaN"),
               class = "sysbioGPU_error_input")
  expect_error(readBioNetGen(bng_file("k1", pars = "1 k1 1/0")), ":2: parameter k1 is Inf",
               class = "sysbioGPU_error_input")
  expect_error(readBioNetGen(bng_file("k1", pars = "x k1 2")), ":2: the index of a parameter",
               class = "sysbioGPU_error_input")
  expect_error(readBioNetGen(bng_file("k1", sp = c("1 A 1", "b B 2", "3 C 0"))),
               ":6: the index of a species must be a whole number, not `b`",
               class = "sysbioGPU_error_input")
  f <- bng_file("k1")
  txt <- readLines(f); txt[grep("^1 1 3", txt)] <- "R1 1 3 k1"; writeLines(txt, f)
  expect_error(readBioNetGen(f), ":14: the index of a reaction", class = "sysbioGPU_error_input")
  txt[14] <- "1 1 99999999999999 k1"; writeLines(txt, f)
  expect_error(readBioNetGen(f), ":14: unknown species 1e\\+14", class = "sysbioGPU_error_input")
  txt[14] <- "1 1 3 k1*(Aobs-Tot)"; writeLines(txt, f)
  expect_error(readBioNetGen(f), ":14: the rate constant evaluates to -2", class = "sysbioGPU_error_input")
})

test_that("a .net whose rates are all zero is a model with zero rates", {
  m <- readBioNetGen(bng_file("k1", pars = "1 k1 0"))
  expect_equal(unname(m$rates), 0)
  out <- lassieSimulate(m, c(0, 1), backend = "cpu", verbose = FALSE)
  expect_equal(unname(out[2, c("A", "B", "C")]), c(1, 2, 0))
})

test_that("a reactionModel edited by hand is checked before the engine", {
  m <- readBioNetGen(bng_file("k1"))
  run <- function(m) lassieSimulate(m, c(0, 1), backend = "cpu", verbose = FALSE)
  bad <- m; bad$rates[1] <- -1
  expect_error(run(bad), "edited into an invalid reactionModel: `rates`.*rates\\[1\\] is -1",
               class = "sysbioGPU_error_input")
  bad <- m; bad$rates <- c(1, 2)
  expect_error(run(bad), "`rates` must have 1 numbers", class = "sysbioGPU_error_input")
  bad <- m; bad$initial[2] <- NaN
  expect_error(run(bad), "initial\\[2\\] is NaN", class = "sysbioGPU_error_input")
  bad <- m; bad$reactants@i[1] <- 7L
  expect_error(run(bad), "valid sparse matrices", class = "sysbioGPU_error_input")
  bad <- m; bad$products@x[1] <- -2
  expect_error(run(bad), "whole numbers >= 0", class = "sysbioGPU_error_input")
  bad <- m; bad$fixed <- NA
  expect_error(run(bad), "`fixed` must be 3", class = "sysbioGPU_error_input")
  # a huge reactant order would have the engine multiply 1e9 times per rate
  bad <- m; bad$reactants@x[1] <- 1e9
  expect_error(run(bad), "reactant order of 1e\\+09", class = "sysbioGPU_error_input")
  bad <- m; bad$species <- NULL
  expect_error(run(bad), "lacks species", class = "sysbioGPU_error_input")
})

test_that("readBioNetGen: invalid UTF-8 and a folder are classed errors naming the file", {
  f <- tempfile(fileext = ".net")
  writeBin(c(charToRaw("begin parameters\n 1 k1 1.0\nend parameters\n# "), as.raw(0xff), charToRaw("\n")), f)
  expect_error(readBioNetGen(f), "line 4: is not valid UTF-8", class = "sysbioGPU_error_input")
  expect_error(readBioNetGen(tempdir()), "cannot be read", class = "sysbioGPU_error_input")
})

test_that("the engine's glue refuses an edited model structure with a classed error", {
  m <- reactionModel(reactants = rbind(c(1, 0), c(0, 1)), products = rbind(c(0, 1), c(1, 0)),
                     rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
  arr <- sysbioGPU:::lassie_arrays(m)
  run <- function(a, rates = m$rates, initial = m$initial, times = c(0, 1)) {
    .Call(sysbioGPU:::ffi_lassie_simulate,
          list(model = a, rates = as.double(rates), initial = as.double(initial),
               times = as.double(times), obs = NULL),
          list(rtol = 1e-6, atol = 1e-12, method = 0L, maxSteps = 1e5, hInit = 0, part = c(0L, 1L),
               array = FALSE),
          list(gpu = FALSE, threads = 1L, devices = 0L, verbose = FALSE,
               deviceBDF = -1L, bdfTeam = -1L, bdfSharedVectors = -1L, fused = -1L))
  }
  expect_named(run(arr), c("sims", "stats", "status", "messages"))
  bad <- arr; bad$r_ord[1] <- 1e9L
  expect_error(run(bad), "order is not a whole number", class = "sysbioGPU_error_input")
  bad <- arr; bad$r_sp[1] <- 7L
  expect_error(run(bad), "reactant index is out of range", class = "sysbioGPU_error_input")
  bad <- arr; bad$h_ptr <- rev(bad$h_ptr)
  expect_error(run(bad), "pointers", class = "sysbioGPU_error_input")
  bad <- arr; bad$h_val[1] <- NaN
  expect_error(run(bad), "not finite", class = "sysbioGPU_error_input")
  expect_error(run(arr, rates = c(-1, 1)), "`rates` must be finite", class = "sysbioGPU_error_input")
  expect_error(run(arr, initial = c(NA, 0)), "`initial` must be finite", class = "sysbioGPU_error_input")
  expect_error(run(arr, times = c(0, 1, 1)), "strictly increasing", class = "sysbioGPU_error_input")
  # the run contract: a missing element of a list is named
  bad <- arr; bad$h_val <- NULL
  expect_error(run(bad), "h_val", class = "sysbioGPU_error_internal")
})
