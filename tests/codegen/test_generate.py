"""generate_workspace: what it writes for a user workspace, writing only changes, stale files, --check."""

from __future__ import annotations

from pathlib import Path

from codegen_fixtures import CAST_OP, LIST_OP, write_workspace
from opsdk.codegen.generate import generate_workspace
from opsdk.codegen.writer import is_generated

PY_ONLY = """
    op: py_only
    summary: An op with only a Python kernel.
    inputs:
      x: {dtype: float32, shape: [n]}
    outputs:
      y: {dtype: float32, shape: [n]}
    gradient: null
    kernels:
      python: kernels.py:py_only
"""


def _workspace(root: Path) -> Path:
    write_workspace(root, {"cast_op": CAST_OP, "list_op": LIST_OP, "py_only": PY_ONLY})
    (root / "opdefs" / "kernels.py").write_text("def py_only(xp, x):\n    return x\n")
    return root


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in (root / "generated").rglob("*") if p.is_file())


def test_writes_the_files_of_this_workspace_only(tmp_path):
    root = _workspace(tmp_path)
    result = generate_workspace(root)
    assert _files(root) == [
        "generated/cpp/cast_op_binding.cc", "generated/cpp/cast_op_jax_ffi.cc",
        "generated/cpp/cast_op_kernel.cc", "generated/cpp/cast_op_op.h",
        "generated/cpp/list_op_binding.cc", "generated/cpp/list_op_kernel.cc",
        "generated/cpp/list_op_op.h",
        "generated/cuda/cast_op_cuda_binding.cu", "generated/cuda/cast_op_cuda_kernel.cu",
        "generated/cuda/list_op_cuda_binding.cu", "generated/cuda/list_op_cuda_kernel.cu",
        "generated/python/jax_ops.pyi", "generated/python/ops.py", "generated/python/ops.pyi",
        "generated/python/torch_ops.pyi"]  # list_op: no JAX FFI handler
    assert sorted(result.changed) == _files(root)
    ops = (root / "generated/python/ops.py").read_text()
    assert "def py_only(x, *, name=None):" in ops
    assert "def add(" not in ops  # builtin ops stay in opsdk.ops


def test_second_run_writes_nothing(tmp_path):
    root = _workspace(tmp_path)
    generate_workspace(root)
    stamps = {p: p.stat().st_mtime_ns for p in (root / "generated").rglob("*") if p.is_file()}
    again = generate_workspace(root)
    assert again.changed == () and again.deleted == () and again.unchanged == len(stamps)
    assert stamps == {p: p.stat().st_mtime_ns for p in (root / "generated").rglob("*") if p.is_file()}


def test_check_reports_stale_and_writes_nothing(tmp_path):
    root = _workspace(tmp_path)
    fresh = generate_workspace(root, check=True)
    assert not (root / "generated").exists()
    assert "generated/python/ops.py" in fresh.stale
    generate_workspace(root)
    assert generate_workspace(root, check=True).stale == ()
    header = root / "generated/cpp/cast_op_op.h"
    header.write_text(header.read_text() + "// edited by hand\n")
    assert generate_workspace(root, check=True).stale == ("generated/cpp/cast_op_op.h",)
    assert header.read_text().endswith("// edited by hand\n")


def test_removed_op_deletes_its_generated_files_but_not_foreign_ones(tmp_path):
    root = _workspace(tmp_path)
    generate_workspace(root)
    mine = root / "generated/cpp/notes.h"
    mine.write_text("// a file someone keeps here on purpose\n")
    (root / "opdefs/list_op.yaml").unlink()
    check = generate_workspace(root, check=True)
    assert "generated/cpp/list_op_binding.cc" in check.stale
    result = generate_workspace(root)
    assert set(result.deleted) == {"generated/cpp/list_op_binding.cc", "generated/cpp/list_op_op.h",
                                   "generated/cpp/list_op_kernel.cc",
                                   "generated/cuda/list_op_cuda_binding.cu",
                                   "generated/cuda/list_op_cuda_kernel.cu"}
    assert mine.exists() and not is_generated(mine)
    assert "def list_op(" not in (root / "generated/python/ops.py").read_text()


def test_builtin_workspace_is_up_to_date():
    # generated/ of this repository is committed; it must be what the declarations give.
    from opsdk.registry import BUILTIN_ROOT

    assert generate_workspace(BUILTIN_ROOT, check=True).stale == ()
