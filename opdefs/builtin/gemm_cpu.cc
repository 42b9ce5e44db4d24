// gemm, CPU: c = op(a) @ op(b) on the session's thread budget, one BLAS call per thread.
//
// c is cut into panels of whole 16-column (or 16-row) blocks along its longer side, one panel per
// thread of opsdk::parallel_for, and each thread runs a single-threaded gemm on its panel. The
// BLAS is OpenBLAS from the scipy-openblas32 package, which opsdk/runtime/kernels/host_blas.py
// loads into the global symbol scope with its own thread count set to 1, so this file links
// nothing: it looks the CBLAS functions up by name on first use. A product with a short side
// (a batch of 64 rows or fewer) runs the register-tiled product of gemm_tiles.h instead, which is
// faster there, as is every product where the functions are absent (the package missing, a build
// used outside opsdk) or the sizes exceed OpenBLAS's 32-bit interface.
#include "gemm_op.h"

#include "gemm_tiles.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <type_traits>

namespace opsdk_op_gemm {
namespace detail {

// CBLAS's enum values (cblas.h): row-major storage, no transpose, transpose.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

// cblas_?gemm of the 32-bit-integer interface, as scipy-openblas32 names it.
template <typename T>
using GemmFn = void (*)(int order, int transa, int transb, int m, int n, int k, T alpha, const T* a,
                        int lda, const T* b, int ldb, T beta, T* c, int ldc);

// The library's gemm for T, looked up once it is there (host_blas.py loads it before the first
// call); nullptr while it is not.
template <typename T>
GemmFn<T> blas_gemm() {
    static std::atomic<GemmFn<T>> found{nullptr};
    GemmFn<T> fn = found.load(std::memory_order_acquire);
    if (fn == nullptr) {
        const char* name = std::is_same<T, float>::value ? "scipy_cblas_sgemm" : "scipy_cblas_dgemm";
        fn = reinterpret_cast<GemmFn<T>>(dlsym(RTLD_DEFAULT, name));
        if (fn != nullptr) found.store(fn, std::memory_order_release);
    }
    return fn;
}

// The product's sizes: c is m x n, k the contracted size; a and b as stored (row-major, leading
// dimensions lda = a's columns, ldb = b's columns).
struct Problem {
    int64_t m, n, k, lda, ldb;
    bool ta, tb;
};

template <typename T>
void panel(const Problem& p, const T* a, const T* b, T* c, int64_t r0, int64_t r1, int64_t c0,
           int64_t c1) {
    const GemmFn<T> gemm = blas_gemm<T>();
    // Rows r0.. of op(a): a's rows, or (transposed) its columns; columns c0.. of op(b) likewise.
    const T* ap = p.ta ? a + r0 : a + r0 * p.lda;
    const T* bp = p.tb ? b + c0 * p.ldb : b + c0;
    gemm(kRowMajor, p.ta ? kTrans : kNoTrans, p.tb ? kTrans : kNoTrans, static_cast<int>(r1 - r0),
         static_cast<int>(c1 - c0), static_cast<int>(p.k), T(1), ap, static_cast<int>(p.lda), bp,
         static_cast<int>(p.ldb), T(0), c + r0 * p.n + c0, static_cast<int>(p.n));
}

// Blocks of 16 rows or columns: a 64-byte line of floats, so no two threads write one line of c.
constexpr int64_t kBlock = 16;
using gemm_tiles::kMinFlopsPerThread;
// A side this short (c's rows, or the contracted size) may go to the tiled product.
constexpr int64_t kShort = 64;

// The tiled product (gemm_tiles.h) where it is the faster, by measurement (float32, 2 threads):
// a short side, c's columns filling two panels or more (the threads split them: 50 x 3136 @
// 3136 x 1024 in 0.84 of the time, 1 x 3136 @ 3136 x 1024 in 0.57, but a bias's gradient, 1 x
// 39200 @ 39200 x 32, in 1.6 times it), and with b transposed a's rows filling at least half a
// vector (packed as its columns, in panels only as wide as they need: 50 rows 0.82; one thread,
// float32, g @ w^T with g 8 x 784 and w 512 x 784 0.64, 16 x 192 and 512 x 192 0.58, float64 4 x
// 784 and 512 x 784 0.55). Only where it was measured: built for
// AVX-512. A portable build (OPSDK_PORTABLE) or an AVX2 machine keeps OpenBLAS, which picks its
// kernels for the CPU it runs on. Also every product where OpenBLAS is absent or cannot take the
// sizes (its interface is 32-bit).
//
// A short contracted side with a c larger than kTiledOutBytes goes to OpenBLAS all the same: the
// tiled product's threads each write a panel of columns down every row of c, OpenBLAS's here a
// run of whole rows. Alone and with c in cache the tiled one was the faster (the CNN's weight
// gradient, (50 x 3136)^T @ 50 x 1024, 12.8 MB: 1.06 ms against 1.25), but in a training step,
// where c is new memory and the caches hold the step's other arrays, it took 2.16-2.33 ms
// against 1.69-1.94 (medians of 60 steps, five alternating runs).
constexpr int64_t kTiledOutBytes = int64_t(4) << 20;

template <typename T>
bool tiled(const Problem& p) {
#if defined(__AVX512F__)
    constexpr int64_t panel = gemm_tiles::nr<T>(), lanes = conv2d_common::lanes<T>();
    const bool short_k = p.k <= kShort && p.m * p.n * int64_t(sizeof(T)) <= kTiledOutBytes;
    const bool faster = p.tb ? p.m <= kShort && 2 * p.m >= lanes
                             : (p.m <= kShort || short_k) && p.n >= 2 * panel;
#else
    const bool faster = false;
#endif
    const bool fits = std::max({p.m, p.n, p.k, p.lda, p.ldb}) <= INT_MAX;
    return faster || !fits || blas_gemm<T>() == nullptr;
}

template <typename T>
void run(const Problem& p, const T* a, const T* b, T* c) {
    if (tiled<T>(p)) {
        gemm_tiles::product<T>(p.m, p.n, p.k, a, p.lda, p.ta, b, p.ldb, p.tb, c);
        return;
    }
    if (p.m == 0 || p.n == 0) return;
    if (p.k == 0) {
        std::fill(c, c + p.m * p.n, T(0));  // an empty sum
        return;
    }
    const bool by_columns = p.n >= p.m;
    const int64_t along = by_columns ? p.n : p.m, across = by_columns ? p.m : p.n;
    const int64_t blocks = (along + kBlock - 1) / kBlock;
    const int64_t block_flops = 2 * kBlock * across * p.k;
    const int64_t grain = std::max<int64_t>(1, kMinFlopsPerThread / std::max<int64_t>(block_flops, 1));
    opsdk::parallel_for(0, blocks, grain, [&](int64_t lo, int64_t hi) {
        const int64_t from = lo * kBlock, to = std::min(hi * kBlock, along);
        if (by_columns) {
            panel(p, a, b, c, 0, p.m, from, to);
        } else {
            panel(p, a, b, c, from, to, 0, p.n);
        }
    });
}

}  // namespace detail

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& d, const Attrs& attrs) {
    const bool ta = attrs.transpose_a != 0, tb = attrs.transpose_b != 0;
    const int64_t k = ta ? d.a0 : d.a1, kb = tb ? d.b1 : d.b0;
    OPSDK_REQUIRE(k == kb, "op(a) is " << (ta ? d.a1 : d.a0) << " x " << k << " but op(b) is " << kb
                  << " x " << (tb ? d.b0 : d.b1) << " (transpose_a=" << attrs.transpose_a
                  << ", transpose_b=" << attrs.transpose_b << "): the contracted sizes must agree");
    const detail::Problem p{ta ? d.a1 : d.a0, tb ? d.b0 : d.b1, k, d.a1, d.b1, ta, tb};
    detail::run<T>(p, in.a.data, in.b.data, out.c.data);
}

}  // namespace opsdk_op_gemm
