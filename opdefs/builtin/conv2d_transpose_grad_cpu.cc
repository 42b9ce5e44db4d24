// conv2d_transpose_grad, CPU. conv2d_transpose is conv2d's input gradient, a linear map of x
// whose adjoint is conv2d itself, so with the image [n, out_h, out_w, c] played by grad_y:
//
//   grad_x      = conv2d(grad_y, filter)                        (conv2d_valid.h)
//   grad_filter = conv2d's filter gradient for the image grad_y and the output gradient x
//                 (conv2d_filter_grad.h)
//
// Both read grad_y with TensorFlow's SAME zeros around it: one padded copy serves the two.
#include "conv2d_transpose_grad_op.h"

#include <algorithm>

#include "conv2d_common.h"
#include "conv2d_filter_grad.h"
#include "conv2d_valid.h"

namespace opsdk_op_conv2d_transpose_grad {
namespace detail {

template <typename T>
void run(const conv2d_common::Geometry& g, const T* x, const T* filter, const T* gy, T* gx, T* gf) {
    const int64_t filter_size = g.kh * g.kw * g.c * g.o;
    if (g.n * g.oh * g.ow * g.o == 0 || filter_size == 0) {  // empty sums, or nothing to write
        std::fill(gx, gx + g.n * g.oh * g.ow * g.o, T(0));
        std::fill(gf, gf + filter_size, T(0));
        return;
    }
    conv2d_common::LineVector<T> copy;
    const conv2d_common::Valid v = conv2d_common::padded_input(g, gy, copy);
    const T* image = copy.empty() ? gy : copy.data();
    conv2d_common::valid_conv<T>(v, image, filter, gx);
    conv2d_filter_grad::grad_filter<T>(v, image, x, gf);
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    // grad_y plays conv2d's image: conv2d of it must give x's size, as in the forward op.
    const conv2d_common::Geometry g = conv2d_common::geometry(
        d.n, d.oh, d.ow, d.c, d.kh, d.kw, d.o, attrs.stride_h, attrs.stride_w, attrs.same != 0);
    const int64_t oh = (d.h - 1) * attrs.stride_h + 1 + (attrs.same ? 0 : d.kh - 1) + attrs.extra_h;
    const int64_t ow = (d.w - 1) * attrs.stride_w + 1 + (attrs.same ? 0 : d.kw - 1) + attrs.extra_w;
    OPSDK_REQUIRE(d.oh == oh && d.ow == ow && g.oh == d.h && g.ow == d.w,
                  "grad_y is " << d.oh << " x " << d.ow << " pixels but conv2d_transpose's y is "
                  << oh << " x " << ow << " for this x, filter, strides, padding and extra_h/w "
                  "(each extra below its stride)");
    if (out.grad_x.size() + out.grad_filter.size() == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        detail::run<T>(g, in.x.data, in.filter.data, in.grad_y.data, out.grad_x.data,
                       out.grad_filter.data);
    } else {
        std::vector<float> gx(static_cast<size_t>(out.grad_x.size()));
        std::vector<float> gf(static_cast<size_t>(out.grad_filter.size()));
        detail::run<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                           conv2d_common::to_float(in.filter.data, in.filter.size()).data(),
                           conv2d_common::to_float(in.grad_y.data, in.grad_y.size()).data(),
                           gx.data(), gf.data());
        conv2d_common::from_float(gx, out.grad_x.data);
        conv2d_common::from_float(gf, out.grad_filter.data);
    }
}

}  // namespace opsdk_op_conv2d_transpose_grad
