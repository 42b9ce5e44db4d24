// Candidate CUDA kernels for pairwise_manhattan and pairwise_manhattan_grad, measured by
// bench/tune_pairwise_manhattan_gpu.cu against the op's own kernels (opdefs/*_cuda.cu). Nothing
// here is used by the op: the winners are ported into opdefs/ once measured, and the op's kernels
// from before the port are kept at the end, to compare.
#pragma once

#include <cstdint>

namespace tune {

constexpr int kSide = 16;                 // every kernel here runs 16 x 16 threads per block
constexpr int kThreads = kSide * kSide;

// 16-byte vectors of shared memory: four floats or two doubles per load.
template <typename T>
struct Vec16;
template <>
struct Vec16<float> {
    using type = float4;
    static constexpr int n = 4;
    __device__ static void get(const float* s, float* out) {
        const float4 v = *reinterpret_cast<const float4*>(s);
        out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    }
};
template <>
struct Vec16<double> {
    static constexpr int n = 2;
    __device__ static void get(const double* s, double* out) {
        const double2 v = *reinterpret_cast<const double2*>(s);
        out[0] = v.x, out[1] = v.y;
    }
};

// ---------------------------------------------------------------------------------------------
// Forward: z[i, j] = sum_k |x[i, k] - y[j, k]|, a block computing a (16 TM) x (16 TN) tile of z,
// each thread a TM x TN register tile; k walked in chunks of KC staged k-major in shared memory.
// kVec: a thread's rows (and columns) are runs of 16/sizeof(T) neighbours, read from shared memory
// with one 16-byte load per run instead of one load per value. The next chunk's global loads are
// issued before the current chunk's arithmetic (register prefetch) so their latency is hidden.
// kMinBlocks > 1 asks ptxas for that many resident blocks per SM (fewer registers per thread).
// ---------------------------------------------------------------------------------------------
template <typename T, int TM, int TN, int KC, bool kVec>
struct FwdShape {
    static constexpr int BM = kSide * TM, BN = kSide * TN;
    static constexpr int V = kVec ? Vec16<T>::n : 1;
    static constexpr int PAD = kVec ? V : 1;  // keeps rows 16-byte aligned, or breaks bank strides
    static constexpr int NX = BM * KC / kThreads, NY = BN * KC / kThreads;
    static_assert(NX * kThreads == BM * KC && NY * kThreads == BN * KC, "tile not a whole number of loads");
    static_assert(TM % V == 0 && TN % V == 0, "register tile not a whole number of vectors");
    // The r-th row of a thread's register tile within the block's tile.
    __device__ static int row(int r, int t) { return (r / V) * (kSide * V) + t * V + (r % V); }
};

// Loads this thread's share of a KC-wide chunk of rows [r0, r0 + B) of src (rows x p) into regs.
template <typename T, int B, int KC, int N>
__device__ inline void fetch(T (&regs)[N], const T* __restrict__ src, int64_t rows, int64_t p,
                             int64_t r0, int64_t k0, int t) {
#pragma unroll
    for (int s = 0; s < N; ++s) {
        const int e = t + s * kThreads, row = e / KC, kk = e % KC;
        const int64_t gr = r0 + row, gk = k0 + kk;
        regs[s] = (gr < rows && gk < p) ? src[gr * p + gk] : T(0);
    }
}

template <typename T, int B, int KC, int N, int LD>
__device__ inline void deposit(T (*dst)[LD], const T (&regs)[N], int t) {
#pragma unroll
    for (int s = 0; s < N; ++s) {
        const int e = t + s * kThreads;
        dst[e % KC][e / KC] = regs[s];
    }
}

template <typename T, int M, bool kVec, int LD>
__device__ inline void read_tile(T (&out)[M], const T (*src)[LD], int kk, int t) {
    using S = FwdShape<T, M, M, 16, kVec>;
    if constexpr (kVec) {
#pragma unroll
        for (int g = 0; g < M / S::V; ++g) Vec16<T>::get(&src[kk][S::row(g * S::V, t)], &out[g * S::V]);
    } else {
#pragma unroll
        for (int r = 0; r < M; ++r) out[r] = src[kk][S::row(r, t)];
    }
}

template <typename T, int TM, int TN, int KC, bool kVec, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
forward(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z, int64_t n, int64_t m,
        int64_t p) {
    using S = FwdShape<T, TM, TN, KC, kVec>;
    __shared__ __align__(16) T xs[KC][S::BM + S::PAD];
    __shared__ __align__(16) T ys[KC][S::BN + S::PAD];
    const int64_t i0 = static_cast<int64_t>(blockIdx.y) * S::BM, j0 = static_cast<int64_t>(blockIdx.x) * S::BN;
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kSide + tx;
    T rx[S::NX], ry[S::NY];
    T acc[TM][TN] = {};
    fetch<T, S::BM, KC>(rx, x, n, p, i0, 0, t);
    fetch<T, S::BN, KC>(ry, y, m, p, j0, 0, t);
    for (int64_t k0 = 0; k0 < p; k0 += KC) {
        deposit<T, S::BM, KC>(xs, rx, t);
        deposit<T, S::BN, KC>(ys, ry, t);
        __syncthreads();
        if (k0 + KC < p) {
            fetch<T, S::BM, KC>(rx, x, n, p, i0, k0 + KC, t);
            fetch<T, S::BN, KC>(ry, y, m, p, j0, k0 + KC, t);
        }
#pragma unroll
        for (int kk = 0; kk < KC; ++kk) {
            T a[TM], b[TN];
            read_tile<T, TM, kVec>(a, xs, kk, ty);
            read_tile<T, TN, kVec>(b, ys, kk, tx);
#pragma unroll
            for (int r = 0; r < TM; ++r)
#pragma unroll
                for (int c = 0; c < TN; ++c) acc[r][c] += fabs(a[r] - b[c]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) {
            const int64_t i = i0 + S::row(r, ty), j = j0 + FwdShape<T, TN, TN, KC, kVec>::row(c, tx);
            if (i < n && j < m) z[i * m + j] = acc[r][c];
        }
}

// ---------------------------------------------------------------------------------------------
// Gradient: grad_a[a, k] = sum_b w[a, b] * sign(a[a, k] - b[b, k]) for (a, b, w) = (x, y, grad_z)
// (blockIdx.z < slices) and (y, x, grad_z transposed) (the rest), in ONE launch. The b axis is cut
// into `slices` ranges (blockIdx.z % slices); with slices > 1 each block writes its partial sum
// to a workspace and reduce_slices adds the partials in slice order, so the result is the same on
// every run (no atomics). The block tile is the op's: 64 rows of a x 64 k, 4 x 4 per thread.
// ---------------------------------------------------------------------------------------------
template <typename T>
struct GradArgs {
    const T* x;
    const T* y;
    const T* g;
    T* gx;  // grad_x, or with slices > 1 the workspace: slices x n x p, then slices x m x p
    T* gy;
    int64_t n, m, p;
    int slices;
    int64_t slice_len;  // rows of b per slice, a multiple of the chunk
};

constexpr int kGTile = 64, kGChunk = 16, kGPer = kGTile / kSide;

// w * sign(d), sign(0) = 0, sign(NaN) = NaN, w * 0 where d == 0: the op's own definition.
template <typename T>
__device__ inline T signed_weight(T w, T wz, T d) {
    return d > T(0) ? w : (d < T(0) ? -w : (d == T(0) ? wz : d));
}

// The same for a finite w in fewer instructions: w with d's sign bit (one LOP3) where d != 0; d
// itself where d is 0 (adds +-0, as w * 0 does for a finite w) or NaN (propagates).
__device__ inline float flip_by(float w, float d) {
    return __int_as_float(__float_as_int(w) ^ (__float_as_int(d) & int(0x80000000u)));
}
__device__ inline double flip_by(double w, double d) {
    return __longlong_as_double(__double_as_longlong(w) ^
                                (__double_as_longlong(d) & static_cast<long long>(0x8000000000000000ull)));
}
template <typename T>
__device__ inline T signed_weight_finite(T w, T d) {
    return fabs(d) > T(0) ? flip_by(w, d) : d;
}

// Stages rows [b0, b0 + kGChunk) of b and the matching weights; returns (for the whole block)
// whether any staged weight is infinite or NaN, where only the full definition is right.
template <typename T>
__device__ inline bool stage_grad(T (*ws)[kGTile + 1], T (*bs)[kGTile], const T* __restrict__ bv,
                                  const T* __restrict__ wt, bool transposed, int64_t na, int64_t b_end,
                                  int64_t nb, int64_t p, int64_t a0, int64_t k0, int64_t b0, int t) {
    int odd = 0;
    for (int e = t; e < kGTile * kGChunk; e += kThreads) {
        const int row = transposed ? e % kGTile : e / kGChunk;
        const int bb = transposed ? e / kGTile : e % kGChunk;
        const int64_t a = a0 + row, b = b0 + bb;
        T w = T(0);
        if (a < na && b < b_end) w = transposed ? wt[b * na + a] : wt[a * nb + b];
        ws[bb][row] = w;
        odd |= (w - w != T(0));
        const int kc = e % kGTile, bb2 = e / kGTile;
        const int64_t b2 = b0 + bb2, k = k0 + kc;
        bs[bb2][kc] = (b2 < b_end && k < p) ? bv[b2 * p + k] : T(0);
    }
    return __syncthreads_or(odd) != 0;
}

template <typename T, bool kCheap>
__device__ inline void grad_chunk(T (&acc)[kGPer][kGPer], const T (&va)[kGPer][kGPer],
                                  const T (*ws)[kGTile + 1], const T (*bs)[kGTile], bool odd, int tx,
                                  int ty) {
#pragma unroll
    for (int bb = 0; bb < kGChunk; ++bb) {
        T w[kGPer], wz[kGPer], b[kGPer];
#pragma unroll
        for (int r = 0; r < kGPer; ++r) {
            w[r] = ws[bb][ty + r * kSide];
            wz[r] = w[r] - w[r];
        }
#pragma unroll
        for (int c = 0; c < kGPer; ++c) b[c] = bs[bb][tx + c * kSide];
#pragma unroll
        for (int r = 0; r < kGPer; ++r)
#pragma unroll
            for (int c = 0; c < kGPer; ++c) {
                const T d = va[r][c] - b[c];
                acc[r][c] += (kCheap && !odd) ? signed_weight_finite(w[r], d) : signed_weight(w[r], wz[r], d);
            }
    }
}

template <typename T, bool kCheap>
__global__ void __launch_bounds__(kThreads) grad_both(GradArgs<T> q) {
    __shared__ T ws[kGChunk][kGTile + 1];
    __shared__ T bs[kGChunk][kGTile];
    const bool second = static_cast<int>(blockIdx.z) >= q.slices;  // grad_y: a = y, b = x
    const int slice = static_cast<int>(blockIdx.z) % q.slices;
    const int64_t na = second ? q.m : q.n, nb = second ? q.n : q.m;
    const T* av = second ? q.y : q.x;
    const T* bv = second ? q.x : q.y;
    const int64_t a0 = static_cast<int64_t>(blockIdx.y) * kGTile, k0 = static_cast<int64_t>(blockIdx.x) * kGTile;
    if (a0 >= na) return;  // the grid covers the longer of n and m
    const int64_t b_lo = slice * q.slice_len, b_hi = b_lo + q.slice_len < nb ? b_lo + q.slice_len : nb;
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * kSide + tx;
    T va[kGPer][kGPer], acc[kGPer][kGPer] = {};
#pragma unroll
    for (int r = 0; r < kGPer; ++r)
#pragma unroll
        for (int c = 0; c < kGPer; ++c) {
            const int64_t a = a0 + ty + r * kSide, k = k0 + tx + c * kSide;
            va[r][c] = (a < na && k < q.p) ? av[a * q.p + k] : T(0);
        }
    for (int64_t b0 = b_lo; b0 < b_hi; b0 += kGChunk) {
        const bool odd = stage_grad(ws, bs, bv, q.g, second, na, b_hi, nb, q.p, a0, k0, b0, t);
        grad_chunk<T, kCheap>(acc, va, ws, bs, odd, tx, ty);
        __syncthreads();
    }
    T* out = second ? q.gy : q.gx;
    if (q.slices > 1) out = second ? q.gx + q.slices * q.n * q.p + slice * q.m * q.p : q.gx + slice * q.n * q.p;
#pragma unroll
    for (int r = 0; r < kGPer; ++r)
#pragma unroll
        for (int c = 0; c < kGPer; ++c) {
            const int64_t a = a0 + ty + r * kSide, k = k0 + tx + c * kSide;
            if (a < na && k < q.p) out[a * q.p + k] = acc[r][c];
        }
}

// grad_x[e] = sum over slices, in slice order, of the partials; likewise grad_y.
template <typename T>
__global__ void reduce_slices(const T* __restrict__ part, T* __restrict__ gx, T* __restrict__ gy,
                              int64_t nx, int64_t ny, int slices) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < nx + ny; e += stride) {
        const bool second = e >= nx;
        const T* src = second ? part + slices * nx + (e - nx) : part + e;
        const int64_t step = second ? ny : nx;
        T s = T(0);
        for (int i = 0; i < slices; ++i) s += src[i * step];
        (second ? gy[e - nx] : gx[e]) = s;
    }
}

// ---------------------------------------------------------------------------------------------
// The op's kernels before the port of the winners above (commit 8587e73's opdefs/*_cuda.cu,
// verbatim): the forward's 64 x 64 tile with a 4 x 4 register tile for both dtypes, and the
// gradient as two launches, one per output. Kept so that a run compares the op with them.
// ---------------------------------------------------------------------------------------------
namespace old_fwd {

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

}  // namespace old_fwd

namespace old_grad {

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

}  // namespace old_grad

}  // namespace tune
