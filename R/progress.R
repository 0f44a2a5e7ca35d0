# Progress bars of long engine runs, drawn through cli so that they behave
# in a terminal, RStudio, knitr and log files alike. The engines' C glue
# (src/core/glue.c) opens a bar when a `verbose` run has gone on for a while,
# moves it as the engine reports its share done, and closes it on every
# path; the bar lives in an environment the glue keeps alive meanwhile.

progress_open <- function(label) {
  bar <- new.env(parent = baseenv())
  bar$start <- proc.time()[["elapsed"]]
  bar$id <- cli::cli_progress_bar(label, total = 100, clear = TRUE,
                                  format = "{cli::pb_name} {cli::pb_bar} {cli::pb_percent} | ETA {cli::pb_eta}",
                                  .envir = bar)
  bar
}

# The glue calls this at most every 0.2 s, so each call may draw (`force`):
# cli's own timer would skip some and leave short runs without a bar; before
# `cli.progress_show_after` seconds nothing is drawn, as cli does.
# In a log file (no dynamic terminal) each drawing is a new line: one every
# 5 percent at most.
progress_set <- function(bar, percent) {
  shown <- percent > 0 &&
    proc.time()[["elapsed"]] - bar$start >= getOption("cli.progress_show_after", 2)
  if (shown && !cli::is_dynamic_tty()) {
    shown <- is.null(bar$drawn) || percent - bar$drawn >= 5
  }
  if (shown) bar$drawn <- percent
  cli::cli_progress_update(set = percent, id = bar$id, force = shown, .envir = bar)
  invisible()
}

progress_close <- function(bar) {
  cli::cli_progress_done(id = bar$id, .envir = bar)
  invisible()
}
