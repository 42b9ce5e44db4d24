"""The one executor: one flat list of value slots, a pending count per step, a ready queue.

Every plan runs here: a Session step (all its partitions in one ready queue, each `_recv` after
its `_send`), a cluster task's partition, and every cond branch and while_loop body (their plans
compiled by the same pipeline). A value is released as
soon as its last reader has run (releasing functions in `Plan.serial_runs`, reader counts
otherwise), into the session's buffer pool where the plan says so (`Plan.pool_keys`).

A serial plan (a chain: never two steps ready at once) runs in order on the calling thread, with
no locks and no hand-offs. Otherwise the calling thread and a thread pool drive the ready queue:
a thread that finishes a step keeps one newly ready successor for itself and hands the others to
the pool, so chains inside a wide graph still run without hand-offs. Kernels release the GIL, so
independent nodes overlap. A failing step records its error, stops all further scheduling, and
the caller raises it at once, naming the node.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from concurrent.futures import Executor
from typing import Any, Optional

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.compile.plan import Plan
from opsdk.runtime.kernels.buffers import release


class CancelledError(OpsdkError):
    """A run stopped before it finished: cancelled (Session.close, Ctrl-C) or past its timeout."""


class RunToken:
    """The cancellation of one run: a flag any thread may set, and an optional deadline.

    Every blocking wait of the executor and every loop iteration checks it, so a run that is
    cancelled, interrupted or late stops at its next step or iteration (a kernel already
    running finishes first: compiled code cannot be stopped from outside)."""

    __slots__ = ("cancelled", "deadline", "reason")

    def __init__(self, timeout: Optional[float] = None):
        self.cancelled = False
        # A NaN deadline never passes (every comparison is false): refuse it, and whatever is
        # not a positive finite number of seconds, rather than run forever.
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, numbers.Real) or not 0 < timeout < math.inf):
            raise OpsdkError(f"Session.run: timeout must be a positive finite number of seconds "
                             f"or None, got {timeout!r}")
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.reason = ""

    def cancel(self, reason: str) -> None:
        if not self.cancelled:
            self.reason = reason
            self.cancelled = True

    def check(self, where: str) -> None:
        """Raise CancelledError naming `where` if the run must stop."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.cancel("its timeout passed")
        if self.cancelled:
            raise CancelledError(f"{where}: stopped because {self.reason}")


class StepContext:
    """What a running step may reach besides its inputs: the session's variables and session,
    the run's cancellation token, and where its `_send`/`_recv` steps meet (the rendezvous and
    the step's id in it; exec/rendezvous.py)."""

    __slots__ = ("variables", "session", "token", "rendezvous", "step_id", "buffers")

    def __init__(self, variables: Any, session: Any, token: Optional[RunToken] = None,
                 rendezvous: Any = None, step_id: int = 0, buffers: Any = None):
        self.variables = variables
        self.session = session
        self.token = token or RunToken()
        self.rendezvous = rendezvous
        self.step_id = step_id
        self.buffers = buffers  # the session's BufferPool (kernels/buffers.py), or None


def execute(plan: Plan, feeds: dict, ctx: StepContext, pool: Optional[Executor]) -> list:
    """Run `plan` with feed values (by tensor) and return the list of slot values."""
    values = list(plan.template)
    for tensor, slot in plan.feed_slots:
        values[slot] = feeds[tensor]
    return run_slots(plan, values, ctx, pool)


def run_slots(plan: Plan, values: list, ctx: StepContext, pool: Optional[Executor]) -> list:
    """Run `plan` over `values`, the plan's template with the fed values already in their
    slots (what Session.run's cached feed handling fills directly); returns `values`."""
    if plan.inline or pool is None:
        for run in plan.serial_runs:  # each step raises its own error naming its node;
            run(values, ctx)          # releases in between
    else:
        _Run(plan, values, ctx, pool).wait()
    return values


class _Run:
    """One concurrent execution of a plan."""

    def __init__(self, plan: Plan, values: list, ctx: StepContext, pool: Executor):
        self.plan, self.values, self.ctx, self.pool = plan, values, ctx, pool
        self.pending = list(plan.pending)
        self.readers = list(plan.readers)
        self.remaining = len(plan.steps)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error: Optional[BaseException] = None
        if self.remaining == 0:
            self.done.set()

    def wait(self) -> None:
        roots = self.plan.roots
        for i in roots[1:]:
            self._submit(i)
        try:
            if roots:
                self._drive(roots[0])
            self._wait_done()
        except BaseException as exc:  # Ctrl-C (or any failure) while waiting: stop the others
            self.ctx.token.cancel(f"the run was interrupted ({type(exc).__name__})")
            raise
        if self.error is not None:
            raise self.error

    def _wait_done(self) -> None:
        token = self.ctx.token
        while not self.done.wait(None if token.deadline is None else 0.05):
            try:
                token.check("Session.run")
            except CancelledError as exc:
                self._fail(exc)

    def _submit(self, i: int) -> None:
        try:
            self.pool.submit(self._drive, i)
        except RuntimeError as exc:  # the pool was shut down (session closed mid-step)
            self._fail(OpsdkError(f"cannot run node '{self.plan.steps[i].op.name}': the session "
                                  f"was closed during the step ({exc})"))

    def _drive(self, i: int) -> None:
        runs, successors, pool_keys = self.plan.runs, self.plan.successors, self.plan.pool_keys
        token = self.ctx.token
        while self.error is None:
            try:
                if token.cancelled:
                    token.check(f"node '{self.plan.steps[i].op.name}'")
                runs[i](self.values, self.ctx)
            except Exception as exc:  # already the user's error, naming the node
                self._fail(exc)
                return
            ready = []
            with self.lock:
                for s in self.plan.reads[i]:
                    self.readers[s] -= 1
                    if self.readers[s] == 0:
                        key = pool_keys[s]
                        if key is None:
                            self.values[s] = None
                        else:
                            release(self.ctx.buffers, key, self.values, s)
                for j in successors[i]:
                    self.pending[j] -= 1
                    if self.pending[j] == 0:
                        ready.append(j)
                self.remaining -= 1
                if self.remaining == 0:
                    self.done.set()
            if not ready:
                return
            for j in ready[1:]:
                self._submit(j)
            i = ready[0]

    def _fail(self, error: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = error
        self.done.set()
