"""The executor: independent nodes run at the same time, chains run inline, a failure stops the
step, and Session.run is safe from several threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from opsdk.registry.errors import OpError
from opsdk.runtime.api import apply_op
from opsdk.runtime.graph import placeholder
from opsdk.runtime.session import Session, SessionConfig


def test_independent_nodes_run_concurrently(graph, registry, hooks):
    # Each rendezvous node waits at a 2-party barrier: the step can only finish when both run at
    # once (run one after the other, the first would time out after 10 s and fail the test).
    x = placeholder("float32", [2], name="x")
    left = apply_op(registry, "rendezvous", [x], {}, name="left")
    right = apply_op(registry, "rendezvous", [x], {}, name="right")
    total = apply_op(registry, "add", [left, right], {})
    with Session(graph) as sess:
        assert not sess.plan_for([total], (x,)).serial
        np.testing.assert_array_equal(sess.run(total, {x: [1, 2]}), [2, 4])


def test_chain_is_serial_and_runs_on_the_calling_thread(graph, registry):
    x = placeholder("float64", [1], name="x")
    t = x
    for _ in range(20):
        t = apply_op(registry, "add", [t, x], {})
    with Session(graph) as sess:
        plan = sess.plan_for([t], (x,))
        assert plan.serial and len(plan.steps) == 20
        np.testing.assert_array_equal(sess.run(t, {x: [1.0]}), [21.0])
        assert sess._pool is None  # no thread pool was ever needed


def test_failure_in_a_wide_graph_stops_the_step(graph, registry, hooks):
    x = placeholder("float32", [2], name="x")
    branches = [apply_op(registry, "counted_add", [x, x], {}, name=f"ok{i}") for i in range(4)]
    boom = apply_op(registry, "explode", [x], {}, name="boom")
    after = apply_op(registry, "counted_add", [boom, x], {}, name="after")
    with Session(graph, config=SessionConfig(constant_folding=False, cse=False)) as sess:
        assert not sess.plan_for([*branches, after], (x,)).serial
        for _ in range(20):  # whatever order the threads take, the error is the same
            with pytest.raises(OpError, match=r"^explode \(node 'boom'\): ValueError: bad input"):
                sess.run([*branches, after], {x: [1, 2]})
        assert hooks["calls"]["counted_add"] <= 4 * 20  # 'after' never ran


def test_session_run_from_many_threads(graph, registry):
    x = placeholder("float64", [3], name="x")
    a = apply_op(registry, "mul", [x, x], {})
    b = apply_op(registry, "add", [x, x], {})
    out = apply_op(registry, "sub", [a, b], {})
    with Session(graph) as sess:
        def one(k: int) -> bool:
            value = np.arange(3, dtype=np.float64) + k
            got = sess.run(out, {x: value})
            return bool(np.array_equal(got, value * value - 2 * value))
        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(one, range(200)))
        assert sess.stats.plans_built == 1
