// pairwise_manhattan, CUDA: z[i, j] = sum_k |x[i, k] - y[j, k]|.
//
// Device code only: opdefs/pairwise_manhattan.yaml declares the launch (grid, block, arguments),
// from which opsdk writes the host side for nvcc or launches the kernel through NVRTC.
//
// The structure of a tiled matrix product, with |a - b| in place of a * b: a block of 16 x 16
// threads computes a tile of z (rows of x by rows of y); k is walked in chunks whose slices
// of x and y are staged in shared memory, stored k-major so the inner loop reads them without bank
// conflicts, and each thread keeps a register tile of sums so that every shared-memory read feeds
// several differences. The tiling differs per dtype, as measured on an H100 by
// bench/tune_pairwise_manhattan_gpu.sh: float32 takes an 8 x 4 register tile read with 16-byte
// shared-memory loads and the next chunk fetched during the current one's arithmetic (62 % of the
// add rate, against 45 % with a 4 x 4 tile); float64 keeps a 4 x 4 tile (68 %, the best of its
// variants), which covers 64 x 64. One grid serves both: blocks of 128 x 64 tiles, twice over
// (the grid's z). A float32 block computes the whole tile at z == 0 and leaves at z == 1; a float64
// block computes the tile's upper 64 rows at z == 0 and its lower ones at z == 1, so that float64
// keeps as many blocks as before (half as many, each doing two tiles in turn, would leave SMs idle
// wherever the blocks do not fill the GPU several times over). Rows and columns past the end are
// staged as zeros (|0 - 0| adds nothing) and never stored. With p == 0 no chunk runs and every sum
// stays 0; with n == 0 or m == 0 the grid is empty and nothing is launched.
#include "opsdk/device.h"

namespace opsdk_op_pairwise_manhattan {
namespace detail {

constexpr int kRows = 128;        // rows of x per tile: the grid's y covers n in these
constexpr int kCols = 64;         // rows of y per tile: the grid's x covers m in these
constexpr int kSide = 16;         // 16 x 16 threads per block
constexpr int kThreads = kSide * kSide;

// ---- float32: an 8 x 4 register tile, chunks of 8 k, float4 reads of shared memory ----------
constexpr int kChunk32 = 8;
constexpr int kVec = 4;                                     // floats per 16-byte load
constexpr int kRowsPer = kRows / kSide, kColsPer = kCols / kSide;  // 8 x 4 sums per thread
constexpr int kFetchX = kRows * kChunk32 / kThreads, kFetchY = kCols * kChunk32 / kThreads;

// A thread's r-th row (or column) within the tile: runs of kVec neighbours, kSide * kVec apart,
// so that each run is one aligned 16-byte load.
__device__ inline int run_index(int r, int t) { return (r / kVec) * (kSide * kVec) + t * kVec + r % kVec; }

// This thread's share of a chunk [k0, k0 + kChunk32) of rows [r0, r0 + B) of src (rows x p).
template <int N>
__device__ inline void fetch(float (&regs)[N], const float* __restrict__ src, int64_t rows, int64_t p,
                             int64_t r0, int64_t k0, int t) {
#pragma unroll
    for (int s = 0; s < N; ++s) {
        const int e = t + s * kThreads, row = e / kChunk32, kk = e % kChunk32;
        const int64_t gr = r0 + row, gk = k0 + kk;
        regs[s] = (gr < rows && gk < p) ? src[gr * p + gk] : 0.0f;
    }
}

template <int N, int LD>
__device__ inline void deposit(float (*dst)[LD], const float (&regs)[N], int t) {
#pragma unroll
    for (int s = 0; s < N; ++s) {
        const int e = t + s * kThreads;
        dst[e % kChunk32][e / kChunk32] = regs[s];
    }
}

template <int M, int LD>
__device__ inline void read_runs(float (&out)[M], const float (*src)[LD], int kk, int t) {
#pragma unroll
    for (int g = 0; g < M / kVec; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(&src[kk][run_index(g * kVec, t)]);
        out[g * kVec] = v.x, out[g * kVec + 1] = v.y, out[g * kVec + 2] = v.z, out[g * kVec + 3] = v.w;
    }
}

__device__ inline void forward_f32(const float* __restrict__ x, const float* __restrict__ y,
                                   float* __restrict__ z, int64_t n, int64_t m, int64_t p) {
    if (blockIdx.z != 0) return;  // the whole block: the tile is z == 0's
    // Rows padded by one vector: 16-byte aligned, and bank strides broken.
    __shared__ __align__(16) float xs[kChunk32][kRows + kVec];
    __shared__ __align__(16) float ys[kChunk32][kCols + kVec];
    const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kRows;
    const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kCols;
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kSide + tx;
    float rx[kFetchX], ry[kFetchY];
    float acc[kRowsPer][kColsPer] = {};
    fetch(rx, x, n, p, i0, 0, t);
    fetch(ry, y, m, p, j0, 0, t);
    for (int64_t k0 = 0; k0 < p; k0 += kChunk32) {
        deposit(xs, rx, t);
        deposit(ys, ry, t);
        __syncthreads();
        if (k0 + kChunk32 < p) {  // the next chunk's loads overlap this chunk's arithmetic
            fetch(rx, x, n, p, i0, k0 + kChunk32, t);
            fetch(ry, y, m, p, j0, k0 + kChunk32, t);
        }
#pragma unroll
        for (int kk = 0; kk < kChunk32; ++kk) {
            float a[kRowsPer], b[kColsPer];
            read_runs(a, xs, kk, ty);
            read_runs(b, ys, kk, tx);
#pragma unroll
            for (int r = 0; r < kRowsPer; ++r)
#pragma unroll
                for (int c = 0; c < kColsPer; ++c) acc[r][c] += fabsf(a[r] - b[c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < kRowsPer; ++r)
#pragma unroll
        for (int c = 0; c < kColsPer; ++c) {
            const int64_t i = i0 + run_index(r, ty), j = j0 + run_index(c, tx);
            if (i < n && j < m) z[i * m + j] = acc[r][c];
        }
}

// ---- float64: a 4 x 4 register tile of a 64 x 64 tile, chunks of 16 k --------------------------
constexpr int kSub = 64;                 // rows of x per block: half a 128-row tile
constexpr int kChunk64 = 16;
constexpr int kPer = kSub / kSide;       // 4 x 4 sums per thread

__device__ inline void stage(double (*dst)[kSub + 1], const double* src, int64_t rows, int64_t p,
                             int64_t row0, int64_t k0, int t) {
    for (int e = t; e < kSub * kChunk64; e += kThreads) {
        const int row = e / kChunk64, kk = e % kChunk64;
        const int64_t gr = row0 + row, gk = k0 + kk;
        dst[kk][row] = (gr < rows && gk < p) ? src[gr * p + gk] : 0.0;
    }
}

// z's 64 x 64 tile at rows i0 of x and j0 of y.
__device__ inline void forward_f64_tile(const double* __restrict__ x, const double* __restrict__ y,
                                        double* __restrict__ z, int64_t n, int64_t m, int64_t p,
                                        int64_t i0, int64_t j0) {
    __shared__ double xs[kChunk64][kSub + 1];
    __shared__ double ys[kChunk64][kSub + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kSide + tx;
    double acc[kPer][kPer] = {};
    for (int64_t k0 = 0; k0 < p; k0 += kChunk64) {
        stage(xs, x, n, p, i0, k0, t);
        stage(ys, y, m, p, j0, k0, t);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kChunk64; ++kk) {
            double a[kPer], b[kPer];
#pragma unroll
            for (int r = 0; r < kPer; ++r) a[r] = xs[kk][ty + r * kSide];
#pragma unroll
            for (int c = 0; c < kPer; ++c) b[c] = ys[kk][tx + c * kSide];
#pragma unroll
            for (int r = 0; r < kPer; ++r)
#pragma unroll
                for (int c = 0; c < kPer; ++c) acc[r][c] += fabs(a[r] - b[c]);
        }
        __syncthreads();  // the next chunk overwrites xs and ys
    }
#pragma unroll
    for (int r = 0; r < kPer; ++r) {
        const int64_t i = i0 + ty + r * kSide;
#pragma unroll
        for (int c = 0; c < kPer; ++c) {
            const int64_t j = j0 + tx + c * kSide;
            if (i < n && j < m) z[i * m + j] = acc[r][c];
        }
    }
}

__device__ inline void forward_f64(const double* __restrict__ x, const double* __restrict__ y,
                                   double* __restrict__ z, int64_t n, int64_t m, int64_t p) {
    const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kRows + blockIdx.z * kSub;
    const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kCols;
    if (i0 >= n) return;  // the whole block: the lower half of the last tile is past the end
    forward_f64_tile(x, y, z, n, m, p, i0, j0);
}

__device__ inline void forward(const float* x, const float* y, float* z, int64_t n, int64_t m, int64_t p) {
    forward_f32(x, y, z, n, m, p);
}
__device__ inline void forward(const double* x, const double* y, double* z, int64_t n, int64_t m, int64_t p) {
    forward_f64(x, y, z, n, m, p);
}

// One grid for both dtypes: ((m + 63) / 64, (n + 127) / 128, 2) blocks of 16 x 16 threads.
template <typename T>
__global__ void __launch_bounds__(kThreads)
forward_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z, int64_t n,
               int64_t m, int64_t p) {
    forward(x, y, z, n, m, p);
}

}  // namespace detail
}  // namespace opsdk_op_pairwise_manhattan
