"""Graph building: names, scopes, devices, control dependencies, collections, shape inference
at node creation (with unknown dims) and the errors that name the node."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk
from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.ir.graph import (Graph, GraphKeys, constant, get_default_graph, placeholder)
from opsdk.runtime.ir.tensor import Tensor


def test_unique_names_and_name_scopes(graph, registry):
    a = placeholder("float32", [2], name="a")
    s1 = apply_op(registry, "add", [a, a], {})
    s2 = apply_op(registry, "add", [a, a], {})
    with graph.name_scope("layer1"):
        s3 = apply_op(registry, "add", [a, a], {})
        with graph.name_scope("inner"):
            s4 = apply_op(registry, "add", [a, a], {}, name="sum")
    again = placeholder("float32", [2], name="a")
    assert [t.op.name for t in (s1, s2, s3, s4, again)] == [
        "add", "add_1", "layer1/add", "layer1/inner/sum", "a_1"]
    assert graph.get_operation("layer1/inner/sum") is s4.op
    assert graph.get_tensor("add_1:0") is s2
    assert s1.name == "add:0"


def test_unknown_name_suggests_near_names(graph):
    with graph.name_scope("layer1"):
        placeholder("float32", [2], name="x")
    with pytest.raises(OpsdkError, match="no node named 'x'.*'layer1/x'"):
        graph.get_operation("x")


def test_default_graph_stack_and_global_default():
    g1, g2 = Graph(), Graph()
    with g1.as_default():
        assert get_default_graph() is g1
        with g2.as_default():
            assert get_default_graph() is g2
        assert get_default_graph() is g1
    assert get_default_graph() not in (g1, g2)


def test_shape_inference_with_unknown_dims(graph, registry):
    x = placeholder("float32", [None, 4], name="x")
    y = placeholder("float32", [7, None], name="y")
    z = apply_op(registry, "l1_dist", [x, y], {}, name="dist")
    assert isinstance(z, Tensor)
    assert z.shape == (None, 7) and z.dtype == "float32"
    anything = placeholder("float32", None, name="anything")
    assert apply_op(registry, "l1_dist", [anything, y], {}).shape == (None, 7)


def test_shape_mismatch_names_node_op_input_and_dim(graph, registry):
    x = placeholder("float32", [5, 4], name="x")
    y = placeholder("float32", [None, 3], name="y")
    with pytest.raises(OpError) as err:
        apply_op(registry, "l1_dist", [x, y], {}, name="dist")
    assert str(err.value) == "l1_dist (node 'dist'): input 'y' has 3 columns but x has 4 (dim p)"


def test_dtype_mismatch_is_reported_at_creation(graph, registry):
    x = placeholder("float32", [3], name="x")
    y = placeholder("float64", [3], name="y")
    with pytest.raises(OpError, match=r"^add \(node 'add'\): .*float64"):
        apply_op(registry, "add", [x, y], {})


def test_operators_map_to_builtin_ops(graph):
    x = placeholder("float32", [2, 3], name="x")
    w = placeholder("float32", [3, 4], name="w")
    expr = -(x * 2.0 + 1.0) / 3.0 - x
    assert [expr.op.type, expr.op.inputs[0].op.type] == ["sub", "div"]
    assert expr.dtype == "float32" and expr.shape == (2, 3)
    assert (x @ w).op.type == "matmul" and (x @ w).shape == (2, 4)
    assert (x < 1.0).dtype == "bool" and (x >= 1.0).op.type == "greater_equal"
    assert (2.0 - x).op.inputs[0].op.type == "const"
    assert (x // 2.0).op.type == "floor_div" and (7.0 % x).op.type == "floor_mod"
    with pytest.raises(OpsdkError, match="no truth value"):
        bool(x)


def test_getitem_slices_and_drops_int_axes(graph):
    x = placeholder("float32", [4, 5], name="x")
    assert x[1].shape == (5,)
    assert x[:, 1:3].shape == (4, 2)
    assert x[-1, -2:].shape == (2,)
    assert x[1:100].shape == (3, 5)  # slices clamp like Python's
    assert x[::2].shape == (2, 5) and x[None, ..., None].shape == (1, 4, 5, 1)
    unknown = placeholder("float32", [None, 5], name="u")
    assert unknown[-1].shape == (5,) and unknown[:, -1].shape == (None,)


I = "i"  # stands for a scalar int32 tensor fed the value 1
KEYS = [(slice(None), None), (Ellipsis, 0), (None, Ellipsis, None), slice(None, None, -1),
        (slice(None), slice(None, None, 2), slice(1, 3)), (1, Ellipsis, slice(None, None, -1)),
        I, (slice(None), I), (Ellipsis, I, None), (slice(-1, None), slice(None), None, 2), -1,
        (slice(None), -1), (slice(None, -1), slice(-2, None)), (slice(-5, -1), -2),
        (slice(None), slice(2, None, -1)), (slice(7, None),), (slice(None, None, 3), 0, -1),
        (slice(-1, None, -2), slice(3, 0, -1)), (Ellipsis,), ()]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_indexing_matches_numpys_and_its_gradient_scatters_back(key):
    # ints, slices of any step, ..., None and a scalar tensor, on a shape known when the graph
    # is built and on one known only at run time (negative bounds then count from the run-time
    # size); the gradient puts the values back where they were read
    import opsdk

    v = np.arange(24.0).reshape(2, 3, 4) - 7.0
    np_key = tuple(1 if k is I else k for k in (key if isinstance(key, tuple) else (key,)))
    g = Graph()
    with g.as_default():
        i = placeholder("int32", [], name="i")
        known = placeholder("float64", [2, 3, 4], name="known")
        unknown = placeholder("float64", [None, None, 4], name="unknown")
        op_key = tuple(i if k is I else k for k in np_key)
        ys = [t[op_key] for t in (known, unknown)]
        grads = [opsdk.gradients(opsdk.ops.reduce_sum(y * y), [t])[0]
                 for y, t in zip(ys, (known, unknown))]
    assert ys[0].shape == v[np_key].shape
    expected_grad = np.zeros_like(v)
    expected_grad[np_key] = 2 * v[np_key]
    with opsdk.Session(g) as sess:
        got = sess.run([*ys, *grads], {known: v, unknown: v, i: 1})
    for y in got[:2]:
        np.testing.assert_array_equal(y, v[np_key])
    for grad in got[2:]:
        np.testing.assert_array_equal(grad, expected_grad)


@pytest.mark.parametrize("key, message", [
    ((Ellipsis, 0, Ellipsis), "only one ellipsis"),
    (slice(None, None, 0), "step cannot be zero"),
    ((0, 0, 0, 0), "4 indices for a rank-3 tensor"),
    ("float", "int32 or int64 scalar"),
    ("vector", "int32 or int64 scalar"),
    ([0, 1], "is not supported"),
])
def test_an_unsupported_index_is_refused_naming_the_tensor(graph, key, message):
    x = placeholder("float32", [2, 3, 4], name="x")
    key = {"float": placeholder("float32", [], name="f"),
           "vector": placeholder("int32", [2], name="v")}.get(key, key) if isinstance(
        key, str) else key
    with pytest.raises(OpsdkError, match=f"tensor 'x:0'.*{message}"):
        x[key]


def test_a_slice_taking_all_of_a_size_known_at_run_time_is_an_identity():
    # it asked the operator table for an op it did not list (KeyError: 'identity')
    import opsdk

    g = Graph()
    with g.as_default():
        x = placeholder("int32", [None], name="x")
        whole = [x[0:], x[:], x[...], x[0:None:1]]
    assert {t.op.type for t in whole} == {"identity"} and all(t.shape == (None,) for t in whole)
    with opsdk.Session(g) as sess:
        for value in sess.run(whole, {x: [4, 5, 6]}):
            np.testing.assert_array_equal(value, [4, 5, 6])


def test_a_slice_of_a_size_known_at_run_time_clamps_as_pythons_does():
    import opsdk

    g = Graph()
    with g.as_default():
        x = placeholder("float32", [None, 4, None], name="x")
        first3 = x[:3]
        row = x[:3, 0, :]  # two sizes known only at run time once the int axis is dropped
        tail = x[1:, 2]
        assert (first3.shape, row.shape, tail.shape) == ((None, 4, None), (None, None), (None, None))
        (grad,) = opsdk.gradients(opsdk.ops.reduce_sum(row * row), [x])
    with opsdk.Session(g) as sess:
        for n in (2, 5):  # fewer rows than the stop, and more
            v = np.arange(n * 12, dtype=np.float32).reshape(n, 4, 3)
            got = sess.run([first3, row, tail, grad], {x: v})
            expected_grad = np.zeros_like(v)
            expected_grad[:3, 0, :] = 2 * v[:3, 0, :]
            for value, expected in zip(got, (v[:3], v[:3, 0, :], v[1:, 2], expected_grad)):
                np.testing.assert_array_equal(value, expected)
        # the op behind tf.slice keeps its contract: a size past the end is an error
        with g.as_default():
            strict = opsdk.ops.slice(x, begin=[0, 0, 0], size=[3, -1, -1])
        with pytest.raises(OpsdkError, match="exceeds x's size 2"):
            sess.run(strict, {x: np.zeros((2, 4, 3), np.float32)})


def test_control_dependencies_and_devices_are_recorded(graph, registry):
    a = placeholder("float32", [2], name="a")
    first = apply_op(registry, "add", [a, a], {}, name="first")
    with graph.control_dependencies([first]):
        with graph.device("/job:ps/task:0"):
            with graph.device("/cpu:0"):
                second = apply_op(registry, "mul", [a, a], {}, name="second")
        with graph.control_dependencies(None):
            free = apply_op(registry, "mul", [a, a], {}, name="free")
    assert second.op.control_inputs == (first.op,)
    assert second.op.device == "/job:ps/task:0/device:CPU:0"
    assert free.op.control_inputs == () and free.op.device == ""
    with pytest.raises(OpsdkError, match="cannot read 'device:tpu:0'"):
        with graph.device("/tpu:0"):
            pass


def test_consumers_and_collections(graph, registry):
    a = placeholder("float32", [2], name="a")
    b = apply_op(registry, "add", [a, a], {})
    c = apply_op(registry, "mul", [a, b], {})
    assert a.consumers() == [b.op, c.op] and b.consumers() == [c.op]
    graph.add_to_collection("losses", c)
    assert graph.get_collection("losses") == [c]
    assert graph.get_collection(GraphKeys.TRAINABLE_VARIABLES) == []


def test_inputs_from_two_graphs_are_rejected(registry):
    g1, g2 = Graph(), Graph()
    with g1.as_default():
        a = placeholder("float32", [2], name="a")
    with g2.as_default():
        b = placeholder("float32", [2], name="b")
    with pytest.raises(OpsdkError, match="different graphs"):
        apply_op(registry, "add", [a, b], {})


def test_constant_is_read_only_and_typed(graph):
    c = constant([1, 2, 3], dtype="float32", name="c")
    assert c.shape == (3,) and c.dtype == "float32"
    assert not c.op.attrs["value"].flags.writeable
    with pytest.raises(OpsdkError, match="not supported"):
        constant(np.array(["a"]))


def test_a_constant_cast_follows_eager_calls(graph, registry):
    x = placeholder("float32", [2, 3], name="x")
    with pytest.raises(OpsdkError, match=r"share type attr T but have float32 and complex64"):
        apply_op(registry, "add", [x, np.ones((2, 3), np.complex64)], {})
    with pytest.raises(OpsdkError, match=r"share type attr T but have float32 and float64"):
        apply_op(registry, "add", [x, np.float64(1e300)], {})
    with pytest.raises(OpsdkError, match=r"^add \(node 'add(_\d+)?'\): input 'y' is 1e\+300, which "
                                         r"float32 cannot represent"):
        apply_op(registry, "add", [x, 1e300], {})
    assert apply_op(registry, "add", [x, 2.5], {}).dtype == "float32"


def test_a_constant_must_hold_what_its_output_declares(graph):
    with pytest.raises(OpsdkError, match=r"^const \(node 'c'\): its output is declared float32 "
                                         r"but its value is float64"):
        graph.create_op("const", [], {"value": np.zeros(2)}, [((2,), "float32")], name="c")


def test_a_finalized_graph_refuses_new_nodes_and_collection_entries(graph, registry):
    a = placeholder("float32", [2], name="a")
    b = apply_op(registry, "add", [a, a], {})
    graph.finalize()
    assert graph.finalized
    with pytest.raises(RuntimeError, match=r"finalized .*\(a add node\)"):
        apply_op(registry, "add", [b, a], {})
    with pytest.raises(OpsdkError, match="collection 'extra'"):
        graph.add_to_collection("extra", b)
    assert [op.name for op in graph.operations] == ["a", "add"]


def test_colocate_with_gives_its_nodes_the_devices_and_names_it(graph):
    with graph.device("/job:ps/task:1"):
        v = constant(np.zeros(2), name="v")
    with graph.device("/gpu:0"), graph.colocate_with(v):
        w = constant(np.ones(2), name="w")
    assert w.op.device == "/job:ps/task:1" and w.op.colocated is v.op
    assert constant(np.ones(2), name="u").op.colocated is None


def test_floor_division_and_modulo_round_down_as_python_and_refuse_integer_zero(graph):
    i = placeholder("int32", [4], name="i")
    f = placeholder("float32", [4], name="f")
    fetches = [i // 3, i % -3, 7 % i, f // 2.0, f % 2.0]
    iv, fv = np.array([7, -7, 2, -1], np.int32), np.array([7.5, -7.5, 0.5, -0.5], np.float32)
    with opsdk.Session(graph) as sess:
        got = sess.run(fetches, {i: iv, f: fv})
        with pytest.raises(OpError, match=r"floor_mod \(node '.*'\): integer division by zero"):
            sess.run(i % 0, {i: iv})
    for mine, want in zip(got, [iv // 3, iv % -3, 7 % iv, fv // 2.0, fv % 2.0]):
        np.testing.assert_array_equal(mine, want)
        assert mine.dtype == want.dtype
