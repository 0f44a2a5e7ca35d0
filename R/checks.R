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

# A classed warning (class sysbioGPU_warning_<kind>) from the package.
warn_sbg <- function(kind, ...) {
  warning(structure(class = c(paste0("sysbioGPU_warning_", kind), "sysbioGPU_warning", "warning", "condition"),
                    list(message = paste0(...), call = NULL)))
}

# R's own messages for a failed allocation (allocVector in R code or in the
# glue), as the session's language words them: the text before the first
# format directive of each.
alloc_error_prefixes <- function() {
  fmts <- c("cannot allocate vector of size %0.1f Gb", "cannot allocate vector of size %0.1f Mb",
            "cannot allocate vector of size %0.f Kb", "cannot allocate memory block of size %0.1f Gb",
            "vector memory exhausted (limit reached?)", "vector memory limit of %0.1f %s reached, see mem.maxVSize()")
  tr <- vapply(fmts, function(f) gettext(f, domain = "R"), "")
  unique(c(sub("%.*$", "", fmts), sub("%.*$", "", tr)))
}

is_alloc_error <- function(e) {
  msg <- conditionMessage(e)
  any(vapply(alloc_error_prefixes(), function(p) startsWith(msg, p), NA))
}

# Evaluates expr; an allocation that fails inside it becomes an error of
# class sysbioGPU_error_memory that names the argument which asked for the
# memory and the size (`bytes`, when the caller knows it, else R's words).
# Other errors pass through untouched.
alloc_guard <- function(expr, arg, bytes = NULL, what = NULL) {
  withCallingHandlers(expr, error = function(e) {
    # R's own allocation failure, or the glue's memory error that does not
    # yet say which argument asked for the memory (an output made by the
    # glue while the engine runs)
    unnamed <- inherits(e, "sysbioGPU_error_memory") &&
      !grepl(paste0("`", arg, "`"), conditionMessage(e), fixed = TRUE)
    if (unnamed || (!inherits(e, "sysbioGPU_error") && is_alloc_error(e))) {
      size <- if (!is.null(bytes)) format_bytes(bytes) else sub("^.* of size ", "", conditionMessage(e))
      stop(sbg_condition(c("sysbioGPU_error_memory", "sysbioGPU_error_engine"), paste0(
        "cannot allocate ", size, if (!is.null(what)) paste0(" for ", what), " (asked for by `", arg,
        "`): ", conditionMessage(e), "; lower `", arg, "`"), call = NULL))
    }
  })
}

# Grows R's heap once for the large vectors a call is about to make
# (sbg_reserve_heap() in src/core/glue.c): one full collection then, not
# one at each fifth of growth while they come. From 64 MB; a failure is a
# memory error naming `arg`.
reserve_heap <- function(bytes, arg, what) {
  if (bytes >= 64e6) alloc_guard(.Call(ffi_reserve_heap, as.double(bytes)), arg, bytes = bytes, what = what)
  invisible(NULL)
}

format_bytes <- function(bytes) {
  u <- c("bytes", "KB", "MB", "GB", "TB", "PB")
  k <- if (bytes < 1) 1L else min(length(u), floor(log(bytes, 1000)) + 1L)
  sprintf("%.3g %s", bytes / 1000^(k - 1L), u[[k]])
}

# A vector that may be named by `nms` (species, reactions, nodes): unnamed
# it is taken in order; named, every name must be one of `nms`, once each,
# and the values are put in the order of `nms`.  Names that do not match
# are an error (never a silent fall back to the order of the values).
match_by_name <- function(x, nms, arg, what) {
  nm <- names(x)
  if (is.null(nm) || all(!nzchar(nm) & !is.na(nm))) return(unname(x))
  if (anyNA(nm) || any(!nzchar(nm))) {
    stop_input("`", arg, "` names some values and not others: name every ", what, " or none", call = NULL)
  }
  dup <- unique(nm[duplicated(nm)])
  if (length(dup)) {
    stop_input("`", arg, "` names ", what, " '", dup[[1L]], "' more than once", call = NULL)
  }
  unk <- setdiff(nm, nms)
  if (length(unk)) {
    stop_input("`", arg, "` names unknown ", what, "(s): ", paste(utils::head(unk, 5L), collapse = ", "),
               " (the names are ", paste(utils::head(nms, 5L), collapse = ", "),
               if (length(nms) > 5L) ", ...", ")", call = NULL)
  }
  miss <- setdiff(nms, nm)
  if (length(miss)) {
    stop_input("`", arg, "` lacks ", what, "(s): ", paste(utils::head(miss, 5L), collapse = ", "), call = NULL)
  }
  unname(x[match(nms, nm)])
}

# What a value is, for messages: "a logical matrix", "a data.frame", ...
# (class(x)[1] alone says "matrix" whatever a matrix holds).
describe_value <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.matrix(x) && !isS4(x)) return(paste0("a ", typeof(x), " matrix"))
  if (is.atomic(x) && is.null(attr(x, "class"))) return(paste0("a ", typeof(x), " vector"))
  paste0("an object of class ", class(x)[[1L]])
}
