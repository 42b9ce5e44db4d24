// The gradient of max_pool (max_pool_grad_cpu.cc): each window's grad_y goes to the window's
// first maximum of x (row-major order within the window, as the python kernel and TensorFlow's
// CPU kernel choose), summed where windows overlap.
//
// The maximum is y, max_pool's output: a window's positions are visited in order and the first
// one equal to y takes the gradient, for all channels at once (an inner loop over contiguous
// channels with a "taken" flag each, which the compiler vectorises; no positions to track).
// Threads split the images: windows never cross images, so each thread zeroes and writes its own
// part of grad_x, one image at a time while it is in cache. The split is by the memory an image
// touches, not by its comparisons: a grain of 4M comparisons ran the deep-MNIST layers' 50 images
// on one thread, with a serial pass zeroing all of grad_x before it. float16 runs as float
// (conv2d_common.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "conv2d_common.h"

namespace max_pool_gradient {

using conv2d_common::Geometry;

// The pool's geometry from a gradient op's dims and attrs (max_pool_grad's, max_pool_grad_bias's),
// y's and grad_y's sizes (bound from the arrays themselves) checked against it.
template <typename Dims, typename Attrs>
Geometry checked_geometry(const Dims& d, const Attrs& a) {
    const Geometry g = conv2d_common::geometry(d.n, d.h, d.w, d.c, a.ksize_h, a.ksize_w, d.c, a.stride_h,
                                               a.stride_w, a.same != 0);
    OPSDK_REQUIRE(g.oh == d.oh && g.ow == d.ow,
                  "y and grad_y are " << d.oh << " x " << d.ow << " pixels but max_pool's y would be "
                  << g.oh << " x " << g.ow << " for this x, window, strides and padding");
    return g;
}

// grad_x of image b; taken, kept: scratch of c values each. relu: a window's gradient counts
// only where its maximum is positive. sums (c values, or none): what image b's windows put into
// grad_x, per channel (a window whose maximum no position equals, x holding NaN, puts nothing).
template <typename T>
void image(const Geometry& g, const T* x, const T* y, const T* gy, T* gx, int64_t b, T* taken, T* kept,
           bool relu, T* sums) {
    const T* xb = x + b * g.h * g.w * g.c;
    T* gxb = gx + b * g.h * g.w * g.c;
    std::fill(gxb, gxb + g.h * g.w * g.c, T(0));
    if (sums != nullptr) std::fill(sums, sums + g.c, T(0));
    for (int64_t i = 0; i < g.oh; ++i) {
        const int64_t top = i * g.sh - g.top;
        const int64_t h0 = std::max<int64_t>(top, 0), h1 = std::min(top + g.kh, g.h);
        for (int64_t j = 0; j < g.ow; ++j) {
            const int64_t left = j * g.sw - g.left;
            const int64_t w0 = std::max<int64_t>(left, 0), w1 = std::min(left + g.kw, g.w);
            const int64_t at = ((b * g.oh + i) * g.ow + j) * g.c;
            const T* best = y + at;
            const T* grad = gy + at;
            if (relu) {  // the window's gradient where its maximum is positive, once per window
                for (int64_t k = 0; k < g.c; ++k) kept[k] = best[k] > T(0) ? grad[k] : T(0);
                grad = kept;
            }
            std::fill(taken, taken + g.c, T(0));
            for (int64_t ih = h0; ih < h1; ++ih)
                for (int64_t iw = w0; iw < w1; ++iw) {
                    const T* in = xb + (ih * g.w + iw) * g.c;
                    T* out = gxb + (ih * g.w + iw) * g.c;
                    for (int64_t k = 0; k < g.c; ++k) {
                        const bool first = in[k] == best[k] && taken[k] == T(0);
                        out[k] += first ? grad[k] : T(0);
                        taken[k] = first ? T(1) : taken[k];
                    }
                }
            if (sums != nullptr)  // the window's gradient where a position took it
                for (int64_t k = 0; k < g.c; ++k) sums[k] += taken[k] != T(0) ? grad[k] : T(0);
        }
    }
}

// grad_x, and where `sums` is given (c values) grad_x summed over images and pixels per channel:
// each image's sums as it is written (its windows' gradients, while in registers, not a second
// pass over grad_x), then added over the images in order, in double (the same result on any
// number of threads).
template <typename T>
void run(const Geometry& g, const T* x, const T* y, const T* gy, T* gx, bool relu, T* sums = nullptr) {
    if (g.oh * g.ow == 0) {
        std::fill(gx, gx + g.n * g.h * g.w * g.c, T(0));
        if (sums != nullptr) std::fill(sums, sums + g.c, T(0));
        return;
    }
    std::vector<T> per_image(sums != nullptr ? static_cast<size_t>(g.n * g.c) : 0);
    const int64_t touched = 2 * (g.h * g.w + g.oh * g.ow) * g.c;  // x and grad_x, y and grad_y
    opsdk::parallel_for(0, g.n, conv2d_common::copy_grain(touched),
                        [&](int64_t lo, int64_t hi) {
        std::vector<T> taken(static_cast<size_t>(g.c)), kept(static_cast<size_t>(g.c));
        for (int64_t b = lo; b < hi; ++b)
            image<T>(g, x, y, gy, gx, b, taken.data(), kept.data(), relu,
                     sums != nullptr ? per_image.data() + b * g.c : nullptr);
    });
    if (sums == nullptr) return;
    std::vector<double> total(static_cast<size_t>(g.c), 0.0);
    for (int64_t b = 0; b < g.n; ++b)
        for (int64_t k = 0; k < g.c; ++k) total[k] += static_cast<double>(per_image[b * g.c + k]);
    for (int64_t k = 0; k < g.c; ++k) sums[k] = static_cast<T>(total[k]);
}

}  // namespace max_pool_gradient
