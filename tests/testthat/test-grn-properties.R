# Properties of grnEvolve's operators checked on the networks it returns,
# independently of the engine: no gene above maxInDegree, whatever mutation
# and crossover proposed (breaking the in-degree check left 380 of
# 1,024 individuals above the limit with every test green).

# The mouse eye network cut to at most two inputs per gene: reaching the
# E10.5 state wants more inputs than that, so the limit binds in every run.
eye_two_inputs <- function() {
  eye <- grnMouseEye()
  net <- eye$network
  for (i in seq_len(nrow(net))) {
    nz <- which(net[i, ] != 0)
    if (length(nz) > 2) net[i, nz[-(1:2)]] <- 0
  }
  list(network = net, from = eye$from, to = eye$to)
}

test_that("no gene of an evolved network has more inputs than maxInDegree", {
  e <- eye_two_inputs()
  expect_lte(max(rowSums(e$network != 0)), 2)
  for (s in 1:3) {
    fit <- grnEvolve(e$network, e$from, e$to, popSize = 256, islands = 2, generations = 100,
                     maxInDegree = 2, pLink = 0.1, pRule = 0.05, seed = s, backend = "cpu", threads = 2)
    indeg <- rowSums(fit$network != 0)
    expect_lte(max(indeg), 2)
    # the limit binds: some gene uses both of its inputs
    expect_true(any(indeg == 2))
    # the reported changes are exactly the links that differ from the reference
    expect_identical(nrow(fit$changes), sum(fit$network != e$network))
  }
})

test_that("the returned fitness is the one of the returned network, recomputed in R", {
  e <- eye_two_inputs()
  fit <- grnEvolve(e$network, e$from, e$to, popSize = 128, islands = 2, generations = 30,
                   maxInDegree = 2, pLink = 0.1, pRule = 0.05, seed = 4, backend = "cpu", threads = 1)
  # genes whose last simulated state misses the goal, by grnSimulate() on the
  # returned network and rules (the R-side simulator), and the changed links
  traj <- grnSimulate(fit$network, fit$rules, stats::setNames(e$from == 1, rownames(e$network)),
                      fit$settings$steps)
  miss <- sum(traj[nrow(traj), ] != (e$to == 1))
  expect_identical(length(fit$mismatches), miss)
  expect_identical(as.numeric(fit$dl), as.numeric(sum(fit$network != e$network)))
})

test_that("migrants replace the worst of the next island, never its best", {
  # each island keeps its best (elitism), and migrants take the places of
  # the worst: an island's best fitness never gets worse, even when all but
  # one individual of every island are replaced at every generation
  eye <- grnMouseEye()
  for (s in 1:2) {
    fit <- grnEvolve(eye$network, eye$from, eye$to, popSize = 64, islands = 2, migrants = 31,
                     migrationInterval = 1, generations = 40, pLink = 0.05, pRule = 0.05,
                     seed = s, backend = "cpu", threads = 1)
    expect_true(all(apply(fit$history, 2, function(v) all(diff(v) <= 0))))
  }
})
