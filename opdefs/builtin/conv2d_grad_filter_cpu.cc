// conv2d_grad_filter, CPU: conv2d_grad's filter gradient alone (conv2d_filter_grad.h), which the
// fold pass runs in place of a conv2d_grad whose grad_x nobody reads.
#include "conv2d_grad_filter_op.h"

#include "conv2d_common.h"
#include "conv2d_filter_grad.h"

namespace opsdk_op_conv2d_grad_filter {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const conv2d_common::Geometry g = conv2d_common::geometry(
        d.n, d.h, d.w, d.c, d.kh, d.kw, d.o, attrs.stride_h, attrs.stride_w, attrs.same != 0);
    // grad_y's sizes are bound from the array itself (an input cannot compute them): check them.
    OPSDK_REQUIRE(g.oh == d.oh && g.ow == d.ow,
                  "grad_y is " << d.oh << " x " << d.ow << " pixels but conv2d's y would be "
                  << g.oh << " x " << g.ow << " for these x, filter, strides and padding");
    if (out.grad_filter.size() == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        conv2d_filter_grad::filter_gradient<T>(g, in.x.data, in.grad_y.data, out.grad_filter.data);
    } else {
        std::vector<float> gf(static_cast<size_t>(out.grad_filter.size()));
        conv2d_filter_grad::filter_gradient<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                                                   conv2d_common::to_float(in.grad_y.data, in.grad_y.size()).data(),
                                                   gf.data());
        conv2d_common::from_float(gf, out.grad_filter.data);
    }
}

}  // namespace opsdk_op_conv2d_grad_filter
