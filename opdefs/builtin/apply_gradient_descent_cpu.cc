// apply_gradient_descent, CPU: var - alpha * delta in one pass
// (kernels_optim.py:apply_gradient_descent).
#include "apply_gradient_descent_op.h"

#include "optim_cpu.h"

namespace opsdk_op_apply_gradient_descent {
namespace detail {

template <typename T, typename A>
void update(const T* __restrict var, const T* __restrict delta, T* __restrict var_out,
            int64_t lo, int64_t hi, A alpha) {
    for (int64_t i = lo; i < hi; ++i) var_out[i] = T(A(var[i]) - alpha * A(delta[i]));
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims&, const Attrs&) {
    OPTIM_CPU_REQUIRE_ARITHMETIC(T);
    if constexpr (optim_cpu::supported<T>()) {
        using A = optim_cpu::Acc<T>;
        const A alpha = optim_cpu::scalar(in.alpha);
        optim_cpu::over(out.var_out.size(), [&](int64_t lo, int64_t hi) {
            detail::update<T, A>(in.var.data, in.delta.data, out.var_out.data, lo, hi, alpha);
        });
    }
}

}  // namespace opsdk_op_apply_gradient_descent
