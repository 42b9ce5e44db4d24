// Standalone GPU check of the pairwise_manhattan CUDA kernels: correctness against a float64 CPU
// reference over awkward shapes, then timings (CUDA events, median of repeats). Needs only nvcc
// and a GPU, no Python; bench/check_pairwise_manhattan_gpu.sh builds and runs it:
//
//   bash bench/check_pairwise_manhattan_gpu.sh        # exit status 0 when every check passes
//
// It calls the ops' cuda<T>() entry points, whose bodies are the host side opsdk generates from
// the launches the YAML declares (generated/cuda/*_cuda_kernel.cu): the script compiles those
// translation units beside this one and links them, so the check runs exactly the launches the
// op runs.
#include "pairwise_manhattan_op.h"
#include "pairwise_manhattan_grad_op.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace fwd = opsdk_op_pairwise_manhattan;
namespace bwd = opsdk_op_pairwise_manhattan_grad;

#define CHECK_CUDA(expr)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (expr);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
            std::exit(2);                                                                  \
        }                                                                                  \
    } while (0)

// A device copy of a host vector that frees itself.
template <typename T>
struct DeviceArray {
    T* data = nullptr;
    size_t size = 0;
    explicit DeviceArray(const std::vector<T>& host) : size(host.size()) {
        CHECK_CUDA(cudaMalloc(&data, std::max<size_t>(size, 1) * sizeof(T)));
        if (size) CHECK_CUDA(cudaMemcpy(data, host.data(), size * sizeof(T), cudaMemcpyHostToDevice));
    }
    ~DeviceArray() { cudaFree(data); }
    std::vector<T> to_host() const {
        std::vector<T> out(size);
        if (size) CHECK_CUDA(cudaMemcpy(out.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost));
        return out;
    }
};

template <typename T>
std::vector<T> uniform(size_t count, std::mt19937& rng, bool integers) {
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    std::vector<T> v(count);
    for (auto& e : v) e = static_cast<T>(integers ? std::round(u(rng)) : u(rng));
    return v;
}

struct Problem {
    int64_t n, m, p;
};

// Set by name: the generated Dims lists the dims in the order the inputs bind them (n, p, m).
template <typename D>
D dims_of(const Problem& pr) {
    D d;
    d.n = pr.n;
    d.m = pr.m;
    d.p = pr.p;
    return d;
}

// Runs both ops once on the GPU and compares sampled (or all) entries with float64 sums.
template <typename T>
bool check(const Problem& pr, std::mt19937& rng, bool integers) {
    const int64_t n = pr.n, m = pr.m, p = pr.p;
    auto x = uniform<T>(n * p, rng, integers), y = uniform<T>(m * p, rng, integers);
    auto g = uniform<T>(n * m, rng, false);
    DeviceArray<T> dx(x), dy(y), dg(g), dz(std::vector<T>(n * m)), dgx(std::vector<T>(n * p)),
        dgy(std::vector<T>(m * p));
    int64_t sx[2] = {n, p}, sy[2] = {m, p}, sz[2] = {n, m};
    fwd::Inputs<T> fin{{dx.data, sx, 2}, {dy.data, sy, 2}};
    fwd::Outputs<T> fout{{dz.data, sz, 2}};
    fwd::cuda<T>(fin, fout, dims_of<fwd::Dims>(pr), fwd::Attrs{}, 0);
    bwd::Inputs<T> bin{{dx.data, sx, 2}, {dy.data, sy, 2}, {dg.data, sz, 2}};
    bwd::Outputs<T> bout{{dgx.data, sx, 2}, {dgy.data, sy, 2}};
    bwd::cuda<T>(bin, bout, dims_of<bwd::Dims>(pr), bwd::Attrs{}, 0);
    CHECK_CUDA(cudaDeviceSynchronize());
    const auto z = dz.to_host(), gx = dgx.to_host(), gy = dgy.to_host();
    const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
    double worst = 0;
    auto note = [&](double got, double want, double scale) {
        worst = std::max(worst, std::fabs(got - want) / (1.0 + scale));
    };
    std::uniform_int_distribution<int64_t> pick(0, 1 << 30);
    const int64_t samples = 400;
    for (int64_t s = 0; s < std::min<int64_t>(samples, n * m); ++s) {
        const int64_t i = n * m <= samples ? s / m : pick(rng) % n, j = n * m <= samples ? s % m : pick(rng) % m;
        double want = 0;
        for (int64_t k = 0; k < p; ++k) want += std::fabs(double(x[i * p + k]) - double(y[j * p + k]));
        note(z[i * m + j], want, want);
    }
    auto sign = [](double d) { return double((d > 0) - (d < 0)); };
    for (int64_t s = 0; s < std::min<int64_t>(samples, n * p); ++s) {
        const int64_t i = pick(rng) % n, k = pick(rng) % p;
        double want = 0, scale = 0;
        for (int64_t j = 0; j < m; ++j) {
            want += g[i * m + j] * sign(double(x[i * p + k]) - double(y[j * p + k]));
            scale += std::fabs(g[i * m + j]);
        }
        note(gx[i * p + k], want, scale);
    }
    for (int64_t s = 0; s < std::min<int64_t>(samples, m * p); ++s) {
        const int64_t j = pick(rng) % m, k = pick(rng) % p;
        double want = 0, scale = 0;
        for (int64_t i = 0; i < n; ++i) {
            want -= g[i * m + j] * sign(double(x[i * p + k]) - double(y[j * p + k]));
            scale += std::fabs(g[i * m + j]);
        }
        note(gy[j * p + k], want, scale);
    }
    const bool ok = worst <= tol;
    std::printf("%-4s %s n=%-5ld m=%-5ld p=%-5ld%s worst scaled error %.3g\n", ok ? "ok" : "FAIL",
                sizeof(T) == 4 ? "float32" : "float64", long(n), long(m), long(p),
                integers ? " (ties)" : "       ", worst);
    return ok;
}

// Median milliseconds of `repeats` launches of f, timed with CUDA events.
template <typename F>
double median_ms(F&& f, int repeats) {
    f();
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<double> ms;
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    for (int r = 0; r < repeats; ++r) {
        CHECK_CUDA(cudaEventRecord(a));
        f();
        CHECK_CUDA(cudaEventRecord(b));
        CHECK_CUDA(cudaEventSynchronize(b));
        float t = 0;
        CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

template <typename T>
void timing(const Problem& pr, std::mt19937& rng) {
    const int64_t n = pr.n, m = pr.m, p = pr.p;
    DeviceArray<T> dx(uniform<T>(n * p, rng, false)), dy(uniform<T>(m * p, rng, false)),
        dg(uniform<T>(n * m, rng, false)), dz(std::vector<T>(n * m)), dgx(std::vector<T>(n * p)),
        dgy(std::vector<T>(m * p));
    int64_t sx[2] = {n, p}, sy[2] = {m, p}, sz[2] = {n, m};
    fwd::Inputs<T> fin{{dx.data, sx, 2}, {dy.data, sy, 2}};
    fwd::Outputs<T> fout{{dz.data, sz, 2}};
    bwd::Inputs<T> bin{{dx.data, sx, 2}, {dy.data, sy, 2}, {dg.data, sz, 2}};
    bwd::Outputs<T> bout{{dgx.data, sx, 2}, {dgy.data, sy, 2}};
    const double f_ms = median_ms([&] { fwd::cuda<T>(fin, fout, dims_of<fwd::Dims>(pr), fwd::Attrs{}, 0); }, 20);
    const double b_ms = median_ms([&] { bwd::cuda<T>(bin, bout, dims_of<bwd::Dims>(pr), bwd::Attrs{}, 0); }, 20);
    const double flops = 3.0 * n * m * p;
    std::printf("time %s n=%ld m=%ld p=%ld: forward %.3f ms (%.0f GF/s, 3nmp), gradient %.3f ms\n",
                sizeof(T) == 4 ? "float32" : "float64", long(n), long(m), long(p), f_ms,
                flops / f_ms / 1e6, b_ms);
}

int main() {
    std::mt19937 rng(0);
    const Problem shapes[] = {{0, 3, 4}, {3, 0, 4}, {3, 4, 0}, {1, 1, 1}, {7, 9, 13}, {65, 63, 17},
                              {64, 64, 64}, {130, 70, 1000}, {1000, 3, 5}, {3, 1000, 70},
                              {1024, 1024, 256}};
    bool ok = true;
    for (const auto& s : shapes) {
        ok &= check<float>(s, rng, false);
        ok &= check<double>(s, rng, false);
    }
    ok &= check<float>({77, 91, 33}, rng, true);
    ok &= check<double>({77, 91, 33}, rng, true);
    timing<float>({4096, 4096, 256}, rng);
    timing<double>({4096, 4096, 256}, rng);
    timing<float>({1024, 1024, 256}, rng);
    timing<float>({128, 128, 64}, rng);
    std::printf(ok ? "all checks passed\n" : "SOME CHECKS FAILED\n");
    return ok ? 0 : 1;
}
