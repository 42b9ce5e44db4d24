"""A client's own task run in the client's process in steady steps (opsdk/dist/inprocess.py):
which steps may, and what a node's error there does."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.dist import ClusterSession, ClusterSpec, ReplicatedOptimizer, replica_device_setter
from opsdk.dist.inprocess import runs_in_client
from opsdk.dist.steps import build_step
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.exec.session import SessionConfig
from steady_model import PS, WORKER
from steady_model import feeds as _feeds
from steady_model import model as _model

CLUSTER = {"ps": 1, "worker": 1}


def _step(g, fetches, feeds):
    options = dataclasses.replace(SessionConfig().plan_options(), default_task=WORKER)
    return build_step(g, fetches, feeds, options, ClusterSpec(CLUSTER))


def test_a_stateless_worker_first_in_the_steady_order_may_run_in_the_client():
    g, v, x, i, fetches, _ = _model(CLUSTER)
    step = _step(g, fetches, (x, i))
    assert step.steady_order == [WORKER, PS]
    assert runs_in_client(step, WORKER, placed=False)
    assert not runs_in_client(step, WORKER, placed=True)  # the session places it: it stays
    assert not runs_in_client(step, PS, placed=False)      # not first: values reach it


def _worker_model(build):
    """A replicated step whose worker part computes `build(w)` (w: the variable's value)."""
    g = tf.Graph()
    with g.as_default():
        with replica_device_setter(cluster=CLUSTER, worker_device="/job:worker/task:0"):
            v = tf.Variable(np.float32(1.0), name="v")
            loss = build(v)
        train = ReplicatedOptimizer(tf.train.GradientDescentOptimizer(0.1), 1).minimize(
            loss, var_list=[v])
    return _step(g, [train, loss], ())


def test_a_worker_part_with_state_or_off_the_cpu_stays_on_its_actor():
    plain = _worker_model(lambda v: v * v)
    assert runs_in_client(plain, WORKER, placed=False)
    # a random op keeps its stream on the task: run elsewhere, it would restart it
    noisy = _worker_model(lambda v: v * v + tf.reduce_sum(tf.random_normal([2])))
    assert not runs_in_client(noisy, WORKER, placed=False)

    def counted(v):  # a variable of the worker's own
        with tf.device("/job:worker/task:0"):
            seen = tf.Variable(np.float32(0.0), name="seen", trainable=False)
        return v * v + seen.assign_add(np.float32(1.0))

    assert not runs_in_client(_worker_model(counted), WORKER, placed=False)

    def on_test_device(v):
        with tf.device("/job:worker/task:0/device:TEST:0"):
            return v * v

    assert not runs_in_client(_worker_model(on_test_device), WORKER, placed=False)


def _run_until_compiled(sess, fetches, x, i, limit_s=60.0):
    deadline, losses = time.monotonic() + limit_s, []
    while len(losses) < 4 or not any(s.graph is not None for s in sess._steps.values()):
        losses.append(float(sess.run(fetches, _feeds(x, i))[1]))
        assert time.monotonic() < deadline, "no compiled graph within the time limit"
    return losses


def test_a_node_error_in_the_client_names_the_task_and_keeps_the_compiled_graph(ray_engine):
    g, v, x, i, fetches, init = _model(CLUSTER)
    with ClusterSession(g, CLUSTER, cluster_name="inprocess-error", compile_after_s=0,
                        graph_idle_s=3600, step_timeout=60) as sess:
        sess.run(init)
        _run_until_compiled(sess, fetches, x, i)
        step = next(s for s in sess._steps.values() if s.graph is not None)
        graph = step.graph
        assert step.head == WORKER and graph.head is not None
        assert graph.remote == [PS]  # the graph runs on the ps alone
        v_before = float(sess.variable_values()["v"])
        with pytest.raises(OpsdkError, match=f"task {WORKER}: .*gather"):
            sess.run(fetches, _feeds(x, i, bad=True))
        assert step.graph is graph  # a node's error: the graph stays
        v_now = float(sess.variable_values()["v"])
        assert v_now == v_before  # nothing reached the ps
        before = sess.task_stats()[WORKER]["steady_steps"]
        loss = float(sess.run(fetches, _feeds(x, i))[1])  # in full: reads v where it is
        np.testing.assert_allclose(loss, v_now * v_now, rtol=1e-6)
        for _ in range(3):  # then steady again, on the same graph
            sess.run(fetches, _feeds(x, i))
        assert sess.task_stats()[WORKER]["steady_steps"] == before + 3
        assert step.graph is graph
    # closed: the client's task lets its threads go (the process lives on)
    local = sess._local.state
    assert local.runner._shutdown and all(p.pool._shutdown for p in local.partitions.values())
