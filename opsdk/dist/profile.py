"""`ClusterSession.profile`: where a distributed step's time goes, per task and node.

Each task of the step times its own nodes while the profile runs (task.py: `TaskProfiler`, the
runtime's node timers on a copy of each partition's plan); the client times each step whole.
What a step's wall time holds beyond the busiest task's nodes is Ray's part (the calls, the
values between tasks) and the waits of tasks on one another.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from opsdk.runtime.exec.profile import NodeTiming, ms, share


@dataclass(frozen=True)
class TaskNode:
    """One node of one task over the profiled steps."""

    task: str
    timing: NodeTiming


@dataclass(frozen=True)
class ClusterProfile:
    """What `ClusterSession.profile` measured. `str()` is the table it prints."""

    steps: int
    warmup: int
    walls: tuple[float, ...]  # seconds per profiled step, as the client saw it
    nodes: tuple[TaskNode, ...]  # every node that ran on a task, the most time first

    @classmethod
    def of(cls, steps: int, warmup: int, walls: list, by_task: dict) -> "ClusterProfile":
        """From the tasks' `stop_profile` lists ((name, type, device, calls, seconds) each)."""
        nodes = [TaskNode(task, NodeTiming(*row)) for task, rows in by_task.items() for row in rows]
        nodes.sort(key=lambda n: -n.timing.seconds)
        return cls(steps, warmup, tuple(walls), tuple(nodes))

    @property
    def step_seconds(self) -> float:
        """The median step."""
        return statistics.median(self.walls)

    def by_task(self) -> tuple[tuple[str, float, int], ...]:
        """(task, seconds a step in its nodes, nodes run), the busiest first. A task's
        partitions may run at once, so its seconds may exceed the step's."""
        seconds: dict[str, float] = {}
        count: dict[str, int] = {}
        for node in self.nodes:
            seconds[node.task] = seconds.get(node.task, 0.0) + node.timing.seconds / self.steps
            count[node.task] = count.get(node.task, 0) + 1
        return tuple(sorted(((t, s, count[t]) for t, s in seconds.items()), key=lambda r: -r[1]))

    def outside_nodes(self) -> float:
        """Seconds of the mean step beyond its busiest task's nodes: Ray's calls and values
        between the client and the tasks, and the tasks' waits on one another."""
        busiest = max((s for _, s, _ in self.by_task()), default=0.0)
        return max(sum(self.walls) / self.steps - busiest, 0.0)

    def __str__(self, top: int = 15) -> str:
        step = sum(self.walls) / self.steps
        out = [f"{self.steps} steps after {self.warmup} warm-up runs: {ms(self.step_seconds)} a "
               f"step (median; mean {ms(step)}, {ms(min(self.walls))} to "
               f"{ms(max(self.walls))}), as the client saw them",
               "by task (its nodes' time a step; its partitions may run at once):"]
        for task, each, count in self.by_task():
            out.append(f"  {ms(each):>9}  {share(each, step)}  {task} ({count} nodes)")
        out.append("  a step     share  node (op type, task; the mean a step, its share of the "
                   "steps' time)")
        for node in self.nodes[:top]:
            each = node.timing.seconds / self.steps
            out.append(f"  {ms(each):>9}  {share(each, step)}  {node.timing.name} "
                       f"({node.timing.type}, {node.task})")
        rest = self.nodes[top:]
        if rest:
            each = sum(n.timing.seconds for n in rest) / self.steps
            out.append(f"  {ms(each):>9}  {share(each, step)}  {len(rest)} more nodes")
        out.append(f"beyond the busiest task's nodes (Ray's calls and values, waits between "
                   f"tasks): {ms(self.outside_nodes())} a step")
        return "\n".join(out)

