"""Steady steps as Ray compiled graphs: the calls of a steady step set up once, then run with
shared-memory channels between the client and the tasks.

A steady step (opsdk/dist/prefetch.py) is a fixed chain of calls: the tasks in an order where
values flow one way, each call taking the values of the calls before. Submitting those calls
as Ray tasks costs about a round trip each (docs/distributed.md, Speed). Ray Core's compiled
graphs (`ray.dag`, `experimental_compile`) set such a chain up once: every task runs a loop
reading its arguments from channels, and a step is the client writing its inputs and reading
the outputs, a fraction of a round trip (bench/bench_dist.py measures both).

The graph of one step is `run_step` on each task in the steady order, as the plain steady
launch calls it (through `run_graph_step`, which packs the client's values into one input and
one output a task): the call's tuple and the kept rounds come from the client, the values
pushed to the task last run too (the previous run's outputs, read back by the client: a graph
carries nothing from one run to the next), and the values of the tasks before it come over
their channels. Its outputs are each task's fetched values and what this run pushes for the
next. Where the client runs its own task's part (the head, opsdk/dist/inprocess.py), the graph
holds the other tasks: the client runs the head first, and what it sends them joins their
inputs.

What this answers (each with a test in tests/dist/test_compiled.py):

- Ray runs every compiled graph's loop on an actor in the actor's `_ray_system` concurrency
  group, one thread by default: a second graph on a ps would wait behind the first, whose step
  waits for the second client's gradient. Task actors size that group (`graph_slots()`), and a
  client claims a slot on each of its tasks before it compiles; with none free it keeps the
  plain steady launch. Ray documents one graph per actor at a time: more than one only on the
  Ray versions this was tested with (`TESTED_RAY`).
- A task's error reaches every later output (Ray passes it on instead of running the calls
  that take the failed value): the first output, in the steady order, names the task.
- A task that dies breaks the graph: the client tears it down (quietly: Ray logs each loop it
  cannot cancel on a dead task) and runs the next steps in full until it compiles again.
- A graph holds threads on its tasks until torn down: `ClusterSession.close()` does, and so
  does the graph's collection.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import statistics
import weakref
from typing import Any, Callable, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError

from opsdk.dist import wire
from opsdk.dist.prefetch import StepMode

GRAPH_SLOTS = 8  # compiled graphs one task takes part in at once (threads of `_ray_system`)
# Ray documents one compiled graph per actor at a time; several at once, each on a thread of
# the sized `_ray_system` group, is what these Ray versions do (tests/dist/test_compiled.py
# runs two clients' graphs on one ps). On any other version a task takes part in one graph.
TESTED_RAY = ("2.60.",)


def graph_slots() -> int:
    """How many compiled graphs one task takes part in at once on this Ray version."""
    from opsdk.dist.engine import ray_module

    return GRAPH_SLOTS if ray_module().__version__.startswith(TESTED_RAY) else 1
COMPILE_AFTER = 2  # steady runs of a step before its graph is compiled (0.1 s, once)
BUFFER_BYTES = 64 * 1024  # a channel's buffer before a larger value grows it

# A graph is kept only while it pays. Its tasks and client wait for each run in a busy loop
# (Ray's channels), so on a machine with few cores they take CPU from the client's own work
# between steps: a client doing 5 ms of NumPy products between null steps (2 cores) ran a cycle
# in 17.6-20.3 ms compiled against 10.3-10.5 with task calls, the compiled cycles mostly 7-8 ms
# with bursts of 20-115 ms when the BLAS threads and the spinning loops met. So a step's cycles,
# from one run's start to the next one's (the client's work between them included), are timed
# both ways, and every GRAPH_TRIAL compiled ones (after GRAPH_WARMUP left out) are judged by
# their mean against the last CALL_CYCLES of task calls'.
GRAPH_WARMUP, GRAPH_TRIAL, CALL_CYCLES = 3, 30, 50
MIN_CALL_CYCLES = 10  # fewer task-call cycles timed (compile_after_s=0): nothing to judge by
PAYS = 0.95  # a graph stays while its cycles' mean is below this share of the task calls'
# A graph torn down for not paying is tried again after this many steady runs of task calls,
# twice as many after each further one that does not pay: the client's work between steps may
# change (a phase of evaluation ends), and a trial costs a compile and GRAPH_TRIAL cycles.
RETRY_AFTER = 1000


def graph_pays(call_cycles: Any, graph_cycles: list) -> Optional[bool]:
    """Whether a step's compiled graph beats its Ray task calls, by the means of their cycles:
    None until GRAPH_TRIAL compiled ones are timed; True where too few task-call ones were."""
    if len(graph_cycles) < GRAPH_TRIAL:
        return None
    if len(call_cycles) < MIN_CALL_CYCLES:
        return True
    return statistics.fmean(graph_cycles) < PAYS * statistics.fmean(call_cycles)


class CompiledSteady:
    """The steady step of `step` (a DistributedStep) as one compiled graph on `actor_of`'s
    actors. Build with `compile_steady`, which claims the tasks' slots first."""

    def __init__(self, step: Any, actor_of: Callable[[str], Any], owner: tuple,
                 head: Any = None):
        from ray.dag import InputNode, MultiOutputNode

        self.step, self.owner, self.head = step, owner, head
        self.order = list(step.steady_order)  # the head (a ClientTask) first, when there is one
        self.remote = self.order[1:] if head is not None else list(self.order)
        self.actors = {t: actor_of(t) for t in self.remote}
        self.modes = {t: StepMode(True, step.outboxes[t], step.push_to[t], step.has_rounds[t])
                      for t in self.order}
        # Per task one input from the client, (call, rounds, values pushed to it last run,
        # values the head sent it this run), and one output to it (TaskState.run_graph_step):
        # each value is a channel to write and read, about 0.05 ms apiece.
        self.pushed_count = {t: sum(t in step.push_to[p] for p in self.order)
                             for t in self.order}
        self.from_head = (set(step.outboxes[head.task]) if head is not None else set())
        with InputNode() as inp:
            sent: dict[str, list] = {}  # receiving task -> nodes of values sent to it this run
            to_client = []
            for n, task in enumerate(self.remote):
                mode = self.modes[task]
                returns = 1 + len(mode.outboxes)
                node = self.actors[task].run_graph_step.options(num_returns=returns).bind(
                    inp[n], *sent.get(task, ()))
                outs = [node] if returns == 1 else [node[i] for i in range(returns)]
                to_client.append(outs[0])
                for receiver, out in zip(mode.outboxes, outs[1:]):
                    sent.setdefault(receiver, []).append(out)
            dag = MultiOutputNode(to_client)
        # Ray's channels keep one buffer per run in flight (10), of 1 MB each by default: about
        # 50 MB of object store a graph, where the embedded instance has 80 MB for everything.
        # They start small here and grow with the values written (Ray resizes them). (Fewer
        # runs in flight hung the channels after a failed run.)
        self.graph = dag.experimental_compile(_buffer_size_bytes=BUFFER_BYTES)
        self._finalizer = weakref.finalize(self, _teardown, self.graph, list(self.actors.values()),
                                           owner)

    def execute(self, step_id: int, feeds: dict, timeout: Optional[float], carry: Any) -> list:
        """Start one run (`carry`: the previous run's pushed values, as values); the refs of
        each task's output in `order` (CompiledDAGRefs: each read once, in order; the head's,
        run here first, is read at once). Raises HeadFailed when the head's part failed (the
        graph did not run)."""
        done = []
        sent: dict = {}
        if self.head is not None:
            try:
                fetched, sent = self.head.run(self.step, step_id, feeds, timeout,
                                              carry.pushes.get(self.head.task, []))
            except Exception as exc:  # noqa: BLE001 - a node's error, named by the task
                raise HeadFailed(exc) from None
            done = [_Done((fetched,))]
        args = []
        for task in self.remote:
            parts = self.step.by_task[task]
            keys = tuple((*p.key, "steady") if p.steady is not None else p.key for p in parts)
            call = (keys, step_id, self.step.task_feeds(task, feeds), timeout,
                    self.modes[task].fields())
            pushed = carry.pushes.get(task, [])
            if len(pushed) != self.pushed_count[task]:
                raise OpsdkError(f"a compiled step of {task} came with {len(pushed)} lists of "
                                 f"pushed values, not {self.pushed_count[task]} (a bug of the "
                                 "master)")
            # (Which pusher's list is which does not matter: a task merges them by key.)
            if task in self.from_head:
                pushed = [*pushed, sent[task]]
            args.append((call, carry.rounds.get(task), *pushed))
        return [*done, *self.graph.execute(*args)]

    def fetched(self, outputs: list) -> dict:
        """Each task's fetched values, from the outputs of a run."""
        return {task: out[0] for task, out in zip(self.order, outputs)}

    def carry_of(self, outputs: list) -> Any:
        """What a run's outputs push for the next run (a Carry of values)."""
        from opsdk.dist.steps import Carry

        carry = Carry()
        for task, out in zip(self.order, outputs):
            mode, rest = self.modes[task], iter(out[1:])
            for receiver in mode.pushes:
                carry.pushes.setdefault(receiver, []).append(next(rest))
            if mode.rounds:
                carry.rounds[task] = next(rest)
        return carry

    def task_of(self, exc: BaseException, default: str) -> str:
        """The task whose actor `exc` (a Ray actor error) is about; else `default` (the task of
        the output that raised)."""
        actor_id = getattr(exc, "actor_id", None)
        for task, actor in self.actors.items():
            if actor_id is not None and actor._actor_id.hex() == actor_id:
                return task
        return default

    def teardown(self) -> None:
        """Stop the tasks' loops and give their slots back (idempotent)."""
        self._finalizer()


class HeadFailed(Exception):
    """The head's part of a compiled run failed in the client (`error`, naming its task and
    node); nothing of the run started on the tasks."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


class _Done:
    """An output already read (the head's), read like a CompiledDAGRef."""

    def __init__(self, value: Any):
        self.value = value

    def get(self, timeout: Any = None) -> Any:
        return self.value


def compile_steady(step: Any, actor_of: Callable[[str], Any], owner: tuple,
                   timeout: Optional[float], head: Any = None) -> Optional[CompiledSteady]:
    """`step`'s steady step compiled (its first task run in the client when `head`, a
    ClientTask, is given), or None when a task has no slot free (the caller keeps the plain
    steady launch)."""
    from opsdk.dist.engine import ray_module

    ray = ray_module()
    order = step.steady_order[1:] if head is not None else step.steady_order
    actors = [actor_of(t) for t in order]
    claims = [a.claim_graph_slot.remote(owner) for a in actors]
    granted = ray.get(claims, timeout=timeout)
    if not all(granted):
        _release(actors, owner)
        return None
    try:
        return CompiledSteady(step, actor_of, owner, head)
    except BaseException:
        _release(actors, owner)
        raise


def owned(value: Any) -> Any:
    """`value` (a run's output) with every NumPy array in it copied out of the channel buffer
    it was read from. Ray reads an array from a channel without copying it, and the buffer stays
    taken while the array lives; with its buffers taken the writer waits, and so does the run.
    A client that kept its fetched arrays hung after about 30 runs on one node
    (tests/dist/test_compiled.py keeps 40 runs' values); across two nodes the values the client
    carries into the next run hung the second run (tests/dist/test_task_placement.py). The copy
    costs what the values weigh, small beside a channel's latency. Small arrays come packed
    (opsdk/dist/wire.py: bytes, which are their own) and are passed over as they are: a null
    step's outputs are mostly those, and walking into them was a tenth of the client's time."""
    kind = type(value)
    if kind is tuple or kind is list:
        if len(value) == 4 and type(value[0]) is str and value[0] == wire.MARK:
            return value  # (Ray may read a packed tuple back as a list)
        return kind(owned(v) for v in value)
    if kind is dict:
        return {k: owned(v) for k, v in value.items()}
    if kind in _ATOMS:
        return value
    if kind is np.ndarray:
        return value if value.flags.owndata else value.copy()
    if isinstance(value, np.generic):
        return value
    return copy.deepcopy(value)  # another kind of value, which may hold arrays


_ATOMS = frozenset({type(None), str, bytes, int, float, bool})


def resolved(carry: Any, ray: Any, timeout: Optional[float]) -> Any:
    """`carry` with values where a run of Ray task calls left refs (the graph's inputs are
    values: its first run after one of those reads them once)."""
    from opsdk.dist.steps import Carry

    refs = [*(r for rs in carry.pushes.values() for r in rs), *carry.rounds.values()]
    if not any(isinstance(r, ray.ObjectRef) for r in refs):
        return carry
    got = iter(ray.get(refs, timeout=timeout))
    pushes = {task: [next(got) for _ in rs] for task, rs in carry.pushes.items()}
    return Carry(pushes, {task: next(got) for task in carry.rounds})


RELEASE_TIMEOUT_S = 10.0  # the longest a live task may take to give a slot back


def _release(actors: list, owner: tuple) -> None:
    """Give `owner`'s slots back and wait until the tasks have: a refused compile or a graph
    torn down ends with its slots free, not on their way (the next claim, perhaps another
    client's, counts on them). A dead task's slots went with it."""
    from opsdk.dist.engine import ray_module

    refs = []
    for actor in actors:
        with contextlib.suppress(Exception):  # Ray is down: nothing to give back
            refs.append(actor.release_graph_slot.remote(owner))
    for ref in refs:
        with contextlib.suppress(Exception):  # a dead task
            ray_module().get(ref, timeout=RELEASE_TIMEOUT_S)


def _teardown(graph: Any, actors: list, owner: tuple) -> None:
    """Tear `graph` down without Ray's log of the loops it cannot cancel on dead tasks (the
    step's error already named the task), then release the slots."""
    ray_logger = logging.getLogger("ray.dag.compiled_dag_node")
    level = ray_logger.level
    ray_logger.setLevel(logging.CRITICAL)
    try:
        with contextlib.suppress(Exception):
            graph.teardown()
    finally:
        ray_logger.setLevel(level)
    _release(actors, owner)
