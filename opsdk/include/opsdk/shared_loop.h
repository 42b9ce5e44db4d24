// opsdk::shared_loop: a parallel loop whose end waits for its pieces, not for its threads.
// Included by kernel.h (parallel_for runs on it while other work keeps the cores busy).
//
// An OpenMP parallel region ends at a barrier every thread of its team must reach. On a machine
// with more runnable threads than cores, a team thread that was asleep or descheduled waits for a
// time slice (milliseconds), and the caller, done with its share long before, waits for it there:
// with one busy process beside it on 2 cores, a loop of 0.65 ms on one thread took either 0.35 ms
// on two or, when the other was descheduled, 8 ms. So on a busy machine the kernels ran on the
// caller's thread alone, and got one thread's share of the cores where other programs' threads
// got theirs (the TF1 autoencoder of bench/bench_oversubscribed.py: 0.4 of a core, against 0.6
// for TensorFlow's thread pool).
//
// shared_loop cuts the range into pieces that the caller and up to `threads` - 1 helper threads
// claim one at a time. The caller claims pieces until none is left and then waits only for the
// pieces helpers are running; a helper that gets a core late finds nothing left and sleeps again,
// and nobody waits for it. The loop takes at most one piece longer than the caller alone would,
// and every thread of the process that does get a core takes pieces off the caller's.
//
// Helpers sleep on a condition variable between loops (no spinning) and end after 2 s with
// nothing to do. Each compiled library has its own (this header's statics, per shared library);
// a forked child starts its own.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "opsdk/float_mode.h"

namespace opsdk {
namespace shared_loop_detail {

// Set while a thread runs a piece: a loop inside a piece runs inline on that thread.
inline thread_local bool in_piece = false;

struct Job {
    std::function<void(int64_t, int64_t)> body;  // f(lo, hi) of one piece
    int64_t begin = 0, end = 0, pieces = 0;
    float_mode::Word mode{};                     // the caller's float mode, for every piece
    std::atomic<int64_t> next{0};                // the next unclaimed piece
    std::atomic<int64_t> done{0};                // pieces finished
    std::mutex m;
    std::condition_variable finished;
    std::exception_ptr error;

    // Claim and run pieces until none is left.
    void work() {
        const float_mode::Scope same_mode(mode);
        const bool outer = in_piece;
        in_piece = true;
        for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < pieces;) {
            const int64_t n = end - begin;
            const int64_t lo = begin + n * i / pieces, hi = begin + n * (i + 1) / pieces;
            try {
                body(lo, hi);
            } catch (...) {
                std::lock_guard<std::mutex> lock(m);
                if (!error) error = std::current_exception();
            }
            if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == pieces) {
                std::lock_guard<std::mutex> lock(m);  // the caller checks `done` under it
                finished.notify_all();
            }
        }
        in_piece = outer;
    }
};

class Helpers {
  public:
    // This library's helpers. Never destroyed: their threads outlive static destructors. A
    // forked child gets a set of its own on its first loop: its parent's helper threads are not
    // in it, and the parent's mutex and condition variable may be in any state there (a signal
    // to a waiter that is not in the child never returns).
    static Helpers& get() {
        static std::atomic<Helpers*> current{nullptr};
        static const bool registered = [] {
            pthread_atfork(nullptr, nullptr, [] { current.store(nullptr); });
            return true;
        }();
        (void)registered;
        Helpers* helpers = current.load(std::memory_order_acquire);
        if (helpers == nullptr) {
            Helpers* fresh = new Helpers();
            if (current.compare_exchange_strong(helpers, fresh, std::memory_order_acq_rel)) {
                helpers = fresh;
            } else {
                delete fresh;  // another thread made the first
            }
        }
        return *helpers;
    }

    // Offer `job` to `count` helpers (started on first need).
    void offer(const std::shared_ptr<Job>& job, int count) {
        {
            std::lock_guard<std::mutex> lock(m_);
            while (started_ < count) {
                try {
                    std::thread([this] { loop(); }).detach();
                } catch (const std::system_error&) {
                    break;  // no thread to be had: the caller runs what no helper takes
                }
                ++started_;
            }
            jobs_.push_back(job);
        }
        for (int i = 0; i < count; ++i) wake_.notify_one();
    }

    // Take `job` off the list: its pieces are all claimed.
    void withdraw(const Job* job) {
        std::lock_guard<std::mutex> lock(m_);
        for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
            if (it->get() == job) {
                jobs_.erase(it);
                return;
            }
        }
    }

  private:
    // A helper: runs pieces of the oldest job that has some left, sleeps while there is none,
    // and ends after kIdle without one (started again by the next offer).
    void loop() {
        std::unique_lock<std::mutex> lock(m_);
        for (;;) {
            if (!wake_.wait_for(lock, kIdle, [this] { return !jobs_.empty(); })) {
                --started_;
                return;
            }
            std::shared_ptr<Job> job = jobs_.front();
            if (job->next.load(std::memory_order_relaxed) >= job->pieces) {
                jobs_.pop_front();  // every piece claimed: the next helper need not look
                continue;
            }
            lock.unlock();
            job->work();
            job.reset();
            lock.lock();
        }
    }

    static constexpr std::chrono::seconds kIdle{2};
    std::mutex m_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Job>> jobs_;
    int started_ = 0;
};

}  // namespace shared_loop_detail

// Run f(lo, hi) over [begin, end) in `pieces` contiguous pieces, claimed by the caller and up to
// `threads` - 1 helpers; returns once every piece has run. An exception in any piece is rethrown
// here. Inside a piece, a loop runs inline.
template <typename F>
void shared_loop(int64_t begin, int64_t end, int64_t pieces, int threads, F&& f) {
    if (end <= begin) return;
    pieces = std::max<int64_t>(1, std::min<int64_t>(pieces, end - begin));
    if (threads <= 1 || pieces == 1 || shared_loop_detail::in_piece) {
        f(begin, end);
        return;
    }
    auto job = std::make_shared<shared_loop_detail::Job>();
    job->body = std::ref(f);
    job->begin = begin;
    job->end = end;
    job->pieces = pieces;
    job->mode = float_mode::get();
    auto& helpers = shared_loop_detail::Helpers::get();
    helpers.offer(job, static_cast<int>(std::min<int64_t>(threads - 1, pieces - 1)));
    job->work();
    helpers.withdraw(job.get());
    {
        std::unique_lock<std::mutex> lock(job->m);
        job->finished.wait(lock, [&] { return job->done.load(std::memory_order_acquire) >= job->pieces; });
    }
    if (job->error) std::rethrow_exception(job->error);
}

}  // namespace opsdk
