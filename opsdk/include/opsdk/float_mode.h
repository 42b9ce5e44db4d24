// opsdk::float_mode: the compiled kernels' floating-point mode (subnormals flushed to zero).
// Included by kernel.h and shared_loop.h.
#pragma once

#include <cstdint>
#include <cstdlib>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace opsdk {

// Subnormal floats (below 1.2e-38 in float32, 2.2e-308 in float64). On x86 every operation on
// one takes a microcode assist of about a hundred cycles: an Adam step whose first moments of
// dead units had decayed to subnormals took 1.8 ms for 270K weights, against 0.1 ms before they
// did. So compiled kernels run with subnormals flushed to zero, as TensorFlow's do: results
// (FTZ) and inputs (DAZ) alike, an error of at most the smallest normal float. The runtime's glue
// sets the calling thread's mode around each call (glue.h: run_kernel) and parallel_for's threads
// take the caller's mode; OPSDK_FLUSH_DENORMALS=0 in the environment keeps subnormals (read once).
namespace float_mode {

#if defined(__SSE__)
using Word = unsigned int;
constexpr Word kFlush = 0x8040;  // MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6)
inline Word get() { return _mm_getcsr(); }
inline void set(Word word) { _mm_setcsr(word); }
#elif defined(__aarch64__)
using Word = uint64_t;
constexpr Word kFlush = Word(1) << 24;  // FPCR.FZ
inline Word get() {
    Word word;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(word));
    return word;
}
inline void set(Word word) { __asm__ __volatile__("msr fpcr, %0" : : "r"(word)); }
#else
using Word = unsigned int;
constexpr Word kFlush = 0;
inline Word get() { return 0; }
inline void set(Word) {}
#endif

// The calling thread's mode with subnormals flushed, unless OPSDK_FLUSH_DENORMALS=0.
inline Word flushing() {
    static const bool keep = [] {
        const char* v = std::getenv("OPSDK_FLUSH_DENORMALS");
        return v != nullptr && v[0] == '0';
    }();
    return keep ? get() : (get() | kFlush);
}

// The calling thread runs in mode `word` while this lives; its own mode comes back after.
class Scope {
  public:
    explicit Scope(Word word) : saved_(get()) {
        if (word != saved_) set(word);
    }
    ~Scope() { set(saved_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

  private:
    Word saved_;
};

}  // namespace float_mode

}  // namespace opsdk
