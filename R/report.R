#' Render the package's demonstration report
#'
#' Runs a short demonstration of every method the package has on bundled
#' example data, on the backend you choose, and renders it as an HTML
#' report (R Markdown) with what ran on which backend and device, the
#' timings, result tables and plots. `make demo` calls this.
#'
#' @param outputDir Folder for the report (created if needed).
#' @param backend,threads,device See [resolveBackend()].
#' @param quiet Passed to [rmarkdown::render()].
#' @return The path of the HTML file, invisibly.
#' @examplesIf interactive() && requireNamespace("rmarkdown", quietly = TRUE)
#' demoReport(tempdir())
#' @export
demoReport <- function(outputDir = tempdir(), backend = getOption("sysbioGPU.backend", "auto"),
                       threads = getOption("sysbioGPU.threads"),
                       device = getOption("sysbioGPU.device", 0L), quiet = TRUE) {
  if (!requireNamespace("rmarkdown", quietly = TRUE) || !rmarkdown::pandoc_available()) {
    stop_input("demoReport() needs the rmarkdown package and pandoc ",
               "(Debian: apt-get install r-cran-rmarkdown pandoc)")
  }
  b <- resolveBackend(backend, threads, device)
  dir.create(outputDir, showWarnings = FALSE, recursive = TRUE)
  src <- system.file("report", package = "sysbioGPU", mustWork = TRUE)
  # Render from a copy: the installed package folder may be read-only. The
  # method sections are child documents next to the main one.
  work <- tempfile("sysbioGPU-demo-")
  dir.create(work)
  on.exit(unlink(work, recursive = TRUE), add = TRUE)
  file.copy(list.files(src, full.names = TRUE), work)
  out <- rmarkdown::render(file.path(work, "sysbioGPU-demo.Rmd"),
                           output_dir = normalizePath(outputDir),
                           params = list(backend = b$backend, threads = b$threads,
                                         device = if (is.na(b$device)) 0L else b$device),
                           envir = new.env(parent = globalenv()), quiet = quiet)
  message("demonstration report: ", out)
  invisible(out)
}
