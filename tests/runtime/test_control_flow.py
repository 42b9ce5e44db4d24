"""cond and while_loop: values, only the needed sub-graph runs, structure/dtype/shape checks,
shape invariants, nesting, captured inputs (variable reads too) and recorded intermediates."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.control_flow.builders import cond, join_shapes, loop_intermediates, while_loop
from opsdk.runtime.ir.graph import constant, placeholder
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer

F32 = np.float32


def ones(n: int) -> np.ndarray:
    return np.ones(n, F32)


# ------------------------------------------------------------------------------------------ cond
def test_cond_returns_the_branch_taken(graph):
    x = placeholder("float32", shape=[3], name="x")
    p = placeholder("bool", shape=[], name="p")
    y = cond(p, lambda: x * 2.0, lambda: -x, name="pick")
    value = np.array([1.0, -2.0, 3.0], F32)
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: value, p: True}), value * 2)
        np.testing.assert_array_equal(sess.run(y, {x: value, p: False}), -value)
    assert y.op.type == "cond" and y.op.name == "pick"


def test_only_the_taken_branch_runs(graph, registry, hooks):
    x = placeholder("float32", shape=[3], name="x")
    p = placeholder("bool", shape=[], name="p")
    y = cond(p, lambda: apply_op(registry, "counted_add", [x, x], {}),
             lambda: apply_op(registry, "explode", [x], {}), name="c")
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: ones(3), p: True}), 2 * ones(3))
        assert hooks["calls"]["counted_add"] == 1
        with pytest.raises(OpsdkError, match=r"cond \(node 'c'\).*explode.*bad input"):
            sess.run(y, {x: ones(3), p: False})
    assert hooks["calls"]["counted_add"] == 1  # the false run did not touch the true branch


def test_cond_captures_outer_tensors_as_inputs(graph):
    x = placeholder("float32", shape=[3], name="x")
    z = placeholder("float32", shape=[3], name="z")
    p = placeholder("bool", shape=[], name="p")
    y = cond(p, lambda: x + 1.0, lambda: z * 3.0)
    assert list(y.op.inputs) == [p, x, z]  # pred, then every capture of either branch
    then_b, else_b = y.op.attrs["then_branch"], y.op.attrs["else_branch"]
    assert len(then_b.inputs) == len(else_b.inputs) == 2
    assert all(t.graph is then_b.graph for t in then_b.inputs)
    with Session(graph) as sess:
        out = sess.run(y, {x: ones(3), z: ones(3), p: False})
    np.testing.assert_array_equal(out, 3 * ones(3))


def test_cond_nested_outputs_and_numbers(graph):
    x = placeholder("float32", shape=[2], name="x")
    p = placeholder("bool", shape=[], name="p")
    a, (b, c) = cond(p, lambda: (x, [x * 2.0, 1.0]), lambda: (-x, [x, 5.0]))
    with Session(graph) as sess:
        got = sess.run([a, b, c], {x: ones(2), p: False})
    np.testing.assert_array_equal(got[0], -ones(2))
    np.testing.assert_array_equal(got[1], ones(2))
    assert float(got[2]) == 5.0


@pytest.mark.parametrize("true_fn, false_fn, message", [
    (lambda x: (x, x), lambda x: x, r"the branches return different structures"),
    (lambda x: x, lambda x: x > 0.0, r"output 0 is float32 in true_fn but bool"),
    (lambda x: x, lambda x: x[:2], r"output 0 has shape \[3\] in true_fn but \[2\]"),
])
def test_cond_branch_mismatch_names_the_node(graph, true_fn, false_fn, message):
    x = placeholder("float32", shape=[3], name="x")
    p = placeholder("bool", shape=[], name="p")
    with pytest.raises(OpsdkError, match=r"cond \(node 'bad'\): " + message):
        cond(p, lambda: true_fn(x), lambda: false_fn(x), name="bad")


def test_cond_output_shape_is_the_most_specific_common_shape(graph):
    a = placeholder("float32", shape=[3, 4], name="a")
    b = placeholder("float32", shape=[3, None], name="b")
    p = placeholder("bool", shape=[], name="p")
    assert cond(p, lambda: a, lambda: b).shape == (3, None)
    assert cond(p, lambda: a, lambda: a * 2.0).shape == (3, 4)
    assert join_shapes((3, 4), (3, 5)) == (3, None)
    assert join_shapes((3,), None) is None


def test_cond_pred_must_be_a_bool_scalar(graph):
    x = placeholder("float32", shape=[3], name="x")
    with pytest.raises(OpsdkError, match=r"cond \(node 'c'\): pred 'x:0' is float32"):
        cond(x, lambda: x, lambda: x, name="c")
    with pytest.raises(OpsdkError, match=r"pred .* has shape \[3\]"):
        cond(x > 0.0, lambda: x, lambda: x, name="c2")


def test_cond_in_cond(graph):
    x = placeholder("float32", shape=[], name="x")
    y = cond(x > 0.0, lambda: cond(x > 10.0, lambda: x * 100.0, lambda: x * 10.0), lambda: -x)
    with Session(graph) as sess:
        assert [float(sess.run(y, {x: v})) for v in (20.0, 2.0, -3.0)] == [2000.0, 20.0, 3.0]


def test_assign_in_a_branch_runs_only_with_it(graph):
    v = Variable(np.zeros(2, F32), name="v")
    p = placeholder("bool", shape=[], name="p")
    step = cond(p, lambda: v.assign_add(ones(2)), lambda: v.value() * 1.0)
    init = global_variables_initializer()
    with Session(graph) as sess:
        sess.run(init)
        sess.run(step, {p: False})
        sess.run(step, {p: True})
        sess.run(step, {p: True})
        np.testing.assert_array_equal(sess.run(v.value()), 2 * ones(2))


# ------------------------------------------------------------------------------------ while_loop
def test_while_loop_sums(graph):
    x = placeholder("float32", shape=[3], name="x")
    i, s = while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + x), [0, x * 0.0], name="loop")
    with Session(graph) as sess:
        got_i, got_s = sess.run([i, s], {x: np.array([1.0, 2.0, 3.0], F32)})
    assert int(got_i) == 4
    np.testing.assert_array_equal(got_s, np.array([4.0, 8.0, 12.0], F32))


def test_while_loop_nested_loop_vars(graph):
    x = placeholder("float32", shape=[], name="x")

    def body(i, pair):
        a, b = pair
        return i + 1, (b, a + b)  # Fibonacci
    i, (a, b) = while_loop(lambda i, pair: i < 10, body, [0, (x, x)])
    with Session(graph) as sess:
        assert [float(v) for v in sess.run([a, b], {x: 1.0})] == [89.0, 144.0]


def test_maximum_iterations_stops_the_loop(graph, registry, hooks):
    x = placeholder("float32", shape=[2], name="x")
    out = while_loop(lambda s: constant(True), lambda s: apply_op(registry, "counted_add", [s, x], {}),
                     x, maximum_iterations=3)
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(out, {x: ones(2)}), 4 * ones(2))
    assert hooks["calls"]["counted_add"] == 3


def test_shape_invariant_with_unknown_dims(graph, registry):
    x = placeholder("float32", shape=[1], name="x")
    out = while_loop(lambda s: apply_op(registry, "reduce_sum", [s], {}) < 5.0,
                     lambda s: apply_op(registry, "concat", [[s, s]], {"axis": 0}),
                     [x], shape_invariants=[[None]])
    assert out[0].shape == (None,)
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(out[0], {x: ones(1)}), ones(8))


def test_shape_invariant_broken_at_build_names_loop_and_variable(graph, registry):
    x = placeholder("float32", shape=[1], name="x")
    with pytest.raises(OpsdkError, match=r"while_loop \(node 'grow'\): body gives loop variable "
                       r"loop_vars\[1\] \('x:0'\) the shape \[2\].*invariant \[1\]"):
        while_loop(lambda i, s: i < 3,
                   lambda i, s: (i + 1, apply_op(registry, "concat", [[s, s]], {"axis": 0})),
                   [0, x], name="grow")


def test_shape_invariant_checked_each_iteration_at_run_time(graph):
    x = placeholder("float32", shape=None, name="x")  # unknown rank: only run time can tell
    out = while_loop(lambda s: constant(False), lambda s: s, x, shape_invariants=[3], name="w")
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(out, {x: ones(3)}), ones(3))
        with pytest.raises(OpError, match=r"while_loop \(node 'w'\): loop variable loop_vars "
                           r"\('x:0'\) has shape \[4\] \(starts\).*invariant \[3\]"):
            sess.run(out, {x: ones(4)})


def test_body_must_keep_dtype_and_structure(graph):
    x = placeholder("float32", shape=[], name="x")
    with pytest.raises(OpsdkError, match=r"while_loop \(node 'l'\): body turns loop variable "
                       r"loop_vars\[1\] \('x:0'\) from float32 into bool"):
        while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s > 0.0), [0, x], name="l")
    with pytest.raises(OpsdkError, match=r"body returns \(\*,\) but the loop variables are"):
        while_loop(lambda i, s: i < 3, lambda i, s: (i + 1,), [0, x], name="l2")


def test_while_in_while_and_cond_in_while(graph):
    n = placeholder("int64", shape=[], name="n")

    def outer_body(i, total):
        _, inner = while_loop(lambda j, t: j < i, lambda j, t: (j + 1, t + 1), [0, total])
        bonus = cond(i > 2, lambda: inner * 10, lambda: inner)
        return i + 1, bonus
    _, total = while_loop(lambda i, t: i < n, outer_body, [0, constant(0, dtype="int64")])
    # i = 0..4: the inner loop adds i, then i > 2 multiplies by 10: ((0+1+2+3)*10 + 4)*10
    with Session(graph) as sess:
        assert int(sess.run(total, {n: 5})) == 640
        assert int(sess.run(total, {n: 3})) == 3


def test_loop_captures_variable_reads_as_inputs(graph):
    w = Variable(np.full(2, 3.0, F32), name="w")
    out = while_loop(lambda k, s: k < 2, lambda k, s: (k + 1, w * s), [0, ones(2)], name="pow")
    op = out[0].op
    assert w.value() in op.inputs
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        np.testing.assert_array_equal(sess.run(out[1]), np.full(2, 9.0, F32))


def test_kept_intermediates_record_each_iteration(graph):
    x = placeholder("float32", shape=[2], name="x")
    i, s = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 2.0), [0, x],
                      keep_intermediates=True, name="hist")
    count, (hist_i, hist_s) = loop_intermediates(i.op)
    assert hist_s.shape == (None, 2)
    with Session(graph) as sess:
        got = sess.run([count, hist_i, hist_s, s], {x: np.array([1.0, -1.0], F32)})
    assert int(got[0]) == 3
    np.testing.assert_array_equal(got[1], [0, 1, 2])
    np.testing.assert_array_equal(got[2], [[1, -1], [2, -2], [4, -4]])
    np.testing.assert_array_equal(got[3], [8, -8])


def test_intermediates_must_be_asked_for(graph):
    i = while_loop(lambda i: i < 3, lambda i: i + 1, constant(0), name="plain")
    with pytest.raises(OpsdkError, match=r"while_loop \(node 'plain'\) does not keep"):
        loop_intermediates(i.op)


def test_kernel_failure_in_body_names_loop_and_inner_node(graph, registry):
    x = placeholder("float32", shape=[2], name="x")
    out = while_loop(lambda s: constant(True), lambda s: apply_op(registry, "explode", [s], {},
                                                                  name="boom"), x, name="bad")
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match=r"while_loop \(node 'bad'\), in 'bad/body': "
                           r"explode \(node 'boom'\): ValueError: bad input"):
            sess.run(out, {x: ones(2)})
