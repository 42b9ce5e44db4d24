// max_pool, CPU: y[b, i, j, k] = the maximum of x[b, ., ., k] over window (i, j), NHWC.
//
// The window is clipped to the image (SAME padding adds no values, so no -inf is needed) and
// scanned pixel by pixel; the inner loop runs over the contiguous channels of one pixel, which
// the compiler vectorises. Threads split the output rows (b, i), by the memory a row reads and
// writes (a grain of 4M comparisons ran the deep-MNIST layers on one thread). float16 runs as float
// (conv2d_common.h).
#include "max_pool_op.h"

#include "conv2d_common.h"

namespace opsdk_op_max_pool {
namespace detail {

using conv2d_common::Geometry;

template <typename T>
void rows(const Geometry& g, const T* x, T* y, int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
        const int64_t b = r / g.oh, top = r % g.oh * g.sh - g.top;
        const int64_t h0 = std::max<int64_t>(top, 0), h1 = std::min(top + g.kh, g.h);
        for (int64_t j = 0; j < g.ow; ++j) {
            const int64_t left = j * g.sw - g.left;
            const int64_t w0 = std::max<int64_t>(left, 0), w1 = std::min(left + g.kw, g.w);
            T* out = y + (r * g.ow + j) * g.c;
            const T* first = x + ((b * g.h + h0) * g.w + w0) * g.c;
            std::copy(first, first + g.c, out);
            for (int64_t ih = h0; ih < h1; ++ih)
                for (int64_t iw = (ih == h0 ? w0 + 1 : w0); iw < w1; ++iw) {
                    const T* in = x + ((b * g.h + ih) * g.w + iw) * g.c;
                    for (int64_t k = 0; k < g.c; ++k) out[k] = in[k] > out[k] ? in[k] : out[k];
                }
        }
    }
}

template <typename T>
void run(const Geometry& g, const T* x, T* y) {
    opsdk::parallel_for(0, g.n * g.oh, conv2d_common::copy_grain((g.kh * g.w + g.ow) * g.c),
                        [&](int64_t lo, int64_t hi) { rows<T>(g, x, y, lo, hi); });
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& a) {
    // The pool is a convolution geometry whose filter has c channels in and out.
    const conv2d_common::Geometry g = conv2d_common::geometry(
        d.n, d.h, d.w, d.c, a.ksize_h, a.ksize_w, d.c, a.stride_h, a.stride_w, a.same != 0);
    if (out.y.size() == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        detail::run<T>(g, in.x.data, out.y.data);
    } else {
        std::vector<float> y(static_cast<size_t>(out.y.size()));
        detail::run<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(), y.data());
        conv2d_common::from_float(y, out.y.data);
    }
}

}  // namespace opsdk_op_max_pool
