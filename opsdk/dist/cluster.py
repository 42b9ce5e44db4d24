"""The cluster spec: which jobs exist and how many tasks each has.

    ClusterSpec({"ps": 2, "worker": 2})
    ClusterSpec({"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]})   # TF1's form

A task is named `/job:<job>/replica:0/task:<i>`. The addresses of TF1's form say where a task
runs: on the Ray node at that host, where the cluster has one (opsdk/dist/placement.py); the
port is not used (Ray places the actors: opsdk opens no ports of its own). A device naming a job
or a task the cluster lacks is an error naming the node and what the cluster has.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Mapping, Sequence

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.ir.device_names import DeviceSpec

_JOB = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def task_name(job: str, task: int) -> str:
    """`/job:<job>/replica:0/task:<task>`: a task's canonical name."""
    return f"/job:{job}/replica:0/task:{task}"


@functools.lru_cache(maxsize=4096)  # every value sent between tasks asks (a step's hot path)
def task_of(location: str) -> str:
    """The task part of a location: `/job:ps/replica:0/task:1/device:CPU:0` -> `/job:ps/replica:0/task:1`."""
    spec = DeviceSpec.parse(location)
    return task_name(spec.job or "localhost", spec.task or 0)


class ClusterSpec:
    """Jobs and their task counts (`{"ps": 2, "worker": 2}`) or task address lists."""

    def __init__(self, jobs: Any):
        if isinstance(jobs, ClusterSpec):
            self._jobs, self._given = dict(jobs._jobs), set(jobs._given)
            return
        if not isinstance(jobs, Mapping) or not jobs:
            raise OpsdkError("ClusterSpec: expected a dict of job name -> task count or list of "
                             f"task addresses, e.g. {{'ps': 1, 'worker': 2}}; got {jobs!r}")
        self._jobs: dict[str, tuple[str, ...]] = {}
        self._given: set[str] = set()  # the jobs whose task addresses were given (TF1's form)
        for job, tasks in jobs.items():
            self._jobs[job] = _tasks(job, tasks)
            if not isinstance(tasks, int):
                self._given.add(job)

    @property
    def jobs(self) -> list[str]:
        """Job names, in the order given."""
        return list(self._jobs)

    def num_tasks(self, job: str) -> int:
        """How many tasks `job` has (an error naming the jobs when there is no such job)."""
        if job not in self._jobs:
            raise OpsdkError(f"the cluster has no job '{job}' (jobs: {', '.join(self._jobs)})")
        return len(self._jobs[job])

    def task_names(self) -> list[str]:
        """Every task's canonical name, job by job."""
        return [task_name(job, i) for job, tasks in self._jobs.items() for i in range(len(tasks))]

    def as_dict(self) -> dict[str, list[str]]:
        """TF1's form: job -> task addresses (`<job>:<i>` where none were given)."""
        return {job: list(tasks) for job, tasks in self._jobs.items()}

    def addresses(self) -> dict[str, str]:
        """Task name -> the address TF1's form gave it (none for a job given by its count)."""
        return {task_name(job, i): address for job in self._given
                for i, address in enumerate(self._jobs[job])}

    def check_location(self, location: str, node: str = "") -> str:
        """The task of `location`, or an error when the cluster lacks its job or task."""
        spec = DeviceSpec.parse(location)
        where = f"node '{node}': " if node else ""
        if spec.job is None:
            raise OpsdkError(f"{where}device '{location}' names no job; the cluster runs jobs "
                             f"{', '.join(self._jobs)}")
        if spec.job not in self._jobs:
            raise OpsdkError(f"{where}device '{location}' names job '{spec.job}', which the "
                             f"cluster lacks (jobs: {', '.join(self._jobs)})")
        count = len(self._jobs[spec.job])
        task = spec.task or 0
        if task >= count:
            raise OpsdkError(f"{where}device '{location}' names task {task} of job '{spec.job}', "
                             f"which has {count} task(s) (0..{count - 1})")
        return task_name(spec.job, task)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ClusterSpec) and other._jobs == self._jobs
                and other._given == self._given)

    def __hash__(self) -> int:
        return hash(tuple(self._jobs.items()))

    def __repr__(self) -> str:
        return f"ClusterSpec({ {j: len(t) for j, t in self._jobs.items()} })"


def _tasks(job: Any, tasks: Any) -> tuple[str, ...]:
    if not isinstance(job, str) or not _JOB.match(job):
        raise OpsdkError(f"ClusterSpec: job name {job!r} must be a word such as 'ps' or 'worker'")
    if isinstance(tasks, bool) or not isinstance(tasks, (int, Sequence)) or isinstance(tasks, str):
        raise OpsdkError(f"ClusterSpec: job '{job}' needs a task count or a list of task "
                         f"addresses, got {tasks!r}")
    if isinstance(tasks, int):
        if tasks < 1:
            raise OpsdkError(f"ClusterSpec: job '{job}' needs at least one task, got {tasks}")
        return tuple(f"{job}:{i}" for i in range(tasks))
    if not tasks:
        raise OpsdkError(f"ClusterSpec: job '{job}' has an empty task list")
    return tuple(str(t) for t in tasks)
