# The cluster path, against a running SLURM (tools/test-cluster.sh starts a
# one-node one with tools/slurm-local.sh and runs this with SLURM_CONF set):
#   1. the vignette's chunk `cluster-slurm` (vignettes/sysbioGPU.Rmd), as
#      written: a BatchtoolsParam on the package's template, rapidGSEA()
#      through it, identical() to one process;
#   2. each of the five methods through that BatchtoolsParam, compared bit
#      for bit (identical()) with its run in this process, bookkeeping
#      (seconds, workers, threads) left out;
#   3. a job cancelled (scancel) while it runs: the call fails with a
#      sysbioGPU_error_worker naming the job's SLURM id, and the next call
#      on the same (started) BatchtoolsParam works;
#   4. the vignette's chunk `cluster-snow` with its hosts set to localhost.
# Prints a table and exits with status 1 on any failure.
# Usage: Rscript tools/test-cluster.R [path/to/sysbioGPU.Rmd]

args <- commandArgs(TRUE)
rmd <- normalizePath(if (length(args)) args[[1L]] else "vignettes/sysbioGPU.Rmd", mustWork = TRUE)
if (!nzchar(Sys.getenv("SLURM_CONF"))) stop("test-cluster: SLURM_CONF is not set (run tools/test-cluster.sh)")
# batchtools lists a user's jobs with squeue --user=$USER
if (!nzchar(Sys.getenv("USER"))) Sys.setenv(USER = Sys.info()[["user"]])
suppressPackageStartupMessages({
  library(sysbioGPU)
  library(BiocParallel)
})

# The registries live in this session's temporary directory (one node: no
# shared file system needed); batchtools polls every second (its default is
# 5 s and more), as the vignette says for short jobs.
work <- file.path(tempdir(), "cluster-test")
dir.create(work)
home <- setwd(work)
writeLines("sleep = 1", "batchtools.conf.R")

failures <- character()
check <- function(ok, what) {
  cat(sprintf("%-6s %s\n", if (isTRUE(ok)) "ok" else "FAILED", what))
  if (!isTRUE(ok)) failures <<- c(failures, what)
  invisible(ok)
}

# A chunk of the vignette by its label, as text.
chunk <- function(label) {
  lines <- readLines(rmd)
  start <- grep(paste0("^```\\{r ", label, "[,}]"), lines)
  if (length(start) != 1L) stop("test-cluster: no chunk `", label, "` in ", rmd)
  end <- start + which(grepl("^```[[:space:]]*$", lines[-seq_len(start)]))[[1L]]
  lines[(start + 1L):(end - 1L)]
}
run_chunk <- function(code, env) {
  val <- NULL
  for (e in parse(text = code, keep.source = FALSE)) val <- eval(e, env)
  val
}

# Everything of a result but where and how fast it ran.
bookkeeping <- c("seconds", "elapsed", "time", "stageTime", "call", "threads", "workers", "device", "devices",
                 "deviceName")
strip <- function(x) {
  if (is.list(x) && !is.null(names(x))) x <- x[setdiff(names(x), bookkeeping)]
  for (a in names(attributes(x))) {
    if (a %in% bookkeeping) attr(x, a) <- NULL
    else if (is.list(attr(x, a))) attr(x, a) <- strip(attr(x, a))
  }
  if (is.list(x)) x[] <- lapply(x, strip)
  x
}

timed <- function(expr) {
  t0 <- proc.time()[["elapsed"]]
  v <- force(expr)
  list(value = v, seconds = proc.time()[["elapsed"]] - t0)
}
table_rows <- list()
compare <- function(method, units, serial, cluster) {
  s <- timed(serial())
  c <- timed(cluster())
  same <- identical(strip(s$value), strip(c$value))
  table_rows[[length(table_rows) + 1L]] <<- data.frame(method = method, units = units, jobs = bpnworkers(bp),
                                                      serial_s = round(s$seconds, 1), slurm_s = round(c$seconds, 1),
                                                      identical = same)
  check(same, paste(method, "through SLURM is identical to one process"))
}

# ---- 1. the vignette's SLURM chunk, as written ---------------------------
cat("== the vignette's chunk cluster-slurm\n")
v <- new.env(parent = globalenv())
t_chunk <- timed(run_chunk(chunk("cluster-slurm"), v))
check(isTRUE(t_chunk$value), sprintf("chunk cluster-slurm returns TRUE (%.1f s)", t_chunk$seconds))
bp <- v$bp
check(methods::is(bp, "BatchtoolsParam") && bpbackend(bp) == "slurm", "the chunk's bp is a SLURM BatchtoolsParam")

# ---- 2. the five methods --------------------------------------------------
cat("== the five methods, one process against SLURM jobs\n")
compare("rapidGSEA (phenotype)", "1000 permutations",
        function() rapidGSEA(v$x, v$y, v$sets[1:40], nperm = 1000, seed = 3, backend = "cpu", threads = 1,
                             verbose = FALSE),
        function() rapidGSEA(v$x, v$y, v$sets[1:40], nperm = 1000, seed = 3, backend = "cpu", verbose = FALSE,
                             BPPARAM = bp))

W <- readNetwork(system.file("extdata", "yeast-string-edges.txt.gz", package = "sysbioGPU"))
Y <- readRDS(system.file("extdata", "yeast-funcat.rds", package = "sysbioGPU"))[rownames(W), ]
Y <- Y[, colSums(Y) >= 20 & colSums(!Y) >= 20][, 1:5] * 1
set.seed(2)
Y[sample(length(Y), length(Y) %/% 5)] <- NA
compare("parCosnet", "5 classes",
        function() parCosnet(W, Y, seed = 4, backend = "cpu", threads = 1, verbose = FALSE),
        function() parCosnet(W, Y, seed = 4, backend = "cpu", verbose = FALSE, BPPARAM = bp))

net <- readPBN(system.file("extdata", "pbn-example.bnet", package = "sysbioGPU"))
compare("pbnSteadyState", "4 trajectories",
        function() pbnSteadyState(net, c(Survival = TRUE), p = 0.01, r = 0.01, trajectories = 4, seed = 5,
                                  backend = "cpu", threads = 1, verbose = FALSE),
        function() pbnSteadyState(net, c(Survival = TRUE), p = 0.01, r = 0.01, trajectories = 4, seed = 5,
                                  backend = "cpu", verbose = FALSE, BPPARAM = bp))

eye <- grnMouseEye()
grn <- function(...) grnEvolve(eye$network, eye$from, eye$to, popSize = 64, islands = 4, migrationInterval = 10,
                               migrants = 2, generations = 20, seed = 6, backend = "cpu", verbose = FALSE, ...)
compare("grnEvolve", "4 islands", function() grn(threads = 1), function() grn(BPPARAM = bp))

m <- readBioNetGen(system.file("extdata", "lassie", "Haugh2b.net", package = "sysbioGPU"))
set.seed(7)
K <- t(replicate(8, m$rates * 2^stats::runif(length(m$rates), -1, 1)))
compare("lassieSimulate", "8 parameter sets",
        function() lassieSimulate(m, seq(0, 50, by = 5), rates = K, backend = "cpu", threads = 1, verbose = FALSE),
        function() lassieSimulate(m, seq(0, 50, by = 5), rates = K, backend = "cpu", verbose = FALSE, BPPARAM = bp))

# ---- 3. a job cancelled while it runs ------------------------------------
cat("== a job cancelled (scancel) while it runs\n")
bpstart(bp) # started by the caller: the registry outlives the failed call
killed_file <- file.path(work, "killed")
# the first of this user's jobs to run, 2 s after it started
killer <- paste0("for i in $(seq 1200); do id=$(squeue -h -u \"$USER\" -t R -o %i | head -n 1); ",
                 "[ -n \"$id\" ] && break; sleep 0.1; done; sleep 2; scancel \"$id\" && echo \"$id\" > ",
                 shQuote(killed_file))
system2("bash", c("-c", shQuote(killer)), wait = FALSE)
t_kill <- timed(tryCatch(
  rapidGSEA(v$x, v$y, v$sets[1:40], nperm = 40000, seed = 8, backend = "cpu", verbose = FALSE, BPPARAM = bp),
  error = function(e) e))
err <- t_kill$value
killed <- if (file.exists(killed_file)) readLines(killed_file) else NA_character_
cat(sprintf("       cancelled SLURM job %s; the call ended after %.1f s with:\n       %s: %s\n", killed, t_kill$seconds,
            paste(class(err), collapse = "/"), if (inherits(err, "condition")) conditionMessage(err) else "no error"))
check(inherits(err, "sysbioGPU_error_worker"), "the call fails with a sysbioGPU_error_worker")
check(!is.na(killed) && grepl(paste0("scheduler job ", killed, "\\b"), conditionMessage(err)),
      "the error names the cancelled SLURM job")
check(nrow(batchtools::findJobs(reg = bp$registry)) == 0L, "the registry is emptied for the next call")
compare("rapidGSEA, next call", "1000 permutations",
        function() rapidGSEA(v$x, v$y, v$sets[1:40], nperm = 1000, seed = 9, backend = "cpu", threads = 1,
                             verbose = FALSE),
        function() rapidGSEA(v$x, v$y, v$sets[1:40], nperm = 1000, seed = 9, backend = "cpu", verbose = FALSE,
                             BPPARAM = bp))
bpstop(bp)

# ---- 4. the vignette's SnowParam chunk, hosts = localhost ----------------
cat("== the vignette's chunk cluster-snow, hosts on this machine\n")
snow <- chunk("cluster-snow")
h <- grep("^hosts <- ", snow)
check(length(h) == 1L, "the chunk sets `hosts` on one line")
snow[h] <- 'hosts <- c("localhost", "localhost")'
t_snow <- timed(run_chunk(snow, new.env(parent = globalenv())))
check(isTRUE(t_snow$value), sprintf("chunk cluster-snow returns TRUE (%.1f s)", t_snow$seconds))

setwd(home)
cat("\n")
print(do.call(rbind, table_rows), row.names = FALSE)
if (length(failures)) {
  cat("\ntest-cluster: ", length(failures), " FAILED: ", paste(failures, collapse = "; "), "\n", sep = "")
  quit(status = 1)
}
cat("\ntest-cluster: all passed\n")
