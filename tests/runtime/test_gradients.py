"""Autodiff: `gradients` against central finite differences of the same graph (float64), path
sums, stop_gradient, unconnected inputs, the no-gradient error, the built pairwise_manhattan
kernels, and cond / while_loop gradients, nested ones included."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.control_flow.builders import cond, while_loop
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.ir.graph import Graph, constant, placeholder
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer

from finite_differences import numeric_grad


@pytest.fixture
def op(registry):
    """`op("exp", x, axes=[0], name="e")`: an op of the test registry, by name."""
    def call(op_name, *inputs, name=None, **attrs):
        return apply_op(registry, op_name, list(inputs), attrs, name=name)
    return call


def check_against_numeric(graph, y, xs, feeds, rtol=1e-6, atol=1e-8):
    with graph.as_default():
        grads = gradients(y, xs)
    with Session(graph) as sess:
        got = sess.run(grads, feeds)
        for x, g in zip(xs, got):
            assert g.shape == feeds[x].shape and g.dtype == np.float64
            np.testing.assert_allclose(g, numeric_grad(sess, y, x, feeds), rtol=rtol, atol=atol)


def test_softmax_layer_matches_finite_differences(graph, op):
    rng = np.random.default_rng(0)
    x = placeholder("float64", [None, 4], name="x")
    w = placeholder("float64", [4, 3], name="w")
    b = placeholder("float64", [3], name="b")
    labels = constant(np.eye(3)[[0, 2, 1, 1, 0]])
    hidden = op("tanh", op("matmul", x, w) + b)
    loss = op("reduce_mean", op("softmax_cross_entropy_with_logits", labels, hidden))
    feeds = {x: rng.normal(size=(5, 4)), w: rng.normal(size=(4, 3)), b: rng.normal(size=3)}
    check_against_numeric(graph, loss, [x, w, b], feeds)


def test_broadcasts_powers_and_slices_match_finite_differences(graph, op):
    rng = np.random.default_rng(1)
    a = placeholder("float64", [3, 1], name="a")
    c = placeholder("float64", [4], name="c")
    joined = a * c + op("reshape", op("exp", c), shape=[1, 4])  # (3, 4)
    y = op("sqrt", op("square", joined) + 1.0) / (op("log", c * c + 2.0) ** a[0:1, :])
    y = op("reduce_sum", y[1:, :2], axes=[0], keepdims=True) @ a[1:, :] * op("sigmoid", a[:, 0])
    feeds = {a: rng.uniform(0.5, 1.5, size=(3, 1)), c: rng.uniform(-1, 1, size=4)}
    check_against_numeric(graph, y, [a, c], feeds)


def test_contributions_along_several_paths_are_summed(graph, op):
    x = placeholder("float64", [3], name="x")
    y = x * x + 3.0 * x + op("exp", x) * x  # x reaches y through four edges
    (gx,) = gradients(y, [x])
    xv = np.array([0.5, -1.0, 2.0])
    with Session(graph) as sess:
        np.testing.assert_allclose(sess.run(gx, {x: xv}),
                                   2 * xv + 3 + np.exp(xv) * (xv + 1), rtol=1e-12)
    adds = [o for o in graph.operations if o.type == "add" and o.name.startswith("gradients/")]
    assert len(adds) >= 3  # the four contributions were summed by add nodes


def test_stop_gradient_and_integer_tensors_stop_the_gradient(graph, op):
    x = placeholder("float64", [3], name="x")
    y = op("stop_gradient", x) * x + op("cast", op("cast", x, DstT="int32"), DstT="float64")
    gx, = gradients(y, x)
    xv = np.array([1.5, -2.0, 3.0])
    with Session(graph) as sess:
        np.testing.assert_allclose(sess.run(gx, {x: xv}), xv)  # only the second factor's path


def test_unconnected_inputs_get_none(graph, op):
    x = placeholder("float64", [3], name="x")
    unused = placeholder("float64", [3], name="unused")
    stopped = placeholder("float64", [3], name="stopped")
    count = placeholder("int64", [3], name="count")
    y = op("reduce_sum", x * 2.0 + op("stop_gradient", stopped) + op("cast", count,
                                                                      DstT="float64"))
    gx, gu, gs, gc = gradients(y, [x, unused, stopped, count])
    assert gx is not None and (gu, gs, gc) == (None, None, None)
    with Session(graph) as sess:
        got = sess.run(gx, {x: np.zeros(3), stopped: np.ones(3), count: np.arange(3)})
        np.testing.assert_allclose(got, np.full(3, 2.0))


def test_an_op_without_gradient_names_itself_and_the_path(graph, op, registry):
    x = placeholder("float64", [2, 3], name="x")
    other = placeholder("float64", [4, 3], name="other")
    f = apply_op(registry, "l1_dist", [op("exp", x, name="e"), other], {}, name="f")
    loss = op("reduce_sum", f, name="loss")
    with pytest.raises(OpsdkError) as info:
        gradients(loss, x)
    assert str(info.value).startswith(
        "no gradient for op 'l1_dist' (node 'f'), on the path loss <- f <- e <- x; declare")
    with pytest.raises(OpsdkError, match="on the path loss <- f <- other;"):
        gradients(loss, other)
    # The op is not between ys and xs: no error.
    other_loss = op("reduce_sum", op("exp", x)) + op("reduce_sum", f)
    assert gradients(other_loss, f)[0] is not None


def test_grad_ys_and_variables(graph, op):
    w = Variable(np.array([1.0, 2.0]), name="w")
    x = placeholder("float64", [2], name="x")
    y = w * x
    gw, gx = gradients(y, [w, x], grad_ys=[np.array([10.0, 100.0])])
    with Session(graph) as sess:
        sess.run(global_variables_initializer())
        got_w, got_x = sess.run([gw, gx], {x: np.array([3.0, 4.0])})
    np.testing.assert_allclose(got_w, [30.0, 400.0])
    np.testing.assert_allclose(got_x, [10.0, 200.0])
    with pytest.raises(OpsdkError, match="2 ys but 1 grad_ys"):
        gradients([y, y], [x], grad_ys=[np.ones(2)])


def test_pairwise_manhattan_through_the_built_kernels():
    from opsdk import ops
    rng = np.random.default_rng(2)
    graph = Graph()
    with graph.as_default():
        x = placeholder("float64", [5, 3], name="x")
        y = placeholder("float64", [4, 3], name="y")
        loss = ops.reduce_sum(ops.square(ops.pairwise_manhattan(x, y, name="dist")))
        gx, gy = gradients(loss, [x, y])
    assert gx.op.type == "pairwise_manhattan_grad" or any(
        o.type == "pairwise_manhattan_grad" for o in graph.operations)
    feeds = {x: rng.normal(size=(5, 3)), y: rng.normal(size=(4, 3))}
    with Session(graph) as sess:
        got_x, got_y = sess.run([gx, gy], feeds)
        np.testing.assert_allclose(got_x, numeric_grad(sess, loss, x, feeds), rtol=1e-6)
        np.testing.assert_allclose(got_y, numeric_grad(sess, loss, y, feeds), rtol=1e-6)


# --------------------------------------------------------------------------- control flow
def test_cond_gradient_follows_the_branch_taken(graph, op):
    x = placeholder("float64", [3], name="x")
    y = placeholder("float64", [3], name="y")
    out = cond(op("reduce_sum", x) > 0.0, lambda: x * y, lambda: -x)
    gx, gy = gradients(out, [x, y])
    xv, yv = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    with Session(graph) as sess:
        for sign in (1.0, -1.0):
            feeds = {x: sign * xv, y: yv}
            got = sess.run([gx, gy], feeds)
            np.testing.assert_allclose(got[0], numeric_grad(sess, out, x, feeds), atol=1e-8)
            np.testing.assert_allclose(got[1], numeric_grad(sess, out, y, feeds), atol=1e-8)


def test_a_float_constant_read_inside_control_flow_gets_its_gradient(graph, op):
    # An outer constant a branch or body reads was copied into it (no edge), so its gradient
    # through the node was lost: d(x^4)/dx came out as x^3 (the loop value's path alone).
    x = constant(np.float64(2.0), name="x")
    _, y = while_loop(lambda k, y: k < 3, lambda k, y: (k + 1, y * x), [constant(0), x])
    z = cond(x > 1.0, lambda: x * x * 3.0, lambda: x)
    gy, gz = gradients(y, [x])[0], gradients(z, [x])[0]
    with Session(graph) as sess:
        got = sess.run([y, gy, z, gz])
    np.testing.assert_allclose(got, [16.0, 32.0, 12.0, 12.0])


def test_while_loop_gradient_uses_the_recorded_intermediates(graph, op):
    x = placeholder("float64", [3], name="x")
    s0 = placeholder("float64", [3], name="s0")
    n = placeholder("int64", [], name="n")
    _, s = while_loop(lambda i, s: i < n, lambda i, s: (i + 1, op("tanh", s * x) + s),
                      [constant(0, "int64"), s0], keep_intermediates=True)
    feeds = {x: np.array([0.3, -0.7, 1.1]), s0: np.array([0.5, 0.2, -0.4])}
    for steps in (0, 1, 4):
        check_against_numeric(graph, s, [x, s0], {**feeds, n: np.int64(steps)})


def test_a_gradient_through_the_recorded_histories_reaches_the_loop_inputs(graph, op):
    # h[i], the value iteration i received, as tf.scan returns it: what reads h[i] (weighted
    # per row here) and the final value both send gradients back through the iterations
    from opsdk.runtime.control_flow.builders import loop_intermediates
    x = placeholder("float64", [3], name="x")
    s0 = placeholder("float64", [3], name="s0")
    n = placeholder("int64", [], name="n")
    i, s = while_loop(lambda i, s: i < n, lambda i, s: (i + 1, op("tanh", s * x) + s),
                      [constant(0, "int64"), s0], keep_intermediates=True)
    _, (hist_i, hist) = loop_intermediates(s.op)
    rows = op("cast", hist_i, DstT="float64") + 1.0
    weighted = op("reduce_sum", hist * op("reshape", rows, shape=[-1, 1])) + s * 0.5
    feeds = {x: np.array([0.3, -0.7, 1.1]), s0: np.array([0.5, 0.2, -0.4])}
    for steps in (0, 1, 4):
        check_against_numeric(graph, weighted, [x, s0], {**feeds, n: np.int64(steps)})
    only_history = op("reduce_sum", hist * hist)  # no gradient reaches the final value
    check_against_numeric(graph, only_history, [x, s0], {**feeds, n: np.int64(3)})


def test_while_loop_built_without_intermediates_starts_recording_for_its_gradient(graph, op):
    x = placeholder("float64", [3], name="x")
    _, s = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, op("tanh", s * x) + s), [0, x],
                      name="loop")
    loop = s.op
    held = list(loop.outputs)
    xv = np.array([0.3, -0.7, 1.1])
    with Session(graph) as sess:
        before = sess.run(s, {x: xv})  # a plan built before the node records anything
        assert loop.attrs["keep_intermediates"] is False and len(loop.outputs) == 3
        (gx,) = gradients(s, [x])
        # The node gained one history output per loop var, then one per value of the body the
        # gradient reads (tanh's output; tanh's input, which tanh_grad takes only as a buffer
        # of its shape, shares that output's, so nothing more); what the user held is unchanged.
        assert loop.attrs["keep_intermediates"] is True
        assert loop.outputs[:3] == tuple(held) and len(loop.outputs) == 6  # + i's, s's history
        assert loop.outputs[4].shape == (None, 3) and loop.outputs[3].dtype == "int64"
        assert [t.op.type for t in loop.attrs["body"].outputs[2:]] == ["tanh"]
        assert loop.attrs["stashed"] == 1 and loop.outputs[5].shape == (None, 3)
        np.testing.assert_array_equal(sess.run(s, {x: xv}), before)  # the cached plan still runs
        np.testing.assert_allclose(sess.run(gx, {x: xv}), numeric_grad(sess, s, x, {x: xv}),
                                   rtol=1e-6, atol=1e-8)
    check_against_numeric(graph, s, [x], {x: xv})  # a second gradients() reuses the recording
    assert len(loop.outputs) == 6


def test_nested_loops_without_intermediates(graph, op):
    x = placeholder("float64", [3], name="x")

    def outer_body(i, s):
        _, t = while_loop(lambda j, t: j < i + 1, lambda j, t: (j + 1, op("tanh", t * x) + 0.5),
                          [0, s])
        return i + 1, t * x

    def in_cond():
        return while_loop(lambda j, t: j < 2, lambda j, t: (j + 1, op("tanh", t) * x), [0, x])[1]

    outs = [while_loop(lambda i, s: i < 3, outer_body, [0, x])[1],
            cond(op("reduce_sum", x) > 0.0, in_cond, lambda: x * x)]
    for xv in (np.array([0.9, 0.4, -0.3]), np.array([-0.4, 0.3, -1.2])):
        for out in outs:
            check_against_numeric(graph, out, [x], {x: xv})
    # The outer loop records now; the loop inside its body does not: the gradient replays the
    # body, and the replayed inner loop is the one that records.
    outer = outs[0].op
    inner = [o for o in outer.attrs["body"].graph.operations if o.type == "while_loop"]
    assert outer.attrs["keep_intermediates"] and len(inner) == 1
    assert not inner[0].attrs["keep_intermediates"]
def test_nested_control_flow_gradients(graph, op):
    x = placeholder("float64", [3], name="x")

    def cond_in_loop(i, s):
        return i + 1, cond(op("reduce_sum", s) > 0.0, lambda: s * x, lambda: s + x)

    def loop_in_loop(i, s):
        _, t = while_loop(lambda j, t: j < 2, lambda j, t: (j + 1, t * x), [0, s],
                          keep_intermediates=True)
        return i + 1, t

    def loop_in_cond():
        return while_loop(lambda j, t: j < 2, lambda j, t: (j + 1, op("tanh", t) * x), [0, x],
                          keep_intermediates=True)[1]

    outs = [while_loop(lambda i, s: i < 3, cond_in_loop, [0, x], keep_intermediates=True)[1],
            while_loop(lambda i, s: i < 2, loop_in_loop, [0, x], keep_intermediates=True)[1],
            cond(op("reduce_sum", x) > 0.0, loop_in_cond, lambda: x * x)]
    for xv in (np.array([1.0, 2.0, 0.5]), np.array([-0.4, 0.3, -1.2])):
        for out in outs:
            check_against_numeric(graph, out, [x], {x: xv})


def test_a_loops_gradient_sums_only_the_captured_inputs_asked_for(graph, op):
    # w and x are both read inside the loop; asked for w alone, the gradient's loop carries
    # nothing for x, and w's gradient is unchanged
    x = placeholder("float64", [4, 3], name="x")
    w = placeholder("float64", [3], name="w")
    _, s = while_loop(lambda i, s: i < 4,
                      lambda i, s: (i + 1, op("tanh", s * w) + op("gather", x, i)),
                      [constant(0, "int64"), op("zeros_like", w)])
    (gw,) = gradients(s, [w])
    (gw2, gx) = gradients(s, [w, x])
    loops = sorted((o for o in graph.get_operations() if o.type == "while_loop"
                    and "_grad" in o.name), key=lambda o: o._id)
    # i, g_s, g_w; asked for x too: its rows read at i and their index, as loop values
    assert [len(o.attrs["shape_invariants"]) for o in loops] == [3, 5]
    feeds = {x: np.arange(12.0).reshape(4, 3) / 10, w: np.array([0.5, -0.3, 0.8])}
    with Session(graph) as sess:
        a, b, c = sess.run([gw, gw2, gx], feeds)
        np.testing.assert_allclose(a, b, rtol=1e-12)
        np.testing.assert_allclose(a, numeric_grad(sess, s, w, feeds), rtol=1e-6)
        np.testing.assert_allclose(c, numeric_grad(sess, s, x, feeds), rtol=1e-6, atol=1e-9)


def test_a_capture_read_by_rows_gets_its_gradient_scattered_from_the_rows_read(graph, op):
    # x is read only through gathers of rows (x[i], x[i] again, and rows [i, 0] at once): the
    # gradient's loop carries those rows and indices (no [rows of x]-sized sum per iteration)
    # and scatters them into x's gradient after the loop, repeated rows adding up
    x = placeholder("float64", [None, 3], name="x")
    n = placeholder("int64", [], name="n")

    def body(i, s):
        pair = op("gather", x, op("stack", [i, i * 0]))  # rows i and 0, shape (2, 3)
        return i + 1, op("tanh", s * op("gather", x, i)) + op("gather", x, i) * 0.5 + \
            op("reduce_sum", pair, axes=[0])
    _, s = while_loop(lambda i, s: i < n, body, [constant(0, "int64"), op("zeros_like",
                                                                          op("gather", x, 0))])
    loss = op("reduce_sum", s * s)
    (gx,) = gradients(loss, [x])
    (back,) = [o for o in graph.get_operations() if o.type == "while_loop" and "_grad" in o.name]
    assert back.attrs["recorded"] == [2, 3, 4, 5, 6, 7]  # rows and index of each of 3 reads
    assert (None, 3) not in back.attrs["shape_invariants"]  # no sum shaped as x
    feeds = {x: np.linspace(-1, 1, 15).reshape(5, 3)}
    with Session(graph) as sess:
        for steps in (0, 1, 4):
            got = sess.run(gx, {**feeds, n: np.int64(steps)})
            np.testing.assert_allclose(got, numeric_grad(sess, loss, x, {**feeds,
                                                                         n: np.int64(steps)}),
                                       rtol=1e-6, atol=1e-9)


def test_a_loop_recording_some_variables_keeps_their_histories_only_until_differentiated(
        graph, op):
    x = placeholder("float64", [3], name="x")
    i, s = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * x), [0, x],
                      keep_intermediates=[1], name="some")
    assert s.op.attrs["recorded"] == [1] and len(s.op.outputs) == 4  # i, s, count, s's history
    with Session(graph) as sess:
        hist = sess.run(s.op.outputs[3], {x: [1.0, 2.0, 3.0]})
    np.testing.assert_array_equal(hist, [[1, 2, 3], [1, 4, 9], [1, 8, 27]])
    # a gradient through it records the others too, after the histories it had
    check_against_numeric(graph, s, [x], {x: np.array([1.0, 2.0, 3.0])})
    assert s.op.attrs["recorded"] == [1, 0] and len(s.op.outputs) == 5
    with pytest.raises(OpsdkError, match="lists loop variable positions 0..0"):
        while_loop(lambda i: i < 3, lambda i: i + 1, [0], keep_intermediates=[4])

