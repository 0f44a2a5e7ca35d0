#!/bin/bash
# make test-cluster: the package through a one-node SLURM on this machine.
# Installs SLURM, munge and batchtools (Debian packages), builds and installs
# the package (CPU only) into check/cluster/lib, starts the cluster in a
# temporary directory (tools/slurm-local.sh), runs tools/test-cluster.R and
# stops the cluster, whatever the outcome. Where the packages cannot be
# installed or the daemons cannot start (not root, a daemon refusing to
# run), it says so and skips with status 0; a failing test is status 1.
set -u
cd "$(dirname "$0")/.."
R=${R:-R}
RSCRIPT=${RSCRIPT:-Rscript}
skip() {
  echo "test-cluster: SKIPPED: $*" >&2
  echo "test-cluster: SKIPPED (the cluster path was not tested on this machine)"
  exit 0
}
t0=$(date +%s)

bash tools/slurm-local.sh install || skip "could not install SLURM, munge and batchtools"

out=check/cluster
rm -rf "$out" && mkdir -p "$out/lib" || exit 1
src=$PWD
(cd "$out" && "$R" CMD build --no-build-vignettes --no-manual "$src" >build.log 2>&1) ||
  { cat "$out/build.log" >&2; echo "test-cluster: R CMD build failed" >&2; exit 1; }
SYSBIOGPU_CUDA=no "$R" CMD INSTALL --no-docs -l "$out/lib" "$out"/sysbioGPU_*.tar.gz >"$out/install.log" 2>&1 ||
  { tail -n 30 "$out/install.log" >&2; echo "test-cluster: R CMD INSTALL failed" >&2; exit 1; }

state=$(mktemp -d "${TMPDIR:-/tmp}/sbg-slurm.XXXXXX") || exit 1
conf=$(bash tools/slurm-local.sh start "$state")
rc=$?
if [ "$rc" -eq 3 ]; then
  rm -rf "$state"
  skip "this machine cannot start a local SLURM (see the message above)"
elif [ "$rc" -ne 0 ]; then
  rm -rf "$state"
  echo "test-cluster: starting the local SLURM failed" >&2
  exit 1
fi
trap 'bash tools/slurm-local.sh stop "$state"' EXIT
export "${conf?}"
export USER="${USER:-$(id -un)}"
echo "test-cluster: local SLURM up ($conf), $(sinfo -h -o '%n: %c CPUs, %m MB')"

R_LIBS="$PWD/$out/lib${R_LIBS:+:$R_LIBS}" "$RSCRIPT" tools/test-cluster.R vignettes/sysbioGPU.Rmd
rc=$?
echo "test-cluster: $(( $(date +%s) - t0 )) s in all"
exit "$rc"
