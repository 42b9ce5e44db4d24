"""One distributed step's partitions: built by the pipeline, registered on their tasks.

`build_step` runs the runtime's compile pipeline over (fetches, feeds) with the client's task as
the default task and keeps, per location, the partition as a standalone graph. `register`
stamps every `_send`/`_recv` with the sending task's incarnation (so a value sent by a task that
has since restarted can never meet a receiver of the new one), exports each graph and has its
task build the plan; it runs again whenever a task's incarnation changed.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.partition import drop_marker
from opsdk.runtime.compile.pipeline import compile_program, new_program
from opsdk.runtime.compile.sendrecv import RECV, SEND
from opsdk.runtime.io.serialize import export_graph
from opsdk.runtime.ir.device_names import DeviceSpec
from opsdk.runtime.ir.graph import Graph, Operation

from opsdk.dist import wire
from opsdk.dist.cluster import ClusterSpec, task_of
from opsdk.dist.compiled import CALL_CYCLES, COMPILE_AFTER, GRAPH_WARMUP
from opsdk.dist.errors import failure
from opsdk.dist.partitions import op_digests, workspace_roots
from opsdk.dist.prefetch import (PushPlan, StepMode, pushed_sends, rest_of, steady_partition,
                                 task_order)

_CUT_TYPES = ("_send", "_recv")


@dataclass
class LocationPart:
    """The partition of one location: its graph and how the client's feeds and fetches map
    onto it."""

    location: str
    task: str
    graph: Graph
    feeds: list          # (client's fed tensor, placeholder name)
    fetches: list        # (client's fetched element, tensor name here)
    targets: list[str]
    digests: dict[str, str]
    workspaces: tuple[str, ...]
    key: Optional[tuple] = None
    # Pushed values (opsdk/dist/prefetch.py): the steady variant's graph (None when this
    # partition pushes nothing), its pushed `_send`s and its rounds (fed placeholder, variable).
    steady: Any = None
    pushed: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    push_plan: PushPlan = PushPlan()  # the full variant's; the steady one's feeds `rounds`

    def graphs(self) -> list:
        return [self.graph] + ([self.steady.graph] if self.steady is not None else [])

    def make_push_plan(self) -> None:
        """What this partition pushes, with the keys as now stamped."""
        ops = {op.name: op for op in self.graph.operations}
        pushes = tuple((ops[n].inputs[0].op.name, rest_of(ops[n]),
                        task_of(ops[n].attrs["recv_location"])) for n in self.pushed)
        rounded = {op.attrs["variable"] for op in self.graph.operations
                   if op.type == "_dist_round"}
        self.push_plan = PushPlan(self.location, pushes, rounded=tuple(sorted(
            {v for v, _, _ in pushes} & rounded)))

    def pushes_to(self) -> set[str]:
        """The tasks this partition pushes values to."""
        return {task_of(op.attrs["recv_location"]) for op in self.graph.operations
                if op.name in self.pushed}

    def sends_to(self, steady: bool) -> set[str]:
        """The other tasks this partition's full or steady variant sends values to."""
        graph = self.steady.graph if steady and self.steady is not None else self.graph
        return {task_of(op.attrs["recv_location"]) for op in graph.operations
                if op.type == SEND} - {self.task}


class DistributedStep:
    """The partitions of one (graph version, fetches, feeds), by location and by task."""

    def __init__(self, parts: list[LocationPart]):
        self.parts = {p.location: p for p in parts}
        self.by_task: dict[str, list[LocationPart]] = {}
        for part in parts:
            self.by_task.setdefault(part.task, []).append(part)
        self.registered_for: Optional[dict[str, int]] = None
        tasks = self.by_task
        self.outboxes = {t: tuple(sorted(set().union(*(p.sends_to(True) for p in tasks[t]))))
                         for t in tasks}
        self.push_to = {t: tuple(sorted(set().union(*(p.pushes_to() for p in tasks[t]))))
                        for t in tasks}
        self.has_rounds = {t: any(p.rounds for p in tasks[t]) for t in tasks}
        # Steady steps run the tasks in this order, each started with the values of the ones
        # before; None when the tasks' values go both ways even with pushed values.
        self.steady_order = (task_order(self.outboxes)
                             if any(self.push_to.values()) else None)
        # The task whose part steady runs run in the client's process (opsdk/dist/inprocess.py),
        # set by the session; None: every part runs on its task's actor.
        self.head: Optional[str] = None
        # Its steady runs as a Ray compiled graph (opsdk/dist/compiled.py), once compiled.
        self.graph: Any = None
        self.steady_runs = 0
        self.steady_seconds = 0.0  # spent in steady runs of Ray task calls (the client's wall)
        self.compile_at: float = COMPILE_AFTER
        self.compiling = False  # a graph is being compiled (ClusterSession._compile)
        self.generation = 0     # dropped graphs: one compiled before the last drop is stale
        self.last_run = 0.0     # time.monotonic() its graph last ran (or was installed)
        self.idle_releases = 0  # graphs let go of for want of runs (ClusterSession)
        self.unpaid_graphs = 0  # graphs torn down for running slower than task calls
        # Cycles (one run's start to the next one's) of its steady runs, by how they ran, to
        # judge whether the graph pays (compiled.graph_pays): the task calls' last ones, and the
        # graph's since it was last judged; the last run's kind: "graph", "calls" (task calls
        # with no compile going on), or None (not timed).
        self.started = 0.0
        self.last_kind: Optional[str] = None
        self.call_cycles: deque = deque(maxlen=CALL_CYCLES)
        self.graph_cycles: list[float] = []
        self.graph_runs = 0  # cycles of the current graph (its first GRAPH_WARMUP not timed)

    def drop_graph(self) -> None:
        """Tear the compiled graph down (a task restarted, the session closed, Ray failed):
        the next steady runs are Ray task calls until it is compiled again."""
        graph = self.detach_graph()
        if graph is not None:
            graph.teardown()

    def detach_graph(self, idle: bool = False) -> Any:
        """The compiled graph, no longer the step's (the caller tears it down); `idle`: let go
        of for want of runs, so the next one waits for twice the steady time the last did."""
        graph, self.graph = self.graph, None
        self.generation += 1
        self.graph_cycles, self.graph_runs = [], 0
        if graph is not None:
            self.compile_at = self.steady_runs + COMPILE_AFTER
            if idle:
                self.idle_releases += 1
                self.steady_seconds = 0.0
        return graph

    def note_cycle(self, now: float, consecutive: bool, idle_s: float) -> None:
        """A run starts at `now` (time.perf_counter()): the cycle since the last one counts,
        for how that one ran, where it was this step's (`consecutive`) and within idle_s."""
        if consecutive and self.last_kind is not None and now - self.started < idle_s:
            if self.last_kind == "calls":
                self.call_cycles.append(now - self.started)
            else:
                self.graph_runs += 1
                if self.graph_runs > GRAPH_WARMUP:
                    self.graph_cycles.append(now - self.started)
        self.started = now

    @property
    def tasks(self) -> list[str]:
        """The tasks a step starts (each with one call for all its partitions)."""
        return list(self.by_task)

    def register(self, actor_of: Callable[[str], Any], incarnations: dict[str, int],
                 client: int, timeout: Optional[float], local: Any = None) -> None:
        """Register every partition on its task for these incarnations (see the docstring),
        the head's also on `local` (a ClientTask, opsdk/dist/inprocess.py)."""
        from opsdk.dist.engine import ray_module

        ray = ray_module()
        from opsdk.dist.shipping import ship

        stamp = tuple(sorted(incarnations.items()))
        refs = {}
        for part in self.parts.values():
            shipments = tuple(ship(root) for root in part.workspaces)
            for graph in part.graphs():
                for op in graph.operations:
                    if op.type in _CUT_TYPES:
                        op.attrs["send_incarnation"] = incarnations[
                            task_of(op.attrs["send_location"])]
            part.make_push_plan()
            part.key = (client, id(self), part.location, hash(stamp))
            actor = actor_of(part.task)
            text = export_graph(part.graph)
            if local is not None and part.task == self.head:
                local.register(part, text)
            refs[part.location] = actor.register.remote(
                part.key, text, [n for _, n in part.feeds],
                [n for _, n in part.fetches], part.targets, part.digests, shipments,
                part.push_plan)
            if part.steady is not None:
                s = part.steady
                refs[f"{part.location} (steady)"] = actor.register.remote(
                    (*part.key, "steady"), export_graph(s.graph), list(s.feeds),
                    list(s.fetches), list(s.targets), part.digests, shipments,
                    dataclasses.replace(part.push_plan, rounds=tuple(part.rounds)))
        for location, ref in refs.items():
            try:
                ray.get(ref, timeout=timeout)
            except Exception as exc:
                from opsdk.dist.master import _reason
                raise failure(f"registering the partition of {location}: {_reason(exc)}",
                              exc) from None
        self.registered_for = dict(incarnations)

    def launch(self, actor_of: Callable[[str], Any], step_id: int, feeds: dict,
               timeout: Optional[float], carry: Optional["Carry"], push: bool,
               local: Any = None) -> tuple[dict, list, Optional["Carry"], dict]:
        """Start step `step_id` on every task, one call each: all at once, values between
        tasks delivered by the tasks; or, steady (`carry`: what the previous run of this step
        pushed), in `steady_order`, each call taking the values of the calls before as Ray
        arguments, the head's part run first in the client (on `local`, a ClientTask: the
        values pushed to it read here). Returns the refs of each task's fetches (ref -> task),
        every ref made, what this run pushes for the next (when `push`), and the fetches of
        the head run here (task -> its results)."""
        steady = carry is not None and self.steady_order is not None
        push = push and self.steady_order is not None
        fetch_refs, made, done = {}, [], {}
        outboxes: dict[str, list] = {}  # receiving task -> refs (or values) sent to it
        nxt = Carry() if push else None
        order = self.steady_order if steady else list(self.by_task)
        if steady and local is not None and self.head is not None:
            from opsdk.dist.engine import ray_module

            ray = ray_module()
            pushed = list(carry.pushes.get(self.head, []))  # refs, or values a graph returned
            refs = [p for p in pushed if isinstance(p, ray.ObjectRef)]
            got = dict(zip(refs, ray.get(refs, timeout=timeout))) if refs else {}
            pushed = [got[p] if isinstance(p, ray.ObjectRef) else p for p in pushed]
            done[self.head], sent = local.run(self, step_id, feeds, timeout, pushed)
            for receiver, values in sent.items():
                outboxes.setdefault(receiver, []).append(values)
            order = order[1:]
        for task in order:
            parts = self.by_task[task]
            values = self.task_feeds(task, feeds)
            keys = tuple((*p.key, "steady") if steady and p.steady is not None else p.key
                         for p in parts)
            mode = StepMode(steady, self.outboxes[task] if steady else (),
                            self.push_to[task] if push else (), push and self.has_rounds[task])
            inbox = [*carry.pushes.get(task, ()), *outboxes.get(task, ())] if steady else []
            rounds = carry.rounds.get(task) if steady else None
            refs = actor_of(task).run_step.options(num_returns=mode.returns).remote(
                (keys, step_id, values, timeout, mode.fields()), rounds, *inbox)
            refs = [refs] if mode.returns == 1 else list(refs)
            made += refs
            fetch_refs[refs[0]] = task
            rest = iter(refs[1:])
            for receiver in mode.outboxes:
                outboxes.setdefault(receiver, []).append(next(rest))
            for receiver in mode.pushes:
                nxt.pushes.setdefault(receiver, []).append(next(rest))
            if mode.rounds:
                nxt.rounds[task] = next(rest)
        return fetch_refs, made, nxt, done

    def task_feeds(self, task: str, feeds: dict) -> tuple:
        """The fed values of each of `task`'s partitions, by placeholder name, in their wire
        form (opsdk/dist/wire.py): a step call's `feeds`."""
        return tuple({name: wire.pack(feeds[t]) for t, name in p.feeds}
                     for p in self.by_task[task])

    def collect(self, results: dict[str, list]) -> dict:
        """Fetched element -> value, from each task's results (None for an Operation)."""
        values: dict = {}
        for task, parts in self.by_task.items():
            for part, got in zip(parts, results.get(task, ())):
                for element, name in part.fetches:
                    values[element] = wire.unpack(got.get(name))
        return values


@dataclass
class Carry:
    """What a run pushed for the next run of its step: refs of the values pushed to each task
    and of each task's rounds read with them (Ray passes them on without the client reading
    them)."""

    pushes: dict = field(default_factory=dict)
    rounds: dict = field(default_factory=dict)


def _plan_pushes(part: LocationPart, runtime_part: Any) -> None:
    """The steady variant of a partition that pushes values (opsdk/dist/prefetch.py)."""
    sends, rounds = pushed_sends(runtime_part, part.task)
    if not sends:
        return
    part.steady = steady_partition(runtime_part, sends, rounds).to_graph()
    part.pushed = [s.name for s in sends]
    fed = part.steady.feeds[len(runtime_part.feeds):]
    part.rounds = [(name, r.attrs["variable"]) for name, r in zip(fed, rounds)]


def check_devices(graph: Graph, cluster: ClusterSpec) -> None:
    """Every `/job:` device of the graph names a job and task the cluster has."""
    for op in graph.operations:
        if op.device and DeviceSpec.parse(op.device).job is not None:
            cluster.check_location(op.device, op.name)


def build_step(graph: Graph, elements: list, feeds: tuple, options: Any,
               cluster: ClusterSpec) -> DistributedStep:
    """Compile (fetches, feeds) into partitions by location (see the module docstring)."""
    check_devices(graph, cluster)
    program = compile_program(new_program(elements, feeds, options))
    for op, location in program.location.items():
        cluster.check_location(location, op.name)
    drop_final_markers(program.partitions)
    parts = []
    for location, part in program.partitions.items():
        pg = part.to_graph()
        ops = pg.graph.operations
        parts.append(LocationPart(
            location, task_of(location), pg.graph, list(zip(part.feeds, pg.feeds)),
            list(zip(part.fetches, pg.fetches)), list(pg.targets), op_digests(ops),
            workspace_roots(ops)))
        _plan_pushes(parts[-1], part)
    fetched = {e for p in parts for e, _ in p.fetches}
    missing = [e for e in elements if not isinstance(e, Operation) and e not in fetched]
    if missing:
        raise OpsdkError(f"no partition delivers {', '.join(e.name for e in missing)}")
    return DistributedStep(parts)


def drop_final_markers(partitions: dict[str, Any]) -> None:
    """Take out the control markers whose only reader is a target `no_op` that nothing else
    reads (a train op grouping its updates on the ps tasks): a step ends when every partition
    has, so the master's wait already orders the no_op after those updates, and the marker would
    add a hop from the ps back to the worker to every step's critical path. The node the marker
    stood for becomes a target of its own partition, so it still runs."""
    for part in partitions.values():
        readers: Counter = Counter()
        for op in part.ops:
            readers.update(t.op for t in part.inputs_of(op))
            readers.update(part.controls_of(op))
        for target in part.targets:
            if target.type != "no_op" or readers[target]:
                continue
            controls = part.controls_of(target)
            drop = [c for c in controls if c.type == RECV and readers[c] == 1
                    and c.attrs["tensor_name"].startswith("^")]
            if drop:
                part.controls[target] = tuple(c for c in controls if c not in drop)
                for recv in drop:
                    drop_marker(partitions, part, recv)
