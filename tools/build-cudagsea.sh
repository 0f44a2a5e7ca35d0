#!/bin/sh
# Builds cudaGSEA's command-line program, the rapidGSEA paper's code
# (https://github.com/gravitino/cudaGSEA, commit 84bfca2), for the
# side-by-side runs of inst/bench/gsea.R (CUDAGSEA_BIN), from a checkout of
# that repository, which it leaves unchanged:
#   sh tools/build-cudagsea.sh <cudaGSEA checkout> <binary to write> [sm, default 90]
# Two changes to its sources (in a copy) let a current toolkit build it:
#   - the toolkit's CUB instead of the bundled copy (Thrust brings the
#     toolkit's CUB in, and the two clash over CUB's namespace macros);
#   - #include <numeric> for std::iota, which current headers no longer
#     bring in.
# Its defaults are kept (single precision, its OpenMP host path on).
set -eu
if [ $# -lt 2 ]; then
  echo "usage: sh tools/build-cudagsea.sh <cudaGSEA checkout> <binary to write> [sm]" >&2
  exit 2
fi
src=$1
bin=$2
sm=${3:-90}
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
if [ ! -f "$src/cudaGSEA/src/cudaGSEA.cu" ]; then
  echo "build-cudagsea: $src/cudaGSEA/src/cudaGSEA.cu not found (a checkout of gravitino/cudaGSEA?)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -R "$src/cudaGSEA/src/." "$tmp/"
rm -rf "$tmp/include/cub"
sed -i 's#include "cub/cub.cuh"#include <cub/cub.cuh>#' "$tmp/include/batched_sort.cuh"
sed -i '1i #include <numeric>' "$tmp/cudaGSEA.cu"
"$nvcc" -O3 -std=c++17 -gencode "arch=compute_$sm,code=sm_$sm" "$tmp/cudaGSEA.cu" -o "$bin" \
  -Xcompiler "-fopenmp -DCUDA_GSEA_OPENMP_ENABLED"
echo "build-cudagsea: wrote $bin (sm_$sm)"
