"""A workspace op named like a builtin op (`add`): its namespace carries it. Both are generated,
built and run side by side, each with its own kernel; `opsdk list` says which one a bare name
means in the workspace (docs/opdefs.md, Namespaces)."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk.build.driver import build_workspace
from opsdk.cli.main import main
from opsdk.registry import load_registry
from opsdk.runtime.kernels.loader import load_kernel

pytestmark = pytest.mark.slow

YAML = """\
op: add
summary: y = x + 100, a workspace op with a builtin op's name.
inputs:
  x: {dtype: float64, shape: [n]}
outputs:
  y: {dtype: float64, shape: [n]}
kernels:
  cpu: add_cpu.cc
reference: "x + 100"
"""
KERNEL = """\
#include "add_op.h"

namespace opsdk_op_add {
void cpu(const Inputs& in, Outputs& out, const Dims& dims, const Attrs&) {
    for (int64_t i = 0; i < dims.n; ++i) out.y[i] = in.x[i] + 100;
}
}  // namespace opsdk_op_add
"""


def test_a_workspace_op_named_like_a_builtin_builds_and_runs_beside_it(tmp_path, capsys):
    import opsdk

    root = tmp_path / "shadow"
    (root / "opdefs").mkdir(parents=True)
    (root / "opdefs" / "add.yaml").write_text(YAML)
    (root / "opdefs" / "add_cpu.cc").write_text(KERNEL)
    assert main(["-C", str(root), "list"]) == 0
    assert ("note: in this workspace 'add' means shadow::add; the builtin op is 'opsdk::add'"
            in capsys.readouterr().out)
    report = build_workspace(root, cuda="off", progress=False)
    assert [r.op for r in report.compiled] == ["add"]
    registry = load_registry(root)
    assert registry.get("add").qualified_name == "shadow::add"
    x = np.arange(3.0)
    assert load_kernel(registry.get("add"), "cpu")(x).tolist() == [100.0, 101.0, 102.0]
    ops = opsdk.load_ops(root)
    assert ops.add(x).tolist() == [100.0, 101.0, 102.0]
    assert opsdk.ops.add(x, x).tolist() == [0.0, 2.0, 4.0]  # the builtin, untouched
