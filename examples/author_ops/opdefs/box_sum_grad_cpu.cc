#include "box_sum_grad_op.h"

namespace opsdk_op_box_sum_grad {

// Each window adds its grad_y to every element of x it covers (scatter, as the forward gathers).
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    const int64_t h = dims.h, w = dims.w, oh = dims.oh, ow = dims.ow, k = attrs.k, s = attrs.stride;
    for (int64_t e = 0; e < dims.n * h * w; ++e) out.grad_x.data[e] = 0;
    for (int64_t b = 0; b < dims.n; ++b) {
        const T* gy = in.grad_y.data + b * oh * ow;
        T* gx = out.grad_x.data + b * h * w;
        for (int64_t i = 0; i < oh; ++i) {
            for (int64_t j = 0; j < ow; ++j) {
                for (int64_t di = 0; di < k; ++di) {
                    const int64_t r = i * s + di - dims.pad_top;
                    if (r < 0 || r >= h) continue;
                    for (int64_t dj = 0; dj < k; ++dj) {
                        const int64_t c = j * s + dj - dims.pad_left;
                        if (c >= 0 && c < w) gx[r * w + c] += gy[i * ow + j];
                    }
                }
            }
        }
    }
}

}  // namespace opsdk_op_box_sum_grad
