// Vector types and the run-time dispatch shared by the pairwise_manhattan kernels (forward and
// gradient).
//
// GCC/Clang vector extensions of B bytes, lowered by the compiler to what the function being
// compiled may use, so the kernels need no -ffast-math (the k-sums reassociate only across
// explicit vector lanes) and intrinsics only where a native AVX-512 build has an instruction the
// compiler does not form itself (the gradient's signed term).
//
// Which widths are compiled:
// - A native build (-march=native, the default) compiles one: the widest the machine has (64 bytes
//   with AVX-512, 32 with AVX, else 16), as before any dispatch existed.
// - A portable build on x86 (OPSDK_PORTABLE, x86-64-v2) compiles each kernel's register tiles
//   three times, one per level of opsdk/cpu_dispatch.h: 16 bytes for the baseline, 32 in functions
//   marked OPSDK_TARGET_AVX2, 64 in functions marked OPSDK_TARGET_AVX512 (each kernel's
//   Level<B>::run_tile). The loops around the tiles are compiled per width too, but for the
//   baseline (they only count and call), and each call picks a width with opsdk::simd_level().
//   The vector code inside a tile is PM_SIMD_INLINE, so it is always compiled inside its
//   run_tile, with that function's instruction set: an out-of-line copy would be compiled for
//   the baseline, 64-byte vectors split into four.
#pragma once

#include <cstdint>

#include "opsdk/cpu_dispatch.h"

#if defined(OPSDK_PORTABLE) && defined(OPSDK_SIMD_DISPATCH)
#define PM_SIMD_DISPATCH 1
#endif
#define PM_SIMD_INLINE inline __attribute__((always_inline))

namespace pairwise_manhattan_simd {

#if defined(__AVX512F__)
constexpr int kNativeBytes = 64;
#elif defined(__AVX__)
constexpr int kNativeBytes = 32;
#else
constexpr int kNativeBytes = 16;
#endif

// Simd<T>: the bit patterns of T, whatever the width. Simd<T, B>: those and vectors of B bytes.
template <typename T, int B = 0> struct Simd;

template <> struct Simd<float> {
    static constexpr int32_t kAbsMask = 0x7fffffff;
    static constexpr int32_t kSignBit = INT32_MIN;
    static constexpr int32_t kQuietNaN = 0x7fc00000;  // OR-ed into any float, gives a NaN
};
template <> struct Simd<double> {
    static constexpr int64_t kAbsMask = 0x7fffffffffffffffLL;
    static constexpr int64_t kSignBit = INT64_MIN;
    static constexpr int64_t kQuietNaN = 0x7ff8000000000000LL;
};

// aligned(alignof(T)) makes a dereference an unaligned load or store: rows start anywhere.
template <int B> struct Simd<float, B> : Simd<float> {
    typedef float V __attribute__((vector_size(B), aligned(4)));
    typedef int32_t M __attribute__((vector_size(B), aligned(4)));
};
template <int B> struct Simd<double, B> : Simd<double> {
    typedef double V __attribute__((vector_size(B), aligned(8)));
    typedef int64_t M __attribute__((vector_size(B), aligned(8)));
};

template <typename T, int B> constexpr int lanes() { return B / static_cast<int>(sizeof(T)); }

#if defined(PM_SIMD_DISPATCH)
// The vector width of the level this call runs at (opsdk::simd_level(), decided once).
inline int dispatched_bytes() {
    switch (opsdk::simd_level()) {
        case opsdk::SimdLevel::avx512: return 64;
        case opsdk::SimdLevel::avx2: return 32;
        default: return 16;
    }
}
#endif

}  // namespace pairwise_manhattan_simd
