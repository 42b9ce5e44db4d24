"""`opsdk build`: regenerate, then compile every stale kernel of a workspace, in parallel.

Each (op, device) pair is one unit with its own folder `build/<device>/<op>/`. A unit is stale
unless its `manifest.json` holds the key of the current sources, headers, flags, compiler and
environment (see compiler.build_key) and names an artefact that exists. Artefacts are written
under a temp name and renamed; the manifest is replaced last, so a killed build leaves at worst
unreferenced files, which the next build removes.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from ..registry.errors import OpsdkError
from .compiler import (Toolchain, build_key, compile_command, environment_fingerprint,
                       extension_suffix, file_digest, find_toolchain, flag_template, read_depfile,
                       run_compiler, undefined_kernel_symbols)
from .build_state import (GenerateState, OpKernels, inputs_stamp, ops_of, outputs_stamp,
                          read_state, write_state)
from .build_progress import Display, UnitResult, make_display
from .diagnostics import BuildError, summarize_failure, summarize_missing_kernel

CUDA_MODES = ("auto", "on", "off")
_BINDINGS = {"cpu": "generated/cpp/{op}_binding.cc", "cuda": "generated/cuda/{op}_cuda_binding.cu"}
_TEMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class BuildReport:
    """What one `build_workspace` did: per-unit results, notes (skipped devices), written files."""
    results: tuple[UnitResult, ...]
    notes: tuple[str, ...]
    generated: tuple[str, ...]
    seconds: float

    def _with(self, status: str) -> tuple[UnitResult, ...]:
        return tuple(r for r in self.results if r.status == status)

    @property
    def compiled(self) -> tuple[UnitResult, ...]:
        return self._with("compiled")

    @property
    def up_to_date(self) -> tuple[UnitResult, ...]:
        return self._with("up to date")

    @property
    def failed(self) -> tuple[UnitResult, ...]:
        return self._with("failed")

    def summary(self) -> str:
        """One line: `2 compiled, 3 up to date in 8.1 s`."""
        parts = [f"{len(self.compiled)} compiled", f"{len(self.up_to_date)} up to date"]
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        return f"{', '.join(parts)} in {self.seconds:.1f} s"


@dataclass(frozen=True)
class _Unit:
    """One op on one device, with everything needed to key and compile it."""
    op: str
    device: str
    root: Path
    source: str  # the generated binding, workspace-relative
    kernel: str  # the author's kernel, workspace-relative
    toolchain: Toolchain
    flags: tuple[str, ...]

    @property
    def out_dir(self) -> Path:
        return self.root / "build" / self.device / self.op


@dataclass(frozen=True)
class _Plan:
    """A stale unit: the key it will be built under and the digests the key was computed from."""
    unit: _Unit
    key: str
    digests: tuple[tuple[str, str], ...]


def build_workspace(root: Path, ops: Optional[Sequence[str]] = None, jobs: Optional[int] = None,
                    cuda: str = "auto", progress: bool = True) -> BuildReport:
    """Regenerate `generated/` and compile every stale cpu (and cuda) kernel of the workspace.

    Raises BuildError (after building everything else) when a kernel fails to compile.

    >>> report = build_workspace(Path("."))          # doctest: +SKIP
    >>> [r.op for r in report.compiled]              # doctest: +SKIP
    ['pairwise_manhattan']
    """
    if cuda not in CUDA_MODES:
        raise OpsdkError(f"--cuda must be one of {', '.join(CUDA_MODES)}, not '{cuda}'")
    start = time.perf_counter()
    root = Path(root).resolve()
    (root / "build").mkdir(exist_ok=True)
    with _workspace_lock(root / "build"):
        found, generated = _regenerate(root)
        units, notes = _make_units(root, _select_ops(root, found, ops), cuda)
        environment = environment_fingerprint()
        results: list[UnitResult] = []
        stale: list[_Plan] = []
        for unit in units:
            plan, done = _plan_unit(unit, environment)
            if plan is None:
                results.append(done)
            else:
                stale.append(plan)
        results += _compile_all(stale, environment, jobs, progress)
    order = {(u.op, u.device): i for i, u in enumerate(units)}
    results.sort(key=lambda r: order[(r.op, r.device)])
    report = BuildReport(tuple(results), tuple(notes), generated, time.perf_counter() - start)
    if report.failed:
        raise BuildError("\n\n".join(r.message for r in report.failed), report)
    return report


@contextmanager
def _workspace_lock(build_dir: Path) -> Iterator[None]:
    """Serialise builds of one workspace; the OS drops the lock if its holder is killed."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(build_dir / ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print("waiting for another opsdk build in this workspace...", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _regenerate(root: Path) -> tuple[tuple[OpKernels, ...], tuple[str, ...]]:
    """Run generation unless nothing it reads or wrote changed since the last build.

    Returns the workspace's ops and the generated files that were (re)written.
    """
    build_dir = root / "build"
    before = inputs_stamp(root)
    state = read_state(build_dir)
    if state and state.inputs == before and state.outputs == outputs_stamp(root):
        return state.ops, ()
    from ..registry import load_registry
    from .generate import generate_workspace

    generated = generate_workspace(root)
    found = ops_of(load_registry(root).ops_in_workspace(root))
    # The inputs' stamp is the one taken before generating: an edit made meanwhile shows next time.
    write_state(build_dir, GenerateState(before, outputs_stamp(root), found))
    return found, tuple(str(p) for p in generated.changed)


def _select_ops(root: Path, found: tuple[OpKernels, ...],
                ops: Optional[Sequence[str]]) -> list[OpKernels]:
    """The workspace's own ops (not builtins of another workspace), or the named ones."""
    own = {op.name: op for op in found}
    if not ops:
        return list(found)
    for name in ops:
        if name not in own:
            close = difflib.get_close_matches(name, list(own), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise OpsdkError(f"no op named '{name}' in workspace {root}{hint}")
    return [own[n] for n in dict.fromkeys(ops)]


def _make_units(root: Path, specs: list[OpKernels], cuda: str) -> tuple[list[_Unit], list[str]]:
    """One unit per op and compiled device; notes say why a device was skipped."""
    wanted = {"cpu": [s for s in specs if s.kernel("cpu")],
              "cuda": [s for s in specs if s.kernel("cuda")]}
    notes: list[str] = []
    toolchains = {"cpu": _cpu_toolchain() if wanted["cpu"] else None}
    toolchains["cuda"], cuda_note = _cuda_toolchain(cuda) if wanted["cuda"] else (None, None)
    if cuda_note:
        notes.append(cuda_note)
    units = []
    for device in ("cpu", "cuda"):
        toolchain = toolchains[device]
        if toolchain is None:
            continue
        flags = flag_template(device, root)
        for spec in wanted[device]:
            units.append(_Unit(spec.name, device, root, _BINDINGS[device].format(op=spec.name),
                               spec.kernel(device), toolchain, flags))
    return units, notes


def _cpu_toolchain() -> Toolchain:
    toolchain = find_toolchain("cpu")
    if toolchain is None:
        raise OpsdkError("g++ not found on PATH: install g++ (C++17) to build cpu kernels, "
                         "or set OPSDK_CXX to your compiler")
    return toolchain


def _cuda_toolchain(mode: str) -> tuple[Optional[Toolchain], Optional[str]]:
    """nvcc when the mode asks for it: `auto` also needs a usable GPU, `on` only nvcc."""
    if mode == "off":
        return None, None
    toolchain = find_toolchain("cuda")
    if mode == "on":
        if toolchain is None:
            raise OpsdkError("--cuda=on but nvcc is not on PATH: install the CUDA toolkit, "
                             "or build with --cuda=auto")
        return toolchain, None
    if toolchain is None:
        return None, "cuda kernels skipped: nvcc not found (install the CUDA toolkit to build them)"
    if not gpu_available():
        return None, "cuda kernels skipped: no GPU (use --cuda=on to compile anyway)"
    return toolchain, None


def gpu_available() -> bool:
    """Whether CuPy imports and sees at least one GPU (only then can a cuda kernel run here)."""
    import importlib.util

    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # any CUDA driver/runtime failure means: no usable GPU
        return False


def _read_manifest(out_dir: Path) -> Optional[dict]:
    """The last successful build of a unit, or None when absent or unreadable (then: rebuild)."""
    try:
        data = json.loads((out_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not {"key", "module", "file", "sources"} <= data.keys():
        return None
    return data


def _digests(unit: _Unit, files) -> dict[str, str]:
    return {f: file_digest(unit.root / f) for f in sorted(set(files))}


def _plan_unit(unit: _Unit, environment: str) -> tuple[Optional[_Plan], Optional[UnitResult]]:
    """(plan, None) when the unit must compile; (None, up-to-date result) otherwise."""
    manifest = _read_manifest(unit.out_dir)
    previous_deps = manifest["sources"] if manifest else []
    digests = _digests(unit, [unit.source, unit.kernel, *previous_deps])
    key = build_key(digests, unit.flags, unit.toolchain, environment)
    if manifest and manifest["key"] == key and (unit.out_dir / manifest["file"]).is_file():
        _clean_unit_dir(unit, keep=manifest["file"])
        return None, UnitResult(unit.op, unit.device, "up to date",
                                artefact=unit.out_dir / manifest["file"])
    return _Plan(unit, key, tuple(digests.items())), None


def _compile_all(plans: list[_Plan], environment: str, jobs: Optional[int],
                 progress: bool) -> list[UnitResult]:
    """Compile the stale units on a thread pool (each thread waits on one compiler process)."""
    if not plans:
        return []
    workers = max(1, min(jobs or os.cpu_count() or 1, len(plans)))
    display = make_display(len(plans), progress)
    display.start()
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(_compile_unit, plan, environment, display) for plan in plans]
            return [future.result() for future in futures]
    finally:
        display.stop()


def _compile_unit(plan: _Plan, environment: str, display: Display) -> UnitResult:
    """Compile one unit to a temp name, rename it into place, then replace its manifest."""
    unit = plan.unit
    unit.out_dir.mkdir(parents=True, exist_ok=True)
    display.begin(unit.op, unit.device)
    _clean_unit_dir(unit, keep=None, artefacts=False)
    module = f"_opsdk_{unit.op}_{plan.key[:12]}"
    suffix = extension_suffix()
    temp = f"{_TEMP_PREFIX}{module}-{os.getpid()}"
    temp_out, temp_dep = unit.out_dir / f"{temp}{suffix}", unit.out_dir / f"{temp}.d"
    command = compile_command(unit.toolchain, unit.flags, unit.source, str(temp_out), module,
                              str(temp_dep))
    outcome = run_compiler(command, unit.root)
    missing = undefined_kernel_symbols(temp_out, f"opsdk_op_{unit.op}") if outcome.ok else ()
    if not outcome.ok or missing:
        for path in (temp_out, temp_dep):
            path.unlink(missing_ok=True)
        result = _failure(unit, outcome, missing)
    else:
        final = unit.out_dir / f"{module}{suffix}"
        os.replace(temp_out, final)
        deps = read_depfile(temp_dep, unit.root)
        os.replace(temp_dep, unit.out_dir / "deps.d")
        _write_manifest(plan, module, final.name, deps, environment)
        (unit.out_dir / "last_error.log").unlink(missing_ok=True)
        _clean_unit_dir(unit, keep=final.name)
        result = UnitResult(unit.op, unit.device, "compiled", outcome.seconds, final)
    display.end(result)
    return result


def _failure(unit: _Unit, outcome, missing: tuple[str, ...]) -> UnitResult:
    """Keep the full log next to the unit; return only the author-relevant lines."""
    log = unit.out_dir / "last_error.log"
    undefined = "".join(f"\nundefined in the artefact: {sym}" for sym in missing)
    log.write_text("$ " + " ".join(outcome.command) + "\n\n" + outcome.output + undefined)
    rel_log = log.relative_to(unit.root).as_posix()
    if missing:
        message = (summarize_missing_kernel(missing, unit.root, unit.op, unit.device, unit.kernel)
                   + f"\n(full compiler output: {rel_log})")
    else:
        message = summarize_failure(outcome.output, unit.root, unit.op, unit.device, rel_log)
    return UnitResult(unit.op, unit.device, "failed", outcome.seconds, None, message)


def _write_manifest(plan: _Plan, module: str, file: str, deps: tuple[str, ...],
                    environment: str) -> None:
    """Key the artefact by what it was compiled from; headers first seen now are hashed now."""
    unit = plan.unit
    known = dict(plan.digests)
    files = sorted({unit.source, unit.kernel, *deps})
    digests = {f: known.get(f) or file_digest(unit.root / f) for f in files}
    key = build_key(digests, unit.flags, unit.toolchain, environment)
    # Per-file digests let the loader tell an edit from a mere touch of a source.
    manifest = {"key": key, "module": module, "file": file, "sources": list(deps),
                "op": unit.op, "device": unit.device, "kernel": unit.kernel,
                "digests": {f: d for f, d in digests.items() if not Path(f).is_absolute()}}
    temp = unit.out_dir / f"{_TEMP_PREFIX}manifest-{os.getpid()}.json"
    temp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(temp, unit.out_dir / "manifest.json")


def _clean_unit_dir(unit: _Unit, keep: Optional[str], artefacts: bool = True) -> None:
    """Remove temp files left by a killed build and artefacts no manifest points to."""
    if not unit.out_dir.is_dir():
        return
    prefix = f"_opsdk_{unit.op}_"
    for path in unit.out_dir.iterdir():
        stale_temp = path.name.startswith(_TEMP_PREFIX)
        old_artefact = artefacts and path.name.startswith(prefix) and path.name != keep
        if (stale_temp or old_artefact) and path.is_file():
            path.unlink(missing_ok=True)

