"""`opsdk build`: regenerate, then compile every stale kernel of a workspace, in parallel.

Each (op, device) pair is one unit with its own folder `build/<device>/<op>/` (unit.py):
on the CPU two translation units, the kernel and the pybind11 glue, compiled in parallel into
objects cached by content key, then linked. A unit is up to date when every object's key (its
sources, the headers its depfile listed, flags, compiler, environment: compiler.build_key) and
the link key match its `manifest.json` and the artefact's bytes hash to the sha256 recorded
there (a truncated or patched extension is rebuilt, never reported up to date). Objects and
artefacts are written under temp names and renamed; the manifest is replaced last, so a killed
build leaves at worst unreferenced files, which the next build removes.
"""

from __future__ import annotations

import difflib
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from opsdk.registry.errors import OpsdkError
from opsdk.build.confine import check_inside, owned
from opsdk.codegen.scaffold import untouched_stub
from opsdk.build.compiler import environment_fingerprint, link_flags, object_flags
from opsdk.build.toolchain import (CUDA_ARCHS_ENV, CudaTargets, Toolchain, cuda_targets,
                                   dev_targets, find_toolchain, supported_cuda_archs, why_missing)
from opsdk.build.state import (GenerateState, OpKernels, inputs_stamp, ops_of, outputs_stamp,
                          read_state, write_state)
from opsdk.build.progress import Display, UnitResult, make_display
from opsdk.build.jax_ffi import build_handlers
from opsdk.build.unit import (Digests, Source, Unit, UnitPlan, compile_object, finish_unit,
                         plan_unit)
from opsdk.build.diagnostics import BuildError

CUDA_MODES = ("auto", "on", "off")
# Per device: (role, generated source) of each translation unit, slowest first.
_SOURCES = {"cpu": (("glue", "generated/cpp/{op}_binding.cc"),
                    ("kernel", "generated/cpp/{op}_kernel.cc")),
            "cuda": (("glue", "generated/cuda/{op}_cuda_binding.cu"),
                     ("kernel", "generated/cuda/{op}_cuda_kernel.cu"))}


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


def build_workspace(root: Path, ops: Optional[Sequence[str]] = None, jobs: Optional[int] = None,
                    cuda: str = "auto", progress: bool = True, all_archs: bool = False,
                    on_declaration_errors: Optional[Callable[[Exception], None]] = None
                    ) -> BuildReport:
    """Regenerate `generated/` and compile every stale cpu (and cuda) kernel of the workspace.

    CUDA kernels are compiled for the GPUs of this machine (PTX of one arch where there is none;
    toolchain.dev_targets), or with `all_archs` for every default arch (the fat binary a wheel
    ships). Raises BuildError (after building everything else) when a kernel fails to compile, and the
    OpDefErrors of broken declaration files after building the good ops. Those errors are known
    before anything compiles: `on_declaration_errors` is handed them then (the CLI prints them
    at once, so the author sees them in a second, not after the good ops' compiles).

    >>> report = build_workspace(Path("."))          # doctest: +SKIP
    >>> [r.op for r in report.compiled]              # doctest: +SKIP
    ['pairwise_manhattan']
    """
    if cuda not in CUDA_MODES:
        raise OpsdkError(f"--cuda must be one of {', '.join(CUDA_MODES)}, not '{cuda}'")
    start = time.perf_counter()
    root = Path(root).resolve()
    top = owned(root / "build")
    with _workspace_lock(top):
        found, generated, broken = _regenerate(root)
        if broken is not None and on_declaration_errors is not None:
            on_declaration_errors(broken)
        selected = _select_ops(root, found, ops)
        units, notes = _make_units(root, selected, cuda, all_archs)
        for unit in units:  # a link leading out of build/ stops the build before it writes
            check_inside(top, unit.obj_dir)
        environment = environment_fingerprint()
        digests = Digests(root)
        results: list[UnitResult] = []
        stale: list[UnitPlan] = []
        for unit in units:
            plan, done = plan_unit(unit, environment, digests)
            if plan is None:
                results.append(done)
            else:
                stale.append(plan)
                if plan.note:
                    notes.append(plan.note)
        results += _compile_all(stale, environment, digests, jobs, progress)
        order = {(u.op, u.device): i for i, u in enumerate(units)}
        results.sort(key=lambda r: order[(r.op, r.device)])
        cpu = next((u.toolchain for u in units if u.device == "cpu"), None)
        if cpu is not None:  # JAX FFI handlers of the built cpu kernels (opsdk/build/jax_ffi.py)
            notes += build_handlers(root, results, cpu, environment)[1]
        if cuda == "auto" and not any(u.device == "cuda" for u in units):  # no nvcc
            checked, checked_notes = _nvrtc_check(root, [s.name for s in selected if s.kernel("cuda")])
            results += checked
            notes += checked_notes
    report = BuildReport(tuple(results), tuple(notes), generated, time.perf_counter() - start)
    if report.failed:
        raise BuildError("\n\n".join(r.message for r in report.failed), report)
    if broken is not None:  # the good ops are built; the broken declarations still fail the build
        raise broken
    return report


@contextmanager
def _workspace_lock(build_dir: Path) -> Iterator[None]:
    """Serialise builds of one workspace; the OS drops the lock if its holder is killed."""
    from filelock import FileLock, Timeout

    path = build_dir / ".lock"
    if path.is_symlink():  # opening it would truncate what it points to: drop the link
        path.unlink()
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print("waiting for another opsdk build in this workspace...", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _regenerate(root: Path) -> tuple[tuple[OpKernels, ...], tuple[str, ...], Optional[Exception]]:
    """Run generation unless nothing it reads or wrote changed since the last build.

    Returns the workspace's good ops, the generated files that were (re)written, and the
    OpDefErrors of its broken declaration files (None when there are none): those do not stop
    the good ops from being built, and the build reports them at its end.
    """
    from opsdk.registry import OpDefErrors, load_registry
    from opsdk.codegen.generate import generate_workspace

    build_dir = root / "build"
    before = inputs_stamp(root)
    state = read_state(build_dir)
    if state and state.inputs == before and state.outputs == outputs_stamp(root):
        return state.ops, (), None  # only a build without broken files records its state
    registry = load_registry(root, strict=False)
    broken = OpDefErrors(list(registry.errors)) if registry.errors else None
    try:
        generated = generate_workspace(root)
        changed = tuple(str(p) for p in generated.changed)
    except OpDefErrors:  # the good ops were generated; `broken` carries the errors
        changed = ()
    found = ops_of(registry.ops_in_workspace(root))
    if broken is None:  # with broken files, every build regenerates and reports them again
        # The inputs' stamp is the one taken before generating: an edit made meanwhile shows
        # next time.
        write_state(build_dir, GenerateState(before, outputs_stamp(root), found))
    return found, changed, broken


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


def _make_units(root: Path, specs: list[OpKernels], cuda: str,
                all_archs: bool) -> tuple[list[Unit], list[str]]:
    """One unit per op and compiled device; notes say why a device was skipped."""
    stubs = [s for s in specs if s.kernel("cuda") and untouched_stub(root, s.kernel("cuda"))]
    wanted = {"cpu": [s for s in specs if s.kernel("cpu")],
              "cuda": [s for s in specs if s.kernel("cuda") and s not in stubs]}
    notes = [f"op '{s.name}': {s.kernel('cuda')} is the untouched scaffold stub; not compiled "
             "(write the kernel, then build)" for s in stubs if cuda != "off"]
    toolchains = {"cpu": _cpu_toolchain() if wanted["cpu"] else None}
    # --cuda=on asks for nvcc wherever cuda kernels are declared, stubs included.
    needs_nvcc = wanted["cuda"] or (stubs and cuda == "on")
    toolchains["cuda"], cuda_note = _cuda_toolchain(cuda) if needs_nvcc else (None, None)
    if cuda_note:
        notes.append(cuda_note)
    targets = _cuda_targets(toolchains["cuda"], all_archs)
    if targets is not None and wanted["cuda"]:
        notes.append(_targets_note(targets, all_archs))
    units = []
    for device in ("cpu", "cuda"):
        toolchain = toolchains[device]
        if toolchain is None:
            continue
        for spec in wanted[device]:
            units.append(_make_unit(root, spec, device, toolchain, targets))
    return units, notes


def _make_unit(root: Path, spec: OpKernels, device: str, toolchain: Toolchain,
               targets: Optional[CudaTargets]) -> Unit:
    header = f"generated/cpp/{spec.name}_op.h"
    kernel = spec.kernel(device)
    sources = []
    for role, template in _SOURCES[device]:
        path = template.format(op=spec.name)
        # What feeds a unit before its depfile says more: the glue never sees the kernel.
        inputs = (path, header) if role == "glue" else (path, header, kernel)
        flags = object_flags(device, role, root, spec.name, targets)
        sources.append(Source(role, path, flags, inputs))
    return Unit(spec.name, device, root, kernel, toolchain, tuple(sources), link_flags(device))


def _nvrtc_check(root: Path, names: list[str]) -> tuple[list[UnitResult], list[str]]:
    """Where nvcc is absent: each cuda kernel with declared launches compiled through NVRTC, every
    dtype for the default archs (OPSDK_CUDA_ARCHS), so that its errors show now, at the author's
    lines, and the first call on a GPU of those archs finds it in the cache."""
    if not names:
        return [], []
    from opsdk.build import nvrtc
    from opsdk.registry import OpError, load_registry
    from opsdk.registry.launch import launch_problem

    registry = load_registry(root, strict=False)
    specs = [spec for spec in map(registry.get, names) if launch_problem(spec) is None]
    if not specs:
        return [], []
    problem = nvrtc.nvrtc_problem()
    if problem is not None:
        return [], [f"cuda kernels with declared launches not checked through NVRTC: {problem}"]
    archs = nvrtc.build_archs()
    results = []
    for spec in specs:
        start, fresh = time.perf_counter(), False
        try:
            for types in nvrtc.dtype_bindings(spec):
                for arch in archs:
                    fresh |= nvrtc.compile_program(spec, types, arch).fresh
        except OpError as exc:
            results.append(UnitResult(spec.name, "cuda", "failed", time.perf_counter() - start,
                                      message=str(exc)))
            continue
        results.append(UnitResult(spec.name, "cuda", "compiled" if fresh else "up to date",
                                  time.perf_counter() - start, parts=("nvrtc",)))
    arch_text = ", ".join(f"sm_{a}" for a in archs) or "no arch"
    return results, [f"cuda kernels with declared launches compiled through NVRTC for {arch_text} "
                     f"(build/cuda-nvrtc/; other GPUs compile at first use)"]


def _cpu_toolchain() -> Toolchain:
    toolchain = find_toolchain("cpu")
    if toolchain is None:
        raise OpsdkError(f"cannot build cpu kernels: {why_missing('cpu')}; install g++ (C++17), "
                         "or set OPSDK_CXX to your compiler (a launcher may precede it: "
                         "'ccache g++')")
    return toolchain


def _cuda_toolchain(mode: str) -> tuple[Optional[Toolchain], Optional[str]]:
    """nvcc whenever it is on the machine (`auto`, `on`), GPU or not: CI compiles every CUDA
    kernel without a GPU. `on` makes a missing nvcc an error; `off` never compiles CUDA."""
    if mode == "off":
        return None, None
    toolchain = find_toolchain("cuda")
    if toolchain is not None:
        return toolchain, None
    if mode == "on":
        raise OpsdkError(f"--cuda=on but nvcc is not usable: {why_missing('cuda')}; install the "
                         "CUDA toolkit, or build with --cuda=auto")
    return None, ("cuda kernels skipped: nvcc not found (install the CUDA toolkit to build them); "
                  "those that declare `launch:` compile through NVRTC at first use on a GPU "
                  "instead (pip install 'opsdk[gpu]')")


def _targets_note(targets: CudaTargets, all_archs: bool) -> str:
    if all_archs:
        why = "every default arch"
    elif os.environ.get(CUDA_ARCHS_ENV, "").strip():
        why = CUDA_ARCHS_ENV
    elif targets.archs:
        why = "the GPUs of this machine; `opsdk build --all-archs` or --wheel builds every arch"
    else:
        why = ("no GPU here: one PTX target checks the code; `opsdk build --all-archs` or --wheel "
               "builds every arch")
    return f"cuda kernels compiled for {targets.describe()} ({why})"


def _cuda_targets(toolchain: Optional[Toolchain], all_archs: bool) -> Optional[CudaTargets]:
    """The archs of every CUDA unit: OPSDK_CUDA_ARCHS, else this machine's GPUs (development),
    or with `all_archs` the defaults this nvcc supports."""
    if toolchain is None:
        return None
    supported = supported_cuda_archs(toolchain.path)
    return cuda_targets(supported) if all_archs else dev_targets(supported)


def _compile_all(plans: list[UnitPlan], environment: str, digests: Digests,
                 jobs: Optional[int], progress: bool) -> list[UnitResult]:
    """Compile every stale object on one pool, linking each unit as soon as its objects are done.

    The pool holds `jobs` compilers (default: one per core) across all units, slowest (glue)
    objects first, so one op's kernel and glue compile side by side.
    """
    if not plans:
        return []
    total = sum(len(p.jobs) for p in plans)
    workers = max(1, min(jobs or os.cpu_count() or 1, max(total, 1)))
    display = make_display(len(plans), progress)
    display.start()
    results: list[UnitResult] = []
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            owner, done = {}, {i: [] for i in range(len(plans))}
            order = sorted(((j.source.role != "glue", i, j) for i, p in enumerate(plans)
                            for j in p.jobs), key=lambda t: t[:2])
            for _, i, job in order:
                future = pool.submit(compile_object, plans[i].unit, job, digests, environment)
                owner[future] = i
            for i, plan in enumerate(plans):
                display.begin(plan.unit.op, plan.unit.device)
                if not plan.jobs:  # every object cached: only a relink
                    results.append(_finish(plan, [], environment, digests, display))
            for future in as_completed(owner):
                i = owner[future]
                done[i].append(future.result())
                if len(done[i]) == len(plans[i].jobs):
                    results.append(_finish(plans[i], done[i], environment, digests, display))
    finally:
        display.stop()
    return results


def _finish(plan: UnitPlan, done: list, environment: str, digests: Digests,
            display: Display) -> UnitResult:
    result = finish_unit(plan, done, environment, digests)
    display.end(result)
    return result
