"""A task refuses a partition whose ops it declares differently, or cannot load."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.dist.partitions import build_partition, check_ops, op_digests
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.io.serialize import export_graph
from opsdk.runtime.ir.graph import Graph, placeholder


def _graph():
    g = Graph()
    with g.as_default():
        y = placeholder("float32", [2], name="x") * 2.0
    return g, y


def test_same_declarations_pass_and_a_different_one_is_refused_naming_op_and_task():
    g, _ = _graph()
    digests = op_digests(g.operations)
    assert digests  # the mul is a declared op
    check_ops("/job:ps/replica:0/task:0", g, digests)
    changed = {name: "0" * 64 for name in digests}
    with pytest.raises(OpsdkError, match=r"task /job:ps/replica:0/task:0: op 'opsdk::mul' .*"
                                         r"declared differently"):
        check_ops("/job:ps/replica:0/task:0", g, changed)


def test_a_partition_naming_an_op_the_task_lacks_is_refused_naming_the_task():
    g, y = _graph()
    text = export_graph(g).replace('"opsdk::mul"', '"opsdk::no_such_op"')
    with pytest.raises(OpsdkError, match="task /job:ps/replica:0/task:0 cannot load its partition"):
        build_partition("/job:ps/replica:0/task:0", (), text, ["x:0"], [y.name], [], {})
