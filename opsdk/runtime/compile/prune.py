"""The prune pass: the nodes the fetches need, in a topological order (cycles reported)."""

from __future__ import annotations

from typing import Optional, Sequence

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.compile.program import Program
from opsdk.runtime.ir.graph import Operation


class UnfedPlaceholderError(OpsdkError):
    """A run needs a placeholder that `feed_dict` gives no value (TF's InvalidArgumentError)."""


def prune_pass(program: Program) -> Program:
    """Keep what the fetches (and the program's roots) need, walking inputs (stopping at fed
    tensors) and control inputs; order it topologically."""
    needed = needed_ops(program.fetches, program.roots, program.feed_set)
    program.ops = topological_order(needed, program.feed_set)
    program.note("prune", f"{len(program.ops)} node(s) needed by the fetches")
    return program


def keep_everything(program: Program) -> Program:
    """The prune pass switched off: every node of the fetches' graph runs."""
    graph = _graph_of(program)
    for op in graph.operations:
        if op.type == "placeholder" and not all(t in program.feed_set for t in op.outputs):
            raise UnfedPlaceholderError(f"placeholder '{op.name}' must be fed (the prune pass is off, so "
                             "every node runs)")
    ops = [op for op in graph.operations if op.type != "placeholder"]
    program.ops = topological_order(ops, program.feed_set)
    program.note("prune", f"off: all {len(program.ops)} node(s) of the graph run")
    return program


def _graph_of(program: Program):
    for item in (*program.fetches, *program.roots):
        return item.graph if isinstance(item, Operation) else item.op.graph
    raise OpsdkError("nothing to run: no fetches")


def needed_ops(elements: Sequence, roots: Sequence[Operation], fed: frozenset
               ) -> list[Operation]:
    """The nodes the elements and roots need; an unfed placeholder among them is an error."""
    needed: dict[Operation, None] = {}
    stack: list[tuple[Operation, Optional[Operation]]] = [(op, None) for op in roots]
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
            raise UnfedPlaceholderError(f"placeholder '{op.name}' must be fed ({by}); "
                             f"pass feed_dict={{{op.name}: value}}")
        needed[op] = None
        stack.extend((t.op, op) for t in op.inputs if t not in fed)
        stack.extend((c, op) for c in op.control_inputs)
    return list(needed)


def topological_order(ops: Sequence[Operation], fed: frozenset) -> list[Operation]:
    """Kahn's order of the nodes; a cycle (through control inputs) is an error naming it."""
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
