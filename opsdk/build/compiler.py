"""The compiler driver of `opsdk build`: toolchains, flag lists, depfiles and content keys.

Everything here is a small pure-ish function over paths and strings; `build.py` decides what to
compile and when. A key hashes everything that can change the bytes of an artefact, so an
unchanged op is never recompiled and a changed one always is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional

from opsdk.build.toolchain import (CudaTargets, Toolchain, cuda_targets,  # noqa: F401
                                   find_toolchain, supported_cuda_archs)
from opsdk.registry.errors import OpsdkError

DEVICES = ("cpu", "cuda")
MODULE_PLACEHOLDER = "{module}"
DEPFILE_PLACEHOLDER = "{depfile}"
# Extra flags from the environment, appended last (e.g. OPSDK_CXXFLAGS="-g -O1" to debug a kernel).
EXTRA_FLAGS_ENV = {"cpu": "OPSDK_CXXFLAGS", "cuda": "OPSDK_NVCCFLAGS"}
# The glue's optimisation level, measured on pairwise_manhattan's binding (2-core machine, load ~2):
# compile 8.2 s at -O0, 9.2 s at -O1, 13.3 s at -O2, 15.8 s at -O3; one call on 1x1 inputs
# 3.07 us at -O0, 0.75 us at -O1, 0.68 us at -O2, 0.70 us at -O3. -O1 keeps the call within
# 0.1 us of -O3 for 40% less compile time; the kernel itself is always built at -O3.
GLUE_OPT = "-O1"
# Kernels do not set errno: sqrt, log, ... then have vector forms (with errno, g++ keeps one
# scalar libm call per element; the optimizer updates ran 5x slower). Results are unchanged.
KERNEL_MATH_FLAGS = ("-fno-math-errno",)


@dataclass(frozen=True)
class CompileOutcome:
    """What one compiler run gave: exit status, its merged stdout+stderr, and how long it took."""
    command: tuple[str, ...]
    returncode: int
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def include_dirs(root: Path) -> tuple[str, ...]:
    """The include path of every op: workspace, generated, opsdk's kernel.h, pybind11, Python."""
    import pybind11  # light: only its path helpers

    package_include = Path(__file__).resolve().parent.parent / "include"
    return (str(root), str(root / "generated" / "cpp"), str(package_include),
            pybind11.get_include(), sysconfig.get_paths()["include"])


def flag_template(device: str, root: Path) -> tuple[str, ...]:
    """Flags compiling one source straight into an extension, with `{module}` and `{depfile}`.

    `opsdk build` no longer compiles this way (see object_flags); benchmarks use it to build a
    plain pybind11 module the way a hand-written extension is built.
    """
    includes = [f"-I{d}" for d in include_dirs(root)]
    deps = ["-MMD", "-MF", DEPFILE_PLACEHOLDER]
    define = [f"-DOPSDK_MODULE_NAME={MODULE_PLACEHOLDER}"]
    if device == "cpu":
        base = ["-O3", "-std=c++17", "-fPIC", "-shared", "-fopenmp", *cpu_arch_flags(),
                *KERNEL_MATH_FLAGS, "-fvisibility=hidden"]
    else:
        base = [*_cuda_compile_base(None), "-shared"]
    return tuple(base + define + includes + deps + extra_flags(device))


# OPSDK_PORTABLE=1: build cpu kernels for a baseline that every machine of the platform runs
# instead of this machine's CPU (-march=native), as a shipped wheel needs; OPSDK_PORTABLE is
# then defined for the kernel, which may compile faster paths too and choose one at run time
# (opsdk/cpu_dispatch.h). -Wno-psabi: such a kernel's inlined helpers take vectors wider than the
# baseline's by value, and GCC notes that passing them would change the ABI; being inlined into
# the function compiled for their width, they are never passed.
PORTABLE_ENV = "OPSDK_PORTABLE"
_PORTABLE_MARCH = {"x86_64": "-march=x86-64-v2", "amd64": "-march=x86-64-v2",
                   "aarch64": "-march=armv8-a", "arm64": "-march=armv8-a"}


# The SIMD levels a portable kernel may compile and choose among at run time (opsdk/cpu_dispatch.h
# decides, capped by OPSDK_SIMD); one level where the header has no dispatch.
_PORTABLE_SIMD_LEVELS = {"x86_64": ("baseline", "avx2", "avx512"),
                         "amd64": ("baseline", "avx2", "avx512")}


def portable_simd_levels() -> tuple[str, ...]:
    """The levels opsdk/cpu_dispatch.h chooses among on this platform, baseline first."""
    import platform

    return _PORTABLE_SIMD_LEVELS.get(platform.machine().lower(), ("baseline",))


def portable_requested() -> bool:
    """Whether OPSDK_PORTABLE asks for portable cpu kernels (any value but empty or 0)."""
    return os.environ.get(PORTABLE_ENV, "").strip() not in ("", "0")


def cpu_arch_flags() -> list[str]:
    """-march=native, or the platform's portable baseline when OPSDK_PORTABLE is set."""
    if not portable_requested():
        return ["-march=native"]
    import platform

    march = _PORTABLE_MARCH.get(platform.machine().lower())
    return [*([march] if march else []), "-mtune=generic", "-DOPSDK_PORTABLE=1", "-Wno-psabi"]


def extra_flags(device: str) -> list[str]:
    """OPSDK_CXXFLAGS / OPSDK_NVCCFLAGS split like a shell would: appended to every compile."""
    return shlex.split(os.environ.get(EXTRA_FLAGS_ENV[device], ""))


def _cuda_compile_base(targets: Optional[CudaTargets]) -> list[str]:
    """nvcc's flags: every arch in one call (one host pass, one fat binary), PTX last."""
    if targets is None:
        nvcc = find_toolchain("cuda")
        targets = cuda_targets(supported_cuda_archs(nvcc.path) if nvcc else None)
    return ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden",
            *targets.gencode_flags()]


def glue_module_name(op: str) -> str:
    """The fixed name the glue object is compiled under (`PYBIND11_MODULE(<name>, m)`).

    Fixed, so that the glue object does not depend on the kernel: the extension's real, per-build
    module name is an alias of its init function made at link time (see link_command).
    """
    return f"opsdk_glue_{op}"


def object_flags(device: str, role: str, root: Path, op: str,
                 cuda: Optional[CudaTargets] = None) -> tuple[str, ...]:
    """Flags compiling one translation unit of an op into an object, with a `{depfile}` placeholder.

    role "kernel": the author's kernel and its instantiations, -O3, no pybind11 on the include
    path; on the cpu -march=native, on CUDA the GPU archs (the only unit compiled for them).
    role "glue": the pybind11 binding at GLUE_OPT; on CUDA host code only, so no arch flags (a
    new arch list or a kernel edit never recompiles it).
    """
    deps = ["-MMD", "-MF", DEPFILE_PLACEHOLDER]
    glue_define = [f"-DOPSDK_MODULE_NAME={glue_module_name(op)}"]
    includes = [f"-I{d}" for d in include_dirs(root)]
    if device == "cuda" and role == "kernel":
        base = [*_cuda_compile_base(cuda), "-c"]
        includes = includes[:3]  # workspace, generated/cpp, opsdk/include: no pybind11, no Python
    elif device == "cuda":
        base = [GLUE_OPT, "-std=c++17", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden",
                "-c", *glue_define]
    elif role == "kernel":
        base = ["-O3", "-std=c++17", "-fPIC", "-fopenmp", *cpu_arch_flags(), *KERNEL_MATH_FLAGS,
                "-fvisibility=hidden", "-c"]
        includes = includes[:3]  # workspace, generated/cpp, opsdk/include: no pybind11, no Python
    else:
        base = [GLUE_OPT, "-std=c++17", "-fPIC", "-fopenmp", "-fvisibility=hidden", "-c",
                *glue_define]
    return tuple(base + includes + deps + extra_flags(device))


def link_flags(device: str) -> tuple[str, ...]:
    """Flags linking an op's objects into its extension (the extra flags too: -g, sanitizers)."""
    if device == "cpu":
        return ("-shared", "-fopenmp", *extra_flags(device))
    return ("-shared", "-Xcompiler", "-fPIC", *extra_flags(device))


def object_command(toolchain: Toolchain, flags: Iterable[str], source: str, output: str,
                   depfile: str) -> tuple[str, ...]:
    """The argv that compiles `source` into the object `output`, writing its depfile."""
    filled = [f.replace(DEPFILE_PLACEHOLDER, depfile) for f in flags]
    return (*toolchain.command, *filled, source, "-o", output)


def link_command(toolchain: Toolchain, flags: Iterable[str], objects: Iterable[str], output: str,
                 module: str, op: str) -> tuple[str, ...]:
    """The argv that links `objects` into the extension `output` importable as `module`.

    Python calls `PyInit_<module>`; the linker defines it as an alias of the glue's fixed-name
    init function, so a kernel edit changes the module name without recompiling the glue.
    """
    alias = f"PyInit_{module}=PyInit_{glue_module_name(op)}"
    define = (["-Wl,--defsym," + alias] if toolchain.device == "cpu"
              else ["-Xlinker", "--defsym=" + alias])
    return (*toolchain.command, *flags, *objects, *define, "-o", output)


def compile_command(toolchain: Toolchain, flags: Iterable[str], source: str, output: str,
                    module: str, depfile: str) -> tuple[str, ...]:
    """The argv that compiles `source` into the extension `output` exporting `module`."""
    filled = [f.replace(MODULE_PLACEHOLDER, module).replace(DEPFILE_PLACEHOLDER, depfile)
              for f in flags]
    return (*toolchain.command, *filled, source, "-o", output)


# The exit status given to a compiler run that exited 0 but left no output: a failure.
NO_OUTPUT_STATUS = 127


def run_compiler(command: tuple[str, ...], cwd: Path,
                 expect: Optional[Path] = None) -> CompileOutcome:
    """Run one compile in `cwd` (so diagnostics name workspace-relative paths).

    `expect` is the file the command must write: a compiler (or a wrapper, a launcher) that exits
    0 without writing it as a non-empty regular file has failed, and its outcome says so.
    """
    outcome = _run(command, cwd)
    if outcome.ok and expect is not None and not _written(expect):
        return CompileOutcome(command, NO_OUTPUT_STATUS, outcome.output.rstrip("\n") + (
            f"\nerror: {Path(command[0]).name} exited with status 0 but wrote no "
            f"{Path(expect).suffix or 'output'} file ({expect}); check the compiler "
            "(OPSDK_CXX / OPSDK_NVCC) with `opsdk doctor`").lstrip("\n"), outcome.seconds)
    return outcome


def _written(path: Path) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and path.stat().st_size > 0
    except OSError:
        return False


def _run(command: tuple[str, ...], cwd: Path) -> CompileOutcome:
    start = time.perf_counter()
    # The C locale keeps messages in English with ASCII quotes, as the diagnostics parser expects.
    env = {**os.environ, "LC_ALL": "C"}
    try:
        proc = subprocess.run(list(command), cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as exc:
        raise OpsdkError(f"cannot run {command[0]}: {exc.strerror}") from None
    return CompileOutcome(command, proc.returncode, proc.stdout, time.perf_counter() - start)


def undefined_kernel_symbols(artefact: Path, namespace: str) -> tuple[str, ...]:
    """Functions of the op's namespace the artefact uses but does not define, demangled.

    A kernel defined with another signature than its header declares still compiles (it is an
    overload) and links (-shared allows undefined symbols); without this check the mistake would
    surface only as "undefined symbol" when Python imports the module.
    """
    nm = shutil.which("nm")
    if nm is None:
        return ()
    try:
        proc = subprocess.run([nm, "-D", "-C", "--undefined-only", str(artefact)],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = set()
    for line in proc.stdout.splitlines():
        kind, _, symbol = line.strip().partition(" ")
        # Demangled template functions carry their return type: "void ns::cpu<float>(...)".
        at = symbol.find(f"{namespace}::")
        if kind == "U" and at >= 0 and (at == 0 or symbol[at - 1] == " "):
            found.add(symbol[at:].strip())
    return tuple(sorted(found))


def read_depfile(path: Path, root: Path) -> tuple[str, ...]:
    """The files a `-MMD` depfile lists, workspace-relative where inside it, sorted."""
    try:
        text = path.read_text()
    except OSError:
        return ()
    # Make syntax: "target: dep dep \<newline> dep"; spaces inside names are escaped as "\ ".
    body = text.replace("\\\n", " ").split(":", 1)[-1] if ":" in text else ""
    tokens = body.replace("\\ ", "\0").split()
    deps = {_workspace_relative(t.replace("\0", " "), root) for t in tokens}
    return tuple(sorted(deps))


def _workspace_relative(name: str, root: Path) -> str:
    path = Path(name) if os.path.isabs(name) else root / name
    path = Path(os.path.normpath(path))
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, or 'missing' (a vanished header must change the key too)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def environment_fingerprint() -> str:
    """What outside the sources changes the artefact: Python, NumPy, pybind11, the CPU's features.

    Versions come from package metadata so that a no-op build never imports NumPy; the CPU flags
    matter because of -march=native (a build folder copied to another machine must rebuild).
    """
    parts = [sys.version, _dist_version("numpy"), _dist_version("pybind11"), _cpu_flags()]
    return "\n".join(parts)


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.strip() for line in f if line.startswith("flags")), "")
    except OSError:
        return ""


def build_key(digests: Mapping[str, str], flags: Iterable[str], toolchain: Toolchain,
              environment: str) -> str:
    """The content key of one artefact: source digests, the flag list, compiler and environment.

    The compiler is its `--version` (with the options OPSDK_CXX gave it); a launcher (ccache)
    is left out: it does not change the bytes, so switching it on rebuilds nothing.
    """
    compiler = [toolchain.version, *toolchain.options] if toolchain.options else toolchain.version
    payload = json.dumps({"files": sorted(digests.items()), "flags": list(flags),
                          "compiler": compiler, "environment": environment},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def extension_suffix() -> str:
    """`.cpython-311-x86_64-linux-gnu.so` and the like."""
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"
