// conv2d, CPU: y[b, i, j, :] = sum_{di, dj, ci} xpad[b, i*sh + di, j*sw + dj, ci] * filter[di, dj, ci, :].
//
// A direct loop, no im2col: a register tile of kPixels output pixels of one row by NV vectors of
// output channels sums kh * kw * c broadcast-times-vector products (conv2d_common.h says why).
// The filter is copied once with its output channels padded to whole vectors; a window position
// in the padding reads a row of zeros instead of branching in the inner loop. Threads split the
// output rows (b, i): each writes its own rows, no races, no temporaries besides the filter copy.
#include "conv2d_op.h"

#include "conv2d_common.h"

namespace opsdk_op_conv2d {
namespace detail {

using conv2d_common::Geometry;
using conv2d_common::lanes;
using conv2d_common::Vec;

// Output pixels j0 .. j0 + P - 1 of row (b, i), output channels [ob, ob + NV * lanes).
template <typename T, int P, int NV>
inline void tile(const Geometry& g, const T* x, const T* fp, int64_t opad, const T* zeros, T* y,
                 int64_t b, int64_t i, int64_t j0, int64_t ob) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    V acc[P][NV];
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) acc[p][v] = V{};
    for (int64_t di = 0; di < g.kh; ++di) {
        const int64_t ih = i * g.sh + di - g.top;
        if (ih < 0 || ih >= g.h) continue;  // a padding row adds nothing
        const T* xrow = x + (b * g.h + ih) * g.w * g.c;
        for (int64_t dj = 0; dj < g.kw; ++dj) {
            const T* xp[P];
            for (int p = 0; p < P; ++p) {
                const int64_t iw = (j0 + p) * g.sw + dj - g.left;
                xp[p] = (iw >= 0 && iw < g.w) ? xrow + iw * g.c : zeros;
            }
            const T* f = fp + (di * g.kw + dj) * g.c * opad + ob;
            for (int64_t ci = 0; ci < g.c; ++ci, f += opad) {
                V fv[NV];
                for (int v = 0; v < NV; ++v) fv[v] = *reinterpret_cast<const V*>(f + v * W);
                for (int p = 0; p < P; ++p) {
                    const T s = xp[p][ci];
                    for (int v = 0; v < NV; ++v) acc[p][v] += s * fv[v];
                }
            }
        }
    }
    for (int p = 0; p < P; ++p) {
        T* out = y + ((b * g.oh + i) * g.ow + j0 + p) * g.o + ob;
        for (int v = 0; v < NV; ++v) conv2d_common::store<T>(out + v * W, acc[p][v], g.o - ob - v * W);
    }
}

// Every output channel of pixels [j0, j0 + P) of row (b, i), in chunks of up to kMaxVecs vectors.
template <typename T, int P>
inline void pixels(const Geometry& g, const T* x, const T* fp, int64_t opad, const T* zeros, T* y,
                   int64_t b, int64_t i, int64_t j0) {
    constexpr int W = lanes<T>();
    for (int64_t ob = 0; ob < g.o; ob += conv2d_common::kMaxVecs * W) {
        conv2d_common::with_vecs((std::min(g.o, ob + conv2d_common::kMaxVecs * W) - ob + W - 1) / W,
                                 [&](auto nv) { tile<T, P, decltype(nv)::value>(g, x, fp, opad, zeros, y, b, i, j0, ob); });
    }
}

template <typename T>
void run(const Geometry& g, const T* x, const T* filter, T* y) {
    const int64_t opad = conv2d_common::round_up(g.o, lanes<T>());
    const std::vector<T> fp = conv2d_common::pad_rows(filter, g.kh * g.kw * g.c, g.o, opad);
    const std::vector<T> zeros(static_cast<size_t>(std::max<int64_t>(g.c, 1)), T(0));
    const int64_t per_row = g.ow * opad * g.kh * g.kw * g.c;
    opsdk::parallel_for(0, g.n * g.oh, conv2d_common::grain(per_row), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
            const int64_t b = r / g.oh, i = r % g.oh;
            int64_t j = 0;
            for (; j + conv2d_common::kPixels <= g.ow; j += conv2d_common::kPixels)
                pixels<T, conv2d_common::kPixels>(g, x, fp.data(), opad, zeros.data(), y, b, i, j);
            for (; j < g.ow; ++j) pixels<T, 1>(g, x, fp.data(), opad, zeros.data(), y, b, i, j);
        }
    });
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const conv2d_common::Geometry g = conv2d_common::geometry(
        d.n, d.h, d.w, d.c, d.kh, d.kw, d.o, attrs.stride_h, attrs.stride_w, attrs.same != 0);
    if (g.n * g.oh * g.ow * g.o == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        detail::run<T>(g, in.x.data, in.filter.data, out.y.data);
    } else {
        std::vector<float> y(static_cast<size_t>(out.y.size()));
        detail::run<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                           conv2d_common::to_float(in.filter.data, in.filter.size()).data(), y.data());
        conv2d_common::from_float(y, out.y.data);
    }
}

}  // namespace opsdk_op_conv2d
