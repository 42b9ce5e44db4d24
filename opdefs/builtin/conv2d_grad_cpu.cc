// conv2d_grad, CPU: the gradients of conv2d (conv2d_cpu.cc) with respect to x and to the filter.
//
//   grad_filter[di, dj, ci, :] = sum_{b, i, j} xpad[b, i*sh + di, j*sw + dj, ci] * grad_y[b, i, j, :]
//   grad_x = stride-1 convolutions of grad_y with the filter's taps flipped and transposed, one
//            per phase of the strides (conv2d_input_grad.h), run by conv2d_valid.h again.
//
// The filter gradient is conv2d_filter_grad.h's (shared with conv2d_transpose_grad and
// conv2d_grad_filter, which the fold pass runs where nothing reads grad_x).
#include "conv2d_grad_op.h"

#include "conv2d_common.h"
#include "conv2d_filter_grad.h"
#include "conv2d_input_grad.h"
#include "conv2d_valid.h"

namespace opsdk_op_conv2d_grad {
namespace detail {

using conv2d_common::Geometry;

template <typename T>
void run(const Geometry& g, const T* x, const T* filter, const T* gy, T* gx, T* gf) {
    conv2d_filter_grad::filter_gradient<T>(g, x, gy, gf);
    if (g.n * g.h * g.w * g.c == 0) return;
    conv2d_input_grad::input_gradient<T>(g, gy, filter, gx);
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const conv2d_common::Geometry g = conv2d_common::gradient_geometry(d, attrs);
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
