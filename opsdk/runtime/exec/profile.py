"""`Session.profile`: where a step's time goes, node by node, as data, as text and as a trace.

A profiled run is the session's own run of the cached plan, with each node's run function
wrapped in a timer (`Plan.with_runs`): the same kernels, buffers and mode (in order on the
caller's thread, or concurrent on the session's pool, as the session runs that plan). The
timers cost about 0.3 µs a node, so a plan of tiny nodes shows a little slower than it runs.
The cached plan itself is never changed: runs before and after a profile are untouched.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.plan import Plan


def check_counts(who: str, steps: Any, warmup: Any) -> None:
    """A profile's `steps` (1 or more) and `warmup` (0 or more) as whole numbers, else an
    OpsdkError naming `who` (Session.profile, ClusterSession.profile)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise OpsdkError(f"{who}: steps={steps!r}; give a whole number of steps, 1 or more")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise OpsdkError(f"{who}: warmup={warmup!r}; give a whole number of runs, 0 or more")


@dataclass(frozen=True)
class NodeTiming:
    """One node of the plan over the profiled steps."""

    name: str
    type: str
    device: str  # where it ran ("" when placement left it to the default)
    calls: int
    seconds: float  # in total, over the profiled steps


@dataclass(frozen=True)
class StepProfile:
    """What `Session.profile` measured. `str()` is the table it prints."""

    steps: int
    warmup: int
    inline: bool  # the nodes ran in order on the caller's thread (else concurrently)
    walls: tuple[float, ...]  # seconds per profiled step
    nodes: tuple[NodeTiming, ...]  # every node that ran, the most time first
    # every node run: (node, op type, thread number, start, end), seconds from the first step's
    # start; thread 0 is the caller's
    events: tuple[tuple[str, str, int, float, float], ...]
    started: float = 0.0  # the first profiled step's start, as Unix time (time.time())

    @property
    def step_seconds(self) -> float:
        """The median step."""
        return statistics.median(self.walls)

    def by_type(self) -> tuple[tuple[str, float, int], ...]:
        """(op type, seconds a step, nodes of it), the most time first."""
        seconds: dict[str, float] = {}
        count: dict[str, int] = {}
        for node in self.nodes:
            seconds[node.type] = seconds.get(node.type, 0.0) + node.seconds / self.steps
            count[node.type] = count.get(node.type, 0) + 1
        return tuple(sorted(((t, s, count[t]) for t, s in seconds.items()), key=lambda r: -r[1]))

    def outside_nodes(self) -> Optional[float]:
        """Seconds a step spent outside every node (the executor, feeds, fetches, releases):
        known only where the nodes ran in order."""
        if not self.inline:
            return None
        return max(sum(self.walls) - sum(n.seconds for n in self.nodes), 0.0) / self.steps

    def __str__(self, top: int = 15) -> str:
        # Per node and type: the mean a step, and its share of all the profiled steps' time (a
        # median step beside means would not add up where some steps are slow).
        step = sum(self.walls) / self.steps
        how = ("nodes run in order on the caller's thread" if self.inline else
               "nodes run concurrently on the session's pool: their times overlap")
        out = [f"{self.steps} steps after {self.warmup} warm-up runs: {ms(self.step_seconds)} a "
               f"step (median; mean {ms(step)}, {ms(min(self.walls))} to "
               f"{ms(max(self.walls))}), {how}",
               "  a step     share  node (op type; the mean a step, its share of the steps' time)"]
        several = len({node.device for node in self.nodes}) > 1  # name devices only then
        for node in self.nodes[:top]:
            each = node.seconds / self.steps
            where = f", {node.device}" if several and node.device else ""
            out.append(f"  {ms(each):>9}  {share(each, step)}  {node.name} ({node.type}{where})")
        rest = self.nodes[top:]
        if rest:
            each = sum(n.seconds for n in rest) / self.steps
            out.append(f"  {ms(each):>9}  {share(each, step)}  {len(rest)} more nodes")
        out.append("by op type:")
        for op_type, each, count in self.by_type():
            nodes = f"{count} node{'s' if count != 1 else ''}"
            out.append(f"  {ms(each):>9}  {share(each, step)}  {op_type} ({nodes})")
        outside = self.outside_nodes()
        if outside is not None:
            out.append(f"outside the nodes (executor, feeds, fetches, releases): {ms(outside)} a step")
        return "\n".join(out)

    def chrome_trace(self, path: str | os.PathLike) -> None:
        """Write every profiled node run to `path` as a trace for chrome://tracing or Perfetto
        (its JSON "X" events: one row per thread, times in microseconds)."""
        events: list[dict[str, Any]] = [
            {"name": name, "cat": op_type, "ph": "X", "pid": 0, "tid": thread,
             "ts": round(start * 1e6, 3), "dur": round((end - start) * 1e6, 3)}
            for name, op_type, thread, start, end in self.events]
        events += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": thread,
                    "args": {"name": "caller" if thread == 0 else f"pool {thread}"}}
                   for thread in sorted({e[2] for e in self.events})]
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


class StepRecorder:
    """Times the nodes of `plan` over the steps run between `begin()` and `end()`."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self._events: list = []  # (node index, start, end, thread ident); list.append is atomic
        self._walls: list[float] = []
        self._origin: Optional[float] = None
        self._started = 0.0
        self._start = 0.0

    def timed_plan(self) -> Plan:
        """The plan with every node's run function timed."""
        events = self._events

        def timed(i: int, run: Any) -> Any:
            def run_timed(values: list, ctx: Any) -> None:
                start = time.perf_counter()
                try:
                    run(values, ctx)
                finally:
                    events.append((i, start, time.perf_counter(), threading.get_ident()))
            return run_timed
        return self.plan.with_runs(tuple(timed(i, run) for i, run in enumerate(self.plan.runs)))

    def begin(self) -> None:
        self._start = time.perf_counter()
        if self._origin is None:
            self._origin = self._start
            self._started = time.time()

    def end(self) -> None:
        self._walls.append(time.perf_counter() - self._start)

    def node_runs(self) -> list[tuple[str, str, str, int, float, float]]:
        """Every timed node run so far: (node, op type, device, thread ident, start, end), the
        times in time.perf_counter() seconds."""
        steps = self.plan.steps
        placed = getattr(self.plan.program, "device", None) or {}
        return [(steps[i].op.name, steps[i].op.type, _device_name(placed.get(steps[i].op), steps[i].op),
                 ident, start, end) for i, start, end, ident in list(self._events)]

    def profile(self, warmup: int, inline: bool) -> StepProfile:
        steps = self.plan.steps
        calls = [0] * len(steps)
        seconds = [0.0] * len(steps)
        threads: dict[int, int] = {threading.get_ident(): 0}  # the caller's thread first
        events = []
        origin = self._origin if self._origin is not None else 0.0
        for i, start, end, ident in self._events:
            calls[i] += 1
            seconds[i] += end - start
            op = steps[i].op
            events.append((op.name, op.type, threads.setdefault(ident, len(threads)),
                           start - origin, end - origin))
        placed = getattr(self.plan.program, "device", None) or {}
        nodes = sorted((NodeTiming(s.op.name, s.op.type, _device_name(placed.get(s.op), s.op), calls[i],
                                   seconds[i])
                        for i, s in enumerate(steps) if calls[i]), key=lambda n: -n.seconds)
        return StepProfile(steps=len(self._walls), warmup=warmup, inline=inline,
                           walls=tuple(self._walls), nodes=tuple(nodes), events=tuple(events),
                           started=self._started)


def _device_name(device: Any, op: Any) -> str:
    """The device `op` was placed on (program.device), else the one it asked for."""
    name = getattr(device, "name", None)
    return name if isinstance(name, str) else (op.device or "")


def ms(seconds: float) -> str:
    """Seconds as milliseconds, for the profiles' tables."""
    return f"{seconds * 1e3:.3f} ms"


def share(part: float, whole: float) -> str:
    """`part` as a percentage of `whole`, 5 wide."""
    return f"{100 * part / whole:5.1f}%" if whole > 0 else "    -"
