# The package's random streams (src/core/philox.h), exposed so that users can
# audit what a run drew and tests can compare CPU, GPU and cuRAND.

rng_kinds <- c(uint32 = 0L, uniform = 1L, integer = 2L, shuffle = 3L, curand = 4L)

# One call into the draw engine; `b` is a resolved backend.
rng_fill <- function(kind, n, seed, subsequence = 0, offset = 0, streams = 1,
                     bound = 1, b = resolveBackend("cpu")) {
  a <- backend_args(b)
  .Call(ffi_rng_fill, as.double(seed), as.double(subsequence), as.double(offset),
        as.double(streams), as.double(n), rng_kinds[[kind]], as.double(bound),
        a$gpu, a$threads, a$device)
}

#' Draws from the package's Philox4x32-10 streams
#'
#' Every random choice in sysbioGPU comes from Philox4x32-10, a
#' counter-based generator: the stream of a unit of work (a permutation, a
#' trajectory, an individual) is fixed by `(seed, subsequence, offset)`, so
#' results do not depend on threads, batches or backend. The raw 32-bit
#' words are identical to those of cuRAND's `curand_init(seed, subsequence,
#' offset, &state)` followed by `curand(&state)`.
#'
#' @param n Draws per stream.
#' @param seed Whole number in \[0, 2^53\].
#' @param subsequence First subsequence; stream `s` (from 0) uses
#'   `subsequence + s`.
#' @param offset 32-bit words skipped at the start of each stream.
#' @param type `"uint32"`: the raw words; `"uniform"`: doubles in (0, 1) from
#'   53 bits (two words each); `"integer"`: integers in \[0, `max`) without
#'   modulo bias (Lemire's method: one word each, rarely more).
#' @param max For `type = "integer"`, the exclusive upper bound, in
#'   \[1, 2^32\].
#' @param streams Number of consecutive subsequences to draw from.
#' @param backend,threads,device See [resolveBackend()]; both backends give
#'   identical draws.
#' @return A numeric vector of length `n`, or with `streams > 1` an `n` x
#'   `streams` matrix, one column per stream.
#' @seealso [philoxShuffle()]
#' @examples
#' philoxDraws(4, seed = 0, type = "uint32")
#' philoxDraws(3, seed = 42, subsequence = 7, type = "uniform")
#' philoxDraws(10, seed = 1, type = "integer", max = 6)
#' @export
philoxDraws <- function(n, seed, subsequence = 0, offset = 0,
                        type = c("uint32", "uniform", "integer"), max = NULL,
                        streams = 1, backend = "cpu",
                        threads = getOption("sysbioGPU.threads"),
                        device = getOption("sysbioGPU.device", 0L)) {
  n <- check_whole(n, "n", max = 2^31 - 1)
  seed <- check_whole(seed, "seed")
  subsequence <- check_whole(subsequence, "subsequence")
  offset <- check_whole(offset, "offset")
  streams <- check_whole(streams, "streams", min = 1, max = 2^31 - 1)
  type <- check_choice(type, c("uint32", "uniform", "integer"), "type")
  bound <- 1
  if (type == "integer") {
    if (is.null(max)) stop_input('`max` is needed when type = "integer"')
    bound <- check_whole(max, "max", min = 1, max = 2^32)
    if (bound == 2^32) type <- "uint32" # every word is already uniform in [0, 2^32)
  }
  if (n * streams > 2^31 - 1) stop_input("`n` * `streams` must stay below 2^31")
  b <- resolveBackend(backend, threads, device)
  x <- alloc_guard(rng_fill(type, n, seed, subsequence, offset, streams, bound, b), "n",
                   bytes = 8 * n * streams, what = "the draws")
  if (streams > 1) dim(x) <- c(n, streams)
  x
}

#' Random permutations from the package's Philox streams
#'
#' The Fisher-Yates shuffle the methods use (for instance for phenotype
#' permutations): for i = n, ..., 2, swap element i with a uniform element
#' of 1..i, drawn with `philoxDraws(type = "integer")`'s method.
#'
#' @inheritParams philoxDraws
#' @param n Length of the permutation, 1 to 2^31 - 1.
#' @param streams Number of permutations, from consecutive subsequences.
#' @return An integer vector, a permutation of `1:n`; with `streams > 1` an
#'   `n` x `streams` matrix, one permutation per column.
#' @seealso [philoxDraws()]
#' @examples
#' philoxShuffle(10, seed = 1)
#' philoxShuffle(4, seed = 1, streams = 3)
#' @export
philoxShuffle <- function(n, seed, subsequence = 0, streams = 1, backend = "cpu",
                          threads = getOption("sysbioGPU.threads"),
                          device = getOption("sysbioGPU.device", 0L)) {
  n <- check_whole(n, "n", min = 1, max = 2^31 - 1)
  seed <- check_whole(seed, "seed")
  subsequence <- check_whole(subsequence, "subsequence")
  streams <- check_whole(streams, "streams", min = 1, max = 2^31 - 1)
  if (n * streams > 2^31 - 1) stop_input("`n` * `streams` must stay below 2^31")
  b <- resolveBackend(backend, threads, device)
  x <- alloc_guard(as.integer(rng_fill("shuffle", n, seed, subsequence, 0, streams, 1, b)) + 1L, "n",
                   bytes = 16 * n * streams, what = "the permutations")
  if (streams > 1) dim(x) <- c(n, streams)
  x
}

# 32-bit words as 8-digit hex strings (tests, reports).
hex32 <- function(x) sprintf("%04x%04x", as.integer(x %/% 65536), as.integer(x %% 65536))

# Hex strings to 32-bit words held in doubles.
unhex32 <- function(s) {
  vapply(s, function(h) sum(strtoi(strsplit(h, "")[[1]], 16L) * 16^(7:0)), 0, USE.NAMES = FALSE)
}

# The bare bijection, for known-answer tests.
philox_block <- function(counter, key) {
  .Call(ffi_philox_block, as.double(counter), as.double(key))
}
