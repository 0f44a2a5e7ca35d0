# Shared by tools/mutants.sh and tools/mutants-gpu.sh (sourced): applying
# one mutation and running a mutant's test files.  Both need RSCRIPT set.

apply_mutant() { # file pattern replacement -> 0 applied, 3 not found
  PAT=$2 REP=$3 perl -e '
    my $f = shift; local $/; open(my $h, "<", $f) or exit 4; my $s = <$h>; close $h;
    my $i = index($s, $ENV{PAT}); exit 3 if $i < 0;
    substr($s, $i, length($ENV{PAT})) = $ENV{REP};
    open($h, ">", $f) or exit 4; print $h $s; close $h;' "$1"
}

# Runs the files (comma-separated, in tests/testthat/ of dir) with R_LIBS
# lib, each under a time limit of tmo seconds, stopping at the first that
# fails; echoes "pass", "failed:FILE" or "timeout:FILE", with " (no FILE)"
# for each file that dir lacks.
run_tests() { # dir lib files(comma) log tmo
  local dir=$1 lib=$2 files=$3 log=$4 tmo=$5 f rc miss=""
  for f in ${files//,/ }; do
    if [ ! -f "$dir/tests/testthat/$f" ]; then miss="$miss (no $f)"; continue; fi
    (cd "$dir/tests/testthat" && R_LIBS="$lib" timeout "$tmo" "$RSCRIPT" -e '
      r <- as.data.frame(testthat::test_file(commandArgs(TRUE)[1], package = "sysbioGPU",
                                             load_package = "installed", reporter = "summary"))
      quit(status = if (any(r$failed > 0) || any(r$error)) 1 else 0)' "$f" >>"$log" 2>&1)
    rc=$?
    if [ $rc = 124 ]; then echo "timeout:$f$miss"; return; fi
    if [ $rc != 0 ]; then echo "failed:$f$miss"; return; fi
  done
  echo "pass$miss"
}
