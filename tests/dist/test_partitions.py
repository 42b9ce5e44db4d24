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


def _replicated_steps():
    """The partitions of a replicated train op, and of a value computed after it."""
    import dataclasses

    from opsdk.dist import ReplicatedOptimizer, replica_device_setter
    from opsdk.dist.cluster import ClusterSpec
    from opsdk.dist.steps import build_step
    from opsdk.runtime.exec.session import SessionConfig
    from opsdk.runtime.frontend.variables import Variable
    from opsdk.runtime.train.optimizers import GradientDescentOptimizer

    cluster = {"ps": 1, "worker": 1}
    g = Graph()
    with g.as_default():
        with replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0"):
            v = Variable(np.float32(0.0), name="v")
            loss = v * 2.0
        train = ReplicatedOptimizer(GradientDescentOptimizer(0.1), 1).minimize(loss,
                                                                              var_list=[v])
        with g.control_dependencies([train]):
            after = loss * 1.0
    options = dataclasses.replace(SessionConfig().plan_options(),
                                  default_task="/job:worker/replica:0/task:0")
    return [build_step(g, [e], (), options, ClusterSpec(cluster)) for e in (train, after)]


def _markers(part):
    return [op for op in part.graph.operations
            if op.type in ("_send", "_recv") and op.attrs["tensor_name"].startswith("^")]


def test_a_train_op_waits_for_its_updates_through_the_master_not_a_marker():
    train, after = _replicated_steps()
    ps, worker = (train.parts[f"/job:{job}/replica:0/task:0/device:CPU:0"]
                  for job in ("ps", "worker"))
    assert not _markers(ps) and not _markers(worker)  # no hop back from the ps per step
    # the update still runs: its wait is a target, the contribution that wait reads before it
    assert "replicated_train/v/wait" in ps.targets
    # A node that runs after the update on the worker still waits for its marker there.
    assert [op.type for p in after.parts.values() for op in _markers(p)] == ["_send", "_recv"]
