# make mutants-auto: one-line mutants made by a program.
#
# Every arithmetic (+ - * /, their compound assignments, unary minus),
# relational (< <= > >= == !=) and logical (&& || !, and R's & |) operator
# and every numeric constant of the engines (src/<method>/ C files and
# headers, without the CUDA files and the stand-ins of a CPU-only build;
# src/core/philox.h and portable_math.h) and of the R readers (R/*-io.R) is
# a mutation site; MUT_N of the mutants are drawn with MUT_SEED, each is
# applied to a private copy of the tree, built CPU-only incrementally, and
# judged by the test files that tools/mutants-auto-map.txt names for its
# file (in order, stopping at the first failing expectation).
#
#   Rscript tools/mutants-auto.R prepare   build the unmutated tree once
#   Rscript tools/mutants-auto.R run       (prepares when needed) run the sample
#   Rscript tools/mutants-auto.R report    rebuild the tables from the results
#   Rscript tools/mutants-auto.R list      all mutants to mutants-all.csv
#
# Settings (environment): MUT_N (300), MUT_SEED (1), MUT_JOBS (1),
# MUT_OUT (check/mutants-auto), MUT_PREP (.mutants), MUT_THREADS (engine
# threads in each test run, 1), MUT_TIMEOUT_FACTOR (4: a mutant's tests may
# take this many times the unmutated run, plus 30 s), MUT_DEADLINE (seconds:
# start no mutant after this; the results so far are kept and a second run
# with the same MUT_OUT goes on where this one stopped), MUT_LIBDIRS
# (folders with shared libraries the link needs that the linker cannot
# find, e.g. libsbml.so.5 on a machine without libSBML's development files),
# MUT_CPATH (headers of those libraries, for gcc's CPATH), MUT_FILES (a
# regular expression: draw only from the files whose paths match), MUT_IDS
# (ids of the sample, space- or comma-separated: run only these, e.g. to
# judge survivors again once tests were added; use a fresh MUT_OUT).
#
# Building: `prepare` installs a copy of the tree with R CMD INSTALL (the
# only step that needs make) and records the compiler's command lines; a
# mutant then recompiles only the objects whose sources include the mutated
# file (gcc -MM) with those very commands, relinks the shared library into
# the worker's own installed copy and restores both afterwards.  An R
# reader's mutant is sourced over the installed namespace (and the attached
# exports) before its tests run.  So a machine without make (or without R's
# development setup) runs mutants from a folder prepared elsewhere: carry
# MUT_PREP there (see CONTRIBUTING.md).
#
# Outcomes: killed (by the first test file that fails, a crash included),
# timeout (counted as killed), survived, no-compile (the compiler or R's
# parser refuses it: counted apart, not as killed), skipped (its file does
# not compile unmutated on this machine).  Kill rate = (killed + timeout) /
# (killed + timeout + survived).

main <- function(args) {
  cmd <- if (length(args)) args[[1L]] else "run"
  root <- normalizePath(file.path(dirname(script_path()), ".."))
  cfg <- list(
    root = root,
    n = as.integer(env("MUT_N", "300")),
    seed = as.integer(env("MUT_SEED", "1")),
    jobs = as.integer(env("MUT_JOBS", "1")),
    out = abs_path(env("MUT_OUT", "check/mutants-auto"), root),
    prep = abs_path(env("MUT_PREP", ".mutants"), root),
    threads = as.integer(env("MUT_THREADS", "1")),
    tfactor = as.numeric(env("MUT_TIMEOUT_FACTOR", "4")),
    deadline = as.numeric(env("MUT_DEADLINE", "Inf")),
    files = env("MUT_FILES", ""),
    ids = env("MUT_IDS", ""),
    libdirs = env("MUT_LIBDIRS", ""),
    cpath = env("MUT_CPATH", "")
  )
  switch(cmd,
    prepare = invisible(prepare(cfg)),
    list = list_all(cfg),
    run = run_all(cfg),
    report = report(cfg),
    test = test_mutant(args[-1L]),
    stop("unknown command ", cmd, " (prepare, run, report, list)")
  )
}

env <- function(name, default) {
  v <- Sys.getenv(name, "")
  if (nzchar(v)) v else default
}
abs_path <- function(p, root) if (grepl("^/", p)) p else file.path(root, p)
script_path <- function() {
  a <- grep("^--file=", commandArgs(FALSE), value = TRUE)
  if (length(a)) sub("^--file=", "", a[[1L]]) else "tools/mutants-auto.R"
}
say <- function(...) cat("mutants-auto: ", ..., "\n", sep = "")
sh <- function(cmd, dir = ".", log = NULL) { # run a shell command in dir; exit status
  full <- sprintf("cd %s && %s", shQuote(dir), cmd)
  if (!is.null(log)) full <- sprintf("(%s) >> %s 2>&1", full, shQuote(log))
  system(full)
}

# ---- the population ---------------------------------------------------

read_map <- function(root) {
  l <- readLines(file.path(root, "tools/mutants-auto-map.txt"))
  l <- l[nzchar(l) & !startsWith(l, "#")]
  p <- strsplit(l, "\t", fixed = TRUE)
  data.frame(glob = vapply(p, `[[`, "", 1L), tests = vapply(p, `[[`, "", 2L))
}

# The files that carry mutants, each with its test files.
site_files <- function(root) {
  map <- read_map(root)
  within <- function(d, pat) file.path(d, list.files(file.path(root, d), pattern = pat))
  f <- c("src/core/philox.h", "src/core/portable_math.h",
         unlist(lapply(c("src/cosnet", "src/grn", "src/gsea", "src/lassie", "src/pbn"),
                       within, pat = "\\.(c|h)$")),
         within("R", "-io\\.R$"))
  f <- f[!grepl("_gpu_stub\\.c$|_testhooks\\.c$", f)]
  tests <- vapply(f, function(x) {
    hit <- which(vapply(map$glob, function(g) grepl(utils::glob2rx(g), x), TRUE))
    if (length(hit)) map$tests[[hit[[1L]]]] else NA_character_
  }, "")
  data.frame(file = f, tests = unname(tests))[!is.na(tests), ]
}

# ---- C sites ------------------------------------------------------------

c_token_re <- paste(
  "(/\\*[\\s\\S]*?\\*/)", "(//[^\\n]*)",                          # comments
  "(\"(?:\\\\.|[^\"\\\\\\n])*\")", "('(?:\\\\.|[^'\\\\\\n])*')",  # strings, chars
  "(0[xX][0-9a-fA-F]+[uUlL]*)",                                  # hex
  "((?:\\d+\\.\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?[fFlL]?|\\d+[eE][+-]?\\d+[fFlL]?)", # float
  "(\\d+[uUlL]*)",                                               # integer
  "([A-Za-z_]\\w*)",                                             # identifier
  "(->|\\+\\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\\|\\||[-+*/%&|^]=|[-+*/%<>=!&|^~?:;,.(){}\\[\\]#\\\\])",
  "(\\s+)", sep = "|")

c_types <- c("void", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
             "const", "volatile", "restrict", "struct", "union", "enum", "static", "inline",
             "_Bool", "bool", "size_t", "FILE", "SEXP", "__restrict__", "__restrict")
c_nonoperand <- c("return", "case", "sizeof", "else", "do", "goto")

# Typedef names of all headers (a `*` after one declares a pointer).
c_typedefs <- function(root) {
  txt <- paste(unlist(lapply(list.files(file.path(root, "src"), "\\.(h|c|cuh)$", recursive = TRUE,
                                        full.names = TRUE), readLines)), collapse = "\n")
  a <- regmatches(txt, gregexpr("\\}\\s*([A-Za-z_]\\w*)\\s*;", txt, perl = TRUE))[[1L]]
  b <- regmatches(txt, gregexpr("typedef[^;{]*?([A-Za-z_]\\w*)\\s*;", txt, perl = TRUE))[[1L]]
  unique(c(sub("^\\}\\s*(\\w+).*", "\\1", a), sub(".*?(\\w+)\\s*;$", "\\1", b)))
}

c_sites <- function(root, file, typedefs) {
  txt <- paste(readLines(file.path(root, file)), collapse = "\n")
  m <- gregexpr(c_token_re, txt, perl = TRUE)[[1L]]
  tok <- regmatches(txt, list(m))[[1L]]
  off <- as.integer(m)
  if (sum(nchar(tok)) != nchar(txt)) stop(file, ": the C tokenizer lost characters")
  nl <- c(0L, gregexpr("\n", txt, fixed = TRUE)[[1L]])
  line_of <- findInterval(off - 1L, nl)     # 1-based line of each token
  lines <- strsplit(txt, "\n", fixed = TRUE)[[1L]]
  # Preprocessor: a directive runs from a line starting with # to the end of
  # that line and its backslash-continued ones.  Only a #define's body (past
  # the name and its parameters) is a site: the integration tableau and
  # the generators' constants live there.
  cont <- grepl("\\\\\\s*$", lines)
  dir <- rep(FALSE, length(lines)); in_dir <- FALSE; is_def <- rep(FALSE, length(lines))
  cur_def <- FALSE
  for (i in seq_along(lines)) {
    if (!in_dir && grepl("^\\s*#", lines[[i]])) { in_dir <- TRUE; cur_def <- grepl("^\\s*#\\s*define\\b", lines[[i]]) }
    dir[[i]] <- in_dir; is_def[[i]] <- in_dir && cur_def
    if (in_dir && !cont[[i]]) in_dir <- FALSE
  }
  # Device-only code (the true branch of `#ifdef __CUDA_ARCH__` or
  # `__CUDACC__`, the false branch of `#ifndef`) is not compiled into a
  # CPU-only build, so no CPU test can reach it: not a site.
  dev <- device_only_lines(lines)
  sig <- !grepl("^(/\\*|//|\\s)", tok)
  # tokens of other directives are out; in a #define, `#`, `define`, the
  # name and a parameter list glued to it are out
  keep <- !(dir[line_of] & !is_def[line_of]) & !dev[line_of]
  for (i in which(tok == "#" & is_def[line_of])) {
    j <- i + 1L
    for (skip in 1:2) { # `define`, then the name
      while (j <= length(tok) && !sig[[j]]) j <- j + 1L
      if (j <= length(tok)) keep[[j]] <- FALSE
      j <- j + 1L
    }
    if (j <= length(tok) && tok[[j]] == "(") {
      while (j <= length(tok) && tok[[j]] != ")") { keep[[j]] <- FALSE; j <- j + 1L }
    }
    keep[[i]] <- FALSE
  }
  # SBG_ASSERT(...) in the glue re-checks what the R layer has already
  # refused: a mutant of its condition differs only on calls that no R
  # function makes, so its mutants are equivalent by construction
  for (i in which(tok == "SBG_ASSERT")) {
    j <- i + 1L; depth <- 0L
    while (j <= length(tok)) {
      if (tok[[j]] == "(") depth <- depth + 1L
      if (tok[[j]] == ")") { depth <- depth - 1L; if (depth == 0L) break }
      keep[[j]] <- FALSE; j <- j + 1L
    }
  }
  S <- list(k = integer(), from = character(), to = character(), kind = character())
  prev <- ""; prev2 <- ""
  add <- function(k, from, to, kind) {
    S$k <<- c(S$k, k); S$from <<- c(S$from, from); S$to <<- c(S$to, to); S$kind <<- c(S$kind, kind)
  }
  for (k in seq_along(tok)) {
    t <- tok[[k]]
    if (!sig[[k]]) next
    if (keep[[k]] && !startsWith(t, "\"") && !startsWith(t, "'")) {
      operand_before <- grepl("^[A-Za-z_0-9.]", prev) && !(prev %in% c(c_types, c_nonoperand, typedefs)) &&
        !grepl("^[A-Za-z_]\\w*_t$", prev) && prev2 != "struct" || prev %in% c(")", "]")
      if (grepl("^([0-9]|\\.[0-9])", t)) {
        for (to in nudge_c(t)) add(k, t, to, "constant")
      } else if (t %in% c("+", "-", "*", "/") && operand_before) {
        add(k, t, c("+" = "-", "-" = "+", "*" = "/", "/" = "*")[[t]], "arithmetic")
      } else if (t == "-" && !operand_before) {
        add(k, t, "", "arithmetic")
      } else if (t %in% c("+=", "-=", "*=", "/=")) {
        add(k, t, c("+=" = "-=", "-=" = "+=", "*=" = "/=", "/=" = "*=")[[t]], "arithmetic")
      } else if (t %in% names(rel_to)) {
        for (to in rel_to[[t]]) add(k, t, to, "relational")
      } else if (t %in% c("&&", "||")) {
        add(k, t, if (t == "&&") "||" else "&&", "logical")
      } else if (t == "!") {
        add(k, t, "", "logical")
      }
    }
    prev2 <- prev; prev <- t
  }
  data.frame(file = rep(file, length(S$k)), line = line_of[S$k], offset = off[S$k],
             from = S$from, to = S$to, kind = S$kind)
}

# TRUE for each line inside a branch that only a CUDA compilation sees.
device_only_lines <- function(lines) {
  cuda <- "(__CUDA_ARCH__|__CUDACC__)"
  on <- logical()   # per open #if: its current branch is device-only
  neg <- logical()  # per open #if: an #ifndef of the CUDA macro (device-only after #else)
  out <- logical(length(lines))
  for (i in seq_along(lines)) {
    l <- lines[[i]]
    if (grepl("^\\s*#\\s*if", l)) {
      on <- c(on, grepl(paste0("^\\s*#\\s*(ifdef\\s+", cuda, "|if\\s+defined\\s*\\(?\\s*", cuda, ")"), l))
      neg <- c(neg, grepl(paste0("^\\s*#\\s*ifndef\\s+", cuda), l))
    } else if (grepl("^\\s*#\\s*(else|elif)", l) && length(on)) {
      n <- length(on)
      on[[n]] <- neg[[n]]
      neg[[n]] <- FALSE
    } else if (grepl("^\\s*#\\s*endif", l) && length(on)) {
      on <- on[-length(on)]; neg <- neg[-length(neg)]
    }
    out[[i]] <- any(on)
  }
  out
}

rel_to <- list("<" = c("<=", ">="), "<=" = c("<", ">"), ">" = c(">=", "<="), ">=" = c(">", "<"),
               "==" = "!=", "!=" = "==")

# Add d (+1 or -1) to a string of digits in base b (any length).
digits_add <- function(s, d, b) {
  ds <- strtoi(strsplit(s, "")[[1L]], b)
  i <- length(ds)
  repeat {
    ds[[i]] <- ds[[i]] + d
    if (ds[[i]] >= 0 && ds[[i]] < b) break
    ds[[i]] <- (ds[[i]] + b) %% b
    i <- i - 1L
    if (i == 0L) { ds <- c(1L, ds); break }
  }
  r <- paste(c(0:9, letters[1:6])[ds + 1L], collapse = "")
  r <- sub("^0+(?=.)", "", r, perl = TRUE)
  r
}

nudge_c <- function(t) {
  if (grepl("^0[xX]", t)) {
    body <- sub("^0[xX]([0-9a-fA-F]+).*", "\\1", t); suf <- sub("^0[xX][0-9a-fA-F]+", "", t)
    up <- toupper(body) == body
    f <- function(x) paste0(substr(t, 1, 2), if (up) toupper(x) else x, suf)
    if (all(strtoi(strsplit(body, "")[[1L]], 16L) == 0L)) return(f("1"))
    return(c(f(digits_add(tolower(body), 1L, 16L)), f(digits_add(tolower(body), -1L, 16L))))
  }
  if (grepl("^[0-9]+[uUlL]*$", t)) {
    body <- sub("[uUlL]*$", "", t); suf <- sub("^[0-9]+", "", t)
    if (grepl("^0+$", body)) return(paste0("1", suf))
    return(c(paste0(digits_add(body, 1L, 10L), suf), paste0(digits_add(body, -1L, 10L), suf)))
  }
  suf <- sub("^.*?([fFlL]?)$", "\\1", t)
  v <- as.numeric(sub("[fFlL]$", "", t))
  nudge_real(v, suf)
}

nudge_real <- function(v, suf = "") {
  to <- if (v == 0) 1 else v * 1.1
  s <- sprintf("%.15g", to)
  # drop the trailing zeros of the mantissa's fraction only (1.1e-10 keeps
  # its exponent, 22000000 its digits)
  mant <- sub("e.*$", "", s); ex <- sub("^[^e]*", "", s)
  if (grepl(".", mant, fixed = TRUE)) mant <- sub("\\.$", "", sub("0+$", "", mant))
  s <- paste0(mant, ex)
  if (!grepl("[.e]", s)) s <- paste0(s, ".0")
  paste0(s, suf)
}

# ---- R sites --------------------------------------------------------------

r_sites <- function(root, file) {
  path <- file.path(root, file)
  pd <- utils::getParseData(parse(path, keep.source = TRUE), includeText = TRUE)
  lines <- readLines(path)
  pd <- pd[pd$terminal, ]
  sites <- list()
  add <- function(i, from, to, kind) {
    r <- pd[i, ]
    ln <- lines[[r$line1]]
    # parse data columns count characters with tabs expanded to 8: find the
    # token on its line near that column
    hits <- gregexpr(from, ln, fixed = TRUE)[[1L]]
    if (hits[[1L]] < 0) return()
    col <- hits[[which.min(abs(hits - r$col1))]]
    sites[[length(sites) + 1L]] <<- data.frame(file = file, line = r$line1, offset = col,
                                               from = from, to = to, kind = kind)
  }
  parent_kids <- table(pd$parent)
  all_pd <- utils::getParseData(parse(path, keep.source = TRUE))
  n_kids <- table(all_pd$parent)
  for (i in seq_len(nrow(pd))) {
    tk <- pd$token[[i]]; tx <- pd$text[[i]]
    if (tk == "NUM_CONST") {
      if (tx %in% c("TRUE", "FALSE")) add(i, tx, if (tx == "TRUE") "FALSE" else "TRUE", "constant")
      else if (grepl("^[0-9.]", tx)) for (to in nudge_r(tx)) add(i, tx, to, "constant")
    } else if (tx %in% c("+", "-", "*", "/")) {
      unary <- n_kids[[as.character(pd$parent[[i]])]] == 2L
      if (unary && tx == "-") add(i, tx, "", "arithmetic")
      else if (!unary) add(i, tx, c("+" = "-", "-" = "+", "*" = "/", "/" = "*")[[tx]], "arithmetic")
    } else if (tk %in% c("LT", "GT", "LE", "GE", "EQ", "NE")) {
      for (to in rel_to[[tx]]) add(i, tx, to, "relational")
    } else if (tk %in% c("AND2", "OR2", "AND", "OR")) {
      add(i, tx, c("&&" = "||", "||" = "&&", "&" = "|", "|" = "&")[[tx]], "logical")
    } else if (tk == "'!'") {
      add(i, tx, "", "logical")
    }
  }
  do.call(rbind, sites)
}

nudge_r <- function(t) {
  if (grepl("^0[xX]", t)) return(character())
  if (grepl("^[0-9]+L$", t)) {
    body <- sub("L$", "", t)
    if (grepl("^0+$", body)) return("1L")
    return(c(paste0(digits_add(body, 1L, 10L), "L"), paste0(digits_add(body, -1L, 10L), "L")))
  }
  if (grepl("^[0-9]+$", t)) {
    if (grepl("^0+$", t)) return("1")
    return(c(digits_add(t, 1L, 10L), digits_add(t, -1L, 10L)))
  }
  nudge_real(as.numeric(t))
}

population <- function(root) {
  files <- site_files(root)
  td <- c_typedefs(root)
  s <- do.call(rbind, lapply(files$file, function(f)
    if (grepl("\\.R$", f)) r_sites(root, f) else c_sites(root, f, td)))
  s$tests <- files$tests[match(s$file, files$file)]
  s <- s[order(s$file, s$offset, s$to), ]
  s$id <- sprintf("m%04d", seq_len(nrow(s)))
  src <- lapply(setNames(nm = unique(s$file)), function(f) readLines(file.path(root, f)))
  s$line_text <- trimws(vapply(seq_len(nrow(s)), function(i) src[[s$file[[i]]]][[s$line[[i]]]], ""))
  rownames(s) <- NULL
  s
}

# Apply one site to the text of its file: C offsets count in the whole
# file (1-based), R offsets in the line.
apply_site <- function(text, site) {
  if (grepl("\\.R$", site$file)) {
    lines <- strsplit(text, "\n", fixed = TRUE)[[1L]]
    ln <- lines[[site$line]]
    stopifnot(substr(ln, site$offset, site$offset + nchar(site$from) - 1L) == site$from)
    lines[[site$line]] <- paste0(substr(ln, 1L, site$offset - 1L), site$to,
                                 substr(ln, site$offset + nchar(site$from), nchar(ln)))
    return(paste0(paste(lines, collapse = "\n"), "\n"))
  }
  stopifnot(substr(text, site$offset, site$offset + nchar(site$from) - 1L) == site$from)
  to <- site$to
  # a removed `-` or `!` must not glue its neighbours into a new token
  if (!nzchar(to)) to <- " "
  paste0(substr(text, 1L, site$offset - 1L), to, substr(text, site$offset + nchar(site$from), nchar(text)))
}

mutated_line <- function(root, site) {
  text <- paste0(paste(readLines(file.path(root, site$file)), collapse = "\n"), "\n")
  trimws(strsplit(apply_site(text, site), "\n", fixed = TRUE)[[1L]][[site$line]])
}

list_all <- function(cfg) {
  p <- population(cfg$root)
  dir.create(cfg$out, recursive = TRUE, showWarnings = FALSE)
  utils::write.csv(p, file.path(cfg$out, "mutants-all.csv"), row.names = FALSE)
  say(nrow(p), " mutants in ", length(unique(p$file)), " files; by kind:")
  print(table(p$kind))
  print(sort(table(p$file), decreasing = TRUE))
}

draw <- function(cfg) {
  p <- population(cfg$root)
  if (nzchar(cfg$files)) { # a regular expression over the paths: a partial run
    p <- p[grepl(cfg$files, p$file), ]
    if (!nrow(p)) stop("MUT_FILES = ", cfg$files, " matches no mutated file")
  }
  set.seed(cfg$seed, kind = "Mersenne-Twister", normal.kind = "Inversion", sample.kind = "Rejection")
  s <- p[sort(sample.int(nrow(p), min(cfg$n, nrow(p)))), ]
  if (nzchar(cfg$ids)) { # re-judge some mutants of the sample (e.g. after tests were added)
    ids <- strsplit(cfg$ids, "[ ,]+")[[1L]]
    if (length(bad <- setdiff(ids, s$id))) stop("MUT_IDS: not in the sample: ", paste(bad, collapse = " "))
    s <- s[s$id %in% ids, ]
  }
  s$mutated_text <- vapply(seq_len(nrow(s)), function(i) mutated_line(cfg$root, s[i, ]), "")
  list(all = p, sample = s)
}

# ---- prepare: one unmutated CPU-only build, its compile commands ----------

source_stamp <- function(root) {
  f <- c(list.files(file.path(root, "src"), "\\.(c|h|in)$", recursive = TRUE, full.names = TRUE),
         list.files(file.path(root, "R"), "\\.R$", full.names = TRUE), file.path(root, "DESCRIPTION"))
  paste(tools::md5sum(f), collapse = "")
}

prepare <- function(cfg) {
  prep <- cfg$prep
  unlink(prep, recursive = TRUE); dir.create(prep, recursive = TRUE)
  base <- file.path(prep, "base"); lib <- file.path(prep, "lib"); log <- file.path(prep, "install.log")
  dir.create(base); dir.create(lib)
  say("copying the tree to ", base)
  files <- if (dir.exists(file.path(cfg$root, ".git")) || file.exists(file.path(cfg$root, ".git"))) {
    system2("git", c("-C", shQuote(cfg$root), "ls-files", "-co", "--exclude-standard"), stdout = TRUE)
  } else list.files(cfg$root, recursive = TRUE, all.files = FALSE)
  files <- files[!grepl("^(\\.mutants|check|\\.device|\\.lib)/", files) & file.exists(file.path(cfg$root, files))]
  for (d in unique(dirname(files))) dir.create(file.path(base, d), recursive = TRUE, showWarnings = FALSE)
  file.copy(file.path(cfg$root, files), file.path(base, files), overwrite = TRUE)
  # CPU-only; libSBML when configure finds it (SYSBIOGPU_SBML as set)
  say("building it CPU-only (R CMD INSTALL, log in ", log, ")")
  rc <- sh(sprintf("SYSBIOGPU_CUDA=no %s CMD INSTALL --no-docs --no-test-load -l %s .",
                   shQuote(file.path(R.home("bin"), "R")), shQuote(lib)), base, log)
  if (rc != 0) stop("the unmutated tree does not build; see ", log)
  lg <- readLines(log)
  cc <- grep(" -c \\S+\\.c -o \\S+\\.o\\s*$", lg, value = TRUE)
  ld <- grep(" -shared .*-o sysbioGPU\\.so ", lg, value = TRUE)
  if (!length(cc) || length(ld) != 1L) stop("cannot find the compile and link commands in ", log)
  # without -g: debug information does not change the code, and it makes
  # the objects (carried to other machines) four times larger
  strip_g <- function(x) gsub("(^| )-g( |$)", "\\1", x)
  obj <- sub(".* -o (\\S+\\.o)\\s*$", "\\1", cc)
  src <- sub(".* -c (\\S+\\.c) -o .*", "\\1", cc)
  db <- data.frame(src = src, obj = obj, cmd = strip_g(cc))
  src_dir <- file.path(base, "src")
  say("recompiling ", nrow(db), " objects without -g and recording their headers")
  deps <- character(nrow(db))
  for (i in seq_len(nrow(db))) {
    if (sh(db$cmd[[i]], src_dir) != 0) stop("cannot recompile ", db$src[[i]])
    mm <- system(sprintf("cd %s && %s", shQuote(src_dir),
                         sub(" -c (\\S+\\.c) -o \\S+\\.o\\s*$", " -MM \\1", db$cmd[[i]])), intern = TRUE)
    d <- strsplit(gsub("\\\\", " ", paste(mm, collapse = " ")), "\\s+")[[1L]][-1L]
    d <- d[nzchar(d) & !grepl("^/", d)]
    deps[[i]] <- paste(normalizePath(file.path(src_dir, d)) |> sub(pattern = paste0("^", normalizePath(base), "/"),
                                                                    replacement = ""), collapse = " ")
  }
  db$deps <- deps
  link <- strip_g(ld)
  if (sh(link, src_dir) != 0) stop("cannot relink")
  file.copy(file.path(src_dir, "sysbioGPU.so"), file.path(lib, "sysbioGPU/libs/sysbioGPU.so"), overwrite = TRUE)
  utils::write.table(db, file.path(prep, "compile.tsv"), sep = "\t", row.names = FALSE, quote = FALSE)
  writeLines(link, file.path(prep, "link.txt"))
  writeLines(source_stamp(cfg$root), file.path(prep, "stamp.txt"))
  # what a machine without libSBML's development files needs to compile
  # lassie_sbml.c: its headers travel with the prepared folder, packed
  if (any(grepl("SBG_HAVE_SBML", db$cmd)) && dir.exists("/usr/include/sbml")) {
    if (system(sprintf("tar -cJf %s -C /usr/include sbml", shQuote(file.path(prep, "sbml-include.tar.xz")))) != 0)
      stop("cannot pack libSBML's headers")
  }
  # the workers need the sources and objects only (the tests run from the
  # repository, the R readers are read from base/R)
  unlink(file.path(base, setdiff(list.files(base, all.files = TRUE, no.. = TRUE), c("src", "R"))), recursive = TRUE)
  say("prepared ", prep, " (", nrow(db), " objects)")
  db
}

# ---- running ---------------------------------------------------------------

load_prep <- function(cfg) {
  stamp <- file.path(cfg$prep, "stamp.txt")
  if (!file.exists(stamp) || readLines(stamp) != source_stamp(cfg$root)) {
    say("no prepared build of this tree in ", cfg$prep, ": preparing")
    prepare(cfg)
  }
  list(db = utils::read.delim(file.path(cfg$prep, "compile.tsv"), quote = "", stringsAsFactors = FALSE),
       link = readLines(file.path(cfg$prep, "link.txt")))
}

# Environment of every compile and link: libraries and headers brought along.
build_env <- function(cfg, work) {
  e <- character()
  tarball <- file.path(cfg$prep, "sbml-include.tar.xz")
  if (file.exists(tarball)) {
    dir.create(file.path(work, "include"), showWarnings = FALSE)
    if (system(sprintf("tar -xJf %s -C %s", shQuote(tarball), shQuote(file.path(work, "include")))) != 0)
      stop("cannot unpack ", tarball)
  }
  inc <- c(if (file.exists(tarball)) file.path(work, "include"), strsplit(cfg$cpath, ":")[[1L]])
  if (length(inc)) e <- c(e, paste0("CPATH=", paste(inc, collapse = ":")))
  ldir <- file.path(work, "ld")
  dir.create(ldir, showWarnings = FALSE)
  for (d in strsplit(cfg$libdirs, ":")[[1L]]) {
    for (so in list.files(d, "^lib.*\\.so\\.")) {
      plain <- file.path(ldir, sub("\\.so\\..*$", ".so", so))
      if (!file.exists(plain)) file.symlink(normalizePath(file.path(d, so)), plain)
    }
  }
  e <- c(e, paste0("LIBRARY_PATH=", ldir))
  paste(e, collapse = " ")
}

# A file name for a list of test files: the list itself, or (longer than
# file systems allow for a name) its start and a checksum of the whole.
list_key <- function(tl) {
  key <- gsub("[^A-Za-z0-9]", "_", tl)
  if (nchar(key) <= 150L) return(key)
  code <- utf8ToInt(tl)
  sum <- sum(as.numeric(code) * seq_along(code)) %% 2147483647
  paste0(substr(key, 1L, 120L), "_", sprintf("%010.0f", sum))
}

# Which objects compile unmutated here, and the unmutated tests of each
# test list: they must pass, and their time sets the time limit.
baseline <- function(cfg, prep, s, benv, work) {
  # which C files compile unmutated here (else their mutants are skipped)
  cfiles <- unique(s$file[!grepl("\\.R$", s$file)])
  objs <- unique(unlist(lapply(cfiles, function(f) prep$db$obj[grepl(paste0("(^| )", f, "( |$)"), prep$db$deps)])))
  ok_obj <- unlist(parallel::mclapply(objs, function(o) {
    cmd <- sub(" -o \\S+\\.o\\s*$", " -o /dev/null", prep$db$cmd[prep$db$obj == o])
    sh(paste(benv, cmd), file.path(cfg$prep, "base/src"), file.path(work, "base-compile.log")) == 0
  }, mc.cores = cfg$jobs))
  bad_obj <- objs[!ok_obj]
  if (length(bad_obj)) say("these objects do not compile unmutated here (their mutants are skipped): ",
                           paste(bad_obj, collapse = " "), "; see ", file.path(work, "base-compile.log"))
  lists <- unique(s$tests)
  base_lib <- file.path(cfg$prep, "lib")
  # a run that goes on where another stopped keeps its measurements
  bfile <- file.path(cfg$out, "baseline.tsv")
  if (file.exists(bfile)) {
    old <- utils::read.delim(bfile, header = FALSE, col.names = c("tests", "secs"), quote = "")
    if (all(lists %in% old$tests)) {
      say("unmutated test times from ", bfile)
      return(list(secs = setNames(old$secs, old$tests), bad_obj = bad_obj))
    }
  }
  bt <- parallel::mclapply(lists, function(tl) {
    a <- Sys.time()
    r <- run_tests(cfg, base_lib, NULL, tl, file.path(cfg$out, "logs", paste0("baseline-", list_key(tl), ".log")), Inf)
    list(r = r, secs = as.numeric(difftime(Sys.time(), a, units = "secs")))
  }, mc.cores = cfg$jobs, mc.preschedule = FALSE)
  base_secs <- setNames(vapply(bt, function(x) x$secs, 0), lists)
  for (i in seq_along(lists)) {
    say(sprintf("unmutated %-60s %6.1f s  %s", lists[[i]], base_secs[[i]], bt[[i]]$r$outcome))
    if (bt[[i]]$r$outcome != "survived") stop("the unmutated tree fails its tests (", lists[[i]], "): ", bt[[i]]$r$detail)
  }
  writeLines(sprintf("%s\t%.1f", lists, base_secs), bfile)
  list(secs = base_secs, bad_obj = bad_obj)
}

run_all <- function(cfg) {
  t0 <- Sys.time()
  prep <- load_prep(cfg)
  d <- draw(cfg)
  s <- d$sample
  if (!nrow(s)) stop("no mutant drawn")
  dir.create(file.path(cfg$out, "results"), recursive = TRUE, showWarnings = FALSE)
  dir.create(file.path(cfg$out, "claims"), showWarnings = FALSE)
  dir.create(file.path(cfg$out, "logs"), showWarnings = FALSE)
  utils::write.csv(s, file.path(cfg$out, "sample.csv"), row.names = FALSE)
  say(nrow(d$all), " mutants in ", length(unique(d$all$file)), " files; ", nrow(s), " drawn (seed ",
      cfg$seed, "), ", cfg$jobs, " workers")
  # a mutant claimed by a run that was stopped runs again
  claimed <- list.files(file.path(cfg$out, "claims"))
  done <- sub("\\.tsv$", "", list.files(file.path(cfg$out, "results")))
  unlink(file.path(cfg$out, "claims", setdiff(claimed, done)), recursive = TRUE)
  work <- file.path(cfg$out, "work")
  unlink(work, recursive = TRUE)
  dir.create(work, showWarnings = FALSE)
  benv <- build_env(cfg, work)
  b <- baseline(cfg, prep, s, benv, work)
  cfg$bad_obj <- b$bad_obj
  base_secs <- b$secs
  deadline <- as.numeric(t0) + cfg$deadline
  parallel::mclapply(seq_len(cfg$jobs), function(w) worker(cfg, prep, s, w, base_secs, benv, deadline),
                     mc.cores = cfg$jobs, mc.preschedule = FALSE)
  report(cfg)
  say("wall time ", round(as.numeric(difftime(Sys.time(), t0, units = "mins")), 1), " min")
}

worker <- function(cfg, prep, s, w, base_secs, benv, deadline) {
  wd <- file.path(cfg$out, "work", paste0("w", w))
  base <- file.path(cfg$prep, "base")
  if (!dir.exists(wd)) {
    dir.create(wd)
    file.copy(base, wd, recursive = TRUE, copy.date = TRUE)
    file.copy(file.path(cfg$prep, "lib"), wd, recursive = TRUE, copy.date = TRUE)
  }
  tree <- file.path(wd, "base"); lib <- file.path(wd, "lib")
  so_base <- file.path(cfg$prep, "lib/sysbioGPU/libs/sysbioGPU.so")
  for (i in seq_len(nrow(s))) {
    site <- s[i, ]
    if (file.exists(file.path(cfg$out, "results", paste0(site$id, ".tsv")))) next
    if (as.numeric(Sys.time()) > deadline) break
    if (!dir.create(file.path(cfg$out, "claims", site$id), showWarnings = FALSE)) next
    a <- Sys.time(); cpu0 <- sum(proc.time()[c(4L, 5L)], na.rm = TRUE)
    log <- file.path(cfg$out, "logs", paste0(site$id, ".log"))
    res <- one_mutant(cfg, prep, site, tree, lib, base, so_base, benv, log,
                      tmo = cfg$tfactor * base_secs[[site$tests]] + 30)
    if (res$outcome == "interrupted") { unlink(file.path(cfg$out, "claims", site$id), recursive = TRUE); break }
    secs <- as.numeric(difftime(Sys.time(), a, units = "secs"))
    cpu <- sum(proc.time()[c(4L, 5L)], na.rm = TRUE) - cpu0 # its compiler and test processes
    writeLines(paste(site$id, res$outcome, res$detail, sprintf("%.1f", secs), sprintf("%.1f", res$build),
                     sprintf("%.1f", cpu), sep = "\t"),
               file.path(cfg$out, "results", paste0(site$id, ".tsv")))
    say(sprintf("%s %-34s %-12s %-30s %5.1f s", site$id, paste0(site$file, ":", site$line),
                res$outcome, res$detail, secs))
  }
}

one_mutant <- function(cfg, prep, site, tree, lib, base, so_base, benv, log, tmo) {
  path <- file.path(tree, site$file)
  orig <- paste0(paste(readLines(file.path(base, site$file)), collapse = "\n"), "\n")
  mutated <- apply_site(orig, site)
  a <- Sys.time()
  if (grepl("\\.R$", site$file)) {
    patch <- file.path(dirname(log), paste0(site$id, "-", basename(site$file)))
    writeLines(mutated, patch, sep = "")
    r <- run_tests(cfg, lib, patch, site$tests, log, tmo)
    unlink(patch)
    r$build <- 0
    return(r)
  }
  objs <- prep$db$obj[grepl(paste0("(^| )", site$file, "( |$)"), prep$db$deps)]
  if (any(objs %in% cfg$bad_obj)) return(list(outcome = "skipped", detail = "does not compile here unmutated", build = 0))
  writeLines(mutated, path, sep = "")
  on.exit({
    file.copy(file.path(base, site$file), path, overwrite = TRUE)
    file.copy(file.path(base, "src", objs), file.path(tree, "src", objs), overwrite = TRUE)
    file.copy(so_base, file.path(lib, "sysbioGPU/libs/sysbioGPU.so"), overwrite = TRUE)
  })
  src_dir <- file.path(tree, "src")
  ok <- TRUE
  for (o in objs) {
    if (sh(paste(benv, prep$db$cmd[prep$db$obj == o]), src_dir, log) != 0) { ok <- FALSE; break }
  }
  if (ok) ok <- sh(paste(benv, prep$link), src_dir, log) == 0
  build <- as.numeric(difftime(Sys.time(), a, units = "secs"))
  if (!ok) return(list(outcome = "no-compile", detail = "", build = build))
  file.copy(file.path(src_dir, "sysbioGPU.so"), file.path(lib, "sysbioGPU/libs/sysbioGPU.so"), overwrite = TRUE)
  r <- run_tests(cfg, lib, NULL, site$tests, log, tmo)
  r$build <- build
  r
}

# One R process runs the test files in order and stops at the first failing
# expectation; it writes the file it is in, so a crash names it too.
run_tests <- function(cfg, lib, patch, tests, log, tmo) {
  status <- tempfile("mut-status-")
  on.exit(unlink(status))
  files <- strsplit(tests, ",", fixed = TRUE)[[1L]]
  tdir <- file.path(cfg$root, "tests/testthat")
  args <- c("test", lib, if (is.null(patch)) "-" else patch, status, cfg$threads, files)
  ldp <- paste(c(strsplit(cfg$libdirs, ":")[[1L]], Sys.getenv("LD_LIBRARY_PATH")), collapse = ":")
  cmd <- sprintf("cd %s && LD_LIBRARY_PATH=%s R_LIBS=%s OMP_NUM_THREADS=%d timeout -k 10 %d %s --vanilla %s %s >> %s 2>&1",
                 shQuote(tdir), shQuote(ldp), shQuote(paste(c(lib, .libPaths()), collapse = ":")), cfg$threads,
                 as.integer(ceiling(min(tmo, 86400))), shQuote(file.path(R.home("bin"), "Rscript")),
                 shQuote(normalizePath(script_path())), paste(shQuote(args), collapse = " "), shQuote(log))
  rc <- system(cmd)
  st <- if (file.exists(status)) readLines(status) else character()
  where <- if (length(st)) st[[length(st)]] else ""
  if (rc == 124L || rc == 137L) return(list(outcome = "timeout", detail = where))
  # stopped from outside (an outer time limit, Ctrl-C): no verdict
  if (rc %in% c(129L, 130L, 143L)) return(list(outcome = "interrupted", detail = where))
  if (rc == 0L) return(list(outcome = "survived", detail = ""))
  if (rc == 3L) return(list(outcome = "no-compile", detail = "R cannot source it"))
  list(outcome = "killed", detail = if (rc == 1L) where else paste0(where, " (crash, status ", rc, ")"))
}

# ---- inside the test process ----------------------------------------------

test_mutant <- function(a) {
  lib <- a[[1L]]; patch <- a[[2L]]; status <- a[[3L]]; threads <- as.integer(a[[4L]]); files <- a[-(1:4)]
  suppressPackageStartupMessages(library(sysbioGPU, lib.loc = lib))
  options(sysbioGPU.threads = threads, sysbioGPU.backend = "cpu")
  if (patch != "-") {
    ok <- tryCatch({ patch_namespace(patch); TRUE }, error = function(e) { message(conditionMessage(e)); FALSE })
    if (!ok) quit(save = "no", status = 3L)
  }
  Stopper <- R6_stopper(status)
  for (f in files) {
    cat(f, "\n", sep = "", file = status, append = TRUE)
    r <- tryCatch({
      testthat::test_file(f, package = "sysbioGPU", load_package = "installed", reporter = Stopper$new())
      TRUE
    }, error = function(e) { message("error: ", conditionMessage(e)); FALSE })
    if (!isTRUE(r)) quit(save = "no", status = 1L)
  }
  quit(save = "no", status = 0L)
}

# A reporter that ends the process at the first failed or erroring expectation.
R6_stopper <- function(status) {
  R6::R6Class("MutStop", inherit = testthat::Reporter, public = list(
    add_result = function(context, test, result) {
      if (inherits(result, c("expectation_failure", "expectation_error"))) {
        message("killed at: ", test, ": ", conditionMessage(result))
        quit(save = "no", status = 1L)
      }
    }))
}

# Source a mutated R file over the installed namespace and its attached
# exports, so that the tests call the mutated functions.
patch_namespace <- function(patch) {
  ns <- asNamespace("sysbioGPU")
  e <- new.env(parent = ns)
  sys.source(patch, envir = e, keep.source = FALSE)
  pkg <- as.environment("package:sysbioGPU")
  for (nm in ls(e, all.names = TRUE)) {
    obj <- get(nm, envir = e)
    if (is.function(obj) && identical(environment(obj), e)) environment(obj) <- ns
    for (where in list(ns, pkg)) {
      if (exists(nm, envir = where, inherits = FALSE)) {
        locked <- bindingIsLocked(nm, where)
        if (locked) unlockBinding(nm, where)
        assign(nm, obj, envir = where)
        if (locked) lockBinding(nm, where)
      }
    }
  }
}

# ---- tables --------------------------------------------------------------

report <- function(cfg) {
  s <- utils::read.csv(file.path(cfg$out, "sample.csv"), stringsAsFactors = FALSE)
  rf <- list.files(file.path(cfg$out, "results"), "\\.tsv$", full.names = TRUE)
  r <- do.call(rbind, lapply(rf, function(f) {
    x <- strsplit(readLines(f, warn = FALSE)[[1L]], "\t", fixed = TRUE)[[1L]]
    length(x) <- 6L
    data.frame(id = x[[1L]], outcome = x[[2L]], detail = x[[3L]], seconds = as.numeric(x[[4L]]),
               build_seconds = as.numeric(x[[5L]]), cpu_seconds = as.numeric(x[[6L]]))
  }))
  if (is.null(r)) r <- data.frame(id = character(), outcome = character(), detail = character(),
                                  seconds = numeric(), build_seconds = numeric(), cpu_seconds = numeric())
  t <- merge(s[, c("id", "file", "line", "kind", "from", "to", "line_text", "mutated_text", "tests")],
             r, by = "id", all.x = TRUE)
  t$outcome[is.na(t$outcome)] <- "not run"
  t <- t[order(t$id), ]
  t$mutation <- sprintf("%s -> %s", t$from, ifelse(nzchar(t$to), t$to, "(removed)"))
  utils::write.csv(t, file.path(cfg$out, "mutants-auto.csv"), row.names = FALSE)
  k <- sum(t$outcome %in% c("killed", "timeout")); sv <- sum(t$outcome == "survived")
  nc <- sum(t$outcome == "no-compile"); sk <- sum(t$outcome == "skipped"); nr <- sum(t$outcome == "not run")
  summ <- sprintf(paste("%d of %d compiled mutants killed (%.1f%%; %d by a timeout), %d survived, %d did not compile,",
                        "%d skipped, %d not run; a mutant took %.1f s (median; mean %.1f s) and %.1f s of CPU (mean)"),
                  k, k + sv, if (k + sv) 100 * k / (k + sv) else 0, sum(t$outcome == "timeout"), sv, nc, sk, nr,
                  stats::median(t$seconds, na.rm = TRUE), mean(t$seconds, na.rm = TRUE), mean(t$cpu_seconds, na.rm = TRUE))
  md <- c("| id | file:line | mutation | line | outcome | s |", "|---|---|---|---|---|---|",
          sprintf("| %s | %s:%d | `%s` | `%s` | %s | %.1f |", t$id, t$file, t$line, t$mutation,
                  gsub("|", "\\|", substr(t$line_text, 1, 80), fixed = TRUE),
                  ifelse(t$outcome == "killed", paste("killed by", t$detail),
                         ifelse(nzchar(ifelse(is.na(t$detail), "", t$detail)) & t$outcome != "survived",
                                paste(t$outcome, t$detail), t$outcome)),
                  t$seconds),
          "", summ)
  writeLines(md, file.path(cfg$out, "mutants-auto.md"))
  say(summ)
  say("tables: ", file.path(cfg$out, "mutants-auto.csv"), " and .md")
  invisible(t)
}

if (sys.nframe() == 0L) main(commandArgs(TRUE))
