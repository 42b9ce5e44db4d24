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


def test_a_plain_adam_step_over_two_ps_tasks_sends_values_one_way_once_pushed():
    """TF1's minimize under a replica_device_setter, w and b on two ps tasks: Adam's beta powers
    live with the first variable, its update node is split per ps task, the global step's
    increment constant is held on the ps (no marker back to the worker), and with the values
    pushed the tasks' values flow one way: a steady step exists."""
    import dataclasses

    from opsdk.dist import replica_device_setter
    from opsdk.dist.cluster import ClusterSpec
    from opsdk.dist.steps import build_step
    from opsdk.runtime.exec.session import SessionConfig
    from opsdk.runtime.frontend.api import apply_op
    from opsdk.runtime.frontend.registries import builtin_registry
    from opsdk.runtime.frontend.variables import Variable
    from opsdk.runtime.train.optimizers import AdamOptimizer

    cluster = {"ps": 2, "worker": 1}
    g = Graph()
    with g.as_default():
        with replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0"):
            x = placeholder("float32", [3], name="x")
            w = Variable(np.ones(3, np.float32), name="w")
            b = Variable(np.float32(0.5), name="b")
            step = Variable(np.int64(0), name="global_step", trainable=False)
            reg = builtin_registry()
            y = apply_op(reg, "add", [apply_op(reg, "mul", [x, w.value()], {}), b.value()], {})
            loss = apply_op(reg, "reduce_sum", [apply_op(reg, "square", [y], {})], {})
            train = AdamOptimizer(0.1).minimize(loss, global_step=step)
    devices = {op.name: op.device for op in g.operations if op.type == "variable"}
    assert devices["w"] == devices["Adam/beta1_power"] == devices["Adam/beta2_power"] == (
        "/job:ps/task:0")
    assert devices["b"] == devices["b/Adam"] == "/job:ps/task:1"
    options = dataclasses.replace(SessionConfig().plan_options(),
                                  default_task="/job:worker/replica:0/task:0")
    dist = build_step(g, [train], (x,), options, ClusterSpec(cluster))
    updates = {op.name for p in dist.parts.values() for op in p.graph.operations
               if op.type == "apply_updates"}
    assert updates == {"Adam/update/at_0", "Adam/update/at_1"}
    assert dist.steady_order == ["/job:worker/replica:0/task:0", "/job:ps/replica:0/task:1",
                                 "/job:ps/replica:0/task:0"]
    assert not _markers(dist.parts["/job:worker/replica:0/task:0/device:CPU:0"])
