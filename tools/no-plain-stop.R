#!/usr/bin/env Rscript
# Lists every plain error call in R/ that can reach a user without the
# package's classes: stop(), stopifnot() and match.arg() (whose
# error is a plain simpleError) that do not go through R/checks.R's
# stop_input()/stop_backend()/stop_engine().  A stop() whose argument is a
# condition built by sbg_condition() is fine and not listed.  A call inside a
# tryCatch()/try() is listed with a note: check that the handler turns it
# into a classed error.
#
# Usage: Rscript tools/no-plain-stop.R [R-folder [src-folder]]
#   (exit status 1 if any plain call in R/; C sites are listed for information)

plain_calls <- c("stop", "stopifnot", "match.arg")

enclosing <- function(pd, id, pred) {
  while (!is.na(id) && id != 0L) {
    if (pred(id)) return(id)
    id <- pd$parent[match(id, pd$id)]
  }
  NA_integer_
}

call_name_of <- function(pd, expr_id) {
  kids <- pd[pd$parent == expr_id, ]
  first <- kids[order(kids$line1, kids$col1), ][1, ]
  if (is.na(first$id) || first$token != "expr") return(NA_character_)
  sym <- pd[pd$parent == first$id & pd$token == "SYMBOL_FUNCTION_CALL", "text"]
  if (length(sym)) sym[1] else NA_character_
}

# Name of the top-level function a line belongs to (`name <- function`).
top_function <- function(exprs, line) {
  sr <- attr(exprs, "srcref")
  for (k in seq_along(exprs)) {
    if (sr[[k]][1] <= line && line <= sr[[k]][3]) {
      e <- exprs[[k]]
      if (is.call(e) && as.character(e[[1]]) %in% c("<-", "=")) return(deparse(e[[2]]))
      return("<top level>")
    }
  }
  "?"
}

scan_file <- function(f) {
  exprs <- parse(f, keep.source = TRUE)
  pd <- utils::getParseData(exprs, includeText = TRUE)
  hits <- pd[pd$token == "SYMBOL_FUNCTION_CALL" & pd$text %in% plain_calls, ]
  if (!nrow(hits)) return(NULL)
  rows <- lapply(seq_len(nrow(hits)), function(k) {
    h <- hits[k, ]
    call_id <- pd$parent[match(pd$parent[match(h$id, pd$id)], pd$id)]
    txt <- pd$text[match(call_id, pd$id)]
    if (h$text == "stop" && grepl("sbg_condition\\(", txt)) return(NULL)
    in_try <- enclosing(pd, pd$parent[match(call_id, pd$id)], function(id) {
      pd$token[match(id, pd$id)] == "expr" && call_name_of(pd, id) %in% c("tryCatch", "try", "withCallingHandlers")
    })
    data.frame(where = paste0(f, ":", h$line1), fun = top_function(exprs, h$line1),
               call = h$text, note = if (is.na(in_try)) "" else "inside tryCatch/try",
               text = substr(gsub("\\s+", " ", txt), 1L, 90L))
  })
  do.call(rbind, rows)
}

no_plain_stop <- function(dir = "R") {
  files <- sort(list.files(dir, pattern = "\\.[Rr]$", full.names = TRUE))
  res <- do.call(rbind, lapply(files, scan_file))
  if (is.null(res)) res <- data.frame(where = character(), fun = character(), call = character(),
                                      note = character(), text = character())
  res
}

# The same in the C glue: Rf_error()/error() calls and SBG_ASSERT() sites
# raise plain R errors (an SBG_ASSERT that a user's edited object can reach
# is a missing R or C check).  sbg_stop()'s unreachable fallback and the
# macro's own definition are left out.
c_plain <- function(dir = "src") {
  files <- sort(list.files(dir, pattern = "\\.(c|h|cu)$", recursive = TRUE, full.names = TRUE))
  out <- lapply(files, function(f) {
    x <- readLines(f, warn = FALSE)
    hit <- grep("\\b(Rf_error|error|errorcall|Rf_errorcall|SBG_ASSERT)\\s*\\(", x)
    hit <- hit[!grepl("^\\s*(/?\\*|//|#\\s*define)", x[hit]) & !grepl("nocov|Rf_error\\(\"%s\", msg\\)", x[hit])]
    hit <- hit[!grepl("sysbioGPU internal error: %s \\(%s:%d\\)", x[hit], fixed = FALSE)]
    if (!length(hit)) return(NULL)
    data.frame(where = paste0(f, ":", hit), text = trimws(substr(x[hit], 1L, 100L)),
               assert = grepl("SBG_ASSERT", x[hit]))
  })
  do.call(rbind, out)
}

if (sys.nframe() == 0L) {
  a <- commandArgs(TRUE)
  res <- no_plain_stop(if (length(a)) a[1] else "R")
  src <- if (length(a) > 1L) a[2] else "src"
  cres <- if (dir.exists(src)) c_plain(src) else NULL
  if (!is.null(cres) && nrow(cres)) {
    e <- cres[!cres$assert, ]
    cat(sprintf("%s  %s\n", e$where, e$text), sep = "")
    cat(sprintf("%d plain Rf_error() site(s) in %s/ (C glue)\n", nrow(e), src))
    a <- table(sub(":[0-9]+$", "", cres$where[cres$assert]))
    cat(sprintf("SBG_ASSERT() sites (plain 'internal error' if an edited object reaches them): %s\n\n",
                paste(names(a), a, sep = " ", collapse = ", ")))
  }
  if (nrow(res)) {
    cat(sprintf("%s  %s()  %s%s\n    %s\n", res$where, res$fun, res$call,
                ifelse(nzchar(res$note), paste0("  [", res$note, "]"), ""), res$text), sep = "")
  }
  cat(sprintf("%d plain error call(s) in R/ (%d inside tryCatch/try)\n", nrow(res),
              sum(nzchar(res$note))))
  quit(status = if (nrow(res)) 1L else 0L)
}
