// Tuning harness for the pairwise_manhattan CUDA kernels: the op's own forward and gradient
// kernels (opdefs/*_cuda.cu, included as they are) beside candidate variants and the op's kernels
// from before their port ("old"; both in bench/tune_pairwise_manhattan_gpu_kernels.cuh). Every
// variant is checked before it is timed: its output is poisoned (NaN) first, then compared element
// by element with a float64 reference (a CPU loop on the small shapes; the op's kernel run in
// float64 on the large ones, itself spot-checked against a CPU loop); a failed check prints WRONG.
// Only the timed rows and the failures are listed. Times are medians of 20 launches after 3
// warm-ups, by CUDA events.
// bench/tune_pairwise_manhattan_gpu.sh builds and runs it:
//
//   bash bench/tune_pairwise_manhattan_gpu.sh [ARCH] [FILTER...]
//
// A row runs when every FILTER is a substring of its variant, dtype or case (e.g. "fwd float32",
// "grad p=64"). Exit status 1 when any check failed.
//
// "% limit" is the bench's (bench/bench_pairwise_manhattan_gpu.py): n*m*p elements per second
// over the card's add rate / 2 (FP32 128, FP64 64 lanes per SM on sm_90, x SMs x clock). The
// gradient visits every element twice (once per output), so its ceiling on that scale is 50 %.
#include "opdefs/pairwise_manhattan_cuda.cu"
#include "opdefs/pairwise_manhattan_grad_cuda.cu"
#include "tune_pairwise_manhattan_gpu_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CHECK_CUDA(expr)                                                                         \
    do {                                                                                         \
        cudaError_t e_ = (expr);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
            std::exit(2);                                                                        \
        }                                                                                        \
    } while (0)

namespace {

// A device buffer that frees itself.
template <typename T>
struct Buf {
    T* data = nullptr;
    size_t size = 0;
    explicit Buf(size_t n) : size(n) { CHECK_CUDA(cudaMalloc(&data, std::max<size_t>(n, 1) * sizeof(T))); }
    explicit Buf(const std::vector<T>& h) : Buf(h.size()) {
        if (size) CHECK_CUDA(cudaMemcpy(data, h.data(), size * sizeof(T), cudaMemcpyHostToDevice));
    }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    ~Buf() { cudaFree(data); }
    std::vector<double> host() const {
        std::vector<T> h(size);
        if (size) CHECK_CUDA(cudaMemcpy(h.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost));
        return std::vector<double>(h.begin(), h.end());
    }
    void poison() { CHECK_CUDA(cudaMemset(data, 0xff, std::max<size_t>(size, 1) * sizeof(T))); }
};

struct Case {
    int64_t n, m, p;
    bool special;  // small integer inputs (ties), NaN and infinities in x, y and grad_z
    bool timed;
    std::string label() const {
        char s[96];
        std::snprintf(s, sizeof s, "n=%ld m=%ld p=%ld%s", long(n), long(m), long(p), special ? " ties/NaN/inf" : "");
        return s;
    }
};

template <typename T>
struct Problem {
    Case c;
    std::vector<T> x, y, g;
    Buf<T> dx, dy, dg;
    Problem(const Case& cs, std::vector<T> x_, std::vector<T> y_, std::vector<T> g_)
        : c(cs), x(std::move(x_)), y(std::move(y_)), g(std::move(g_)), dx(x), dy(y), dg(g) {}
};

template <typename T>
std::vector<T> draw(size_t count, std::mt19937& rng, bool integers) {
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    std::vector<T> v(count);
    for (auto& e : v) e = static_cast<T>(integers ? std::round(u(rng)) : u(rng));
    return v;
}

// Inputs for a case; the special one plants a NaN, a shared infinity (inf - inf = NaN) and
// non-finite weights among ties.
template <typename T>
Problem<T> make_problem(const Case& c, std::mt19937& rng) {
    auto x = draw<T>(c.n * c.p, rng, c.special), y = draw<T>(c.m * c.p, rng, c.special);
    auto g = draw<T>(c.n * c.m, rng, false);
    if (c.special) {
        const T inf = INFINITY;
        x[2 * c.p + 3] = NAN;
        x[5 * c.p + 7] = inf, y[4 * c.p + 7] = inf;
        y[9 * c.p + 1] = -inf;
        g[3 * c.m + 6] = inf, g[11 * c.m + 2] = NAN, g[13 * c.m + 13] = -inf;
    }
    return Problem<T>(c, std::move(x), std::move(y), std::move(g));
}

double sign_of(double d) { return d > 0 ? 1.0 : (d < 0 ? -1.0 : (d == 0 ? 0.0 : d)); }

double cpu_z(const std::vector<double>& x, const std::vector<double>& y, int64_t p, int64_t i, int64_t j) {
    double s = 0;
    for (int64_t k = 0; k < p; ++k) s += std::fabs(x[i * p + k] - y[j * p + k]);
    return s;
}

// grad_x[i, k] (second = false) or grad_y[j, k] (second = true), and the sum of |w| as its scale.
double cpu_grad(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& g,
                const Case& c, bool second, int64_t a, int64_t k, double* scale) {
    double s = 0, sc = 0;
    const int64_t nb = second ? c.n : c.m;
    for (int64_t b = 0; b < nb; ++b) {
        const double w = second ? g[b * c.m + a] : g[a * c.m + b];
        const double d = second ? y[a * c.p + k] - x[b * c.p + k] : x[a * c.p + k] - y[b * c.p + k];
        s += w * sign_of(d);
        sc += std::fabs(w);
    }
    *scale = sc;
    return s;
}

// The float64 reference of a case: z, then grad_x and grad_y, and each entry's error scale.
struct Reference {
    std::vector<double> z, grad, z_scale, grad_scale;
};

// The op's launches, as opdefs/pairwise_manhattan*.yaml declare them.
template <typename T>
void op_forward(const T* x, const T* y, T* z, int64_t n, int64_t m, int64_t p) {
    namespace f = opsdk_op_pairwise_manhattan::detail;
    const dim3 grid((m + f::kCols - 1) / f::kCols, (n + f::kRows - 1) / f::kRows, 2), block(f::kSide, f::kSide);
    f::forward_kernel<T><<<grid, block>>>(x, y, z, n, m, p);
}

template <typename T>
void op_grad(const T* x, const T* y, const T* g, T* gx, T* gy, int64_t n, int64_t m, int64_t p) {
    namespace b = opsdk_op_pairwise_manhattan_grad::detail;
    const dim3 grid((p + b::kTile - 1) / b::kTile, (std::max(n, m) + b::kTile - 1) / b::kTile, 2);
    b::grad_kernel<T><<<grid, dim3(b::kThreadsSide, b::kThreadsSide)>>>(x, y, g, gx, gy, n, m, p);
}

// The op's launches before the port (tune::old_fwd, tune::old_grad).
template <typename T>
void old_forward(const T* x, const T* y, T* z, int64_t n, int64_t m, int64_t p) {
    namespace f = tune::old_fwd;
    const dim3 grid((m + f::kTile - 1) / f::kTile, (n + f::kTile - 1) / f::kTile), block(f::kThreadsSide, f::kThreadsSide);
    f::forward_kernel<T><<<grid, block>>>(x, y, z, n, m, p);
}

template <typename T>
void old_grad(const T* x, const T* y, const T* g, T* gx, T* gy, int64_t n, int64_t m, int64_t p) {
    namespace b = tune::old_grad;
    const dim3 block(b::kThreadsSide, b::kThreadsSide);
    b::grad_kernel<T, false><<<dim3((p + b::kTile - 1) / b::kTile, (n + b::kTile - 1) / b::kTile), block>>>(x, y, g, gx, n, m, p);
    b::grad_kernel<T, true><<<dim3((p + b::kTile - 1) / b::kTile, (m + b::kTile - 1) / b::kTile), block>>>(y, x, g, gy, m, n, p);
}

std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
std::vector<double> widen(const std::vector<double>& v) { return v; }

// Small cases: a CPU loop over every entry. Large ones: the op's kernels in float64 (on the same,
// rounded inputs, so every sign agrees exactly), spot-checked against the CPU loop.
template <typename T>
Reference reference(const Problem<T>& pr, bool* ok) {
    const Case& c = pr.c;
    const auto x = widen(pr.x), y = widen(pr.y), g = widen(pr.g);
    Reference r;
    r.z.resize(c.n * c.m), r.grad.resize((c.n + c.m) * c.p), r.grad_scale.resize(r.grad.size());
    const bool cpu = c.n * c.m * c.p <= (int64_t(1) << 25);
    if (!cpu) {
        Buf<double> dx(x), dy(y), dg(g), dz(r.z.size()), dgx(c.n * c.p), dgy(c.m * c.p);
        op_forward<double>(dx.data, dy.data, dz.data, c.n, c.m, c.p);
        op_grad<double>(dx.data, dy.data, dg.data, dgx.data, dgy.data, c.n, c.m, c.p);
        CHECK_CUDA(cudaDeviceSynchronize());
        r.z = dz.host();
        const auto gx = dgx.host(), gy = dgy.host();
        std::copy(gx.begin(), gx.end(), r.grad.begin());
        std::copy(gy.begin(), gy.end(), r.grad.begin() + gx.size());
    }
    std::mt19937 pick(1);
    double worst = 0;
    for (int64_t i = 0; i < c.n; ++i)
        for (int64_t j = 0; j < c.m; ++j)
            if (cpu || pick() % 4096 == 0) {
                const double want = cpu_z(x, y, c.p, i, j);
                if (!cpu) worst = std::max(worst, std::fabs(r.z[i * c.m + j] - want) / (1 + want));
                r.z[i * c.m + j] = want;
            }
    for (int64_t e = 0; e < int64_t(r.grad.size()); ++e) {
        const bool second = e >= c.n * c.p;
        const int64_t a = (second ? e - c.n * c.p : e) / c.p, k = e % c.p;
        if (cpu || pick() % 1024 == 0) {
            const double want = cpu_grad(x, y, g, c, second, a, k, &r.grad_scale[e]);
            if (!cpu) worst = std::max(worst, std::fabs(r.grad[e] - want) / (1 + r.grad_scale[e]));
            r.grad[e] = want;
        }
    }
    if (!cpu) {
        for (int64_t i = 0; i < c.n; ++i) {  // scale of grad_x rows and grad_y rows
            double s = 0;
            for (int64_t j = 0; j < c.m; ++j) s += std::fabs(g[i * c.m + j]);
            for (int64_t k = 0; k < c.p; ++k) r.grad_scale[i * c.p + k] = s;
        }
        for (int64_t j = 0; j < c.m; ++j) {
            double s = 0;
            for (int64_t i = 0; i < c.n; ++i) s += std::fabs(g[i * c.m + j]);
            for (int64_t k = 0; k < c.p; ++k) r.grad_scale[(c.n + j) * c.p + k] = s;
        }
        *ok = worst <= 1e-12;
        if (!*ok) std::printf("WRONG REFERENCE: the op's float64 kernels are off the CPU loop by %.3g (%s)\n", worst, c.label().c_str());
    }
    r.z_scale = r.z;
    return r;
}

// Worst scaled error of got against want; NaN where a finite value was wanted (an unwritten,
// poisoned entry included) or where got differs from a non-finite want.
double worst_error(const std::vector<double>& got, const std::vector<double>& want,
                   const std::vector<double>& scale, int64_t* where) {
    double worst = 0;
    for (size_t e = 0; e < got.size(); ++e) {
        double err;
        if (std::isnan(want[e])) err = std::isnan(got[e]) ? 0 : INFINITY;
        else if (std::isinf(want[e])) err = got[e] == want[e] ? 0 : INFINITY;
        else err = std::isinf(scale[e]) && !std::isnan(got[e]) ? 0 : std::fabs(got[e] - want[e]) / (1 + std::fabs(scale[e]));
        if (!(err <= worst)) {
            worst = std::isnan(err) ? INFINITY : err;
            *where = int64_t(e);
        }
    }
    return worst;
}

// ---------------------------------------------------------------------------------------------
// The variants. A forward launch writes z; a gradient launch writes grad_x and grad_y, with a
// workspace of slices * (n + m) * p elements where it splits the b axis.
// ---------------------------------------------------------------------------------------------
template <typename T>
using FwdLaunch = void (*)(const T*, const T*, T*, int64_t, int64_t, int64_t);

template <typename T, int TM, int TN, int KC, bool kVec, int kMinBlocks = 1>
void tuned_forward(const T* x, const T* y, T* z, int64_t n, int64_t m, int64_t p) {
    using S = tune::FwdShape<T, TM, TN, KC, kVec>;
    tune::forward<T, TM, TN, KC, kVec, kMinBlocks>
        <<<dim3((m + S::BN - 1) / S::BN, (n + S::BM - 1) / S::BM), dim3(tune::kSide, tune::kSide)>>>(x, y, z, n, m, p);
}

template <typename T>
struct FwdVariant {
    const char* name;
    FwdLaunch<T> launch;
};

template <typename T>
std::vector<FwdVariant<T>> forward_variants() {
    std::vector<FwdVariant<T>> v = {{"fwd.op", op_forward<T>},
                                    {"fwd.old", old_forward<T>},
                                    {"fwd.4x4v.k16", tuned_forward<T, 4, 4, 16, true>},
                                    {"fwd.8x8v.k8", tuned_forward<T, 8, 8, 8, true>},
                                    {"fwd.8x8v.k16", tuned_forward<T, 8, 8, 16, true>},
                                    {"fwd.8x4v.k8", tuned_forward<T, 8, 4, 8, true>}};
    // Two blocks per SM leave 128 registers a thread: room for float's 8 x 8 tile, not double's.
    if constexpr (sizeof(T) == 4) v.push_back({"fwd.8x8v.k8.2blk", tuned_forward<T, 8, 8, 8, true, 2>});
    return v;
}

struct GradVariant {
    const char* name;
    int mode;        // 0: the op's launches; 1: one launch, full definition; 2: cheap sign weight;
                     // 3: the op's launches from before the port
    int waves;       // 0: no split; else split b until the grid holds `waves` x SMs blocks
};

const GradVariant kGradVariants[] = {{"grad.op", 0, 0},
                                     {"grad.old", 3, 0},
                                     {"grad.onelaunch", 1, 0},
                                     {"grad.split8", 1, 8},
                                     {"grad.split8.cheap", 2, 8},
                                     {"grad.split16.cheap", 2, 16}};

int g_sms = 0;

template <typename T>
tune::GradArgs<T> grad_args(const GradVariant& v, const Problem<T>& pr, T* gx, T* gy, T* work) {
    const Case& c = pr.c;
    const int64_t tiles = 2 * ((c.p + tune::kGTile - 1) / tune::kGTile) * ((std::max(c.n, c.m) + tune::kGTile - 1) / tune::kGTile);
    const int64_t nb = std::max(c.n, c.m);
    int64_t slices = v.waves ? std::max<int64_t>(1, (int64_t(v.waves) * g_sms + tiles - 1) / tiles) : 1;
    slices = std::min<int64_t>(slices, std::max<int64_t>(1, nb / (4 * tune::kGChunk)));  // >= 4 chunks each
    int64_t len = (nb + slices - 1) / slices;
    len = (len + tune::kGChunk - 1) / tune::kGChunk * tune::kGChunk;
    slices = std::max<int64_t>(1, (nb + len - 1) / len);
    return {pr.dx.data, pr.dy.data, pr.dg.data, slices > 1 ? work : gx, gy, c.n, c.m, c.p, int(slices), len};
}

template <typename T>
void run_grad(const GradVariant& v, const tune::GradArgs<T>& q, T* gx, T* gy) {
    if (v.mode == 0) return op_grad<T>(q.x, q.y, q.g, gx, gy, q.n, q.m, q.p);
    if (v.mode == 3) return old_grad<T>(q.x, q.y, q.g, gx, gy, q.n, q.m, q.p);
    const dim3 grid((q.p + tune::kGTile - 1) / tune::kGTile, (std::max(q.n, q.m) + tune::kGTile - 1) / tune::kGTile, 2 * q.slices);
    const dim3 block(tune::kSide, tune::kSide);
    if (v.mode == 1) tune::grad_both<T, false><<<grid, block>>>(q);
    else tune::grad_both<T, true><<<grid, block>>>(q);
    if (q.slices > 1) tune::reduce_slices<T><<<4 * g_sms, 256>>>(q.gx, gx, gy, q.n * q.p, q.m * q.p, q.slices);
}

// ---------------------------------------------------------------------------------------------
// Timing and the table.
// ---------------------------------------------------------------------------------------------
template <typename F>
double median_ms(F&& f) {
    for (int w = 0; w < 3; ++w) f();
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < 20; ++r) {
        CHECK_CUDA(cudaEventRecord(a));
        f();
        CHECK_CUDA(cudaEventRecord(b));
        CHECK_CUDA(cudaEventSynchronize(b));
        float t = 0;
        CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CHECK_CUDA(cudaEventDestroy(a));
    CHECK_CUDA(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return 0.5 * (ms[9] + ms[10]);
}

struct Card {
    int sms = 0;
    double clock_hz = 0;
    double elements_per_s(bool f64) const { return sms * (f64 ? 64.0 : 128.0) * clock_hz / 2.0; }
};
Card g_card;
int g_wrong = 0, g_passed_untimed = 0;

bool wanted(const std::vector<std::string>& filters, const std::string& variant, const char* dtype, const std::string& label) {
    for (const auto& f : filters)
        if (variant.find(f) == std::string::npos && std::string(dtype).find(f) == std::string::npos &&
            label.find(f) == std::string::npos)
            return false;
    return true;
}

void row(const std::string& variant, const char* dtype, const Case& c, double err, int64_t where, double tol, double ms) {
    const bool ok = err <= tol;
    if (!ok) ++g_wrong;
    if (ok && !c.timed) {  // the small shapes' passes are counted, not listed: the table stays short
        ++g_passed_untimed;
        return;
    }
    const double elems = double(c.n) * c.m * c.p;
    char timing[96] = "";
    if (c.timed && ok)
        std::snprintf(timing, sizeof timing, "%9.4f %9.0f %7.1f%%", ms, 3.0 * elems / ms / 1e6,
                      100.0 * elems / (ms * 1e-3) / g_card.elements_per_s(dtype[5] == '6'));
    else if (c.timed)
        std::snprintf(timing, sizeof timing, "%9s %9s %8s", "-", "-", "-");
    std::printf("%-20s %-8s %-28s %-28s err %.2e%s\n", variant.c_str(), dtype, c.label().c_str(), timing, err,
                ok ? "" : "   <<<<<<<<<< WRONG");
    if (!ok) std::printf("    WRONG: %s %s %s: worst scaled error %.3g (tolerance %.1g) at flat index %ld\n",
                         variant.c_str(), dtype, c.label().c_str(), err, tol, long(where));
    std::fflush(stdout);
}

// False (and WRONG counted) where a launch was refused, e.g. for its registers or shared memory;
// an error inside a kernel leaves the context unusable, and CHECK_CUDA ends the run.
bool launched(const char* variant) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        ++g_wrong;
        std::printf("%-20s WRONG: launch failed: %s\n", variant, cudaGetErrorString(e));
        return false;
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    return true;
}

template <typename T>
void run_case(const Case& c, const std::vector<std::string>& filters, std::mt19937& rng) {
    const char* dtype = sizeof(T) == 4 ? "float32" : "float64";
    auto pr = make_problem<T>(c, rng);
    bool ref_ok = true;
    const Reference ref = reference(pr, &ref_ok);
    if (!ref_ok) ++g_wrong;
    const double ftol = sizeof(T) == 4 ? 3e-5 : 1e-12, gtol = sizeof(T) == 4 ? 3e-5 : 1e-12;
    Buf<T> z(c.n * c.m), gx(c.n * c.p), gy(c.m * c.p);
    for (const auto& v : forward_variants<T>()) {
        if (!wanted(filters, v.name, dtype, c.label())) continue;
        z.poison();
        v.launch(pr.dx.data, pr.dy.data, z.data, c.n, c.m, c.p);
        if (!launched(v.name)) continue;
        int64_t where = -1;
        const double err = worst_error(z.host(), ref.z, ref.z_scale, &where);
        const double ms = c.timed ? median_ms([&] { v.launch(pr.dx.data, pr.dy.data, z.data, c.n, c.m, c.p); }) : 0;
        row(v.name, dtype, c, err, where, ftol, ms);
    }
    for (const auto& v : kGradVariants) {
        if (!wanted(filters, v.name, dtype, c.label())) continue;
        tune::GradArgs<T> probe = grad_args<T>(v, pr, gx.data, gy.data, nullptr);
        Buf<T> work(probe.slices > 1 ? size_t(probe.slices) * (c.n + c.m) * c.p : 0);
        const auto q = grad_args<T>(v, pr, gx.data, gy.data, work.data);
        gx.poison(), gy.poison(), work.poison();
        run_grad<T>(v, q, gx.data, gy.data);
        if (!launched(v.name)) continue;
        auto got = gx.host();
        const auto got_y = gy.host();
        got.insert(got.end(), got_y.begin(), got_y.end());
        int64_t where = -1;
        const double err = worst_error(got, ref.grad, ref.grad_scale, &where);
        const double ms = c.timed ? median_ms([&] { run_grad<T>(v, q, gx.data, gy.data); }) : 0;
        std::string name = v.name;
        if (q.slices > 1) name += "/" + std::to_string(q.slices);
        row(name, dtype, c, err, where, gtol, ms);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> filters(argv + 1, argv + argc);
    int dev = 0, clock_khz = 0;
    cudaDeviceProp props;
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK_CUDA(cudaGetDeviceProperties(&props, dev));
    CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
    g_sms = g_card.sms = props.multiProcessorCount;
    g_card.clock_hz = clock_khz * 1e3;
    std::printf("%s: sm_%d%d, %d SMs, %.0f MHz; limit %.2f T elements/s float32, %.2f float64%s\n", props.name,
                props.major, props.minor, g_card.sms, clock_khz / 1e3, g_card.elements_per_s(false) / 1e12,
                g_card.elements_per_s(true) / 1e12, props.major == 9 ? "" : " (lanes per SM are sm_90's: % limit is off)");
    std::printf("%-20s %-8s %-28s %9s %9s %8s\n", "variant", "dtype", "case", "ms", "GF/s", "% limit");
    const Case cases[] = {{1, 1, 1, false, false},        {65, 63, 17, false, false},
                          {130, 70, 1000, false, false},  {3, 1000, 70, false, false},
                          {37, 45, 19, true, false},      {4096, 4096, 256, false, true},
                          {2048, 2048, 64, false, true},  {2048, 2048, 256, false, true},
                          {1024, 1024, 256, false, true}};
    std::mt19937 rng(0);
    for (const auto& c : cases) {
        const bool grad_case = c.n != 4096, fwd_case = !c.timed || c.n == 4096;
        std::vector<std::string> f = filters;
        if (!grad_case) f.push_back("fwd.");   // forward timed at 4096 only, gradient at the rest
        if (!fwd_case) f.push_back("grad.");
        run_case<float>(c, f, rng);
        run_case<double>(c, f, rng);
    }
    std::printf("\n%d checks on small shapes (ties, NaN, infinities included) passed, not listed\n", g_passed_untimed);
    std::printf(g_wrong ? "%d CHECKS WRONG\n" : "all checks passed\n", g_wrong);
    return g_wrong ? 1 : 0;
}
