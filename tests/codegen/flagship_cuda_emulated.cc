// Checks the flagship's CUDA kernels (opdefs/pairwise_manhattan*_cuda.cu) on the CPU through
// tests/codegen/cuda_emulation.h, against float64 loops of the definitions. Reads one case a line
// from stdin, "fwd|grad float32|float64 n m p special grid.x grid.y grid.z", the grid being the
// declared launch's for those sizes (computed by the test from the YAML); prints "FAIL ..." for
// each wrong case, then "checked N".
#include "cuda_emulation.h"

#include "opdefs/pairwise_manhattan_cuda.cu"
#include "opdefs/pairwise_manhattan_grad_cuda.cu"

#include <cstdio>
#include <iostream>
#include <random>
#include <string>

namespace {

double sign_of(double d) { return d > 0 ? 1.0 : (d < 0 ? -1.0 : (d == 0 ? 0.0 : d)); }

// Worst error of got against want, scaled by 1 + |scale|; infinite where a NaN or infinity of
// want is missed, or where an unwritten (NaN-poisoned) entry remains.
double worst_error(const std::vector<double>& got, const std::vector<double>& want,
                   const std::vector<double>& scale) {
    double worst = 0;
    for (size_t e = 0; e < got.size(); ++e) {
        double err;
        if (std::isnan(want[e])) err = std::isnan(got[e]) ? 0 : INFINITY;
        else if (std::isinf(want[e])) err = got[e] == want[e] ? 0 : INFINITY;
        else if (std::isinf(scale[e])) err = std::isnan(got[e]) ? INFINITY : 0;
        else err = std::fabs(got[e] - want[e]) / (1 + std::fabs(scale[e]));
        if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
    }
    return worst;
}

// Inputs: small integers (ties: x == y, where sign(0) = 0) with a NaN, infinities on both sides
// and non-finite weights when special, else uniform in [-2, 2).
template <typename T>
void draw(int64_t n, int64_t m, int64_t p, bool special, std::vector<T>& x, std::vector<T>& y,
          std::vector<T>& g) {
    std::mt19937 rng(static_cast<unsigned>(n * 7 + m * 3 + p));
    std::uniform_real_distribution<double> u(-2, 2);
    x.resize(n * p), y.resize(m * p), g.resize(n * m);
    for (auto& e : x) e = static_cast<T>(special ? std::round(u(rng)) : u(rng));
    for (auto& e : y) e = static_cast<T>(special ? std::round(u(rng)) : u(rng));
    for (auto& e : g) e = static_cast<T>(u(rng));
    if (special && n > 13 && m > 13 && p > 7) {
        x[2 * p + 3] = NAN, x[5 * p + 7] = INFINITY, y[4 * p + 7] = INFINITY, y[9 * p + 1] = -INFINITY;
        g[3 * m + 6] = INFINITY, g[11 * m + 2] = NAN, g[13 * m + 13] = -INFINITY;
    }
}

template <typename T>
double forward(int64_t n, int64_t m, int64_t p, bool special, dim3 grid) {
    std::vector<T> x, y, g;
    draw(n, m, p, special, x, y, g);
    std::vector<T> z(n * m, T(NAN));
    emulate_launch(grid, dim3(16, 16), [&] {
        opsdk_op_pairwise_manhattan::detail::forward_kernel<T>(x.data(), y.data(), z.data(), n, m, p);
    });
    std::vector<double> got(z.begin(), z.end()), want(n * m);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) {
            double s = 0;
            for (int64_t k = 0; k < p; ++k) s += std::fabs(double(x[i * p + k]) - double(y[j * p + k]));
            want[i * m + j] = s;
        }
    return worst_error(got, want, want);
}

template <typename T>
double gradient(int64_t n, int64_t m, int64_t p, bool special, dim3 grid) {
    std::vector<T> x, y, g;
    draw(n, m, p, special, x, y, g);
    std::vector<T> gx(n * p, T(NAN)), gy(m * p, T(NAN));
    emulate_launch(grid, dim3(16, 16), [&] {
        opsdk_op_pairwise_manhattan_grad::detail::grad_kernel<T>(x.data(), y.data(), g.data(), gx.data(),
                                                                 gy.data(), n, m, p);
    });
    std::vector<double> got(gx.begin(), gx.end()), want, scale;
    got.insert(got.end(), gy.begin(), gy.end());
    for (int second = 0; second < 2; ++second) {  // grad_x, then grad_y = -sum_i w * sign(x - y)
        const int64_t na = second ? m : n, nb = second ? n : m;
        for (int64_t a = 0; a < na; ++a)
            for (int64_t k = 0; k < p; ++k) {
                double s = 0, sc = 0;
                for (int64_t b = 0; b < nb; ++b) {
                    const double w = second ? g[b * m + a] : g[a * m + b];
                    const double d = second ? double(x[b * p + k]) - double(y[a * p + k])
                                            : double(x[a * p + k]) - double(y[b * p + k]);
                    s += (second ? -w : w) * sign_of(d);
                    sc += std::fabs(w);
                }
                want.push_back(s), scale.push_back(sc);
            }
    }
    return worst_error(got, want, scale);
}

}  // namespace

int main() {
    std::string op, dtype;
    int64_t n, m, p;
    int special, count = 0;
    unsigned gx, gy, gz;
    while (std::cin >> op >> dtype >> n >> m >> p >> special >> gx >> gy >> gz) {
        const bool f32 = dtype == "float32";
        const dim3 grid(gx, gy, gz);
        double err;
        if (op == "fwd")
            err = f32 ? forward<float>(n, m, p, special, grid) : forward<double>(n, m, p, special, grid);
        else
            err = f32 ? gradient<float>(n, m, p, special, grid) : gradient<double>(n, m, p, special, grid);
        if (!(err <= (f32 ? 3e-5 : 1e-12)))  // the tolerances of bench/tune_pairwise_manhattan_gpu.cu
            std::printf("FAIL %s %s n=%ld m=%ld p=%ld%s: worst scaled error %.3g\n", op.c_str(),
                        dtype.c_str(), long(n), long(m), long(p), special ? " special" : "", err);
        ++count;
    }
    std::printf("checked %d\n", count);
    return 0;
}
