"""Optional inputs in the runtime: None given eagerly and in a graph (no edge; the kernel gets
None), a required input refused as None, gradients (None for the absent input, finite
differences for the present ones), a node with an absent input in a folded constant, a loop body
and a graph file's round trip."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from opsdk.registry import Registry, parse_opdef
from opsdk.registry.errors import OpError
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.control_flow.builders import while_loop
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.io.serialize import GraphFileError, export_graph, import_graph
from opsdk.runtime.ir.graph import Graph, placeholder

from test_gradients import check_against_numeric

OPS = """
op: scaled_sum
summary: Row sums of x, each column weighted by w (1 without w), plus b.
type_attrs: {T: [float64]}
inputs:
  w: {dtype: T, shape: [p], optional: true}
  x: {dtype: T, shape: [n, p]}
  b: {dtype: T, shape: [n], optional: true}
outputs:
  y: {dtype: T, shape: [n]}
gradient: scaled_sum_grad
kernels: {python: opt_kernels.py:scaled_sum}
reference: "(x * (1 if w is None else w)).sum(-1) + (0 if b is None else b)"
---
op: scaled_sum_grad
summary: Gradient of scaled_sum.
type_attrs: {T: [float64]}
inputs:
  w: {dtype: T, shape: [p], optional: true}
  x: {dtype: T, shape: [n, p]}
  b: {dtype: T, shape: [n], optional: true}
  grad_y: {dtype: T, shape: [n]}
outputs:
  grad_w: {dtype: T, shape: [p]}
  grad_x: {dtype: T, shape: [n, p]}
  grad_b: {dtype: T, shape: [n]}
kernels: {python: opt_kernels.py:scaled_sum_grad}
"""

KERNELS = '''
SEEN = []


def scaled_sum(xp, w, x, b):
    SEEN.append((w is None, b is None))
    y = (x * (1 if w is None else w)).sum(-1)
    return y if b is None else y + b


def scaled_sum_grad(xp, w, x, b, grad_y):
    SEEN.append(("grad", w is None, b is None))
    grad_w = xp.zeros(x.shape[1]) if w is None else (x * grad_y[:, None]).sum(0)
    grad_x = grad_y[:, None] * (xp.ones(x.shape[1]) if w is None else w)[None, :]
    return grad_w, grad_x, grad_y.copy() if b is not None else xp.zeros_like(grad_y)
'''


@pytest.fixture(scope="module")
def reg(registry, tmp_path_factory):
    root = tmp_path_factory.mktemp("optional")
    (root / "opdefs").mkdir()
    (root / "opdefs" / "opt_ops.yaml").write_text(textwrap.dedent(OPS))
    (root / "opdefs" / "opt_kernels.py").write_text(textwrap.dedent(KERNELS))
    specs = {name: registry.get(name) for name in registry.names()}
    specs.update({s.name: s for s in parse_opdef(root / "opdefs" / "opt_ops.yaml", root)})
    return Registry(specs)


def _seen(reg):
    from opsdk.registry import load_callable
    return load_callable(reg.get("scaled_sum"), "opdefs/opt_kernels.py:scaled_sum", "python kernel").__globals__["SEEN"]


X = np.arange(6.0).reshape(2, 3)
W = np.array([1.0, 0.0, 2.0])
B = np.array([10.0, 20.0])


def test_eager_calls_pass_none_to_the_kernel(reg):
    np.testing.assert_array_equal(apply_op(reg, "scaled_sum", [None, X, None], {}), [3.0, 12.0])
    np.testing.assert_array_equal(apply_op(reg, "scaled_sum", [W, X, B], {}), [14.0, 33.0])
    assert _seen(reg)[-2:] == [(True, True), (False, False)]
    with pytest.raises(OpError, match=r"^scaled_sum: input 'x' is required; got None$"):
        apply_op(reg, "scaled_sum", [W, None, None], {})
    with pytest.raises(OpError, match=r"input 'w' has size 2 in axis 0 but x has 3 \(dim p\)"):
        apply_op(reg, "scaled_sum", [np.ones(2), X, None], {})


def test_an_absent_input_is_no_edge_and_the_kernel_gets_none(reg):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [None, 3], name="x")
        b = placeholder("float64", [None], name="b")
        y = apply_op(reg, "scaled_sum", [None, x, b], {}, name="y")
    assert y.op.absent == frozenset({"w"}) and [t.name for t in y.op.inputs] == ["x:0", "b:0"]
    assert y.shape == (None,)
    with Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: X, b: B}), [13.0, 32.0])
        # The actual shapes are checked at run time (the static ones were open), w left out.
        with pytest.raises(OpError, match=r"input 'b' has size 3 in axis 0 but x has 2 \(dim n\)"):
            sess.run(y, {x: X, b: np.ones(3)})


def test_gradients_skip_the_absent_input_and_match_finite_differences(reg):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2, 3], name="x")
        b = placeholder("float64", [2], name="b")
        y = apply_op(reg, "scaled_sum", [None, x, b], {}, name="y")
        loss = apply_op(reg, "reduce_sum", [y * y], {})
        gx, gb = gradients(loss, [x, b])
    grad_node = gx.op if gx.op.type == "scaled_sum_grad" else next(
        op for op in g.operations if op.type == "scaled_sum_grad")
    assert grad_node.absent == frozenset({"w"})
    check_against_numeric(g, loss, [x, b], {x: X, b: B})
    assert ("grad", True, False) in _seen(reg)


def test_a_folded_node_and_a_loop_body_with_an_absent_input(reg):
    g = Graph()
    with g.as_default():
        folded = apply_op(reg, "scaled_sum", [None, X, None], {})
        x = placeholder("float64", [2, 3], name="x")

        def body(i, s):
            return i + 1, s + apply_op(reg, "scaled_sum", [None, x, None], {})
        _, total = while_loop(lambda i, s: i < 2, body, [0, np.zeros(2)])
    with Session(g) as sess:
        np.testing.assert_array_equal(sess.run(folded), [3.0, 12.0])
        np.testing.assert_array_equal(sess.run(total, {x: X}), 2 * X.sum(1))


def test_a_graph_file_keeps_the_absent_input(reg):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2, 3], name="x")
        apply_op(reg, "scaled_sum", [W, x, None], {}, name="y")
    text = export_graph(g)
    assert '"absent": [\n    "b"\n   ]' in text or '"absent": ["b"]' in text
    g2 = import_graph(text, registry=reg)
    node = g2.get_operation("y")
    assert node.absent == frozenset({"b"}) and len(node.inputs) == 2
    with Session(g2) as sess:
        np.testing.assert_array_equal(sess.run("y:0", {"x:0": X}), [4.0, 13.0])
    with pytest.raises(GraphFileError, match=r"\"absent\" names \['x'\], which are not optional inputs"):
        import_graph(text.replace('"b"', '"x"', 1), registry=reg)


def test_a_node_with_an_absent_input_on_another_device(reg):
    from opsdk.runtime.ir.graph import device

    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2, 3], name="x")
        with device("/test:0"):  # its own partition: the node is cloned there, absent input too
            y = apply_op(reg, "scaled_sum", [None, x, None], {}, name="y")
        z = apply_op(reg, "neg", [y], {}, name="z")
    with Session(g) as sess:
        assert sess.explain(z, {x: None}, show=False).placement["y"].endswith("/device:TEST:0")
        np.testing.assert_array_equal(sess.run(z, {x: X}), [-3.0, -12.0])


def test_a_loop_body_with_an_absent_input_round_trips_through_a_graph_file(reg):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2, 3], name="x")

        def body(i, s):
            return i + 1, s + apply_op(reg, "scaled_sum", [None, x, None], {})
        _, total = while_loop(lambda i, s: i < 2, body, [0, np.zeros(2)], name="loop")
        # The loop's gradient replays the body: the node keeps its absent input there too.
        (gx,) = gradients(apply_op(reg, "reduce_sum", [total], {}), [x])
    g2 = import_graph(export_graph(g), registry=reg)
    with Session(g2) as sess:
        np.testing.assert_array_equal(sess.run(total.name, {"x:0": X}), 2 * X.sum(1))
    with Session(g) as sess:
        np.testing.assert_array_equal(sess.run(gx, {x: X}), np.full((2, 3), 2.0))
