"""The memory planner of lowering (compile/plan.py calls it): which steps write into a donated
input's buffer, which slots hold arrays a compiled kernel allocated in this step, and the plan's
peak bytes of live step values (docs/internals.md, Memory)."""

from __future__ import annotations

from typing import Optional, Sequence, TYPE_CHECKING

import numpy as np

from opsdk.runtime.compile.partition import Partition
from opsdk.runtime.ir.graph import Operation

if TYPE_CHECKING:
    from opsdk.runtime.compile.plan import Slots


def peak_bytes(ops: Sequence[Operation], writes: Sequence[tuple[int, ...]], frees: Sequence,
               slots: "Slots", donated: set[str]) -> dict:
    """The peak bytes of step values alive at once in the serial order: each step's outputs
    appear (a donating step's output reuses its dead input's buffer), freed slots disappear."""
    size: dict[int, Optional[int]] = {}
    for t, s in slots.slot_of.items():
        known = t.shape is not None and None not in t.shape
        size[s] = int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize \
            if known else None
    live, peak, unknown = 0, 0, False
    for op, out, free in zip(ops, writes, frees):
        for s in out if op.name not in donated else ():
            n = size.get(s)
            unknown |= n is None
            live += n or 0
        peak = max(peak, live)
        live -= sum(size.get(s) or 0 for s in free if not slots.is_const[s])
    return {"peak_bytes": peak, "peak_known": not unknown}


def plan_donations(part: Partition, ops: Sequence[Operation], kernels: dict, slots: "Slots",
                   reads: Sequence[tuple[int, ...]], keep: set) -> dict[Operation, int]:
    """The memory planner's choice of which steps write into a donated input: a node whose op
    declares `inplace` for its output, run by a python kernel on the host, whose input of the
    output's static shape and dtype lives in a slot that this step alone reads (no other step,
    no fetch, not a feed, constant or scalar slot). Returns node -> index of that input. The step
    still checks at run time that it holds the only reference to the buffer."""
    readers: dict[int, int] = {}
    for r in reads:
        for s in r:
            readers[s] = readers.get(s, 0) + 1
    feeds = {slots.slot_of[t] for t in part.feeds}
    out: dict[Operation, int] = {}
    for op in ops:
        choice = kernels.get(op)
        if (op.spec is None or choice is None or choice.kind != "python"
                or not part.device.is_host or len(op.spec.outputs) != 1
                or not op.spec.outputs[0].inplace):
            continue
        target = op.outputs[0]
        if target.shape is None or None in target.shape or not target.shape:
            continue
        for j, (decl, t) in enumerate(zip(op.spec.inputs, part.inputs_of(op))):
            s = slots.slot_of[t]
            if (decl.name in op.spec.outputs[0].inplace and t.shape == target.shape
                    and t.dtype == target.dtype and readers.get(s) == 1 and s not in keep
                    and s not in feeds and not slots.is_const[s] and t.op.type != "variable"):
                out[op] = j
                break
    return out


def fresh_slots(ops: Sequence[Operation], kernels: dict, out_slots: dict) -> frozenset:
    """Slots written by compiled (cpu, cuda) kernels: they allocate every output anew, so no
    feed, constant or variable value shares its memory."""
    fresh = set()
    for op in ops:
        choice = kernels.get(op)
        if choice is not None and choice.kind != "python" and op.spec is not None:
            fresh.update(out_slots[op])
    return frozenset(fresh)
