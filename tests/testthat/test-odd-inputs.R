# Odd but possible inputs that must give the right answer or a classed
# error, never a silent wrong one: reserved words as node names, tokens
# that touch across spaces, gzip files cut short, huge targets, values
# named in another order, NaN statistics, ambiguous names, contradictions,
# failed allocations.  Each block also tries variants of its example
# (other names, files and values).

cpu <- list(backend = "cpu", threads = 1, verbose = FALSE)

expect_input_error <- function(expr, pattern = NULL) {
  expect_error(expr, pattern, class = "sysbioGPU_error_input")
}

write_tmp <- function(lines, ext) {
  f <- tempfile(fileext = ext)
  writeLines(lines, f)
  f
}

# A gzip copy of `lines`, and copies of it cut short at several places.
gz_variants <- function(lines, ext) {
  f <- tempfile(fileext = paste0(ext, ".gz"))
  con <- gzfile(f, "w"); writeLines(lines, con); close(con)
  r <- readBin(f, "raw", file.size(f))
  cut <- function(keep) { g <- tempfile(fileext = paste0(ext, ".gz")); writeBin(r[seq_len(keep)], g); g }
  list(whole = f,
       cut = list(half = cut(length(r) %/% 2L), trailer = cut(length(r) - 4L), last = cut(length(r) - 1L),
                  header = cut(12L)),
       two_members = { g <- tempfile(fileext = paste0(ext, ".gz")); writeBin(c(r, r), g); g },
       padded = { g <- tempfile(fileext = paste0(ext, ".gz")); writeBin(c(r, as.raw(rep(0, 64))), g); g })
}

test_that("a node cannot be named by a word that expressions read as a constant", {
  for (w in c("True", "false", "TRUE", "FALSE", "tRuE")) {
    nodes <- list(x = "!x", y = "x")
    names(nodes)[1] <- w
    nodes[[1]] <- paste0("!", w)
    expect_input_error(pbn(nodes), "constant")
    expect_input_error(readPBN(write_tmp(c("targets, factors", paste0(w, ", !", w), "A, B", "B, A"), ".bnet")),
                       "line 2.*constant")
    expect_input_error(readPBN(write_tmp(c(paste("node", w), "1 : A", "endNode", "node A", "1 : !A", "endNode"),
                                         ".pbn")), "line 1.*constant")
    expect_input_error(pbn(list(A = list(inputs = w, table = c(0, 1))), identityForMissing = TRUE), "constant")
  }
  # names that only begin like a constant are nodes, and the constants
  # themselves still work in expressions
  net <- pbn(list(Truex = "!Truex", A = "Truex & true", B = "A | FALSE"))
  expect_identical(net$functions$A[[1]]$inputs, "Truex")
  ss <- pbnSteadyState(net, list(c(A = TRUE)), method = "exact", p = 0.01)
  expect_equal(ss$probability, 0.5, tolerance = 1e-9) # A follows Truex, which flips every step
})

test_that("tokens separated by spaces are not glued into one name", {
  expect_input_error(pbn(list(A = "B C", B = "A", C = "A")), "unexpected 'C'")
  expect_input_error(pbn(list(A = "B  &  C D", B = "A", C = "A", D = "A")), "unexpected 'D'")
  f <- write_tmp(c("targets, factors", "B, A", "C, A", "A, B C"), ".bnet")
  expect_input_error(readPBN(f), "line 4: unexpected 'C'")
  f <- write_tmp(c("targets, factors", "A, B and C", "B, A", "C, A"), ".bnet")
  expect_input_error(readPBN(f), "line 2: unexpected 'and'")
  f <- write_tmp(c("node A", "1 : B C", "endNode", "node B", "1 : A", "endNode", "node C", "1 : A", "endNode"), ".pbn")
  expect_input_error(readPBN(f), "line 2: unexpected 'C'")
  # spaces between tokens that need none change nothing
  a <- pbn(list(A = " ( B &C )|! C ", B = "A", C = "A"))
  b <- pbn(list(A = "(B&C)|!C", B = "A", C = "A"))
  expect_identical(a$functions$A[[1]]$words, b$functions$A[[1]]$words)
  expect_identical(a$functions$A[[1]]$inputs, c("B", "C"))
})

test_that("every reader refuses a gzip file cut short and reads a whole one", {
  gmt <- c("s1\td\tA\tB\tC", "s2\td\tB\tC\tD")
  net <- c("a b 1", "b c 0.5", "c d 0.25")
  bnet <- c("targets, factors", "A, !B", "B, A")
  gct <- c("#1.2", "2\t2", "NAME\tDescription\tx\ty", "g1\tna\t1\t2", "g2\tna\t3\t4")
  cls <- c("4 2 1", "# A B", "A A B B")
  rnk <- c("g1\t2", "g2\t1", "g3\t-1")
  bng <- c("begin parameters", "    1 k1 2", "end parameters", "begin species", "    1 A() 1", "    2 B() 0",
           "end species", "begin reactions", "    1 1 2 k1", "end reactions")
  readers <- list(
    list(readGMT, gmt, ".gmt", function(r) length(r) == 2L),
    list(readNetwork, net, ".txt", function(r) nrow(r) == 4L),
    list(readPBN, bnet, ".bnet", function(r) length(r$nodes) == 2L),
    list(readGCT, gct, ".gct", function(r) identical(dim(r), c(2L, 2L))),
    list(readCLS, cls, ".cls", function(r) length(r) == 4L),
    list(readBioNetGen, bng, ".net", function(r) length(r$species) == 2L))
  if (exists("readRNK", asNamespace("sysbioGPU"))) {
    readers <- c(readers, list(list(get("readRNK", asNamespace("sysbioGPU")), rnk, ".rnk", function(r) length(r) == 3L)))
  }
  for (rd in readers) {
    # repeat the records so that a cut falls inside the data
    v <- gz_variants(rd[[2]], rd[[3]])
    expect_true(rd[[4]](rd[[1]](v$whole)))
    expect_true(rd[[4]](rd[[1]](v$padded)))
    for (g in v$cut) expect_input_error(rd[[1]](g), "truncated|damaged")
  }
  # a file of several members (bgzip, cat a.gz b.gz) is read whole
  v <- gz_variants(gmt, ".gmt")
  two <- tempfile(fileext = ".gmt.gz")
  a <- tempfile(fileext = ".gz"); con <- gzfile(a, "w"); writeLines(gmt[1], con); close(con)
  b <- tempfile(fileext = ".gz"); con <- gzfile(b, "w"); writeLines(gmt[2], con); close(con)
  writeBin(c(readBin(a, "raw", 1e4), readBin(b, "raw", 1e4)), two)
  expect_identical(readGMT(two), readGMT(write_tmp(gmt, ".gmt")))
  # a long file cut in the middle: R alone would return the first part
  long <- paste0("set", 1:3000, "\td\tg1\tg2\tg", 1:3000)
  v <- gz_variants(long, ".gmt")
  expect_length(readGMT(v$whole), 3000L)
  expect_input_error(readGMT(v$cut$half), "truncated")
  # a LASSIE folder whose files are gzip
  d <- tempfile(); dir.create(d)
  writeLines(c("1\t0", "0\t1"), file.path(d, "left_side")); writeLines(c("0\t1", "1\t0"), file.path(d, "right_side"))
  writeLines(c("1", "0"), file.path(d, "M_0"))
  con <- gzfile(file.path(d, "c_vector"), "w"); writeLines(as.character(seq(2, 3, length.out = 2)), con); close(con)
  expect_equal(unname(readLASSIE(d)$rates), c(2, 3))
  r <- readBin(file.path(d, "c_vector"), "raw", 1e4)
  writeBin(r[seq_len(length(r) - 3L)], file.path(d, "c_vector"))
  expect_input_error(readLASSIE(d), "truncated")
})

test_that("grnEvolve stops at once on a target at or above any fitness", {
  eye <- grnMouseEye()
  for (tg in c(Inf, 1e20, .Machine$double.xmax, 1, 2^63)) {
    fit <- do.call(grnEvolve, c(list(eye$network, eye$from, eye$to, popSize = 32, islands = 2,
                                     generations = 1e6, target = tg, seed = 3), cpu))
    expect_identical(fit$stopReason, "target")
    expect_identical(fit$generations, 0)
  }
})

test_that("named initial amounts and rates follow their names, or are refused", {
  m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)), rates = c(2, 1), initial = c(1, 0),
                     species = c("A", "B"), reactions = c("f", "b"))
  run <- function(...) unclass(do.call(lassieSimulate, c(list(m, times = c(0, 0.5, 1)), cpu, list(...))))[, ]
  ref <- run(initial = c(1, 0.2), rates = c(3, 0.5))
  expect_equal(run(initial = c(B = 0.2, A = 1), rates = c(b = 0.5, f = 3)), ref)
  expect_equal(run(initial = c(A = 1, B = 0.2), rates = c(f = 3, b = 0.5)), ref)
  # A <-> B: the closed form with the rates swapped by name is not `ref`
  expect_false(isTRUE(all.equal(run(initial = c(B = 0.2, A = 1), rates = c(f = 0.5, b = 3)), ref)))
  expect_input_error(run(initial = c(B = 0.2, X = 1)), "unknown species.*X")
  expect_input_error(run(initial = c(A = 0.2, A = 1)), "more than once")
  expect_input_error(run(rates = c(f = 3, g = 0.5)), "unknown reaction")
  expect_input_error(run(initial = stats::setNames(c(1, 0.2), c("A", ""))), "name every")
  # a batch's named columns follow their names too
  both <- do.call(lassieSimulate, c(list(m, times = c(0, 1), initial = rbind(c(B = 0.2, A = 1), c(B = 0, A = 1))), cpu))
  expect_equal(unclass(both[[1]])[, ], run(initial = c(1, 0.2))[c(1, 3), ], ignore_attr = TRUE)
  expect_input_error(do.call(lassieSimulate, c(list(m, times = c(0, 1), initial = rbind(c(B = 0.2, C = 1))), cpu)),
                     "unknown species")
  # reactionModel(): named initial amounts, rates and fixed flags
  m2 <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)), rates = c(b = 1, f = 2),
                      initial = c(B = 0, A = 1), species = c("A", "B"), reactions = c("f", "b"),
                      fixed = c(B = FALSE, A = TRUE))
  expect_equal(unname(m2$rates), c(2, 1))
  expect_equal(unname(m2$initial), c(1, 0))
  expect_identical(m2$fixed, c(TRUE, FALSE))
  expect_input_error(reactionModel(rbind(c(1, 0)), rbind(c(0, 1)), 1, c(A = 1, C = 0), species = c("A", "B")),
                     "unknown species")
  # named rates without reaction names name the reactions
  m3 <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)), rates = c(kf = 2, kb = 1), initial = c(1, 0))
  expect_identical(m3$reactions, c("kf", "kb"))
})

test_that("NaN statistics come with a classed warning", {
  set.seed(7)
  gx <- matrix(rnorm(200 * 10), 200, 10, dimnames = list(paste0("g", 1:200), paste0("s", 1:10)))
  gx[1:20, 1:5] <- gx[1:20, 1:5] + 2
  ph <- rep(c("A", "B"), each = 5)
  sets <- list(up = paste0("g", 1:20), mix = paste0("g", seq(1, 200, 5)))
  # the example of one permutation gives a NaN for the strongly enriched set
  expect_warning(do.call(rapidGSEA, c(list(gx, ph, sets, nperm = 1, minSize = 5, seed = 1), cpu)),
                 class = "sysbioGPU_warning_undefined")
  # enough permutations: no NaN, no warning
  expect_no_warning(do.call(rapidGSEA, c(list(gx, ph, sets, nperm = 200, minSize = 5, seed = 1), cpu)))
  # degenerate nulls: all zero, one-signed
  expect_warning(r <- gseaStats(c(a = 0.5, b = -0.3), matrix(0, 2, 10)), "a, b", class = "sysbioGPU_warning_undefined")
  expect_true(all(is.nan(r$NES)))
  expect_warning(gseaStats(c(a = 0.5, b = -0.3), matrix(runif(20, 0.1, 0.9), 2, 10)), "b",
                 class = "sysbioGPU_warning_undefined")
  expect_warning(gseaStats(c(x = -0.5), matrix(runif(10, 0.1, 0.9), 1, 10)), "x",
                 class = "sysbioGPU_warning_undefined")
  expect_no_warning(gseaStats(c(a = 0.5, b = -0.3), rbind(c(0.1, -0.2, 0.3), c(-0.1, 0.2, -0.4))))
})

test_that("parCosnet refuses node names and classes it could confuse", {
  W <- matrix(0, 6, 6)
  W[cbind(c(1, 2, 3, 4, 5, 1), c(2, 3, 4, 5, 6, 6))] <- 1
  W <- W + t(W)
  nm <- paste0("p", 1:6)
  y <- c(1, 0, NA, 1, 0, NA)
  run <- function(W, labels, f = parCosnet) do.call(f, c(list(W, labels, maxSweeps = 20, seed = 1), cpu))
  z <- W; dimnames(z) <- list(replace(nm, 3, NA), replace(nm, 3, NA))
  expect_input_error(run(z, y), "NA")
  z <- W; dimnames(z) <- list(replace(nm, 3, ""), replace(nm, 3, ""))
  expect_input_error(run(z, y), "NA or")
  z <- W; dimnames(z) <- list(replace(nm, 3, "p1"), replace(nm, 3, "p1"))
  expect_input_error(run(z, y), "two nodes 'p1'")
  z <- Matrix::Matrix(W, sparse = TRUE); dimnames(z) <- list(replace(nm, 2, "p5"), replace(nm, 2, "p5"))
  expect_input_error(run(z, y), "two nodes 'p5'")
  edges <- data.frame(from = c("a", NA, "c"), to = c("b", "c", "a"), weight = 1)
  expect_input_error(run(edges, c(a = 1, b = 0, c = NA)), "NA")
  L <- cbind(k = y, k = rev(y))
  expect_input_error(run(W, L), "two classes.*'k'")
  expect_input_error(run(W, L, cvParCosnet), "two classes.*'k'")
  L2 <- cbind(y, rev(y)); colnames(L2) <- c("k", NA)
  expect_input_error(run(W, L2), "named NA")
  # distinct names: fine, and the labels follow the names
  z <- W; dimnames(z) <- list(nm, nm)
  a <- run(z, stats::setNames(y, nm))
  b <- run(z, rev(stats::setNames(y, nm)))
  expect_equal(a$scores, b$scores)
})

test_that("contradictory definitions are refused, not resolved silently", {
  expect_input_error(pbn(list(A = "!B", B = "A"), perturbable = c(A = TRUE, A = FALSE)), "'A' more than once")
  expect_input_error(pbn(list(A = "!B", B = "A"), perturbable = c(B = FALSE, B = FALSE)), "'B' more than once")
  head <- c("begin parameters", "    1 k1 1", "    2 k2 3")
  rest <- c("end parameters", "begin species", "    1 A() 1", "    2 B() 0", "end species",
            "begin reactions", "    1 1 2 k1", "end reactions")
  f <- write_tmp(c(head, "    3 k1 5", rest), ".net")
  expect_input_error(readBioNetGen(f), ":4: parameter 'k1' is already defined at line 2")
  f <- write_tmp(c(head, rest[1:4], "    3 A() 2", rest[5:8]), ".net")
  expect_input_error(readBioNetGen(f), ":8: species 'A\\(\\)' is already defined at line 6")
  f <- write_tmp(c(head, rest[1:5], "begin groups", "    1 k2 1", "end groups", rest[6:8]), ".net")
  expect_input_error(readBioNetGen(f), "group 'k2' is already defined at line 3")
  f <- write_tmp(c(head, rest[1:5], "begin functions", "    1 g() k1*2", "    2 g() k1*3", "end functions",
                   "begin reactions", "    1 1 2 g", "end reactions"), ".net")
  expect_input_error(readBioNetGen(f), "function 'g' is already defined")
  # one definition each: read
  expect_equal(unname(readBioNetGen(write_tmp(c(head, rest), ".net"))$rates), 1)
})

test_that("errors say what is wrong: sizes, types, a single label", {
  eye <- grnMouseEye()
  g <- paste0("g", 1:1000)
  big <- matrix(0L, 1000, 1000, dimnames = list(g, g))
  # 100 species x 3e6 output times: a 2.4 GB output
  m <- reactionModel(diag(100), matrix(0, 100, 100), rates = rep(1, 100), initial = rep(1, 100))
  tt <- seq(0, 1, length.out = 3e6)
  set.seed(1)
  gx <- matrix(rnorm(2000), 200, 10, dimnames = list(paste0("g", 1:200), NULL))
  sets <- stats::setNames(lapply(1:40, function(i) paste0("g", sample(200, 20))), paste0("s", 1:40))
  old <- mem.maxVSize()
  on.exit(mem.maxVSize(old), add = TRUE)
  # MB: the vector heap's current size (gc()'s Vcells trigger: R ignores a
  # limit below it, with a warning) plus 300; each call below asks for GBs
  mem.maxVSize(gc()[2L, 4L] + 300)
  mem_error <- function(expr, arg) {
    e <- tryCatch(expr, error = function(e) e)
    expect_s3_class(e, "sysbioGPU_error_memory")
    expect_match(conditionMessage(e), paste0("`", arg, "`"), fixed = TRUE)
    expect_match(conditionMessage(e), "[0-9.]+ (MB|GB|TB)")
  }
  mem_error(philoxDraws(1.5e9, seed = 1), "n")
  mem_error(philoxDraws(2e8, seed = 1, streams = 5), "n")
  mem_error(grnSimulate(big, "most", stats::setNames(rep(TRUE, 1000), g), steps = 1e6), "steps")
  mem_error(pbnSimulate(pbn(list(A = "!A", B = "A")), steps = 2^31 / 4, trajectories = 1, seed = 1,
                        backend = "cpu"), "steps")
  mem_error(do.call(lassieSimulate, c(list(m, times = tt), cpu)), "times")
  mem_error(do.call(rapidGSEA, c(list(gx, rep(c("A", "B"), 5), sets, nperm = 5e7, minSize = 5, keepNull = TRUE,
                                      seed = 1), cpu)), "keepNull")
  # parCosnet's room for its nodes x classes results, asked for up front
  mem_error(sysbioGPU:::reserve_heap(5e9, "labels", "the nodes x classes results"), "labels")
  mem.maxVSize(old)
  # a logical matrix is named as such, not as a "matrix"
  expect_input_error(do.call(rapidGSEA, c(list(gx > 0, rep(c("A", "B"), 5), sets), cpu)), "logical matrix")
  expect_input_error(gseaStats(c(a = 0.5), matrix(TRUE, 1, 3)), "logical matrix")
  # one string that names no file is a label, not a missing CLS file
  expect_input_error(do.call(rapidGSEA, c(list(gx, "A", sets), cpu)), "single string 'A'.*one label per sample")
  expect_input_error(do.call(rapidGSEA, c(list(gx, "A", sets), cpu)), "10")
  # a path that does not exist is still reported as a missing file
  expect_input_error(do.call(rapidGSEA, c(list(gx, file.path(tempdir(), "none.cls"), sets), cpu)), "does not exist")
})

test_that("runInfo() accepts the array output of lassieSimulate()", {
  m <- reactionModel(rbind(c(1, 0), c(0, 1)), rbind(c(0, 1), c(1, 0)), rates = c(2, 1), initial = c(1, 0))
  a <- do.call(lassieSimulate, c(list(m, times = c(0, 1), rates = rbind(c(2, 1), c(3, 1)), output = "array"), cpu))
  ri <- runInfo(a)
  expect_identical(ri$method, "lassieArray")
  expect_identical(ri$backend, "cpu")
  expect_true(is.finite(ri$seconds) && ri$seconds >= 0)
})

test_that("rounds over an unstarted BPPARAM start its workers once", {
  skip_if_not_installed("BiocParallel")
  count <- new.env()
  count$n <- 0L
  tracer <- bquote(assign("n", get("n", envir = .(count)) + 1L, envir = .(count)))
  suppressMessages(trace("bpstart", tracer = tracer, where = asNamespace("BiocParallel"), print = FALSE))
  on.exit(suppressMessages(untrace("bpstart", where = asNamespace("BiocParallel"))), add = TRUE)
  p <- BiocParallel::SerialParam()
  eye <- grnMouseEye()
  fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 32, islands = 2, generations = 20,
                   migrationInterval = 4, seed = 1, backend = "cpu", verbose = FALSE, BPPARAM = p)
  expect_identical(count$n, 1L)
  expect_false(BiocParallel::bpisup(p)) # stopped again, as it came
  ref <- grnEvolve(eye$network, eye$from, eye$to, popSize = 32, islands = 2, generations = 20,
                   migrationInterval = 4, seed = 1, backend = "cpu", verbose = FALSE)
  expect_identical(fit$network, ref$network)
  # a started back-end is left started, and not started again
  count$n <- 0L
  BiocParallel::bpstart(p)
  count$n <- 0L
  grnEvolve(eye$network, eye$from, eye$to, popSize = 32, islands = 2, generations = 20,
            migrationInterval = 4, seed = 1, backend = "cpu", verbose = FALSE, BPPARAM = p)
  expect_identical(count$n, 0L)
  expect_true(BiocParallel::bpisup(p))
  BiocParallel::bpstop(p)
  # pbnSteadyState's rounds too
  count$n <- 0L
  net <- pbn(list(A = "!B", B = "A", C = "A & B"))
  pbnSteadyState(net, list(c(A = TRUE)), r = 0.05, s = 0.9, seed = 1, backend = "cpu", threads = 1,
                 verbose = FALSE, BPPARAM = BiocParallel::SerialParam())
  expect_identical(count$n, 1L)
})
