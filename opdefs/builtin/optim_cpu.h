// Shared by the optimizer updates' cpu kernels (apply_*_cpu.cc): one pass over the variable, its
// slots and the gradient, elementwise, split over the cores.
//
// The arithmetic follows kernels_optim.py step by step in the variable's dtype (float16 in float,
// as NumPy computes it), so the compiled and the python kernel agree to rounding. The loops
// vectorise: each kernel loops in a function whose pointers are __restrict (outputs are fresh
// arrays; a lambda capture would lose the qualifier), and kernels are compiled
// with -fno-math-errno, so sqrt and division have vector forms.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "opsdk/kernel.h"

namespace optim_cpu {

// The type the update computes in: float16 in float.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

#if defined(__FLT16_MAX__)
constexpr bool kHalf = true;
#else
constexpr bool kHalf = false;  // opsdk::half is only storage here
#endif

// Whether T has arithmetic here; kernels refuse the others with a message.
template <typename T>
constexpr bool supported() {
    return std::is_same_v<T, float> || std::is_same_v<T, double> ||
           (std::is_same_v<T, opsdk::half> && kHalf);
}

#define OPTIM_CPU_REQUIRE_ARITHMETIC(T) \
    OPSDK_REQUIRE(optim_cpu::supported<T>(), "float16 needs a compiler with _Float16; use float32")

// A 0-d input's value.
template <typename T>
Acc<T> scalar(const opsdk::ConstTensor<T>& t) {
    return static_cast<Acc<T>>(t.data[0]);
}

// f(lo, hi) over [0, n) on all cores; chunks of at least 1M elements. The pass is bound by memory,
// not arithmetic: Adam over 784x256 float32 took 83 us on one thread and 84 us on two (2-core
// EPYC), so smaller updates run on the calling thread and wake no other.
template <typename F>
void over(int64_t n, F&& f) {
    opsdk::parallel_for(0, n, int64_t{1} << 20, f);
}

}  // namespace optim_cpu
