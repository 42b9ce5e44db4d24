"""List outputs (`list: N`) in graph mode: one graph output per element, the kernel's list
flattened by the executor and rebuilt for the caller; gradients through concat and stack
against finite differences; export/import of such graphs; and Variables given as op inputs."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from opsdk.registry import Registry, parse_opdef
from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.control_flow.builders import cond, while_loop
from opsdk.runtime.autodiff.gradients import gradients
from opsdk.runtime.ir.graph import Graph, Tensor, placeholder
from opsdk.runtime.io.serialize import export_graph, import_graph
from opsdk.runtime.exec.session import Session
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer

from test_gradients import check_against_numeric, numeric_grad

CHUNK_OPS = """
op: chunks
summary: x cut into k equal pieces, and the sum of x.
type_attrs:
  T: [float64]
attrs:
  k: {type: int, default: 2, min: 1}
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  parts: {dtype: T, shape: ["n // k"], list: k}
  total: {dtype: T, shape: []}
kernels:
  python: chunk_kernels.py:chunks
---
op: short_chunks
summary: Like chunks, but its kernel returns one piece too few.
type_attrs:
  T: [float64]
attrs:
  k: {type: int, default: 2, min: 1}
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  parts: {dtype: T, shape: ["n // k"], list: k}
kernels:
  python: chunk_kernels.py:short_chunks
"""

CHUNK_KERNELS = '''
def chunks(xp, x, k):
    return list(xp.split(x, k)), xp.asarray(x.sum())


def short_chunks(xp, x, k):
    return list(xp.split(x, k))[1:]
'''


@pytest.fixture(scope="module")
def chunk_registry(registry, tmp_path_factory) -> Registry:
    """The runtime tests' registry plus two ops with a list output."""
    root = tmp_path_factory.mktemp("chunks")
    (root / "opdefs").mkdir()
    (root / "opdefs" / "chunk_ops.yaml").write_text(textwrap.dedent(CHUNK_OPS))
    (root / "opdefs" / "chunk_kernels.py").write_text(textwrap.dedent(CHUNK_KERNELS))
    specs = {name: registry.get(name) for name in registry.names()}
    specs.update({s.name: s for s in parse_opdef(root / "opdefs" / "chunk_ops.yaml", root)})
    return Registry(specs)


def test_a_list_output_is_one_graph_output_per_element(chunk_registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [6], name="x")
        parts, total = apply_op(chunk_registry, "chunks", [x], {"k": 3}, name="c")
    assert isinstance(parts, list) and len(parts) == 3 and isinstance(total, Tensor)
    assert [p.name for p in parts] == ["c:0", "c:1", "c:2"] and total.name == "c:3"
    assert all(p.shape == (2,) and p.dtype == "float64" for p in parts)
    xv = np.arange(6.0)
    eager_parts, eager_total = apply_op(chunk_registry, "chunks", [xv], {"k": 3})
    with Session(g) as sess:
        got_parts, got_total = sess.run([parts, total], {x: xv})
        # A single element fetched alone, and the node folded when its input is constant.
        np.testing.assert_array_equal(sess.run(parts[2], {x: xv}), [4.0, 5.0])
    for got, want in zip(got_parts, eager_parts):
        np.testing.assert_array_equal(got, want)
    assert float(got_total) == float(eager_total) == 15.0


def test_list_output_of_a_folded_node_and_inside_a_loop_body(chunk_registry):
    g = Graph()
    with g.as_default():
        folded, _ = apply_op(chunk_registry, "chunks", [np.arange(4.0)], {"k": 2})
        x = placeholder("float64", [4], name="x")

        def body(i, s):
            halves, _ = apply_op(chunk_registry, "chunks", [s], {"k": 2})
            return i + 1, apply_op(chunk_registry, "concat", [[halves[1], halves[0]]], {})
        _, swapped = while_loop(lambda i, s: i < 3, body, [0, x])
    with Session(g) as sess:
        np.testing.assert_array_equal(sess.run(folded[1]), [2.0, 3.0])
        np.testing.assert_array_equal(sess.run(swapped, {x: np.arange(4.0)}), [2.0, 3.0, 0.0, 1.0])


def test_a_kernel_returning_the_wrong_number_of_pieces_is_named(chunk_registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [6], name="x")
        parts = apply_op(chunk_registry, "short_chunks", [x], {"k": 3}, name="short")
    assert len(parts) == 3
    with Session(g) as sess, pytest.raises(OpError) as info:
        sess.run(parts, {x: np.arange(6.0)})
    assert str(info.value) == ("short_chunks (node 'short'): kernel returned 2 arrays for list "
                               "output 'parts', expected a list of 3 (k)")
    with pytest.raises(OpError, match=r"^short_chunks: kernel returned 2 arrays"):
        apply_op(chunk_registry, "short_chunks", [np.arange(6.0)], {"k": 3})


def test_gradients_through_concat_and_stack_match_finite_differences(registry):
    rng = np.random.default_rng(3)
    g = Graph()
    with g.as_default():
        a = placeholder("float64", [2, 3], name="a")
        b = placeholder("float64", [2, 1], name="b")
        c = placeholder("float64", [2, 3], name="c")
        joined = apply_op(registry, "concat", [[a, b, a * c]], {"axis": 1})  # a used twice
        stacked = apply_op(registry, "stack", [[op_tanh(registry, a), c, a]], {"axis": -1})
        y = (apply_op(registry, "reduce_sum", [joined * joined], {})
             + apply_op(registry, "reduce_sum", [stacked * stacked * stacked], {}))
    feeds = {a: rng.normal(size=(2, 3)), b: rng.normal(size=(2, 1)), c: rng.normal(size=(2, 3))}
    check_against_numeric(g, y, [a, b, c], feeds)
    grad_ops = {o.type for o in g.operations if o.name.startswith("gradients/")}
    assert {"concat_grad", "stack_grad"} <= grad_ops


def op_tanh(registry, x):
    return apply_op(registry, "tanh", [x], {})


def test_concat_gradient_inside_cond_and_while_loop(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [3], name="x")

        def body(i, s):
            both = apply_op(registry, "concat", [[s * x, op_tanh(registry, s)]], {})
            return i + 1, apply_op(registry, "slice", [both], {"begin": [1], "size": [3]})
        looped = while_loop(lambda i, s: i < 3, body, [0, x])[1]
        branched = cond(apply_op(registry, "reduce_sum", [x], {}) > 0.0,
                        lambda: apply_op(registry, "slice", [apply_op(
                            registry, "concat", [[x, x * x]], {})], {"begin": [2], "size": [3]}),
                        lambda: x * x)
    for xv in (np.array([0.5, -0.2, 0.9]), np.array([-0.5, -0.2, 0.1])):
        check_against_numeric(g, looped, [x], {x: xv})
    check_against_numeric(g, branched, [x], {x: np.array([0.5, -0.2, 0.9])})


def test_export_and_import_keep_list_outputs(registry, chunk_registry):
    g = Graph()
    with g.as_default():
        a = placeholder("float64", [2, 2], name="a")
        b = placeholder("float64", [2, 3], name="b")
        y = apply_op(chunk_registry, "reduce_sum",
                     [apply_op(chunk_registry, "concat", [[a, b * b]], {"axis": 1}) ** 2.0], {})
        ga, gb = gradients(y, [a, b])
        parts, _ = apply_op(chunk_registry, "chunks", [apply_op(chunk_registry, "reshape", [b],
                                                                {"shape": [6]})], {"k": 3},
                            name="pieces")
    copy = import_graph(export_graph(g), chunk_registry)
    grad_node = copy.get_operation(ga.op.name if ga.op.type == "concat_grad" else gb.op.name)
    assert len(grad_node.outputs) == len(g.get_operation(grad_node.name).outputs)
    assert len(copy.get_operation("pieces").outputs) == 4
    feeds = {"a:0": np.ones((2, 2)), "b:0": np.arange(6.0).reshape(2, 3)}
    fetches = [ga.name, gb.name, *(p.name for p in parts)]
    with Session(g) as s1, Session(copy) as s2:
        for want, got in zip(s1.run(fetches, feeds), s2.run(fetches, feeds)):
            np.testing.assert_array_equal(want, got)
    assert export_graph(copy) == export_graph(g)


# --------------------------------------------------------------------- Variables as op inputs
def test_a_variable_is_read_wherever_an_op_takes_a_tensor(registry):
    from opsdk import ops
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2, 3], name="x")
        w = Variable(np.arange(6.0).reshape(3, 2), name="w")
        b = Variable(np.array([1.0, -1.0]), name="b")
        y = ops.matmul(x, w)
        z = apply_op(registry, "add", [y, b], {})
        joined = apply_op(registry, "concat", [[b, b]], {})  # inside a list input too
        (gw,) = gradients(apply_op(registry, "reduce_sum", [z], {}), [w])
    assert y.op.inputs[1] is w.value() and joined.op.inputs[0] is b.value()
    xv = np.ones((2, 3))
    with Session(g) as sess:
        sess.run(global_variables_initializer(g))
        got_z, got_joined, got_gw = sess.run([z, joined, gw], {x: xv})
    np.testing.assert_allclose(got_z, xv @ np.arange(6.0).reshape(3, 2) + [1.0, -1.0])
    np.testing.assert_array_equal(got_joined, [1.0, -1.0, 1.0, -1.0])
    np.testing.assert_allclose(got_gw, xv.T @ np.ones((2, 2)))


def test_a_variable_alone_builds_in_its_graph_and_in_a_loop_body(registry):
    g = Graph()
    with g.as_default():
        w = Variable(np.array([2.0, 3.0]), name="w")
    doubled = apply_op(registry, "mul", [w, w], {})  # no graph context: the variable's graph
    assert isinstance(doubled, Tensor) and doubled.graph is g
    with g.as_default():
        _, total = while_loop(lambda i, s: i < 2,
                              lambda i, s: (i + 1, apply_op(registry, "add", [s, w], {})),
                              [0, apply_op(registry, "zeros_like", [w], {})])
    with Session(g) as sess:
        sess.run(global_variables_initializer(g))
        np.testing.assert_array_equal(sess.run(doubled), [4.0, 9.0])
        np.testing.assert_array_equal(sess.run(total), [4.0, 6.0])


def test_an_eager_call_with_a_variable_is_a_clear_error(registry):
    from opsdk.runtime.frontend.api import run_eager
    g = Graph()
    with g.as_default():
        w = Variable(np.ones((3, 2)), name="w")
    with pytest.raises(OpsdkError) as info:
        apply_op(registry, "matmul", [np.ones((2, 3)), w], {}, device="python")
    assert str(info.value).startswith(
        "matmul: input 'y' is the Variable 'w', whose value exists only while a Session runs; "
        "an eager call (device='python') takes arrays")
    with pytest.raises(OpsdkError, match=r"^add: input 'y' is the graph Tensor 'w:0', whose"):
        run_eager(registry.get("add"), [np.ones((3, 2)), w.value()], {})


# ---- an empty list output: the node has fewer graph outputs than the op declares --------------
SPLIT_NORM = """
op: split_norm
summary: x + w for each w (a list that may be empty), and the sum of squares of x.
type_attrs:
  T: [float64]
attrs:
  N: {type: int, default: 0, min: 0}
inputs:
  x: {dtype: T, shape: [n]}
  ws: {dtype: T, shape: [n], list: N}
outputs:
  parts: {dtype: T, shape: [n], list: N}
  norm: {dtype: T, shape: []}
gradient: split_norm_grad
kernels:
  python: sn_kernels.py:split_norm
---
op: split_norm_grad
summary: The gradient of split_norm; its list output is empty when N is 0.
type_attrs:
  T: [float64]
attrs:
  N: {type: int, default: 0, min: 0}
inputs:
  x: {dtype: T, shape: [n]}
  ws: {dtype: T, shape: [n], list: N}
  grad_parts: {dtype: T, shape: [n], list: N}
  grad_norm: {dtype: T, shape: []}
outputs:
  grad_x: {dtype: T, shape: [n]}
  grad_ws: {dtype: T, shape: [n], list: N}
kernels:
  python: sn_kernels.py:split_norm_grad
"""

SPLIT_NORM_KERNELS = '''
def split_norm(xp, x, ws, N):
    return [x + w for w in ws], xp.asarray((x * x).sum())


def split_norm_grad(xp, x, ws, grad_parts, grad_norm, N):
    g = 2 * x * grad_norm
    for p in grad_parts:
        g = g + p
    return g, list(grad_parts)
'''


@pytest.fixture(scope="module")
def split_registry(registry, tmp_path_factory) -> Registry:
    root = tmp_path_factory.mktemp("split_norm")
    (root / "opdefs").mkdir()
    (root / "opdefs" / "split_norm.yaml").write_text(textwrap.dedent(SPLIT_NORM))
    (root / "opdefs" / "sn_kernels.py").write_text(textwrap.dedent(SPLIT_NORM_KERNELS))
    specs = {name: registry.get(name) for name in registry.names()}
    specs.update({s.name: s for s in parse_opdef(root / "opdefs" / "split_norm.yaml", root)})
    return Registry(specs)


@pytest.mark.parametrize("n_ws", [0, 2])
def test_a_gradient_through_an_empty_list_output_runs_in_a_graph(split_registry, n_ws):
    xv, av = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    wv = [np.full(3, 0.5 * (i + 1)) for i in range(n_ws)]
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [3], name="x")
        a = placeholder("float64", [3], name="a")
        ws = [placeholder("float64", [3], name=f"w{i}") for i in range(n_ws)]
        parts, norm = apply_op(split_registry, "split_norm", [x * a, ws], {})
        loss = apply_op(split_registry, "reduce_sum", [norm], {})
        for p in parts:
            loss = loss + apply_op(split_registry, "reduce_sum", [p], {})
        grad_x, grad_a = gradients(loss, [x, a])
    feeds = {x: xv, a: av, **dict(zip(ws, wv))}
    with Session(g) as sess:
        gx, ga = sess.run([grad_x, grad_a], feeds)
    # d/dx of sum((x a)^2) + sum over parts of sum(x a + w) = 2 x a^2 + N a
    np.testing.assert_allclose(gx, 2 * xv * av * av + n_ws * av)
    np.testing.assert_allclose(ga, 2 * av * xv * xv + n_ws * xv)
    # the same gradient op called eagerly agrees (d loss/dx = grad_x of x*a, times a)
    grad_xa, grad_ws = apply_op(split_registry, "split_norm_grad",
                                [xv * av, wv, [np.ones(3)] * n_ws, np.float64(1.0)], {})
    np.testing.assert_allclose(grad_xa * av, gx)
    assert len(grad_ws) == n_ws
