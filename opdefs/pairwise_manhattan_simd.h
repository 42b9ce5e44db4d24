// Vector types shared by the pairwise_manhattan kernels (forward and gradient).
//
// GCC/Clang vector extensions: the widest vectors the target has (64 bytes with AVX-512, 32 with
// AVX, else 16), lowered by the compiler where the target is narrower, so the kernels need no
// intrinsics and no -ffast-math (the k-sums reassociate only across explicit vector lanes).
#pragma once

#include <cstdint>

namespace pairwise_manhattan_simd {

#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif

template <typename T> struct Simd;

// aligned(alignof(T)) makes a dereference an unaligned load or store: rows start anywhere.
template <> struct Simd<float> {
    typedef float V __attribute__((vector_size(kVecBytes), aligned(4)));
    typedef int32_t M __attribute__((vector_size(kVecBytes), aligned(4)));
    static constexpr int32_t kAbsMask = 0x7fffffff;
    static constexpr int32_t kSignBit = INT32_MIN;
    static constexpr int32_t kQuietNaN = 0x7fc00000;  // OR-ed into any float, gives a NaN
};
template <> struct Simd<double> {
    typedef double V __attribute__((vector_size(kVecBytes), aligned(8)));
    typedef int64_t M __attribute__((vector_size(kVecBytes), aligned(8)));
    static constexpr int64_t kAbsMask = 0x7fffffffffffffffLL;
    static constexpr int64_t kSignBit = INT64_MIN;
    static constexpr int64_t kQuietNaN = 0x7ff8000000000000LL;
};

template <typename T> constexpr int lanes() { return kVecBytes / static_cast<int>(sizeof(T)); }

}  // namespace pairwise_manhattan_simd
