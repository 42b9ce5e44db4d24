"""`opsdk build` end to end on a small workspace: compile, reuse, rebuild what changed, report errors.

The tests share one built workspace (each compile costs seconds) and run in file order: each one
leaves the workspace built and states what the next build should compile.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.build.compiler import extension_suffix
from opsdk.build.diagnostics import BuildError
from opsdk.registry import KernelNotBuiltError, load_registry
from opsdk.runtime.kernels import loader
from opsdk.runtime.kernels.loader import load_kernel

pytestmark = pytest.mark.slow

TWICE_YAML = """\
op: bt_twice
summary: y = FACTOR * x, FACTOR from an included header.
type_attrs:
  T: [float32, float64]
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  cpu: bt_twice_cpu.cc
reference: "2 * x"
"""

TWICE_CPU = """\
#include "bt_twice_op.h"
#include "bt_factor.h"

namespace opsdk_op_bt_twice {
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs&) {
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = static_cast<T>(BT_FACTOR) * in.x[i];
}
}  // namespace opsdk_op_bt_twice
"""

SHIFT_YAML = """\
op: bt_shift
summary: y = x + offset.
type_attrs:
  T: [float64]
attrs:
  offset: {type: float, default: 0.0}
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  cpu: bt_shift_cpu.cc
reference: "x + offset"
"""

SHIFT_CPU = """\
#include "bt_shift_op.h"

namespace opsdk_op_bt_shift {
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs& attrs) {
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = in.x[i] + static_cast<T>(attrs.offset);
}
}  // namespace opsdk_op_bt_shift
"""


# No type attrs: the kernel is a plain function, which the kernel unit cannot instantiate
# explicitly; a wrong signature there shows only as a symbol the linked artefact lacks.
PLAIN_YAML = """\
op: bt_plain
summary: y = -x on float64 only.
inputs:
  x: {dtype: float64, shape: [n]}
outputs:
  y: {dtype: float64, shape: [n]}
kernels:
  cpu: bt_plain_cpu.cc
reference: "-x"
"""

PLAIN_CPU = """\
#include "bt_plain_op.h"

namespace opsdk_op_bt_plain {
void cpu(const Inputs& in, Outputs& out, const Dims& dims, const Attrs&) {
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = -in.x[i];
}
}  // namespace opsdk_op_bt_plain
"""


def write_workspace(root: Path) -> None:
    opdefs = root / "opdefs"
    opdefs.mkdir(parents=True)
    (opdefs / "bt_twice.yaml").write_text(TWICE_YAML)
    (opdefs / "bt_twice_cpu.cc").write_text(TWICE_CPU)
    (opdefs / "bt_factor.h").write_text("#pragma once\n#define BT_FACTOR 2\n")
    (opdefs / "bt_shift.yaml").write_text(SHIFT_YAML)
    (opdefs / "bt_shift_cpu.cc").write_text(SHIFT_CPU)
    (opdefs / "bt_plain.yaml").write_text(PLAIN_YAML)
    (opdefs / "bt_plain_cpu.cc").write_text(PLAIN_CPU)


def compiled(report) -> list[str]:
    return sorted(r.op for r in report.compiled)


def kernel(root: Path, op: str):
    return load_kernel(load_registry(root).get(op), "cpu")


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("buildws")
    write_workspace(root)
    report = build_workspace(root, jobs=2, progress=False)
    return root, report


def test_first_build_compiles_every_op_into_a_loadable_module(ws):
    root, report = ws
    assert compiled(report) == ["bt_plain", "bt_shift", "bt_twice"]
    assert {r.parts for r in report.compiled} == {("glue", "kernel", "link")}
    manifest = json.loads((root / "build/cpu/bt_twice/manifest.json").read_text())
    assert re.fullmatch(r"_opsdk_bt_twice_[0-9a-f]{12}", manifest["module"])
    assert manifest["module"] == f"_opsdk_bt_twice_{manifest['key'][:12]}"
    assert manifest["file"] == manifest["module"] + extension_suffix()
    assert "opdefs/bt_factor.h" in manifest["sources"]
    objects = {o["role"]: o for o in manifest["objects"]}
    assert "opdefs/bt_factor.h" in objects["kernel"]["sources"]
    # The glue never sees the kernel or its headers; the kernel unit never sees pybind11.
    assert not any("bt_factor" in h or "bt_twice_cpu" in h for h in objects["glue"]["sources"])
    assert any("pybind11" in h for h in objects["glue"]["sources"])
    assert not any("pybind11" in h for h in objects["kernel"]["sources"])
    np.testing.assert_array_equal(kernel(root, "bt_twice")(np.arange(4.0)), [0, 2, 4, 6])
    np.testing.assert_array_equal(kernel(root, "bt_twice")(np.arange(2, dtype=np.float32)), [0, 2])
    np.testing.assert_array_equal(kernel(root, "bt_shift")(np.arange(3.0), 1.5), [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(kernel(root, "bt_plain")(np.arange(2.0)), [0, -1])


def test_second_build_compiles_nothing(ws):
    root, _ = ws
    report = build_workspace(root, progress=False)
    assert compiled(report) == []
    assert sorted(r.op for r in report.up_to_date) == ["bt_plain", "bt_shift", "bt_twice"]


def test_noop_cli_build_is_fast(ws):
    root, _ = ws
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "opsdk.cli", "-C", str(root), "build"],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    assert "0 compiled, 3 up to date" in proc.stdout
    # The target is < 1 s; the margin absorbs a loaded shared test machine.
    assert elapsed < 2.5, f"no-op build took {elapsed:.2f} s"


def test_editing_an_included_header_rebuilds_only_its_op(ws):
    root, _ = ws
    old = kernel(root, "bt_twice")
    (root / "opdefs/bt_factor.h").write_text("#pragma once\n#define BT_FACTOR 3\n")
    report = build_workspace(root, progress=False)
    assert compiled(report) == ["bt_twice"]
    # A new module name per build: the same process loads the edit next to the old kernel.
    np.testing.assert_array_equal(kernel(root, "bt_twice")(np.arange(3.0)), [0, 3, 6])
    np.testing.assert_array_equal(old(np.arange(3.0)), [0, 2, 4])
    assert len(list((root / "build/cpu/bt_twice").glob("_opsdk_*"))) == 1


def _objects(root: Path, op: str) -> dict[str, tuple[str, int]]:
    """role -> (object file, its mtime) as the op's manifest lists them."""
    manifest = json.loads((root / f"build/cpu/{op}/manifest.json").read_text())
    folder = root / f"build/cpu/{op}/obj"
    return {o["role"]: (o["file"], (folder / o["file"]).stat().st_mtime_ns)
            for o in manifest["objects"]}


def test_editing_a_kernel_rebuilds_only_that_op(ws):
    root, _ = ws
    before = _objects(root, "bt_shift")
    path = root / "opdefs/bt_shift_cpu.cc"
    path.write_text(SHIFT_CPU.replace("in.x[i] + ", "2 * in.x[i] + "))
    report = build_workspace(root, progress=False)
    assert compiled(report) == ["bt_shift"]
    # Only the kernel's object recompiled; the glue object is the one of the last build.
    assert report.compiled[0].parts == ("kernel", "link")
    after = _objects(root, "bt_shift")
    assert after["glue"] == before["glue"] and after["kernel"] != before["kernel"]
    assert sorted(p.name for p in (root / "build/cpu/bt_shift/obj").iterdir()) == sorted(
        [after["glue"][0], after["glue"][0][:-2] + ".json",
         after["kernel"][0], after["kernel"][0][:-2] + ".json"])
    np.testing.assert_array_equal(kernel(root, "bt_shift")(np.arange(3.0), 1.0), [1, 3, 5])


def test_editing_a_declaration_rebuilds_both_objects(ws):
    root, _ = ws
    path = root / "opdefs/bt_shift.yaml"
    good = path.read_text()
    # A new attr doc changes bt_shift_op.h, which both units include.
    path.write_text(good.replace("default: 0.0}", "default: 0.0, doc: added}"))
    try:
        report = build_workspace(root, progress=False)
        assert compiled(report) == ["bt_shift"]
        assert report.compiled[0].parts == ("glue", "kernel", "link")
    finally:
        path.write_text(good)


def test_changed_flags_rebuild_and_the_loader_warns_on_a_newer_kernel(ws, monkeypatch):
    root, _ = ws
    monkeypatch.setenv("OPSDK_CXXFLAGS", "-DBT_UNUSED_FLAG=1")
    report = build_workspace(root, ops=["bt_shift"], progress=False)
    assert compiled(report) == ["bt_shift"]
    source = root / "opdefs/bt_shift_cpu.cc"
    future = time.time() + 60
    os.utime(source, (future, future))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # touched, not edited: no warning
        kernel(root, "bt_shift")
    source.write_text(source.read_text() + "// edited\n")
    os.utime(source, (future, future))
    monkeypatch.setattr(loader, "_resolved", {})
    monkeypatch.setattr(loader, "_modules", {})
    with pytest.warns(UserWarning, match=r"op 'bt_shift': opdefs/bt_shift_cpu.cc changed .* "
                                         r"rerun `opsdk build`") as caught:
        kernel(root, "bt_shift")
    assert [w.filename for w in caught if "changed" in str(w.message)] == [__file__]  # the caller's line, not opsdk's
    source.write_text(source.read_text().replace("// edited\n", ""))


def test_loader_warns_when_the_op_header_changed_after_the_build(ws, monkeypatch):
    root, _ = ws
    header = root / "generated/cpp/bt_twice_op.h"
    good = header.read_text()
    future = time.time() + 60
    monkeypatch.setattr(loader, "_resolved", {})
    monkeypatch.setattr(loader, "_modules", {})
    try:
        header.write_text(good + "// a declaration edit, not built yet\n")
        os.utime(header, (future, future))
        with pytest.warns(UserWarning, match=r"op 'bt_twice': generated/cpp/bt_twice_op.h changed"):
            kernel(root, "bt_twice")
    finally:
        header.write_text(good)


def test_compile_error_names_the_kernel_line_and_keeps_the_last_good_build(ws):
    root, _ = ws
    path = root / "opdefs/bt_twice_cpu.cc"
    good = path.read_text()
    manifest = (root / "build/cpu/bt_twice/manifest.json").read_text()
    path.write_text(good.replace("out.y[i] = ", "out.y[i] = undeclared_thing + "))
    with pytest.raises(BuildError) as err:
        build_workspace(root, ops=["bt_twice"], progress=False)
    message = str(err.value)
    assert re.search(r"^opdefs/bt_twice_cpu\.cc:7:\d+: error: .*undeclared_thing.* "
                     r"\[op 'bt_twice', cpu\]$", message, re.M), message
    assert "build/cpu/bt_twice/last_error.log" in message
    assert "In file included" not in message and len(message.splitlines()) <= 6
    assert "undeclared_thing" in (root / "build/cpu/bt_twice/last_error.log").read_text()
    assert (root / "build/cpu/bt_twice/manifest.json").read_text() == manifest
    assert not list((root / "build/cpu/bt_twice").glob(".tmp-*"))
    # Putting the source back gives the key of the last good build again: nothing to compile.
    path.write_text(good)
    assert compiled(build_workspace(root, ops=["bt_twice"], progress=False)) == []


@pytest.mark.parametrize("op, ours, expected", [
    # a template: the kernel unit's explicit instantiation finds no definition
    ("bt_twice", "const Dims& dims, const Attrs&)", "`opsdk_op_bt_twice::cpu(const Inputs<T>&"),
    # a plain function: it compiles as an overload; the linked artefact lacks the declared one
    ("bt_plain", "const Dims& dims, const Attrs&)", "`opsdk_op_bt_plain::cpu(opsdk_op_bt_plain::"),
])
def test_kernel_with_a_wrong_signature_is_a_build_error_with_the_declaration(ws, op, ours,
                                                                             expected):
    root, _ = ws
    path = root / f"opdefs/{op}_cpu.cc"
    good = path.read_text()
    path.write_text(good.replace(ours, "const Dims& dims)"))
    try:
        with pytest.raises(BuildError) as err:
            build_workspace(root, ops=[op], progress=False)
    finally:
        path.write_text(good)
    message = str(err.value)
    assert message.startswith(f"opdefs/{op}_cpu.cc: error: the cpu kernel does not define "
                              f"{expected}"), message
    assert f"generated/cpp/{op}_op.h" in message
    assert "const Dims& dims, const Attrs& attrs);" in message
    assert len(message.splitlines()) <= 8, message


def test_a_failed_kernel_keeps_the_glue_object_for_the_next_build(ws):
    root, _ = ws
    yaml_path, kernel_path = root / "opdefs/bt_shift.yaml", root / "opdefs/bt_shift_cpu.cc"
    good_yaml, good_kernel = yaml_path.read_text(), kernel_path.read_text()
    yaml_path.write_text(good_yaml.replace("default: 0.0}", "default: 0.0, doc: again}"))
    kernel_path.write_text(good_kernel.replace("out.y[i] = ", "out.y[i] = oops + "))
    try:
        with pytest.raises(BuildError, match="oops"):
            build_workspace(root, ops=["bt_shift"], progress=False)
        kernel_path.write_text(good_kernel)
        report = build_workspace(root, ops=["bt_shift"], progress=False)
        # The glue compiled in the failed build is reused: only the fixed kernel compiles.
        assert report.compiled[0].parts == ("kernel", "link")
        np.testing.assert_array_equal(kernel(root, "bt_shift")(np.arange(2.0), 0.25), [0.25, 2.25])
    finally:
        yaml_path.write_text(good_yaml)
        kernel_path.write_text(good_kernel)


def test_stale_temp_files_and_orphan_artefacts_are_removed(ws):
    root, _ = ws
    folder = root / "build/cpu/bt_twice"
    orphan = folder / f"_opsdk_bt_twice_000000000000{extension_suffix()}"
    temp = folder / f".tmp-_opsdk_bt_twice_111111111111-99999{extension_suffix()}"
    for path in (orphan, temp):
        path.write_bytes(b"\x7fELF half written")
    report = build_workspace(root, ops=["bt_twice"], progress=False)
    assert compiled(report) == []
    assert not orphan.exists() and not temp.exists()
    factor = int(re.search(r"BT_FACTOR (\d+)", (root / "opdefs/bt_factor.h").read_text())[1])
    np.testing.assert_array_equal(kernel(root, "bt_twice")(np.arange(2.0)), [0, factor])


def test_unknown_op_is_a_user_error(ws):
    root, _ = ws
    with pytest.raises(Exception, match=r"no op named 'bt_twise' .*did you mean 'bt_twice'"):
        build_workspace(root, ops=["bt_twise"], progress=False)


def test_loader_says_to_build_when_nothing_was_built(tmp_path):
    write_workspace(tmp_path)
    spec = load_registry(tmp_path).get("bt_shift")
    with pytest.raises(KernelNotBuiltError,
                       match=r"op 'bt_shift': no built cpu kernel; run `opsdk build` in "):
        load_kernel(spec, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (tmp_path / "build/cpu/bt_shift").mkdir(parents=True)
        (tmp_path / "build/cpu/bt_shift/manifest.json").write_text("{truncated")
        with pytest.raises(KernelNotBuiltError):
            load_kernel(spec, "cpu")
