"""The master over Ray: partitions by task, steps across tasks, errors naming the task."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

from opsdk.dist.master import ClusterSession
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, constant, placeholder

CLUSTER = {"ps": 1, "worker": 2}


def _graph():
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [3], name="x")
        with g.device("/job:ps/task:0"):
            w = Variable(np.full(3, 2.0, np.float32), name="w")
        with g.device("/job:worker/task:1"):
            y = x * w.value()
        z = y + 1.0  # the session's own task: /job:worker/task:0
        step = w.assign_add(np.ones(3, np.float32))
    return g, x, w, z, step


def test_a_step_spans_three_tasks(ray_engine):
    g, x, w, z, step = _graph()
    with ClusterSession(g, CLUSTER, cluster_name="master1") as sess:
        sess.run(global_variables_initializer(g))
        out = sess.run({"z": z}, {x: np.arange(3, dtype=np.float32)})
        np.testing.assert_allclose(out["z"], [1.0, 3.0, 5.0])
        sess.run(step)
        np.testing.assert_allclose(sess.run(z, {x: np.ones(3, np.float32)}), [4.0] * 3)
        stats = sess.task_stats()
    # ps sent w to worker 1, which sent y to worker 0: bytes went over Ray
    assert stats["/job:ps/replica:0/task:0"]["bytes_sent"] >= 12
    assert stats["/job:worker/replica:0/task:1"]["bytes_sent"] >= 12


def test_partitions_register_once_per_signature(ray_engine):
    g, x, w, z, step = _graph()
    with ClusterSession(g, CLUSTER, cluster_name="master2") as sess:
        sess.run(global_variables_initializer(g))
        before = sess.task_stats()["/job:ps/replica:0/task:0"]["partitions"]
        for _ in range(3):
            sess.run(z, {x: np.ones(3, np.float32)})
        after = sess.task_stats()["/job:ps/replica:0/task:0"]["partitions"]
    assert after == before + 1


def test_a_node_error_aborts_the_step_and_names_task_and_node(ray_engine, capfd):
    g, x, w, z, step = _graph()
    with ClusterSession(g, CLUSTER, cluster_name="master3", step_timeout=60) as sess:
        # w was never initialised on the ps: its read fails there; worker 1 waits in _recv
        # and must be aborted rather than wait for the timeout.
        with pytest.raises(OpsdkError, match=r"task /job:ps/replica:0/task:0.*'w'.*not initialised"):
            sess.run(z, {x: np.ones(3, np.float32)})
        gc.collect()  # Ray reports a failed result nobody fetched when its reference goes
        time.sleep(0.5)
    # The other tasks' failed results were fetched: no "Unhandled error" tracebacks beside the
    # one error raised.
    assert "Unhandled error" not in capfd.readouterr().err


def test_a_device_the_cluster_lacks_is_refused_before_anything_runs(ray_engine):
    g = Graph()
    with g.as_default():
        with g.device("/job:worker/task:5"):
            y = placeholder("float32", [2], name="x") * 2.0
    with ClusterSession(g, CLUSTER, cluster_name="master4") as sess:
        with pytest.raises(OpsdkError, match="node '.*': device '/job:worker/task:5' names task 5"):
            sess.run(y, {"x:0": np.ones(2, np.float32)})


def test_close_leaves_the_tasks_and_end_tasks_ends_them_for_every_client(ray_engine):
    import os

    import ray

    ps, worker = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"
    cluster = {"ps": 1, "worker": 1}
    first = ClusterSession(None, cluster, cluster_name="end-tasks")
    first.reconnect()  # starts and introduces the tasks
    pids = {t: first.engine_info(t)["pid"] for t in (ps, worker)}
    other = ClusterSession(None, cluster, cluster_name="end-tasks")
    other.reconnect()
    first.close()
    assert {t: other.engine_info(t)["pid"] for t in (ps, worker)} == pids  # still there
    other.end_tasks()
    with pytest.raises(OpsdkError, match=r"ended its tasks \(end_tasks\); create a new session"):
        other.actor(ps)
    for task in (ps, worker):
        with pytest.raises(ValueError):
            ray.get_actor(f"opsdk:end-tasks:{task}", namespace="opsdk")
    deadline = time.monotonic() + 30
    for pid in pids.values():
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, f"task process {pid} still runs"
            time.sleep(0.1)
    # a new session of the name starts new tasks
    with ClusterSession(None, cluster, cluster_name="end-tasks") as again:
        again.reconnect()
        assert again.engine_info(ps)["pid"] not in pids.values()


def test_the_tasks_outlive_the_session_that_started_them(ray_engine):
    # Ray keeps an actor alive while its creator's handles last; a handle found by name (the
    # second session's) does not count, and the second session's introduction replaced the
    # tasks' handles of one another with those: dropping the first session ended the tasks.
    ps = "/job:ps/replica:0/task:0"
    cluster = {"ps": 1, "worker": 1}
    g = Graph()
    with g.as_default():
        with g.device(ps):
            w = constant(np.float32(2.0)) * 3.0
    first = ClusterSession(g, cluster, cluster_name="outlive")
    assert first.run(w) == 6.0
    pid = first.engine_info(ps)["pid"]
    other = ClusterSession(g, cluster, cluster_name="outlive")
    other.reconnect()
    first.close()
    del first
    gc.collect()
    time.sleep(1.0)
    try:
        assert other.run(w) == 6.0
        assert other.engine_info(ps)["pid"] == pid
    finally:
        other.end_tasks()


def test_end_tasks_after_ray_was_shut_down_starts_no_ray(monkeypatch):
    """Ray's `get_actor` starts a new local instance when none runs; end_tasks must not."""
    from opsdk.dist import engine

    class NoRay:  # Ray as it is after engine.shutdown()
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def get_actor(*args, **kwargs):
            raise AssertionError("end_tasks looked an actor up with Ray shut down")

    monkeypatch.setattr(engine, "connect", lambda address=None: None)
    monkeypatch.setattr(engine, "ray_module", lambda: NoRay)
    sess = ClusterSession(None, {"ps": 1, "worker": 1}, cluster_name="gone")
    sess.end_tasks()
    with pytest.raises(OpsdkError, match="ended its tasks"):
        sess.actor("/job:ps/replica:0/task:0")
