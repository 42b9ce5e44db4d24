// max_pool_grad_bias, CPU: max_pool_grad.h's gradient of max_pool, and its sum per channel (a
// bias's gradient) taken while each window's gradient is written.
#include "max_pool_grad_bias_op.h"

#include "conv2d_common.h"
#include "max_pool_grad.h"

namespace opsdk_op_max_pool_grad_bias {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& a) {
    const conv2d_common::Geometry g = max_pool_gradient::checked_geometry(d, a);
    if (out.grad_bias.size() == 0) return;  // no channels: nothing to write
    if constexpr (conv2d_common::is_vector_type<T>()) {
        max_pool_gradient::run<T>(g, in.x.data, in.y.data, in.grad_y.data, out.grad_x.data,
                                  a.relu != 0, out.grad_bias.data);
    } else {
        std::vector<float> gx(static_cast<size_t>(out.grad_x.size())), sums(static_cast<size_t>(d.c));
        max_pool_gradient::run<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                                      conv2d_common::to_float(in.y.data, in.y.size()).data(),
                                      conv2d_common::to_float(in.grad_y.data, in.grad_y.size()).data(),
                                      gx.data(), a.relu != 0, sums.data());
        conv2d_common::from_float(gx, out.grad_x.data);
        conv2d_common::from_float(sums, out.grad_bias.data);
    }
}

}  // namespace opsdk_op_max_pool_grad_bias
