"""Lowering a compiled program to what the executor runs: steps over one flat list of slots.

Steps (steps.py) are closures over slots, so the executor's per-node cost is one Python call plus
the kernel's. The plan also says when each value dies: `frees[i]` lists the slots whose last
reader is step i (in the serial order), and `readers` counts each slot's reading steps for the
concurrent path, so a value lives only until its last reader has run (fetched values and
constants excepted) and a step's peak memory is the graph's widest point, not every
intermediate. Values statically known to be small (a few KB) are left alone: releasing them
saves nothing and would cost a chain of scalar steps a third of its time. The serial order is
`serial_runs`: the steps' run functions with a releasing function after each step that frees
something, so the serial loop stays one call per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from opsdk.runtime.compile.fold import scalar_slots
from opsdk.runtime.compile.program import Program
from opsdk.runtime.compile.steps import Step, make_step
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor


@dataclass(frozen=True)
class Plan:
    """What a run executes for one (fetches, feeds) signature; built once, then cached."""

    steps: tuple[Step, ...]
    runs: tuple  # each step's run function, in order (what the executor calls)
    template: tuple  # initial slot values: constants and folded results, else None
    feed_slots: tuple[tuple[Tensor, int], ...]
    fetch_slots: tuple[Optional[int], ...]  # per fetched element; None for an Operation
    pending: tuple[int, ...]  # per step: how many steps must finish before it
    successors: tuple[tuple[int, ...], ...]  # per step: the steps waiting on it
    roots: tuple[int, ...]
    serial: bool  # no two steps can ever be ready together: run in order, no hand-offs
    inline: bool  # run in order on the caller's thread: serial, or too little work to share
    frees: tuple[tuple[int, ...], ...]  # per step: slots to release after it (serial order)
    serial_runs: tuple  # the runs in serial order, releasing functions in between
    reads: tuple[tuple[int, ...], ...]  # per step: the slots it reads (concurrent release)
    readers: tuple[int, ...]  # per slot: how many steps read it (0: never released)
    folded: tuple[str, ...]  # names of nodes folded into constants (for tests and `explain`)
    merged: tuple[str, ...]  # names of nodes merged away by CSE
    program: Any = None  # the compiled program (for `explain`)


def lower(program: Program) -> Plan:
    """The plan of a compiled program."""
    num = program.numbering
    fetched_slots = {num.slot_of[program.value_of(e)] for e in program.fetches
                     if isinstance(e, Tensor)}
    scalars = scalar_slots(program, fetched_slots)
    template = [value[()] if i in scalars and value is not None else value
                for i, value in enumerate(num.template)]
    reads = tuple(tuple(sorted({num.slot_of[t] for t in program.inputs_of(op)}))
                  for op in num.kept)
    used = {s for slots in reads for s in slots} | fetched_slots
    fresh = _fresh_slots(program, num.kept, num.out_slots)
    steps = tuple(make_step(op, program.kernel.get(op), program.device[op],
                            program.inputs_of(op), num.slot_of, num.out_slots[op], scalars,
                            program.options, tuple(s in used for s in num.out_slots[op]), fresh)
                  for op in num.kept)
    index = {op: i for i, op in enumerate(num.kept)}
    fed = program.feed_set
    producers = [_producers(op, program.inputs_of(op), index, num.alias, fed) for op in num.kept]
    successors: list[list[int]] = [[] for _ in steps]
    for i, deps in enumerate(producers):
        for d in deps:
            successors[d].append(i)
    pending = tuple(len(d) for d in producers)
    keep = (fetched_slots | {i for i, const in enumerate(num.is_const) if const}
            | _small_slots(num.slot_of))
    frees, readers = _lifetimes(reads, [num.out_slots[op] for op in num.kept], keep,
                                len(template))
    runs = tuple(s.run for s in steps)
    serial = _is_serial(pending, successors)
    return Plan(
        steps=steps, runs=runs, template=tuple(template),
        feed_slots=tuple((t, num.slot_of[t]) for t in program.feeds),
        fetch_slots=tuple(num.slot_of[program.value_of(e)] if isinstance(e, Tensor) else None
                          for e in program.fetches),
        pending=pending, successors=tuple(tuple(s) for s in successors),
        roots=tuple(i for i, p in enumerate(pending) if p == 0),
        serial=serial, inline=serial or _cheap(program, num.kept), frees=frees,
        serial_runs=_with_releases(runs, frees), reads=reads, readers=readers,
        folded=tuple(op.name for op in num.folded if op.type != "const"),
        merged=tuple(op.name for op in num.merged), program=program)


def _fresh_slots(program: Program, kept: Sequence[Operation], out_slots: dict) -> frozenset:
    """Slots written by compiled (cpu, cuda) kernels: they allocate every output anew, so no
    feed, constant or variable value shares its memory."""
    fresh = set()
    for op in kept:
        choice = program.kernel.get(op)
        if choice is not None and choice.kind != "python" and op.spec is not None:
            fresh.update(out_slots[op])
    return frozenset(fresh)


def _lifetimes(reads: Sequence[tuple[int, ...]], writes: Sequence[tuple[int, ...]],
               keep: set[int], n_slots: int) -> tuple[tuple, tuple]:
    """Per step the slots that die after it in the serial order (last read there, or written
    and never read), and per slot its count of reading steps (0 for slots never released)."""
    last: dict[int, int] = {}
    count = [0] * n_slots
    for i, slots in enumerate(reads):
        for s in slots:
            last[s] = i
            count[s] += 1
    frees: list[list[int]] = [[] for _ in reads]
    for s, i in last.items():
        if s not in keep:
            frees[i].append(s)
    for i, slots in enumerate(writes):
        frees[i].extend(s for s in slots if s not in keep and s not in last)
    readers = tuple(0 if s in keep else c for s, c in enumerate(count))
    return tuple(tuple(f) for f in frees), readers


_SMALL_BYTES = 4096
# Below this many elements read and written by a whole step, handing nodes to other threads
# costs more than running them in order (measured in CPU time on 2 cores, single-threaded BLAS:
# the TF1 sample program's step, 10 x 784, 0.24-0.26 ms on the pool, 0.13-0.17 ms in order).
INLINE_ELEMENTS = 1 << 18


def _cheap(program: Program, kept: Sequence[Operation]) -> bool:
    """Whether the step's work is statically known and small: every node a builtin op or a
    runtime primitive (other workspaces' ops may do anything) over static shapes adding up to
    fewer than INLINE_ELEMENTS elements. Control flow is never cheap (its loops are unbounded)."""
    from opsdk.registry import BUILTIN_ROOT
    total = 0
    for op in kept:
        if op.spec is not None and op.spec.workspace != BUILTIN_ROOT:
            return False
        if op.type in ("cond", "while_loop"):
            return False
        for t in (*program.inputs_of(op), *op.outputs):
            if t.shape is None or None in t.shape:
                return False
            total += _size(t.shape)
        if total >= INLINE_ELEMENTS:
            return False
    return True


def _small_slots(slot_of: dict) -> set[int]:
    """Slots whose every tensor has a static shape of at most _SMALL_BYTES (at 8 bytes an item)."""
    small: dict[int, bool] = {}
    for t, slot in slot_of.items():
        fits = t.shape is not None and None not in t.shape and 8 * _size(t.shape) <= _SMALL_BYTES
        small[slot] = small.get(slot, True) and fits
    return {slot for slot, ok in small.items() if ok}


def _size(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _with_releases(runs: tuple, frees: tuple) -> tuple:
    """The runs with, after each step that frees slots, a function that releases them."""
    out = []
    for run, free in zip(runs, frees):
        out.append(run)
        if free:
            out.append(_releaser(free))
    return tuple(out)


def _releaser(slots: tuple[int, ...]):
    if len(slots) == 1:
        (slot,) = slots

        def release_one(values: list, ctx: Any) -> None:
            values[slot] = None
        return release_one

    def release(values: list, ctx: Any) -> None:
        for s in slots:
            values[s] = None
    return release


def _producers(op: Operation, inputs: Sequence[Tensor], index: dict, alias: dict,
               fed: frozenset) -> set[int]:
    deps = {t.op for t in inputs if t not in fed} | set(op.control_inputs)
    resolved = (alias.get(d, d) for d in deps)
    return {index[d] for d in resolved if d in index}


def _is_serial(pending: Sequence[int], successors: Sequence[Sequence[int]]) -> bool:
    """Whether at most one step is ever ready (the plan is a chain): simulate the ready queue."""
    count = list(pending)
    ready = [i for i, p in enumerate(count) if p == 0]
    while ready:
        if len(ready) > 1:
            return False
        i = ready.pop()
        for j in successors[i]:
            count[j] -= 1
            if count[j] == 0:
                ready.append(j)
    return True
