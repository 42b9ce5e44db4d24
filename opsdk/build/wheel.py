"""`opsdk build --wheel`: a workspace's ops as a wheel that installs and imports elsewhere.

The wheel holds one package named by the workspace (the `name:` of its opsdk.yaml, else its
folder's name; `--package-name` overrides): its declarations and kernel files (opdefs/), the
generated glue (generated/), the cpu kernels compiled for the platform's portable baseline
(OPSDK_PORTABLE=1: x86-64-v2 / armv8-a, never -march=native, so it runs on any machine of the
same platform), and where nvcc is present the cuda kernels compiled for every default GPU arch
(the fat binary). An untouched scaffold CUDA stub is left out, with its `cuda:` line. A kernel may compile faster paths too and choose one at run time
with opsdk/cpu_dispatch.h (on x86: baseline, AVX2+FMA, AVX-512F; OPSDK_SIMD caps the choice), as
the builtin pairwise_manhattan does; the wheel's description and opsdk_wheel.json name those
levels and the ops that do. Installed, `import <name>` gives the ops: `<name>.my_op(x)` (also
`<name>.ops.my_op(x)`). The wheel requires `opsdk>=` the version that built it, the same
CPython version and platform (its tag), and NumPy; CUDA kernels need CuPy and a GPU at run time. The wheel is made by pip and setuptools from a generated project, so its
format is theirs, not opsdk's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from opsdk.registry.errors import OpsdkError

from opsdk.registry.manifest import ManifestError, read_manifest
from opsdk.registry.workspace import WORKSPACE_FILE, read_namespace

from .compiler import PORTABLE_ENV, cpu_arch_flags, portable_simd_levels

_CUDA_LINE = re.compile(r"^\s*cuda:\s*[^\s{}\[\]#]+\s*(#.*)?$")
# What a build leaves that a wheel must not carry.
_LEFTOVERS = ("obj", ".lock", ".generate-state.json")

_INIT = '''"""The ops of workspace {name!r}, packed by `opsdk build --wheel`.

    import {package}
    {package}.<op>(x, ...)        # or {package}.ops.<op>(x, ...)

cpu kernels were built for the portable baseline ({flags}), not for one machine's CPU;
{dispatch}.
"""

from pathlib import Path as _Path

import opsdk as _opsdk

ROOT = _Path(__file__).resolve().parent
ops = _opsdk.load_ops(ROOT)


def __getattr__(name):  # `{package}.my_op` is `{package}.ops.my_op`
    try:
        return getattr(ops, name)
    except AttributeError:
        raise AttributeError(f"module {{__name__!r}} has no attribute {{name!r}}") from None


def __dir__():
    return sorted(set(globals()) | set(dir(ops)))
'''

_SETUP = '''from setuptools import setup
from setuptools.dist import Distribution


class _Platform(Distribution):
    def has_ext_modules(self):  # compiled kernels inside: a platform wheel
        return True


setup(distclass=_Platform)
'''

_PYPROJECT = '''[build-system]
requires = ["setuptools>=77", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "{version}"
description = "opsdk ops of workspace {name}; cpu kernels built for the portable baseline ({flags}); {dispatch}"
requires-python = ">=3.10"
dependencies = ["opsdk>={opsdk_version}"]

[tool.setuptools]
packages = ["{package}"]
include-package-data = false

[tool.setuptools.package-data]
"{package}" = ["**/*"]
'''


def package_name(root: Path) -> str:
    """The package a workspace's wheel holds: the `name:` of its opsdk.yaml (a folder called
    `ws` would clash with a public package), else the folder's name (`my-ops` -> `my_ops`)."""
    declared = read_namespace(Path(root) / WORKSPACE_FILE)
    if declared is not None:
        return declared
    name = re.sub(r"\W", "_", root.name.lower()).strip("_") or "ops"
    return f"ops_{name}" if name[0].isdigit() else name


def _stage(root: Path, package_dir: Path) -> None:
    """Copy the workspace's declarations and generated glue (the build regenerates it anyway),
    less the untouched scaffold CUDA stubs."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root / "opdefs", package_dir / "opdefs", ignore=ignore)
    if (root / "generated").is_dir():
        shutil.copytree(root / "generated", package_dir / "generated", ignore=ignore)
    for name in (WORKSPACE_FILE,):
        if (root / name).is_file():
            shutil.copy2(root / name, package_dir / name)
    _drop_cuda_stubs(root, package_dir)


def _drop_cuda_stubs(root: Path, package_dir: Path) -> None:
    """Remove each untouched `opsdk new` CUDA stub and the `cuda:` line naming it from the staged
    copy: a kernel nobody wrote is not shipped. A `cuda:` entry not on a line of its own is not
    rewritten: the author is asked to remove it."""
    from opsdk.codegen.scaffold import untouched_stub
    from opsdk.registry import load_registry

    for spec in load_registry(root).ops_in_workspace(root):
        kernel = spec.kernel("cuda")
        if kernel is None or not untouched_stub(root, kernel.source):
            continue
        declaration = package_dir / kernel.location.file
        lines = declaration.read_text(encoding="utf-8").splitlines(keepends=True)
        at = kernel.location.line - 1
        if not (0 <= at < len(lines) and _CUDA_LINE.match(lines[at])):
            raise OpsdkError(f"{kernel.location}: op '{spec.name}': {kernel.source} is the "
                             "untouched scaffold stub, which a wheel does not ship; write the "
                             "kernel, or remove it and its `cuda:` entry")
        del lines[at]
        declaration.write_text("".join(lines), encoding="utf-8")
        (package_dir / kernel.source).unlink()


def _compile_portable(package_dir: Path) -> None:
    """`opsdk build` of the staged copy with OPSDK_PORTABLE=1, in a child (its own environment):
    cpu kernels for the portable baseline, cuda kernels (where nvcc is) for every default arch."""
    env = {**os.environ, PORTABLE_ENV: "1"}
    proc = subprocess.run([sys.executable, "-m", "opsdk.cli", "build", "--all-archs",
                           "--no-progress", "-C", str(package_dir)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise OpsdkError(f"building the workspace's kernels for the wheel failed:\n"
                         f"{proc.stdout}{proc.stderr}".rstrip())
    for name in _LEFTOVERS:
        for path in (package_dir / "build").rglob(name):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _portable_flags() -> str:
    old = os.environ.get(PORTABLE_ENV)
    os.environ[PORTABLE_ENV] = "1"
    try:
        return " ".join(cpu_arch_flags())
    finally:
        os.environ.pop(PORTABLE_ENV) if old is None else os.environ.__setitem__(PORTABLE_ENV, old)


def _dispatching_ops(package_dir: Path) -> list[str]:
    """The ops whose built cpu kernel includes opsdk/cpu_dispatch.h: they choose a SIMD level at
    run time (their manifests list the headers the compiler read)."""
    found = []
    for folder in sorted((package_dir / "build" / "cpu").glob("*/")):
        try:
            manifest = read_manifest(folder, folder.name, "cpu")
        except ManifestError:
            continue
        if any(source.endswith("opsdk/cpu_dispatch.h") for source in manifest.sources):
            found.append(manifest.op)
    return found


# How the description names each OPSDK_SIMD level.
_LEVEL_TEXT = {"baseline": "baseline", "avx2": "avx2 (AVX2+FMA)", "avx512": "avx512 (AVX-512F)"}


def _dispatch_text(levels: tuple[str, ...], ops: list[str]) -> str:
    if len(levels) < 2 or not ops:
        return "no kernel chooses a SIMD level at run time"
    named = ", ".join(_LEVEL_TEXT.get(level, level) for level in levels)
    return f"SIMD level chosen at run time among {named} by: {', '.join(ops)}"


def _write_project(project: Path, root: Path, package: str, version: str) -> None:
    flags = _portable_flags()
    levels, ops = portable_simd_levels(), _dispatching_ops(project / package)
    values = dict(name=root.name, package=package, dist=package.replace("_", "-"),
                  version=version, flags=flags, opsdk_version=_opsdk_version(),
                  dispatch=_dispatch_text(levels, ops))
    (project / package / "__init__.py").write_text(_INIT.format(**values))
    info = {"portable": True, "cpu_flags": flags, "workspace": root.name,
            "simd_levels": list(levels) if ops else ["baseline"], "simd_dispatch_ops": ops}
    (project / package / "opsdk_wheel.json").write_text(json.dumps(info, indent=2) + "\n")
    (project / "setup.py").write_text(_SETUP)
    (project / "pyproject.toml").write_text(_PYPROJECT.format(**values))


def _pip_wheel(project: Path, package: str, out_dir: Path) -> Path:
    # With setuptools here, no isolated build environment (nothing to download).
    isolation = ["--no-build-isolation"] if _has_setuptools() else []
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation,
                           "-w", str(out_dir), str(project)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise OpsdkError(f"pip wheel failed:\n{proc.stdout}{proc.stderr}".rstrip())
    wheels = sorted(out_dir.glob(f"{package}-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise OpsdkError(f"pip wheel made no wheel in {out_dir}")
    return wheels[-1]


def _opsdk_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opsdk")
    except PackageNotFoundError:
        return "0"


def _has_setuptools() -> bool:
    import importlib.util

    return importlib.util.find_spec("setuptools") is not None


def build_wheel(root: Path, out_dir: Path, version: str = "0.1.0",
                name: Optional[str] = None) -> Path:
    """Pack the workspace at `root` into a wheel in `out_dir`; its path.

    >>> build_wheel(Path("myops"), Path("dist"))           # doctest: +SKIP
    PosixPath('dist/myops-0.1.0-cp311-cp311-linux_x86_64.whl')
    """
    root = Path(root).resolve()
    if not (root / "opdefs").is_dir():
        raise OpsdkError(f"{root} is not a workspace (no opdefs/ folder)")
    package = name or package_name(root)
    if not package.isidentifier():
        raise OpsdkError(f"--name {package!r} is not a Python package name")
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="opsdk-wheel-") as temp:
        project = Path(temp) / package.replace("_", "-")
        _stage(root, project / package)
        _compile_portable(project / package)
        _write_project(project, root, package, version)
        return _pip_wheel(project, package, out_dir)
