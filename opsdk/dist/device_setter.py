"""`replica_device_setter`: variables on the ps tasks, every other node on the worker.

    with replica_device_setter(cluster=ClusterSpec({"ps": 2, "worker": 2}),
                               worker_device="/job:worker/task:1"):
        w = Variable(...)           # -> /job:ps/task:0
        b = Variable(...)           # -> /job:ps/task:1 (round robin)
        y = matmul(x, w) + b        # -> /job:worker/task:1

As TensorFlow's function of the same name, but as a scope: on leaving it, each node created
inside that names no job gets one: a variable (with its initializer and its other assigns) goes
to a ps task chosen by the strategy (`round_robin`, or `by_size`: the least loaded ps by bytes),
anything else to `worker_device` (merged under the node's own device, so `/gpu:0` stays).
An optimizer's slot variables (`<var>/<Optimizer>`), a variable made in `colocate_with` another
(Adam's beta powers, with the first variable) and the replicated updates of a variable
(opsdk/dist/replicated.py) built inside the scope go with their variable.
A node whose scope already named a job keeps it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.ir.device_names import DeviceSpec, merge_device
from opsdk.runtime.ir.graph import Graph, Operation, get_default_graph

from opsdk.dist.cluster import ClusterSpec

Strategy = Union[str, Callable[[Operation], int]]


class replica_device_setter:  # noqa: N801 - TensorFlow's name
    """A scope placing variables on ps tasks and the rest on the worker (module docstring)."""

    def __init__(self, ps_tasks: int = 0, ps_device: str = "/job:ps",
                 worker_device: str = "/job:worker", cluster: Any = None,
                 ps_strategy: Optional[Strategy] = None, graph: Optional[Graph] = None):
        if cluster is not None:
            spec = ClusterSpec(cluster)
            ps_job = DeviceSpec.parse(ps_device).job or "ps"
            ps_tasks = spec.num_tasks(ps_job) if ps_job in spec.jobs else 0
        if ps_tasks < 1:
            raise OpsdkError("replica_device_setter: no ps task (give ps_tasks=N or a cluster "
                             "with a 'ps' job)")
        self.ps_tasks = ps_tasks
        self.ps_device = ps_device
        self.worker_device = worker_device
        self.strategy = _strategy(ps_strategy or "round_robin", ps_tasks)
        self._graph = graph
        self._start = 0

    def __enter__(self) -> "replica_device_setter":
        self._graph = self._graph or get_default_graph()
        self._start = len(self._graph.operations)
        return self

    def __exit__(self, *exc: Any) -> None:
        graph = self._graph
        created = list(graph.operations[self._start:])
        homes: dict[str, str] = {}
        for op in created:
            if op.type == "variable" and _unplaced(op):
                owner = _slot_owner(op.name, homes)
                if op.colocated is not None and op.colocated.name in homes:
                    homes[op.name] = homes[op.colocated.name]  # made to live with it
                elif owner is not None:  # an optimizer's slot lives beside its variable
                    homes[op.name] = homes[owner]
                else:
                    task = self.strategy(op)
                    homes[op.name] = merge_device(f"{self.ps_device}/task:{task}",
                                                  op.device or None)
                op.device = homes[op.name]
        for op in created:
            if not _unplaced(op):
                continue
            # assigns and replicated updates (`_dist_*`) go where their variable lives, and a
            # node made to live with a variable (a lookup of a table's rows, its gradient) too
            variable = op.attrs.get("variable")
            home = homes.get(variable) if isinstance(variable, str) else None
            if home is None and op.colocated is not None:
                home = homes.get(op.colocated.name) or (
                    None if _unplaced(op.colocated) else op.colocated.device)
            op.device = home or merge_device(self.worker_device, op.device or None)


def _slot_owner(name: str, homes: dict) -> Optional[str]:
    """The variable `name` is a slot of (`<var>/<Optimizer>`), when that one was placed here."""
    owner = name.rpartition("/")[0]
    while owner:
        if owner in homes:
            return owner
        owner = owner.rpartition("/")[0]
    return None


def _unplaced(op: Operation) -> bool:
    return DeviceSpec.parse(op.device).job is None


def _strategy(strategy: Strategy, tasks: int) -> Callable[[Operation], int]:
    if callable(strategy):
        return strategy
    if strategy == "round_robin":
        counter = iter(range(1 << 62))
        return lambda op: next(counter) % tasks
    if strategy == "by_size":
        loads = [0] * tasks

        def least_loaded(op: Operation) -> int:
            shape, dtype = op.attrs.get("shape") or (), op.attrs.get("dtype", "float32")
            size = int(np.prod([d or 1 for d in shape])) * np.dtype(dtype).itemsize
            task = loads.index(min(loads))
            loads[task] += size
            return task
        return least_loaded
    raise OpsdkError(f"replica_device_setter: ps_strategy {strategy!r} is not one of "
                     "'round_robin', 'by_size' or a function of the variable node")
