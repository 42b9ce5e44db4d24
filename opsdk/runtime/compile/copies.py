"""The copies pass: a `copy` node on every edge that crosses devices.

One copy per (tensor, destination device), shared by every consumer there; fetched tensors that
live elsewhere than the program's result device (the host, for Session.run) are copied to it.
The copies exist only in the program: the user's graph is not changed.
"""

from __future__ import annotations

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.program import Program
from opsdk.runtime.devices import Device
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor


def copies_pass(program: Program) -> Program:
    """Insert the copies (see the module docstring)."""
    made: dict[tuple[Tensor, Device], Tensor] = {}
    after: dict[Operation | None, list[Operation]] = {}  # copies to place after their source

    def copied(t: Tensor, to: Device) -> Tensor:
        key = (t, to)
        if key not in made:
            made[key] = _copy_node(program, t, to)
            source = None if t in program.feed_set else t.op
            after.setdefault(source, []).append(made[key].op)
        return made[key]

    for op in program.ops:
        inputs = program.inputs_of(op)
        here = program.device[op]
        rewired = tuple(t if program.device_of(t) is here else copied(t, here) for t in inputs)
        if rewired != inputs:
            program.inputs[op] = rewired
    if program.result_device is not None:
        for t in program.fetches:
            if isinstance(t, Tensor) and program.device_of(t) is not program.result_device:
                program.fetched[t] = copied(t, program.result_device)
    program.ops = _with_copies(program.ops, after)
    for (t, to), c in made.items():
        program.note("copies", f"{t.name}: {program.device_of(t).name} -> {to.name}")
    if not made:
        program.note("copies", "none: no edge crosses devices")
    return program


def no_copies(program: Program) -> Program:
    """The copies pass switched off: an edge that crosses devices is then an error."""
    for op in program.ops:
        for t in program.inputs_of(op):
            if program.device_of(t) is not program.device[op]:
                raise OpsdkError(f"{op.type} (node '{op.name}') on {program.device[op].name} reads "
                                 f"'{t.name}' from {program.device_of(t).name}, and the copies "
                                 "pass is off")
    program.note("copies", "off")
    return program


def _copy_node(program: Program, t: Tensor, to: Device) -> Tensor:
    source = program.device_of(t)
    name = f"{t.op.name}/copy_{t.index}_to_{to.type_name}_{to.index}"
    op = Operation(t.op.graph, "copy", name, (t,), {"from": source, "to": to}, {}, (), to.name,
                   None, t.op._id)
    op.outputs = (Tensor(op, 0, t.shape, t.dtype),)
    program.device[op] = to
    return op.outputs[0]


def _with_copies(ops: list[Operation], after: dict) -> list[Operation]:
    """The order with each copy right after its source (fed sources' copies first)."""
    order = list(after.get(None, ()))
    for op in ops:
        order.append(op)
        order.extend(after.get(op, ()))
    return order
