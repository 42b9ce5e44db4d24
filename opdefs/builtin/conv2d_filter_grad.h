// The filter gradient of conv2d, shared by conv2d_grad_cpu.cc and conv2d_transpose_grad_cpu.cc
// (whose filter gradient is conv2d's with the roles of the image and the output gradient swapped):
//
//   grad_filter[di, dj, ci, :] = sum_{b, i, j} xpad[b, i*sh + di, j*sw + dj, ci] * grad_y[b, i, j, :]
//
// A register tile of P taps k = (di, dj * c + ci) (flattened as conv2d_valid.h's tap_offsets)
// by NV vectors of output channels, summed over every output pixel: per pixel, NV loads of
// grad_y and P broadcasts of x for P * NV multiply-adds. Threads split the tiles of taps, each
// writes its own rows of the gradient (or, with too few tiles to split evenly, the output rows,
// each into a gradient of its own, added at the end). They walk the output pixels in blocks of rows whose
// grad_y (what every tile reloads per pixel) fits L1: with blocks of L2's size the loads of
// grad_y, not the multiply-adds, set the pace.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "conv2d_common.h"
#include "conv2d_valid.h"

namespace conv2d_filter_grad {

using conv2d_common::lanes;
using conv2d_common::Valid;
using conv2d_common::Vec;

#if defined(__AVX512F__)
constexpr int kFilterTile = 6;  // taps per tile: 6 x 4 accumulators + 4 loads + 1 broadcast
#else
constexpr int kFilterTile = 4;  // 4 x 2 + 2 + 1 of 16 registers
#endif

// gfp[k0 .. k0 + P, ob ..] += the sum over output rows [r0, r1) (rows are (b, i)); tap k0 + p
// of the pixel whose window starts at x + w lies at x + w + at[k0 + p]. Output rows and columns
// whose windows meet only the padding's zeros at the tile's taps (Valid's top, bottom, left,
// right) add nothing and are skipped.
template <typename T, int P, int NV>
inline void filter_tile(const Valid& g, const T* x, const int64_t* at, const T* gy, int64_t opad,
                        T* gfp, int64_t k0, int64_t ob, int64_t r0, int64_t r1) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    T* out = gfp + k0 * opad + ob;
    V acc[P][NV];
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) acc[p][v] = *reinterpret_cast<const V*>(out + p * opad + v * W);
    // The window rows di and columns dj the tile's taps read (tap k = di * kw * c + dj * c + ci).
    const int64_t row_taps = g.kw * g.c, di0 = k0 / row_taps, di1 = (k0 + P - 1) / row_taps;
    int64_t dj0 = g.kw, dj1 = -1;
    for (int p = 0; p < P; ++p) {
        const int64_t dj = (k0 + p) % row_taps / g.c;
        dj0 = std::min(dj0, dj);
        dj1 = std::max(dj1, dj);
    }
    const int64_t bottom = g.real_bottom();
    const int64_t j0 = std::max<int64_t>(0, conv2d_common::ceil_div(g.left - dj1, g.sw));
    const int64_t j1 = std::min(g.ow, conv2d_common::ceil_div(g.real_right() - dj0, g.sw));
    const int64_t step = g.sw * g.c;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / g.oh, i = r % g.oh;
        if (i * g.sh + di1 < g.top || i * g.sh + di0 >= bottom) continue;
        const T* row = x + (b * g.hp + i * g.sh) * g.wp * g.c;
        const T* xp[P];
        for (int p = 0; p < P; ++p) xp[p] = row + at[k0 + p];
        const T* gv_row = gy + (r * g.ow + j0) * opad + ob;
        for (int64_t j = j0; j < j1; ++j, gv_row += opad) {
            V gv[NV];
            for (int v = 0; v < NV; ++v) gv[v] = *reinterpret_cast<const V*>(gv_row + v * W);
            for (int p = 0; p < P; ++p) {
                const T s = xp[p][j * step];
                for (int v = 0; v < NV; ++v) acc[p][v] += s * gv[v];
            }
        }
    }
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) *reinterpret_cast<V*>(out + p * opad + v * W) = acc[p][v];
}

// Call f with the tile's taps, min(count, kFilterTile), as a compile-time constant.
template <typename F>
inline void with_taps(int64_t count, F&& f) {
    switch (std::min<int64_t>(count, kFilterTile)) {
        case 1: f(std::integral_constant<int, 1>{}); break;
        case 2: f(std::integral_constant<int, 2>{}); break;
        case 3: f(std::integral_constant<int, 3>{}); break;
#if defined(__AVX512F__)
        case 4: f(std::integral_constant<int, 4>{}); break;
        case 5: f(std::integral_constant<int, 5>{}); break;
#endif
        default: f(std::integral_constant<int, kFilterTile>{}); break;
    }
}

// Tile `unit` of the taps (kFilterTile of them, fewer in the last), over every output channel,
// summed over output rows [r0, r1).
template <typename T>
void filter_unit(const Valid& g, const T* x, const int64_t* at, const T* gy, int64_t opad, T* gfp,
                 int64_t unit, int64_t r0, int64_t r1) {
    constexpr int W = lanes<T>();
    const int64_t k0 = unit * kFilterTile, taps = g.kh * g.kw * g.c;
    with_taps(taps - k0, [&](auto p) {
        for (int64_t ob = 0; ob < opad; ob += conv2d_common::kMaxVecs * W)
            conv2d_common::with_vecs(std::min<int64_t>(conv2d_common::kMaxVecs, (opad - ob) / W), [&](auto nv) {
                filter_tile<T, decltype(p)::value, decltype(nv)::value>(g, x, at, gy, opad, gfp, k0, ob, r0, r1);
            });
    });
}

template <typename T>
void grad_filter(const Valid& g, const T* x, const T* gy, T* grad_f) {
    const int64_t opad = conv2d_common::round_up(g.o, lanes<T>()), taps = g.kh * g.kw * g.c;
    conv2d_common::LineVector<T> padded;  // grad_y with whole vectors of channels, unless it has them
    if (opad != g.o) padded = conv2d_common::pad_rows(gy, g.n * g.oh * g.ow, g.o, opad);
    const T* gyp = opad == g.o ? gy : padded.data();
    const std::vector<int64_t> at = conv2d_common::tap_offsets(g);
    const int64_t units = (taps + kFilterTile - 1) / kFilterTile, rows = g.n * g.oh;
    conv2d_common::LineVector<T> gfp(static_cast<size_t>(taps * opad), T(0));
    // Output rows per block: about 24 KiB of grad_y, which stays in L1 while a thread's tiles pass.
    const int64_t block = std::max<int64_t>(1, (24 * 1024 / int64_t(sizeof(T))) / std::max<int64_t>(g.ow * opad, 1));
    const int64_t per_unit = rows * g.ow * kFilterTile * opad;
    // Threads split the tiles of taps, unless they are too few to split evenly: a 1-channel
    // image's 25 taps are 5 tiles, 18 taps for one thread against 7 for the other. Then each
    // thread sums a part of the output rows into a gradient of its own, and the parts are added.
    const int64_t threads = opsdk::num_threads();
    const int64_t most = std::min(taps, (units + threads - 1) / threads * kFilterTile);  // one thread's taps
    const bool by_rows = threads > 1 && rows >= threads * block && units * per_unit > (int64_t(1) << 22) &&
                         10 * taps < 9 * threads * most;
    if (!by_rows) {
        opsdk::parallel_for(0, units, conv2d_common::grain(per_unit), [&](int64_t lo, int64_t hi) {
            for (int64_t r0 = 0; r0 < rows; r0 += block)
                for (int64_t u = lo; u < hi; ++u) filter_unit<T>(g, x, at.data(), gyp, opad, gfp.data(), u, r0, std::min(rows, r0 + block));
        });
    } else {
        std::vector<conv2d_common::LineVector<T>> parts(static_cast<size_t>(threads - 1));
        opsdk::parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
            for (int64_t part = lo; part < hi; ++part) {
                T* sums = gfp.data();
                if (part > 0) {
                    parts[part - 1].assign(static_cast<size_t>(taps * opad), T(0));
                    sums = parts[part - 1].data();
                }
                const int64_t end = rows * (part + 1) / threads;
                for (int64_t r0 = rows * part / threads; r0 < end; r0 += block)
                    for (int64_t u = 0; u < units; ++u) filter_unit<T>(g, x, at.data(), gyp, opad, sums, u, r0, std::min(end, r0 + block));
            }
        });
        for (const auto& part : parts)
            for (int64_t k = 0; k < taps * opad; ++k) gfp[k] += part[k];
    }
    for (int64_t k = 0; k < taps; ++k) std::copy(gfp.data() + k * opad, gfp.data() + k * opad + g.o, grad_f + k * g.o);
}

// The filter gradient of the convolution g (TensorFlow's padding, not done yet): x padded as
// conv2d's forward reads it, then grad_filter; an empty sum where y has no pixels.
template <typename T>
void filter_gradient(const conv2d_common::Geometry& g, const T* x, const T* gy, T* grad_f) {
    if (g.n * g.oh * g.ow == 0) {
        std::fill(grad_f, grad_f + g.kh * g.kw * g.c * g.o, T(0));
    } else if (g.kh * g.kw * g.c * g.o > 0) {
        conv2d_common::LineVector<T> copy;
        const Valid fv = conv2d_common::padded_input(g, x, copy);
        grad_filter<T>(fv, copy.empty() ? x : copy.data(), gy, grad_f);
    }
}

}  // namespace conv2d_filter_grad
