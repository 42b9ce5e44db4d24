// opsdk device support: what a CUDA kernel source with declared launches (`kernels: cuda:
// {source, launch}`) may include. It compiles with nvcc and with NVRTC, which has no C++ standard
// library, so it holds device code only:
//
//   int8_t ... int64_t, uint8_t ... uint64_t   fixed-width integers under both compilers
//   opsdk::cuda::first() / stride()             grid-stride loops inside a __global__ function
//   opsdk::same_type<A, B>::value               what the generated launch checks signatures with
//
// Dims and int attrs arrive as int64_t, float attrs as double, bool attrs as bool, an input as
// `const T*` and an output as `T*` (T: the tensor's element type), in the order `args` lists them.
#pragma once

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif

namespace opsdk {

template <typename A, typename B>
struct same_type {
    static constexpr bool value = false;
};
template <typename A>
struct same_type<A, A> {
    static constexpr bool value = true;
};

namespace cuda {

// `for (int64_t i = first(); i < n; i += stride())` inside a __global__ function.
__device__ inline int64_t first() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace cuda
}  // namespace opsdk
