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
from typing import Callable, Optional

from opsdk.runtime.kernels.fused import compile_activity

MODES = ("auto", "concurrent", "inline")
# Runs timed per mode, alternating, after one untimed warm-up run (first-call costs: shape
# checks, caches). Each mode is judged by its second-fastest run: other work on the machine only
# adds time, and a median of three still followed it (a TF1 MLP whose steps take 1.8 ms in order
# and 2.7 concurrently went concurrent in half of its processes, from trial runs of 3-22 ms); but
# one run in either mode may also be lucky (an LSTM step of bench/bench_tf1.py timed concurrently
# at 38.7 ms once and 46-48 ms otherwise, against 40-47 ms in order, went concurrent by its
# fastest run, and then took 44-48 ms a step against 40-42 in order).
TRIALS = 5
# The choice is made again, for good, after this many runs in the chosen mode when a fused kernel
# was compiling in the background during the first trials: the step then ran unfused, and the
# compiler held a core. Otherwise the first choice stands: the trials of the losing mode are
# steps at its pace (a deep-MNIST CNN step timed concurrently ran its heavy kernels on pool
# threads of one thread each, at half speed), and the untimed warm-up run has already allocated
# the buffers and loaded the kernels.
RECHECK_AFTER = 50


class StepMode:
    """The mode of one plan: `inline()` says how to run the next step; `record()` its time."""

    __slots__ = ("decided", "final", "_times", "_lock", "_warm", "_since", "_rechecking",
                 "_activity", "_at_start")

    def __init__(self, fixed: Optional[bool] = None,
                 activity: Callable[[], tuple[int, int]] = compile_activity):
        self.decided: Optional[bool] = fixed  # True: inline; False: concurrent; None: trying
        self.final = fixed is not None  # no further trials
        self._times: dict[bool, list[float]] = {True: [], False: []}
        self._lock = threading.Lock()
        self._warm = False
        self._since = 0  # runs in the mode of the first choice
        self._rechecking = False  # the second trials have begun
        self._activity = activity  # (background compiles started, finished) so far
        self._at_start: Optional[tuple[int, int]] = None  # the activity as the trials began

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
                self._at_start = self._activity()
                return
            self._times[inline].append(seconds)
            if min(len(t) for t in self._times.values()) >= TRIALS:
                self.decided = _judged(self._times[True]) < _judged(self._times[False])
                at_start = self._at_start  # no compile in flight then, none started since
                quiet = (at_start is not None and at_start[0] == at_start[1]
                         and self._activity() == at_start)
                self.final = self._rechecking or quiet


def _judged(times: list[float]) -> float:
    """A mode's time: its second-fastest trial run (TRIALS of them, at least two)."""
    return sorted(times)[1]
