#!/bin/sh
# Installs what building, checking and demonstrating sysbioGPU needs on a
# Debian-like machine, from Debian's own packages (CRAN and Bioconductor may
# be unreachable). A no-op when everything is present. With arguments, those
# packages instead (tools/slurm-local.sh install).
set -u
pkgs="r-base-core r-base-dev r-cran-testthat r-cran-knitr r-cran-rmarkdown pandoc r-bioc-biobase r-bioc-summarizedexperiment r-bioc-gseabase r-bioc-biocparallel r-cran-batchtools r-cran-data.table r-cran-matrix r-cran-cli r-cran-boolnet r-cran-desolve libsbml5-dev pkg-config"
[ $# -gt 0 ] && pkgs="$*"

missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "install-deps: all present ($pkgs)"
  exit 0
fi
echo "install-deps: installing$missing"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: no apt-get here; install these yourself:$missing" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo="sudo -n"
else
  echo "install-deps: not root and no password-less sudo; run: sudo apt-get install -y$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq || { echo "install-deps: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing || {
  echo "install-deps: apt-get install failed for:$missing" >&2
  exit 1
}
echo "install-deps: done"
