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
// The broadcast tiling runs over the taps flattened (tap k = (di, dj * c + ci), filter row k);
// the dot tiling runs the window row di as one contiguous run t = dj * c + ci of kw * c values.
//
// How the broadcast tiling is blocked, and why (the deep-MNIST layers on one AVX-512 core): a
// tile loads NV filter vectors per tap for P * NV multiply-adds, so the filter rows it streams
// must come from L1. Threads split y's pixels (flat over n, oh, ow) into chunks whose sums
// [pixels, opad] stay in L2; within a chunk the taps go in blocks whose filter rows fit L1, and
// every tile of the chunk runs over a block before the next block adds to the sums. Tiles take
// consecutive pixels across output rows (an offset per pixel), so a 14-pixel row wastes no tile
// lanes. Sums are written in y itself when o is a whole number of vectors (a copy of a
// 1-channel image's 32-channel output cost a third of its forward), else in a scratch array.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "conv2d_common.h"

namespace conv2d_common {

// The taps, flattened: tap k = di * kw * c + t is filter row k, and its value of the window that
// starts at x + off lies at x + off + at[k] (at[k] = di * wp * c + t). One loop over a block of
// taps [k0, k1), where nested loops over di and t ran the 5-value rows of a 1-channel image in
// loops too short to pay for themselves.
inline std::vector<int64_t> tap_offsets(const Valid& g) {
    std::vector<int64_t> at(static_cast<size_t>(g.kh * g.kw * g.c));
    for (int64_t di = 0, k = 0; di < g.kh; ++di)
        for (int64_t t = 0; t < g.kw * g.c; ++t, ++k) at[k] = di * g.wp * g.c + t;
    return at;
}

// Blocks of taps whose filter rows (row_bytes each) fill about 24 KiB of L1, of even sizes.
inline std::vector<int64_t> tap_blocks(int64_t taps, int64_t row_bytes) {
    const int64_t most = std::max<int64_t>(1, 24 * 1024 / std::max<int64_t>(row_bytes, 1));
    const int64_t parts = (taps + most - 1) / most, size = (taps + parts - 1) / parts;
    std::vector<int64_t> bounds;
    for (int64_t k = 0; k < taps; k += size) bounds.push_back(k);
    bounds.push_back(taps);
    return bounds;
}

struct Taps {
    std::vector<int64_t> at, blocks;  // tap_offsets, tap_blocks' bounds
};

// sums[p, ob ..] (+)= taps [k0, k1) of pixels p < P, whose windows start at x + off[p]; fp is
// the filter [taps, opad] at column ob. The sums are [pixels, opad]: whole vectors.
template <typename T, int P, int NV>
inline void block_tile(const int64_t* at, int64_t k0, int64_t k1, const T* x, const int64_t* off,
                       const T* fp, int64_t opad, T* sums, bool first) {
    using V = Vec<T>;
    constexpr int W = lanes<T>();
    V acc[P][NV];
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v)
            acc[p][v] = first ? V{} : *reinterpret_cast<const V*>(sums + p * opad + v * W);
    const T* xp[P];
    for (int p = 0; p < P; ++p) xp[p] = x + off[p];
    const T* f = fp + k0 * opad;
    for (int64_t k = k0; k < k1; ++k, f += opad) {
        const int64_t a = at[k];
        V fv[NV];
        for (int v = 0; v < NV; ++v) fv[v] = *reinterpret_cast<const V*>(f + v * W);
        for (int p = 0; p < P; ++p) {
            const T s = xp[p][a];
            for (int v = 0; v < NV; ++v) acc[p][v] += s * fv[v];
        }
    }
    for (int p = 0; p < P; ++p)
        for (int v = 0; v < NV; ++v) *reinterpret_cast<V*>(sums + p * opad + v * W) = acc[p][v];
}

// The taps [k0, k1) of a tile of S pixels that can meet an input value other than the padding's
// zeros: the union of its pixels' spans (window_offsets), within the block. The tile's sums
// start at zero in the block holding its first such tap (`first`); a tile with none at all gets
// zeros in the first block.
template <typename T, int S, int NV>
inline void span_tile(const int64_t* at, int64_t k0, int64_t k1, const T* x, const int64_t* off,
                      const int64_t* spans, const T* fp, int64_t opad, T* sums) {
    int64_t lo = spans[0], hi = spans[1];
    for (int p = 1; p < S; ++p) {
        lo = std::min(lo, spans[2 * p]);
        hi = std::max(hi, spans[2 * p + 1]);
    }
    const int64_t from = std::max(k0, lo), to = std::min(k1, hi);
    if (from < to) {
        block_tile<T, S, NV>(at, from, to, x, off, fp, opad, sums, k0 <= lo);
    } else if (lo >= hi && k0 == 0) {
        for (int p = 0; p < S; ++p) std::fill(sums + p * opad, sums + p * opad + NV * lanes<T>(), T(0));
    }
}

// block_tile over pixels [0, count) of a chunk: tiles of P, the rest in tiles of 4, 2 and 1.
template <typename T, int NV>
void block_pixels(const int64_t* at, int64_t k0, int64_t k1, const T* x, const int64_t* off,
                  const int64_t* spans, int64_t count, const T* fp, int64_t opad, T* sums) {
    constexpr int P = tile_pixels<NV>();
    int64_t q = 0;
    for (; q + P <= count; q += P) span_tile<T, P, NV>(at, k0, k1, x, off + q, spans + 2 * q, fp, opad, sums + q * opad);
    for (; q + 4 <= count; q += 4) span_tile<T, 4, NV>(at, k0, k1, x, off + q, spans + 2 * q, fp, opad, sums + q * opad);
    for (; q + 2 <= count; q += 2) span_tile<T, 2, NV>(at, k0, k1, x, off + q, spans + 2 * q, fp, opad, sums + q * opad);
    if (q < count) span_tile<T, 1, NV>(at, k0, k1, x, off + q, spans + 2 * q, fp, opad, sums + q * opad);
}

// Pixels [q0, q0 + count) of the output (flat over n, oh, ow): where each one's window starts in
// x (off), and its span: the taps [spans[2q], spans[2q + 1]) whose window rows are not all
// padding (g.top, g.bottom); empty as (INT64_MAX, INT64_MIN). One division for the first pixel,
// then steps (a division per pixel cost as much as the multiply-adds of a 1-channel image's
// pixel).
inline void window_offsets(const Valid& g, int64_t q0, int64_t count, int64_t* off, int64_t* spans) {
    int64_t j = q0 % g.ow, i = q0 / g.ow % g.oh, b = q0 / (g.ow * g.oh);
    const int64_t row_taps = g.kw * g.c, bottom = g.real_bottom();
    for (int64_t q = 0; q < count; ++q) {
        off[q] = ((b * g.hp + i * g.sh) * g.wp + j * g.sw) * g.c;
        const int64_t first = std::clamp<int64_t>(g.top - i * g.sh, 0, g.kh);
        const int64_t end = std::clamp<int64_t>(bottom - i * g.sh, 0, g.kh);
        spans[2 * q] = first < end ? first * row_taps : INT64_MAX;
        spans[2 * q + 1] = first < end ? end * row_taps : INT64_MIN;
        if (++j == g.ow) {
            j = 0;
            if (++i == g.oh) i = 0, ++b;
        }
    }
}

// What the forward adds to y's rows once they are summed, while they are in cache (conv2d_bias:
// the bias, then ReLU): nothing by default.
template <typename T>
struct Epilogue {
    const T* bias = nullptr;  // [o], or none
    bool relu = false;
};

// y's rows [0, count) of o channels: + bias, then max(., 0) (a NaN stays NaN, as relu's does).
// One loop per case, each a plain vector loop.
template <typename T>
inline void finish_rows(const Epilogue<T>& e, T* __restrict y, int64_t count, int64_t o) {
    const T* __restrict bias = e.bias;
    if (bias != nullptr && e.relu) {
        for (int64_t q = 0; q < count; ++q, y += o)
            for (int64_t k = 0; k < o; ++k) {
                const T v = y[k] + bias[k];
                y[k] = v < T(0) ? T(0) : v;
            }
    } else if (bias != nullptr) {
        for (int64_t q = 0; q < count; ++q, y += o)
            for (int64_t k = 0; k < o; ++k) y[k] += bias[k];
    } else if (e.relu) {
        for (int64_t k = 0; k < count * o; ++k) y[k] = y[k] < T(0) ? T(0) : y[k];
    }
}

// y's pixels [q0, q0 + count): every block of taps over every tile, per block of output channels,
// into sums [count, opad]: y's own rows when o is a whole number of vectors, else `scratch`,
// whose first o channels are then copied into y.
template <typename T>
void chunk_conv(const Valid& g, const Taps& taps, const T* x, const T* fp, int64_t q0,
                int64_t count, std::vector<int64_t>& off, LineVector<T>& scratch, T* y) {
    constexpr int W = lanes<T>();
    const int64_t opad = round_up(g.o, W);
    off.resize(static_cast<size_t>(3 * count));  // the offsets, then the spans
    window_offsets(g, q0, count, off.data(), off.data() + count);
    if (opad != g.o) scratch.resize(static_cast<size_t>(count * opad));
    T* sums = opad == g.o ? y + q0 * g.o : scratch.data();
    for (int64_t ob = 0; ob < opad; ob += kMaxVecs * W)
        with_vecs(std::min<int64_t>(kMaxVecs, (opad - ob) / W), [&](auto nv) {
            for (size_t k = 0; k + 1 < taps.blocks.size(); ++k)
                block_pixels<T, decltype(nv)::value>(taps.at.data(), taps.blocks[k], taps.blocks[k + 1], x,
                                                     off.data(), off.data() + count, count, fp + ob, opad,
                                                     sums + ob);
        });
    if (opad == g.o) return;
    for (int64_t q = 0; q < count; ++q) std::copy(sums + q * opad, sums + q * opad + g.o, y + (q0 + q) * g.o);
}

// The broadcast tiling over all of y: chunks of about 64 KiB of sums, split between threads.
template <typename T>
void broadcast_conv(const Valid& g, const T* filter, const T* x, T* y, const Epilogue<T>& e) {
    constexpr int W = lanes<T>();
    const int64_t opad = round_up(g.o, W), pixels = g.n * g.oh * g.ow;
    const LineVector<T> fp = pad_rows(filter, g.kh * g.kw * g.c, g.o, opad);
    const Taps taps{tap_offsets(g), tap_blocks(g.kh * g.kw * g.c, std::min<int64_t>(opad, kMaxVecs * W) * sizeof(T))};
    // Chunks of at most about 64 KiB of sums, as many for every thread: a short last chunk left
    // one thread 9% more pixels than the other (the deep-MNIST CNN's 9,800 in chunks of 256).
    const int64_t most = std::max<int64_t>(16, 64 * 1024 / int64_t(sizeof(T)) / opad);
    const int64_t chunk = ceil_div(pixels, round_up(ceil_div(pixels, most), opsdk::num_threads()));
    const int64_t chunks = ceil_div(pixels, chunk);
    const int64_t per_chunk = chunk * opad * g.kh * g.kw * g.c;
    opsdk::parallel_for(0, chunks, grain(per_chunk), [&](int64_t lo, int64_t hi) {
        std::vector<int64_t> off;
        LineVector<T> scratch;
        for (int64_t k = lo; k < hi; ++k) {
            const int64_t q0 = k * chunk;
            const int64_t count = std::min(chunk, pixels - q0);
            chunk_conv<T>(g, taps, x, fp.data(), q0, count, off, scratch, y);
            finish_rows(e, y + q0 * g.o, count, g.o);
        }
    });
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

// dot_tile over rows [lo, hi) of y, each row finished by the epilogue.
template <typename T>
void dot_rows(const Valid& g, const T* x, const T* ft, T* y, int64_t lo, int64_t hi, const Epilogue<T>& e) {
    for (int64_t r = lo; r < hi; ++r) {
        int64_t j = 0;
        for (; j + kDotPixels <= g.ow; j += kDotPixels) dot_pixels<T, kDotPixels>(g, x, ft, y, r / g.oh, r % g.oh, j);
        for (; j < g.ow; ++j) dot_pixels<T, 1>(g, x, ft, y, r / g.oh, r % g.oh, j);
        finish_rows(e, y + r * g.ow * g.o, g.ow, g.o);
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
// [kh, kw, c, o], then the epilogue e. The dot tiling when o leaves most of a vector empty and a
// window row fills one.
template <typename T>
void valid_conv(const Valid& g, const T* x, const T* filter, T* y, const Epilogue<T>& e = {}) {
    constexpr int W = lanes<T>();
    if (2 * g.o <= W && g.kw * g.c >= W) {
        const int64_t taps = g.kh * g.kw * g.c;
        const std::vector<T> ft = transposed(filter, taps, g.o);
        const int64_t per_row = g.ow * round_up(g.o, W) * taps;
        opsdk::parallel_for(0, g.n * g.oh, grain(per_row), [&](int64_t lo, int64_t hi) { dot_rows<T>(g, x, ft.data(), y, lo, hi, e); });
        return;
    }
    broadcast_conv<T>(g, filter, x, y, e);
}

// conv2d's forward, TensorFlow's padding not done yet (conv2d_cpu.cc, conv2d_bias_cpu.cc): x
// copied with the padding's zeros where a window needs them, then valid_conv.
template <typename T>
void forward(const Geometry& g, const T* x, const T* filter, T* y, const Epilogue<T>& e = {}) {
    LineVector<T> copy;
    const Valid v = padded_input(g, x, copy);
    valid_conv<T>(v, copy.empty() ? x : copy.data(), filter, y, e);
}

}  // namespace conv2d_common
