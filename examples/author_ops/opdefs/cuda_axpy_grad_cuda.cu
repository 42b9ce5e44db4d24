#include "opsdk/device.h"

namespace opsdk_op_cuda_axpy_grad {

template <typename T>
__global__ void grad(const T* grad_z, T* grad_x, T* grad_y, int64_t n, double alpha) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        grad_x[i] = static_cast<T>(alpha) * grad_z[i];
        grad_y[i] = grad_z[i];
    }
}

}  // namespace opsdk_op_cuda_axpy_grad
