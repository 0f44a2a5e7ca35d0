# Long runs show a cli progress bar when `verbose` is on, and none when off.

test_that("a verbose run draws a cli progress bar that reaches its end", {
  old <- options(cli.progress_show_after = 0, cli.dynamic = FALSE)
  on.exit(options(old))
  out <- capture.output(n <- sysbioGPU:::busy_run(1, verbose = TRUE), type = "message")
  expect_gte(n, 1)
  expect_true(any(grepl("^busy", out)))
  expect_true(any(grepl("100%", out, fixed = TRUE)) || any(grepl("[0-9]+%", out)))
})

test_that("a quiet run prints nothing", {
  old <- options(cli.progress_show_after = 0)
  on.exit(options(old))
  out <- capture.output(invisible(sysbioGPU:::busy_run(0.5, verbose = FALSE)), type = "message")
  expect_length(out, 0)
})

test_that("an interrupted verbose run closes its bar and still raises the interrupt", {
  skip_on_os("windows")
  old <- options(cli.progress_show_after = 0, cli.dynamic = FALSE)
  on.exit(options(old))
  interrupt_after(0.6)
  expect_error(capture.output(sysbioGPU:::busy_run(20, verbose = TRUE), type = "message"),
               class = "sysbioGPU_error_interrupted")
  # a new bar opens and closes cleanly after the interrupted one
  out <- capture.output(invisible(sysbioGPU:::busy_run(0.3, verbose = TRUE)), type = "message")
  expect_true(any(grepl("^busy", out)))
})
