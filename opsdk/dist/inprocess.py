"""A client's own task, run in the client's process in steady steps (TensorFlow's in-process
worker).

A steady step (opsdk/dist/prefetch.py) runs its tasks in an order where values flow one way.
When the first of them is the client's own task (`ClusterSession(task=...)`, the worker it
drives), that task's part needs nothing but the client's feeds and the values the ps pushed
last run, which come back to the client anyway in a compiled step (opsdk/dist/compiled.py). Run
there, it spares a hop (client -> worker actor) and, on a small machine, a process waiting for
it: the step is the client computing the worker's part, then one call of the ps with the
gradient, where before it was client -> worker -> ps -> client. TensorFlow's client likewise
runs its worker's partition in its own process.

Only where running it here cannot change a result (`runs_in_client`):

- the task's part holds no state: declared ops that are not `stateful` (a random op keeps its
  stream on the task), placeholders, constants, sends, receives and `no_op`s, no variable, no
  control flow;
- all of it on the CPU (a GPU of the task's actor is not the client's);
- the session gives the task no placement (`placement=`), and a TF1 cluster's address for it,
  if any, put its actor on the client's machine: where it was asked to run elsewhere, it runs
  there.

The task's actor stays: full steps (the first, and any after another step, a failure, a
restore) run there, as values from other tasks reach it by delivery, which the client's process
cannot take. The partitions are registered on both, from the same exported graphs.
"""

from __future__ import annotations

from typing import Any, Optional

from opsdk.runtime.ir.device_names import DeviceSpec

_PRIMITIVES = frozenset({"placeholder", "const", "_send", "_recv", "no_op"})


def runs_in_client(step: Any, task: str, placed: bool) -> bool:
    """Whether `step`'s steady runs may run `task`'s part in the client (module docstring)."""
    order = step.steady_order
    if placed or not order or order[0] != task or len(order) < 2:
        return False
    for part in step.by_task[task]:
        if part.steady is not None or part.rounds:
            return False  # it pushes values: it holds variables
        if (DeviceSpec.parse(part.location).device_type or "CPU") != "CPU":
            return False
        for op in part.graph.operations:
            if op.spec is None:
                if op.type not in _PRIMITIVES:
                    return False
            elif op.spec.stateful:
                return False
    return True


class ClientTask:
    """The client's own task in its process: a TaskState without an actor, holding the
    partitions of the steps that run it here (`DistributedStep.head`)."""

    def __init__(self, task: str):
        from opsdk.dist.task import TaskState

        self.task = task
        self.state = TaskState(task)

    def register(self, part: Any, graph_text: str) -> None:
        """Build `part`'s plan here from the graph its actor got, with its ops resolved in the
        client's own workspaces (nothing is shipped)."""
        from opsdk.dist.partitions import build_partition

        if part.key in self.state.partitions:
            return
        built = build_partition(self.task, tuple(part.workspaces), graph_text,
                                [n for _, n in part.feeds], [n for _, n in part.fetches],
                                part.targets, part.digests)
        built.push_plan = part.push_plan
        self.state.partitions[part.key] = built

    def run(self, step: Any, step_id: int, feeds: dict, timeout: Optional[float],
            pushed: list) -> tuple[dict, dict]:
        """This task's part of a steady run: (its fetched values as a task returns them, the
        values it sends by receiving task). `pushed`: the lists of values pushed to it."""
        from opsdk.dist.prefetch import StepMode

        mode = StepMode(True, step.outboxes[self.task])
        keys = tuple(p.key for p in step.by_task[self.task])
        out = self.state.run_step((keys, step_id, step.task_feeds(self.task, feeds), timeout,
                                   mode.fields()), None, *pushed)
        if mode.returns == 1:
            return out, {}
        return out[0], dict(zip(mode.outboxes, out[1:]))

    def close(self) -> None:
        """Let the threads of its partitions' pools end (the session closed): the client's
        process lives on, where a task's actor would have ended with them."""
        for part in list(self.state.partitions.values()):
            part.pool.shutdown(wait=False)
        self.state.runner.shutdown(wait=False)
