"""Fused elementwise kernels at run time: asking for their compile, loading them, calling them.

The runtime does not generate or compile code: it describes a kernel (registry.elementwise.
FusedKernel) and hands it to a compiler found as the `cpu` entry point of group
`opsdk.fusion_compilers` (the package names opsdk.build.fusion:COMPILER), looked up at first need.
A kernel the compiler's cache already holds is loaded at once; otherwise it is compiled on a
background thread, and until it is ready callers run the region unfused (`FusedCall.ready` is
False). A compile that fails is logged once and the region stays unfused.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Optional, Protocol

from opsdk.registry.callables import entry_point
from opsdk.registry.elementwise import FusedKernel

log = logging.getLogger("opsdk.fusion")
GROUP = "opsdk.fusion_compilers"


class FusionCompiler(Protocol):
    """What the runtime needs of the compiler of fused kernels."""

    def problem(self) -> Optional[str]: ...

    def cached(self, kernel: FusedKernel) -> Any: ...  # a library path, or None

    def compile(self, kernel: FusedKernel) -> Any: ...  # a library path

    def source_path(self, kernel: FusedKernel) -> Any: ...


_compiler: Optional[FusionCompiler] = None
_looked_up = False
_lock = threading.Lock()
_calls: dict[FusedKernel, "FusedCall"] = {}
_pool: Optional[ThreadPoolExecutor] = None
_said: set[str] = set()


def fusion_compiler() -> Optional[FusionCompiler]:
    """The compiler `set_fusion_compiler` gave, else the `cpu` entry point of GROUP (or None)."""
    global _compiler, _looked_up
    if _compiler is None and not _looked_up:
        _compiler = entry_point(GROUP, "cpu")
        _looked_up = True
    return _compiler


def set_fusion_compiler(given: Optional[FusionCompiler]) -> None:
    """Hand the runtime a compiler of fused kernels (None: look the entry point up again)."""
    global _compiler, _looked_up
    _compiler, _looked_up = given, False
    with _lock:
        _calls.clear()


def fusion_problem() -> Optional[str]:
    """Why fused kernels cannot be made here (None when they can)."""
    found = fusion_compiler()
    if found is None:
        return f"no fusion compiler is installed (entry point group {GROUP}; pip install -e .)"
    return found.problem()


def say_once(message: str) -> None:
    """Log `message` once per process (why the graph runs unfused)."""
    with _lock:
        if message in _said:
            return
        _said.add(message)
    log.warning(message)


class FusedCall:
    """One fused kernel: not ready while it compiles, then a C function of arrays."""

    def __init__(self, kernel: FusedKernel):
        self.kernel = kernel
        self.fn: Any = None
        self.failed: Optional[str] = None
        self.future: Optional[Future] = None

    @property
    def ready(self) -> bool:
        return self.fn is not None

    def load(self, path: Any) -> None:
        lib = ctypes.CDLL(str(path))
        fn = lib.opsdk_fused
        fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int)
        fn.restype = None
        self.fn = fn

    def compile_now(self, compiler: FusionCompiler) -> None:
        try:
            self.load(compiler.compile(self.kernel))
        except Exception as exc:  # noqa: BLE001 - a failed compile leaves the region unfused
            self.failed = str(exc)
            say_once(f"fused kernel {self.kernel.key()} failed to compile; its region runs "
                     f"unfused: {exc}")

    def __call__(self, inputs: list, outputs: list, n: int, threads: int) -> None:
        ins = (ctypes.c_void_p * len(inputs))(*[a.__array_interface__["data"][0] for a in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[a.__array_interface__["data"][0]
                                                  for a in outputs])
        self.fn(ins, outs, n, threads)


def fused_call(kernel: FusedKernel) -> FusedCall:
    """The process's one FusedCall of `kernel`: loaded now if cached, else compiling in the
    background (see the module docstring)."""
    global _pool
    with _lock:
        call = _calls.get(kernel)
        if call is not None:
            return call
        call = _calls[kernel] = FusedCall(kernel)
    compiler = fusion_compiler()
    if compiler is None:
        call.failed = fusion_problem()
        return call
    path = compiler.cached(kernel)
    if path is not None:
        call.load(path)
        return call
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="opsdk-fuse")
        call.future = _pool.submit(call.compile_now, compiler)
    return call


def wait_for_fused_kernels(timeout: Optional[float] = None) -> bool:
    """Wait until every fused kernel asked for so far is compiled (or failed); True if all did
    within `timeout` seconds. For tests and benchmarks: a step never waits for a compile."""
    with _lock:
        futures = [c.future for c in _calls.values() if c.future is not None]
    done, pending = wait(futures, timeout)
    return not pending
