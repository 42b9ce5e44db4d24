// apply_rms_prop, CPU: the mean square, the momentum and the variable in one pass
// (kernels_optim.py:apply_rms_prop).
#include "apply_rms_prop_op.h"

#include "optim_cpu.h"

namespace opsdk_op_apply_rms_prop {
namespace detail {

template <typename T, typename A>
void update(const T* var, const T* ms, const T* mom,
            const T* __restrict grad, T* var_out, T* ms_out,
            T* mom_out, int64_t lo, int64_t hi, A lr, A rho, A momentum, A eps) {
    const A one = 1;
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
        const A g = grad[i];
        const A s = rho * A(ms[i]) + (one - rho) * g * g;
        const A u = momentum * A(mom[i]) + lr * g / std::sqrt(s + eps);
        ms_out[i] = T(s);
        mom_out[i] = T(u);
        var_out[i] = T(A(var[i]) - u);
    }
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims&, const Attrs&) {
    optim_cpu::update<T>(out.var_out.size(), [&](auto a, int64_t lo, int64_t hi) {
        detail::update<T, decltype(a)>(in.var.data, in.ms.data, in.mom.data, in.grad.data,
                                       out.var_out.data, out.ms_out.data, out.mom_out.data, lo, hi,
                                       optim_cpu::scalar(in.lr), optim_cpu::scalar(in.rho),
                                       optim_cpu::scalar(in.momentum),
                                       optim_cpu::scalar(in.epsilon));
    });
}

}  // namespace opsdk_op_apply_rms_prop
