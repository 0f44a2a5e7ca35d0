# grnEvolve(): island-model genetic algorithm that finds the links and rules
# taking a gene regulatory network from one state to another (Garcia-Calvo
# et al. 2018, cuEVOGENET), and grnSimulate(), the model's dynamics.
# Engines: src/grn/ (grn_cpu.c, grn_gpu.cu, shared operators in grn_model.h).

grn_rule_names <- c("most", "abs", "jact", "jrep")

# Largest fitness history (generations + 1) x islands that one call of the
# engine allocates by the cap (32 MB); a larger cap runs in rounds
# (grn_workers()).  An engine setting for the tests (?`sysbioGPU-options`).
grn_history_rows <- function() engine_option("sysbioGPU.grnHistoryRows", "grnEvolve") %||% 2^22

# A signed network as an integer matrix with gene names (row = target,
# column = source), from a matrix or an edge data.frame.
grn_network <- function(network, arg = "network") {
  if (is.data.frame(network)) {
    need <- c("source", "target", "sign")
    if (!all(need %in% names(network))) {
      stop_input("`", arg, "` as a data.frame needs columns source, target and sign", call = sys.call(-1))
    }
    src <- as.character(network$source)
    tgt <- as.character(network$target)
    sgn <- network$sign
    if (anyNA(src) || anyNA(tgt) || !all(nzchar(src)) || !all(nzchar(tgt))) {
      stop_input("`", arg, "`: source and target must be gene names, not NA or empty", call = sys.call(-1))
    }
    if (!is.numeric(sgn) || anyNA(sgn) || !all(sgn %in% c(-1, 1))) {
      stop_input("`", arg, "`: sign must be 1 or -1", call = sys.call(-1))
    }
    genes <- unique(c(src, tgt))
    m <- matrix(0L, length(genes), length(genes), dimnames = list(genes, genes))
    if (anyDuplicated(paste(src, tgt, sep = "\r"))) {
      stop_input("`", arg, "` lists the same link twice", call = sys.call(-1))
    }
    m[cbind(match(tgt, genes), match(src, genes))] <- as.integer(sgn)
    return(m)
  }
  if (!is.matrix(network) || !(is.numeric(network) || is.logical(network))) {
    stop_input("`", arg, "` must be a square numeric matrix or an edge data.frame", call = sys.call(-1))
  }
  if (nrow(network) != ncol(network) || nrow(network) < 1L) {
    stop_input("`", arg, "` must be a square matrix, not ", nrow(network), " x ", ncol(network),
               call = sys.call(-1))
  }
  if (anyNA(network) || !all(network %in% c(-1, 0, 1))) {
    stop_input("`", arg, "` must hold only -1, 0 and 1 (row = target, column = source)",
               call = sys.call(-1))
  }
  n <- nrow(network)
  rn <- rownames(network)
  cn <- colnames(network)
  if (is.null(rn) && is.null(cn)) rn <- cn <- paste0("g", seq_len(n))
  if (is.null(rn)) rn <- cn
  if (is.null(cn)) cn <- rn
  if (!identical(rn, cn)) {
    stop_input("`", arg, "`: row and column names must be the same genes in the same order",
               call = sys.call(-1))
  }
  if (anyNA(rn) || !all(nzchar(rn))) {
    stop_input("`", arg, "`: gene names must not be NA or empty (gene ",
               which(is.na(rn) | !nzchar(rn))[1], ")", call = sys.call(-1))
  }
  if (anyDuplicated(rn)) stop_input("`", arg, "`: gene names must be unique", call = sys.call(-1))
  if (n > 2048L) stop_input("`", arg, "` has ", n, " genes; at most 2048 are supported", call = sys.call(-1))
  m <- matrix(as.integer(network), n, n, dimnames = list(rn, rn))
  m
}

# A gene state named by `genes`, as 0/1 integers in gene order.
grn_state <- function(x, genes, arg) {
  if (!is.logical(x) && !(is.numeric(x) && all(x %in% c(0, 1)))) {
    stop_input("`", arg, "` must be a logical vector named by gene", call = sys.call(-1))
  }
  if (anyNA(x)) stop_input("`", arg, "` must not contain NA", call = sys.call(-1))
  nm <- names(x)
  if (is.null(nm)) {
    if (length(x) != length(genes)) {
      stop_input("`", arg, "` must name the ", length(genes), " genes of `network`", call = sys.call(-1))
    }
    nm <- genes
  }
  if (length(x) != length(genes) || anyDuplicated(nm) || !setequal(nm, genes)) {
    miss <- setdiff(genes, nm)
    extra <- setdiff(nm, genes)
    stop_input("gene names of `", arg, "` do not match those of `network`",
               if (length(miss)) paste0("; missing: ", paste(utils::head(miss, 5), collapse = ", ")),
               if (length(extra)) paste0("; unknown: ", paste(utils::head(extra, 5), collapse = ", ")),
               call = sys.call(-1))
  }
  as.integer(as.logical(x[match(genes, nm)]))
}

grn_rules <- function(rules, genes, arg = "rules") {
  if (!is.character(rules) || anyNA(rules) || !all(tolower(rules) %in% grn_rule_names)) {
    stop_input("`", arg, "` must be rule names among ", paste0('"', grn_rule_names, '"', collapse = ", "),
               call = sys.call(-1))
  }
  n <- length(genes)
  if (!is.null(names(rules)) && length(rules) == n) {
    if (!setequal(names(rules), genes)) stop_input("names of `", arg, "` do not match the genes", call = sys.call(-1))
    rules <- rules[genes]
  } else if (length(rules) == 1L) {
    rules <- rep(rules, n)
  } else if (length(rules) != n) {
    stop_input("`", arg, "` must have length 1 or one rule per gene (", n, ")", call = sys.call(-1))
  }
  match(tolower(rules), grn_rule_names) - 1L
}

# lambda as the fraction p/q with the smallest q <= 1e6 (continued
# fractions), so that the fitness has the exact integer form
# p*N*dn + (q-p)*dl = q*N^2*fitness.
grn_lambda_fraction <- function(lambda) {
  if (lambda == 0) return(c(0, 1))
  if (lambda == 1) return(c(1, 1))
  h0 <- 0; h1 <- 1; k0 <- 1; k1 <- 0
  x <- lambda
  best <- c(round(lambda * 1e6), 1e6)
  for (it in seq_len(64L)) {
    a <- floor(x)
    h2 <- a * h1 + h0; k2 <- a * k1 + k0
    if (k2 > 1e6) break
    best <- c(h2, k2)
    if (abs(h2 / k2 - lambda) <= 1e-12 * max(1, lambda)) break
    h0 <- h1; h1 <- h2; k0 <- k1; k1 <- k2
    frac <- x - a
    if (frac < 1e-15) break
    x <- 1 / frac
  }
  best
}

grn_problem <- function(network, from, to, steps, lambda = 0.9, maxIn = NULL, allowed = 0:3) {
  n <- nrow(network)
  pq <- grn_lambda_fraction(lambda)
  list(network = network, from = from, to = to, steps = as.integer(steps),
       wn = pq[[1]] * n, wl = pq[[2]] - pq[[1]],
       maxIn = as.integer(if (is.null(maxIn)) n else maxIn),
       allowed = as.integer(allowed), q = pq[[2]])
}

#' Simulate the Boolean dynamics of a signed gene regulatory network
#'
#' The model of Aguilar-Hidalgo et al. (2012) that [grnEvolve()] searches:
#' all genes update together (synchronously), each by its rule, counting
#' only the sources that are on. With `a` active activators and `r` active
#' repressors of a gene:
#' * `"most"`: on if `a > r`, off if `a < r`, else unchanged;
#' * `"abs"` (absolute repressor): off if `1 <= r`, else unchanged;
#' * `"jact"` (joint activators): on if `a >= 2`, else unchanged;
#' * `"jrep"` (joint repressors): off if `2 <= r`, else unchanged.
#'
#' States are bit-packed and inputs counted by popcount, in the model code
#' that the search's engines share (the CPU engine's vectorised evaluation
#' is tested against it).
#'
#' @param network Signed network: a square matrix (row = target, column =
#'   source; 1 activates, -1 represses, 0 no link; self links allowed) with
#'   gene names as dimnames (default `g1`, `g2`, ...), or a data.frame with
#'   columns `source`, `target`, `sign` (1 or -1).
#' @param rules One rule name for all genes, or one per gene (named by gene,
#'   or in gene order).
#' @param from Start state: a logical vector named by gene.
#' @param steps Number of synchronous steps, >= 1. Default 5.
#' @return A logical matrix of `steps + 1` rows (the states at steps
#'   0..`steps`) and one column per gene.
#' @seealso [grnEvolve()]
#' @references Aguilar-Hidalgo D, Lemos MC, Cordoba A (2012). Evolutionary
#'   dynamics in gene networks and inference algorithms. International
#'   Journal of Bifurcation and Chaos 22(7), 1250156.
#' @examples
#' net <- matrix(c(0, 1, 0,
#'                 0, 0, 1,
#'                 -1, 0, 0), 3, byrow = TRUE,
#'               dimnames = list(c("a", "b", "c"), c("a", "b", "c")))
#' grnSimulate(net, "most", c(a = TRUE, b = FALSE, c = FALSE), steps = 4)
#' @export
grnSimulate <- function(network, rules, from, steps = 5) {
  network <- grn_network(network)
  genes <- rownames(network)
  from <- grn_state(from, genes, "from")
  steps <- check_whole(steps, "steps", min = 1, max = 1e6)
  codes <- grn_rules(rules, genes)
  pb <- grn_problem(network, from, from, steps)
  # the states of every step, twice (the engine's integers, then logical)
  alloc_guard({
    s <- .Call(ffi_grn_simulate, pb, codes)
    out <- t(s) == 1L
    dimnames(out) <- list(as.character(0:steps), genes)
    out
  }, "steps", bytes = 12 * (steps + 1) * length(genes), what = "the states (`steps` x genes)")
}

#' Find the links and rules that drive a gene network from one state to another
#'
#' An island-model genetic algorithm (Garcia-Calvo et al. 2018, cuEVOGENET)
#' over signed networks and per-gene rules of the model of [grnSimulate()].
#' It looks for the network closest to `network` whose dynamics take `from`
#' to `to` in `steps` synchronous steps, minimising
#' \deqn{f = \lambda \, dn / N + (1 - \lambda) \, dl / N^2}{f = lambda dn / N + (1 - lambda) dl / N^2}
#' where `dn` counts the genes whose state after `steps` steps differs from
#' `to` and `dl` the links that differ from `network`.
#'
#' **The search.** The initial individuals place the reference's links in
#' random cells (a shuffle of the matrix, keeping the number of activating
#' and repressing links) with random rules. Each generation, in each island
#' sorted by fitness (ties by index): the two best are kept (the elite);
#' the others are replaced by the children of adjacent sorted pairs
#' (`selection = "elitist"`) or of parents drawn with probability
#' proportional to `1 / (1 + s)`, with `s = q N^2 f` the integer score
#' (`"roulette"`). One-point crossover cuts the row-major list of links and
#' the rules at the same place; a child with a gene of more than
#' `maxInDegree` inputs is replaced by its parent. Each child then changes
#' one random link with probability `pLink` and one rule with probability
#' `pRule` (per individual). Every `migrationInterval` generations the
#' `migrants` best of each island replace the worst of the next one on a
#' ring. `islands = 1` is the master-slave model.
#'
#' **Settings.** The population, islands, migration and selection defaults
#' are the paper's; the mutation rates are not. The defaults, `pLink =
#' pRule = 0.05`, reach the optimum of the mouse eye network
#' ([grnMouseEye()]: no gene off the goal, 6 links changed; a SAT search,
#' `inst/bench/grn-optimum.py`, proves that no network within 5 changes
#' reaches the goal) in each of 8 seeds, in 861 to 1,922 generations
#' (under a minute on 2 CPU threads even on a loaded machine); 0.01, 0.02,
#' 0.1 and 0.2 need more generations, and the paper's 0.001 still had 9
#' and 11 changed links after 60 s (`inst/bench/grn-defaults.R`, whose
#' table is in BENCHMARKS.md).
#'
#' **Exact and reproducible.** Fitness is compared in the integer form
#' `p N dn + (q - p) dl`, with `lambda = p / q` (the nearest fraction with
#' `q <= 1e6`: exact for up to six decimals). Every random choice comes from
#' the Philox stream of (seed, generation, island, individual), so the same
#' seed gives the same run on any number of threads and on CPU or GPU.
#' Runs bounded by `generations` or `target` are reproducible; a run that
#' stops at `timeLimit` depends on the speed of the machine.
#'
#' **Several GPUs and R workers.** The unit split is the island: `device =
#' c(0, 1)` (or `"all"`) and `BPPARAM` give each GPU or worker a contiguous
#' block of islands; migration crosses the blocks on the ring. Each block
#' stops as soon as its own best reaches `target`; the run stops at the
#' earliest such generation (where any island reaches it, as in one
#' process), the blocks that ran on are cut there, and the best network
#' comes from a block stopped there. So the result is the same as on one
#' device, bit for bit.
#'
#' @param network The reference signed network (see [grnSimulate()]): a
#'   square matrix, row = target, column = source, values -1, 0, 1, or an
#'   edge data.frame (`source`, `target`, `sign`).
#' @param from,to Start and goal states: logical vectors named by gene.
#' @param steps Synchronous steps from `from`, scored on the last state
#'   (default 5).
#' @param lambda Weight of state mismatches against link changes, in
#'   \[0, 1\] (default 0.9).
#' @param rules The rules a gene may take (default all four).
#' @param popSize Individuals in all (default 4096); a multiple of
#'   `islands`, with an even island size of at least 4.
#' @param islands Islands on the ring (default 4).
#' @param migrationInterval Generations between migrations (default 4).
#' @param migrants Individuals each island sends (default 2), smaller than
#'   an island.
#' @param selection `"elitist"` (default) or `"roulette"`.
#' @param pLink,pRule Probabilities, per individual and generation, of a
#'   link and of a rule mutation (default 0.05 each, chosen by measurement:
#'   see Settings; the paper used 0.001).
#' @param maxInDegree Largest number of inputs of a gene (default 7, or the
#'   number of genes when there are fewer and `maxInDegree` is not given).
#' @param generations Largest number of generations (default 1e5, at most
#'   1e9). A large cap cut short by `timeLimit` or `target` costs only the
#'   generations that run: the fitness history grows as they run (a cap
#'   whose history would exceed 2^22 values, generations x islands, runs in
#'   rounds in this process: the same run).
#' @param target Stop when the best fitness is at most this (default
#'   `NULL`: never).
#' @param timeLimit Seconds after which to stop (default `Inf`).
#' @param seed Whole number; `NULL` (default) draws it from R's generator.
#' @param backend,threads See [resolveBackend()].
#' @param device GPU index, several (`c(0, 1)`) or `"all"` (see
#'   [resolveBackend()]). With several GPUs one process drives them all: the
#'   islands are split into contiguous blocks, as even as possible, one per
#'   GPU (at most one GPU per island), each block's population stays on its
#'   GPU, and at each migration generation the last island of a block sends
#'   its migrants to the first island of the next block (through host
#'   memory) so that the ring crosses the GPUs. The run is identical to the
#'   single-GPU and CPU runs for the same seed.
#' @param verbose Show a progress bar for long runs (default
#'   `interactive()`).
#' @param BPPARAM `NULL` (default: this process), or a BiocParallel back-end
#'   (`SerialParam()`, `MulticoreParam(4)`, `SnowParam(2)`, on a cluster
#'   `BatchtoolsParam()`) to spread the islands over R workers: each worker
#'   runs a contiguous block of islands, in rounds that end before each
#'   migration generation; between rounds the migrants of each block's last
#'   island go to the next block's first island, and each round ships the
#'   blocks' populations to the workers and back (so rounds are worth it
#'   when `migrationInterval` generations take much longer than that
#'   transfer). The run is identical to the single-process one for the
#'   same seed, whatever the number of workers (more workers than islands
#'   leave the extra ones idle). CPU workers use `threads` each (default:
#'   the cores shared out among the workers; forked `MulticoreParam`
#'   workers run one thread each). GPU workers (`backend = "gpu"`) take the
#'   GPUs of `device` in turn and must be processes of their own
#'   (`SnowParam`, `BatchtoolsParam`), not forks of this one. `timeLimit`
#'   is checked between rounds.
#' @return An object of class `"grnEvolve"`: `network` (the best network),
#'   `rules` (its rule per gene), `fitness`, `dn`, `dl`, `changes` (a
#'   data.frame of the changed links: `source`, `target`, `reference`,
#'   `best`), `trajectory` (its states over the steps, a logical matrix),
#'   `mismatches` (genes that end away from `to`), `history` (best fitness
#'   per generation, one column per island, row 1 = the initial
#'   population), `generations` (run), `stopReason`, `seconds`, `seed`,
#'   `backend`, `device` (the first GPU), `devices` (all of them),
#'   `deviceName`, `threads`, and the settings.
#' @seealso [grnSimulate()], [grnMouseEye()]
#' @references Garcia-Calvo R, Guisado JL, Diaz-del-Rio F, Cordoba A,
#'   Jimenez-Morales F (2018). Graphics processing unit-enhanced genetic
#'   algorithms for solving the temporal dynamics of gene regulatory
#'   networks. Evolutionary Bioinformatics 14.
#' @examples
#' eye <- grnMouseEye()
#' fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 256, islands = 2,
#'                  generations = 50, seed = 1, backend = "cpu", threads = 1)
#' fit
#' head(fit$changes)
#' @export
grnEvolve <- function(network, from, to, steps = 5, lambda = 0.9,
                      rules = c("most", "abs", "jact", "jrep"), popSize = 4096,
                      islands = 4, migrationInterval = 4, migrants = 2,
                      selection = c("elitist", "roulette"), pLink = 0.05, pRule = 0.05,
                      maxInDegree = 7, generations = 1e5, target = NULL, timeLimit = Inf,
                      seed = NULL, backend = getOption("sysbioGPU.backend", "auto"),
                      threads = getOption("sysbioGPU.threads"),
                      device = getOption("sysbioGPU.device", 0L), verbose = interactive(),
                      BPPARAM = NULL) {
  cl <- match.call()
  network <- grn_network(network)
  genes <- rownames(network)
  n <- length(genes)
  from_i <- grn_state(from, genes, "from")
  to_i <- grn_state(to, genes, "to")
  steps <- check_whole(steps, "steps", min = 1, max = 1e6)
  check_prob <- function(x, arg) {
    if (!is.numeric(x) || length(x) != 1L || is.na(x) || x < 0 || x > 1) {
      stop_input("`", arg, "` must be a probability in [0, 1], not ", arg_label(x), call = sys.call(-2))
    }
    as.double(x)
  }
  lambda <- check_prob(lambda, "lambda")
  if (!is.character(rules) || !length(rules) || anyNA(rules) ||
      !all(tolower(rules) %in% grn_rule_names)) {
    stop_input("`rules` must be among ", paste0('"', grn_rule_names, '"', collapse = ", "))
  }
  allowed <- sort(unique(match(tolower(rules), grn_rule_names) - 1L))
  popSize <- check_whole(popSize, "popSize", min = 4, max = 2^24)
  islands <- check_whole(islands, "islands", min = 1, max = 2^16)
  if (popSize %% islands != 0) {
    stop_input("`popSize` (", popSize, ") must be divisible by `islands` (", islands, ")")
  }
  size <- popSize / islands
  if (size %% 2 != 0 || size < 4) {
    stop_input("each island must hold an even number of individuals, at least 4 (`popSize` / `islands` = ",
               size, ")")
  }
  migrationInterval <- check_whole(migrationInterval, "migrationInterval", min = 1, max = 2^31 - 1)
  migrants <- check_whole(migrants, "migrants", min = 0, max = 2^31 - 1)
  if (migrants >= size) {
    stop_input("`migrants` (", migrants, ") must be smaller than an island (", size, " individuals)")
  }
  selection <- check_choice(selection, c("elitist", "roulette"), "selection")
  pLink <- check_prob(pLink, "pLink")
  pRule <- check_prob(pRule, "pRule")
  if (missing(maxInDegree)) maxInDegree <- min(7, n)
  maxInDegree <- check_whole(maxInDegree, "maxInDegree", min = 0, max = n)
  indeg <- rowSums(network != 0)
  if (any(indeg > maxInDegree)) {
    stop_input("`network` has genes with more than `maxInDegree` = ", maxInDegree, " inputs: ",
               paste(utils::head(genes[indeg > maxInDegree], 5), collapse = ", "))
  }
  generations <- check_whole(generations, "generations", min = 0, max = 1e9)
  if (!is.null(target) && (!is.numeric(target) || length(target) != 1L || is.na(target) || target < 0)) {
    stop_input("`target` must be NULL or a fitness >= 0, not ", arg_label(target))
  }
  if (!is.numeric(timeLimit) || length(timeLimit) != 1L || is.na(timeLimit) || timeLimit <= 0) {
    stop_input("`timeLimit` must be a positive number of seconds (or Inf), not ", arg_label(timeLimit))
  }
  verbose <- check_flag(verbose)
  check_bpparam(BPPARAM)
  seed <- resolve_seed(seed)
  pb <- grn_problem(network, from_i, to_i, steps, lambda, maxInDegree, allowed)
  scale <- pb$q * n^2 # score = scale * fitness
  if (scale * size >= 2^62) stop_input("`network` is too large for the exact fitness with this `lambda`")
  # no score exceeds `scale` (fitness <= 1): a larger target (Inf, 1e20)
  # is that one, met by generation 0, and stays a whole number the engine
  # can hold
  target_score <- if (is.null(target)) -1 else min(floor(target * scale * (1 + 1e-12) + 1e-9), scale)
  ga <- list(pop = popSize, islands = as.integer(islands),
             migrationInterval = as.integer(min(migrationInterval, 2^31 - 1)),
             migrants = as.integer(migrants), roulette = as.integer(selection == "roulette"),
             pLink = pLink, pRule = pRule, generations = generations, target = target_score,
             timeLimit = if (is.finite(timeLimit)) as.double(timeLimit) else 0, seed = seed,
             blocks = as.integer(engine_option("sysbioGPU.grnBlocks", "grnEvolve") %||% 1L)) # CPU blocks in lockstep
  if (!is.null(BPPARAM) && is.null(threads)) threads <- bp_threads(BPPARAM)
  b <- resolveBackend(backend, threads, device)
  a <- backend_args(b, multi = TRUE)
  check_bpparam_gpu(BPPARAM, b)
  t0 <- proc.time()[["elapsed"]]
  devs <- a$devices
  # tests: blocks of islands on one GPU run the several-GPU code there
  if (a$gpu && length(devs) == 1L && ga$blocks > 1L) devs <- rep(devs, ga$blocks)
  # A cap of generations whose history would be large (a cap that a time
  # limit or the target usually cuts short) runs in rounds in this process,
  # the history grown as they go: the same run (see grn_workers()).
  rounds <- is.null(BPPARAM) && (generations + 1) * islands > grn_history_rows()
  r <- if (is.null(BPPARAM) && !rounds) {
         alloc_guard(.Call(ffi_grn_evolve, pb, ga, run_list(a, verbose, devices = devs)), "generations",
                     bytes = 8 * (generations + 1) * islands, what = "the fitness history")
       } else grn_workers(pb, ga, a, BPPARAM)
  seconds <- proc.time()[["elapsed"]] - t0
  new_grnEvolve(r, network, genes, from_i, to_i, pb, scale, b, seconds, seed,
                settings = list(steps = steps, lambda = lambda, rules = grn_rule_names[allowed + 1L],
                                popSize = popSize, islands = islands,
                                migrationInterval = migrationInterval, migrants = migrants,
                                selection = selection, pLink = pLink, pRule = pRule,
                                maxInDegree = maxInDegree, maxGenerations = generations,
                                target = target, timeLimit = timeLimit),
                call = cl)
}

new_grnEvolve <- function(r, network, genes, from, to, pb, scale, b, seconds, seed, settings, call) {
  best <- r$links
  dimnames(best) <- dimnames(network)
  rules <- stats::setNames(grn_rule_names[r$rules + 1L], genes)
  g <- r$generations
  hist <- r$history[seq_len(g + 1), , drop = FALSE] / scale
  dimnames(hist) <- list(as.character(0:g), paste0("island", seq_len(ncol(hist))))
  diff <- which(best != network, arr.ind = TRUE)
  diff <- diff[order(diff[, "col"], diff[, "row"]), , drop = FALSE]
  changes <- data.frame(source = genes[diff[, "col"]], target = genes[diff[, "row"]],
                        reference = network[diff], best = best[diff], stringsAsFactors = FALSE)
  traj <- grnSimulate(best, rules, stats::setNames(from == 1L, genes), settings$steps)
  goal <- stats::setNames(to == 1L, genes)
  structure(list(
    network = best, rules = rules,
    fitness = r$score / scale, dn = r$dn, dl = r$dl,
    changes = changes, trajectory = traj, goal = goal,
    mismatches = genes[traj[nrow(traj), ] != goal],
    history = hist, generations = g,
    stopReason = c("generations", "target", "timeLimit")[r$stop + 1L],
    seconds = seconds, seed = seed,
    backend = b$backend, device = b$device, devices = b$devices, deviceName = b$deviceName,
    threads = b$threads, settings = settings, engineSettings = engine_settings("grnEvolve"),
    reference = network, call = call),
    class = "grnEvolve")
}

# The fitness history with `rows` rows, the old ones kept; a size that
# cannot be allocated (a run that goes on for very long) is a classed error.
grn_grow_history <- function(hist, rows) {
  grown <- tryCatch(matrix(NA_real_, rows, ncol(hist)), error = function(e) {
    stop(sbg_condition("sysbioGPU_error_memory", sprintf(
      "cannot grow the fitness history to %.0f generations x %d islands (%.3g GB); lower `generations`",
      rows - 1, ncol(hist), rows * ncol(hist) * 8 / 1e9)))
  })
  grown[seq_len(nrow(hist)), ] <- hist
  grown
}

# One BPPARAM worker's round (a function of the namespace, so that a
# worker process loads the package to run it): islands block = c(first,
# count), generations gens = c(from, to), from `state` (NULL: draw
# generation 0) with the incoming migrants (NULL: none).
grn_share <- function(range, dev, state, incoming, gens, pb, ga, gpu, threads) {
  block <- as.integer(c(range[[1L]], range[[2L]] - range[[1L]]))
  .Call(ffi_grn_round, c(pb, list(state = state, incoming = incoming)),
        c(ga, list(block = block, gens = as.double(gens))),
        run_list(list(gpu = gpu), threads = threads, devices = dev))
}

# BPPARAM: each worker a contiguous block of islands (and a GPU, round robin
# over `device`), in rounds that end before each migration generation; the
# K best of a block's last island go to the next block's first island
# between rounds.  A block stops on its own once its best reaches the
# target; the single run stops at the earliest such generation, which is
# where the blocks are cut, and its best lies in a block stopped there.
#
# BPPARAM = NULL: one block in this process (a run whose history would be
# too large to allocate by its cap).  Rounds last at most `chunk`
# generations (adapted to last about 0.1 to 0.5 s), so that the history
# grows with the generations that ran; cutting a round anywhere gives the
# same run.
grn_workers <- function(pb, ga, a, BPPARAM) {
  I <- ga$islands
  G <- ga$generations
  mi <- ga$migrationInterval
  size <- ga$pop / I
  release <- bp_hold(BPPARAM)
  on.exit(release(), add = TRUE)
  rounds <- bp_rounds(BPPARAM, I, a$devices)
  on.exit(rounds$close(), add = TRUE)
  chunk <- 64
  nb <- rounds$n
  blocks <- lapply(rounds$ranges, function(r) as.integer(c(r[[1L]], r[[2L]] - r[[1L]])))
  migr <- I > 1 && ga$migrants > 0
  # grown as rounds run (doubling), never sized by the cap G
  hist <- matrix(NA_real_, min(G + 1, max(16, 2^16 %/% I)), I)
  incs <- vector("list", nb)
  g <- 0
  init <- TRUE
  stop <- 0L
  t0 <- proc.time()[["elapsed"]]
  repeat {
    # the round runs g + 1 .. g_to: a migration generation only first
    m1 <- (g %/% mi + 1) * mi
    g_to <- if (!migr) G else if (m1 == g + 1) (if (init) g else min(G, m1 + mi - 1)) else min(G, m1 - 1)
    g_to <- min(g_to, g + chunk)
    t1 <- proc.time()[["elapsed"]]
    res <- rounds$round(grn_share, incs, MoreArgs = list(gens = c(g, g_to), pb = pb, ga = ga, gpu = a$gpu,
                                                         threads = a$threads))
    # rounds of about 0.1 to 0.5 s: the time limit (checked between rounds)
    # is kept within that, and the history grows by what ran
    dt <- proc.time()[["elapsed"]] - t1
    chunk <- if (dt < 0.1) min(2 * chunk, 2^20) else if (dt > 0.5) max(1, chunk %/% 2) else chunk
    if (g_to + 1 > nrow(hist)) hist <- grn_grow_history(hist, min(G + 1, max(2 * nrow(hist), g_to + 1)))
    for (i in seq_len(nb)) {
      cols <- blocks[[i]][[1L]] + seq_len(blocks[[i]][[2L]])
      hist[(g:g_to) + 1, cols] <- res[[i]]$history
    }
    done <- vapply(res, function(r) r$gDone, 0)
    stopped <- vapply(res, function(r) r$stopped, NA)
    init <- FALSE
    if (any(stopped)) {
      g <- min(done[stopped])
      stop <- 1L
      cand <- which(done == g)
      break
    }
    g <- g_to
    cand <- seq_len(nb)
    if (g >= G) break
    if (ga$timeLimit > 0 && proc.time()[["elapsed"]] - t0 >= ga$timeLimit) {
      stop <- 2L
      break
    }
    # incoming of block i at g + 1: block i - 1's outgoing (the ring)
    incs <- if (migr && (g + 1) %% mi == 0) lapply(seq_len(nb), function(i) res[[(i - 2L) %% nb + 1L]]$outgoing)
            else vector("list", nb)
  }
  scores <- vapply(res[cand], function(r) r$bestScore, 0)
  i <- cand[[which.min(scores)]]
  best <- .Call(ffi_grn_decode, pb, res[[i]]$state, blocks[[i]][[2L]] * size, res[[i]]$bestIndex)
  list(links = best$links, rules = best$rules, history = hist, generations = g, score = best$score,
       dn = best$dn, dl = best$dl, stop = stop)
}

#' @rdname grnEvolve
#' @param x,object A `"grnEvolve"` result.
#' @param ... Unused.
#' @export
print.grnEvolve <- function(x, ...) {
  n <- nrow(x$network)
  cat(sprintf("<grnEvolve> %d genes, %s selection, %d individuals on %d island(s)\n",
              n, x$settings$selection, as.integer(x$settings$popSize), as.integer(x$settings$islands)))
  cat(sprintf("  best fitness %.6g: %d gene(s) off the goal, %d link(s) changed\n",
              x$fitness, x$dn, x$dl))
  cat(sprintf("  %s generations (stopped by %s) in %.2f s, seed %s, %s\n",
              format(x$generations, big.mark = ","), x$stopReason, x$seconds,
              format(x$seed, scientific = FALSE),
              if (x$backend == "gpu") sprintf("GPU %s (%s)", paste(x$devices, collapse = ", "),
                                              paste(unique(x$deviceName), collapse = ", "))
              else sprintf("CPU, %d thread(s)", x$threads)))
  invisible(x)
}

#' @rdname grnEvolve
#' @export
summary.grnEvolve <- function(object, ...) {
  structure(list(fit = object,
                 rules = table(factor(object$rules, grn_rule_names)),
                 changes = object$changes,
                 mismatches = object$mismatches,
                 bestByIsland = object$history[nrow(object$history), ]),
            class = "summary.grnEvolve")
}

#' @export
print.summary.grnEvolve <- function(x, ...) {
  print(x$fit)
  cat("Rules of the best network:\n")
  print(x$rules)
  if (nrow(x$changes)) {
    cat("Changed links (reference -> best):\n")
    print(x$changes, row.names = FALSE)
  } else {
    cat("No link changed.\n")
  }
  cat("Genes off the goal:", if (length(x$mismatches)) paste(x$mismatches, collapse = ", ") else "none", "\n")
  cat("Best fitness per island at the end:", format(x$bestByIsland, digits = 4), "\n")
  invisible(x)
}

# dn and dl of many networks (tests and checks): links an n x n x count
# array, rules an n x count matrix of rule codes 0..3.  `path` picks the
# CPU evaluation code (0 the fastest the CPU has, 1 plain C, 2 popcnt, 3
# AVX2, 4 AVX-512; one the CPU lacks falls back); `path` in the result is
# the one used.
grn_evaluate <- function(network, from, to, steps, links, rules, threads = 1L, path = 0L) {
  network <- grn_network(network)
  genes <- rownames(network)
  pb <- grn_problem(network, grn_state(from, genes, "from"), grn_state(to, genes, "to"), steps)
  pb$evalPath <- as.integer(path)
  storage.mode(links) <- "integer"
  storage.mode(rules) <- "integer"
  .Call(ffi_grn_evaluate, pb, links, rules, as.integer(threads))
}

# Evaluation throughput of one engine (inst/bench/grn.R); `path` as in
# grn_evaluate() (CPU only).
grn_bench_eval <- function(network, from, to, steps = 5, pop = 2^16, reps = 5L, seed = 1,
                           backend = "cpu", threads = NULL, device = 0L, path = 0L) {
  network <- grn_network(network)
  genes <- rownames(network)
  pb <- grn_problem(network, grn_state(from, genes, "from"), grn_state(to, genes, "to"), steps,
                    maxIn = nrow(network))
  pb$evalPath <- as.integer(path)
  b <- resolveBackend(backend, threads, device)
  a <- backend_args(b)
  r <- .Call(ffi_grn_bench, pb, list(pop = as.double(pop), reps = as.integer(reps), seed = as.double(seed)),
             run_list(a, devices = a$device))
  paths <- c("plain", "popcnt", "avx2", "avx512")
  cpu <- b$backend == "cpu"
  list(seconds = r$seconds, checksum = r$checksum, perSecond = pop * reps / r$seconds, backend = b$backend,
       threads = b$threads, deviceName = b$deviceName,
       path = if (cpu) paths[r$path] else NA_character_,
       cpuSeconds = r$cpuSeconds, perCpuSecond = if (cpu) pop * reps / r$cpuSeconds else NA_real_)
}
