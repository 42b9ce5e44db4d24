"""The thread budget of compiled kernels on the threads that run a session's steps.

A C++ kernel's parallel loops (opsdk::parallel_for, opsdk/include/opsdk/kernel.h) use at most
OpenMP's thread count of the thread that calls them, and fewer while other runnable threads keep
the cores busy. That count is per thread in OpenMP, so a session with
`SessionConfig.intra_op_threads` sets it on each thread before it runs a step (the caller's, and
its pool's when they start); every kernel those threads call shares the one budget. Where no
OpenMP runtime is loaded (kernels built without it) there is nothing to set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
from typing import Optional

from opsdk.registry.errors import OpsdkError

_local = threading.local()
_gomp: Optional[object] = None
_gomp_searched = False
_default_threads: Optional[int] = None  # OpenMP's count before anything here set one


def _openmp():
    """libgomp's omp_set_num_threads, the runtime the compiled kernels link; None without it.
    The first lookup also reads OpenMP's default count (`_default_threads`), before anything
    here has set one."""
    global _gomp, _gomp_searched, _default_threads
    if not _gomp_searched:
        _gomp_searched = True
        name = ctypes.util.find_library("gomp")
        try:
            library = ctypes.CDLL(name or "libgomp.so.1")
            setter, getter = library.omp_set_num_threads, library.omp_get_max_threads
        except (OSError, AttributeError):
            setter = None
        if setter is not None:
            setter.argtypes = (ctypes.c_int,)
            setter.restype = None
            getter.restype = ctypes.c_int
            _default_threads = int(getter())
        _gomp = setter
    return _gomp


def use_intra_op_threads(threads: int) -> Optional[int]:
    """Give kernels called from this thread at most `threads` threads (a no-op when unchanged);
    returns the budget this thread had (None: none set, OpenMP's default), for
    `restore_intra_op_threads`."""
    previous = getattr(_local, "threads", None)
    if previous == threads:
        return previous
    setter = _openmp()
    if setter is not None:
        setter(threads)
    _local.threads = threads
    return previous


def restore_intra_op_threads(previous: Optional[int]) -> None:
    """Give this thread back the budget `use_intra_op_threads` returned: a session's
    `intra_op_threads` holds on the caller's thread while its step runs, not after (an eager call
    or another session's step on that thread gets its own)."""
    if previous is not None:
        use_intra_op_threads(previous)
        return
    if getattr(_local, "threads", None) is None:
        return
    setter = _openmp()
    if setter is not None and _default_threads is not None:
        setter(_default_threads)
    del _local.threads


def pool_thread_budget(intra_op_threads: Optional[int], workers: int) -> int:
    """The thread budget of each of a session's `workers` pool threads: the session's budget
    (`intra_op_threads`, else the cores) shared with the caller's thread, at least 1.

    Why not the whole budget each: OpenMP gives every thread that starts a parallel loop a team
    of its own, and once the teams' threads outnumber the cores libgomp stops letting idle
    threads spin, so every later loop of the caller's thread woke its team from sleep. On 2 cores
    a TF1 MLP step whose first runs had been timed concurrently (exec/step_mode.py) stayed at
    2.3-2.5 ms in order, against 1.9-2.0 ms in a process that never ran one concurrently."""
    budget = intra_op_threads or os.cpu_count() or 1
    return max(1, budget // (workers + 1))


def check_intra_op_threads(value: object) -> None:
    """SessionConfig.intra_op_threads: None (every core) or a positive int."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OpsdkError(f"SessionConfig: intra_op_threads must be None (every core) or an int "
                         f">= 1, got {value!r}")


# -- NumPy's BLAS -------------------------------------------------------------------------------
#
# OpenBLAS keeps threads of its own, and they wait for one another inside a product; on an
# oversubscribed machine a descheduled one stalls the rest (the TF1 autoencoder of
# bench/bench_oversubscribed.py: 500 ms a step with 2 BLAS threads beside busy processes, 45 ms
# with one). blas_threads() gives it the same count opsdk::num_threads gives the C++ kernels:
# the budget less the cores other runnable threads want, re-read at most every 10 ms.

_RECHECK_S = 0.010
_blas = {"controllers": None, "threads": None, "checked": -1.0, "initial": None, "last": -1.0}


def _blas_spin_s() -> float:
    """How long OpenBLAS's workers spin after a product before they sleep: THREAD_TIMEOUT, 2**28
    cycles unless OPENBLAS_THREAD_TIMEOUT (4 to 30) says otherwise, taken at 2.5 GHz. Measured on
    a 2-core Xeon: 110 ms of one worker's CPU time in the 200 ms after one product."""
    try:
        exponent = int(os.environ.get("OPENBLAS_THREAD_TIMEOUT", "28"))
    except ValueError:
        exponent = 28
    return 2.0 ** min(max(exponent, 4), 30) / 2.5e9


_BLAS_SPIN_S = _blas_spin_s()


def spinning_blas_workers(now: Optional[float] = None) -> int:
    """OpenBLAS workers of this process still spinning after its last product (0 after the spin
    time; `now`: time.monotonic() when the caller has it): they hold cores that a parallel
    loop's threads would wait for."""
    if (time.monotonic() if now is None else now) - _blas["last"] >= _BLAS_SPIN_S:
        return 0
    return max((_blas["threads"] or _blas["initial"] or 1) - 1, 0)


def _runnable(enough: int = 0) -> int:
    """Runnable threads of the machine that are not this process's, plus the caller
    (/proc/loadavg's fourth field less this process's running threads but one, as
    opsdk::threads_detail::read_runnable counts them: an OpenMP team still spinning after the
    previous loop is this process's, not other work); -1 where unreadable.

    Where the machine's count is `enough` or less, it is returned as it is: the exact count is
    no larger, and a caller for whom `enough` leaves its whole budget need not know more. Reading
    this process's threads is the dear part (a file per thread: 58-175 us in a Ray task after
    an idle gap of 20 ms, where /proc/loadavg alone took 31 us)."""
    running = _machine_running()
    if running < 0 or running <= enough:
        return running
    own = own_running()
    return max(running - own + 1, 1) if own > 0 else running


def _machine_running() -> int:
    """/proc/loadavg's count of running threads; -1 where unreadable."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return -1


def _whole_budget(budget: int, cores: int) -> int:
    """The largest runnable count for which threads_for leaves all of `budget`."""
    return cores - budget + 1


def own_running() -> int:
    """This process's threads running now (state R in /proc/self/task/*/stat); 0 where unreadable."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    n = 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read(512)
        except OSError:
            continue  # the thread ended meanwhile
        end = stat.rfind(b")")  # "tid (name) S ...": a name may hold ')'
        n += end >= 0 and stat[end + 2:end + 3] == b"R"
    return n


def threads_for(budget: int, cores: int, runnable: int) -> int:
    """opsdk::threads_detail::threads_for: the budget less the cores other runnable threads want."""
    return max(1, min(budget, cores - max(runnable - 1, 0)))


def _blas_controllers() -> list:
    if _blas["controllers"] is None:
        try:
            from threadpoolctl import ThreadpoolController
            _blas["controllers"] = ThreadpoolController().select(internal_api="openblas").lib_controllers
            # OPENBLAS_NUM_THREADS / OMP_NUM_THREADS chose this: it caps the budget.
            _blas["initial"] = min((c.num_threads for c in _blas["controllers"]), default=None)
        except Exception:  # threadpoolctl absent or a BLAS it cannot drive: leave BLAS as it is
            _blas["controllers"] = []
    return _blas["controllers"]


def blas_threads() -> None:
    """Set OpenBLAS's thread count for a product about to run (cheap: rechecked every 10 ms)."""
    now = time.monotonic()
    _blas["last"] = now
    if now - _blas["checked"] < _RECHECK_S:
        return
    _blas["checked"] = now
    controllers = _blas_controllers()
    if not controllers or os.environ.get("OPSDK_THREADS_IGNORE_LOAD") == "1":
        return
    cores = os.cpu_count() or 1
    budget = min(getattr(_local, "threads", None) or cores, _blas["initial"] or cores)
    runnable = _runnable(_whole_budget(budget, cores))
    threads = budget if runnable < 0 else threads_for(budget, cores, runnable)
    if threads != _blas["threads"]:
        for controller in controllers:
            controller.set_num_threads(threads)
        _blas["threads"] = threads



_fused = {"checked": -1.0, "runnable": -1}


def kernel_threads() -> int:
    """The threads a fused elementwise kernel of this thread may use: the session's budget (or
    the cores) less the cores other runnable threads want, as for the C++ kernels' loops (the
    machine's runnable count re-read at most every 10 ms). Measured with one busy process beside
    it on 2 cores, a fused 1000-add chain took 0.65 ms on one thread every time, and on two
    either 0.35 ms or, when the other thread was descheduled, 8 ms (the median of 40 runs)."""
    cores = os.cpu_count() or 1
    budget = getattr(_local, "threads", None) or cores
    if budget == 1 or os.environ.get("OPSDK_THREADS_IGNORE_LOAD") == "1":
        return budget
    # OpenBLAS's spinning workers are this process's threads, which the runnable count below
    # leaves out: beside them a two-thread loop waited for its descheduled half (the MLP
    # 784-512-512-10's fused bias and relu, right after a product: steps of 5.5 or 13 ms).
    now = time.monotonic()
    if now - _fused["checked"] >= _RECHECK_S:
        # exact for every budget up to this one, the budgets of the next 10 ms among them
        _fused["checked"], _fused["runnable"] = now, _runnable(_whole_budget(budget, cores))
    budget = max(budget - spinning_blas_workers(now), 1)
    runnable = _fused["runnable"]
    return budget if runnable < 0 else threads_for(budget, cores, runnable)
