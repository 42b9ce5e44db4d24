// apply_gradient_descent, CPU: var - alpha * delta in one pass
// (kernels_optim.py:apply_gradient_descent).
#include "apply_gradient_descent_op.h"

#include "optim_cpu.h"

namespace opsdk_op_apply_gradient_descent {
namespace detail {

template <typename T, typename A>
void update(const T* var, const T* __restrict delta, T* var_out,
            int64_t lo, int64_t hi, A alpha) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) var_out[i] = T(A(var[i]) - alpha * A(delta[i]));
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims&, const Attrs&) {
    optim_cpu::update<T>(out.var_out.size(), [&](auto a, int64_t lo, int64_t hi) {
        detail::update<T, decltype(a)>(in.var.data, in.delta.data, out.var_out.data, lo, hi,
                                       optim_cpu::scalar(in.alpha));
    });
}

}  // namespace opsdk_op_apply_gradient_descent
