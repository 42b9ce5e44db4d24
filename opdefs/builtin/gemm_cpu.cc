// gemm, CPU: c = op(a) @ op(b) on the session's thread budget, one BLAS call per thread.
//
// c is cut into panels of whole 16-column (or 16-row) blocks along its longer side, one panel per
// thread of opsdk::parallel_for, and each thread runs a single-threaded gemm on its panel. The
// BLAS is OpenBLAS from the scipy-openblas32 package, which opsdk/runtime/kernels/host_blas.py
// loads into the global symbol scope with its own thread count set to 1, so this file links
// nothing: it looks the CBLAS functions up by name on first use. Where they are absent (the
// package missing, a build used outside opsdk), a plain loop computes the same product.
#include "gemm_op.h"

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

// Rows [r0, r1) and columns [c0, c1) of c (leading dimension p.n) by a plain loop over k, the
// innermost loop running along contiguous memory where the layout allows.
template <typename T>
void loop_panel(const Problem& p, const T* a, const T* b, T* c, int64_t r0, int64_t r1,
                int64_t c0, int64_t c1) {
    for (int64_t i = r0; i < r1; ++i) {
        T* row = c + i * p.n;
        std::fill(row + c0, row + c1, T(0));
        for (int64_t l = 0; l < p.k; ++l) {
            const T av = p.ta ? a[l * p.lda + i] : a[i * p.lda + l];
            if (p.tb) {
                for (int64_t j = c0; j < c1; ++j) row[j] += av * b[j * p.ldb + l];
            } else {
                const T* brow = b + l * p.ldb;
                for (int64_t j = c0; j < c1; ++j) row[j] += av * brow[j];
            }
        }
    }
}

template <typename T>
void panel(const Problem& p, const T* a, const T* b, T* c, int64_t r0, int64_t r1, int64_t c0,
           int64_t c1) {
    const GemmFn<T> gemm = blas_gemm<T>();
    if (gemm == nullptr) {
        loop_panel(p, a, b, c, r0, r1, c0, c1);
        return;
    }
    // Rows r0.. of op(a): a's rows, or (transposed) its columns; columns c0.. of op(b) likewise.
    const T* ap = p.ta ? a + r0 : a + r0 * p.lda;
    const T* bp = p.tb ? b + c0 * p.ldb : b + c0;
    gemm(kRowMajor, p.ta ? kTrans : kNoTrans, p.tb ? kTrans : kNoTrans, static_cast<int>(r1 - r0),
         static_cast<int>(c1 - c0), static_cast<int>(p.k), T(1), ap, static_cast<int>(p.lda), bp,
         static_cast<int>(p.ldb), T(0), c + r0 * p.n + c0, static_cast<int>(p.n));
}

// Blocks of 16 rows or columns: a 64-byte line of floats, so no two threads write one line of c.
constexpr int64_t kBlock = 16;
// Floating-point work per thread below which waking another costs more than it saves.
constexpr int64_t kMinFlopsPerThread = int64_t(1) << 21;

template <typename T>
void run(const Problem& p, const T* a, const T* b, T* c) {
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
    // The BLAS takes 32-bit sizes; the loop serves larger ones.
    const bool fits = std::max({p.m, p.n, p.k, p.lda, p.ldb}) <= INT_MAX;
    if (fits) {
        detail::run<T>(p, in.a.data, in.b.data, out.c.data);
    } else {
        detail::loop_panel<T>(p, in.a.data, in.b.data, out.c.data, 0, p.m, 0, p.n);
    }
}

}  // namespace opsdk_op_gemm
