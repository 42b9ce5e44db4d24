"""One distributed step's partitions: built by the pipeline, registered on their tasks.

`build_step` runs the runtime's compile pipeline over (fetches, feeds) with the client's task as
the default task and keeps, per location, the partition as a standalone graph. `register`
stamps every `_send`/`_recv` with the sending task's incarnation (so a value sent by a task that
has since restarted can never meet a receiver of the new one), exports each graph and has its
task build the plan; it runs again whenever a task's incarnation changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.pipeline import compile_program, new_program
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
    """The partitions of one (graph version, fetches, feeds), by location."""

    def __init__(self, parts: list[LocationPart]):
        self.parts = {p.location: p for p in parts}
        self.registered_for: Optional[dict[str, int]] = None

    @property
    def tasks(self) -> list[str]:
        """The locations whose partitions a step starts (each on its task's actor)."""
        return list(self.parts)

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

    def start(self, location: str, actor: Any, step_id: int, feeds: dict,
              timeout: Optional[float]) -> Any:
        """Start the partition of `location` for step `step_id` (an ObjectRef of its fetches)."""
        part = self.parts[location]
        values = {name: feeds[t] for t, name in part.feeds}
        return actor.run_step.remote(part.key, step_id, values, timeout)

    def collect(self, results: dict[str, dict]) -> dict:
        """Fetched element -> value, from each location's results (None for an Operation)."""
        values: dict = {}
        for location, part in self.parts.items():
            got = results.get(location, {})
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
