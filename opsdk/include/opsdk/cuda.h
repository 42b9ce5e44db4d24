// opsdk CUDA kernel support: what an op's CUDA kernel body (opdefs/<op>_cuda.cu) may use, on top
// of opsdk/kernel.h.
//
//   cudaStream_t stream                        the stream the runtime runs this op on: launch on it
//   OPSDK_CUDA_CHECK(cudaMemsetAsync(...))      fail the call with ValueError naming the CUDA error
//   opsdk::cuda::blocks(n, threads)             blocks needed to cover n items, threads per block
//   opsdk::cuda::first() / stride()             grid-stride loops inside a __global__ function
//
// Tensors hold device pointers: read them only in device code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "opsdk/kernel.h"

#define OPSDK_CUDA_CHECK(expr)                                                               \
    do {                                                                                     \
        cudaError_t opsdk_cuda_status_ = (expr);                                             \
        if (opsdk_cuda_status_ != cudaSuccess) {                                             \
            throw ::opsdk::KernelError(std::string(#expr) + " failed: " +                   \
                                           cudaGetErrorString(opsdk_cuda_status_),          \
                                       __FILE__, __LINE__);                                  \
        }                                                                                    \
    } while (0)

namespace opsdk {
namespace cuda {

constexpr int kThreads = 256;

// Blocks of `threads` needed to cover `n` items, capped where a grid-stride loop covers the rest.
inline unsigned blocks(int64_t n, int threads = kThreads) {
    const int64_t b = (n + threads - 1) / threads;
    return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// `for (int64_t i = first(); i < n; i += stride())` inside a __global__ function.
__device__ inline int64_t first() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace cuda
}  // namespace opsdk
