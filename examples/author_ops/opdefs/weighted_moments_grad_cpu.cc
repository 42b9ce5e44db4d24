#include "weighted_moments_grad_op.h"

namespace opsdk_op_weighted_moments_grad {

// d m1[i] / d x[i, j] = w[j], d m2[i] / d x[i, j] = 2 w[j] x[i, j]; d m1 / d w[j] = x[i, j], d m2 / d w[j] = x^2.
// Without w (an empty in.w) every weight is 1 and grad_w is zeros: autodiff gives no gradient
// to an absent input, so nothing reads it.
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    (void)attrs;
    const T* w = in.w ? in.w->data : nullptr;
    for (int64_t j = 0; j < dims.p; ++j) out.grad_w.data[j] = 0;
    for (int64_t i = 0; i < dims.n; ++i) {
        const T* row = in.x.data + i * dims.p;
        const T g1 = in.grad_m1.data[i], g2 = in.grad_m2.data[i];
        for (int64_t j = 0; j < dims.p; ++j) {
            out.grad_x.data[i * dims.p + j] = (w ? w[j] : T(1)) * (g1 + 2 * g2 * row[j]);
            if (w) out.grad_w.data[j] += row[j] * (g1 + g2 * row[j]);
        }
    }
}

}  // namespace opsdk_op_weighted_moments_grad
