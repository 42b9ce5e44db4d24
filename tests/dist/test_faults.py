"""Faults: a killed ps or worker task, checkpoints, close() and deadlines of a distributed step."""

from __future__ import annotations

import _thread
import json
import os
import signal
import threading
import time

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.dist import ClusterSession, ReplicatedOptimizer, checkpoint, replica_device_setter
from opsdk.dist.errors import TaskUnavailable
from opsdk.dist.supervisor import train_supervised
from opsdk.registry.errors import OpsdkError

CLUSTER = {"ps": 1, "worker": 1}
PS, WORKER = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"


def _regression(replicas=0):
    """Linear regression towards fixed weights: the loss is a smooth function of the step."""
    g = tf.Graph()
    with g.as_default():
        with replica_device_setter(cluster=CLUSTER, worker_device="/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [32, 8])
            w = tf.Variable(np.zeros((8, 1), np.float32), name="w")
            target = np.arange(8, dtype=np.float32).reshape(8, 1) / 8
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - tf.matmul(x, tf.constant(target))))
        train = ReplicatedOptimizer(tf.train.GradientDescentOptimizer(0.1), replicas).minimize(
            loss, var_list=[w])
        init = tf.global_variables_initializer()
    return g, x, w, loss, train, init


def _data(i):
    return np.random.default_rng(i).standard_normal((32, 8)).astype(np.float32)


def _train(name, folder, kill=None, steps=40, **options):
    g, x, w, loss, train, init = _regression()
    sess = ClusterSession(g, CLUSTER, cluster_name=name, step_timeout=60, **options)
    killed_at = []

    def step(sess, i):
        if kill is not None and i == 25 and not killed_at:
            pid = sess.engine_info(kill)["pid"]
            killed_at.append(time.monotonic())
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)  # the step below meets the dead task
        sess.run(train, {x: _data(i)})

    recoveries = train_supervised(sess, step, steps, folder, every=10, init=init)
    if kill is not None:  # a worker whose death no step met may still be restarting (a loaded
        _wait_until_it_answers(sess, kill)  # machine): a step then fails, as it should
    final = float(sess.run(loss, {x: _data(999)}))
    sess.close()
    return recoveries, killed_at, final


@pytest.mark.parametrize("victim,in_process", [(PS, True), (WORKER, True), (WORKER, False)])
def test_a_killed_task_is_reported_restarted_restored_and_training_goes_on(ray_engine, tmp_path,
                                                                          victim, in_process):
    # in_process: the worker's steady steps run in the client (opsdk/dist/inprocess.py), so
    # nothing meets its actor's death: the next checkpoint asks every task for its shard, and
    # the restarted worker, which held no variables, has lost none (nothing to recover); else
    # the next step, which runs on it, meets it
    name = "kill-" + victim.split("/")[1].split(":")[1] + f"-{in_process}"
    _, _, undisturbed = _train(name + "-ref", tmp_path / "ref", in_process_worker=in_process)
    recoveries, killed_at, final = _train(name, tmp_path / "run", kill=victim,
                                          in_process_worker=in_process)
    if victim == WORKER and in_process:
        assert killed_at and recoveries == []
        assert abs(final - undisturbed) < 1e-4  # every step ran once, as undisturbed
        return
    assert len(recoveries) == 1
    r = recoveries[0]
    assert victim in r.error  # the error names the task that died
    assert r.failed_at - killed_at[0] < 10  # within seconds, not a hang
    assert r.restored_step == 20  # the latest checkpoint before the kill at step 25
    assert r.resumed_at is not None
    assert abs(final - undisturbed) < 0.05 + 0.2 * undisturbed


def _wait_until_it_answers(sess, task):
    """The task's pid once its actor answers (Ray may still be restarting it)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return sess.engine_info(task)["pid"]
        except Exception:  # noqa: BLE001 - restarting
            assert time.monotonic() < deadline, f"{task} did not answer"
            time.sleep(0.2)


def _kill_and_wait_for_restart(sess, task):
    pid = _wait_until_it_answers(sess, task)  # (a kill just before may still be restarting it)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:  # until Ray restarted it
        try:
            if sess.engine_info(task)["pid"] != pid:
                return
        except Exception:  # noqa: BLE001 - restarting
            pass
        assert time.monotonic() < deadline, f"Ray did not restart {task}"
        time.sleep(0.2)


def test_a_task_that_died_between_steps_fails_the_checkpoint_and_the_loop_recovers(ray_engine,
                                                                                  tmp_path):
    g, x, w, loss, train, init = _regression()
    with ClusterSession(g, CLUSTER, cluster_name="kill-between", step_timeout=60) as sess:
        killed = []

        def step(sess, i):
            sess.run(train, {x: _data(i)})
            if i == 14 and not killed:  # restarted before the checkpoint of step 15
                killed.append(i)
                _kill_and_wait_for_restart(sess, PS)

        recoveries = train_supervised(sess, step, 20, tmp_path, every=5, init=init)
        assert len(recoveries) == 1
        assert recoveries[0].error.startswith("checkpoint 15: ") and PS in recoveries[0].error
        assert recoveries[0].restored_step == 10
        index = json.loads((tmp_path / "ckpt-20.index").read_text())
        assert PS in index["shards"]  # the ps's variables are in the last checkpoint


def test_a_nodes_own_error_ends_the_supervised_loop_without_a_restore(ray_engine, tmp_path):
    # no restore mends a bad feed: retrying it from the last checkpoint would only redo steps
    g, x, w, loss, train, init = _regression()
    with ClusterSession(g, CLUSTER, cluster_name="node-error", step_timeout=60) as sess:
        def step(sess, i):
            sess.run(train, {x: _data(i)[:, :7] if i == 12 else _data(i)})

        with pytest.raises(OpsdkError) as caught:
            train_supervised(sess, step, 20, tmp_path, every=5, init=init)
        assert not isinstance(caught.value, TaskUnavailable)
        assert checkpoint.latest(tmp_path).name == "ckpt-10.index"


def test_a_restarted_worker_holding_no_variables_does_not_fail_the_checkpoint(ray_engine,
                                                                              tmp_path):
    g, x, w, loss, train, init = _regression()
    with ClusterSession(g, CLUSTER, cluster_name="ckpt-worker-restarted",
                        step_timeout=60) as sess:
        sess.run(init)
        sess.run(train, {x: _data(0)})
        checkpoint.save(sess, tmp_path, 1)  # the worker held no variables in it
        # saved at once, while Ray restarts it (its call may fail), and once it has restarted
        os.kill(sess.engine_info(WORKER)["pid"], signal.SIGKILL)
        checkpoint.save(sess, tmp_path, 2)
        _kill_and_wait_for_restart(sess, WORKER)
        checkpoint.save(sess, tmp_path, 3)
        for step in (2, 3):
            index = json.loads((tmp_path / f"ckpt-{step}.index").read_text())
            assert list(index["shards"]) == [PS]


def test_a_checkpoint_refuses_a_task_that_restarted_since_the_session_knew_it(ray_engine,
                                                                             tmp_path):
    # a ps killed between steps and restarted by Ray holds no variables: a checkpoint written
    # then would name no shard of it, and restoring it would lose the ps's variables
    g, x, w, loss, train, init = _regression()
    with ClusterSession(g, CLUSTER, cluster_name="ckpt-restarted", step_timeout=60) as sess:
        sess.run(init)
        sess.run(train, {x: _data(0)})
        checkpoint.save(sess, tmp_path, 1)
        _kill_and_wait_for_restart(sess, PS)
        with pytest.raises(TaskUnavailable, match=f"checkpoint 2: .*task {PS} restarted since"):
            checkpoint.save(sess, tmp_path, 2)
        assert checkpoint.latest(tmp_path).name == "ckpt-1.index"
        assert not list(tmp_path.glob("ckpt-2*"))


def test_checkpoint_shards_then_the_index(ray_engine, tmp_path):
    g, x, w, loss, train, init = _regression()
    with ClusterSession(g, CLUSTER, cluster_name="ckpt") as sess:
        sess.run(init)
        sess.run(train, {x: _data(0)})
        index = checkpoint.save(sess, tmp_path, 1)
        saved = sess.variable_values()["w"]
        sess.run(train, {x: _data(1)})
        assert checkpoint.restore(sess, checkpoint.latest(tmp_path)) == 1
        np.testing.assert_array_equal(sess.variable_values()["w"], saved)
    record = json.loads(index.read_text())
    assert list(record["shards"]) == [PS]  # only the ps holds variables
    shard = tmp_path / record["shards"][PS]["file"]
    assert shard.stat().st_mtime_ns <= index.stat().st_mtime_ns
    shard.write_bytes(b"torn")
    with ClusterSession(g, CLUSTER, cluster_name="ckpt") as sess:
        with pytest.raises(OpsdkError, match="sha256 differs"):
            checkpoint.restore(sess, index)


def _blocked(name):
    """A session whose step blocks on both tasks until it is stopped: two replicas to aggregate
    but one worker, so the ps waits in the aggregation, and the worker waits in a _recv for the
    marker of that update (its fetched value runs after the train op)."""
    g, x, w, loss, train, init = _regression(replicas=2)
    with g.as_default(), tf.control_dependencies([train]):
        after = tf.identity(x)
    sess = ClusterSession(g, CLUSTER, cluster_name=name, step_timeout=120)
    sess.run(init)
    return sess, x, loss, after


def _when_blocked_on_every_task(sess, then):
    """Call `then` once a step runs on every task (from a thread of its own); returns the list
    that receives the time it was called."""
    fired = []

    def watch():
        deadline = time.monotonic() + 60
        while not all(s["steps"] for s in sess.task_stats().values()):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        time.sleep(0.2)  # into the waits
        fired.append(time.monotonic())
        then()
    threading.Thread(target=watch, daemon=True).start()
    return fired


def _nothing_left_running(sess):
    deadline = time.monotonic() + 5
    while any(s["steps"] or s["pending"] for s in sess.task_stats().values()):
        assert time.monotonic() < deadline, f"a task is still busy: {sess.task_stats()}"
        time.sleep(0.05)


def test_close_stops_a_step_waiting_on_every_task(ray_engine):
    sess, x, loss, after = _blocked("close")
    fired = _when_blocked_on_every_task(sess, sess.close)
    with pytest.raises(OpsdkError, match="closed"):
        sess.run(after, {x: _data(0)})
    assert time.monotonic() - fired[0] < 5
    _nothing_left_running(sess)  # the ps's aggregation and the worker's _recv ended too
    # The aborted step's gradient was withdrawn: a new step waits for two gradients again
    # (rather than completing the round with the stale one), and a step without the
    # aggregation runs.
    again, x, loss, after = _blocked("close")
    with pytest.raises(OpsdkError, match="timeout"):
        again.run(after, {x: _data(0)}, timeout=1.0)
    assert np.isfinite(again.run(loss, {x: _data(1)}))


def test_ctrl_c_stops_a_step_waiting_on_every_task(ray_engine, ctrl_c_raises):
    sess, x, loss, after = _blocked("ctrl-c")
    fired = _when_blocked_on_every_task(sess, _thread.interrupt_main)
    with pytest.raises(KeyboardInterrupt):
        sess.run(after, {x: _data(0)})
    assert time.monotonic() - fired[0] < 5
    _nothing_left_running(sess)
    assert np.isfinite(sess.run(loss, {x: _data(1)}))  # the same session goes on


def test_a_cluster_address_that_does_not_answer(ray_engine):
    from opsdk.dist.engine import check_answers
    with pytest.raises(OpsdkError, match="does not answer"):
        check_answers("127.0.0.1:9")
