"""Task actors over Ray: deliveries between tasks, aborts, restarts (no graph involved)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from opsdk.dist.task import StepAborted, TaskRendezvous, start_task
from opsdk.runtime.exec.executor import CancelledError, RunToken

A, B = "/job:worker/replica:0/task:0", "/job:ps/replica:0/task:0"


def _key(step, name="x:0", source=A, dest=B, incarnation=0):
    return (step, name, f"{source}/device:CPU:0", f"{dest}/device:CPU:0", incarnation)


def test_local_values_meet_in_process():
    r = TaskRendezvous(A)
    key = _key(1, dest=A)
    r.send(key, np.ones(3))
    np.testing.assert_array_equal(r.recv(key, RunToken(5)), np.ones(3))


def test_send_to_an_unknown_task_names_it():
    r = TaskRendezvous(A)
    with pytest.raises(Exception, match="no route to /job:ps/replica:0/task:0"):
        r.send(_key(1), np.ones(3))


def test_recv_times_out_and_abort_wakes_it():
    r = TaskRendezvous(B)
    start = time.monotonic()
    with pytest.raises(CancelledError, match="timeout"):
        r.recv(_key(1), RunToken(0.2))
    assert time.monotonic() - start < 2
    r.abort(2, StepAborted("task /job:worker/replica:0/task:0 failed"))
    with pytest.raises(StepAborted, match="task:0 failed"):
        r.recv(_key(2), RunToken(30))


def test_late_delivery_after_the_step_ended_is_dropped():
    r = TaskRendezvous(B)
    r.end_step(3)
    r.deliver(_key(3), np.ones(2))
    assert r.local.pending() == 0


def test_delivery_between_actors_counts_bytes(ray_engine):
    import ray

    b = start_task(B)
    sender = TaskRendezvous(A)  # task A's rendezvous, as its _send steps use it
    sender.peers = {B: b}
    value = np.arange(1000, dtype=np.float32)
    sender.send(_key(7), value)
    assert (sender.bytes_sent, sender.values_sent) == (4000, 1)
    deadline = time.monotonic() + 30
    while ray.get(b.stats.remote())["pending"] != 1:
        assert time.monotonic() < deadline, "the value never arrived"
        time.sleep(0.05)
    ray.get(b.abort.remote(7, "stop"))
    assert ray.get(b.stats.remote())["pending"] == 0
    ray.get(b.end_step.remote(7))


def test_restarted_task_has_a_new_incarnation(ray_engine):
    import ray

    task = start_task(B, max_restarts=1)
    first = ray.get(task.info.remote())
    os.kill(first["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        try:
            second = ray.get(task.info.remote(), timeout=30)
            break
        except ray.exceptions.RayActorError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert second["pid"] != first["pid"]
    assert second["incarnation"] != first["incarnation"]


class _Recorder:
    """A peer actor's `deliver.remote`, recording what would cross to it."""

    def __init__(self):
        self.sent = []
        self.deliver = self

    def remote(self, key, value):
        self.sent.append((key, value))


def test_a_small_value_crosses_to_another_task_packed_and_arrives_an_array():
    from opsdk.dist import wire

    sender, receiver, peer = TaskRendezvous(A), TaskRendezvous(B), _Recorder()
    sender.peers = {B: peer}
    small, large = np.arange(3, dtype=np.float32), np.ones(wire.SMALL_BYTES, np.float32)
    sender.send(_key(8), small)
    sender.send(_key(8, name="y:0"), large)
    (k1, v1), (k2, v2) = peer.sent
    assert not isinstance(v1, np.ndarray)  # plain values, not an array for Ray to pickle
    assert v2 is large
    for key, value in peer.sent:
        receiver.deliver(key, value)
    np.testing.assert_array_equal(receiver.recv(k1, RunToken(5)), small)
    assert receiver.recv(k2, RunToken(5)) is large
    assert sender.bytes_sent == small.nbytes + large.nbytes
