#!/usr/bin/env bash
# make mutants: apply each one-line mutation of tools/mutants.txt to a copy
# of the tree, build it CPU-only into a temporary library and run its test
# files; print a table and the kill rate.  A test suite that lets one of
# these through would let the same real bug through.
#   MUTANTS_LIST   list file (default tools/mutants.txt)
#   MUTANTS_ONLY   space-separated ids to run (default all)
#   MUTANTS_TIMEOUT seconds per test file (default 600)
#   MUTANTS_KEEP=1 keep the temporary directory
#   MUTANTS_BASELINE=0 skip running the listed test files on the unmutated
#                  tree first (by default a failure there stops the run: a
#                  mutant "killed" by an already failing file means nothing)
# Exit status 0 when every applied mutant is killed and none is "not applied".
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
list=${MUTANTS_LIST:-$root/tools/mutants.txt}
only=${MUTANTS_ONLY:-}
tmo=${MUTANTS_TIMEOUT:-600}
R=${R:-R}
RSCRIPT=${RSCRIPT:-Rscript}
work=$(mktemp -d "${TMPDIR:-/tmp}/sbg-mutants.XXXXXX")
[ "${MUTANTS_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
cp "$list" "$work/list.txt" || exit 2 # the list as it was at the start
list=$work/list.txt

# The tree as git sees it (tracked and untracked-not-ignored files).
base=$work/base
mkdir -p "$base"
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$base") || exit 2
install_tree() { # dir lib log
  mkdir -p "$2"
  (cd "$1" && SYSBIOGPU_CUDA=no "$R" CMD INSTALL --no-docs --no-test-load -l "$2" . >"$3" 2>&1)
}
echo "mutants: building the unmutated tree (CPU-only) in $work"
if ! install_tree "$base" "$work/lib-base" "$work/base.log"; then
  echo "mutants: the unmutated tree does not build; see $work/base.log" >&2
  trap - EXIT; exit 2
fi

. "$root/tools/mutants-common.sh"

if [ "${MUTANTS_BASELINE:-1}" != 0 ]; then
  files=$(awk -F'\t' '!/^#/ && NF == 5 {print $5}' "$list" | tr ',' '\n' | sort -u | paste -sd, -)
  b=$(run_tests "$base" "$work/lib-base" "$files" "$work/base-tests.log" "$tmo")
  case "$b" in
    pass*) echo "mutants: the listed test files pass on the unmutated tree";;
    *) echo "mutants: on the unmutated tree: $b; see $work/base-tests.log" >&2; trap - EXIT; exit 2;;
  esac
fi

printf '%-22s %-28s %-12s %s\n' MUTANT FILE RESULT DETAIL
total=0; killed=0; notapp=0; survived=0
while IFS=$'\t' read -r id file pat rep tests; do
  case "$id" in ''|'#'*) continue;; esac
  if [ -n "$only" ] && ! [[ " $only " == *" $id "* ]]; then continue; fi
  d=$work/m-$id
  cp -a "$base" "$d"
  apply_mutant "$d/$file" "$pat" "$rep"; a=$?
  if [ $a != 0 ]; then
    printf '%-22s %-28s %-12s %s\n' "$id" "$file" "not-applied" "pattern not found"
    notapp=$((notapp + 1)); rm -rf "$d"; continue
  fi
  total=$((total + 1))
  # headers are not tracked by the Makefile: recompile the mutated engine
  rm -f "$d/$(dirname "$file")"/*.o "$d"/src/*.so
  if ! install_tree "$d" "$work/lib-$id" "$work/$id.log"; then
    res=killed; det="build fails"
  else
    det=$(run_tests "$d" "$work/lib-$id" "$tests" "$work/$id.log" "$tmo")
    case "$det" in pass*) res=SURVIVED; det="$tests${det#pass}";; *) res=killed;; esac
  fi
  [ $res = killed ] && killed=$((killed + 1)) || survived=$((survived + 1))
  printf '%-22s %-28s %-12s %s\n' "$id" "$file" "$res" "$det"
  rm -rf "$d" "$work/lib-$id"
done <"$list"
echo "mutants: $killed of $total applied mutants killed ($(awk -v k=$killed -v t=$total 'BEGIN{printf "%.0f", t ? 100*k/t : 0}')%), $survived survived, $notapp not applied"
[ $survived = 0 ] && [ $notapp = 0 ]
