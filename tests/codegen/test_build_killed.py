"""A build killed while it compiles leaves nothing that hangs the next build or gets loaded.

Runs `opsdk build` as a separate process group, kills it (SIGKILL: no cleanup runs) while the
compiler is working, then builds again: it must take the lock at once, compile, and the loaded
kernel must be the complete one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from opsdk.registry import KernelNotBuiltError, load_registry
from opsdk.runtime.kernels.loader import load_kernel

pytestmark = pytest.mark.slow

YAML = """\
op: kb_add_one
summary: y = x + 1.
type_attrs:
  T: [float64]
inputs:
  x: {dtype: T, shape: [n]}
outputs:
  y: {dtype: T, shape: [n]}
kernels:
  cpu: kb_add_one_cpu.cc
reference: "x + 1"
"""

KERNEL = """\
#include "kb_add_one_op.h"

namespace opsdk_op_kb_add_one {
template <typename T>
void cpu(const Inputs<T>& in, Outputs<T>& out, const Dims& dims, const Attrs&) {
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = in.x[i] + T(1);
}
}  // namespace opsdk_op_kb_add_one
"""


def _compiler_running(root: Path) -> bool:
    """Whether a compiler process is working on this workspace's op (so the kill lands mid-build)."""
    out = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return any("kb_add_one" in line and ("cc1plus" in line or "g++" in line) for line in out.splitlines())


def test_a_killed_build_leaves_the_next_one_working(tmp_path):
    (tmp_path / "opdefs").mkdir()
    (tmp_path / "opdefs/kb_add_one.yaml").write_text(YAML)
    (tmp_path / "opdefs/kb_add_one_cpu.cc").write_text(KERNEL)
    cmd = [sys.executable, "-m", "opsdk.cli", "-C", str(tmp_path), "build", "--no-progress", "--cuda", "off"]
    victim = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 60
    while not _compiler_running(tmp_path) and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert victim.poll() is None, "the build finished before it could be killed"
    os.killpg(victim.pid, signal.SIGKILL)  # the compiler too: nothing gets to clean up
    victim.wait()

    spec = load_registry(tmp_path).get("kb_add_one")
    with pytest.raises(KernelNotBuiltError):  # no manifest was written: nothing half-built loads
        load_kernel(spec, "cpu")

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 compiled" in done.stdout, done.stdout
    leftovers = [p.name for p in (tmp_path / "build/cpu/kb_add_one").iterdir()
                 if p.name != "manifest.json" and not p.name.startswith("_opsdk_kb_add_one_")]
    assert [n for n in leftovers if "tmp" in n] == []
    np.testing.assert_array_equal(load_kernel(spec, "cpu")(np.arange(3.0)), [1.0, 2.0, 3.0])
