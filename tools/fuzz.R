#!/usr/bin/env Rscript
# Fuzz harness of sysbioGPU: mutates the shipped example files
# (inst/extdata), runs each reader and then its method on every mutant in
# child processes (CPU, one thread, small settings) and reports, per
# reader: successes, classed errors (class sysbioGPU_error), UNCLASSED
# errors (with examples), crashes (the child died), hangs (timeout),
# "suspect" results (a success whose output holds NaN where it must not)
# and "base" failures (the harness's own base-R read of a GRN CSV failed,
# so the package never saw the input).
#
# Usage (after `make install`, or with R_LIBS pointing at a library that
# holds sysbioGPU):
#   Rscript tools/fuzz.R [--n=2000] [--seed=1] [--readers=gct,cls,...]
#                        [--out=check/fuzz-out] [--batch=40] [--timeout=20]
#                        [--jobs=1] [--quiet]
#   Rscript tools/fuzz.R --repro=check/fuzz-out/failing/edges/edges-00017.txt
# Readers: see fuzz_targets() (gct cls gmt rnk edges bnet assa bngl sbml
# grnnet grnstate).  Deterministic given --seed: mutant i of reader r is
# drawn from its own seed, so --n only adds mutants.  Writes
# <out>/summary.tsv, <out>/results.tsv and the failing mutants (unclassed,
# crash, hang, suspect) under <out>/failing/<reader>/ with repro commands
# in <out>/failing/REPRO.txt.
#
# Speed: mutants run in batches (one Rscript per batch).  When a batch's
# child dies or times out, its unfinished mutants are rerun one per child
# to find the culprit.  Big shipped files are cut to a valid head (first
# 300 genes of the GCT, 150 sets of the GMT, 800 edges) so each mutant
# takes milliseconds.

fuzz_args <- function(args) {
  opt <- list(n = 2000, seed = 1, readers = NULL, out = "check/fuzz-out", batch = 40,
              timeout = 20, jobs = 1, quiet = FALSE, child = NULL, repro = NULL)
  for (a in args) {
    kv <- regmatches(a, regexec("^--([a-z]+)(=(.*))?$", a))[[1]]
    if (!length(kv)) stop("fuzz.R: unknown argument ", a)
    key <- kv[2]; val <- kv[4]
    if (!key %in% names(opt)) stop("fuzz.R: unknown option --", key)
    opt[[key]] <- switch(key,
      readers = strsplit(val, ",", fixed = TRUE)[[1]],
      out = , child = , repro = val,
      quiet = TRUE,
      as.numeric(val))
  }
  opt
}

# ---------------------------------------------------------------- targets
# Each target: seeds (files made from inst/extdata in `dir`), context (what
# the method needs besides the mutant, computed once per child), read (the
# reader on a mutant path) and method (the method on what was read, small
# settings); check returns a problem string for a suspect result or NULL.

fuzz_extdata <- function() {
  d <- system.file("extdata", package = "sysbioGPU")
  if (!nzchar(d)) stop("fuzz.R: sysbioGPU is not installed in .libPaths()")
  d
}

write_head <- function(from, to, n, header = 0L) {
  x <- readLines(from, warn = FALSE)
  writeLines(x[seq_len(min(length(x), header + n))], to)
  to
}

fuzz_seeds <- function(dir) {
  x <- fuzz_extdata()
  dir.create(dir, showWarnings = FALSE, recursive = TRUE)
  s <- function(...) file.path(dir, ...)
  gct <- readLines(file.path(x, "leukemia_small.gct"))
  ng <- 300L
  writeLines(c(gct[1], sub("^[0-9]+", ng, gct[2]), gct[3:(3 + ng)]), s("small.gct"))
  file.copy(file.path(x, "leukemia_small.cls"), s("leukemia_small.cls"), overwrite = TRUE)
  file.copy(file.path(x, "gsea_edb", "C1OE.cls"), s("C1OE.cls"), overwrite = TRUE)
  write_head(file.path(x, "leukemia_go.gmt"), s("small.gmt"), 150L)
  file.copy(file.path(x, "gsea_edb", "gene_sets.gmt"), s("gene_sets.gmt"), overwrite = TRUE)
  file.copy(file.path(x, "gsea_edb", "gsea_data.gsea_data.rnk"), s("data.rnk"), overwrite = TRUE)
  write_head(file.path(x, "yeast-string-edges.txt.gz"), s("edges.txt"), 800L, header = 1L)
  file.copy(file.path(x, "pbn-example.bnet"), s("example.bnet"), overwrite = TRUE)
  file.copy(file.path(x, "pbn-example.pbn"), s("example.pbn"), overwrite = TRUE)
  for (f in c("Haugh2b.net", "Repressilator.net", "test_fixed.net", "lassie_small.sbml")) {
    file.copy(file.path(x, "lassie", f), s(f), overwrite = TRUE)
  }
  file.copy(file.path(x, "grn", "mouse_eye_network.csv"), s("net.csv"), overwrite = TRUE)
  file.copy(file.path(x, "grn", "mouse_eye_states.csv"), s("states.csv"), overwrite = TRUE)
  invisible(dir)
}

# An error of the harness's own base-R reading: not the package's.
base_error <- function(e) {
  stop(structure(class = c("fuzz_base_error", "error", "condition"),
                 list(message = conditionMessage(e), call = NULL)))
}


# a PBN read from a .bnet or ASSA-PBN mutant, simulated and estimated
pbn_run <- function(net, ctx) {
  sysbioGPU::pbnSimulate(net, 10, trajectories = 2, seed = 1, backend = "cpu", threads = 1)
  sysbioGPU::pbnSteadyState(net, r = 0.1, s = 0.9, maxSteps = 2e5, seed = 1,
                            backend = "cpu", threads = 1, verbose = FALSE)
}
pbn_check <- function(r) {
  p <- r$probability[r$converged]  # NaN by design when not converged
  if (any(is.na(p)) || any(p < 0 | p > 1)) "probability NA or outside [0, 1]"
}

fuzz_targets <- function() {
  gsea_ctx <- function(dir) {
    full <- file.path(fuzz_extdata(), "leukemia_small.gct")
    small <- sysbioGPU::readGCT(file.path(dir, "small.gct"))
    g <- rownames(small)
    list(small = small, full = sysbioGPU::readGCT(full),
         cls = sysbioGPU::readCLS(file.path(dir, "leukemia_small.cls")),
         sets = list(first = g[1:20], every7 = g[seq(1, length(g), 7)]),
         gmt = sysbioGPU::readGMT(file.path(dir, "small.gmt")),
         c1oe = sysbioGPU::readGMT(file.path(dir, "gene_sets.gmt")))
  }
  gsea_run <- function(expr, cls, sets, ...) {
    sysbioGPU::rapidGSEA(expr, cls, sets, nperm = 7, minSize = 1, maxSize = 1000, seed = 1,
                         backend = "cpu", threads = 1, verbose = FALSE, ...)
  }
  # NES is NaN by design when no null ES has the observed sign (few perms).
  gsea_check <- function(r) {
    if (any(!is.finite(r$ES)) || any(abs(r$ES) > 1)) "ES not finite or outside [-1, 1]"
    else if (any(is.infinite(r$NES))) "infinite NES"
  }
  lassie_run <- function(m, ctx) {
    sysbioGPU::lassieSimulate(m, times = c(0, 0.5, 2), maxSteps = 2e4, backend = "cpu",
                              threads = 1, verbose = FALSE)
  }
  lassie_check <- function(o) if (any(is.nan(o))) "NaN in the trajectory" else NULL
  grn_read <- function(net_file, states_file) {
    tryCatch({
      net <- as.matrix(utils::read.csv(net_file, header = FALSE, comment.char = "#"))
      st <- utils::read.csv(states_file, stringsAsFactors = FALSE, check.names = FALSE)
      genes <- st$gene
      if (length(genes) == nrow(net) && length(genes) == ncol(net)) dimnames(net) <- list(genes, genes)
      list(network = net, from = stats::setNames(st[["E9"]] == 1, genes),
           to = stats::setNames(st[["E10.5"]] == 1, genes))
    }, error = base_error)
  }
  grn_run <- function(p, ctx) {
    fit <- sysbioGPU::grnEvolve(p$network, p$from, p$to, popSize = 32, islands = 2,
                                generations = 4, seed = 1, backend = "cpu",
                                threads = 1, verbose = FALSE)
    sysbioGPU::grnSimulate(fit$network, fit$rules, p$from, steps = 3)
    fit
  }
  list(
    gct = list(seeds = "small.gct", context = gsea_ctx,
               read = function(f, ctx) sysbioGPU::readGCT(f),
               method = function(x, ctx) gsea_run(x, ctx$cls, ctx$sets), check = gsea_check),
    cls = list(seeds = c("leukemia_small.cls", "C1OE.cls"), context = gsea_ctx,
               read = function(f, ctx) sysbioGPU::readCLS(f),
               # expression with as many samples as the mutant has labels
               method = function(x, ctx) {
                 e <- ctx$full[, rep_len(seq_len(ncol(ctx$full)), max(1L, length(x))), drop = FALSE]
                 gsea_run(e, x, ctx$gmt)
               }, check = gsea_check),
    gmt = list(seeds = c("small.gmt", "gene_sets.gmt"), context = gsea_ctx,
               read = function(f, ctx) sysbioGPU::readGMT(f),
               method = function(x, ctx) gsea_run(ctx$full, ctx$cls, x), check = gsea_check),
    rnk = list(seeds = "data.rnk", context = gsea_ctx,
               read = function(f, ctx) { sysbioGPU:::read_rnk(f); f },
               method = function(x, ctx) gsea_run(x, NULL, ctx$c1oe), check = gsea_check),
    edges = list(seeds = "edges.txt", context = function(dir) NULL,
                 read = function(f, ctx) sysbioGPU::readNetwork(f),
                 method = function(W, ctx) {
                   n <- nrow(W)
                   y <- rep(c(1, 0, 0, 0, 0, 0, 0, NA), length.out = n)
                   names(y) <- rownames(W)
                   sysbioGPU::parCosnet(W, y, maxSweeps = 30, seed = 1, backend = "cpu",
                                        threads = 1, verbose = FALSE)
                   sysbioGPU::cvParCosnet(W, cbind(a = ifelse(is.na(y), 0, y)), nfolds = 2,
                                          maxSweeps = 30, seed = 1, backend = "cpu",
                                          threads = 1, verbose = FALSE)
                 },
                 check = function(r) {
                   v <- unlist(Filter(is.numeric, r$metrics), use.names = FALSE)
                   if (any(is.infinite(v))) "infinite value in the CV metrics"
                 }),
    bnet = list(seeds = "example.bnet", context = function(dir) NULL,
                read = function(f, ctx) sysbioGPU::readPBN(f), method = pbn_run, check = pbn_check),
    assa = list(seeds = "example.pbn", context = function(dir) NULL,
                read = function(f, ctx) sysbioGPU::readPBN(f), method = pbn_run, check = pbn_check),
    bngl = list(seeds = c("Haugh2b.net", "Repressilator.net", "test_fixed.net"),
                context = function(dir) NULL,
                read = function(f, ctx) sysbioGPU::readBioNetGen(f),
                method = lassie_run, check = lassie_check),
    sbml = list(seeds = "lassie_small.sbml", context = function(dir) NULL,
                read = function(f, ctx) {
                  if (!sysbioGPU::sbmlAvailable()) stop("fuzz.R: no libSBML in this build")
                  sysbioGPU::readSBML(f)
                },
                method = lassie_run, check = lassie_check),
    grnnet = list(seeds = "net.csv", context = function(dir) dir,
                  read = function(f, dir) grn_read(f, file.path(dir, "states.csv")),
                  method = grn_run, check = function(r) NULL),
    grnstate = list(seeds = "states.csv", context = function(dir) dir,
                    read = function(f, dir) grn_read(file.path(dir, "net.csv"), f),
                    method = grn_run, check = function(r) NULL)
  )
}

# --------------------------------------------------------------- mutation
weird_numbers <- c("1e308", "-1e308", "1e309", "-1e309", "1.8e308", "NaN", "Inf", "-Inf", "NA",
                   "0", "-0", "-1", "1e-320", "4.9e-324", "99999999999999999999", "2147483647",
                   "2147483648", "-2147483649", "4294967296", "1e8", "1e15", "", "-", ".", "1e",
                   "0x7fffffff", "1.5", "-2.5", "nan", "TRUE", "1,5", "+1", "1e+308", "1e-308")
bad_utf8 <- list(as.raw(0xff), as.raw(0xc3), as.raw(c(0xe2, 0x82)), as.raw(c(0xed, 0xa0, 0x80)),
                 as.raw(c(0xc0, 0xaf)), as.raw(c(0xfe, 0xff)), as.raw(c(0xf4, 0x90, 0x80, 0x80)))
odd_text <- c("\u00e9", "\u540d", "\u00a0", "\u200b", "\"", "'", "#", "\\", ",", ";", "\t",
              " ", "(", ")", "=", "!", "&", "|", "^", "*", "+", "->", "<-", "<->", "%",
              "$", "{", "}", "<", ">", "//", "/*", "NA", "NULL")

rawpos <- function(b) sample.int(length(b) + 1L, 1L) - 1L  # insert after this many bytes
ins <- function(b, at, what) c(b[seq_len(at)], what, b[seq.int(at + 1L, length.out = length(b) - at)])

split_lines <- function(b) {
  if (!length(b)) return(list())
  nl <- which(b == as.raw(10L))
  starts <- c(1L, nl + 1L)
  ends <- c(nl - 1L, length(b))
  l <- Map(function(s, e) b[seq.int(s, length.out = max(0L, e - s + 1L))], starts, ends)
  if (b[length(b)] == as.raw(10L)) l <- l[-length(l)]
  l
}
join_lines <- function(l) {
  if (!length(l)) return(raw(0))
  unlist(lapply(l, function(x) c(x, as.raw(10L))), use.names = FALSE)
}

# Byte offsets (0-based start, length) of number-like tokens.
number_spans <- function(b) {
  if (!length(b) || any(b == as.raw(0L))) return(NULL)
  s <- rawToChar(b)
  m <- gregexpr("[-+]?[0-9]+(\\.[0-9]*)?([eE][-+]?[0-9]+)?", s, useBytes = TRUE)[[1]]
  if (m[1] < 0) return(NULL)
  cbind(start = as.integer(m) - 1L, len = attr(m, "match.length"))
}
token_spans <- function(b) {
  if (!length(b) || any(b == as.raw(0L))) return(NULL)
  m <- gregexpr("[A-Za-z_][A-Za-z0-9_.:-]*", rawToChar(b), useBytes = TRUE)[[1]]
  if (m[1] < 0) return(NULL)
  cbind(start = as.integer(m) - 1L, len = attr(m, "match.length"))
}
replace_span <- function(b, sp, what) {
  i <- sample.int(nrow(sp), 1L)
  st <- sp[i, "start"]; ln <- sp[i, "len"]
  c(b[seq_len(st)], what, b[seq.int(st + ln + 1L, length.out = length(b) - st - ln)])
}
line_op <- function(b, f) {
  l <- split_lines(b)
  if (!length(l)) return(b)
  join_lines(f(l))
}

mutators <- list(
  flip = function(b) {
    if (!length(b)) return(b)
    i <- sample.int(length(b), sample.int(4L, 1L), replace = TRUE)
    b[i] <- as.raw(bitwXor(as.integer(b[i]), 2L^sample(0:7, length(i), replace = TRUE)))
    b
  },
  setbyte = function(b) {
    if (!length(b)) return(b)
    v <- c(0x00, 0x09, 0x0a, 0x0d, 0x20, 0x22, 0x23, 0x27, 0x2c, 0x3b, 0x7f, 0x80, 0xff,
           sample.int(256L, 1L) - 1L)
    b[sample.int(length(b), 1L)] <- as.raw(sample(v, 1L))
    b
  },
  truncate = function(b) b[seq_len(floor(stats::runif(1) * length(b)))],
  dupline = function(b) line_op(b, function(l) {
    i <- sample.int(length(l), 1L)
    append(l, rep(l[i], sample.int(3L, 1L)), after = i)
  }),
  delline = function(b) line_op(b, function(l) l[-sample.int(length(l), min(length(l), sample.int(3L, 1L)))]),
  swaplines = function(b) line_op(b, function(l) {
    i <- sample.int(length(l), 2L, replace = TRUE)
    l[i] <- l[rev(i)]
    l
  }),
  number = function(b) {
    sp <- number_spans(b)
    if (is.null(sp)) return(b)
    replace_span(b, sp, charToRaw(enc2utf8(sample(weird_numbers, 1L))))
  },
  numbers = function(b) {  # one weird value for several numbers at once
    sp <- number_spans(b)
    if (is.null(sp)) return(b)
    w <- charToRaw(sample(c("1e308", "-1e308", "1e200", "NaN", "1e-320", "0", "-1"), 1L))
    for (k in seq_len(min(nrow(sp), sample(c(2L, 5L, 20L), 1L)))) {
      sp <- number_spans(b)
      if (is.null(sp)) break
      b <- replace_span(b, sp, w)
    }
    b
  },
  token = function(b) {
    sp <- token_spans(b)
    if (is.null(sp)) return(b)
    replace_span(b, sp, charToRaw(enc2utf8(sample(c(odd_text, "", "x", strrep("G", 5000)), 1L))))
  },
  badutf8 = function(b) ins(b, rawpos(b), bad_utf8[[sample.int(length(bad_utf8), 1L)]]),
  oddtext = function(b) ins(b, rawpos(b), charToRaw(enc2utf8(sample(odd_text, 1L)))),
  crlf = function(b) line_op(b, function(l) lapply(l, function(x) c(x, as.raw(13L)))),
  cronly = function(b) { b[b == as.raw(10L)] <- as.raw(13L); b },
  bom = function(b) c(as.raw(c(0xef, 0xbb, 0xbf)), b),
  nonewline = function(b) { while (length(b) && b[length(b)] == as.raw(10L)) b <- b[-length(b)]; b },
  longline = function(b) line_op(b, function(l) {
    i <- sample.int(length(l), 1L)
    append(l, list(rep(l[[i]], sample(c(50L, 2000L), 1L))), after = i)
  }),
  splice = function(b) {
    if (length(b) < 2L) return(b)
    st <- sample.int(length(b), 1L); ln <- min(length(b) - st + 1L, sample.int(200L, 1L))
    ins(b, rawpos(b), b[st:(st + ln - 1L)])
  },
  delim = function(b) {
    from <- sample(c(9L, 32L, 44L), 1L); to <- sample(setdiff(c(9L, 32L, 44L, 59L), from), 1L)
    hit <- which(b == as.raw(from))
    if (!length(hit)) return(b)
    hit <- if (stats::runif(1) < 0.5) hit[sample.int(length(hit), 1L)] else hit
    b[hit] <- as.raw(to)
    b
  },
  dupfield = function(b) {
    sp <- token_spans(b)
    if (is.null(sp)) sp <- number_spans(b)
    if (is.null(sp)) return(b)
    i <- sample.int(nrow(sp), 1L)
    tok <- b[sp[i, "start"] + seq_len(sp[i, "len"])]
    ins(b, sp[i, "start"] + sp[i, "len"], c(as.raw(sample(c(9L, 32L, 44L), 1L)), tok))
  },
  repeatall = function(b) c(b, b)
)
# Relative weights: semantic mutations more often than raw noise.
mutator_weights <- c(flip = 3, setbyte = 2, truncate = 2, dupline = 3, delline = 3, swaplines = 2,
                     number = 8, numbers = 3, token = 4, badutf8 = 2, oddtext = 2, crlf = 1,
                     cronly = 1, bom = 1, nonewline = 1, longline = 1, splice = 2, delim = 2,
                     dupfield = 3, repeatall = 1)

# Mutant i of a reader: its own RNG stream, so it does not depend on n.
make_mutant <- function(seed_bytes, reader, i, seed) {
  set.seed(seed * 100003 + sum(utf8ToInt(reader)) * 7919 + i)
  u <- stats::runif(1)
  if (u < 0.005) return(list(bytes = raw(0), ops = "empty"))
  if (u < 0.01) return(list(bytes = charToRaw(sample(c("\n", "\n\n\n", "   \n", "\t", "#\n"), 1L)),
                            ops = "blank"))
  k <- sample(1:3, 1L, prob = c(0.6, 0.3, 0.1))
  ops <- sample(names(mutator_weights), k, replace = TRUE, prob = mutator_weights)
  b <- seed_bytes
  for (op in ops) b <- mutators[[op]](b)
  list(bytes = b, ops = paste(ops, collapse = "+"))
}

# ------------------------------------------------------------------ child
clean_msg <- function(m) {
  m <- iconv(m, "UTF-8", "UTF-8", sub = "?")
  # (glibc's iconv lets through code points above U+10FFFF, bytes f4 90 ..,
  # which R's string functions refuse: those messages as ASCII, bytes <xx>)
  if (!is.na(m) && !validUTF8(m)) m <- iconv(m, "UTF-8", "ASCII", sub = "byte")
  if (is.na(m)) m <- "<unprintable>"
  m <- gsub("[\t\r\n]+", " ", m)
  substr(m, 1L, 300L)
}

run_mutant <- function(tg, f, ctx) {
  stage <- "read"
  nwarn <- 0L
  res <- tryCatch(withCallingHandlers({
    x <- tg$read(f, ctx)
    stage <- "method"
    r <- tg$method(x, ctx)
    stage <- "check"
    prob <- tg$check(r)
    if (is.null(prob)) list(status = "ok", msg = "") else list(status = "suspect", msg = prob)
  }, warning = function(w) { nwarn <<- nwarn + 1L; invokeRestart("muffleWarning") }),
  error = function(e) {
    st <- if (inherits(e, "fuzz_base_error")) "base"
          else if (inherits(e, "sysbioGPU_error")) "classed" else "unclassed"
    list(status = st, msg = paste0(class(e)[1], ": ", conditionMessage(e)))
  })
  c(res, stage = stage, warnings = nwarn)
}

child_main <- function(spec_file) {
  spec <- readRDS(spec_file)
  suppressPackageStartupMessages(library(sysbioGPU, lib.loc = spec$lib))
  options(sysbioGPU.backend = "cpu", sysbioGPU.threads = 1L, warn = 1)
  tg <- fuzz_targets()[[spec$reader]]
  ctx <- tg$context(spec$seeddir)
  con <- file(spec$results, open = "a")
  on.exit(close(con))
  for (f in spec$files) {
    r <- run_mutant(tg, f, ctx)
    writeLines(paste(basename(f), r$status, r$stage, r$warnings, clean_msg(r$msg), sep = "\t"), con)
    flush(con)
  }
}

# ----------------------------------------------------------------- parent
rscript <- function() file.path(R.home("bin"), "Rscript")

# Set fuzz_script_path where this file is sourced (tests); else --file=.
this_script <- function() {
  if (exists("fuzz_script_path")) return(fuzz_script_path)
  a <- grep("^--file=", commandArgs(FALSE), value = TRUE)
  if (length(a)) return(normalizePath(sub("^--file=", "", a[1])))
  stop("fuzz.R: cannot find its own path")
}

# Runs files in one child; returns list(status, rows = data.frame, log).
run_child <- function(reader, files, work, seeddir, lib, timeout) {
  tag <- basename(tempfile("b", work))
  spec_file <- file.path(work, paste0(tag, ".rds"))
  res_file <- file.path(work, paste0(tag, ".tsv"))
  log_file <- file.path(work, paste0(tag, ".log"))
  saveRDS(list(reader = reader, files = files, seeddir = seeddir, lib = lib, results = res_file),
          spec_file)
  file.create(res_file)
  status <- suppressWarnings(system2("timeout", c("-k", "3", as.character(ceiling(timeout)),
                                                  shQuote(rscript()), "--vanilla",
                                                  shQuote(this_script()),
                                                  paste0("--child=", shQuote(spec_file))),
                                     stdout = log_file, stderr = log_file,
                                     env = paste0("R_LIBS=", shQuote(paste(lib, collapse = ":")))))
  rows <- utils::read.delim(res_file, header = FALSE, quote = "", comment.char = "",
                            col.names = c("file", "status", "stage", "warnings", "message"),
                            colClasses = "character", fill = TRUE)
  lg <- if (file.exists(log_file)) readLines(log_file, warn = FALSE) else character()
  list(status = status, rows = rows, log = lg)
}

run_batch <- function(reader, files, work, seeddir, lib, timeout, per) {
  b <- run_child(reader, files, work, seeddir, lib, timeout + per * length(files))
  rows <- b$rows
  left <- setdiff(basename(files), rows$file)
  if (b$status == 0L && !length(left)) return(rows)
  for (f in files[basename(files) %in% left]) {  # find the culprit(s) one by one
    s <- run_child(reader, f, work, seeddir, lib, timeout)
    if (nrow(s$rows)) { rows <- rbind(rows, s$rows); next }
    hang <- s$status %in% c(124L, 137L)
    why <- if (hang) paste0("no result in ", timeout, " s")
           else paste0("child exit status ", s$status, ": ",
                       clean_msg(paste(utils::tail(grep("\\S", s$log, value = TRUE), 3L), collapse = " | ")))
    rows <- rbind(rows, data.frame(file = basename(f), status = if (hang) "hang" else "crash",
                                   stage = "?", warnings = "0", message = why))
  }
  rows
}

fuzz_run <- function(n = 2000, seed = 1, readers = NULL, out = "check/fuzz-out", batch = 40,
                     timeout = 20, jobs = 1, quiet = FALSE, lib = NULL) {
  targets <- fuzz_targets()
  if (is.null(readers)) readers <- names(targets)
  bad <- setdiff(readers, names(targets))
  if (length(bad)) stop("fuzz.R: unknown reader(s) ", paste(bad, collapse = ", "))
  if (is.null(lib)) lib <- dirname(find.package("sysbioGPU"))
  if (!sysbioGPU::sbmlAvailable()) readers <- setdiff(readers, "sbml")
  unlink(out, recursive = TRUE)
  dir.create(out, recursive = TRUE)
  out <- normalizePath(out)
  work <- file.path(out, "work")
  seeddir <- file.path(work, "seeds")
  fuzz_seeds(seeddir)
  all <- list()
  for (rd in readers) {
    t0 <- proc.time()[["elapsed"]]
    tg <- targets[[rd]]
    mdir <- file.path(work, rd)
    dir.create(mdir)
    seeds <- lapply(file.path(seeddir, tg$seeds), function(f) readBin(f, "raw", file.size(f)))
    ops <- character(n)
    paths <- character(n)
    for (i in seq_len(n)) {
      k <- (i - 1L) %% length(seeds) + 1L
      m <- make_mutant(seeds[[k]], rd, i, seed)
      ext <- sub("^[^.]*", "", tg$seeds[k])
      paths[i] <- file.path(mdir, sprintf("%s-%05d%s", rd, i, ext))
      writeBin(m$bytes, paths[i])
      ops[i] <- paste0(tg$seeds[k], ":", m$ops)
    }
    chunks <- split(paths, ceiling(seq_along(paths) / batch))
    run1 <- function(ch) run_batch(rd, ch, work, seeddir, lib, timeout, per = 2)
    rows <- if (jobs > 1) parallel::mclapply(chunks, run1, mc.cores = jobs) else lapply(chunks, run1)
    rows <- do.call(rbind, rows)
    rows$reader <- rd
    rows$mutation <- ops[match(rows$file, basename(paths))]
    rows <- rows[order(rows$file), ]
    fail <- rows$status %in% c("unclassed", "crash", "hang", "suspect")
    if (any(fail)) {
      fdir <- file.path(out, "failing", rd)
      dir.create(fdir, recursive = TRUE, showWarnings = FALSE)
      file.copy(file.path(mdir, rows$file[fail]), fdir)
    }
    all[[rd]] <- rows
    if (!quiet) {
      cat(sprintf("%-9s %5d mutants in %6.1f s: %s\n", rd, nrow(rows),
                  proc.time()[["elapsed"]] - t0,
                  paste(names(table(rows$status)), table(rows$status), sep = " ", collapse = ", ")))
    }
  }
  res <- do.call(rbind, all)
  rownames(res) <- NULL
  utils::write.table(res, file.path(out, "results.tsv"), sep = "\t", quote = FALSE, row.names = FALSE)
  sm <- fuzz_summary(res)
  utils::write.table(sm, file.path(out, "summary.tsv"), sep = "\t", quote = FALSE, row.names = FALSE)
  fails <- res[res$status %in% c("unclassed", "crash", "hang", "suspect"), ]
  if (nrow(fails)) {
    writeLines(c(sprintf("# fuzz.R seed %s: reproduce one failing mutant with", seed),
                 sprintf("Rscript %s --repro=%s  # %s %s: %s", this_script(),
                         file.path(out, "failing", fails$reader, fails$file),
                         fails$status, fails$mutation, fails$message)),
               file.path(out, "failing", "REPRO.txt"))
  }
  unlink(work, recursive = TRUE)
  if (!quiet) fuzz_print(sm, res)
  invisible(list(summary = sm, results = res))
}

fuzz_summary <- function(res) {
  st <- c("ok", "classed", "unclassed", "crash", "hang", "suspect", "base")
  sm <- do.call(rbind, lapply(split(res, factor(res$reader, unique(res$reader))), function(r) {
    cnt <- vapply(st, function(s) sum(r$status == s), 0)
    data.frame(reader = r$reader[1], mutants = nrow(r), t(cnt),
               unclassed_pct = round(100 * cnt[["unclassed"]] / nrow(r), 2))
  }))
  rownames(sm) <- NULL
  sm
}

fuzz_print <- function(sm, res) {
  cat("\nfuzz summary (status per mutant; unclassed_pct = share of unclassed errors)\n")
  print(sm, row.names = FALSE)
  f <- res[res$status %in% c("unclassed", "crash", "hang", "suspect"), ]
  if (!nrow(f)) return(invisible())
  cat("\nexamples (reader, status, stage: message) with counts:\n")
  key <- paste0(f$reader, " ", f$status, " ", f$stage, ": ",
                gsub("[0-9]+", "N", gsub("`[^`]*`|'[^']*'|\"[^\"]*\"", "'..'", f$message)))
  tab <- sort(table(key), decreasing = TRUE)
  ex <- f$file[match(names(tab), key)]
  cat(sprintf("%5d x %s  [e.g. %s]\n", as.integer(tab), substr(names(tab), 1L, 200L), ex), sep = "")
}

# Runs one saved mutant in this process, for debugging.
fuzz_repro <- function(path) {
  reader <- basename(dirname(path))
  suppressPackageStartupMessages(library(sysbioGPU))
  options(sysbioGPU.backend = "cpu", sysbioGPU.threads = 1L)
  tg <- fuzz_targets()[[reader]]
  seeddir <- file.path(tempdir(), "fuzz-seeds")
  fuzz_seeds(seeddir)
  ctx <- tg$context(seeddir)
  cat("reader", reader, "on", path, "\n")
  x <- tg$read(path, ctx)
  r <- tg$method(x, ctx)
  print(tg$check(r))
  invisible(r)
}

if (sys.nframe() == 0L) {
  opt <- fuzz_args(commandArgs(TRUE))
  if (!is.null(opt$child)) {
    child_main(opt$child)
  } else if (!is.null(opt$repro)) {
    fuzz_repro(opt$repro)
  } else {
    suppressPackageStartupMessages(library(sysbioGPU))
    r <- fuzz_run(n = opt$n, seed = opt$seed, readers = opt$readers, out = opt$out,
                  batch = opt$batch, timeout = opt$timeout, jobs = opt$jobs, quiet = opt$quiet)
    bad <- sum(r$summary[, c("crash", "hang")])
    quit(status = if (bad > 0) 1L else 0L)
  }
}
