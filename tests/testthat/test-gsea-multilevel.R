# Multilevel p-values of preranked rapidGSEA() (src/gsea/gsea_multilevel.c)
# against independent oracles: exact enumeration of every k-subset of tiny
# lists, and long plain-permutation runs; reproducibility, log2err, eps and
# the refusal of phenotype permutations.

# ---- oracle: every k-subset of a tiny ranked list ----

# ES+ (largest running sum), ES- (least) and Broad's signed ES of all
# choose(G, k) subsets, written the obvious way in plain R; m in rank order.
ml_exact <- function(m, q, k) {
  G <- length(m)
  w <- abs(m)^q
  sub <- utils::combn(G, k)
  C <- ncol(sub)
  hit <- matrix(FALSE, G, C)
  hit[cbind(as.vector(sub), rep(seq_len(C), each = k))] <- TRUE
  wh <- w * hit
  inc <- sweep(wh, 2, colSums(wh), "/") - (!hit) / (G - k)
  rs <- apply(inc, 2, cumsum)
  list(plus = pmax(0, apply(rs, 2, max)), minus = pmin(0, apply(rs, 2, min)),
       es = rs[cbind(apply(abs(rs), 2, which.max), seq_len(C))], sub = sub)
}

# The exact p of every subset: P(ES+ >= its ES+) / P(ES >= 0), mirrored for
# a negative ES (the definition in ?rapidGSEA); the counts from the sorted
# values (each subset against all others would be quadratic).
ml_exact_p <- function(ex) {
  ge <- length(ex$plus) - findInterval(ex$plus - 1e-12, sort(ex$plus), left.open = TRUE)
  le <- findInterval(ex$minus + 1e-12, sort(ex$minus))
  C <- length(ex$es)
  pmin(ifelse(ex$es >= 0, (ge / C) / mean(ex$es >= 0), (le / C) / mean(ex$es <= 0)), 1)
}

# Multilevel p of chosen subsets of a tiny list against the exact p, over
# several seeds; subsets whose tail holds at least `min_tail` subsets (in
# tiny lists the few most extreme subsets can be cut off from each other by
# single swaps, and the Markov chain cannot cross between them).
ml_vs_exact <- function(G, k, q, seeds, min_tail = 12, n_pick = 16, list_seed = 1,
                        sampleSize = formals(rapidGSEA)$sampleSize, backend = "cpu") {
  set.seed(list_seed)
  m <- sort(stats::rnorm(G), decreasing = TRUE)
  names(m) <- paste0("g", seq_len(G))
  ex <- ml_exact(m, q, k)
  ep <- ml_exact_p(ex)
  tail_n <- ep * ifelse(ex$es >= 0, mean(ex$es >= 0), mean(ex$es <= 0)) * length(ep)
  ok <- which(tail_n >= min_tail - 1e-9 & ep < 0.5)
  pick <- ok[order(ep[ok])][unique(round(seq(1, length(ok), length.out = n_pick)))]
  sets <- stats::setNames(lapply(pick, function(j) names(m)[ex$sub[, j]]), paste0("s", pick))
  do.call(rbind, lapply(seeds, function(seed) {
    r <- rapidGSEA(m, geneSets = sets, nperm = 1000, minSize = k, maxSize = k, weight = q, seed = seed,
                   sampleSize = sampleSize, backend = backend, threads = 1, verbose = FALSE)
    data.frame(seed = seed, exact = ep[pick], ml = r$pval, err = r$log2err, ES = r$ES, es_ref = ex$es[pick])
  }))
}

# log2(multilevel p / exact p) over the sets and seeds, checked against
# the log2err each p comes with
ml_check_exact <- function(res) {
  expect_equal(res$ES, res$es_ref, tolerance = 1e-12)
  expect_true(all(res$err > 0 & is.finite(res$err)))
  expect_true(min(res$exact) < 0.01) # the oracle reaches into the tail
  lr <- log2(res$ml / res$exact)
  # no bias: a level counted twice or missed, or a p not conditioned on the
  # sign, moves every p by a factor of about 2 (1 in log2)
  expect_lt(abs(mean(lr)), 0.25)
  # spread as log2err says (one ruler per size and sign serves several sets,
  # so the sets of one seed are not independent)
  z <- lr / res$err
  expect_lt(mean(abs(z) <= 2.5), 1.01)
  expect_gt(mean(abs(z) <= 2.5), 0.9)
  expect_lt(max(abs(z)), 4.5)
}

test_that("multilevel p matches exact enumeration of all subsets of tiny lists (default sampleSize)", {
  ml_check_exact(rbind(ml_vs_exact(G = 16, k = 4, q = 1, seeds = 1:5),
                       ml_vs_exact(G = 16, k = 5, q = 2, seeds = 1:5, list_seed = 2),
                       ml_vs_exact(G = 14, k = 3, q = 1, seeds = 1:5, list_seed = 3)))
})

test_that("a list of 65 genes: the random sets' last word of bits (gene 65 alone) is read and cleared", {
  # 64 q + 1 genes: a set that draws the last gene has it in a word of its
  # own; sets without it, or with it kept for the next draws, bias the null
  ml_check_exact(ml_vs_exact(G = 65, k = 3, q = 1, seeds = 1:3))
})

test_that("a larger sampleSize: p still within its (smaller) log2err of the exact p", {
  # samples of 625 instead of the default: log2err about half; an engine
  # that ignored sampleSize but reported the smaller log2err would put the
  # p-values about 2 log2err away from the exact ones
  big <- ml_vs_exact(G = 16, k = 5, q = 2, seeds = 1:3, list_seed = 2, sampleSize = 625)
  def <- ml_vs_exact(G = 16, k = 5, q = 2, seeds = 1, list_seed = 2)
  lv <- def$exact < 0.02 # p from the levels at both sizes (above: the plain random sets)
  expect_true(any(lv))
  expect_true(all(big$err[big$seed == 1][lv] < def$err[lv] / 1.8))
  ml_check_exact(big)
})

# ---- oracle: long plain permutation runs, p ~ 1e-3 to 1e-4 ----

test_that("multilevel p matches a long permutation run where p ~ 1e-4", {
  set.seed(7)
  G <- 2000
  r <- stats::setNames(stats::rnorm(G), paste0("g", seq_len(G)))
  # sets of 20-40 genes, each shifted so that its p lands near 1e-3..1e-4
  sizes <- c(20, 25, 30, 40, 20, 30)
  shift <- c(0.5, 0.9, 0.62, 0.62, -0.85, -0.42)
  idx <- split(sample(G, sum(sizes)), rep(seq_along(sizes), sizes))
  for (i in seq_along(idx)) r[idx[[i]]] <- r[idx[[i]]] + shift[[i]]
  sets <- stats::setNames(lapply(idx, function(i) names(r)[i]), paste0("s", seq_along(idx)))
  nperm <- 400000
  perm <- rapidGSEA(r, geneSets = sets, nperm = nperm, minSize = 15, seed = 11, backend = "cpu", threads = 2,
                    pvalue = "permutation", verbose = FALSE)
  ml <- rapidGSEA(r, geneSets = sets, nperm = 1000, minSize = 15, seed = 12, backend = "cpu", threads = 2,
                  verbose = FALSE)
  expect_true(all(perm$pval > 1e-5 & perm$pval < 3e-3))
  expect_true(any(perm$pval < 1e-4))
  # permutation p = (b + 1) / (m + 1), about half the permutations of a sign:
  # sd of its log2 from the binomial count b
  b <- perm$pval * nperm / 2
  sd_perm <- 1 / (log(2) * sqrt(b))
  z <- log2(ml$pval / perm$pval) / sqrt(ml$log2err^2 + sd_perm^2)
  expect_true(all(abs(z) < 3.5), info = paste(round(z, 2), collapse = " "))
  expect_lt(abs(mean(z)), 1.5) # six independent rulers: sd of the mean about 0.4
})

# ---- oracle: the top and bottom sets of a list, p = 1 / choose(G, k) ----

test_that("multilevel p of the k top-ranked genes is 1 / choose(G, k) / P(ES >= 0)", {
  # only the top k genes reach ES+ = 1 (every hit before any miss); the
  # levels near it are thin (few sets, rare swaps): a chain stopped too
  # early there leaves copies of the wrong sets and p comes out too small
  # (with at most 50 proposals per wanted swap: log2 ratios -2.1 and -5.5
  # here, mean -2.5)
  set.seed(8)
  G <- 8000
  r <- stats::setNames(sort(stats::rnorm(G), decreasing = TRUE), paste0("g", seq_len(G)))
  sets <- list(top = names(r)[1:15], bottom = names(r)[(G - 14):G])
  # P(ES >= 0) is about 1/2 (2,000 random sets estimate it within 3%)
  exact <- 1 / choose(G, 15) / 0.5
  lr <- unlist(lapply(3:4, function(seed) {
    a <- rapidGSEA(r, geneSets = sets, nperm = 2000, minSize = 5, seed = seed, backend = "cpu", threads = 2,
                   verbose = FALSE)
    expect_identical(a$ES, c(1, -1))
    lr <- log2(a$pval / exact)
    expect_true(all(abs(lr) < 3 * a$log2err + 0.2), info = paste(round(lr, 2), round(a$log2err, 2)))
    lr
  }))
  # log2err about 1.45 each (samples of 151). Seeds 1-6 (12 p;
  # inst/bench/gsea.R, SBG_BENCH_ML_TOP=6) give a mean log2 ratio of +0.25
  # (sd 1.32) on this list and +0.35 (sd 1.54) on the 21,086 genes of C2
  # since each member moves from its own stream (+1.19 here with one
  # stream per ruler); these seeds +0.78. The
  # bound catches the too-few-proposals regression (-2.5)
  expect_lt(abs(mean(lr)), 1.5)
})

# ---- reproducibility, log2err, eps ----

ml_list <- function(G = 3000, seed = 5) {
  set.seed(seed)
  r <- stats::setNames(stats::rnorm(G), paste0("g", seq_len(G)))
  sizes <- c(15, 15, 30, 50, 80, 30, 15)
  shift <- c(2.5, 0.4, 1.5, 1.0, -1.1, -0.3, 0)
  idx <- split(sample(G, sum(sizes)), rep(seq_along(sizes), sizes))
  for (i in seq_along(idx)) r[idx[[i]]] <- r[idx[[i]]] + shift[[i]]
  list(r = r, sets = stats::setNames(lapply(idx, function(i) names(r)[i]), paste0("s", seq_along(idx))))
}

test_that("same seed, same multilevel p on 1 and 2 threads; another seed or sampleSize another p", {
  d <- ml_list()
  run <- function(threads, seed = 3, sampleSize = formals(rapidGSEA)$sampleSize) {
    rapidGSEA(d$r, geneSets = d$sets, nperm = 500, seed = seed, sampleSize = sampleSize, backend = "cpu",
              threads = threads, verbose = FALSE)
  }
  a <- run(1)
  b <- run(2)
  expect_identical(attr(a, "pvalue"), "multilevel")
  expect_identical(attr(a, "sampleSize"), as.integer(formals(rapidGSEA)$sampleSize))
  expect_identical(a$pval, b$pval)
  expect_identical(a$log2err, b$log2err)
  expect_identical(a$padj, stats::p.adjust(a$pval, "BH"))
  expect_true(min(a$pval) < 1e-10) # far below 1 / nperm
  expect_false(identical(a$pval, run(2, seed = 4)$pval))
  s1 <- run(1, sampleSize = 51)
  s2 <- run(2, sampleSize = 51)
  expect_identical(attr(s1, "sampleSize"), 51L)
  expect_identical(s1$pval, s2$pval)
  expect_identical(s1$log2err, s2$log2err)
  expect_false(identical(s1$pval, a$pval))
  # log2err as the order statistics of the smaller samples say (about
  # sqrt(3) times the default's), and the two estimates within it
  lv <- a$pval < 1e-3
  expect_true(all(s1$log2err[lv] > 1.5 * a$log2err[lv]))
  expect_true(all(abs(log2(s1$pval / a$pval)) < 3 * sqrt(s1$log2err^2 + a$log2err^2)))
})

test_that("log2err: the order statistics' sd for multilevel p, NA for permutation p", {
  d <- ml_list()
  a <- rapidGSEA(d$r, geneSets = d$sets, nperm = 500, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  expect_true(all(is.finite(a$log2err) & a$log2err > 0))
  # each level adds psi1(c) - psi1(n + 1), about 0.01 for c = 51 of n = 101
  # (samples of n = sampleSize, the median kept):
  # log2err grows like sqrt(levels), about sqrt(-log2 p)
  lp <- -log2(a$pval)
  expect_true(all(a$log2err[lp > 20] > a$log2err[lp < 5][1]))
  n <- attr(a, "sampleSize")
  ref <- sqrt(floor(lp + 1) * (trigamma((n + 1) / 2) - trigamma(n + 1))) / log(2)
  ml <- a$pval < 1e-3 # the rest come from the plain random sets
  expect_true(all(abs(a$log2err - ref)[ml] < 0.25))
  expect_identical(summary(a)$minP, 1e-300)
  p <- rapidGSEA(d$r, geneSets = d$sets, nperm = 500, seed = 1, backend = "cpu", threads = 1, verbose = FALSE,
                 pvalue = "permutation")
  expect_true(all(is.na(p$log2err)))
  expect_true(all(p$pval >= 1 / 501))
  expect_identical(p$ES, a$ES)
  expect_identical(p$NES, a$NES)
})

test_that("eps: p below eps is eps with log2err NA; p above eps as with eps = 0", {
  d <- ml_list()
  run <- function(eps) rapidGSEA(d$r, geneSets = d$sets, nperm = 500, seed = 2, eps = eps, backend = "cpu",
                                 threads = 2, verbose = FALSE)
  a <- run(0)
  e <- run(1e-6)
  low <- a$pval < 1e-6
  expect_true(any(low) && any(!low))
  expect_identical(e$pval[low], rep(1e-6, sum(low)))
  expect_true(all(is.na(e$log2err[low])))
  expect_identical(e$pval[!low], a$pval[!low])
  expect_identical(e$log2err[!low], a$log2err[!low])
  expect_identical(attr(e, "eps"), 1e-6)
})

# ---- arguments ----

test_that("multilevel with phenotype permutations and a bad eps are classed input errors", {
  set.seed(1)
  x <- matrix(stats::rnorm(200 * 8), 200, dimnames = list(paste0("g", 1:200), NULL))
  y <- rep(c("A", "B"), each = 4)
  sets <- list(a = paste0("g", 1:20), b = paste0("g", 21:45))
  expect_error(rapidGSEA(x, y, sets, nperm = 20, pvalue = "multilevel", backend = "cpu", threads = 1),
               "needs `permutation` = \"gene\"", class = "sysbioGPU_error_input")
  # auto: permutation p for phenotype permutations, multilevel for genes
  p <- rapidGSEA(x, y, sets, nperm = 20, seed = 1, backend = "cpu", threads = 1, verbose = FALSE)
  expect_identical(attr(p, "pvalue"), "permutation")
  g <- rapidGSEA(x, y, sets, nperm = 20, seed = 1, permutation = "gene", backend = "cpu", threads = 1,
                 verbose = FALSE)
  expect_identical(attr(g, "pvalue"), "multilevel")
  for (bad in list(-1, 1, NA, "a", c(0, 0.1))) {
    expect_error(rapidGSEA(x, y, sets, permutation = "gene", eps = bad), "`eps`", class = "sysbioGPU_error_input")
  }
  expect_error(rapidGSEA(x, y, sets, pvalue = "exact"), "`pvalue`", class = "sysbioGPU_error_input")
  for (bad in list(1, 2, 100, 3.5, -101, NA, NA_integer_, "101", c(101, 151), Inf, 1e6 + 1)) {
    expect_error(rapidGSEA(x, y, sets, permutation = "gene", sampleSize = bad), "`sampleSize` must be",
                 class = "sysbioGPU_error_input")
  }
  expect_error(rapidGSEA(x, y, sets, permutation = "gene", sampleSize = 102), "`sampleSize` must be odd",
               class = "sysbioGPU_error_input")
  # no multilevel levels, no sampleSize attribute
  expect_null(attr(p, "sampleSize"))
})

# ---- interrupts ----

# A long multilevel run (60 sizes of sets drawn from the top 15% of 20,000
# genes: p ~ 1e-100, hundreds of levels per size, minutes of work) stopped
# by an interrupt `after` seconds in: a classed error within 10 s.
ml_expect_interrupt <- function(after, gpu = FALSE) {
  set.seed(4)
  G <- 20000L
  m <- sort(stats::rnorm(G), decreasing = TRUE)
  sizes <- 200:259
  pos <- unlist(lapply(sizes, function(k) sample(3000L, k) - 1L))
  interrupt_after(after)
  t0 <- Sys.time()
  expect_error(sysbioGPU:::gsea_multilevel(m, 1, c(0L, cumsum(sizes)), pos, seed = 1, eps = 0, sampleSize = 101L,
                                           threads = 2L, gpu = gpu),
               "interrupted by the user", class = "sysbioGPU_error_interrupted")
  expect_lt(as.numeric(difftime(Sys.time(), t0, units = "secs")), 10)
}

test_that("Ctrl-C stops a long multilevel run", {
  skip_on_os("windows")
  ml_expect_interrupt(0.5)
  expect_length(philoxDraws(3, 1), 3)
})

# ---- the members' moves on a GPU (src/gsea/gsea_multilevel_gpu.cu) ----

test_that("GPU multilevel p are the CPU's, bit for bit (sample sizes, weights, eps, waves)", {
  skip_if_no_gpu()
  d <- ml_list()
  run <- function(backend, seed = 3, threads = 2, ...) {
    rapidGSEA(d$r, geneSets = d$sets, nperm = 500, seed = seed, backend = backend, threads = threads,
              verbose = FALSE, ...)
  }
  for (args in list(list(), list(sampleSize = 51), list(weight = 0), list(weight = 2, seed = 8),
                    list(eps = 1e-12))) {
    a <- do.call(run, c(list("cpu"), args))
    g <- do.call(run, c(list("gpu"), args))
    expect_identical(attr(g, "backend"), "gpu")
    expect_identical(g$pval, a$pval)
    expect_identical(g$log2err, a$log2err)
    expect_true(min(a$pval) < 1e-6) # the rulers climbed many levels
    # more than 6 host threads: the plain random sets on the host
    g8 <- do.call(run, c(list("gpu", threads = 8), args))
    expect_identical(g8$pval, a$pval)
    expect_identical(g8$log2err, a$log2err)
  }
  # every ruler in a wave of its own: the same table
  old <- options(sysbioGPU.gseaWaveBytes = 1)
  on.exit(options(old), add = TRUE)
  a <- run("cpu")
  g <- run("gpu")
  expect_identical(g$pval, a$pval)
  expect_identical(g$log2err, a$log2err)
})

test_that("GPU multilevel p against exact enumeration of tiny lists: the CPU's p", {
  skip_if_no_gpu()
  g <- rbind(ml_vs_exact(G = 16, k = 4, q = 1, seeds = 1:3, backend = "gpu"),
             ml_vs_exact(G = 16, k = 5, q = 2, seeds = 1:3, list_seed = 2, backend = "gpu"))
  a <- rbind(ml_vs_exact(G = 16, k = 4, q = 1, seeds = 1:3),
             ml_vs_exact(G = 16, k = 5, q = 2, seeds = 1:3, list_seed = 2))
  expect_identical(g$ml, a$ml)
  expect_identical(g$err, a$err)
  ml_check_exact(g)
})

test_that("Ctrl-C stops a long multilevel run on the GPU, which stays usable", {
  skip_if_no_gpu()
  skip_on_os("windows")
  ml_expect_interrupt(1, gpu = TRUE)
  d <- ml_list()
  g <- rapidGSEA(d$r, geneSets = d$sets, nperm = 500, seed = 3, backend = "gpu", verbose = FALSE)
  expect_identical(g$pval, rapidGSEA(d$r, geneSets = d$sets, nperm = 500, seed = 3, backend = "cpu", threads = 2,
                                     verbose = FALSE)$pval)
})
