"""One op on one device: its translation units, their cached objects, the link, the manifest.

A unit compiles two translation units into objects, the author's kernel (`<op>_kernel.cc` at
-O3 on the cpu, `<op>_cuda_kernel.cu` for the GPU archs on CUDA; no pybind11) and the pybind11
glue (`<op>_binding.cc`, `<op>_cuda_binding.cu`), then links them into the extension. Each object is cached under
`build/<device>/<op>/obj/` by its own content key, so a kernel edit recompiles only the kernel
object and relinks. Next to each object, `<role>-<key>.json` records the headers its depfile
listed, the key they gave and the object's sha256: an object is reused only when that key still
holds and its bytes are the ones compiled. The manifest's layout lives in opsdk.registry.manifest.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from opsdk.build.confine import (check_inside, clear_name, confined_dir, remove_file,
                                 replace_file, write_file)
from opsdk.build.compiler import (CompileOutcome, Toolchain, build_key, extension_suffix,
                                  file_digest, link_command, object_command, read_depfile,
                                  run_compiler, undefined_kernel_symbols)
from opsdk.build.diagnostics import (summarize_failure, summarize_missing_kernel,
                                     uninstantiated_kernels)
from opsdk.build.progress import UnitResult
from opsdk.registry.manifest import (TEMP_PREFIX, Manifest, ManifestError, ObjectRecord,
                                     artefact_problem, file_sha256, manifest_file, manifest_json,
                                     object_problem, read_manifest)

OBJ_DIR = "obj"


@dataclass(frozen=True)
class Source:
    """One translation unit of a unit: its role, the generated file, its compile flags."""
    role: str  # "kernel" or "glue"
    path: str  # workspace-relative
    flags: tuple[str, ...]
    inputs: tuple[str, ...]  # files known to feed it before any depfile (itself, header, kernel)


@dataclass(frozen=True)
class Unit:
    """One op on one device, with everything needed to key, compile and link it."""
    op: str
    device: str
    root: Path
    kernel: str  # the author's kernel, workspace-relative
    toolchain: Toolchain
    sources: tuple[Source, ...]
    link_flags: tuple[str, ...]

    @property
    def top(self) -> Path:
        """The build folder: every file the unit writes or deletes lies inside it."""
        return self.root / "build"

    @property
    def out_dir(self) -> Path:
        return self.top / self.device / self.op

    @property
    def obj_dir(self) -> Path:
        return self.out_dir / OBJ_DIR


@dataclass(frozen=True)
class BuiltObject:
    """An object file ready to link: its key (sources + headers + flags) and its headers."""
    role: str
    key: str
    file: str  # relative to the unit's obj/ folder
    sha256: str
    sources: tuple[str, ...]
    compiled: bool = False
    started: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class ObjectJob:
    """A translation unit to compile: the key it is compiled under."""
    source: Source
    key: str


@dataclass(frozen=True)
class ObjectFailure:
    """A translation unit that did not compile."""
    source: Source
    outcome: CompileOutcome


@dataclass(frozen=True)
class UnitPlan:
    """A unit that needs work: objects it can reuse and jobs it must compile, then a link."""
    unit: Unit
    reused: tuple[BuiltObject, ...]
    jobs: tuple[ObjectJob, ...]
    note: str = ""  # why a unit whose sources did not change is rebuilt (a damaged artefact)


class Digests:
    """sha256 of workspace and header files, computed once per build (headers are shared)."""

    def __init__(self, root: Path):
        self.root = root
        self._known: dict[str, str] = {}
        self._lock = threading.Lock()

    def of(self, files: Sequence[str]) -> dict[str, str]:
        out = {}
        for f in sorted(set(files)):
            digest = self._known.get(f)
            if digest is None:
                digest = file_digest(self.root / f)
                with self._lock:
                    self._known[f] = digest
            out[f] = digest
        return out


def last_build(unit: Unit) -> Optional[Manifest]:
    """The last successful build of a unit, or None when absent or invalid (then: rebuild)."""
    try:
        return read_manifest(unit.out_dir, unit.op, unit.device)
    except ManifestError:
        return None


def _object_key(unit: Unit, source: Source, headers: Sequence[str], digests: Digests,
                environment: str) -> str:
    files = digests.of([*source.inputs, *headers])
    return build_key(files, source.flags, unit.toolchain, environment)


def link_key(unit: Unit, objects: Sequence[BuiltObject], environment: str) -> str:
    """The key of the extension: its objects' keys, the link flags, compiler and environment."""
    return build_key({o.role: o.key for o in objects}, unit.link_flags, unit.toolchain,
                     environment)


def plan_unit(unit: Unit, environment: str,
              digests: Digests) -> tuple[Optional[UnitPlan], Optional[UnitResult]]:
    """(plan, None) when the unit must compile or relink; (None, up-to-date result) otherwise.

    Up to date needs the keys to match and the artefact's bytes to hash to the manifest's
    sha256: a truncated or patched extension is relinked (objects are checked the same way).
    """
    manifest = last_build(unit)
    previous = {o.role: o for o in manifest.objects} if manifest else {}
    keyed = []
    for source in unit.sources:
        before = previous.get(source.role)
        headers = before.sources if before else ()
        keyed.append((source, before, _object_key(unit, source, headers, digests, environment)))
    note = ""
    if manifest and all(b and b.key == k for _, b, k in keyed) and manifest.key == link_key(
            unit, [BuiltObject(s.role, k, b.file, b.sha256, b.sources) for s, b, k in keyed],
            environment):
        problem = artefact_problem(unit.out_dir, manifest)
        if problem is None:
            clean_unit_dir(unit, manifest)
            return None, UnitResult(unit.op, unit.device, "up to date",
                                    artefact=unit.out_dir / manifest.file)
        note = f"op '{unit.op}' ({unit.device}): {problem}; rebuilding it"
    reused, jobs = [], []
    for source, before, key in keyed:
        found = _reusable(unit, source, before, key, digests, environment)
        if found is not None:
            reused.append(found)
        else:
            jobs.append(ObjectJob(source, key))
    return UnitPlan(unit, tuple(reused), tuple(jobs), note), None


def _reusable(unit: Unit, source: Source, before: Optional[ObjectRecord], key: str,
              digests: Digests, environment: str) -> Optional[BuiltObject]:
    """The manifest's object when its key holds and its bytes are intact, else a cached one."""
    if before and before.key == key and object_problem(unit.obj_dir, before) is None:
        return BuiltObject(source.role, key, before.file, before.sha256, before.sources)
    return _cached_object(unit, source, key, digests, environment)


def _object_stem(role: str, key: str) -> str:
    return f"{role}-{key[:16]}"


def _cached_object(unit: Unit, source: Source, key: str, digests: Digests,
                   environment: str) -> Optional[BuiltObject]:
    """An object compiled under `key` by an earlier build (one that failed later, say)."""
    stem = _object_stem(source.role, key)
    try:
        meta = json.loads((unit.obj_dir / f"{stem}.json").read_text())
        record = ObjectRecord(source.role, str(meta["key"]), f"{stem}.o", str(meta["sha256"]),
                              tuple(str(h) for h in meta["sources"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if object_problem(unit.obj_dir, record) is not None:
        return None
    # The headers its depfile listed must still hash to what they were when it compiled.
    if _object_key(unit, source, record.sources, digests, environment) != record.key:
        return None
    return BuiltObject(source.role, record.key, record.file, record.sha256, record.sources)


def compile_object(unit: Unit, job: ObjectJob, digests: Digests,
                   environment: str) -> BuiltObject | ObjectFailure:
    """Compile one translation unit to a temp name; rename it and its record into obj/."""
    confined_dir(unit.top, unit.obj_dir)
    stem = _object_stem(job.source.role, job.key)
    temp = unit.obj_dir / f"{TEMP_PREFIX}{stem}-{os.getpid()}"
    temp_obj, temp_dep = temp.with_suffix(".o"), temp.with_suffix(".d")
    for path in (temp_obj, temp_dep):
        clear_name(unit.top, path)
    command = object_command(unit.toolchain, job.source.flags, job.source.path, str(temp_obj),
                             str(temp_dep))
    started = time.perf_counter()
    outcome = run_compiler(command, unit.root, expect=temp_obj)
    if not outcome.ok:
        for path in (temp_obj, temp_dep):
            remove_file(unit.top, path)
        return ObjectFailure(job.source, outcome)
    inputs = set(job.source.inputs)
    headers = tuple(d for d in read_depfile(temp_dep, unit.root) if d not in inputs)
    remove_file(unit.top, temp_dep)
    key = _object_key(unit, job.source, headers, digests, environment)
    sha256 = file_sha256(temp_obj)
    replace_file(unit.top, temp_obj, unit.obj_dir / f"{stem}.o")
    # The record goes last: an object without one is never reused.
    write_file(unit.top, unit.obj_dir / f"{stem}.json",
               json.dumps({"key": key, "sha256": sha256, "sources": list(headers)}, indent=1)
               + "\n")
    return BuiltObject(job.source.role, key, f"{stem}.o", sha256, headers, True, started,
                       outcome.seconds)


def finish_unit(plan: UnitPlan, done: Sequence[BuiltObject | ObjectFailure], environment: str,
                digests: Digests) -> UnitResult:
    """Link the unit's objects into its extension and write its manifest (or report failures)."""
    unit = plan.unit
    failures = [d for d in done if isinstance(d, ObjectFailure)]
    built = [d for d in done if isinstance(d, BuiltObject)]
    compile_seconds = sum(b.seconds for b in built)
    if failures:
        return _failure(unit, failures, compile_seconds)
    order = [s.role for s in unit.sources]
    objects = sorted([*plan.reused, *built], key=lambda o: order.index(o.role))
    key = link_key(unit, objects, environment)
    module = f"_opsdk_{unit.op}_{key[:12]}"
    suffix = extension_suffix()
    temp_out = clear_name(unit.top, unit.out_dir / f"{TEMP_PREFIX}{module}-{os.getpid()}{suffix}")
    command = link_command(unit.toolchain, unit.link_flags,
                           [str(unit.obj_dir / o.file) for o in objects], str(temp_out), module,
                           unit.op)
    outcome = run_compiler(command, unit.root, expect=temp_out)
    missing = undefined_kernel_symbols(temp_out, f"opsdk_op_{unit.op}") if outcome.ok else ()
    seconds = compile_seconds + outcome.seconds
    if not outcome.ok or missing:
        remove_file(unit.top, temp_out)
        return _failure(unit, [ObjectFailure(Source("link", "", (), ()), outcome)], seconds,
                        missing)
    first = min((b.started for b in built), default=None)
    if first is not None:  # wall time from the first compile to the link: the units ran together
        seconds = time.perf_counter() - first
    final = unit.out_dir / f"{module}{suffix}"
    replace_file(unit.top, temp_out, final)
    manifest = _write_manifest(unit, key, module, final, objects, digests)
    remove_file(unit.top, unit.out_dir / "last_error.log")
    clean_unit_dir(unit, manifest)
    parts = tuple(o.role for o in objects if o.compiled) + ("link",)
    return UnitResult(unit.op, unit.device, "compiled", seconds, final, parts=parts)


def _failure(unit: Unit, failures: Sequence[ObjectFailure], seconds: float,
             missing: tuple[str, ...] = ()) -> UnitResult:
    """Keep the full logs next to the unit; return only the author-relevant lines."""
    log = unit.out_dir / "last_error.log"
    undefined = "".join(f"\nundefined in the artefact: {sym}" for sym in missing)
    write_file(unit.top, log, "\n\n".join("$ " + " ".join(f.outcome.command) + "\n\n"
                                          + f.outcome.output for f in failures) + undefined)
    rel_log = log.relative_to(unit.root).as_posix()
    output = "\n".join(f.outcome.output for f in failures)
    # A kernel whose signature differs from its declaration: the kernel unit's explicit
    # instantiations find no definition (templates), or the link leaves the symbol undefined.
    missing = missing or uninstantiated_kernels(output)
    if missing:
        message = (summarize_missing_kernel(missing, unit.root, unit.op, unit.device, unit.kernel)
                   + f"\n(full compiler output: {rel_log})")
    else:
        message = summarize_failure(output, unit.root, unit.op, unit.device, rel_log)
    return UnitResult(unit.op, unit.device, "failed", seconds, None, message)


def _write_manifest(unit: Unit, key: str, module: str, artefact: Path,
                    objects: Sequence[BuiltObject], digests: Digests) -> Manifest:
    """Write the unit's manifest; `sources`/`digests` cover every object's inputs."""
    inputs = {f for s in unit.sources for f in s.inputs}
    headers = sorted({h for o in objects for h in o.sources})
    local = [f for f in sorted(inputs | set(headers)) if not Path(f).is_absolute()]
    manifest = Manifest(
        op=unit.op, device=unit.device, key=key, module=module, file=artefact.name,
        sha256=file_sha256(artefact), kernel=unit.kernel, sources=tuple(headers),
        # Per-file digests let the loader tell an edit from a mere touch of a source.
        digests=tuple(sorted(digests.of(local).items())),
        objects=tuple(ObjectRecord(o.role, o.key, o.file, o.sha256, o.sources)
                      for o in objects))
    write_file(unit.top, manifest_file(unit.out_dir), manifest_json(manifest))
    return manifest


def clean_unit_dir(unit: Unit, manifest: Manifest) -> None:
    """Remove temp files of killed builds, and artefacts and objects the manifest does not name."""
    keep = {manifest.file}
    for o in manifest.objects:
        keep |= {o.file, Path(o.file).with_suffix(".json").name}
    prefix = f"_opsdk_{unit.op}_"
    for folder in (unit.out_dir, unit.obj_dir):
        check_inside(unit.top, folder)  # never list and delete through a link leading out
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            stale = path.name.startswith(TEMP_PREFIX) or (
                path.name not in keep and (folder == unit.obj_dir or path.name.startswith(prefix)))
            if stale and (path.is_file() or path.is_symlink()):
                remove_file(unit.top, path)
