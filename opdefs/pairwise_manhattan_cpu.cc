// pairwise_manhattan, CPU: z[i, j] = sum_k |x[i, k] - y[j, k]|.
//
// Defines the template that generated/cpp/pairwise_manhattan_op.h declares; the generated binding
// includes this file.
//
// Why it is written this way:
// - The sum over k does not vectorise without reassociation, and the build does not use
//   -ffast-math; so each (i, j) pair gets its own vector accumulator (GCC vector extensions,
//   lowered to whatever the target has), summed across lanes once at the end.
// - A register tile of R rows of x by C rows of y shares every load: R + C vector loads feed
//   R * C subtract/abs/add triples.
// - Rows of y are visited in blocks that stay in L2 while a thread's rows of x pass over them,
//   and k is blocked too so that very long rows still fit.
// - With AVX-512, many rows (n >= kPackMinRows) and y of at most 256 MiB, y's columns are first
//   copied k-major (y's own size again) and a tile is an outer product whose lanes are z
//   entries: no sum across lanes at all, which at p = 256 cost a sixth of the time (packed_tile).
//   Which form runs depends on the call's shape alone, so a result's bits do not depend on the
//   threads; the two forms add in different orders, so they may differ in the last bits.
// - Threads split the rows of x (each writes its own rows of z): no races.
// - A portable build compiles the tiles once per vector width and picks a width per call
//   (pairwise_manhattan_simd.h); a native build compiles the machine's width alone.
#include "pairwise_manhattan_op.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "pairwise_manhattan_simd.h"

namespace opsdk_op_pairwise_manhattan {
namespace detail {

using pairwise_manhattan_simd::lanes;
using pairwise_manhattan_simd::Simd;

// Register tile shape: R * C accumulators plus C rows of y must fit the vector registers
// (16 with AVX2, 32 with AVX-512: B == 64).
// (3 x 4 measured best on AVX2 Zen; unrolling k further did not help. With AVX-512 on a
// Sapphire Rapids Xeon, one thread, n=1020, m=4096, p=256 float32: 6 x 4 took 37.0 ms, 5 x 4
// 37.2, 7 x 4 37.7-39.8 (spills), 4 x 4 39.4-40.7, 8 x 4 40.5-40.8.)
template <int B> constexpr int kTileR = B == 64 ? 6 : 3;
constexpr int kTileC = 4;

// acc + |a - b|. Clearing the sign bit is |.| and keeps NaN a NaN. (Issuing a - b as a fused
// a - b * 1 to use the FMA ports was measured slower on Zen: FMA borrows an add port.)
template <typename T, int B>
PM_SIMD_INLINE typename Simd<T, B>::V add_abs_diff(typename Simd<T, B>::V acc,
                                                   typename Simd<T, B>::V a,
                                                   typename Simd<T, B>::V b) {
    using S = Simd<T, B>;
    return acc + (typename S::V)((typename S::M)(a - b) & S::kAbsMask);
}

// The lane sums of a row's C accumulators, by a tree of shuffles and vector adds instead of
// W - 1 scalar adds each: with p = 256 a tile's k loop is only 16 (float32) or 32 (float64)
// vector steps, and summing 16 accumulators of 16 lanes one lane at a time took about as long
// again (the forward ran at 0.53 of its ceiling loop).
//
// A vector "holding K accumulators" keeps accumulator a's partial sums in lanes q with q % K == a.
// combine_levels makes one vector holding 2K from two holding K each: their low and high halves
// are interleaved K lanes at a time and added (2 shuffles, 1 add); fold_to then adds lanes S apart
// (S = W/2, W/4, ..., K) until the first K lanes hold the sums. Either way each step adds the upper
// half of an accumulator's remaining partial sums onto the lower half (tests/runtime/
// test_simd_dispatch.py emulates that order).
template <int W, int K, bool High>
constexpr int combine_lane(int q) {
    const int block = q / (2 * K), r = q % (2 * K);
    const int lane = r < K ? block * K + r : W + block * K + (r - K);  // b's lanes count from W
    return lane + (High ? W / 2 : 0);
}

template <int W, int K, bool High, typename V, int... Q>
PM_SIMD_INLINE V combine_half(V a, V b, std::integer_sequence<int, Q...>) {
    return __builtin_shufflevector(a, b, combine_lane<W, K, High>(Q)...);
}

// v plus v rotated down by S lanes: lane q < S gets lane q + S added.
template <int S, typename V, int... Q>
PM_SIMD_INLINE V fold(V v, std::integer_sequence<int, Q...>) {
    constexpr int W = sizeof...(Q);
    return v + __builtin_shufflevector(v, v, ((Q + S) % W)...);
}

// N vectors holding K accumulators each become N / 2 holding 2K, until one is left or a vector
// is full (2K > W).
template <typename T, int B, int K, int N>
PM_SIMD_INLINE void combine_levels(typename Simd<T, B>::V* acc) {
    constexpr int W = lanes<T, B>();
    if constexpr (N >= 2 && 2 * K <= W) {
        using Lanes = std::make_integer_sequence<int, W>;
        for (int v = 0; v < N / 2; ++v)
            acc[v] = combine_half<W, K, false>(acc[2 * v], acc[2 * v + 1], Lanes{}) +
                     combine_half<W, K, true>(acc[2 * v], acc[2 * v + 1], Lanes{});
        combine_levels<T, B, 2 * K, N / 2>(acc);
    }
}

// Adds the lanes of a vector holding K accumulators down to its first K lanes.
template <typename T, int B, int S, int K>
PM_SIMD_INLINE typename Simd<T, B>::V fold_to(typename Simd<T, B>::V v) {
    if constexpr (S >= K) {
        return fold_to<T, B, S / 2, K>(fold<S>(v, std::make_integer_sequence<int, lanes<T, B>()>{}));
    } else {
        return v;
    }
}

// out[c] = the lane sum of acc[c], c < C (a power of two); acc is overwritten.
template <typename T, int B, int C>
PM_SIMD_INLINE void row_sums(typename Simd<T, B>::V (&acc)[C], T (&out)[C]) {
    constexpr int W = lanes<T, B>();
    static_assert((C & (C - 1)) == 0, "row_sums needs a power of two of accumulators");
    constexpr int K = C < W ? C : W;  // accumulators per vector once combined
    combine_levels<T, B, 1, C>(acc);
    for (int v = 0; v < C / K; ++v) {
        const typename Simd<T, B>::V s = fold_to<T, B, W / 2, K>(acc[v]);
        for (int a = 0; a < K; ++a) out[v * K + a] = s[a];
    }
}

// Row G of a group's sums: lanes [G * C, (G + 1) * C) of s, stored at out in one vector store
// (added to what is there where accumulating).
template <typename T, int B, int C, int G, int... L>
PM_SIMD_INLINE void store_row(typename Simd<T, B>::V s, T* out, bool accumulate,
                              std::integer_sequence<int, L...>) {
    typedef T Row __attribute__((vector_size(C * sizeof(T)), aligned(alignof(T))));
    const Row part = __builtin_shufflevector(s, s, (G * C + L)...);
    Row* row = reinterpret_cast<Row*>(out);
    *row = accumulate ? *row + part : part;
}

template <typename T, int B, int C, int... G>
PM_SIMD_INLINE void store_rows(typename Simd<T, B>::V s, T* z, int64_t m, bool accumulate,
                               std::integer_sequence<int, G...>) {
    (store_row<T, B, C, G>(s, z + G * m, accumulate, std::make_integer_sequence<int, C>{}), ...);
}

// The largest power of two no more than a and b (both at least 1).
constexpr int pow2_at_most(int a, int b) {
    int g = 1;
    while (2 * g <= a && 2 * g <= b) g *= 2;
    return g;
}

// z[i0 + r, j0 + c] (+)= the lane sum of acc[r][c] for rows R0 on, where 1 < C <= W. Rows go in
// groups whose accumulators fill a vector together (W / C rows: 4 of float32 with AVX-512), each
// reduced by one tree (combine_levels, then fold_to) that leaves accumulator r * C + c of the
// group in lane r * C + c: each row's C sums lie side by side and reach z in one vector store.
// The additions are row_sums' (each step adds the upper half of an accumulator's partial sums
// onto the lower half), so the sums are the same bits. Reducing each row alone (row_sums) left
// each sum in a vector of its own, read out and stored one at a time: a quarter of the forward's
// time at p = 256 (one thread, AVX-512, 16 vector steps of k a tile); with the groups the
// forward ran 1.10x faster.
template <typename T, int B, int R, int C, int R0 = 0>
PM_SIMD_INLINE void store_sums(typename Simd<T, B>::V (&acc)[R][C], T* z, int64_t m, int64_t i0,
                               int64_t j0, bool accumulate) {
    if constexpr (R0 < R) {
        using V = typename Simd<T, B>::V;
        constexpr int W = lanes<T, B>();
        constexpr int G = pow2_at_most(R - R0, W / C);
        constexpr int N = G * C;
        V v[N];
        for (int r = 0; r < G; ++r)
            for (int c = 0; c < C; ++c) v[r * C + c] = acc[R0 + r][c];
        combine_levels<T, B, 1, N>(v);
        store_rows<T, B, C>(fold_to<T, B, W / 2, N>(v[0]), z + (i0 + R0) * m + j0, m, accumulate,
                            std::make_integer_sequence<int, G>{});
        store_sums<T, B, R, C, R0 + G>(acc, z, m, i0, j0, accumulate);
    }
}

// z[i0 + r, j0 + c] (+)= sum over k in [k0, k1) of |x - y|, for an R x C tile.
template <typename T, int B, int R, int C>
PM_SIMD_INLINE void tile(const T* x, const T* y, T* z, int64_t p, int64_t m, int64_t i0,
                         int64_t j0, int64_t k0, int64_t k1, bool accumulate) {
    using V = typename Simd<T, B>::V;
    constexpr int W = lanes<T, B>();
    V acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = V{};
    const T* xr[R];
    const T* yc[C];
    for (int r = 0; r < R; ++r) xr[r] = x + (i0 + r) * p;
    for (int c = 0; c < C; ++c) yc[c] = y + (j0 + c) * p;
    int64_t k = k0;
    for (; k + W <= k1; k += W) {
        V yv[C];
        for (int c = 0; c < C; ++c) yv[c] = *reinterpret_cast<const V*>(yc[c] + k);
        for (int r = 0; r < R; ++r) {
            const V xv = *reinterpret_cast<const V*>(xr[r] + k);
            for (int c = 0; c < C; ++c) acc[r][c] = add_abs_diff<T, B>(acc[r][c], xv, yv[c]);
        }
    }
    if constexpr (C > 1 && C <= W) {
        if (k == k1) {  // no part of a vector left over (p a multiple of W, as p = 256 is)
            store_sums<T, B, R, C>(acc, z, m, i0, j0, accumulate);
            return;
        }
    }
    for (int r = 0; r < R; ++r) {
        T sums[C];
        row_sums<T, B, C>(acc[r], sums);
        for (int c = 0; c < C; ++c) {
            T s = sums[c];
            for (int64_t kk = k; kk < k1; ++kk) {
                const T d = xr[r][kk] - yc[c][kk];
                s += d < 0 ? -d : d;
            }
            T& out = z[(i0 + r) * m + j0 + c];
            out = accumulate ? out + s : s;
        }
    }
}

// The packed form, for calls of many rows with AVX-512 (packed_rows below): y's columns are first
// copied k-major into panels of kPanel columns (panel[k][c] = y[j0 + c, k]), so a register tile
// is an outer product: R values of x, each broadcast, against C vectors of W columns of the
// panel, every lane a z entry of its own. Each sum then runs over k in order in one lane and
// needs no reduction across lanes at the end, which took a sixth of the time of the tile above
// at p = 256 even after store_sums (16 vector steps of k a tile, then a tree of shuffles).
// 6 x 4 (24 accumulators, 4 panel vectors, the broadcast and the sign mask: 30 of the 32
// registers); the panel of 512 columns by 256 k (512 KiB of float32) stays in L2 while a thread's
// rows pass over it. One thread, n=1020, m=4096, p=256, float32, on a 2-core Xeon whose ceiling
// loop ran at 87.8 GF/s: 89 GF/s packed, 75 with the reducing tile.
template <int B> constexpr int kPackR = 6;
template <int B> constexpr int kPackC = 4;
constexpr int64_t kPanel = 512;   // columns of a panel (a multiple of kPackC * lanes)
constexpr int64_t kPackK = 256;   // k per block: a block of a panel is 512 KiB of float32
// Fewer rows than this: packing y (copied, its memory first touched) costs more than it saves.
// m=4096, p=256, float32: one thread, the packed form won from 96 rows; two threads, from 192
// (n=96: 104 GF/s packed, 135 reducing; n=192: 124 and 115; n=576: 151 and 127; best of 15).
constexpr int64_t kPackMinRows = 192;
constexpr int64_t kPackMaxBytes = int64_t(256) << 20;  // a larger y is not copied (memory)

// A vector of W lanes, each s.
template <typename V, typename T, int... L>
PM_SIMD_INLINE V splat(T s, std::integer_sequence<int, L...>) {
    return V{((void)L, s)...};
}

// z[i0 + r, j0 + c * W + l] (+)= sum over k in [k0, k1) of |x[i0 + r, k] - panel[k, jt + c * W + l]|,
// for an R x (C vectors) tile; `panel` is the panel of column j0 - jt, rows kPanel apart.
template <typename T, int B, int R, int C>
PM_SIMD_INLINE void packed_tile(const T* x, const T* panel, T* z, int64_t p, int64_t m,
                                int64_t i0, int64_t j0, int64_t jt, int64_t k0, int64_t k1,
                                bool accumulate) {
    using S = Simd<T, B>;
    using V = typename S::V;
    constexpr int W = lanes<T, B>();
    V acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = V{};
    const T* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = x + (i0 + r) * p;
    const T* row = panel + k0 * kPanel + jt;
    for (int64_t k = k0; k < k1; ++k, row += kPanel) {
        V yv[C];
        for (int c = 0; c < C; ++c) yv[c] = *reinterpret_cast<const V*>(row + c * W);
        for (int r = 0; r < R; ++r) {
            const V xv = splat<V>(xr[r][k], std::make_integer_sequence<int, W>{});
            for (int c = 0; c < C; ++c) acc[r][c] = add_abs_diff<T, B>(acc[r][c], xv, yv[c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            V* out = reinterpret_cast<V*>(z + (i0 + r) * m + j0 + c * W);
            *out = accumulate ? *out + acc[r][c] : acc[r][c];
        }
}

// The tiles for vectors of B bytes as functions of their own, compiled with the instruction set
// of B's level where the build dispatches; the loops around them are not hot and stay baseline.
// (Inlined into those loops, the 4 x 4 tile ran 40% slower: GCC reloaded x for every column.)
template <int B>
struct Level {
    template <typename T, int R, int C>
    static void run_tile(const T* x, const T* y, T* z, int64_t p, int64_t m, int64_t i0,
                         int64_t j0, int64_t k0, int64_t k1, bool accumulate) {
        tile<T, B, R, C>(x, y, z, p, m, i0, j0, k0, k1, accumulate);
    }
    template <typename T, int R, int C>
    static void run_packed_tile(const T* x, const T* panel, T* z, int64_t p, int64_t m,
                                int64_t i0, int64_t j0, int64_t jt, int64_t k0, int64_t k1,
                                bool accumulate) {
        packed_tile<T, B, R, C>(x, panel, z, p, m, i0, j0, jt, k0, k1, accumulate);
    }
};
#if defined(PM_SIMD_DISPATCH)
template <>
struct Level<32> {
    template <typename T, int R, int C>
    OPSDK_TARGET_AVX2 static void run_tile(const T* x, const T* y, T* z, int64_t p, int64_t m,
                                           int64_t i0, int64_t j0, int64_t k0, int64_t k1,
                                           bool accumulate) {
        tile<T, 32, R, C>(x, y, z, p, m, i0, j0, k0, k1, accumulate);
    }
};
template <>
struct Level<64> {
    template <typename T, int R, int C>
    OPSDK_TARGET_AVX512 static void run_tile(const T* x, const T* y, T* z, int64_t p, int64_t m,
                                             int64_t i0, int64_t j0, int64_t k0, int64_t k1,
                                             bool accumulate) {
        tile<T, 64, R, C>(x, y, z, p, m, i0, j0, k0, k1, accumulate);
    }
    template <typename T, int R, int C>
    OPSDK_TARGET_AVX512 static void run_packed_tile(const T* x, const T* panel, T* z, int64_t p,
                                                    int64_t m, int64_t i0, int64_t j0, int64_t jt,
                                                    int64_t k0, int64_t k1, bool accumulate) {
        packed_tile<T, 64, R, C>(x, panel, z, p, m, i0, j0, jt, k0, k1, accumulate);
    }
};
#endif

// One row tile of x (R rows) against columns [j0, j1) of z.
template <typename T, int B, int R>
inline void rows_against_block(const T* x, const T* y, T* z, int64_t p, int64_t m, int64_t i0,
                               int64_t j0, int64_t j1, int64_t k0, int64_t k1, bool accumulate) {
    using L = Level<B>;
    int64_t j = j0;
    for (; j + kTileC <= j1; j += kTileC)
        L::template run_tile<T, R, kTileC>(x, y, z, p, m, i0, j, k0, k1, accumulate);
    for (; j < j1; ++j) L::template run_tile<T, R, 1>(x, y, z, p, m, i0, j, k0, k1, accumulate);
}

// Rows [i0, i1) of z, columns [j_begin, m): blocks of k, then blocks of rows of y, then register
// tiles.
template <typename T, int B>
void rows(const T* x, const T* y, T* z, int64_t m, int64_t p, int64_t i0, int64_t i1,
          int64_t j_begin = 0) {
    constexpr int R = kTileR<B>;
    // A block of y of about 128 KiB stays in L2 while every row tile of x passes over it.
    const int64_t kblock = 1024;
    const int64_t kb = std::min<int64_t>(p, kblock);
    const int64_t jblock = std::max<int64_t>(kTileC, (128 * 1024 / int64_t(sizeof(T))) / std::max<int64_t>(kb, 1));
    for (int64_t k0 = 0; k0 < p; k0 += kblock) {
        const int64_t k1 = std::min(p, k0 + kblock);
        const bool accumulate = k0 > 0;
        for (int64_t j0 = j_begin; j0 < m; j0 += jblock) {
            const int64_t j1 = std::min(m, j0 + jblock);
            int64_t i = i0;
            for (; i + R <= i1; i += R)
                rows_against_block<T, B, R>(x, y, z, p, m, i, j0, j1, k0, k1, accumulate);
            // The last rows (fewer than R) in tiles of 2, then 1: a 1-row tile loads a row of y
            // for each row of x (n = 64, one thread, 4 rows left: 2.25 ms against 2.30).
            for (; i + 2 <= i1; i += 2)
                rows_against_block<T, B, 2>(x, y, z, p, m, i, j0, j1, k0, k1, accumulate);
            for (; i < i1; ++i)
                rows_against_block<T, B, 1>(x, y, z, p, m, i, j0, j1, k0, k1, accumulate);
        }
    }
}

// The columns the packed form covers: whole tiles of kPackC vectors (the rest go to rows).
template <typename T, int B>
int64_t packed_columns(int64_t m) {
    constexpr int64_t tile = kPackC<B> * lanes<T, B>();
    return m / tile * tile;
}

// Panel b of the packed y: columns [b * kPanel, ...) of the packed ones, k-major, kPanel apart.
template <typename T, int B>
void pack(const T* y, T* panels, int64_t p, int64_t cols, int64_t b0, int64_t b1) {
    constexpr int W = lanes<T, B>();
    for (int64_t b = b0; b < b1; ++b) {
        T* panel = panels + b * kPanel * p;
        const int64_t j0 = b * kPanel, width = std::min(kPanel, cols - j0);
        for (int64_t c = 0; c < width; c += W)  // W columns at a time: each k fills a vector's worth
            for (int64_t k = 0; k < p; ++k) {
                const T* src = y + (j0 + c) * p + k;
                T* dst = panel + k * kPanel + c;
                for (int l = 0; l < W; ++l) dst[l] = src[l * p];
            }
    }
}

// Rows [i, i + Rt) of z against a panel's `width` columns (from column j0 of z), tile by tile.
template <typename T, int B, int Rt>
inline void packed_tile_row(const T* x, const T* panel, T* z, int64_t p, int64_t m, int64_t i,
                            int64_t j0, int64_t width, int64_t k0, int64_t k1, bool accumulate) {
    constexpr int C = kPackC<B>, W = lanes<T, B>();
    for (int64_t c = 0; c < width; c += C * W)
        Level<B>::template run_packed_tile<T, Rt, C>(x, panel, z, p, m, i, j0 + c, c, k0, k1,
                                                     accumulate);
}

// Rows [i0, i1) of z, the packed columns [0, cols): blocks of k, then panels, then tiles; the
// columns after them through rows.
template <typename T, int B>
void packed_rows(const T* x, const T* y, const T* panels, T* z, int64_t m, int64_t p,
                 int64_t cols, int64_t i0, int64_t i1) {
    constexpr int R = kPackR<B>;
    static_assert(R <= 7, "the rows left after the tiles of R go in at most one tile of 4, 2, 1");
    for (int64_t k0 = 0; k0 < p; k0 += kPackK) {
        const int64_t k1 = std::min(p, k0 + kPackK);
        const bool accumulate = k0 > 0;
        for (int64_t j0 = 0; j0 < cols; j0 += kPanel) {
            const T* panel = panels + j0 * p;
            const int64_t width = std::min(kPanel, cols - j0);
            int64_t i = i0;
            for (; i + R <= i1; i += R)
                packed_tile_row<T, B, R>(x, panel, z, p, m, i, j0, width, k0, k1, accumulate);
            // The rows left in tiles of 4, 2, then 1: a tile of one row streams the panel from
            // L2 for 4 triples a vector (n=160, one thread, 4 rows left: 73 GF/s in tiles of one,
            // 78 in one tile of 4).
            if (i + 4 <= i1) {
                packed_tile_row<T, B, 4>(x, panel, z, p, m, i, j0, width, k0, k1, accumulate);
                i += 4;
            }
            if (i + 2 <= i1) {
                packed_tile_row<T, B, 2>(x, panel, z, p, m, i, j0, width, k0, k1, accumulate);
                i += 2;
            }
            if (i < i1)
                packed_tile_row<T, B, 1>(x, panel, z, p, m, i, j0, width, k0, k1, accumulate);
        }
    }
    if (cols < m) rows<T, B>(x, y, z, m, p, i0, i1, cols);
}

// rows for the width this call runs at, and its rows per register tile (the threads' grain);
// with AVX-512, the packed form too (null otherwise).
template <typename T>
struct Entry {
    void (*rows)(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t);
    int tile_rows;
    int64_t (*packed_columns)(int64_t);
    void (*pack)(const T*, T*, int64_t, int64_t, int64_t, int64_t);
    void (*packed_rows)(const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t,
                        int64_t);
};

template <typename T, int B>
Entry<T> entry_for() {
    if constexpr (B == 64) {
        return {rows<T, B>, kTileR<B>, packed_columns<T, B>, pack<T, B>, packed_rows<T, B>};
    } else {
        return {rows<T, B>, kTileR<B>, nullptr, nullptr, nullptr};
    }
}

template <typename T>
Entry<T> entry() {
#if defined(PM_SIMD_DISPATCH)
    switch (pairwise_manhattan_simd::dispatched_bytes()) {
        case 64: return entry_for<T, 64>();
        case 32: return entry_for<T, 32>();
        default: return entry_for<T, 16>();
    }
#else
    return entry_for<T, pairwise_manhattan_simd::kNativeBytes>();
#endif
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs&) {
    const int64_t n = dims.n, m = dims.m, p = dims.p;
    if (n == 0 || m == 0) return;
    T* z = out.z.data;
    if (p == 0) {
        // An empty sum: every distance is 0.
        std::fill(z, z + n * m, T(0));
        return;
    }
    // Enough rows per thread (~ m * p work each) that a thread's share is ~0.2 ms or more: below
    // that, waking a second thread gains little and, on a loaded machine, can cost milliseconds.
    const detail::Entry<T> entry = detail::entry<T>();
    const int64_t per_row = std::max<int64_t>(1, m * p);
    const int64_t grain = std::max<int64_t>(entry.tile_rows, (int64_t(1) << 22) / per_row);
    const T* x = in.x.data;
    const T* y = in.y.data;
    // Many rows with AVX-512: y's columns packed once (O(m * p), y's own size), then the outer-
    // product tiles. The form depends on the call's shape alone, never on the threads, so a
    // result has the same bits whatever the thread budget.
    const int64_t cols = entry.packed_columns != nullptr && n >= detail::kPackMinRows &&
                                 m * p <= detail::kPackMaxBytes / int64_t(sizeof(T))
                             ? entry.packed_columns(m) : 0;
    if (cols > 0) {
        const int64_t panels = (cols + detail::kPanel - 1) / detail::kPanel;
        std::unique_ptr<T[]> packed(new T[panels * detail::kPanel * p]);
        opsdk::parallel_for(0, panels, std::max<int64_t>(1, (int64_t(1) << 18) / (detail::kPanel * p)),
                            [&](int64_t lo, int64_t hi) { entry.pack(y, packed.get(), p, cols, lo, hi); });
        opsdk::parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
            entry.packed_rows(x, y, packed.get(), z, m, p, cols, lo, hi);
        });
        return;
    }
    opsdk::parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) { entry.rows(x, y, z, m, p, lo, hi, 0); });
}

}  // namespace opsdk_op_pairwise_manhattan
