"""The compiler of fused elementwise kernels for the GPU, which the runtime finds as the `cuda`
entry point of group `opsdk.fusion_compilers` (pyproject.toml), as it finds the CPU's
(build/fusion.py): the runtime never imports the build layer.

`COMPILER.compile(kernel, arch)` renders the kernel's CUDA source (codegen.fused,
templates/fused/fused_cuda.cu.j2), compiles it with NVRTC (through CuPy's bindings, as the
declared launches are: build/nvrtc.py) for the GPU's compute capability, a cubin where NVRTC
knows the arch, else PTX of the newest arch below it, and returns the binary's path. It needs
NVRTC, not a GPU. The cache is the CPU's folder (`$OPSDK_FUSION_CACHE`, else
`~/.cache/opsdk/fused`): the source as `<digest>.cu`, the binary as `<key>.cubin` or `.ptx`, keyed
by the source, NVRTC's version, the options and the target; written atomically under a file
lock, never through a link, so a second process finds a kernel at once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

from filelock import FileLock

from opsdk.codegen.fused import render_fused_cuda
from opsdk.registry.elementwise import FusedKernel
from opsdk.registry.errors import OpsdkError

from .confine import is_plain_file, write_file
from .fusion import cache_folder
from .nvrtc import nvrtc_problem, nvrtc_target

# No contraction of a * b + c into one fused multiply-add: each operation rounds as the unfused
# GPU ops (one CuPy kernel each) round it.
OPTIONS = ("-std=c++17", "--fmad=false")
_LOCK_TIMEOUT = 300  # seconds to wait for another process compiling the same kernel


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


class CudaFusionCompiler:
    """Fused kernels for CUDA GPUs, through NVRTC (see the module docstring)."""

    def problem(self) -> Optional[str]:
        """Why fused GPU kernels cannot be compiled here (no CuPy or no NVRTC), or None."""
        return nvrtc_problem()

    def source_path(self, kernel: FusedKernel) -> Path:
        """Where the generated CUDA source of `kernel` is (or will be) kept, for `explain`."""
        return cache_folder() / f"{_digest(render_fused_cuda(kernel))}.cu"

    def _binary(self, kernel: FusedKernel, arch: int) -> tuple[str, str, str, Path]:
        """(source, NVRTC target, kind, the binary's path) of `kernel` for compute capability
        `arch` (an int: 90 for sm_90)."""
        from cupy.cuda import nvrtc

        source = render_fused_cuda(kernel)
        target, kind = nvrtc_target(int(arch), nvrtc.getSupportedArchs())
        version = ".".join(str(v) for v in nvrtc.getVersion())
        key = _digest(source, version, " ".join(OPTIONS), target)
        return source, target, kind, cache_folder() / f"{key}.{kind}"

    def cached(self, kernel: FusedKernel, arch: int) -> Optional[Path]:
        """The compiled binary of `kernel` for `arch` when the cache has it, else None."""
        binary = self._binary(kernel, arch)[3]
        return binary if is_plain_file(binary) else None

    def compile(self, kernel: FusedKernel, arch: int) -> Path:
        """The compiled binary of `kernel` for `arch`, compiled now unless the cache has it."""
        problem = self.problem()
        if problem is not None:
            raise OpsdkError(f"cannot compile a fused GPU kernel: {problem}")
        source, target, kind, binary = self._binary(kernel, arch)
        top = binary.parent
        top.mkdir(parents=True, exist_ok=True)
        with FileLock(str(binary.with_suffix(".lock")), timeout=_LOCK_TIMEOUT):
            if is_plain_file(binary):
                return binary
            source_file = write_file(top, self.source_path(kernel), source)
            write_file(top, binary, _nvrtc(source, source_file.name, target, kind))
        return binary


def _nvrtc(source: str, name: str, target: str, kind: str) -> bytes:
    """NVRTC's cubin (or PTX) of `source`; an error carries NVRTC's log."""
    from cupy.cuda import nvrtc

    handle = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(handle, [*OPTIONS, f"--gpu-architecture={target}"])
        except nvrtc.NVRTCError:
            raise OpsdkError(f"fused GPU kernel {name} does not compile with NVRTC (a bug in "
                             f"opsdk's generator):\n{nvrtc.getProgramLog(handle).strip()[:2000]}"
                             ) from None
        binary = nvrtc.getCUBIN(handle) if kind == "cubin" else nvrtc.getPTX(handle)
    finally:
        nvrtc.destroyProgram(handle)
    if isinstance(binary, str):
        binary = binary.encode()
    return bytes(binary).rstrip(b"\0") + (b"\0" if kind == "ptx" else b"")


COMPILER = CudaFusionCompiler()
