"""One distributed step's partitions: built by the pipeline, registered on their tasks.

`build_step` runs the runtime's compile pipeline over (fetches, feeds) with the client's task as
the default task and keeps, per location, the partition as a standalone graph. `register`
stamps every `_send`/`_recv` with the sending task's incarnation (so a value sent by a task that
has since restarted can never meet a receiver of the new one), exports each graph and has its
task build the plan; it runs again whenever a task's incarnation changed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.pipeline import compile_program, new_program
from opsdk.runtime.compile.sendrecv import RECV, SEND
from opsdk.runtime.io.serialize import export_graph
from opsdk.runtime.ir.device_names import DeviceSpec
from opsdk.runtime.ir.graph import Graph, Operation

from opsdk.dist.cluster import ClusterSpec, task_of
from opsdk.dist.partitions import op_digests, workspace_roots

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


class DistributedStep:
    """The partitions of one (graph version, fetches, feeds), by location and by task."""

    def __init__(self, parts: list[LocationPart]):
        self.parts = {p.location: p for p in parts}
        self.by_task: dict[str, list[LocationPart]] = {}
        for part in parts:
            self.by_task.setdefault(part.task, []).append(part)
        self.registered_for: Optional[dict[str, int]] = None

    @property
    def tasks(self) -> list[str]:
        """The tasks a step starts (each with one call for all its partitions)."""
        return list(self.by_task)

    def register(self, actor_of: Callable[[str], Any], incarnations: dict[str, int],
                 client: int, timeout: Optional[float]) -> None:
        """Register every partition on its task for these incarnations (see the docstring)."""
        from opsdk.dist.engine import ray_module

        ray = ray_module()
        from opsdk.dist.shipping import ship

        stamp = tuple(sorted(incarnations.items()))
        refs = {}
        for part in self.parts.values():
            shipments = tuple(ship(root) for root in part.workspaces)
            for op in part.graph.operations:
                if op.type in _CUT_TYPES:
                    op.attrs["send_incarnation"] = incarnations[task_of(op.attrs["send_location"])]
            part.key = (client, id(self), part.location, hash(stamp))
            refs[part.location] = actor_of(part.task).register.remote(
                part.key, export_graph(part.graph), [n for _, n in part.feeds],
                [n for _, n in part.fetches], part.targets, part.digests, shipments)
        for location, ref in refs.items():
            try:
                ray.get(ref, timeout=timeout)
            except Exception as exc:
                from opsdk.dist.master import _reason
                raise OpsdkError(f"registering the partition of {location}: {_reason(exc)}"
                                 ) from None
        self.registered_for = dict(incarnations)

    def start(self, task: str, actor: Any, step_id: int, feeds: dict,
                 timeout: Optional[float]) -> Any:
        """Start every partition of `task` for step `step_id` in one call (an ObjectRef of the
        list of their fetches)."""
        parts = self.by_task[task]
        values = tuple({name: feeds[t] for t, name in p.feeds} for p in parts)
        return actor.run_step.remote(tuple(p.key for p in parts), step_id, values, timeout)

    def collect(self, results: dict[str, list]) -> dict:
        """Fetched element -> value, from each task's results (None for an Operation)."""
        values: dict = {}
        for task, parts in self.by_task.items():
            for part, got in zip(parts, results.get(task, ())):
                for element, name in part.fetches:
                    values[element] = got.get(name)
        return values


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
                    part.ops.remove(recv)
                    _drop_send(partitions[recv.attrs["send_location"]], recv.attrs)


def _drop_send(source: Any, attrs: dict) -> None:
    send = next(op for op in source.ops if op.type == SEND
                and op.attrs["tensor_name"] == attrs["tensor_name"]
                and op.attrs["recv_location"] == attrs["recv_location"])
    source.ops.remove(send)
    for origin in source.controls_of(send):
        if origin not in source.targets:
            source.targets.append(origin)
