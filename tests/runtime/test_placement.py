"""Placement, copies, soft placement and the one executor, on the test device (no GPU needed)."""

from __future__ import annotations

import gc
import logging
import re
import textwrap

import numpy as np
import pytest

from opsdk.registry import BUILTIN_ROOT, Registry, load_registry, parse_opdef
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.control_flow.builders import cond, while_loop
from opsdk.runtime.devices import get_device
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, device, placeholder
from opsdk.runtime.train.optimizers import AdagradOptimizer, AdamOptimizer, GradientDescentOptimizer

LOCAL = "/job:localhost/replica:0/task:0"  # the session's default task
# Nodes outside a device scope go to the most preferred available device: a GPU where there is
# one. Tests that name where such nodes land prefer the host, so they hold on any machine.
HOST_FIRST = SessionConfig(device_preference=("CPU",))

RECORD_OPS = """
op: record_type
summary: Returns x, recording the type of array its kernel was given.
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: any}
outputs:
  y: {dtype: T}
shape_fn: like_x
kernels:
  python: record_kernels.py:record_type
"""

RECORD_KERNELS = '''
seen = []


def record_type(xp, x):
    seen.append(type(x).__name__)
    return x * 1
'''


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """(registry with record_type, the list its kernel appends array type names to)."""
    root = tmp_path_factory.mktemp("record_ws")
    (root / "opdefs").mkdir()
    (root / "opdefs" / "record.yaml").write_text(textwrap.dedent(RECORD_OPS))
    (root / "opdefs" / "record_kernels.py").write_text(textwrap.dedent(RECORD_KERNELS))
    specs = {s.name: s for s in parse_opdef(root / "opdefs" / "record.yaml", root)}
    for path in sorted((BUILTIN_ROOT / "opdefs" / "builtin").glob("*.yaml")):
        specs.update({s.name: s for s in parse_opdef(path, BUILTIN_ROOT)})
    registry = Registry(specs)
    from opsdk.registry import load_callable
    spec = registry.get("record_type")
    seen = load_callable(spec, spec.kernel("python").source).__globals__["seen"]
    return registry, seen


def _ops(registry):
    def op(op_name, *inputs, **attrs):
        node = attrs.pop("name", None)
        return apply_op(registry, op_name, list(inputs), attrs, name=node)
    return op


def test_an_explicit_scope_places_nodes_and_copies_cross_the_edges(graph, registry):
    op = _ops(registry)
    x = placeholder("float32", [3], name="x")
    with device("/test:0"):
        e = op("exp", x, name="e")
        y = op("add", e, e, name="y")  # two readers of e on the same device
        z = op("mul", y, x, name="z")  # x read again on the test device: the same copy
    out = op("neg", z, name="out")
    with Session(graph, HOST_FIRST) as sess:
        explanation = sess.explain(out, {x: None}, show=False)
        got = sess.run(out, {x: np.arange(3, dtype=np.float32)})
    assert type(got) is np.ndarray  # fetches come back as NumPy
    xs = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(got, -(2 * np.exp(xs)) * xs, rtol=1e-6)
    assert explanation.placement["e"] == LOCAL + "/device:TEST:0"
    assert explanation.placement["out"] == LOCAL + "/device:CPU:0"
    assert sorted(explanation.copies) == [("x:0", "/device:CPU:0", "/device:TEST:0"),
                                          ("z:0", "/device:TEST:0", "/device:CPU:0")]
    assert set(explanation.partitions) == {LOCAL + "/device:CPU:0", LOCAL + "/device:TEST:0"}


def test_copies_are_counted_per_step(graph, registry):
    op = _ops(registry)
    x = placeholder("float64", [2], name="x")
    with device("/test:0"):
        y = op("exp", x)
    test = get_device("/test:0")
    with Session(graph) as sess:
        sess.run(y, {x: np.ones(2)})
        before = (test.copies_in, test.copies_out)
        sess.run(y, {x: np.ones(2)})
    assert (test.copies_in - before[0], test.copies_out - before[1]) == (1, 1)


def test_a_device_array_fed_for_that_device_alone_stays_there(graph, registry):
    # A CuPy array fed to a placeholder that only GPU nodes read went to the host and back each
    # run (27 ms for 64 MB on an H100, where the GELU it fed took 0.06 ms). Here the test device.
    from opsdk.runtime.devices.testing import TestArray

    op = _ops(registry)
    x = placeholder("float64", [3], name="x")
    with device("/test:0"):
        y = op("exp", x, name="y")
    host_read = op("neg", x, name="host_read")  # a host reader: that feed is copied to the host
    test = get_device("/test:0")
    value = np.array([0.0, 1.0, 2.0])
    with Session(graph, HOST_FIRST) as sess:
        for _ in range(2):
            before = (test.copies_in, test.copies_out)
            got = sess.run(y, {x: TestArray(value.copy())})
            assert (test.copies_in - before[0], test.copies_out - before[1]) == (0, 1)
            np.testing.assert_allclose(got, np.exp(value))
        both = sess.run([y, host_read], {x: TestArray(value.copy())})
        np.testing.assert_allclose(both[1], -value)
        with pytest.raises(OpsdkError, match=r"feed for 'x:0' has shape \[2\]"):
            sess.run(y, {x: TestArray(np.zeros(2))})


def test_constants_read_on_a_device_are_held_there_not_sent_every_step(graph, registry):
    op = _ops(registry)
    x = placeholder("float64", [2], name="x")
    with device("/test:0"):
        y = op("mul", x, np.float64(3.0), name="y")
    test = get_device("/test:0")
    with Session(graph) as sess:
        explanation = sess.explain(y, {x: None}, show=False)
        assert sess.run(y, {x: np.ones(2)}).tolist() == [3.0, 3.0]
        before = (test.copies_in, test.copies_out)
        assert sess.run(y, {x: np.ones(2)}).tolist() == [3.0, 3.0]
    # Only x goes in and y comes out: the constant lives in the test device's partition.
    assert (test.copies_in - before[0], test.copies_out - before[1]) == (1, 1)
    assert sorted(c[0] for c in explanation.cuts) == ["x:0", "y:0"]


def test_soft_placement_falls_back_and_logs_once_per_node(graph, caplog):
    registry = load_registry()
    x = placeholder("float32", [2, 3], name="x")
    with device("/test:0"):
        d = apply_op(registry, "pairwise_manhattan", [x, x], {}, name="dist")
    with caplog.at_level(logging.WARNING, logger="opsdk.placement"):
        with Session(graph, HOST_FIRST) as sess:
            explanation = sess.explain(d, {x: None}, show=False)
            got = sess.run(d, {x: np.ones((2, 3), np.float32)})
            sess.run(d, {x: np.ones((2, 3), np.float32)})
    assert explanation.placement["dist"] == LOCAL + "/device:CPU:0"
    assert got.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    logged = [r.getMessage() for r in caplog.records if "(node 'dist')" in r.getMessage()]
    assert logged == ["pairwise_manhattan (node 'dist'): placed on '/device:TEST:0', but op "
                      "'pairwise_manhattan' has no kernel for it; running it on /device:CPU:0"]


def test_each_new_graph_logs_its_own_soft_placement():
    # Logged nodes were once remembered by (id(graph), name): a new graph at a freed graph's
    # address (CPython reuses them) stayed silent.
    registry = load_registry()
    counts = []
    for _ in range(10):
        with Graph().as_default():
            x = placeholder("float32", [2, 3], name="x")
            with device("/test:0"):
                d = apply_op(registry, "pairwise_manhattan", [x, x], {}, name="dist")
            handler = _Records()
            logger = logging.getLogger("opsdk.placement")
            logger.addHandler(handler)
            try:
                with Session(d.graph, HOST_FIRST) as sess:
                    sess.run(d, {x: np.ones((2, 3), np.float32)})
            finally:
                logger.removeHandler(handler)
            counts.append(sum("(node 'dist')" in m for m in handler.messages))
            del x, d, sess
        gc.collect()
    assert counts == [1] * 10


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_without_soft_placement_a_missing_kernel_is_an_error_naming_everything(graph):
    registry = load_registry()
    x = placeholder("float32", [2, 3], name="x")
    with device("/test:0"):
        d = apply_op(registry, "pairwise_manhattan", [x, x], {}, name="dist")
    with Session(graph, SessionConfig(allow_soft_placement=False)) as sess:
        with pytest.raises(OpsdkError) as info:
            sess.run(d, {x: np.ones((2, 3), np.float32)})
    assert str(info.value) == (
        "pairwise_manhattan (node 'dist'): placed on '/device:TEST:0', but op "
        "'pairwise_manhattan' has no kernel for it; 'pairwise_manhattan' has kernels for CPU, "
        "GPU (turn soft placement on, or change the device scope)")


def test_an_unavailable_gpu_falls_back_softly_or_is_named(graph, registry, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", None)
    op = _ops(registry)
    x = placeholder("float64", [2], name="x")
    with device("/gpu:0"):
        y = op("exp", x, name="e")
    with Session(graph) as sess:
        np.testing.assert_allclose(sess.run(y, {x: np.zeros(2)}), [1.0, 1.0])
    with Session(graph, SessionConfig(allow_soft_placement=False)) as sess:
        with pytest.raises(OpsdkError, match=r"^exp \(node 'e'\): placed on '/device:GPU:0', "
                                             r"but that device needs CuPy, which is not "
                                             r"installed"):
            sess.run(y, {x: np.zeros(2)})


def test_a_cuda_only_op_without_a_usable_gpu_names_the_devices_and_why(graph, tmp_path,
                                                                          monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", None)
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "gonly.yaml").write_text(
        "op: gonly\nsummary: y = x on a GPU only.\ninputs:\n  x: {dtype: float64, shape: [n]}\n"
        "outputs:\n  y: {dtype: float64, shape: [n]}\nkernels:\n  cuda: gonly_cuda.cu\n")
    (tmp_path / "opdefs" / "gonly_cuda.cu").write_text("// not built\n")
    registry = load_registry(tmp_path)
    x = placeholder("float64", [2], name="x")
    free = apply_op(registry, "gonly", [x], {}, name="free")
    with device("/gpu:0"):
        scoped = apply_op(registry, "gonly", [x], {}, name="scoped")
    why = r"devices here: /device:CPU:0[^;]*; /device:GPU:0 unusable: needs (CuPy|a CUDA GPU)"
    with Session(graph) as sess:
        with pytest.raises(OpsdkError, match=r"^gonly \(node 'free'\): no kernel for any available "
                                             r"device \(it has kernels for GPU; " + why):
            sess.run(free, {x: np.zeros(2)})
    with Session(graph, SessionConfig(allow_soft_placement=False)) as sess:
        with pytest.raises(OpsdkError) as info:
            sess.run(scoped, {x: np.zeros(2)})
    assert "soft placement" not in str(info.value)  # it would lead back to the first error
    assert re.search(r"'gonly' has kernels for GPU \(no usable device runs it: " + why,
                     str(info.value)), str(info.value)


def test_a_preference_places_unscoped_nodes_on_the_test_device(graph, registry):
    op = _ops(registry)
    x = placeholder("float64", [3], name="x")
    y = op("exp", x, name="e")
    config = SessionConfig(device_preference=("test", "cpu"))
    with Session(graph, config) as sess:
        explanation = sess.explain(y, {x: None}, show=False)
        np.testing.assert_allclose(sess.run(y, {x: np.zeros(3)}), np.ones(3))
    assert explanation.placement["e"] == LOCAL + "/device:TEST:0"


def test_a_cond_branch_runs_on_its_device_through_the_one_executor(record):
    registry, seen = record
    op = _ops(registry)
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [3], name="x")
        with device("/test:0"):
            y = cond(op("reduce_sum", x) > 0.0, lambda: op("record_type", x * 2.0),
                     lambda: op("record_type", -x), name="c")
        out = op("record_type", y)
    seen.clear()
    with Session(g) as sess:
        got = sess.run(out, {x: np.ones(3)})
    assert got.tolist() == [2.0, 2.0, 2.0]
    # Inside the branch the kernel got the test device's arrays; outside, NumPy's.
    assert seen == ["TestArray", "ndarray"]


def test_a_while_body_runs_on_its_device_and_checks_shapes_at_run_time(record):
    registry, seen = record
    op = _ops(registry)
    g = Graph()
    with g.as_default():
        x = placeholder("float64", None, name="x")  # unknown shape: checked when it runs
        with device("/test:0"):
            _, total = while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, op("record_type", t) + x),
                                  [0, np.zeros(2)])
            bad = op("add", x, np.zeros(3), name="bad")
    seen.clear()
    with Session(g) as sess:
        assert sess.run(total, {x: np.ones(2)}).tolist() == [3.0, 3.0]
        with pytest.raises(OpsdkError, match=r"^add \(node 'bad'\):"):
            sess.run(bad, {x: np.ones(2)})
    assert seen == ["TestArray"] * 3


def test_a_variable_lives_and_trains_on_its_device(registry):
    op = _ops(registry)
    results = {}
    for where in ("/cpu:0", "/test:0"):
        g = Graph()
        with g.as_default(), device(where):
            x = placeholder("float64", [4, 2], name="x")
            w = Variable(np.array([[1.0], [-1.0]]), name="w")
            loss = op("reduce_sum", op("square", op("matmul", x, w)))
            train = GradientDescentOptimizer(0.05).minimize(loss)
            init = global_variables_initializer()
        with Session(g) as sess:
            sess.run(init)
            losses = [float(sess.run([train, loss], {x: np.arange(8.0).reshape(4, 2) / 8})[1])
                      for _ in range(5)]
            explanation = sess.explain(train, {x: None}, show=False)
        results[where] = losses
        assert explanation.placement["w"] == LOCAL + get_device(where).name
    np.testing.assert_allclose(results["/test:0"], results["/cpu:0"], rtol=1e-12)
    assert results["/cpu:0"][-1] < results["/cpu:0"][0]


def test_unscoped_variables_live_where_their_optimizer_updates_them(registry):
    """With the test device preferred, an optimizer's update node and the variables it updates
    go there together, so a training step copies only its feeds in and its fetch out."""
    op = _ops(registry)
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [4, 2], name="x")
        w = Variable(np.array([[1.0], [-1.0]]), name="w")
        loss = op("reduce_sum", op("square", op("matmul", x, w)), name="loss")
        train = GradientDescentOptimizer(0.05).minimize(loss)
        init = global_variables_initializer()
    test = get_device("/test:0")
    feed = {x: np.arange(8.0).reshape(4, 2) / 8}
    with Session(g, SessionConfig(device_preference=("test", "cpu"))) as sess:
        sess.run(init)
        sess.run([train, loss], feed)
        explanation = sess.explain([train, loss], {x: None}, show=False)
        before = (test.copies_in, test.copies_out)
        sess.run([train, loss], feed)
    assert explanation.placement["w"] == LOCAL + "/device:TEST:0"
    update = next(o for o in g.operations if o.type == "apply_updates")
    assert explanation.placement[update.name] == LOCAL + "/device:TEST:0"
    assert (test.copies_in - before[0], test.copies_out - before[1]) == (1, 1)


def _two_homes(registry, homes, optimizer):
    """w and b under the scopes `homes`, trained by `optimizer`; (graph, x, loss, train, init,
    w, b)."""
    op = _ops(registry)
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [4, 2], name="x")
        with device(homes[0]):
            w = Variable(np.array([[1.0], [-1.0]]), name="w")
        with device(homes[1]):
            b = Variable(np.array([0.5]), name="b")
        loss = op("reduce_sum", op("square", op("add", op("matmul", x, w), b)), name="loss")
        train = optimizer().minimize(loss)
        init = global_variables_initializer()
    return g, x, loss, train, init, w, b


@pytest.mark.parametrize("optimizer", [lambda: GradientDescentOptimizer(0.05),
                                       lambda: AdamOptimizer(0.05)], ids=["gd", "adam"])
def test_an_update_of_variables_on_two_devices_runs_beside_each(registry, optimizer):
    """One minimize over a host variable and a test-device one: an update node per device,
    each beside its variable (Adam's powers, with w, read by b's update before they are
    scaled), with the values of training both on the host."""
    feed = np.arange(8.0).reshape(4, 2) / 8
    values = {}
    for homes in (("/cpu:0", "/cpu:0"), ("/cpu:0", "/test:0")):
        g, x, loss, train, init, w, b = _two_homes(registry, homes, optimizer)
        with Session(g, HOST_FIRST) as sess:
            sess.run(init)
            losses = [float(sess.run([train, loss], {x: feed})[1]) for _ in range(6)]
            explanation = sess.explain(train, {x: None}, show=False)
            values[homes] = (losses, sess.run(w), sess.run(b))
        updates = {name: where for name, where in explanation.placement.items()
                   if "/at_" in name}
        if homes[1] == "/cpu:0":
            assert not updates
        else:
            assert sorted(updates.values()) == [LOCAL + "/device:CPU:0", LOCAL + "/device:TEST:0"]
            assert any("split into" in line for line in explanation.lines_of("place"))
    one, two = values.values()
    for a, b in zip(one, two):
        np.testing.assert_allclose(b, a, rtol=1e-12)
    assert one[0][-1] < one[0][0]


def test_an_update_whose_slot_lives_on_another_task_is_refused_naming_both(registry):
    op = _ops(registry)
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [4, 2], name="x")
        with device("/job:ps/task:0"):
            w = Variable(np.array([[1.0], [-1.0]]), name="w")
        loss = op("reduce_sum", op("square", op("matmul", x, w)))
        opt = AdagradOptimizer(0.1)
        train = opt.minimize(loss)
    opt.get_slot(w, "accumulator").op.device = "/job:ps/task:1"  # as a hand-edited graph
    with Session(g) as sess, pytest.raises(OpsdkError, match=r"w/Adagrad on /job:ps/replica:0/"
                                                             r"task:1\); an optimizer's slots"):
        sess.explain(train, {x: None}, show=False)
