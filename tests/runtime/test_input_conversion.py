"""Inputs the kernels cannot take as they are become what they can, exactly: big-endian arrays
are converted to native order (eagerly, in graph constants, with the eager cache warm), and
another framework's tensor, one that requires grad included, is read by value in a graph."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk import ops
from opsdk.runtime.exec.session import Session
from opsdk.runtime.ir.graph import Graph

X = np.array([[1.5, -2.0, 0.25], [3.0, 4.0, -1.0]])


@pytest.mark.parametrize("order", [">f4", ">f8"])
def test_big_endian_inputs_to_a_compiled_kernel(order):
    big = X.astype(order)
    native = X.astype(order.replace(">", "<"))
    want = ops.pairwise_manhattan(native, native)
    for _ in range(3):  # the first call fills the eager cache; the others would hit it
        got = ops.pairwise_manhattan(big, big)
        assert got.dtype == want.dtype and got.dtype.isnative
        np.testing.assert_array_equal(got, want)


def test_a_big_endian_graph_constant():
    graph = Graph()
    with graph.as_default():
        z = ops.pairwise_manhattan(X.astype(">f4"), X.astype(">f4"))
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(z), ops.pairwise_manhattan(
            X.astype(np.float32), X.astype(np.float32)))


def test_a_torch_tensor_requiring_grad_in_a_graph_is_read_by_value():
    torch = pytest.importorskip("torch")
    t = torch.tensor(X, dtype=torch.float32, requires_grad=True)
    graph = Graph()
    with graph.as_default():
        z = ops.pairwise_manhattan(t, X.astype(np.float32))
    with Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(z), ops.pairwise_manhattan(
            X.astype(np.float32), X.astype(np.float32)))
