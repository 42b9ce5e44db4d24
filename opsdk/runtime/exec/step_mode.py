"""Whether a plan's nodes run concurrently or in order on the caller's thread, chosen by timing.

Running independent nodes at once pays when kernels are single-threaded (NumPy's elementwise
ufuncs overlap: two exp chains on 2 cores run 1.1-1.4x faster). It costs when the heavy kernels
are multi-threaded themselves (BLAS, the compiled kernels' OpenMP loops): two of them at once
want twice the cores, and a TF1 MLP step on 2 cores took 3.7 ms concurrently against 2.5 ms in
order. Which one wins depends on the graph, the kernels and the machine, so a plan that could go
either way is timed both ways on its first runs and keeps the faster (`SessionConfig.step_mode`
fixes it instead).
"""

from __future__ import annotations

import statistics
import threading
from typing import Optional

MODES = ("auto", "concurrent", "inline")
# Runs timed per mode, after one untimed warm-up run (first-call costs: shape checks, caches).
TRIALS = 3


class StepMode:
    """The mode of one plan: `inline()` says how to run the next step; `record()` its time."""

    __slots__ = ("decided", "_times", "_lock", "_warm")

    def __init__(self, fixed: Optional[bool] = None):
        self.decided: Optional[bool] = fixed  # True: inline; False: concurrent; None: trying
        self._times: dict[bool, list[float]] = {True: [], False: []}
        self._lock = threading.Lock()
        self._warm = False

    def inline(self) -> bool:
        decided = self.decided
        if decided is not None:
            return decided
        if not self._warm:
            return False
        inline_runs, concurrent_runs = len(self._times[True]), len(self._times[False])
        return inline_runs < concurrent_runs  # alternate, concurrent first

    def record(self, inline: bool, seconds: float) -> None:
        if self.decided is not None:
            return
        with self._lock:
            if self.decided is not None:
                return
            if not self._warm:
                self._warm = True
                return
            self._times[inline].append(seconds)
            if min(len(t) for t in self._times.values()) >= TRIALS:
                self.decided = (statistics.median(self._times[True])
                                < statistics.median(self._times[False]))
