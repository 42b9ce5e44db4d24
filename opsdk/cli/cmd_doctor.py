"""`opsdk doctor`: which tools are present, and what each missing one disables."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
from dataclasses import dataclass

from .common import print_table


@dataclass(frozen=True)
class Check:
    """One tool: whether it is usable, what was found, and what its absence disables."""
    name: str
    ok: bool
    found: str
    disables: str


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `doctor` parser."""
    return subparsers.add_parser("doctor", help="check compilers, GPU, Ray and Graphviz",
                                 description="Report the tools opsdk uses; never fails.")


def run(args: argparse.Namespace) -> int:
    """Print one row per tool; missing tools are reported, not errors (exit 0)."""
    checks = [_program("g++", "building cpu kernels (`opsdk build`)"),
              _program("nvcc", "building cuda kernels"),
              _cupy(),
              _module("ray", "ray", "distributed graphs (opsdk.dist); pip install ray"),
              _program("dot", "rendering graphs to images (Graphviz)", "-V"),
              _builtin_kernels()]
    rows = [(c.name, "ok" if c.ok else "missing", c.found, "" if c.ok else c.disables)
            for c in checks]
    print_table("opsdk doctor", ("tool", "status", "found", "missing disables"), rows)
    missing = sum(not c.ok for c in checks)
    print("everything is available" if not missing else f"{missing} missing (opsdk still works "
          "without them; see what each disables)")
    return 0


def _program(name: str, disables: str, version_flag: str = "--version") -> Check:
    path = shutil.which(name)
    if path is None:
        return Check(name, False, "not on PATH", disables)
    try:
        proc = subprocess.run([path, version_flag], capture_output=True, text=True, timeout=30)
        text = (proc.stdout or proc.stderr).strip().splitlines()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, False, f"{path} does not run ({exc})", disables)
    last = [line for line in text if line.strip()]
    # nvcc puts its release on the last lines; g++ and dot on the first.
    version = (last[-2] if name == "nvcc" and len(last) > 1 else last[0]) if last else path
    return Check(name, True, version, disables)


def _module(name: str, module: str, disables: str) -> Check:
    if importlib.util.find_spec(module) is None:
        return Check(name, False, "not installed", disables)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return Check(name, True, f"{module} {version(module)}", disables)
    except PackageNotFoundError:
        return Check(name, True, module, disables)


def _cupy() -> Check:
    disables = "running ops on a GPU; pip install 'opsdk[gpu]' on a machine with one"
    if importlib.util.find_spec("cupy") is None:
        return Check("CuPy + GPU", False, "CuPy not installed", disables)
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # a driver or runtime failure is what we are diagnosing
        return Check("CuPy + GPU", False, f"CuPy present, CUDA unusable: {exc}", disables)
    if count == 0:
        return Check("CuPy + GPU", False, "CuPy present, no GPU", disables)
    return Check("CuPy + GPU", True, f"CuPy {cupy.__version__}, {count} GPU(s)", disables)


def _builtin_kernels() -> Check:
    """Whether opsdk's own compiled ops (the flagship) have a built cpu kernel here."""
    from ..registry import BUILTIN_ROOT, KernelNotBuiltError, OpsdkError, load_registry
    from ..runtime.kernels.loader import read_manifest

    name = "builtin kernels"
    try:
        compiled = [s for s in load_registry().ops_in_workspace(BUILTIN_ROOT) if s.kernel("cpu")]
    except OpsdkError as exc:
        return Check(name, False, f"builtin declarations unusable: {exc}", "every builtin op")
    missing = []
    for spec in compiled:
        try:
            read_manifest(spec, "cpu")
        except KernelNotBuiltError:
            missing.append(spec.name)
    if not missing:
        return Check(name, True, f"{len(compiled)} built in {BUILTIN_ROOT}", "")
    return Check(name, False, f"not built: {', '.join(missing)}",
                 "those builtin ops; run `opsdk build --builtin` (needs g++)")
