# rapidGSEA(): gene set enrichment analysis with phenotype or gene
# permutations and the Broad GSEA statistics, on the CPU or the GPU
# (src/gsea/); gseaStats(); the "rapidGSEA" S3 class and its methods.

gsea_metrics <- c("signal2noise", "t_test", "diff_of_classes", "ratio_of_classes",
                  "log2_ratio_of_classes")

#' Gene set enrichment analysis (Broad GSEA), fast
#'
#' Ranks the genes by a two-class metric, scores every gene set with the
#' weighted Kolmogorov-Smirnov running sum, and assesses the scores against
#' permutations of the phenotype labels (or of the genes), with the
#' statistics of the Broad GSEA tool. The permutations run on the GPU when
#' one is usable (`backend`), otherwise on all CPU cores; both give the same
#' answer for the same `seed`.
#'
#' @section Algorithm:
#' - **Metric** (class A, the first class, is the numerator): `signal2noise`
#'   \eqn{(\mu_A-\mu_B)/(\sigma_A+\sigma_B)}, `t_test`
#'   \eqn{(\mu_A-\mu_B)/\sqrt{\sigma_A^2/n_A+\sigma_B^2/n_B}},
#'   `diff_of_classes` \eqn{\mu_A-\mu_B}, `ratio_of_classes`
#'   \eqn{\mu_A/\mu_B}, `log2_ratio_of_classes` \eqn{\log_2(\mu_A/\mu_B)}.
#'   \eqn{\sigma} is the unbiased standard deviation raised to at least
#'   \eqn{0.2|\mu|} (to 0.2 when \eqn{\mu = 0}), Broad's fix-low rule.
#' - **Ranking**: descending metric, ties broken by the gene's row (the
#'   first row first).
#' - **ES**: hits weigh \eqn{|metric|^q / N_R} (\eqn{q} = `weight`,
#'   \eqn{N_R} the sum over the set), misses \eqn{-1/(N-k)}; the ES is the
#'   first running-sum value of largest magnitude (values within
#'   \eqn{10^{-12}}, relative, of each other count as ties). It is computed
#'   from the set's hits alone. If every hit has weight 0 the hits weigh
#'   equally. The observed ES and the phenotype permutations' null ES add a
#'   set's weights (\eqn{N_R} over its genes, the running sum over its hits
#'   in rank order) in 32 runs of \eqn{\lceil k/32 \rceil}{ceiling(k/32)}
#'   hits: each run in order, then the runs' totals in order. A GPU adds
#'   the runs side by side, and the CPU in the same order, for the same
#'   bits; against plain additions one after the other only the last bits
#'   change (sets of more than 32 genes).
#' - **Permutations**: permutation 0 is the identity (the observed ES, not
#'   part of the null); permutation \eqn{j} is a Fisher-Yates shuffle of
#'   the labels drawn from Philox4x32-10 subsequence \eqn{j} of `seed`, so
#'   results do not depend on threads, batches or backend.  With gene
#'   permutations the null of a set depends only on its size: permutation
#'   \eqn{j} draws rank positions without replacement (a partial
#'   Fisher-Yates from subsequence \eqn{j}), as many as the largest set,
#'   and the first \eqn{k} of them are the null set of every set of
#'   \eqn{k} genes (one draw serves all sets, on the CPU or a GPU with the
#'   same bits).
#' - **NES** = ES / mean of the null ES of the same sign (\eqn{\ge 0} or
#'   \eqn{\le 0}) of that set; the null ES are normalised the same way.
#' - **pval** (nominal): fraction of the same-sign null ES strictly beyond
#'   the ES; with gene permutations \eqn{(b + 1) / (m + 1)} (\eqn{b} of
#'   the \eqn{m} same-sign null ES beyond), never 0.
#' - **Multilevel pval** (`pvalue = "multilevel"`, gene permutations):
#'   adaptive multilevel splitting (Korotkevich, Sukhov and Sergushichev,
#'   the fgsea paper), for p-values far below `1 / nperm`. For each set size
#'   \eqn{k} and sign, a sample of `sampleSize` random \eqn{k}-sets is
#'   scored by \eqn{ES^+} (the largest running sum; for negative ES the
#'   least, on the mirrored list); the sets at or above the median are kept
#'   and copied back to `sampleSize`, then moved by swaps of a member for a
#'   non-member that keep \eqn{ES^+} at or above the median (Markov chain
#'   moves), and the next level is the new sample's median, until the level
#'   passes the largest ES of that size. \eqn{P(ES^+ \ge ES)} is the product of the levels'
#'   fractions (each fraction \eqn{c/n} taken as the \eqn{c}-th largest
#'   of \eqn{n} uniforms, with log mean \eqn{\psi(c) - \psi(n+1)});
#'   `pval` is it divided by \eqn{P(ES \ge 0)} (from 1,000 to 10,000
#'   random sets, `nperm` within that range), the same conditioning on the
#'   sign as the permutation p-value. Where the count of those random sets
#'   beyond the ES, \eqn{b} of the \eqn{m} of the same sign, estimates p
#'   at least as precisely as the levels would (about p > 0.06 for 1,000
#'   sets and samples of 151), `pval` is \eqn{(b + 1) / (m + 1)} from it
#'   instead (as fgsea does), and no level is run. `log2err` is the standard deviation
#'   of \eqn{\log_2} `pval` from the levels' order statistics
#'   (\eqn{\psi_1(c) - \psi_1(n+1)} each) and the sign fraction; it is
#'   `NA` where `pval` is a bound (`eps` reached, or no random set could
#'   reach the ES). Each size and sign draws from its own Philox
#'   subsequence of `seed`, and each member of its sample its moves, so
#'   neither threads nor the backend change the result. With `backend =
#'   "gpu"` a warp of the first GPU moves each member (samples of up to
#'   2,047; larger ones move on the CPU), the host's threads keep the
#'   levels, and with at most 6 host `threads` the GPU draws the random sets
#'   of the sign fraction too; the p-values are those of the CPU, bit for
#'   bit. `NES`,
#'   `FDR` and `FWER` still come from the `nperm` gene permutations. In
#'   tiny lists (tens of genes) the few most extreme sets of a size may be
#'   out of reach of single swaps from each other, and their p-values are
#'   then less accurate than `log2err` says. For the sets of the very top
#'   (or bottom) genes of a list, where p is about
#'   \eqn{1/\binom{G}{k}}{1 / choose(G, k)} (the thinnest level sets),
#'   \eqn{\log_2} of p over the exact value averaged +0.25 and +0.35 (12
#'   p-values each, lists of 8,000 and 21,086 genes), within `log2err`.
#' - **FWER**: fraction of permutations whose largest null NES over all
#'   sets is > NES (smallest < NES for negative NES).
#' - **FDR**: for NES \eqn{\ge 0}, the mean over permutations of
#'   #\{null NES \eqn{\ge} NES\} / #\{null NES \eqn{\ge 0}\} (permutations
#'   without a null NES \eqn{\ge 0} left out), divided by #\{observed NES
#'   \eqn{\ge} NES\} / #\{observed NES \eqn{\ge 0}\}, capped at 1; mirrored
#'   for negative NES.
#' - The FDR numerators are summed as integers in units of
#'   \eqn{2^{-f}} (\eqn{f} = 52 for up to 511 permutations, one bit less
#'   per doubling, 40 at \eqn{2^{20}}), so they do not depend on the order
#'   of the permutations, threads or backend (relative rounding below
#'   \eqn{10^{-8}}).
#' - The statistics are computed in two streaming passes over the
#'   permutations. The first pass's null ES are kept for the second, which
#'   reads them instead of recomputing them from the seed (same numbers
#'   either way): on the CPU in host memory, up to 1 GiB (4,725 C2 sets x
#'   28,000 permutations) unless `options(sysbioGPU.gseaCache = )` says
#'   otherwise, beyond which the second pass regenerates the rest; on the
#'   GPU in device memory where it has room, with both passes on the
#'   device and only per-set sums coming back. `keepNull = TRUE` returns
#'   the whole sets x permutations table.
#' - **Degenerate data** are refused rather than answered: a constant
#'   metric (every gene constant, a constant preranked vector) is an error
#'   (class `sysbioGPU_error_input`); values whose class sums or variances
#'   overflow, nonzero subnormal values, ratios that overflow and a `weight`
#'   for which \eqn{|metric|^q} overflows or underflows are errors of class
#'   `sysbioGPU_error_numeric` (\eqn{|metric|} is at most 5 for
#'   `signal2noise`, as the fix-low rule bounds it). When 1% or more of the
#'   genes tie with another gene's metric, a warning (class
#'   `sysbioGPU_warning_ties`) says how many, as tied genes are ordered by
#'   row.
#' - On a GPU with at most 23,244 genes on an H100 or H200 (a
#'   permutation's ranks and weights fit a block's shared memory; fewer on
#'   a card with less of it), each set of up to 128 genes takes one GPU
#'   thread, which sorts its hits by rank in registers; larger sets (from
#'   option `sysbioGPU.gseaWalk`) walk each permutation's ranking, 32 sets
#'   a warp. With more genes, sets have their hits sorted by rank in thread
#'   blocks' shared memory, and sets of more than 8,192 genes need the CPU.
#'
#' @param expr Expression: a numeric matrix (genes x samples, gene symbols
#'   as row names), an `ExpressionSet`, a `SummarizedExperiment` (the assay
#'   chosen by `assay`) or a GCT file path. For a preranked analysis, a named numeric
#'   vector (the metric of each gene) or an `.rnk` file path; permutation is
#'   then `"gene"`.
#' @param phenotype The two classes of the samples: a factor, a character
#'   vector, a logical vector, a CLS file path, or the name of a column of
#'   `colData(expr)` (SummarizedExperiment) or `pData(expr)`
#'   (ExpressionSet). Which class is class A (the numerator of the metric:
#'   a positive NES means enriched in class A) is set by `classA`. Must be
#'   left out for a preranked analysis (an error otherwise).
#' @param geneSets A named list of character vectors, a GSEABase
#'   `GeneSetCollection`, or a GMT file path. Genes are matched to the row
#'   names (or the names of a preranked vector) exactly, so `IGK` and `Igk`
#'   are two genes; sets are restricted to the genes present.
#' @param assay For a `SummarizedExperiment` or an `ExpressionSet`: the
#'   assay to use, a name or an index (default `NULL`: the only assay, or
#'   `exprs` of an ExpressionSet; an error when there are several).
#' @param nperm Number of permutations, >= 1 (default 1000).
#' @param metric Ranking metric (default `"signal2noise"`), see Algorithm.
#' @param weight Exponent \eqn{q \ge 0} of the weighted running sum (default
#'   1; 0 is the classic Kolmogorov-Smirnov statistic).
#' @param permutation `"phenotype"` (default for expression data) or
#'   `"gene"` (the default and only choice for a preranked analysis).
#' @param pvalue How `pval` is computed: `"permutation"` (the fraction of
#'   permutations beyond the ES), `"multilevel"` (multilevel splitting, see
#'   Algorithm; gene permutations only, p-values far below `1 / nperm`), or
#'   `"auto"` (default: multilevel for gene permutations, permutation for
#'   phenotype permutations).
#' @param eps Smallest multilevel p-value estimated (default 0: as small as
#'   double precision allows, about 1e-300). Sets whose p-value is below
#'   `eps` get `pval = eps` and `log2err = NA` (a bound); a larger `eps`
#'   stops the levels earlier and saves time.
#' @param sampleSize Multilevel p-values: the number of random sets per
#'   level (the population of each level, as fgsea's `sampleSize`), an odd
#'   whole number from 3 to 1e6 (odd so that the median is one of its
#'   sets). `log2err` shrinks about as \eqn{1/\sqrt{sampleSize}} and the
#'   time grows about in proportion. The default, 151 (fgsea's is 101), is
#'   the smallest of 101, 151, 201 and 301 that puts 90% of the p-values
#'   below 1e-6 within a factor \eqn{2^{1.5}} of a precise reference on
#'   MSigDB C2 (see BENCHMARKS.md, rapidGSEA).
#' @param minSize,maxSize Sets with fewer or more genes present are dropped
#'   (defaults 15 and 500).
#' @param seed Seed of the permutations (whole number); `NULL` draws one
#'   from R's generator, so `set.seed()` makes runs repeatable.
#' @param backend,threads,device Where to run, see [resolveBackend()].
#'   Several GPUs (`device = c(0, 1)` or `"all"`) share the permutations,
#'   each a contiguous range, with the same result as one GPU (every
#'   statistic merges exactly).
#' @param verbose Show a progress bar for long runs (default
#'   `interactive()`).
#' @param keepNull Return the null ES (sets x permutations) in the
#'   attribute `nullES` (default `FALSE`; needs 8 bytes per entry).
#' @param classA The class of interest, the numerator of the metric (a
#'   positive NES is enrichment in it), e.g. `classA = "cancer"`. By
#'   default (`NULL`) class A is the first level of a factor, the first
#'   value seen in a character vector, or `TRUE` in a logical vector.
#'   Note that limma's `model.matrix(~ group)` estimates the second level
#'   minus the first (the reference): for the same signs as limma, give
#'   `classA = levels(group)[2]`.
#' @param ignoreCase Match gene names ignoring case (as the Broad tool does)
#'   instead of exactly (default `FALSE`, as Bioconductor tools do). With
#'   `TRUE`, two genes whose names differ only by case (`IGK`, `Igk`) are
#'   an error.
#' @param stats Preranked statistics of one or many signatures (one per
#'   cluster, per contrast...), in place of `expr`: a named numeric vector
#'   (one signature: the same as `expr`), a numeric matrix (genes x
#'   signatures: row names are the genes, column names the signatures; every
#'   signature on the same genes), or a named list of named numeric vectors
#'   (each signature on its own genes, in its own order: the sets are
#'   matched to each signature's genes). With a matrix or a list the result
#'   is one table of class `"rapidGSEAmulti"` with a first column
#'   `signature`; each signature's rows are those of its own call with the
#'   same `seed` and settings, bit for bit, so seeds do not have to differ
#'   per signature. The signatures share each gene permutation's random
#'   rank positions (they depend on the seed, the gene count and the set
#'   sizes, not on the statistics), on the CPU and on a GPU (one `device`),
#'   which makes many signatures much faster than a loop. `keepNull` and
#'   `BPPARAM` are for one signature. The table's `leadingEdge` column
#'   builds each row's genes when they are asked for (`[`, `[[`,
#'   `as.list()`, `as.character()`, `unlist()`, `lengths()`,
#'   [as.data.frame.rapidGSEA()]), so that
#'   millions of rows cost no time until used (asked for most rows, as by
#'   sorting or writing the whole table, it builds them all once and keeps
#'   them); any subset of it is a list of character vectors. The column
#'   itself holds row numbers (`is.list()` is `FALSE`): take `as.list()` of
#'   it for code that needs a plain list. See [gseaSignature()] for one
#'   signature's result.
#' @param BPPARAM A BiocParallel back-end (`MulticoreParam`, `SnowParam`,
#'   `BatchtoolsParam` for a cluster...) to share the permutations among
#'   R workers, each a contiguous range, on the CPU or each on a GPU of
#'   `device` (round robin); the result is the one of a single process.
#'   Forked workers (`MulticoreParam`) run one thread each and cannot use
#'   the GPU: use `SnowParam` for GPU workers.
#'   Default `NULL`: this process alone. See the vignette's "Scaling out".
#' @return A data.frame of class `"rapidGSEA"`, one row per gene set kept,
#'   in the order given: `set`, `size` (genes present), `ES`, `NES`, `pval`
#'   (nominal), `padj` (Benjamini-Hochberg adjustment of `pval`, as
#'   `p.adjust(pval, "BH")`), `FDR` (Broad's q-value), `FWER`, `log2err`
#'   (standard deviation of \eqn{\log_2} `pval` for multilevel p-values,
#'   `NA` for permutation p-values and bounds), `rankAtMax` (1-based position of
#'   the ES in the ranked list; Broad's RANK_AT_ES + 1) and `leadingEdge`
#'   (list of the genes before the peak, or after the trough; written as
#'   one string joined by `","` by [utils::write.csv()] and
#'   [as.data.frame.rapidGSEA()]). Attributes:
#'   `ranking` (the metric in rank order, named by gene), `members` (each
#'   set's genes), `nperm`, `seed`, `metric`, `weight`, `permutation`,
#'   `pvalue` (`"permutation"` or `"multilevel"`), `eps`, `sampleSize` (multilevel only),
#'   `classes`, `backend`, `device`, `deviceName`, `time` (seconds, call to
#'   table), `stageTime` (engine seconds: observed + pass 1, pass 2,
#'   statistics), `sequentialES` (with phenotype permutations on a GPU,
#'   the count of (set, permutation) pairs of pass 1, among sets of more
#'   than 256 members that do not walk the ranking (see Details), whose ES
#'   Broad's sequential rule settled because running-sum values within
#'   1e-12 (relative) of the largest came before it; 0 otherwise) and
#'   `nullES` when `keepNull`.  A set whose null ES of the
#'   observed sign are absent or average 0 (with very few permutations) has
#'   `NaN` NES, FDR and FWER, with a warning of class
#'   `sysbioGPU_warning_undefined` that names the sets.
#' @seealso [gseaStats()], [readGCT()], [readCLS()], [readGMT()],
#'   [plot.rapidGSEA()]
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(2000 * 10), 2000, dimnames = list(paste0("g", 1:2000), NULL))
#' x[1:40, 1:5] <- x[1:40, 1:5] + 1.5
#' sets <- list(up = paste0("g", 1:40), random = paste0("g", sample(2000, 40)))
#' res <- rapidGSEA(x, rep(c("A", "B"), each = 5), sets, nperm = 200,
#'                  seed = 1, backend = "cpu", threads = 1)
#' res
#' plot(res, "up")
#' @export
rapidGSEA <- function(expr, phenotype = NULL, geneSets, assay = NULL, nperm = 1000,
                      metric = "signal2noise", weight = 1,
                      permutation = c("phenotype", "gene"),
                      pvalue = c("auto", "permutation", "multilevel"), eps = 0,
                      sampleSize = 151L, minSize = 15, maxSize = 500, seed = NULL,
                      backend = getOption("sysbioGPU.backend", "auto"),
                      threads = getOption("sysbioGPU.threads"),
                      device = getOption("sysbioGPU.device", 0L),
                      verbose = interactive(), keepNull = FALSE, BPPARAM = NULL, classA = NULL,
                      ignoreCase = FALSE, stats = NULL) {
  t_start <- proc.time()[["elapsed"]]
  gpu_warm(backend, device, BPPARAM)
  # stats: one named vector is the preranked `expr`; a matrix or a list
  # holds many signatures (a numeric matrix as `expr` is expression data)
  multi <- !is.null(stats) && !(is.numeric(stats) && is.null(dim(stats)))
  if (!is.null(stats)) {
    if (!missing(expr)) stop_input("give the preranked statistics as `expr` or as `stats`, not both")
    if (!multi) expr <- stats
  } else if (missing(expr)) stop_input("`expr` is missing")
  if (missing(geneSets)) gsea_missing_sets(if (multi) stats else expr, phenotype)
  ignoreCase <- check_flag(ignoreCase, "ignoreCase")
  metric <- check_choice(metric, gsea_metrics, "metric")
  perm_given <- !missing(permutation)
  permutation <- check_choice(permutation, c("phenotype", "gene"), "permutation")
  pvalue <- check_choice(pvalue, c("auto", "permutation", "multilevel"), "pvalue")
  if (!is.numeric(eps) || length(eps) != 1L || is.na(eps) || eps < 0 || eps >= 1) {
    stop_input("`eps` must be a single number in [0, 1), not ", arg_label(eps))
  }
  sampleSize <- check_whole(sampleSize, "sampleSize", min = 3, max = 1e6)
  if (sampleSize %% 2 != 1) stop_input("`sampleSize` must be odd (the median is one of its sets), not ", sampleSize)
  nperm <- check_whole(nperm, "nperm", min = 1, max = 2^31 - 1)
  if (!is.numeric(weight) || length(weight) != 1L || !is.finite(weight) || weight < 0) {
    stop_input("`weight` must be a single number >= 0, not ", arg_label(weight))
  }
  minSize <- check_whole(minSize, "minSize", min = 1, max = 2^31 - 1)
  maxSize <- check_whole(maxSize, "maxSize", min = 1, max = 2^31 - 1)
  if (minSize > maxSize) stop_input("`minSize` (", minSize, ") is larger than `maxSize` (", maxSize, ")")
  keepNull <- check_flag(keepNull, "keepNull")
  verbose <- check_flag(verbose, "verbose")
  check_bpparam(BPPARAM)
  if (keepNull && !is.null(BPPARAM)) {
    stop_input("`keepNull` = TRUE keeps the whole table in one process: leave `BPPARAM` out")
  }
  if (multi) {
    if (!is.null(phenotype)) {
      stop_input("`phenotype` is given, but `stats` holds preranked signatures, which have no samples to ",
                 "permute: leave `phenotype` out")
    }
    if (!is.null(classA)) stop_input("`classA` names a class of the samples; preranked `stats` have none")
    if (perm_given && permutation == "phenotype") {
      stop_input("`permutation` = \"phenotype\" needs an expression matrix; preranked `stats` permute genes")
    }
    if (keepNull) stop_input("`keepNull` = TRUE keeps one signature's table: run that signature alone")
    if (!is.null(BPPARAM)) stop_input("`BPPARAM` shares one signature's permutations: leave it out with many signatures in `stats`")
    return(gsea_multisig(stats, geneSets, nperm, weight, pvalue, eps, sampleSize, minSize, maxSize, seed,
                         backend, threads, device, verbose, ignoreCase, t_start))
  }

  ct <- gsea_container(expr, phenotype, assay)
  phenotype <- ct$phenotype
  d <- gsea_data(ct$expr, ignoreCase)
  preranked <- is.null(d$expr)
  if (preranked) {
    if (!is.null(phenotype)) {
      stop_input("`phenotype` is given, but `expr` is a preranked list (a named numeric vector or an .rnk file), ",
                 "which has no samples to permute: leave `phenotype` out, or give the expression matrix",
                 if (gsea_looks_like_sets(phenotype)) "; to pass gene sets, name them: rapidGSEA(stats, geneSets = sets)")
    }
    if (!is.null(classA)) stop_input("`classA` names a class of the samples; a preranked `expr` has none")
    if (perm_given && permutation == "phenotype") {
      stop_input("`permutation` = \"phenotype\" needs an expression matrix; a preranked `expr` permutes genes")
    }
    permutation <- "gene"
    genes <- names(d$ranking)
    labels <- NULL
    classes <- NULL
  } else {
    genes <- rownames(d$expr)
    ph <- gsea_phenotype(phenotype, ncol(d$expr), classA)
    labels <- ph$labels
    classes <- ph$classes
    if (metric %in% c("ratio_of_classes", "log2_ratio_of_classes") && any(d$expr <= 0)) {
      stop_input("`metric` = \"", metric, "\" needs positive expression values; `expr` has values <= 0")
    }
  }
  if (pvalue == "auto") pvalue <- if (permutation == "gene") "multilevel" else "permutation"
  if (pvalue == "multilevel" && permutation == "phenotype") {
    stop_input("`pvalue` = \"multilevel\" needs `permutation` = \"gene\": multilevel splitting follows ",
               "random gene sets against one fixed ranking, and phenotype permutations change the ranking; ",
               "use `pvalue` = \"permutation\" (or \"auto\") with phenotype permutations")
  }
  gsea_check_numbers(d, metric, weight, labels)
  if (preranked) gsea_check_metric(d$ranking, weight)
  gs <- gsea_sets(geneSets, genes, minSize, maxSize, ignoreCase)
  if (keepNull && nperm * length(gs$names) > 2^31 - 1) {
    stop_input("`keepNull` = TRUE would hold ", length(gs$names), " x ", nperm, " ES: too many for one matrix")
  }
  seed <- resolve_seed(seed)
  if (!is.null(BPPARAM) && is.null(threads)) threads <- bp_threads(BPPARAM)
  b <- resolveBackend(backend, threads, device)
  a <- backend_args(b, multi = TRUE)
  check_bpparam_gpu(BPPARAM, b)

  job <- list(expr = d$expr, labels = labels, ranking = d$ranking, start = gs$start, index = gs$index,
              metric = match(metric, gsea_metrics) - 1L, weight = as.double(weight),
              gene = permutation == "gene", seed = seed, nperm = nperm,
              # engine settings (?`sysbioGPU-options`)
              batch = as.double(engine_option("sysbioGPU.gseaBatch", "rapidGSEA") %||% 0),
              cache = as.double(engine_option("sysbioGPU.gseaCache", "rapidGSEA") %||% -1),
              walk = as.double(engine_option("sysbioGPU.gseaWalk", "rapidGSEA") %||% -1),
              keepNull = keepNull, gpu = a$gpu, threads = a$threads, devices = a$devices)
  r <- alloc_guard(if (is.null(BPPARAM)) gsea_engine(job, 0L, c(0, 0), NULL, a$devices, verbose)
                   else gsea_workers(job, BPPARAM),
                   if (keepNull) "keepNull" else "nperm",
                   bytes = if (keepNull) 8 * nperm * length(gs$names),
                   what = if (keepNull) "the null ES (sets x `nperm`)" else "the null statistics")

  if (!preranked) gsea_check_metric(r$metric, weight)
  tab <- gsea_table(r, gs, genes, weight, seed, eps, sampleSize, nperm, pvalue, a, verbose)
  if (keepNull) {
    null <- r$null
    dimnames(null) <- list(gs$names, NULL)
  }
  structure(tab$out,
            class = c("rapidGSEA", "data.frame"),
            ranking = tab$ranking, members = tab$members, nperm = nperm, seed = seed,
            metric = if (preranked) "preranked" else metric, weight = weight,
            permutation = permutation, pvalue = pvalue, eps = eps,
            sampleSize = if (pvalue == "multilevel") as.integer(sampleSize), classes = classes,
            backend = b$backend, device = b$devices, deviceName = b$deviceName,
            engineSettings = engine_settings("rapidGSEA"),
            stageTime = stats::setNames(r$seconds, c("observed+pass1", "pass2", "statistics")),
            sequentialES = r$sequential,
            time = proc.time()[["elapsed"]] - t_start,
            nullES = if (keepNull) null else NULL)
}

# The rank of each gene (0-based) and the sets' members in rank order,
# from the engine's order of the genes (r$order, 0-based).
gsea_rank_members <- function(order, gs, genes) {
  ord <- order + 1L
  rank_of <- integer(length(genes))
  rank_of[ord] <- seq_along(ord) - 1L
  n_sets <- length(gs$names)
  set_of <- rep.int(seq_len(n_sets), gs$size)
  gi <- gs$index + 1L
  o <- order(set_of, rank_of[gi], method = "radix")
  gi <- gi[o]
  f <- structure(set_of, levels = as.character(seq_len(n_sets)), class = "factor")
  members <- split(genes[gi], f)
  names(members) <- gs$names
  list(ord = ord, rank_of = rank_of, set_of = set_of, gi = gi, f = f, members = members)
}

# One ranking's table from its engine result r (ffi_gsea_run's list): the
# leading edges, multilevel p-values where asked (the engine of
# gsea_multilevel(), seeded as the permutations), the columns in order.
# list(out, ranking, members); `members = FALSE` leaves the members out (a
# many-signature table has none).
gsea_table <- function(r, gs, genes, weight, seed, eps, sampleSize, nperm, pvalue, a, verbose, members = TRUE) {
  ord <- r$order + 1L
  ranking <- stats::setNames(r$metric[ord], genes[ord])
  p <- gsea_table_pvalues(r, gs, weight, seed, eps, sampleSize, nperm, pvalue, a, verbose)
  out <- data.frame(set = gs$names, size = gs$size, ES = r$es,
                    NES = r$nes, pval = p$pval, padj = stats::p.adjust(p$pval, "BH"), FDR = r$fdr, FWER = r$fwer,
                    log2err = p$log2err, rankAtMax = r$pos + 1L, stringsAsFactors = FALSE)
  out$leadingEdge <- gsea_genelist(.Call(ffi_gsea_leading_edge, as.integer(r$order), as.integer(gs$start),
                                         as.integer(gs$index), as.double(r$es), as.integer(r$pos), genes))
  gsea_warn_undefined(out, nperm)
  list(out = out, ranking = ranking, members = if (members) gsea_rank_members(r$order, gs, genes)$members)
}

# One ranking's p-values: the permutations' (r$pval), or multilevel ones
# (the engine of gsea_multilevel(), seeded as the permutations).
# list(pval, log2err).
gsea_table_pvalues <- function(r, gs, weight, seed, eps, sampleSize, nperm, pvalue, a, verbose) {
  if (pvalue != "multilevel") return(list(pval = r$pval, log2err = rep(NA_real_, length(gs$names))))
  ord <- r$order + 1L
  rank_of <- integer(length(ord))
  rank_of[ord] <- seq_along(ord) - 1L
  gsea_multilevel(r$metric[ord], weight, gs$start, rank_of[gs$index + 1L], seed, eps,
                  sampleSize = sampleSize, nSign = max(1000L, min(nperm, 10000L)), threads = a$threads,
                  gpu = a$gpu, device = a$device, verbose = verbose)[c("pval", "log2err")]
}

# Multilevel p-values of preranked sets (src/gsea/gsea_multilevel.c):
# metric in rank order, the sets as 0-based rank positions (start: offsets).
# moves: kept swaps per member per level; waveBytes: GPU memory per wave
# of rulers, 0 for half the free memory (engine settings for tests and
# probes, ?`sysbioGPU-options`).
# gpu: the members' moves on GPU `device` (the same p as on the CPU).
gsea_multilevel <- function(metric, weight, start, pos, seed, eps, sampleSize, nSign = 1000L,
                            moves = engine_option("sysbioGPU.gseaMoves", "rapidGSEA") %||% 1L,
                            waveBytes = engine_option("sysbioGPU.gseaWaveBytes", "rapidGSEA") %||% 0,
                            threads = 1L, gpu = FALSE, device = 0L, verbose = FALSE) {
  .Call(ffi_gsea_multilevel,
        list(metric = as.double(metric), weight = as.double(weight), start = as.integer(start),
             pos = as.integer(pos)),
        list(seed = as.double(seed), sampleSize = as.integer(sampleSize), nSign = as.integer(nSign),
             moves = as.integer(moves), eps = as.double(eps)),
        c(run_list(list(gpu = gpu), verbose, threads = threads, devices = device),
          list(waveBytes = as.double(waveBytes))))
}

# One engine call: the whole run (phase 0) or a BPPARAM worker's share of
# the permutations `range` (phase 1: pass 1; phase 2: pass 2 given norm).
gsea_engine <- function(job, phase, range, norm, devices, verbose) {
  data <- job[c("expr", "labels", "ranking", "start", "index")]
  params <- c(job[c("metric", "weight", "gene", "seed", "nperm", "batch", "cache", "walk", "keepNull")],
              list(phase = phase, range = as.double(range), norm = norm))
  .Call(ffi_gsea_run, data, params, run_list(job, verbose, devices = devices))
}

# One worker's share (a function of the namespace, so that a worker
# process loads the package to run it).
gsea_share <- function(range, dev, phase, norm, job) gsea_engine(job, phase, range, norm, dev, FALSE)

# BPPARAM: each worker a contiguous range of the permutations (and a GPU,
# round robin over `device`), pass 1 everywhere, the exact sums merged, pass
# 2 everywhere, the bins and extremes merged: the single-process numbers.
gsea_workers <- function(job, BPPARAM) {
  sp <- bp_split(BPPARAM, job$nperm, job$devices)
  ranges <- lapply(sp$ranges, `+`, 1)  # 1-based permutation numbers
  devs <- sp$devices
  release <- bp_hold(BPPARAM)
  on.exit(release(), add = TRUE)
  t0 <- proc.time()[["elapsed"]]
  p1 <- bp_map(BPPARAM, gsea_share, ranges, devs, MoreArgs = list(phase = 1L, norm = NULL, job = job))
  r <- p1[[1L]]
  r$sequential <- sum(vapply(p1, `[[`, 0, "sequential"))
  c1 <- .Call(ffi_gsea_combine1, r$es, as.double(job$nperm), lapply(p1, `[[`, "part"), job$gene)
  t1 <- proc.time()[["elapsed"]]
  p2 <- bp_map(BPPARAM, gsea_share, ranges, devs, MoreArgs = list(phase = 2L, norm = c1$norm, job = job))
  t2 <- proc.time()[["elapsed"]]
  c2 <- .Call(ffi_gsea_combine2, c1$nes, as.double(job$nperm), c1$norm, lapply(p2, `[[`, "part"))
  r$nes <- c1$nes
  r$pval <- c1$pval
  r$fdr <- c2$fdr
  r$fwer <- c2$fwer
  r$seconds <- c(t1 - t0, t2 - t1, proc.time()[["elapsed"]] - t2)
  r
}

# Gene names are matched exactly, as every Bioconductor tool does ('IGK'
# and 'Igk' are two genes); ignoreCase = TRUE folds case, as the Broad
# tool does, and then names equal ignoring case are a clash.
gsea_check_gene_names <- function(nm, ignoreCase) {
  dup <- duplicated(nm)
  if (any(dup)) {
    g <- nm[dup][[1L]]
    stop_input("`expr` has duplicated gene names, e.g. '", g, "' (rows ", paste(which(nm == g), collapse = " and "), ")")
  }
  if (!ignoreCase) return(invisible(TRUE))
  up <- toupper(nm)
  dup <- duplicated(up)
  if (any(dup)) {
    g <- nm[up == up[dup][[1L]]]
    stop_input("`expr` has gene names equal ignoring case, e.g. ", paste0("'", g, "'", collapse = " and "),
               ", and `ignoreCase` = TRUE matches them ignoring case; use `ignoreCase` = FALSE (the default) ",
               "to keep them as distinct genes")
  }
  invisible(TRUE)
}

# expr -> list(expr = numeric matrix or NULL, ranking = named vector or NULL)
gsea_data <- function(expr, ignoreCase = FALSE) {
  if (is.character(expr) && length(expr) == 1L && is.null(dim(expr))) {
    if (grepl("\\.rnk$", expr, ignore.case = TRUE)) expr <- read_rnk(expr)
    else expr <- readGCT(expr)
  } else if (is.data.frame(expr)) {
    expr <- as.matrix(expr)
  }
  if (is.numeric(expr) && is.null(dim(expr))) {
    if (is.null(names(expr))) stop_input("a preranked `expr` must be a named numeric vector (names = genes)")
    if (length(expr) < 2L) stop_input("`expr` must rank at least 2 genes")
    if (any(!is.finite(expr))) stop_input("`expr` has NA, NaN or infinite values (", sum(!is.finite(expr)), ")")
    if (anyNA(names(expr)) || any(!nzchar(names(expr)))) stop_input("`expr` has missing gene names")
    gsea_check_gene_names(names(expr), ignoreCase)
    ranking <- as.double(expr)
    names(ranking) <- names(expr)
    return(list(expr = NULL, ranking = ranking))
  }
  if (!is.matrix(expr) || !is.numeric(expr)) {
    stop_input("`expr` must be a numeric matrix (genes x samples), an ExpressionSet, a SummarizedExperiment, ",
               "a GCT file path or a named numeric vector, not ", describe_value(expr))
  }
  if (nrow(expr) < 2L) stop_input("`expr` must have at least 2 genes (rows)")
  storage.mode(expr) <- "double"
  # one pass in C for this check and gsea_check_numbers()'s, at its two floors
  scan <- .Call(ffi_gsea_scan_matrix, expr, c(.Machine$double.xmin, sqrt(.Machine$double.xmin)))
  if (scan[[8L]] > 0) stop_input("`expr` has NA, NaN or infinite values (", scan[[8L]], ")")
  rn <- rownames(expr)
  if (is.null(rn) || anyNA(rn) || any(!nzchar(rn))) stop_input("`expr` needs gene names as row names")
  gsea_check_gene_names(rn, ignoreCase)
  list(expr = expr, ranking = NULL, scan = scan)
}

# What looks like gene sets: a list of character vectors, a
# GeneSetCollection or a .gmt path (for hints at the argument order).
gsea_looks_like_sets <- function(x) {
  (is.list(x) && !is.data.frame(x) && length(x) > 0L && all(vapply(x, is.character, TRUE))) ||
    methods::is(x, "GeneSetCollection") ||
    (is.character(x) && length(x) == 1L && grepl("\\.gmt$", x, ignore.case = TRUE))
}

# `geneSets` missing: say so, with a hint when the sets came in another slot.
gsea_missing_sets <- function(expr, phenotype) {
  hint <- if (gsea_looks_like_sets(expr)) {
    paste0("; `expr` looks like gene sets: the arguments are rapidGSEA(expr, phenotype, geneSets), ",
           "e.g. rapidGSEA(stats, geneSets = sets) for a preranked vector")
  } else if (!is.null(phenotype) && gsea_looks_like_sets(phenotype)) {
    "; the second argument is `phenotype`: name the sets, e.g. rapidGSEA(stats, geneSets = sets)"
  } else ""
  stop_input("`geneSets` is missing", hint, call = sys.call(-1))
}

# phenotype -> list(labels = 0/1 integer (0 = class A), classes = c(A, B));
# classA (a class name, or NULL: the first level) is the numerator.
gsea_phenotype <- function(phenotype, n, classA = NULL) {
  if (is.null(phenotype)) stop_input("`phenotype` is missing: give the two classes of the samples")
  if (is.character(phenotype) && length(phenotype) == 1L && n != 1L) {
    # one string is a CLS file path; one that names no file is more likely a
    # single label than a file that went missing
    if (!is.na(phenotype) && !file.exists(phenotype) && !grepl("[/\\\\.]", phenotype)) {
      stop_input("`phenotype` is the single string '", phenotype, "': give one label per sample (",
                 n, ") or the path of a CLS file (no file '", phenotype, "' exists)")
    }
    phenotype <- readCLS(phenotype)
  }
  if (is.logical(phenotype)) {
    if (anyNA(phenotype)) stop_input("`phenotype` has NA values")
    phenotype <- factor(ifelse(phenotype, "TRUE", "FALSE"), levels = c("TRUE", "FALSE"))
  } else if (is.character(phenotype) || is.numeric(phenotype)) {
    if (anyNA(phenotype)) stop_input("`phenotype` has NA values")
    phenotype <- factor(phenotype, levels = unique(phenotype))
  } else if (!is.factor(phenotype)) {
    stop_input("`phenotype` must be a factor, character or logical vector or a CLS file path, not ",
               class(phenotype)[[1L]])
  }
  if (anyNA(phenotype)) stop_input("`phenotype` has NA values")
  if (length(phenotype) != n) {
    stop_input("`phenotype` has ", length(phenotype), " labels but `expr` has ", n, " samples")
  }
  lev <- levels(droplevels(phenotype))
  if (length(lev) != 2L) {
    stop_input("`phenotype` must have exactly 2 classes, it has ", length(lev),
               if (length(lev)) paste0(" (", paste(lev, collapse = ", "), ")") else "")
  }
  if (!is.null(classA)) {
    if (is.logical(classA)) classA <- as.character(classA)
    if (!is.character(classA) || length(classA) != 1L || is.na(classA) || !(classA %in% lev)) {
      stop_input("`classA` must name one of the two classes (", paste0("'", lev, "'", collapse = ", "), "), not ",
                 arg_label(classA))
    }
    lev <- c(classA, setdiff(lev, classA))
  }
  tab <- table(factor(phenotype, levels = lev))
  if (any(tab < 3L)) {
    stop_input("`phenotype`: each class needs at least 3 samples; class '", names(tab)[tab < 3L][[1L]],
               "' has ", min(tab))
  }
  list(labels = as.integer(phenotype == lev[[2L]]), classes = lev)
}

# geneSets -> list(names, size, start, index): the kept sets' names and
# sizes, and their 0-based gene indices, set after set (start: offsets)
gsea_sets <- function(geneSets, genes, minSize, maxSize, ignoreCase = FALSE) {
  if (is.character(geneSets) && length(geneSets) == 1L) {
    geneSets <- readGMT(geneSets)
  } else if (methods::is(geneSets, "GeneSetCollection")) {
    if (!requireNamespace("GSEABase", quietly = TRUE)) stop_input("`geneSets` is a GeneSetCollection but GSEABase is not installed")
    geneSets <- GSEABase::geneIds(geneSets)
  }
  if (!is.list(geneSets) || length(geneSets) == 0L || is.null(names(geneSets)) ||
      anyNA(names(geneSets)) || any(!nzchar(names(geneSets)))) {
    stop_input("`geneSets` must be a non-empty named list of character vectors, a GeneSetCollection or a GMT file path")
  }
  if (!all(vapply(geneSets, function(s) is.character(s) || is.factor(s), TRUE))) {
    stop_input("`geneSets` must hold character vectors of gene names")
  }
  if (anyDuplicated(names(geneSets))) {
    stop_input("`geneSets` has duplicated names, e.g. '", names(geneSets)[duplicated(names(geneSets))][[1L]], "'")
  }
  # All memberships at once: match() exactly (with ignoreCase, exactly
  # first: gene names are then unique ignoring case, so an exact hit is the
  # case-insensitive one; toupper() only for the rest); then each set's
  # distinct genes in index order, by a counting sort in C.
  if (any(vapply(geneSets, is.factor, TRUE))) geneSets <- lapply(geneSets, as.character)
  all <- unlist(geneSets, use.names = FALSE)
  hit <- match(all, genes)
  if (ignoreCase) {
    miss <- which(is.na(hit))
    if (length(miss)) hit[miss] <- match(toupper(all[miss]), toupper(genes))
  }
  si <- .Call(ffi_gsea_set_index, hit, lengths(geneSets), length(genes))
  k <- si[[1L]]
  keep <- k >= minSize & k <= maxSize & k < length(genes)
  if (!any(keep)) {
    stop_input("no gene set left after filtering: ", length(geneSets), " sets, sizes ",
               "(genes present) from ", min(k), " to ", max(k), ", but `minSize` = ", minSize,
               " and `maxSize` = ", maxSize, if (any(k >= length(genes))) " (a set cannot hold every gene)" else "")
  }
  size <- k[keep]
  list(names = names(geneSets)[keep], size = size, start = c(0L, cumsum(size)),
       index = if (all(keep)) si[[2L]] else si[[2L]][rep.int(keep, k)])
}

#' Broad GSEA statistics from observed and null enrichment scores
#'
#' Computes NES, nominal p-values, FDR q-values and FWER p-values with the
#' rules of the Broad GSEA tool (see [rapidGSEA()], Algorithm), from the
#' observed ES of each set and a matrix of null ES. Useful to combine runs
#' (`cbind` their `nullES`) or to reproduce results of other tools.
#'
#' @param es Observed ES, one per set.
#' @param esNull Null ES, a numeric matrix with one row per set and one
#'   column per permutation.
#' @param threads CPU threads (default: all).
#' @return A data.frame with columns `ES`, `NES`, `pval`, `padj`
#'   (Benjamini-Hochberg), `FDR`, `FWER`, one row per set (row names from
#'   `es` or `esNull`). Enrichment scores lie in \[-1, 1\]: values outside
#'   (beyond rounding) are an error.  Undefined statistics (`NaN`: no null
#'   ES of the observed sign, or only zeros) come with a warning of class
#'   `sysbioGPU_warning_undefined`.
#' @examples
#' f <- system.file("extdata", "gsea_edb", "results.edb", package = "sysbioGPU")
#' set.seed(2)
#' es <- c(a = 0.6, b = -0.5, c = 0.2)
#' null <- matrix(runif(3 * 1000, -0.5, 0.5), 3)
#' gseaStats(es, null)
#' @export
gseaStats <- function(es, esNull, threads = getOption("sysbioGPU.threads")) {
  if (!is.numeric(es) || length(es) < 1L || any(!is.finite(es))) {
    stop_input("`es` must be a numeric vector of finite enrichment scores")
  }
  if (!is.matrix(esNull) || !is.numeric(esNull) || nrow(esNull) != length(es) || ncol(esNull) < 1L) {
    stop_input("`esNull` must be a numeric matrix with one row per element of `es` (", length(es),
               ") and at least one column, not ", describe_value(esNull),
               if (is.matrix(esNull)) paste0(" of ", nrow(esNull), " x ", ncol(esNull)))
  }
  if (any(!is.finite(esNull))) stop_input("`esNull` has NA or infinite values")
  gsea_check_es_range(es, "es")
  gsea_check_es_range(esNull, "esNull")
  b <- resolveBackend("cpu", threads)
  storage.mode(esNull) <- "double"
  r <- .Call(ffi_gsea_stats, as.double(es), esNull, b$threads)
  nm <- if (!is.null(names(es))) names(es) else rownames(esNull)
  out <- data.frame(ES = as.double(es), NES = r$nes, pval = r$pval, padj = stats::p.adjust(r$pval, "BH"),
                    FDR = r$fdr, FWER = r$fwer, row.names = nm)
  gsea_warn_undefined(cbind(set = if (is.null(nm)) as.character(seq_along(es)) else nm, out), ncol(esNull))
  out
}

# NES (and so FDR and FWER, and p with too few nulls) is undefined for a set
# whose null ES of the observed sign are absent or average 0: with few
# permutations (nperm = 1 or 2) or a degenerate null.  Those NaN come with
# a classed warning (sysbioGPU_warning_undefined) that names the sets.
gsea_warn_undefined <- function(out, nperm) {
  bad <- which(!is.finite(out$NES) | is.na(out$pval) | is.na(out$FDR) | is.na(out$FWER))
  if (!length(bad)) return(invisible(NULL))
  warn_sbg("undefined", length(bad), " set(s) have undefined (NaN) statistics: ",
           paste(utils::head(out$set[bad], 5L), collapse = ", "), if (length(bad) > 5L) ", ...",
           ". Their null ES of the observed sign (out of ", format(nperm, scientific = FALSE),
           " permutation(s)) are absent or average 0, so NES, FDR and FWER cannot be computed",
           if (nperm < 100) "; use more permutations (`nperm`)" else "")
}

#' @export
print.rapidGSEA <- function(x, n = 10L, ...) {
  # a subset (x[i, ]) keeps the class but not the run's attributes
  if (is.null(attr(x, "nperm"))) return(NextMethod())
  cat(sprintf("<rapidGSEA> %d gene sets, %d genes, %s permutations (%s), metric %s, weight %g\n",
              nrow(x), length(attr(x, "ranking")), format(attr(x, "nperm"), big.mark = ","),
              attr(x, "permutation"), attr(x, "metric"), attr(x, "weight")))
  if (!is.null(attr(x, "classes"))) cat(sprintf("  classes: %s (A) vs %s (B)\n", attr(x, "classes")[[1L]], attr(x, "classes")[[2L]]))
  dev <- if (attr(x, "backend") == "gpu") sprintf("GPU %s (%s)", paste(attr(x, "device"), collapse = ", "), attr(x, "deviceName")) else "CPU"
  cat(sprintf("  %s, %.2f s, seed %s\n", dev, attr(x, "time"), format(attr(x, "seed"), scientific = FALSE)))
  if (nrow(x) == 0L) return(invisible(x))
  # the table's own order (the order of the sets given, or the user's sort)
  top <- as.data.frame(unclass(x)[intersect(c("set", "size", "ES", "NES", "pval", "padj", "FDR", "FWER"), names(x))])[seq_len(min(n, nrow(x))), ]
  top$set <- ifelse(nchar(top$set) > 30, paste0(substr(top$set, 1, 27), "..."), top$set) # one line at width 80
  print(gsea_format_table(top, attr(x, "nperm")), right = TRUE, row.names = FALSE)
  if (nrow(x) > n) cat(sprintf("  ... %d more sets\n", nrow(x) - n))
  invisible(x)
}

#' @export
summary.rapidGSEA <- function(object, ...) {
  if (is.null(attr(object, "nperm"))) return(NextMethod())
  s <- list(
    sets = nrow(object), genes = length(attr(object, "ranking")), nperm = attr(object, "nperm"),
    up = sum(object$NES > 0, na.rm = TRUE), down = sum(object$NES < 0, na.rm = TRUE),
    fdr25 = c(up = sum(object$FDR < 0.25 & object$NES > 0, na.rm = TRUE),
              down = sum(object$FDR < 0.25 & object$NES < 0, na.rm = TRUE)),
    p05 = c(up = sum(object$pval < 0.05 & object$NES > 0, na.rm = TRUE),
            down = sum(object$pval < 0.05 & object$NES < 0, na.rm = TRUE)),
    # a multilevel p goes down to eps (to about 1e-300 with eps = 0)
    minP = if (identical(attr(object, "pvalue"), "multilevel")) max(attr(object, "eps"), 1e-300)
           else 1 / attr(object, "nperm"),
    backend = attr(object, "backend"), time = attr(object, "time"), stageTime = attr(object, "stageTime")
  )
  class(s) <- "summary.rapidGSEA"
  s
}

#' @export
print.summary.rapidGSEA <- function(x, ...) {
  cat(sprintf("rapidGSEA: %d sets over %d genes, %s permutations on the %s in %.2f s\n",
              x$sets, x$genes, format(x$nperm, big.mark = ","), toupper(x$backend), x$time))
  cat(sprintf("  enriched in class A (NES > 0): %d, FDR < 0.25: %d, nominal p < 0.05: %d\n",
              x$up, x$fdr25[["up"]], x$p05[["up"]]))
  cat(sprintf("  enriched in class B (NES < 0): %d, FDR < 0.25: %d, nominal p < 0.05: %d\n",
              x$down, x$fdr25[["down"]], x$p05[["down"]]))
  cat(sprintf("  smallest nonzero nominal p-value resolvable: about %.2g\n", x$minP))
  invisible(x)
}
