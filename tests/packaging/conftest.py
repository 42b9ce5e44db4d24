"""A wheel of the checkout, installed into a fresh venv, shared by the packaging tests.

Offline: the wheel is built without build isolation from a copy of the sources, and installed
with --no-deps --no-index; its dependencies come from the running venv, whose site-packages the
fresh venv reads through a .pth file (it adds a path; it does not run the .pth files there, so
the editable opsdk of the running venv stays out).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("opsdk", "opdefs", "templates", "generated", "setup.py", "pyproject.toml",
           "README.md", "MANIFEST.in", "LICENSE")


@dataclass(frozen=True)
class InstalledWheel:
    wheel: Path
    python: Path
    bin: Path
    home: Path  # an empty folder far from the checkout, to run things from

    def run(self, *args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
        # Without PYTHONPATH: nothing but the installed wheel may provide opsdk.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return subprocess.run([str(a) for a in args], cwd=str(cwd or self.home), text=True,
                              capture_output=True, timeout=timeout, env=env)


def _copy_sources(target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info")
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, target / name)


def build_wheel(workdir: Path) -> Path:
    """`pip wheel` of a copy of the checkout; the path of the one wheel it made."""
    src, out = workdir / "src", workdir / "dist"
    _copy_sources(src)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(out), str(src)],
                          text=True, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheels = sorted(out.glob("opsdk-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def make_venv(path: Path) -> Path:
    """A fresh venv (no pip of its own) that sees the running venv's packages; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             text=True, capture_output=True, check=True).stdout.strip()
    Path(purelib, "_opsdk_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def install(python: Path, wheel: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                           "--no-deps", "--no-index", str(wheel)], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory) -> InstalledWheel:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not on PATH: the wheel's builtin kernels cannot be compiled")
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(work)
    python = make_venv(work / "venv")
    install(python, wheel)
    home = work / "home"
    home.mkdir()
    return InstalledWheel(wheel, python, python.parent, home)
