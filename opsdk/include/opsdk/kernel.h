// opsdk kernel support: what an op's kernel body may use.
//
//   opsdk::ConstTensor<T> / opsdk::Tensor<T>   views of C-contiguous arrays (data, dim(i), size())
//   OPSDK_REQUIRE(cond, "message " << value)    fail the call with a Python ValueError
//   OPSDK_NOT_IMPLEMENTED()                     the body is not written yet
//   opsdk::parallel_for(begin, end, grain, f)   f(lo, hi) over chunks, on the thread budget
//
// Kernels run with the GIL released: touch no Python object in a kernel.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <dirent.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "opsdk/float_mode.h"
#include "opsdk/shared_loop.h"

namespace opsdk {

#if defined(__FLT16_MAX__)
using half = _Float16;
#else
struct half { uint16_t bits; };
#endif

// A view of a C-contiguous array owned by the caller. `shape` points into the array's own shape.
template <typename T>
struct TensorView {
    T* data = nullptr;
    const int64_t* shape = nullptr;
    int ndim = 0;

    // Size of dim i; a negative i counts from the end, as in NumPy.
    int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
    int64_t size() const {
        int64_t n = 1;
        for (int i = 0; i < ndim; ++i) n *= shape[i];
        return n;
    }
    T& operator[](int64_t i) const { return data[i]; }
};

template <typename T> using ConstTensor = TensorView<const T>;
template <typename T> using Tensor = TensorView<T>;

// Thrown by OPSDK_REQUIRE; the generated glue turns it into ValueError("<op>: msg (file:line)").
struct KernelError : std::runtime_error {
    KernelError(const std::string& msg, const char* file, int line)
        : std::runtime_error(msg), file(file), line(line) {}
    const char* file;
    int line;
};

// Thrown by OPSDK_NOT_IMPLEMENTED; the glue turns it into NotImplementedError.
struct NotImplemented : std::runtime_error {
    NotImplemented() : std::runtime_error("kernel body not written yet") {}
};

#define OPSDK_REQUIRE(cond, msg)                                                   \
    do {                                                                           \
        if (!(cond)) {                                                             \
            std::ostringstream opsdk_require_stream_;                              \
            opsdk_require_stream_ << msg;                                          \
            throw ::opsdk::KernelError(opsdk_require_stream_.str(), __FILE__, __LINE__); \
        }                                                                          \
    } while (0)

#define OPSDK_NOT_IMPLEMENTED() throw ::opsdk::NotImplemented()

namespace threads_detail {

// How many threads a parallel loop may use: the budget (OpenMP's per-thread thread count, which
// OMP_NUM_THREADS sets and a session's intra_op_threads sets per thread), less the cores other
// runnable threads want. `runnable` counts every runnable thread of the machine, the caller
// included; `cores` the machine's online cores (the count /proc/loadavg is of: in a container on
// a larger host, its cores, so a busy host leaves the container its budget).
//
// Why: a parallel loop ends when its slowest thread does. On a machine with more runnable
// threads than cores, a woken thread waits for a time slice (milliseconds) while the others wait
// for it at the loop's end, so a kernel that would take 1 ms on one thread took many; a TF1
// training loop beside 4 busy processes ran 4x slower than with OMP_NUM_THREADS=1. Running on
// the caller's thread alone there costs at most the parallel speed-up.
inline int threads_for(int budget, int cores, int runnable) {
    const int others = std::max(runnable - 1, 0);
    return std::max(1, std::min(budget, cores - others));
}

// Whether a parallel loop runs on a busy machine, where it shares its pieces (shared_loop.h)
// instead of taking an OpenMP team: other runnable threads leave fewer cores (`free_threads`,
// threads_for's count) than the budget could use on this machine. A budget above the machine's
// cores, or a loop with fewer chunks than the budget, is not a busy machine: the team it gets on a
// quiet one spins between loops where the shared loop's helpers would have to be woken.
inline bool busy(int free_threads, int budget, int cores) {
    return free_threads < std::min(budget, cores);
}

// This process's threads running now (state R in /proc/self/task/*/stat, the caller among
// them); 0 where that cannot be read.
inline int own_running() {
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) return 0;
    int n = 0;
    char path[96], buf[512];
    while (const dirent* entry = readdir(dir)) {
        if (entry->d_name[0] == '.') continue;
        std::snprintf(path, sizeof path, "/proc/self/task/%.32s/stat", entry->d_name);
        std::FILE* f = std::fopen(path, "r");
        if (f == nullptr) continue;
        const size_t len = std::fread(buf, 1, sizeof buf - 1, f);
        std::fclose(f);
        buf[len] = '\0';
        const char* name_end = std::strrchr(buf, ')');  // "tid (name) S ...": a name may hold ')'
        if (name_end != nullptr && name_end[1] == ' ' && name_end[2] == 'R') ++n;
    }
    closedir(dir);
    return n;
}

// The machine's runnable threads now that are not this process's, plus the caller: the
// machine's count from /proc/loadavg's fourth field ("running/total") less this process's
// running threads but one. This process's own threads are left out because they are the ones a
// loop would use: an OpenMP team still spinning after the previous loop counted as other work,
// and every second call of a kernel ran on one thread (the flagship at half speed). -1 where
// /proc/loadavg cannot be read (not Linux).
inline int read_runnable() {
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (f == nullptr) return -1;
    double l1, l5, l15;
    int running = -1, total = 0;
    if (std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) running = -1;
    std::fclose(f);
    if (running < 0) return -1;
    const int own = own_running();
    return own > 0 ? std::max(running - own + 1, 1) : running;
}

// read_runnable, read again at most every 10 ms (a read costs a few microseconds; a parallel
// loop is given work of 0.2 ms or more).
inline int runnable() {
    static std::atomic<int64_t> read_at{-1};  // microseconds of the steady clock; -1: never read
    static std::atomic<int> value{-1};
    const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
    const int64_t last = read_at.load(std::memory_order_relaxed);
    if (last < 0 || now - last > 10000) {
        value.store(read_runnable(), std::memory_order_relaxed);
        read_at.store(now, std::memory_order_relaxed);
    }
    return value.load(std::memory_order_relaxed);
}

}  // namespace threads_detail


// The threads a parallel loop started now may use (see threads_detail::threads_for): at most the
// budget, fewer while other work keeps the cores busy. OPSDK_THREADS_IGNORE_LOAD=1 ignores the
// load (the budget alone).
inline int num_threads() {
#ifdef _OPENMP
    const int budget = omp_get_max_threads();
    static const bool ignore_load = [] {
        const char* v = std::getenv("OPSDK_THREADS_IGNORE_LOAD");
        return v != nullptr && v[0] == '1';
    }();
    if (budget <= 1 || ignore_load) return budget;
    const int running = threads_detail::runnable();
    if (running < 0) return budget;
    static const int online = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
    return threads_detail::threads_for(budget, online, running);
#else
    return 1;
#endif
}


// Run f(lo, hi) over [begin, end) split into contiguous chunks of more than `grain` each
// (ranges no longer than `grain` run inline on the calling thread), on the session's thread
// budget. While the machine has a core for each thread of the budget: one chunk per thread, on
// an OpenMP team. While other work keeps the cores busy: four pieces per thread of the budget,
// claimed one at a time by the caller and by helper threads as they get a core (shared_loop.h:
// the loop's end waits for its pieces, never for a thread that has not started; a team thread
// waiting for a time slice held a loop of 1 ms for several). OPSDK_LOOP_PIECES=N in the
// environment makes it N pieces per thread there, and 0 runs such a loop on the caller alone.
// An exception in any chunk is rethrown here.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
    const int64_t n = end - begin;
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    const int64_t most = (n + grain - 1) / grain;  // chunks of at least `grain`
    const int free_threads = num_threads();
#ifdef _OPENMP
    const int budget = omp_get_max_threads();
    static const int busy_pieces = [] {
        const char* v = std::getenv("OPSDK_LOOP_PIECES");
        return v != nullptr ? std::max(std::atoi(v), 0) : 4;
    }();
    static const int online = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
    if (threads_detail::busy(free_threads, budget, online) && busy_pieces > 0 && most > 1) {
        shared_loop(begin, end, std::min<int64_t>(most, int64_t(budget) * busy_pieces), budget, f);
        return;
    }
#endif
    const int threads = static_cast<int>(std::min<int64_t>(free_threads, most));
    if (threads <= 1 || shared_loop_detail::in_piece) {  // a loop inside a piece runs inline
        f(begin, end);
        return;
    }
    std::exception_ptr error;
    std::mutex error_mutex;
    const float_mode::Word mode = float_mode::get();  // the caller's, for every thread
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        const float_mode::Scope same_mode(mode);
        const int t = omp_get_thread_num();
        const int nt = omp_get_num_threads();
#else
    for (int t = 0, nt = 1; t < nt; ++t) {
#endif
        const int64_t chunk = (n + nt - 1) / nt;
        const int64_t lo = begin + t * chunk;
        const int64_t hi = std::min(end, lo + chunk);
        if (lo < hi) {
            try {
                f(lo, hi);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
            }
        }
    }
    if (error) std::rethrow_exception(error);
}

// Python's floor division and modulo, for dim expressions. A zero divisor (an attr of 0 in `n // k`
// when the binding is called directly, past the runtime's own check) raises ValueError instead of
// stopping the process with SIGFPE, as does the one quotient int64_t cannot hold.
inline int64_t floordiv(int64_t a, int64_t b) {
    if (b == 0) throw std::domain_error("division by zero in a dim expression");
    if (b == -1 && a == INT64_MIN) throw std::domain_error("a dim expression overflows int64");
    int64_t q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

}  // namespace opsdk
