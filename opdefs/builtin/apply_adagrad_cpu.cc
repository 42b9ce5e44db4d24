// apply_adagrad, CPU: the accumulator and the variable in one pass
// (kernels_optim.py:apply_adagrad).
#include "apply_adagrad_op.h"

#include "optim_cpu.h"

namespace opsdk_op_apply_adagrad {
namespace detail {

template <typename T, typename A>
void update(const T* var, const T* accum, const T* __restrict grad,
            T* var_out, T* accum_out, int64_t lo, int64_t hi, A lr) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
        const A g = grad[i];
        const A a = A(accum[i]) + g * g;
        accum_out[i] = T(a);
        var_out[i] = T(A(var[i]) - lr * g / std::sqrt(a));
    }
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims&, const Attrs&) {
    optim_cpu::update<T>(out.var_out.size(), [&](auto a, int64_t lo, int64_t hi) {
        detail::update<T, decltype(a)>(in.var.data, in.accum.data, in.grad.data, out.var_out.data,
                                       out.accum_out.data, lo, hi, optim_cpu::scalar(in.lr));
    });
}

}  // namespace opsdk_op_apply_adagrad
