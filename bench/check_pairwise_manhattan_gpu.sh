#!/usr/bin/env bash
# Build and run the standalone GPU check of the pairwise_manhattan CUDA kernels (needs nvcc and a
# GPU; nothing else). Run from anywhere: bash bench/check_pairwise_manhattan_gpu.sh [ARCH]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
arch="${1:-sm_90}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# The ops' cuda<T>() entry points are the generated host side of their declared launches: compile
# those translation units (they include opdefs/*_cuda.cu, hence -I "$root") and link them in.
kernels=("$root/generated/cuda/pairwise_manhattan_cuda_kernel.cu"
         "$root/generated/cuda/pairwise_manhattan_grad_cuda_kernel.cu")
for f in "$root/generated/cpp/pairwise_manhattan_op.h" "${kernels[@]}"; do
    if [ ! -f "$f" ]; then
        echo "${f#"$root"/} is missing: run 'opsdk generate' first" >&2
        exit 1
    fi
done
nvcc -O3 -std=c++17 -arch="$arch" -I"$root" -I"$root/opsdk/include" -I"$root/generated/cpp" \
    "$root/bench/check_pairwise_manhattan_gpu.cu" "${kernels[@]}" -o "$out/check_pairwise_manhattan_gpu"
"$out/check_pairwise_manhattan_gpu"
