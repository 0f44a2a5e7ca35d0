# How leukemia_small.gct/.cls and leukemia_go.gmt were made (run from the
# package root; needs org.Hs.eg.db, GO.db).
# Source: Golub et al. 1999 leukemia data as distributed with GSEApy
# (tests/extdata, BSD-3-Clause); gene sets: Gene Ontology biological
# processes (GO.db, CC BY 4.0) mapped to symbols with org.Hs.eg.db.
# The source files are not shipped: set SYSBIOGPU_LEUKEMIA_DATA to a folder
# holding GSEApy's tests/extdata/Leukemia_hgu95av2.trim.gct and Leukemia.cls
# (https://github.com/zqfang/GSEApy).
src <- Sys.getenv("SYSBIOGPU_LEUKEMIA_DATA")
files <- file.path(src, c("Leukemia_hgu95av2.trim.gct", "Leukemia.cls"))
if (!nzchar(src) || !all(file.exists(files))) {
  message("Set SYSBIOGPU_LEUKEMIA_DATA to a folder holding Leukemia_hgu95av2.trim.gct and ",
          "Leukemia.cls from GSEApy's tests/extdata (https://github.com/zqfang/GSEApy).")
  quit(save = "no", status = 1)
}
library(sysbioGPU)
x <- readGCT(files[1])
cls <- readLines(files[2])
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
