"""The compile pipeline: named passes, each switchable, explained; values released after their
last reader; a graph mixing builtin ops and a workspace's ops differentiates in any order."""

from __future__ import annotations

import textwrap
import tracemalloc

import numpy as np
import pytest

from opsdk.registry import load_registry
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.pipeline import PASS_NAMES, PIPELINE
from opsdk.runtime.exec.session import Session, SessionConfig
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.variables import Variable, global_variables_initializer
from opsdk.runtime.ir.graph import Graph, device, placeholder
from opsdk.runtime.train.optimizers import AdamOptimizer, GradientDescentOptimizer

# What these tests check is the host's plans: unscoped nodes stay on the host on a GPU machine too.
pytestmark = pytest.mark.usefixtures("host_default")

LOCAL = "/job:localhost/replica:0/task:0"  # the session's default task


def test_the_pipeline_is_a_named_ordered_list_of_passes():
    assert PASS_NAMES == ("prune", "place", "fold_cse", "fuse", "partition")
    assert all(callable(p.run) and callable(p.off) and p.doc for p in PIPELINE)


def _graph(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [2], name="x")
        unused = apply_op(registry, "exp", [x], {}, name="unused")
        a = apply_op(registry, "mul", [np.float64(2.0), np.float64(3.0)], {}, name="six")
        b = apply_op(registry, "add", [x, a], {}, name="b")
        c = apply_op(registry, "add", [x, a], {}, name="c")  # the same as b: merged
        with device("/test:0"):
            out = apply_op(registry, "mul", [b, c], {}, name="out")
    return g, x, out, unused


def test_explain_says_what_every_pass_did(registry, capsys):
    g, x, out, _ = _graph(registry)
    with Session(g) as sess:
        explanation = sess.explain(out, {x: None})
    printed = capsys.readouterr().out
    assert printed.strip() == str(explanation)
    assert [name for name, _ in explanation.passes] == list(PASS_NAMES)
    assert "unused" not in explanation.placement  # pruned
    assert explanation.placement["out"] == LOCAL + "/device:TEST:0"
    assert explanation.folded == ("six",) and explanation.merged[0] == "c"
    assert ("b:0", "/device:CPU:0", "/device:TEST:0") in explanation.copies
    assert ("b:0", LOCAL + "/device:CPU:0", LOCAL + "/device:TEST:0") in explanation.cuts
    assert ("out:0", "/device:TEST:0", "/device:CPU:0") in explanation.copies
    assert set(explanation.partitions) == {LOCAL + "/device:CPU:0", LOCAL + "/device:TEST:0"}
    assert "fold_cse:\n  folded: six" in printed


@pytest.mark.parametrize("off", PASS_NAMES)
def test_every_pass_can_be_switched_off_and_results_do_not_change(registry, off):
    g, x, out, _ = _graph(registry)
    config = SessionConfig(passes_off=frozenset({off}))
    with Session(g, config) as sess:
        if off == "partition":  # an edge crosses devices: without a cut that is an error
            with pytest.raises(OpsdkError, match=r"^mul \(node 'out'\) on /job:localhost/replica:0/"
                                                 r"task:0/device:TEST:0 reads 'b:0' from "
                                                 r"/job:localhost/replica:0/task:0/device:CPU:0, "
                                                 r"and the partition pass is off"):
                sess.run(out, {x: np.ones(2)})
            return
        got = sess.run(out, {x: np.ones(2)})
        explanation = sess.explain(out, {x: None}, show=False)
    assert got.tolist() == [49.0, 49.0]
    assert explanation.lines_of(off)[0].startswith("off")
    if off == "fold_cse":
        assert explanation.folded == () and explanation.merged == ()
    if off == "place":
        assert set(explanation.placement.values()) == {LOCAL + "/device:CPU:0"}
    if off == "prune":
        assert "unused" in explanation.placement


def test_an_unknown_pass_name_is_refused(registry):
    with pytest.raises(OpsdkError, match=r"unknown pass\(es\) fusion to switch off \(passes: "
                                         r"prune, place, fold_cse, fuse, partition\)"):
        Session(Graph(), SessionConfig(passes_off=frozenset({"fusion"})))


def _peak_of_chain(registry, length: int, shape=(256, 256)) -> tuple[int, np.ndarray]:
    g = Graph()
    with g.as_default():
        x = placeholder("float32", list(shape), name="x")
        y = x
        for _ in range(length):
            y = apply_op(registry, "add", [y, x], {})
    value = np.ones(shape, np.float32)
    with Session(g) as sess:
        sess.run(y, {x: value})  # the plan is built and cached before measuring
        tracemalloc.start()
        try:
            got = sess.run(y, {x: value})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, got


def test_a_chain_of_adds_holds_a_few_buffers_not_every_result(registry):
    peak, got = _peak_of_chain(registry, 1000)
    buffer = 256 * 256 * 4
    assert got[0, 0] == 1001.0
    # Without releases every one of the 1000 results stays alive until the step ends (262 MB).
    assert peak < 8 * buffer, f"peak {peak / 1e6:.1f} MB for buffers of {buffer / 1e6:.2f} MB"


def test_a_wide_graph_on_the_thread_pool_releases_values_too(registry):
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [256, 256], name="x")
        ends = []
        for op_name in ("add", "sub"):  # two independent chains: the concurrent executor
            y = x
            for _ in range(200):
                y = apply_op(registry, op_name, [y, x], {})
            ends.append(y)
        total = apply_op(registry, "add", ends, {})
    value = np.ones((256, 256), np.float32)
    # Unfused: fusion would make the two chains one kernel, and this is about the executor.
    with Session(g, SessionConfig(passes_off=frozenset({"fuse"}))) as sess:
        assert not sess.plan_for([total], (x,)).serial
        sess.run(total, {x: value})
        tracemalloc.start()
        try:
            got = sess.run(total, {x: value})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert got[0, 0] == 2.0  # 201 + (-199)
    assert peak < 16 * 256 * 256 * 4


MIXED_OPS = """
op: twice
summary: 2 x.
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: any}
outputs:
  y: {dtype: T}
shape_fn: like_x
gradient: twice_grad
kernels:
  python: twice_kernels.py:twice
reference: "2 * x"
---
op: twice_grad
summary: The gradient of twice.
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: any}
  grad_y: {dtype: T}
outputs:
  grad_x: {dtype: T}
shape_fn: like_x
gradient: null
kernels:
  python: twice_kernels.py:twice_grad
"""

MIXED_KERNELS = '''
def twice(xp, x):
    return x * 2


def twice_grad(xp, x, grad_y):
    return grad_y * 2
'''


def test_a_builtin_op_first_then_a_workspace_op_then_minimize(tmp_path):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs" / "twice.yaml").write_text(textwrap.dedent(MIXED_OPS))
    (tmp_path / "opdefs" / "twice_kernels.py").write_text(textwrap.dedent(MIXED_KERNELS))
    workspace = load_registry(tmp_path)
    builtin = load_registry()
    g = Graph()
    with g.as_default():
        x = placeholder("float64", [3], name="x")
        w = Variable(np.ones(3), name="w")
        scaled = x * 3.0  # a builtin op first, as almost every model starts
        y = apply_op(workspace, "twice", [apply_op(builtin, "mul", [scaled, w], {})], {})
        loss = apply_op(builtin, "reduce_sum", [apply_op(builtin, "square", [y], {})], {})
        trains = [GradientDescentOptimizer(0.001).minimize(loss), AdamOptimizer(0.1).minimize(loss)]
        init = global_variables_initializer()
    with Session(g) as sess:
        sess.run(init)
        first = sess.run(loss, {x: np.ones(3)})
        for train in trains:
            sess.run(train, {x: np.ones(3)})
        assert sess.run(loss, {x: np.ones(3)}) < first
