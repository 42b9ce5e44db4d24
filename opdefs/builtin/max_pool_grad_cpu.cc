// max_pool_grad, CPU: max_pool_grad.h's gradient of max_pool.
#include "max_pool_grad_op.h"

#include "conv2d_common.h"
#include "max_pool_grad.h"

namespace opsdk_op_max_pool_grad {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& a) {
    const conv2d_common::Geometry g = max_pool_gradient::checked_geometry(d, a);
    if (out.grad_x.size() == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        max_pool_gradient::run<T>(g, in.x.data, in.y.data, in.grad_y.data, out.grad_x.data, a.relu != 0);
    } else {
        std::vector<float> gx(static_cast<size_t>(out.grad_x.size()));
        max_pool_gradient::run<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                                  conv2d_common::to_float(in.y.data, in.y.size()).data(),
                                  conv2d_common::to_float(in.grad_y.data, in.grad_y.size()).data(), gx.data(), a.relu != 0);
        conv2d_common::from_float(gx, out.grad_x.data);
    }
}

}  // namespace opsdk_op_max_pool_grad
