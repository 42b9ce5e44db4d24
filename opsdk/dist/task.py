"""One task of a cluster: a Ray actor holding its variables, its partitions and its rendezvous.

The master (opsdk/dist/master.py) registers a partition once (an exported graph and the names
of its feeds, fetches and targets), then starts each step with `run_step`. A `_send` whose
receiver is another task calls that task's `deliver`; `_recv` waits in this task's
`LocalRendezvous` (in a steady step values between tasks are the call's arguments and returns
instead: opsdk/dist/prefetch.py). Pitfalls this module answers:

- A threaded actor runs `max_concurrency` methods at once per concurrency group. Steps and
  deliveries run in separate groups, so however many steps wait in `_recv`, the delivery that
  wakes them always finds a thread (`STEP_THREADS`, `CONTROL_THREADS`).
- Every method is a plain (blocking) method: Ray does not allow async and threaded methods to
  share an actor's event loop sensibly, so none is async.
- `ray.cancel` cannot interrupt a thread blocked in `_recv`: a step stops through its abort
  (`abort`, which fails its receivers) or its token (cancel, deadline), both checked by every
  wait of the rendezvous and the executor.
- Task retries stay 0 (`max_task_retries=0`): a delivery is never replayed, so a value is never
  sent twice. A restarted actor (`max_restarts`) reruns `__init__` with a new incarnation and no
  variables; the master notices the incarnation, registers its partitions again and the
  supervised loop restores the latest checkpoint.
- Values arriving through the object store are read-only arrays; kernels never write into
  their inputs, and variables copy what they store unless it is fresh.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor, wait as wait_futures
from typing import Any, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.exec.executor import RunToken, StepContext
from opsdk.runtime.exec.rendezvous import LocalRendezvous
from opsdk.runtime.exec.variable_store import VariableStore

from opsdk.dist import wire
from opsdk.dist.cluster import task_of
from opsdk.dist.errors import TaskUnavailable, same_kind
from opsdk.dist.prefetch import PushPlan, SteadyRendezvous, StepMode, read_pushed

STEP_THREADS = 16      # steps of one task running at once (async workers share a ps)
CONTROL_THREADS = 16   # deliveries, aborts and bookkeeping: never queued behind steps
_ENDED_KEPT = 4096     # step ids remembered as over, so a late delivery is dropped


class StepAborted(OpsdkError):
    """A step stopped because another task failed (the message names that task and node)."""


class TaskRendezvous:
    """A task's rendezvous: values for this task meet in its LocalRendezvous, values for
    another task go to that task's actor (`deliver`). Counts the bytes it sends away."""

    def __init__(self, task: str):
        self.task = task
        self.local = LocalRendezvous()
        self.peers: dict[str, Any] = {}
        self.bytes_sent = 0
        self.values_sent = 0
        self._ended: OrderedDict[int, None] = OrderedDict()
        self._aborts: dict[int, BaseException] = {}
        self._lock = threading.Lock()

    def send(self, key: tuple, value: Any) -> None:
        """Deliver locally or to the receiving task (fire and forget: a failed delivery shows
        as its receiver's failure, which the master reports)."""
        destination = task_of(key[3])
        if destination == self.task:
            self.local.send(key, value)
            return
        peer = self.peers.get(destination)
        if peer is None:
            raise OpsdkError(f"task {self.task} has no route to {destination} (sending "
                             f"'{key[1]}'); the master did not introduce it")
        peer.deliver.remote(key, wire.pack(self.count(value)))

    def count(self, value: Any) -> np.ndarray:
        """`value` as an array, counted as sent to another task."""
        value = np.asarray(value) if not isinstance(value, np.ndarray) else value
        with self._lock:
            self.bytes_sent += value.nbytes
            self.values_sent += 1
        return value

    def deliver(self, key: tuple, value: Any) -> None:
        """A value another task sent here (in its wire form, opsdk/dist/wire.py)."""
        with self._lock:
            if key[0] in self._ended:
                return  # the step is over (aborted elsewhere): nobody will receive it
        self.local.send(key, wire.unpack(value))

    def recv(self, key: tuple, token: RunToken) -> Any:
        return self.local.recv(key, token)

    def abort(self, step_id: int, error: BaseException) -> None:
        """Fail the receivers of step `step_id` here, now and later (unless it is over here:
        an abort that arrives after the step ended would be remembered forever)."""
        with self._lock:
            if step_id in self._ended:
                return
            self._aborts.setdefault(step_id, error)
            # A steady step's call that never ran here (the call whose values it took failed)
            # never ends here: keep only the latest aborts.
            while len(self._aborts) > _ENDED_KEPT:
                self._aborts.pop(next(iter(self._aborts)))
        self.local.abort(step_id, error)

    def aborted(self, step_id: int) -> Optional[BaseException]:
        """The error step `step_id` was aborted with here, or None."""
        with self._lock:
            return self._aborts.get(step_id)

    def end_step(self, step_id: int) -> None:
        """The step is over on this task: forget its values and abort, drop late deliveries."""
        with self._lock:
            self._ended[step_id] = None
            self._aborts.pop(step_id, None)
            while len(self._ended) > _ENDED_KEPT:
                self._ended.popitem(last=False)
        self.local.end_step(step_id)


class Partition:
    """A registered partition: its plan and the names of its feeds and fetches."""

    def __init__(self, plan: Any, feeds: list, fetches: list[str], receivers: int):
        self.plan = plan
        self.push_plan = PushPlan()  # what it pushes (set on registration; prefetch.py)
        self.feeds = feeds          # the graph's placeholder tensors, in the master's order
        self.fetches = fetches      # tensor names whose values go back to the master
        # Each step waiting (in `_recv`, or for a round's other gradients) holds a thread;
        # size the pool so that the steps that wake them can still run.
        self.pool = ThreadPoolExecutor(max(2, receivers + 2), thread_name_prefix="opsdk-task")


class TaskState:
    """The body of a task actor (made remote by `actor_class`). Public for tests in-process."""

    def __init__(self, task: str):
        self.task = task
        # A new number per (re)start: the master compares it to notice a restarted task.
        self.incarnation = secrets.randbits(62)
        self.variables = VariableStore()
        self.rendezvous = TaskRendezvous(task)
        self.partitions: dict[tuple, Partition] = {}
        self.workspaces: dict[str, str] = {}  # this node's copy of a workspace -> the master's
        self.tokens: dict[int, RunToken] = {}
        self.steady_steps = 0  # steps run with pushed values (prefetch.py), for tests
        # A step's partitions beyond the first of this task run here (one call starts them all).
        self.runner = ThreadPoolExecutor(STEP_THREADS, thread_name_prefix="opsdk-parts")
        self.accumulators: dict[str, Any] = {}
        self.accumulators_lock = threading.Lock()
        self._lock = threading.Lock()
        self.profiler: Optional[TaskProfiler] = None  # while ClusterSession.profile runs
        self.graph_owners: set = set()  # compiled graphs this task is in (opsdk/dist/compiled.py)

    # ------------------------------------------------------------------ control group
    def info(self) -> dict:
        """Who and where this task is (the master's liveness check and the error text), and
        the Ray resources its actor reserved (a client whose placement asks for more learns that
        another client started it without them)."""
        from opsdk.dist.engine import ray_module

        context = ray_module().get_runtime_context()
        return {"task": self.task, "incarnation": self.incarnation, "pid": os.getpid(),
                "node": socket.gethostname(), "ray_node": context.get_node_id(),
                "reserved": dict(context.get_assigned_resources())}

    def set_peers(self, peers: dict) -> int:
        """The actors of the other tasks, by task name; returns this task's incarnation."""
        self.rendezvous.peers = dict(peers)
        return self.incarnation

    def deliver(self, key: tuple, value: Any) -> None:
        self.rendezvous.deliver(key, value)

    def abort(self, step_id: int, message: str) -> None:
        """Stop step `step_id` here: its receivers fail with `message`, its token is cancelled."""
        from opsdk.dist.primitives import withdraw

        self.rendezvous.abort(step_id, StepAborted(message))
        token = self.tokens.get(step_id)
        if token is not None:
            token.cancel(message)
        withdraw(self.variables, step_id)

    def end_step(self, step_id: int) -> None:
        self.rendezvous.end_step(step_id)

    def stats(self) -> dict:
        """Counters for tests and the benchmark."""
        from opsdk.dist.primitives import accumulator_counts

        r = self.rendezvous
        return {"bytes_sent": r.bytes_sent, "values_sent": r.values_sent,
                "partitions": len(self.partitions), "pending": r.local.pending(),
                "workspaces": dict(self.workspaces), "steps": len(self.tokens),
                "steady_steps": self.steady_steps, "graphs": len(self.graph_owners),
                "accumulators": accumulator_counts(self.variables)}

    def claim_graph_slot(self, owner: tuple) -> bool:
        """Take one of this task's threads for compiled graphs for `owner`'s graph
        (opsdk/dist/compiled.py); False when all are taken."""
        from opsdk.dist.compiled import graph_slots

        with self._lock:
            if owner not in self.graph_owners and len(self.graph_owners) >= graph_slots():
                return False
            self.graph_owners.add(owner)
        skip_torch_probe()
        return True

    def release_graph_slot(self, owner: tuple) -> None:
        with self._lock:
            self.graph_owners.discard(owner)

    def start_profile(self, client: int) -> None:
        """Time every node that client `client`'s steps run here from now on
        (ClusterSession.profile); the steps of other clients sharing this task are not timed."""
        self.profiler = TaskProfiler(client)

    def stop_profile(self) -> list:
        """Stop timing; the nodes timed since start_profile, as (name, op type, device, calls,
        seconds) tuples."""
        profiler, self.profiler = self.profiler, None
        return profiler.nodes() if profiler is not None else []

    def stop_trace(self) -> list:
        """Stop timing; every node run timed since start_profile, as (name, op type, device,
        thread, start, end) tuples, the times in Unix seconds (ClusterSession.traced_run)."""
        profiler, self.profiler = self.profiler, None
        return profiler.events() if profiler is not None else []

    def variable_values(self, names: Optional[list] = None) -> dict:
        """Host values of this task's variables (all, or those named)."""
        values = self.variables.host_values()
        return values if names is None else {n: values[n] for n in names if n in values}

    def restore(self, values: dict) -> int:
        """Store checkpointed values; returns how many. Gradients waiting in this task's
        accumulators belong to steps before the restore: they are dropped."""
        from opsdk.dist.primitives import reset_accumulators

        for name, value in values.items():
            self.variables.assign(name, np.asarray(value))
        reset_accumulators(self.variables)
        return len(values)

    def save_shard(self, path: str, incarnation: Optional[int] = None) -> Optional[dict]:
        """Write this task's variables to `path` atomically (checkpoint.py); None if none.
        `incarnation`: the one the master trusts to hold its variables; a task restarted since
        (which holds none of them) refuses, where an empty shard would lose them."""
        from opsdk.dist.checkpoint import write_shard

        if incarnation is not None and incarnation != self.incarnation:
            raise TaskUnavailable(f"task {self.task} restarted since its variables were last "
                                  "known here and holds none of them: restore the latest "
                                  "checkpoint first (opsdk.dist.checkpoint.restore)")

        return write_shard(self.variables.host_values(), path)

    def restore_shard(self, path: str, sha256: str) -> int:
        """Restore this task's variables from its shard of a checkpoint."""
        from opsdk.dist.checkpoint import read_shard

        return self.restore(read_shard(path, sha256))

    # ------------------------------------------------------------------ step group
    def register(self, key: tuple, graph_text: str, feeds: list, fetches: list,
                 targets: list, digests: dict, shipments: tuple = (),
                 push_plan: PushPlan = PushPlan()) -> int:
        """Build the plan of a partition (once per key) from its exported graph, resolving its
        ops in this node's copies of the shipped workspaces (opsdk/dist/shipping.py) besides
        the builtin ones and checking them against the master's `digests`; returns this task's
        incarnation."""
        from opsdk.dist.partitions import build_partition

        with self._lock:
            if key not in self.partitions:
                roots = tuple(self._unpacked(s) for s in shipments)
                try:
                    part = build_partition(self.task, roots, graph_text, feeds, fetches,
                                           targets, digests)
                except OpsdkError as exc:
                    raise OpsdkError(self._as_master_sees_it(str(exc))) from None
                part.push_plan = push_plan
                self.partitions[key] = part
        return self.incarnation

    def _unpacked(self, shipment: Any) -> str:
        from opsdk.dist.shipping import local_copy

        try:
            root = str(local_copy(shipment))
        except Exception as exc:  # OSError, a damaged package, the object store
            raise OpsdkError(f"task {self.task} cannot unpack the workspace {shipment.origin} "
                             f"the master shipped: {exc}") from None
        self.workspaces[root] = shipment.origin
        return root

    def _as_master_sees_it(self, message: str) -> str:
        """`message` with this node's workspace copies named by the master's folders (which is
        where a `run opsdk build in ...` must happen)."""
        for copy, origin in self.workspaces.items():
            message = message.replace(copy, origin)
        return message

    def run_step(self, call: tuple, rounds: Optional[dict] = None, *inbox: list) -> Any:
        """Run this task's registered partitions of step `step_id` (`call` is (keys, step_id,
        feeds, timeout, mode): all of them in one call, `feeds[i]` the values of `keys[i]`'s,
        in one argument as Ray serialises each argument on its own, 0.1 ms apiece on a loaded
        machine); returns each one's fetched values by name, then
        what `mode` asks for (opsdk/dist/prefetch.py): values for other tasks (a steady step;
        `inbox` holds those from other tasks), pushed values and their rounds (`rounds`: the
        ones kept when this steady step's values were pushed). The step ends here when they
        are done: nothing of it stays behind, a late delivery or abort of it is dropped (the
        master sends no separate end). `mode` is a StepMode's fields (a tuple: Ray pickles a
        class instance by looking its module up, a quarter of a millisecond per call)."""
        keys, step_id, feeds, timeout, mode = call
        mode = StepMode(*mode)
        if mode.steady:
            with self._lock:
                self.steady_steps += 1
        parts = [self._partition(key) for key in keys]
        token = RunToken(timeout)
        self.tokens[step_id] = token  # before the abort check: an abort sees one or the other
        outbox: dict[str, list] = {task: [] for task in mode.outboxes}
        rendezvous = (SteadyRendezvous(self.rendezvous,
                                       dict(v for vs in inbox for v in wire.unpack_pairs(vs)),
                                       outbox) if mode.steady else self.rendezvous)
        ctx = StepContext(self.variables, self, token, rendezvous=rendezvous, step_id=step_id)
        others: list = []
        try:
            aborted = self.rendezvous.aborted(step_id)
            if aborted is not None:
                raise aborted
            feeds = tuple(self._with_rounds(p, wire.unpack_map(f), rounds)
                          for p, f in zip(parts, feeds))
            profiler = self.profiler
            if profiler is not None and step_id >> 32 != profiler.client:
                profiler = None  # another client's step
            others = [self.runner.submit(_run, p, f, ctx, profiler)
                      for p, f in zip(parts[1:], feeds[1:])]
            first = _run(parts[0], feeds[0], ctx, profiler)
            fetched = [wire.pack_map(first), *(wire.pack_map(f.result()) for f in others)]
            out = [fetched, *(wire.pack_pairs(outbox[t]) for t in mode.outboxes)]
            out += self._pushed(parts, mode) if mode.pushes else []
            # Ray: one return is the value itself; several a tuple (a compiled graph takes no list)
            return tuple(out) if mode.returns > 1 else fetched
        except BaseException as exc:
            # Fail this step's other receivers here at once, not only when the master aborts.
            self.rendezvous.abort(step_id, StepAborted(f"task {self.task} failed"))
            token.cancel(f"task {self.task} failed")
            wait_futures(others)
            if isinstance(exc, KeyboardInterrupt):  # a client running its own task (Ctrl-C)
                raise
            raise same_kind(exc, self._as_master_sees_it(f"task {self.task}: {exc}")) from None
        finally:
            self.tokens.pop(step_id, None)
            self.rendezvous.end_step(step_id)

    def run_graph_step(self, packed: tuple, *sent: list) -> Any:
        """`run_step` as a compiled graph calls it (opsdk/dist/compiled.py), with fewer values
        to carry, each a channel read or write: `packed` is the client's part, (call, rounds,
        the values pushed to this task), `sent` the values of the tasks before. Returns what
        goes back to the client as one tuple (fetched values, then pushed values and rounds as
        `run_step` returns them), then the values for each task of the call's outboxes."""
        call, rounds, *pushed = packed
        mode = StepMode(*call[4])
        out = self.run_step(call, rounds, *pushed, *sent)
        out = [out] if mode.returns == 1 else list(out)
        n = len(mode.outboxes)
        to_client = (out[0], *out[1 + n:])
        return (to_client, *out[1:1 + n]) if n else to_client

    def _with_rounds(self, part: Partition, feeds: dict, rounds: Optional[dict]) -> dict:
        """A steady partition's feeds with the rounds read when its values were pushed."""
        plan = part.push_plan
        if not plan.rounds:
            return feeds
        kept = (rounds or {}).get(plan.location)
        if kept is None:
            raise OpsdkError(f"task {self.task}: a steady step of {plan.location} came without "
                             "the rounds read with its pushed values (a bug of the master)")
        return {**feeds, **{name: wire.unpack(kept[variable]) for name, variable in plan.rounds}}

    def _pushed(self, parts: list, mode: StepMode) -> list:
        """The values of the next step, one list per task of `mode.pushes`, then (if asked)
        the rounds read with them, by location."""
        by_task: dict[str, list] = {task: [] for task in mode.pushes}
        rounds: dict[str, dict] = {}
        for part in parts:
            if part.push_plan.pushes:
                values, rounds[part.push_plan.location] = read_pushed(self.variables,
                                                                      part.push_plan)
                for task, pushed in values.items():
                    by_task[task] += [(k, wire.pack(self.rendezvous.count(v)))
                                      for k, v in pushed]
        if mode.rounds:
            rounds = {location: wire.pack_map(kept) for location, kept in rounds.items()}
        return [by_task[t] for t in mode.pushes] + ([rounds] if mode.rounds else [])

    def _partition(self, key: tuple) -> Partition:
        part = self.partitions.get(key)
        if part is None:
            raise TaskUnavailable(f"task {self.task}: no partition registered under {key} (the "
                                  "task restarted?); the master registers it again on the next "
                                  "step")
        return part


def skip_torch_probe() -> None:
    """Tell Ray's channels that torch is not in use here, where nothing has imported it: a
    compiled graph's first run on a task otherwise imports torch, if installed, to learn
    whether it is available (1.7-1.9 s on this project's 2-core machines). opsdk sends NumPy
    arrays through the channels, never torch tensors. Where Ray's channels change, nothing is
    set and the first run is slow again, not wrong."""
    import sys

    if "torch" in sys.modules:
        return
    try:
        from ray.experimental.channel.common import ChannelContext

        context = ChannelContext.get_current()
        if context._torch_available is None:
            context._torch_available = False
    except (ImportError, AttributeError):
        pass


def _run(part: Partition, feeds: dict, ctx: StepContext,
         profiler: Optional["TaskProfiler"] = None) -> dict:
    """One partition's run in a step: its fetched values by name, on the host (its nodes timed
    while a profiler is on)."""
    from opsdk.runtime.exec.executor import execute

    plan = part.plan if profiler is None else profiler.timed(part.plan)
    slots = execute(plan, {t: feeds[t.name] for t in part.feeds}, ctx, part.pool)
    return {name: _host(slots[s]) for name, s in zip(part.fetches, part.plan.fetch_slots)}


class TaskProfiler:
    """The node timers of one ClusterSession.profile on a task: each plan that runs (a
    partition, or its steady form) gets a timed copy once (runtime/exec/profile.py); the plans
    themselves are untouched."""

    def __init__(self, client: int) -> None:
        self.client = client  # the step ids of the profiling client: client << 32 | n
        self._lock = threading.Lock()
        self._timed: dict[int, tuple] = {}  # id(plan) -> (plan, its StepRecorder, its timed copy)

    def timed(self, plan: Any) -> Any:
        entry = self._timed.get(id(plan))
        if entry is None or entry[0] is not plan:
            from opsdk.runtime.exec.profile import StepRecorder

            with self._lock:  # looked up again: another partition's thread may have made it
                entry = self._timed.get(id(plan))
                if entry is None or entry[0] is not plan:
                    recorder = StepRecorder(plan)
                    entry = (plan, recorder, recorder.timed_plan())
                    self._timed[id(plan)] = entry
        return entry[2]

    def nodes(self) -> list:
        """(name, op type, device, calls, seconds) of every node that ran, summed over plans."""
        totals: dict[tuple, list] = {}
        for _, recorder, _ in list(self._timed.values()):
            for node in recorder.profile(0, True).nodes:
                total = totals.setdefault((node.name, node.type, node.device), [0, 0.0])
                total[0] += node.calls
                total[1] += node.seconds
        return [(*key, calls, seconds) for key, (calls, seconds) in totals.items()]

    def events(self) -> list:
        """Every node run timed, in the order they started: (name, op type, device, thread,
        start, end), threads numbered in the order they first ran a node, the times Unix
        seconds by this process's clock."""
        offset = time.time() - time.perf_counter()
        runs = sorted((run for _, recorder, _ in list(self._timed.values())
                       for run in recorder.node_runs()), key=lambda run: run[4])
        threads: dict[int, int] = {}
        return [(name, op_type, device, threads.setdefault(ident, len(threads)), start + offset,
                 end + offset) for name, op_type, device, ident, start, end in runs]


def _host(value: Any) -> Any:
    if value is None or isinstance(value, np.ndarray):
        return value
    from opsdk.runtime.devices import to_host
    return to_host(value)


_ACTOR_CLASS: Any = None


def actor_class() -> Any:
    """TaskState as a Ray actor class with the concurrency groups described above."""
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        from opsdk.dist.compiled import graph_slots
        from opsdk.dist.engine import ray_module

        ray = ray_module()
        control = {"concurrency_group": "control"}
        step = {"concurrency_group": "step"}
        methods = {name: ray.method(**control)(getattr(TaskState, name))
                   for name in ("info", "set_peers", "deliver", "abort", "end_step", "stats",
                                "start_profile", "stop_profile", "stop_trace", "variable_values",
                                "restore",
                                "claim_graph_slot", "release_graph_slot",
                                "save_shard", "restore_shard")}
        methods.update({name: ray.method(**step)(getattr(TaskState, name))
                        for name in ("register", "run_step", "run_graph_step")})
        cls = type("TaskActor", (TaskState,), methods)
        # Ray runs each compiled graph's loop on a thread of `_ray_system` (one by default):
        # sized so that the graphs of several clients on one ps run side by side.
        _ACTOR_CLASS = ray.remote(concurrency_groups={"step": STEP_THREADS,
                                                      "control": CONTROL_THREADS,
                                                      "_ray_system": graph_slots()})(cls)
    return _ACTOR_CLASS


def start_task(task: str, max_restarts: int = 3,
               name: Optional[str] = None, namespace: Optional[str] = None,
               placement: Optional[dict] = None) -> Any:
    """A new task actor. `num_cpus=0` unless `placement` (Ray actor options, from
    opsdk/dist/placement.py) says otherwise: a task waits far more than it computes, and Ray
    would otherwise fit only as many tasks as cores. A named task is detached, as a
    TensorFlow server outlives its clients: on a cluster joined by address it lives until
    `end_tasks` or the cluster stops, whichever client started it (each worker of a
    between-graph program is a client of its own, and the first to finish must not take the ps
    with it); the embedded instance, and its tasks, end with the program."""
    options: dict = {"num_cpus": 0, **(placement or {}), "max_restarts": max_restarts,
                     "max_task_retries": 0}
    if name is not None:  # detached: the task outlives the client that started it
        options.update(name=name, namespace=namespace, get_if_exists=True, lifetime="detached")
    return actor_class().options(**options).remote(task)
