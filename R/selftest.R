# A long, interruptible run that holds memory, for the tests of Ctrl-C and
# of memory release on both backends (src/core/selftest_*.c).
busy_run <- function(seconds, bytes = 2^20, backend = "cpu", threads = 1L,
                     device = 0L, verbose = FALSE) {
  b <- resolveBackend(backend, threads, device)
  a <- backend_args(b)
  .Call(ffi_busy, as.double(seconds), as.double(bytes), a$gpu, a$threads, a$device,
        check_flag(verbose))
}
