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
