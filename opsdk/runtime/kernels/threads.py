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
import threading
from typing import Optional

from opsdk.registry.errors import OpsdkError

_local = threading.local()
_gomp: Optional[object] = None
_gomp_searched = False


def _openmp():
    """libgomp's omp_set_num_threads, the runtime the compiled kernels link; None without it."""
    global _gomp, _gomp_searched
    if not _gomp_searched:
        _gomp_searched = True
        name = ctypes.util.find_library("gomp")
        try:
            setter = ctypes.CDLL(name or "libgomp.so.1").omp_set_num_threads
        except (OSError, AttributeError):
            setter = None
        if setter is not None:
            setter.argtypes = (ctypes.c_int,)
            setter.restype = None
        _gomp = setter
    return _gomp


def use_intra_op_threads(threads: int) -> None:
    """Give kernels called from this thread at most `threads` threads (a no-op when unchanged)."""
    if getattr(_local, "threads", None) == threads:
        return
    setter = _openmp()
    if setter is not None:
        setter(threads)
    _local.threads = threads


def check_intra_op_threads(value: object) -> None:
    """SessionConfig.intra_op_threads: None (every core) or a positive int."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OpsdkError(f"SessionConfig: intra_op_threads must be None (every core) or an int "
                         f">= 1, got {value!r}")
