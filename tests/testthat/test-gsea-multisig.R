# rapidGSEA(stats = <matrix or list>): many preranked signatures in one
# call, each signature's rows those of its own call with the same seed.

ms_data <- function(G = 1500, n = 3, seed = 1) {
  set.seed(seed)
  m <- matrix(rnorm(G * n), G, dimnames = list(paste0("g", seq_len(G)), paste0("s", seq_len(n))))
  m[1:40, 2] <- m[1:40, 2] + 1
  m[41:80, 3] <- m[41:80, 3] - 1
  sets <- c(list(up = paste0("g", 1:40), down = paste0("g", 41:80)),
            stats::setNames(lapply(1:25, function(i) paste0("g", sample(G, sample(15:90, 1)))), paste0("r", 1:25)))
  list(m = m, sets = sets)
}

# The rows of one signature, as its own call gives them (attributes that
# time the run left out).
ms_same <- function(multi, name, single) {
  one <- gseaSignature(multi, name)
  expect_identical(as.data.frame(one), as.data.frame(single))
  expect_identical(attr(one, "ranking"), attr(single, "ranking"))
  expect_identical(attr(one, "members"), attr(single, "members"))
  expect_identical(unclass(one$leadingEdge), unclass(single$leadingEdge))
}

# ---- identity to single calls ----

test_that("each column of a matrix gives its own call's table, bit for bit (permutation and multilevel p)", {
  d <- ms_data()
  for (pv in c("permutation", "multilevel")) {
    res <- rapidGSEA(stats = d$m, geneSets = d$sets, nperm = 500, seed = 7, pvalue = pv, backend = "cpu",
                     threads = 2, verbose = FALSE)
    expect_s3_class(res, "rapidGSEAmulti")
    expect_identical(names(res)[[1L]], "signature")
    expect_identical(unique(res$signature), colnames(d$m))
    for (s in colnames(d$m)) {
      single <- rapidGSEA(d$m[, s], geneSets = d$sets, nperm = 500, seed = 7, pvalue = pv, backend = "cpu",
                          threads = 1, verbose = FALSE)
      ms_same(res, s, single)
      rows <- res[res$signature == s, ]
      expect_identical(rows$NES, single$NES)
      expect_identical(rows$FWER, single$FWER)
    }
  }
})

test_that("threads, batches and the kept null do not change a many-signature run", {
  d <- ms_data(n = 4)
  run <- function(...) as.data.frame(rapidGSEA(stats = d$m, geneSets = d$sets, nperm = 300, seed = 2,
                                               pvalue = "permutation", backend = "cpu", verbose = FALSE, ...))
  a <- run(threads = 1)
  expect_identical(run(threads = 2), a)
  op <- options(sysbioGPU.gseaBatch = 64)
  on.exit(options(op))
  expect_identical(run(threads = 2), a)
})

test_that("a list holds signatures on their own genes, in their own order", {
  d <- ms_data()
  m <- d$m
  keep <- sample(nrow(m), 1200)
  lst <- list(first = m[, 1], fewer = m[keep, 2], reordered = rev(m[, 3]))
  res <- rapidGSEA(stats = lst, geneSets = d$sets, nperm = 400, seed = 11, pvalue = "permutation",
                   backend = "cpu", threads = 2, verbose = FALSE)
  expect_identical(attr(res, "signatures"), names(lst))
  for (s in names(lst)) {
    single <- rapidGSEA(lst[[s]], geneSets = d$sets, nperm = 400, seed = 11, pvalue = "permutation",
                        backend = "cpu", threads = 2, verbose = FALSE)
    ms_same(res, s, single)
  }
  # a signature on fewer genes has its sets restricted to them
  fewer <- res[res$signature == "fewer", ]
  first <- res[res$signature == "first", ]
  expect_true(all(fewer$size <= first$size[match(fewer$set, first$set)]))
})

test_that("ties are broken by each signature's own gene order, as in its own call", {
  d <- ms_data()
  m <- round(d$m, 1) # many ties
  lst <- list(a = m[, 1], b = rev(m[, 1]))
  res <- suppressWarnings(rapidGSEA(stats = lst, geneSets = d$sets, nperm = 200, seed = 3, pvalue = "permutation",
                                    backend = "cpu", threads = 2, verbose = FALSE))
  for (s in names(lst)) {
    single <- suppressWarnings(rapidGSEA(lst[[s]], geneSets = d$sets, nperm = 200, seed = 3, pvalue = "permutation",
                                         backend = "cpu", threads = 1, verbose = FALSE))
    ms_same(res, s, single)
  }
  expect_warning(rapidGSEA(stats = list(a = m[, 1], b = d$m[, 2]), geneSets = d$sets, nperm = 50, seed = 3, pvalue = "permutation",
                           backend = "cpu", threads = 1, verbose = FALSE),
                 "signature 'a'.*tie", class = "sysbioGPU_warning_ties")
})

test_that("stats = a named vector is the preranked expr; one column is a many-signature table", {
  d <- ms_data()
  a <- rapidGSEA(d$m[, 1], geneSets = d$sets, nperm = 100, seed = 5, backend = "cpu", threads = 1, verbose = FALSE)
  b <- rapidGSEA(stats = d$m[, 1], geneSets = d$sets, nperm = 100, seed = 5, backend = "cpu", threads = 1, verbose = FALSE)
  expect_false(inherits(b, "rapidGSEAmulti"))
  expect_identical(as.data.frame(a), as.data.frame(b))
  c1 <- rapidGSEA(stats = d$m[, 1, drop = FALSE], geneSets = d$sets, nperm = 100, seed = 5, backend = "cpu",
                  threads = 1, verbose = FALSE)
  expect_s3_class(c1, "rapidGSEAmulti")
  ms_same(c1, "s1", a)
})

# ---- independent oracle ----

test_that("a signature's ES is the weighted running sum's extreme, computed from its definition", {
  d <- ms_data()
  res <- rapidGSEA(stats = d$m, geneSets = d$sets, nperm = 50, seed = 1, pvalue = "permutation", backend = "cpu",
                   threads = 1, verbose = FALSE)
  x <- d$m[, "s2"]
  r <- sort(x, decreasing = TRUE)
  es_def <- function(set) {
    hit <- names(r) %in% set
    step <- ifelse(hit, abs(r) / sum(abs(r[hit])), -1 / (length(r) - sum(hit)))
    run <- cumsum(step)
    run[which.max(abs(run))]
  }
  rows <- res[res$signature == "s2", ]
  expect_equal(rows$ES, unname(vapply(d$sets[rows$set], es_def, 0)), tolerance = 1e-12)
  expect_gt(rows$NES[rows$set == "up"], 2)
  # the leading edge: the members up to the extreme (after it when ES < 0), in rank order
  r <- x[order(-x, seq_along(x))]
  lead <- Map(function(set, es, at) {
    i <- which(names(r) %in% set)
    names(r)[if (es >= 0) i[i <= at] else i[i > at]]
  }, d$sets[rows$set], rows$ES, rows$rankAtMax)
  expect_identical(unclass(rows$leadingEdge), unname(lead))
})

test_that("the whole leading-edge column, built on access, is each row's running sum's leading edge", {
  d <- ms_data()
  lst <- list(first = d$m[, 1], fewer = d$m[sample(nrow(d$m), 1100), 2], reordered = rev(d$m[, 3]))
  res <- rapidGSEA(stats = lst, geneSets = d$sets, nperm = 50, seed = 2, pvalue = "permutation", backend = "cpu",
                   threads = 1, verbose = FALSE)
  # from the definition: the members up to the running sum's extreme (after it when the extreme is negative)
  lead <- unlist(lapply(names(lst), function(s) {
    x <- lst[[s]]
    r <- x[order(-x, seq_along(x))]
    lapply(res$set[res$signature == s], function(set) {
      hit <- names(r) %in% d$sets[[set]]
      run <- cumsum(ifelse(hit, abs(r) / sum(abs(r[hit])), -1 / (length(r) - sum(hit))))
      at <- which.max(abs(run))
      i <- which(hit)
      names(r)[if (run[[at]] >= 0) i[i <= at] else i[i > at]]
    })
  }), recursive = FALSE)
  f <- tempfile(fileext = ".rds")
  saveRDS(res, f)
  le <- res$leadingEdge
  expect_s3_class(le, "sbg_genelist")
  # unlist(): the genes (not the row numbers the column holds), before and after it is built
  expect_identical(unlist(res$leadingEdge), unlist(lead))
  expect_identical(unique(unlist(readRDS(f)$leadingEdge[1:9])), unique(unlist(lead[1:9])))
  expect_identical(length(le), nrow(res))
  # a few rows, built alone
  expect_identical(le[[40]], lead[[40]])
  expect_identical(unclass(le[c(60, NA, 2)]), c(lead[60], list(NULL), lead[2]))
  expect_identical(unclass(res[res$signature == "fewer", ]$leadingEdge), lead[res$signature == "fewer"])
  # every row: built once, kept for later access
  expect_identical(lengths(le), lengths(lead))
  expect_identical(as.list(le), lead)
  expect_identical(le[[41]], lead[[41]])
  expect_identical(unclass(le[c(61, 3)]), lead[c(61, 3)])
  expect_identical(as.character(le, quote = FALSE), vapply(lead, paste, "", collapse = ","))
  expect_identical(lapply(fgseaTable(res)$leadingEdge, as.character), lead)
  le[[3]] <- "g1"
  expect_identical(unclass(le), replace(lead, 3, list("g1")))
  back <- readRDS(f)$leadingEdge
  expect_identical(back[[7]], lead[[7]])
  expect_identical(as.list(back), lead)
  # rbind() assigns a lazy column into another
  expect_identical(unclass(rbind(readRDS(f), res)$leadingEdge), c(lead, lead))
})

# ---- methods ----

test_that("as.data.frame, print, summary, fgseaTable and plot work by signature", {
  d <- ms_data()
  res <- rapidGSEA(stats = d$m, geneSets = d$sets, nperm = 100, seed = 1, pvalue = "permutation", backend = "cpu",
                   threads = 1, verbose = FALSE)
  df <- as.data.frame(res)
  expect_identical(names(df)[1:3], c("signature", "set", "size"))
  expect_type(df$leadingEdge, "character")
  expect_output(print(res), "3 signatures")
  s <- summary(res)
  expect_identical(s$bySignature$signature, colnames(d$m))
  expect_identical(s$bySignature$sets, rep(27L, 3))
  expect_output(print(s), "3 signatures")
  expect_identical(names(fgseaTable(res))[[1L]], "signature")
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(res, set = "up", signature = "s2"))
  expect_silent(plot(res))
  expect_error(plot(res, signature = "nope"), "`signature`.*not a signature", class = "sysbioGPU_error_input")
  expect_error(gseaSignature(as.data.frame(res), 1), "`x` must be", class = "sysbioGPU_error_input")
})

# ---- bad input ----

test_that("bad signatures are errors that name `stats` and the signature", {
  d <- ms_data()
  run <- function(st, ...) rapidGSEA(stats = st, geneSets = d$sets, nperm = 20, seed = 1, backend = "cpu",
                                     threads = 1, verbose = FALSE, ...)
  m <- d$m
  m[5, 2] <- NA
  expect_error(run(m), "`stats`, signature 's2': `stats` has NA", class = "sysbioGPU_error_input")
  m <- d$m
  colnames(m)[3] <- "s1"
  expect_error(run(m), "`stats` has duplicated signature names, e.g. 's1'", class = "sysbioGPU_error_input")
  expect_error(run(unname(d$m)), "`stats` needs the genes as row names", class = "sysbioGPU_error_input")
  m <- d$m
  colnames(m) <- NULL
  expect_error(run(m), "`stats` needs the signatures' names", class = "sysbioGPU_error_input")
  expect_error(run(list(d$m[, 1], d$m[, 2])), "`stats` must be a named list", class = "sysbioGPU_error_input")
  expect_error(run(list(a = d$m[, 1], b = letters)), "signature 'b' is", class = "sysbioGPU_error_input")
  expect_error(run(list(a = d$m[, 1], b = unname(d$m[, 2]))), "signature 'b'.*named numeric",
               class = "sysbioGPU_error_input")
  # genes that no set matches: the signature's own gene universe
  other <- stats::setNames(rnorm(500), paste0("x", 1:500))
  expect_error(run(list(a = d$m[, 1], other = other)), "signature 'other'.*no gene set left",
               class = "sysbioGPU_error_input")
  expect_error(run(matrix(letters[1:4], 2, dimnames = list(c("a", "b"), c("u", "v")))), "numeric matrix",
               class = "sysbioGPU_error_input")
  expect_error(run(list()), "empty list", class = "sysbioGPU_error_input")
  expect_error(rapidGSEA(d$m[, 1], geneSets = d$sets, stats = d$m), "as `expr` or as `stats`, not both",
               class = "sysbioGPU_error_input")
  expect_error(run(d$m, phenotype = rep(1:2, 5)), "`phenotype` is given", class = "sysbioGPU_error_input")
  expect_error(run(d$m, keepNull = TRUE), "`keepNull`", class = "sysbioGPU_error_input")
  m <- d$m
  m[, 2] <- 1
  expect_error(run(m), "signature 's2'.*constant", class = "sysbioGPU_error_input")
})

test_that("a matrix's columns stop and warn as the same columns given as a list, checked one by one", {
  # the matrix is checked in one pass (ffi_gsea_scan_columns) and only the
  # columns it flags by the per-signature checks; a list runs those checks
  # on every signature: the conditions must be the same, in the same order
  d <- ms_data(G = 400, n = 8)
  conds <- function(st, weight = 1) {
    got <- character()
    withCallingHandlers(
      tryCatch({
        rapidGSEA(stats = st, geneSets = d$sets, nperm = 10, seed = 1, weight = weight, backend = "cpu",
                  threads = 1, verbose = FALSE)
        got <- c(got, "ran")
      }, error = function(e) got <<- c(got, paste("error:", conditionMessage(e)))),
      warning = function(w) {
        got <<- c(got, paste("warning:", conditionMessage(w)))
        invokeRestart("muffleWarning")
      })
    got
  }
  as_list <- function(m) stats::setNames(lapply(seq_len(ncol(m)), function(j) stats::setNames(m[, j], rownames(m))),
                                         colnames(m))
  same <- function(m, weight = 1) {
    a <- conds(m, weight)
    expect_identical(a, conds(as_list(m), weight))
    a
  }
  m <- d$m
  m[1:10, 2] <- 0.5        # 9 ties of 400: above 1%, a warning
  m[1:2, 4] <- -0          # -0 ties 0: 4 ties, exactly 1%, a warning
  m[3:5, 4] <- 0
  m[1:3, 1] <- 0.25        # 2 ties, below 1%, nothing
  m[1:8, 6] <- c(1, 1, 1, 1, 2, 2, -1, -1) # 5 ties: a warning
  got <- same(m)
  expect_identical(sum(grepl("^warning: `stats`, signature 's2'.*tie", got)), 1L)
  expect_identical(sum(grepl("^warning: `stats`, signature 's6'.*tie", got)), 1L)
  expect_identical(sum(grepl("^warning: `stats`, signature 's4'.*4 of 400 genes", got)), 1L)
  expect_false(any(grepl("'s1'", got)))
  expect_identical(got[[length(got)]], "ran")
  m[7, 5] <- 1e-310        # a subnormal value: the warnings of s2 and s4, then its error (s6 not reached)
  got <- same(m)
  expect_match(got[[length(got)]], "^error: `stats`, signature 's5'.*too small")
  expect_identical(length(got), 3L)
  m <- d$m
  m[3, 7] <- Inf           # non-finite: refused before any numeric check
  m[1:10, 2] <- 0.5
  got <- same(m)
  expect_identical(got, "error: `stats`, signature 's7': `stats` has NA, NaN or infinite values (1)")
  m <- d$m
  m[9, 3] <- 1e-200        # weight 8: |metric|^8 underflows for this column only
  expect_match(same(m, weight = 8), "signature 's3'.*underflows")
  m <- d$m
  m[9, 8] <- 1e200         # weight 2: |metric|^2 overflows for this column only
  expect_match(same(m, weight = 2), "signature 's8'.*overflows")
  m <- d$m
  m[, 5] <- -0             # a constant column
  expect_match(same(m), "signature 's5'.*constant")
})

# ---- GPU ----

test_that("on the GPU each signature's table is its own CPU call's, bit for bit", {
  skip_if_no_gpu()
  d <- ms_data()
  for (pv in c("permutation", "multilevel")) {
    res <- rapidGSEA(stats = d$m, geneSets = d$sets, nperm = 2000, seed = 9, pvalue = pv, backend = "gpu",
                     threads = 2, verbose = FALSE)
    expect_identical(attr(res, "backend"), "gpu")
    for (s in colnames(d$m)) {
      single <- rapidGSEA(d$m[, s], geneSets = d$sets, nperm = 2000, seed = 9, pvalue = pv, backend = "cpu",
                          threads = 2, verbose = FALSE)
      one <- gseaSignature(res, s)
      expect_identical(as.data.frame(one), as.data.frame(single))
    }
  }
})

# Signatures for the GPU's blocks: many columns on one gene universe (one
# block, scored from shared draws), one on fewer genes (another block), one
# mostly 0 (the draws of small sets often weigh 0: unit weights) and one
# with ties.
ms_gpu_data <- function(n = 70) {
  d <- ms_data(n = n)
  lst <- lapply(seq_len(n), function(j) d$m[, j])
  names(lst) <- colnames(d$m)
  lst$fewer <- d$m[sample(nrow(d$m), 1100), 1]
  lst$zeros <- replace(d$m[, 2], 31:nrow(d$m), 0)
  lst$ties <- round(d$m[, 3], 1)
  list(lst = lst, sets = d$sets)
}

test_that("on the GPU a block of signatures scored from shared draws gives each one's own GPU and CPU table", {
  skip_if_no_gpu()
  d <- ms_gpu_data()
  run <- function(st, backend) {
    suppressWarnings(rapidGSEA(stats = st, geneSets = d$sets, nperm = 1000, seed = 4, pvalue = "permutation",
                               backend = backend, threads = 2, verbose = FALSE))
  }
  gpu <- run(d$lst, "gpu")
  cpu <- run(d$lst, "cpu")
  expect_identical(attr(gpu, "backend"), "gpu")
  expect_identical(as.data.frame(gpu), as.data.frame(cpu))
  # pass 2 drawing again (nothing kept) and batches of 64 permutations
  op <- options(sysbioGPU.gseaCache = 0, sysbioGPU.gseaBatch = 64)
  on.exit(options(op))
  expect_identical(as.data.frame(run(d$lst, "gpu")), as.data.frame(cpu))
  options(op)
  for (s in c("s1", "s70", "fewer", "zeros", "ties")) {
    single <- suppressWarnings(rapidGSEA(d$lst[[s]], geneSets = d$sets, nperm = 1000, seed = 4,
                                         pvalue = "permutation", backend = "gpu", verbose = FALSE))
    ms_same(gpu, s, single)
  }
})

test_that("on the GPU a block's ES are the running sum's extreme from its definition", {
  skip_if_no_gpu()
  d <- ms_gpu_data(n = 5)
  res <- suppressWarnings(rapidGSEA(stats = d$lst, geneSets = d$sets, nperm = 100, seed = 1, pvalue = "permutation",
                                    backend = "gpu", verbose = FALSE))
  for (s in c("s4", "zeros")) {
    x <- d$lst[[s]]
    r <- x[order(-x, seq_along(x))]
    es_def <- function(set) {
      hit <- names(r) %in% set
      w <- abs(r) * hit
      step <- ifelse(hit, if (sum(w)) w / sum(w) else hit / sum(hit), -1 / (length(r) - sum(hit)))
      run <- cumsum(step)
      run[which.max(abs(run))]
    }
    rows <- res[res$signature == s, ]
    expect_equal(rows$ES, unname(vapply(d$sets[rows$set], es_def, 0)), tolerance = 1e-12)
  }
})
