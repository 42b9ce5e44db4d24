"""Process-wide settings opsdk can make, only when asked: `opsdk.tune_process()`, or
OPSDK_TUNE_PROCESS=1 in the environment (applied on `import opsdk`). `import opsdk` alone
changes nothing in the process (docs/internals.md, Process settings).

- OpenMP (the compiled kernels' threads): OMP_WAIT_POLICY=PASSIVE unless set. By default its
  threads spin for a while after each parallel loop, taking the cores from BLAS's threads and
  the executor's; a TF1 MLP step (bench/bench_tf1.py, 2 cores) ran 4.8 ms so and 2.5 ms with
  sleeping threads. OpenMP reads it once, when the first kernel loads: call this before that.
- glibc malloc: arrays up to 32 MB come from the heap, and up to 256 MB of freed heap is kept
  for reuse, instead of glibc handing large arrays back to the system and page-faulting them in
  again on the next step. The session's buffer pool (opsdk/runtime/kernels/buffers.py) keeps
  the outputs of kernels that take given buffers without it; this still helps kernels that
  allocate (NumPy's matmul, for one). Not on other C libraries; MALLOC_MMAP_THRESHOLD_ /
  MALLOC_TRIM_THRESHOLD_ set in the environment win.
"""

from __future__ import annotations

import ctypes
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
ENV = "OPSDK_TUNE_PROCESS"


def tune_process() -> dict:
    """Make opsdk's process-wide settings (OpenMP's idle threads sleep; glibc keeps freed
    arrays) where the environment has not chosen otherwise. Returns what was set, by name.

    Sleeping OpenMP threads make way for NumPy's own BLAS threads; where the host's products run
    on the kernels' threads (the default, docs/internals.md) they cost each parallel loop a
    wake-up instead, and small training steps run slower.

    >>> import opsdk; opsdk.tune_process()      # doctest: +SKIP
    {'OMP_WAIT_POLICY': 'PASSIVE', 'mallopt': True}
    """
    done: dict = {}
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = done["OMP_WAIT_POLICY"] = "PASSIVE"
    done["mallopt"] = _keep_freed_arrays()
    return done


def _keep_freed_arrays() -> bool:
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):  # not a glibc system
        return False
    if not glibc.startswith("glibc"):
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def tune_if_asked() -> None:
    """On `import opsdk`: tune the process only when OPSDK_TUNE_PROCESS=1."""
    if os.environ.get(ENV, "0") == "1":
        tune_process()
