"""The compiler of fused elementwise kernels, which the runtime finds as the `cpu` entry point of
group `opsdk.fusion_compilers` (pyproject.toml), so the runtime never imports the build layer.

`COMPILER.compile(kernel)` renders the kernel's C++ (codegen.fused), compiles it with the C++
toolchain `opsdk build` uses (g++, or OPSDK_CXX) into a shared library, and returns its path. The
cache is a folder of the user's (`$OPSDK_FUSION_CACHE`, else `$XDG_CACHE_HOME/opsdk/fused`, else
`~/.cache/opsdk/fused`), keyed by the source, the compiler's version, its flags and this CPU's
features: a second process finds a kernel at once. Entries are written atomically under a file
lock; a link, or a name that is not the key's, is never loaded (the file is compiled again).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from filelock import FileLock

from opsdk.codegen.fused import render_fused_cpu
from opsdk.registry.elementwise import FusedKernel
from opsdk.registry.errors import OpsdkError

from .toolchain import Toolchain, find_toolchain, why_missing

# 512-bit vectors where the CPU has them: the kernels are compute-bound (double-precision
# exp/tanh), and GCC's default for AVX-512 machines is 256-bit. -fno-trapping-math: without it
# GCC kept the selects of opsdk_exp's range checks as branches in float32 kernels (a compare
# may raise a floating-point exception it must not speculate), and a loop holding exp or sigmoid
# ran one element at a time: sigmoid(x + b) - x over 200k float32 took 0.63 ms, slower than
# NumPy's four passes. Values are unchanged (nothing reads the exception flags; NaN and inf
# propagate as before).
FLAGS = ("-std=c++17", "-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp",
         "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared")
_TIMEOUT = 120  # seconds for one compile


def cache_folder() -> Path:
    """Where compiled fused kernels are kept (see the module docstring)."""
    given = os.environ.get("OPSDK_FUSION_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opsdk" / "fused"


def _cpu_features() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return ""


class CpuFusionCompiler:
    """Fused kernels for the CPU, through the C++ toolchain (see the module docstring)."""

    def __init__(self) -> None:
        self._toolchain: Optional[Toolchain] = None
        self._looked = False

    def toolchain(self) -> Optional[Toolchain]:
        if not self._looked:
            self._toolchain, self._looked = find_toolchain("cpu"), True
        return self._toolchain

    def problem(self) -> Optional[str]:
        """Why fused kernels cannot be compiled here, or None."""
        if self.toolchain() is None:
            return f"no C++ compiler ({why_missing('cpu')})"
        return None

    def key(self, kernel: FusedKernel, source: str) -> str:
        tc = self.toolchain()
        text = "\n".join([source, tc.version if tc else "", " ".join(FLAGS), _cpu_features()])
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def source_path(self, kernel: FusedKernel) -> Path:
        """Where the generated source of `kernel` is (or will be) kept, for `explain`."""
        source = render_fused_cpu(kernel)
        return cache_folder() / f"{self.key(kernel, source)}.cc"

    def cached(self, kernel: FusedKernel) -> Optional[Path]:
        """The compiled library of `kernel` when the cache has it, else None (no compile)."""
        source = render_fused_cpu(kernel)
        library = cache_folder() / f"{self.key(kernel, source)}.so"
        return library if _plain_file(library) else None

    def compile(self, kernel: FusedKernel) -> Path:
        """The compiled library of `kernel`, compiled now unless the cache has it."""
        tc = self.toolchain()
        if tc is None:
            raise OpsdkError(f"cannot compile a fused kernel: {self.problem()}")
        source = render_fused_cpu(kernel)
        folder = cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        key = self.key(kernel, source)
        library = folder / f"{key}.so"
        with FileLock(str(folder / f"{key}.lock"), timeout=_TIMEOUT + 30):
            if _plain_file(library):
                return library
            _replace(folder / f"{key}.cc", source.encode())
            self._run(tc, folder / f"{key}.cc", library)
        return library

    def _run(self, tc: Toolchain, source: Path, library: Path) -> None:
        fd, tmp = tempfile.mkstemp(dir=library.parent, suffix=".so.tmp")
        os.close(fd)
        try:
            proc = subprocess.run([*tc.command, *FLAGS, str(source), "-o", tmp],
                                  capture_output=True, text=True, timeout=_TIMEOUT)
            if proc.returncode != 0 or os.path.getsize(tmp) == 0:
                raise OpsdkError(f"fused kernel {source.name}: {tc.describe()} failed:\n"
                                 f"{(proc.stderr or proc.stdout).strip()[:2000]}")
            os.replace(tmp, library)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _plain_file(path: Path) -> bool:
    """A regular file, not a link (a link in the cache is never followed)."""
    return path.is_file() and not path.is_symlink()


def _replace(path: Path, data: bytes) -> None:
    """Write `path` atomically; a link standing there is replaced, never followed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


COMPILER = CpuFusionCompiler()
