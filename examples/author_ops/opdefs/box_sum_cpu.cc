#include "box_sum_op.h"

namespace opsdk_op_box_sum {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    const int64_t h = dims.h, w = dims.w, oh = dims.oh, ow = dims.ow, k = attrs.k, s = attrs.stride;
    for (int64_t b = 0; b < dims.n; ++b) {
        const T* x = in.x.data + b * h * w;
        T* y = out.y.data + b * oh * ow;
        for (int64_t i = 0; i < oh; ++i) {
            for (int64_t j = 0; j < ow; ++j) {
                T acc = 0;
                for (int64_t di = 0; di < k; ++di) {
                    const int64_t r = i * s + di - dims.pad_top;
                    if (r < 0 || r >= h) continue;
                    for (int64_t dj = 0; dj < k; ++dj) {
                        const int64_t c = j * s + dj - dims.pad_left;
                        if (c >= 0 && c < w) acc += x[r * w + c];
                    }
                }
                y[i * ow + j] = acc;
            }
        }
    }
}

}  // namespace opsdk_op_box_sum
