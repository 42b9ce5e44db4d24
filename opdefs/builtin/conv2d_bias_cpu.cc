// conv2d_bias, CPU: conv2d's forward (conv2d_valid.h) with the bias added, and ReLU where relu is
// 1, to each chunk of y's rows as soon as it is summed, while it is in cache: the separate pass
// over y that an add and a relu after conv2d take (a bias add fused with its ReLU read and wrote
// the deep-MNIST first layer's 5 MB output once more) is gone.
#include "conv2d_bias_op.h"

#include "conv2d_common.h"
#include "conv2d_valid.h"

namespace opsdk_op_conv2d_bias {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const conv2d_common::Geometry g = conv2d_common::conv_geometry(d, attrs);
    if (g.n * g.oh * g.ow * g.o == 0) return;
    if constexpr (conv2d_common::is_vector_type<T>()) {
        conv2d_common::forward<T>(g, in.x.data, in.filter.data, out.y.data, {in.bias.data, attrs.relu != 0});
    } else {
        std::vector<float> y(static_cast<size_t>(out.y.size()));
        const std::vector<float> bias = conv2d_common::to_float(in.bias.data, in.bias.size());
        conv2d_common::forward<float>(g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
                                      conv2d_common::to_float(in.filter.data, in.filter.size()).data(), y.data(),
                                      {bias.data(), attrs.relu != 0});
        conv2d_common::from_float(y, out.y.data);
    }
}

}  // namespace opsdk_op_conv2d_bias
