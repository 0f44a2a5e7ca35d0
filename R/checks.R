# Argument checks and the package's conditions. Every error names the
# argument (or file) at fault and carries a class that callers can catch:
# sysbioGPU_error_input, sysbioGPU_error_backend, sysbioGPU_error_engine
# (and its subclasses, see stop_engine()).

sbg_condition <- function(class, message, call = NULL) {
  structure(
    class = c(class, "sysbioGPU_error", "error", "condition"),
    list(message = message, call = if (!is.null(call)) sbg_entry_call())
  )
}

# The call an error names: the outermost frame of a function of this
# package, i.e. the function the user called (rapidGSEA(), plot.rapidGSEA()),
# never the internal helper where the check sits.  A call too long for one
# line (do.call() with the data inline) keeps the function's name only.
sbg_entry_call <- function() {
  ns <- topenv(environment(sbg_entry_call))
  for (i in seq_len(sys.nframe())) {
    f <- sys.function(i)
    if (identical(environment(f), ns)) {
      cl <- sys.call(i)
      if (!is.name(cl[[1L]]) && !is.call(cl[[1L]])) { # do.call(rapidGSEA, ...): the function itself
        nms <- ls(ns)
        hit <- nms[vapply(nms, function(n) identical(get0(n, ns, inherits = FALSE), f), TRUE)]
        cl[[1L]] <- as.name(if (length(hit)) hit[[1L]] else "sysbioGPU")
      }
      txt <- deparse(cl, width.cutoff = 60L)
      if (length(txt) > 1L || nchar(txt[[1L]]) > 60L) cl <- as.call(list(cl[[1L]], quote(...)))
      return(cl)
    }
  }
  NULL
}

stop_input <- function(..., call = sys.call(-1)) {
  stop(sbg_condition("sysbioGPU_error_input", paste0(...), call))
}

stop_backend <- function(..., call = sys.call(-1)) {
  stop(sbg_condition("sysbioGPU_error_backend", paste0(...), call))
}

# Called from C (src/core/glue.c) with an engine status code.
engine_error_classes <- c(
  "sysbioGPU_error_input",       # 1 SBG_ERR_INPUT
  "sysbioGPU_error_memory",      # 2 SBG_ERR_ALLOC
  "sysbioGPU_error_memory",      # 3 SBG_ERR_DEVICE_ALLOC
  "sysbioGPU_error_cuda",        # 4 SBG_ERR_CUDA
  "sysbioGPU_error_backend",     # 5 SBG_ERR_NO_CUDA
  "sysbioGPU_error_backend",     # 6 SBG_ERR_NO_DEVICE
  "sysbioGPU_error_interrupted", # 7 SBG_ERR_INTERRUPTED
  "sysbioGPU_error_numeric",     # 8 SBG_ERR_NUMERIC
  "sysbioGPU_error_internal"     # 9 SBG_ERR_INTERNAL
)

stop_engine <- function(code, message) {
  cls <- if (code >= 1L && code <= length(engine_error_classes)) engine_error_classes[[code]] else "sysbioGPU_error_internal"
  if (cls == "sysbioGPU_error_internal") message <- paste0(message, " (an internal error: please report it)")
  stop(sbg_condition(c(cls, "sysbioGPU_error_engine"), message, call = NULL))
}

# A wrong value in a message: short atomic values as R code, anything else
# by its kind (never a dump of a whole object).
arg_label <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.atomic(x) && length(x) <= 5L && all(names(attributes(x)) %in% "names")) {
    txt <- deparse(x, width.cutoff = 60L)
    if (length(txt) == 1L && nchar(txt) <= 60L) return(txt)
  }
  sbg_kind(x)
}

# "a numeric vector of length 12", "a 3 x 4 matrix", "a list of length 2",
# "an object of class 'GRanges'".
sbg_kind <- function(x) {
  cls <- class(x)[[1L]]
  if (is.matrix(x)) return(sprintf("a %d x %d %s matrix", nrow(x), ncol(x), typeof(x)))
  if (is.data.frame(x)) return(sprintf("a data.frame (%d x %d)", nrow(x), ncol(x)))
  if (is.function(x)) return("a function")
  if (is.list(x) && !is.object(x)) return(sprintf("a list of length %d", length(x)))
  if (is.atomic(x) && !is.object(x)) return(sprintf("a %s vector of length %d", typeof(x), length(x)))
  if (is.factor(x)) return(sprintf("a factor of length %d", length(x)))
  sprintf("an object of class '%s'", cls)
}

check_flag <- function(x, arg = deparse(substitute(x))) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    stop_input("`", arg, "` must be TRUE or FALSE, not ", arg_label(x), call = sys.call(-1))
  }
  x
}

# A single whole number in [min, max]; returned as double (R integers stop
# at 2^31, counts and seeds may not).
check_whole <- function(x, arg = deparse(substitute(x)), min = 0, max = 2^53) {
  ok <- is.numeric(x) && length(x) == 1L && !is.na(x) && is.finite(x) &&
    x == round(x) && x >= min && x <= max
  if (!ok) {
    range <- if (is.finite(max)) paste0("in [", format(min, scientific = FALSE), ", ",
                                        format(max, scientific = FALSE), "]")
             else paste0(">= ", format(min, scientific = FALSE))
    stop_input("`", arg, "` must be a single whole number ", range, ", not ",
               arg_label(x), call = sys.call(-1))
  }
  as.double(x)
}

check_choice <- function(x, choices, arg = deparse(substitute(x))) {
  if (!is.character(x) || length(x) < 1L || is.na(x[[1L]]) || !(x[[1L]] %in% choices)) {
    stop_input("`", arg, "` must be one of ", paste0('"', choices, '"', collapse = ", "),
               ", not ", arg_label(x), call = sys.call(-1))
  }
  x[[1L]]
}

# The seed of a run: whole number in [0, 2^53]. When missing, drawn from R's
# own generator, so set.seed() makes runs repeatable as R users expect.
resolve_seed <- function(seed = NULL) {
  if (is.null(seed)) return(as.double(sample.int(.Machine$integer.max, 1L)))
  check_whole(seed, "seed")
}
