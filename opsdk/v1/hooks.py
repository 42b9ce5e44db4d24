"""TF1's session-run hooks: `tf.train.SessionRunHook`, its arguments and the basic hooks, for
`MonitoredSession` and `MonitoredTrainingSession` (opsdk/v1/monitored.py; docs/tf1.md).

A hook sees a monitored session's life: `begin()` before the session exists (it may add ops to
the graph), `after_create_session(session, coord)` after the session was made and its variables
initialised or restored (again after each recovery), `before_run(run_context)` before each `run`
(returning a `SessionRunArgs` adds fetches and feeds to that very run), `after_run(run_context,
run_values)` with what it asked for, and `end(session)` when the session closes without an
error. `run_context.request_stop()` makes `should_stop()` true.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, NamedTuple, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError

log = logging.getLogger("opsdk.v1")


class SessionRunArgs(NamedTuple):
    """What a hook's `before_run` adds to a run: fetches (any structure `run` takes), feeds
    (none may be fed by the caller or another hook too) and a tf.RunOptions (merged with the
    run's and the other hooks': the highest trace level, the shortest timeout)."""

    fetches: Any
    feed_dict: Any = None
    options: Any = None


class SessionRunValues(NamedTuple):
    """What `after_run` gets: `results`, the values of the hook's fetches (None if it asked for
    none); `options` and `run_metadata` as given to `run`."""

    results: Any
    options: Any = None
    run_metadata: Any = None


class SessionRunContext:
    """One `run` call as hooks see it: the caller's `original_args`, the `session` (run other
    things with it, without hooks) and `request_stop()`."""

    def __init__(self, original_args: SessionRunArgs, session: Any):
        self.original_args = original_args
        self.session = session
        self._stop_requested = False

    def request_stop(self) -> None:
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested


class SessionRunHook:
    """The base of hooks: every method does nothing (see the module docstring)."""

    def begin(self) -> None:
        pass

    def after_create_session(self, session: Any, coord: Any) -> None:
        pass

    def before_run(self, run_context: SessionRunContext) -> Optional[SessionRunArgs]:
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        pass

    def end(self, session: Any) -> None:
        pass


class SecondOrStepTimer:
    """Fires every `every_secs` seconds or every `every_steps` steps (give one), and on the
    first step it is asked about."""

    def __init__(self, every_secs: Optional[float] = None, every_steps: Optional[int] = None):
        if (every_secs is None) == (every_steps is None):
            raise OpsdkError("SecondOrStepTimer: give exactly one of every_secs and every_steps "
                             f"(got every_secs={every_secs}, every_steps={every_steps})")
        for name, value in (("every_secs", every_secs), ("every_steps", every_steps)):
            if value is not None and not value > 0:
                raise OpsdkError(f"SecondOrStepTimer: {name} must be > 0, got {value}")
        self._secs, self._steps = every_secs, every_steps
        self.reset()

    def reset(self) -> None:
        self._last_time: Optional[float] = None
        self._last_step: Optional[int] = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_step is None:
            return True
        if step == self._last_step:
            return False
        if self._secs is not None:
            return time.time() >= self._last_time + self._secs
        return step >= self._last_step + self._steps

    def update_last_triggered_step(self, step: int) -> tuple[Optional[float], Optional[int]]:
        """Mark `step` as fired; the seconds and steps since the last firing (None at first)."""
        now = time.time()
        elapsed = (None, None) if self._last_time is None else (
            now - self._last_time, step - self._last_step)
        self._last_time, self._last_step = now, step
        return elapsed

    def last_triggered_step(self) -> Optional[int]:
        return self._last_step


def _global_step_tensor(who: str) -> Any:
    from opsdk.v1.train import get_global_step

    found = get_global_step()
    if found is None:
        raise OpsdkError(f"{who} needs a global step: create it with "
                         "tf.train.get_or_create_global_step() before the session")
    return found


def _step(value: Any) -> int:
    return int(np.asarray(value))


class StopAtStepHook(SessionRunHook):
    """`tf.train.StopAtStepHook(num_steps=None, last_step=None)`: requests a stop once the
    global step reaches `last_step` (or `num_steps` past its value when the session starts).

    It reads the global step in each run, as TensorFlow's does, and reads it again once that
    value says the last step may have been reached (the run's own increment may come after its
    read). On a cluster a worker's step may see a value older than that: the value after its
    previous step (pushed by the ps), the other workers' rounds or steps since not counted. So
    there it reads the global step again after every run from the point where the last step is
    as many steps away as the cluster has tasks: a worker that ran past the last step of
    synchronous training would wait for a round the others never join."""

    def __init__(self, num_steps: Optional[int] = None, last_step: Optional[int] = None):
        if (num_steps is None) == (last_step is None):
            raise OpsdkError("StopAtStepHook: give exactly one of num_steps and last_step")
        self.num_steps, self.last_step = num_steps, last_step
        self._last_step = last_step if last_step is not None else 0  # set when the session starts

    def begin(self) -> None:
        self._global_step = _global_step_tensor("StopAtStepHook")

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self.num_steps is not None:
            self._last_step = _step(session.run(self._global_step)) + self.num_steps
        # steps a value read in a run may lag by: none in one process, else up to a step or
        # round per task of the cluster (a generous bound; only the last ones read twice)
        self._slack = len(session.cluster.task_names()) if _on_cluster(session) else 0

    def before_run(self, run_context: SessionRunContext) -> Optional[SessionRunArgs]:
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if _step(run_values.results) + 1 + self._slack >= self._last_step:
            if _step(run_context.session.run(self._global_step)) >= self._last_step:
                run_context.request_stop()


def save_checkpoint(session: Any, folder: str, step: Optional[int], saver: Any,
                    basename: str = "model.ckpt") -> None:
    """A checkpoint of `session` at `step` in `folder`: with `saver` as
    `folder/basename-STEP` in one process, the cluster checkpoint of opsdk.dist on a cluster
    (each ps shard, the index last; docs/distributed.md)."""
    if _on_cluster(session):
        from opsdk.dist import checkpoint

        checkpoint.save(session, folder, 0 if step is None else step)
    else:
        saver.save(session, os.path.join(folder, basename), global_step=step)
    log.info("Saved a checkpoint of step %s in %s", step, folder)


def _on_cluster(session: Any) -> bool:
    from opsdk.dist import ClusterSession

    return isinstance(session, ClusterSession)


class CheckpointSaverListener:
    """Told around each save of a CheckpointSaverHook; `after_save` returning True stops."""

    def begin(self) -> None:
        pass

    def before_save(self, session: Any, global_step_value: int) -> None:
        pass

    def after_save(self, session: Any, global_step_value: int) -> Optional[bool]:
        return None

    def end(self, session: Any, global_step_value: int) -> None:
        pass


class CheckpointSaverHook(SessionRunHook):
    """`tf.train.CheckpointSaverHook(checkpoint_dir, save_secs=None, save_steps=None,
    saver=None, checkpoint_basename="model.ckpt", scaffold=None, listeners=None)`: saves when
    the session starts, every `save_secs` seconds or `save_steps` global steps, and at the end.

    In one process it saves with the scaffold's (or the given) `tf.train.Saver` to
    `checkpoint_dir/checkpoint_basename-STEP`. On a cluster it writes the cluster checkpoint of
    opsdk.dist (each ps shard, the index last; docs/distributed.md)."""

    def __init__(self, checkpoint_dir: Any, save_secs: Optional[float] = None,
                 save_steps: Optional[int] = None, saver: Any = None,
                 checkpoint_basename: str = "model.ckpt", scaffold: Any = None,
                 listeners: Any = None):
        if saver is not None and scaffold is not None:
            raise OpsdkError("CheckpointSaverHook: give a saver or a scaffold, not both")
        self._dir = os.fspath(checkpoint_dir)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._saver, self._scaffold = saver, scaffold
        self._basename = checkpoint_basename
        self._listeners = list(listeners or ())

    def begin(self) -> None:
        self._global_step = _global_step_tensor("CheckpointSaverHook")
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session: Any, coord: Any) -> None:
        step = _step(session.run(self._global_step))
        self._save(session, step)  # the state the session starts from
        self._timer.update_last_triggered_step(step)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._timer.should_trigger_for_step(_step(run_values.results) + 1):
            step = _step(run_context.session.run(self._global_step))
            if self._timer.should_trigger_for_step(step):
                self._timer.update_last_triggered_step(step)
                if self._save(run_context.session, step):
                    run_context.request_stop()

    def end(self, session: Any) -> None:
        step = _step(session.run(self._global_step))
        if step != self._timer.last_triggered_step():
            self._save(session, step)
        for listener in self._listeners:
            listener.end(session, step)

    def _save(self, session: Any, step: int) -> bool:
        """Save at `step`; True when a listener asks to stop."""
        for listener in self._listeners:
            listener.before_save(session, step)
        save_checkpoint(session, self._dir, step, None if _on_cluster(session)
                        else self._get_saver(), self._basename)
        return any([listener.after_save(session, step) for listener in self._listeners])

    def _get_saver(self) -> Any:
        if self._saver is None:
            self._saver = self._scaffold.saver if self._scaffold is not None else None
        if self._saver is None:
            from opsdk.v1.monitored import default_saver

            self._saver = default_saver()
        return self._saver


def _tensor_dict(tensors: Any, who: str) -> dict[str, Any]:
    """A hook's tensors as {tag: tensor}: a dict as given, else each tensor under its name."""
    import opsdk

    if isinstance(tensors, dict):
        return dict(tensors)
    if isinstance(tensors, (str, opsdk.Tensor)):
        tensors = [tensors]
    try:
        items = list(tensors)
    except TypeError:
        raise OpsdkError(f"{who}: tensors must be a dict of tag -> tensor or a list of tensors "
                         f"(or names), got {type(tensors).__name__}") from None
    return {t if isinstance(t, str) else t.name: t for t in items}


class LoggingTensorHook(SessionRunHook):
    """`tf.train.LoggingTensorHook(tensors, every_n_iter=None, every_n_secs=None,
    at_end=False, formatter=None)`: logs the tensors' values (at INFO, logger `opsdk.v1`) every
    N local steps or seconds, and/or at the end; `formatter(values_by_tag)` makes the line."""

    def __init__(self, tensors: Any, every_n_iter: Optional[int] = None,
                 every_n_secs: Optional[float] = None, at_end: bool = False,
                 formatter: Any = None):
        if not at_end and (every_n_iter is None) == (every_n_secs is None):
            raise OpsdkError("LoggingTensorHook: give exactly one of every_n_iter and "
                             "every_n_secs, or at_end=True")
        self._tensors = _tensor_dict(tensors, "LoggingTensorHook")
        self._timer = (None if every_n_iter is None and every_n_secs is None
                       else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter))
        self._at_end, self._formatter = at_end, formatter
        self._iter = 0

    def begin(self) -> None:
        self._iter = 0
        if self._timer is not None:
            self._timer.reset()

    def before_run(self, run_context: SessionRunContext) -> Optional[SessionRunArgs]:
        self._should_log = self._timer is not None and self._timer.should_trigger_for_step(self._iter)
        return SessionRunArgs(self._tensors) if self._should_log else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._should_log and self._timer is not None:
            elapsed, _ = self._timer.update_last_triggered_step(self._iter)
            self._log(run_values.results, elapsed)
        self._iter += 1

    def end(self, session: Any) -> None:
        if self._at_end:
            self._log(session.run(self._tensors), None)

    def _log(self, values: dict, elapsed: Optional[float]) -> None:
        if self._formatter is not None:
            log.info("%s", self._formatter(values))
            return
        line = ", ".join(f"{tag} = {values[tag]}" for tag in self._tensors)
        log.info("%s%s", line, f" ({elapsed:.3f} sec)" if elapsed is not None else "")


class NanLossDuringTrainingError(OpsdkError, RuntimeError):
    """The loss a NanTensorHook watches became NaN."""

    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """`tf.train.NanTensorHook(loss_tensor, fail_on_nan_loss=True)`: a NaN loss raises
    NanLossDuringTrainingError, or (fail_on_nan_loss=False) logs a warning and stops."""

    def __init__(self, loss_tensor: Any, fail_on_nan_loss: bool = True):
        self._loss, self._fail = loss_tensor, fail_on_nan_loss

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._loss)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if np.isnan(np.asarray(run_values.results)).any():
            if self._fail:
                raise NanLossDuringTrainingError()
            log.warning("Model diverged with loss = NaN.")
            run_context.request_stop()


class StepCounterHook(SessionRunHook):
    """`tf.train.StepCounterHook(every_n_steps=100, every_n_secs=None, output_dir=None,
    summary_writer=None)`: logs global steps per second and writes them as the summary
    `global_step/sec` when given a writer or an output folder."""

    def __init__(self, every_n_steps: Optional[int] = 100, every_n_secs: Optional[float] = None,
                 output_dir: Any = None, summary_writer: Any = None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise OpsdkError("StepCounterHook: give exactly one of every_n_steps and every_n_secs")
        self._timer = SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_steps)
        self._writer, self._dir = summary_writer, output_dir

    def begin(self) -> None:
        if self._writer is None and self._dir is not None:
            from opsdk.v1.summary import FileWriter

            self._writer = FileWriter(self._dir)
        self._global_step = _global_step_tensor("StepCounterHook")

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        step = _step(run_values.results)
        if self._timer.should_trigger_for_step(step):
            secs, steps = self._timer.update_last_triggered_step(step)
            if secs is not None and steps is not None and secs > 0:
                rate = steps / secs
                log.info("global_step/sec: %g", rate)
                if self._writer is not None:
                    write_steps_per_second(self._writer, rate, step)

    def end(self, session: Any) -> None:
        if self._writer is not None:
            self._writer.flush()


def write_steps_per_second(writer: Any, rate: float, step: int) -> None:
    """The `global_step/sec` summary, at `step` (StepCounterHook's, the Supervisor's)."""
    from opsdk.v1 import events

    writer.add_summary(events.summary([events.scalar_value("global_step/sec", rate)]), step)


class SummarySaverHook(SessionRunHook):
    """`tf.train.SummarySaverHook(save_steps=None, save_secs=None, output_dir=None,
    summary_writer=None, scaffold=None, summary_op=None)`: fetches the summary op (given, or the
    scaffold's: all summaries of the graph) every N global steps or seconds and writes it at its
    step. A graph without summaries writes nothing."""

    def __init__(self, save_steps: Optional[int] = None, save_secs: Optional[float] = None,
                 output_dir: Any = None, summary_writer: Any = None, scaffold: Any = None,
                 summary_op: Any = None):
        if (scaffold is None) == (summary_op is None):
            raise OpsdkError("SummarySaverHook: give exactly one of scaffold and summary_op")
        if output_dir is None and summary_writer is None:
            raise OpsdkError("SummarySaverHook: give output_dir or summary_writer")
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._writer, self._dir = summary_writer, output_dir
        self._scaffold, self._summary_op = scaffold, summary_op

    def begin(self) -> None:
        if self._writer is None:
            from opsdk.v1.summary import FileWriter

            self._writer = FileWriter(self._dir)
        self._global_step = _global_step_tensor("SummarySaverHook")
        self._request = False

    def _op(self) -> Any:
        return self._summary_op if self._summary_op is not None else self._scaffold.summary_op

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        self._request = self._op() is not None and self._timer.should_trigger_for_step(
            self._next_step)
        fetches = {"global_step": self._global_step}
        if self._request:
            fetches["summary"] = self._op()
        return SessionRunArgs(fetches)

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._next_step = _step(session.run(self._global_step))

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        step = _step(run_values.results["global_step"])
        if self._request:
            self._timer.update_last_triggered_step(step)
            summaries = run_values.results["summary"]
            for summary in summaries if isinstance(summaries, list) else [summaries]:
                self._writer.add_summary(summary, step)
        self._next_step = step + 1

    def end(self, session: Any) -> None:
        self._writer.flush()


class ProfilerHook(SessionRunHook):
    """`tf.train.ProfilerHook(save_steps=None, save_secs=None, output_dir="",
    show_dataflow=True, show_memory=False)`: every N global steps or seconds (give one), the
    run is traced (RunOptions FULL_TRACE) and its Chrome trace written to
    `output_dir/timeline-<global step>.json`; the run metadata goes to the folder's event file
    as `step_<global step>`. On a cluster every task times its own nodes."""

    def __init__(self, save_steps: Optional[int] = None, save_secs: Optional[float] = None,
                 output_dir: Any = "", show_dataflow: bool = True, show_memory: bool = False):
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._dir = os.fspath(output_dir)
        self._show_dataflow, self._show_memory = show_dataflow, show_memory
        self._writer: Any = None

    def begin(self) -> None:
        from opsdk.v1.summary import FileWriter

        self._global_step = _global_step_tensor("ProfilerHook")
        self._next_step: Optional[int] = None
        if self._writer is None:
            self._writer = FileWriter(self._dir or ".")

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        from opsdk.v1.run_options import RunOptions

        # the first run is not traced: it sets the timer off (as TF's hook does)
        self._request = self._next_step is not None and self._timer.should_trigger_for_step(
            self._next_step)
        options = RunOptions(trace_level=RunOptions.FULL_TRACE) if self._request else None
        return SessionRunArgs(self._global_step, options=options)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        from opsdk.v1 import timeline

        step = _step(run_values.results) + 1  # the value read in the run may predate its update
        if self._next_step is None:
            self._timer.update_last_triggered_step(step - 1)
        if self._request and run_values.run_metadata is not None:
            step = _step(run_context.session.run(self._global_step))
            self._timer.update_last_triggered_step(step)
            metadata = run_values.run_metadata
            if metadata.step_stats.dev_stats:  # empty from a session that does not trace
                trace = timeline.Timeline(metadata.step_stats).generate_chrome_trace_format(
                    show_dataflow=self._show_dataflow, show_memory=self._show_memory)
                path = os.path.join(self._dir, f"timeline-{step}.json")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(trace)
                self._writer.add_run_metadata(metadata, f"step_{step}", step)
        self._next_step = step + 1

    def end(self, session: Any) -> None:
        if self._writer is not None:
            self._writer.flush()


class FeedFnHook(SessionRunHook):
    """`tf.train.FeedFnHook(feed_fn)`: each run is also fed `feed_fn()`."""

    def __init__(self, feed_fn: Any):
        self.feed_fn = feed_fn

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class FinalOpsHook(SessionRunHook):
    """`tf.train.FinalOpsHook(final_ops, final_ops_feed_dict=None)`: runs `final_ops` when
    the session ends; their values are `final_ops_values`."""

    def __init__(self, final_ops: Any, final_ops_feed_dict: Any = None):
        self._ops, self._feeds = final_ops, final_ops_feed_dict
        self._values: Any = None

    @property
    def final_ops_values(self) -> Any:
        return self._values

    def end(self, session: Any) -> None:
        if self._ops is not None:
            self._values = session.run(self._ops, feed_dict=self._feeds)


class GlobalStepWaiterHook(SessionRunHook):
    """`tf.train.GlobalStepWaiterHook(wait_until_step)`: the first run waits until the global
    step reaches `wait_until_step` (a worker starting after the chief's first steps)."""

    def __init__(self, wait_until_step: int):
        self._wait_until = int(wait_until_step)
        self._waited = False

    def begin(self) -> None:
        self._waited = self._wait_until <= 0
        self._global_step = _global_step_tensor("GlobalStepWaiterHook")

    def before_run(self, run_context: SessionRunContext) -> None:
        last = None
        while not self._waited:
            step = _step(run_context.session.run(self._global_step))
            if step >= self._wait_until:
                self._waited = True
            else:
                if step != last:
                    log.info("Waiting for the global step to reach %d (now %d)",
                             self._wait_until, step)
                    last = step
                time.sleep(0.5)
        return None
