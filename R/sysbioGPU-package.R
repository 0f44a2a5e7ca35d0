# Importing from Matrix loads its namespace with ours, so that methods::as()
# finds its coercions (a plain matrix to CsparseMatrix) in a fresh session
# where the user never loaded Matrix.

#' sysbioGPU: GPU-accelerated methods for network and systems biology
#'
#' Five methods from published papers, each with a multi-threaded CPU engine
#' and a CUDA engine that compute the same thing. Every method takes
#' `backend`, `threads` and `device` (see [resolveBackend()]) and a `seed`;
#' the same seed gives the same result whatever the backend or threads.
#'
#' Options: `sysbioGPU.backend` (`"auto"`, `"cpu"` or `"gpu"`),
#' `sysbioGPU.threads` (CPU threads) and `sysbioGPU.device` (CUDA device
#' number, from 0).
#'
#' @seealso [gpuInfo()], [resolveBackend()], [philoxDraws()]
#' @keywords internal
#' @useDynLib sysbioGPU, .registration = TRUE
#' @importFrom Matrix sparseMatrix
"_PACKAGE"
