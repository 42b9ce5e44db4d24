"""Build hook: a wheel carries the builtin ops as package data under opsdk/_builtin.

The repository keeps its layout (opdefs/, templates/, generated/ at the top). A non-editable
build copies them into the package and compiles the builtin C++ kernels there for the platform's
portable baseline (OPSDK_PORTABLE=1: no -march=native), so the installed package works from any
directory. Where no C++ compiler is present the wheel ships without those kernels and says so;
`opsdk build --builtin` builds them after install. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
BUILTIN_DATA = ("opdefs", "templates", "generated")
# What a build leaves that the wheel must not carry: objects, locks, the generate state.
BUILD_LEFTOVERS = ("obj", ".lock", ".generate-state.json")


def _stage(target: Path) -> None:
    """Copy the builtin declarations, templates and generated glue into `target`."""
    if target.exists():
        shutil.rmtree(target)
    for name in BUILTIN_DATA:
        shutil.copytree(HERE / name, target / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _typed_ops(target: Path, package: Path) -> None:
    """The builtin ops' stub beside opsdk/ops.py, so type checkers see `from opsdk import ops`;
    those of opsdk.torch.ops and opsdk.jax.ops as opsdk/_torch_ops.pyi and _jax_ops.pyi."""
    shutil.copy2(target / "generated" / "python" / "ops.pyi", package / "ops.pyi")
    for framework in ("torch", "jax"):
        shutil.copy2(target / "generated" / "python" / f"{framework}_ops.pyi",
                     package / f"_{framework}_ops.pyi")


def _compile_kernels(build_lib: Path) -> bool:
    """Build the builtin C++ kernels inside the staged copy, portable; False when that fails."""
    code = ("from opsdk.build.driver import build_workspace; "
            "from opsdk.registry import BUILTIN_ROOT; "
            "print(build_workspace(BUILTIN_ROOT, cuda='off', progress=False).summary())")
    # The staged package first; pip's isolated build environment is on PYTHONPATH too: keep it.
    path = os.pathsep.join(p for p in (str(build_lib), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OPSDK_PORTABLE": "1", "PYTHONPATH": path}
    # Run from the staged package (not this checkout), so BUILTIN_ROOT is the package data.
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(build_lib), env=env,
                          capture_output=True, text=True)
    print(proc.stdout + proc.stderr)
    return proc.returncode == 0


def _prune(build_dir: Path) -> None:
    for name in BUILD_LEFTOVERS:
        for path in build_dir.rglob(name):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


class BuildPyWithBuiltins(build_py):
    """build_py, plus the builtin ops as package data (skipped for editable installs)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout itself
        target = Path(self.build_lib) / "opsdk" / "_builtin"
        _stage(target)
        _typed_ops(target, target.parent)
        if os.environ.get("OPSDK_WHEEL_KERNELS", "1") != "0" and _compile_kernels(Path(self.build_lib)):
            _prune(target / "build")
        else:
            shutil.rmtree(target / "build", ignore_errors=True)
            print("opsdk: the wheel carries no compiled builtin kernels; after installing, run "
                  "`opsdk build --builtin` on a machine with g++")


class PlatformDistribution(Distribution):
    """The wheel holds compiled extensions (the builtin kernels): tag it for this platform."""

    def has_ext_modules(self) -> bool:
        return True


# The fused CPU kernels' call (opsdk/runtime/kernels/_fusedcall.c): optional, since without a C
# compiler kernels/fused.py calls them through ctypes, a little slower.
FUSED_CALL = Extension("opsdk.runtime.kernels._fusedcall", ["opsdk/runtime/kernels/_fusedcall.c"],
                       optional=True)

# setuptools works under build/setuptools, apart from the workspace build/{cpu,cuda} folders.
setup(cmdclass={"build_py": BuildPyWithBuiltins}, distclass=PlatformDistribution,
      ext_modules=[FUSED_CALL], options={"build": {"build_base": "build/setuptools"}})
