"""TF1's distributed names over opsdk.dist: a between-graph training script runs with its import
changed (docs/distributed.md, TF1 programs).

    cluster = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]})
    server = tf.train.Server(cluster, job_name="worker", task_index=i)
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{i}",
                                                  cluster=cluster)):
        ...
        opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=2, total_num_replicas=2)
        train_op = opt.minimize(loss, global_step=global_step)
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=(i == 0),
                                           checkpoint_dir=d) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed)

The tasks are Ray actors, not servers: `tf.train.Server(...)` only names the task this client
drives (its `target` is what MonitoredTrainingSession needs), and a ps's `server.join()` returns
at once: nothing has to run in a ps process (see docs/distributed.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError

from opsdk.dist import ClusterSession, ClusterSpec, ReplicatedOptimizer, checkpoint
from opsdk.dist import replica_device_setter as _setter
from opsdk.dist.errors import TaskUnavailable


def replica_device_setter(ps_tasks: int = 0, ps_device: str = "/job:ps",
                          worker_device: str = "/job:worker", merge_devices: bool = True,
                          cluster: Any = None, ps_ops: Any = None, ps_strategy: Any = None
                          ) -> _setter:
    """`tf.train.replica_device_setter(...)`: used as `with tf.device(setter):`."""
    return _setter(ps_tasks, ps_device, worker_device, cluster, ps_strategy)


@dataclass(frozen=True)
class Target:
    """What `Server.target` holds: the cluster, this client's task, a Ray address."""

    cluster: ClusterSpec
    task: str
    address: Optional[str] = None


class Server:
    """`tf.train.Server(cluster, job_name, task_index)`: names this client's task (no server
    runs; tasks are Ray actors). `protocol`, `config` and `start` are accepted and unused."""

    def __init__(self, server_or_cluster_def: Any, job_name: Optional[str] = None,
                 task_index: Optional[int] = None, protocol: Any = None, config: Any = None,
                 start: bool = True, address: Optional[str] = None):
        cluster = ClusterSpec(server_or_cluster_def)
        job = job_name or cluster.jobs[0]
        self.target = Target(cluster, cluster.check_location(f"/job:{job}/task:{task_index or 0}"),
                             address)

    def join(self) -> None:
        """Returns at once: a ps task is an actor the workers' clients start (docs)."""


class SyncReplicasOptimizer:
    """`tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate, total_num_replicas)`."""

    def __init__(self, opt: Any, replicas_to_aggregate: int, total_num_replicas: Any = None,
                 variable_averages: Any = None, variables_to_average: Any = None,
                 use_locking: bool = False, name: str = "sync_replicas"):
        self._replicated = ReplicatedOptimizer(opt, replicas_to_aggregate, total_num_replicas)
        self._name = name

    def minimize(self, loss: Any, global_step: Any = None, var_list: Any = None,
                 name: Optional[str] = None, **unused: Any) -> Any:
        return self._replicated.minimize(loss, global_step=global_step, var_list=var_list,
                                         name=name or self._name)

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> "_NoHook":
        """Nothing to run: the ps aggregates and releases the workers itself."""
        return _NoHook()


class _NoHook:
    def begin(self) -> None:
        pass


class StopAtStepHook:
    """`tf.train.StopAtStepHook(num_steps=None, last_step=None)`."""

    def __init__(self, num_steps: Optional[int] = None, last_step: Optional[int] = None):
        if (num_steps is None) == (last_step is None):
            raise OpsdkError("StopAtStepHook: give exactly one of num_steps and last_step")
        self.num_steps, self.last_step = num_steps, last_step


class MonitoredTrainingSession:
    """`tf.train.MonitoredTrainingSession(master=server.target, is_chief, checkpoint_dir,
    hooks, save_checkpoint_steps)` over a ClusterSession. The chief restores the latest
    checkpoint of `checkpoint_dir` or initialises the variables; the others wait for it.

    As TensorFlow's, it recovers from a task that dies (TaskUnavailable, TensorFlow's
    UnavailableError and AbortedError): it reconnects to the tasks as Ray restarts them; the
    chief restores the latest checkpoint (or initialises the variables where there is none), the
    others wait until it has; then the call that failed runs again. A node's own error (a bad
    feed) is raised as it is, and so is the last failure after MAX_RECOVERIES in a row with no
    successful call between them."""

    MAX_RECOVERIES = 5

    def __init__(self, master: Any = "", is_chief: bool = True, checkpoint_dir: Any = None,
                 scaffold: Any = None, hooks: Any = None, chief_only_hooks: Any = None,
                 save_checkpoint_secs: Any = None, save_checkpoint_steps: Optional[int] = None,
                 config: Any = None, stop_grace_period_secs: int = 120, **unused: Any):
        if not isinstance(master, Target):
            raise OpsdkError("MonitoredTrainingSession: master must be a tf.train.Server's "
                             "target (docs/distributed.md, TF1 programs)")
        graph = opsdk.get_default_graph()
        self._sess = ClusterSession(graph, master.cluster, task=master.task,
                                    address=master.address)
        self._graph = graph
        self._is_chief = is_chief
        self._dir = checkpoint_dir
        self._every = save_checkpoint_steps if checkpoint_dir else None
        self._stop_at = next((h for h in hooks or () if isinstance(h, StopAtStepHook)), None)
        self._steps = 0
        self._global_step = next(iter(graph.get_collection("global_step")), None)
        self._wait_s = stop_grace_period_secs
        self._failures = 0  # recoveries since the last call that succeeded
        self.recoveries: list[str] = []  # the error of each failure recovered from
        self._recovering(self._start)

    def _start(self) -> None:
        """The chief's restore (or initialisation); the others' wait for it."""
        from opsdk.runtime.frontend.variables import global_variables, global_variables_initializer

        if self._is_chief:
            index = checkpoint.latest(self._dir) if self._dir else None
            if index is not None:
                checkpoint.restore(self._sess, index)
            else:
                self._sess.run(global_variables_initializer(self._graph))
            return
        names = {v.name for v in global_variables(self._graph)}
        deadline = time.monotonic() + self._wait_s
        while not names <= set(self._sess.variable_values()):
            if time.monotonic() > deadline:
                raise OpsdkError(f"MonitoredTrainingSession: the chief did not initialise the "
                                 f"variables within {self._wait_s} s")
            time.sleep(0.2)
        self._sess.trust_tasks()  # as the chief put them there

    def _recovering(self, call: Any) -> Any:
        """`call()`; after a TaskUnavailable, reconnect, restore (`_start`) and call again."""
        while True:
            try:
                result = call()
            except TaskUnavailable as exc:
                self._failures += 1
                if self._failures > self.MAX_RECOVERIES:
                    raise
                logging.getLogger("opsdk.v1").warning(
                    "MonitoredTrainingSession: %s; recovering: waiting for the tasks, then %s",
                    exc, "restoring the latest checkpoint" if self._is_chief
                    else "for the chief to restore the variables")
                self.recoveries.append(str(exc))
                self._recover()
                continue
            self._failures = 0
            return result

    def _recover(self) -> None:
        """Reconnect (until the tasks answer, restarted ones included) and restore."""
        while True:
            try:
                self._sess.reconnect()
                self._start()
                return
            except TaskUnavailable:  # a task still restarting
                self._failures += 1
                if self._failures > self.MAX_RECOVERIES:
                    raise
                time.sleep(1.0)

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        result = self._recovering(lambda: self._sess.run(fetches, feed_dict))
        self._steps += 1
        if self._is_chief and self._every and self._steps % self._every == 0:
            self._recovering(lambda: checkpoint.save(self._sess, self._dir, self._step()))
        return result

    def _step(self) -> int:
        if self._global_step is None:
            return self._steps
        return int(np.asarray(self._sess.run(self._global_step)))

    def should_stop(self) -> bool:
        hook = self._stop_at
        if hook is None:
            return False
        if hook.last_step is not None:
            return self._recovering(self._step) >= hook.last_step
        return self._steps >= hook.num_steps

    def close(self) -> None:
        self._sess.close()

    def __enter__(self) -> "MonitoredTrainingSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def device(name_or_function: Any) -> Any:
    """`tf.device(...)`: a device name, or a replica_device_setter (itself a scope)."""
    if isinstance(name_or_function, _setter):
        return name_or_function
    return opsdk.device(name_or_function)


def install(train: Any, names: dict) -> None:
    """Add these names to `tf.train` and make `tf.device` take a setter (the one hook line in
    opsdk/v1/__init__.py)."""
    for name in ("ClusterSpec", "Server", "replica_device_setter", "SyncReplicasOptimizer",
                 "MonitoredTrainingSession", "StopAtStepHook"):
        setattr(train, name, globals()[name] if name != "ClusterSpec" else ClusterSpec)
    names["device"] = device
