// pairwise_manhattan_grad, CUDA: with s = sign(x[i, k] - y[j, k]), sign(0) = 0 and sign(NaN) = NaN,
//   grad_x[i, k] = sum_j grad_z[i, j] * s  and  grad_y[j, k] = sum_i grad_z[i, j] * sign(y[j, k] - x[i, k]).
//
// Device code only: opdefs/pairwise_manhattan_grad.yaml declares the launch, from which opsdk
// writes the host side for nvcc or launches the kernel through NVRTC.
//
// Both outputs have one form, grad_a[a, k] = sum_b w[a, b] * sign(a[a, k] - b[b, k]), with
// (a, b, w) = (x, y, grad_z) or (y, x, grad_z transposed). One tiled kernel computes it like a
// matrix product: a block owns a 64 (rows of a) x 64 (k) tile of grad_a and walks b in chunks,
// staging w and b in shared memory; each thread keeps a 4 x 4 register tile. Both outputs come from
// ONE launch (blockIdx.z: 0 for grad_x, 1 for grad_y; the grid's y covers the longer of n and m):
// where a launch per output leaves most SMs idle, both together fill twice as many (measured on an
// H100 by bench/tune_pairwise_manhattan_gpu.sh: 0.57 ms instead of 1.08 at n = m = 2048, p = 64;
// 1.02 instead of 1.08 at p = 256, where two launches already fill the GPU). The two halves of
// the grid write disjoint memory: no atomics, no extra memory, the same result on every run. With
// nb == 0 no chunk runs and the gradient is 0; with p == 0, or n and m both 0, the grid is empty
// and nothing is launched.
#include "opsdk/device.h"

namespace opsdk_op_pairwise_manhattan_grad {
namespace detail {

constexpr int kTile = 64;            // rows of a, and columns k, per block
constexpr int kChunk = 16;           // rows of b per shared-memory stage
constexpr int kThreadsSide = 16;
constexpr int kThreads = kThreadsSide * kThreadsSide;
constexpr int kPer = kTile / kThreadsSide;

// w * sign(d) with sign(0) = 0 and sign(NaN) = NaN, as the reference computes it: where d == 0 the
// term is w * 0, which is NaN for a NaN or infinite w (wz = w - w, computed once per w).
template <typename T>
__device__ inline T signed_weight(T w, T wz, T d) {
    return d > T(0) ? w : (d < T(0) ? -w : (d == T(0) ? wz : d));
}

// Stages rows [b0, b0 + kChunk) of b (zeros past nb) and their weights w[a, b] for the block's
// rows of a: wt[b * na + a] when transposed (grad_z is n x m with a = y, b = x), else wt[a * nb + b].
template <typename T>
__device__ inline void stage(T (*ws)[kTile + 1], T (*bs)[kTile], const T* __restrict__ bv,
                             const T* __restrict__ wt, bool transposed, int64_t na, int64_t nb,
                             int64_t p, int64_t a0, int64_t k0, int64_t b0, int t) {
    for (int e = t; e < kTile * kChunk; e += kThreads) {
        // Consecutive threads read consecutive addresses of whichever layout w has.
        const int row = transposed ? e % kTile : e / kChunk;
        const int bb = transposed ? e / kTile : e % kChunk;
        const int64_t a = a0 + row, b = b0 + bb;
        T w = T(0);
        if (a < na && b < nb) w = transposed ? wt[b * na + a] : wt[a * nb + b];
        ws[bb][row] = w;  // zero weight: rows of b past the end add nothing
        const int kc = e % kTile, bb2 = e / kTile;
        const int64_t b2 = b0 + bb2, k = k0 + kc;
        bs[bb2][kc] = (b2 < nb && k < p) ? bv[b2 * p + k] : T(0);
    }
}

// grad_x (blockIdx.z == 0) and grad_y (blockIdx.z == 1), each block one 64 x 64 tile of its output.
template <typename T>
__global__ void __launch_bounds__(kThreads)
grad_kernel(const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ grad_z,
            T* __restrict__ grad_x, T* __restrict__ grad_y, int64_t n, int64_t m, int64_t p) {
    __shared__ T ws[kChunk][kTile + 1];  // ws[bb][row of a]
    __shared__ T bs[kChunk][kTile];      // bs[bb][k]
    const bool second = blockIdx.z != 0;  // grad_y: a = y, b = x, w = grad_z transposed
    const int64_t na = second ? m : n, nb = second ? n : m;
    const T* av = second ? y : x;
    const T* bv = second ? x : y;
    T* grad = second ? grad_y : grad_x;
    const int64_t a0 = static_cast<int64_t>(blockIdx.y) * kTile;
    const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;
    if (a0 >= na) return;  // the grid covers the longer of n and m; the whole block leaves
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kThreadsSide + tx;
    T va[kPer][kPer];
    T acc[kPer][kPer] = {};
#pragma unroll
    for (int r = 0; r < kPer; ++r)
#pragma unroll
        for (int c = 0; c < kPer; ++c) {
            const int64_t a = a0 + ty + r * kThreadsSide, k = k0 + tx + c * kThreadsSide;
            va[r][c] = (a < na && k < p) ? av[a * p + k] : T(0);
        }
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
        stage(ws, bs, bv, grad_z, second, na, nb, p, a0, k0, b0, t);
        __syncthreads();
#pragma unroll
        for (int bb = 0; bb < kChunk; ++bb) {
            T w[kPer], wz[kPer], b[kPer];
#pragma unroll
            for (int r = 0; r < kPer; ++r) {
                w[r] = ws[bb][ty + r * kThreadsSide];
                wz[r] = w[r] - w[r];
            }
#pragma unroll
            for (int c = 0; c < kPer; ++c) b[c] = bs[bb][tx + c * kThreadsSide];
#pragma unroll
            for (int r = 0; r < kPer; ++r)
#pragma unroll
                for (int c = 0; c < kPer; ++c) acc[r][c] += signed_weight(w[r], wz[r], va[r][c] - b[c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < kPer; ++r)
#pragma unroll
        for (int c = 0; c < kPer; ++c) {
            const int64_t a = a0 + ty + r * kThreadsSide, k = k0 + tx + c * kThreadsSide;
            if (a < na && k < p) grad[a * p + k] = acc[r][c];
        }
}

}  // namespace detail
}  // namespace opsdk_op_pairwise_manhattan_grad
