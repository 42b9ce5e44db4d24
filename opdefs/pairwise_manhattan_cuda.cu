// pairwise_manhattan, CUDA: z[i, j] = sum_k |x[i, k] - y[j, k]|.
//
// Device code only: opdefs/pairwise_manhattan.yaml declares the launch (grid, block, arguments),
// from which opsdk writes the host side for nvcc or launches the kernel through NVRTC.
//
// The structure of a tiled matrix product, with |a - b| in place of a * b: each block computes a
// 64 x 64 tile of z; k is walked in chunks whose slices of x and y are staged in shared memory
// (stored k-major so the inner loop reads them without bank conflicts); each thread keeps a 4 x 4
// register tile of sums, so every shared-memory read feeds four differences. Rows and columns
// past the end are staged as zeros (|0 - 0| adds nothing) and never stored. With p == 0 no chunk
// runs and every sum stays 0; with n == 0 or m == 0 the grid is empty and nothing is launched.
#include "opsdk/device.h"

namespace opsdk_op_pairwise_manhattan {
namespace detail {

constexpr int kTile = 64;            // rows of x and of y per block
constexpr int kChunk = 16;           // k per shared-memory stage
constexpr int kThreadsSide = 16;     // 16 x 16 threads per block
constexpr int kPer = kTile / kThreadsSide;  // 4 x 4 outputs per thread

template <typename T>
__device__ inline void stage(T (*dst)[kTile + 1], const T* src, int64_t rows, int64_t p, int64_t row0,
                             int64_t k0) {
    const int t = threadIdx.y * kThreadsSide + threadIdx.x;
    for (int e = t; e < kTile * kChunk; e += kThreadsSide * kThreadsSide) {
        const int row = e / kChunk, kk = e % kChunk;
        const int64_t gr = row0 + row, gk = k0 + kk;
        dst[kk][row] = (gr < rows && gk < p) ? src[gr * p + gk] : T(0);
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreadsSide * kThreadsSide)
forward_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z, int64_t n,
               int64_t m, int64_t p) {
    __shared__ T xs[kChunk][kTile + 1];
    __shared__ T ys[kChunk][kTile + 1];
    const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile;
    const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;
    const int tx = threadIdx.x, ty = threadIdx.y;
    T acc[kPer][kPer] = {};
    for (int64_t k0 = 0; k0 < p; k0 += kChunk) {
        stage(xs, x, n, p, i0, k0);
        stage(ys, y, m, p, j0, k0);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kChunk; ++kk) {
            T a[kPer], b[kPer];
#pragma unroll
            for (int r = 0; r < kPer; ++r) a[r] = xs[kk][ty + r * kThreadsSide];
#pragma unroll
            for (int c = 0; c < kPer; ++c) b[c] = ys[kk][tx + c * kThreadsSide];
#pragma unroll
            for (int r = 0; r < kPer; ++r)
#pragma unroll
                for (int c = 0; c < kPer; ++c) acc[r][c] += fabs(a[r] - b[c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < kPer; ++r) {
        const int64_t i = i0 + ty + r * kThreadsSide;
#pragma unroll
        for (int c = 0; c < kPer; ++c) {
            const int64_t j = j0 + tx + c * kThreadsSide;
            if (i < n && j < m) z[i * m + j] = acc[r][c];
        }
    }
}

}  // namespace detail
}  // namespace opsdk_op_pairwise_manhattan
