"""Compiling cuda kernels with declared launches through NVRTC, at first use, where nvcc built none.

The runtime's cuda device asks for this compiler (`COMPILER`, declared in pyproject.toml as the
`nvrtc` entry point of group `opsdk.kernel_compilers`): the runtime never compiles
(docs/internals.md, "Layers"), so it asks a narrow interface for what must compile code, and calls it on the first call of each dtype combination. It compiles the author's source, plus one `static_assert` per launch on
the kernel's parameter types (opsdk.registry.launch), for the GPU's architecture through CuPy's
NVRTC bindings, and caches the result on disk. The cache key covers the source, every header it
includes (found by following its `#include`s through the include path), the dtypes, the
architecture, NVRTC's version and the options; a cache entry is data, read under the manifest
loader's rules (opsdk.registry.manifest): JSON naming no file (the binary's name is made from the
key), every field validated (the kernels' name expressions must be the ones asked for, each
lowered name must be the mangling of its expression and occur in the binary, whose sha256 must
match), no link followed (an entry or binary that is a link is not served but recompiled and
replaced; a cache folder linked out of its home is refused). Needs NVRTC, not a GPU:

    program = compile_program(spec, {"T": "float32"}, arch=90)   # a cubin for sm_90
    program.path, program.lowered                                 # the file, the kernels' names
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from opsdk.build.confine import check_inside, confined_dir, write_file
from opsdk.build.toolchain import cuda_targets
from opsdk.codegen.names import dtype_combinations, template_params
from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.launch import bind_kernel_name, op_namespace, signature_check
from opsdk.registry.spec import LaunchSpec, OpSpec

CACHE_FORMAT = 2  # 2: the name expressions are recorded
INCLUDE_DIR = Path(__file__).resolve().parents[1] / "include"  # opsdk/include
OPTIONS = ("-std=c++17",)
# What NVRTC can compile: element types that need no host library (opsdk::half is _Float16 or a
# struct, std::complex is <complex>).
JIT_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_LOG_LOCATION = re.compile(r"^(.+?)\((\d+)\): ", re.M)
_LOWERED = re.compile(r"[A-Za-z0-9_$.]{1,4096}\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def nvrtc_problem() -> Optional[str]:
    """Why NVRTC cannot compile here (CuPy missing, or no libnvrtc), or None."""
    try:
        from cupy.cuda import nvrtc
    except ImportError:
        return "NVRTC needs CuPy, which is not installed (pip install '.[gpu]')"
    try:
        nvrtc.getVersion()
    except Exception as exc:  # noqa: BLE001 - a missing or broken libnvrtc, however CuPy says it
        return (f"CuPy cannot load NVRTC ({type(exc).__name__}: {exc}); install the CUDA toolkit "
                "or the nvidia-cuda-nvrtc wheel (pip install '.[gpu]')")
    return None


@dataclass(frozen=True)
class CompiledProgram:
    """One cached NVRTC result: a cubin (or PTX) and the lowered name of each launch's kernel."""
    path: Path
    lowered: tuple[str, ...]  # per launch, in declaration order
    fresh: bool = field(default=False, compare=False)  # compiled now, not found in the cache


_compile_lock = threading.Lock()


def compile_program(spec: OpSpec, types: Mapping[str, str], arch: int,
                    cache_dir: Optional[Path] = None) -> CompiledProgram:
    """Compile (or find in the cache) `spec`'s cuda source for one dtype binding and one arch.

    `arch` is a compute capability as an int (90 for sm_90). The cubin is for that arch when NVRTC
    supports it, else PTX of the newest arch NVRTC has below it. Needs NVRTC, not a GPU.
    """
    from cupy.cuda import nvrtc

    kernel = spec.kernel("cuda")
    _check_jit_dtypes(spec, types)
    root = Path(spec.workspace)
    source_path = root / kernel.source
    program = _program_text(spec, kernel.launches, types, source_path)
    include_dirs = [source_path.parent, root, INCLUDE_DIR]
    target, kind = nvrtc_target(arch, nvrtc.getSupportedArchs())
    options = [*OPTIONS, f"--gpu-architecture={target}", *(f"-I{d}" for d in include_dirs)]
    names = [f"{op_namespace(spec)}::{bind_kernel_name(spec, launch, types)}"
             for launch in kernel.launches]
    key = _cache_key(spec, program, source_path, include_dirs, options, names, nvrtc.getVersion())
    top = cache_dir or cache_folder(spec)
    folder = check_inside(top, top / spec.name)
    with _compile_lock:
        cached = _read_entry(folder, key, names)
        if cached is not None:
            return cached
        binary, lowered = _nvrtc_compile(spec, program, kernel.source, options, names, kind, root)
        return _write_entry(top, folder, key, kind, binary, names, lowered)


def _check_jit_dtypes(spec: OpSpec, types: Mapping[str, str]) -> None:
    for launch in spec.kernel("cuda").launches:
        for arg in launch.args:
            if arg.kind not in ("input", "output"):
                continue
            tensor = next(t for t in spec.inputs + spec.outputs if t.name == arg.name)
            dtype = types.get(tensor.dtype, tensor.dtype)
            if dtype not in JIT_DTYPES:
                raise OpError(f"{spec.name}: '{arg.name}' is {dtype}, which the NVRTC path cannot "
                              f"pass (it takes {', '.join(JIT_DTYPES)}); build the kernel with nvcc "
                              "(`opsdk build`)")


def _program_text(spec: OpSpec, launches: Sequence[LaunchSpec], types: Mapping[str, str],
                  source_path: Path) -> str:
    """The author's source, then one signature check per launch, each reported at its YAML line."""
    try:
        source = source_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OpError(f"{spec.name}: cannot read its cuda kernel {source_path}: {exc}") from None
    checks = []
    for i, launch in enumerate(launches):
        checks.append(f'#line {launch.location.line} "{spec.file}"')
        checks.append(signature_check(spec, launch, i, types))
    return source + "\n" + "\n".join(checks) + "\n"


def nvrtc_target(arch: int, supported: Sequence[int]) -> tuple[str, str]:
    """(`sm_90`, "cubin") when NVRTC supports the arch, else (`compute_XX`, "ptx") of the newest
    arch below it, which the driver compiles for the GPU at load time."""
    if arch in supported:
        return f"sm_{arch}", "cubin"
    older = [a for a in supported if a < arch]
    if not older:
        raise OpsdkError(f"this NVRTC compiles for sm_{min(supported)} and newer; the GPU is "
                         f"sm_{arch}. Build the kernel with an nvcc that supports it (`opsdk build`)")
    return f"compute_{max(older)}", "ptx"


def included_files(source: Path, include_dirs: Sequence[Path]) -> list[Path]:
    """Every file `source` includes, directly or not, that the include path finds (sorted).

    Includes are followed whatever `#if` surrounds them: a header that is not compiled only makes
    the key change more often. Names not found (NVRTC's builtin headers) are keyed by NVRTC's
    version."""
    found: dict[Path, None] = {}
    todo = [source]
    while todo:
        current = todo.pop()
        try:
            text = current.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for delim, name in _INCLUDE.findall(text):
            dirs = ([current.parent] if delim == '"' else []) + list(include_dirs)
            for folder in dirs:
                candidate = folder / name.strip()
                if candidate.is_file():
                    candidate = candidate.resolve()
                    if candidate not in found:
                        found[candidate] = None
                        todo.append(candidate)
                    break
    return sorted(found)


def _cache_key(spec: OpSpec, program: str, source: Path, include_dirs: Sequence[Path],
               options: Sequence[str], names: Sequence[str], version: Any) -> str:
    digest = hashlib.sha256()
    parts = {"format": CACHE_FORMAT, "op": spec.name, "nvrtc": list(version), "names": list(names),
             "options": [o for o in options if not o.startswith("-I")], "program": program}
    digest.update(json.dumps(parts, sort_keys=True).encode())
    for header in included_files(source, include_dirs):
        digest.update(b"\0" + header.name.encode() + b"\0")
        digest.update(hashlib.sha256(header.read_bytes()).digest())
    return digest.hexdigest()


def _nvrtc_compile(spec: OpSpec, program: str, filename: str, options: Sequence[str],
                   names: Sequence[str], kind: str, root: Path) -> tuple[bytes, list[str]]:
    from cupy.cuda import nvrtc

    handle = nvrtc.createProgram(program, filename, [], [])
    try:
        for name in names:
            nvrtc.addNameExpression(handle, name)
        try:
            nvrtc.compileProgram(handle, list(options))
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(handle)
            raise OpError(f"{spec.name}: its cuda kernel does not compile with NVRTC:\n"
                          f"{_author_lines(log, root).strip()}") from None
        binary = nvrtc.getCUBIN(handle) if kind == "cubin" else nvrtc.getPTX(handle)
        lowered = [nvrtc.getLoweredName(handle, name) for name in names]
    finally:
        nvrtc.destroyProgram(handle)
    if isinstance(binary, str):
        binary = binary.encode()
    return bytes(binary).rstrip(b"\0") + (b"\0" if kind == "ptx" else b""), lowered


def _author_lines(log: str, root: Path) -> str:
    """NVRTC's `path(line): error: ...` as `path:line: error: ...`, paths relative to the workspace."""
    def fix(match: re.Match) -> str:
        path = match.group(1)
        try:
            path = Path(path).resolve().relative_to(root.resolve()).as_posix() if os.path.isabs(path) else path
        except ValueError:
            pass
        return f"{path}:{match.group(2)}: "
    return _LOG_LOCATION.sub(fix, log)


# -- the cache: data, validated, naming only files of its own folder -------------------------------

def cache_folder(spec: OpSpec) -> Path:
    """`<workspace>/build/cuda-nvrtc` when writable, else `$XDG_CACHE_HOME/opsdk/cuda-nvrtc`.

    Either is the cache's home: nothing below it may be a link leading out of it, and in the
    workspace the home itself must not lead out of `build/` (ConfinementError)."""
    build = Path(spec.workspace) / "build"
    if os.access(build if build.exists() else Path(spec.workspace), os.W_OK):
        return check_inside(build, build / "cuda-nvrtc")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opsdk" / "cuda-nvrtc"


def _read_entry(folder: Path, key: str, names: Sequence[str]) -> Optional[CompiledProgram]:
    """The cached program of `key`, or None when absent, a link, or not exactly as written (then
    it is recompiled and replaced)."""
    entry = folder / f"{key}.json"
    try:
        if entry.is_symlink():
            return None
        data = json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(data, dict) and data.get("format") == CACHE_FORMAT and data.get("key") == key
            and data.get("kind") in ("cubin", "ptx") and isinstance(data.get("sha256"), str)
            and _HEX64.match(data["sha256"]) and data.get("names") == list(names)
            and isinstance(data.get("lowered"), list) and len(data["lowered"]) == len(names)
            and all(isinstance(x, str) and _LOWERED.match(x) and _lowered_from(name, x)
                    for name, x in zip(names, data["lowered"]))):
        return None
    path = folder / f"{key}.{data['kind']}"  # the name is made here, never read from the file
    try:
        if path.is_symlink() or not path.is_file():
            return None
        binary = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(binary).hexdigest() != data["sha256"] or not all(
            x.encode() in binary for x in data["lowered"]):
        return None
    return CompiledProgram(path, tuple(data["lowered"]))


def _lowered_from(name: str, lowered: str) -> bool:
    """Whether `lowered` can be NVRTC's lowered name of the expression `name` (`ns::kernel<...>`):
    its Itanium mangling starts with the nested name `_ZN<len>ns<len>kernel`, or, for an
    `extern "C"` kernel, it is the kernel's bare name."""
    scope, _, kernel = name.split("<", 1)[0].rpartition("::")
    parts = [p for p in scope.split("::") if p] + [kernel]
    nested = "_ZN" + "".join(f"{len(p)}{p}" for p in parts)
    return lowered == kernel or lowered.startswith(nested)


def _write_entry(top: Path, folder: Path, key: str, kind: str, binary: bytes,
                 names: Sequence[str], lowered: Sequence[str]) -> CompiledProgram:
    confined_dir(top, folder)
    path = write_file(top, folder / f"{key}.{kind}", binary)
    entry = {"format": CACHE_FORMAT, "key": key, "kind": kind, "names": list(names),
             "lowered": list(lowered), "sha256": hashlib.sha256(binary).hexdigest()}
    write_file(top, folder / f"{key}.json", json.dumps(entry, indent=1).encode())
    return CompiledProgram(path, tuple(lowered), fresh=True)


def dtype_bindings(spec: OpSpec) -> list[dict[str, str]]:
    """Every binding of the type attrs to their allowed dtypes that NVRTC can pass."""
    out = []
    for combo in dtype_combinations(spec):
        types = dict(zip(template_params(spec), combo))
        try:
            _check_jit_dtypes(spec, types)
        except OpError:
            continue
        out.append(types)
    return out


def build_archs() -> tuple[int, ...]:
    """The archs `opsdk build` compiles for through NVRTC where nvcc is absent: those of
    OPSDK_CUDA_ARCHS, or the default ones (toolchain.cuda_targets), that this NVRTC supports."""
    from cupy.cuda import nvrtc

    supported = nvrtc.getSupportedArchs()
    return tuple(int(a) for a in cuda_targets(None).archs if a.isdigit() and int(a) in supported)


class NvrtcCompiler:
    """What the runtime's cuda device asks for (opsdk.runtime.devices.cuda_jit.KernelCompiler)."""

    def problem(self) -> Optional[str]:
        return nvrtc_problem()

    def compile(self, spec: OpSpec, types: Mapping[str, str], arch: int) -> CompiledProgram:
        return compile_program(spec, types, arch)


COMPILER = NvrtcCompiler()
