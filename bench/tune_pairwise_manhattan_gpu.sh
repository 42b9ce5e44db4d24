#!/usr/bin/env bash
# Build and run the tuning harness of the pairwise_manhattan CUDA kernels (needs nvcc and a GPU;
# nothing else): the op's kernels beside candidate variants, each checked, then timed.
#   bash bench/tune_pairwise_manhattan_gpu.sh [ARCH] [FILTER...]   e.g. sm_90 grad float32
# TUNE_PTXAS=1 also prints ptxas's register and spill report of every kernel.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
arch="sm_90"
if [ $# -gt 0 ] && [[ "$1" == sm_* ]]; then arch="$1"; shift; fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
flags=(-O3 -std=c++17 -arch="$arch" -Werror all-warnings -Xcompiler -Wall,-Wextra -I"$root" -I"$root/opsdk/include")
if [ "${TUNE_PTXAS:-0}" = 1 ]; then flags+=(-Xptxas -v); fi
nvcc "${flags[@]}" "$root/bench/tune_pairwise_manhattan_gpu.cu" -o "$out/tune_pairwise_manhattan_gpu"
"$out/tune_pairwise_manhattan_gpu" "$@"
