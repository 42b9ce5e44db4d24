"""The memory planner of lowering (compile/plan.py calls it): which steps write into a donated
input's buffer, which take their output buffers from the session's pool (kernels/buffers.py) and
which slots give their value back to it when it dies, which slots hold arrays a compiled kernel
allocated in this step, and the plan's peak bytes of live step values (docs/internals.md,
Memory)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk.runtime.compile.partition import Partition
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.buffers import SMALL_BYTES
from opsdk.runtime.kernels.choice import given_output_call, scalar_form


class Slots:
    """The slot numbering shared by the partitions lowered into one plan."""

    def __init__(self) -> None:
        self.template: list = []  # a value per constant slot, else None
        self.is_const: list[bool] = []
        self.slot_of: dict[Tensor, int] = {}

    def new(self, value: Any = None, const: bool = False) -> int:
        self.template.append(value)
        self.is_const.append(const)
        return len(self.template) - 1


def peak_bytes(ops: Sequence[Operation], writes: Sequence[tuple[int, ...]], frees: Sequence,
               slots: Slots, donated: set[str]) -> dict:
    """The peak bytes of step values alive at once in the serial order: each step's outputs
    appear (a donating step's output reuses its dead input's buffer), freed slots disappear."""
    size: dict[int, Optional[int]] = {}
    for t, s in slots.slot_of.items():
        known = t.shape is not None and None not in t.shape
        size[s] = int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize \
            if known else None
    live, peak, unknown = 0, 0, False
    for op, out, free in zip(ops, writes, frees):
        reused = op.spec.inplace_output if op.name in donated else None
        for s in (out if reused is None else out[:reused] + out[reused + 1:]):
            n = size.get(s)
            unknown |= n is None
            live += n or 0
        peak = max(peak, live)
        live -= sum(size.get(s) or 0 for s in free if not slots.is_const[s])
    return {"peak_bytes": peak, "peak_known": not unknown}


def plan_donations(part: Partition, ops: Sequence[Operation], kernels: dict, slots: Slots,
                   reads: Sequence[tuple[int, ...]], keep: set,
                   handed: frozenset = frozenset()) -> dict[Operation, int]:
    """The memory planner's choice of which steps write into a donated input: a node whose op
    declares `inplace` for an output (one, of one or several: OpSpec.inplace_output), run by a
    python kernel on the host, whose input of the
    output's dtype and shape lives in a slot that this step alone reads (no other step, no
    fetch, not a feed, constant or scalar slot; a feed in `handed` may be, as a loop's variable
    fed to its body is). The shapes are the same when both are static and equal, or, where
    either is open (a batch of None), when the op declares the input and the output with the
    same shape (`[...]` both, or the same dims): the step then checks the actual shapes against
    the declaration before the kernel runs. A kernel marked `out_any_shape` (it uses a given
    `out=` only where it has the output's shape, as write_row does) needs only the dtype to
    agree. Returns node -> index of that input. The step still checks at run time that it holds
    the only reference to the buffer."""
    readers: dict[int, int] = {}
    for r in reads:
        for s in r:
            readers[s] = readers.get(s, 0) + 1
    feeds = {slots.slot_of[t] for t in part.feeds if t not in handed}
    out: dict[Operation, int] = {}
    for op in ops:
        choice = kernels.get(op)
        k = None if op.spec is None else op.spec.inplace_output
        if (k is None or choice is None or choice.kind != "python" or op.absent
                or not part.device.is_host or len(op.outputs) != len(op.spec.outputs)
                # a kernel that cannot be handed `out=` here (a list input to regroup)
                or given_output_call(op.spec, choice, op.attrs, op.type_attrs) is None):
            continue
        target, declared = op.outputs[k], op.spec.outputs[k]
        if target.shape == ():
            continue
        static = target.shape is not None and None not in target.shape
        any_shape = getattr(choice.fn, "out_any_shape", False)
        for j, (decl, t) in enumerate(zip(op.spec.inputs, part.inputs_of(op))):
            s = slots.slot_of[t]
            same = any_shape or (
                t.shape == target.shape if static and t.shape is not None and None not in t.shape
                else decl.shape is not None and decl.shape == declared.shape)
            if (decl.name in declared.inplace and same
                    and t.dtype == target.dtype and readers.get(s) == 1 and s not in keep
                    and s not in feeds and not slots.is_const[s]
                    and t.op.type not in ("variable", "read_variable")):
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


# Values of at most SMALL_BYTES (kernels/buffers.py; at 8 bytes an item) are never released, nor
# pooled: a release saves nothing there and would cost a chain of scalar steps a third of its time.


def pool_key(device: Any, t: Tensor) -> Optional[tuple]:
    """The pool key of tensor `t` on `device`: (device name, dtype, shape), or None when its
    shape is not static or it is small."""
    if t.shape is None or None in t.shape or 8 * _size(t.shape) <= SMALL_BYTES:
        return None
    return (device.name, np.dtype(t.dtype), tuple(t.shape))


def plan_takes(part: Partition, ops: Sequence[Operation], kernels: dict,
               donations: dict) -> dict[Operation, tuple[tuple, Callable]]:
    """The steps that take their output buffers from the session's pool: on the host, not
    donating, every output (none a list) of a static shape that is not small, every input of a
    static shape, and a kernel that writes into given buffers (kernels.choice.given_output_call).
    Returns node -> (a pool key per output, the kernel as a function of (inputs, outputs))."""
    out: dict[Operation, tuple[tuple, Callable]] = {}
    if not part.device.is_host:
        return out
    for op in ops:
        choice = kernels.get(op)
        if (op.spec is None or choice is None or op in donations
                or (choice.kind == "python" and len(op.spec.outputs) > 1)  # out= is one output
                or scalar_form(op, choice) is not None
                or len(op.outputs) != len(op.spec.outputs)
                or any(t.is_list for t in op.spec.outputs)
                or any(t.shape is None or None in t.shape for t in part.inputs_of(op))):
            continue
        keys = tuple(pool_key(part.device, t) for t in op.outputs)
        if not keys or None in keys:
            continue
        into = given_output_call(op.spec, choice, op.attrs, op.type_attrs)
        if into is not None:
            out[op] = (keys, into)
    return out


def fused_takes(part: Partition, ops: Sequence[Operation]) -> dict[Operation, tuple]:
    """The host's fused nodes (compile/fused_node.py): they take their output buffers from the
    session's pool themselves, by the shape of the values they run on, and their outputs go back
    to it when they die. Node -> a pool key per output: (device, dtype, shape), the shape None
    where the plan does not know it or it is small (buffers.release then uses the value's own,
    and keeps none of a small one)."""
    from opsdk.runtime.compile.fused_node import FUSED

    out: dict[Operation, tuple] = {}
    if not part.device.is_host:
        return out
    for op in ops:
        if op.type == FUSED and op.attrs.get("target") != "cuda":
            # A shape the plan does not know (a batch of None) is the value's own at release.
            out[op] = tuple(pool_key(part.device, t) or (part.device.name, np.dtype(t.dtype), None)
                            for t in op.outputs)
    return out


def release_keys(ops: Sequence[Operation], writes: Sequence[tuple[int, ...]], devices: Sequence,
                 keep: set, wanted: set, n_slots: int, pooled: Optional[dict] = None) -> tuple:
    """Per slot the pool key its value goes back under when it dies, or None: outputs of
    declared ops, and of the fused nodes in `pooled` (node -> their keys, fused_takes), on the
    host (never a feed, constant, fetched or small slot, nor a variable's or another
    primitive's value) of a key some step of the plan takes."""
    keys: list = [None] * n_slots
    pooled = pooled or {}
    for op, outs, device in zip(ops, writes, devices):
        if (op.spec is None and op not in pooled) or not device.is_host:
            continue
        for i, (t, s) in enumerate(zip(op.outputs, outs)):
            key = pooled[op][i] if op in pooled else pool_key(device, t)
            if key is not None and key in wanted and s not in keep:
                keys[s] = key
    return tuple(keys)


def _size(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
