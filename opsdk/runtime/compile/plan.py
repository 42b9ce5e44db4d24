"""From (fetches, feeds) to an executable plan: prune, order, place, optimise, compile steps.

Each stage is a pass over the pruned node list, so later stages (GPU placement with copies,
partitioning for distribution) slot in between without touching the executor:

    prune -> topological order (cycles reported) -> place (kernel per node) ->
    value numbering with constant folding and CSE, scalar slots (passes.py) ->
    steps + dependency counts

Steps (steps.py) are closures over slots of one flat value list, so the executor's per-node
cost is one Python call plus the kernel's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.ir.device_names import DeviceSpec
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.kernels.choice import KernelChoice, choose_kernel
from opsdk.runtime.compile.passes import number_values, scalar_slots
from opsdk.runtime.compile.steps import Step, make_step
from opsdk.runtime.ir.tensor import Tensor


@dataclass(frozen=True)
class PlanOptions:
    """The switches of the optimisation passes (SessionConfig carries them)."""

    constant_folding: bool = True
    cse: bool = True


@dataclass(frozen=True)
class Plan:
    """What Session.run executes for one (fetches, feeds) signature; built once, then cached."""

    steps: tuple[Step, ...]
    runs: tuple  # each step's run function, in order (what the executor calls)
    template: tuple  # initial slot values: constants and folded results, else None
    feed_slots: tuple[tuple[Tensor, int], ...]
    fetch_slots: tuple[Optional[int], ...]  # per fetched element; None for an Operation
    pending: tuple[int, ...]  # per step: how many steps must finish before it
    successors: tuple[tuple[int, ...], ...]  # per step: the steps waiting on it
    roots: tuple[int, ...]
    serial: bool  # no two steps can ever be ready together: run in order, no hand-offs
    folded: tuple[str, ...]  # names of nodes folded into constants (for tests and `explain`)
    merged: tuple[str, ...]  # names of nodes merged away by CSE


def build_plan(elements: Sequence[Tensor | Operation], feeds: Sequence[Tensor],
               options: PlanOptions) -> Plan:
    """The plan that computes `elements` given values for `feeds`."""
    needed = prune(elements, feeds)
    order = topological_order(needed, set(feeds))
    choices = place(order)
    num = number_values(order, feeds, choices, options.constant_folding, options.cse)
    scalars = scalar_slots(num, choices, {num.slot_of[e] for e in elements
                                          if isinstance(e, Tensor)})
    template = [value[()] if i in scalars and value is not None else value
                for i, value in enumerate(num.template)]
    steps = tuple(make_step(op, choices.get(op), num.slot_of, num.out_slots[op], scalars)
                  for op in num.kept)
    index = {op: i for i, op in enumerate(num.kept)}
    producers = [_producers(op, index, num.alias, set(feeds)) for op in num.kept]
    successors: list[list[int]] = [[] for _ in steps]
    for i, deps in enumerate(producers):
        for d in deps:
            successors[d].append(i)
    pending = tuple(len(d) for d in producers)
    return Plan(
        steps=steps, runs=tuple(s.run for s in steps), template=tuple(template),
        feed_slots=tuple((t, num.slot_of[t]) for t in feeds),
        fetch_slots=tuple(num.slot_of[e] if isinstance(e, Tensor) else None for e in elements),
        pending=pending, successors=tuple(tuple(s) for s in successors),
        roots=tuple(i for i, p in enumerate(pending) if p == 0),
        serial=_is_serial(pending, successors),
        folded=tuple(op.name for op in num.folded if op.type != "const"),
        merged=tuple(op.name for op in num.merged))


def prune(elements: Sequence[Tensor | Operation], feeds: Sequence[Tensor]) -> list[Operation]:
    """The nodes the fetches need, walking inputs (stopping at fed tensors) and control inputs."""
    fed = set(feeds)
    needed: dict[Operation, None] = {}
    stack: list[tuple[Operation, Optional[Operation]]] = []
    for e in elements:
        if isinstance(e, Operation):
            stack.append((e, None))
        elif e not in fed:
            stack.append((e.op, None))
    while stack:
        op, needed_by = stack.pop()
        if op in needed:
            continue
        if op.type == "placeholder":
            by = f"needed by '{needed_by.name}'" if needed_by else "fetched"
            raise OpsdkError(f"placeholder '{op.name}' must be fed ({by}); "
                             f"pass feed_dict={{{op.name}: value}}")
        needed[op] = None
        stack.extend((t.op, op) for t in op.inputs if t not in fed)
        stack.extend((c, op) for c in op.control_inputs)
    return list(needed)


def topological_order(ops: Sequence[Operation], fed: set) -> list[Operation]:
    """Kahn's order of the pruned nodes; a cycle (through control inputs) is an error naming it."""
    members = set(ops)
    deps = {op: {t.op for t in op.inputs if t not in fed} | set(op.control_inputs) for op in ops}
    users: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op, ds in deps.items():
        for d in ds:
            if d in members:
                users[d].append(op)
    count = {op: sum(1 for d in ds if d in members) for op, ds in deps.items()}
    # Creation order breaks ties, so the same graph always gives the same plan.
    ready = sorted((op for op in ops if count[op] == 0), key=lambda o: o._id, reverse=True)
    order: list[Operation] = []
    while ready:
        op = ready.pop()
        order.append(op)
        for user in users[op]:
            count[user] -= 1
            if count[user] == 0:
                ready.append(user)
    if len(order) != len(ops):
        stuck = sorted((op for op in ops if count[op] > 0), key=lambda o: o._id)
        names = ", ".join(f"'{op.name}'" for op in stuck[:6])
        raise OpsdkError(f"the graph has a cycle among nodes {names}; a node cannot depend "
                         "(through inputs or control dependencies) on itself")
    return order


def place(order: Sequence[Operation]) -> dict[Operation, KernelChoice]:
    """The placement pass: a kernel for every declared op of the plan, from its device scope.

    On a CPU (or unset) device a node runs its python kernel with NumPy when declared, else the
    built cpu kernel; GPU nodes need the device layer that places copies between devices.
    """
    choices: dict[Operation, KernelChoice] = {}
    for op in order:
        if op.spec is None:
            continue
        device = DeviceSpec.parse(op.device).kernel_device
        if device == "cuda":
            raise OpsdkError(f"{op.type} (node '{op.name}'): placed on '{op.device}', but this "
                             "session runs on CPU only; remove the GPU device scope")
        try:
            choices[op] = choose_kernel(op.spec)
        except OpsdkError as exc:
            raise OpsdkError(f"{op.type} (node '{op.name}'): {exc}") from None
    return choices


def _producers(op: Operation, index: dict, alias: dict, fed: set) -> set[int]:
    deps = {t.op for t in op.inputs if t not in fed} | set(op.control_inputs)
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
