"""A supervised training loop: a task that dies is restarted, the latest checkpoint restored,
and training goes on from there.

Ray restarts a dead task actor (`max_restarts`); the master notices its new incarnation and
registers its partitions again. What the task held is gone, so the loop restores every task from
the latest checkpoint (written every `every` steps, checkpoint.py): updates after that
checkpoint are redone, none before it is lost.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from opsdk.dist import checkpoint
from opsdk.dist.errors import TaskUnavailable


@dataclass
class Recovery:
    """One failure the loop survived: the error, when it came, the step restored to and when
    the first step after it succeeded (time.monotonic() values)."""

    error: str
    failed_at: float
    restored_step: int
    resumed_at: Optional[float] = None


def train_supervised(sess: Any, step: Callable[[Any, int], Any], steps: int,
                     checkpoint_dir: str | os.PathLike, every: int, init: Any,
                     max_failures: int = 3) -> list[Recovery]:
    """Run `step(sess, i)` for i up to `steps`, checkpointing every `every` steps; returns the
    failures it recovered from (a step's or a checkpoint's TaskUnavailable: it met a task that
    died or restarted). Any other error, a closed session or Ctrl-C stops it; more than
    `max_failures` failures raise the last one."""
    index = checkpoint.latest(checkpoint_dir)
    if index is not None:
        i = checkpoint.restore(sess, index)
    else:
        sess.run(init)
        i = 0
        checkpoint.save(sess, checkpoint_dir, 0)
    recoveries: list[Recovery] = []
    while i < steps:
        try:
            step(sess, i)
            # A task that died between steps shows here first (a client's own task whose
            # steady steps run in the client, opsdk/dist/inprocess.py, is met by nothing else):
            # a failed checkpoint is a failure like a step's.
            if (i + 1) % every == 0 or i + 1 == steps:
                checkpoint.save(sess, checkpoint_dir, i + 1)
        except TaskUnavailable as exc:
            if len(recoveries) >= max_failures:
                raise
            failed = time.monotonic()
            sess.reconnect()
            i = checkpoint.restore(sess, checkpoint.latest(checkpoint_dir))
            recoveries.append(Recovery(str(exc), failed, i))
            continue
        i += 1
        if recoveries and recoveries[-1].resumed_at is None:
            recoveries[-1].resumed_at = time.monotonic()
    return recoveries
