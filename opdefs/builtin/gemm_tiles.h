// A register-tiled matrix product for gemm_cpu.cc: the products with a short side, where it beats
// a single-threaded OpenBLAS call per panel (in builds for AVX-512, where that was measured), and
// every product where OpenBLAS is absent.
//
// c = op(a) @ op(b) is computed as tiles of MR rows x NR columns held in vector registers (6 x 4
// vectors with AVX-512: 24 accumulators, 4 loads and a broadcast of 32 registers). One operand is
// "packed": its kc x NR panels copied once per chunk of KC contracted values into contiguous
// scratch, a panel small enough for L1 while every row tile sweeps it. The other is "broadcast":
// read in place, one scalar per row and contracted index, so it is never copied. Which is which:
//
//   - op(b) not transposed (b's rows hold c's columns): b is packed, each thread its own columns
//     of c, and op(a) is broadcast (a's rows, or with transpose_a its columns).
//   - op(b) transposed: c^T = b @ op(a)^T instead. b's rows are broadcast, each thread its own
//     rows of b (columns of c), and op(a)^T is packed by every thread (a's rows transposed into
//     panels: cheap where a is the short side, as in dx = dy @ w^T of a batch of 50); tiles are
//     written transposed.
//
// Why not OpenBLAS for these (gemm_cpu.cc: `tiled` says which products come here): its kernels
// pack both operands for large blocks, and with 50 rows the packing of the long operand, a pass
// per thread before any arithmetic, costs about as much as the product. The deep-MNIST CNN's
// fully connected layer (batch 50, float32, a 2-core Xeon with AVX-512, both cores): 50x3136 @
// 3136x1024 in 1.19 ms against OpenBLAS's 1.55, 50x1024 @ (3136x1024)^T 1.32 against 1.73,
// (50x3136)^T @ 50x1024 1.06 against 1.25. Large square products stay with OpenBLAS, whose
// blocking is better there (1000^3: 5.7 ms against 6.0).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "conv2d_common.h"
#include "opsdk/kernel.h"

namespace gemm_tiles {

using conv2d_common::kMaxVecs;
using conv2d_common::lanes;
using conv2d_common::LineAllocator;
using conv2d_common::Vec;

constexpr int MR = 6;          // rows per register tile: 6 x kMaxVecs accumulators
constexpr int64_t KC = 256;    // contracted values per packed chunk: a kc x NR panel fits L1
constexpr int64_t NC = 512;    // packed columns per block: KC x NC of them fit L2
constexpr int64_t MC = 256;    // broadcast rows per block, reused from L2 across a block's panels
// Broadcast rows this few read an untransposed packed operand where it lies (panels of whole
// rows, ldy apart) instead of copying it, while rows x contracted values stay within
// kDirectWork: each panel is then swept by so few row tiles that its copy cost about what they
// did. Measured (float32, one thread, the AVX-512 Xeon; us packed -> in place, over runs): 32 x
// 192 @ 192 x 512 (an LSTM cell's) 59-61 -> 55-60, 8 x 784 @ 784 x 512 126-147 -> 96-102, 32 x
// 784 @ 784 x 512 246-262 -> 207-222, 16 x 3136 @ 3136 x 1024 even (1390-1480 both ways); but
// 32 x 3136 and 50 x 3136 @ 3136 x 1024 2070-2190 -> 2270-2350 and 2610-2720 -> 3320-3380
// (each tile rereads a panel spread over k rows of y, a page apart).
constexpr int64_t kDirectRows = 64;
constexpr int64_t kDirectWork = int64_t(1) << 16;
// Floating-point work per thread below which waking another costs more than it saves.
constexpr int64_t kMinFlopsPerThread = int64_t(1) << 21;

// Columns of a panel: NV vectors (kMaxVecs but where the packed side is narrower: the product's
// 32 columns of a batch of 32 in float32 take two vectors, not four half of them zeros).
template <typename T, int NV = kMaxVecs>
constexpr int64_t nr() { return NV * lanes<T>(); }

// One tile: R rows of the broadcast operand x (element (r, l) at x[l * ldx + r] when TX, else
// x[r * ldx + l]) times a kc x NR panel (row l at panel + l * lds: lds = NR when packed), into
// out (element (r, j) at out[j * ldo + r] when TO, else out[r * ldo + j]); only the first `cols`
// columns are real. add: accumulate into out.
template <typename T, int NV, int R, bool TX, bool TO>
inline void tile(int64_t kc, const T* x, int64_t ldx, const T* panel, int64_t lds, T* out,
                 int64_t ldo, bool add, int64_t cols) {
    using V = Vec<T>;
    constexpr int W = lanes<T>(), N = NV * W;
    V acc[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = V{};
    for (int64_t l = 0; l < kc; ++l) {
        const V* row = reinterpret_cast<const V*>(panel + l * lds);
        V bv[NV];
        for (int v = 0; v < NV; ++v) bv[v] = row[v];
        for (int r = 0; r < R; ++r) {
            const T s = TX ? x[l * ldx + r] : x[r * ldx + l];
            for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
        }
    }
    if (!TO && cols == N) {
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v) {
                V* o = reinterpret_cast<V*>(out + r * ldo + v * W);
                *o = add ? *o + acc[r][v] : acc[r][v];
            }
        return;
    }
    alignas(64) T sums[R][N];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) *reinterpret_cast<V*>(&sums[r][v * W]) = acc[r][v];
    for (int64_t j = 0; j < cols; ++j)
        for (int r = 0; r < R; ++r) {
            T& o = TO ? out[j * ldo + r] : out[r * ldo + j];
            o = add ? o + sums[r][j] : sums[r][j];
        }
}

// Rows [0, rows) of x against one panel: whole tiles of MR rows, then one of the rest.
template <typename T, int NV, bool TX, bool TO>
void panel_rows(int64_t rows, int64_t kc, const T* x, int64_t ldx, const T* panel, int64_t lds,
                T* out, int64_t ldo, bool add, int64_t cols) {
    const int64_t xs = TX ? 1 : ldx, os = TO ? 1 : ldo;
    int64_t r = 0;
    for (; r + MR <= rows; r += MR)
        tile<T, NV, MR, TX, TO>(kc, x + r * xs, ldx, panel, lds, out + r * os, ldo, add, cols);
    const T* xr = x + r * xs;
    T* o = out + r * os;
    switch (rows - r) {
        case 5: tile<T, NV, 5, TX, TO>(kc, xr, ldx, panel, lds, o, ldo, add, cols); break;
        case 4: tile<T, NV, 4, TX, TO>(kc, xr, ldx, panel, lds, o, ldo, add, cols); break;
        case 3: tile<T, NV, 3, TX, TO>(kc, xr, ldx, panel, lds, o, ldo, add, cols); break;
        case 2: tile<T, NV, 2, TX, TO>(kc, xr, ldx, panel, lds, o, ldo, add, cols); break;
        case 1: tile<T, NV, 1, TX, TO>(kc, xr, ldx, panel, lds, o, ldo, add, cols); break;
        default: break;
    }
}

// Packs values [l0, l0 + kc) x columns [c0, c1) of y (element (l, j) at y[j * ldy + l] when TY,
// else y[l * ldy + j]) as consecutive kc x NR panels, zero-padded to whole panels.
template <typename T, int NV, bool TY>
void pack(const T* y, int64_t ldy, int64_t l0, int64_t kc, int64_t c0, int64_t c1, T* dst) {
    constexpr int64_t N = nr<T, NV>();
    for (int64_t q = 0; q * N < c1 - c0; ++q) {
        T* pan = dst + q * kc * N;
        const int64_t j0 = c0 + q * N, w = std::min(N, c1 - j0);
        if (w < N) std::fill(pan, pan + kc * N, T(0));
        if (TY) {
            for (int64_t j = 0; j < w; ++j) {
                const T* src = y + (j0 + j) * ldy + l0;
                for (int64_t l = 0; l < kc; ++l) pan[l * N + j] = src[l];
            }
        } else {
            for (int64_t l = 0; l < kc; ++l) std::memcpy(pan + l * N, y + (l0 + l) * ldy + j0, w * sizeof(T));
        }
    }
}

// out = rows [r0, r1) of x times columns [c0, c1) of y over k contracted values (the layouts of
// `tile` and `pack`), in blocks of NC packed columns, KC contracted values and MC rows. With
// kDirectRows rows or fewer and y untransposed, y's whole panels are read in place and only a
// last, narrower one is packed.
template <typename T, int NV, bool TX, bool TY, bool TO>
void block(int64_t k, const T* x, int64_t ldx, int64_t r0, int64_t r1, const T* y, int64_t ldy,
           int64_t c0, int64_t c1, T* out, int64_t ldo) {
    constexpr int64_t N = nr<T, NV>();
    const int64_t xs = TX ? 1 : ldx, os = TO ? 1 : ldo;
    // (direct: one block of rows, as MC is more than kDirectRows)
    const bool direct = !TY && r1 - r0 <= kDirectRows && (r1 - r0) * k <= kDirectWork;
    std::vector<T, conv2d_common::LineAllocator<T>> scratch(static_cast<size_t>(
        std::min(KC, k) * (direct ? N : std::min(NC, conv2d_common::round_up(c1 - c0, N)))));
    for (int64_t j0 = c0; j0 < c1; j0 += NC) {
        const int64_t j1 = std::min(c1, j0 + NC);
        for (int64_t l0 = 0; l0 < k; l0 += KC) {
            const int64_t kc = std::min(KC, k - l0);
            if (!direct) pack<T, NV, TY>(y, ldy, l0, kc, j0, j1, scratch.data());
            const T* xl = x + (TX ? l0 * ldx : l0);
            for (int64_t m0 = r0; m0 < r1; m0 += MC) {
                const int64_t mc = std::min(MC, r1 - m0);
                for (int64_t q = 0; q * N < j1 - j0; ++q) {
                    const int64_t j = j0 + q * N, cols = std::min(N, j1 - j);
                    const T* pan = scratch.data() + q * kc * N;
                    int64_t lds = N;
                    if (direct && cols == N) {
                        pan = y + l0 * ldy + j;
                        lds = ldy;
                    } else if (direct) {
                        pack<T, NV, TY>(y, ldy, l0, kc, j, j1, scratch.data());
                        pan = scratch.data();
                    }
                    panel_rows<T, NV, TX, TO>(mc, kc, xl + m0 * xs, ldx, pan, lds,
                                              out + m0 * os + (TO ? j * ldo : j), ldo, l0 > 0,
                                              cols);
                }
            }
        }
    }
}

// c (m x n, row-major) = op(a) @ op(b): op(a) is m x k (a stored k x m when ta), op(b) k x n (b
// stored n x k when tb); lda, ldb: a's and b's stored row lengths. Threads split c's columns.
template <typename T>
void product(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, bool ta, const T* b,
             int64_t ldb, bool tb, T* c) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
        std::fill(c, c + m * n, T(0));  // an empty sum
        return;
    }
    const int64_t flops_per_column = 2 * m * k;
    // The panels' width: as many vectors as the packed side fills, at most kMaxVecs.
    const int64_t packed_side = tb ? m : n;
    conv2d_common::with_vecs((packed_side + lanes<T>() - 1) / lanes<T>(), [&](auto vecs) {
        constexpr int NV = decltype(vecs)::value;
        constexpr int64_t N = nr<T, NV>();
        if (!tb) {  // b packed, by whole panels of c's columns per thread; op(a) broadcast
            const int64_t panels = (n + N - 1) / N;
            const int64_t grain = std::max<int64_t>(1, kMinFlopsPerThread / (flops_per_column * N));
            opsdk::parallel_for(0, panels, grain, [&](int64_t lo, int64_t hi) {
                const int64_t c0 = lo * N, c1 = std::min(n, hi * N);
                if (ta) {
                    block<T, NV, true, false, false>(k, a, lda, 0, m, b, ldb, c0, c1, c, n);
                } else {
                    block<T, NV, false, false, false>(k, a, lda, 0, m, b, ldb, c0, c1, c, n);
                }
            });
            return;
        }
        // c^T = b @ op(a)^T: b's rows broadcast (MR of them per tile, split between threads),
        // op(a)^T packed (element (l, i) is a[l * lda + i] when ta, else a[i * lda + l]), tiles
        // transposed.
        const int64_t tiles = (n + MR - 1) / MR;
        const int64_t grain = std::max<int64_t>(1, kMinFlopsPerThread / (flops_per_column * MR));
        opsdk::parallel_for(0, tiles, grain, [&](int64_t lo, int64_t hi) {
            const int64_t r0 = lo * MR, r1 = std::min(n, hi * MR);
            if (ta) {
                block<T, NV, false, false, true>(k, b, ldb, r0, r1, a, lda, 0, m, c, n);
            } else {
                block<T, NV, false, true, true>(k, b, ldb, r0, r1, a, lda, 0, m, c, n);
            }
        });
    });
}

}  // namespace gemm_tiles
