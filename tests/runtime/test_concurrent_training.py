"""Concurrent training: many threads running one train op lose no update.

Each optimizer's update of a variable (its slots, Adam's beta powers) is one atomic transaction
of the session's variable store (docs/internals.md, Variables and threads), so 8 threads x N steps give
exactly the serial result of 8N steps when the gradient does not depend on the variable."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph
from opsdk.runtime.train.optimizers import (AdagradOptimizer, AdamOptimizer,
                                            GradientDescentOptimizer, MomentumOptimizer,
                                            RMSPropOptimizer)

THREADS, STEPS = 8, 60

OPTIMIZERS = {
    "sgd": lambda: GradientDescentOptimizer(0.5),
    "momentum": lambda: MomentumOptimizer(0.01, 0.9),
    "nesterov": lambda: MomentumOptimizer(0.01, 0.9, use_nesterov=True),
    "adagrad": lambda: AdagradOptimizer(0.1),
    "adam": lambda: AdamOptimizer(0.01),
    "rmsprop": lambda: RMSPropOptimizer(0.01, momentum=0.5),
}


def _train(make, steps_per_thread: int, threads: int, step_mode: str = "auto"):
    """Train w and b (loss linear in both: a constant gradient) and return their values."""
    graph = Graph()
    with graph.as_default():
        w = Variable(np.zeros((4, 3), np.float32), name="w")
        b = Variable(np.zeros((3,), np.float32), name="b")
        coeff = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
        loss = (apply_op(builtin_registry(), "reduce_sum", [w * coeff], {})
                + apply_op(builtin_registry(), "reduce_sum", [b * 2.0], {}))
        train = make().minimize(loss)
        init = global_variables_initializer()
    with Session(graph, SessionConfig(step_mode=step_mode)) as sess:
        sess.run(init)

        def work():
            for _ in range(steps_per_thread):
                sess.run(train)
        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        return sess.variables.host_values()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_threads_give_the_serial_result(name):
    serial = _train(OPTIMIZERS[name], THREADS * STEPS, 1)
    concurrent = _train(OPTIMIZERS[name], STEPS, THREADS)
    assert sorted(serial) == sorted(concurrent)
    for var in serial:
        np.testing.assert_array_equal(concurrent[var], serial[var], err_msg=f"{name}: {var}")


@pytest.mark.parametrize("name", ["sgd", "adam"])
@pytest.mark.parametrize("step_mode", ["inline", "concurrent"])
def test_threads_give_the_serial_result_in_either_step_mode(name, step_mode):
    serial = _train(OPTIMIZERS[name], THREADS * 20, 1, step_mode)
    concurrent = _train(OPTIMIZERS[name], 20, THREADS, step_mode)
    for var in serial:
        np.testing.assert_array_equal(concurrent[var], serial[var], err_msg=f"{name}: {var}")


def test_a_transaction_holds_its_variables_against_other_writers():
    from opsdk.runtime.exec.variable_store import VariableStore
    store = VariableStore()
    store.assign("a", np.zeros(()))
    store.assign("b", np.zeros(()))

    def bump():
        for _ in range(300):
            with store.transaction(["b", "a"]) as tx:
                tx.write("a", tx.read("a") + 1)
                tx.write("b", tx.read("b") + 1)
            store.update("a", np.ones(()), np.add)
    pool = [threading.Thread(target=bump) for _ in range(6)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert store.read("a") == 3600 and store.read("b") == 1800
