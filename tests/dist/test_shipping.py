"""Op libraries reach the tasks: a user workspace's declarations, Python kernels and built C++
kernels travel to the task packed by content, and a task whose copy of an op's declaration
digests differently from the master's refuses the partition."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest

import opsdk
from opsdk.build.driver import build_workspace
from opsdk.dist import ClusterSession, shipping
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.ir.graph import Graph, placeholder

PS = "/job:ps/replica:0/task:0"

PLUS = """
op: plus_hundred
summary: y = x + 100 (a C++ kernel the task must receive built).
type_attrs: {T: [float32, float64]}
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels: {cpu: plus_hundred_cpu.cc}
reference: "x + 100"
"""
PLUS_CPU = """#include "plus_hundred_op.h"

namespace opsdk_op_plus_hundred {

template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    (void)attrs;
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = in.x[i] + static_cast<T>(100);
}

}  // namespace opsdk_op_plus_hundred
"""
TRIPLE = """
op: triple
summary: y = 3 x (a Python kernel the task must receive).
type_attrs: {T: [float32, float64]}
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels: {python: kernels.py:triple}
reference: "3 * x"
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A workspace 'shipped_ops' with a built C++ op and a Python-kernel op."""
    root = tmp_path_factory.mktemp("ship") / "shipped_ops"
    (root / "opdefs").mkdir(parents=True)
    (root / "opdefs" / "plus_hundred.yaml").write_text(PLUS)
    (root / "opdefs" / "plus_hundred_cpu.cc").write_text(PLUS_CPU)
    (root / "opdefs" / "triple.yaml").write_text(TRIPLE)
    (root / "opdefs" / "kernels.py").write_text("def triple(xp, x):\n    return 3 * x\n")
    build_workspace(root, ops=["plus_hundred"], jobs=2, cuda="off", progress=False)
    return root


def _graph(root: Path):
    ops = opsdk.load_ops(root)
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [3], name="x")
        with g.device("/job:ps/task:0"):
            y = ops.triple(ops.plus_hundred(x))
    return g, x, y


def test_the_package_holds_declarations_kernels_and_built_artefacts_only(built):
    files = shipping.workspace_files(built)
    assert "opdefs/plus_hundred.yaml" in files and "opdefs/kernels.py" in files
    assert "build/cpu/plus_hundred/manifest.json" in files
    assert any(f.startswith("build/cpu/plus_hundred/_opsdk_plus_hundred_") and f.endswith(".so")
               for f in files)
    assert not any("/obj/" in f or f.startswith("generated/") for f in files)
    digest, data = shipping.pack(built)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == files
    assert shipping.pack(built)[0] == digest  # named by content, not by when it was packed


def test_a_task_that_cannot_see_the_workspace_runs_its_ops_from_the_shipped_copy(
        ray_engine, built, monkeypatch):
    g, x, y = _graph(built)
    hidden = built.with_name("shipped_ops.hidden")
    real_pack = shipping.pack

    def pack_then_hide(root):
        packed = real_pack(root)
        os.rename(built, hidden)  # from here on, no task can read the master's folder
        return packed

    monkeypatch.setattr(shipping, "pack", pack_then_hide)
    try:
        with ClusterSession(g, {"ps": 1, "worker": 1}, cluster_name="ship1") as sess:
            out = sess.run(y, {x: np.arange(3, dtype=np.float32)})
            copies = sess.task_stats()[PS]["workspaces"]
    finally:
        if hidden.exists():
            os.rename(hidden, built)
    np.testing.assert_array_equal(out, [300.0, 303.0, 306.0])
    [(copy, origin)] = copies.items()
    assert origin == str(built)
    assert Path(copy).name == "shipped_ops" and not Path(copy).is_relative_to(built.parent)


def test_an_op_declared_differently_on_the_task_refuses_the_partition(ray_engine, built,
                                                                       monkeypatch):
    g, x, y = _graph(built)
    kernels = built / "opdefs" / "kernels.py"
    original = kernels.read_text()
    real_pack = shipping.pack

    def edit_then_pack(root):
        # The workspace changes after the step was compiled (digests taken), before it ships.
        kernels.write_text(original.replace("3 * x", "4 * x"))
        return real_pack(root)

    monkeypatch.setattr(shipping, "pack", edit_then_pack)
    try:
        with ClusterSession(g, {"ps": 1, "worker": 1}, cluster_name="ship2") as sess:
            with pytest.raises(OpsdkError) as info:
                sess.run(y, {x: np.ones(3, np.float32)})
    finally:
        kernels.write_text(original)
    message = str(info.value)
    assert f"task {PS}: op 'shipped_ops::triple'" in message
    assert "declared differently here" in message and "refused" in message
    assert message.count("digest ") == 2  # the task's and the master's


def test_a_tampered_copy_is_unpacked_again_and_a_damaged_package_refused(ray_engine, tmp_path,
                                                                          built, monkeypatch):
    import ray

    monkeypatch.setattr(shipping, "cache_folder", lambda: tmp_path)
    monkeypatch.setattr(shipping, "_unpacked", {})
    digest, data = shipping.pack(built)
    box = [ray.put(data)]
    root = shipping.local_copy(shipping.Shipment("shipped_ops", digest, str(built), box))
    kernel = root / "opdefs" / "kernels.py"
    kernel.write_text("def triple(xp, x):\n    return 4 * x\n")
    shipping._unpacked.clear()  # a new task process on this node finds the copy changed
    again = shipping.local_copy(shipping.Shipment("shipped_ops", digest, str(built), box))
    assert again == root and "3 * x" in kernel.read_text()
    with pytest.raises(OpsdkError, match="other contents than packed"):
        shipping.local_copy(shipping.Shipment("shipped_ops", "0" * 64, str(built), box))


def test_a_new_ray_connection_gets_the_package_put_again(built, monkeypatch):
    from types import SimpleNamespace

    from opsdk.dist import engine

    puts = []
    fake_ray = SimpleNamespace(put=lambda data: puts.append(data) or f"ref{len(puts)}")
    monkeypatch.setattr(engine, "ray_module", lambda: fake_ray)
    monkeypatch.setattr(shipping, "_shipped", {})
    current = [engine.Engine("", "/tmp/a")]
    monkeypatch.setattr(engine, "connected", lambda: current[0])
    assert shipping.ship(str(built)).box == shipping.ship(str(built)).box == ["ref1"]
    for n in range(2, 6):  # shutdown and connect again: the old connection object is dropped
        current[0] = None  # the old connection is gone (CPython may give its address to the next)
        current[0] = engine.Engine("", "/tmp/a")
        assert shipping.ship(str(built)).box == [f"ref{n}"]


def test_a_broken_declaration_elsewhere_in_the_workspace_does_not_stop_its_good_ops(
        ray_engine, tmp_path):
    from opsdk.codegen.generate import generate_workspace

    root = tmp_path / "half_broken"
    (root / "opdefs").mkdir(parents=True)
    (root / "opdefs" / "triple.yaml").write_text(TRIPLE)
    (root / "opdefs" / "kernels.py").write_text("def triple(xp, x):\n    return 3 * x\n")
    generate_workspace(root)  # before the broken file: the good op's wrapper
    (root / "opdefs" / "broken.yaml").write_text("op: broken\nsummary: no inputs, no kernels\n")
    with pytest.warns(UserWarning, match="broken.yaml"):
        ops = opsdk.load_ops(root)
    g = Graph()
    with g.as_default():
        x = placeholder("float32", [2], name="x")
        with g.device("/job:ps/task:0"):
            y = ops.triple(x)
    with ClusterSession(g, {"ps": 1, "worker": 1}, cluster_name="ship-broken") as sess:
        np.testing.assert_array_equal(sess.run(y, {x: np.ones(2, np.float32)}), [3.0, 3.0])


def test_a_linked_file_travels_as_its_content(built, tmp_path):
    elsewhere = tmp_path / "notes.txt"
    elsewhere.write_text("kept outside the workspace\n")
    link = built / "opdefs" / "notes.txt"
    link.symlink_to(elsewhere)
    try:
        digest, data = shipping.pack(built)
    finally:
        link.unlink()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = tar.getmember("opdefs/notes.txt")
        assert member.isfile() and tar.extractfile(member).read() == b"kept outside the workspace\n"
