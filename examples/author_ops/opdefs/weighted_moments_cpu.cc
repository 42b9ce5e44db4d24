#include "weighted_moments_op.h"

namespace opsdk_op_weighted_moments {

// w is optional: in.w is an empty std::optional when the caller gave None (every weight 1).
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    (void)attrs;
    const T* w = in.w ? in.w->data : nullptr;
    for (int64_t i = 0; i < dims.n; ++i) {
        const T* row = in.x.data + i * dims.p;
        T m1 = 0, m2 = 0;
        for (int64_t j = 0; j < dims.p; ++j) {
            const T wx = (w ? w[j] : T(1)) * row[j];
            m1 += wx;
            m2 += wx * row[j];
        }
        out.m1.data[i] = m1;
        out.m2.data[i] = m2;
    }
}

}  // namespace opsdk_op_weighted_moments
