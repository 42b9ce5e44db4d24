// The input gradient of conv2d, as convolutions that conv2d_valid.h runs:
//
//   grad_x[b, ih, iw, :] = sum over the taps (di, dj) and output pixels (i, j) with
//                          i*sh + di = ih + top and j*sw + dj = iw + left of filter[di, dj] . grad_y[b, i, j]
//
// With strides, only the taps di = ph + m*sh reach the input rows ih = q*sh + ph - top (one
// "phase" ph in [0, sh)), and from output row i = q - m. So each phase (ph, pw) is a stride-1
// convolution of grad_y (zero-padded by mh - 1 rows, mw - 1 columns before) with the phase's taps
// flipped and transposed to [mh, mw, o, c], written to the phase's pixels of grad_x. The phases
// split the taps, so the work is the gradient's own, with no multiplications by the zeros a
// strided grad_y spread out to the input's size would hold. (With strides of 1 there is one
// phase, written straight into grad_x.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "conv2d_common.h"
#include "conv2d_valid.h"

namespace conv2d_input_grad {

using conv2d_common::Geometry;
using conv2d_common::ceil_div;
using conv2d_common::floor_div;
using conv2d_common::Valid;

// One phase of the strides: taps di = ph + m*sh (m < mh), input rows ih = q*sh + ph - top for
// q in [q0, q0 + nq); the same across the width.
struct Phase {
    int64_t ph, pw, mh, mw, q0, nq, r0, nr;
};


inline Phase phase(const Geometry& g, int64_t ph, int64_t pw) {
    const int64_t q0 = ceil_div(g.top - ph, g.sh), r0 = ceil_div(g.left - pw, g.sw);
    return {ph, pw, ph < g.kh ? ceil_div(g.kh - ph, g.sh) : 0, pw < g.kw ? ceil_div(g.kw - pw, g.sw) : 0,
            q0, std::max<int64_t>(floor_div(g.h - 1 + g.top - ph, g.sh) - q0 + 1, 0),
            r0, std::max<int64_t>(floor_div(g.w - 1 + g.left - pw, g.sw) - r0 + 1, 0)};
}

// The columns [j0, j1) of grad_y that the phase's input holds (phase_input).
inline std::pair<int64_t, int64_t> phase_columns(const Geometry& g, const Phase& p) {
    return {std::max<int64_t>(p.r0 - (p.mw - 1), 0), std::min(p.r0 + p.nr, g.ow)};
}

// grad_y rows q0 - (mh - 1) .. q0 + nq - 1 and the matching columns, zeros outside grad_y.
template <typename T>
conv2d_common::LineVector<T> phase_input(const Geometry& g, const Phase& p, const T* gy) {
    const int64_t hin = p.nq + p.mh - 1, win = p.nr + p.mw - 1;
    conv2d_common::LineVector<T> out(static_cast<size_t>(g.n * hin * win * g.o));  // all written below
    const std::pair<int64_t, int64_t> cols = phase_columns(g, p);
    const int64_t j0 = cols.first, j1 = cols.second;  // named, not bound: the lambda below takes them
    opsdk::parallel_for(0, g.n * hin, conv2d_common::copy_grain(win * g.o), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
            const int64_t b = r / hin, i = p.q0 + r % hin - (p.mh - 1);
            const bool inside = i >= 0 && i < g.oh && j0 < j1;
            conv2d_common::padded_row(out.data() + r * win * g.o, win, g.o,
                                      inside ? gy + ((b * g.oh + i) * g.ow + j0) * g.o : nullptr,
                                      j0 - p.r0 + p.mw - 1, inside ? j1 - j0 : 0);
        }
    });
    return out;
}

// The phase's taps flipped and transposed: [mh, mw, o, c], (m', l') = filter[ph + (mh-1-m')*sh,
// pw + (mw-1-l')*sw, :, :] transposed.
template <typename T>
std::vector<T> phase_filter(const Geometry& g, const Phase& p, const T* filter) {
    std::vector<T> out(static_cast<size_t>(p.mh * p.mw * g.o * g.c));
    for (int64_t m = 0; m < p.mh; ++m)
        for (int64_t l = 0; l < p.mw; ++l) {
            const int64_t di = p.ph + (p.mh - 1 - m) * g.sh, dj = p.pw + (p.mw - 1 - l) * g.sw;
            const T* src = filter + (di * g.kw + dj) * g.c * g.o;
            T* dst = out.data() + (m * p.mw + l) * g.o * g.c;
            for (int64_t ci = 0; ci < g.c; ++ci)
                for (int64_t oi = 0; oi < g.o; ++oi) dst[oi * g.c + ci] = src[ci * g.o + oi];
        }
    return out;
}

// grad_x [n, h, w, c] of the convolution g from grad_y [n, oh, ow, o] and filter [kh, kw, c, o].
template <typename T>
void input_gradient(const Geometry& g, const T* gy, const T* filter, T* gx) {
    const bool strided = g.sh > 1 || g.sw > 1;
    if (strided) std::fill(gx, gx + g.n * g.h * g.w * g.c, T(0));  // phases with no taps stay 0
    for (int64_t ph = 0; ph < g.sh; ++ph)
        for (int64_t pw = 0; pw < g.sw; ++pw) {
            const Phase p = phase(g, ph, pw);
            if (p.nq * p.nr == 0 || p.mh * p.mw == 0) continue;
            const conv2d_common::LineVector<T> in = phase_input(g, p, gy);
            const std::vector<T> taps = phase_filter(g, p, filter);
            // grad_y's own rows and columns in the phase's input (phase_input), the rest zeros
            const auto [j0, j1] = phase_columns(g, p);
            const Valid v{g.n, p.nq + p.mh - 1, p.nr + p.mw - 1, g.o, p.mh, p.mw, g.c, p.nq, p.nr, 1, 1,
                          p.mh - 1 - p.q0, g.oh + p.mh - 1 - p.q0, j0 - p.r0 + p.mw - 1, j1 - p.r0 + p.mw - 1};
            if (!strided) {  // the one phase covers grad_x in order
                conv2d_common::valid_conv<T>(v, in.data(), taps.data(), gx);
                continue;
            }
            std::vector<T> out(static_cast<size_t>(g.n * p.nq * p.nr * g.c));
            conv2d_common::valid_conv<T>(v, in.data(), taps.data(), out.data());
            for (int64_t b = 0; b < g.n; ++b)
                for (int64_t q = 0; q < p.nq; ++q)
                    for (int64_t r = 0; r < p.nr; ++r) {
                        const int64_t ih = (p.q0 + q) * g.sh + ph - g.top, iw = (p.r0 + r) * g.sw + pw - g.left;
                        const T* src = out.data() + ((b * p.nq + q) * p.nr + r) * g.c;
                        std::copy(src, src + g.c, gx + ((b * g.h + ih) * g.w + iw) * g.c);
                    }
        }
}

}  // namespace conv2d_input_grad
