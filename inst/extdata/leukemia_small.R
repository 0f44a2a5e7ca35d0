# How leukemia_small.gct/.cls and leukemia_go.gmt were made (run from the
# package root with the project's shared data; needs org.Hs.eg.db, GO.db).
# Source: Golub et al. 1999 leukemia data as distributed with GSEApy
# (tests/extdata, BSD-3-Clause); gene sets: Gene Ontology biological
# processes (GO.db, CC BY 4.0) mapped to symbols with org.Hs.eg.db.
library(sysbioGPU)
x <- readGCT("../shared/data/gsea/leukemia/Leukemia_hgu95av2.trim.gct")
cls <- readLines("../shared/data/gsea/leukemia/Leukemia.cls")
v <- apply(x, 1, stats::var)
keep <- sort(order(v, decreasing = TRUE)[1:2000])
x <- x[keep, ]
out <- "inst/extdata/leukemia_small.gct"
writeLines(c("#1.2", paste(nrow(x), ncol(x), sep = "\t"),
             paste(c("NAME", "Description", colnames(x)), collapse = "\t"),
             paste(rownames(x), "na", apply(x, 1, paste, collapse = "\t"), sep = "\t")), out)
writeLines(cls, "inst/extdata/leukemia_small.cls")
eg <- AnnotationDbi::mget(rownames(x), org.Hs.eg.db::org.Hs.egSYMBOL2EG, ifnotfound = NA)
eg <- vapply(eg, function(e) as.character(e[[1L]]), "")
go <- AnnotationDbi::as.list(org.Hs.eg.db::org.Hs.egGO2ALLEGS)
ont <- AnnotationDbi::Ontology(names(go))
go <- go[ont == "BP"]
sets <- lapply(go, function(e) sort(unique(names(eg)[eg %in% e])))
k <- lengths(sets)
sets <- sets[k >= 15 & k <= 200]
sets <- sets[!duplicated(vapply(sets, paste, "", collapse = ","))]
terms <- AnnotationDbi::Term(names(sets))
names(sets) <- paste0(names(sets), " ", terms)
writeGMT(sets, "inst/extdata/leukemia_go.gmt", description = rep("GO_BP", length(sets)))
