"""`Session.profile` (opsdk/runtime/exec/profile.py): every node that ran is timed once a step, in
order and concurrently; the runs are the session's own (a training step trains, `stats.runs`
counts them) and leave the cached plan as it was; the trace file holds every node run; bad
arguments and a closed session are errors that say what to give."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import opsdk
import opsdk.v1 as tf
from opsdk import ops
from opsdk.registry.errors import OpsdkError


def _graph():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [None, 3], name="x")
        w = opsdk.Variable(np.ones((3, 2), np.float32), name="w")
        y = ops.matmul(ops.exp(x), w, name="product")
        loss = ops.reduce_sum(y, name="loss")
        train = opsdk.GradientDescentOptimizer(0.5).minimize(loss)
        init = opsdk.global_variables_initializer()
    return g, x, w, loss, train, init


def test_every_node_is_timed_once_a_step_and_the_times_add_up():
    g, x, _, loss, _, init = _graph()
    with opsdk.Session(g, opsdk.SessionConfig(step_mode="inline")) as sess:
        sess.run(init)
        feed = {x: np.ones((4, 3), np.float32)}
        runs = sess.stats.runs
        profile = sess.profile(loss, feed, steps=6, warmup=2, show=False)
        assert sess.stats.runs == runs + 8
    assert profile.steps == 6 and profile.warmup == 2 and profile.inline
    assert len(profile.walls) == 6
    names = {node.name for node in profile.nodes}
    assert {"product", "loss"} <= names
    assert all(node.calls == 6 for node in profile.nodes)
    assert [n.seconds for n in profile.nodes] == sorted((n.seconds for n in profile.nodes), reverse=True)
    assert sum(n.seconds for n in profile.nodes) <= sum(profile.walls)
    assert profile.outside_nodes() >= 0
    assert len(profile.events) == 6 * len(profile.nodes)
    types = {t for t, _, _ in profile.by_type()}
    assert {"matmul", "reduce_sum"} <= types
    text = str(profile)
    assert "6 steps after 2 warm-up runs" in text and "product (matmul)" in text
    assert "by op type:" in text and "outside the nodes" in text


def test_a_profiled_training_step_trains_and_leaves_the_cached_plan_alone():
    g, x, w, _, train, init = _graph()
    feed = {x: np.full((4, 3), 0.25, np.float32)}
    with opsdk.Session(g) as sess:
        sess.run(init)
        sess.run(train, feed)
        plans = dict(sess._plans)
        runs = {key: plan.runs for key, plan in plans.items()}
        sess.profile(train, feed, steps=3, warmup=1, show=False)
        assert sess._plans == plans
        assert all(plan.runs is runs[key] for key, plan in sess._plans.items())
        sess.run(train, feed)
        # loss = sum(exp(x) @ w): d loss / d w = column sums of exp(x), the same every step
        grad = np.exp(np.float32(0.25)) * 4
        np.testing.assert_allclose(sess.run(w), np.ones((3, 2)) - 6 * 0.5 * grad, rtol=1e-5)


def test_a_concurrent_plan_is_profiled_concurrently():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [None, 64], name="x")  # a size known at run time:
        left = ops.matmul(ops.exp(x), x, name="left")            # not inlined as a small step
        right = ops.matmul(ops.tanh(x), x, name="right")
    with opsdk.Session(g, opsdk.SessionConfig(step_mode="concurrent")) as sess:
        profile = sess.profile([left, right], {x: np.ones((64, 64), np.float32)}, steps=4,
                               show=False)
    assert not profile.inline and profile.outside_nodes() is None
    assert {"left", "right"} <= {n.name for n in profile.nodes}
    assert "run concurrently" in str(profile)


def test_the_trace_holds_every_node_run(tmp_path):
    g, x, _, loss, _, init = _graph()
    with opsdk.Session(g) as sess:
        sess.run(init)
        profile = sess.profile(loss, {x: np.ones((2, 3), np.float32)}, steps=3, show=False)
    path = tmp_path / "step.json"
    profile.chrome_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    runs = [e for e in events if e["ph"] == "X"]
    assert len(runs) == 3 * len(profile.nodes)
    assert {e["name"] for e in runs} == {n.name for n in profile.nodes}
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in runs)
    assert any(e["ph"] == "M" and e["args"]["name"] == "caller" for e in events)


@pytest.mark.parametrize("steps,warmup,words", [
    (0, 3, "steps=0; give a whole number of steps, 1 or more"),
    (2.5, 3, "steps=2.5"),
    (True, 3, "steps=True"),
    (2, -1, "warmup=-1; give a whole number of runs, 0 or more"),
])
def test_bad_counts_are_errors_saying_what_to_give(steps, warmup, words):
    g, x, _, loss, _, init = _graph()
    with opsdk.Session(g) as sess:
        sess.run(init)
        with pytest.raises(OpsdkError, match=words.replace("(", r"\(").replace(".", r"\.")):
            sess.profile(loss, {x: np.ones((2, 3), np.float32)}, steps=steps, warmup=warmup)


def test_a_closed_session_cannot_profile():
    g, x, _, loss, _, init = _graph()
    sess = opsdk.Session(g)
    sess.run(init)
    sess.close()
    with pytest.raises(OpsdkError, match="closed session"):
        sess.profile(loss, {x: np.ones((2, 3), np.float32)}, warmup=0)


def test_a_tf1_session_profiles_with_the_feeds_run_takes(capsys):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.float32(2.0), name="v")
        y = tf.square(v, name="sq") + 1.0
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        profile = sess.profile(y, {v: 3.0}, steps=2)  # a Variable fed, as TF allows
    assert "sq (square)" in capsys.readouterr().out
    assert any(n.name == "sq" and n.calls == 2 for n in profile.nodes)


def test_a_traced_run_returns_the_runs_values_and_times_its_nodes_once():
    g, x, w, loss, train, init = _graph()
    feed = {x: np.full((4, 3), 0.25, np.float32)}
    with opsdk.Session(g) as sess:
        sess.run(init)
        expected = sess.run(loss, feed)
        runs = sess.stats.runs
        before = time.time()
        (value, _), profile = sess.traced_run([loss, train], feed)
        after = time.time()
        assert sess.stats.runs == runs + 1
        np.testing.assert_allclose(value, expected, rtol=1e-6)
        assert sess.run(loss, feed) < expected  # the traced step trained
    assert profile.steps == 1 and profile.warmup == 0
    assert before <= profile.started <= after
    assert {"product", "loss"} <= {n.name for n in profile.nodes}
    assert all(n.calls == 1 for n in profile.nodes)
    assert len(profile.events) == len(profile.nodes)
    assert all(0 <= start <= end <= after - before for _, _, _, start, end in profile.events)
