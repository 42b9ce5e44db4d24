"""`opsdk doctor`: which tools are present, and what each missing one disables."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
from dataclasses import dataclass

from .common import print_table

EXAMPLES = """\
opsdk doctor                     # which compilers, GPU and tools opsdk finds here
opsdk doctor > doctor.txt        # attach it to a bug report (docs/troubleshooting.md)"""


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
    checks = [_compiler("cpu", "building cpu kernels (`opsdk build`)"),
              _compiler("cuda", "building cuda kernels (built whenever nvcc is present)"),
              _cupy(),
              _nvrtc(),
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


def _compiler(device: str, disables: str) -> Check:
    """The compiler `opsdk build` uses (OPSDK_CXX / OPSDK_NVCC, launcher included), its version,
    and for nvcc the GPU archs it compiles for."""
    from ..build.toolchain import (COMPILER_ENV, cuda_targets, find_toolchain,
                                   supported_cuda_archs, why_missing)
    from ..registry import OpsdkError

    env_var, name = COMPILER_ENV[device]
    try:
        toolchain = find_toolchain(device)
        if toolchain is None:
            return Check(name, False, why_missing(device), disables)
        lines = [line for line in toolchain.version.splitlines() if line.strip()]
        # nvcc puts its release on the last lines; g++ on the first.
        found = (lines[-2] if device == "cuda" and len(lines) > 1 else lines[0]) if lines else ""
        if toolchain.launcher or toolchain.options:
            found += f"; {env_var}: {toolchain.describe()}"
        if device == "cuda":
            found += "; " + _cuda_archs_text(cuda_targets(supported_cuda_archs(toolchain.path)))
    except OpsdkError as exc:  # OPSDK_CXX / OPSDK_CUDA_ARCHS that cannot be used
        return Check(name, False, str(exc), disables)
    return Check(name, True, found, disables)


def _cuda_archs_text(targets) -> str:
    text = "archs " + ",".join(targets.archs) + "".join(f" +PTX {a}" for a in targets.ptx)
    if targets.dropped:
        text += (f" (default sm_{', sm_'.join(targets.dropped)} left out: this nvcc no longer "
                 "supports it)")
    return text


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


def _nvrtc() -> Check:
    """Whether CuPy's NVRTC can compile cuda kernels with declared launches (no GPU needed)."""
    from ..build.nvrtc import nvrtc_problem

    disables = ("compiling cuda kernels with declared launches at first use where nvcc is absent; "
                "pip install 'opsdk[gpu]'")
    problem = nvrtc_problem()
    if problem is not None:
        return Check("NVRTC", False, problem, disables)
    from cupy.cuda import nvrtc

    major, minor = nvrtc.getVersion()
    return Check("NVRTC", True, f"NVRTC {major}.{minor} (through CuPy)", disables)


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
