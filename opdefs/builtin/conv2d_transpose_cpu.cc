// conv2d_transpose, CPU: y = the gradient of conv2d(image [n, out_h, out_w, c], filter) with
// respect to the image, for the output gradient x. conv2d_input_grad.h computes exactly that for
// conv2d_grad (one stride-1 convolution per phase of the strides, run by conv2d_valid.h), so the
// op is conv2d's geometry for an out_h x out_w image and one call of it.
#include "conv2d_transpose_op.h"

#include <algorithm>

#include "conv2d_common.h"
#include "conv2d_input_grad.h"
#include "conv2d_valid.h"

namespace opsdk_op_conv2d_transpose {

// The image size whose conv2d output has x's size: the smallest one plus the extra rows and
// columns, which must stay below a stride to keep that property.
inline int64_t image_size(int64_t size, int64_t k, int64_t stride, bool same, int64_t extra) {
    return (size - 1) * stride + 1 + (same ? 0 : k - 1) + extra;
}

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    OPSDK_REQUIRE(attrs.extra_h < attrs.stride_h && attrs.extra_w < attrs.stride_w,
                  "extra_h (" << attrs.extra_h << ") and extra_w (" << attrs.extra_w
                  << ") must be below the strides (" << attrs.stride_h << ", " << attrs.stride_w
                  << "): a larger image would give conv2d outputs larger than x");
    const bool same = attrs.same != 0;
    // The conv2d whose input gradient y is: y's image, x its output.
    const conv2d_common::Geometry g = conv2d_common::geometry(
        d.n, image_size(d.h, d.kh, attrs.stride_h, same, attrs.extra_h),
        image_size(d.w, d.kw, attrs.stride_w, same, attrs.extra_w), d.c, d.kh, d.kw, d.o,
        attrs.stride_h, attrs.stride_w, same);
    if (out.y.size() == 0) return;
    if (g.oh * g.ow * g.kh * g.kw * g.o == 0) {  // an empty sum
        std::fill(out.y.data, out.y.data + out.y.size(), T(0));
        return;
    }
    if constexpr (conv2d_common::is_vector_type<T>()) {
        conv2d_input_grad::input_gradient<T>(g, in.x.data, in.filter.data, out.y.data);
    } else {
        std::vector<float> y(static_cast<size_t>(out.y.size()));
        conv2d_input_grad::input_gradient<float>(
            g, conv2d_common::to_float(in.x.data, in.x.size()).data(),
            conv2d_common::to_float(in.filter.data, in.filter.size()).data(), y.data());
        conv2d_common::from_float(y, out.y.data);
    }
}

}  // namespace opsdk_op_conv2d_transpose
