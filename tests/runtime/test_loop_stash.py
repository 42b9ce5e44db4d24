"""A loop's gradient reads the values of its body recorded by the forward loop (what the gradient
ops read: a matmul's operand, an activation's output) instead of computing them again; values
whose shape may change across iterations are computed again, and a second-order gradient flows
through the recorded values (control_flow/gradients.py, `stash_intermediates`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.control_flow.builders import while_loop
from opsdk.runtime.control_flow.gradients import _needed_ops
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.io.graph_checks import GraphFileError
from opsdk.runtime.io.serialize import export_graph, import_graph
from opsdk.runtime.ir.graph import Graph, placeholder

from finite_differences import numeric_grad

RNG = np.random.default_rng(3)
XS = RNG.normal(size=(4, 2, 3))  # 4 steps of a batch of 2, 3 features
H0 = RNG.normal(size=(2, 5))
W = RNG.normal(size=(8, 5)) * 0.5
B = RNG.normal(size=(5,)) * 0.1


@pytest.fixture
def op(registry):
    def call(op_name, *inputs, name=None, **attrs):
        return apply_op(registry, op_name, list(inputs), attrs, name=name)
    return call


def _rnn(op):
    """h <- tanh(concat(x[i], h) @ w + b) over the 4 steps; the loop node, the loss and the
    placeholders (batch open: the recorded values' shapes are known only when it runs)."""
    xs = placeholder("float64", [4, None, 3], name="xs")
    h0 = placeholder("float64", [None, 5], name="h0")
    w = placeholder("float64", [8, 5], name="w")
    b = placeholder("float64", [5], name="b")

    def body(i, h):
        joined = op("concat", [op("gather", xs, i, axis=0), h], axis=1)
        return i + 1, op("tanh", op("bias_add", op("matmul", joined, w), b))
    _, h = while_loop(lambda i, h: i < 4, body, [0, h0], name="rnn")
    loss = op("reduce_sum", h * h)
    return h.op, loss, [xs, h0, w, b]


def _feeds(places):
    return dict(zip(places, (XS, H0, W, B)))


def _live_types(loop_grad_op):
    return [o.type for o in _needed_ops(loop_grad_op.attrs["body"])]


def test_the_gradient_reads_recorded_values_and_runs_no_forward_op_again(graph, op):
    loop, loss, places = _rnn(op)
    grads = gradients(loss, places)
    # What the gradient reads: the matmul's operand (matmul_grad) and tanh's output (tanh_grad);
    # the matmul's output, which bias_add_grad reads for its shape, shares tanh's output's.
    body = loop.attrs["body"]
    assert [t.op.type for t in body.outputs[2:]] == ["concat", "tanh"]
    backward = next(o for o in graph.operations if o.type == "while_loop" and o is not loop)
    types = _live_types(backward)
    assert "matmul" not in types and "tanh" not in types and "bias_add" not in types
    assert "concat" not in types  # concat_grad reads its inputs for their shapes alone
    feeds = _feeds(places)
    with Session(graph) as sess:
        got = sess.run(grads, feeds)
        for x, g in zip(places, got):
            np.testing.assert_allclose(g, numeric_grad(sess, loss, x, feeds), rtol=1e-6,
                                       atol=1e-8)


def test_a_value_whose_shape_may_change_is_computed_again(graph, op):
    """The positive entries of s, a count that changes from one iteration to the next: their
    gather is computed again by the gradient, never recorded (recording would need one shape)."""
    x = placeholder("float64", [6], name="x")

    def body(i, s):
        where = op("reshape", op("where_indices", op("greater", s, op("zeros_like", s))),
                   shape=[-1])
        picked = op("gather", s, where, axis=0)
        return i + 1, s * 0.9 - x * op("reduce_sum", picked * picked)
    _, s = while_loop(lambda i, s: i < 3, body, [0, x], name="loop")
    loss = op("reduce_sum", s * s)
    (gx,) = gradients(loss, [x])
    stashed = s.op.attrs["body"].outputs[2:]
    assert all(t.shape is None or None not in t.shape for t in stashed)  # none of picked's size
    xv = np.array([0.5, -0.3, 0.8, -0.1, 0.2, -0.6])
    with Session(graph) as sess:
        np.testing.assert_allclose(sess.run(gx, {x: xv}), numeric_grad(sess, loss, x, {x: xv}),
                                   rtol=1e-6, atol=1e-8)


def test_a_second_order_gradient_flows_through_the_recorded_values(graph, op):
    x = placeholder("float64", [3], name="x")
    _, s = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, op("tanh", s * x) + s), [0, x],
                      name="loop")
    (gx,) = gradients(op("reduce_sum", s), [x])
    assert s.op.attrs["stashed"] >= 1  # the backward loop reads tanh's recorded output
    square = op("reduce_sum", gx * gx)
    (hx,) = gradients(square, [x])
    xv = np.array([0.3, -0.7, 1.1])
    with Session(graph) as sess:
        np.testing.assert_allclose(sess.run(hx, {x: xv}),
                                   numeric_grad(sess, square, x, {x: xv}), rtol=1e-5, atol=1e-7)


def test_a_loop_of_no_iterations_gives_zero_gradients_of_recorded_values(graph, op):
    loop, loss, places = _rnn(op)
    n = placeholder("int64", [], name="n")
    xs, h0, w, b = places
    _, h = while_loop(lambda i, h: i < n, lambda i, h: (i + 1, op("tanh", op("bias_add", op(
        "matmul", h, op("slice", w, begin=[0, 0], size=[5, 5])), b))), [0, h0], name="short")
    (gw,) = gradients(op("reduce_sum", h * h), [w])
    with Session(graph) as sess:
        got = sess.run(gw, {**_feeds(places), n: np.int64(0)})
    np.testing.assert_array_equal(got, np.zeros_like(W))


def test_a_graph_file_keeps_the_recorded_values_and_checks_them(graph, op):
    loop, loss, places = _rnn(op)
    grads = gradients(loss, places)
    doc = json.loads(export_graph(graph))
    imported = import_graph(json.dumps(doc))
    feeds = _feeds(places)
    with Session(graph) as sess:
        want = sess.run(grads, feeds)
    with Session(imported) as sess:
        got = sess.run([g.name for g in grads], {p.name: v for p, v in feeds.items()})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    node = next(n for n in doc["nodes"] if n["name"] == loop.name)
    for key, value, words in (
            ("stashed", {"type": "int", "value": 5}, "the body gives 4 values"),
            ("stashed", {"type": "int", "value": -1}, "attr stashed must be a count"),
            ("stashed_shapes", {"type": "list", "value": [{"type": "int", "value": 2}]},
             "attr stashed_shapes must list stashed values (0..1)")):
        changed = json.loads(json.dumps(doc))
        next(n for n in changed["nodes"] if n["name"] == loop.name)["attrs"][key] = value
        with pytest.raises(GraphFileError, match=words.replace("(", r"\(").replace(")", r"\)")):
            import_graph(json.dumps(changed))
    assert node["attrs"]["stashed"] == {"type": "int", "value": 2}


def test_a_recorded_loop_variable_must_keep_its_shape(graph, op):
    x = placeholder("float64", [None], name="x")
    _, s = while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, op("concat", [s, x], axis=0)),
                      [0, x], shape_invariants=[(), (None,)], name="grow")
    (gx,) = gradients(op("reduce_sum", s), [x])
    with Session(graph) as sess, pytest.raises(OpsdkError, match="needs loop variable .* to keep "
                                                                "one shape across iterations"):
        sess.run(gx, {x: np.ones(2)})


def test_a_stand_in_checks_the_sizes_declared(graph, op):
    dims = placeholder("int64", [2], name="dims")
    zeros = op("zeros_view_dims", dims, dtype="float32", shape=[-1, 3])
    assert zeros.shape == (None, 3)
    with Session(graph) as sess:
        assert sess.run(zeros, {dims: np.array([2, 3])}).shape == (2, 3)
        with pytest.raises(OpsdkError, match=r"does not have the sizes declared when the graph "
                                             r"was built, \[-1, 3\]"):
            sess.run(zeros, {dims: np.array([2, 4])})
