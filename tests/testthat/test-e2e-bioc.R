# End to end, as a Bioconductor user's report runs (offline, all data built
# here): an expression study of two groups, a limma-like moderated t,
# gene sets, rapidGSEA preranked and with phenotype permutations (compared
# with fgsea where it is installed), then a Boolean network and a reaction
# network step.  Each step is checked against a value derived in this file.

e2e_study <- function() {
  set.seed(2024)
  G <- 400
  genes <- c(sprintf("GENE%03d", seq_len(G - 2)), "IGK", "Igk")   # exact names: two genes
  group <- factor(rep(c("normal", "cancer"), each = 6), levels = c("normal", "cancer"))
  x <- matrix(stats::rnorm(G * 12, mean = 8, sd = 0.5), G, dimnames = list(genes, paste0("s", 1:12)))
  up <- 1:30
  down <- 31:55
  x[up, group == "cancer"] <- x[up, group == "cancer"] + 0.8
  x[down, group == "cancer"] <- x[down, group == "cancer"] - 0.8
  sets <- list(UP = genes[up], DOWN = genes[down], HALF_UP = genes[c(1:12, 200:217)])
  for (i in 1:17) sets[[sprintf("RANDOM%02d", i)]] <- sample(genes[56:G], sample(15:60, 1))
  list(x = x, group = group, sets = sets)
}

# limma's moderated t without limma: per-gene residual variance shrunk
# towards the median variance with d0 = 4 prior degrees of freedom; the
# coefficient is cancer - normal (limma's ~ group, reference level first).
moderated_t <- function(x, group) {
  a <- x[, group == levels(group)[2], drop = FALSE]
  b <- x[, group == levels(group)[1], drop = FALSE]
  d <- ncol(x) - 2
  s2 <- (rowSums((a - rowMeans(a))^2) + rowSums((b - rowMeans(b))^2)) / d
  d0 <- 4
  s2_post <- (d0 * stats::median(s2) + d * s2) / (d0 + d)
  (rowMeans(a) - rowMeans(b)) / sqrt(s2_post * (1 / ncol(a) + 1 / ncol(b)))
}

test_that("a two-group study: moderated t, preranked and phenotype GSEA, fgsea's table", {
  st <- e2e_study()
  tstat <- moderated_t(st$x, st$group)
  expect_identical(anyDuplicated(names(tstat)), 0L)
  pre <- rapidGSEA(tstat, geneSets = st$sets, nperm = 1000, seed = 1, backend = "cpu", threads = 2)
  expect_identical(pre$set, names(st$sets))          # the table in the order given
  ranked <- sort(tstat, decreasing = TRUE)
  ref <- vapply(st$sets, function(s) gsea_ref_es(ranked, s)[["ES"]], 0)
  expect_equal(pre$ES, unname(ref), tolerance = 1e-12)
  expect_gt(pre$NES[pre$set == "UP"], 0)
  expect_lt(pre$NES[pre$set == "DOWN"], 0)
  expect_lt(max(pre$pval[pre$set %in% c("UP", "DOWN")]), 1e-6)   # multilevel reaches far below 1/nperm
  rnd <- grepl("^RANDOM", pre$set)
  expect_gt(stats::median(pre$pval[rnd]), 0.1)
  expect_true(all(pre$pval < 1 | pre$pval == 1 & abs(pre$ES) < 0.15))
  # phenotype permutations, cancer as the class of interest: the same signs as limma's coefficient
  ph <- rapidGSEA(st$x, st$group, st$sets, classA = "cancer", nperm = 200, seed = 1, backend = "cpu", threads = 2)
  expect_identical(attr(ph, "classes"), c("cancer", "normal"))
  expect_gt(ph$NES[ph$set == "UP"], 0)
  expect_lt(ph$NES[ph$set == "DOWN"], 0)
  expect_lte(max(ph$pval[ph$set %in% c("UP", "DOWN")]), 1 / 200)
  # fgsea's table shape, ready for code written for fgsea
  ft <- fgseaTable(pre)
  expect_identical(ft$pathway, pre$set)
  expect_type(ft$leadingEdge, "list")
  # fgsea on the same list, where installed: the same ES and leading edges,
  # p-values of the same order
  skip_if_not_installed("fgsea")
  fg <- getExportedValue("fgsea", "fgseaMultilevel")(st$sets, tstat, minSize = 15, maxSize = 500, eps = 0)
  fg <- fg[match(pre$set, fg$pathway), ]
  expect_equal(fg$ES, pre$ES, tolerance = 1e-6)
  expect_identical(lapply(fg$leadingEdge, sort), lapply(ft$leadingEdge, sort))
  expect_gt(stats::cor(log10(fg$pval), log10(pre$pval)), 0.95)
})

test_that("a Boolean network and a reaction network step", {
  # PBN: a toggle with noise; the two-state estimate covers the exact value
  net <- pbn(list(A = c("!B" = 0.9, "A" = 0.1), B = c("!A" = 0.8, "B" = 0.2)))
  ex <- pbnSteadyState(net, c(A = TRUE), p = 0.05, method = "exact")
  est <- pbnSteadyState(net, c(A = TRUE), p = 0.05, r = 0.01, seed = 3, backend = "cpu", threads = 2,
                        verbose = FALSE)
  expect_lt(abs(est$probability - ex$probability), 0.02)
  expect_true(est$converged)
  # reaction network A <-> B (rates 2, 1): A(t) = 1/3 + 2/3 exp(-3 t)
  m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)), rates = c(2, 1),
                     initial = c(1, 0), species = c("A", "B"))
  tt <- seq(0, 2, by = 0.25)
  out <- lassieSimulate(m, tt, rtol = 1e-9, backend = "cpu", threads = 1, verbose = FALSE)
  long <- as.data.frame(out)
  expect_equal(long$value[long$variable == "A"], 1 / 3 + 2 / 3 * exp(-3 * tt), tolerance = 1e-7)
  expect_equal(summary(out)["Max.", "B"], max(1 - (1 / 3 + 2 / 3 * exp(-3 * tt))), tolerance = 1e-7)
})
