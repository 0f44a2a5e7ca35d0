# The mouse eye gene regulatory network shipped in inst/extdata/grn, the
# example data of grnEvolve() (Aguilar-Hidalgo et al. 2012).

#' The mouse eye gene regulatory network (E9 to E10.5)
#'
#' The 32-gene signed network of mouse eye development of Aguilar-Hidalgo
#' et al. (2012), as encoded in the cuEVOGENET paper's code, with the gene
#' states at embryonic day 9 (the start) and 10.5 (the goal): the example
#' problem of [grnEvolve()]. 91 links (75 activating, 16 repressing), at
#' most 7 inputs per gene, 3 self links. Genes are named `g1`..`g32` (the
#' gene symbols are in the 2012 paper).
#'
#' @return A list: `network` (32 x 32 integer matrix, row = target, column
#'   = source, 1 activates, -1 represses), `from` and `to` (named logical
#'   vectors, the E9 and E10.5 states).
#' @references Aguilar-Hidalgo D, Lemos MC, Cordoba A (2012). Evolutionary
#'   dynamics in gene networks and inference algorithms. International
#'   Journal of Bifurcation and Chaos 22(7), 1250156.
#' @seealso [grnEvolve()]
#' @examples
#' eye <- grnMouseEye()
#' sum(eye$network != 0)
#' table(E9 = eye$from, E10.5 = eye$to)
#' @export
grnMouseEye <- function() {
  dir <- system.file("extdata", "grn", package = "sysbioGPU")
  net <- as.matrix(utils::read.csv(file.path(dir, "mouse_eye_network.csv"), header = FALSE,
                                   comment.char = "#"))
  st <- utils::read.csv(file.path(dir, "mouse_eye_states.csv"), stringsAsFactors = FALSE,
                        check.names = FALSE)
  genes <- st$gene
  net <- matrix(as.integer(net), nrow(net), ncol(net), dimnames = list(genes, genes))
  list(network = net,
       from = stats::setNames(st[["E9"]] == 1, genes),
       to = stats::setNames(st[["E10.5"]] == 1, genes))
}
