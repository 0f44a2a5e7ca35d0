# parCosnet() and cvParCosnet(): COSNet node label prediction (Frasca,
# Bertoni, Valentini) with colour-parallel Hopfield dynamics as in
# ParCOSNet (Frasca et al., BMC Bioinformatics 2018); engines in src/cosnet/.

# Nodes x classes of a call (labels not checked yet: a vector is one class).
cosnet_cells <- function(W, labels) {
  as.double(nrow(W)) * (if (is.matrix(labels) || is.data.frame(labels)) ncol(labels) else 1)
}

# Labels (vector or nodes x classes matrix; 1/0/NA or TRUE/FALSE/NA) to an
# integer matrix of 1 / -1 / 0 (unlabelled) in the node order of W.
# by_name: the labels must name their nodes (W was an edge data.frame,
# whose node order is that of first appearance, easily misread).
as_cosnet_labels <- function(labels, W, arg = "labels", by_name = FALSE, threads = NULL) {
  n <- nrow(W)
  is_mat <- is.matrix(labels) || is.data.frame(labels)
  if (by_name && !is.null(rownames(W)) && is.null(if (is_mat) rownames(labels) else names(labels))) {
    stop_input("`", arg, "` must be named by node (a named vector, or a matrix with the nodes ",
               "as row names) when `W` is an edge data.frame: its node order is that of first ",
               "appearance in the edges")
  }
  if (is.data.frame(labels)) labels <- as.matrix(labels)
  if (!(is.logical(labels) || is.numeric(labels))) {
    stop_input("`", arg, "` must be logical or numeric (1/0/NA), not ", describe_value(labels))
  }
  L <- if (is_mat) labels else matrix(labels, ncol = 1L, dimnames = list(names(labels), NULL))
  if (nrow(L) != n) {
    stop_input("`", arg, "` must have one ", if (is_mat) "row" else "element", " per node of `W` (",
               n, "), not ", nrow(L))
  }
  if (ncol(L) < 1L) stop_input("`", arg, "` has no classes")
  storage <- storage.mode(L)
  if (storage != "double" && storage != "integer" && storage != "logical") storage.mode(L) <- "double"
  # the codes come back as the n x K matrix itself (threaded, no copy here)
  out <- .Call(ffi_cosnet_labels, L, as.integer(n), resolveBackend("cpu", threads)$threads)
  if (attr(out, "bad") > 0) {
    bad <- unique(as.vector(L)[!is.na(L) & !(L %in% c(0, 1))])
    stop_input("`", arg, "` must hold 1 (positive), 0 (negative) or NA (unlabelled), ",
               "or TRUE/FALSE/NA; found ", paste(utils::head(bad, 3), collapse = ", "))
  }
  rn <- rownames(L); wn <- rownames(W)
  if (!is.null(rn) && !is.null(wn)) {
    if (anyDuplicated(rn) || !setequal(rn, wn)) {
      stop_input("the names of `", arg, "` must be the node names of `W` (",
                 sum(!rn %in% wn), " not in `W`)")
    }
    order <- match(wn, rn)
  } else {
    order <- NULL
  }
  attr(out, "bad") <- NULL
  if (!is.null(order)) out <- out[order, , drop = FALSE]
  cl <- colnames(L)
  if (is.null(cl)) cl <- if (ncol(L) == 1L) "class" else paste0("class", seq_len(ncol(L)))
  # results are named by class: two columns of one name could not be told apart
  if (anyNA(cl) || any(!nzchar(cl))) stop_input("`", arg, "` has a class (column) named NA or \"\"")
  if (anyDuplicated(cl)) stop_input("`", arg, "` has two classes (columns) named '", cl[anyDuplicated(cl)], "'")
  colnames(out) <- cl
  rownames(out) <- wn
  out
}

check_cost <- function(cost) {
  if (!is.numeric(cost) || length(cost) != 1L || is.na(cost) || !is.finite(cost) || cost < 0) {
    stop_input("`cost` must be a single number >= 0, not ", arg_label(cost), call = sys.call(-1))
  }
  as.double(cost)
}

# One engine call on the classes of `lab` (and their `folds`): `job`
# holds the network's compressed columns and the settings (cosnet_job()),
# `devices` the GPU(s) (several share the jobs in this process).
cosnet_engine <- function(job, lab, folds, devices, verbose) {
  data <- c(job$network, list(labels = lab, folds = folds))
  .Call(ffi_cosnet, data, job$params, run_list(job, verbose, devices = devices))
}

# What every engine call of a run shares; options are read here, in the
# calling process, so that R workers get them too.
cosnet_job <- function(W, nfolds, cost, maxSweeps, seed, a) {
  params <- list(nfolds = as.integer(nfolds), cost = cost, maxSweeps = as.integer(maxSweeps), seed = as.double(seed),
                 # jobs per GPU batch, for tests of the batching; 0 = automatic
                 batch = as.integer(engine_option("sysbioGPU.cosnetBatch", "parCosnet") %||% 0L),
                 # device memory budget in bytes (0 = what is free); a smaller one
                 # forces the streamed (partitioned) GPU path in the tests
                 budget = as.double(engine_option("sysbioGPU.cosnetDeviceBytes", "parCosnet") %||% 0),
                 # largest network coloured on the host (-1 = the engine's default)
                 hostColour = as.double(engine_option("sysbioGPU.cosnetHostColour", "parCosnet") %||% -1))
  list(network = list(p = W@p, i = W@i, x = W@x), params = params, gpu = a$gpu, threads = a$threads)
}

# A BPPARAM worker's share: its block of classes on its device.  At the top
# level of the namespace, so that a SnowParam worker receives a reference
# to the package rather than the caller's frame.
cosnet_share <- function(lab, folds, dev, job) {
  cosnet_engine(job, lab, folds, dev, FALSE)
}

# The whole run: in this process (on all of `b$devices`), or over the R
# workers of BPPARAM, each a contiguous block of classes (and a device,
# round robin), merged in class order.  Each class is independent and the
# colouring depends on the network and the seed only, so both give the
# single-process result.
cosnet_run <- function(W, lab, folds, nfolds, cost, maxSweeps, seed, b, BPPARAM, verbose) {
  a <- backend_args(b, multi = TRUE)
  job <- cosnet_job(W, nfolds, cost, maxSweeps, seed, a)
  t0 <- proc.time()[["elapsed"]]
  K <- ncol(lab)
  nw <- bp_nworkers(BPPARAM, K)
  if (nw <= 1L) {
    r <- cosnet_engine(job, lab, folds, a$devices, verbose)
  } else {
    sp <- bp_split(BPPARAM, K, a$devices)
    cols <- lapply(sp$ranges, function(r) seq.int(r[[1L]] + 1L, r[[2L]]))
    labs <- lapply(cols, function(k) lab[, k, drop = FALSE])
    fl <- lapply(cols, function(k) if (is.null(folds)) NULL else folds[, k, drop = FALSE])
    parts <- bp_map(BPPARAM, cosnet_share, labs, fl, sp$devices, MoreArgs = list(job = job))
    r <- parts[[1L]]
    r$scores <- do.call(cbind, lapply(parts, `[[`, "scores"))
    r$pred <- do.call(cbind, lapply(parts, `[[`, "pred"))
    for (nm in c("alpha", "c", "fscore", "sweeps", "converged")) r[[nm]] <- unlist(lapply(parts, `[[`, nm))
    r$parts <- max(vapply(parts, `[[`, 0L, "parts"))
    if (!all(vapply(parts, function(q) identical(q$colour, r$colour), NA))) {
      stop(sbg_condition("sysbioGPU_error_internal",
                         "sysbioGPU internal error: the workers coloured the network differently; please report it"))
    }
  }
  r$workers <- nw
  r$seconds <- proc.time()[["elapsed"]] - t0
  r
}

#' COSNet label prediction on large sparse networks (ParCOSNet)
#'
#' Predicts the unlabelled nodes of a network for one or many classes with
#' COSNet (Frasca, Bertoni, Valentini), a cost-sensitive Hopfield network
#' for unbalanced labels, run colour-parallel as in ParCOSNet (Frasca et
#' al., BMC Bioinformatics 2018), on the CPU or the GPU.
#'
#' For each class: every labelled node becomes a point (summed weights to
#' labelled positives, to labelled negatives); COSNet's learning step finds
#' the line through the origin (angle `alpha`) and then the intercept `c`
#' that maximise the F-score on these points, with COSNet's tie handling
#' (groups of equal angles or intercepts enter together; a line must
#' strictly beat the best F so far; angles from 1.57 on are not tried; when
#' positives lie above the line, COSNet's `optimize_pos_above` branch).
#' Neurons take the states `sin(alpha)` (positive) and `-cos(alpha)`; the
#' thresholds of the unlabelled nodes are `c` minus the pull of their
#' labelled neighbours. The dynamics on the unlabelled subnetwork start from
#' all states unset and update the nodes colour after colour (a proper
#' Jones-Plassmann colouring with Philox priorities from `seed`), all nodes
#' of a colour at once, until a sweep changes nothing. A node becomes
#' positive when its field is strictly positive (COSNet's tie rule). With
#' `cost = 0` this is exactly the sequential asynchronous dynamics in colour
#' order, so the result depends on the seed only through that order.
#'
#' With `cost > 0` (and `alpha > pi/4`, as in COSNet) the regularisation of
#' COSNet adds the penalty `eta * (number of positives - k)^2`, `eta =
#' cost * |tan(2 (alpha - pi/4))|`, `k` the expected number of positives,
#' which couples all unlabelled nodes. Both engines then use the same
#' colour-synchronous scheme: a node of colour `h` sees the penalty of the
#' states of the other colours, taken before colour `h` updates; this is the
#' exact asynchronous dynamics of the network `W - r (J - B)`, where `B`
#' joins the nodes of one colour, so it converges, but its fixed point
#' depends on the colouring.
#'
#' Both engines sum every row in one fixed order (32 strided partial sums,
#' then a butterfly tree; 256 partial sums for hubs of more than 1024
#' neighbours, which the GPU gives a thread block each), in double
#' precision, so the CPU and the GPU give identical predictions and scores.
#' Classes run concurrently (CPU threads over classes when there are at
#' least as many classes as threads, else over the nodes of a colour; GPU
#' batches of (class, fold) jobs). A network too large for the GPU's memory
#' is kept on the host and streamed to the device in parts (runs of nodes
#' of one colour, through pinned buffers) at every sweep, with the same
#' results; `deviceParts` in the result says how many parts.
#'
#' @param W The network: symmetric, non-negative, zero diagonal. A `Matrix`
#'   `dgCMatrix` or `dsCMatrix` (never densified), a numeric matrix, or an
#'   edge `data.frame` with columns `from`, `to` and `weight` (an edge listed
#'   in both directions is stored once). See also [readNetwork()].
#' @param labels A vector over the nodes, 1 / 0 / `NA` or `TRUE` / `FALSE` /
#'   `NA` (`NA` = unlabelled, to be predicted), or a nodes x classes matrix
#'   of them for many classes in one call. When both `labels` and `W` have
#'   node names, the names must match (the order may differ). With an edge
#'   `data.frame` of named nodes, `labels` must be named by node (or a
#'   matrix with the nodes as row names): an unnamed vector is an error.
#' @param cost COSNet's regularisation parameter, >= 0 (default 0: none).
#' @param normalize `TRUE` uses `D^-1/2 W D^-1/2` (isolated nodes keep zero
#'   rows). Default `FALSE`.
#' @param maxSweeps Maximum number of sweeps of the dynamics (default 1000);
#'   a class that has not converged by then gets a warning and
#'   `converged = FALSE`.
#' @param seed Seed of the colouring priorities (whole number; `NULL` draws
#'   one from R's generator, so `set.seed()` works).
#' @param backend,threads See [resolveBackend()]. With `BPPARAM` and no
#'   `threads`, each worker uses its share of the processors.
#' @param device GPU index, or several distinct ones (`c(0, 1)`) or `"all"`:
#'   the classes (for [cvParCosnet()], the class x fold jobs) are taken in
#'   batches from one queue by the devices, run concurrently by this process
#'   (one or two host threads and a copy of the network per device, one
#'   colouring shared by all); the results are identical to one device's.
#'   See [resolveBackend()].
#' @param BPPARAM `NULL` (default: this process), or a BiocParallel back-end
#'   (`SerialParam()`, `MulticoreParam()`, `SnowParam()`,
#'   `BatchtoolsParam()` for a cluster): the R workers each take a
#'   contiguous block of classes (on the GPU backend, a device each, round
#'   robin over `device`) and the results are combined in class order,
#'   identical to one process. Every worker needs the whole network:
#'   forked workers (`MulticoreParam`) share it, `SnowParam` and batch jobs
#'   get a copy of `W` each (mind the memory). Forked workers run one
#'   thread each and cannot use the GPU: use `SnowParam` for GPU workers.
#' @param verbose Show a progress bar for long runs.
#' @return An object of class `parCosnet`, a list with `scores` (nodes x
#'   classes: the final field of each unlabelled node, for ranking; `NA` for
#'   labelled nodes), `predictions` (nodes x classes, logical, `NA` for
#'   labelled nodes), `labels` (nodes x classes, logical: the known labels,
#'   `NA` for the unlabelled nodes), `classes` (a data.frame with one row per class:
#'   `class`, `alpha`, `c`, `F` (training F-score of the learned line),
#'   `sweeps`, `converged`, `unlabelled`, `predictedPositive`), `colours`
#'   (the colour of each node, from 1) and `nColours`, and the run's
#'   `cost`, `normalize`, `seed`, `backend`, `device`, `devices` (all GPUs
#'   used), `deviceName`, `workers` (R workers), `threads`, `seconds` and
#'   `deviceParts` (0 unless the GPU streamed the network in parts).
#' @seealso [cvParCosnet()], [readNetwork()]
#' @examples
#' set.seed(1)
#' n <- 200
#' W <- Matrix::rsparsematrix(n, n, density = 0.05, symmetric = TRUE,
#'                            rand.x = function(k) runif(k))
#' Matrix::diag(W) <- 0
#' y <- rep(0, n); y[1:20] <- 1; y[sample(n, 40)] <- NA
#' fit <- parCosnet(W, y, seed = 1, backend = "cpu", threads = 1)
#' fit
#' head(summary(fit)$classes)
#' @export
parCosnet <- function(W, labels, cost = 0, normalize = FALSE, maxSweeps = 1000L,
                      seed = NULL, backend = getOption("sysbioGPU.backend", "auto"),
                      threads = getOption("sysbioGPU.threads"),
                      device = getOption("sysbioGPU.device", 0L), BPPARAM = NULL,
                      verbose = interactive()) {
  call <- match.call()
  check_bpparam(BPPARAM)
  normalize <- check_flag(normalize, "normalize")
  verbose <- check_flag(verbose, "verbose")
  cost <- check_cost(cost)
  maxSweeps <- check_whole(maxSweeps, "maxSweeps", min = 1, max = 2^31 - 1)
  by_name <- is.data.frame(W) # an edge list's node order is not the user's
  W <- as_cosnet_network(W, normalize, threads = threads)
  # the nodes x classes matrices ahead: codes, truth, predictions (4 bytes
  # each) and scores (8)
  reserve_heap(20 * cosnet_cells(W, labels), "labels", "the nodes x classes results")
  lab <- as_cosnet_labels(labels, W, by_name = by_name, threads = threads)
  lsum <- cosnet_label_summary(lab, threads)
  npos <- lsum$positives; nneg <- lsum$negatives
  first_bad <- function(bad) colnames(lab)[which(bad)[1L]]
  if (any(bad <- npos + nneg == nrow(lab))) stop_input("class '", first_bad(bad), "' of `labels` has nothing to predict (no NA)")
  if (any(bad <- npos == 0)) stop_input("class '", first_bad(bad), "' of `labels` has no labelled positives")
  if (any(bad <- nneg == 0)) stop_input("class '", first_bad(bad), "' of `labels` has no labelled negatives")
  seed <- resolve_seed(seed)
  if (!is.null(BPPARAM) && is.null(threads)) threads <- bp_threads(BPPARAM)
  b <- resolveBackend(backend, threads, device)
  check_bpparam_gpu(BPPARAM, b)
  r <- alloc_guard(cosnet_run(W, lab, NULL, 0L, cost, maxSweeps, seed, b, BPPARAM, verbose), "labels",
                   bytes = 12 * as.double(nrow(lab)) * ncol(lab), what = "the scores and predictions (nodes x classes)")
  classes <- data.frame(class = colnames(lab), alpha = r$alpha, c = r$c, F = r$fscore,
                        sweeps = r$sweeps, converged = r$converged,
                        unlabelled = lsum$unlabelled,
                        predictedPositive = colSums(r$pred, na.rm = TRUE),
                        stringsAsFactors = FALSE, row.names = NULL)
  if (!all(r$converged)) {
    warning(sprintf("parCosnet: %d class(es) did not converge within %d sweeps; see $classes$converged",
                    sum(!r$converged), as.integer(maxSweeps)), call. = FALSE)
  }
  structure(list(scores = r$scores, predictions = r$pred, classes = classes,
                 colours = r$colour + 1L, nColours = r$nColours, cost = cost,
                 normalize = normalize, seed = seed, backend = b$backend, device = b$device,
                 devices = b$devices, deviceName = b$deviceName, workers = r$workers, threads = b$threads, seconds = r$seconds,
                 deviceParts = r$parts, nodes = nrow(W), edges = length(W@x) / 2, call = call,
                 labels = lsum$truth, engineSettings = engine_settings("parCosnet")),
            class = "parCosnet")
}

# "GPU 0 (name)", "GPUs 0, 1 (name)" or "CPU, 4 thread(s)", and the workers.
cosnet_where <- function(x) {
  devs <- if (is.null(x$devices)) x$device else x$devices
  w <- if (x$backend == "gpu") {
    sprintf("GPU%s %s (%s)", if (length(devs) > 1L) "s" else "", paste(devs, collapse = ", "), x$deviceName)
  } else {
    sprintf("CPU, %d thread(s)", x$threads)
  }
  if (!is.null(x$workers) && x$workers > 1L) w <- sprintf("%s, %d R workers", w, x$workers)
  w
}

#' @export
print.parCosnet <- function(x, ...) {
  cat(sprintf("<parCosnet> %d node(s), %.0f edge(s), %d class(es), %d colour(s)\n",
              x$nodes, x$edges, nrow(x$classes), x$nColours))
  dev <- cosnet_where(x)
  cat(sprintf("  %s, %.3f s, seed %.0f, cost %g%s\n", dev, x$seconds, x$seed, x$cost,
              if (x$normalize) ", normalized" else ""))
  cl <- x$classes
  show <- utils::head(cl, 6L)
  show$alpha <- signif(show$alpha, 4); show$c <- signif(show$c, 4); show$F <- signif(show$F, 3)
  print(show, row.names = FALSE)
  if (nrow(cl) > 6L) cat(sprintf("  ... and %d more class(es)\n", nrow(cl) - 6L))
  invisible(x)
}

#' @export
summary.parCosnet <- function(object, ...) {
  cl <- object$classes
  structure(list(classes = cl, nodes = object$nodes, edges = object$edges,
                 nColours = object$nColours, meanF = mean(cl$F),
                 meanSweeps = mean(cl$sweeps), converged = all(cl$converged),
                 backend = object$backend, seconds = object$seconds),
            class = "summary.parCosnet")
}

#' @export
print.summary.parCosnet <- function(x, ...) {
  cat(sprintf("parCosnet: %d node(s), %.0f edge(s), %d colour(s), %d class(es) on the %s in %.3f s\n",
              x$nodes, x$edges, x$nColours, nrow(x$classes), toupper(x$backend), x$seconds))
  cat(sprintf("  training F: mean %.3f (range %.3f - %.3f); sweeps: mean %.1f; all converged: %s\n",
              x$meanF, min(x$classes$F), max(x$classes$F), x$meanSweeps, x$converged))
  cat(sprintf("  predicted positives: %d of %d unlabelled node-class pairs\n",
              sum(x$classes$predictedPositive), sum(x$classes$unlabelled)))
  invisible(x)
}

# Stratified folds of every class (columns of lab): positives, then
# negatives, shuffled by Philox from the seed (one subsequence each) and
# dealt round robin, the negatives continuing where the positives stopped;
# 0 for unlabelled (cosnet_cv.c); with the dimnames of lab.
cosnet_folds <- function(lab, nfolds, seed, threads) {
  .Call(ffi_cosnet_folds, lab, as.integer(nfolds), as.double(seed), as.integer(threads))
}

# Per class, the mean over its folds of precision, recall, F and average
# precision (tied scores entering together) of the out-of-fold
# predictions: a K x 4 matrix (cosnet_cv.c).
cosnet_cv_metrics <- function(lab, folds, pred, scores, nfolds, threads) {
  m <- .Call(ffi_cosnet_cv_metrics, lab, folds, pred, scores, as.integer(nfolds), as.integer(threads))
  dimnames(m) <- list(NULL, c("precision", "recall", "F", "AUPRC"))
  m
}

#' Cross-validated COSNet predictions
#'
#' Runs [parCosnet()] in `nfolds`-fold cross-validation of every class in
#' one engine call: one colouring of the network serves all folds, and all
#' (class, fold) jobs run concurrently. Folds are stratified per class: the
#' labelled positives, then the negatives, are shuffled from the seed
#' (Philox) and dealt round robin. In fold `f` the nodes of fold `f` lose
#' their labels and are predicted; unlabelled (`NA`) nodes take part in the
#' dynamics of every fold but are never evaluated.
#'
#' @inheritParams parCosnet
#' @param nfolds Number of folds, >= 2 (default 5). Every class needs at
#'   least 2 labelled positives and 2 labelled negatives.
#' @return An object of class `cvParCosnet`: `scores` and `predictions`
#'   (nodes x classes, out of fold; `NA` for unlabelled nodes), `folds`
#'   (nodes x classes, 0 for unlabelled nodes), `labels` (the labels used,
#'   logical), `metrics` (a data.frame, one row per class: `class`,
#'   `positives`, and `precision`, `recall`, `F` and `AUPRC`, each the mean
#'   over the folds of the fold's values; folds without positives are left
#'   out of the recall, F and AUPRC means), `jobs` (one row per class and
#'   fold: `alpha`, `c`, training `F`, `sweeps`, `converged`), `nColours`,
#'   and the run's `seed`, `backend`, `device`, `devices`, `deviceName`,
#'   `workers`, `threads`, `seconds` and `deviceParts`. With several devices
#'   or `BPPARAM`, the folds are drawn once in the calling process and each
#'   worker gets those of its classes, so all evaluate the same folds.
#' @seealso [parCosnet()], [plot.cvParCosnet()]
#' @examples
#' set.seed(2)
#' n <- 300
#' W <- Matrix::rsparsematrix(n, n, density = 0.04, symmetric = TRUE,
#'                            rand.x = function(k) runif(k))
#' Matrix::diag(W) <- 0
#' Y <- cbind(a = rbinom(n, 1, 0.1), b = rbinom(n, 1, 0.2))
#' cv <- cvParCosnet(W, Y, nfolds = 3, seed = 1, backend = "cpu", threads = 1)
#' cv$metrics
#' @export
cvParCosnet <- function(W, labels, nfolds = 5, cost = 0, normalize = FALSE, maxSweeps = 1000L,
                        seed = NULL, backend = getOption("sysbioGPU.backend", "auto"),
                        threads = getOption("sysbioGPU.threads"),
                        device = getOption("sysbioGPU.device", 0L), BPPARAM = NULL,
                        verbose = interactive()) {
  call <- match.call()
  check_bpparam(BPPARAM)
  normalize <- check_flag(normalize, "normalize")
  verbose <- check_flag(verbose, "verbose")
  cost <- check_cost(cost)
  nfolds <- check_whole(nfolds, "nfolds", min = 2, max = 1000)
  maxSweeps <- check_whole(maxSweeps, "maxSweeps", min = 1, max = 2^31 - 1)
  by_name <- is.data.frame(W) # an edge list's node order is not the user's
  W <- as_cosnet_network(W, normalize, threads = threads)
  # the nodes x classes matrices ahead: codes, truth, folds, predictions
  # (4 bytes each) and scores (8)
  reserve_heap(24 * cosnet_cells(W, labels), "labels", "the nodes x classes results")
  lab <- as_cosnet_labels(labels, W, by_name = by_name, threads = threads)
  lsum <- cosnet_label_summary(lab, threads)
  npos <- lsum$positives; nneg <- lsum$negatives
  first_bad <- function(bad) colnames(lab)[which(bad)[1L]]
  if (any(bad <- npos < 2)) stop_input("class '", first_bad(bad), "' of `labels` needs at least 2 labelled positives for cross-validation")
  if (any(bad <- nneg < 2)) stop_input("class '", first_bad(bad), "' of `labels` needs at least 2 labelled negatives for cross-validation")
  if (any(bad <- npos + nneg < nfolds)) stop_input("class '", first_bad(bad), "' of `labels` has fewer labelled nodes than `nfolds`")
  seed <- resolve_seed(seed)
  if (!is.null(BPPARAM) && is.null(threads)) threads <- bp_threads(BPPARAM)
  b <- resolveBackend(backend, threads, device)
  check_bpparam_gpu(BPPARAM, b)
  folds <- cosnet_folds(lab, nfolds, seed, b$threads)
  # the folds are drawn here, once, and handed to the workers with their
  # classes: a worker evaluates the folds of the single process
  r <- alloc_guard(cosnet_run(W, lab, folds, nfolds, cost, maxSweeps, seed, b, BPPARAM, verbose), "labels",
                   bytes = 12 * as.double(nrow(lab)) * ncol(lab), what = "the scores and predictions (nodes x classes)")
  truth <- lsum$truth
  met <- cosnet_cv_metrics(lab, folds, r$pred, r$scores, nfolds, b$threads)
  metrics <- data.frame(class = colnames(lab), positives = npos, met,
                        stringsAsFactors = FALSE, row.names = NULL)
  jobs <- data.frame(class = rep(colnames(lab), each = nfolds), fold = rep(seq_len(nfolds), ncol(lab)),
                     alpha = r$alpha, c = r$c, F = r$fscore, sweeps = r$sweeps,
                     converged = r$converged, stringsAsFactors = FALSE)
  if (!all(r$converged)) {
    warning(sprintf("cvParCosnet: %d job(s) did not converge within %d sweeps; see $jobs$converged",
                    sum(!r$converged), as.integer(maxSweeps)), call. = FALSE)
  }
  structure(list(scores = r$scores, predictions = r$pred, folds = folds, labels = truth,
                 metrics = metrics, jobs = jobs, nfolds = nfolds, nColours = r$nColours,
                 cost = cost, normalize = normalize, seed = seed, backend = b$backend,
                 device = b$device, devices = b$devices, deviceName = b$deviceName,
                 workers = r$workers, threads = b$threads,
                 seconds = r$seconds, deviceParts = r$parts, nodes = nrow(W),
                 edges = length(W@x) / 2, call = call, engineSettings = engine_settings("parCosnet")),
            class = "cvParCosnet")
}

#' @export
print.cvParCosnet <- function(x, ...) {
  cat(sprintf("<cvParCosnet> %d-fold CV, %d node(s), %.0f edge(s), %d class(es), %d colour(s)\n",
              x$nfolds, x$nodes, x$edges, nrow(x$metrics), x$nColours))
  dev <- cosnet_where(x)
  cat(sprintf("  %s, %.3f s, seed %.0f\n", dev, x$seconds, x$seed))
  m <- x$metrics
  cat(sprintf("  mean over classes: precision %.3f, recall %.3f, F %.3f, AUPRC %.3f\n",
              mean(m$precision, na.rm = TRUE), mean(m$recall, na.rm = TRUE),
              mean(m$F, na.rm = TRUE), mean(m$AUPRC, na.rm = TRUE)))
  show <- utils::head(m, 6L)
  show[, 3:6] <- signif(show[, 3:6], 3)
  print(show, row.names = FALSE)
  if (nrow(m) > 6L) cat(sprintf("  ... and %d more class(es)\n", nrow(m) - 6L))
  invisible(x)
}

#' @export
summary.cvParCosnet <- function(object, ...) {
  object$metrics
}

# The colours parCosnet() gives the nodes of W (a network that
# as_cosnet_network() has checked) for `seed` (1-based, as its `colours`),
# coloured on the host on `threads` threads (one: the greedy pass in
# priority order; more: the Jones-Plassmann rounds, the same colours): for
# the tests and the colouring's benchmark (inst/bench/cosnet.R).
cosnet_colours <- function(W, seed, threads = 1L) {
  .Call(ffi_cosnet_colour, W@p, W@i, W@x, as.double(seed), as.integer(threads)) + 1L
}

# A random network for the benchmark (inst/bench/cosnet.R) and the tests:
# Erdos-Renyi G(n, p) with p = degree / (n - 1) (mean degree `degree`),
# U(0,1) weights, built as compressed rows in C by `threads` threads; the
# graph depends on (n, degree, seed) only.  A symmetric dgCMatrix, so at
# most 2^31 - 1 stored entries.
cosnet_random_network <- function(n, degree, seed = 1, threads = NULL) {
  check_whole(n, "n", 2, .Machine$integer.max)
  if (!is.numeric(degree) || length(degree) != 1L || is.na(degree) || degree < 0) {
    stop_input("`degree` must be a single number >= 0")
  }
  th <- resolveBackend("cpu", threads)$threads
  r <- .Call(ffi_cosnet_random_network, as.integer(n), min(1, degree / (n - 1)),
             as.double(seed), as.integer(th))
  W <- methods::new(methods::getClass("dgCMatrix", where = asNamespace("Matrix")))
  W@Dim <- c(as.integer(n), as.integer(n))
  # slots assigned one by one: no copy, and no validity pass over the
  # (possibly hundreds of millions of) entries, which are sorted by
  # construction
  W@p <- r$p
  W@i <- r$i
  W@x <- r$x
  W
}
