"""Process settings opsdk makes when it is imported (set OPSDK_TUNE_PROCESS=0 to skip them).

- OpenMP (the compiled kernels' threads): OMP_WAIT_POLICY=PASSIVE unless set. By default its
  threads spin for a while after each parallel loop, taking the cores from BLAS's threads and
  the executor's; a TF1 MLP step (bench/bench_tf1.py, 2 cores) ran 4.8 ms so and 2.5 ms with
  sleeping threads. Read when the first kernel loads.
- glibc malloc: arrays up to 32 MB come from the heap, and up to 256 MB of freed heap is kept
  for reuse instead of being returned to the system at once. glibc's defaults hand every large
  array back and take it again on the next step, so each new buffer of a step page-faults: the
  same MLP step spent 0.3 of its 2.3 ms there (1.98 ms with these settings). Not on other C
  libraries; MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ set in the environment win.
"""

from __future__ import annotations

import ctypes
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20


def tune() -> None:
    if os.environ.get("OPSDK_TUNE_PROCESS", "1") == "0":
        return
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):  # not a glibc system
        return
    if not glibc.startswith("glibc"):
        return
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
