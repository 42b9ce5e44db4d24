"""Matrix products of the host's kernels on the session's one thread pool.

matmul's and matmul_grad's python kernels call `product` for the 2-D float32/float64 products of
NumPy arrays that are worth a parallel loop. It runs the `gemm` op's built cpu kernel
(opdefs/builtin/gemm_cpu.cc): c cut into one panel per thread of the session's budget, a
single-threaded OpenBLAS gemm on each, so the product's threads are the OpenMP threads every
other compiled kernel uses (and the budget they share, kernels/threads.py).

NumPy's own BLAS keeps a thread pool of its own, whose workers spin for about 0.1 s after each
product: a training step alternating products and compiled kernels had two pools competing for
the cores, and each waited for the other's descheduled threads (the deep-MNIST CNN's
convolutions ran at half speed right after a product).

The BLAS is the scipy-openblas32 package's library: loaded here once, into the global symbol
scope where the kernel looks its functions up, with its thread count set to 1. It is a copy of
its own (NumPy and SciPy ship theirs under other names), so the setting changes nobody else's
products. Where the package or the built kernel is absent, `product` returns None and the caller
uses NumPy, as before. `OPSDK_HOST_GEMM=0` in the environment sends every product to NumPy too
(read at import; for comparisons, and for a process that wants NumPy's BLAS threads).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Callable, Optional

import numpy as np

# Below this many floating-point operations a product stays with NumPy: the built kernel's call
# costs a few microseconds more than NumPy's, and such a product runs on one thread anyway.
MIN_FLOPS = 1 << 20

_ENABLED = os.environ.get("OPSDK_HOST_GEMM", "1").strip() != "0"
_lock = threading.Lock()
_state: dict[str, Any] = {"loaded": False, "problem": None}
_calls: dict[tuple, Optional[Callable]] = {}


def blas_problem() -> Optional[str]:
    """Why the gemm kernel would run without OpenBLAS (None: the library is loaded)."""
    _load_library()
    return _state["problem"]


def _load_library() -> None:
    if _state["loaded"]:
        return
    with _lock:
        if _state["loaded"]:
            return
        try:
            import scipy_openblas32 as package

            path = os.path.join(package.get_lib_dir(), package.get_library(fullname=True))
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            lib.scipy_openblas_set_num_threads.argtypes = (ctypes.c_int,)
            lib.scipy_openblas_set_num_threads.restype = None
            lib.scipy_openblas_set_num_threads(1)  # each panel's call runs on its own thread
            _state["library"] = lib  # kept: the kernel's function pointers point into it
        except ImportError:
            _state["problem"] = "the scipy-openblas32 package is not installed"
        except (OSError, AttributeError, IndexError) as exc:
            _state["problem"] = f"scipy-openblas32's library does not load: {exc}"
        _state["loaded"] = True


def _gemm_call(dtype: np.dtype, ta: bool, tb: bool) -> Optional[Callable]:
    """The gemm op's built cpu kernel with these attrs bound, or None where it is not built."""
    key = (dtype, ta, tb)  # (not dtype.name: NumPy builds that string anew, 2 us a product)
    if key in _calls:
        return _calls[key]
    call = None
    if _state["problem"] is None:
        from opsdk.registry import load_registry
        from opsdk.registry.errors import OpsdkError
        from opsdk.runtime.kernels.choice import choose_kernel, kernel_call

        spec = load_registry(None).get("gemm")  # the builtin ops
        try:
            choice = choose_kernel(spec, kind="cpu")
        except OpsdkError:  # not built: NumPy serves (the build is `opsdk build`'s concern)
            choice = None
        if choice is not None:
            attrs = {"transpose_a": int(ta), "transpose_b": int(tb)}
            call = kernel_call(spec, choice, attrs, {"T": dtype.name})
    _calls[key] = call
    return call


def product(a: Any, b: Any, ta: bool = False, tb: bool = False) -> Optional[np.ndarray]:
    """op(a) @ op(b) (op: the transpose where ta / tb) on the built gemm kernel, for 2-D NumPy
    arrays of one float dtype whose product is worth a parallel loop; None otherwise (the
    caller computes it)."""
    if not _ENABLED or not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        return None
    if a.ndim != 2 or b.ndim != 2:
        return None
    if a.dtype != b.dtype or a.dtype.char not in "fd" or not a.dtype.isnative:  # float32/64
        return None
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = b.shape[0] if tb else b.shape[1]
    if 2 * m * n * k < MIN_FLOPS or (b.shape[1] if tb else b.shape[0]) != k:
        return None  # small, or a mismatch whose error NumPy words as always
    # A transposed view (F-contiguous) is its C-contiguous base with the flag flipped: no copy.
    if not a.flags.c_contiguous and a.T.flags.c_contiguous:
        a, ta = a.T, not ta
    if not b.flags.c_contiguous and b.T.flags.c_contiguous:
        b, tb = b.T, not tb
    _load_library()
    call = _gemm_call(a.dtype, ta, tb)
    if call is None:
        return None
    return call((a, b))
