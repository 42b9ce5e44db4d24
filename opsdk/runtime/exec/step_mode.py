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

import threading
from typing import Optional

MODES = ("auto", "concurrent", "inline")
# Runs timed per mode, alternating, after one untimed warm-up run (first-call costs: shape
# checks, caches). Each mode is judged by its fastest run: other work on the machine only adds
# time, and a median of three still followed it (a TF1 MLP whose steps take 1.8 ms in order and
# 2.7 concurrently went concurrent in half of its processes, from trial runs of 3-22 ms).
TRIALS = 5
# The choice is made twice: after the first trials, and again after this many runs in the chosen
# mode, for good. A plan's first runs are not its steady ones: fused kernels compile in the
# background meanwhile (the step runs unfused, and the compiler holds a core), buffers are first
# allocated, caches are cold.
RECHECK_AFTER = 50


class StepMode:
    """The mode of one plan: `inline()` says how to run the next step; `record()` its time."""

    __slots__ = ("decided", "final", "_times", "_lock", "_warm", "_since", "_rechecking")

    def __init__(self, fixed: Optional[bool] = None):
        self.decided: Optional[bool] = fixed  # True: inline; False: concurrent; None: trying
        self.final = fixed is not None  # no further trials
        self._times: dict[bool, list[float]] = {True: [], False: []}
        self._lock = threading.Lock()
        self._warm = False
        self._since = 0  # runs in the mode of the first choice
        self._rechecking = False  # the second trials have begun

    def inline(self) -> bool:
        decided = self.decided
        if decided is not None:
            return decided
        if not self._warm:
            return False
        inline_runs, concurrent_runs = len(self._times[True]), len(self._times[False])
        return inline_runs < concurrent_runs  # alternate, concurrent first

    def record(self, inline: bool, seconds: float) -> None:
        if self.final:
            return
        with self._lock:
            if self.final:
                return
            if self.decided is not None:  # between the two choices: count the runs
                self._since += 1
                if self._since >= RECHECK_AFTER:  # trial again, both ways
                    self.decided, self._rechecking = None, True
                    self._times = {True: [], False: []}
                return
            if not self._warm:
                self._warm = True
                return
            self._times[inline].append(seconds)
            if min(len(t) for t in self._times.values()) >= TRIALS:
                self.decided = min(self._times[True]) < min(self._times[False])
                self.final = self._rechecking
