// conv2d, CPU: y[b, i, j, :] = sum_{di, dj, ci} xpad[b, i*sh + di, j*sw + dj, ci] * filter[di, dj, ci, :].
//
// A direct loop, no im2col (conv2d_valid.h): register tiles of output pixels by output channels.
// The image is copied once with TensorFlow's SAME zeros around it (not at all when every window
// fits already), so the inner loop never tests a border and runs over the kw * c contiguous
// values of a window row.
#include "conv2d_op.h"

#include "conv2d_common.h"
#include "conv2d_valid.h"

namespace opsdk_op_conv2d {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const conv2d_common::Geometry g = conv2d_common::conv_geometry(d, attrs);
    if (g.n * g.oh * g.ow * g.o == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        conv2d_common::forward<T>(g, in.x.data, in.filter.data, out.y.data);
    } else {
        std::vector<float> y(static_cast<size_t>(out.y.size()));
        conv2d_common::forward<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                                      conv2d_common::to_float(in.filter.data, in.filter.size()).data(), y.data());
        conv2d_common::from_float(y, out.y.data);
    }
}

}  // namespace opsdk_op_conv2d
