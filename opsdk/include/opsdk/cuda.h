// opsdk CUDA kernel support: what an op's CUDA kernel body (opdefs/<op>_cuda.cu) may use, on top
// of opsdk/kernel.h.
//
//   cudaStream_t stream                        the stream the runtime runs this op on: launch on it
//   OPSDK_CUDA_CHECK(cudaMemsetAsync(...))      fail the call with ValueError naming the CUDA error
//   opsdk::cuda::blocks(n, threads)             blocks needed to cover n items, threads per block
//   opsdk::cuda::first() / stride()             grid-stride loops inside a __global__ function
//                                              (from opsdk/device.h)
//
// Tensors hold device pointers: read them only in device code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "opsdk/device.h"
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

// The grid and block of one declared launch (`kernels: cuda: launch:`), checked against CUDA's
// limits; false when the grid is empty (a zero size), where the launch is skipped.
inline bool launch_shape(const char* kernel, const int64_t (&grid)[3], const int64_t (&block)[3],
                         int64_t shared, dim3& g, dim3& b) {
    static const int64_t kGridMax[3] = {2147483647, 65535, 65535};
    static const int64_t kBlockMax[3] = {1024, 1024, 64};
    static const char* kAxis[3] = {"x", "y", "z"};
    int64_t threads = 1;
    bool empty = false;
    for (int i = 0; i < 3; ++i) {
        OPSDK_REQUIRE(grid[i] >= 0 && grid[i] <= kGridMax[i],
                      "launch of " << kernel << ": grid " << kAxis[i] << " is " << grid[i]
                                   << "; CUDA allows 0 to " << kGridMax[i]);
        OPSDK_REQUIRE(block[i] >= 1 && block[i] <= kBlockMax[i],
                      "launch of " << kernel << ": block " << kAxis[i] << " is " << block[i]
                                   << "; CUDA allows 1 to " << kBlockMax[i]);
        threads *= block[i];
        empty = empty || grid[i] == 0;
    }
    OPSDK_REQUIRE(threads <= 1024, "launch of " << kernel << ": a block of " << threads
                                                << " threads; CUDA allows at most 1024");
    OPSDK_REQUIRE(shared >= 0 && shared <= 2147483647,
                  "launch of " << kernel << ": " << shared << " bytes of shared memory");
    g = dim3(static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2]));
    b = dim3(static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]), static_cast<unsigned>(block[2]));
    return !empty;
}

}  // namespace cuda
}  // namespace opsdk
