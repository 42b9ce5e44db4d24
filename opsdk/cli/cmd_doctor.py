"""`opsdk doctor`: which tools are present and work, and what each missing one disables.

A compiler is "ok" only when it compiled, linked and loaded a tiny library (opsdk.build.probe),
not when it merely answers `--version`. The command exits 1 when something the workspace (or
opsdk's builtin ops) needs is missing or broken: a cpu compiler when the workspace has cpu
kernels, nvcc when it is present (the build would use it) but broken, the builtin kernels.
"""

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
    """One tool: whether it is usable, what was found, what its absence disables, and whether
    the workspace needs it (then its absence fails the command)."""
    name: str
    ok: bool
    found: str
    disables: str
    needed: bool = False


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `doctor` parser."""
    return subparsers.add_parser(
        "doctor", help="check compilers, GPU, Ray and Graphviz",
        description="Report the tools opsdk uses; each compiler is tried on a tiny library. "
                    "Exits 1 when something the workspace needs is missing or broken.",
        epilog="example: opsdk doctor -C my_workspace")


def run(args: argparse.Namespace) -> int:
    """Print one row per tool; exit 1 when a tool the workspace needs is missing or broken."""
    devices = _workspace_devices(args)
    checks = [_compiler("cpu", "building cpu kernels (`opsdk build`)", "cpu" in devices),
              _compiler("cuda", "building cuda kernels (built whenever nvcc is present)",
                        "cuda" in devices),
              _cupy(),
              _nvrtc(),
              _module("ray", "ray", "distributed graphs (opsdk.dist); pip install ray"),
              _program("dot", "rendering graphs to images (Graphviz)", "-V"),
              _builtin_kernels()]
    rows = [(c.name, "ok" if c.ok else ("NEEDED" if c.needed else "missing"), c.found,
             "" if c.ok else c.disables) for c in checks]
    print_table("opsdk doctor", ("tool", "status", "found", "missing disables"), rows)
    needed = [c.name for c in checks if c.needed and not c.ok]
    missing = sum(not c.ok for c in checks)
    if needed:
        print(f"not usable but needed here: {', '.join(needed)} (see what each disables)")
        return 1
    print("everything is available" if not missing else f"{missing} missing (opsdk still works "
          "without them; see what each disables)")
    return 0


def _workspace_devices(args: argparse.Namespace) -> set[str]:
    """The compiled devices the workspace's ops have kernels for (none outside a workspace)."""
    from ..registry import OpsdkError, load_registry
    from .common import workspace_root

    try:
        root = workspace_root(args)
        specs = load_registry(root, strict=False).ops_in_workspace(root)
    except OpsdkError:
        return set()
    return {k.device for spec in specs for k in spec.kernels if k.device in ("cpu", "cuda")}


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


def _compiler(device: str, disables: str, kernels: bool) -> Check:
    """The compiler `opsdk build` uses (OPSDK_CXX / OPSDK_NVCC, launcher included), its version,
    for nvcc the GPU archs it compiles for; ok only when it compiled and loaded a tiny library.
    Needed when the workspace has kernels for `device`: always on the cpu, and for cuda when nvcc
    is there (a missing nvcc only skips cuda kernels; a broken one fails the build)."""
    from ..build.probe import probe_toolchain
    from ..build.toolchain import (COMPILER_ENV, cuda_targets, find_toolchain,
                                   supported_cuda_archs, why_missing)
    from ..registry import OpsdkError

    env_var, name = COMPILER_ENV[device]
    try:
        toolchain = find_toolchain(device)
        if toolchain is None:
            return Check(name, False, why_missing(device), disables, kernels and device == "cpu")
        problem = probe_toolchain(toolchain)
        if problem is not None:
            return Check(name, False, problem, disables, kernels)
        lines = [line for line in toolchain.version.splitlines() if line.strip()]
        # nvcc puts its release on the last lines; g++ on the first.
        found = (lines[-2] if device == "cuda" and len(lines) > 1 else lines[0]) if lines else ""
        if toolchain.launcher or toolchain.options:
            found += f"; {env_var}: {toolchain.describe()}"
        if device == "cuda":
            found += "; " + _cuda_archs_text(cuda_targets(supported_cuda_archs(toolchain.path)))
    except OpsdkError as exc:  # OPSDK_CXX / OPSDK_CUDA_ARCHS that cannot be used
        return Check(name, False, str(exc), disables, kernels)
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
        return Check(name, False, f"builtin declarations unusable: {exc}", "every builtin op", True)
    missing = []
    for spec in compiled:
        try:
            read_manifest(spec, "cpu")
        except KernelNotBuiltError:
            missing.append(spec.name)
    if not missing:
        return Check(name, True, f"{len(compiled)} built in {BUILTIN_ROOT}", "")
    return Check(name, False, f"not built: {', '.join(missing)}",
                 "those builtin ops; run `opsdk build --builtin` (needs g++)", True)
