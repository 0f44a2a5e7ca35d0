# Plain-R references for the rapidGSEA() tests: Broad's metrics and the
# full running sum, written the slow, obvious way.

gsea_ref_metric <- function(x, labels, metric) {
  a <- x[, labels == 0, drop = FALSE]
  b <- x[, labels == 1, drop = FALSE]
  ma <- rowMeans(a)
  mb <- rowMeans(b)
  fix <- function(sd, m) pmax(sd, ifelse(m == 0, 0.2, 0.2 * abs(m)))
  sa <- fix(apply(a, 1, stats::sd), ma)
  sb <- fix(apply(b, 1, stats::sd), mb)
  switch(metric,
    signal2noise = (ma - mb) / (sa + sb),
    t_test = (ma - mb) / sqrt(sa^2 / ncol(a) + sb^2 / ncol(b)),
    diff_of_classes = ma - mb,
    ratio_of_classes = ma / mb,
    log2_ratio_of_classes = log2(ma / mb))
}

# ES and 1-based position by the full running sum over a ranked vector
# (names = genes, already in rank order).
gsea_ref_es <- function(ranked, set, q = 1) {
  hit <- names(ranked) %in% set
  w <- abs(ranked)^q
  if (sum(w[hit]) == 0) w[] <- 1
  step <- ifelse(hit, w / sum(w[hit]), -1 / (length(ranked) - sum(hit)))
  rs <- cumsum(step)
  # the first position of the largest |running sum|; values within 1e-12
  # (relative) are ties, as in the engine, since both carry rounding errors
  i <- which(abs(rs) >= max(abs(rs)) * (1 - 1e-12))[[1L]]
  c(ES = rs[[i]], pos = i)
}

gsea_edb <- function() {
  d <- system.file("extdata", "gsea_edb", package = "sysbioGPU")
  x <- paste(readLines(file.path(d, "results.edb")), collapse = " ")
  dtg <- regmatches(x, gregexpr("<DTG [^>]*>", x))[[1L]]
  at <- function(a) vapply(dtg, function(s) sub(paste0('.*\\b', a, '="([^"]*)".*'), "\\1", s), "",
                           USE.NAMES = FALSE)
  rnd <- t(vapply(at("RND_ES"), function(s) as.numeric(strsplit(s, " ")[[1L]]), numeric(1000),
                  USE.NAMES = FALSE))
  list(dir = d, set = sub(".*#", "", at("GENESET")), ES = as.numeric(at("ES")),
       NES = as.numeric(at("NES")), NP = as.numeric(at("NP")), FDR = as.numeric(at("FDR")),
       FWER = as.numeric(at("FWER")), rank = as.numeric(at("RANK_AT_ES")), rnd = rnd)
}

gsea_toy <- function(G = 300, n = c(6, 6), seed = 1, shift = 1) {
  set.seed(seed)
  x <- matrix(stats::rnorm(G * sum(n)), G, dimnames = list(paste0("G", seq_len(G)), NULL))
  x[1:20, seq_len(n[[1L]])] <- x[1:20, seq_len(n[[1L]])] + shift
  sets <- list(up = paste0("G", 1:20), mixed = paste0("G", c(1:8, 100:115)),
               rnd1 = paste0("G", sample(G, 25)), rnd2 = paste0("G", sample(G, 40)))
  list(x = x, y = rep(c("A", "B"), n), sets = sets)
}

# Broad's statistics from an ES table, the slow, obvious way (rapidGSEA's
# Algorithm section): NES by the mean of the same-sign nulls, nominal p
# strictly beyond (>), FWER strictly beyond (>), FDR at or beyond (>=).
gsea_ref_stats <- function(es, null) {
  mpos <- apply(null, 1, function(v) mean(v[v >= 0]))
  mneg <- apply(null, 1, function(v) -mean(v[v <= 0]))
  nes <- ifelse(es >= 0, es / mpos, es / mneg)
  z <- null
  for (s in seq_along(es)) z[s, ] <- ifelse(null[s, ] >= 0, null[s, ] / mpos[[s]], null[s, ] / mneg[[s]])
  pval <- vapply(seq_along(es), function(s) {
    v <- null[s, ]
    e <- es[[s]]
    if (e >= 0) sum(v > e & v >= 0) / sum(v >= 0) else sum(v < e & v <= 0) / sum(v <= 0)
  }, 0)
  mx <- apply(z, 2, max)
  mn <- apply(z, 2, min)
  fwer <- ifelse(nes >= 0, vapply(nes, function(v) mean(mx > v), 0), vapply(nes, function(v) mean(mn < v), 0))
  fdr <- vapply(nes, function(v) {
    if (v >= 0) {
      tot <- colSums(z >= 0)
      num <- mean((colSums(z >= v) / tot)[tot > 0])
      den <- sum(nes >= v) / sum(nes >= 0)
    } else {
      tot <- colSums(z <= 0)
      num <- mean((colSums(z <= v) / tot)[tot > 0])
      den <- sum(nes <= v) / sum(nes <= 0)
    }
    min(1, num / den)
  }, 0)
  data.frame(ES = es, NES = nes, pval = pval, FDR = fdr, FWER = fwer)
}

# The null ES of permutations 1..nperm of a phenotype run, in plain R: the
# labels shuffled by the run's Philox stream (philoxShuffle, subsequence j),
# then Broad's metric, the ranking (ties by row) and the full running sum.
gsea_ref_null <- function(x, labels, sets, nperm, seed, metric = "signal2noise", q = 1) {
  lab0 <- as.integer(labels != labels[[1L]]) # 0 = class A, the first label seen
  vapply(seq_len(nperm), function(j) {
    lab <- lab0[philoxShuffle(length(lab0), seed = seed, subsequence = j)]
    m <- gsea_ref_metric(x, lab, metric)
    ranked <- m[order(-m, seq_along(m))]
    vapply(sets, function(s) gsea_ref_es(ranked, s, q)[["ES"]], 0)
  }, numeric(length(sets)))
}
