#!/usr/bin/env bash
# make mutants: one-line mutations of the engines, each of which the tests
# must catch (issue 18).  tools/mutants.txt lists them, one per line:
#   id | file | exact text to find | its replacement | test files
# The tree is copied once and built CPU-only; each mutant is a copy of that
# build with one replacement (its first occurrence), rebuilt (only the
# mutated file recompiles) and tested with its test files under a time
# limit.  A mutant is "killed" when a test fails, errors or times out,
# "SURVIVED" when they all pass, "not applied" when its text is not found,
# and "stillborn" when it does not compile.  Exit status 1 unless every
# applied mutant is killed.
#   MUTANTS="grn-indeg gsea-pval"   only these ids
#   MUTANTS_TIMEOUT=300             seconds per mutant's tests
set -uo pipefail
cd "$(dirname "$0")/.."
list=${MUTANTS_LIST:-tools/mutants.txt}
work=${MUTANTS_DIR:-$PWD/check/mutants}
limit=${MUTANTS_TIMEOUT:-300}
rm -rf "$work" && mkdir -p "$work"

base="$work/base"
mkdir -p "$base"
git ls-files -co --exclude-standard -z | xargs -0 cp -p --parents -t "$base"
rm -f "$base"/src/*.o "$base"/src/*/*.o "$base"/src/*.so
mkdir -p "$work/lib-base"
if ! SYSBIOGPU_CUDA=no R CMD INSTALL --no-docs --no-test-load -l "$work/lib-base" "$base" > "$work/base.log" 2>&1; then
  tail -20 "$work/base.log"; echo "mutants: the unmutated tree does not build" >&2; exit 2
fi

killed=0; survived=0; skipped=0; n=0
printf '%-22s %-12s %s\n' "mutant" "result" "tests" | tee "$work/results.txt"
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  IFS='|' read -r id file from to tests <<< "$line"
  trim() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; printf '%s' "${s%"${s##*[![:space:]]}"}"; }
  id=$(trim "$id"); file=$(trim "$file"); from=$(trim "$from"); to=$(trim "$to"); tests=$(trim "$tests")
  if [ -n "${MUTANTS:-}" ]; then case " $MUTANTS " in *" $id "*) ;; *) continue ;; esac; fi
  n=$((n + 1))
  m="$work/m-$id"
  rm -rf "$m" && cp -a "$base" "$m"
  hits=$(FROM="$from" perl -0777 -ne 'my $c = () = /\Q$ENV{FROM}\E/g; print $c' "$m/$file" 2>/dev/null || echo 0)
  if [ "${hits:-0}" = 0 ]; then
    printf '%-22s %-12s %s\n' "$id" "not applied" "($file: text not found)" | tee -a "$work/results.txt"
    skipped=$((skipped + 1)); rm -rf "$m"; continue
  fi
  FROM="$from" TO="$to" perl -0777 -i -pe 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$m/$file"
  touch "$m/$file"
  mkdir -p "$m.lib"
  if ! SYSBIOGPU_CUDA=no R CMD INSTALL --no-docs --no-test-load -l "$m.lib" "$m" > "$m.build.log" 2>&1; then
    printf '%-22s %-12s %s\n' "$id" "stillborn" "(does not compile: $m.build.log)" | tee -a "$work/results.txt"
    skipped=$((skipped + 1)); continue
  fi
  rc=0; ran=0
  for t in $tests; do
    [ -f "$m/tests/testthat/$t" ] || continue
    ran=$((ran + 1))
    R_LIBS="$m.lib" timeout "$limit" Rscript -e '
      r <- as.data.frame(testthat::test_file(commandArgs(TRUE)[1], package = "sysbioGPU",
        load_package = "installed", reporter = "silent", stop_on_failure = FALSE))
      quit(status = as.integer(sum(r$failed) + sum(r$error) > 0))' "$m/tests/testthat/$t" > "$m.$t.log" 2>&1
    rc=$?
    [ "$rc" != 0 ] && break
  done
  if [ "$ran" = 0 ]; then
    printf '%-22s %-12s %s\n' "$id" "not applied" "(none of its test files exists: $tests)" | tee -a "$work/results.txt"
    skipped=$((skipped + 1)); rm -rf "$m" "$m.lib"; continue
  fi
  if [ "$rc" != 0 ]; then
    res=killed; killed=$((killed + 1))
    [ "$rc" = 124 ] && res="killed(time)"
  else
    res=SURVIVED; survived=$((survived + 1))
  fi
  printf '%-22s %-12s %s\n' "$id" "$res" "$tests" | tee -a "$work/results.txt"
  rm -rf "$m" "$m.lib"
done < "$list"
applied=$((killed + survived))
echo "mutants: $killed of $applied applied mutants killed ($survived survived, $skipped not applied or stillborn, $n listed)" | tee -a "$work/results.txt"
[ "$survived" = 0 ] && [ "$applied" -gt 0 ]
