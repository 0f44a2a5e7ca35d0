# Oracles for test-pbnSteadyState.R: a brute-force transition matrix of a
# small PBN built in R from the pbn object (independent of the C engines),
# and random small PBNs.

pbn_brute_q <- function(net, s_bits) {
  vapply(seq_along(net$nodes), function(i) {
    sum(vapply(seq_along(net$functions[[i]]), function(j) {
      f <- net$functions[[i]][[j]]
      k <- length(f$inputs)
      row <- if (k == 0) 0 else sum(s_bits[match(f$inputs, net$nodes)] * 2^(k - seq_len(k)))
      pbn_fun_table(f)[[row + 1]] * net$probabilities[[i]][[j]]
    }, 0))
  }, 0)
}

pbn_brute_P <- function(net, p, async = FALSE) {
  n <- length(net$nodes)
  NS <- 2^n
  bits <- function(s) (s %/% 2^(0:(n - 1))) %% 2
  pert <- which(net$perturbable)
  np <- length(pert)
  P <- matrix(0, NS, NS)
  for (s in 0:(NS - 1)) {
    b <- bits(s)
    for (g in seq_len(2^np) - 1) {
      if (g == 0) next
      gb <- (g %/% 2^(0:(np - 1))) %% 2
      pr <- p^sum(gb) * (1 - p)^(np - sum(gb))
      t <- b
      t[pert[gb == 1]] <- 1 - t[pert[gb == 1]]
      P[s + 1, sum(t * 2^(0:(n - 1))) + 1] <- P[s + 1, sum(t * 2^(0:(n - 1))) + 1] + pr
    }
    q <- pbn_brute_q(net, b)
    q0 <- (1 - p)^np
    if (async) {
      for (i in seq_len(n)) {
        for (v in 0:1) {
          t <- b; t[i] <- v
          pr <- q0 / n * (if (v == 1) q[i] else 1 - q[i])
          P[s + 1, sum(t * 2^(0:(n - 1))) + 1] <- P[s + 1, sum(t * 2^(0:(n - 1))) + 1] + pr
        }
      }
    } else {
      for (t in 0:(NS - 1)) {
        tb <- bits(t)
        P[s + 1, t + 1] <- P[s + 1, t + 1] + q0 * prod(ifelse(tb == 1, q, 1 - q))
      }
    }
  }
  P
}

pbn_brute_pi <- function(P) {
  NS <- nrow(P)
  A <- t(P) - diag(NS)
  A[NS, ] <- 1
  solve(A, c(numeric(NS - 1), 1))
}

# A random PBN: n nodes, 1-2 functions of 1-3 inputs each.
pbn_random <- function(n, seed, maxfun = 2, maxk = 3) {
  set.seed(seed)
  nm <- paste0("x", seq_len(n))
  nodes <- lapply(seq_len(n), function(i) {
    nf <- sample.int(maxfun, 1)
    fl <- lapply(seq_len(nf), function(j) {
      k <- sample.int(min(maxk, n), 1)
      inp <- sample(nm, k)
      list(inputs = inp, table = sample(c(TRUE, FALSE), 2^k, replace = TRUE))
    })
    pr <- runif(nf); pr <- pr / sum(pr)
    list(functions = fl, probabilities = pr)
  })
  names(nodes) <- nm
  pbn(nodes)
}

# A PBN whose nodes x1..xn have one function each, an AND or an OR of 1-3
# random inputs (many fixed points: the steady-state engines take the
# function steps there at once), and a node y downstream with two
# functions (dropped by the reduction when the sets are over x's only, so
# the reduced network still reads a selection block every step).
pbn_monotone <- function(n, seed) {
  set.seed(seed)
  nm <- paste0("x", seq_len(n))
  nodes <- lapply(seq_len(n), function(i) {
    inp <- sample(nm, sample.int(3, 1))
    paste(inp, collapse = if (runif(1) < 0.5) " & " else " | ")
  })
  names(nodes) <- nm
  nodes$y <- list(functions = list("x1", "!x1"), probabilities = c(0.5, 0.5))
  pbn(nodes)
}
