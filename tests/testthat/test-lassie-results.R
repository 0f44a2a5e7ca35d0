# The results of lassieSimulate() in every form (one simulation, a batch,
# an array) as long tables and compact summaries; plot legends outside the
# data; each help page under its own name.

ab_model <- function() {
  reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)),
                rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
}

test_that("as.data.frame() is long (simulation, time, variable, value, status) for every form", {
  m <- ab_model()
  tt <- c(0, 0.5, 1, 2)
  k <- cbind(c(0.5, 1, 2), 1)
  # closed form of A <-> B with rates (k1, 1) from A = 1: A(t) = (1 + k1 exp(-(k1 + 1) t)) / (k1 + 1)
  closed <- function(k1) (1 + k1 * exp(-(k1 + 1) * tt)) / (k1 + 1)
  one <- lassieSimulate(m, tt, backend = "cpu", threads = 1, verbose = FALSE)
  d1 <- as.data.frame(one)
  expect_identical(names(d1), c("simulation", "time", "variable", "value", "status"))
  expect_identical(nrow(d1), length(tt) * 2L)
  expect_identical(unique(d1$simulation), 1L)
  expect_equal(d1$value[d1$variable == "A"], closed(2), tolerance = 1e-5)
  expect_equal(d1$value[d1$variable == "B"], 1 - closed(2), tolerance = 1e-5)
  expect_equal(d1$time[d1$variable == "A"], tt)
  wide <- as.data.frame(one, format = "wide")
  expect_identical(names(wide), c("time", "A", "B"))
  expect_equal(wide$A, closed(2), tolerance = 1e-5)
  b <- lassieSimulate(m, tt, rates = k, backend = "cpu", threads = 1, verbose = FALSE)
  arr <- lassieSimulate(m, tt, rates = k, backend = "cpu", threads = 1, verbose = FALSE, output = "array")
  db <- as.data.frame(b)
  da <- as.data.frame(arr)
  expect_identical(names(da), names(db))
  for (s in 1:3) {
    expect_equal(da$value[da$simulation == s & da$variable == "A"], closed(k[s, 1]), tolerance = 1e-5)
    expect_equal(db$value[db$simulation == s & db$variable == "A"], closed(k[s, 1]), tolerance = 1e-5)
  }
  expect_equal(da[c("simulation", "time", "variable")], db[c("simulation", "time", "variable")])
  expect_error(as.data.frame(one, format = "tall"), "`format`", class = "sysbioGPU_error_input")
})

test_that("summary() is compact: deSolve's statistics for one run, final quantiles for a batch", {
  m <- ab_model()
  tt <- seq(0, 2, by = 0.5)
  one <- lassieSimulate(m, tt, backend = "cpu", threads = 1, verbose = FALSE)
  s <- summary(one)
  expect_identical(colnames(s), c("A", "B"))
  expect_identical(rownames(s), c("Min.", "1st Qu.", "Median", "Mean", "3rd Qu.", "Max.", "N", "sd"))
  a <- unname(one[, "A"])
  expect_equal(s["Max.", "A"], max(a))
  expect_equal(s["Mean", "A"], mean(a))
  expect_equal(s["sd", "B"], stats::sd(unname(one[, "B"])))
  expect_equal(s["N", "A"], length(tt))
  if (requireNamespace("deSolve", quietly = TRUE)) {
    ds <- utils::getS3method("summary", "deSolve", envir = asNamespace("deSolve"))(one)
    expect_equal(unname(as.matrix(s)), unname(as.matrix(ds)))
  }
  out <- capture.output(print(s))
  expect_match(out[[1]], "^lassieSimulation: 5 times")
  expect_false(any(grepl("attr\\(", out)))
  k <- cbind(seq(0.5, 4, length.out = 7), 1)
  b <- lassieSimulate(m, tt, rates = k, backend = "cpu", threads = 1, verbose = FALSE)
  arr <- lassieSimulate(m, tt, rates = k, backend = "cpu", threads = 1, verbose = FALSE, output = "array")
  fin <- (1 + k[, 1] * exp(-(k[, 1] + 1) * 2)) / (k[, 1] + 1)
  for (sm in list(summary(b), summary(arr))) {
    expect_equal(unname(sm["A", c("min", "median", "max")]), c(min(fin), stats::median(fin), max(fin)), tolerance = 1e-5)
    expect_identical(attr(sm, "simulations"), 7L)
    out <- capture.output(print(sm))
    expect_match(out[[1]], "7 simulation\\(s\\), 0 failed; final values at time 2")
    expect_false(any(grepl("attr\\(", out)))
    expect_lte(length(out), 4L)
  }
})

test_that("a wide model's summary prints one line per variable, at most n", {
  N <- 30
  sto_r <- diag(N)
  sto_p <- diag(N)[c(2:N, 1), ]
  m <- reactionModel(sto_r, sto_p, rates = rep(1, N), initial = c(1, rep(0, N - 1)),
                     species = paste0("S", seq_len(N)))
  out <- lassieSimulate(m, c(0, 1), backend = "cpu", threads = 1, verbose = FALSE)
  txt <- capture.output(print(summary(out), n = 5))
  expect_lte(length(txt), 8L)
  expect_match(txt[length(txt)], "25 more variable")
  expect_true(all(nchar(txt) <= 100))
})

test_that("cvParCosnet's precision-recall legend lies outside the plotted data", {
  set.seed(2)
  n <- 200
  W <- Matrix::rsparsematrix(n, n, density = 0.05, symmetric = TRUE, rand.x = function(k) stats::runif(k))
  Matrix::diag(W) <- 0
  Y <- cbind(a = stats::rbinom(n, 1, 0.15), b = stats::rbinom(n, 1, 0.25))
  cv <- cvParCosnet(W, Y, nfolds = 3, seed = 1, backend = "cpu", threads = 1)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  grDevices::dev.control("enable")
  plot(cv)
  usr <- graphics::par("usr")
  # the display list's last text call is the legend's labels: their x
  # lies right of the plotting region, so they cover no curve
  dl <- grDevices::recordPlot()[[1]]
  is_text <- vapply(dl, function(e) identical(e[[2]][[1]]$name, "C_text"), TRUE)
  leg <- dl[[max(which(is_text))]][[2]]
  expect_match(leg[[3]][[1]], "AUPRC")
  expect_true(all(leg[[2]]$x > usr[[2]]))
})

test_that("each lassie help page is under its own name", {
  db <- tools::Rd_db("sysbioGPU")
  rd_name <- function(rd) {
    tags <- vapply(rd, function(x) attr(x, "Rd_tag"), "")
    as.character(rd[[which(tags == "\\name")]][[1L]])
  }
  expect_identical(rd_name(db[["lassieSimulate.Rd"]]), "lassieSimulate")
  expect_identical(rd_name(db[["lassieBatch.Rd"]]), "lassieBatch")
  nms <- vapply(db, rd_name, "")
  expect_identical(unname(nms), sub("\\.Rd$", "", names(db)))
})
