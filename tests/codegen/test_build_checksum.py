"""A damaged built extension: the loader refuses it clearly, and `opsdk build` repairs it.

Mapping a truncated or patched extension crashes the process that imports it (SIGBUS, SIGTRAP)
and an empty one gives a raw ImportError; the manifest's sha256 is checked first instead. Each
damaged artefact is loaded in a child process, so a regression shows as a failed test with the
signal, not as a crashed test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.registry import load_registry
from opsdk.registry.manifest import read_manifest
from opsdk.runtime.kernels.loader import load_kernel

pytestmark = pytest.mark.slow

OP = "ck_neg"
YAML = f"""\
op: {OP}
summary: y = -x.
type_attrs:
  T: [float64]
inputs:
  x: {{dtype: T, shape: [n]}}
outputs:
  y: {{dtype: T, shape: [n]}}
kernels:
  cpu: {OP}_cpu.cc
reference: "-x"
"""
KERNEL = f"""\
#include "{OP}_op.h"

namespace opsdk_op_{OP} {{
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs&) {{
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = -in.x[i];
}}
}}  // namespace opsdk_op_{OP}
"""
# Loads the kernel in a fresh process and prints what happened as one JSON line.
CHILD = """\
import json, sys
from opsdk.registry import KernelNotBuiltError, load_registry
from opsdk.runtime.kernels.loader import load_kernel
try:
    fn = load_kernel(load_registry(sys.argv[1]).get(sys.argv[2]), "cpu")
    print(json.dumps({"ok": [float(v) for v in fn(__import__("numpy").arange(3.0))]}))
except KernelNotBuiltError as exc:
    print(json.dumps({"error": str(exc)}))
"""


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:len(data) // 3])
    elif how == "patched":  # one byte in the middle of the code, same size and mtime unchanged
        patched = bytearray(data)
        patched[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(patched))
    else:
        path.write_bytes(b"")


def _load_in_child(root: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root), OP], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"loader process died with {proc.returncode}: {proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("checksum_ws")
    (root / "opdefs").mkdir()
    (root / f"opdefs/{OP}.yaml").write_text(YAML)
    (root / f"opdefs/{OP}_cpu.cc").write_text(KERNEL)
    build_workspace(root, cuda="off", progress=False)
    return root


@pytest.mark.parametrize("how", ["truncated", "patched", "empty"])
def test_a_damaged_artefact_is_refused_by_the_loader_and_rebuilt_by_opsdk_build(ws, how):
    folder = ws / f"build/cpu/{OP}"
    manifest = read_manifest(folder, OP, "cpu")
    _damage(folder / manifest.file, how)

    got = _load_in_child(ws)
    assert "error" in got, got
    assert got["error"].startswith(f"op '{OP}': its built cpu kernel is unusable ("), got
    assert "run `opsdk build` in" in got["error"] and "Traceback" not in got["error"]
    reason = "is empty" if how == "empty" else "sha256 mismatch: truncated or modified"
    assert reason in got["error"]

    proc = subprocess.run([sys.executable, "-m", "opsdk.cli", "-C", str(ws), "build",
                           "--no-progress", "--cuda", "off"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"op '{OP}' (cpu): {manifest.file}" in proc.stdout and "rebuilding it" in proc.stdout
    assert "1 compiled, 0 up to date" in proc.stdout, proc.stdout
    assert _load_in_child(ws) == {"ok": [-0.0, -1.0, -2.0]}
    again = build_workspace(ws, cuda="off", progress=False)
    assert [r.op for r in again.up_to_date] == [OP] and not again.notes


def test_a_damaged_object_is_recompiled_not_linked(ws):
    """An object that no longer matches its recorded sha256 is compiled again on the next link."""
    folder = ws / f"build/cpu/{OP}"
    manifest = read_manifest(folder, OP, "cpu")
    kernel_object = next(o for o in manifest.objects if o.role == "kernel")
    _damage(folder / "obj" / kernel_object.file, "truncated")
    _damage(folder / manifest.file, "empty")  # forces a relink
    report = build_workspace(ws, cuda="off", progress=False)
    assert [r.parts for r in report.compiled] == [("kernel", "link")]
    fn = load_kernel(load_registry(ws).get(OP), "cpu")
    np.testing.assert_array_equal(fn(np.arange(2.0)), [0.0, -1.0])
