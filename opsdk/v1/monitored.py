"""TF1's monitored sessions: `tf.train.MonitoredTrainingSession`, `MonitoredSession`,
`SingularMonitoredSession`, `Scaffold`, the chief and worker session creators and
`Coordinator`, in this process (`master=""`) and on a cluster (`master=server.target`,
opsdk/v1/distributed.py; docs/distributed.md). The hooks are in opsdk/v1/hooks.py.

A monitored session calls its hooks' `begin()`, makes the session (the chief restores the
latest checkpoint or initialises the variables; a worker of a cluster waits until the chief
has), calls `after_create_session`, then wraps each `run` in the hooks' `before_run` and
`after_run`. On a cluster it recovers from a task that dies, as TensorFlow's does (see
`MonitoredSession`). Leaving its `with` block on `tf.errors.OutOfRangeError` or
`StopIteration` ends it quietly; `close()` calls the hooks' `end` when no error is under way.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
import threading
import time
from typing import Any, Callable, Iterator, Optional

import opsdk
from opsdk.registry.errors import OpsdkError

from opsdk.dist import ClusterSession, checkpoint
from opsdk.dist.errors import TaskUnavailable
from opsdk.v1 import errors, run_options, scopes
from opsdk.v1 import session as v1_session
from opsdk.v1.distributed import Target, _ClusterSession
from opsdk.v1.hooks import (CheckpointSaverHook, SessionRunArgs, SessionRunContext,
                            SessionRunHook, SessionRunValues, StepCounterHook, StopAtStepHook,
                            SummarySaverHook)

log = logging.getLogger("opsdk.v1")

__all__ = ["Coordinator", "Scaffold", "SessionCreator", "ChiefSessionCreator",
           "WorkerSessionCreator", "MonitoredSession", "SingularMonitoredSession",
           "MonitoredTrainingSession", "StopAtStepHook"]


class SessionMisuseError(OpsdkError, RuntimeError):
    """A monitored session run after it closed or after a stop was requested (a RuntimeError,
    as TensorFlow raises there)."""


class Coordinator:
    """`tf.train.Coordinator()`: threads of a program stop together. Any thread may
    `request_stop(ex)`; the first exception given is raised again by `join` and
    `raise_requested_exception`; `stop_on_exception()` is a `with` block that requests a stop
    on an error."""

    def __init__(self, clean_stop_exception_types: Any = None):
        self._clean = tuple(clean_stop_exception_types
                            if clean_stop_exception_types is not None
                            else (errors.OutOfRangeError,))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._exc_info: Optional[tuple] = None
        self._threads: set[threading.Thread] = set()
        self._joined = False

    def request_stop(self, ex: Any = None) -> None:
        with self._lock:
            if ex is not None and self._exc_info is None:
                if isinstance(ex, tuple):
                    info = ex
                else:
                    info = (type(ex), ex, ex.__traceback__)
                if not issubclass(info[0], self._clean):
                    self._exc_info = info
            self._stop.set()

    def clear_stop(self) -> None:
        with self._lock:
            self._joined = False
            self._exc_info = None
            self._stop.clear()

    def should_stop(self) -> bool:
        return self._stop.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        try:
            yield
        except Exception:  # noqa: BLE001 - recorded, raised again by join()
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: Optional[float] = None) -> bool:
        return self._stop.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads.add(thread)

    def join(self, threads: Any = None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Wait until a stop is requested and the threads (given and registered) end, at most
        `stop_grace_period_secs` after the stop; raise the exception given to request_stop, or
        an error naming threads still alive (unless ignore_live_threads)."""
        with self._lock:
            threads = set(threads or ()) | self._threads
        while not self._stop.is_set() and any(t.is_alive() for t in threads):
            self._stop.wait(1.0)
        deadline = time.monotonic() + stop_grace_period_secs
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = sorted(t.name for t in threads if t.is_alive())
        with self._lock:
            self._joined = True
            self._threads = set()
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])
        if alive and not ignore_live_threads:
            raise OpsdkError(f"Coordinator.join: threads still alive {stop_grace_period_secs} s "
                             f"after the stop was requested: {', '.join(alive)}")

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        with self._lock:
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])


def get_or_default(key: str, make: Callable[[], Any]) -> Any:
    """The first item of the default graph's collection `key`, else `make()`, kept there (when
    not None): a second monitored session or Supervisor of a graph finds what the first made,
    the graph finalized since (TensorFlow's `Scaffold.get_or_default`)."""
    found = scopes.get_collection(key)
    if found:
        return found[0]
    made = make()
    if made is not None:
        opsdk.get_default_graph().add_to_collection(key, made)
    return made


def default_saver() -> Any:
    """The graph's Saver (its SAVERS collection), else a new `tf.train.Saver()` of every global
    variable, kept in that collection."""
    from opsdk.v1.train import Saver

    return get_or_default(scopes.GraphKeys.SAVERS, Saver)


def default_init_ops() -> tuple[Any, Any, Any]:
    """The graph's (initializer of the global variables, of the local ones or None, merged
    summaries or None), each kept in its collection (`get_or_default`)."""
    from opsdk.v1 import summary

    keys = scopes.GraphKeys
    return (get_or_default(keys.INIT_OP, scopes.global_variables_initializer),
            get_or_default(keys.LOCAL_INIT_OP, lambda: scopes.local_variables_initializer()
                           if scopes.local_variables() else None),
            get_or_default(keys.SUMMARY_OP, summary.merge_all))


class Scaffold:
    """`tf.train.Scaffold(init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
    ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None)`: what a
    monitored session initialises, restores and summarises with. `finalize()` fills what is
    not given: the global variables' initializer, the local ones' (when there are any), all
    summaries of the graph, and (in one process) the graph's Saver, each kept in (or found in)
    its graph collection (`get_or_default`); then it finalizes the
    default graph, as TensorFlow's does (a node added after that is an error). `ready_op` and
    `ready_for_local_init_op` are accepted and not used: a worker of a cluster waits until every
    global variable has a value."""

    def __init__(self, init_op: Any = None, init_feed_dict: Any = None, init_fn: Any = None,
                 ready_op: Any = None, ready_for_local_init_op: Any = None,
                 local_init_op: Any = None, summary_op: Any = None, saver: Any = None,
                 copy_from_scaffold: Any = None):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise OpsdkError("Scaffold: copy_from_scaffold must be a Scaffold, got "
                                 f"{type(copy_from_scaffold).__name__}")
            given = dict(vars(copy_from_scaffold))
            for key, value in (("init_op", init_op), ("init_feed_dict", init_feed_dict),
                               ("init_fn", init_fn), ("local_init_op", local_init_op),
                               ("summary_op", summary_op), ("saver", saver)):
                if value is not None:
                    given[key] = value
            vars(self).update(given)
            return
        if init_fn is not None and not callable(init_fn):
            raise OpsdkError("Scaffold: init_fn must be callable as init_fn(scaffold, session)")
        self.init_op, self.init_feed_dict, self.init_fn = init_op, init_feed_dict, init_fn
        self.ready_op, self.ready_for_local_init_op = ready_op, ready_for_local_init_op
        self.local_init_op, self.summary_op, self.saver = local_init_op, summary_op, saver
        self._finalized = False

    def finalize(self, on_cluster: bool = False) -> "Scaffold":
        if self._finalized:
            return self
        init_op, local_init_op, summary_op = default_init_ops()
        if self.init_op is None:
            self.init_op = init_op
        if self.local_init_op is None:
            self.local_init_op = local_init_op
        if self.summary_op is None:
            self.summary_op = summary_op
        if self.saver is None and not on_cluster and scopes.global_variables():
            self.saver = default_saver()
        self._finalized = True
        opsdk.get_default_graph().finalize()  # as TensorFlow's: no node added from now on
        return self

    @staticmethod
    def default_local_init_op() -> Any:
        return scopes.local_variables_initializer()


def _check_master(master: Any, who: str) -> None:
    """Refuse a master other than "" / None (this process) or a Server's target."""
    if not isinstance(master, Target) and master not in ("", None):
        raise OpsdkError(f"{who}: master {master!r}: give '' (this process) or a "
                         "tf.train.Server's target, whose cluster the tasks of Ray run "
                         "(docs/distributed.md, TF1 programs)")


def _session(master: Any, config: Any, who: str) -> Any:
    """A session of this process (master "" or None) or of the cluster a Server's target
    names."""
    _check_master(master, who)
    graph = opsdk.get_default_graph()
    if isinstance(master, Target):
        return _ClusterSession.for_target(master, graph)
    return v1_session.Session(graph=graph, config=config)


class SessionCreator:
    """`tf.train.SessionCreator`: `create_session()` makes a ready session."""

    def create_session(self) -> Any:
        raise OpsdkError(f"{type(self).__name__}.create_session is not written")

    def prepare(self, sess: Any) -> None:
        """Make `sess` ready (again after a recovery); the creators below restore, initialise
        or wait for the chief."""

    def _prepared(self, sess: Any) -> Any:
        """`sess` made ready, or closed when that fails."""
        try:
            self.prepare(sess)
        except BaseException:
            sess.close()
            raise
        return sess


class ChiefSessionCreator(SessionCreator):
    """`tf.train.ChiefSessionCreator(scaffold=None, master='', config=None, checkpoint_dir=None,
    checkpoint_filename_with_path=None)`: restores the given checkpoint, or the latest of
    `checkpoint_dir`, else runs the scaffold's `init_op` (with `init_feed_dict`) and
    `init_fn(scaffold, session)`; then its `local_init_op`."""

    def __init__(self, scaffold: Any = None, master: Any = "", config: Any = None,
                 checkpoint_dir: Any = None, checkpoint_filename_with_path: Any = None):
        self._scaffold = scaffold or Scaffold()
        self._master, self._config = master, config
        self._dir, self._path = checkpoint_dir, checkpoint_filename_with_path

    def create_session(self) -> Any:
        return self._prepared(_session(self._master, self._config, "ChiefSessionCreator"))

    def prepare(self, sess: Any) -> None:
        """Restore or initialise the variables of `sess` (again after a recovery)."""
        scaffold = self._scaffold.finalize(on_cluster=isinstance(sess, ClusterSession))
        if not self._restore(sess, scaffold):
            if scaffold.init_op is not None:
                sess.run(scaffold.init_op, feed_dict=scaffold.init_feed_dict)
            if scaffold.init_fn is not None:
                scaffold.init_fn(scaffold, sess)
        if scaffold.local_init_op is not None:
            sess.run(scaffold.local_init_op)

    def _restore(self, sess: Any, scaffold: Scaffold) -> bool:
        if isinstance(sess, ClusterSession):
            if self._path is not None:
                checkpoint.restore(sess, self._path)
                return True
            index = checkpoint.latest(self._dir) if self._dir else None
            if index is None:
                return False
            checkpoint.restore(sess, index)
            return True
        path = self._path or (opsdk.latest_checkpoint(str(self._dir)) if self._dir else None)
        if path is None or scaffold.saver is None:
            return False
        scaffold.saver.restore(sess, path)
        log.info("Restored the variables from %s", path)
        return True


class WorkerSessionCreator(SessionCreator):
    """`tf.train.WorkerSessionCreator(scaffold=None, master='', config=None,
    max_wait_secs=1800)`: on a cluster, waits (at most max_wait_secs) until the chief has
    initialised or restored every global variable, then runs the scaffold's `local_init_op`.
    In one process there is no chief to wait for: it refuses."""

    def __init__(self, scaffold: Any = None, master: Any = "", config: Any = None,
                 max_wait_secs: float = 30 * 60):
        self._scaffold = scaffold or Scaffold()
        self._master, self._config, self._wait_s = master, config, max_wait_secs

    def create_session(self) -> Any:
        if not isinstance(self._master, Target):
            raise OpsdkError("WorkerSessionCreator (a MonitoredTrainingSession with "
                             "is_chief=False): a worker waits for a chief of its cluster, so "
                             "master must be a tf.train.Server's target; in one process use "
                             "is_chief=True")
        return self._prepared(_session(self._master, self._config, "WorkerSessionCreator"))

    def prepare(self, sess: Any) -> None:
        from opsdk.runtime.frontend.variables import global_variables

        scaffold = self._scaffold.finalize(on_cluster=True)
        names = {v.op.name for v in global_variables(sess.graph)}
        start = time.monotonic()
        said = start
        while not names <= set(sess.variable_values()):
            now = time.monotonic()
            if now - start > self._wait_s:
                missing = sorted(names - set(sess.variable_values()))
                raise OpsdkError(f"WorkerSessionCreator: the chief did not initialise the "
                                 f"variables within {self._wait_s} s (max_wait_secs); still "
                                 f"without a value: {', '.join(missing[:5])}")
            if now - said > 30:
                log.info("Waiting for the chief to initialise the variables (%.0f s)",
                         now - start)
                said = now
            time.sleep(0.2)
        sess.trust_tasks()  # as the chief put them there
        if scaffold.local_init_op is not None:
            sess.run(scaffold.local_init_op)


class StepContext:
    """What `run_step_fn` hands its step_fn: `session` (runs without hooks),
    `run_with_hooks(...)` (as MonitoredSession.run) and `request_stop()`."""

    def __init__(self, session: Any, run_with_hooks: Callable[..., Any]):
        self._session, self._run_with_hooks = session, run_with_hooks

    @property
    def session(self) -> Any:
        return self._session

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any:
        return self._run_with_hooks(*args, **kwargs)

    def request_stop(self) -> None:
        raise StopIteration("step_fn requested the stop")


class MonitoredSession:
    """`tf.train.MonitoredSession(session_creator=None, hooks=None,
    stop_grace_period_secs=120)`: a session made by `session_creator` (a ChiefSessionCreator of
    this process by default) whose runs its hooks watch (module docstring).

    On a cluster it recovers from a task that dies (`TaskUnavailable`, TensorFlow's
    `UnavailableError` and `AbortedError`) as TensorFlow's does: it logs a warning, reconnects
    to the tasks as Ray restarts them, makes the session ready again (the chief restores the
    latest checkpoint or initialises the variables, a worker waits for them), calls the hooks'
    `after_create_session` and runs the failed call again. `recoveries` lists the errors it
    recovered from; after MAX_RECOVERIES failures in a row it raises the last. Any other error
    is raised as it is (as its `tf.errors` class)."""

    MAX_RECOVERIES = 5
    StepContext = StepContext  # TF's name for what run_step_fn hands its step_fn
    _recover = True

    def __init__(self, session_creator: Any = None, hooks: Any = None,
                 stop_grace_period_secs: float = 120):
        self._hooks = list(hooks or ())
        for hook in self._hooks:
            if not isinstance(hook, SessionRunHook) and not all(
                    callable(getattr(hook, name, None))
                    for name in ("begin", "after_create_session", "before_run", "after_run",
                                 "end")):
                raise OpsdkError(f"{type(self).__name__}: hooks must be SessionRunHooks; "
                                 f"{hook!r} lacks their methods")
        self._creator = session_creator or ChiefSessionCreator()
        self._grace = stop_grace_period_secs
        self._coord = Coordinator()
        self._stop = False
        self._closed = False
        self._sess: Any = None
        self._failures = 0  # recoveries since the last call that succeeded
        self.recoveries: list[str] = []  # the error of each failure recovered from
        for hook in self._hooks:
            hook.begin()
        self._sess = self._creator.create_session()
        try:
            self._recovering(self._after_create)
        except BaseException:
            self._sess.close()
            raise

    def _after_create(self) -> None:
        from opsdk.v1.queues import start_queue_runners

        for hook in self._hooks:
            hook.after_create_session(self._sess, self._coord)
        if self._sess.graph.get_collection("queue_runners"):  # as TF's: the graph's input
            start_queue_runners(self._sess, self._coord)     # queues fill while it runs

    @property
    def graph(self) -> Any:
        return None if self._sess is None else self._sess.graph

    # -- running ---------------------------------------------------------------------------

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """`Session.run` with the hooks' fetches and feeds added; what the caller fetched."""
        return self._recovering(lambda: self._hooked_run(fetches, feed_dict, options,
                                                         run_metadata))

    def _hooked_run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        if self._closed:
            raise SessionMisuseError(f"{type(self).__name__}.run on a closed session")
        if self._stop:
            raise SessionMisuseError(f"{type(self).__name__}.run called after should_stop() "
                                     "became true (a hook or step_fn requested the stop)")
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        asked: dict[int, Any] = {}
        hook_feeds: dict[Any, Any] = {}
        for i, hook in enumerate(self._hooks):
            request = hook.before_run(context)
            if request is None:
                continue
            if request.options is not None:  # a hook's trace level or timeout joins the run's
                options = run_options.merge_options(options, request.options)
            if request.fetches is not None:
                asked[i] = request.fetches
            if request.feed_dict:
                _no_common_keys(hook_feeds, request.feed_dict, "a tensor is fed by two hooks")
                hook_feeds.update(request.feed_dict)
        feeds = feed_dict
        if hook_feeds:
            _no_common_keys(feed_dict or {}, hook_feeds, "a tensor is fed by a hook and the caller")
            feeds = {**hook_feeds, **(feed_dict or {})}
        order = list(asked)
        traced = {}  # options only where given: a custom creator's session may take none
        if options is not None:
            if run_metadata is None:
                run_metadata = run_options.RunMetadata()  # what the hooks' after_run read
            traced = {"options": options, "run_metadata": run_metadata}
        values = self._sess.run([fetches, *(asked[i] for i in order)], feed_dict=feeds, **traced)
        results = dict(zip(order, values[1:]))
        for i, hook in enumerate(self._hooks):
            hook.after_run(context, SessionRunValues(results.get(i), options, run_metadata))
        self._stop = self._stop or context.stop_requested
        return values[0]

    def run_step_fn(self, step_fn: Callable[[Any], Any]) -> Any:
        """`step_fn(step_context)`: the function runs what it likes with `step_context.session`
        (no hooks) and `step_context.run_with_hooks(...)`; `step_context.request_stop()` ends
        it and makes should_stop() true. Its value is returned (None after a stop)."""
        names = tuple(inspect.signature(step_fn).parameters)
        if names not in (("step_context",), ("self", "step_context")):
            raise OpsdkError(f"run_step_fn: step_fn must take one argument named step_context "
                             f"(or self and step_context), not {names}")

        def call() -> Any:
            try:
                return step_fn(StepContext(self._sess, lambda *a, **k: self._hooked_run(
                    *_run_arguments(*a, **k))))
            except StopIteration:
                self._stop = True
                return None

        return self._recovering(call)

    def should_stop(self) -> bool:
        """True once a hook or step_fn requested a stop, the coordinator was asked to stop, or
        the session is closed (raises what a thread gave the coordinator)."""
        if self._closed:
            return True
        self._coord.raise_requested_exception()
        return self._stop or self._coord.should_stop()

    # -- recovery --------------------------------------------------------------------------

    def _recovering(self, call: Callable[[], Any]) -> Any:
        """`call()`; on a cluster, after a TaskUnavailable: reconnect, make the session ready
        again, tell the hooks, and call again."""
        while True:
            try:
                result = call()
            except TaskUnavailable as exc:  # tf.errors.UnavailableError, from a run
                if not self._recover or not isinstance(self._sess, ClusterSession):
                    raise
                self._failures += 1
                if self._failures > self.MAX_RECOVERIES:
                    raise
                log.warning("%s: %s; recovering: waiting for the tasks, then making the "
                            "session ready again", type(self).__name__, exc)
                self.recoveries.append(str(exc))
                self._reconnect()
                continue
            self._failures = 0
            return result

    def _reconnect(self) -> None:
        """Reconnect (until the tasks answer, restarted ones included), restore, tell hooks."""
        while True:
            try:
                self._sess.reconnect()
                self._creator.prepare(self._sess)
                self._after_create()
                return
            except TaskUnavailable as exc:  # a task still restarting
                self._failures += 1
                if self._failures > self.MAX_RECOVERIES:
                    raise errors.as_tf_error(exc) from None
                time.sleep(1.0)

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        self._close(error=False)

    def _close(self, error: bool) -> None:
        if self._closed:
            return
        try:
            if not error:
                self._recovering(lambda: [hook.end(self._sess) for hook in self._hooks])
        finally:
            self._closed = True
            self._coord.request_stop()
            try:
                self._coord.join(stop_grace_period_secs=self._grace, ignore_live_threads=True)
            finally:
                self._sess.close()

    def __enter__(self) -> "MonitoredSession":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        quiet = exc_type is not None and issubclass(exc_type, (errors.OutOfRangeError,
                                                               StopIteration))
        self._close(error=exc_type is not None and not quiet)
        return quiet


def _run_arguments(fetches: Any, feed_dict: Any = None, options: Any = None,
                   run_metadata: Any = None) -> tuple:
    return fetches, feed_dict, options, run_metadata


def _no_common_keys(first: Any, second: Any, what: str) -> None:
    common = set(first) & set(second)
    if common:
        names = ", ".join(sorted(getattr(k, "name", str(k)) for k in common))
        raise OpsdkError(f"MonitoredSession.run: {what}: {names}")


class SingularMonitoredSession(MonitoredSession):
    """`tf.train.SingularMonitoredSession(hooks=None, scaffold=None, master='', config=None,
    checkpoint_dir=None, stop_grace_period_secs=120, checkpoint_filename_with_path=None)`: a
    chief's monitored session that does not recover; `raw_session()` is its session."""

    _recover = False

    def __init__(self, hooks: Any = None, scaffold: Any = None, master: Any = "",
                 config: Any = None, checkpoint_dir: Any = None,
                 stop_grace_period_secs: float = 120, checkpoint_filename_with_path: Any = None):
        creator = ChiefSessionCreator(scaffold=scaffold, master=master, config=config,
                                      checkpoint_dir=checkpoint_dir,
                                      checkpoint_filename_with_path=checkpoint_filename_with_path)
        super().__init__(creator, hooks, stop_grace_period_secs)

    def raw_session(self) -> Any:
        return self._sess


class _UseDefault:
    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT = _UseDefault()


def MonitoredTrainingSession(master: Any = "", is_chief: bool = True,  # noqa: N802 - TF's name
                             checkpoint_dir: Any = None, scaffold: Any = None, hooks: Any = None,
                             chief_only_hooks: Any = None, save_checkpoint_secs: Any = USE_DEFAULT,
                             save_summaries_steps: Any = USE_DEFAULT,
                             save_summaries_secs: Any = USE_DEFAULT, config: Any = None,
                             stop_grace_period_secs: float = 120,
                             log_step_count_steps: Optional[int] = 100,
                             max_wait_secs: float = 7200, save_checkpoint_steps: Any = USE_DEFAULT,
                             summary_dir: Any = None) -> MonitoredSession:
    """`tf.train.MonitoredTrainingSession(...)`, as TensorFlow's: a MonitoredSession. The chief
    (`is_chief`) restores the latest checkpoint of `checkpoint_dir` or initialises the
    variables, and gets `chief_only_hooks` and the default hooks: with a `checkpoint_dir`, a
    CheckpointSaverHook (every `save_checkpoint_secs`, 600 unless `save_checkpoint_steps` is
    given); with a summary folder (`summary_dir`, else `checkpoint_dir`), a StepCounterHook
    (every `log_step_count_steps`) and a SummarySaverHook (every `save_summaries_steps`, 100,
    or `save_summaries_secs`; it writes only when the graph has summaries). A worker of a
    cluster (`is_chief=False`) waits at most `max_wait_secs` for the chief and runs `hooks`
    only. `master` is "" (this process) or a tf.train.Server's target (a cluster)."""
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    if save_checkpoint_secs is not None and save_checkpoint_steps is not None:
        save_checkpoint_steps = None  # as TensorFlow's: the seconds win
    if save_summaries_secs is not None and save_summaries_steps is not None:
        save_summaries_steps = None
    _check_master(master, "MonitoredTrainingSession")
    scaffold = scaffold or Scaffold()
    if not is_chief:
        creator: SessionCreator = WorkerSessionCreator(scaffold, master, config, max_wait_secs)
        return MonitoredSession(creator, list(hooks or ()), stop_grace_period_secs)
    all_hooks = list(chief_only_hooks or ())
    summaries = summary_dir or checkpoint_dir
    if summaries:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(StepCounterHook(every_n_steps=log_step_count_steps,
                                             output_dir=summaries))
        if (save_summaries_steps or 0) > 0 or (save_summaries_secs or 0) > 0:
            all_hooks.append(SummarySaverHook(save_steps=save_summaries_steps,
                                              save_secs=save_summaries_secs,
                                              output_dir=summaries, scaffold=scaffold))
    if checkpoint_dir and ((save_checkpoint_secs or 0) > 0 or (save_checkpoint_steps or 0) > 0):
        all_hooks.append(CheckpointSaverHook(checkpoint_dir, save_secs=save_checkpoint_secs,
                                             save_steps=save_checkpoint_steps,
                                             scaffold=scaffold))
    all_hooks.extend(hooks or ())
    creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir)
    return MonitoredSession(creator, all_hooks, stop_grace_period_secs)
