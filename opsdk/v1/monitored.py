"""TF1's monitored training session: `tf.train.MonitoredTrainingSession` and
`tf.train.StopAtStepHook` over a ClusterSession (docs/distributed.md, TF1 programs)."""

from __future__ import annotations

import logging
import time
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError

from opsdk.dist import ClusterSession, checkpoint
from opsdk.dist.errors import TaskUnavailable
from opsdk.v1.distributed import Target


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
