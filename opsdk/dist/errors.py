"""The error of a task that is gone: what a supervised loop recovers from."""

from __future__ import annotations

from opsdk.registry.errors import OpsdkError


class TaskUnavailable(OpsdkError):
    """A task of the cluster died, restarted or did not answer, so a step, checkpoint or
    restore did not happen (TensorFlow's UnavailableError and AbortedError). What the task held
    may be gone: reconnecting and restoring the latest checkpoint recovers, as
    `opsdk.dist.supervisor.train_supervised` and `opsdk.v1`'s `MonitoredTrainingSession` do. A
    node's own error (a bad feed, a failed kernel) is an OpsdkError of another kind, which no
    restore would mend."""
