"""Session: runs parts of a graph, holds its variables, caches one plan per (fetches, feeds).

    with Session(graph) as sess:
        out = sess.run({"z": z, "train": train_op}, feed_dict={x: batch})

`run` is safe to call from several threads at once: per-step state is local to the call, the
plan cache and variable store are locked.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, overload

import numpy as np

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.compile.pipeline import build_plan, check_options
from opsdk.runtime.compile.plan import Plan
from opsdk.runtime.compile.program import PlanOptions
from opsdk.runtime.exec.executor import RunToken, StepContext, run_slots
from opsdk.runtime.exec.feeds import check_feed, feed_checker
from opsdk.runtime.exec.explain import Explanation, explain_plan
from opsdk.runtime.exec.fetches import FetchStructure
from opsdk.runtime.exec.profile import StepProfile, StepRecorder, check_counts
from opsdk.runtime.exec.rendezvous import LocalRendezvous
from opsdk.runtime.exec.step_mode import MODES, StepMode
from opsdk.runtime.exec.variable_store import VariableStore
from opsdk.runtime.ir.device_names import DEFAULT_TASK, task_spec
from opsdk.runtime.ir.graph import Graph, Operation, get_default_graph
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.call_cache import BoundedDict
from opsdk.runtime.kernels.buffers import (LEND_FROM, BufferPool, default_pool_bytes, owns_memory,
                                           pooling_problem)
from opsdk.runtime.kernels.threads import (check_intra_op_threads, pool_thread_budget,
                                           restore_intra_op_threads, use_intra_op_threads)

if TYPE_CHECKING:
    from opsdk.runtime.frontend.variables import Variable

_STRUCTURES_MAX = 256  # fetch structures remembered per session
_ELEMENT_TYPES = frozenset((Tensor, Operation, str))


@dataclass(frozen=True)
class SessionConfig:
    """Session switches. Optimisations never change results, only how much work a step does."""

    constant_folding: bool = True
    cse: bool = True
    # Threads that run independent nodes besides the caller's; None: one fewer than the cores
    # (at least one), so the caller and the pool together use every core and no more: more
    # threads than cores fight multi-threaded kernels (BLAS) for them (measured: an MLP step on
    # 2 cores, 23 ms with one worker, 29-145 ms with four).
    inter_op_threads: Optional[int] = None
    # Threads one kernel's parallel loops may use, shared by every kernel the session's threads
    # call (opsdk/runtime/kernels/threads.py); None: every core. Kernels use fewer while other runnable
    # threads keep the cores busy (opsdk::num_threads). On the caller's thread it holds while a
    # run's step runs; the thread's own budget comes back after.
    intra_op_threads: Optional[int] = None
    # An op with no kernel for its requested (or an unavailable) device runs where it can,
    # logged once per node; False makes that an error.
    allow_soft_placement: bool = True
    # Device types for nodes with no device scope, most preferred first (e.g. ("GPU", "CPU"));
    # None: every available accelerator, then the host.
    device_preference: Optional[tuple[str, ...]] = None
    # Passes of the compile pipeline to switch off, by name (see compile.pipeline.PASS_NAMES).
    passes_off: frozenset = frozenset()
    # The task of nodes whose device scope names none: a node's location is its scope's job,
    # replica and task, unset fields taken from here, and the device placement chose.
    default_task: str = DEFAULT_TASK
    # How a step whose nodes could run at once is run: "concurrent" (the caller's thread and
    # the pool), "inline" (in order on the caller's thread), or "auto": each plan is timed both
    # ways on its first runs and keeps the faster (exec/step_mode.py). Chains and small steps
    # always run inline.
    step_mode: str = "auto"
    # The most bytes of dead arrays the session keeps for reuse as kernels' outputs (the buffer
    # pool, opsdk/runtime/kernels/buffers.py); 0 switches the pool off. Default: 128 MiB, or
    # the environment's OPSDK_BUFFER_POOL_BYTES.
    buffer_pool_bytes: int = field(default_factory=default_pool_bytes)

    def plan_options(self) -> PlanOptions:
        """The pipeline's switches these settings give."""
        options = PlanOptions(self.constant_folding, self.cse, self.allow_soft_placement,
                              None if self.device_preference is None
                              else tuple(d.upper() for d in self.device_preference),
                              frozenset(self.passes_off), task_spec(self.default_task).to_string())
        check_options(options)
        check_intra_op_threads(self.intra_op_threads)
        if (isinstance(self.buffer_pool_bytes, bool) or not isinstance(self.buffer_pool_bytes, int)
                or self.buffer_pool_bytes < 0):
            raise OpsdkError(f"SessionConfig: buffer_pool_bytes must be an int >= 0 (0: no pool), "
                             f"got {self.buffer_pool_bytes!r}")
        if self.step_mode not in MODES:
            raise OpsdkError(f"SessionConfig: step_mode must be one of {', '.join(MODES)}, got "
                             f"{self.step_mode!r}")
        return options


@dataclass
class SessionStats:
    """Counters for tests and tuning: plans built (cache misses) and steps run."""

    plans_built: int = 0
    runs: int = 0


class Session:
    """Runs fetches of one graph (the default graph when none is given)."""

    def __init__(self, graph: Optional[Graph] = None, config: Optional[SessionConfig] = None):
        self.graph = graph if graph is not None else get_default_graph()
        self.config = config or SessionConfig()
        self.variables = VariableStore()
        self.stats = SessionStats()
        self._options = self.config.plan_options()
        self._plans: dict[tuple, Plan] = {}
        self._modes: dict[int, StepMode] = {}  # by id() of a cached plan
        self._structures = BoundedDict(_STRUCTURES_MAX)
        self._prepared = BoundedDict(_STRUCTURES_MAX)  # (fetch key, feed keys) -> Session._prepare's
        self._lock = threading.Lock()
        self._pool: Optional[ThreadPoolExecutor] = None
        self._closed = False
        self._active: set[RunToken] = set()
        # Runs on the caller's thread without a timeout share one token and context (close()
        # cancels it with the others); a run with a timeout, or on the pool, gets its own.
        self._shared_token = RunToken()
        self._active.add(self._shared_token)
        # Dead arrays kept for later steps' outputs; runs on several threads share it safely.
        self.buffers = (BufferPool(self.config.buffer_pool_bytes)
                        if self.config.buffer_pool_bytes and pooling_problem() is None else None)
        self._inline_ctx = StepContext(self.variables, self, self._shared_token,
                                       buffers=self.buffers)
        self._steps = itertools.count(1)  # step ids: where a step's _send meets its _recv

    # --------------------------------------------------------------------------- running
    # What type checkers see: one tensor (or variable) gives an array, one operation None, a
    # structure the same structure (Any: its shape is the caller's).
    @overload
    def run(self, fetches: Tensor | Variable, feed_dict: Optional[Mapping[Any, Any]] = None,
            timeout: Optional[float] = None) -> np.ndarray: ...

    @overload
    def run(self, fetches: Operation, feed_dict: Optional[Mapping[Any, Any]] = None,
            timeout: Optional[float] = None) -> None: ...

    @overload
    def run(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
            timeout: Optional[float] = None) -> Any: ...

    def run(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
            timeout: Optional[float] = None) -> Any:
        """Compute `fetches` (a Tensor, Operation, name, or nested list/tuple/dict/namedtuple of
        them) with `feed_dict` values; returns the same structure of NumPy values.

        `timeout` (seconds): a run still going then stops at its next step or loop iteration
        with a CancelledError naming where it was; `close()` from another thread and Ctrl-C stop
        a run the same way.

        A large result (256 KiB or more) may come as a view of an array the session writes a
        later run's result into once you have dropped the result and every view of it; until
        then it is yours. With `SessionConfig(buffer_pool_bytes=0)` results own their memory."""
        if self._closed:
            raise OpsdkError("Session.run on a closed session; create a new Session")
        intra = self.config.intra_op_threads
        # the session's budget on this thread while its step runs, the thread's own after
        previous = None if intra is None else use_intra_op_threads(intra)
        try:
            structure, plan, values = self._prepare(fetches, {} if feed_dict is None else feed_dict)
            mode = None if plan.inline else self._modes[id(plan)]
            if timeout is None and not plan.rendezvous and (
                    mode is None or (mode.decided and mode.final)):
                # the common small step, or one whose timing chose to run in order: the caller's
                # thread, the shared token and context, nothing to time
                run_slots(plan, values, self._inline_ctx, None)
                self.stats.runs += 1
                return structure.rebuild(_fetched(values, plan, self.buffers))
            inline = True if mode is None else mode.inline()
            seconds = self._run_plan(plan, values, inline, timeout)
            if mode is not None and not mode.final:
                mode.record(inline, seconds)
            return structure.rebuild(_fetched(values, plan, self.buffers))
        finally:
            if intra is not None:
                restore_intra_op_threads(previous)

    def _run_plan(self, plan: Plan, values: list, inline: bool, timeout: Optional[float]) -> float:
        """Run `plan` over `values` (in order here, or on the session's pool) under a token of
        its own, which close(), Ctrl-C and `timeout` cancel; the seconds the run took."""
        pool = None if inline else self._get_pool()
        token = RunToken(timeout)
        active = self._active
        active.add(token)  # set.add/discard are atomic; close() cancels what it finds here
        try:
            if self._closed:  # closed while this run was starting: close() may have missed it
                raise OpsdkError("Session.run on a closed session; create a new Session")
            start = time.perf_counter()
            run_slots(plan, values, StepContext(
                self.variables, self, token, LocalRendezvous() if plan.rendezvous else None,
                next(self._steps), self.buffers), pool)
            seconds = time.perf_counter() - start
        finally:
            active.discard(token)
        self.stats.runs += 1
        return seconds

    def profile(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                steps: int = 10, warmup: int = 10, show: bool = True) -> StepProfile:
        """Run `fetches` `warmup` times, then `steps` times with every node timed, and say where
        the time went: per node and per op type, a step's share of each, and the time outside
        the nodes. Printed unless `show=False`; `chrome_trace(path)` of the result writes every
        node run for chrome://tracing or Perfetto. The runs are the session's own (its kernels,
        buffers, variables and threads: a training step trains) and count in `stats.runs`.

        >>> sess.profile(train_op, {x: batch}, steps=20).chrome_trace("step.json")  # doctest: +SKIP
        """
        check_counts("Session.profile", steps, warmup)
        feed_dict = {} if feed_dict is None else feed_dict
        for _ in range(warmup):
            Session.run(self, fetches, feed_dict)  # this class's run: the feeds are as it takes them
        _, result = self._timed_runs("Session.profile", fetches, feed_dict, steps, warmup, None)
        if show:
            print(result)
        return result

    def traced_run(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                   timeout: Optional[float] = None) -> tuple[Any, StepProfile]:
        """`run` once with every node timed: (what `run` returns, the step's StepProfile).
        The profile's `events` give each node run's start and end, `started` the step's start
        as Unix time. A TF1 run with `RunOptions(trace_level=FULL_TRACE)` is one of these."""
        return self._timed_runs("Session.traced_run", fetches,
                                {} if feed_dict is None else feed_dict, 1, 0, timeout)

    def _timed_runs(self, who: str, fetches: Any, feed_dict: Mapping[Any, Any], steps: int,
                    warmup: int, timeout: Optional[float]) -> tuple[Any, StepProfile]:
        """Run the plan of `fetches` `steps` times with its nodes timed: (the last run's
        result, the profile)."""
        structure, plan, _ = self._prepare(fetches, feed_dict)
        mode = None if plan.inline else self._modes[id(plan)]
        inline = mode is None or mode.decided is not False  # as the session runs it (trials: in order)
        recorder = StepRecorder(plan)
        timed = recorder.timed_plan()
        intra = self.config.intra_op_threads
        previous = None if intra is None else use_intra_op_threads(intra)
        result = None
        try:
            for _ in range(steps):
                if self._closed:
                    raise OpsdkError(f"{who} on a closed session; create a new Session")
                _, _, values = self._prepare(fetches, feed_dict)
                recorder.begin()
                self._run_plan(timed, values, inline, timeout)
                recorder.end()
                # what a run hands out, lent buffers included
                result = structure.rebuild(_fetched(values, timed, self.buffers))
        finally:
            if intra is not None:
                restore_intra_op_threads(previous)
        return result, recorder.profile(warmup, inline)

    def _prepare(self, fetches: Any, feed_dict: Mapping[Any, Any]) -> tuple:
        """(fetch structure, plan, the plan's slot list with the fed values in place). A run
        repeating an earlier one's fetches (a Tensor, Operation, name or flat list/tuple of
        them) and feed keys (this graph's Tensors, in the same order) reuses what the earlier
        one resolved: the plan and, per key, its slot and a feed check specialised to it."""
        key = _fetch_key(fetches)
        if key is not None:
            fast_key = (key, tuple(feed_dict))
            entry = self._prepared.data.get(fast_key)
            if entry is not None:
                structure, plan, feeders = entry
                values = list(plan.template)
                for (slot, check), value in zip(feeders, feed_dict.values()):
                    value = check(value)  # every fed value is checked, read or not
                    if slot is not None:
                        values[slot] = value
                return structure, plan, values
        structure = self._structure(fetches, key)
        raw = self._feed_values(feed_dict)
        plan = self.plan_for(structure.elements, tuple(raw))
        slots = dict(plan.feed_slots)
        # A device array fed where only that device reads it stays there (plan.device_feeds).
        feeds = {t: check_feed(t, v, plan.device_feeds.get(slots.get(t))) for t, v in raw.items()}
        graph = self.graph
        if key is not None and all(type(k) is Tensor and k.op.graph is graph for k in feed_dict):
            self._prepared.put(fast_key, (structure, plan, tuple(
                (slots.get(k), feed_checker(k, plan.device_feeds.get(slots.get(k))))
                for k in feed_dict)))
        values = list(plan.template)
        for tensor, slot in plan.feed_slots:
            values[slot] = feeds[tensor]
        return structure, plan, values

    def plan_for(self, elements: list, feeds: tuple[Tensor, ...]) -> Plan:
        """The cached plan for these fetches and fed tensors, built on first use."""
        key = (tuple(elements), frozenset(feeds))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = build_plan(elements, feeds, self._options)
                fixed = {"auto": None, "inline": True, "concurrent": False}[self.config.step_mode]
                self._modes[id(plan)] = StepMode(fixed)
                self._plans[key] = plan
                self.stats.plans_built += 1
        return plan

    def explain(self, fetches: Any, feed_dict: Optional[Mapping[Any, Any]] = None,
                show: bool = True) -> Explanation:
        """What each pass of the pipeline did for these fetches and feeds: where each node went,
        which copies were inserted, what was folded or merged, and the partitions. Printed
        unless `show=False`; nothing runs. `feed_dict` values may be None (only the keys count).

        >>> sess.explain(loss, {x: None})                       # doctest: +SKIP
        """
        structure = FetchStructure(self.graph, fetches)
        feeds = tuple(self._feed_keys(feed_dict or {}))
        plan = build_plan(structure.elements, feeds, self._options)
        explanation = explain_plan(plan)
        if show:
            print(explanation)
        return explanation

    def _feed_keys(self, feed_dict: Mapping[Any, Any]) -> list[Tensor]:
        keys = []
        for key in feed_dict:
            element = self.graph.as_graph_element(key)
            if isinstance(element, Operation):
                raise OpsdkError(f"cannot feed node '{element.name}'; feed one of its tensors, "
                                 f"e.g. '{element.name}:0'")
            keys.append(element)
        return keys

    def _structure(self, fetches: Any, key: Optional[tuple]) -> FetchStructure:
        """The FetchStructure of `fetches` (whose `_fetch_key` is `key`), remembered when they
        are a Tensor, Operation or name, or a flat list/tuple of those (what a training loop
        passes on every step)."""
        if key is None:
            return FetchStructure(self.graph, fetches)
        structure = self._structures.data.get(key)
        if structure is None:
            structure = FetchStructure(self.graph, fetches)  # raises before anything is kept
            self._structures.put(key, structure)
        return structure

    def _feed_values(self, feed_dict: Mapping[Any, Any]) -> dict[Tensor, Any]:
        """The fed values by tensor, as given (checked once the plan says where each is read)."""
        feeds: dict[Tensor, Any] = {}
        for key, value in feed_dict.items():
            if type(key) is Tensor and key.op.graph is self.graph:  # as_graph_element's answer
                feeds[key] = value
                continue
            try:
                element = self.graph.as_graph_element(key)
            except OpsdkError as exc:
                raise OpsdkError(f"cannot feed {getattr(key, 'name', key)!r}: {exc}") from None
            if isinstance(element, Operation):
                raise OpsdkError(f"cannot feed node '{element.name}'; feed one of its tensors, "
                                 f"e.g. '{element.name}:0'")
            feeds[element] = value
        return feeds

    def _get_pool(self) -> ThreadPoolExecutor:
        # The caller's thread keeps the session's budget (it runs chains and every inline step);
        # each pool thread gets its share (pool_thread_budget).
        with self._lock:
            if self._pool is None:
                workers = self.config.inter_op_threads or max(1, (os.cpu_count() or 2) - 1)
                self._pool = ThreadPoolExecutor(
                    workers, thread_name_prefix="opsdk-step", initializer=use_intra_op_threads,
                    initargs=(pool_thread_budget(self.config.intra_op_threads, workers),))
            return self._pool

    # --------------------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Stop the runs in flight (at their next step or loop iteration), release the threads;
        the session's variable values are dropped."""
        with self._lock:
            self._closed = True
            for token in list(self._active):
                token.cancel("the session was closed")
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self.buffers is not None:
            self.buffers.clear()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _fetch_key(fetches: Any) -> Optional[tuple]:
    """A hashable key for fetches whose structure can be remembered, else None."""
    kind = type(fetches)
    if kind in _ELEMENT_TYPES:
        return (kind, fetches)
    if kind is list or kind is tuple:
        for item in fetches:
            if type(item) not in _ELEMENT_TYPES:
                return None
        return (kind, tuple(fetches))
    return None


_refs = sys.getrefcount


def _fetched(values: list, plan: Plan, pool: Optional[BufferPool]) -> list:
    """The value of each fetched slot (None for an Operation); a read-only array (a constant,
    a variable's stored value: shared by every step) is handed out as a copy. A large array a
    pooled step wrote, which only its slot holds, is lent: the caller gets a view of it and the
    pool takes it back once the caller has dropped that and every view of it (kernels/buffers.py:
    BufferPool.lend)."""
    out = []
    lends = plan.fetch_lends
    if not lends or pool is None:
        for slot in plan.fetch_slots:
            value = None if slot is None else values[slot]
            if isinstance(value, np.ndarray) and not value.flags.writeable:
                value = value.copy()
            out.append(value)
        return out
    handed: Optional[dict] = None  # slot -> the view lent for it (a slot fetched twice)
    for i, slot in enumerate(plan.fetch_slots):
        value = None if slot is None else values[slot]
        if isinstance(value, np.ndarray):
            if not value.flags.writeable:
                value = value.copy()
            elif lends[i] is not None:
                if handed is not None and slot in handed:
                    value = handed[slot]
                elif (value.nbytes >= LEND_FROM and _refs(value) == 3  # the slot, `value`, arg
                        and value.flags.c_contiguous and owns_memory(value)):
                    value = pool.lend((lends[i], value.dtype, value.shape), value)
                    values[slot] = value
                    handed = handed or {}
                    handed[slot] = value
        out.append(value)
    return out
