// apply_momentum, CPU: the accumulator and the variable in one pass
// (kernels_optim.py:apply_momentum).
#include "apply_momentum_op.h"

#include "optim_cpu.h"

namespace opsdk_op_apply_momentum {
namespace detail {

template <bool nesterov, typename T, typename A>
void update(const T* var, const T* accum, const T* __restrict grad,
            T* var_out, T* accum_out, int64_t lo, int64_t hi, A lr,
            A momentum) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
        const A g = grad[i];
        const A a = momentum * A(accum[i]) + g;
        accum_out[i] = T(a);
        var_out[i] = T(A(var[i]) - lr * (nesterov ? g + momentum * a : a));
    }
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims&, const Attrs& attrs) {
    optim_cpu::update<T>(out.var_out.size(), [&](auto a, int64_t lo, int64_t hi) {
        using A = decltype(a);
        (attrs.use_nesterov ? detail::update<true, T, A> : detail::update<false, T, A>)(
            in.var.data, in.accum.data, in.grad.data, out.var_out.data, out.accum_out.data, lo, hi,
            optim_cpu::scalar(in.lr), optim_cpu::scalar(in.momentum));
    });
}

}  // namespace opsdk_op_apply_momentum
