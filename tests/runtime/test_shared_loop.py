"""opsdk::shared_loop (opsdk/include/opsdk/shared_loop.h), the parallel loop kernels run on a
busy machine: its pieces tile the range once each; its end waits for pieces, not for helper
threads (a loop whose helpers are all held elsewhere finishes on the caller alone); a piece's
exception reaches the caller; a loop inside a piece runs inline; a forked child's loops run
(its parent's helpers are not in it); idle helpers end; and parallel_for runs on it while
the machine's cores are busy. Each case is a C++ program built with
the kernels' flags and run in a process of its own, with a deadline, so a hang fails the test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

INCLUDE = Path(__file__).resolve().parents[2] / "opsdk" / "include"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on PATH")

PROGRAM = r"""
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "opsdk/kernel.h"

using Clock = std::chrono::steady_clock;

static int threads_now() {
    int n = 0;
    if (DIR* d = opendir("/proc/self/task")) {
        while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

// Pieces tile [0, 1000) once each, in as many pieces as asked.
static void tiles() {
    std::mutex m;
    std::vector<std::pair<int64_t, int64_t>> seen;
    opsdk::shared_loop(0, 1000, 8, 2, [&](int64_t lo, int64_t hi) {
        std::lock_guard<std::mutex> lock(m);
        seen.emplace_back(lo, hi);
    });
    std::sort(seen.begin(), seen.end());
    int64_t at = 0;
    for (auto& p : seen) {
        if (p.first != at || p.second <= p.first) { std::printf("gap at %lld\n", (long long)at); return; }
        at = p.second;
    }
    std::printf("tiles %zu %lld\n", seen.size(), (long long)at);
}

// Thread t's loop holds the only helper (budget 2: one helper) in a piece until released; a loop
// of the main thread meanwhile must finish, every piece on the main thread.
static void helper_held() {
    std::atomic<bool> helper_in{false}, release{false};
    std::thread t([&] {
        const auto me = std::this_thread::get_id();
        opsdk::shared_loop(0, 2, 2, 2, [&](int64_t, int64_t) {
            const auto until = Clock::now() + std::chrono::seconds(20);
            if (std::this_thread::get_id() != me) {
                helper_in = true;
                while (!release && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            } else {
                while (!helper_in && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        });
    });
    while (!helper_in) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto me = std::this_thread::get_id();
    std::atomic<int> mine{0}, pieces{0};
    opsdk::shared_loop(0, 100, 8, 2, [&](int64_t, int64_t) {
        ++pieces;
        mine += std::this_thread::get_id() == me;
    });
    const bool released_before = release;
    release = true;
    t.join();
    std::printf("held %d %d %d\n", pieces.load(), mine.load(), int(released_before));
}

static void throws() {
    std::string what = "none";
    try {
        opsdk::shared_loop(0, 8, 8, 2, [&](int64_t lo, int64_t) {
            if (lo == 3) throw std::runtime_error("piece 3 failed");
        });
    } catch (const std::runtime_error& e) {
        what = e.what();
    }
    std::atomic<int> after{0};
    opsdk::shared_loop(0, 8, 8, 2, [&](int64_t lo, int64_t hi) { after += int(hi - lo); });
    std::printf("throws %s|%d\n", what.c_str(), after.load());
}

// A loop inside a piece runs as one call on the piece's thread.
static void nested() {
    std::atomic<int> calls{0}, other_thread{0};
    opsdk::shared_loop(0, 4, 4, 2, [&](int64_t, int64_t) {
        const auto me = std::this_thread::get_id();
        opsdk::shared_loop(0, 100, 8, 2, [&](int64_t lo, int64_t hi) {
            ++calls;
            other_thread += std::this_thread::get_id() != me || lo != 0 || hi != 100;
        });
        opsdk::parallel_for(0, 1 << 20, 1, [&](int64_t lo, int64_t hi) {
            ++calls;
            other_thread += std::this_thread::get_id() != me || lo != 0 || hi != (1 << 20);
        });
    });
    std::printf("nested %d %d\n", calls.load(), other_thread.load());
}

// The helpers started here are not in a forked child: its loops run all the same.
static void forked() {
    std::atomic<int> sum{0};
    opsdk::shared_loop(0, 100, 8, 2, [&](int64_t lo, int64_t hi) { sum += int(hi - lo); });
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        std::atomic<int> child{0};
        opsdk::shared_loop(0, 100, 8, 2, [&](int64_t lo, int64_t hi) { child += int(hi - lo); });
        _exit(child == 100 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::printf("forked %d %d\n", sum.load(), WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
}

// Helpers with nothing to do for 2 s end (started again when needed).
static void idle_helpers_end() {
    opsdk::shared_loop(0, 100, 8, 2, [&](int64_t, int64_t) {});
    const int busy = threads_now();
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    const int idle = threads_now();
    std::atomic<int> sum{0};
    opsdk::shared_loop(0, 100, 8, 2, [&](int64_t lo, int64_t hi) { sum += int(hi - lo); });
    std::printf("idle %d %d %d\n", busy, idle, sum.load());
}

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "";
    if (what == "tiles") tiles();
    if (what == "held") helper_held();
    if (what == "throws") throws();
    if (what == "nested") nested();
    if (what == "forked") forked();
    if (what == "idle") idle_helpers_end();
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shared_loop")
    source = folder / "loop.cc"
    source.write_text(PROGRAM)
    subprocess.run(["g++", "-std=c++17", "-O1", "-fopenmp", "-pthread", f"-I{INCLUDE}",
                    str(source), "-o", str(folder / "loop")], check=True)
    return folder / "loop"


def _run(program, case: str) -> list[str]:
    out = subprocess.run([str(program), case], capture_output=True, text=True, timeout=60,
                         env={"OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_pieces_tile_the_range_once_each(program):
    assert _run(program, "tiles") == ["tiles", "8", "1000"]


def test_a_loop_whose_helpers_are_held_elsewhere_finishes_on_the_caller(program):
    # An OpenMP team's loop would wait at its end for a thread that has not started.
    _, pieces, mine, released_before = _run(program, "held")
    assert (pieces, mine) == ("8", "8")
    assert released_before == "0"  # it finished while the helper was still held


def test_a_pieces_exception_reaches_the_caller_and_the_next_loop_runs(program):
    assert _run(program, "throws") == ["throws", "piece", "3", "failed|8"]


def test_a_loop_inside_a_piece_runs_inline(program):
    assert _run(program, "nested") == ["nested", "8", "0"]


def test_a_forked_childs_loops_run_without_the_parents_helpers(program):
    assert _run(program, "forked") == ["forked", "100", "0"]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in Linux's /proc")
def test_idle_helpers_end(program):
    _, busy, idle, total = _run(program, "idle")
    assert int(idle) < int(busy)
    assert total == "100"


BUSY_PROBE = r"""
#include <cstdio>
#include <mutex>
#include <vector>
#include "opsdk/kernel.h"
int main() {
    std::mutex m;
    std::vector<int64_t> sizes;
    double sum = 0;
    opsdk::parallel_for(0, 1 << 20, 1 << 10, [&](int64_t lo, int64_t hi) {
        double s = 0;
        for (int64_t i = lo; i < hi; ++i) s += double(i);
        std::lock_guard<std::mutex> lock(m);
        sizes.push_back(hi - lo);
        sum += s;
    });
    std::printf("%zu %d %.0f\n", sizes.size(), opsdk::num_threads(), sum);
}
"""


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="reads Linux's /proc/loadavg")
@pytest.mark.parametrize("pieces_env, expected", [(None, 4), ("2", 2), ("0", 0)])
def test_on_a_busy_machine_parallel_for_shares_pieces(tmp_path, pieces_env, expected):
    """With more runnable threads than cores, parallel_for cuts a loop into
    OPSDK_LOOP_PIECES (4) pieces per thread of the budget, not one per free core; 0 keeps the
    loop on the caller's thread alone."""
    source = tmp_path / "busy.cc"
    source.write_text(BUSY_PROBE)
    subprocess.run(["g++", "-std=c++17", "-O1", "-fopenmp", "-pthread", f"-I{INCLUDE}",
                    str(source), "-o", str(tmp_path / "busy")], check=True)
    cores = os.cpu_count() or 1
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(cores + 1)]
    try:
        time.sleep(0.5)
        env = {"OMP_NUM_THREADS": str(cores)}
        if pieces_env is not None:
            env["OPSDK_LOOP_PIECES"] = pieces_env
        out = subprocess.run([str(tmp_path / "busy")], capture_output=True, text=True,
                             timeout=60, env=env, check=True)
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()
    pieces, free, total = out.stdout.split()
    assert int(free) < cores or cores == 1  # the machine was busy as the loop saw it
    assert int(total) == (1 << 20) * ((1 << 20) - 1) // 2
    if cores == 1:
        assert pieces == "1"  # a budget of one: nothing to share
    else:
        assert int(pieces) == (expected * cores if expected else 1)
