#!/usr/bin/env bash
# The GPU half of `make mutants`: one-line mutations of the CUDA engines
# (tools/mutants-gpu.txt, the format of tools/mutants.txt), each built here
# into its own copy of the package's shared library and run on a GPU
# machine against its test files.  `make mutants` builds without CUDA, so
# no kernel is ever mutated there.
#
# Here (nvcc, no GPU), after `bash tools/gpu-check.sh pack`:
#   bash tools/mutants-gpu.sh build [id ...]
#     builds a copy of the tree with CUDA once, then each mutant by
#     recompiling its file (make is incremental) and relinking, and writes
#     .device/mutants/ID.so.xz and ID.tests (its test files).  Each library
#     is about 2.3 MB: beside .device's own 56 MB, a device call that
#     carries 64 MiB holds about three; build the others in a later call.
# There (through the device tool, carrying .device):
#   bash tools/mutants-gpu.sh run
#     sets up R, runs every test file that the mutants name on the packed
#     library (a failure there stops the run: a mutant "killed" by a file
#     that already fails means nothing), then puts each mutant's library in
#     place of the package's, runs its files with SYSBIOGPU_TEST_GPU=1
#     (stopping at the first failure) and prints one line a mutant; the
#     packed library is put back.  Logs go to $OUT/mutants-gpu.  Exit
#     status 0 when every mutant is killed.
#   MUTANTS_GPU_REQUIRE=0 runs without SYSBIOGPU_TEST_GPU (the GPU tests
#     then skip: a check of this script on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-}
[ $# -gt 0 ] && shift
R=${R:-R}
RSCRIPT=${RSCRIPT:-Rscript}

. "$root/tools/mutants-common.sh"

build() {
  local list=${MUTANTS_LIST:-$root/tools/mutants-gpu.txt} only="$*"
  local tree out=$root/.device/mutants
  work=$(mktemp -d "${TMPDIR:-/tmp}/sbg-mutants-gpu.XXXXXX")
  [ "${MUTANTS_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
  tree=$work/tree
  mkdir -p "$tree" "$out" "$work/lib"
  git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$tree" || exit 2
  echo "mutants-gpu: building the unmutated tree with CUDA in $work"
  if ! (cd "$tree" && SYSBIOGPU_CUDA=yes "$R" CMD INSTALL --no-test-load --no-docs -l "$work/lib" . \
          > "$work/base.log" 2>&1); then
    tail -20 "$work/base.log"; echo "mutants-gpu: the unmutated tree does not build" >&2; exit 2
  fi
  grep -q "wrote src/Makevars (CUDA: yes)" "$work/base.log" ||
    { echo "mutants-gpu: the build has no CUDA engines" >&2; exit 2; }
  local n=0 id file pat rep tests
  while IFS=$'\t' read -r id file pat rep tests; do
    case "$id" in ''|'#'*) continue;; esac
    if [ -n "$only" ] && ! [[ " $only " == *" $id "* ]]; then continue; fi
    cp "$tree/$file" "$work/orig"
    if ! apply_mutant "$tree/$file" "$pat" "$rep"; then
      echo "mutants-gpu: $id: pattern not found in $file (the engine changed: update the line)" >&2; exit 1
    fi
    # a header's users are not tracked by make: recompile its folder
    case "$file" in *.h|*.cuh) rm -f "$tree/$(dirname "$file")"/*.o;; *) rm -f "$tree/${file%.*}.o";; esac
    rm -rf "$work/lib-m" && mkdir -p "$work/lib-m"
    if (cd "$tree" && SYSBIOGPU_CUDA=yes "$R" CMD INSTALL --no-test-load --no-docs -l "$work/lib-m" . \
          > "$work/$id.log" 2>&1); then
      cp "$work/lib-m/sysbioGPU/libs/sysbioGPU.so" "$work/m.so"
      strip --strip-debug "$work/m.so" 2>/dev/null || true
      xz -T2 -6 -c "$work/m.so" > "$out/$id.so.xz"
      echo "$tests" > "$out/$id.tests"
      echo "mutants-gpu: $id built ($(du -h "$out/$id.so.xz" | cut -f1))"
    else
      echo "mutants-gpu: $id does not build (killed by the compiler):"; tail -5 "$work/$id.log"
    fi
    cp "$work/orig" "$tree/$file" && touch "$tree/$file"
    case "$file" in *.h|*.cuh) rm -f "$tree/$(dirname "$file")"/*.o;; *) rm -f "$tree/${file%.*}.o";; esac
    n=$((n + 1))
  done < "$list"
  echo "mutants-gpu: $n mutant(s) in .device/mutants ($(du -sh "$out" | cut -f1)); .device is $(du -sh .device | cut -f1)"
}

run() {
  out=${OUT:-/tmp/gpu-check}/mutants-gpu so=.device/lib/sysbioGPU/libs/sysbioGPU.so # (globals: the trap)
  mkdir -p "$out"
  ls .device/mutants/*.so.xz > /dev/null 2>&1 ||
    { echo "mutants-gpu: no .device/mutants/*.so.xz (bash tools/mutants-gpu.sh build)" >&2; exit 2; }
  export R_LIBS=$root/.device/lib LD_LIBRARY_PATH=$root/.device/extra-libs:${LD_LIBRARY_PATH:-}
  [ "${MUTANTS_GPU_REQUIRE:-1}" = 0 ] || export SYSBIOGPU_TEST_GPU=1
  if [ -f .device/setup-r.sh ]; then bash .device/setup-r.sh > "$out/setup.log" 2>&1 ||
    { tail "$out/setup.log"; exit 2; }; fi
  cp "$so" "$out/packed.so"
  trap 'cp "$out/packed.so" "$so"; rm -f "$out/packed.so"' EXIT
  local files b
  files=$(cat .device/mutants/*.tests | tr ',' '\n' | sort -u | paste -sd, -)
  b=$(run_tests "$root" "$R_LIBS" "$files" "$out/base.log" "${MUTANTS_TIMEOUT:-600}")
  case "$b" in
    pass*) ;;
    *) echo "mutants-gpu: the unmutated library: $b (see $out/base.log)" >&2; exit 2 ;;
  esac
  echo "mutants-gpu: $files pass on the unmutated library"
  local m id res total=0 killed=0
  for m in .device/mutants/*.so.xz; do
    id=$(basename "$m" .so.xz)
    xz -dc "$m" > "$so"
    res=$(run_tests "$root" "$R_LIBS" "$(cat ".device/mutants/$id.tests")" "$out/$id.log" "${MUTANTS_TIMEOUT:-600}")
    total=$((total + 1))
    case "$res" in pass*) res="SURVIVED${res#pass}" ;; *) killed=$((killed + 1)); res="killed ($res)" ;; esac
    printf '%-22s %s\n' "$id" "$res"
  done
  echo "mutants-gpu: $killed of $total killed"
  [ $killed = $total ]
}

case "$mode" in
  build) build "$@" ;;
  run) run ;;
  *) echo "usage: bash tools/mutants-gpu.sh build [id ...] | run (see the comment at the top)" >&2; exit 2 ;;
esac
