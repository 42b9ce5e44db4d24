// The ceiling of the pairwise L1 forward: the same three vector operations per lane the kernel
// issues (subtract, clear the sign bit, add), on vectors that never leave the registers, on every
// core. bench_pairwise_manhattan.py compiles it with `opsdk build`'s flags and reports the
// flagship's rate as a share of this one, measured in the same run.
//
// Each thread keeps 16 accumulators (independent chains, enough to cover the add's latency on
// both vector ports) fed by 4 + 4 operand vectors; an empty asm statement tells the compiler the
// operands change every iteration, so it cannot hoist |x - y| out of the loop, and costs nothing.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <omp.h>

#include "pairwise_manhattan_simd.h"

namespace {

using pairwise_manhattan_simd::kNativeBytes;
using pairwise_manhattan_simd::lanes;
using pairwise_manhattan_simd::Simd;

// Runs `iterations` rounds of 16 triples on this thread; returns a value depending on all of them.
template <typename T>
__attribute__((noinline)) T spin(int64_t iterations, T seed) {
    using S = Simd<T, kNativeBytes>;
    using V = typename S::V;
    V x[4], y[4], acc[4][4];
    for (int r = 0; r < 4; ++r) {
        x[r] = V{} + seed * T(r + 1);
        y[r] = V{} - seed * T(r + 2);
        for (int c = 0; c < 4; ++c) acc[r][c] = V{};
    }
    for (int64_t it = 0; it < iterations; ++it) {
        for (int r = 0; r < 4; ++r) asm volatile("" : "+v"(x[r]), "+v"(y[r]));
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c)
                acc[r][c] += (V)((typename S::M)(x[r] - y[c]) & S::kAbsMask);
    }
    T total = 0;
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < lanes<T, kNativeBytes>(); ++l) total += acc[r][c][l];
    return total;
}

// Every thread of the default team runs its share of `flops` (3 per lane and triple); returns the
// number of threads that ran.
template <typename T>
int run(double flops) {
    constexpr double per_iteration = 3.0 * 16 * lanes<T, kNativeBytes>();
    int team = 1;
    T sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
#pragma omp single
        team = omp_get_num_threads();
        sink += spin<T>(static_cast<int64_t>(flops / per_iteration / omp_get_num_threads()), T(1));
    }
    return sink == T(-1) ? -1 : team;  // sink is never -1; keeps the work observable
}

}  // namespace

PYBIND11_MODULE(OPSDK_MODULE_NAME, m) {
    m.def("run_float32", [](double flops) {
        pybind11::gil_scoped_release release;
        return run<float>(flops);
    });
    m.def("run_float64", [](double flops) {
        pybind11::gil_scoped_release release;
        return run<double>(flops);
    });
    m.attr("vector_bytes") = kNativeBytes;
}
