# Plain R versions of the grnEvolve model, the oracles of test-grnEvolve.R.

# One synchronous step of the rules, gene by gene, counting active sources.
grn_oracle_step <- function(net, rules, s) {
  new <- s
  for (i in seq_along(s)) {
    a <- sum(net[i, ] == 1 & s)
    r <- sum(net[i, ] == -1 & s)
    new[i] <- switch(rules[[i]],
      most = if (a > r) TRUE else if (r > a) FALSE else s[[i]],
      abs = if (r >= 1) FALSE else s[[i]],
      jact = if (a >= 2) TRUE else s[[i]],
      jrep = if (r >= 2) FALSE else s[[i]])
  }
  new
}

grn_oracle_simulate <- function(net, rules, from, steps) {
  out <- matrix(FALSE, steps + 1, length(from))
  s <- from
  out[1, ] <- s
  for (t in seq_len(steps)) {
    s <- grn_oracle_step(net, rules, s)
    out[t + 1, ] <- s
  }
  out
}

# A random signed network with at most `maxIn` inputs per gene.
grn_random_network <- function(n, maxIn = 3, pLink = 0.3) {
  net <- matrix(0L, n, n, dimnames = list(paste0("g", 1:n), paste0("g", 1:n)))
  for (i in 1:n) {
    k <- min(maxIn, stats::rbinom(1, n, pLink))
    if (k > 0) net[i, sample.int(n, k)] <- sample(c(-1L, 1L), k, replace = TRUE, prob = c(0.3, 0.7))
  }
  net
}

grn_random_state <- function(n) stats::setNames(stats::runif(n) < 0.5, paste0("g", 1:n))

grn_fitness <- function(dn, dl, n, lambda = 0.9) lambda * dn / n + (1 - lambda) * dl / n^2
