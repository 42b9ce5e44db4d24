"""py_func (opsdk/runtime/frontend/py_func.py): a node calling a Python function when the step
runs: values and conversion, one call per step, no merging, no gradient, a device's values,
the errors, and a graph exported to another process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opsdk
from opsdk.registry.errors import OpError, OpsdkError
from opsdk.runtime.frontend.py_func import py_func
from opsdk.runtime.io.serialize import save_graph


def test_outputs_take_their_declared_dtypes_and_unknown_shapes():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [None], name="x")
        top = py_func(lambda a: np.sort(a)[::-1] * 2, [x], "float32", name="top")
        n, wide = py_func(lambda a: (a.size, a + 1), [x], ["int64", np.float64])
        (alone,) = py_func(lambda a, k: [a[:k]], [x, 2], ["float32"])  # a list of one
        after = top + 1.0
    assert top.shape is None and top.dtype == "float32" and top.op.name == "top"
    with opsdk.Session(g) as sess:
        got = sess.run([top, n, wide, alone, after], {x: np.array([3, 1, 2], np.float32)})
    np.testing.assert_array_equal(got[0], [6, 4, 2])
    assert got[1] == 3 and got[1].dtype == np.int64
    assert got[2].dtype == np.float64 and got[3].tolist() == [3, 1]
    np.testing.assert_array_equal(got[4], [7, 5, 3])


def test_each_node_runs_once_per_step_and_like_nodes_are_not_merged():
    calls = []

    def count(a):
        calls.append(a.copy())
        return a

    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [2], name="x")
        first, second = py_func(count, [x], "float32"), py_func(count, [x], "float32")
        both = first + second + first
    with opsdk.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(both, {x: [1.0, 2.0]}), [3, 6])
        assert len(calls) == 2  # one per node: not folded into one, not run per reader
        sess.run(both, {x: [1.0, 2.0]})
        assert len(calls) == 4


def test_no_gradient_passes_a_py_func():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [3], name="x")
        through = py_func(np.square, [x], "float64")
        assert opsdk.gradients(opsdk.ops.reduce_sum(through), [x]) == [None]
        (both,) = opsdk.gradients(opsdk.ops.reduce_sum(through * x), [x])
    with opsdk.Session(g) as sess:  # only the direct path: d(sum(c * x))/dx = c
        np.testing.assert_array_equal(sess.run(both, {x: [1.0, 2.0, 3.0]}), [1, 4, 9])


def test_a_device_node_gets_host_arrays_and_returns_device_values():
    seen = []
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [3], name="x")
        with opsdk.device("/test:0"):
            y = py_func(lambda a: seen.append(type(a)) or a * 2, [x], "float32")
            z = opsdk.ops.exp(y)
    with opsdk.Session(g) as sess:
        np.testing.assert_allclose(sess.run(z, {x: [0.0, 0.5, 1.0]}), np.exp([0.0, 1.0, 2.0]),
                                   rtol=1e-6)
    assert seen == [np.ndarray]


@pytest.mark.parametrize("func, message", [
    (lambda a: 1 / 0, r"py_func \(node 'bad'\): its function raised ZeroDivisionError"),
    (lambda a: (a, a), r"returned 2 values for 1 outputs \(float32\)"),
    (lambda a: "text", r"result 0 \(str\) is not convertible to its declared float32"),
])
def test_a_failing_function_is_named_with_its_node(func, message):
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [2], name="x")
        bad = py_func(func, [x], "float32", name="bad")
    with opsdk.Session(g) as sess:
        with pytest.raises(OpError, match=message):
            sess.run(bad, {x: [1.0, 2.0]})


def test_mistakes_when_building_are_named():
    with opsdk.Graph().as_default():
        x = opsdk.placeholder("float32", [2], name="x")
        with pytest.raises(OpsdkError, match="func must be callable"):
            py_func(3, [x], "float32")
        with pytest.raises(OpsdkError, match="Tout holds 'text', which is not one of"):
            py_func(abs, [x], "text")


def test_an_exported_graph_runs_its_py_func_only_in_the_process_that_built_it(tmp_path):
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [2], name="x")
        py_func(lambda a: a * 3, [x], "float32", name="triple")
    path = save_graph(g, tmp_path / "graph.json")
    script = textwrap.dedent(f"""
        import numpy as np, opsdk
        from opsdk.runtime.io.serialize import load_graph
        g = load_graph({str(path)!r})
        with opsdk.Session(g) as sess:
            try:
                sess.run("triple:0", {{"x:0": np.ones(2, np.float32)}})
            except opsdk.OpError as exc:
                print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert "its Python function" in out.stdout and "is not in this process" in out.stdout, \
        out.stdout + out.stderr
    from opsdk.runtime.io.serialize import load_graph
    with opsdk.Session(load_graph(path)) as sess:  # here it is
        np.testing.assert_array_equal(
            sess.run("triple:0", {"x:0": np.ones(2, np.float32)}), [3, 3])


def test_a_function_taking_the_step_context_waits_until_the_run_is_stopped():
    # A function that waits (a queue's dequeue) gets the step first: its session, and the token
    # that a timeout (or Session.close, Ctrl-C) cancels, so the wait ends instead of hanging.
    import time

    seen = []

    def wait_forever(ctx, x):
        seen.append(ctx.session)
        while True:
            ctx.token.check("wait_forever")
            time.sleep(0.01)
    wait_forever.takes_step_context = True
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float32", [2])
        y = py_func(wait_forever, [x], "float32")
        z = py_func(lambda a: a * 2, [x], "float32")
    with opsdk.Session(g) as sess:
        start = time.monotonic()
        with pytest.raises(OpsdkError, match="wait_forever: stopped because its timeout passed"):
            sess.run(y, {x: [1.0, 2.0]}, timeout=0.3)
        assert time.monotonic() - start < 5 and seen == [sess]
        np.testing.assert_array_equal(sess.run(z, {x: [1.0, 2.0]}), [2.0, 4.0])
