#include "opsdk/device.h"

namespace opsdk_op_cuda_axpy {

template <typename T>
__global__ void axpy(const T* x, const T* y, T* z, int64_t n, double alpha) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        z[i] = static_cast<T>(alpha) * x[i] + y[i];
}

}  // namespace opsdk_op_cuda_axpy
