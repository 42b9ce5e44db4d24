// The convolution both conv2d kernels run (the forward, and the input gradient as a convolution
// of the output gradient): y [n, oh, ow, o] from an input x [n, hp, wp, c] whose padding is done
// already and a filter [kh, kw, c, o], by one of two register tilings, both without im2col:
//
// - broadcast (o fills vectors): P output pixels x NV vectors of output channels; each step
//   broadcasts one input value per pixel and loads NV filter vectors for P * NV multiply-adds.
// - dot (o smaller than a vector, e.g. the input gradient of a 1-channel image): P pixels x C
//   output channels, each a dot product over the kw * c values of a window row, which lie side by
//   side in NHWC: P + C vector loads for P * C multiply-adds, the lanes summed once at the end.
//
// Both run the window row di as one contiguous run t = dj * c + ci of kw * c values. Threads
// split the output rows (b, i): each writes its own rows, no races.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "conv2d_common.h"

namespace conv2d_common {

// y[b, i, j, ob ..] for pixels j0 .. j0 + P of row (b, i): the sum over di of the kw * c values of
// the window's row di, which lie side by side in NHWC (t = dj * c + ci), times the matching rows of
// the filter fp [kh, kw * c, opad].
template <typename T, int P, int NV>
inline void valid_tile(const Valid& g, const T* x, const T* fp, int64_t opad, T* y, int64_t b,
                       int64_t i, int64_t j0, int64_t ob) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    const int64_t kwc = g.kw * g.c;
    V acc[P][NV];
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) acc[p][v] = V{};
    for (int64_t di = 0; di < g.kh; ++di) {
        const T* xrow = x + ((b * g.hp + i * g.sh + di) * g.wp + j0 * g.sw) * g.c;
        const T* xp[P];
        for (int p = 0; p < P; ++p) xp[p] = xrow + p * g.sw * g.c;
        const T* f = fp + di * kwc * opad + ob;
        for (int64_t t = 0; t < kwc; ++t, f += opad) {
            V fv[NV];
            for (int v = 0; v < NV; ++v) fv[v] = *reinterpret_cast<const V*>(f + v * W);
            for (int p = 0; p < P; ++p) {
                const T s = xp[p][t];
                for (int v = 0; v < NV; ++v) acc[p][v] += s * fv[v];
            }
        }
    }
    for (int p = 0; p < P; ++p) {
        T* out = y + ((b * g.oh + i) * g.ow + j0 + p) * g.o + ob;
        for (int v = 0; v < NV; ++v) store<T>(out + v * W, acc[p][v], g.o - ob - v * W);
    }
}

// Pixels [j, ow) of row (b, i) in tiles of P, then the rest in tiles of 4, 2 and 1.
template <typename T, int NV>
inline void valid_row(const Valid& g, const T* x, const T* fp, int64_t opad, T* y, int64_t b,
                      int64_t i, int64_t ob) {
    constexpr int P = tile_pixels<NV>();
    int64_t j = 0;
    for (; j + P <= g.ow; j += P) valid_tile<T, P, NV>(g, x, fp, opad, y, b, i, j, ob);
    if (j + 4 <= g.ow && P > 4) valid_tile<T, 4, NV>(g, x, fp, opad, y, b, i, j, ob), j += 4;
    if (j + 2 <= g.ow) valid_tile<T, 2, NV>(g, x, fp, opad, y, b, i, j, ob), j += 2;
    if (j < g.ow) valid_tile<T, 1, NV>(g, x, fp, opad, y, b, i, j, ob);
}

// valid_tile over rows [lo, hi) of y; fp is the filter with its output channels padded to opad.
template <typename T>
void broadcast_rows(const Valid& g, const T* x, const T* fp, T* y, int64_t lo, int64_t hi) {
    constexpr int W = lanes<T>();
    const int64_t opad = round_up(g.o, W);
    for (int64_t r = lo; r < hi; ++r) {
        for (int64_t ob = 0; ob < g.o; ob += kMaxVecs * W) {
            with_vecs((std::min(g.o, ob + kMaxVecs * W) - ob + W - 1) / W, [&](auto nv) {
                valid_row<T, decltype(nv)::value>(g, x, fp, opad, y, r / g.oh, r % g.oh, ob);
            });
        }
    }
}


#if defined(__AVX512F__)
constexpr int kDotPixels = 4, kDotChannels = 4;  // 16 accumulators + 8 loads
#else
constexpr int kDotPixels = 4, kDotChannels = 2;  // 8 + 6 of 16 registers
#endif

// y[b, i, j0 .. j0 + P, o0 .. o0 + C]: dot products of window rows with the filter ft laid out
// as [o, kh, kw * c], vectors over t, a scalar loop for the last kw * c % lanes values.
template <typename T, int P, int C>
inline void dot_tile(const Valid& g, const T* x, const T* ft, T* y, int64_t b, int64_t i, int64_t j0,
                     int64_t o0) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    const int64_t kwc = g.kw * g.c;
    V acc[P][C];
    T rest[P][C];
    for (int p = 0; p < P; ++p)
        for (int k = 0; k < C; ++k) acc[p][k] = V{}, rest[p][k] = T(0);
    for (int64_t di = 0; di < g.kh; ++di) {
        const T* xp[P];
        const T* fr[C];
        for (int p = 0; p < P; ++p) xp[p] = x + ((b * g.hp + i * g.sh + di) * g.wp + (j0 + p) * g.sw) * g.c;
        for (int k = 0; k < C; ++k) fr[k] = ft + ((o0 + k) * g.kh + di) * kwc;
        int64_t t = 0;
        for (; t + W <= kwc; t += W) {
            V fv[C];
            for (int k = 0; k < C; ++k) fv[k] = *reinterpret_cast<const V*>(fr[k] + t);
            for (int p = 0; p < P; ++p) {
                const V xv = *reinterpret_cast<const V*>(xp[p] + t);
                for (int k = 0; k < C; ++k) acc[p][k] += xv * fv[k];
            }
        }
        for (; t < kwc; ++t)
            for (int p = 0; p < P; ++p)
                for (int k = 0; k < C; ++k) rest[p][k] += xp[p][t] * fr[k][t];
    }
    for (int p = 0; p < P; ++p)
        for (int k = 0; k < C; ++k) {
            T s = rest[p][k];
            for (int l = 0; l < W; ++l) s += acc[p][k][l];
            y[((b * g.oh + i) * g.ow + j0 + p) * g.o + o0 + k] = s;
        }
}

template <typename T, int P>
inline void dot_pixels(const Valid& g, const T* x, const T* ft, T* y, int64_t b, int64_t i, int64_t j0) {
    int64_t k = 0;
    for (; k + kDotChannels <= g.o; k += kDotChannels) dot_tile<T, P, kDotChannels>(g, x, ft, y, b, i, j0, k);
    for (; k < g.o; ++k) dot_tile<T, P, 1>(g, x, ft, y, b, i, j0, k);
}

// dot_tile over rows [lo, hi) of y.
template <typename T>
void dot_rows(const Valid& g, const T* x, const T* ft, T* y, int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
        int64_t j = 0;
        for (; j + kDotPixels <= g.ow; j += kDotPixels) dot_pixels<T, kDotPixels>(g, x, ft, y, r / g.oh, r % g.oh, j);
        for (; j < g.ow; ++j) dot_pixels<T, 1>(g, x, ft, y, r / g.oh, r % g.oh, j);
    }
}

// The filter [kh * kw * c, o] as [o, kh * kw * c].
template <typename T>
std::vector<T> transposed(const T* filter, int64_t rows, int64_t o) {
    std::vector<T> out(static_cast<size_t>(rows * o));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < o; ++k) out[k * rows + r] = filter[r * o + k];
    return out;
}

// y [n, oh, ow, o] = the convolution of x [n, hp, wp, c] (padded already) with filter
// [kh, kw, c, o]. The dot tiling when o leaves most of a vector empty and a window row fills one.
template <typename T>
void valid_conv(const Valid& g, const T* x, const T* filter, T* y) {
    constexpr int W = lanes<T>();
    const int64_t taps = g.kh * g.kw * g.c;
    const int64_t per_row = g.ow * round_up(g.o, W) * taps;
    if (2 * g.o <= W && g.kw * g.c >= W) {
        const std::vector<T> ft = transposed(filter, taps, g.o);
        opsdk::parallel_for(0, g.n * g.oh, grain(per_row), [&](int64_t lo, int64_t hi) { dot_rows<T>(g, x, ft.data(), y, lo, hi); });
        return;
    }
    const std::vector<T> fp = pad_rows(filter, taps, g.o, round_up(g.o, W));
    opsdk::parallel_for(0, g.n * g.oh, grain(per_row), [&](int64_t lo, int64_t hi) { broadcast_rows<T>(g, x, fp.data(), y, lo, hi); });
}

}  // namespace conv2d_common
