#!/usr/bin/env bash
# The one script for a GPU machine reached through a device tool that runs
# a command in a copy of this tree (and brings back $OUT).
# SBG_DEVICE_TOOLS: the folder of that machine's packing scripts
# (pack-r-runtime.sh, which writes .device/r-runtime.tar.xz and
# .device/setup-r.sh, and gpu-host-sonames.txt, the libraries the machine
# has); `pack` needs it.
#
# Here (this machine: nvcc, no GPU):
#   bash tools/gpu-check.sh pack
#     builds the package with CUDA into .device/lib and packs R with the
#     packages the GPU run needs into .device/ (about 35 MB).
# There (through the device tool, carrying .device):
#   bash tools/gpu-check.sh run
#     sets up R, prints gpuInfo(), runs the whole test suite with
#     SYSBIOGPU_TEST_GPU=1 (a missing GPU fails), then compute-sanitizer on
#     the GPU self-tests (SANITIZE=0 skips it), then every inst/bench/*.R
#     (BENCH="gsea pbn" picks scripts by name, BENCH=none skips them);
#     logs and tables go to $OUT, a short summary is printed last.
# For example, with the device tool:
#   command: bash tools/gpu-check.sh run     carry: [".device"]
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

pack() {
  set -e
  tools=${SBG_DEVICE_TOOLS:-}
  if [ -z "$tools" ] || [ ! -f "$tools/pack-r-runtime.sh" ]; then
    echo "gpu-check: set SBG_DEVICE_TOOLS to the folder holding pack-r-runtime.sh and gpu-host-sonames.txt" >&2
    exit 1
  fi
  rm -rf .device/lib && mkdir -p .device/lib
  SYSBIOGPU_CUDA=yes R CMD INSTALL --preclean --no-test-load --no-docs -l .device/lib . > .device/install.log 2>&1 ||
    { tail -30 .device/install.log; echo "gpu-check: build failed (.device/install.log)" >&2; exit 1; }
  grep "sysbioGPU configure" .device/install.log
  grep -q "wrote src/Makevars (CUDA: yes)" .device/install.log ||
    { echo "gpu-check: the build has no CUDA engines" >&2; exit 1; }
  # libSBML (readSBML()) is not on the GPU machine: copy it and those of its
  # libraries that the machine lacks (not glibc's, not in
  # gpu-host-sonames.txt, not already in the R runtime because libR needs
  # them, as ICU) next to the package; `run` puts them on LD_LIBRARY_PATH.
  rm -rf .device/extra-libs && mkdir -p .device/extra-libs
  so=.device/lib/sysbioGPU/libs/sysbioGPU.so
  # (grep without -q in pipes: with pipefail, -q's early exit can kill ldd
  # with SIGPIPE and turn a match into a failure)
  if ldd "$so" | grep 'libsbml\.so' > /dev/null; then
    sbml=$(ldd "$so" | awk '$1 ~ /^libsbml\.so/ {print $3}')
    { echo "$sbml"; ldd "$sbml" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'; } | sort -u |
      grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libresolv|libutil)\.so' |
      while read -r lib; do
        grep -qxF "$(basename "$lib")" "$tools/gpu-host-sonames.txt" 2>/dev/null ||
          ldd "$(R RHOME)/lib/libR.so" | grep -F "$(basename "$lib") =>" > /dev/null ||
          cp -L "$lib" .device/extra-libs/
      done
    echo "gpu-check: bundled for libSBML: $(ls .device/extra-libs | tr '\n' ' ')"
  fi
  if LD_LIBRARY_PATH="$PWD/.device/extra-libs" ldd "$so" | grep "not found" > /dev/null; then
    LD_LIBRARY_PATH="$PWD/.device/extra-libs" ldd "$so" | grep "not found"
    echo "gpu-check: libraries missing here" >&2; exit 1
  fi
  if [ ! -f .device/r-runtime.tar.xz ] || [ "${REPACK:-0}" = 1 ]; then
    bash "$tools/pack-r-runtime.sh" ${PACK_PKGS:-testthat Matrix}
  fi
  du -sh .device
}

run() {
  out=${OUT:-/tmp/gpu-check}
  mkdir -p "$out"
  export R_LIBS="$PWD/.device/lib"
  export SYSBIOGPU_TEST_GPU=1
  # libraries bundled by `pack` (libSBML and what it needs)
  [ -d .device/extra-libs ] && export LD_LIBRARY_PATH="$PWD/.device/extra-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  bash .device/setup-r.sh > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; echo "gpu-check: R setup failed"; exit 1; }
  # as R will load it (R's ldpaths adds /opt/r-deps of the runtime)
  LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/opt/r-deps" ldd .device/lib/sysbioGPU/libs/sysbioGPU.so > "$out/ldd.txt" 2>&1
  if grep -q "not found" "$out/ldd.txt"; then
    echo "gpu-check: sysbioGPU.so lacks libraries here:"; grep "not found" "$out/ldd.txt"
  fi
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true

  Rscript -e 'library(sysbioGPU); print(gpuInfo()); print(resolveBackend("gpu"))' > "$out/gpuinfo.txt" 2>&1
  gpuinfo_rc=$?

  # One R process per test file, each under a time limit (TEST_TIMEOUT
  # seconds, default 300), so a hang names its file; TESTS="pbn gsea" runs
  # the files whose names contain those words.
  tests_rc=0
  : > "$out/tests.csv"; : > "$out/tests-files.txt"
  for f in tests/testthat/test-*.R; do
    name=$(basename "$f" .R)
    if [ -n "${TESTS:-}" ]; then
      hit=0; for w in $TESTS; do case "$name" in *"$w"*) hit=1 ;; esac; done
      [ "$hit" = 1 ] || continue
    fi
    OUT_DIR="$out" timeout "${TEST_TIMEOUT:-300}" Rscript -e '
      f <- commandArgs(TRUE)[1]
      res <- as.data.frame(testthat::test_file(f, package = "sysbioGPU",
        load_package = "installed", reporter = "progress", stop_on_failure = FALSE))
      write.table(res[, c("file", "test", "nb", "failed", "skipped", "error", "real")],
                  file.path(Sys.getenv("OUT_DIR"), "tests.csv"), append = TRUE, sep = ",",
                  col.names = FALSE, row.names = FALSE)
      quit(status = as.integer(sum(res$failed) + sum(res$error) > 0))
    ' "$f" > "$out/$name.log" 2>&1
    rc=$?
    echo "$name: rc $rc ($( [ $rc = 124 ] && echo "timed out" || echo "finished"))" >> "$out/tests-files.txt"
    [ $rc = 0 ] || tests_rc=1
  done
  OUT_DIR="$out" Rscript -e 'r <- read.csv(file.path(Sys.getenv("OUT_DIR"), "tests.csv"), header = FALSE)
    cat(sprintf("tests: %d expectations in %d tests, %d failed, %d errors, %d skipped\n",
        sum(r[[3]]), nrow(r), sum(r[[4]]), sum(r[[6]]), sum(r[[5]])))' > "$out/tests-summary.txt" 2>&1
  cat "$out/tests-files.txt" >> "$out/tests-summary.txt"

  # compute-sanitizer memcheck (with leak check) over the GPU self-tests and
  # then each method's test file (SANITIZE_TIMEOUT seconds each, default 70).
  # API errors are not counted: the suites provoke failed allocations on
  # purpose; out-of-bounds accesses, races on memory and leaks are.
  sanitize_rc=skipped
  : > "$out/sanitizer-summary.txt"
  if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer > /dev/null; then
    sanitize_rc=0
    san="compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 9"
    timeout "${SANITIZE_TIMEOUT:-70}" $san Rscript -e 'library(sysbioGPU)
        invisible(philoxShuffle(100, 1, streams = 1000, backend = "gpu"))
        invisible(philoxDraws(1000, 1, streams = 100, type = "integer", max = 7, backend = "gpu"))
        invisible(sysbioGPU:::busy_run(0.2, 2^24, backend = "gpu"))' > "$out/sanitizer.log" 2>&1
    echo "selftest: rc $? $(grep -E "ERROR SUMMARY" "$out/sanitizer.log" | tail -1)" >> "$out/sanitizer-summary.txt"
    for f in tests/testthat/test-*.R; do
      name=$(basename "$f" .R)
      case "$name" in test-backend|test-interrupt|test-philox) continue ;; esac
      timeout "${SANITIZE_TIMEOUT:-70}" $san Rscript -e 'testthat::test_file(commandArgs(TRUE)[1],
        package = "sysbioGPU", load_package = "installed", reporter = "summary")' "$f" > "$out/sanitizer-$name.log" 2>&1
      rc=$?
      echo "$name: rc $rc$( [ $rc = 124 ] && echo " (timed out)") $(grep -E "ERROR SUMMARY|LEAK SUMMARY" "$out/sanitizer-$name.log" | tr '\n' ' ')" >> "$out/sanitizer-summary.txt"
      [ $rc = 9 ] && sanitize_rc=9
    done
  fi

  : > "$out/bench.txt"
  # BENCH="pbn grn" runs only those scripts, BENCH=none none of them.
  for b in inst/bench/*.R; do
    [ -e "$b" ] || continue
    name=$(basename "$b" .R)
    case " ${BENCH:-all} " in *" all "*|*" $name "*) ;; *) continue ;; esac
    echo "== $b" >> "$out/bench.txt"
    Rscript "$b" >> "$out/bench.txt" 2>&1 || echo "(failed: $?)" >> "$out/bench.txt"
  done

  echo "==================== gpu-check summary ===================="
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  echo "-- gpuInfo() (rc $gpuinfo_rc)"; cat "$out/gpuinfo.txt"
  echo "-- $(cat "$out/tests-summary.txt" 2>/dev/null || echo "tests did not finish") (rc $tests_rc)"
  if [ "$tests_rc" != 0 ]; then
    for l in "$out"/test-*.log; do
      grep -qE "FAIL [1-9]|Failure|Error \(" "$l" && { echo "---- $(basename "$l")"; grep -E "^(Failure|Error) \(" -A12 "$l" | head -80; }
    done
    grep "timed out" "$out/tests-files.txt" | while read -r t; do echo "---- $t"; tail -5 "$out/${t%%:*}.log"; done
  fi
  echo "-- compute-sanitizer: rc $sanitize_rc"; cat "$out/sanitizer-summary.txt"
  echo "-- benchmarks"; cat "$out/bench.txt"
  [ "$tests_rc" = 0 ] && [ "$gpuinfo_rc" = 0 ]
}

case "$mode" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: bash tools/gpu-check.sh pack|run (see the comment at the top)" >&2; exit 2 ;;
esac
