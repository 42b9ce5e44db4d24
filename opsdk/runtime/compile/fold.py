"""The fold/CSE pass: value numbering with constant folding and common-subexpression
elimination, and the slots that may hold NumPy scalars.

One walk in topological order gives every tensor a value slot. A node whose inputs are all
constant and that is not stateful is folded: its kernel runs once, here, and its outputs become
constant slots. A node with the same op, input slots, attrs, type attrs, device and control
inputs as an earlier one is merged into it (common-subexpression elimination). Stateful nodes
(variables, assigns, randomness) are never folded or merged.

`scalar_slots` then finds the 0-d float values that only scalar steps read (a chain of scalar
adds): those may stay NumPy scalars between steps, which costs a tenth of a ufunc call on 0-d
arrays. Every other reader, and every fetch, still sees arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

from opsdk.runtime.compile.program import Program
from opsdk.runtime.ir.context import in_context, node_label
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.primitives import PRIMITIVES
from opsdk.runtime.ir.tensor import Tensor
from opsdk.runtime.kernels.choice import KernelChoice, bind_kernel, scalar_form

_SMALL_CONST = 4096  # bytes: constants up to this size are merged by value


@dataclass
class Numbering:
    """The result of the walk: slots, constant values, and which nodes still need to run."""

    slot_of: dict[Tensor, int] = field(default_factory=dict)
    template: list = field(default_factory=list)  # a value per constant slot, else None
    is_const: list[bool] = field(default_factory=list)
    kept: list[Operation] = field(default_factory=list)
    out_slots: dict[Operation, tuple[int, ...]] = field(default_factory=dict)  # of kept nodes
    # A merged node -> the node that runs in its place (control dependencies follow it).
    alias: dict[Operation, Operation] = field(default_factory=dict)
    folded: list[Operation] = field(default_factory=list)
    merged: list[Operation] = field(default_factory=list)

    def new_slot(self, value: Any = None, const: bool = False) -> int:
        self.template.append(value)
        self.is_const.append(const)
        return len(self.template) - 1


def fold_pass(program: Program) -> Program:
    """Number the program's values, folding and merging as its options say."""
    options = program.options
    num = number_values(program, options.constant_folding, options.cse)
    program.numbering = num
    folded = [op.name for op in num.folded if op.type != "const"]
    program.note("fold_cse", f"folded: {', '.join(folded) or 'nothing'}")
    program.note("fold_cse", f"merged: {', '.join(op.name for op in num.merged) or 'nothing'}")
    return program


def number_only(program: Program) -> Program:
    """The fold/CSE pass switched off: every node runs, each value has its own slot."""
    program.numbering = number_values(program, False, False)
    program.note("fold_cse", "off")
    return program


def number_values(program: Program, fold: bool, cse: bool) -> Numbering:
    """Walk the program's nodes (topological) once; see the module docstring."""
    num = Numbering()
    fed = program.feed_set
    for t in program.feeds:
        num.slot_of[t] = num.new_slot()
    seen: dict[Any, Operation] = {}
    for op in program.ops:
        if op.type == "const":
            _number_const(num, op, seen if cse else None, fed)
            continue
        inputs = program.inputs_of(op)
        in_slots = tuple(num.slot_of[t] for t in inputs)
        key = _cse_key(op, in_slots, num) if cse and not op.stateful else None
        if key is not None and key in seen:
            _merge(num, op, seen[key], fed)
            continue
        if fold and _foldable(op, in_slots, num):
            _fold(num, op, in_slots, program.kernel.get(op), fed)
        else:
            slots = []
            for t in op.outputs:
                # A fed output keeps its feed's slot; the producer writes into a scratch slot.
                slots.append(num.new_slot())
                if t not in fed:
                    num.slot_of[t] = slots[-1]
            num.out_slots[op] = tuple(slots)
            num.kept.append(op)
        if key is not None:
            seen[key] = op
    return num


def _number_const(num: Numbering, op: Operation, seen: Optional[dict], fed: frozenset) -> None:
    value = op.attrs["value"]
    key = None
    if seen is not None and value.nbytes <= _SMALL_CONST:
        key = ("const", value.dtype.str, value.shape, value.tobytes())
        if key in seen:
            _merge(num, op, seen[key], fed)
            return
    if op.outputs[0] not in fed:
        num.slot_of[op.outputs[0]] = num.new_slot(value, const=True)
    num.folded.append(op)
    if key is not None:
        seen[key] = op


def _merge(num: Numbering, op: Operation, into: Operation, fed: frozenset) -> None:
    for mine, theirs in zip(op.outputs, into.outputs):
        if mine not in fed:
            num.slot_of[mine] = num.slot_of[theirs]
    num.alias[op] = num.alias.get(into, into)
    if op.type != "const":
        num.merged.append(op)


def _foldable(op: Operation, in_slots: tuple, num: Numbering) -> bool:
    if op.stateful or op.control_inputs:
        return False
    if op.spec is None and not PRIMITIVES[op.type].foldable:
        return False
    return all(num.is_const[s] for s in in_slots)


def _fold(num: Numbering, op: Operation, in_slots: tuple, choice: Optional[KernelChoice],
          fed: frozenset) -> None:
    values = [num.template[s] for s in in_slots]
    try:
        if op.spec is None:
            outputs = PRIMITIVES[op.type].run(None, op, values)
        else:
            outputs = bind_kernel(op.spec, choice, op.attrs, op.type_attrs)(values)
    except Exception as exc:  # the same error the step would raise when run
        raise in_context(node_label(op.type, op.name), exc) from exc
    for t, value in zip(op.outputs, outputs):
        array = value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)
        if t not in fed:
            num.slot_of[t] = num.new_slot(array, const=True)
    num.folded.append(op)


def _cse_key(op: Operation, in_slots: tuple, num: Numbering) -> Optional[tuple]:
    try:
        attrs = _freeze(op.attrs)
        type_attrs = _freeze(op.type_attrs)
    except TypeError:
        return None  # an attr value with no stable identity: leave the node alone
    controls = tuple(id(num.alias.get(c, c)) for c in op.control_inputs)
    return (op.type, id(op.spec), in_slots, attrs, type_attrs, op.device, controls)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    hash(value)  # raises TypeError for what cannot key a dict
    return value


def scalar_slots(program: Program, fetched: set[int]) -> frozenset[int]:
    """Slots that may hold a NumPy scalar instead of a 0-d array: the output of a scalar step
    (`kernels.scalar_form`) or a 0-d float constant, read only by scalar steps (which accept
    both) and not fetched. A kernel, a primitive or the caller never sees such a value."""
    num, choices = program.numbering, program.kernel
    readers: dict[int, list[bool]] = {}
    candidates: list[int] = []
    for op in num.kept:
        scalar = scalar_form(op, choices.get(op)) is not None
        for t in program.inputs_of(op):
            readers.setdefault(num.slot_of[t], []).append(scalar)
        if scalar:
            candidates.append(num.out_slots[op][0])
    candidates.extend(i for i, const in enumerate(num.is_const)
                      if const and _float_scalar_array(num.template[i]))
    return frozenset(s for s in candidates if s not in fetched and all(readers.get(s, ())))


def _float_scalar_array(value: Any) -> bool:
    return (isinstance(value, np.ndarray) and value.ndim == 0
            and value.dtype.kind == "f" and value.dtype.itemsize <= 8)
