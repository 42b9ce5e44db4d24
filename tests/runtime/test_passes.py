"""Constant folding and CSE happen (counted kernel calls prove it) and change no result."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import constant, device, placeholder
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer

ALL_OFF = SessionConfig(constant_folding=False, cse=False)


def _folding_graph(registry):
    a = constant([1.0, 2.0], dtype="float32", name="a")
    b = constant([10.0, 20.0], dtype="float32", name="b")
    folded = apply_op(registry, "counted_add", [a, b], {}, name="folded")
    x = placeholder("float32", [2], name="x")
    return x, apply_op(registry, "counted_add", [folded, x], {}, name="live")


def test_constant_subgraph_is_folded_once_per_plan(graph, registry, hooks):
    x, out = _folding_graph(registry)
    with Session(graph) as sess:
        first = sess.run(out, {x: [1.0, 1.0]})
        assert hooks["calls"]["counted_add"] == 2  # 'folded' at plan time, 'live' in the step
        second = sess.run(out, {x: [2.0, 2.0]})
        assert hooks["calls"]["counted_add"] == 3  # only 'live' runs again
        assert sess.plan_for([out], (x,)).folded == ("folded",)
    np.testing.assert_array_equal(first, [12.0, 23.0])
    np.testing.assert_array_equal(second, [13.0, 24.0])


def test_folding_off_runs_every_node_each_step_with_equal_results(graph, registry, hooks):
    x, out = _folding_graph(registry)
    with Session(graph, config=ALL_OFF) as sess:
        results = [sess.run(out, {x: [v, v]}) for v in (1.0, 2.0)]
        assert sess.plan_for([out], (x,)).folded == ()
    assert hooks["calls"]["counted_add"] == 4
    np.testing.assert_array_equal(results[0], [12.0, 23.0])
    np.testing.assert_array_equal(results[1], [13.0, 24.0])


@pytest.mark.parametrize("cse", [True, False])
def test_common_subexpressions_run_once(graph, registry, hooks, cse):
    x = placeholder("float32", [2], name="x")
    y = placeholder("float32", [2], name="y")
    first = apply_op(registry, "counted_add", [x, y], {}, name="first")
    twin = apply_op(registry, "counted_add", [x, y], {}, name="twin")
    other = apply_op(registry, "counted_add", [y, x], {}, name="other")  # different input order
    out = apply_op(registry, "mul", [first, twin], {})
    config = SessionConfig(constant_folding=True, cse=cse)
    with Session(graph, config=config) as sess:
        got = sess.run([out, other], {x: [1.0, 2.0], y: [3.0, 4.0]})
        merged = sess.plan_for([out, other], (x, y)).merged
    assert hooks["calls"]["counted_add"] == (2 if cse else 3)
    assert merged == (("twin",) if cse else ())
    np.testing.assert_array_equal(got[0], [16.0, 36.0])
    np.testing.assert_array_equal(got[1], [4.0, 6.0])


def test_stateful_nodes_are_neither_folded_nor_merged(graph, registry):
    w = Variable(np.zeros(2, np.float32), name="w")
    one = constant([1.0, 1.0], dtype="float32")
    bump = w.assign_add(one, name="bump")
    bump_again = w.assign_add(one, name="bump_again")  # identical, but has an effect
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        sess.run([bump, bump_again])
        np.testing.assert_array_equal(sess.run(w), [2.0, 2.0])
        assert sess.plan_for([bump.op, bump_again.op], ()).merged == ()


def test_fetching_a_folded_tensor(graph, registry, hooks):
    a = constant([1.0], dtype="float64")
    total = apply_op(registry, "counted_add", [a, a], {}, name="total")
    with Session(graph) as sess:
        for _ in range(3):
            np.testing.assert_array_equal(sess.run(total), [2.0])
    assert hooks["calls"]["counted_add"] == 1


def test_a_folded_value_changed_by_its_caller_leaves_the_next_run_alone(graph, registry):
    a = constant([1.0, 2.0], dtype="float32", name="a")
    total = apply_op(registry, "add", [a, a], {}, name="total")
    with Session(graph) as sess:
        first = sess.run(total)
        first[0] = 100.0  # the caller's copy, not the plan's constant
        np.testing.assert_array_equal(sess.run(total), [2.0, 4.0])
        assert sess.plan_for([total], ()).folded == ("total",)


def test_a_value_folded_on_another_device_is_fetched_on_the_host_as_a_copy(graph, registry):
    # The folded constant lives on the test device; the host's partition holds a copy of it,
    # made when the plan is lowered (on a GPU machine, where unscoped nodes land on the GPU, the
    # caller's change reached the next run).
    with device("/test:0"):
        a = constant([1.0, 2.0], dtype="float32", name="a")
        total = apply_op(registry, "add", [a, a], {}, name="total")
    with Session(graph) as sess:
        first = sess.run(total)
        first[0] = 100.0
        np.testing.assert_array_equal(sess.run(total), [2.0, 4.0])


def _shape_only_graph(registry, shape):
    x = placeholder("float32", shape, name="x")
    ones = apply_op(registry, "ones_like", [x], {}, name="ones")
    zeros = apply_op(registry, "zeros_like", [x], {}, name="zeros")
    dims = apply_op(registry, "shape", [x], {}, name="dims")
    return x, [apply_op(registry, "add", [ones, x], {}, name="plus_one"), zeros, dims]


def test_shape_only_nodes_of_static_shapes_fold_while_their_input_is_fed(graph, registry):
    x, fetches = _shape_only_graph(registry, [2, 3])
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Session(graph) as sess:
        for scale in (1.0, 2.0):
            plus_one, zeros, dims = sess.run(fetches, {x: value * scale})
            np.testing.assert_array_equal(plus_one, value * scale + 1.0)
            np.testing.assert_array_equal(zeros, np.zeros((2, 3), np.float32))
            np.testing.assert_array_equal(dims, [2, 3])
            assert zeros.dtype == np.float32 and dims.dtype == np.int32
        assert set(sess.plan_for(fetches, (x,)).folded) == {"ones", "zeros", "dims"}


def test_shape_only_nodes_of_open_shapes_or_large_outputs_run_as_steps(graph, registry):
    x, fetches = _shape_only_graph(registry, [None, 3])
    big = placeholder("float32", [1 << 15], name="big")  # 128 KiB of ones: filled each step
    big_ones = apply_op(registry, "ones_like", [big], {}, name="big_ones")
    with Session(graph) as sess:
        for rows in (1, 4):
            plus_one, zeros, dims = sess.run(fetches, {x: np.zeros((rows, 3), np.float32)})
            np.testing.assert_array_equal(plus_one, np.ones((rows, 3)))
            np.testing.assert_array_equal(zeros, np.zeros((rows, 3)))
            np.testing.assert_array_equal(dims, [rows, 3])
        assert sess.plan_for(fetches, (x,)).folded == ()
        np.testing.assert_array_equal(sess.run(big_ones, {big: np.zeros(1 << 15, np.float32)}),
                                      np.ones(1 << 15))
        assert sess.plan_for([big_ones], (big,)).folded == ()


def test_the_gradient_seed_of_a_scalar_loss_is_a_constant(graph, registry):
    from opsdk.runtime.autodiff.gradients import gradients
    x = placeholder("float32", [None, 3], name="x")
    loss = apply_op(registry, "reduce_sum", [apply_op(registry, "mul", [x, x], {})], {})
    (grad,) = gradients(loss, [x])
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(grad, {x: value}), 2 * value)
        assert [op.split("/")[-1] for op in sess.plan_for([grad], (x,)).folded] == ["ones_like"]
