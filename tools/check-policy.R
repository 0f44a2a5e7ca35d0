#!/usr/bin/env Rscript
# The package speaks of itself alone: what ships (R/, src/, man/,
# vignettes/, inst/, tests/), the tools and what users read first
# (README.md, BENCHMARKS.md, NEWS.md) hold no story of how it was made.
# This check lists every line that does, as file:line: reason, and exits
# with status 1 if there is one:
#   - a tracker's issue number ("issue 12", "issues 3-5", "#12"); a public
#     issue of another project cited by its repository ("owner/repo#12",
#     "owner/repo issue 62") is fine;
#   - work history: numbered sessions, stops or diary entries;
#   - dates of runs: ISO dates, clock times in UTC, "Month YYYY" (the last
#     is allowed in BENCHMARKS.md, which says when its tables were measured);
#   - machine nicknames ("the VM") and rental kinds ("nvidia-h100-x1");
#   - paths outside the repository (../shared, /work/);
#   - and, in src/, an engine that reads the environment (getenv()): a
#     setting is an R option passed in the run list and recorded by
#     runInfo() (?`sysbioGPU-options`), not a hidden knob.
# A number that a comment needs is cited from BENCHMARKS.md's section of
# the method ("see BENCHMARKS.md, lassieSimulate"), not copied.
# tests/ and tools/ are held to the same rule; CONTRIBUTING.md, which
# describes the project's workflow, is not scanned.
#
# Usage: Rscript tools/check-policy.R [root]     (default: the current folder)
#        Rscript tools/check-policy.R --self-test
#   --self-test copies a small tree to a temporary folder, checks that it
#   passes, plants a history entry and a tracker issue number in a C and an
#   R comment, and checks that each is found.

policy_scanned <- c("R", "src", "man", "vignettes", "inst", "tests", "tools", "README.md", "BENCHMARKS.md",
                    "NEWS.md")

# Files that are data or build outputs, not text anyone writes.
policy_skip <- "\\.(o|so|dll|dylib|a|rds|rda|RData|gz|bz2|xz|zip|pdf|png|jpe?g|gif|svg|gct|gmt|cls|rnk|edb|gdat|net|bnet|xml|sbml|csv|tsv)$"

months <- "(January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"

# name, pattern (PCRE, matched case-insensitively unless `case`), reason
policy_rules <- list(
  list("issue", "\\bissues?\\s+(no\\.?\\s*)?#?\\d+", "tracker issue number"),
  list("hash", "(?<![\\w.\\-/&])#\\d+\\b(?![0-9a-f]|\\.\\d)", "tracker issue number (#N)"),
  list("pr", "\\b(PR|pull request)\\s*#?\\d+", "tracker pull request number"),
  list("session", "\\bsessions?\\s+\\d+", "work history (session N)"),
  list("stop", "\\bstops?\\s+\\d+\\b(?!\\s*(s|ms|seconds?|min|minutes?|steps?|times?)\\b)", "work history (stop N)"),
  list("entry", "\\b(diary|history|BENCHMARKS(\\.md)?)\\W{0,3}(entry|entries)\\s+\\d+|\\bentr(y|ies)\\s+\\d+(\\s*(-|and|,)\\s*\\d+)*\\s*(\\)|of\\s+(BENCHMARKS|the diary|the history))", "work history (diary entry N)"),
  # a diary's numbered entries: items 20 and above of a numbered list
  list("numbered", "^\\s{0,3}([2-9]\\d|\\d{3,})\\.\\s", "work history (numbered entry)"),
  list("isodate", "\\b(19|20)\\d\\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])\\b", "date of a run (ISO date)"),
  list("utc", "\\b\\d{1,2}:\\d\\d(:\\d\\d)?\\s*(UTC|GMT|CET|CEST)\\b|\\bUTC\\b", "clock time of a run (UTC)"),
  list("month", paste0("\\b", months, "\\.?\\s+(19|20)\\d\\d\\b"), "date of a run (Month YYYY)"),
  list("vm", "\\b(the|this|our|on|a)\\s+VM\\b|\\bVM's\\b|(?<![\\w$@.])vm(?![\\w(])", "machine nickname (VM)"),
  list("rental", "\\bnvidia-[a-z]\\d+(-x\\d+)?\\b", "rental kind of a machine"),
  list("outside", "\\.\\./shared\\b|(?<![\\w.])/work/", "path outside the repository"),
  list("getenv", "\\bgetenv\\s*\\(", "engine reads the environment (make it an option in the run list)")
)

# A hit of `rule` at [start, end) of `line` that cites another project's
# issue ("owner/repo#12", "owner/repo issue 62", "issue 62 of owner/repo",
# ".../issues/62").
other_project <- function(line, start, end) {
  before <- substr(line, max(1L, start - 60L), start - 1L)
  after <- substr(line, end, end + 60L)
  repo <- "[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*"
  grepl(paste0(repo, "(\\s*,)?\\s*$"), before) ||
    grepl(paste0("^\\s*(of|in|at)\\s+", repo), after)
}

policy_files <- function(root) {
  out <- character()
  for (p in policy_scanned) {
    f <- file.path(root, p)
    if (dir.exists(f)) {
      out <- c(out, file.path(p, list.files(f, recursive = TRUE, all.files = FALSE)))
    } else if (file.exists(f)) {
      out <- c(out, p)
    }
  }
  out <- out[!grepl(policy_skip, out, ignore.case = TRUE)]
  # the configure output and build products in src/
  # (this file plants what it looks for)
  out[!out %in% c("src/Makevars", "tools/check-policy.R")]
}

scan_policy_file <- function(root, rel) {
  x <- tryCatch(readLines(file.path(root, rel), warn = FALSE, encoding = "UTF-8"),
                error = function(e) character())
  if (!length(x) || any(grepl("\x01|\x02|\x03", x, useBytes = TRUE))) return(NULL)
  res <- list()
  for (r in policy_rules) {
    name <- r[[1]]
    if (name == "month" && rel == "BENCHMARKS.md") next
    if (name == "getenv" && !startsWith(rel, "src/")) next
    m <- gregexpr(r[[2]], x, perl = TRUE, ignore.case = TRUE)
    for (i in which(vapply(m, function(g) g[1] > 0, TRUE))) {
      g <- m[[i]]
      keep <- vapply(seq_along(g), function(k) {
        s <- g[k]; e <- s + attr(g, "match.length")[k]
        !(name %in% c("issue", "hash", "pr") && other_project(x[i], s, e))
      }, TRUE)
      if (any(keep)) {
        res[[length(res) + 1L]] <- data.frame(file = rel, line = i, reason = r[[3]],
                                              text = trimws(substr(x[i], 1L, 100L)),
                                              stringsAsFactors = FALSE)
      }
    }
  }
  if (length(res)) do.call(rbind, res) else NULL
}

check_policy <- function(root = ".") {
  files <- policy_files(root)
  res <- do.call(rbind, lapply(files, function(f) scan_policy_file(root, f)))
  if (is.null(res)) {
    return(data.frame(file = character(), line = integer(), reason = character(), text = character()))
  }
  res[order(res$file, res$line), ]
}

report_policy <- function(res) {
  if (nrow(res)) cat(sprintf("%s:%d: %s\n    %s\n", res$file, res$line, res$reason, res$text), sep = "")
  cat(sprintf("check-policy: %d line(s) in %d file(s)\n", nrow(res), length(unique(res$file))))
}

# A small tree of the repository (a C file and an R file of it, or
# stand-ins outside a source tree), clean by construction; then plants.
self_test <- function(root = ".") {
  tmp <- tempfile("check-policy-")
  dir.create(file.path(tmp, "R"), recursive = TRUE)
  dir.create(file.path(tmp, "src", "core"), recursive = TRUE)
  src_c <- file.path(root, "src", "core", "status.h")
  src_r <- file.path(root, "R", "checks.R")
  c_file <- file.path(tmp, "src", "core", "status.h")
  r_file <- file.path(tmp, "R", "checks.R")
  if (file.exists(src_c) && file.exists(src_r)) {
    file.copy(src_c, c_file); file.copy(src_r, r_file)
  } else {
    writeLines(c("/* status codes */", "#define SBG_OK 0"), c_file)
    writeLines(c("# classed errors", "f <- function() 1"), r_file)
  }
  # lines that must not be flagged: another project's issues, colours, GCT
  writeLines(c("# as alserglab/fgsea#62 and alserglab/fgsea issue 62 report",
               "col <- \"#1F77B4\"; gct <- \"#1.2\"; n_vm <- 2  # stops at 10 steps",
               "# t 0-100 in steps; entries 2 and 3 of the vector"),
             file.path(tmp, "R", "fine.R"))
  fail <- function(...) { cat("check-policy self-test FAILED:", ..., "\n"); quit(save = "no", status = 1L) }
  clean <- check_policy(tmp)
  if (nrow(clean)) { report_policy(clean); fail("the clean tree has hits") }
  plant <- function(file, line, want) {
    old <- readLines(file, warn = FALSE)
    writeLines(c(old, line), file)
    hit <- check_policy(tmp)
    writeLines(old, file)
    if (!nrow(hit) || !any(grepl(want, hit$reason, fixed = TRUE))) {
      fail(sprintf("'%s' planted in %s was not found", line, basename(file)))
    }
    cat(sprintf("  found: %s (%s)\n", line, hit$reason[1]))
  }
  plant(c_file, "/* faster since session 29 (BENCHMARKS.md) */", "work history")
  plant(c_file, "/* the fix of issue 17 */", "tracker issue")
  plant(c_file, "/* see #17 */", "tracker issue")
  plant(c_file, "static const char *knob(void) { return getenv(\"SBG_KNOB\"); }", "environment")
  plant(r_file, "# stop 29: measured on the VM", "work history")
  plant(r_file, "# faster (see BENCHMARKS.md, entry 57)", "work history")
  plant(r_file, "# refused since issues 15-16", "tracker issue")
  plant(r_file, "# run 2025-01-31 14:02 UTC", "ISO date")
  plant(r_file, "# on nvidia-h100-x1", "rental kind")
  plant(r_file, "d <- '../shared/data'", "outside the repository")
  if (nrow(check_policy(tmp))) fail("the tree is not clean again after the plants")
  unlink(tmp, recursive = TRUE)
  cat("check-policy self-test: OK (clean tree passes; planted history, issue numbers, dates,",
      "machine names and outside paths are found)\n")
}

if (sys.nframe() == 0L) {
  a <- commandArgs(TRUE)
  if ("--self-test" %in% a) {
    self_test(".")
    quit(save = "no", status = 0L)
  }
  res <- check_policy(if (length(a)) a[1] else ".")
  report_policy(res)
  quit(save = "no", status = if (nrow(res)) 1L else 0L)
}
