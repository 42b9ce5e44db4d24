"""Replicated training on 1 ps + 2 workers: synchronous, asynchronous, backup workers."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np
import pytest

from opsdk.dist import ClusterSession, ReplicatedOptimizer, replica_device_setter
from opsdk.dist.primitives import accumulator_counts
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, placeholder
from opsdk.runtime.train.optimizers import (AdamOptimizer, GradientDescentOptimizer,
                                            MomentumOptimizer)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_softmax_example_learns_on_one_ps_and_two_workers(ray_engine, mode):
    result = _example("dist_softmax").train(steps=60, mode=mode, cluster_name=f"softmax-{mode}",
                                               learning_rate=0.1)
    for losses in result["losses"].values():
        assert len(losses) == 60
        assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])
    # sync: one update per round of two gradients; async: one per gradient
    assert result["global_step"] == (60 if mode == "sync" else 120)


def _counter_model(worker, replicas, cluster):
    """w starts at 0; each worker's gradient of sum(w * c) is c (1 for worker 0, 10 for 1)."""
    g = Graph()
    with g.as_default():
        with replica_device_setter(cluster=cluster, worker_device=f"/job:worker/task:{worker}"):
            w = Variable(np.zeros(2, np.float32), name="w")
            c = placeholder("float32", [2], name="c")
            loss = (w.value() * c)
        train = ReplicatedOptimizer(GradientDescentOptimizer(1.0), replicas).minimize(
            loss, var_list=[w])
    return g, w, c, train, global_variables_initializer(g)


def test_async_updates_are_never_lost(ray_engine):
    cluster = {"ps": 1, "worker": 2}
    models = [_counter_model(i, 0, cluster) for i in range(2)]
    sessions = [ClusterSession(m[0], cluster, task=f"/job:worker/task:{i}", cluster_name="async-count")
                for i, m in enumerate(models)]
    sessions[0].run(models[0][4])

    def loop(i):
        g, w, c, train, _ = models[i]
        for _ in range(25):
            sessions[i].run(train, {c: np.full(2, [1.0, 10.0][i], np.float32)})

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    value = sessions[0].run(models[0][1].value())
    np.testing.assert_allclose(value, [-(25 * 1 + 25 * 10)] * 2)  # every update applied once


def _apply_node(replicas, sparse=False, shape=(2,), variable="w",
                update_op="apply_gradient_descent"):
    g = Graph()
    with g.as_default():
        r = g.create_op("_dist_round", [], {"variable": variable}, [((), "int64")])
        grads = [placeholder("float32", list(shape))] if not sparse else [
            placeholder("int64", [None]), placeholder("float32", [None, 2])]
        if update_op == "":  # a counter: no gradient
            grads = []
        return g.create_op("_dist_apply", [r.outputs[0], *grads],
                           {"variable": variable, "slots": [], "update_op": update_op,
                            "hypers": [1.0] if update_op else [], "replicas": replicas,
                            "sparse": sparse}, [((2,), "int64")])


def _step(ctx, *contributions):
    """One step's contributions on a task: each (apply node, inputs) contributes, then the
    step waits for each round, as a partition orders them (opsdk/dist/partitions.py)."""
    from opsdk.dist.primitives import PRIMITIVES

    tickets = [(op, PRIMITIVES["_dist_apply"].run(ctx, op, inputs)[0])
               for op, inputs in contributions]
    for op, ticket in tickets:
        wait = op.graph.create_op("_dist_wait", [op.outputs[0]],
                                  {"variable": op.attrs["variable"]}, [])
        PRIMITIVES["_dist_wait"].run(ctx, wait, [ticket])


def test_a_round_applies_the_mean_of_the_first_n_and_drops_late_ones():
    """Backup workers: 2 of 3 aggregate; the third, computed from round 0, is dropped."""
    from opsdk.dist.primitives import PRIMITIVES
    from opsdk.runtime.exec.executor import RunToken, StepContext
    from opsdk.runtime.exec.variable_store import VariableStore

    store = VariableStore()
    store.assign("w", np.zeros(2, np.float32))
    op = _apply_node(2)
    ctx = StepContext(store, None, RunToken(10))
    waiter = threading.Thread(target=_step, args=(ctx, (op, [np.int64(0), np.ones(2, np.float32)])))
    waiter.start()  # the first of round 0 waits for a second
    waiter.join(0.3)
    assert waiter.is_alive()
    _step(ctx, (op, [np.int64(0), np.full(2, 3.0, np.float32)]))
    waiter.join(10)
    assert not waiter.is_alive()
    np.testing.assert_allclose(store.read("w"), [-2.0, -2.0])  # mean of 1 and 3
    _step(ctx, (op, [np.int64(0), np.full(2, 100.0, np.float32)]))  # the backup, too late
    np.testing.assert_allclose(store.read("w"), [-2.0, -2.0])
    assert accumulator_counts(store)["w"] == {"round": 1, "applied": 1, "dropped": 1}


def test_rounds_of_a_scalar_variable_take_the_cached_update(monkeypatch):
    """The mean of two 0-d gradients is a NumPy scalar; the update must still find its eager
    call in the cache after the first round (it took the whole uncached path every round)."""
    from opsdk.dist.primitives import PRIMITIVES
    from opsdk.runtime.exec.executor import RunToken, StepContext
    from opsdk.runtime.exec.variable_store import VariableStore
    from opsdk.runtime.kernels import eager

    store = VariableStore()
    store.assign("w", np.zeros((), np.float32))
    op = _apply_node(2, shape=())
    ctx = StepContext(store, None, RunToken(10))
    chosen = []
    choose = eager.choose_kernel
    monkeypatch.setattr(eager, "choose_kernel", lambda *a, **k: chosen.append(a) or choose(*a, **k))

    def round_of(i, a, b):
        waiter = threading.Thread(target=_step, args=(ctx, (op, [np.int64(i), np.float32(a)])))
        waiter.start()
        _step(ctx, (op, [np.int64(i), np.float32(b)]))
        waiter.join(10)
        assert not waiter.is_alive()

    round_of(0, 1.0, 3.0)
    first = len(chosen)
    round_of(1, 2.0, 4.0)
    round_of(2, 0.0, 2.0)
    assert len(chosen) == first  # rounds 1 and 2 ran the cached call
    assert isinstance(store.read("w"), np.ndarray) and store.read("w").dtype == np.float32
    np.testing.assert_allclose(store.read("w"), -(2.0 + 3.0 + 1.0))


def test_a_waiting_contribution_stops_at_its_deadline():
    from opsdk.dist.primitives import PRIMITIVES
    from opsdk.runtime.exec.executor import CancelledError, RunToken, StepContext
    from opsdk.runtime.exec.variable_store import VariableStore

    store = VariableStore()
    store.assign("w", np.zeros(2, np.float32))
    op = _apply_node(2)
    ctx = StepContext(store, None, RunToken(0.3))
    with pytest.raises(CancelledError, match="waiting for round 0"):
        _step(ctx, (op, [np.int64(0), np.ones(2, np.float32)]))
    # the stopped step's gradient does not count: the next one alone completes no round
    ctx = StepContext(store, None, RunToken(0.3))
    with pytest.raises(CancelledError):
        _step(ctx, (op, [np.int64(0), np.ones(2, np.float32)]))
    assert accumulator_counts(store)["w"]["applied"] == 0


def test_steps_go_on_when_a_dead_workers_step_parted_the_variables_rounds():
    """A worker died inside a step after its count of the global step had completed that
    round, and before its gradient of w reached the ps: the counter is a round ahead of w.
    The chief's step waits in w's round 0; the worker's retried step holds the counter's round
    1 and w's round 0. Waiting on each in turn, the retried step waited in the counter's round
    1, which only the chief's next step could finish, while the chief waited for its gradient
    of w: neither returned. Contributing both before waiting, both steps go on."""
    from opsdk.dist.primitives import PRIMITIVES
    from opsdk.runtime.exec.executor import CancelledError, RunToken, StepContext
    from opsdk.runtime.exec.variable_store import VariableStore

    store = VariableStore()
    store.assign("w", np.zeros(2, np.float32))
    store.assign("global_step", np.zeros((), np.int64))
    w, count = _apply_node(2), _apply_node(2, variable="global_step", update_op="")
    one = np.ones(2, np.float32)
    done = []

    def chief():
        _step(StepContext(store, None, RunToken(10)), (count, [np.int64(0)]),
              (w, [np.int64(0), one]))
        done.append("chief")
        try:  # its next step: round 1 of both, w's waiting for the worker's next step
            _step(StepContext(store, None, RunToken(1)), (count, [np.int64(1)]),
                  (w, [np.int64(1), one]))
        except CancelledError:
            done.append("chief's next waited for the worker's next")

    thread = threading.Thread(target=chief)
    thread.start()
    # the dead worker's step: its count, and nothing more
    PRIMITIVES["_dist_apply"].run(StepContext(store, None, RunToken(10)), count, [np.int64(0)])
    # its retried step: the counter's round 1 first in its order, then w's round 0
    _step(StepContext(store, None, RunToken(10)), (count, [np.int64(1)]),
          (w, [np.int64(0), one]))
    done.append("worker")
    thread.join(10)
    assert done == ["chief", "worker", "chief's next waited for the worker's next"]
    counts = accumulator_counts(store)
    assert counts["global_step"]["round"] == 2 and counts["w"]["round"] == 1


def test_a_sparse_update_touches_only_its_rows():
    from opsdk.dist.primitives import PRIMITIVES
    from opsdk.runtime.exec.executor import RunToken, StepContext
    from opsdk.runtime.exec.variable_store import VariableStore

    store = VariableStore()
    store.assign("w", np.ones((5, 2), np.float32))
    ctx = StepContext(store, None, RunToken(10))
    ids = np.array([3, 1, 3], np.int64)  # a repeated id: its rows add up
    rows = np.array([[1, 1], [2, 2], [1, 1]], np.float32)
    PRIMITIVES["_dist_apply"].run(ctx, _apply_node(0, sparse=True), [np.int64(0), ids, rows])
    np.testing.assert_allclose(store.read("w"), [[1, 1], [-1, -1], [1, 1], [-1, -1], [1, 1]])


def _quadratic(optimizer, cluster=None, replicated=False):
    """loss = sum((w - t)^2 * x): the same model placed on a cluster or in one process."""
    from contextlib import nullcontext

    g = Graph()
    with g.as_default():
        scope = (replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")
                 if cluster else nullcontext())
        with scope:
            w = Variable(np.array([1.0, -2.0, 0.5], np.float32), name="w")
            x = placeholder("float32", [3], name="x")
            loss = ((w.value() - 3.0) * (w.value() - 3.0) * x)
        train = (ReplicatedOptimizer(optimizer, 1).minimize(loss, var_list=[w]) if replicated
                 else optimizer.minimize(loss, var_list=[w]))
    return g, w, x, train, global_variables_initializer(g)


@pytest.mark.parametrize("make", [
    lambda: MomentumOptimizer(0.05, 0.9),
    lambda: MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    lambda: AdamOptimizer(0.1),
], ids=["momentum", "nesterov", "adam"])
def test_momentum_and_adam_keep_their_state_on_the_ps_and_match_one_process(ray_engine, make):
    from opsdk.runtime.exec.session import Session

    feeds = [np.array([1.0, 0.5, 2.0], np.float32) * (i + 1) for i in range(6)]
    g, w, x, train, init = _quadratic(make())
    with Session(graph=g) as sess:
        sess.run(init)
        for f in feeds:
            sess.run(train, {x: f})
        want = sess.run(w.value())
    cluster = {"ps": 1, "worker": 1}
    g, w, x, train, init = _quadratic(make(), cluster, replicated=True)
    name = "opt-" + type(make()).__name__
    with ClusterSession(g, cluster, cluster_name=f"{name}-{id(make)}") as sess:
        sess.run(init)
        for f in feeds:
            sess.run(train, {x: f})
        import ray
        on_ps = ray.get(sess.actor("/job:ps/task:0").variable_values.remote())
    np.testing.assert_allclose(on_ps["w"], want, rtol=1e-5)
    assert len(on_ps) > 1  # the slots (and Adam's powers) live beside w on the ps


def test_a_sparse_adam_update_moves_only_its_rows_and_steps_the_powers_once():
    from opsdk.dist.primitives import PRIMITIVES
    from opsdk.runtime.exec.executor import RunToken, StepContext
    from opsdk.runtime.exec.variable_store import VariableStore

    store = VariableStore()
    for name, value in (("w", np.ones((4, 2))), ("m", np.zeros((4, 2))), ("v", np.zeros((4, 2))),
                        ("b1", np.asarray(0.9)), ("b2", np.asarray(0.999))):
        store.assign(name, np.asarray(value, np.float32))
    g = Graph()
    with g.as_default():
        r = g.create_op("_dist_round", [], {"variable": "w"}, [((), "int64")])
        ids, rows = placeholder("int64", [None]), placeholder("float32", [None, 2])
        op = g.create_op("_dist_apply", [r.outputs[0], ids, rows], {
            "variable": "w", "slots": ["m", "v"], "update_op": "apply_adam",
            "hypers": [0.1, 0.9, 0.999, 1e-8], "grad_at": 4, "op_attrs": [],
            "reads": ["b1", "b2"], "scalings": [["b1", 0.9], ["b2", 0.999]],
            "replicas": 0, "sparse": True}, [])
    ctx = StepContext(store, None, RunToken(10))
    PRIMITIVES["_dist_apply"].run(ctx, op, [np.int64(0), np.array([2], np.int64),
                                            np.ones((1, 2), np.float32)])
    w = store.read("w")
    np.testing.assert_allclose(w[[0, 1, 3]], 1.0)  # untouched rows
    np.testing.assert_allclose(w[2], 0.9, rtol=1e-4)  # Adam's first step: lr * sign(grad)
    assert store.read("m")[2].tolist() == pytest.approx([0.1, 0.1])
    np.testing.assert_allclose([store.read("b1"), store.read("b2")], [0.81, 0.998001], rtol=1e-6)


def test_an_optimizer_with_an_update_of_its_own_is_refused_naming_the_supported_ones():
    from opsdk.registry.errors import OpsdkError

    class Clipped(MomentumOptimizer):
        def _update(self, grad, var):
            return super()._update(grad, var)

    with pytest.raises(OpsdkError, match="Clipped is not supported.*MomentumOptimizer.*Adam"):
        ReplicatedOptimizer(Clipped(0.1, 0.9))
