// Run-time choice of a cpu kernel's SIMD level, for kernels built portable.
//
// A portable build (OPSDK_PORTABLE=1, as `opsdk build --wheel` and opsdk's own wheel do) compiles
// for the platform's baseline (x86-64-v2: SSE4.2), so code the compiler vectorises on its own
// stays 16 bytes wide. A kernel that wants wider vectors compiles its hot loop once more per level
// in a function marked OPSDK_TARGET_AVX2 or OPSDK_TARGET_AVX512 (inline helpers called from it
// are compiled with its instruction set when inlined) and calls the one opsdk::simd_level() names:
//
//   switch (opsdk::simd_level()) {
//     case opsdk::SimdLevel::avx512: return loop_avx512(...);  // OPSDK_TARGET_AVX512
//     case opsdk::SimdLevel::avx2: return loop_avx2(...);      // OPSDK_TARGET_AVX2
//     default: return loop_baseline(...);
//   }
//
// The level is the best this CPU (and its OS) runs, capped by the environment variable
// OPSDK_SIMD=baseline|avx2|avx512, read once per process: tests and benchmarks run each path with
// it. A native build (-march=native, the default) has every instruction of the machine already:
// it compiles one path and need not ask. Off x86 there is one level, baseline.
#pragma once

#include <cstdlib>
#include <string>

#include "opsdk/kernel.h"

#if defined(__x86_64__) || defined(__i386__)
#define OPSDK_SIMD_DISPATCH 1
// AVX2 with FMA (x86-64-v3's vector part); AVX-512 Foundation on top of it.
#define OPSDK_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define OPSDK_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#endif

namespace opsdk {

enum class SimdLevel : int { baseline = 0, avx2 = 1, avx512 = 2 };

// The name OPSDK_SIMD takes for a level.
inline const char* simd_level_name(SimdLevel level) {
    switch (level) {
        case SimdLevel::avx512: return "avx512";
        case SimdLevel::avx2: return "avx2";
        default: return "baseline";
    }
}

namespace simd_detail {

// The best level the CPU runs; __builtin_cpu_supports also asks whether the OS saves the
// registers (XGETBV), so a CPU with AVX-512 under an OS that disabled it reads as avx2.
inline SimdLevel cpu_best() {
#if defined(OPSDK_SIMD_DISPATCH)
    __builtin_cpu_init();  // a kernel may run before libgcc's constructor in static init
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2 && __builtin_cpu_supports("avx512f")) return SimdLevel::avx512;
    if (avx2) return SimdLevel::avx2;
#endif
    return SimdLevel::baseline;
}

// The cap OPSDK_SIMD sets (none when unset or empty); an unknown value fails the call.
inline SimdLevel env_cap() {
    const char* value = std::getenv("OPSDK_SIMD");
    if (value == nullptr || *value == '\0') return SimdLevel::avx512;
    const std::string name(value);
    for (SimdLevel level : {SimdLevel::baseline, SimdLevel::avx2, SimdLevel::avx512})
        if (name == simd_level_name(level)) return level;
    throw KernelError("OPSDK_SIMD is '" + name +
                          "'; set it to baseline, avx2 or avx512, or unset it to use the best "
                          "level this CPU runs",
                      __FILE__, __LINE__);
}

}  // namespace simd_detail

// The level to run: the CPU's best, capped by OPSDK_SIMD. Decided on the first call (which
// throws KernelError, a ValueError in Python, while OPSDK_SIMD holds an unknown name).
inline SimdLevel simd_level() {
    static const SimdLevel level = [] {
        const SimdLevel best = simd_detail::cpu_best(), cap = simd_detail::env_cap();
        return static_cast<int>(cap) < static_cast<int>(best) ? cap : best;
    }();
    return level;
}

}  // namespace opsdk
