"""Integers keep their exact value end to end: fill's value (a float attr) keeps an integer that
float64 cannot hold, eagerly, in a graph and through a graph file; a value its dtype cannot hold
is refused naming the op; an int attr outside int64 is refused before any kernel sees it."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk import ops
from opsdk.registry.errors import OpError
from opsdk.runtime.exec.session import Session
from opsdk.runtime.io.serialize import export_graph, import_graph
from opsdk.runtime.ir.graph import Graph

EXACT = [(2**63 - 1, "int64"), (9007199254740993, "int64"), (-2**63, "int64"),
         (np.int64(2**62 + 1), "int64"), (2**64 - 1, "uint64"), (np.uint64(2**64 - 1), "uint64")]


@pytest.mark.parametrize("value, dtype", EXACT)
def test_fill_keeps_an_integer_exactly(value, dtype):
    out = ops.fill(shape=[2], value=value, dtype=dtype)
    assert out.dtype == np.dtype(dtype) and out.tolist() == [int(value)] * 2


@pytest.mark.parametrize("value, dtype", EXACT)
def test_fill_keeps_an_integer_exactly_in_a_graph_and_its_file(value, dtype):
    graph = Graph()
    with graph.as_default():
        ops.fill(shape=[2], value=value, dtype=dtype, name="f")
    for g in (graph, import_graph(export_graph(graph))):
        with Session(g) as sess:
            assert sess.run("f:0").tolist() == [int(value)] * 2


@pytest.mark.parametrize("value, dtype", [(2**63, "int64"), (-1, "uint8"), (256, "uint8"),
                                          (float("nan"), "int32"), (1e300, "float32")])
def test_fill_refuses_a_value_its_dtype_cannot_hold(value, dtype):
    with pytest.raises(OpError, match=rf"^fill: ValueError: value \S+ (does not fit|overflows) "
                                      rf"{dtype} \("):
        ops.fill(shape=[1], value=value, dtype=dtype)


@pytest.mark.parametrize("value", [2**63, 2**64, -2**63 - 1])
def test_an_int_attr_outside_int64_is_refused_before_the_compiled_kernel(value):
    with pytest.raises(OpError, match=r"^max_pool: attr 'ksize_h' must be an int in int64's "
                                      r"range \(-2\*\*63 \.\. 2\*\*63 - 1\), got -?\d+$"):
        ops.max_pool(np.ones((1, 4, 4, 1), np.float32), ksize_h=value)
