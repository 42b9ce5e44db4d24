"""Kernels' thread budget: opsdk::num_threads leaves busy cores alone; intra_op_threads sets it."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.ir.graph import Graph, placeholder

INCLUDE = Path(__file__).resolve().parents[2] / "opsdk" / "include"

PROBE = r"""
#include <cstdio>
#include "opsdk/kernel.h"
int main() {
    using opsdk::threads_detail::threads_for;
    std::printf("%d %d %d %d %d %d\n", threads_for(2, 2, 1), threads_for(2, 2, 2),
                threads_for(2, 2, 6), threads_for(4, 64, 10), threads_for(16, 8, 3),
                opsdk::threads_detail::read_runnable());
    using opsdk::threads_detail::busy;
    // (free threads, budget, cores): 2 cores, one other thread; the budget 8 on 2 quiet cores;
    // 64 cores with 10 others and a budget of 4; 8 cores with 2 others and a budget of 16
    std::printf("%d %d %d %d\n", busy(1, 2, 2), busy(threads_for(8, 2, 1), 8, 2),
                busy(threads_for(4, 64, 10), 4, 64), busy(threads_for(16, 8, 3), 16, 8));
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on PATH")
def test_threads_for_leaves_the_cores_other_threads_want(tmp_path):
    source = tmp_path / "probe.cc"
    source.write_text(PROBE)
    subprocess.run(["g++", "-std=c++17", "-fopenmp", f"-I{INCLUDE}", str(source), "-o",
                    str(tmp_path / "probe")], check=True)
    out = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True)
    alone, one_busy, oversubscribed, big_host, budget_above = map(int, out.stdout.split()[:5])
    assert alone == 2  # only the caller runs: the whole budget
    assert one_busy == 1  # one other runnable thread on 2 cores: the caller's core alone
    assert oversubscribed == 1  # never fewer than the caller's thread
    assert big_host == 4  # a busy host with cores to spare: the budget, not its load
    assert budget_above == 6  # 8 cores, 2 others running: 6 free, below the budget of 16
    runnable = int(out.stdout.split()[5])
    # busy: fewer free cores than the budget could use here, not a budget above the cores
    assert out.stdout.split()[6:] == ["1", "0", "0", "1"]
    if Path("/proc/loadavg").exists():
        assert runnable >= 1  # the probe itself runs
    else:
        assert runnable == -1


SPINNING = r"""
#include <cstdio>
#include "opsdk/kernel.h"
int main() {
    double sink = 0;
#pragma omp parallel num_threads(2) reduction(+ : sink)
    sink += omp_get_thread_num();
    // OMP_WAIT_POLICY=active: the team's other thread spins now, waiting for the next loop.
    const int own = opsdk::threads_detail::own_running();
    const int others = opsdk::threads_detail::read_runnable();
    // The machine's running count, read at once after (not by the test a process exit later,
    // when other work on the machine may have stopped: 3 against 1 made a clean run fail).
    int running = -1, total = 0;
    double l1, l5, l15;
    if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) running = -1;
        std::fclose(f);
    }
    std::printf("%d %d %d %d\n", own, others, opsdk::num_threads() + static_cast<int>(sink) * 0, running);
}
"""


@pytest.mark.skipif(shutil.which("g++") is None or not Path("/proc/self/task").is_dir(),
                    reason="needs g++ and Linux's /proc")
def test_this_processs_own_spinning_threads_are_not_other_work(tmp_path):
    # Every second call of the flagship ran on one thread: the OpenMP team of the previous call,
    # still spinning, counted as another runnable thread of the machine.
    source = tmp_path / "spin.cc"
    source.write_text(SPINNING)
    subprocess.run(["g++", "-std=c++17", "-fopenmp", f"-I{INCLUDE}", str(source), "-o",
                    str(tmp_path / "spin")], check=True)
    env = {**os.environ, "OMP_WAIT_POLICY": "active", "OMP_NUM_THREADS": "2"}
    out = subprocess.run([str(tmp_path / "spin")], capture_output=True, text=True, check=True, env=env)
    own, runnable, _, machine = map(int, out.stdout.split())
    assert own >= 2  # the caller and the spinning team thread are seen as this process's
    # The spinning thread is not counted as other work: what is left is the caller and the rest
    # of the machine (read a moment later, so allow for what started meanwhile).
    assert runnable <= machine + 1


def test_python_counts_this_processs_running_threads():
    from opsdk.runtime.kernels.threads import _runnable, own_running
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc/self/task (not Linux)")
    assert own_running() >= 1  # the caller
    assert _runnable() >= 1


def test_this_processs_threads_are_read_only_where_the_machines_count_leaves_doubt(monkeypatch):
    """Reading a file per thread of this process is the dear part of a recheck: where the
    machine's running count already leaves the whole budget, it is not read."""
    from opsdk.runtime.kernels import threads
    reads = []
    monkeypatch.setattr(threads, "own_running", lambda: reads.append(1) or 2)
    monkeypatch.setattr(threads, "_machine_running", lambda: 3)
    assert threads._runnable(enough=3) == 3 and not reads
    assert threads._runnable(enough=2) == 2 and reads == [1]  # 3 less this process's 2, plus 1
    monkeypatch.setattr(threads, "_machine_running", lambda: -1)
    assert threads._runnable(enough=5) == -1
    # the shortcut never changes a thread count: threads_for leaves the whole budget up to
    # _whole_budget's count, and the exact count is at most the machine's
    for cores in (1, 2, 8):
        for budget in range(1, cores + 1):
            for running in range(1, 12):
                for own in range(0, running + 1):
                    exact = max(running - own + 1, 1) if own > 0 else running
                    short = running if running <= threads._whole_budget(budget, cores) else exact
                    assert (threads.threads_for(budget, cores, short)
                            == threads.threads_for(budget, cores, exact))


def test_blas_rechecks_on_a_quiet_machine_read_no_thread_files(monkeypatch):
    from opsdk.runtime.kernels import threads
    if not threads._blas_controllers():
        pytest.skip("no OpenBLAS that threadpoolctl drives")
    reads = []
    monkeypatch.setattr(threads, "own_running", lambda: reads.append(1) or 1)
    monkeypatch.setattr(threads, "_machine_running", lambda: 1)  # the caller alone
    monkeypatch.setitem(threads._blas, "checked", -1.0)
    threads.blas_threads()
    assert not reads
    monkeypatch.setattr(threads, "_machine_running", lambda: 50)
    monkeypatch.setitem(threads._blas, "checked", -1.0)
    try:
        threads.blas_threads()
        assert reads == [1]
    finally:
        for c in threads._blas_controllers():
            c.set_num_threads(threads._blas["initial"])
        threads._blas["threads"] = None


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_intra_op_threads_must_be_a_positive_int(bad):
    graph = Graph()
    with pytest.raises(OpsdkError, match="intra_op_threads must be None"):
        Session(graph, config=SessionConfig(intra_op_threads=bad))


def _openmp_threads_here() -> int:
    gomp = ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")
    return gomp.omp_get_max_threads()


def test_a_session_sets_the_budget_on_the_threads_running_its_steps(monkeypatch):
    """The caller's thread has the session's budget while the step runs, and its own again
    after: a session's setting never reaches an eager call or another session on that thread."""
    from opsdk.runtime.exec import session as session_module
    graph = Graph()
    with graph.as_default():
        x = placeholder("float32", [None], name="x")
        from opsdk import ops
        y = ops.add(x, x)
    seen = {}
    run_slots = session_module.run_slots

    def watched(*args):
        seen.setdefault("during", []).append(_openmp_threads_here())
        return run_slots(*args)
    monkeypatch.setattr(session_module, "run_slots", watched)

    def run():
        seen["before"] = _openmp_threads_here()
        for threads in (1, 2):
            sess = Session(graph, config=SessionConfig(intra_op_threads=threads))
            np.testing.assert_array_equal(sess.run(y, {x: np.ones(3, np.float32)}), 2)
            seen.setdefault("after", []).append(_openmp_threads_here())
        sess = Session(graph, config=SessionConfig(intra_op_threads=1))
        sess.profile(y, {x: np.ones(3, np.float32)}, steps=2, warmup=1, show=False)
        seen["after profile"] = _openmp_threads_here()

    thread = threading.Thread(target=run)  # a thread of its own: the budget is per thread
    thread.start()
    thread.join()
    assert seen["during"][:2] == [1, 2]
    assert seen["after"] == [seen["before"]] * 2
    assert seen["after profile"] == seen["before"]


@pytest.mark.parametrize("intra, workers, want", [(None, 1, None), (4, 1, 2), (4, 3, 1), (8, 3, 2),
                                                   (1, 1, 1), (16, 15, 1)])
def test_pool_threads_share_the_budget_with_the_callers(intra, workers, want):
    """Each pool thread gets the budget / (workers + 1), at least 1 (None: the cores)."""
    from opsdk.runtime.kernels.threads import pool_thread_budget
    if want is None:
        want = max(1, (os.cpu_count() or 1) // 2)
    assert pool_thread_budget(intra, workers) == want


def test_a_sessions_pool_threads_get_their_share():
    graph = Graph()
    with graph.as_default():
        placeholder("float32", [None], name="x")
    with Session(graph, config=SessionConfig(intra_op_threads=4, inter_op_threads=1)) as sess:
        assert sess._get_pool().submit(_openmp_threads_here).result() == 2
    with Session(graph, config=SessionConfig(inter_op_threads=3)) as sess:
        want = max(1, (os.cpu_count() or 1) // 4)
        assert sess._get_pool().submit(_openmp_threads_here).result() == want


def test_blas_threads_follow_the_free_cores(monkeypatch):
    """NumPy's OpenBLAS gets one thread while others keep the cores busy, the budget after."""
    from opsdk.runtime.kernels import threads
    controllers = threads._blas_controllers()
    if not controllers:
        pytest.skip("no OpenBLAS that threadpoolctl drives")
    budget = min(os.cpu_count() or 1, threads._blas["initial"] or 1)
    if budget < 2:
        pytest.skip("one core (or a BLAS capped at one thread): nothing to take away")
    try:
        monkeypatch.setattr(threads, "_runnable", lambda enough=0: 10 * budget)
        threads._blas["checked"] = -1.0
        threads.blas_threads()
        assert [c.num_threads for c in controllers] == [1] * len(controllers)
        monkeypatch.setattr(threads, "_runnable", lambda enough=0: 1)
        threads._blas["checked"] = -1.0
        threads.blas_threads()
        assert [c.num_threads for c in controllers] == [budget] * len(controllers)
    finally:
        for c in controllers:
            c.set_num_threads(threads._blas["initial"])
        threads._blas["threads"] = None


def test_fused_kernels_take_the_free_cores(monkeypatch):
    """A fused kernel gets the cores other runnable threads leave (the budget when none do), the
    rule the C++ loops follow; OPSDK_THREADS_IGNORE_LOAD=1 gives it the whole budget."""
    from opsdk.runtime.kernels import threads
    monkeypatch.setitem(threads._blas, "last", -1.0)  # no product of OpenBLAS's just before
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(threads, "_runnable", lambda enough=0: 3)  # this thread and two others
    threads._fused["checked"] = -1.0
    assert threads.kernel_threads() == 2
    monkeypatch.setattr(threads, "_runnable", lambda enough=0: 1)
    threads._fused["checked"] = -1.0
    assert threads.kernel_threads() == 4
    monkeypatch.setattr(threads, "_runnable", lambda enough=0: 40)
    threads._fused["checked"] = -1.0
    assert threads.kernel_threads() == 1
    monkeypatch.setenv("OPSDK_THREADS_IGNORE_LOAD", "1")
    assert threads.kernel_threads() == 4
    threads._fused["checked"] = -1.0


def test_python_and_cpp_thread_counts_agree():
    from opsdk.runtime.kernels.threads import threads_for
    assert [threads_for(2, 2, 1), threads_for(2, 2, 2), threads_for(2, 2, 6),
            threads_for(4, 64, 10), threads_for(16, 8, 3)] == [2, 1, 1, 4, 6]


def test_fused_kernels_leave_the_cores_of_openblas_workers_still_spinning(monkeypatch):
    """After a product on n OpenBLAS threads its n - 1 workers spin for a while (this process's
    threads, which the runnable count leaves out): a fused kernel then takes n - 1 threads less,
    and the whole budget once they sleep."""
    from opsdk.runtime.kernels import threads
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(threads, "_runnable", lambda enough=0: 1)
    monkeypatch.setitem(threads._blas, "threads", 3)
    monkeypatch.setitem(threads._blas, "checked", time.monotonic() + 60)  # no recheck now
    threads._fused["checked"] = -1.0
    threads.blas_threads()  # a product is about to run
    assert threads.spinning_blas_workers() == 2
    assert threads.kernel_threads() == 2
    monkeypatch.setitem(threads._blas, "last", time.monotonic() - threads._BLAS_SPIN_S - 0.01)
    assert threads.spinning_blas_workers() == 0
    assert threads.kernel_threads() == 4
    monkeypatch.setitem(threads._blas, "threads", 1)  # a product on one thread leaves none
    threads.blas_threads()
    assert threads.kernel_threads() == 4
