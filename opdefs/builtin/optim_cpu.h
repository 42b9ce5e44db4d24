// Shared by the optimizer updates' cpu kernels (apply_*_cpu.cc): one pass over the variable, its
// slots and the gradient, elementwise, split over the cores.
//
// The arithmetic follows kernels_optim.py step by step in the variable's dtype (float16 in float,
// as NumPy computes it), so the compiled and the python kernel agree to rounding. Each output may
// be its own input's array (`inplace` in optim.yaml: the runtime updates a variable nobody else
// holds in place, train/update.py): element i is read before it is written and no other element
// is touched, so `#pragma omp simd` (no dependence between iterations) holds where __restrict
// would not; the gradient, never an output's buffer, stays __restrict. Kernels are compiled with
// -fno-math-errno, so sqrt and division have vector forms.
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


// A 0-d input's value.
template <typename T>
Acc<T> scalar(const opsdk::ConstTensor<T>& t) {
    return static_cast<Acc<T>>(t.data[0]);
}

// The update over [0, n) on all cores, in chunks of at least 1M elements. The pass is bound by memory,
// not arithmetic: Adam over 784x256 float32 took 83 us on one thread and 84 us on two (2-core
// EPYC), so smaller updates run on the calling thread and wake no other.
//
// f(A{}, lo, hi) for each chunk, where A is the type T computes in (a generic lambda: its body is
// only compiled for types with arithmetic; float16 without _Float16 is refused with a message).
template <typename T, typename F>
void update(int64_t n, F&& f) {
    OPSDK_REQUIRE(supported<T>(), "float16 needs a compiler with _Float16; use float32");
    if constexpr (supported<T>()) {
        opsdk::parallel_for(0, n, int64_t{1} << 20,
                            [&](int64_t lo, int64_t hi) { f(Acc<T>{}, lo, hi); });
    }
}

}  // namespace optim_cpu
