"""`generate_workspace`: render every generated file of one workspace and write what changed."""

from __future__ import annotations

from pathlib import Path

from opsdk.registry import BUILTIN_ROOT, OpDefErrors, OpSpec, Workspace, load_registry

from . import names
from .render import (render_binding, render_cuda_binding, render_cuda_kernel_unit,
                     render_kernel_unit, render_op_header, render_stubs, render_wrappers)
from .framework_stubs import FRAMEWORKS, render_framework_stubs, stub_file
from .jax_ffi import jax_ffi_file, render_jax_ffi, supports_jax_ffi
from .writer import GenerateResult, write_files


def workspace_name(root: Path) -> str:
    """How generated docs name a workspace: 'builtin' for opsdk's own, else its folder name."""
    root = Path(root).resolve()
    return "builtin" if root == BUILTIN_ROOT else root.name


def render_workspace(root: Path, specs: list[OpSpec]) -> dict[str, str]:
    """Every generated file of the workspace: workspace-relative path -> text."""
    files: dict[str, str] = {}
    for spec in specs:
        if spec.kernel("cpu") or spec.kernel("cuda"):
            files[f"generated/cpp/{names.header_file(spec)}"] = render_op_header(spec)
        if spec.kernel("cpu"):
            files[f"generated/cpp/{names.binding_file(spec)}"] = render_binding(spec)
            files[f"generated/cpp/{names.kernel_unit_file(spec)}"] = render_kernel_unit(spec)
        if supports_jax_ffi(spec):
            files[f"generated/cpp/{jax_ffi_file(spec)}"] = render_jax_ffi(spec)
        if spec.kernel("cuda"):
            files[f"generated/cuda/{names.cuda_binding_file(spec)}"] = render_cuda_binding(spec)
            files[f"generated/cuda/{names.cuda_kernel_unit_file(spec)}"] = render_cuda_kernel_unit(spec)
    if specs:
        files["generated/python/ops.py"] = render_wrappers(specs, workspace_name(root))
        files["generated/python/ops.pyi"] = render_stubs(specs)
        for framework in FRAMEWORKS:  # typed stubs of opsdk.torch / opsdk.jax's load_ops
            files[stub_file(framework)] = render_framework_stubs(specs, framework)
    return files


def generate_workspace(root: Path, check: bool = False) -> GenerateResult:
    """Render the glue of every op of the workspace at `root` into its generated/ folder.

    Only files whose content changes are written; generated files no op produces any more are
    deleted. With check=True nothing is touched and `result.stale` lists what is out of date.
    A broken declaration file does not stop the others: every good op is generated, then
    OpDefErrors lists the broken files' mistakes (`file:line: ...`).

    >>> generate_workspace(Path("."), check=True).stale      # doctest: +SKIP
    ()
    """
    root = Path(root).resolve()
    workspace = Workspace(root)
    registry = load_registry(root, strict=False)
    specs = sorted(registry.ops_in_workspace(root), key=lambda s: s.name)
    result = write_files(root, render_workspace(root, specs), workspace.generated_dir, check=check)
    if registry.errors:
        raise OpDefErrors(list(registry.errors))
    return result
