#!/usr/bin/env bash
# Build and run the standalone GPU check of the pairwise_manhattan CUDA kernels (needs nvcc and a
# GPU; nothing else). Run from anywhere: bash bench/check_pairwise_manhattan_gpu.sh [ARCH]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
arch="${1:-sm_90}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
if [ ! -f "$root/generated/cpp/pairwise_manhattan_op.h" ]; then
    echo "generated/cpp/pairwise_manhattan_op.h is missing: run 'opsdk generate' first" >&2
    exit 1
fi
nvcc -O3 -std=c++17 -arch="$arch" -I"$root/opsdk/include" -I"$root/generated/cpp" \
    "$root/bench/check_pairwise_manhattan_gpu.cu" -o "$out/check_pairwise_manhattan_gpu"
"$out/check_pairwise_manhattan_gpu"
