"""JAX FFI handlers: `build/jax_ffi/<op>/`, a shared library per op that jax.jit calls directly.

After the cpu units are built, each op with a generated handler (generated/cpp/<op>_jax_ffi.cc,
opsdk.codegen.jax_ffi) whose cpu unit built gets a library: the handler compiled once into an
object (keyed by its source, the op's header and XLA's FFI headers), linked with the op's kernel
object, the same one its pybind11 extension links. A kernel edit relinks (a fraction of a second);
only a handler change recompiles. `manifest.json` names the library, its digest and the handler's
symbol; opsdk.jax reads it and registers the handler with `jax.ffi.register_ffi_target`.

Handlers need JAX's FFI headers (`jaxlib/include`): without jaxlib installed, or with
OPSDK_JAX_FFI=0, nothing is built and opsdk.jax uses `jax.pure_callback`. The build's report
lists the kernels' units only; a handler that fails to build is a note, not a build failure: the
op still runs in JAX, through the callback.
"""

from __future__ import annotations

import importlib.util
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional, Sequence

from opsdk.build.compiler import build_key, file_digest, run_compiler
from opsdk.build.progress import UnitResult
from opsdk.build.toolchain import Toolchain
from opsdk.registry.manifest import TEMP_PREFIX, ManifestError, file_sha256, read_manifest

DEVICE = "jax_ffi"
ENV = "OPSDK_JAX_FFI"  # "0": build no handlers
MANIFEST = "manifest.json"
_FLAGS = ("-O2", "-std=c++17", "-fPIC", "-w")


def ffi_include_dir() -> Optional[Path]:
    """jaxlib's include folder (what `jax.ffi.include_dir()` returns), found without importing
    JAX (a no-op build stays fast); None when jaxlib is not installed."""
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        return None
    include = Path(list(spec.submodule_search_locations)[0]) / "include"
    return include if (include / "xla" / "ffi" / "api" / "ffi.h").is_file() else None


def build_handlers(root: Path, built: Sequence[UnitResult], toolchain: Toolchain,
                   environment: str) -> tuple[list[UnitResult], list[str]]:
    """Build (or find up to date) the handler library of every op whose cpu unit `built` lists
    and whose handler source exists; (results, notes). Failures become notes."""
    include = ffi_include_dir()
    if include is None or os.environ.get(ENV, "").strip() == "0":
        return [], []
    ops = [r.op for r in built if r.device == "cpu" and r.status != "failed"
           and (root / "generated" / "cpp" / f"{r.op}_jax_ffi.cc").is_file()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        outcomes = list(pool.map(lambda op: _build_one(root, op, toolchain, environment,
                                                       include), ops))
    return ([o for o in outcomes if not isinstance(o, str)],
            [o for o in outcomes if isinstance(o, str)])


def _kernel_object(root: Path, op: str) -> tuple[Path, str]:
    """The kernel object of the op's cpu build, and that build's key (opsdk.jax compares it with
    the cpu manifest's, so a handler never runs a kernel older than the extension's)."""
    manifest = read_manifest(root / "build" / "cpu" / op, op, "cpu")
    record = next(o for o in manifest.objects if o.role == "kernel")
    return root / "build" / "cpu" / op / "obj" / record.file, manifest.key


def _build_one(root: Path, op: str, toolchain: Toolchain, environment: str,
               include: Path) -> UnitResult | str:
    out_dir = root / "build" / DEVICE / op
    out_dir.mkdir(parents=True, exist_ok=True)
    source = f"generated/cpp/{op}_jax_ffi.cc"
    includes = (f"-I{root}", f"-I{root / 'generated' / 'cpp'}",
                f"-I{Path(__file__).resolve().parent.parent / 'include'}", f"-I{include}")
    inputs = {f: file_digest(root / f) for f in (source, f"generated/cpp/{op}_op.h")}
    inputs["ffi.h"] = file_digest(include / "xla" / "ffi" / "api" / "ffi.h")
    object_key = build_key(inputs, (*_FLAGS, "-c"), toolchain, environment)
    handler = out_dir / "obj" / f"handler-{object_key[:16]}.o"  # obj/: no wheel carries it
    try:
        kernel, cpu_key = _kernel_object(root, op)
    except (ManifestError, StopIteration):
        return f"op '{op}' ({DEVICE}): its cpu build has no kernel object; JAX uses the callback"
    link_key = build_key({"handler": object_key, "kernel": file_sha256(kernel)}, ("-shared",),
                         toolchain, environment)
    library = f"lib_opsdk_{op}_jax_ffi_{link_key[:12]}.so"
    if _up_to_date(out_dir, link_key, library, cpu_key):
        return UnitResult(op, DEVICE, "up to date", artefact=out_dir / library)
    seconds = 0.0
    if not handler.is_file():
        handler.parent.mkdir(exist_ok=True)
        temp = handler.parent / f"{TEMP_PREFIX}{handler.name}-{os.getpid()}"
        compiled = run_compiler((*toolchain.command, *_FLAGS, "-c", *includes, source, "-o",
                                 str(temp)), root)
        if not compiled.ok:
            temp.unlink(missing_ok=True)
            return _failed(out_dir, op, compiled.command, compiled.output)
        os.replace(temp, handler)
        seconds += compiled.seconds
    temp = out_dir / f"{TEMP_PREFIX}{library}-{os.getpid()}"
    linked = run_compiler((*toolchain.command, "-shared", "-fopenmp", str(handler), str(kernel),
                           "-o", str(temp)), root)
    if not linked.ok:
        temp.unlink(missing_ok=True)
        return _failed(out_dir, op, linked.command, linked.output)
    os.replace(temp, out_dir / library)
    _write(out_dir, {"op": op, "key": link_key, "file": library,
                     "sha256": file_sha256(out_dir / library),
                     "symbol": f"opsdk_jax_ffi_{op}", "cpu_key": cpu_key})
    _clean(out_dir, {library, MANIFEST})
    _clean(handler.parent, {handler.name})
    return UnitResult(op, DEVICE, "compiled", seconds + linked.seconds, out_dir / library,
                      parts=(("handler",) if seconds else ()) + ("link",))


def _up_to_date(out_dir: Path, key: str, library: str, cpu_key: str) -> bool:
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(manifest, dict) and manifest.get("key") == key
            and manifest.get("cpu_key") == cpu_key
            and manifest.get("file") == library and (out_dir / library).is_file()
            and file_sha256(out_dir / library) == manifest.get("sha256"))


def _write(out_dir: Path, manifest: dict) -> None:
    temp = out_dir / f"{TEMP_PREFIX}{MANIFEST}-{os.getpid()}"
    temp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(temp, out_dir / MANIFEST)


def _clean(out_dir: Path, keep: set[str]) -> None:
    for path in out_dir.iterdir():
        if path.is_file() and path.name not in keep:
            path.unlink(missing_ok=True)


def _failed(out_dir: Path, op: str, command: Sequence[str], output: str) -> str:
    (out_dir / MANIFEST).unlink(missing_ok=True)  # no stale handler runs an older kernel
    log = out_dir / "last_error.log"
    log.write_text("$ " + " ".join(command) + "\n\n" + output)
    return (f"op '{op}' ({DEVICE}): the JAX FFI handler did not build (see {log}); JAX runs "
            "the op through jax.pure_callback instead")
