"""Locations and partitions: placement keeps the task, the partition pass gives a standalone
graph per location with a _send/_recv pair at every cut, `lower` numbers slots, and partitions
run as tasks would, meeting in a rendezvous."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.partition import partition_program
from opsdk.runtime.compile.pipeline import compile_program, new_program, plan_for_partition
from opsdk.runtime.compile.program import PlanOptions
from opsdk.runtime.exec.executor import RunToken, StepContext, execute, CancelledError
from opsdk.runtime.exec.rendezvous import LocalRendezvous
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.exec.variable_store import VariableStore
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.io.serialize import export_graph, import_graph
from opsdk.runtime.ir.device_names import DeviceSpec, location, task_of
from opsdk.runtime.ir.graph import Graph, control_dependencies, device, placeholder

# What these tests check is the host's plans: unscoped nodes stay on the host on a GPU machine too.
pytestmark = pytest.mark.usefixtures("host_default")

LOCAL = "/job:localhost/replica:0/task:0"
PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:1"


def test_a_device_name_keeps_every_field():
    spec = DeviceSpec.parse("/job:worker/replica:2/task:1/device:GPU:0")
    assert (spec.job, spec.replica, spec.task, spec.device_type, spec.index) == (
        "worker", 2, 1, "GPU", 0)
    assert spec.to_string() == "/job:worker/replica:2/task:1/device:GPU:0"
    assert spec.task_name() == "/job:worker/replica:2/task:1"
    inner = DeviceSpec.parse("/cpu:0").merged_into(DeviceSpec.parse("/job:ps/replica:1"))
    assert inner.to_string() == "/job:ps/replica:1/device:CPU:0"


def test_a_location_fills_unset_fields_from_the_default_task():
    assert location("", LOCAL, "/device:CPU:0") == LOCAL + "/device:CPU:0"
    assert location("/job:ps", LOCAL, "/device:CPU:0") == PS + "/device:CPU:0"
    assert location("/job:worker/task:1/gpu:0", LOCAL, "/device:CPU:0") == (
        WORKER + "/device:CPU:0")
    assert task_of(WORKER + "/device:TEST:0") == WORKER


def _two_task_graph(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [3], name="x")
        with device("/job:ps/task:0"):
            a = apply_op(registry, "exp", [x], {}, name="a")
        with device("/job:worker/task:1"):
            b = apply_op(registry, "mul", [a, a], {}, name="b")  # a read twice: one pair
            c = apply_op(registry, "add", [b, x], {}, name="c")
        with device("/job:ps/task:0"), control_dependencies([c]):
            d = apply_op(registry, "neg", [a], {}, name="d")  # waits for c across tasks
    return g, x, d


def _program(g, x, fetch, options=None):
    program = new_program([fetch], [x], options or PlanOptions())
    return compile_program(program)


def test_placement_keeps_the_task_and_explain_shows_it(registry):
    g, x, d = _two_task_graph(registry)
    with Session(g) as sess:
        explanation = sess.explain(d, {x: None}, show=False)
    assert explanation.placement["a"] == PS + "/device:CPU:0"
    assert explanation.placement["b"] == WORKER + "/device:CPU:0"
    assert set(explanation.partitions) == {LOCAL + "/device:CPU:0", PS + "/device:CPU:0",
                                           WORKER + "/device:CPU:0"}


def test_every_crossing_edge_is_one_send_recv_pair_per_tensor_and_destination(registry):
    g, x, d = _two_task_graph(registry)
    parts = _program(g, x, d).partitions
    worker, ps = parts[WORKER + "/device:CPU:0"], parts[PS + "/device:CPU:0"]
    received = sorted(r.attrs["tensor_name"] for r in worker.recvs)
    assert received == ["a:0", "x:0"]  # a read twice there, received once
    assert sorted(r.attrs["tensor_name"] for r in ps.recvs) == ["^c", "x:0"]
    control = next(r for r in ps.recvs if r.attrs["tensor_name"] == "^c")
    d_node = next(op for op in ps.ops if op.name == "d")
    assert ps.controls_of(d_node) == (control,)  # the control edge became a marker
    for part in parts.values():
        for r in part.recvs:
            assert r.attrs["recv_location"] == part.location
            assert r.attrs["send_incarnation"] == 0
    sends = {(s.attrs["tensor_name"], s.attrs["recv_location"]) for p in parts.values()
             for s in p.sends}
    recvs = {(r.attrs["tensor_name"], r.attrs["recv_location"]) for p in parts.values()
             for r in p.recvs}
    assert sends == recvs


def test_the_partitioned_step_gives_the_unpartitioned_result(registry):
    g, x, d = _two_task_graph(registry)
    value = np.array([0.0, 1.0, 2.0])
    with Session(g) as sess:
        got = sess.run(d, {x: value})
    np.testing.assert_allclose(got, -np.exp(value))


def test_a_partition_is_a_standalone_graph_that_exports(registry):
    g, x, d = _two_task_graph(registry)
    parts = _program(g, x, d).partitions
    for part in parts.values():
        pg = part.to_graph()
        text = export_graph(pg.graph)
        again = import_graph(text)
        assert export_graph(again) == text
        assert {op.type for op in again.operations} >= {op.type for op in part.ops}
        for op in again.operations:
            assert op.device == part.location


def test_partitions_run_as_tasks_meeting_in_a_rendezvous(registry):
    """Each partition exported, imported and lowered on its own, as a task would; each runs on
    its own thread; values cross only through the rendezvous."""
    g, x, d = _two_task_graph(registry)
    parts = _program(g, x, d).partitions
    rendezvous, results, errors = LocalRendezvous(), {}, []
    value = np.array([0.5, 1.0, 1.5])

    def run(part):
        pg = part.to_graph()
        graph = import_graph(export_graph(pg.graph))
        task = task_of(part.location)
        plan = plan_for_partition(graph, pg.feeds, pg.fetches, pg.targets,
                                  PlanOptions(default_task=task))
        feeds = {graph.get_tensor(name): value for name in pg.feeds}
        ctx = StepContext(VariableStore(), None, RunToken(10.0), rendezvous, step_id=7)
        try:
            slots = execute(plan, feeds, ctx, None)
            results[part.location] = [slots[s] for s in plan.fetch_slots]
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,)) for p in parts.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    np.testing.assert_allclose(results[LOCAL + "/device:CPU:0"][0], -np.exp(value))
    assert rendezvous.pending() == 0


def test_a_task_plan_refuses_a_partition_of_another_task(registry):
    g, x, d = _two_task_graph(registry)
    part = _program(g, x, d).partitions[PS + "/device:CPU:0"]
    pg = part.to_graph()
    with pytest.raises(OpsdkError, match="not on this task"):
        plan_for_partition(pg.graph, pg.feeds, pg.fetches, pg.targets,
                           PlanOptions(default_task=WORKER))


def test_a_receiver_whose_sender_never_comes_stops_at_its_deadline():
    rendezvous = LocalRendezvous()
    with pytest.raises(CancelledError, match="receiving 'a:0'"):
        rendezvous.recv((1, "a:0", PS, WORKER, 0), RunToken(0.1))


def test_an_aborted_step_fails_its_receivers_with_the_abort_error():
    rendezvous = LocalRendezvous()
    threading.Timer(0.05, rendezvous.abort, (3, OpsdkError("task ps:0 failed"))).start()
    with pytest.raises(OpsdkError, match="task ps:0 failed"):
        rendezvous.recv((3, "a:0", PS, WORKER, 0), RunToken(5.0))
    rendezvous.end_step(3)


def test_passes_may_add_nodes_after_folding_slots_are_numbered_in_lower(registry):
    """The fold pass numbers nothing: a node added after it (here, by hand) gets its slot in
    `lower`, and the step computes with it."""
    from opsdk.runtime.compile.plan import lower
    from opsdk.runtime.compile.partition import partition_pass
    from opsdk.runtime.compile.pipeline import PIPELINE
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2], name="x")
        y = apply_op(registry, "exp", [x], {}, name="y")
        z = apply_op(registry, "neg", [x], {}, name="z")
    program = new_program([y], [x], PlanOptions())
    for p in PIPELINE:
        if p.name != "partition":
            program = p.run(program)
    program.ops.append(z.op)  # a later pass adds a node and rewires the fetch to it
    program.location[z.op] = program.location[y.op]
    program.device[z.op] = program.device[y.op]
    program.kernel[z.op] = _kernel(program, z.op)
    program.fetched[y] = z
    plan = lower(partition_pass(program))
    slots = execute(plan, {x: np.array([1.0, 2.0])}, StepContext(VariableStore(), None), None)
    assert slots[plan.fetch_slots[0]].tolist() == [-1.0, -2.0]


def _kernel(program, op):
    from opsdk.runtime.kernels.choice import choose_kernel
    return choose_kernel(op.spec, program.device[op])


def test_a_session_on_another_default_task_places_there(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2], name="x")
        y = apply_op(registry, "exp", [x], {}, name="y")
    with Session(g, SessionConfig(default_task=WORKER)) as sess:
        explanation = sess.explain(y, {x: None}, show=False)
        np.testing.assert_allclose(sess.run(y, {x: np.zeros(2)}), [1.0, 1.0])
    assert explanation.placement["y"] == WORKER + "/device:CPU:0"
    with pytest.raises(OpsdkError, match="write every field"):
        SessionConfig(default_task="/job:worker").plan_options()


def test_a_constant_read_on_another_task_is_held_there_and_keeps_its_control_inputs(registry):
    """A constant made under control_dependencies (as an optimizer's global step increment) on
    the worker, read on the ps only: the ps's copy waits for the same node, the worker runs no
    copy of it (which would wait for a marker from the ps for nothing)."""
    from opsdk.runtime.ir.graph import constant

    g = Graph()
    with g.as_default():
        x = placeholder("float64", [3], name="x")
        with device("/job:ps/task:0"):
            a = apply_op(registry, "exp", [x], {}, name="a")
        with device("/job:worker/task:1"), control_dependencies([a]):
            one = constant(np.ones(3), name="one")
        with device("/job:ps/task:0"):
            d = apply_op(registry, "add", [x, one], {}, name="d")
    parts = _program(g, x, d).partitions
    worker, ps = parts.get(WORKER + "/device:CPU:0"), parts[PS + "/device:CPU:0"]
    assert worker is None or not any(op.type == "const" for op in worker.ops)
    copy = next(op for op in ps.ops if op.type == "const")
    a_node = next(op for op in ps.ops if op.name == "a")
    assert ps.controls_of(copy) == (a_node,)
    assert not any(r.attrs["tensor_name"] == "^a" for p in parts.values() for r in p.recvs)
    with Session(g) as sess:
        np.testing.assert_allclose(sess.run(d, {x: np.zeros(3)}), np.ones(3))
