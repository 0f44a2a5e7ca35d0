# Every result class of the package: as.data.frame() with atomic columns
# that write.csv() writes and read.csv() reads back, and print / summary /
# plot methods that run.

# One small CPU result of every class, named by class.
every_result <- function() {
  set.seed(1)
  n <- 60
  W <- Matrix::rsparsematrix(n, n, density = 0.1, symmetric = TRUE, rand.x = function(k) runif(k))
  Matrix::diag(W) <- 0
  dimnames(W) <- list(paste0("n", 1:n), paste0("n", 1:n))
  y <- stats::setNames(rep(0, n), rownames(W)); y[1:12] <- 1; y[c(5, 30, 51:60)] <- NA
  Y <- cbind(a = y, b = c(rep(1, 20), rep(0, 20), rep(NA, 10), rep(0, 10)))
  rownames(Y) <- rownames(W)
  expr <- matrix(rnorm(200 * 8), 200, 8, dimnames = list(paste0("g", 1:200), NULL))
  sets <- list(a = paste0("g", 1:20), b = paste0("g", 50:90))
  eye <- grnMouseEye()
  m <- reactionModel(reactants = rbind(c(1, 0), c(0, 1)), products = rbind(c(0, 1), c(1, 0)),
                     rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
  list(
    rapidGSEA = rapidGSEA(expr, rep(0:1, each = 4), sets, nperm = 20, minSize = 5, seed = 10,
                          backend = "cpu", threads = 1),
    parCosnet = parCosnet(W, Y, seed = 9, backend = "cpu", threads = 1, verbose = FALSE),
    cvParCosnet = cvParCosnet(W, Y, nfolds = 3, seed = 9, backend = "cpu", threads = 1,
                              verbose = FALSE),
    pbnSteadyState = pbnSteadyState(pbn(list(A = "!B", B = "A")), c(A = TRUE),
                                    r = 0.05, seed = 7, backend = "cpu", threads = 1),
    grnEvolve = grnEvolve(eye$network, eye$from, eye$to, popSize = 64, islands = 4,
                          pLink = 0.05, pRule = 0.05, generations = 30, seed = 8,
                          backend = "cpu", threads = 1, verbose = FALSE),
    lassieSimulation = lassieSimulate(m, times = 0:3, backend = "cpu", threads = 1, verbose = FALSE),
    lassieBatch = lassieSimulate(m, times = 0:3, rates = cbind(c(1, 2), 1), backend = "cpu",
                                 threads = 1, verbose = FALSE),
    lassieArray = lassieSimulate(m, times = 0:3, rates = cbind(c(1, 2), 1), backend = "cpu",
                                 threads = 1, verbose = FALSE, output = "array")
  )
}

results <- every_result()

test_that("every result class has as.data.frame() that write.csv() round-trips", {
  expect_setequal(names(results), sysbioGPU:::run_info_methods)
  for (cl in names(results)) {
    x <- results[[cl]]
    expect_s3_class(x, cl)
    df <- as.data.frame(x)
    expect_s3_class(df, "data.frame")
    expect_gt(nrow(df), 0)
    atomic <- vapply(df, function(v) is.atomic(v) && is.null(dim(v)), NA)
    expect_true(all(atomic), label = paste(cl, "columns atomic"))
    f <- tempfile(fileext = ".csv")
    utils::write.csv(df, f, row.names = FALSE)
    back <- utils::read.csv(f, colClasses = vapply(df, function(v) class(v)[[1L]], ""),
                            check.names = FALSE)
    unlink(f)
    expect_identical(names(back), names(df), label = cl)
    for (k in names(df)) {
      if (is.double(df[[k]])) {
        expect_equal(back[[k]], df[[k]], tolerance = 1e-13, label = paste(cl, k))
      } else {
        expect_identical(back[[k]], as.vector(df[[k]]), label = paste(cl, k))
      }
    }
  }
})

test_that("parCosnet and cvParCosnet rows are node x class, matching the matrices and labels", {
  fit <- results$parCosnet
  df <- as.data.frame(fit)
  expect_identical(nrow(df), 2L * 60L)
  expect_identical(df$node, rep(paste0("n", 1:60), 2))
  expect_identical(df$class, rep(c("a", "b"), each = 60))
  ij <- cbind(match(df$node, rownames(fit$scores)), match(df$class, colnames(fit$scores)))
  expect_identical(df$score, fit$scores[ij])
  expect_identical(df$prediction, fit$predictions[ij])
  # the known labels as given: n1..n12 positive but n5, n51..n60 and n30 unknown
  a <- df[df$class == "a", ]
  expect_identical(which(is.na(a$label)), c(5L, 30L, 51:60))
  expect_identical(which(a$label %in% TRUE), setdiff(1:12, 5L))
  expect_identical(is.na(a$score), !is.na(a$label))
  expect_identical(df$colour, rep(fit$colours, 2))

  cv <- results$cvParCosnet
  dc <- as.data.frame(cv)
  expect_identical(nrow(dc), 2L * 60L)
  expect_identical(dc$fold, as.vector(cv$folds))
  expect_identical(dc$fold == 0L, is.na(dc$label))
  expect_identical(dc$score, as.vector(cv$scores))
})

test_that("grnEvolve rows are islands (or generations x islands, or changed links)", {
  fit <- results$grnEvolve
  h <- fit$history
  isl <- as.data.frame(fit)
  expect_identical(isl$island, 1:4)
  expect_identical(isl$fitness, unname(h[nrow(h), ]))
  for (i in 1:4) { # first generation at the final value, by a plain loop
    g <- 0L
    while (h[g + 1L, i] != isl$fitness[i]) g <- g + 1L
    expect_identical(isl$reachedAt[i], g)
  }
  expect_true(any(isl$holdsBest))
  expect_identical(min(isl$fitness), fit$fitness)
  hist <- as.data.frame(fit, what = "history")
  expect_identical(nrow(hist), length(h))
  expect_identical(hist$fitness[hist$island == 3], unname(h[, 3]))
  expect_identical(hist$generation[hist$island == 3], 0:fit$generations)
  ch <- as.data.frame(fit, what = "changes")
  expect_identical(nrow(ch), fit$dl)
  expect_error(as.data.frame(fit, what = "x"), "`what` must be one of", class = "sysbioGPU_error_input")
})

test_that("print, summary and plot run for every result class and say what they should", {
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  for (cl in names(results)) {
    x <- results[[cl]]
    expect_output(print(x), label = paste("print", cl))
    expect_output(print(summary(x)), label = paste("summary", cl))
    expect_identical(plot(x), x, label = paste("plot", cl))
  }
  expect_output(print(results$parCosnet), "2 class\\(es\\)")
  expect_output(print(summary(results$parCosnet)), "training F")
  expect_output(print(results$cvParCosnet), "3-fold CV")
  expect_output(print(results$grnEvolve), "link\\(s\\) changed")
  expect_output(print(summary(results$grnEvolve)), "Best fitness per island")
})

test_that("plot.parCosnet draws the scores by known label around the threshold", {
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  fit <- results$parCosnet
  truth <- stats::setNames(rep(0:1, 30), paste0("n", 1:60))
  expect_identical(plot(fit, class = "b", truth = truth), fit)
  expect_identical(plot(fit, class = 2, truth = cbind(a = unname(truth), b = unname(truth))), fit)
  # the strips are the known labels of the unlabelled nodes: 2 groups here
  expect_equal(graphics::par("usr")[3:4], c(0.6, 2.9) + c(-1, 1) * 0.04 * 2.3)
  expect_error(plot(fit, class = "z"), "`class` must name or index", class = "sysbioGPU_error_input")
  expect_error(plot(fit, truth = c(1, 0, 1)), "one value per node", class = "sysbioGPU_error_input")
  expect_error(plot(fit, truth = c(x = 1)), "nodes of the network", class = "sysbioGPU_error_input")
  cv <- results$cvParCosnet
  expect_identical(plot(cv, classes = "b", type = "scores"), cv)
  expect_error(plot(cv, type = "roc"), "`type` must be one of", class = "sysbioGPU_error_input")
})

test_that("plot.grnEvolve: plain-number log ticks, a band for many islands, linear axis", {
  tk <- sysbioGPU:::grn_log_ticks(c(4e-4, 0.3))
  expect_identical(tk$labels, c("0.0005", "0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2"))
  expect_equal(tk$at, c(5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2))
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  fit <- results$grnEvolve
  expect_identical(plot(fit, maxIslands = 2), fit)
  expect_identical(plot(fit, log = ""), fit)
  expect_error(plot(fit, log = "x"), "`log` must be one of", class = "sysbioGPU_error_input")
})
