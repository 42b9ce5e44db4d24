"""TF1's `tf.train.Supervisor` and `tf.train.LooperThread`: the older way of training with a
session that restores, checkpoints and summarises itself (docs/tf1.md). Built on the monitored
sessions' pieces (opsdk/v1/monitored.py): the chief restores the latest checkpoint of `logdir`
or initialises the variables, then its standard services, threads run beside the training
loop, save a checkpoint every `save_model_secs` and write the summaries and steps per second
every `save_summaries_secs`. A worker of a cluster waits for the chief. In one process and on
a cluster (`managed_session(server.target)`).

    sv = tf.train.Supervisor(logdir=folder, global_step=global_step)
    with sv.managed_session() as sess:
        while not sv.should_stop():
            sess.run(train_op)

As TensorFlow's, leaving `managed_session` stops the services (no checkpoint is written then:
save with `sv.saver` where the program wants one), an error inside it is raised again after that
stop, and `tf.errors.OutOfRangeError` ends it quietly.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Callable, Iterator, Optional

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import scopes
from opsdk.v1.hooks import _step, save_checkpoint, write_steps_per_second
from opsdk.v1.monitored import (USE_DEFAULT, ChiefSessionCreator, Coordinator, Scaffold,
                                WorkerSessionCreator, default_init_ops, default_saver)


class LooperThread(threading.Thread):
    """`tf.train.LooperThread(coord, timer_interval_secs, target=None, args=None,
    kwargs=None)`: calls `target(*args, **kwargs)` (or `run_loop()`) at once and then every
    `timer_interval_secs` (without pause when None) until the coordinator stops; an error stops
    the coordinator with it."""

    def __init__(self, coord: Coordinator, timer_interval_secs: Optional[float],
                 target: Optional[Callable] = None, args: Any = None, kwargs: Any = None):
        if not isinstance(coord, Coordinator):
            raise OpsdkError("LooperThread: coord must be a tf.train.Coordinator")
        super().__init__(daemon=True)
        self._coord, self._interval = coord, timer_interval_secs
        self._target, self._args, self._kwargs = target, tuple(args or ()), dict(kwargs or {})
        coord.register_thread(self)

    @staticmethod
    def loop(coord: Coordinator, timer_interval_secs: Optional[float], target: Callable,
             args: Any = None, kwargs: Any = None) -> "LooperThread":
        """A started LooperThread."""
        thread = LooperThread(coord, timer_interval_secs, target, args, kwargs)
        thread.start()
        return thread

    def run(self) -> None:
        with self._coord.stop_on_exception():
            self.start_loop()
            while not self._coord.should_stop():
                started = time.monotonic()
                self.run_loop()
                if self._interval is not None:
                    left = self._interval - (time.monotonic() - started)
                    if left > 0 and self._coord.wait_for_stop(left):
                        break
            self.stop_loop()

    def start_loop(self) -> None:
        pass

    def stop_loop(self) -> None:
        pass

    def run_loop(self) -> None:
        if self._target is None:
            raise OpsdkError("LooperThread: give a target, or subclass it and write run_loop")
        self._target(*self._args, **self._kwargs)


class Supervisor:
    """`tf.train.Supervisor(graph=None, ready_op=USE_DEFAULT, is_chief=True,
    init_op=USE_DEFAULT, init_feed_dict=None, local_init_op=USE_DEFAULT, logdir=None,
    summary_op=USE_DEFAULT, saver=USE_DEFAULT, global_step=USE_DEFAULT,
    save_summaries_secs=120, save_model_secs=600, recovery_wait_secs=30, stop_grace_secs=120,
    checkpoint_basename="model.ckpt", session_manager=None, summary_writer=USE_DEFAULT,
    init_fn=None)`: see the module docstring; `init_fn(sess)` runs after `init_op` when the
    chief starts without a checkpoint. A value of None turns the piece off (no init_op,
    no saver, no summaries); USE_DEFAULT makes TensorFlow's default. `ready_op`,
    `recovery_wait_secs` and `session_manager` are accepted and not used."""

    USE_DEFAULT = USE_DEFAULT

    def __init__(self, graph: Any = None, ready_op: Any = USE_DEFAULT,
                 ready_for_local_init_op: Any = USE_DEFAULT, is_chief: bool = True,
                 init_op: Any = USE_DEFAULT, init_feed_dict: Any = None,
                 local_init_op: Any = USE_DEFAULT, logdir: Any = None,
                 summary_op: Any = USE_DEFAULT, saver: Any = USE_DEFAULT,
                 global_step: Any = USE_DEFAULT, save_summaries_secs: Optional[float] = 120,
                 save_model_secs: Optional[float] = 600, recovery_wait_secs: float = 30,
                 stop_grace_secs: float = 120, checkpoint_basename: str = "model.ckpt",
                 session_manager: Any = None, summary_writer: Any = USE_DEFAULT,
                 init_fn: Any = None, local_init_run_options: Any = None):
        self._graph = graph if graph is not None else opsdk.get_default_graph()
        with self._graph.as_default():
            if USE_DEFAULT in (init_op, local_init_op, summary_op):
                defaults = default_init_ops()  # found in, or kept in, the graph's collections
                init_op = defaults[0] if init_op is USE_DEFAULT else init_op
                local_init_op = defaults[1] if local_init_op is USE_DEFAULT else local_init_op
                summary_op = defaults[2] if summary_op is USE_DEFAULT else summary_op
            if global_step is USE_DEFAULT:
                from opsdk.v1.train import get_global_step

                global_step = get_global_step()
            if saver is USE_DEFAULT:
                saver = default_saver() if scopes.global_variables() else None
        self._is_chief = is_chief
        self._logdir = os.fspath(logdir) if logdir is not None else None
        self._init_op, self._init_feed_dict, self._init_fn = init_op, init_feed_dict, init_fn
        self._local_init_op, self._summary_op = local_init_op, summary_op
        self._saver, self._global_step = saver, global_step
        self._save_summaries_secs, self._save_model_secs = save_summaries_secs, save_model_secs
        self._grace = stop_grace_secs
        self._save_path = (os.path.join(self._logdir, checkpoint_basename)
                           if self._logdir else None)
        self._basename = checkpoint_basename
        if summary_writer is USE_DEFAULT:
            summary_writer = None
            if is_chief and self._logdir:
                from opsdk.v1.summary import FileWriter

                summary_writer = FileWriter(self._logdir)
        self._writer = summary_writer
        self._coord = Coordinator()
        self._services: list[threading.Thread] = []
        self._graph.finalize()  # as TensorFlow's: no node added from now on
        self._session: Any = None

    # -- TensorFlow's properties ------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief)
    coord = property(lambda self: self._coord)
    saver = property(lambda self: self._saver)
    global_step = property(lambda self: self._global_step)
    summary_op = property(lambda self: self._summary_op)
    summary_writer = property(lambda self: self._writer)
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    save_path = property(lambda self: self._save_path)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def request_stop(self, ex: Any = None) -> None:
        self._coord.request_stop(ex)

    def stop_on_exception(self) -> Any:
        return self._coord.stop_on_exception()

    def wait_for_stop(self) -> None:
        self._coord.wait_for_stop()

    # -- sessions ---------------------------------------------------------------------------

    def prepare_or_wait_for_session(self, master: Any = "", config: Any = None,
                                    wait_for_checkpoint: bool = False,
                                    max_wait_secs: float = 7200,
                                    start_standard_services: bool = True) -> Any:
        """The chief's session, restored from `logdir`'s latest checkpoint or initialised (its
        standard services started), or a worker's once the chief has initialised the
        variables. `master`: "" (this process) or a tf.train.Server's target."""
        init_fn = self._init_fn  # the Supervisor's takes the session alone
        scaffold = Scaffold(init_op=self._init_op, init_feed_dict=self._init_feed_dict,
                            init_fn=None if init_fn is None else (
                                lambda scaffold, sess: init_fn(sess)),
                            local_init_op=self._local_init_op,
                            summary_op=self._summary_op, saver=self._saver)
        scaffold._finalized = True  # the Supervisor's own choices, None included
        with self._graph.as_default():
            if self._is_chief:
                sess = ChiefSessionCreator(scaffold, master, config,
                                           checkpoint_dir=self._logdir).create_session()
            else:
                sess = WorkerSessionCreator(scaffold, master, config,
                                            max_wait_secs).create_session()
        self._session = sess
        if self._is_chief and start_standard_services:
            self.start_standard_services(sess)
        return sess

    @contextlib.contextmanager
    def managed_session(self, master: Any = "", config: Any = None,
                        start_standard_services: bool = True,
                        close_summary_writer: bool = True) -> Iterator[Any]:
        """A session for the `with` block; leaving it stops the services and closes it. An
        error inside is raised again after the stop (tf.errors.OutOfRangeError: none)."""
        sess = self.prepare_or_wait_for_session(master, config,
                                                start_standard_services=start_standard_services)
        try:
            yield sess
        except Exception as exc:  # noqa: BLE001 - raised again by stop() (coord.join)
            self.request_stop(exc)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                sess.close()

    def start_standard_services(self, sess: Any) -> list[threading.Thread]:
        """The chief's threads: a checkpoint every save_model_secs (when there is a saver or a
        cluster, and a logdir), the summaries and the global steps per second every
        save_summaries_secs (when there is a summary writer), and the graph's queue runners."""
        from opsdk.dist import ClusterSession

        if not self._is_chief:
            raise OpsdkError("Supervisor.start_standard_services: only the chief runs them")
        threads = []
        can_save = self._saver is not None or isinstance(sess, ClusterSession)
        if self._logdir and can_save and self._save_model_secs:
            threads.append(self.loop(self._save_model_secs, self._save, (sess,)))
        if self._writer is not None and self._save_summaries_secs:
            if self._summary_op is not None:
                threads.append(self.loop(self._save_summaries_secs, self._summarise, (sess,)))
            if self._global_step is not None:
                counter = _StepCounter(sess, self._global_step, self._writer)
                threads.append(self.loop(self._save_summaries_secs, counter))
        threads.extend(self.start_queue_runners(sess))
        return threads

    def _save(self, sess: Any) -> None:
        step = _step(sess.run(self._global_step)) if self._global_step is not None else None
        save_checkpoint(sess, self._logdir, step, self._saver, self._basename)

    def _summarise(self, sess: Any) -> None:
        if self._global_step is not None:
            summary, step = sess.run([self._summary_op, self._global_step])
        else:
            summary, step = sess.run(self._summary_op), None
        self.summary_computed(sess, summary, step)

    def summary_computed(self, sess: Any, summary: Any, global_step: Any = None) -> None:
        """Write a summary the program computed, at `global_step` (else the current one)."""
        if self._writer is None:
            raise OpsdkError("Supervisor.summary_computed: this Supervisor has no summary "
                             "writer (give logdir to the chief, or summary_writer)")
        if global_step is None and self._global_step is not None:
            global_step = sess.run(self._global_step)
        self._writer.add_summary(summary, None if global_step is None else _step(global_step))

    def loop(self, timer_interval_secs: Optional[float], target: Callable, args: Any = None,
             kwargs: Any = None) -> LooperThread:
        """A started LooperThread calling `target` every `timer_interval_secs`, stopped with the
        Supervisor."""
        thread = LooperThread.loop(self._coord, timer_interval_secs, target, args, kwargs)
        self._services.append(thread)
        return thread

    def start_queue_runners(self, sess: Any, queue_runners: Any = None) -> list:
        """The threads of the graph's queue runners (or of queue_runners), stopped with the
        Supervisor's coordinator; SyncReplicasOptimizer's chief queue runner has nothing to
        run and starts none."""
        from opsdk.v1.distributed import NothingToRun
        from opsdk.v1.queues import QUEUE_RUNNERS

        runners = self._graph.get_collection(QUEUE_RUNNERS) if queue_runners is None \
            else queue_runners
        threads: list = []
        for runner in runners:
            if isinstance(runner, NothingToRun):
                continue
            if not callable(getattr(runner, "create_threads", None)):
                raise OpsdkError(f"Supervisor.start_queue_runners: {runner!r} is not a queue "
                                 "runner (tf.train.QueueRunner)")
            threads.extend(runner.create_threads(sess, coord=self._coord, daemon=True,
                                                 start=True))
        return threads

    def stop(self, threads: Any = None, close_summary_writer: bool = True,
             ignore_live_threads: bool = False) -> None:
        """Stop the services (and `threads`) and wait for them, at most stop_grace_secs; raise
        the error a thread (or the managed block) stopped with."""
        self._coord.request_stop()
        try:
            self._coord.join(list(threads or ()) + self._services,
                             stop_grace_period_secs=self._grace,
                             ignore_live_threads=ignore_live_threads)
        finally:
            self._services = []
            if close_summary_writer and self._writer is not None:
                self._writer.close()


class _StepCounter:
    """The Supervisor's steps-per-second service: a `global_step/sec` summary each call."""

    def __init__(self, sess: Any, global_step: Any, writer: Any):
        self._sess, self._step, self._writer = sess, global_step, writer
        self._last: Optional[tuple[float, int]] = None

    def __call__(self) -> None:
        now, step = time.time(), _step(self._sess.run(self._step))
        if self._last is not None and now > self._last[0]:
            rate = (step - self._last[1]) / (now - self._last[0])
            write_steps_per_second(self._writer, rate, step)
        self._last = (now, step)
