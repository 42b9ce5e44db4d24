"""The compilers of `opsdk build`: which g++ / nvcc, behind which launcher, for which GPUs.

`OPSDK_CXX` / `OPSDK_NVCC` name the compiler as a command line split like a shell would
(`ccache g++`, `"/opt/my tools/g++"`): the words before the compiler are a launcher (ccache,
distcc, sccache) that every compile and link runs through. A launcher does not change the bytes it
produces, so it is not part of the content key; the real compiler's `--version` is.

`OPSDK_CUDA_ARCHS` picks the GPUs a CUDA kernel is compiled for (`75,80,90+PTX`); the default is
every architecture from Turing to Hopper that the installed nvcc still supports, plus PTX of the
newest, so one build runs on any of them and JIT-compiles on later GPUs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from opsdk.registry.errors import OpsdkError

COMPILER_ENV = {"cpu": ("OPSDK_CXX", "g++"), "cuda": ("OPSDK_NVCC", "nvcc")}
CUDA_ARCHS_ENV = "OPSDK_CUDA_ARCHS"
# sm_70 (Volta) is what issue 7 asks for; CUDA 13's nvcc dropped it (its oldest is sm_75), so the
# default keeps the archs of this list that the installed nvcc lists, and says which it dropped.
DEFAULT_CUDA_ARCHS = (70, 75, 80, 86, 89, 90)
_ARCH = re.compile(r"^(?:sm_|compute_)?(\d{2,3})([af]?)$")


@dataclass(frozen=True)
class Toolchain:
    """A compiler for one device: its path, the launcher it runs behind, options given with it in
    OPSDK_CXX / OPSDK_NVCC, and its `--version` (version and options are part of every key)."""
    device: str
    path: str
    version: str
    launcher: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def command(self) -> tuple[str, ...]:
        """The words that start every compile and link: launcher, compiler, its options."""
        return (*self.launcher, self.path, *self.options)

    def describe(self) -> str:
        """`g++`, or `ccache g++` with a launcher, for messages and `opsdk doctor`."""
        launcher = [Path(self.launcher[0]).name, *self.launcher[1:]] if self.launcher else []
        return " ".join([*launcher, self.name, *self.options])


@dataclass(frozen=True)
class CompilerCommand:
    """OPSDK_CXX / OPSDK_NVCC (or the default) split into launcher, compiler and options."""
    origin: str  # "g++", or "OPSDK_CXX='ccache g++'"
    launcher: tuple[str, ...]
    compiler: str
    options: tuple[str, ...]


def compiler_command(device: str) -> CompilerCommand:
    """The compiler command of `device`, split like a shell would; OpsdkError when it cannot be.

    The compiler is the last word that is not an option: `ccache g++`, `distcc -j4 g++`; words
    after it are options passed to every call (`g++ -fdiagnostics-color=never`).
    """
    env_var, default = COMPILER_ENV[device]
    value = os.environ.get(env_var, "").strip()
    if not value:
        return CompilerCommand(default, (), default, ())
    origin = f"{env_var}={value!r}"
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise OpsdkError(f"{origin}: cannot split it like a shell ({exc}); quote a path with "
                         "spaces once, e.g. OPSDK_CXX='ccache \"/opt/my gcc/g++\"'") from None
    programs = [i for i, w in enumerate(words) if not w.startswith("-")]
    if not programs or programs[0] != 0:
        raise OpsdkError(f"{origin}: give a compiler, optionally behind a launcher "
                         "(e.g. 'g++' or 'ccache g++')")
    at = programs[-1]
    return CompilerCommand(origin, tuple(words[:at]), words[at], tuple(words[at + 1:]))


def find_toolchain(device: str) -> Optional[Toolchain]:
    """The compiler for `device` (g++ or nvcc; OPSDK_CXX / OPSDK_NVCC override, launcher
    allowed), or None when it or its launcher is not on PATH or the compiler does not run."""
    command = compiler_command(device)
    path = shutil.which(command.compiler)
    launcher = list(command.launcher)
    if launcher:
        launcher[0] = shutil.which(launcher[0]) or ""
    if path is None or (launcher and not launcher[0]):
        return None
    try:  # the real compiler's version, asked directly: a launcher could answer for itself
        proc = subprocess.run([path, *command.options, "--version"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return Toolchain(device, path, (proc.stdout + proc.stderr).strip(), tuple(launcher),
                     command.options)


def why_missing(device: str) -> str:
    """Why find_toolchain found nothing, naming the program and where its name came from."""
    command = compiler_command(device)
    for word in (*command.launcher[:1], command.compiler):
        if shutil.which(word) is None:
            return f"{word} not found on PATH" + (
                f" ({command.origin})" if command.origin != command.compiler else "")
    return f"{command.compiler} --version failed ({command.origin})"


# ----------------------------------------------------------------------------------- CUDA archs
@dataclass(frozen=True)
class CudaTargets:
    """The GPU code a CUDA unit carries: SASS for each arch, PTX for `ptx` (JIT on newer GPUs)."""
    archs: tuple[str, ...]  # "75", "90a", ...
    ptx: tuple[str, ...]
    dropped: tuple[str, ...] = ()  # default archs this nvcc no longer supports

    def describe(self) -> str:
        """`sm_75, sm_90 + PTX compute_90`, for notes and `opsdk doctor`."""
        parts = [f"sm_{a}" for a in self.archs] + [f"PTX compute_{a}" for a in self.ptx]
        return ", ".join(parts)

    def gencode_flags(self) -> list[str]:
        """One nvcc call for all of them: `-gencode arch=compute_XX,code=sm_XX` each, PTX last."""
        flags = []
        for arch in self.archs:
            flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
        for arch in self.ptx:
            flags += ["-gencode", f"arch=compute_{arch},code=compute_{arch}"]
        return flags


def supported_cuda_archs(nvcc: str) -> Optional[tuple[str, ...]]:
    """The archs `nvcc --list-gpu-arch` lists ("75", "80", ...), or None when it cannot say."""
    try:
        proc = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.findall(r"compute_(\d{2,3}[af]?)\b", proc.stdout)
    return tuple(dict.fromkeys(found)) if proc.returncode == 0 and found else None


def cuda_targets(supported: Optional[tuple[str, ...]]) -> CudaTargets:
    """What to compile CUDA for: OPSDK_CUDA_ARCHS (validated), else the default archs that
    `supported` (nvcc's list; None: unknown, keep all) has, plus PTX of the newest."""
    value = os.environ.get(CUDA_ARCHS_ENV, "").strip()
    if value:
        return _parse_archs(value, supported)
    wanted = [str(a) for a in DEFAULT_CUDA_ARCHS]
    kept = tuple(a for a in wanted if supported is None or a in supported)
    if not kept:
        raise OpsdkError(f"nvcc supports none of the default CUDA archs ({', '.join(wanted)}); "
                         f"set {CUDA_ARCHS_ENV} to archs it lists (nvcc --list-gpu-arch)")
    return CudaTargets(kept, (kept[-1],), tuple(a for a in wanted if a not in kept))


def present_gpu_archs() -> tuple[str, ...]:
    """The compute capabilities of this machine's GPUs as nvidia-smi reports them ("90", ...);
    () when there is none, or no driver to ask."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        proc = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = re.findall(r"^\s*(\d+)\.(\d+)\s*$", proc.stdout, re.M) if proc.returncode == 0 else []
    return tuple(dict.fromkeys(f"{major}{minor}" for major, minor in found))


def dev_targets(supported: Optional[tuple[str, ...]]) -> CudaTargets:
    """What a development build compiles CUDA for: OPSDK_CUDA_ARCHS when set; else SASS for each
    GPU of this machine that nvcc supports (PTX of nvcc's newest default arch for a GPU too new for
    it); else, with no GPU, PTX of the oldest default arch alone, one cheap target that checks the
    code and runs on any later GPU (the driver compiles it at load). `cuda_targets` is the fat
    binary a wheel ships."""
    full = cuda_targets(supported)
    if os.environ.get(CUDA_ARCHS_ENV, "").strip():
        return full
    present = present_gpu_archs()
    known = tuple(a for a in present if supported is None or a in supported)
    if known or present:
        return CudaTargets(known, () if len(known) == len(present) else (full.archs[-1],))
    return CudaTargets((), (full.archs[0],))


def _parse_archs(value: str, supported: Optional[tuple[str, ...]]) -> CudaTargets:
    """`75,80,90+PTX` or `sm_80 sm_90a`: SASS for each; `+PTX` on one also embeds its PTX."""
    archs, ptx = [], []
    for word in re.split(r"[,;\s]+", value):
        if not word:
            continue
        base, plus = (word[:-4], True) if word.upper().endswith("+PTX") else (word, False)
        m = _ARCH.match(base.strip())
        if not m:
            raise OpsdkError(f"{CUDA_ARCHS_ENV}={value!r}: {word!r} is not a CUDA arch; write "
                             "archs as numbers (75,80,90) or sm_XX, '+PTX' after one to embed "
                             "its PTX too")
        arch = m[1] + m[2]
        if supported is not None and arch not in supported:
            raise OpsdkError(f"{CUDA_ARCHS_ENV}={value!r}: this nvcc does not support sm_{arch} "
                             f"(it supports {', '.join(supported)})")
        archs.append(arch)
        if plus:
            ptx.append(arch)
    if not archs:
        raise OpsdkError(f"{CUDA_ARCHS_ENV} is set but names no arch; unset it for the default")
    return CudaTargets(tuple(dict.fromkeys(archs)), tuple(dict.fromkeys(ptx)))
