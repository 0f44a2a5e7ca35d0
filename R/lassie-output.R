# Results of lassieSimulate().  One simulation is deSolve's output: a
# matrix of class c("lassieSimulation", "deSolve", "matrix") with the
# attributes deSolve's methods read (istate, rstate, type, lengthvar), so
# diagnostics(), plot(out, out2, obs =), subset() and summary() work on it
# as on ode()'s.  A batch is a "lassieBatch": a list of those with a status
# per simulation, plot (overlay or quantile band), as.data.frame (long)
# and run information.

lassie_stat_names <- c("steps", "rejected", "switches", "implicitSteps", "newtonIterations",
                       "factorisations", "jacobians", "rhsEvaluations")

# The attributes all simulations of a call share, for the C code that sets
# each matrix's (src/lassie/lassie_output.c): cn the dimnames, common:
# method, rtol, atol, backend, device, elapsed, nSpecies.  Each matrix
# gets, in this order, dim, dimnames, class, stats (named counters),
# istate (deSolve's 21 integers, as lsoda's: 2 or -1, the counters that
# have a counterpart, capped at .Machine$integer.max, NA elsewhere),
# rstate (NA but the time reached, NA on failure), type, lengthvar,
# status, message, then `common`.
lassie_output_attrs <- function(cn, common) {
  N <- common$nSpecies
  nobs <- length(cn[[2L]]) - 1L - N
  lv <- c(N, rep.int(1L, nobs))
  names(lv) <- c("", utils::tail(cn[[2L]], nobs))
  list(dimnames = cn, class = c("lassieSimulation", "deSolve", "matrix", "array"), type = "lassie",
       lengthvar = lv, common = common, statNames = lassie_stat_names)
}

# Builds the result from the engine's output res: list(matrices (times x
# columns), counters x simulations, optionally status = per simulation (0
# = ok), messages = per simulation, elapsed); cn: the dimnames, common:
# attributes shared by all (method, rtol, atol, backend, device, elapsed,
# nSpecies), single: return one matrix rather than a batch, threads: the
# CPU threads of the run (for the batch's info).  When the glue
# was given the attributes (res$elapsed set) the matrices have them
# already; otherwise (workers' blocks) C sets them on copies.
new_lassie_output <- function(res, cn, common, single, threads = NA_integer_) {
  sims <- res[[1L]]
  n <- length(sims)
  status <- if (is.null(res$status)) integer(n) else as.integer(res$status)
  messages <- if (is.null(res$messages)) character(n) else as.character(res$messages)
  if (is.null(res$elapsed)) {
    sims <- .Call(ffi_lassie_output, sims, res[[2L]], status, messages, lassie_output_attrs(cn, common))
  }
  bad <- lassie_warn_failed(status, messages)
  if (single) return(sims[[1L]])
  info <- data.frame(method = "lassieSimulate", backend = common$backend,
                     deviceName = common$device, threads = as.integer(threads),
                     simulations = n, failed = length(bad),
                     seconds = common$elapsed,
                     version = as.character(utils::packageVersion("sysbioGPU")),
                     stringsAsFactors = FALSE)
  structure(sims, class = "lassieBatch", status = status, messages = messages, info = info,
            engineSettings = common$engineSettings)
}

# The output of lassieSimulate() (a matrix, a lassieBatch or a
# lassieArray) for a model read by readSBML(): the variables of its
# assignment rules that are no linear observables (`derived`) evaluated at
# each output time from the species and added after the observables, and
# its clock, whose values are the time column's, left out; attributes kept.
# Other models' output is returned as it is.
lassie_sbml_output <- function(x, model) {
  dv <- model$derived; ck <- model$clock
  if (is.null(dv) && is.null(ck)) return(x)
  N <- length(model$species)
  drop <- if (is.null(ck)) integer() else match(ck$species, model$species)
  # one simulation's times x columns; `off` columns (time) before the
  # species.  The rules read the output times themselves where they read
  # the clock, not its integrated values, which can be a rounding short
  # of them (`piecewise(a, t < 1, b)` at t = 1)
  redo <- function(y, off, times) {
    if (!is.null(dv)) {
      x <- y[, off + seq_len(N), drop = FALSE]
      if (length(drop)) x[, drop] <- times
      v <- .Call(ffi_lassie_eval_programs, dv$laws, x)   # states x rules
      colnames(v) <- dv$variables
      y <- cbind(y, v)
    }
    if (length(drop)) y <- y[, -(off + drop), drop = FALSE]
    y
  }
  fix <- function(y, off) {
    a <- attributes(y)
    z <- unclass(y)
    attributes(z) <- list(dim = a$dim, dimnames = a$dimnames)
    if (length(a$dim) == 3L) {
      nt <- a$dim[1L]
      slices <- lapply(seq_len(a$dim[3L]), function(s) {
        redo(matrix(z[, , s], nt, dimnames = list(NULL, a$dimnames[[2L]])), off, a$times)
      })
      cols <- colnames(slices[[1L]])
      z <- array(unlist(slices, use.names = FALSE), c(nt, length(cols), a$dim[3L]), list(NULL, cols, NULL))
    } else z <- redo(z, off, z[, 1L])
    a$dim <- dim(z); a$dimnames <- if (length(a$dim) == 3L) dimnames(z) else list(NULL, colnames(z))
    if (!is.null(a$lengthvar)) {
      a$lengthvar[[1L]] <- a$lengthvar[[1L]] - length(drop)
      if (!is.null(dv)) a$lengthvar <- c(a$lengthvar, stats::setNames(rep.int(1L, length(dv$variables)), dv$variables))
    }
    if (!is.null(a$nSpecies)) a$nSpecies <- a$nSpecies - length(drop)
    attributes(z) <- a
    z
  }
  if (inherits(x, "lassieArray")) return(fix(x, 0L))
  if (!inherits(x, "lassieBatch")) return(fix(x, 1L))
  a <- attributes(x)
  x <- lapply(unclass(x), fix, off = 1L)
  attributes(x) <- a
  x
}

# A batch's failures (status != 0) as one warning naming the first three;
# returns their indices.
lassie_warn_failed <- function(status, messages) {
  bad <- which(status != 0L)
  if (length(bad)) {
    warning(structure(class = c("sysbioGPU_warning_lassie", "warning", "condition"), list(
      message = paste0(length(bad), " of ", length(status), " simulation(s) failed (partial results, ",
                       "status != 0): ", paste0("simulation ", utils::head(bad, 3), ": ",
                                                utils::head(messages[bad], 3), collapse = "; "),
                       if (length(bad) > 3L) "; ..."),
      call = NULL)))
  }
  bad
}

# The attributes of output = "array" (nt times x the columns cols x n
# simulations, from the engine's result res): dim, dimnames, class, times,
# stats (counters x simulations), status, messages, then `common` (method,
# rtol, atol, backend, device, elapsed, nSpecies), as a batch's matrices
# have them.
lassie_array_attributes <- function(nt, cols, n, times, res, common) {
  stats <- matrix(as.double(res$stats), length(lassie_stat_names), n,
                  dimnames = list(lassie_stat_names, NULL))
  c(list(dim = c(as.integer(nt), length(cols), as.integer(n)), dimnames = list(NULL, cols, NULL),
         class = c("lassieArray", "array"), times = as.double(times), stats = stats,
         status = as.integer(res$status), messages = as.character(res$messages)),
    common)
}

#' Results of simulations: batches, arrays, summaries and long tables
#'
#' One simulation of [lassieSimulate()] is a deSolve-compatible matrix of
#' class `lassieSimulation` (see [plot.lassieSimulation()]).  A batch
#' (several rows of `rates` or `initial`) is a list of class `lassieBatch`,
#' one such matrix per parameter set, with attributes `status` (0 when the
#' simulation succeeded; 1 `maxSteps` exhausted, 2 step size underflow, 3
#' Newton iterations failed, 4 the model is too large for implicit steps:
#' its rows from there on are `NaN`), `messages` and `info` (a one-row
#' data.frame: backend, device name, CPU threads, number of simulations
#' and failures, seconds, package version, which [runInfo()] reads).  With `output = "array"` the batch is one
#' array of class `lassieArray` (times x columns x simulations).
#'
#' All three forms convert to the same long table (one row per
#' simulation, time and variable: columns `simulation`, `time`,
#' `variable`, `value`, `status`), the shape `ggplot2` and `aggregate()`
#' take: `as.data.frame()` of a batch or an array, and
#' `as.data.frame(x, format = "long")` of a single simulation (simulation
#' 1).  A single simulation's default, `format = "wide"`, is its matrix as
#' a data.frame (`time` and one column per variable), as for deSolve's
#' output, whose `subset()` reads it.
#'
#' `summary()` of one simulation has deSolve's statistics (`Min.`,
#' `1st Qu.`, `Median`, `Mean`, `3rd Qu.`, `Max.`, `N`, `sd`; one column
#' per variable, as `summary()` of deSolve's output); it prints one line
#' per variable when there are more than six.  `summary()` of a batch or
#' an array gives, per variable, the quantiles of the final values over
#' the simulations that succeeded; both print a header line and at most
#' `n` variables.
#'
#' @param x A `lassieBatch`, a `lassieArray` or a `lassieSimulation`.
#' @param which Variables to plot (names or indices, `time` excluded);
#'   default: the observables when the model has them, else the species (at
#'   most 16).
#' @param type `"overlay"`: one line per simulation; `"band"`: the median
#'   and the band between the quantiles `probs` over the simulations at each
#'   time.
#' @param probs Lower and upper quantiles of the band.
#' @param mfrow Panel layout; chosen from the number of panels by default.
#' @param row.names,optional Ignored (for the generic).
#' @param object A `lassieBatch`, a `lassieArray` or a `lassieSimulation`.
#' @param i Simulations to keep.
#' @param format `as.data.frame()` of one simulation: `"wide"` (default,
#'   as deSolve) or `"long"`.
#' @param n Most variables printed.
#' @param ... Further graphical arguments (`col`, `log`, ...); ignored by
#'   `as.data.frame()`, `summary()` and `print()`.
#' @return `plot()` and `print()`: `x`, invisibly.  `as.data.frame()`: the
#'   long table (see above).  `summary()`: of one simulation, a data.frame
#'   of class `summary.lassieSimulation` (statistics x variables); of a
#'   batch or an array, a matrix of class `summary.lassieBatch` (variables
#'   x `min`, `q05`, `median`, `q95`, `max` of the final values) with
#'   attributes `simulations`, `failed` and `time`.  `[`: a `lassieBatch`
#'   of the chosen simulations.
#' @name lassieBatch
#' @aliases lassieArray lassieSimulation
#' @examples
#' m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)),
#'                    rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
#' k <- cbind(seq(0.5, 4, length.out = 20), 1)
#' b <- lassieSimulate(m, seq(0, 3, by = 0.1), rates = k, backend = "cpu", threads = 1)
#' b
#' head(as.data.frame(b))
#' summary(b)
#' plot(b, type = "band")
#' attr(b, "info")
#' out <- lassieSimulate(m, seq(0, 3, by = 0.5), backend = "cpu", threads = 1)
#' summary(out)
#' head(as.data.frame(out, format = "long"))
#' as.data.frame(out)
NULL

#' @rdname lassieBatch
#' @export
print.lassieArray <- function(x, ...) {
  d <- dim(x)
  st <- attr(x, "status")
  cat(sprintf("<lassieArray> %d times x %d columns x %d simulations; %s on %s; %d failed\n",
              d[1L], d[2L], d[3L], attr(x, "method"), attr(x, "backend"), sum(st != 0L)))
  cat(sprintf("times %s ... %s; columns %s", format(attr(x, "times")[1L]),
              format(attr(x, "times")[d[1L]]),
              paste(utils::head(dimnames(x)[[2L]], 6L), collapse = ", ")),
      if (d[2L] > 6L) ", ..." else "", "\n", sep = "")
  invisible(x)
}

#' @rdname lassieBatch
#' @export
print.lassieBatch <- function(x, ...) {
  st <- attr(x, "status")
  info <- attr(x, "info")
  cat(sprintf("<lassieBatch> %d simulations, %d failed; %d times x %d columns each; %s, %.3g s\n",
              length(x), sum(st != 0L), if (length(x)) nrow(x[[1L]]) else 0L,
              if (length(x)) ncol(x[[1L]]) - 1L else 0L, info$backend, info$seconds))
  if (any(st != 0L)) {
    bad <- which(st != 0L)
    cat("failed:", paste0(utils::head(bad, 5), ": ", utils::head(attr(x, "messages")[bad], 5),
                          collapse = "; "), "\n")
  }
  invisible(x)
}

#' @rdname lassieBatch
#' @export
`[.lassieBatch` <- function(x, i) {
  keep <- seq_along(x)[i]
  info <- attr(x, "info")
  st <- attr(x, "status")[keep]
  info$simulations <- length(keep); info$failed <- sum(st != 0L)
  structure(unclass(x)[keep], class = "lassieBatch", status = st,
            messages = attr(x, "messages")[keep], info = info)
}

#' @rdname lassieBatch
#' @export
as.data.frame.lassieBatch <- function(x, row.names = NULL, optional = FALSE, ...) {
  if (!length(x)) {
    return(data.frame(simulation = integer(), time = double(), variable = character(),
                      value = double(), status = integer()))
  }
  nt <- nrow(x[[1L]]); vars <- colnames(x[[1L]])[-1L]
  vals <- vapply(unclass(x), function(s) as.vector(s[, -1L, drop = FALSE]), numeric(nt * length(vars)))
  lassie_long(x[[1L]][, 1L], vals, vars, length(x), attr(x, "status"))
}

# The variables plotted by default: observables when there are, else species.
lassie_default_which <- function(x, which) {
  cn <- colnames(x)
  if (is.null(which)) {
    N <- attr(x, "nSpecies")
    which <- if (!is.null(N) && length(cn) > N + 1L) cn[-seq_len(N + 1L)] else cn[-1L]
    which <- utils::head(which, 16L)
  }
  if (is.numeric(which)) which <- cn[-1L][which]
  bad <- setdiff(which, cn[-1L])
  if (length(bad)) stop_input("`which` names unknown columns: ", paste(bad, collapse = ", "), call = NULL)
  which
}

# A y range for a series that is constant up to round-off (a conserved
# total): centred on it, +-5% of its size, so that it is drawn flat instead
# of its last digits being stretched over the panel.  NULL otherwise.
flat_ylim <- function(v) {
  v <- v[is.finite(v)]
  if (!length(v)) return(NULL)
  r <- range(v); m <- max(abs(r))
  if (diff(r) > 1e-9 * m) return(NULL)
  mid <- mean(r); w <- if (m > 0) 0.05 * m else 1
  c(mid - w, mid + w)
}

#' Plot simulations as deSolve does
#'
#' The result of one simulation of [lassieSimulate()] is deSolve's output
#' (it inherits class `deSolve`, with the attributes `istate`, `rstate`,
#' `type` and `lengthvar` that deSolve's methods read), so deSolve's
#' `plot()`, `subset()`, `summary()` and `diagnostics()` apply, and
#' `plot(out, out2, obs = data)` overlays other runs (ours or `ode()`'s)
#' and observed data.  This method picks the variables and keeps a
#' variable that is constant up to round-off (a conserved total) flat.
#'
#' @param x A result of [lassieSimulate()].
#' @param ... Other outputs to overlay (of `lassieSimulate()` or deSolve's
#'   solvers) and arguments for deSolve's plot method (`obs`, `ylim`,
#'   `log`, `col`, `mfrow`, ...).
#' @param which Variables to plot (names or indices, `time` excluded);
#'   default: the observables when the model has them, else the species (at
#'   most 16).
#' @return `x`, invisibly.
#' @examples
#' m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)),
#'                    rates = c(2, 1), initial = c(1, 0), species = c("A", "B"))
#' out <- lassieSimulate(m, seq(0, 3, by = 0.1), backend = "cpu")
#' out2 <- lassieSimulate(m, seq(0, 3, by = 0.1), rates = c(1, 1), backend = "cpu")
#' if (requireNamespace("deSolve", quietly = TRUE)) {
#'   plot(out, out2, obs = data.frame(time = c(1, 2), A = c(0.4, 0.35)))
#'   deSolve::diagnostics(out)
#' }
#' @export
plot.lassieSimulation <- function(x, ..., which = NULL) {
  which <- lassie_default_which(x, which)
  dots <- list(...)
  if (!requireNamespace("deSolve", quietly = TRUE)) return(lassie_panels(x, which, dots))
  if (is.null(dots$ylim)) {
    runs <- c(list(x), Filter(function(d) inherits(d, "deSolve"), dots))
    dots$ylim <- lapply(which, function(w) {
      flat_ylim(unlist(lapply(runs, function(r) if (w %in% colnames(r)) r[, w])))
    })
  }
  y <- x
  class(y) <- c("deSolve", "matrix")
  do.call(graphics::plot, c(list(y), dots, list(which = which)))
  invisible(x)
}

# Without deSolve: one panel per variable in base graphics (no overlays).
lassie_panels <- function(x, which, dots) {
  if (any(vapply(dots, inherits, TRUE, "deSolve")) || !is.null(dots$obs)) {
    stop_input("overlaying runs or data needs the deSolve package", call = NULL)
  }
  np <- length(which); nc <- ceiling(sqrt(np))
  op <- graphics::par(mfrow = c(ceiling(np / nc), nc))
  on.exit(graphics::par(op))
  for (w in which) {
    yl <- if (is.null(dots$ylim)) flat_ylim(x[, w]) else dots$ylim
    graphics::plot(x[, "time"], x[, w], type = "l", xlab = "time", ylab = "", main = w, ylim = yl)
  }
  invisible(x)
}

#' @rdname lassieBatch
#' @export
summary.lassieBatch <- function(object, ...) lassie_final_summary(as.data.frame(object), length(object),
                                                                  attr(object, "status"))

#' @rdname lassieBatch
#' @export
summary.lassieArray <- function(object, ...) lassie_final_summary(as.data.frame(object), dim(object)[[3L]],
                                                                  attr(object, "status"))

# Per variable, the quantiles of the final values over the simulations that
# succeeded (df: the long table).
lassie_final_summary <- function(df, n, status) {
  vars <- unique(df$variable)
  last <- df[df$time == max(df$time) & df$status == 0L, ]
  out <- matrix(NA_real_, length(vars), 5L, dimnames = list(vars, c("min", "q05", "median", "q95", "max")))
  if (nrow(last)) {
    q <- tapply(last$value, factor(last$variable, levels = vars), stats::quantile,
                probs = c(0, 0.05, 0.5, 0.95, 1), names = FALSE, na.rm = TRUE)
    out[] <- do.call(rbind, q)
  }
  structure(out, class = c("summary.lassieBatch", "matrix", "array"), simulations = n,
            failed = sum(status != 0L), time = if (nrow(df)) max(df$time) else NA_real_)
}

#' @rdname lassieBatch
#' @export
print.summary.lassieBatch <- function(x, n = 10L, ...) {
  cat(sprintf("lassieSimulate: %d simulation(s), %d failed; final values at time %s over the %d that succeeded\n",
              attr(x, "simulations"), attr(x, "failed"), format(attr(x, "time")),
              attr(x, "simulations") - attr(x, "failed")))
  m <- unclass(x)
  attributes(m) <- list(dim = dim(x), dimnames = dimnames(x))
  print(utils::head(m, n), digits = 4L)
  if (nrow(m) > n) cat(sprintf("  ... %d more variable(s)\n", nrow(m) - n))
  invisible(x)
}

# The values of one simulation as a plain matrix (time in column 1).
lassie_plain <- function(x) {
  m <- x
  attributes(m) <- list(dim = dim(x), dimnames = dimnames(x))
  m
}

#' @rdname lassieBatch
#' @export
summary.lassieSimulation <- function(object, ...) {
  m <- lassie_plain(object)
  vars <- colnames(m)[-1L]
  tab <- vapply(vars, function(v) {
    y <- m[, v]
    c(summary(y), N = length(y), sd = stats::sd(y))[c("Min.", "1st Qu.", "Median", "Mean", "3rd Qu.", "Max.", "N", "sd")]
  }, numeric(8L))
  out <- as.data.frame(tab, optional = TRUE)
  names(out) <- vars
  rownames(out) <- c("Min.", "1st Qu.", "Median", "Mean", "3rd Qu.", "Max.", "N", "sd")
  st <- attr(object, "stats")
  structure(out, class = c("summary.lassieSimulation", "data.frame"),
            run = sprintf("%d times, %s on %s, %g steps, status %d", nrow(m), attr(object, "method"),
                          attr(object, "backend"), if (is.null(st)) NA_real_ else st[["steps"]],
                          if (is.null(attr(object, "status"))) 0L else attr(object, "status")))
}

#' @rdname lassieBatch
#' @export
print.summary.lassieSimulation <- function(x, n = 10L, ...) {
  cat("lassieSimulation:", attr(x, "run"), "\n")
  df <- x
  attr(df, "run") <- NULL
  class(df) <- "data.frame"
  if (ncol(df) <= 6L) {
    print(df, digits = 4L)
  } else {
    # one line per variable: many species would wrap deSolve's layout
    tt <- t(as.matrix(df))
    print(utils::head(tt, n), digits = 4L)
    if (nrow(tt) > n) cat(sprintf("  ... %d more variable(s)\n", nrow(tt) - n))
  }
  invisible(x)
}

#' @rdname lassieBatch
#' @export
as.data.frame.lassieSimulation <- function(x, row.names = NULL, optional = FALSE, ..., format = c("wide", "long")) {
  # wide by default: deSolve's subset() and plot(subset =) evaluate their
  # conditions in as.data.frame() of the output, column by column
  format <- check_choice(if (identical(format, c("wide", "long"))) "wide" else format, c("wide", "long"), "format")
  m <- lassie_plain(x)
  if (format == "wide") return(as.data.frame(m, optional = TRUE))
  st <- attr(x, "status")
  lassie_long(m[, 1L], m[, -1L, drop = FALSE], colnames(m)[-1L], 1L, if (is.null(st)) 0L else st)
}

#' @rdname lassieBatch
#' @export
as.data.frame.lassieArray <- function(x, row.names = NULL, optional = FALSE, ...) {
  d <- dim(x)
  lassie_long(attr(x, "times"), as.vector(x), dimnames(x)[[2L]], d[[3L]], attr(x, "status"))
}

# The long table: values in time, then variable, then simulation order.
lassie_long <- function(times, values, vars, n, status) {
  nt <- length(times)
  nv <- length(vars)
  data.frame(simulation = rep(seq_len(n), each = nt * nv), time = rep(as.double(times), times = nv * n),
             variable = rep(rep(vars, each = nt), times = n), value = as.vector(values),
             status = rep(as.integer(status), each = nt * nv), stringsAsFactors = FALSE)
}

#' @rdname lassieBatch
#' @export
plot.lassieArray <- function(x, which = NULL, type = c("overlay", "band"),
                             probs = c(0.05, 0.95), mfrow = NULL, ...) {
  # the batch's plot, on the array's simulations as time-first matrices
  d <- dim(x)
  vals <- unclass(x)
  sims <- lapply(seq_len(d[[3L]]), function(s) {
    m <- cbind(attr(x, "times"), matrix(vals[, , s], d[[1L]], d[[2L]]))
    colnames(m) <- c("time", dimnames(x)[[2L]])
    attr(m, "nSpecies") <- attr(x, "nSpecies")
    m
  })
  plot.lassieBatch(structure(sims, class = "lassieBatch"), which = which, type = type,
                   probs = probs, mfrow = mfrow, ...)
  invisible(x)
}

#' @rdname lassieBatch
#' @export
plot.lassieBatch <- function(x, which = NULL, type = c("overlay", "band"),
                             probs = c(0.05, 0.95), mfrow = NULL, ...) {
  type <- check_choice(if (identical(type, c("overlay", "band"))) "overlay" else type,
                       c("overlay", "band"), "type")
  if (!length(x)) stop_input("`x` has no simulations to plot", call = NULL)
  if (!is.numeric(probs) || length(probs) != 2L || anyNA(probs) || any(probs < 0 | probs > 1)) {
    stop_input("`probs` must be two probabilities", call = NULL)
  }
  which <- lassie_default_which(x[[1L]], which)
  np <- length(which)
  if (is.null(mfrow)) { nc <- ceiling(sqrt(np)); mfrow <- c(ceiling(np / nc), nc) }
  op <- graphics::par(mfrow = mfrow)
  on.exit(graphics::par(op))
  tt <- x[[1L]][, 1L]
  for (w in which) {
    v <- vapply(unclass(x), function(s) s[, w], numeric(length(tt)))
    v <- matrix(v, nrow = length(tt))
    yl <- flat_ylim(v)
    if (is.null(yl)) yl <- range(v[is.finite(v)])
    graphics::plot(tt, v[, 1L], type = "n", ylim = yl, xlab = "time", ylab = w, main = w, ...)
    if (type == "overlay") {
      graphics::matlines(tt, v, lty = 1, col = grDevices::adjustcolor("black", alpha.f = max(0.05, min(1, 5 / ncol(v)))))
    } else {
      q <- apply(v, 1L, stats::quantile, probs = c(probs[1L], 0.5, probs[2L]), na.rm = TRUE)
      graphics::polygon(c(tt, rev(tt)), c(q[1L, ], rev(q[3L, ])), col = "grey85", border = NA)
      graphics::lines(tt, q[2L, ], lwd = 2)
      graphics::legend("topright", bty = "n", lty = c(1, NA), lwd = c(2, NA), pch = c(NA, 15),
                       col = c("black", "grey85"),
                       legend = c("median", sprintf("%g%%-%g%%", 100 * probs[1L], 100 * probs[2L])))
    }
  }
  invisible(x)
}
