"""Fused elementwise kernels at run time: asking for their compile, loading them, calling them.

The runtime does not generate or compile code: it describes a kernel (registry.elementwise.
FusedKernel) and hands it to the compiler of its target, found as that entry point of group
`opsdk.fusion_compilers` (the package names `cpu` = opsdk.build.fusion:COMPILER and `cuda` =
opsdk.build.fusion_cuda:COMPILER), looked up at first need. A kernel the compiler's cache already
holds is loaded at once; otherwise it is compiled on a background thread, and until it is ready
callers run the region unfused (`FusedCall.ready` is False). A compile that fails is logged once
and the region stays unfused. This module calls CPU kernels (a C function, loaded with ctypes
and called through the package's small extension `_fusedcall`, which reads the arrays' pointers
through the buffer protocol; where that extension was not compiled, through ctypes);
kernels/fused_cuda.py launches GPU ones.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Optional, Protocol

import numpy as np

from opsdk.registry.callables import entry_point
from opsdk.registry.elementwise import FusedKernel

try:
    from opsdk.runtime.kernels import _fusedcall as _native
except ImportError:  # built without a C compiler (setup.py makes the extension optional)
    _native = None

log = logging.getLogger("opsdk.fusion")
GROUP = "opsdk.fusion_compilers"


class FusionCompiler(Protocol):
    """What the runtime needs of the compiler of fused kernels. `args` are the target's: none
    for `cpu`, the GPU's compute capability (an int, 90 for sm_90) for `cuda`."""

    def problem(self) -> Optional[str]: ...

    def cached(self, kernel: FusedKernel, *args: Any) -> Any: ...  # a binary's path, or None

    def compile(self, kernel: FusedKernel, *args: Any) -> Any: ...  # a binary's path

    def source_path(self, kernel: FusedKernel) -> Any: ...


_compilers: dict[str, Optional[FusionCompiler]] = {}  # target -> given or looked up
_lock = threading.Lock()
_calls: dict[tuple, "FusedCall"] = {}  # (target, compile args, kernel) -> its one call
_pool: Optional[ThreadPoolExecutor] = None
_said: set[str] = set()
_activity = [0, 0]  # background compiles started, finished (compile_activity)


def fusion_compiler(target: str = "cpu") -> Optional[FusionCompiler]:
    """The compiler `set_fusion_compiler` gave for `target` (`cpu`, `cuda`), else that entry
    point of GROUP (or None)."""
    if target not in _compilers:
        _compilers[target] = entry_point(GROUP, target)
    return _compilers[target]


def set_fusion_compiler(given: Optional[FusionCompiler], target: str = "cpu") -> None:
    """Hand the runtime the compiler of `target`'s fused kernels (None: look the entry point up
    again)."""
    if given is None:
        _compilers.pop(target, None)
    else:
        _compilers[target] = given
    with _lock:
        _calls.clear()


def fusion_problem(target: str = "cpu") -> Optional[str]:
    """Why fused kernels for `target` cannot be made here (None when they can)."""
    found = fusion_compiler(target)
    if found is None:
        return (f"no {target} fusion compiler is installed (entry point group {GROUP}; "
                f"pip install -e .)")
    return found.problem()


def say_once(message: str) -> None:
    """Log `message` once per process (why the graph runs unfused)."""
    with _lock:
        if message in _said:
            return
        _said.add(message)
    log.warning(message)


class FusedCall:
    """One fused kernel: not ready while it compiles, then a C function of arrays. A subclass
    for another target (kernels/fused_cuda.py) sets `target`, takes its compile args and loads
    the binary its own way."""

    target = "cpu"

    def __init__(self, kernel: FusedKernel, *args: Any):
        self.kernel = kernel
        self.args = args  # what the target's compiler takes besides the kernel
        self.fn: Any = None
        self.failed: Optional[str] = None
        self.future: Optional[Future] = None

    @property
    def ready(self) -> bool:
        return self.fn is not None

    def load(self, path: Any) -> None:
        lib = ctypes.CDLL(str(path))
        rows = self.kernel.reduction is not None
        if not rows:
            fn = lib.opsdk_fused  # (in, out, n, threads)
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int)
        else:
            fn = lib.opsdk_fused_rows  # (in, out, rows, inner, threads)
            fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_int)
        fn.restype = None
        self.lib = lib  # kept loaded while the function is called by its address
        self.address = ctypes.cast(fn, ctypes.c_void_p).value
        self.rows = rows
        self.fn = fn

    def compile_now(self, compiler: FusionCompiler) -> None:
        try:
            self.load(compiler.compile(self.kernel, *self.args))
        except Exception as exc:  # noqa: BLE001 - a failed compile leaves the region unfused
            self.fail(exc)
        finally:
            with _lock:
                _activity[1] += 1

    def fail(self, exc: Exception) -> None:
        """The kernel cannot be had: its region runs unfused, said once."""
        self.failed = str(exc)
        say_once(f"fused {self.target} kernel {self.kernel.key()} failed to compile or load; its "
                 f"region runs unfused: {exc}")

    def __call__(self, inputs: list, outputs: list, *sizes: int) -> None:
        """Run over `n` elements (`sizes` = n, threads), or for a kernel ending in a reduction
        over `rows` rows of `inner` elements (`sizes` = rows, inner, threads). The arrays are
        C-contiguous, of the kernel's dtype and sizes (the caller checks)."""
        if _native is not None:  # the pointers through the buffer protocol (_fusedcall.c)
            _native.call(self.address, self.rows, inputs, outputs, *sizes)
            return
        ins = (ctypes.c_void_p * len(inputs))(*[a.__array_interface__["data"][0] for a in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[a.__array_interface__["data"][0]
                                                  for a in outputs])
        self.fn(ins, outs, *sizes)


def rows_of(shape: tuple, reduced: tuple[int, bool]) -> tuple[int, int, tuple]:
    """(rows, inner, the reduced output's shape) of a kernel ending in a reduction over the
    trailing `k` axes of values of `shape` (`reduced` = (k, keepdims)): one output per row of
    `inner` elements."""
    k, keepdims = reduced
    outer = tuple(shape[:len(shape) - k])
    rows = int(np.prod(outer, dtype=np.int64))
    inner = int(np.prod(shape[len(shape) - k:], dtype=np.int64))
    return rows, inner, outer + (1,) * k if keepdims else outer


def fused_call(kernel: FusedKernel, kind: type[FusedCall] = FusedCall, *args: Any) -> FusedCall:
    """The process's one call of `kernel` for `kind`'s target and these compile args: loaded now
    if cached, else compiling in the background (see the module docstring)."""
    global _pool
    key = (kind.target, args, kernel)
    with _lock:
        call = _calls.get(key)
        if call is not None:
            return call
        call = _calls[key] = kind(kernel, *args)
    compiler = fusion_compiler(kind.target)
    if compiler is None:
        call.failed = fusion_problem(kind.target)
        return call
    try:
        path = compiler.cached(kernel, *args)
        if path is not None:
            call.load(path)
            return call
    except Exception as exc:  # noqa: BLE001 - e.g. a GPU older than any arch NVRTC compiles
        call.fail(exc)
        return call
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="opsdk-fuse")
        _activity[0] += 1
        call.future = _pool.submit(call.compile_now, compiler)
    return call


def compile_activity() -> tuple[int, int]:
    """(background compiles started, finished) in this process so far. While they differ a
    compiler holds a core, so timings taken then are not the steady ones (exec/step_mode.py)."""
    with _lock:
        return _activity[0], _activity[1]


def wait_for_fused_kernels(timeout: Optional[float] = None) -> bool:
    """Wait until every fused kernel asked for so far is compiled (or failed); True if all did
    within `timeout` seconds. For tests and benchmarks: a step never waits for a compile."""
    with _lock:
        futures = [c.future for c in _calls.values() if c.future is not None]
    done, pending = wait(futures, timeout)
    return not pending
