# GPU paths of every method, run under compute-sanitizer memcheck by
# tools/gpu-check.sh's callers (see the closing notes): small runs of every
# method's GPU engine, each compared with the CPU's result, so that a run
# prints TRUE per check and the sanitizer sees the kernels and their frees.
#   compute-sanitizer --tool memcheck --leak-check full Rscript tools/gpu-memcheck.R
library(sysbioGPU)
ex <- function(...) system.file("extdata", ..., package = "sysbioGPU")
same <- function(label, ok) cat(sprintf("%-44s %s\n", label, isTRUE(ok)))

# rapidGSEA: phenotype permutations on the GPU; gene permutations (run on the host)
res <- rapidGSEA(readGCT(ex("leukemia_small.gct")), readCLS(ex("leukemia_small.cls")),
                 readGMT(ex("leukemia_go.gmt")), nperm = 200, seed = 1, backend = "gpu", verbose = FALSE)
ref <- rapidGSEA(readGCT(ex("leukemia_small.gct")), readCLS(ex("leukemia_small.cls")),
                 readGMT(ex("leukemia_go.gmt")), nperm = 200, seed = 1, backend = "cpu", verbose = FALSE)
same("rapidGSEA GPU == CPU (ES, pval)", isTRUE(all.equal(res$ES, ref$ES, tolerance = 1e-9)) && identical(res$pval, ref$pval))

# rapidGSEA: a preranked list, gene permutations with the shared null and
# its statistics on the device (gsea_preranked_gpu.cu)
set.seed(5)
rk <- stats::setNames(stats::rnorm(3000), paste0("g", 1:3000))
gs <- lapply(c(15, 15, 40, 120, 400), function(k) sample(names(rk), k))
names(gs) <- paste0("s", seq_along(gs))
pg <- rapidGSEA(rk, geneSets = gs, nperm = 4000, seed = 1, backend = "gpu", pvalue = "permutation", verbose = FALSE)
pc <- rapidGSEA(rk, geneSets = gs, nperm = 4000, seed = 1, backend = "cpu", pvalue = "permutation", verbose = FALSE)
cols <- c("ES", "NES", "pval", "FDR", "FWER")
same("rapidGSEA preranked GPU == CPU (table)", identical(as.data.frame(pg)[cols], as.data.frame(pc)[cols]))

# rapidGSEA: many signatures in one call (stats = matrix), each signature
# a whole GPU run inside the one engine call
sm <- cbind(a = rk, b = rev(rk), c = rk^3)
rownames(sm) <- names(rk)
msg <- rapidGSEA(stats = sm, geneSets = gs, nperm = 2000, seed = 1, backend = "gpu", pvalue = "permutation", verbose = FALSE)
msc <- rapidGSEA(stats = sm, geneSets = gs, nperm = 2000, seed = 1, backend = "cpu", pvalue = "permutation", verbose = FALSE)
same("rapidGSEA many signatures GPU == CPU (table)",
     identical(as.data.frame(msg)[c("signature", cols)], as.data.frame(msc)[c("signature", cols)]))

# rapidGSEA: multilevel p-values with the members' moves on the device
# (gsea_multilevel_gpu.cu), then the same on the CPU
# on a list where three sets are shifted, so that their sizes climb levels
rs <- rk
rs[gs$s1] <- rs[gs$s1] - 2
rs[gs$s3] <- rs[gs$s3] + 1.5
rs[gs$s4] <- rs[gs$s4] + 0.5
mg <- rapidGSEA(rs, geneSets = gs, nperm = 500, seed = 1, backend = "gpu", sampleSize = 51, verbose = FALSE)
mc <- rapidGSEA(rs, geneSets = gs, nperm = 500, seed = 1, backend = "cpu", sampleSize = 51, verbose = FALSE)
same("rapidGSEA multilevel GPU == CPU (pval)", identical(mg$pval, mc$pval) && identical(mg$log2err, mc$log2err) &&
       min(mc$pval) < 1e-8)

# pbnSteadyState: the new sample size from the chains' spread, GPU engine
net <- readPBN(ex("pbn-example.bnet"))
g <- pbnSteadyState(net, c(Apoptosis = TRUE), p = 0.01, r = 0.01, seed = 2, backend = "gpu", verbose = FALSE)
c <- pbnSteadyState(net, c(Apoptosis = TRUE), p = 0.01, r = 0.01, seed = 2, backend = "cpu", verbose = FALSE)
same("pbnSteadyState GPU == CPU", identical(g$probability, c$probability) && identical(g$N, c$N))

# parCosnet: checked W slots, GPU dynamics
W <- readNetwork(ex("yeast-string-edges.txt.gz"))
Y <- readRDS(ex("yeast-funcat.rds"))[rownames(W), ]
Y <- Y[, colSums(Y) >= 40 & colSums(Y) <= 200][, 1:3]
y <- Y; y[seq(1, nrow(y), 5), ] <- NA
fg <- parCosnet(W, y, seed = 3, backend = "gpu", verbose = FALSE)
fc <- parCosnet(W, y, seed = 3, backend = "cpu", verbose = FALSE)
same("parCosnet GPU == CPU (predictions)", identical(fg$predictions, fc$predictions))

# grnEvolve: one call and the rounds that large caps use
eye <- grnMouseEye()
a <- grnEvolve(eye$network, eye$from, eye$to, popSize = 1024, generations = 60, seed = 4, backend = "gpu", verbose = FALSE)
b <- grnEvolve(eye$network, eye$from, eye$to, popSize = 1024, generations = 60, seed = 4, backend = "cpu", verbose = FALSE)
same("grnEvolve GPU == CPU", identical(a$history, b$history) && identical(a$network, b$network))
op <- options(sysbioGPU.grnHistoryRows = 10)
r <- grnEvolve(eye$network, eye$from, eye$to, popSize = 1024, generations = 60, seed = 4, backend = "gpu", verbose = FALSE)
options(op)
same("grnEvolve GPU rounds == one call", identical(a$history, r$history) && identical(a$network, r$network))

# lassieSimulate: a batch on the device, stiff ones in the device's implicit
# steps (lassie_gpu_bdf.cu), output times interpolated
# (forced: so small a batch would take the host's implicit steps)
options(sysbioGPU.lassieDeviceBDF = TRUE)
m <- readBioNetGen(ex("lassie", "Haugh2b.net"))
K <- rbind(m$rates, m$rates * 1.5, m$rates * 0.5)
lg <- lassieSimulate(m, times = 0:10, rates = K, backend = "gpu", verbose = FALSE)
lc <- lassieSimulate(m, times = 0:10, rates = K, backend = "cpu", verbose = FALSE)
same("lassieSimulate GPU batch == CPU", isTRUE(all.equal(lapply(lg, unclass), lapply(lc, unclass), tolerance = 1e-9,
                                                        check.attributes = FALSE)))
# values and solver statistics (the other attributes name the backend and time)
vals <- function(b) lapply(b, function(s) list(c(s), attr(s, "stats")))
same("lassieSimulate GPU batch identical to CPU", identical(vals(lg), vals(lc)))
lg <- lassieSimulate(m, times = seq(0, 10, by = 0.05), rates = K, method = "bdf", backend = "gpu", verbose = FALSE)
lc <- lassieSimulate(m, times = seq(0, 10, by = 0.05), rates = K, method = "bdf", backend = "cpu", verbose = FALSE)
same("lassieSimulate GPU bdf identical to CPU", identical(vals(lg), vals(lc)))
