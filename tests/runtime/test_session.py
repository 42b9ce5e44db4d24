"""Session.run: fetch structures, feeds, pruning, plan caching and the errors that name nodes."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import Graph, constant, placeholder
from opsdk.runtime.exec.session import Session

Pair = namedtuple("Pair", "total diff")


def test_fetch_structures_come_back_in_shape(graph, registry):
    x = placeholder("float64", [3], name="x")
    y = placeholder("float64", [3], name="y")
    s, d = apply_op(registry, "split_sum", [x, y], {}, name="sd")
    feed = {x: [1.0, 2.0, 3.0], "y:0": np.ones(3)}
    with Session(graph) as sess:
        out = sess.run({"pair": Pair(s, d), "list": [s, (d,)], "op": s.op, "name": "sd:1"}, feed)
    assert isinstance(out["pair"], Pair) and isinstance(out["list"][1], tuple)
    np.testing.assert_array_equal(out["pair"].total, [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(out["list"][1][0], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(out["name"], [0.0, 1.0, 2.0])
    assert out["op"] is None


def test_unneeded_branch_never_runs(graph, registry):
    x = placeholder("float32", [2], name="x")
    apply_op(registry, "explode", [x], {}, name="boom")
    fine = apply_op(registry, "add", [x, x], {})
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(fine, {x: [1, 2]}), [2, 4])


def test_feeding_an_inner_tensor_short_circuits_its_producers(graph, registry):
    x = placeholder("float32", [2], name="x")
    boom = apply_op(registry, "explode", [x], {}, name="boom")
    out = apply_op(registry, "mul", [boom, boom], {})
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(out, {boom: [3, 4]}), [9, 16])
        np.testing.assert_array_equal(sess.run(boom, {boom: [5, 6]}), [5, 6])


def test_needed_unfed_placeholder_is_named(graph, registry):
    x = placeholder("float32", [None, 4], name="x")
    y = placeholder("float32", [3, 4], name="y")
    dist = apply_op(registry, "l1_dist", [x, y], {}, name="dist")
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match=r"^placeholder 'x' must be fed \(needed by 'dist'\)"):
            sess.run(dist, {y: np.zeros((3, 4))})


def test_feed_contradicting_static_shape_or_dtype(graph):
    x = placeholder("float32", [None, 3], name="x")
    i = placeholder("int32", [2], name="i")
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match=r"feed for 'x:0' has shape \[2, 4\] but the tensor's "
                                             r"shape is \[\?, 3\]"):
            sess.run(x, {x: np.zeros((2, 4))})
        with pytest.raises(OpsdkError, match="feed for 'i:0' has dtype float64"):
            sess.run(i, {i: [1.5, 2.5]})
        assert sess.run(x, {x: np.zeros((5, 3))}).dtype == np.float32  # same-kind casts are fine


def test_run_time_shape_check_for_unknown_dims(graph, registry):
    x = placeholder("float32", [None, None], name="x")
    y = placeholder("float32", [2, 3], name="y")
    dist = apply_op(registry, "l1_dist", [x, y], {}, name="dist")
    with Session(graph) as sess:
        assert sess.run(dist, {x: np.zeros((4, 3)), y: np.ones((2, 3))}).shape == (4, 2)
        with pytest.raises(OpError, match=r"^l1_dist \(node 'dist'\): input 'y' has 3 columns but "
                                          r"x has 5 \(dim p\)"):
            sess.run(dist, {x: np.zeros((4, 5)), y: np.ones((2, 3))})


def test_kernel_error_names_node_and_op(graph, registry):
    x = placeholder("float32", [2], name="x")
    boom = apply_op(registry, "explode", [x], {}, name="boom")
    with Session(graph) as sess:
        with pytest.raises(OpError) as err:
            sess.run(boom, {x: [1, 2]})
    assert str(err.value) == "explode (node 'boom'): ValueError: bad input"


def test_fetching_from_another_graph_or_a_closed_session(graph, registry):
    other = Graph()
    with other.as_default():
        stray = constant(1.0, name="stray")
    sess = Session(graph)
    with pytest.raises(OpsdkError, match="cannot fetch 'stray:0': it belongs to another graph"):
        sess.run(stray)
    with pytest.raises(OpsdkError, match="no node named 'nope'"):
        sess.run("nope:0")
    sess.close()
    with pytest.raises(OpsdkError, match="closed session"):
        sess.run([])


def test_cycle_through_control_dependency_is_reported(graph, registry):
    x = placeholder("float32", [2], name="x")
    a = apply_op(registry, "add", [x, x], {}, name="a")
    b = apply_op(registry, "mul", [a, a], {}, name="b")
    a.op.add_control_input(b.op)
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match="cycle among nodes 'a', 'b'"):
            sess.run(b, {x: [1, 2]})


def test_plan_is_built_once_per_signature(graph, registry):
    x = placeholder("float32", [2], name="x")
    y = apply_op(registry, "add", [x, x], {})
    z = apply_op(registry, "mul", [y, x], {})
    with Session(graph) as sess:
        for value in range(5):
            np.testing.assert_array_equal(sess.run(z, {x: [value, 1]}), [2 * value**2, 2])
        assert sess.stats.plans_built == 1
        sess.run([z, y], {x: [1, 1]})
        sess.run(z, {y: [1, 1], x: [1, 1]})
        assert sess.stats.plans_built == 3


def test_fetching_the_same_tensor_twice(graph, registry):
    x = placeholder("float32", [2], name="x")
    y = apply_op(registry, "add", [x, x], {})
    with Session(graph) as sess:
        first, second = sess.run([y, y], {x: [1, 2]})
    np.testing.assert_array_equal(first, second)


def test_fetched_constants_are_private_copies(graph):
    c = constant([1.0, 2.0], name="c")
    with Session(graph) as sess:
        value = sess.run(c)
        value[0] = 99.0
        np.testing.assert_array_equal(sess.run(c), [1.0, 2.0])


def test_run_time_shape_check_runs_once_per_input_signature(graph, registry, monkeypatch):
    import opsdk.registry as registry_module
    x = placeholder("float32", [None, None], name="x")
    y = placeholder("float32", [2, 3], name="y")
    dist = apply_op(registry, "l1_dist", [x, y], {}, name="dist")
    checks = []
    real = registry_module.infer_outputs
    monkeypatch.setattr(registry_module, "infer_outputs",
                        lambda spec, *args: checks.append(spec.name) or real(spec, *args))
    ones = np.ones((2, 3))
    with Session(graph) as sess:
        for _ in range(3):
            assert sess.run(dist, {x: np.zeros((4, 3)), y: ones}).shape == (4, 2)
        assert checks == ["l1_dist"]
        assert sess.run(dist, {x: np.zeros((5, 3)), y: ones}).shape == (5, 2)
        assert checks == ["l1_dist"] * 2
        for _ in range(2):  # a failing signature is checked (and refused) every time
            with pytest.raises(OpError, match=r"^l1_dist \(node 'dist'\): input 'y' has 3 "
                                              r"columns but x has 5 \(dim p\)"):
                sess.run(dist, {x: np.zeros((4, 5)), y: ones})
        assert checks == ["l1_dist"] * 4


def test_remembered_fetch_structures_follow_the_fetches(graph, registry):
    x = placeholder("float64", [2], name="x")
    double = apply_op(registry, "add", [x, x], {}, name="double")
    square = apply_op(registry, "mul", [x, x], {}, name="square")
    feed = {x: [1.0, 3.0]}
    with Session(graph) as sess:
        fetches = [double, square]
        first = sess.run(fetches, feed)
        fetches.reverse()  # the same list object, now asking for the other order
        second = sess.run(fetches, feed)
        as_tuple = sess.run((double, "square:0"), feed)
        alone = sess.run("double:0", feed)
    assert isinstance(first, list) and isinstance(as_tuple, tuple)
    np.testing.assert_array_equal(first[0], [2.0, 6.0])
    np.testing.assert_array_equal(second[0], [1.0, 9.0])
    np.testing.assert_array_equal(as_tuple[1], [1.0, 9.0])
    np.testing.assert_array_equal(alone, [2.0, 6.0])


def test_flat_fetch_lists_with_operations_and_repeats_come_back_whole(graph, registry):
    x = placeholder("float64", [2], name="x")
    double = apply_op(registry, "add", [x, x], {}, name="double")
    with Session(graph) as sess:
        for _ in range(2):  # the first run resolves, the second reuses what it resolved
            flat = sess.run([double, double.op, x], {x: [1.0, 3.0]})
            twice = sess.run((double, double), {x: [1.0, 3.0]})
            assert isinstance(flat, list) and flat[1] is None and isinstance(twice, tuple)
            np.testing.assert_array_equal(flat[0], [2.0, 6.0])
            np.testing.assert_array_equal(flat[2], [1.0, 3.0])
            assert len(twice) == 2 and twice[0] is twice[1]
