# pbnSteadyState() and pbnSimulate(): argument checks, the reduction to the
# ancestors of the nodes of interest, flattening a pbn object for the C
# engines (src/pbn/), and the result's print method.

# ---- flattening -----------------------------------------------------------

# Packs a logical vector into 32-bit words (bit j of word w = entry 32 w + j)
# as R integers with the same bits (0x80000000 is NA_integer_'s pattern).
pbn_pack32 <- function(bits) {
  n <- length(bits)
  nw <- (n + 31L) %/% 32L
  b <- c(as.numeric(bits), numeric(nw * 32L - n))
  v <- colSums(matrix(b, nrow = 32L) * 2^(0:31))
  out <- ifelse(v >= 2^31, v - 2^32, v)
  out <- suppressWarnings(as.integer(out))  # -2^31 becomes NA: the right bits
  out
}

# 16-bit packed table words -> the engines' 32-bit words (as R integers
# with the same bits).
pbn_words32 <- function(w16) {
  if (length(w16) %% 2L) w16 <- c(w16, 0L)
  m <- matrix(as.numeric(w16), nrow = 2L)
  v <- m[1L, ] + m[2L, ] * 65536
  suppressWarnings(as.integer(ifelse(v >= 2^31, v - 2^32, v)))
}

# 64-bit masks as (low, high) 32-bit integer pairs.
pbn_mask_pairs <- function(bit_sets) {
  unlist(lapply(bit_sets, function(bits) {
    lo <- bits[bits < 32L]; hi <- bits[bits >= 32L] - 32L
    w <- function(b) { if (!length(b)) return(0L); pbn_pack32(seq_len(32L) %in% (b + 1L)) }
    c(w(lo), w(hi))
  }), use.names = FALSE)
}

# Nodes that can influence `targets` (their ancestors, themselves included).
pbn_ancestors <- function(net, targets) {
  # one match() of all inputs: a match() per node hashes the node names
  # each time (a network of n nodes took time in n^2)
  inp <- lapply(net$functions, function(fl) unlist(lapply(fl, `[[`, "inputs")))
  of <- factor(rep(seq_along(inp), lengths(inp)), levels = seq_along(inp))
  parents <- lapply(split(match(unlist(inp), net$nodes), of), unique)
  keep <- logical(length(net$nodes))
  queue <- match(targets, net$nodes)
  keep[queue] <- TRUE
  while (length(queue)) {
    pa <- unique(unlist(parents[queue]))
    pa <- pa[!keep[pa]]
    keep[pa] <- TRUE
    queue <- pa
  }
  keep
}

# The list the engines read (order fixed by src/pbn/pbn_call.c).
pbn_flatten <- function(net, keep, p, async) {
  full_n <- length(net$nodes)
  kept <- which(keep)
  new_of <- rep(-1L, full_n)
  new_of[kept] <- seq_along(kept) - 1L
  nf_full <- lengths(net$functions)
  multi <- nf_full > 1L
  rank_full <- ifelse(multi, cumsum(multi) - 1L, -1L)
  funs <- net$functions[kept]
  probs <- net$probabilities[kept]
  nf <- lengths(funs)
  fun_start <- c(0L, cumsum(nf))
  fl <- unlist(funs, recursive = FALSE)
  k <- vapply(fl, function(f) length(f$inputs), 0L)
  inputs <- new_of[match(unlist(lapply(fl, `[[`, "inputs")), net$nodes)]   # one match() for all
  in_start <- c(0L, cumsum(k))[seq_along(fl)]
  ok <- vapply(fl, function(f) is.integer(f$words) && length(f$words) == max(1, 2^length(f$inputs) %/% 16), TRUE)
  if (!all(ok)) stop_input("`pbn` is not a valid pbn object (malformed truth tables); build it with pbn() or readPBN()", call = NULL)
  tabs <- lapply(fl, function(f) pbn_words32(f$words))
  tw <- lengths(tabs)
  tab_start <- c(0, cumsum(as.numeric(tw)))[seq_along(fl)]
  thresh <- unlist(lapply(probs, function(pr) {
    t <- pmin(round(cumsum(pr) * 2^32), 2^32)
    t[length(t)] <- 2^32
    cummax(t)
  }))
  pert_full <- which(net$perturbable)
  list(
    n = length(kept),
    fun_start = as.integer(fun_start),
    fun_thresh = as.numeric(thresh),
    fun_k = as.integer(k),
    in_start = as.integer(in_start),
    inputs = as.integer(inputs),
    tab_start = as.numeric(tab_start),
    tables = as.integer(unlist(tabs)),
    sel_rank = as.integer(rank_full[kept]),
    n_sel_total = as.integer(sum(multi)),
    pert_node = as.integer(new_of[pert_full]),
    gap_thresh = round(2^32 * (1 - p)^(0:length(pert_full))),
    node_of_full = as.integer(new_of),
    async = as.integer(async),
    fun_prob = as.numeric(unlist(probs)),
    first_thresh = pbn_first_thresh(p, length(pert_full)),
    skip_thresh = pbn_skip_thresh(p, length(pert_full))
  )
}

# A perturbation step (at least one of np positions flips, each with
# probability p): round(2^32 P(first flip at a position >= g)), g = 0..np,
# the last 0.  Computed through log1p/expm1, accurate for tiny p.
pbn_first_thresh <- function(p, np) {
  g <- 0:np
  if (p <= 0 || np == 0) return(c(2^32, rep(0, np)))
  lq <- np * log1p(-p)
  # ((1-p)^g - (1-p)^np) / (1 - (1-p)^np)
  v <- (exp(g * log1p(-p)) - exp(lq)) / -expm1(lq)
  v <- pmin(pmax(round(2^32 * v), 0), 2^32)
  v[1] <- 2^32
  v[np + 1] <- 0
  v
}

# The number of function steps before the next perturbation step is
# geometric: P(>= k) = (1-p)^(np k).  Thresholds round(2^32 (1-p)^(np k)),
# k = 0..L, L where they reach 0 (at most 4096; beyond, the engines draw
# again).
pbn_skip_thresh <- function(p, np) {
  v <- round(2^32 * exp(np * (0:4096) * log1p(-p)))
  z <- which(v == 0)
  if (length(z)) v <- v[seq_len(z[[1]])]
  v
}

# states -> list of named logical vectors (validated), with labels.
pbn_states <- function(states, net) {
  if (identical(states, "marginals")) {
    st <- lapply(net$nodes, function(v) stats::setNames(TRUE, v))
    names(st) <- net$nodes
    return(st)
  }
  one <- function(x, where) {
    if (!is.logical(x) && !(is.numeric(x) && all(x %in% c(0, 1))))
      stop_input("`states`", where, " must be a named logical vector over nodes, not ", arg_label(x), call = NULL)
    x <- stats::setNames(as.logical(x), names(x))
    if (length(x) == 0L || is.null(names(x)) || anyNA(x) || any(!nzchar(names(x))))
      stop_input("`states`", where, " must be a named logical vector over nodes, without NA", call = NULL)
    unk <- setdiff(names(x), net$nodes)
    if (length(unk)) stop_input("`states`", where, ": unknown node(s) ", paste(unk, collapse = ", "), call = NULL)
    if (anyDuplicated(names(x))) stop_input("`states`", where, ": node '", names(x)[anyDuplicated(names(x))], "' given twice", call = NULL)
    x
  }
  if (is.list(states)) {
    if (!length(states)) stop_input("`states` is an empty list", call = NULL)
    out <- lapply(seq_along(states), function(i) one(states[[i]], sprintf("[[%d]]", i)))
    lab <- names(states)
    auto <- vapply(out, function(x) paste0(names(x), "=", as.integer(x), collapse = ","), "")
    if (is.null(lab)) lab <- auto else lab[!nzchar(lab)] <- auto[!nzchar(lab)]
    names(out) <- lab
    return(out)
  }
  x <- one(states, "")
  out <- list(x)
  names(out) <- paste0(names(x), "=", as.integer(x), collapse = ",")
  out
}

pbn_sets_list <- function(sets, new_of, nodes) {
  start <- 0L; word <- integer(); pos <- list(); neg <- list()
  for (x in sets) {
    idx <- new_of[match(names(x), nodes)]
    w <- idx %/% 64L
    for (ww in sort(unique(w))) {
      word <- c(word, ww)
      pos[[length(pos) + 1L]] <- idx[w == ww & x] %% 64L
      neg[[length(neg) + 1L]] <- idx[w == ww & !x] %% 64L
    }
    start <- c(start, length(word))
  }
  list(start = as.integer(start), word = as.integer(word), pos = as.integer(pbn_mask_pairs(pos)),
       neg = as.integer(pbn_mask_pairs(neg)))
}

check_prob_open <- function(x, arg, lo, hi, lo_open, hi_open) {
  ok <- is.numeric(x) && length(x) == 1L && !is.na(x) &&
    (if (lo_open) x > lo else x >= lo) && (if (hi_open) x < hi else x <= hi)
  if (!ok) stop_input("`", arg, "` must be a number in ", if (lo_open) "(" else "[", lo, ", ", hi,
                      if (hi_open) ")" else "]", ", not ", arg_label(x), call = NULL)
  as.double(x)
}

pbn_check_net <- function(pbn) {
  if (inherits(pbn, c("BooleanNetwork", "ProbabilisticBooleanNetwork"))) pbn <- as.pbn(pbn)
  if (!inherits(pbn, "pbn")) stop_input("`pbn` must be a pbn object (see pbn(), readPBN(), as.pbn()), not ", arg_label(pbn), call = NULL)
  pbn_validate(pbn, "pbn")
  pbn
}

# The stationary probability of each set when constant nodes decide it,
# else NA: a node that is never perturbed (or p = 0) and whose functions
# are all the same constant holds that value in every stationary state, so
# a set that contradicts one such node has probability 0 and a set over
# such nodes alone has probability 1.  Trajectories would never see these
# indicators switch and could not call them converged.
pbn_known_sets <- function(net, sets, p) {
  pert <- rep_len(net$perturbable, length(net$nodes))
  const <- vapply(seq_along(net$nodes), function(i) {
    fl <- net$functions[[i]]
    if (pert[[i]] && p > 0) return(NA)
    if (!all(vapply(fl, function(f) length(f$inputs) == 0L, TRUE))) return(NA)
    v <- unique(vapply(fl, function(f) f$words[[1L]] != 0L, TRUE))
    if (length(v) == 1L) v else NA
  }, TRUE)
  vapply(sets, function(x) {
    cv <- const[match(names(x), net$nodes)]
    if (any(!is.na(cv) & cv != x)) return(0)
    if (all(!is.na(cv))) return(1)
    NA_real_
  }, 0)
}

# ---- pbnSteadyState -------------------------------------------------------

#' Steady-state probabilities of a probabilistic Boolean network
#'
#' Estimates the long-run probability that a PBN is in given sets of states
#' from many trajectories simulated in parallel (Mizera, Pang and Yuan
#' 2018): Gelman-Rubin burn-in on the meta-state indicators, then the
#' two-state Markov chain method of Raftery and Lewis, which sets the burn-in
#' M; the sample size N also follows the spread of the independent chains
#' (see Accuracy), so that the estimate is within `r` of the stationary
#' probability with probability `s`; the chains are extended until N
#' samples are pooled, and the burn-in is checked again at the end.
#' `method = "exact"` computes the stationary distribution itself for small
#' networks.
#'
#' @section Accuracy: After the burn-in, every chain's samples are counted
#'   in windows (the last Gelman-Rubin window of `psi` steps, then the
#'   extensions, at least `psi` steps each).  The chains are independent, so
#'   in each window the spread of the chains' counts estimates the variance
#'   of the window's total without any model of the indicator's
#'   correlation; the windows' variances add up (adjacent windows of a chain
#'   correlate only over a few mixing times) to `se^2`, the squared standard
#'   error of the pooled estimate.  With `t` the `(1 + s) / 2` quantile of
#'   Student's t on `trajectories - 1` degrees of freedom, the sample size
#'   asked for is `N = max(N_RL, n * (t * se / r)^2, 2 * psi * trajectories)`
#'   where `n` is the samples pooled so far and `N_RL = alpha * beta * (2 -
#'   alpha - beta) / (alpha + beta)^3 * (qnorm((1 + s) / 2) / r)^2` is
#'   Raftery and Lewis' size for a first-order two-state indicator (thinning
#'   k = 1, as in the paper).  `N_RL` alone is optimistic when the
#'   indicator has slow modes (on the shipped example at p = 0.01, r =
#'   0.005, s = 0.95 it gave estimates within r in 62% of seeds; the spread
#'   gives 94-99%: `make pbn-coverage` runs that check on three networks and
#'   two p).  The run stops when `n >= N` and `t * se <= r`, and returns
#'   the interval `probability -+ t * se` (`lower`, `upper`), which lies
#'   within `-+ r` and covers the stationary probability at about rate
#'   `s`.  A set that constant nodes decide (nodes that are never
#'   perturbed, or `p = 0`, with constant functions only, as
#'   `BoolNet::fixGenes()` makes them) has probability exactly 0 or 1: it
#'   is not simulated and is reported converged, with `lower = upper`.
#' @section Dynamics: Synchronous (as in the paper): in each step each
#'   perturbable node flips with probability `p`; if any node flips, no
#'   function is applied in that step; otherwise every node picks one of its
#'   functions by their probabilities and all are applied to the old state.
#'   Asynchronous: the same perturbations, otherwise one uniformly chosen
#'   node is updated.  Random numbers: chain `c` draws from Philox
#'   subsequence `c` of `seed`: one draw gives the (geometric) number of
#'   steps until the next step with a flip, so steps without one draw
#'   nothing for nodes with one function; results depend on `seed` and
#'   `trajectories` only, not on the backend or threads.  When every
#'   simulated node has one function (synchronous update), a step that
#'   leaves the state unchanged reached a fixed point, and the engines take
#'   the steps up to the next flip at once (their samples are counted, the
#'   result is the same as stepping).
#' @section Reduction: With `reduce = TRUE`, nodes that cannot influence
#'   the nodes of interest are not simulated; their perturbations still
#'   block updates, and their random draws (those of the start state too)
#'   are skipped, so the estimate is
#'   identical to the unreduced run with the same seed.
#' @section Exact method: The stationary distribution over all `2^n`
#'   states of the (reduced) network, with the exact selection
#'   probabilities.  Up to 11 simulated nodes (2,048 states) it is solved
#'   directly, on the CPU whatever the backend: the dense transition matrix
#'   is reduced state by state (Grassmann, Taksar and Heyman 1985), which
#'   needs no subtraction and so keeps full relative precision even when
#'   the chain mixes slowly (a small `p`); transient states (e.g. of nodes
#'   fixed by `BoolNet::fixGenes()`) get probability 0.  Larger networks,
#'   up to `n <= 20` simulated nodes and at most 2^25 transitions from
#'   function updates (larger ones are refused with an error), and chains
#'   with several closed classes (which have no unique stationary
#'   distribution; the answer is then the limit from the uniform start) use
#'   power iteration of the lazy chain `(I + P) / 2`, on the CPU or the GPU
#'   (the GPU gathers each state's inflow from the transposed transitions;
#'   the two agree up to rounding, about 1e-15 per state). Power iteration
#'   needs on the order of `1 / p` iterations for a small `p`: it stops
#'   after 2e6 with a warning and `converged = FALSE`.  Attribute `solver`
#'   says which ran (`"direct"` or `"power iteration"`).
#'
#' @param pbn A [pbn] object (or a BoolNet network, converted by [as.pbn()]).
#' @param states The set(s) of interest: a named logical vector over some
#'   nodes (a sub-cube, e.g. `c(Apoptosis = TRUE)`), a list of them
#'   (estimated from the same trajectories; names label the rows), or
#'   `"marginals"` (default) for every node's probability of being on.
#' @param p Perturbation probability per node and step, in \[0, 1).
#' @param update `"synchronous"` or `"asynchronous"`.
#' @param r Accuracy: half-width of the interval, > 0.
#' @param s Confidence of the interval, in (0, 1).
#' @param epsilon Burn-in precision of the two-state method, in (0, 1).
#' @param method `"two-state"` (trajectories) or `"exact"`.
#' @param trajectories Number of chains (>= 2), or `"auto"`: a count that
#'   depends only on the requested accuracy and the number of sets, never on
#'   the backend or threads, so that a seed gives the same result everywhere:
#'   the power of two at or below `(z / r)^2 / 4096` (`z = qnorm((1 + s) /
#'   2)`, so that each chain contributes thousands of samples and the burn-in
#'   stays a small part of the work), clamped to \[64, 2^18\] (2^18 fills
#'   a large GPU), and at most `2^29 / (12 * number of sets)` (counter
#'   memory).  E.g. 64 for r = 0.01, 65,536 for r = 1e-4, 2^18 for
#'   r <= 5e-5 (s = 0.95).  Results for a seed are reproducible for a
#'   given number of trajectories.
#' @param reduce Drop nodes that cannot influence the sets (see Reduction).
#' @param maxSteps Most steps per trajectory times trajectories; a run that
#'   reaches it returns with `converged = FALSE` and a warning.  A set whose
#'   burn-in (`M` steps a trajectory) it cuts short has no samples:
#'   `samples = 0` and `probability = NaN`.
#' @param engine How the trajectories are moved (two-state method):
#'   `"chains"` (default), one trajectory at a time per thread, or `"bits"`,
#'   bit-sliced: 32 trajectories packed in one machine word per node, so that
#'   one bitwise operation moves them all (several times faster on the GPU
#'   for networks whose nodes have several functions).  Both simulate the
#'   same Markov chain per trajectory but draw their random numbers
#'   differently, so their estimates for a seed differ (within the
#'   accuracy); each is the same on every backend, thread count and device
#'   split.  `"bits"` needs synchronous updates, functions of at most 5
#'   inputs, at most 4096 simulated nodes and `BPPARAM = NULL`; it runs
#'   every step (no fixed-point shortcut, see Dynamics), so networks whose
#'   nodes have one function each are faster with `"chains"`.  Bit-sliced
#'   function choice: the 32 trajectories' uniform numbers are compared
#'   with a node's selection thresholds one bit at a time, from a random
#'   word per bit, until every trajectory is decided.
#' @param seed Whole number; `NULL` draws one from R's generator.
#' @param backend,threads,device See [resolveBackend()]. With several GPUs
#'   (`device = c(0, 1)` or `"all"`) the trajectories are split into
#'   contiguous blocks, one per GPU, run together; the transition counts add
#'   up exactly, so the estimates are those of one GPU. (The exact method and
#'   `pbnSimulate()` use one GPU.)
#' @param BPPARAM `NULL` (one process), or a BiocParallel back-end
#'   (package BiocParallel) over which the two-state method splits the
#'   trajectories: the unit is a contiguous block of trajectories per worker
#'   (trajectory `c` keeps its own random stream, so the estimates are
#'   identical to one process for the same seed). The driver stays in this
#'   process; each of its rounds (Gelman-Rubin windows, Raftery-Lewis
#'   extensions) is one parallel call in which every worker moves its block
#'   on and returns exact integer counts, which are added here; the blocks'
#'   states (raw engine bytes: every worker must run the same build of
#'   sysbioGPU) travel to and from the workers with each round. CPU workers
#'   use `threads` each (by default the cores shared among the workers;
#'   forked MulticoreParam workers run one thread). GPU workers (`backend =
#'   "gpu"`) take the devices of `device` round robin and must be separate
#'   processes: SnowParam(), not MulticoreParam(). On a cluster, use
#'   BatchtoolsParam() (one job per worker and round: worth it only for long
#'   rounds). The exact method ignores it.
#' @param verbose Show a progress bar for long runs.
#' @return A data.frame of class `pbnSteadyState`, one row per set:
#'   `set`, `probability`, `lower` and `upper` (`probability -+ t * se`,
#'   clipped to \[0, 1\]; see Accuracy), `se` (standard error of
#'   `probability` from the chains' spread), `N` (sample size the method
#'   asked for, see Accuracy), `M`
#'   (burn-in it asked for), `alpha`, `beta` (estimated 0->1 and 1->0
#'   transition probabilities of the meta-state), `samples` (pooled samples
#'   used), `trajectories`, `rhat` (Gelman-Rubin on the indicator, NA when no
#'   chain varied), `steps` (all steps simulated), `seconds`, `converged`.
#'   Attributes: `backend`, `device`, `seed`, `method`, `p`, `update`,
#'   `burnin` (steps per chain discarded), `nodesSimulated`.  For
#'   `method = "exact"` the two-state columns are NA and attribute
#'   `stationary` holds the distribution (state index bit `i - 1` = node
#'   `attr(, "simulatedNodes")[i]`).
#' @references Mizera A, Pang J, Yuan Q (2018). GPU-accelerated steady-state
#'   computation of large probabilistic Boolean networks. Formal Aspects of
#'   Computing 31, 27-46.  Raftery AE, Lewis SM (1992). How many iterations
#'   in the Gibbs sampler? Bayesian Statistics 4.  Grassmann WK, Taksar
#'   MI, Heyman DP (1985). Regenerative analysis and steady state
#'   distributions for Markov chains. Operations Research 33, 1107-1116.
#' @seealso [pbn()], [readPBN()], [pbnSimulate()]
#' @examples
#' f <- system.file("extdata", "pbn-example.bnet", package = "sysbioGPU")
#' net <- readPBN(f)
#' pbnSteadyState(net, c(Apoptosis = TRUE), r = 0.01, seed = 1,
#'                backend = "cpu", threads = 1, verbose = FALSE)
#' pbnSteadyState(net, c(Apoptosis = TRUE), method = "exact")
#' sets <- list(Apoptosis = c(Apoptosis = TRUE), "Survival,!Death" = c(Survival = TRUE, Death = FALSE))
#' est <- pbnSteadyState(net, sets, p = 0.01, r = 0.01, seed = 1, backend = "cpu",
#'                       threads = 1, verbose = FALSE)
#' summary(est)
#' plot(est, exact = pbnSteadyState(net, sets, p = 0.01, method = "exact"))
#' @export
pbnSteadyState <- function(pbn, states = "marginals", p = 0.001,
                           update = c("synchronous", "asynchronous"),
                           r = 1e-4, s = 0.95, epsilon = 1e-10,
                           method = c("two-state", "exact"), trajectories = "auto",
                           reduce = TRUE, maxSteps = 1e11, engine = c("chains", "bits"),
                           seed = NULL, backend = getOption("sysbioGPU.backend", "auto"),
                           threads = getOption("sysbioGPU.threads"),
                           device = getOption("sysbioGPU.device", 0L),
                           BPPARAM = NULL, verbose = interactive()) {
  net <- pbn_check_net(pbn)
  sets <- pbn_states(states, net)
  p <- check_prob_open(p, "p", 0, 1, FALSE, TRUE)
  update <- check_choice(update, c("synchronous", "asynchronous"), "update")
  r <- check_prob_open(r, "r", 0, 1, TRUE, TRUE)
  s <- check_prob_open(s, "s", 0, 1, TRUE, TRUE)
  epsilon <- check_prob_open(epsilon, "epsilon", 0, 1, TRUE, TRUE)
  method <- check_choice(method, c("two-state", "exact"), "method")
  engine <- check_choice(engine, c("chains", "bits"), "engine")
  reduce <- check_flag(reduce, "reduce")
  maxSteps <- check_whole(maxSteps, "maxSteps", min = 1, max = 1e18)
  verbose <- check_flag(verbose, "verbose")
  async <- update == "asynchronous"
  all_sets <- sets
  known <- if (method == "two-state") pbn_known_sets(net, sets, p) else rep(NA_real_, length(sets))
  if (all(!is.na(known))) return(pbn_known_result(all_sets, known, p, update, backend, threads, device))
  sets <- sets[is.na(known)]
  interest <- unique(unlist(lapply(sets, names)))
  keep <- if (reduce) pbn_ancestors(net, interest) else rep(TRUE, length(net$nodes))
  flat <- pbn_flatten(net, keep, p, async)
  new_of <- flat$node_of_full
  sets_l <- pbn_sets_list(sets, new_of, net$nodes)
  labels <- names(sets)

  if (method == "exact") {
    if (flat$n > 20L)
      stop_input("`method = \"exact\"` handles at most 20 simulated nodes (2^20 states); this network has ",
                 flat$n, if (reduce) " after reduction" else "", ": use method = \"two-state\"", call = NULL)
    b <- resolveBackend(backend, threads, device)
    a <- backend_args(b, multi = TRUE) # the exact method uses the first
    t0 <- proc.time()[["elapsed"]]
    ex <- .Call(ffi_pbn_exact, list(net = flat), list(p = p, tol = 1e-13, maxIter = 2e6, direct = TRUE),
                run_list(a, verbose, devices = a$device))
    secs <- proc.time()[["elapsed"]] - t0
    pi <- ex$pi
    st_idx <- seq_along(pi) - 1
    prob <- vapply(sets, function(x) {
      idx <- new_of[match(names(x), net$nodes)]
      sel <- rep(TRUE, length(pi))
      for (j in seq_along(idx)) sel <- sel & (((st_idx %/% 2^idx[[j]]) %% 2 == 1) == x[[j]])
      sum(pi[sel])
    }, 0)
    conv <- ex$direct || ex$delta < 1e-13
    if (!conv) warning(sprintf("exact method: power iteration stopped after %d iterations (change %.3g)",
                               as.integer(ex$iterations), ex$delta), call. = FALSE)
    res <- data.frame(set = labels, probability = prob, lower = prob, upper = prob,
                      se = 0, N = NA_real_, M = NA_real_, alpha = NA_real_, beta = NA_real_,
                      samples = NA_real_, trajectories = NA_real_, rhat = NA_real_,
                      steps = ex$iterations, seconds = secs, converged = conv,
                      stringsAsFactors = FALSE)
    return(pbn_result(res, list(backend = b$backend, device = b$device, deviceName = b$deviceName,
                                seed = NA_real_, method = "exact",
                                p = p, update = update, burnin = NA_real_, nodesSimulated = flat$n,
                                stationary = pi, simulatedNodes = net$nodes[keep],
                                solver = if (ex$direct) "direct" else "power iteration")))
  }

  b <- resolveBackend(backend, threads, device)
  a <- backend_args(b, multi = TRUE) # several GPUs share the trajectories
  seed <- resolve_seed(seed)
  n_sets <- length(sets)
  if (identical(trajectories, "auto")) trajectories <- pbn_auto_trajectories(r, s, n_sets)
  trajectories <- check_whole(trajectories, "trajectories", min = 2, max = 2^31 - 1)
  max_len <- floor(maxSteps / trajectories)
  if (max_len < 4) stop_input("`maxSteps` = ", maxSteps, " allows fewer than 4 steps per trajectory", call = NULL)
  params <- pbn_params(seed, trajectories, r, s, epsilon, max_len)
  params$bits <- engine == "bits"
  if (params$bits) pbn_check_bits(flat, async, BPPARAM)
  data <- list(net = flat, sets = sets_l)
  t0 <- proc.time()[["elapsed"]]
  if (is.null(BPPARAM)) {
    o <- .Call(ffi_pbn_steady, data, params, run_list(a, verbose))
  } else {
    check_bpparam(BPPARAM)
    check_bpparam_gpu(BPPARAM, b)
    thr <- if (is.null(threads)) bp_threads(BPPARAM) else a$threads
    o <- pbn_workers(data, params, trajectories, a, thr, BPPARAM, verbose)
  }
  secs <- proc.time()[["elapsed"]] - t0
  prob <- o$prob
  res <- data.frame(set = labels, probability = prob,
                    lower = pmax(0, prob - params$t * o$se),
                    upper = pmin(1, prob + params$t * o$se), se = o$se,
                    N = o$N, M = o$M, alpha = o$alpha, beta = o$beta,
                    samples = o$samples, trajectories = trajectories,
                    rhat = ifelse(is.nan(o$rhat), NA_real_, o$rhat),
                    steps = o$steps * trajectories, seconds = secs,
                    converged = o$converged, stringsAsFactors = FALSE)
  res <- pbn_merge_known(res, all_sets, known)
  if (!all(res$converged)) {
    bad <- !res$converged
    why <- if (max(res$steps) >= max_len * trajectories) {
      sprintf("maxSteps = %g reached%s", maxSteps,
              if (any(bad & res$samples %in% 0)) {
                "; no samples after the burn-in (column `M`), so probability NaN: raise maxSteps"
              } else "")
    }
           else if (any(res$alpha[bad] == 0 | res$beta[bad] == 0)) "the indicator (almost) never switched: a constant or very rare set?"
           else "R-hat above 1.01 or too few transitions"
    warning(sprintf("pbnSteadyState: %d set(s) did not reach the requested accuracy (%s); see column `converged`",
                    sum(bad), why), call. = FALSE)
  }
  pbn_result(res, list(backend = b$backend, device = b$devices, deviceName = b$deviceName, seed = seed,
                       method = "two-state", p = p, update = update, burnin = o$burnin,
                       nodesSimulated = flat$n, engine = engine,
                       engineSettings = engine_settings("pbnSteadyState")))
}

# What engine = "bits" runs (sbg_pbn_bits_usable() in src/pbn/pbn_bits.c).
pbn_check_bits <- function(flat, async, BPPARAM) {
  why <- if (async) "synchronous updates (`update = \"synchronous\"`)"
         else if (max(flat$fun_k) > 5) "functions of at most 5 inputs"
         else if (flat$n > 4096) "at most 4096 simulated nodes"
         else if (!is.null(BPPARAM)) "`BPPARAM = NULL`"
  if (!is.null(why)) stop_input("`engine = \"bits\"` needs ", why, ": use engine = \"chains\"", call = NULL)
}

# The two-state method's parameters (src/pbn/pbn_call.c, params_decode()):
# the last two are the register step for <= 128 nodes and taking the
# function steps at a fixed point at once (the tests switch them off to
# check that the results stay the same).
pbn_params <- function(seed, trajectories, r, s, epsilon, max_len) {
  list(seed = as.double(seed), chains = as.double(trajectories), r = r, z = stats::qnorm((1 + s) / 2),
       epsilon = epsilon, psi0 = 128, rhatMax = 1.01, maxLen = as.double(max_len), minSwitches = 20,
       t = stats::qt((1 + s) / 2, df = trajectories - 1),
       small = !isTRUE(engine_option("sysbioGPU.pbnGeneralStep", "pbnSteadyState")),
       skip = !isTRUE(engine_option("sysbioGPU.pbnNoSkip", "pbnSteadyState")), bits = FALSE)
}

# One block of chains on an R worker: [range[1], range[2]) (0-based) from
# the seed (state NULL) or from the state the last round returned; returns
# list(state (raw), sums (raw uint64, or NULL without count)).
pbn_block <- function(range, dev, state, data, params, steps, count, gpu, threads) {
  data["state"] <- list(state)
  params <- c(params, list(range = as.double(range), steps = as.double(steps), count = count))
  .Call(ffi_pbn_block, data, params, run_list(list(gpu = gpu), threads = threads, devices = dev))
}

# BPPARAM: the trajectories in contiguous blocks, one per worker (a GPU
# each, round robin over `device`); the driver (C) runs as in one process
# and calls round() for each of its advances: every worker moves its block
# on and returns its exact integer sums, which the C side adds.  The blocks'
# states (raw bytes of the engine, same build on every worker) come back
# with each round and go out with the next.
pbn_workers <- function(data, params, trajectories, a, threads, BPPARAM, verbose) {
  release <- bp_hold(BPPARAM)
  on.exit(release(), add = TRUE)
  rounds <- bp_rounds(BPPARAM, trajectories, a$devices)
  on.exit(rounds$close(), add = TRUE)
  round <- function(steps, count) {
    r <- tryCatch(
      rounds$round(pbn_block, MoreArgs = list(data = data, params = params, steps = steps, count = count,
                                              gpu = a$gpu, threads = as.integer(threads))),
      error = function(e) e, interrupt = function(e) NA_character_)
    if (identical(r, NA_character_)) return(r) # Ctrl-C: the driver stops as in one process
    if (inherits(r, "error")) {
      failure <<- paste0("pbnSteadyState: ", if (!inherits(r, "sysbioGPU_error_worker")) "a BPPARAM worker failed: ",
                         conditionMessage(r))
      return(failure)
    }
    if (count) lapply(r, `[[`, "sums") else NULL
  }
  failure <- NULL
  run <- c(run_list(list(gpu = FALSE), verbose, threads = 1L, devices = 0L), list(round = round, env = environment()))
  o <- .Call(ffi_pbn_steady_bp, data, params, run)
  if (is.null(o)) stop(sbg_condition("sysbioGPU_error_worker", failure))
  o
}

# The default trajectory count: a function of r, s and the number of sets
# only (documented under `trajectories`), identical on every backend.
pbn_auto_trajectories <- function(r, s, n_sets) {
  zr2 <- (stats::qnorm((1 + s) / 2) / r)^2
  t <- 2^floor(log2(max(1, zr2 / 4096)))
  t <- min(max(t, 64), 2^18)
  cap <- 2^floor(log2(2^29 / (12 * n_sets)))
  max(2, min(t, cap))
}

# The rows of the sets decided by constant nodes (pbn_known_sets()): exact,
# converged, nothing simulated for them.
pbn_known_rows <- function(labels, prob) {
  data.frame(set = labels, probability = prob, lower = prob, upper = prob, se = 0, N = NA_real_,
             M = NA_real_, alpha = NA_real_, beta = NA_real_, samples = NA_real_, trajectories = NA_real_,
             rhat = NA_real_, steps = 0, seconds = 0, converged = TRUE, stringsAsFactors = FALSE)
}

pbn_merge_known <- function(res, sets, known) {
  if (!any(!is.na(known))) return(res)
  out <- pbn_known_rows(names(sets), known)
  out[is.na(known), ] <- res
  out$seconds <- max(res$seconds)
  out
}

# Every set decided by constant nodes: no run at all.
pbn_known_result <- function(sets, known, p, update, backend, threads, device) {
  b <- resolveBackend(backend, threads, device)
  pbn_result(pbn_known_rows(names(sets), known),
             list(backend = b$backend, device = b$devices, deviceName = b$deviceName, seed = NA_real_,
                  method = "two-state", p = p, update = update, burnin = 0, nodesSimulated = 0L))
}

pbn_result <- function(res, attrs) {
  rownames(res) <- NULL
  for (nm in names(attrs)) attr(res, nm) <- attrs[[nm]]
  class(res) <- c("pbnSteadyState", "data.frame")
  res
}

#' @rdname pbnSteadyState
#' @param x A `pbnSteadyState` result.
#' @param n Most rows printed (default 20).
#' @param ... Passed to the data.frame print method.
#' @details `print()` shows the run in two lines and the columns a reader
#'   needs (`set`, `probability`, the interval and `converged`; `set` and
#'   `probability` alone for the exact method), in the table's order;
#'   `as.data.frame()` has every column.
#' @export
print.pbnSteadyState <- function(x, n = 20L, ...) {
  a <- attributes(x)
  where <- if (identical(a$backend, "gpu")) sprintf("GPU %s (%s)", paste(a$device, collapse = ", "), a$deviceName) else "CPU"
  if (identical(a$method, "exact")) {
    cat(sprintf("<pbnSteadyState> exact stationary distribution (%s), %d simulated node(s)\n",
                if (is.null(a$solver)) "power iteration" else a$solver, a$nodesSimulated))
    cat(sprintf("  p = %g, %s, %s\n", a$p, a$update, where))
    cols <- c("set", "probability", "converged")
  } else {
    cat(sprintf("<pbnSteadyState> two-state Markov chain, %d node(s) simulated, burn-in %g\n",
                a$nodesSimulated, a$burnin))
    tr <- x$trajectories[!is.na(x$trajectories)]
    cat(sprintf("  p = %g, %s, %s, seed %s, %s trajectories\n", a$p, a$update, where,
                format(a$seed, scientific = FALSE), if (length(tr)) format(max(tr)) else "no"))
    cols <- c("set", "probability", "lower", "upper", "converged")
  }
  df <- as.data.frame(x)
  if (all(df$converged)) cols <- setdiff(cols, "converged")
  shown <- df[seq_len(min(n, nrow(df))), cols, drop = FALSE]
  print(shown, row.names = FALSE, digits = 4L, ...)
  if (nrow(df) > n) cat(sprintf("  ... %d more set(s)\n", nrow(df) - n))
  if (any(!df$converged)) cat(sprintf("  %d set(s) not converged\n", sum(!df$converged)))
  invisible(x)
}

#' @rdname pbnSteadyState
#' @param row.names,optional Unused (for the generic).
#' @export
as.data.frame.pbnSteadyState <- function(x, row.names = NULL, optional = FALSE, ...) {
  a <- attributes(x)
  y <- x
  class(y) <- "data.frame"
  for (nm in setdiff(names(a), c("names", "row.names", "class"))) attr(y, nm) <- NULL
  y
}

#' @rdname pbnSteadyState
#' @param object A `pbnSteadyState` result.
#' @export
summary.pbnSteadyState <- function(object, ...) {
  a <- attributes(object)
  structure(list(method = a$method, backend = a$backend, p = a$p, update = a$update,
                 sets = nrow(object), converged = sum(object$converged),
                 halfWidth = max((object$upper - object$lower) / 2),
                 samples = if (identical(a$method, "exact")) NA_real_ else max(object$samples),
                 steps = max(object$steps), seconds = max(object$seconds),
                 nodesSimulated = a$nodesSimulated,
                 table = as.data.frame(object)[, c("set", "probability", "lower", "upper", "converged")]),
            class = "summary.pbnSteadyState")
}

#' @export
print.summary.pbnSteadyState <- function(x, ...) {
  cat(sprintf("pbnSteadyState (%s, %s, p = %g, %s): %d set(s), %d converged, %d node(s) simulated\n",
              x$method, x$backend, x$p, x$update, x$sets, x$converged, x$nodesSimulated))
  if (identical(x$method, "exact")) {
    cat(sprintf("  exact stationary distribution, %g power iteration(s), %.3g s\n", x$steps, x$seconds))
  } else {
    cat(sprintf("  widest interval half-width %.3g; %.4g pooled samples, %.4g steps, %.3g s\n",
                x$halfWidth, x$samples, x$steps, x$seconds))
  }
  print(x$table, row.names = FALSE, ...)
  invisible(x)
}

#' @rdname pbnSteadyState
#' @param exact Optional result of `method = "exact"` on the same sets (and
#'   network, `p`, `update`): plotted beside the estimates.
#' @param main Plot title.
#' @export
plot.pbnSteadyState <- function(x, exact = NULL, main = "pbnSteadyState", ...) {
  if (!is.null(exact) && (!inherits(exact, "pbnSteadyState") || !identical(exact$set, x$set)))
    stop_input("`exact` must be a pbnSteadyState result over the same sets as `x`", call = NULL)
  k <- nrow(x)
  y <- rev(seq_len(k))
  off <- if (is.null(exact)) 0 else 0.15
  # room for the set labels at the left
  old <- graphics::par(mar = c(4, min(20, max(4, 0.45 * max(nchar(x$set)) + 1)), 3, 1))
  on.exit(graphics::par(old))
  graphics::plot(x$probability, y + off, xlim = range(0, 1, x$lower, x$upper), ylim = c(0.5, k + 0.5),
                 pch = 19, yaxt = "n", xlab = "probability", ylab = "", main = main, ...)
  graphics::segments(x$lower, y + off, x$upper, y + off, lwd = 2)
  graphics::axis(2, at = y, labels = x$set, las = 1, cex.axis = 0.8)
  leg <- if (identical(attr(x, "method"), "exact")) "exact" else "estimate and interval"
  if (!is.null(exact)) {
    graphics::points(exact$probability, y - off, pch = 4, col = 2, lwd = 2)
    graphics::legend("bottomright", legend = c(leg, "exact"), pch = c(19, 4), col = c(1, 2), bty = "n", cex = 0.8)
  }
  invisible(x)
}

# ---- pbnSimulate ----------------------------------------------------------

#' Simulate trajectories of a probabilistic Boolean network
#'
#' Runs the dynamics of [pbnSteadyState()] (same steps, same random
#' numbers: trajectory `i` uses Philox subsequence `i - 1` of `seed`).
#'
#' @inheritParams pbnSteadyState
#' @param steps Number of steps (>= 0).
#' @param from Start state: a logical vector over all nodes (in node order
#'   or named), or `NULL` for a uniformly random start drawn from each
#'   trajectory's own stream (as pbnSteadyState() starts its chains).
#' @param trajectories Number of trajectories.
#' @return With one trajectory, a logical matrix of `steps + 1` rows (the
#'   start first) and one column per node; with several, a logical array
#'   `[step, node, trajectory]`.  Attributes `seed` and `backend`.
#' @examples
#' net <- pbn(list(A = "!B", B = "A"))
#' pbnSimulate(net, 6, from = c(A = TRUE, B = FALSE), p = 0, seed = 1, backend = "cpu")
#' @export
pbnSimulate <- function(pbn, steps, from = NULL, trajectories = 1, p = 0.001,
                        update = c("synchronous", "asynchronous"), engine = c("chains", "bits"),
                        seed = NULL, backend = getOption("sysbioGPU.backend", "auto"),
                        threads = getOption("sysbioGPU.threads"),
                        device = getOption("sysbioGPU.device", 0L)) {
  net <- pbn_check_net(pbn)
  steps <- check_whole(steps, "steps", min = 0, max = 2^31 - 1)
  trajectories <- check_whole(trajectories, "trajectories", min = 1, max = 2^31 - 1)
  p <- check_prob_open(p, "p", 0, 1, FALSE, TRUE)
  update <- check_choice(update, c("synchronous", "asynchronous"), "update")
  engine <- check_choice(engine, c("chains", "bits"), "engine")
  n <- length(net$nodes)
  W <- (n + 63L) %/% 64L
  if ((steps + 1) * trajectories * n > 2^31 - 1)
    stop_input("`steps` x `trajectories` x nodes is too large for a logical array", call = NULL)
  from_pairs <- NULL
  if (!is.null(from)) {
    if (!(is.logical(from) || is.numeric(from)) || anyNA(from) || length(from) != n ||
        (is.numeric(from) && any(!from %in% c(0, 1))))
      stop_input("`from` must be a logical (or 0/1) vector over the ", n, " nodes, not ", arg_label(from), call = NULL)
    if (!is.null(names(from))) {
      if (!setequal(names(from), net$nodes)) stop_input("`from` must name every node once", call = NULL)
      from <- from[net$nodes]
    }
    bits <- lapply(seq_len(W), function(w) which(as.logical(from[(64L * (w - 1L) + 1L):min(n, 64L * w)])) - 1L)
    from_pairs <- pbn_mask_pairs(bits)
  }
  b <- resolveBackend(backend, threads, device)
  a <- backend_args(b)
  seed <- resolve_seed(seed)
  flat <- pbn_flatten(net, rep(TRUE, n), p, update == "asynchronous")
  if (engine == "bits") pbn_check_bits(flat, update == "asynchronous", NULL)
  # the states (8 bytes a word of 64 nodes) and the logical array (4 bytes
  # a node) of every step of every trajectory
  alloc_guard(pbn_simulate_run(flat, from_pairs, seed, trajectories, steps, a, b, n, W, net, engine == "bits"),
              "steps", bytes = (steps + 1) * trajectories * (8 * W + 8 * n),
              what = "the trajectories (`steps` x `trajectories` x nodes)")
}

pbn_simulate_run <- function(flat, from_pairs, seed, trajectories, steps, a, b, n, W, net, bits) {
  v <- .Call(ffi_pbn_simulate, list(net = flat, from = from_pairs),
             list(seed = as.double(seed), chains = as.double(trajectories), steps = as.double(steps), bits = bits),
             run_list(a, devices = a$device))$states
  # v: per (chain, step, word) a low and a high 32-bit half
  nrow_all <- trajectories * (steps + 1)
  bitsm <- matrix(FALSE, nrow_all, n)
  halves <- matrix(v, nrow = 2L * W)
  for (j in seq_len(n)) {
    h <- (j - 1L) %/% 32L + 1L
    bit <- (j - 1L) %% 32L
    x <- halves[h, ]
    y <- bitwAnd(bitwShiftR(x, bit), 1L) == 1L
    y[is.na(x)] <- bit == 31L  # NA_integer_ is the pattern 0x80000000
    bitsm[, j] <- y
  }
  colnames(bitsm) <- net$nodes
  out <- if (trajectories == 1) bitsm else {
    arr <- array(bitsm, c(steps + 1, trajectories, n))
    arr <- aperm(arr, c(1L, 3L, 2L))
    dimnames(arr) <- list(NULL, net$nodes, NULL)
    arr
  }
  attr(out, "seed") <- seed
  attr(out, "backend") <- b$backend
  out
}
