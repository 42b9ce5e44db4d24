"""The error of a task that is gone: what a supervised loop recovers from."""

from __future__ import annotations

import types
from typing import Any

from opsdk.registry.errors import OpsdkError

from opsdk.dist import engine


class TaskUnavailable(OpsdkError):
    """A task of the cluster died, restarted or did not answer, so a step, checkpoint or
    restore did not happen (TensorFlow's UnavailableError and AbortedError). What the task held
    may be gone: reconnecting and restoring the latest checkpoint recovers, as
    `opsdk.dist.supervisor.train_supervised` and `opsdk.v1`'s `MonitoredTrainingSession` do. A
    node's own error (a bad feed, a failed kernel) is an OpsdkError of another kind, which no
    restore would mend."""


def is_gone(exc: BaseException) -> bool:
    """Whether `exc` (from Ray) says a task is gone: its actor died or is restarting, a task
    refused because it restarted (TaskUnavailable), or Ray tore a compiled graph down (it does
    when one of the graph's tasks dies; a graph this client tears down stops its step by its
    token first)."""
    errors = engine.ray_module().exceptions
    if isinstance(exc, (errors.RayActorError, TaskUnavailable)):
        return True
    if (isinstance(exc, errors.RayChannelError)
            and not isinstance(exc, errors.RayChannelTimeoutError)):
        return True
    return isinstance(getattr(exc, "cause", None), TaskUnavailable)


def failure(message: str, exc: Any) -> OpsdkError:
    """The error to raise for `exc` (from Ray), saying `message`: a TaskUnavailable where a
    task is gone, else the class of the task's own error (`same_kind`)."""
    if is_gone(exc):
        return TaskUnavailable(message)
    return same_kind(getattr(exc, "cause", None), message)


def same_kind(exc: Any, message: str) -> OpsdkError:
    """An error of `exc`'s class saying `message`, where that class is an OpsdkError made from
    a message alone (an op's bad input, an uninitialised variable, an unfed placeholder, ...),
    else an OpsdkError: a node's error keeps its kind across tasks (opsdk.v1 raises it as its
    tf.errors class)."""
    kind = type(exc)
    if not isinstance(exc, OpsdkError) or any(
            isinstance(c.__dict__.get("__init__"), types.FunctionType) for c in kind.__mro__):
        return OpsdkError(message)
    return kind(message)
