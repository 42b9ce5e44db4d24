// pairwise_manhattan_grad, CUDA: with s = sign(x[i, k] - y[j, k]), sign(0) = 0 and sign(NaN) = NaN,
//   grad_x[i, k] = sum_j grad_z[i, j] * s  and  grad_y[j, k] = sum_i grad_z[i, j] * sign(y[j, k] - x[i, k]).
//
// Device code only: opdefs/pairwise_manhattan_grad.yaml declares the two launches, from which
// opsdk writes the host side for nvcc or launches the kernels through NVRTC.
//
// Both outputs have one form, grad_a[a, k] = sum_b w[a, b] * sign(a[a, k] - b[b, k]), with
// (a, b, w) = (x, y, grad_z) or (y, x, grad_z transposed). One tiled kernel computes it like a
// matrix product: a block owns a 64 (rows of a) x 64 (k) tile of grad_a and walks b in chunks,
// staging w and b in shared memory; each thread keeps a 4 x 4 register tile. Two launches (one per
// output) write disjoint memory: no atomics, no extra memory. With nb == 0 no chunk runs and the
// gradient is 0; with na == 0 or p == 0 the grid is empty and nothing is launched.
#include "opsdk/device.h"

namespace opsdk_op_pairwise_manhattan_grad {
namespace detail {

constexpr int kTile = 64;            // rows of a, and columns k, per block
constexpr int kChunk = 16;           // rows of b per shared-memory stage
constexpr int kThreadsSide = 16;
constexpr int kPer = kTile / kThreadsSide;

// w * sign(d) with sign(0) = 0 and sign(NaN) = NaN, as the reference computes it: where d == 0 the
// term is w * 0, which is NaN for a NaN or infinite w (wz = w - w, computed once per w).
template <typename T>
__device__ inline T signed_weight(T w, T wz, T d) {
    return d > T(0) ? w : (d < T(0) ? -w : (d == T(0) ? wz : d));
}

// grad_a = sum_b w[a, b] * sign(a[a, k] - b[b, k]); w[a, b] is wt[b * na + a] when transposed
// (grad_z is n x m with a = y, b = x), else wt[a * nb + b].
template <typename T, bool kTransposedW>
__global__ void __launch_bounds__(kThreadsSide * kThreadsSide)
grad_kernel(const T* __restrict__ av, const T* __restrict__ bv, const T* __restrict__ wt,
            T* __restrict__ grad, int64_t na, int64_t nb, int64_t p) {
    __shared__ T ws[kChunk][kTile + 1];  // ws[bb][row of a]
    __shared__ T bs[kChunk][kTile];      // bs[bb][k]
    const int64_t a0 = static_cast<int64_t>(blockIdx.y) * kTile;
    const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;
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
        for (int e = t; e < kTile * kChunk; e += kThreadsSide * kThreadsSide) {
            // Consecutive threads read consecutive addresses of whichever layout w has.
            const int row = kTransposedW ? e % kTile : e / kChunk;
            const int bb = kTransposedW ? e / kTile : e % kChunk;
            const int64_t a = a0 + row, b = b0 + bb;
            T w = T(0);
            if (a < na && b < nb) w = kTransposedW ? wt[b * na + a] : wt[a * nb + b];
            ws[bb][row] = w;  // zero weight: rows of b past the end add nothing
            const int kc = e % kTile, bb2 = e / kTile;
            const int64_t b2 = b0 + bb2, k = k0 + kc;
            bs[bb2][kc] = (b2 < nb && k < p) ? bv[b2 * p + k] : T(0);
        }
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
