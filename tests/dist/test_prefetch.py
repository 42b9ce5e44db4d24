"""Values pushed ahead (opsdk/dist/prefetch.py): which sends are pushed, the steady step's task
order, and that a steady step computes with exactly the value after the previous step's update,
never with one left by a failed step, another step or a restore."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from opsdk.dist import ClusterSession, ClusterSpec
from opsdk.dist import checkpoint
from opsdk.dist.prefetch import task_order
from opsdk.dist.steps import build_step
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.exec.session import SessionConfig
from steady_model import LR, PS, WORKER
from steady_model import feeds as _feeds
from steady_model import model as _model


def _options(task=WORKER):
    return dataclasses.replace(SessionConfig().plan_options(), default_task=task)


def test_a_trained_variable_read_by_the_worker_is_pushed_and_its_round_fed():
    cluster = {"ps": 1, "worker": 1}
    g, v, x, i, fetches, _ = _model(cluster)
    step = build_step(g, fetches, (x, i), _options(), ClusterSpec(cluster))
    ps = next(p for p in step.parts.values() if p.task == PS)
    assert len(ps.pushed) == 1 and ps.steady is not None
    assert [var for _, var in ps.rounds] == ["v"]
    steady_types = [op.type for op in ps.steady.graph.operations]
    assert "_send" not in steady_types  # the value leaves at the end of the previous step
    assert step.push_to == {PS: (WORKER,), WORKER: ()}
    assert step.steady_order == [WORKER, PS]  # the worker computes first, the ps applies


def test_a_variable_the_ps_also_reads_is_not_pushed():
    cluster = {"ps": 1, "worker": 1}
    g, v, x, i, fetches, _ = _model(cluster, read_on_ps=True)
    step = build_step(g, fetches, (x, i), _options(), ClusterSpec(cluster))
    assert all(not p.pushed for p in step.parts.values())
    assert step.steady_order is None


def test_task_order_refuses_values_going_both_ways():
    assert task_order({"a": ("b",), "b": ()}) == ["a", "b"]
    assert task_order({"a": ("b",), "b": ("a",)}) is None


def _expected_losses(steps, x=1.0):
    v, out = 1.0, []
    for _ in range(steps):
        out.append(v * v * x)
        v -= LR * 2 * v * x
    return out


def _steady(sess):
    return sess.task_stats()[WORKER]["steady_steps"]


@pytest.mark.parametrize("push", [True, False])
def test_each_step_computes_with_the_value_after_the_previous_update(ray_engine, push):
    cluster = {"ps": 1, "worker": 1}
    g, v, x, i, fetches, init = _model(cluster)
    with ClusterSession(g, cluster, cluster_name=f"push-exact-{push}", push_values=push) as sess:
        sess.run(init)
        losses = [float(sess.run(fetches, _feeds(x, i))[1]) for _ in range(6)]
        steady = _steady(sess)
    np.testing.assert_allclose(losses, _expected_losses(6), rtol=1e-6)
    assert steady == (5 if push else 0)  # every step after the first took pushed values


def test_a_failed_step_another_step_or_a_restore_start_the_next_step_in_full(ray_engine,
                                                                           tmp_path):
    cluster = {"ps": 1, "worker": 1}
    g, v, x, i, fetches, init = _model(cluster)
    with g.as_default():
        reset = v.assign(np.float32(0.5))
    with ClusterSession(g, cluster, cluster_name="push-stale", step_timeout=60) as sess:
        sess.run(init)
        sess.run(fetches, _feeds(x, i))
        checkpoint.save(sess, tmp_path, 1)                 # v = 0.8
        sess.run(fetches, _feeds(x, i))                    # steady; pushes v = 0.64
        with pytest.raises(OpsdkError, match="gather"):
            sess.run(fetches, _feeds(x, i, bad=True))
        v_now = float(sess.variable_values()["v"])
        before = _steady(sess)
        loss = float(sess.run(fetches, _feeds(x, i))[1])  # full: reads v where it is now
        assert _steady(sess) == before
        np.testing.assert_allclose(loss, v_now * v_now, rtol=1e-6)
        sess.run(reset)                                    # another step writes v
        loss = float(sess.run(fetches, _feeds(x, i))[1])
        np.testing.assert_allclose(loss, 0.25, rtol=1e-6)
        sess.run(fetches, _feeds(x, i))                    # steady again; pushes 0.5*0.8**2
        checkpoint.restore(sess, checkpoint.latest(tmp_path))
        before = _steady(sess)
        loss = float(sess.run(fetches, _feeds(x, i))[1])
        assert _steady(sess) == before
        np.testing.assert_allclose(loss, 0.8 * 0.8, rtol=1e-6)


def test_synchronous_rounds_of_two_workers_match_reading_at_each_step(ray_engine):
    cluster = {"ps": 1, "worker": 2}
    finals = {}
    for push in (True, False):
        models = [_model(cluster, worker=w, replicas=2, scale=1.0 + w) for w in range(2)]
        sessions = [ClusterSession(m[0], cluster, task=f"/job:worker/task:{w}",
                                   cluster_name=f"push-sync-{push}", push_values=push,
                                   step_timeout=60) for w, m in enumerate(models)]
        sessions[0].run(models[0][5])

        def loop(w):
            g, v, x, i, fetches, _ = models[w]
            for _ in range(5):
                sessions[w].run(fetches, _feeds(x, i))

        threads = [threading.Thread(target=loop, args=(w,)) for w in range(2)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        finals[push] = float(sessions[0].variable_values()["v"])
        # each client counts its own task's steady steps (run in the client's process)
        steady = sum(sessions[w].task_stats()[f"/job:worker/replica:0/task:{w}"]
                     ["steady_steps"] for w in range(2))
        assert steady == (8 if push else 0)  # 4 steady steps per worker
    # the round's mean gradient is LR * 2 v * 1.5: v *= 1 - 0.3 per round
    np.testing.assert_allclose(finals[True], 0.7 ** 5, rtol=1e-5)
    np.testing.assert_allclose(finals[False], 0.7 ** 5, rtol=1e-5)
