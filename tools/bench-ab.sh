#!/usr/bin/env bash
# Two builds of the package on one machine, one bench command, alternating:
#   tools/bench-ab.sh LIB_A LIB_B ROUNDS Rscript inst/bench/<script>.R [args]
# LIB_A and LIB_B are R libraries holding a sysbioGPU each (R CMD INSTALL
# -l); the command runs with R_LIBS set to each in turn, A B A B ..., with
# the caller's environment (the bench script's settings), so that both
# builds meet the same host, load and clocks.  Each run's output goes to
# stdout after a line "##### <library> round <r>", and its exit status and
# wall time after it, so that a before/after comparison (a regression
# check) reads the two builds' rows side by side.
set -u
if [ $# -lt 4 ]; then echo "usage: $0 LIB_A LIB_B ROUNDS command..." >&2; exit 2; fi
a=$1; b=$2; rounds=$3; shift 3
for lib in "$a" "$b"; do
  [ -d "$lib/sysbioGPU" ] || { echo "$0: no sysbioGPU in $lib" >&2; exit 2; }
done
for r in $(seq 1 "$rounds"); do
  for lib in "$a" "$b"; do
    echo "##### $lib round $r"
    t0=$(date +%s%N)
    R_LIBS="$lib" "$@"
    rc=$?
    echo "##### $lib round $r: exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  done
done
