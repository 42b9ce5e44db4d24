// apply_adam, CPU: the moments and the variable in one pass (kernels_optim.py:apply_adam).
#include "apply_adam_op.h"

#include "optim_cpu.h"

namespace opsdk_op_apply_adam {
namespace detail {

template <typename T, typename A>
void update(const T* var, const T* m, const T* v,
            const T* __restrict grad, T* var_out, T* m_out,
            T* v_out, int64_t lo, int64_t hi, A beta1, A beta2, A eps, A lr_t) {
    const A one = 1;
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
        const A g = grad[i];
        const A m1 = beta1 * A(m[i]) + (one - beta1) * g;
        const A v1 = beta2 * A(v[i]) + (one - beta2) * g * g;
        m_out[i] = T(m1);
        v_out[i] = T(v1);
        var_out[i] = T(A(var[i]) - lr_t * m1 / (std::sqrt(v1) + eps));
    }
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims&, const Attrs&) {
    optim_cpu::update<T>(out.var_out.size(), [&](auto a, int64_t lo, int64_t hi) {
        using A = decltype(a);
        const A one = 1, beta1_power = optim_cpu::scalar(in.beta1_power);
        const A lr_t = optim_cpu::scalar(in.lr) * std::sqrt(one - optim_cpu::scalar(in.beta2_power)) /
                       (one - beta1_power);
        detail::update<T, A>(in.var.data, in.m.data, in.v.data, in.grad.data, out.var_out.data,
                             out.m_out.data, out.v_out.data, lo, hi, optim_cpu::scalar(in.beta1),
                             optim_cpu::scalar(in.beta2), optim_cpu::scalar(in.epsilon), lr_t);
    });
}

}  // namespace opsdk_op_apply_adam
