# lassieSimulate(): deterministic simulation of mass-action reaction
# networks (LASSIE, Tangherloni et al. 2017), the reactionModel() class it
# runs on, and the result class with its print/plot methods.  Engines:
# src/lassie/ (ffi_lassie_simulate).

#' A mass-action reaction network
#'
#' Builds the model that [lassieSimulate()] runs: `M` reactions over `N`
#' species, reaction `i` being `sum_j a_ij S_j -> sum_j b_ij S_j` with rate
#' constant `k_i`.
#'
#' Rates follow mass action, `v_i = k_i prod_j X_j^a_ij`, and
#' `dX/dt = H v` with `H = (products - reactants)^T`.  A homodimerisation
#' `2A -> ...` therefore has rate `k A^2` and changes `A` by `-2 k A^2` (the
#' convention of LASSIE and of BioNetGen's `.net` files, which include any
#' symmetry factor in the rate constant).  A reaction without reactants is a
#' zero-order source of rate `k`.
#'
#' @param reactants,products Reactions x species matrices of non-negative
#'   whole stoichiometric coefficients, dense or sparse (any `Matrix`).
#' @param rates Rate constants, one per reaction, finite and `>= 0`; when
#'   named, matched to `reactions` by name (without `reactions` or row
#'   names, the names name the reactions).
#' @param initial Initial amounts, one per species, finite and `>= 0`; when
#'   named, matched to `species` by name.
#' @param species Species names (default: the column names, else
#'   `S1`, `S2`, ...).
#' @param fixed Species held at their initial amount (clamped, BioNetGen's
#'   `$` species, LASSIE's feed): a logical vector, species names or
#'   indices; `NULL` for none.
#' @param observables Optional weighted sums of species reported next to
#'   them: an observables x species matrix with row names (BioNetGen's
#'   groups).
#' @param reactions Optional reaction names.
#' @return An object of class `reactionModel`: a list with `reactants`,
#'   `products` (sparse `dgCMatrix`), `rates`, `initial`, `species`,
#'   `reactions`, `fixed` (logical) and `observables` (`NULL` or a
#'   `dgCMatrix`).
#' @seealso [lassieSimulate()], [readBioNetGen()], [readLASSIE()]
#' @examples
#' # A <-> B
#' m <- reactionModel(reactants = rbind(c(1, 0), c(0, 1)),
#'                    products = rbind(c(0, 1), c(1, 0)),
#'                    rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
#' m
#' summary(m)
#' @export
reactionModel <- function(reactants, products, rates, initial, species = NULL,
                          fixed = NULL, observables = NULL, reactions = NULL) {
  A <- as_stoich(reactants, "reactants")
  B <- as_stoich(products, "products")
  if (!identical(dim(A), dim(B))) {
    stop_input("`reactants` (", nrow(A), " x ", ncol(A), ") and `products` (",
               nrow(B), " x ", ncol(B), ") must have the same dimensions (reactions x species)")
  }
  M <- nrow(A); N <- ncol(A)
  if (M < 1L || N < 1L) stop_input("`reactants` must have at least one reaction and one species")
  if (is.null(species)) species <- colnames(reactants)
  if (is.null(species)) species <- colnames(products)
  if (is.null(species)) species <- paste0("S", seq_len(N))
  species <- as.character(species)
  if (length(species) != N || anyNA(species) || anyDuplicated(species)) {
    stop_input("`species` must be ", N, " distinct names (one per column of `reactants`)",
               if (anyDuplicated(species)) paste0(": '", species[anyDuplicated(species)], "' appears twice"))
  }
  if (is.null(reactions)) reactions <- rownames(reactants)
  # named rates without reaction names given elsewhere name the reactions
  rn <- names(rates)
  if (is.null(reactions) && is.numeric(rates) && !is.null(rn) && !anyNA(rn) && all(nzchar(rn))) reactions <- rn
  if (is.null(reactions)) reactions <- paste0("R", seq_len(M))
  reactions <- as.character(reactions)
  if (length(reactions) != M) stop_input("`reactions` must have ", M, " names, one per reaction")
  rates <- check_values(rates, M, "rates", "reaction", reactions)
  initial <- check_values(initial, N, "initial", "species", species)
  fx <- rep(FALSE, N)
  if (!is.null(fixed)) {
    if (is.logical(fixed) && length(fixed) == N && !anyNA(fixed)) fx <- match_by_name(fixed, species, "fixed", "species")
    else if (is.character(fixed)) {
      bad <- setdiff(fixed, species)
      if (length(bad)) stop_input("`fixed` names unknown species: ", paste(bad, collapse = ", "))
      fx[match(fixed, species)] <- TRUE
    } else if (is.numeric(fixed) && all(is.finite(fixed)) && all(fixed == round(fixed)) &&
               all(fixed >= 1 & fixed <= N)) fx[fixed] <- TRUE
    else stop_input("`fixed` must be a logical vector of length ", N, ", species names or indices in 1..", N)
  }
  obs <- NULL
  if (!is.null(observables)) {
    obs <- methods::as(methods::as(Matrix::Matrix(observables, sparse = TRUE), "generalMatrix"), "CsparseMatrix")
    obs <- methods::as(obs, "dMatrix")
    if (ncol(obs) != N || is.null(rownames(obs)) || anyNA(obs@x) || any(!is.finite(obs@x))) {
      stop_input("`observables` must be a matrix with ", N, " columns (one per species), finite weights and row names")
    }
    colnames(obs) <- species
  }
  dimnames(A) <- dimnames(B) <- list(reactions, species)
  names(rates) <- reactions
  names(initial) <- species
  structure(list(reactants = A, products = B, rates = rates, initial = initial,
                 species = species, reactions = reactions, fixed = fx,
                 observables = obs), class = "reactionModel")
}

as_stoich <- function(x, arg) {
  if (!((is.matrix(x) && (is.numeric(x) || is.logical(x))) || methods::is(x, "Matrix"))) {
    stop_input("`", arg, "` must be a numeric matrix (reactions x species), dense or sparse")
  }
  s <- methods::as(methods::as(methods::as(Matrix::Matrix(x, sparse = TRUE), "generalMatrix"),
                               "CsparseMatrix"), "dMatrix")
  v <- s@x
  if (anyNA(v) || any(!is.finite(v))) stop_input("`", arg, "` must not contain NA, NaN or Inf")
  if (any(v < 0)) stop_input("`", arg, "` must not contain negative stoichiometric coefficients")
  if (any(v != round(v))) stop_input("`", arg, "` must contain whole stoichiometric coefficients")
  Matrix::drop0(s)
}

check_values <- function(x, n, arg, what, nms = NULL) {
  if (!is.numeric(x) || is.matrix(x)) stop_input("`", arg, "` must be a numeric vector, one value per ", what)
  if (length(x) != n) stop_input("`", arg, "` must have ", n, " values (one per ", what, "), not ", length(x))
  # named values follow their names (a named vector whose names do not
  # match is an error, never applied by position)
  if (!is.null(nms)) x <- match_by_name(x, nms, arg, what)
  if (anyNA(x) || any(!is.finite(x))) stop_input("`", arg, "` must not contain NA, NaN or Inf")
  if (any(x < 0)) stop_input("`", arg, "` must not be negative (", what, " ", which(x < 0)[1], ")")
  as.double(unname(x))
}

#' @export
print.reactionModel <- function(x, ...) {
  cat(sprintf("<reactionModel> %d species, %d reactions", length(x$species), length(x$reactions)))
  if (any(x$fixed)) cat(sprintf(", %d fixed", sum(x$fixed)))
  if (!is.null(x$observables)) cat(sprintf(", %d observables", nrow(x$observables)))
  cat("\n")
  n <- min(length(x$reactions), 6L)
  for (i in seq_len(n)) cat("  ", reaction_string(x, i), "\n", sep = "")
  if (length(x$reactions) > n) cat("  ... and", length(x$reactions) - n, "more reactions\n")
  invisible(x)
}

reaction_string <- function(x, i) {
  side <- function(S) {
    r <- S[i, ]
    nz <- which(r != 0)
    if (!length(nz)) return("0")
    paste(ifelse(r[nz] == 1, "", paste0(r[nz], " ")), x$species[nz], sep = "", collapse = " + ")
  }
  sprintf("%s: %s -> %s  (k = %s)", x$reactions[i], side(x$reactants), side(x$products),
          format(x$rates[i], digits = 4))
}

#' @export
summary.reactionModel <- function(object, ...) {
  A <- object$reactants
  ord <- Matrix::rowSums(A)
  out <- list(species = length(object$species), reactions = length(object$reactions),
              fixed = object$species[object$fixed],
              observables = if (is.null(object$observables)) character() else rownames(object$observables),
              order = table(factor(ord, levels = sort(unique(ord)))),
              nnzH = length(Matrix::drop0(object$products - object$reactants)@x),
              rates = summary(object$rates), initial = summary(object$initial),
              laws = if (is.null(object$laws)) 0L else sum(object$laws$start >= 0L))
  class(out) <- "summary.reactionModel"
  out
}

#' @export
print.summary.reactionModel <- function(x, ...) {
  cat(sprintf("%s model: %d species, %d reactions, %d nonzeros in H\n",
              if (isTRUE(x$laws > 0L)) "Reaction" else "Mass-action", x$species, x$reactions, x$nnzH))
  if (isTRUE(x$laws > 0L)) cat(sprintf("%d kinetic law(s) that are not mass action\n", x$laws))
  cat("Reactions by order (reactant molecules):\n")
  print(x$order)
  if (length(x$fixed)) cat("Fixed species:", paste(utils::head(x$fixed, 10), collapse = ", "),
                           if (length(x$fixed) > 10) "...", "\n")
  if (length(x$observables)) cat("Observables:", paste(utils::head(x$observables, 10), collapse = ", "),
                                 if (length(x$observables) > 10) "...", "\n")
  cat("Rate constants:\n"); print(x$rates)
  cat("Initial amounts:\n"); print(x$initial)
  invisible(x)
}

# The engine's arrays (0-based): reactants per reaction and H per species,
# with the rows of H of fixed species left empty.
lassie_arrays <- function(model) {
  At <- methods::as(Matrix::t(model$reactants), "CsparseMatrix")
  H <- Matrix::drop0(model$products - model$reactants)
  if (any(model$fixed)) {
    H[, model$fixed] <- 0
    H <- Matrix::drop0(H)
  }
  H <- methods::as(H, "CsparseMatrix")
  arr <- list(r_ptr = as.integer(At@p), r_sp = as.integer(At@i), r_ord = as.integer(At@x),
              h_ptr = as.integer(H@p), h_rx = as.integer(H@i), h_val = as.double(H@x))
  L <- model$laws
  if (is.null(L)) return(arr)
  # reactions with a kinetic law: their entries are the species the law
  # reads (the pattern of the Jacobian), order 1 (unused)
  M <- length(model$reactions)
  rx <- rep.int(seq_len(M), diff(At@p))
  sp <- split(At@i, factor(rx, levels = seq_len(M)))
  ord <- split(as.integer(At@x), factor(rx, levels = seq_len(M)))
  kin <- which(L$start >= 0L)
  sp[kin] <- lapply(L$deps[kin], function(d) as.integer(d) - 1L)
  ord[kin] <- lapply(sp[kin], function(d) rep.int(1L, length(d)))
  arr$r_ptr <- c(0L, cumsum(lengths(sp)))
  arr$r_sp <- as.integer(unlist(sp, use.names = FALSE))
  arr$r_ord <- as.integer(unlist(ord, use.names = FALSE))
  arr$law <- as.integer(L$start); arr$code <- as.integer(L$code); arr$cval <- as.double(L$cval)
  arr
}

check_model <- function(model) {
  if (!inherits(model, "reactionModel")) {
    stop_input("`model` must be a reactionModel (see reactionModel(), readBioNetGen()), not ",
               class(model)[1])
  }
  validate_reaction_model(model) # R/lassie-io.R
}

#' Simulate a mass-action reaction network (LASSIE)
#'
#' Integrates `dX/dt = H v(X)` of a [reactionModel()] with the scheme of
#' LASSIE (Tangherloni et al. 2017): explicit Runge-Kutta steps, and
#' implicit backward differentiation (BDF) steps once the problem turns
#' stiff, on the CPU (OpenMP over simulations) or on a GPU.
#'
#' The explicit steps are Dormand and Prince's 5(4) pair (`"auto"`,
#' `"dopri5"`), or LASSIE's Runge-Kutta-Fehlberg 4(5) (`"rkf45"`).  They
#' accept when `|err_j| <= atol + rtol |x_j|` for every species (LASSIE's
#' own code used an absolute test only) and grow the step by at most 5x.
#' Steps follow the accuracy alone, and the requested `times` in between
#' are interpolated, as LSODA and CVODE do: by the pair's continuous
#' extension of order 4 (Hairer, Norsett and Wanner, II.6) for the explicit
#' steps, by the polynomial through the BDF history (of the step's order)
#' for the implicit ones; the last step lands on the last time.  So 1,000
#' output times cost the steps of 10.  `method = "rkf45"` keeps the paper's
#' scheme: a step lands exactly on every output time.  With `method =
#' "auto"` the solver switches to BDF when the
#' explicit steps' estimate of `h rho(J)` (from the last two stages, in the
#' error test's weighted norm) exceeds 3 on 15 accepted steps, when 6 of the
#' last 16 explicit attempts were rejected, or when the step collapses
#' below `1e-7` of the time span, and back to explicit steps only after 20 implicit
#' steps followed by 10 in a row with `h rho(J) < 1` (`rho` bounded by
#' Gershgorin): a hysteresis that keeps it from flipping.  Implicit steps are
#' variable-coefficient BDF of orders 1 to 5 (order 1 after a switch, then
#' the order whose estimated local error allows the largest step, checked
#' every `q + 1` steps; the step is kept unless it can grow by half), solved
#' by modified Newton iterations that reuse the analytic Jacobian `J = H D`
#' (sparse, from the reactant lists) and the factorisation of `I - gamma J`
#' while they converge.  The linear solver is a sparse LU in a
#' minimum-degree order whose pattern (fill included) is computed once per
#' run, with pivots on the diagonal and a dense LU with partial pivoting as
#' fallback when a pivot lost 10 digits to cancellation; the ordering keeps an `N x N` bitset,
#' which limits implicit steps to 16,384 species.  The CPU eliminates the
#' rows eight at a time, in vector operations (the same factors, bit for
#' bit, as the GPU's row-by-row code), so that the near-dense factors of
#' large rule-based networks cost little more than their updates.
#'
#' A model read by [readSBML()] may have SBML events: the engine watches
#' the triggers after every accepted step (at its end and at 15 points
#' inside it, so that a trigger true for less than a step is
#' seen when it lasts a sixteenth of one), locates a change by bisection on
#' the step's interpolant down to adjacent doubles of time, and stops there;
#' the events are then applied (SBML Level 3's semantics: a trigger's
#' change from false to true, `initialValue` at the start, delays as
#' scheduled stops, values at the trigger's time or at the execution's,
#' persistence, priorities re-evaluated at each execution, triggers
#' re-evaluated after each) and the integration restarts from the new
#' state.  An output time at the time found for an event shows the state
#' after the events.  A trigger on time reads the model's clock, a state
#' integrated with the others, so `time >= 2` may fire a few units in the
#' last place after 2, and an output at 2 itself then shows the state just
#' before the event.  Simultaneous events whose order SBML leaves open (equal
#' priorities, or none) run in the model's order where the order cannot
#' matter, and are refused (class `sysbioGPU_sbml_unsupported`) where it
#' can.  Both engines run events, with the same watch: a batch runs in
#' rounds, each one call of the engine on all its threads or devices, in
#' which every simulation runs from its last stop to its next one (its
#' events' times are its own).  `method = "rkf45"` (no interpolant) and
#' `BPPARAM` are input errors with events.
#'
#' A model read by [readSBML()] may have kinetic laws that are not mass
#' action (Michaelis-Menten, Hill, ...): their rates are evaluated from
#' the laws' compiled programs and the Jacobian's columns for the species
#' a law reads are finite differences (central, a step of `eps^(1/3)` of
#' the species' value).  Both engines run them, explicit and implicit
#' steps alike, with the same code; the GPU's results agree with the CPU's
#' to rounding, not to the bit, where a law calls a transcendental
#' function (`exp`, `log`, `pow`, ...: the device's math library is not
#' the host's).  Mass-action models run the mass-action code alone,
#' unchanged.
#'
#' A simulation that fails (`maxSteps` exhausted, step size underflow,
#' Newton iterations that do not converge, a model too large for implicit
#' steps) is an error when it is the only one; inside a batch it keeps its
#' rows up to where it stopped (the rest `NaN`), its `status` and message,
#' and the others run on: the batch warns (class
#' `sysbioGPU_warning_lassie`) and names them (see [lassieBatch]).
#'
#' On the GPU (`backend = "gpu"`) the explicit steps of every simulation of
#' a batch run on the device, one thread per reaction and simulation for the
#' rates, one per species for `H v`, one block per simulation for the error
#' test and step control, with the CPU engine's arithmetic (the same
#' per-species formulas, no fused multiply-adds, the stiffness estimate
#' summed in the same order), so the explicit steps and the switches to
#' implicit steps agree bit for bit.  A simulation that turns stiff
#' switches to the implicit steps on the device, and back when calm, each
#' simulation on its own: the pattern of `I - gamma J` is the model's, so
#' its ordering and the LU's fill are computed once on the host, and each
#' simulation factors its own values with the CPU engine's sparse LU code
#' (a warp per simulation for models of 32 species or more, a thread
#' below), so the results and `stats` are the CPU engine's bit for bit.
#' Kinetic laws run on the device with the CPU's code too (a thread per
#' reaction evaluates its law; the Jacobian's columns by the same finite
#' differences), but where a law calls `exp`, `log`, `pow` or another
#' transcendental function the device's math library may round
#' differently from the host's in the last bit, so the results agree to
#' rounding (within 1e-9 relative on the SBML Test Suite's cases:
#' `tools/sbml-suite.R` with `SBML_SUITE_GPU=1`), not always bit for bit.
#' A simulation's implicit steps take a device warp far longer than a
#' host core, while the device runs a thousand simulations in little more
#' than the time of one, so they run on the device only for batches large
#' enough: 8 simulations or more per host thread (`threads`) for models
#' of 32 species or more, 32 for smaller ones (one to eight threads a
#' simulation, more as fewer are left);
#' with several GPUs the whole batch counts.
#' Smaller batches take the host's implicit steps on `threads` threads
#' (the same code, so the same results and `stats`).  The crossover,
#' device against host on three models of 354 to 504 species and a small
#' one, is measured by `inst/bench/lassie-bdf.R`: see BENCHMARKS.md,
#' lassieSimulate.  The host also keeps the
#' implicit steps of models of more than 1,024 species (there the device
#' is slower), of a simulation whose sparse LU needs pivoting (the dense
#' fallback is on the host only; there the results agree within the
#' tolerance, not bit for bit), and of a batch whose implicit workspaces
#' would take more than half the device's free memory.
#'
#' A batch can be shared out: with several GPUs (`device = c(0, 1)` or
#' `"all"`) each device takes a contiguous block of the simulations, driven
#' by a host thread of its own (implicit steps included); with `BPPARAM` each R worker takes a contiguous block (on the
#' CPU with `threads` threads, by default the processors shared out among
#' the workers, or on a GPU of `device`, round robin).  Every simulation's
#' arithmetic is independent of the others, so the results and `stats`
#' are those of a single process on a single device, bit for bit.  A
#' single simulation runs on the first device of `device`.  On several
#' GPUs ask a large batch for `output = "array"`: R makes the list of
#' matrices on one thread, a matrix at a time, which more devices do not
#' shorten: Haugh2b's 20,000 sets took 0.22 s on four H200s and 0.20 s on
#' one as matrices, 0.10 s and 0.16 s as an array (BENCHMARKS.md, "Several
#' GPUs and R workers").
#'
#' @param model A [reactionModel()] (or from [readBioNetGen()],
#'   [readLASSIE()]).
#' @param times Output times, at least two, strictly increasing; the first
#'   is the start, where the state is `initial`.
#' @param rtol,atol Relative (>= 0) and absolute (> 0) tolerances of the
#'   error test.
#' @param method `"auto"` (Dormand-Prince 5(4), BDF on stiffness),
#'   `"dopri5"` (Dormand-Prince 5(4) only), `"rkf45"` (RKF45 only, stepping
#'   onto every output time, as LASSIE) or `"bdf"` (implicit only).
#' @param rates,initial `NULL` (the model's), a vector replacing the
#'   model's, or a matrix with one row per simulation (rate constants x
#'   reactions, initial amounts x species) to run a batch in one call.
#'   Named values (a matrix's column names) follow their names, the
#'   model's reactions and species, in any order; names that do not match
#'   are an error.  For a model read by [readSBML()], a reaction's rate
#'   constant multiplies its kinetic law, and a rate rule is a reaction
#'   (`<variable>_rateRule`) whose constant multiplies the rule.
#' @param maxSteps Most steps (accepted or not) per simulation; exhausting
#'   them is an error that names the time reached (in a batch: that
#'   simulation's status, see Details).
#' @param backend,threads,device See [resolveBackend()].  Several GPUs
#'   (`device = c(0, 1)` or `"all"`, any number) share a batch: the
#'   parameter sets (rows of `rates`/`initial`) are cut into contiguous
#'   blocks as even as can be, one per device in the order given, each
#'   driven by a host thread of its own, implicit steps included (those
#'   of small batches and of models above 1,024 species run on the host's
#'   `threads`, see Details).
#'   The results are those of one GPU, bit for bit.  A single simulation
#'   runs on the first device.
#' @param verbose Show a progress bar for long runs (not with `BPPARAM`).
#' @param BPPARAM A BiocParallel back-end to share a batch among R
#'   workers, each a contiguous block of the parameter sets (worker `w` of
#'   `n` the `w`-th block), the results merged in order: those of one
#'   process, bit for bit.  On the CPU each worker runs `threads` threads
#'   (by default the processors shared out among the workers), except that
#'   a forked worker (`MulticoreParam`) runs on one thread, since OpenMP
#'   cannot be used again in a forked child.  On the GPU each worker takes a
#'   device of `device` round robin (several each when there are more
#'   devices than workers); GPU workers must be separate processes
#'   (`SnowParam`, or `BatchtoolsParam` on a cluster, one job per node with
#'   its GPUs), as CUDA cannot run in a forked child, and `MulticoreParam`
#'   with `backend = "gpu"` is an error.  Default `NULL`: this process
#'   alone.
#' @param output `"matrices"` (default): deSolve-compatible matrices, one
#'   per simulation (a [lassieBatch] for a batch); `"array"`: all
#'   simulations in one array (see Value), for parameter scans: one R
#'   object instead of a matrix with its attributes per simulation (20,000
#'   Haugh2b sets: 42 R objects instead of 520,000), indexed by time, column and
#'   simulation.  The numbers and counters are those of the matrices, bit
#'   for bit; the time R takes is about the same either way (see
#'   BENCHMARKS.md, lassieSimulate).
#' @return For one simulation, a matrix of class `lassieSimulation` with a
#'   `time` column, one column per species and one per observable of the
#'   model, like deSolve's `ode()`; attributes `stats` (steps, rejected
#'   steps, stiffness switches, implicit steps, Newton iterations,
#'   factorisations, Jacobian evaluations, right-hand-side evaluations),
#'   `method`, `rtol`, `atol`, `backend`, `device`, `elapsed` (seconds).  For
#'   a batch, a [lassieBatch]: a list of such matrices, one per row of
#'   `rates`/`initial`, with a `status` per simulation.  With `output =
#'   "array"`, one array of class `lassieArray`, times x (species,
#'   observables) x simulations (a single simulation too), without the
#'   time column: attributes `times`, `stats` (counters x simulations),
#'   `status` and `messages` per simulation (a failure warns as in a
#'   batch), and the run's `method`, `rtol`, `atol`, `backend`, `device`,
#'   `elapsed`, `nSpecies`.  `x[, "A", ]` is then species A over time
#'   (rows) and simulations (columns).  A run made with an engine setting
#'   of [sysbioGPU-options] has it in an attribute `engineSettings` (each
#'   matrix's, the batch's or the array's), which [runInfo()] shows.
#' @seealso [reactionModel()], [readBioNetGen()], [plot.lassieSimulation()]
#' @references Tangherloni A, Nobile MS, Besozzi D, Mauri G, Cazzaniga P
#'   (2017). LASSIE: simulating large-scale models of biochemical systems on
#'   GPUs. BMC Bioinformatics 18:246.
#' @examples
#' # 2A -> 0 against its closed form A0 / (1 + 2 k A0 t)
#' m <- reactionModel(matrix(2), matrix(0), rates = 0.5, initial = 1, species = "A")
#' out <- lassieSimulate(m, times = c(0, 1, 2, 5), backend = "cpu")
#' cbind(out[, "A"], 1 / (1 + 2 * 0.5 * out[, "time"]))
#' attr(out, "stats")
#'
#' # Robertson's stiff problem
#' rob <- reactionModel(
#'   reactants = rbind(c(1, 0, 0), c(0, 2, 0), c(0, 1, 1)),
#'   products  = rbind(c(0, 1, 0), c(0, 1, 1), c(1, 0, 1)),
#'   rates = c(0.04, 3e7, 1e4), initial = c(1, 0, 0), species = c("y1", "y2", "y3"))
#' lassieSimulate(rob, times = c(0, 0.4, 4, 40), backend = "cpu")
#' @export
lassieSimulate <- function(model, times, rtol = 1e-6, atol = 1e-12,
                           method = c("auto", "dopri5", "rkf45", "bdf"), rates = NULL,
                           initial = NULL, maxSteps = 1e6,
                           backend = getOption("sysbioGPU.backend", "auto"),
                           threads = getOption("sysbioGPU.threads"),
                           device = getOption("sysbioGPU.device", 0L),
                           verbose = interactive(), BPPARAM = NULL,
                           output = c("matrices", "array")) {
  check_model(model)
  M <- length(model$reactions); N <- length(model$species)
  alloc_guard({
    if (!is.numeric(times) || length(times) < 2L || anyNA(times) || any(!is.finite(times))) {
      stop_input("`times` must be at least two finite numbers")
    }
    if (any(diff(times) <= 0)) stop_input("`times` must be strictly increasing")
  }, "times", bytes = 8 * length(times), what = "checking `times`")
  chk_tol <- function(x, arg, lo) {
    if (!is.numeric(x) || length(x) != 1L || is.na(x) || !is.finite(x) || x < lo) {
      stop_input("`", arg, "` must be a single finite number >= ", lo, ", not ", arg_label(x), call = sys.call(-1))
    }
    as.double(x)
  }
  rtol <- chk_tol(rtol, "rtol", 0)
  atol <- chk_tol(atol, "atol", 0)
  # with atol = 0 a species that sits at exactly 0 has a zero weight, and its
  # error 0 / 0 would fail every step
  if (atol == 0) {
    stop_input("`atol` must be > 0 (a species at exactly 0 would have no error weight); ",
               "for a purely relative test give a tiny one, e.g. 1e-300")
  }
  methods <- c("auto", "rkf45", "bdf", "dopri5")   # the engine's codes 0..3
  if (is.character(method) && identical(method, c("auto", "dopri5", "rkf45", "bdf"))) method <- "auto"
  method <- check_choice(method, methods)
  maxSteps <- check_whole(maxSteps, "maxSteps", 1, 2^53)
  if (identical(output, c("matrices", "array"))) output <- "matrices"
  output <- check_choice(output, c("matrices", "array"))
  as_array <- output == "array"
  check_flag(verbose)
  check_bpparam(BPPARAM)
  rt <- batch_values(rates, model$rates, M, "rates", "reaction", model$reactions)
  # (readSBML(fluxes =): the flux columns are the laws at the model's own
  # parameters, which other rates would leave behind)
  if (length(model$fluxes) && !is.null(rates) && !all(matrix(rt$values, nrow = M) == model$rates)) {
    stop_input("`rates` other than the model's cannot be given to a model read with `fluxes` ",
               "(its flux columns are the kinetic laws at the model's own parameters): ",
               "read it again without `fluxes`")
  }
  it <- batch_values(initial, model$initial, N, "initial", "species", model$species)
  if (rt$n > 1L && it$n > 1L && rt$n != it$n) {
    stop_input("`rates` (", rt$n, " rows) and `initial` (", it$n, " rows) must have as many rows, or one of them one row")
  }
  n_sims <- max(rt$n, it$n)
  # a model's clock (readSBML(): its math reads time) is time itself: it
  # starts at the first output time, its reaction runs at rate 1, and the
  # output's time column shows it
  ck <- model$clock
  if (!is.null(ck)) {
    jr <- match(ck$reaction, model$reactions)
    if (any(rt$values[seq.int(jr, by = M, length.out = rt$n)] != 1)) {
      stop_input("`rates` of reaction ", ck$reaction, " must be 1: it is the model's clock (time)")
    }
    # (the engines' states start at values >= 0)
    if (times[1L] < 0) stop_input("`times` must start at 0 or later: the model's math reads time (its clock starts at times[1])")
    js <- match(ck$species, model$species)
    it$values[seq.int(js, by = N, length.out = it$n)] <- times[1L]
  }
  if (!is.null(BPPARAM) && is.null(threads)) threads <- bp_threads(BPPARAM)
  events <- !is.null(model$events)
  if (events) {
    if (method == "rkf45") {
      stop_input("`method` = \"rkf45\" cannot run a model with events (its steps have no interpolant ",
                 "to locate a trigger's time): use another method")
    }
    if (!is.null(BPPARAM)) stop_input("`BPPARAM` cannot share a model with events: its simulations run in turn")
  }
  b <- resolveBackend(backend, threads, device)
  a <- backend_args(b, multi = TRUE)
  check_bpparam_gpu(BPPARAM, b)
  job <- list(arr = lassie_arrays(model), times = as.double(times), rtol = rtol, atol = atol,
              method = match(method, methods) - 1L, maxSteps = maxSteps,
              gpu = a$gpu, threads = a$threads, total = as.integer(n_sims), array = as_array,
              # the GPU engine's settings (R/options.R), read here for the workers too
              settings = lassie_settings(),
              # the observables' weights, species x observables, added by the glue
              obs = if (!is.null(model$observables)) as.matrix(Matrix::t(model$observables)))
  cn <- list(NULL, c("time", model$species, rownames(model$observables)))
  common <- list(method = method, rtol = rtol,
                 atol = atol, backend = b$backend,
                 device = if (identical(b$backend, "gpu")) b$deviceName else NA_character_,
                 elapsed = NA_real_, nSpecies = N)
  # the engine settings that are set (?`sysbioGPU-options`), for runInfo()
  common$engineSettings <- engine_settings("lassieSimulate")
  # the glue sets the matrices' attributes (and elapsed, its own seconds);
  # workers' blocks get theirs in new_lassie_output()
  if (is.null(BPPARAM) && !as_array) job$output <- lassie_output_attrs(cn, common)
  t0 <- proc.time()[["elapsed"]]
  # the output: times x columns x simulations.  Assigned inside the guard,
  # which returns NULL: a value returned through it stays referenced by its
  # promise too, so setting the array's attributes below would copy the
  # whole array (2.2 GB for 320,000 Haugh2b sets, 1.5 s)
  res <- NULL
  alloc_guard({
    res <- if (events) lassie_events_run(job, model, rt, it, a$devices) # R/lassie-events.R
           else if (is.null(BPPARAM)) lassie_engine(job, rt$values, it$values, 0L, a$devices, verbose)
           else lassie_workers(job, rt, it, M, N, a$devices, BPPARAM)
    NULL
  }, "times", bytes = 8 * length(times) * length(cn[[2L]]) * n_sims,
  what = "the output (`times` x columns x simulations)")
  common$elapsed <- if (is.null(res$elapsed)) proc.time()[["elapsed"]] - t0 else res$elapsed
  if (as_array) {
    # the array is set its attributes here, where nothing else refers to
    # it (R would copy it otherwise: 100 MB for 20,000 Haugh2b sets)
    x <- res$sims
    res$sims <- NULL
    attributes(x) <- lassie_array_attributes(length(times), cn[[2L]][-1L], n_sims, times, res, common)
    lassie_warn_failed(res$status, res$messages)
    return(lassie_sbml_output(x, model))
  }
  single <- n_sims == 1L && !rt$batch && !it$batch
  # one simulation that failed is an error; in a batch, a status per
  # simulation and a warning (R/lassie-output.R)
  if (single && res$status[[1L]] != 0L) lassie_stop(res$status[[1L]], res$messages[[1L]])
  # R/lassie-output.R: deSolve-compatible matrices, a lassieBatch for a batch
  out <- new_lassie_output(res, cn, common, single = single, threads = a$threads)
  lassie_sbml_output(out, model)
}

# A simulation's failure (SBG_LASSIE_FAIL_*: 1 maxSteps, 2 step size
# underflow, 3 Newton, 4 too large for implicit steps) as the engine's
# classed error.
lassie_stop <- function(status, message) {
  stop_engine(if (status == 4L) 1L else 8L, message)
}

# One engine call: the simulations base + 1 .. of the whole batch (job$total)
# whose rates and initial amounts are given (columns, or one shared), on
# the CPU or on `devices` (several share the batch).
lassie_engine <- function(job, rates, initial, base, devices, verbose) {
  arr <- job$arr
  data <- list(model = job$arr, rates = rates, initial = initial, times = job$times, obs = job$obs)
  params <- list(rtol = job$rtol, atol = job$atol, method = job$method, maxSteps = job$maxSteps,
                 hInit = 0, part = as.integer(c(base, job$total)), array = isTRUE(job$array),
                 output = job$output)
  .Call(ffi_lassie_simulate, data, params, c(run_list(job, verbose, devices = devices), job$settings))
}

# BPPARAM: each worker a contiguous block of the simulations (on the GPU a
# device of `devices` round robin, or several when there are more devices
# than workers), the blocks concatenated in order.  A worker's error comes
# back as the condition it raised, numbered in the whole batch.
lassie_workers <- function(job, rt, it, M, N, devices, BPPARAM) {
  n <- job$total
  sp <- bp_split(BPPARAM, n, devices, several = TRUE)
  cuts <- sp$cuts
  block <- function(x, len, w) if (x$n > 1L) x$values[(cuts[[w]] * len + 1):(cuts[[w + 1L]] * len)] else x$values
  shares <- lapply(seq_len(sp$n), function(w) {
    list(rates = block(rt, M, w), initial = block(it, N, w), base = as.integer(cuts[[w]]),
         devices = sp$devices[[w]])
  })
  parts <- bp_map(BPPARAM, lassie_worker, shares, MoreArgs = list(job = job))
  for (p in parts) if (inherits(p, "condition")) stop(p)
  # output = "array": the blocks are consecutive simulations, so their
  # arrays (times x columns x block) are concatenated as vectors
  list(sims = if (isTRUE(job$array)) unlist(lapply(parts, `[[`, "sims"))
              else unlist(lapply(parts, `[[`, "sims"), recursive = FALSE),
       stats = do.call(cbind, lapply(parts, `[[`, "stats")),
       status = unlist(lapply(parts, `[[`, "status")), messages = unlist(lapply(parts, `[[`, "messages")))
}

# A worker's share.  A function of the namespace, so that a worker gets the
# namespace (loaded on its side) and not a closure's data.
lassie_worker <- function(share, job) {
  tryCatch(lassie_engine(job, share$rates, share$initial, share$base, share$devices, FALSE),
           error = function(e) e)
}

# NULL -> the model's; a vector -> one simulation; a matrix -> one row per
# simulation.  Returns the values column-major (one column per simulation).
batch_values <- function(x, default, n, arg, what, nms = NULL) {
  if (is.null(x)) return(list(values = default, n = 1L, batch = FALSE))
  if (is.matrix(x) || is.data.frame(x)) {
    x <- as.matrix(x)
    if (!is.numeric(x)) {
      stop_input("`", arg, "` must be a numeric matrix (one row per simulation), not a ", typeof(x), " matrix")
    }
    if (ncol(x) != n) stop_input("`", arg, "` must have ", n, " columns (one per ", what, "), not ", ncol(x))
    # named columns follow their names, as a named vector does
    if (!is.null(nms) && !is.null(colnames(x))) {
      x <- x[, match_by_name(stats::setNames(seq_len(n), colnames(x)), nms, arg, what), drop = FALSE]
    }
    if (nrow(x) < 1L) stop_input("`", arg, "` must have at least one row")
    storage.mode(x) <- "double"
    v <- .Call(ffi_lassie_batch_values, x, threads_available())
    if (v[[2L]] > 0) {
      stop_input("`", arg, "` must ", if (v[[3L]]) "not be negative" else "not contain NA, NaN or Inf")
    }
    return(list(values = v[[1L]], n = nrow(x), batch = TRUE))
  }
  list(values = check_values(x, n, arg, what, nms), n = 1L, batch = FALSE)
}

#' @export
print.lassieSimulation <- function(x, ...) {
  st <- attr(x, "stats")
  cat(sprintf("<lassieSimulation> %d times x %d columns; %s on %s; %g steps (%g implicit), %g rejected, %g switches\n",
              nrow(x), ncol(x) - 1L, attr(x, "method"), attr(x, "backend"),
              st[["steps"]], st[["implicitSteps"]], st[["rejected"]], st[["switches"]]))
  y <- x
  attributes(y) <- list(dim = dim(x), dimnames = dimnames(x))
  print(y, ...)
  invisible(x)
}

# Internal helpers for tests and benchmarks: the right-hand side and the
# sparse analytic Jacobian of a model at state x.
lassie_rhs <- function(model, x, rates = model$rates) {
  arr <- lassie_arrays(model)
  .Call(ffi_lassie_rhs, arr, as.double(rates), as.double(x))
}

# z = (I - gamma J(x))^-1 b by the implicit steps' sparse LU (tests), the
# factors' values as its attribute "factors"; NULL
# when a pivot fails (the steps then take the dense LU); by_passes: the
# device's factorisation and its substitution by warp passes, emulated on
# the CPU.  Several gamma: each factorised in turn with the same scratch,
# z from the last.
lassie_lu_solve <- function(model, x, gamma, b, rates = model$rates, by_passes = FALSE) {
  .Call(ffi_lassie_lu_solve, lassie_arrays(model), as.double(rates), as.double(x), as.double(gamma),
        as.double(b), isTRUE(by_passes))
}

# whether backend = "gpu" takes the implicit steps of `sims` simulations of
# a model of `species` on the device rather than on `threads` host threads
# (tests)
lassie_device_bdf_pays <- function(species, sims, threads) {
  .Call(ffi_lassie_device_bdf_pays, as.integer(species), as.integer(sims), as.integer(threads))
}

lassie_jacobian <- function(model, x, rates = model$rates) {
  arr <- lassie_arrays(model)
  tr <- .Call(ffi_lassie_jacobian, arr, as.double(rates), as.double(x))
  N <- length(model$species)
  Matrix::sparseMatrix(i = tr[[1]], j = tr[[2]], x = tr[[3]], dims = c(N, N))
}
