# Argument checks and the package's conditions. Every error names the
# argument (or file) at fault and carries a class that callers can catch:
# sysbioGPU_error_input, sysbioGPU_error_backend, sysbioGPU_error_engine
# (and its subclasses, see stop_engine()).

sbg_condition <- function(class, message, call = NULL) {
  structure(
    class = c(class, "sysbioGPU_error", "error", "condition"),
    list(message = message, call = call)
  )
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

arg_label <- function(x) if (is.null(x)) "NULL" else paste(deparse(x, nlines = 1L, width.cutoff = 60L), collapse = "")

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
