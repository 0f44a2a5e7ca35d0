#' Options of sysbioGPU
#'
#' Defaults for the arguments every method shares, and settings of the
#' engines that change how (not what) they compute: none is needed for
#' ordinary use, each exists for tests and for measurements of the engines.
#' Every engine setting that is set when a method runs is recorded in its
#' result: [runInfo()]'s column `engineSettings` lists them (`NA` when
#' none was set), so a result always tells how it was computed.
#'
#' @section Defaults of the shared arguments:
#' \describe{
#'   \item{`sysbioGPU.backend`}{`"auto"`, `"cpu"` or `"gpu"`: the default
#'     `backend` of every method (see [resolveBackend()]).}
#'   \item{`sysbioGPU.threads`}{the default `threads` (CPU threads).}
#'   \item{`sysbioGPU.device`}{the default `device` (GPU indices or `"all"`).}
#'   \item{`sysbioGPU.repeatDevices`}{`TRUE` lets `device` name a GPU more
#'     than once: each entry then takes its share of the work as if it were
#'     another GPU, with the same result. For tests, so that one GPU runs
#'     the code that splits a call's work over several GPUs and merges it;
#'     it makes no call faster.}
#' }
#'
#' @section Engine settings:
#' Unset (`NULL`, the default), each leaves the choice to the engine. The
#' results are the same whatever their values, bit for bit, except where
#' said.
#' \describe{
#'   \item{`sysbioGPU.gseaBatch`}{[rapidGSEA()]: permutations per batch
#'     (a multiple of 64; 0 or unset: sized from the memory).}
#'   \item{`sysbioGPU.gseaCache`}{[rapidGSEA()]: at most this many
#'     permutations' null ES kept between the two passes, on the device (GPU)
#'     or in memory (CPU) (unset: as many as fit the device, or 1 GiB of
#'     memory; 0: none, the second pass recomputes them).}
#'   \item{`sysbioGPU.gseaMoves`}{[rapidGSEA()] with `pvalue = "multilevel"`:
#'     kept swaps per member and level of the random walk (default 1). The
#'     p-values depend on it.}
#'   \item{`sysbioGPU.gseaWaveBytes`}{[rapidGSEA()] with `pvalue =
#'     "multilevel"` on the GPU: device memory, in bytes, for one wave of
#'     rulers (unset: half the free memory; a small value makes waves of one
#'     ruler).}
#'   \item{`sysbioGPU.gseaWalk`}{[rapidGSEA()] with phenotype or gene
#'     permutations on the GPU: sets of more than this many members (at
#'     least 32) walk each permutation's ranking, 32 sets a warp, instead of
#'     sorting their hits (unset: 128, where there are at most 23,244 genes
#'     on an H100 or H200; 0: no set walks).}
#'   \item{`sysbioGPU.cosnetBatch`}{[parCosnet()] on the GPU: most jobs
#'     (classes, times folds) per batch (0 or unset: as the memory allows).}
#'   \item{`sysbioGPU.cosnetDeviceBytes`}{[parCosnet()] on the GPU: device
#'     memory to use, in bytes; a network that does not fit is streamed in
#'     parts (0 or unset: the free memory).}
#'   \item{`sysbioGPU.cosnetHostColour`}{[parCosnet()] on the GPU: a
#'     network of at most this many stored entries is coloured on the host,
#'     a larger one on the device (unset: \eqn{2^{26}}). The colouring is
#'     the same either way.}
#'   \item{`sysbioGPU.grnHistoryRows`}{[grnEvolve()]: most rows
#'     (generations + 1, times islands) of the fitness history that one
#'     engine call allocates (default \eqn{2^{22}}); a longer run is made
#'     in rounds, with the same result.}
#'   \item{`sysbioGPU.grnBlocks`}{[grnEvolve()] on the CPU: the islands run
#'     as this many contiguous blocks in lockstep, as they do over several
#'     devices or workers (default 1).}
#'   \item{`sysbioGPU.pbnGeneralStep`}{[pbnSteadyState()]: `TRUE` uses the
#'     general step also for networks of up to 128 nodes, which otherwise
#'     take a step in registers.}
#'   \item{`sysbioGPU.pbnNoSkip`}{[pbnSteadyState()]: `TRUE` turns off the
#'     shortcut of synchronous networks whose nodes have one function each
#'     (a step that keeps the state is at a fixed point, and so are the
#'     steps up to the next perturbation).}
#'   \item{`sysbioGPU.lassieDeviceBDF`}{[lassieSimulate()] on the GPU: `TRUE`
#'     takes the implicit steps on the device whatever the batch's size,
#'     `FALSE` on the host's threads (unset: on the device for batches
#'     large enough, see the Details of [lassieSimulate()]). On the host the
#'     results agree within the tolerance, not bit for bit.}
#'   \item{`sysbioGPU.lassieBdfTeam`}{[lassieSimulate()] on the GPU: threads
#'     per simulation of the device's implicit steps, 1, 2, 4, 8, 16 or 32
#'     (unset: 32 for models of 32 species or more; for smaller ones 1 to 8,
#'     chosen at each launch, more as fewer simulations are left, so that
#'     a device's last simulations finish sooner). The results do not
#'     depend on it.}
#'   \item{`sysbioGPU.lassieBdfSharedVectors`}{[lassieSimulate()] on the
#'     GPU: at most this many (0 to 4) of the implicit steps' work vectors
#'     in shared memory (unset: as many as fit).}
#'   \item{`sysbioGPU.lassieFused`}{[lassieSimulate()] on the GPU: `TRUE`
#'     runs the explicit steps with one kernel per simulation whenever its
#'     state fits in shared memory, `FALSE` with a kernel per stage (unset:
#'     the engine's choice from the device's shared memory).}
#' }
#' @examples
#' net <- pbn(list(A = "!B", B = "A"))
#' old <- options(sysbioGPU.pbnNoSkip = TRUE)
#' ss <- pbnSteadyState(net, c(A = TRUE), p = 0.01, r = 0.05, seed = 1,
#'                      backend = "cpu", verbose = FALSE)
#' runInfo(ss)$engineSettings
#' options(old)
#' @name sysbioGPU-options
NULL

# The engine settings, by method: option name and a check of its value
# (TRUE when valid).  The same list is documented above.
engine_option_checks <- list(
  rapidGSEA = list(
    sysbioGPU.gseaBatch = function(v) is_whole(v, 0),
    sysbioGPU.gseaCache = function(v) is_whole(v, -1),
    sysbioGPU.gseaMoves = function(v) is_whole(v, 1),
    sysbioGPU.gseaWaveBytes = function(v) is_num(v, 1),
    sysbioGPU.gseaWalk = function(v) is_whole(v, 0)),
  parCosnet = list(
    sysbioGPU.cosnetBatch = function(v) is_whole(v, 0),
    sysbioGPU.cosnetDeviceBytes = function(v) is_num(v, 0),
    sysbioGPU.cosnetHostColour = function(v) is_num(v, 0)),
  grnEvolve = list(
    sysbioGPU.grnHistoryRows = function(v) is_whole(v, 1),
    sysbioGPU.grnBlocks = function(v) is_whole(v, 1)),
  pbnSteadyState = list(
    sysbioGPU.pbnGeneralStep = function(v) is_flag(v),
    sysbioGPU.pbnNoSkip = function(v) is_flag(v)),
  lassieSimulate = list(
    sysbioGPU.lassieDeviceBDF = function(v) is_flag(v),
    sysbioGPU.lassieBdfTeam = function(v) is_whole(v, 1) && v %in% c(1, 2, 4, 8, 16, 32),
    sysbioGPU.lassieBdfSharedVectors = function(v) is_whole(v, 0) && v <= 4,
    sysbioGPU.lassieFused = function(v) is_flag(v))
)

`%||%` <- function(a, b) if (is.null(a)) b else a

is_num <- function(v, lo) is.numeric(v) && length(v) == 1L && !is.na(v) && v >= lo && v < 1e18
is_whole <- function(v, lo) {
  is.numeric(v) && length(v) == 1L && !is.na(v) && v >= lo && v < 2^53 && v == round(v)
}
is_flag <- function(v) is.logical(v) && length(v) == 1L && !is.na(v)

# The value of engine setting `name` (NULL when unset), checked.
engine_option <- function(name, method) {
  v <- getOption(name)
  if (is.null(v)) return(NULL)
  if (!engine_option_checks[[method]][[name]](v)) {
    stop_input("option `", name, "` has an invalid value (",
               paste(format(utils::head(v, 3)), collapse = ", "), "); see ?`sysbioGPU-options`")
  }
  v
}

# The engine settings of `method` that are set, as "name=value; ..." for
# runInfo()'s `engineSettings` column, or NULL when none is.
engine_settings <- function(method) {
  nms <- names(engine_option_checks[[method]])
  set <- Filter(Negate(is.null), stats::setNames(lapply(nms, engine_option, method = method), nms))
  if (!length(set)) return(NULL)
  paste(names(set), vapply(set, function(v) format(v, scientific = FALSE), ""), sep = "=", collapse = "; ")
}

# lassieSimulate()'s GPU settings as the glue reads them from the run list
# (src/lassie/lassie_call.c): -1 for the engine's own choice.
lassie_settings <- function() {
  get <- function(name) {
    v <- engine_option(name, "lassieSimulate")
    if (is.null(v)) -1L else as.integer(v)
  }
  list(deviceBDF = get("sysbioGPU.lassieDeviceBDF"), bdfTeam = get("sysbioGPU.lassieBdfTeam"),
       bdfSharedVectors = get("sysbioGPU.lassieBdfSharedVectors"), fused = get("sysbioGPU.lassieFused"))
}
