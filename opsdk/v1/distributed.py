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

from dataclasses import dataclass
from typing import Any, Optional

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import errors, run_options
from opsdk.v1 import session as v1_session

from opsdk.dist import ClusterSession, ClusterSpec, ReplicatedOptimizer
from opsdk.dist import replica_device_setter as _setter


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
    """`tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate, total_num_replicas)`.

    The ps aggregates each round and releases the workers itself (opsdk.dist's
    ReplicatedOptimizer), so what TensorFlow's has the program run for its token queue is
    there and does nothing: after `minimize` (or `apply_gradients`), `local_step_init_op`, `chief_init_op` and
    `get_init_tokens_op()` are no-ops, `ready_for_local_init_op` is None and
    `get_chief_queue_runner()` a queue runner with nothing to run, which
    `Supervisor.start_queue_runners` accepts."""

    def __init__(self, opt: Any, replicas_to_aggregate: int, total_num_replicas: Any = None,
                 variable_averages: Any = None, variables_to_average: Any = None,
                 use_locking: bool = False, name: str = "sync_replicas"):
        self._replicated = ReplicatedOptimizer(opt, replicas_to_aggregate, total_num_replicas)
        self._name = name
        self._nothing: Any = None

    def compute_gradients(self, loss: Any, var_list: Any = None, **options: Any) -> list:
        """The wrapped optimizer's (gradient, variable) pairs, with its options."""
        return self._replicated.compute_gradients(loss, var_list, **options)

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None,
                        name: Optional[str] = None) -> Any:
        """The train op: each gradient sent to its variable's ps, aggregated there per round."""
        train_op = self._replicated.apply_gradients(list(grads_and_vars), global_step,
                                                    name=name or self._name)
        from opsdk.v1.scopes import no_op

        self._nothing = no_op(name=f"{self._name}/nothing_to_run")
        return train_op

    def minimize(self, loss: Any, global_step: Any = None, var_list: Any = None,
                 gate_gradients: int = 1, aggregation_method: Any = None,
                 colocate_gradients_with_ops: bool = False, name: Optional[str] = None,
                 grad_loss: Any = None) -> Any:
        """`apply_gradients(compute_gradients(loss, var_list, ...), global_step, name)`."""
        grads = self.compute_gradients(
            loss, var_list, gate_gradients=gate_gradients, aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        return self.apply_gradients(grads, global_step, name)

    def get_slot(self, var: Any, name: str) -> Any:
        return self._replicated.optimizer.get_slot(var, name)

    def get_slot_names(self) -> list[str]:
        return self._replicated.optimizer.get_slot_names()

    def _built(self, what: str) -> Any:
        if self._nothing is None:
            raise OpsdkError(f"SyncReplicasOptimizer.{what}: call minimize or apply_gradients "
                             "first (TensorFlow makes it there too)")
        return self._nothing

    local_step_init_op = property(lambda self: self._built("local_step_init_op"))
    chief_init_op = property(lambda self: self._built("chief_init_op"))
    ready_for_local_init_op = property(lambda self: self._built("ready_for_local_init_op")
                                       and None)

    def get_init_tokens_op(self, num_tokens: int = -1) -> Any:
        return self._built("get_init_tokens_op")

    def get_chief_queue_runner(self) -> "NothingToRun":
        self._built("get_chief_queue_runner")
        return NothingToRun()

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> Any:
        """A hook with nothing to do: the ps aggregates and releases the workers itself."""
        from opsdk.v1.hooks import SessionRunHook

        return SessionRunHook()


class _ClusterSession(ClusterSession):
    """What `tf.Session(server.target)` makes (and a monitored session on a cluster holds): a
    ClusterSession that takes `run` as TF1's session does (TF1's feeds, summaries decoded,
    errors raised as their tf.errors classes, a RunOptions' timeout and trace level honoured)
    and is the default session inside its `with` block (`Tensor.eval()`)."""

    @classmethod
    def for_target(cls, target: "Target", graph: Any = None) -> "_ClusterSession":
        return cls(graph if graph is not None else opsdk.get_default_graph(), target.cluster,
                   task=target.task, address=target.address)

    def as_default(self) -> Any:
        """Make this the default session inside a `with` block (does not close it after)."""
        return v1_session._DefaultContext(self)

    def __enter__(self) -> "_ClusterSession":
        v1_session._stack.sessions.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if v1_session._stack.sessions and v1_session._stack.sessions[-1] is self:
            v1_session._stack.sessions.pop()
        self.close()

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,  # type: ignore[override]
            run_metadata: Any = None, timeout: Optional[float] = None) -> Any:
        fetches = v1_session.sparse_fetches(fetches)
        try:
            if options is None:
                result = super().run(fetches, v1_session._feeds(feed_dict), timeout=timeout)
            else:
                limit, trace = run_options.read_options(options, "Session.run")
                run_options.check_metadata(run_metadata, "Session.run")
                if limit is not None:
                    timeout = limit if timeout is None else min(timeout, limit)
                if trace and run_metadata is not None:
                    result, runs = self.traced_run(fetches, v1_session._feeds(feed_dict), timeout)
                    run_options.record_cluster(run_metadata, runs, self.graph)
                else:
                    result = super().run(fetches, v1_session._feeds(feed_dict), timeout=timeout)
        except OpsdkError as exc:
            raise errors.as_tf_error(exc) from None
        return v1_session.fetched(fetches, result)


class NothingToRun:
    """What `SyncReplicasOptimizer.get_chief_queue_runner()` returns: a queue runner with no
    thread to start (the ps releases the workers itself)."""

    def create_threads(self, sess: Any, coord: Any = None, daemon: bool = False,
                       start: bool = False) -> list:
        return []


def device(name_or_function: Any) -> Any:
    """`tf.device(...)`: a device name, or a replica_device_setter (itself a scope)."""
    if isinstance(name_or_function, _setter):
        return name_or_function
    return opsdk.device(name_or_function)


def install(train: Any, names: dict) -> None:
    """Add these names, the monitored sessions' (opsdk/v1/monitored.py), the Supervisor's
    (opsdk/v1/supervisor.py) and the hooks' (opsdk/v1/hooks.py) to `tf.train`, and make `tf.device` take a setter (the one hook line in
    opsdk/v1/__init__.py)."""
    from opsdk.v1 import hooks, monitored

    for name in ("ClusterSpec", "Server", "replica_device_setter", "SyncReplicasOptimizer"):
        setattr(train, name, globals()[name])
    for name in ("Coordinator", "Scaffold", "SessionCreator", "ChiefSessionCreator",
                 "WorkerSessionCreator", "MonitoredSession", "SingularMonitoredSession",
                 "MonitoredTrainingSession"):
        setattr(train, name, getattr(monitored, name))
    from opsdk.v1 import supervisor

    train.Supervisor, train.LooperThread = supervisor.Supervisor, supervisor.LooperThread
    for name in ("SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues",
                 "SecondOrStepTimer", "StopAtStepHook", "CheckpointSaverHook",
                 "CheckpointSaverListener", "LoggingTensorHook", "NanTensorHook",
                 "NanLossDuringTrainingError", "StepCounterHook", "SummarySaverHook",
                 "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook", "ProfilerHook"):
        setattr(train, name, getattr(hooks, name))
    names["device"] = device
