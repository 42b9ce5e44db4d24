// The filter gradient of conv2d, shared by conv2d_grad_cpu.cc and conv2d_transpose_grad_cpu.cc
// (whose filter gradient is conv2d's with the roles of the image and the output gradient swapped):
//
//   grad_filter[di, dj, ci, :] = sum_{b, i, j} xpad[b, i*sh + di, j*sw + dj, ci] * grad_y[b, i, j, :]
//
// A register tile of P values t = dj * c + ci (side by side in a window row of NHWC) by NV
// vectors of output channels, summed over every output pixel; threads split the (di, block of t)
// rows of the filter gradient, each writes its own, and walk the output pixels in blocks of rows
// small enough to stay in L2 while a thread's tiles pass over them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "conv2d_common.h"

namespace conv2d_filter_grad {

using conv2d_common::lanes;
using conv2d_common::Valid;
using conv2d_common::Vec;

// gfp[di, t0 .. t0 + P, ob ..] += the sum over output rows [r0, r1) (rows are (b, i)).
template <typename T, int P, int NV>
inline void filter_tile(const Valid& g, const T* x, const T* gyp, int64_t opad, T* gfp, int64_t di,
                        int64_t t0, int64_t ob, int64_t r0, int64_t r1) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    T* out = gfp + (di * g.kw * g.c + t0) * opad + ob;
    V acc[P][NV];
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) acc[p][v] = *reinterpret_cast<const V*>(out + p * opad + v * W);
    const int64_t step = g.sw * g.c;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / g.oh, i = r % g.oh;
        const T* xv = x + ((b * g.hp + i * g.sh + di) * g.wp) * g.c + t0;
        const T* gv_row = gyp + r * g.ow * opad + ob;
        for (int64_t j = 0; j < g.ow; ++j, xv += step, gv_row += opad) {
            V gv[NV];
            for (int v = 0; v < NV; ++v) gv[v] = *reinterpret_cast<const V*>(gv_row + v * W);
            for (int p = 0; p < P; ++p) {
                const T s = xv[p];
                for (int v = 0; v < NV; ++v) acc[p][v] += s * gv[v];
            }
        }
    }
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) *reinterpret_cast<V*>(out + p * opad + v * W) = acc[p][v];
}

constexpr int kFilterTile = 4;  // values of t per filter-gradient tile

// Row `unit` of the filter gradient's work list, (di, a block of kFilterTile values of t), over
// every output channel, summed over output rows [r0, r1).
template <typename T>
void filter_unit(const Valid& g, const T* x, const T* gyp, int64_t opad, T* gfp, int64_t unit,
                 int64_t r0, int64_t r1) {
    constexpr int W = lanes<T>();
    const int64_t kwc = g.kw * g.c, blocks = (kwc + kFilterTile - 1) / kFilterTile;
    const int64_t di = unit / blocks, t0 = unit % blocks * kFilterTile;
    for (int64_t ob = 0; ob < opad; ob += conv2d_common::kMaxVecs * W) {
        conv2d_common::with_vecs(std::min<int64_t>(conv2d_common::kMaxVecs, (opad - ob) / W), [&](auto nv) {
            constexpr int NV = decltype(nv)::value;
            if (t0 + kFilterTile <= kwc) {
                filter_tile<T, kFilterTile, NV>(g, x, gyp, opad, gfp, di, t0, ob, r0, r1);
            } else {
                for (int64_t t = t0; t < kwc; ++t) filter_tile<T, 1, NV>(g, x, gyp, opad, gfp, di, t, ob, r0, r1);
            }
        });
    }
}

template <typename T>
void grad_filter(const Valid& g, const T* x, const T* gy, T* grad_f) {
    const int64_t opad = conv2d_common::round_up(g.o, lanes<T>());
    const std::vector<T> gyp = conv2d_common::pad_rows(gy, g.n * g.oh * g.ow, g.o, opad);
    const int64_t kwc = g.kw * g.c;
    const int64_t units = g.kh * ((kwc + kFilterTile - 1) / kFilterTile);
    std::vector<T> gfp(static_cast<size_t>(g.kh * kwc * opad), T(0));
    const int64_t rows = g.n * g.oh;
    // Output rows per block: about 128 KiB of the padded output gradient.
    const int64_t block = std::max<int64_t>(1, (128 * 1024 / int64_t(sizeof(T))) / std::max<int64_t>(g.ow * opad, 1));
    const int64_t per_unit = rows * g.ow * kFilterTile * opad;
    opsdk::parallel_for(0, units, conv2d_common::grain(per_unit), [&](int64_t lo, int64_t hi) {
        for (int64_t r0 = 0; r0 < rows; r0 += block)
            for (int64_t u = lo; u < hi; ++u) filter_unit<T>(g, x, gyp.data(), opad, gfp.data(), u, r0, std::min(rows, r0 + block));
    });
    for (int64_t r = 0; r < g.kh * kwc; ++r)
        std::copy(gfp.data() + r * opad, gfp.data() + r * opad + g.o, grad_f + r * g.o);
}

}  // namespace conv2d_filter_grad
