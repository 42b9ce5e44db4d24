// conv2d_grad, CPU: the gradients of conv2d (conv2d_cpu.cc) with respect to x and to the filter.
//
//   grad_filter[di, dj, ci, :] = sum_{b, i, j} xpad[b, i*sh + di, j*sw + dj, ci] * grad_y[b, i, j, :]
//   grad_x[b, ih, iw, :]       = sum over the (di, dj, i, j) with i*sh + di = ih + top and
//                                j*sw + dj = iw + left of sum_o grad_y[b, i, j, o] * filter[di, dj, :, o]
//
// Both are register tiles like the forward's (conv2d_common.h): the filter gradient holds
// kPixels input channels x NV vectors of output channels and runs over every output pixel; the
// input gradient holds kPixels input pixels x NV vectors of input channels, reading a copy of the
// filter transposed to [kh, kw, o, c]. Threads split the filter gradient's (di, dj, channel
// block) rows and the input gradient's image rows: each writes its own, no races. The filter
// gradient walks the output pixels in blocks of rows small enough to stay in L2 while each of a
// thread's tiles passes over them.
#include "conv2d_grad_op.h"

#include "conv2d_common.h"

namespace opsdk_op_conv2d_grad {
namespace detail {

using conv2d_common::Geometry;
using conv2d_common::lanes;
using conv2d_common::Vec;

// gfp[(di, dj, ci0 .. ci0 + P), ob ..] += the sum over output rows [r0, r1) (rows are (b, i)).
template <typename T, int P, int NV>
inline void filter_tile(const Geometry& g, const T* x, const T* gyp, int64_t opad, T* gfp,
                        int64_t di, int64_t dj, int64_t ci0, int64_t ob, int64_t r0, int64_t r1) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    T* out = gfp + ((di * g.kw + dj) * g.c + ci0) * opad + ob;
    V acc[P][NV];
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) acc[p][v] = *reinterpret_cast<const V*>(out + p * opad + v * W);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / g.oh, i = r % g.oh;
        const int64_t ih = i * g.sh + di - g.top;
        if (ih < 0 || ih >= g.h) continue;
        const T* xrow = x + (b * g.h + ih) * g.w * g.c + ci0;
        const T* gyrow = gyp + r * g.ow * opad + ob;
        for (int64_t j = 0; j < g.ow; ++j) {
            const int64_t iw = j * g.sw + dj - g.left;
            if (iw < 0 || iw >= g.w) continue;
            const T* xv = xrow + iw * g.c;
            V gv[NV];
            for (int v = 0; v < NV; ++v) gv[v] = *reinterpret_cast<const V*>(gyrow + j * opad + v * W);
            for (int p = 0; p < P; ++p) {
                const T s = xv[p];
                for (int v = 0; v < NV; ++v) acc[p][v] += s * gv[v];
            }
        }
    }
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) *reinterpret_cast<V*>(out + p * opad + v * W) = acc[p][v];
}

// One row of the filter gradient's work list: (di, dj) and a block of kPixels input channels
// (fewer at the end), over every output channel.
template <typename T>
void filter_unit(const Geometry& g, const T* x, const T* gyp, int64_t opad, T* gfp, int64_t unit,
                 int64_t r0, int64_t r1) {
    constexpr int W = lanes<T>();
    constexpr int P = conv2d_common::kPixels;
    const int64_t blocks = (g.c + P - 1) / P;
    const int64_t tap = unit / blocks, ci0 = unit % blocks * P;
    const int64_t di = tap / g.kw, dj = tap % g.kw;
    for (int64_t ob = 0; ob < opad; ob += conv2d_common::kMaxVecs * W) {
        conv2d_common::with_vecs(std::min<int64_t>(conv2d_common::kMaxVecs, (opad - ob) / W), [&](auto nv) {
            constexpr int NV = decltype(nv)::value;
            if (ci0 + P <= g.c) {
                filter_tile<T, P, NV>(g, x, gyp, opad, gfp, di, dj, ci0, ob, r0, r1);
            } else {
                for (int64_t ci = ci0; ci < g.c; ++ci) filter_tile<T, 1, NV>(g, x, gyp, opad, gfp, di, dj, ci, ob, r0, r1);
            }
        });
    }
}

template <typename T>
void grad_filter(const Geometry& g, const T* x, const T* gyp, int64_t opad, T* grad_f) {
    constexpr int P = conv2d_common::kPixels;
    const int64_t units = g.kh * g.kw * ((g.c + P - 1) / P);
    std::vector<T> gfp(static_cast<size_t>(g.kh * g.kw * g.c * opad), T(0));
    const int64_t rows = g.n * g.oh;
    // Output rows per block: about 128 KiB of the padded output gradient, which stays in L2
    // while a thread's tiles pass over it.
    const int64_t block = std::max<int64_t>(1, (128 * 1024 / int64_t(sizeof(T))) / std::max<int64_t>(g.ow * opad, 1));
    const int64_t per_unit = rows * g.ow * P * opad;
    opsdk::parallel_for(0, units, conv2d_common::grain(per_unit), [&](int64_t lo, int64_t hi) {
        for (int64_t r0 = 0; r0 < rows; r0 += block)
            for (int64_t u = lo; u < hi; ++u) filter_unit<T>(g, x, gyp, opad, gfp.data(), u, r0, std::min(rows, r0 + block));
    });
    for (int64_t r = 0; r < g.kh * g.kw * g.c; ++r)
        std::copy(gfp.data() + r * opad, gfp.data() + r * opad + g.o, grad_f + r * g.o);
}

// grad_x at input pixels iw0 .. iw0 + P - 1 of row (b, ih), input channels [cb, cb + NV * lanes).
template <typename T, int P, int NV>
inline void input_tile(const Geometry& g, const T* gy, const T* ft, int64_t cpad, const T* zeros,
                       T* gx, int64_t b, int64_t ih, int64_t iw0, int64_t cb) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    V acc[P][NV];
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) acc[p][v] = V{};
    for (int64_t di = 0; di < g.kh; ++di) {
        const int64_t t = ih + g.top - di;
        if (t < 0 || t % g.sh != 0 || t / g.sh >= g.oh) continue;  // no output row reads ih at di
        const T* gyrow = gy + (b * g.oh + t / g.sh) * g.ow * g.o;
        for (int64_t dj = 0; dj < g.kw; ++dj) {
            const T* gp[P];
            for (int p = 0; p < P; ++p) {
                const int64_t u = iw0 + p + g.left - dj;
                gp[p] = (u >= 0 && u % g.sw == 0 && u / g.sw < g.ow) ? gyrow + u / g.sw * g.o : zeros;
            }
            const T* f = ft + (di * g.kw + dj) * g.o * cpad + cb;
            for (int64_t oi = 0; oi < g.o; ++oi, f += cpad) {
                V fv[NV];
                for (int v = 0; v < NV; ++v) fv[v] = *reinterpret_cast<const V*>(f + v * W);
                for (int p = 0; p < P; ++p) {
                    const T s = gp[p][oi];
                    for (int v = 0; v < NV; ++v) acc[p][v] += s * fv[v];
                }
            }
        }
    }
    for (int p = 0; p < P; ++p) {
        T* out = gx + ((b * g.h + ih) * g.w + iw0 + p) * g.c + cb;
        for (int v = 0; v < NV; ++v) conv2d_common::store<T>(out + v * W, acc[p][v], g.c - cb - v * W);
    }
}

template <typename T, int P>
inline void input_pixels(const Geometry& g, const T* gy, const T* ft, int64_t cpad, const T* zeros,
                         T* gx, int64_t b, int64_t ih, int64_t iw0) {
    constexpr int W = lanes<T>();
    for (int64_t cb = 0; cb < g.c; cb += conv2d_common::kMaxVecs * W) {
        conv2d_common::with_vecs((std::min(g.c, cb + conv2d_common::kMaxVecs * W) - cb + W - 1) / W,
                                 [&](auto nv) { input_tile<T, P, decltype(nv)::value>(g, gy, ft, cpad, zeros, gx, b, ih, iw0, cb); });
    }
}

// The filter [kh, kw, c, o] as [kh, kw, o, cpad]: input channels contiguous, padded to vectors.
template <typename T>
std::vector<T> transposed_filter(const Geometry& g, const T* filter, int64_t cpad) {
    std::vector<T> ft(static_cast<size_t>(g.kh * g.kw * g.o * cpad), T(0));
    for (int64_t tap = 0; tap < g.kh * g.kw; ++tap)
        for (int64_t ci = 0; ci < g.c; ++ci)
            for (int64_t oi = 0; oi < g.o; ++oi)
                ft[(tap * g.o + oi) * cpad + ci] = filter[(tap * g.c + ci) * g.o + oi];
    return ft;
}

template <typename T>
void grad_input(const Geometry& g, const T* gy, const T* filter, T* gx) {
    const int64_t cpad = conv2d_common::round_up(g.c, lanes<T>());
    const std::vector<T> ft = transposed_filter(g, filter, cpad);
    const std::vector<T> zeros(static_cast<size_t>(std::max<int64_t>(g.o, 1)), T(0));
    const int64_t per_row = g.w * cpad * g.kh * g.kw * g.o;
    opsdk::parallel_for(0, g.n * g.h, conv2d_common::grain(per_row), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
            const int64_t b = r / g.h, ih = r % g.h;
            int64_t iw = 0;
            for (; iw + conv2d_common::kPixels <= g.w; iw += conv2d_common::kPixels)
                input_pixels<T, conv2d_common::kPixels>(g, gy, ft.data(), cpad, zeros.data(), gx, b, ih, iw);
            for (; iw < g.w; ++iw) input_pixels<T, 1>(g, gy, ft.data(), cpad, zeros.data(), gx, b, ih, iw);
        }
    });
}

template <typename T>
void run(const Geometry& g, const T* x, const T* filter, const T* gy, T* gx, T* gf) {
    const int64_t opad = conv2d_common::round_up(g.o, lanes<T>());
    const std::vector<T> gyp = conv2d_common::pad_rows(gy, g.n * g.oh * g.ow, g.o, opad);
    grad_filter<T>(g, x, gyp.data(), opad, gf);
    grad_input<T>(g, gy, filter, gx);
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const conv2d_common::Geometry g = conv2d_common::geometry(
        d.n, d.h, d.w, d.c, d.kh, d.kw, d.o, attrs.stride_h, attrs.stride_w, attrs.same != 0);
    // grad_y's sizes are bound from the array itself (an input cannot compute them): check them.
    OPSDK_REQUIRE(g.oh == d.oh && g.ow == d.ow,
                  "grad_y is " << d.oh << " x " << d.ow << " pixels but conv2d's y would be "
                  << g.oh << " x " << g.ow << " for these x, filter, strides and padding");
    if (out.grad_x.size() + out.grad_filter.size() == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        detail::run<T>(g, in.x.data, in.filter.data, in.grad_y.data, out.grad_x.data, out.grad_filter.data);
    } else {
        std::vector<float> gx(static_cast<size_t>(out.grad_x.size()));
        std::vector<float> gf(static_cast<size_t>(out.grad_filter.size()));
        detail::run<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                           conv2d_common::to_float(in.filter.data, in.filter.size()).data(),
                           conv2d_common::to_float(in.grad_y.data, in.grad_y.size()).data(), gx.data(), gf.data());
        conv2d_common::from_float(gx, out.grad_x.data);
        conv2d_common::from_float(gf, out.grad_filter.data);
    }
}

}  // namespace opsdk_op_conv2d_grad
