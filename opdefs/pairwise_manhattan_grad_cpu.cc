// pairwise_manhattan_grad, CPU: with s = sign(x[i, k] - y[j, k]), sign(0) = 0 and sign(NaN) = NaN,
//   grad_x[i, k] =  sum_j grad_z[i, j] * s
//   grad_y[j, k] = -sum_i grad_z[i, j] * s
//
// Defines the template that generated/cpp/pairwise_manhattan_grad_op.h declares; the generated
// binding includes this file.
//
// Why it is written this way:
// - k is the vector axis: no reduction runs along it, so the sums stay exact in order per lane.
// - One pass computes each signed term once and adds it to both grad_x and grad_y, for a register
//   tile of R rows of x by C rows of y whose grad_z values stay in registers over all of k.
// - The sign is built from comparisons and bit operations (x < y flips the sign bit of g,
//   x == y clears it; a native AVX-512 build takes x - y's sign bit for x < y and merges it in
//   one ternary-logic instruction, signed_term), keeping the adder ports free for the two
//   accumulations. That is exact
//   for finite x and y only (a NaN compares unequal and unordered: it would count as +1), so a
//   scan of x and y (O((n + m) p), a few % of the work) picks the exact form instead when they
//   hold a NaN or an infinity: g * sign(x - y) as the reference computes it, NaN included. A tile
//   whose grad_z values hold a NaN or an infinity takes the exact form too (NaN * 0 is NaN).
// - Threads would race on grad_y (every row of x touches every row of y). Instead the (i, j)
//   plane is cut into T x T blocks and run in T rounds; in round s thread t takes block
//   (t, (t + s) mod T), so no two threads share rows of x or rows of y. No extra memory.
// - A portable build compiles the tiles once per vector width and picks a width per call
//   (pairwise_manhattan_simd.h); a native build compiles the machine's width alone. The results
//   are the same at every width: each lane adds its terms in the same order.
#include "pairwise_manhattan_grad_op.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "pairwise_manhattan_simd.h"

namespace opsdk_op_pairwise_manhattan_grad {
namespace detail {

using pairwise_manhattan_simd::lanes;
using pairwise_manhattan_simd::Simd;

// 3 x 3 measured best on AVX2 Zen: larger tiles spill the grad_z values, smaller ones spend
// the (half-rate) store port on grad_x and grad_y rows. With AVX-512's 32 registers, 4 x 3 (one
// thread, n=m=1024, p=256 float32 on a Sapphire Rapids Xeon: 16.96-17.35 ms against 17.62-18.30
// for 3 x 3; 4 x 4 and 5 x 3 no better).
template <int B> constexpr int kTileR = B == 64 ? 4 : 3;
constexpr int kTileC = 3;

// g * sign(a - b), sign(0) = 0, as bit operations on the mask vectors the comparisons return.
template <typename T, int B>
PM_SIMD_INLINE typename Simd<T, B>::V signed_term(typename Simd<T, B>::V g,
                                                  typename Simd<T, B>::V a,
                                                  typename Simd<T, B>::V b) {
    using M = typename Simd<T, B>::M;
    using V = typename Simd<T, B>::V;
#if defined(__AVX512F__)
    if constexpr (B == 64) {
        // A native AVX-512 build: the sign bit of a - b in place of a < b (the same for finite a
        // and b, also where the difference flushes to a signed zero), merged into g by one
        // ternary-logic instruction zero-masked by a != b, where the comparisons and bit
        // operations took two more (the compiler makes no ternary-logic instruction of them).
        // n=m=1024, p=256 float32 on a 2-core Sapphire Rapids Xeon: 7.2 against 8.4 ms. (A
        // portable build's AVX-512 level keeps the comparisons: these intrinsics would need
        // every function around them compiled for AVX-512.)
        if constexpr (sizeof(T) == 4) {
            const __mmask16 ne = _mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_NEQ_UQ);
            const __m512i d = _mm512_castps_si512(_mm512_sub_ps((__m512)a, (__m512)b));
            return (V)_mm512_castsi512_ps(_mm512_maskz_ternarylogic_epi32(
                ne, d, _mm512_castps_si512((__m512)g), _mm512_set1_epi32(Simd<T>::kSignBit), 0x6c));
        } else {
            const __mmask8 ne = _mm512_cmp_pd_mask((__m512d)a, (__m512d)b, _CMP_NEQ_UQ);
            const __m512i d = _mm512_castpd_si512(_mm512_sub_pd((__m512d)a, (__m512d)b));
            return (V)_mm512_castsi512_pd(_mm512_maskz_ternarylogic_epi64(
                ne, d, _mm512_castpd_si512((__m512d)g), _mm512_set1_epi64(Simd<T>::kSignBit), 0x6c));
        }
    }
#endif
    const M lt = a < b;
    const M ne = a != b;
    return (V)((((M)g) ^ (lt & Simd<T>::kSignBit)) & ne);
}

template <typename T>
inline T signed_term_scalar(T g, T a, T b) {
    return a > b ? g : (a < b ? -g : T(0));
}

// g * sign(a - b) for any a, b: sign(d) is built as +-1 from d's sign bit (0 where d == 0) with a
// quiet NaN's bits OR-ed in where d is NaN (a NaN input, or inf - inf), then multiplied by g.
template <typename T, int B>
PM_SIMD_INLINE typename Simd<T, B>::V signed_term_exact(typename Simd<T, B>::V g,
                                                        typename Simd<T, B>::V a,
                                                        typename Simd<T, B>::V b) {
    using M = typename Simd<T, B>::M;
    using V = typename Simd<T, B>::V;
    const V d = a - b;
    const M one = (M)(V{} + T(1));
    const M sign = ((M)(d != 0) & one) | ((M)d & Simd<T>::kSignBit) | ((M)(d != d) & Simd<T>::kQuietNaN);
    return g * (V)sign;
}

template <typename T>
inline T signed_term_exact_scalar(T g, T a, T b) {
    const T d = a - b;
    return g * (d > 0 ? T(1) : (d < 0 ? T(-1) : (d == 0 ? T(0) : d)));
}

// Whether every value is finite: no NaN, no infinity (their exponent bits are all ones). An
// integer OR-reduction, which the compiler vectorises.
template <typename T>
bool all_finite(const T* v, int64_t count) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    constexpr U kExp = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
    U bad = 0;
    for (int64_t i = 0; i < count; ++i) {
        U bits;
        std::memcpy(&bits, v + i, sizeof(T));
        bad |= U((bits & kExp) == kExp);
    }
    return bad == 0;
}

struct Problem {
    int64_t n, m, p;
};

// The R x C tile of pairs (i0 + r, j0 + c): adds its terms to grad_x rows and subtracts them
// from grad_y rows, over all of k.
template <typename T, int B, bool Exact, int R, int C>
PM_SIMD_INLINE void tile(const T* x, const T* y, const T* gz, T* gx, T* gy, const Problem& pr,
                         int64_t i0, int64_t j0) {
    using V = typename Simd<T, B>::V;
    constexpr int W = lanes<T, B>();
    const int64_t p = pr.p;
    T gs[R][C];
    V g[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            gs[r][c] = gz[(i0 + r) * pr.m + j0 + c];
            g[r][c] = V{} + gs[r][c];
        }
    int64_t k = 0;
    for (; k + W <= p; k += W) {
        V xv[R], gxv[R], yv[C], gyv[C];
        for (int r = 0; r < R; ++r) {
            xv[r] = *reinterpret_cast<const V*>(x + (i0 + r) * p + k);
            gxv[r] = *reinterpret_cast<const V*>(gx + (i0 + r) * p + k);
        }
        for (int c = 0; c < C; ++c) {
            yv[c] = *reinterpret_cast<const V*>(y + (j0 + c) * p + k);
            gyv[c] = *reinterpret_cast<const V*>(gy + (j0 + c) * p + k);
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) {
                const V t = Exact ? signed_term_exact<T, B>(g[r][c], xv[r], yv[c])
                                  : signed_term<T, B>(g[r][c], xv[r], yv[c]);
                gxv[r] += t;
                gyv[c] -= t;
            }
        for (int r = 0; r < R; ++r) *reinterpret_cast<V*>(gx + (i0 + r) * p + k) = gxv[r];
        for (int c = 0; c < C; ++c) *reinterpret_cast<V*>(gy + (j0 + c) * p + k) = gyv[c];
    }
    for (; k < p; ++k)
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) {
                const T a = x[(i0 + r) * p + k], b = y[(j0 + c) * p + k];
                const T t = Exact ? signed_term_exact_scalar<T>(gs[r][c], a, b) : signed_term_scalar<T>(gs[r][c], a, b);
                gx[(i0 + r) * p + k] += t;
                gy[(j0 + c) * p + k] -= t;
            }
}

// The tiles for vectors of B bytes as functions of their own, compiled with the instruction set
// of B's level where the build dispatches; the loops around them are not hot and stay baseline.
template <int B>
struct Level {
    template <typename T, bool Exact, int R, int C>
    static void run_tile(const T* x, const T* y, const T* gz, T* gx, T* gy, const Problem& pr,
                         int64_t i0, int64_t j0) {
        tile<T, B, Exact, R, C>(x, y, gz, gx, gy, pr, i0, j0);
    }
};
#if defined(PM_SIMD_DISPATCH)
template <>
struct Level<32> {
    template <typename T, bool Exact, int R, int C>
    OPSDK_TARGET_AVX2 static void run_tile(const T* x, const T* y, const T* gz, T* gx, T* gy,
                                           const Problem& pr, int64_t i0, int64_t j0) {
        tile<T, 32, Exact, R, C>(x, y, gz, gx, gy, pr, i0, j0);
    }
};
template <>
struct Level<64> {
    template <typename T, bool Exact, int R, int C>
    OPSDK_TARGET_AVX512 static void run_tile(const T* x, const T* y, const T* gz, T* gx, T* gy,
                                             const Problem& pr, int64_t i0, int64_t j0) {
        tile<T, 64, Exact, R, C>(x, y, gz, gx, gy, pr, i0, j0);
    }
};
#endif

// Whether the R x C grad_z values of a tile are all finite. The bit-operation sign zeroes g where
// x == y, but g * sign(0) is NaN for a NaN or infinite g: such a tile takes the exact form.
template <typename T, int R, int C>
inline bool finite_tile(const T* gz, const Problem& pr, int64_t i0, int64_t j0) {
    bool finite = true;
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            const T g = gz[(i0 + r) * pr.m + j0 + c];
            finite &= g - g == T(0);  // false for NaN and infinities
        }
    return finite;
}

template <typename T, int B, bool Exact, int R>
inline void row_tile(const T* x, const T* y, const T* gz, T* gx, T* gy, const Problem& pr,
                     int64_t i0, int64_t j0, int64_t j1) {
    using L = Level<B>;
    int64_t j = j0;
    for (; j + kTileC <= j1; j += kTileC) {
        if (Exact || finite_tile<T, R, kTileC>(gz, pr, i0, j))
            L::template run_tile<T, Exact, R, kTileC>(x, y, gz, gx, gy, pr, i0, j);
        else
            L::template run_tile<T, true, R, kTileC>(x, y, gz, gx, gy, pr, i0, j);
    }
    for (; j < j1; ++j) {
        if (Exact || finite_tile<T, R, 1>(gz, pr, i0, j))
            L::template run_tile<T, Exact, R, 1>(x, y, gz, gx, gy, pr, i0, j);
        else
            L::template run_tile<T, true, R, 1>(x, y, gz, gx, gy, pr, i0, j);
    }
}

// All pairs in rows [i0, i1) of x by rows [j0, j1) of y. Rows of y (and grad_y) are taken in
// blocks of about 128 KiB so they stay in L2 while the rows of x pass over them.
template <typename T, int B, bool Exact>
void block(const T* x, const T* y, const T* gz, T* gx, T* gy, const Problem& pr, int64_t i0,
           int64_t i1, int64_t j0, int64_t j1) {
    const int64_t jblock = std::max<int64_t>(kTileC, (64 * 1024 / int64_t(sizeof(T))) / std::max<int64_t>(pr.p, 1));
    for (int64_t jb = j0; jb < j1; jb += jblock) {
        const int64_t je = std::min(j1, jb + jblock);
        int64_t i = i0;
        for (; i + kTileR<B> <= i1; i += kTileR<B>)
            row_tile<T, B, Exact, kTileR<B>>(x, y, gz, gx, gy, pr, i, jb, je);
        for (; i < i1; ++i) row_tile<T, B, Exact, 1>(x, y, gz, gx, gy, pr, i, jb, je);
    }
}

// block for the width this call runs at.
template <typename T>
using BlockFn = void (*)(const T*, const T*, const T*, T*, T*, const Problem&, int64_t, int64_t,
                         int64_t, int64_t);

template <typename T, bool Exact>
BlockFn<T> entry() {
#if defined(PM_SIMD_DISPATCH)
    switch (pairwise_manhattan_simd::dispatched_bytes()) {
        case 64: return block<T, 64, Exact>;
        case 32: return block<T, 32, Exact>;
        default: return block<T, 16, Exact>;
    }
#else
    return block<T, pairwise_manhattan_simd::kNativeBytes, Exact>;
#endif
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs&) {
    const detail::Problem pr{dims.n, dims.m, dims.p};
    T* gx = out.grad_x.data;
    T* gy = out.grad_y.data;
    std::fill(gx, gx + pr.n * pr.p, T(0));
    std::fill(gy, gy + pr.m * pr.p, T(0));
    if (pr.n == 0 || pr.m == 0 || pr.p == 0) return;
    const T* x = in.x.data;
    const T* y = in.y.data;
    const T* gz = in.grad_z.data;
    const bool exact = !(detail::all_finite(x, pr.n * pr.p) && detail::all_finite(y, pr.m * pr.p));
    const detail::BlockFn<T> run = exact ? detail::entry<T, true>() : detail::entry<T, false>();
    // One thread unless there is enough work (~n*m*p, ~0.5 ms) to pay for waking the others: on a
    // loaded machine a round that waits for a descheduled thread can cost milliseconds.
    const int64_t work = pr.n * pr.m * pr.p;
    int64_t threads = work < (int64_t(1) << 22) ? 1 : opsdk::num_threads();
    threads = std::max<int64_t>(1, std::min({threads, pr.n, pr.m}));
    auto lo = [](int64_t size, int64_t parts, int64_t t) { return size * t / parts; };
    for (int64_t round = 0; round < threads; ++round) {
        opsdk::parallel_for(0, threads, 1, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) {
                const int64_t u = (t + round) % threads;
                run(x, y, gz, gx, gy, pr, lo(pr.n, threads, t), lo(pr.n, threads, t + 1),
                                 lo(pr.m, threads, u), lo(pr.m, threads, u + 1));
            }
        });
    }
}

}  // namespace opsdk_op_pairwise_manhattan_grad
