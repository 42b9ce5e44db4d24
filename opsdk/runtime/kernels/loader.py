"""Loading the kernels `opsdk build` compiled: by path, from the op's build manifest.

The runtime never compiles and never imports codegen: it runs what was built. Each build gives
the extension a new module name (`_opsdk_<op>_<key>`), so a process can load a rebuilt kernel
next to the one it already holds. The manifest (opsdk.registry.manifest) is validated and the
artefact's sha256 checked before the dynamic loader maps it: a truncated or patched extension
would crash the process (SIGBUS) instead of raising. The check runs once per artefact per
process; later calls only stat the manifest.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from opsdk.registry.errors import KernelNotBuiltError, warn_user
from opsdk.registry.manifest import (MANIFEST_NAME, ManifestError, file_problem, inside,
                                     read_manifest as read_built)
from opsdk.registry.spec import OpSpec

COMPILED_DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class BuiltKernel:
    """What a unit's manifest.json says about its artefact."""
    op: str
    device: str
    module: str
    artefact: Path
    sources: tuple[str, ...]
    digests: tuple[tuple[str, str], ...]  # workspace files -> sha256 when built
    sha256: str  # the artefact's, as built


_lock = threading.Lock()
_modules: dict[Path, Callable] = {}  # artefact path -> kernel function
# manifest path -> (its mtime_ns, the kernel): a hot path stats the manifest and returns
_resolved: dict[Path, tuple[int, Callable]] = {}


def manifest_path(spec: OpSpec, device: str) -> Path:
    """`<workspace>/build/<device>/<op>/manifest.json`."""
    return Path(spec.workspace) / "build" / device / spec.name / MANIFEST_NAME


def load_kernel(spec: OpSpec, device: str = "cpu") -> Callable:
    """The built `cpu` (or `cuda`) function of an op, imported from its artefact once per build.

    Raises KernelNotBuiltError when the op was never built, or its manifest is invalid, or its
    artefact is not the one built (truncated, patched, empty); warns when its kernel source changed
    after the build (the old kernel keeps running until `opsdk build` is rerun).

    >>> fn = load_kernel(registry.get("pairwise_manhattan"))      # doctest: +SKIP
    >>> fn(x, y)                                                   # doctest: +SKIP
    """
    if device not in COMPILED_DEVICES:
        raise ValueError(f"op '{spec.name}': no compiled kernels for device '{device}'")
    path = manifest_path(spec, device)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        raise _not_built(spec, device) from None
    hit = _resolved.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    built = read_manifest(spec, device)
    with _lock:
        fn = _modules.get(built.artefact)
        if fn is None:
            _verify_artefact(spec, built)
            _warn_if_stale(spec, built)
            fn = _import_kernel(spec, built)
            _modules[built.artefact] = fn
        _resolved[path] = (stamp, fn)
    return fn


def read_manifest(spec: OpSpec, device: str) -> BuiltKernel:
    """The manifest of an op's build on `device`; KernelNotBuiltError if absent or unusable."""
    folder = manifest_path(spec, device).parent
    try:
        manifest = read_built(folder, spec.name, device)
        artefact = inside(folder, manifest.file)
    except ManifestError as exc:
        if not folder.joinpath(MANIFEST_NAME).exists():
            raise _not_built(spec, device) from None
        raise _unusable(spec, device, str(exc)) from None
    if not artefact.is_file():
        raise _not_built(spec, device)
    return BuiltKernel(spec.name, device, manifest.module, artefact, manifest.sources,
                       manifest.digests, manifest.sha256)


def _verify_artefact(spec: OpSpec, built: BuiltKernel) -> None:
    """Refuse an artefact whose bytes are not those the build recorded (before it is mapped)."""
    problem = file_problem(built.artefact.parent, built.artefact.name, built.sha256)
    if problem is not None:
        raise _unusable(spec, built.device, f"{built.artefact.parent}: {problem}")


def _not_built(spec: OpSpec, device: str) -> KernelNotBuiltError:
    return KernelNotBuiltError(f"op '{spec.name}': no built {device} kernel; "
                               f"run `opsdk build` in {Path(spec.workspace).resolve()}")


def _unusable(spec: OpSpec, device: str, why: str) -> KernelNotBuiltError:
    return KernelNotBuiltError(f"op '{spec.name}': its built {device} kernel is unusable "
                               f"({why}); run `opsdk build` in "
                               f"{Path(spec.workspace).resolve()} to rebuild it")


def _import_kernel(spec: OpSpec, built: BuiltKernel) -> Callable:
    module_spec = importlib.util.spec_from_file_location(built.module, built.artefact)
    if module_spec is None or module_spec.loader is None:
        raise _not_built(spec, built.device)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except ImportError as exc:
        raise KernelNotBuiltError(
            f"op '{spec.name}': cannot load its {built.device} kernel ({exc}); "
            f"run `opsdk build` in {Path(spec.workspace).resolve()}") from None
    fn = getattr(module, built.device)
    if getattr(module, "given_outputs", False):
        _GIVEN_OUTPUTS.add(fn)
    return fn


# Built kernels whose glue takes given outputs after its other arguments (docs/internals.md, The
# binding module); one built before that glue existed is simply called without them.
_GIVEN_OUTPUTS: set = set()


def takes_given_outputs(fn: Callable) -> bool:
    """Whether the built kernel `fn` accepts its output arrays from the caller."""
    return fn in _GIVEN_OUTPUTS


def _warn_if_stale(spec: OpSpec, built: BuiltKernel) -> None:
    """Warn when the kernel or a workspace header it includes changed after the build.

    A newer mtime alone is not enough (an editor or a checkout touches files); when the build
    recorded the file's digest, the content must differ too.
    """
    kernel = spec.kernel(built.device)
    local = [s for s in built.sources if not Path(s).is_absolute()]
    digests = dict(built.digests)
    # The digests also cover the generated units and <op>_op.h (a declaration edit).
    candidates = ([kernel.source] if kernel else []) + local + sorted(digests)
    built_at = built.artefact.stat().st_mtime
    for rel in dict.fromkeys(candidates):
        source = Path(spec.workspace) / rel
        try:
            newer = source.stat().st_mtime > built_at
            if newer and rel in digests:
                newer = hashlib.sha256(source.read_bytes()).hexdigest() != digests[rel]
        except OSError:
            continue
        if newer:
            warn_user(f"op '{spec.name}': {rel} changed after the last build; rerun "
                      f"`opsdk build` to use the edit (running the previous kernel)")
            return
