"""Lowering a compiled program to what the executor runs: steps over one flat list of slots.

`lower` numbers the value slots of each partition (feeds, constants, node outputs) and makes each
node a Step (steps.py): a closure over slots, so the executor's per-node cost is one Python call
plus the kernel's. Slots are numbered here and nowhere earlier, so the passes before may add and
remove nodes. `assemble` then joins the lowered partitions into one Plan: in one process the
partitions of a step run on the one executor, each `_recv` after its `_send`; a task of a cluster
lowers its one partition the same way (`pipeline.plan_for_partition`).

The plan also says when each value dies: `frees[i]` lists the slots whose last reader is step i
(in the serial order), and `readers` counts each slot's reading steps for the concurrent path, so
a value lives only until its last reader has run (fetched values and constants excepted) and a
step's peak memory is the graph's widest point, not every intermediate. Values statically known
to be small (a few KB) are left alone: releasing them saves nothing and would cost a chain of
scalar steps a third of its time. The serial order is `serial_runs`: the steps' run functions with
a releasing function after each step that frees something, so the serial loop stays one call per
step; in it every `_recv` comes as late as its readers allow.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from opsdk.runtime.compile.fold import read_only
from opsdk.runtime.compile.partition import Partition
from opsdk.runtime.compile.program import PlanOptions, Program
from opsdk.runtime.compile.sendrecv import RECV, SEND, device_feeds
from opsdk.runtime.compile.memory import (SMALL_BYTES, Slots, fresh_slots, fused_takes,
                                          peak_bytes, plan_donations, plan_takes, pool_key,
                                          release_keys)
from opsdk.runtime.compile.steps import Step, make_step
from opsdk.runtime.devices import device_of
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.buffers import release
from opsdk.runtime.kernels.choice import KernelChoice, scalar_form


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
    rendezvous: bool = False  # some step sends or receives: a run needs a rendezvous
    donated: tuple[str, ...] = ()  # nodes that write into a dead input's buffer
    pooled: tuple[str, ...] = ()  # nodes that take their output buffers from the session's pool
    pool_keys: tuple = ()  # per slot: the pool key its value goes back under, or None
    peak_bytes: int = 0  # the most bytes of step values alive at once (static shapes; serial)
    peak_known: bool = True  # False when some value's size is known only at run time
    # fed slot -> the one device whose array may be fed there as it is: only `_send`s to that
    # device read the slot and it is not fetched (a CuPy array fed for GPU readers stays there)
    device_feeds: dict = field(default_factory=dict)
    # per fetched element: the name of the host device whose pooled step wrote it (its array
    # is lent to the caller, kernels/buffers.py: BufferPool.lend), else None; () when none is
    fetch_lends: tuple = ()

    def with_runs(self, runs: tuple) -> "Plan":
        """This plan with other run functions for its steps, one each, in order (a profiled run's
        timed ones, exec/profile.py); the releases between them are the plan's own."""
        if len(runs) != len(self.runs):
            raise ValueError(f"a plan of {len(self.runs)} steps given {len(runs)} run functions")
        return dataclasses.replace(self, runs=tuple(runs),
                                   serial_runs=_with_releases(tuple(runs), self.frees, self.pool_keys))


@dataclass
class Lowered:
    """One partition lowered: the nodes that run as steps, what each reads and writes and
    waits for, and the slots of the caller's feeds and fetches."""

    part: Partition
    ops: list[Operation] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    reads: list[tuple[int, ...]] = field(default_factory=list)
    writes: list[tuple[int, ...]] = field(default_factory=list)
    deps: list[set[Operation]] = field(default_factory=list)
    fetched: set[int] = field(default_factory=set)
    donated: set[str] = field(default_factory=set)  # nodes writing into a dead input's buffer
    takes: dict = field(default_factory=dict)  # node -> pool keys of the outputs it takes
    fused_takes: dict = field(default_factory=dict)  # the fused nodes among them


def lower(program: Program) -> Plan:
    """The plan of a compiled program: each partition lowered, then joined."""
    slots = Slots()
    parts = [lower_partition(part, program.kernel, program.options, slots, program.handed)
             for part in program.partitions.values()]
    return assemble(parts, slots, program)


def lower_partition(part: Partition, kernels: dict[Operation, KernelChoice],
                    options: PlanOptions, slots: Slots,
                    handed: frozenset = frozenset()) -> Lowered:
    """Number the slots of one partition and make a step of each node that runs; `handed`:
    the feeds whose values the caller hands over (Program.handed)."""
    low = Lowered(part)
    out_slots = _number(part, slots)
    low.ops = [op for op in part.ops if op in out_slots]
    low.fetched = {slots.slot_of[t] for t in part.fetches.values()}
    fed = frozenset(part.feeds)
    reads = [tuple(sorted({slots.slot_of[t] for t in part.inputs_of(op)})) for op in low.ops]
    used = {s for r in reads for s in r} | low.fetched
    scalars = _scalar_slots(part, low.ops, kernels, slots, out_slots, low.fetched)
    fresh = fresh_slots(low.ops, kernels, out_slots)
    donations = plan_donations(part, low.ops, kernels, slots, reads, low.fetched | scalars,
                               handed)
    low.donated = {op.name for op in donations}
    takes = plan_takes(part, low.ops, kernels, donations)
    low.takes = {op: keys for op, (keys, _) in takes.items()}
    low.fused_takes = fused_takes(part, low.ops)
    low.takes.update(low.fused_takes)
    for op, r in zip(low.ops, reads):
        outs = out_slots[op]
        low.steps.append(make_step(op, kernels.get(op), part.device, part.inputs_of(op),
                                   slots.slot_of, outs, scalars, options,
                                   tuple(s in used for s in outs), fresh, donations.get(op),
                                   takes.get(op)))
        low.reads.append(r)
        low.writes.append(outs)
        low.deps.append({t.op for t in part.inputs_of(op) if t not in fed}
                        | set(part.controls_of(op)))
    if scalars:
        for s in scalars:
            value = slots.template[s]
            if value is not None:
                slots.template[s] = value[()]
    return low


def _number(part: Partition, slots: Slots) -> dict[Operation, tuple[int, ...]]:
    """Slots for the partition's feeds, constants and node outputs; the nodes that run get
    their output slots (a fed output keeps its feed's slot; the node writes a scratch slot)."""
    fed = set(part.feeds)
    for t in part.feeds:
        slots.slot_of[t] = slots.new()
    out_slots: dict[Operation, tuple[int, ...]] = {}
    for op in part.ops:
        if op.type == "const":
            t = op.outputs[0]
            if t not in fed:
                value = op.attrs["value"]
                # read-only here too: a constant copied from another device (a value folded on a
                # GPU, fetched on the host) arrives as a fresh, writeable array
                held = part.device.copy_from(value, device_of(value))
                slots.slot_of[t] = slots.new(read_only(held), True)
            continue
        outs = []
        for t in op.outputs:
            outs.append(slots.new())
            if t not in fed:
                slots.slot_of[t] = outs[-1]
        out_slots[op] = tuple(outs)
    return out_slots


def _fetch_lends(fetches: Sequence, fetch_slot: dict, lendable: dict) -> tuple:
    """Plan.fetch_lends: () where no fetched value is lendable, so that a run fetching only
    small values pays nothing for lending."""
    lends = tuple(lendable.get(fetch_slot[e]) if isinstance(e, Tensor) else None for e in fetches)
    return lends if any(name is not None for name in lends) else ()


def assemble(parts: Sequence[Lowered], slots: Slots, program: Program) -> Plan:
    """Join lowered partitions into one plan, each `_recv` waiting for its `_send`."""
    ops = [op for low in parts for op in low.ops]
    steps = [s for low in parts for s in low.steps]
    reads = [r for low in parts for r in low.reads]
    writes = [w for low in parts for w in low.writes]
    producers = _producers(parts, ops)
    order = _serial_order(ops, producers)
    ops, steps = [ops[i] for i in order], [steps[i] for i in order]
    reads, writes = [reads[i] for i in order], [writes[i] for i in order]
    position = {old: new for new, old in enumerate(order)}
    producers = [{position[d] for d in producers[i]} for i in order]
    successors: list[list[int]] = [[] for _ in steps]
    for i, deps in enumerate(producers):
        for d in deps:
            successors[d].append(i)
    pending = tuple(len(d) for d in producers)
    fetched = set().union(*(low.fetched for low in parts)) if parts else set()
    keep = (fetched | {i for i, const in enumerate(slots.is_const) if const}
            | _small_slots(slots.slot_of))
    frees, readers = _lifetimes(reads, writes, keep, len(slots.template))
    takes = {op: keys for low in parts for op, keys in low.takes.items()}
    device_of_op = {op: low.part.device for low in parts for op in low.ops}
    pooled = {op: keys for low in parts for op, keys in low.fused_takes.items()}
    pool_keys = release_keys(ops, writes, [device_of_op[op] for op in ops], keep,
                             {k for keys in takes.values() for k in keys}, len(slots.template),
                             pooled)
    runs = tuple(s.run for s in steps)
    serial = _is_serial(pending, successors)
    fetch_slot = {e: slots.slot_of[t] for low in parts for e, t in low.part.fetches.items()}
    # a fetched value a step of the plan writes into a buffer from the pool goes back there, as
    # does one written into a donated input's buffer where some step takes buffers of its key
    wanted = {k for keys in takes.values() for k in keys}
    donors = {name for low in parts for name in low.donated}
    lendable: dict[int, str] = {}
    for op, outs in zip(ops, writes):
        if op in takes:
            lendable.update((s, device_of_op[op].name) for s in outs)
        elif op.name in donors and pool_key(device_of_op[op], op.outputs[0]) in wanted:
            lendable[outs[0]] = device_of_op[op].name
    feed_slots = tuple((t, slots.slot_of[t]) for low in parts for t in low.part.feeds)
    return Plan(
        steps=tuple(steps), runs=runs, template=tuple(slots.template), feed_slots=feed_slots,
        device_feeds=device_feeds(ops, reads, feed_slots, fetched),
        fetch_slots=tuple(fetch_slot[e] if isinstance(e, Tensor) else None
                          for e in program.fetches),
        fetch_lends=_fetch_lends(program.fetches, fetch_slot, lendable),
        pending=pending, successors=tuple(tuple(s) for s in successors),
        roots=tuple(i for i, p in enumerate(pending) if p == 0),
        serial=serial, inline=serial or _cheap(parts), frees=frees,
        serial_runs=_with_releases(runs, frees, pool_keys), reads=tuple(reads), readers=readers,
        folded=tuple(op.name for op in program.folded),
        merged=tuple(op.name for op in program.merged), program=program,
        rendezvous=any(op.type in (SEND, RECV) for op in ops),
        donated=tuple(sorted(set().union(*(low.donated for low in parts)))) if parts else (),
        pooled=tuple(sorted(op.name for op in takes)), pool_keys=pool_keys,
        **peak_bytes(ops, writes, frees, slots, {op.name for low in parts for op in low.ops
                                             if op.name in low.donated}))


def _producers(parts: Sequence[Lowered], ops: list[Operation]) -> list[set[int]]:
    """Per step (in the joined order) the steps it waits for: its inputs' and control inputs'
    producers in its partition, and for a `_recv` the matching `_send` of the same plan."""
    index = {op: i for i, op in enumerate(ops)}
    sends = {_edge(op): index[op] for op in ops if op.type == SEND}
    out = []
    for low in parts:
        for op, deps in zip(low.ops, low.deps):
            mine = {index[d] for d in deps if d in index}
            if op.type == RECV and _edge(op) in sends:
                mine.add(sends[_edge(op)])
            out.append(mine)
    return out


def _edge(op: Operation) -> tuple:
    a = op.attrs
    return (a["tensor_name"], a["send_location"], a["recv_location"])


def _serial_order(ops: list[Operation], producers: list[set[int]]) -> list[int]:
    """A topological order of the steps: program order, each `_recv` as late as possible (a
    task that waits on another task first runs everything it can, its sends included)."""
    users: list[list[int]] = [[] for _ in ops]
    count = [len(p) for p in producers]
    for i, deps in enumerate(producers):
        for d in deps:
            users[d].append(i)
    rank = [(ops[i].type == RECV, i) for i in range(len(ops))]
    ready = [rank[i] for i, c in enumerate(count) if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in users[i]:
            count[j] -= 1
            if count[j] == 0:
                heapq.heappush(ready, rank[j])
    return order


def _scalar_slots(part: Partition, ops: Sequence[Operation], kernels: dict, slots: Slots,
                  out_slots: dict, fetched: set[int]) -> frozenset[int]:
    """Slots that may hold a NumPy scalar instead of a 0-d array: the output of a scalar step
    (`kernels.scalar_form`) or a 0-d float constant, read only by scalar steps (which accept
    both) and not fetched. A kernel, a primitive or the caller never sees such a value (a
    chain of scalar adds costs a tenth of a ufunc call on 0-d arrays per step)."""
    readers: dict[int, list[bool]] = {}
    candidates: list[int] = []
    for op in ops:
        scalar = scalar_form(op, kernels.get(op)) is not None
        for t in part.inputs_of(op):
            readers.setdefault(slots.slot_of[t], []).append(scalar)
        if scalar:
            candidates.append(out_slots[op][0])
    for op in part.ops:
        if op.type == "const" and op.outputs[0] in slots.slot_of:
            s = slots.slot_of[op.outputs[0]]
            if _float_scalar_array(slots.template[s]):
                candidates.append(s)
    return frozenset(s for s in candidates if s not in fetched and all(readers.get(s, ())))


def _float_scalar_array(value: Any) -> bool:
    return (isinstance(value, np.ndarray) and value.ndim == 0
            and value.dtype.kind == "f" and value.dtype.itemsize <= 8)


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


# Below this many elements read and written by a whole step, handing nodes to other threads
# costs more than running them in order (measured in CPU time on 2 cores, single-threaded BLAS:
# the TF1 sample program's step, 10 x 784, 0.24-0.26 ms on the pool, 0.13-0.17 ms in order).
INLINE_ELEMENTS = 1 << 18


def _cheap(parts: Sequence[Lowered]) -> bool:
    """Whether the step's work is statically known and small: every node a builtin op or a
    runtime primitive (other workspaces' ops may do anything) over static shapes adding up to
    fewer than INLINE_ELEMENTS elements. Control flow is never cheap (its loops are unbounded),
    nor is a step that receives from another task (its wait is unbounded)."""
    from opsdk.registry import BUILTIN_ROOT
    total = 0
    for low in parts:
        for op in low.ops:
            if op.spec is not None and op.spec.workspace != BUILTIN_ROOT:
                return False
            if op.type in ("cond", "while_loop"):
                return False
            for t in (*low.part.inputs_of(op), *op.outputs):
                if t.shape is None or None in t.shape:
                    return False
                total += _size(t.shape)
            if total >= INLINE_ELEMENTS:
                return False
    return True


def _small_slots(slot_of: dict) -> set[int]:
    """Slots whose every tensor has a static shape of at most SMALL_BYTES (at 8 bytes an item)."""
    small: dict[int, bool] = {}
    for t, slot in slot_of.items():
        fits = t.shape is not None and None not in t.shape and 8 * _size(t.shape) <= SMALL_BYTES
        small[slot] = small.get(slot, True) and fits
    return {slot for slot, ok in small.items() if ok}


def _size(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _with_releases(runs: tuple, frees: tuple, pool_keys: tuple) -> tuple:
    """The runs with, after each step that frees slots, a function that releases them."""
    out = []
    for run, free in zip(runs, frees):
        out.append(run)
        if free:
            out.append(_releaser(free, pool_keys))
    return tuple(out)


def _releaser(slots: tuple[int, ...], pool_keys: tuple):
    pooled = tuple((s, pool_keys[s]) for s in slots if pool_keys[s] is not None)
    if pooled:
        plain = tuple(s for s in slots if pool_keys[s] is None)

        def release_pooled(values: list, ctx: Any) -> None:
            for s in plain:
                values[s] = None
            pool = ctx.buffers
            for s, key in pooled:
                release(pool, key, values, s)
        return release_pooled
    if len(slots) == 1:
        (slot,) = slots

        def release_one(values: list, ctx: Any) -> None:
            values[slot] = None
        return release_one

    def release_plain(values: list, ctx: Any) -> None:
        for s in slots:
            values[s] = None
    return release_plain


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
