// What the conv2d kernels share (conv2d_cpu.cc, conv2d_grad_cpu.cc): vector types, TensorFlow's
// padding geometry, zero-padded copies, and float16 run through float.
//
// Why vectors over a channel axis: NHWC keeps the channels of a pixel contiguous (o in the filter
// and the output, c in the input), so a register tile of P pixels x NV vectors of channels takes
// one broadcast per pixel and one load per vector for P * NV fused multiply-adds, with no im2col
// buffer. Arrays whose channel count is not a whole number of vectors are copied once with the
// channels zero-padded (the filter, the output gradient: both small next to the work), so every
// load is a whole vector and no lane needs a mask; only the final stores are trimmed.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "opsdk/kernel.h"

namespace conv2d_common {

#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
constexpr int kMaxVecs = 4;  // 4 x 4 accumulators + 4 loads + 1 broadcast of 32 registers
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
constexpr int kMaxVecs = 2;  // 4 x 2 + 2 + 1 of 16 registers
#else
constexpr int kVecBytes = 16;
constexpr int kMaxVecs = 2;
#endif

// Pixels per register tile for NV vectors of channels: P * NV accumulators, NV loads and a
// broadcast must fit the vector registers.
template <int NV>
constexpr int tile_pixels() {
#if defined(__AVX512F__)
    return NV == 1 ? 16 : NV == 2 ? 12 : NV == 3 ? 8 : 6;  // 24-26 accumulators
#else
    return NV <= 1 ? 8 : 4;
#endif
}

template <typename T> struct Simd;
// aligned(alignof(T)): a dereference is an unaligned load or store, rows start anywhere.
template <> struct Simd<float> { typedef float V __attribute__((vector_size(kVecBytes), aligned(4))); };
template <> struct Simd<double> { typedef double V __attribute__((vector_size(kVecBytes), aligned(8))); };

template <typename T> using Vec = typename Simd<T>::V;
template <typename T> constexpr int lanes() { return kVecBytes / static_cast<int>(sizeof(T)); }

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
// Quotients rounded up and down, for a positive divisor and a numerator of either sign.
inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Sizes of one convolution; top/left are the zero rows/columns TensorFlow's SAME padding puts
// before the image (the odd one goes after).
struct Geometry {
    int64_t n, h, w, c, kh, kw, o, oh, ow, sh, sw, top, left;
};

inline int64_t out_size(int64_t size, int64_t k, int64_t stride, bool same) {
    return same ? (size + stride - 1) / stride : (size - k) / stride + 1;
}

inline int64_t pad_before(int64_t size, int64_t k, int64_t stride, int64_t out, bool same) {
    return same ? std::max<int64_t>((out - 1) * stride + k - size, 0) / 2 : 0;
}

inline Geometry geometry(int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh, int64_t kw,
                         int64_t o, int64_t sh, int64_t sw, bool same) {
    const int64_t oh = std::max<int64_t>(out_size(h, kh, sh, same), 0);
    const int64_t ow = std::max<int64_t>(out_size(w, kw, sw, same), 0);
    return {n, h, w, c, kh, kw, o, oh, ow, sh, sw, pad_before(h, kh, sh, oh, same),
            pad_before(w, kw, sw, ow, same)};
}

// The geometry of a conv2d-family kernel from its bound dims and attrs (conv2d, conv2d_bias and
// the gradients declare the same names).
template <typename D, typename A>
inline Geometry conv_geometry(const D& d, const A& attrs) {
    return geometry(d.n, d.h, d.w, d.c, d.kh, d.kw, d.o, attrs.stride_h, attrs.stride_w, attrs.same != 0);
}

// The same for a gradient kernel, whose grad_y sizes (oh, ow) are bound from the array itself (an
// input cannot compute them): checked against the forward's.
template <typename D, typename A>
inline Geometry gradient_geometry(const D& d, const A& attrs) {
    const Geometry g = conv_geometry(d, attrs);
    OPSDK_REQUIRE(g.oh == d.oh && g.ow == d.ow,
                  "grad_y is " << d.oh << " x " << d.ow << " pixels but conv2d's y would be "
                  << g.oh << " x " << g.ow << " for these x, filter, strides and padding");
    return g;
}

// A convolution with its padding done: every window lies inside the (hp x wp) input. Only rows
// [top, bottom) and columns [left, right) of the input may hold other values than zeros (the
// padding's): the kernels skip the taps that would multiply nothing else (a 5x5 SAME window over
// a 14x14 image has 16% of its taps in the padding). By default nothing is known to be zero.
struct Valid {
    int64_t n, hp, wp, c, kh, kw, o, oh, ow, sh, sw;
    int64_t top = 0, bottom = INT64_MAX, left = 0, right = INT64_MAX;

    int64_t real_bottom() const { return std::min(bottom, hp); }
    int64_t real_right() const { return std::min(right, wp); }
};

// Scratch arrays that start on a cache line: the kernels' whole-vector loads of padded rows then
// never straddle two lines (malloc's 16-byte alignment made every 64-byte load of such a row a
// split load, which costs two).
template <typename T>
struct LineAllocator {
    using value_type = T;
    LineAllocator() = default;
    template <typename U>
    LineAllocator(const LineAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    // Sized without a value, elements are left unset (default-initialised), not zeroed: the
    // padded copies write every element once, where zeroing first wrote them twice.
    template <typename U>
    void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
    template <typename U, typename... A>
    void construct(U* p, A&&... a) { ::new (static_cast<void*>(p)) U(std::forward<A>(a)...); }
    template <typename U>
    bool operator==(const LineAllocator<U>&) const { return true; }
    template <typename U>
    bool operator!=(const LineAllocator<U>&) const { return false; }
};

template <typename T> using LineVector = std::vector<T, LineAllocator<T>>;

// A row of `width` pixels of c channels: `count` pixels from src starting at pixel `at`, zeros
// around them (src may be null when count is 0).
template <typename T>
inline void padded_row(T* dst, int64_t width, int64_t c, const T* src, int64_t at, int64_t count) {
    if (count <= 0) {
        std::fill(dst, dst + width * c, T(0));
        return;
    }
    std::fill(dst, dst + at * c, T(0));
    std::copy(src, src + count * c, dst + at * c);
    std::fill(dst + (at + count) * c, dst + width * c, T(0));
}

// Rows per thread of a copy of `per_row` values: at least about a megabyte each, below which
// waking a thread costs more than the copy it takes over.
inline int64_t copy_grain(int64_t per_row) {
    return std::max<int64_t>(1, (int64_t(1) << 18) / std::max<int64_t>(per_row, 1));
}

// The input of the convolution g as valid_conv reads it: x with TensorFlow's zeros around it
// (g.top rows and g.left columns before, enough after for every window) copied into `copy`, or
// x itself, `copy` left empty, when every window fits in x already. Needs g.oh, g.ow >= 1.
template <typename T>
Valid padded_input(const Geometry& g, const T* x, LineVector<T>& copy) {
    const int64_t hp = (g.oh - 1) * g.sh + g.kh, wp = (g.ow - 1) * g.sw + g.kw;
    if (g.top == 0 && g.left == 0 && hp <= g.h && wp <= g.w)
        return {g.n, g.h, g.w, g.c, g.kh, g.kw, g.o, g.oh, g.ow, g.sh, g.sw};
    copy.resize(static_cast<size_t>(g.n * hp * wp * g.c));  // every element is written below
    const int64_t cols = std::max<int64_t>(std::min(g.w, wp - g.left), 0);
    opsdk::parallel_for(0, g.n * hp, copy_grain(wp * g.c), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
            const int64_t b = r / hp, ih = r % hp - g.top;
            const bool inside = ih >= 0 && ih < g.h;
            padded_row(copy.data() + r * wp * g.c, wp, g.c, inside ? x + (b * g.h + ih) * g.w * g.c : nullptr,
                       g.left, inside ? cols : 0);
        }
    });
    return {g.n, hp, wp, g.c, g.kh, g.kw, g.o, g.oh, g.ow, g.sh, g.sw, g.top, std::min(g.top + g.h, hp),
            g.left, g.left + cols};
}

// rows x cols copied into rows x padded (padded >= cols), zeros after each row.
template <typename T>
LineVector<T> pad_rows(const T* a, int64_t rows, int64_t cols, int64_t padded) {
    LineVector<T> out(static_cast<size_t>(rows * padded), T(0));
    for (int64_t r = 0; r < rows; ++r) std::copy(a + r * cols, a + (r + 1) * cols, out.data() + r * padded);
    return out;
}

// Store the first `count` lanes of v (count <= lanes): the trimmed tail of a padded channel row.
template <typename T>
inline void store(T* dst, Vec<T> v, int64_t count) {
    if (count >= lanes<T>()) {
        *reinterpret_cast<Vec<T>*>(dst) = v;
        return;
    }
    for (int64_t l = 0; l < count; ++l) dst[l] = v[l];
}

// Call f with NV as a compile-time constant in [1, kMaxVecs]: the vectors a tile covers.
template <typename F>
inline void with_vecs(int64_t nv, F&& f) {
    if (nv <= 1) {
        f(std::integral_constant<int, 1>{});
    } else if constexpr (kMaxVecs == 2) {
        f(std::integral_constant<int, 2>{});
    } else if (nv == 2) {
        f(std::integral_constant<int, 2>{});
    } else if (nv == 3) {
        f(std::integral_constant<int, 3>{});
    } else {
        f(std::integral_constant<int, 4>{});
    }
}

// Threads split rows of `per_row` multiply-adds each; a share below ~4M of them runs inline,
// where waking a second thread gains little and on a loaded machine can cost milliseconds.
inline int64_t grain(int64_t per_row) {
    return std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(per_row, 1));
}

// float16 has no vector arithmetic here: the kernels run float on float copies.
#if defined(__FLT16_MAX__)
inline std::vector<float> to_float(const opsdk::half* a, int64_t size) {
    return std::vector<float>(a, a + size);
}

inline void from_float(const std::vector<float>& a, opsdk::half* out) {
    for (size_t i = 0; i < a.size(); ++i) out[i] = static_cast<opsdk::half>(a[i]);
}
#else
inline std::vector<float> to_float(const opsdk::half*, int64_t) {
    OPSDK_REQUIRE(false, "float16 needs a compiler with _Float16; use float32");
    return {};
}

inline void from_float(const std::vector<float>&, opsdk::half*) {}
#endif

template <typename T>
constexpr bool is_vector_type() { return std::is_same_v<T, float> || std::is_same_v<T, double>; }

}  // namespace conv2d_common
