// conv2d_grad_filter, CPU: conv2d_grad's filter gradient alone (conv2d_filter_grad.h), which the
// fold pass runs in place of a conv2d_grad whose grad_x nobody reads.
#include "conv2d_grad_filter_op.h"

#include "conv2d_common.h"
#include "conv2d_filter_grad.h"

namespace opsdk_op_conv2d_grad_filter {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const conv2d_common::Geometry g = conv2d_common::gradient_geometry(d, attrs);
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
