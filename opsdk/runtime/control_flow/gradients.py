"""Gradients of `cond` and `while_loop` nodes (docs/internals.md, "Control flow nodes").

A branch's or loop body's intermediate values live inside its sub-graph, out of reach of the
enclosing graph. The gradient therefore *replays* the forward sub-graph inside the gradient's own
traced function (the ops its outputs need, on the same inputs) and differentiates the replay:
recomputation instead of exporting every intermediate. Ops with effects (assign, random) cannot
be replayed faithfully, so a gradient path through one is an error.

- cond: a new `cond` on the same predicate whose branches are the replayed branches' gradients
  w.r.t. the captured inputs (zeros where only the other branch depends on one).
- while_loop: a `while_loop` over i = count-1 .. 0 that gathers the body's inputs of iteration i
  from the forward node's recorded intermediates, replays the body on them, carries the loop
  variables' gradients (adding, where a gradient reaches a recorded history, its row i) and
  accumulates the captured inputs' gradients. The body's values that the gradient ops read
  (a matmul's operands, an activation's output) are recorded too, where their shape is the same
  on every iteration (`stash_intermediates`): the replay then reads their row i, and the
  forward ops that computed them are left unrun (pruned), as TensorFlow's stacks do.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk.registry.dtypes import is_differentiable_dtype
from opsdk.registry.elementwise import names_in, output_formulas
from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.infer import infer_outputs
from opsdk.registry.spec import ABSENT

from opsdk.runtime.autodiff.custom_gradient import CUSTOM_GRADIENT
from opsdk.runtime.autodiff.gradients import (forward_reach, group_values,
                                              register_gradient_rule)
from opsdk.runtime.frontend.api import apply_op, node_of
from opsdk.runtime.frontend.registries import SpecRegistry, builtin_registry, gradient_spec
from opsdk.runtime.control_flow.builders import (cond, loop_intermediates, record_intermediates,
                                                recorded, shape_histories, stash_intermediates,
                                                stashed, while_loop, with_final)
from opsdk.runtime.ir.func_graph import SubGraph
from opsdk.runtime.ir.graph import Operation, constant, get_default_graph
from opsdk.runtime.ir.tensor import Tensor

Differentiate = Callable[[Sequence[Tensor], Sequence[Tensor], Sequence[Tensor]],
                         list[Optional[Tensor]]]


# ------------------------------------------------------------------------------------ replay
def replay(sub: SubGraph, inputs: Sequence[Tensor], who: str) -> list[Tensor]:
    """Rebuild in the default graph the ops of `sub` its outputs need, with `sub.inputs` bound to
    `inputs`; returns the rebuilt outputs."""
    return _replay(sub, inputs, who)[0]


def _replay(sub: SubGraph, inputs: Sequence[Tensor], who: str
            ) -> tuple[list[Tensor], dict[Tensor, Tensor]]:
    """`replay`, and each tensor of `sub` its ops made mapped to its rebuilt one."""
    graph = get_default_graph()
    mapping: dict[Tensor, Tensor] = dict(zip(sub.inputs, inputs))
    for op in _needed_ops(sub):
        if all(t in mapping for t in op.outputs):
            continue
        new_outputs = _replay_op(graph, op, [mapping[t] for t in op.inputs], who)
        mapping.update(zip(op.outputs, new_outputs))
    return [mapping[t] for t in sub.outputs], mapping


def _needed_ops(sub: SubGraph) -> list[Operation]:
    seen: set[Operation] = set()
    stack = [t.op for t in sub.outputs]
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
    return sorted(seen, key=lambda op: op._id)


def _replay_op(graph: Any, op: Operation, inputs: list[Tensor], who: str) -> tuple[Tensor, ...]:
    outputs = _replayed(graph, op, inputs, who)
    if op.gradient_override is not None:  # made in a gradient_override_map: so is its copy
        for node in {t.op for t in outputs}:
            node.gradient_override = op.gradient_override
    return outputs


def _replayed(graph: Any, op: Operation, inputs: list[Tensor], who: str) -> tuple[Tensor, ...]:
    if op.type == "const":
        return (constant(op.attrs["value"]),)
    if op.type == "placeholder":
        raise OpsdkError(f"{who}: placeholder '{op.name}' of '{op.graph.name}' is not bound")
    if op.spec is not None and not op.spec.stateful:
        grouped = group_values(inputs, op.spec.inputs, op.attrs, absent=op.absent)
        result = apply_op(SpecRegistry(op.spec), op.type, grouped,
                          {**op.attrs, **op.type_attrs}, name=op.name.split("/")[-1],
                          device=op.device or None)
        return node_of(result).outputs  # flat: a list output's tensors one by one
    if op.type in ("cond", "while_loop", "identity", CUSTOM_GRADIENT):
        shapes = [(t.shape, t.dtype) for t in op.outputs]
        return graph.create_op(op.type, inputs, op.attrs, shapes, name=op.name.split("/")[-1],
                               type_attrs=op.type_attrs).outputs
    raise OpsdkError(f"{who}: the gradient recomputes '{op.graph.name}', but its node "
                     f"'{op.name}' ({op.type}) has effects (state or randomness) that cannot be "
                     "run twice; compute that value outside the cond/while_loop")


# -------------------------------------------------------------------------------------- cond
def cond_gradient(op: Operation, out_grads: list[Optional[Tensor]], differentiate: Differentiate,
                  wanted: Optional[Sequence[bool]] = None) -> list[Optional[Tensor]]:
    """Gradients of a cond node's inputs [pred, *captured] (pred gets None); `wanted`: per
    input whether its gradient is asked for (default: all)."""
    who = f"gradient of cond (node '{op.name}')"
    pred, captured = op.inputs[0], list(op.inputs[1:])
    branches = (op.attrs["then_branch"], op.attrs["else_branch"])
    seeded = [j for j, g in enumerate(out_grads) if g is not None]
    asked = wanted
    wanted = [k for k, c in enumerate(captured) if is_differentiable_dtype(c.dtype)
              and (asked is None or asked[1 + k])
              and any(_depends(b, k, seeded) for b in branches)]
    if not wanted:
        return [None] * len(op.inputs)

    def branch_fn(sub: SubGraph) -> Callable[[], list[Tensor]]:
        def fn() -> list[Tensor]:
            inner = get_default_graph()
            args = [inner.capture(c) for c in captured]
            outs = replay(sub, args, f"{who}, in '{sub.name}'")
            seeds = [inner.capture(out_grads[j]) for j in seeded]
            xs = [args[k] for k in wanted]
            grads = differentiate([outs[j] for j in seeded], xs, seeds)
            return [g if g is not None else _zeros(x) for g, x in zip(grads, xs)]
        return fn

    results = cond(pred, branch_fn(branches[0]), branch_fn(branches[1]),
                   name=f"{op.name.split('/')[-1]}_grad")
    grads: list[Optional[Tensor]] = [None] * len(op.inputs)
    for k, g in zip(wanted, results):
        grads[1 + k] = g
    return grads


def _depends(sub: SubGraph, k: int, outputs: Sequence[int]) -> bool:
    """Whether any of `sub`'s outputs numbered `outputs` depends on its input k through
    differentiable tensors (a static over-approximation: it ignores stop_gradient)."""
    reached = forward_reach([sub.inputs[k]])
    return any(sub.outputs[j] in reached for j in outputs)


# -------------------------------------------------------------------------------- while_loop
def while_gradient(op: Operation, out_grads: list[Optional[Tensor]], differentiate: Differentiate,
                   wanted: Optional[Sequence[bool]] = None) -> list[Optional[Tensor]]:
    """Gradients of a while_loop node's inputs [*loop_vars, *captured]; `wanted`: per input
    whether its gradient is asked for (default: all). A loop variable's gradient is carried
    through the iterations either way; a captured input's is summed only when asked for."""
    who = f"gradient of while_loop (node '{op.name}')"
    n = len(op.attrs["shape_invariants"])
    # A gradient may reach the final values and the recorded histories (h[i], the value the
    # body received on iteration i: tf.scan and tf.map_fn return them).
    hist_grads: list[Optional[Tensor]] = [None] * n
    for j, v in enumerate(recorded(op.attrs, n)):  # history outputs, in the recorded order
        if n + 1 + j < len(out_grads):
            hist_grads[v] = out_grads[n + 1 + j]
    # (a second-order gradient reaches the body's recorded values)
    stash_grads = {t: out_grads[h.index] for (t, shape), h in stashed(op).items()
                   if not shape and h.index < len(out_grads) and out_grads[h.index] is not None}
    if all(g is None for g in out_grads[:n]) and all(g is None for g in hist_grads) \
            and not stash_grads:
        return [None] * len(op.inputs)
    # recording starts here if it was off; of a variable read only for its shape, the shapes
    count, histories = record_intermediates(op, _read_for_shape(op.attrs["body"], n))
    as_shapes = shape_histories(op.attrs)
    init, captured = list(op.inputs[:n]), list(op.inputs[n:])
    floats = [v for v in range(n) if is_differentiable_dtype(init[v].dtype)]
    float_caps = [k for k, c in enumerate(captured) if is_differentiable_dtype(c.dtype)
                  and (wanted is None or wanted[n + k])]
    body: SubGraph = op.attrs["body"]
    keep, shape_from = _stashable(body, n, as_shapes, floats, float_caps)
    inputs = set(body.inputs)
    sized = [t for t in dict.fromkeys(shape_from.values()) if t not in inputs and t not in keep]
    stash = stash_intermediates(op, keep, sized) if keep or sized else []
    kept, kept_shapes = dict(zip(keep, stash)), dict(zip(sized, stash[len(keep):]))
    body = op.attrs["body"]  # with the stashed values as outputs after the loop variables'
    invariants = op.attrs["shape_invariants"]
    start = [out_grads[v] if out_grads[v] is not None else _zeros(op.outputs[v]) for v in floats]
    seen = [(j, hist_grads[v]) for j, v in enumerate(floats) if hist_grads[v] is not None]
    # A capture the body reads only by rows (gather on axis 0, as a loop reads x[i] of a
    # sequence) gets its gradient as rows: each iteration's rows and their indices are loop
    # values whose histories are scattered back after the loop. A dense sum would cost a pass
    # over the whole capture per iteration.
    rows = _row_reads(body, n, float_caps, captured)
    dense = [k for k in float_caps if k not in rows]
    reads = [(k, gather) for k in rows for gather in rows[k]]
    accs = [_zeros(captured[k]) for k in dense]
    firsts = [t for k, gather in reads for t in _no_rows(captured[k], gather)]

    def step(i: Tensor, *carried: Tensor) -> list[Tensor]:
        inner = get_default_graph()
        g_vars, g_accs = carried[:len(floats)], carried[len(floats):len(floats) + len(dense)]
        values = [_stand_in(h, i, invariants[v], init[v].dtype) if v in as_shapes else _gather(h, i)
                  for v, h in enumerate(histories)]
        args = [*values, *(inner.capture(c) for c in captured)]
        rows = {t: _gather(inner.capture(h), i) for t, h in kept.items()}
        known = {**dict(zip(body.inputs, args)), **rows,
                 **{t: _stand_in(inner.capture(h), i, t.shape, t.dtype)
                    for t, h in kept_shapes.items()}}
        stand_ins = {t: known[source] for t, source in shape_from.items()}
        after = inner.operations[-1]._id
        outs, mapping = _replay(body, args, f"{who}, in '{body.name}'")
        read = [(mapping[g.outputs[0]], mapping[g.inputs[1]]) for _, g in reads]
        xs = [values[v] for v in floats] + [args[n + k] for k in dense] + [r for r, _ in read]
        ys = [outs[v] for v in floats] + [mapping[t] for t in stash_grads]
        seeds = [*g_vars, *(_gather(inner.capture(g), i) for g in stash_grads.values())]
        grads = differentiate(ys, xs, seeds)
        if rows or stand_ins:  # what read a recorded value reads its row, so the forward ops
            # that computed it are left unrun
            _rewire(inner, after, {mapping[t]: row for t, row in rows.items()},
                    {mapping[t]: row for t, row in stand_ins.items()})
        new_vars = list(grads)
        for j, g_hist in seen:  # what reads h[i] reads the value iteration i received
            part = _gather(inner.capture(g_hist), i)
            # (where the body gave no gradient, the row alone: zeros plus it were an add of a
            # pass over zeros per iteration, the LSTM's output sequence's gradient)
            new_vars[j] = part if new_vars[j] is None else _add(new_vars[j], part)
        new_vars = [g if g is not None else _zeros(x) for g, x in zip(new_vars, xs)]
        new_accs = [acc if g is None else _add(acc, g)
                    for acc, g in zip(g_accs, grads[len(floats):len(floats) + len(dense)])]
        read_grads = new_vars[len(floats) + len(dense):]
        return [i - 1, *new_vars[:len(floats)], *new_accs,
                *(t for g, (_, index) in zip(read_grads, read) for t in (g, index))]

    shapes = [(), *(invariants[v] for v in floats), *(captured[k].shape for k in dense),
              *(t.shape for t in firsts)]
    first_read = 1 + len(floats) + len(dense)
    result = while_loop(lambda i, *rest: i >= 0, step, [count - 1, *start, *accs, *firsts],
                        shape_invariants=shapes, name=f"{op.name.split('/')[-1]}_grad",
                        keep_intermediates=list(range(first_read, first_read + len(firsts)))
                        or False)
    grads: list[Optional[Tensor]] = [None] * len(op.inputs)
    for v, g in zip(floats, result[1:1 + len(floats)]):
        grads[v] = g
    for k, g in zip(dense, result[1 + len(floats):first_read]):
        grads[n + k] = g
    if reads:
        _, kept = loop_intermediates(result[0].op)
        for j, (k, _) in enumerate(reads):
            # what iteration j computed is what iteration j+1 received: the histories from
            # their second row on, then the final values
            got_rows, got_index = (with_final(kept[2 * j + m], result[first_read + 2 * j + m],
                                              computed=True) for m in (0, 1))
            part = apply_op(builtin_registry(), "gather_grad",
                            [captured[k], got_index, got_rows], {"axis": 0})
            grads[n + k] = part if grads[n + k] is None else _add(grads[n + k], part)
    return grads


# ------------------------------------------------------------------- recorded intermediates
def _stashable(body: SubGraph, n: int, as_shapes: frozenset, floats: Sequence[int],
               float_caps: Sequence[int]) -> tuple[list[Tensor], dict[Tensor, Tensor]]:
    """What the forward loop may record of the body's values the gradient will read: those made
    by a node of the body (not a constant) of one shape on every iteration, in creation order,
    whose values are read; and per value read only for its shape (an input declared
    `shape_only`, or one an elementwise gradient's formula does not name, there as a buffer),
    the body tensor its shape is taken from: a loop variable, a capture or a recorded value of
    the same shape (the same declared shape on one node, as tanh's x and y), else itself, of
    which the loop records the shapes. What the gradient reads is predicted from the
    declarations (a gradient op's inputs named after the op's inputs and outputs) of the nodes
    between the differentiated inputs and the loop variables' new values. A value read
    otherwise (a primitive's gradient, an override) is computed again, as is one whose shape may
    change, and one read for its shape whose node reads only the body's inputs (a row of a
    sequence: computing it again costs no more than recording its shape)."""
    sources = [body.inputs[v] for v in floats] + [body.inputs[n + k] for k in float_caps]
    reached = forward_reach(sources)
    needed = _needed_ops(SubGraph(body.graph, body.inputs, tuple(body.outputs[v] for v in floats)))
    values: set[Tensor] = set()
    shapes: set[Tensor] = set()
    for node in needed:
        if any(t in reached for t in node.inputs):
            for t, read in _gradient_reads(node):
                (values if read else shapes).add(t)
    steady = _steady(body, n, as_shapes)
    made = [t for node in needed if node.type not in ("const", "placeholder")
            for t in node.outputs if t in steady]
    keep = [t for t in made if t in values]
    inputs = set(body.inputs)
    leaves = {t for t in made if all(x in inputs or x.op.type == "const" for x in t.op.inputs)}
    available = [t for v, t in enumerate(body.inputs) if v >= n or v not in as_shapes] + keep
    same = _same_shapes(needed)
    shape_from: dict[Tensor, Tensor] = {}
    for t in made:
        if t in shapes and t not in values and t.shape is not None and t not in leaves:
            group = same.get(t, {t})
            shape_from[t] = next((u for u in available if u in group and u.shape == t.shape
                                  and u.dtype == t.dtype),
                                 min((u for u in group if u in steady and u.shape == t.shape
                                      and u.dtype == t.dtype and u not in inputs),
                                     key=lambda u: (u.op._id, u.index)))
    return keep, shape_from


def _same_shapes(ops: Sequence[Operation]) -> dict[Tensor, set[Tensor]]:
    """Tensors that have one shape because one node declares them with the same shape (tanh's
    x and y, `[...]` both; bias_add's value and y, `[..., c]`): per tensor, the set of those it
    shares a shape with, through any chain of such nodes. An output's declared shape counts
    only where no shape function replaces it."""
    group: dict[Tensor, set[Tensor]] = {}
    for op in ops:
        spec = op.spec
        if spec is None or op.absent or len(op.inputs) != len(spec.inputs) \
                or len(op.outputs) != len(spec.outputs):
            continue  # list or absent inputs: positions would not match the declaration
        by_shape: dict[tuple, list[Tensor]] = {}
        outputs = zip(spec.outputs, op.outputs) if spec.shape_fn is None else ()
        for decl, t in [*zip(spec.inputs, op.inputs), *outputs]:
            if decl.shape is not None:
                by_shape.setdefault(tuple(decl.shape), []).append(t)
        for members in by_shape.values():
            joined = set().union(*(group.get(t, {t}) for t in members))
            for t in joined:
                group[t] = joined
    return group


def _gradient_reads(op: Operation) -> list[tuple[Tensor, bool]]:
    """(tensor, whether its values are read) for the inputs and outputs of `op` its declared
    gradient op takes (none known for a primitive, an overridden gradient or a gradient rule)."""
    spec = op.spec
    if spec is None or op.gradient_override is not None or spec.stops_gradient \
            or spec.gradient_op is None:
        return []
    reads = _value_reads(gradient_spec(spec))
    found: list[tuple[Tensor, bool]] = []
    for specs, flat, absent in ((spec.inputs, op.inputs, op.absent),
                                (spec.outputs, op.outputs, ())):
        for tspec, value in zip(specs, group_values(flat, specs, op.attrs, absent=absent)):
            if tspec.name in reads and value is not None:
                found.extend((t, reads[tspec.name])
                             for t in (value if isinstance(value, list) else [value]))
    return found


def _value_reads(spec: Any) -> dict[str, bool]:
    """Per input of `spec`, whether its kernel reads the values (not only the shape: an input
    declared `shape_only`, or one an elementwise formula does not name)."""
    named = None
    if spec.elementwise is not None:
        named = set().union(*(names_in(f) for f in output_formulas(spec.elementwise)))
    return {t.name: not t.shape_only and (named is None or t.name in named) for t in spec.inputs}


def _unread(op: Operation) -> set[int]:
    """The positions of `op`'s inputs whose values its kernel does not read."""
    spec = op.spec
    if spec is None:
        return set()
    reads = _value_reads(spec)
    positions = group_values(range(len(op.inputs)), spec.inputs, op.attrs, absent=op.absent)
    return {j for tspec, at in zip(spec.inputs, positions) if at is not None
            and not reads[tspec.name] for j in (at if isinstance(at, list) else [at])}


_PROBE = 7  # the size an unknown dim takes when a node's shape rule is tried on known shapes


def _steady(body: SubGraph, n: int, as_shapes: frozenset) -> set[Tensor]:
    """The body's tensors whose shape is the same on every iteration: the loop variables (a
    recorded one keeps its shape, or recording fails), the captures, constants, and the outputs
    of a node whose inputs are steady and whose shape rule gives known sizes from known input
    sizes (so its output's shape follows from its inputs' alone, not from their values)."""
    steady = {t for v, t in enumerate(body.inputs) if v >= n or v not in as_shapes}
    for node in body.graph.operations:
        if node.type == "const" or (all(t in steady for t in node.inputs) and (
                node.type == "identity" or _shape_follows(node))):
            steady.update(node.outputs)
    return steady


def _shape_follows(op: Operation) -> bool:
    spec = op.spec
    if spec is None or any(t.shape is None for t in op.inputs):
        return False
    if all(t.shape is not None and None not in t.shape for t in op.outputs):
        return True

    def probe(t: Tensor) -> tuple:
        return tuple(_PROBE if d is None else d for d in t.shape)
    grouped = group_values(op.inputs, spec.inputs, op.attrs, absent=op.absent)
    shapes = [ABSENT if g is None else [probe(t) for t in g] if isinstance(g, list) else probe(g)
              for g in grouped]
    dtypes = [ABSENT if g is None else [t.dtype for t in g] if isinstance(g, list) else g.dtype
              for g in grouped]
    try:
        inferred = infer_outputs(spec, shapes, dtypes, {**op.attrs, **op.type_attrs})
    except (OpError, OpsdkError, ValueError, TypeError, KeyError):
        return False
    known = [s for shape, _ in inferred for s in (shape if isinstance(shape, list) else [shape])]
    return all(s is not None and None not in s for s in known)


def _rewire(graph: Any, after: int, rows: dict[Tensor, Tensor], stand_ins: dict[Tensor, Tensor]
            ) -> None:
    """Every node of `graph` made after node id `after` that reads a key of `rows` reads its
    row instead, and one that reads a key of `stand_ins` only for its shape, its stand-in."""
    for node in graph.operations:
        if node._id > after:
            unread = _unread(node) if stand_ins else set()
            for index, t in enumerate(node.inputs):
                row = rows.get(t)
                if row is None and index in unread:
                    row = stand_ins.get(t)
                if row is not None:
                    node.replace_input(index, row)


def _read_for_shape(body: SubGraph, n: int) -> list[int]:
    """The loop variables whose values the gradient never needs, only their shapes: every live
    op of the body that reads one reads only its shape (an input declared `shape_only`), or is
    an op whose gradient op reads that input only for its shape, takes none of the op's
    outputs, and whose own outputs leave the body or are read for their shapes alone (a
    TensorArray's buffer, which the body only writes rows into). Their histories are shapes,
    and each iteration of the gradient gets a stand-in of that shape holding no memory."""
    live = set(_needed_ops(body))
    leaving = set(body.outputs)
    return [v for v in range(n) if all(_shape_reader(u, body.inputs[v], live, leaving)
                                       for u in body.inputs[v].consumers() if u in live)]


def _reads_shape_of(op: Operation, t: Tensor) -> bool:
    """Whether `op` reads `t` only through inputs declared `shape_only`."""
    spec = op.spec
    return (spec is not None and not op.absent and len(op.inputs) == len(spec.inputs)
            and all(spec.inputs[j].shape_only for j, x in enumerate(op.inputs) if x is t))


def _shape_reader(op: Operation, t: Tensor, live: set, leaving: set) -> bool:
    if _reads_shape_of(op, t):
        return True
    spec = op.spec
    if spec is None or op.absent or len(op.inputs) != len(spec.inputs) \
            or spec.gradient_op is None:
        return False  # a primitive, a list or absent input (positions would not match), no grad
    by_name = {g.name: g for g in gradient_spec(spec).inputs}
    if any(o.name in by_name for o in spec.outputs):
        return False  # the gradient reads the op's outputs, which the replay computes from t
    if not all(by_name.get(spec.inputs[j].name) is not None
               and by_name[spec.inputs[j].name].shape_only
               for j, x in enumerate(op.inputs) if x is t):
        return False
    return all(out in leaving or all(u not in live or _reads_shape_of(u, out)
                                     for u in out.consumers()) for out in op.outputs)


def _stand_in(shapes: Tensor, i: Tensor, like: Any, dtype: str) -> Tensor:
    """Iteration i's stand-in for a value whose shapes were recorded: zeros of that shape that
    take no memory (builtin zeros_view_dims), of the static shape `like` (known rank)."""
    known = [-1 if d is None else int(d) for d in like]
    return apply_op(builtin_registry(), "zeros_view_dims", [_gather(shapes, i)],
                    {"dtype": dtype, "shape": known})


def _row_reads(body: SubGraph, n: int, caps: Sequence[int],
               captured: Sequence[Tensor]) -> dict[int, list[Operation]]:
    """Per capture (of `caps`) that the body's live ops read only through gathers of rows
    (axis 0, indices of a shape known when the graph is built), those gathers."""
    live = set(_needed_ops(body))
    found: dict[int, list[Operation]] = {}
    for k in caps:
        inner = body.inputs[n + k]
        users = [u for u in inner.consumers() if u in live]
        if users and captured[k].shape is not None and all(
                u.type == "gather" and int(u.attrs.get("axis", 0)) == 0 and u.inputs[0] is inner
                and u.inputs[1] is not inner and u.inputs[1].shape is not None
                and None not in u.inputs[1].shape for u in users):
            found[k] = users
    return found


def _no_rows(capture: Tensor, gather: Operation) -> tuple[Tensor, Tensor]:
    """Zero rows of the shape `gather` reads from `capture`, and zero indices of its shape: the
    values the gradient's loop starts its carried rows with (dropped after the loop)."""
    registry = builtin_registry()
    index = gather.inputs[1]
    with get_default_graph().as_default():
        lead = constant(np.asarray(index.shape, dtype=np.int32))
        tail = apply_op(registry, "slice", [apply_op(registry, "shape", [capture], {})],
                        {"begin": [1], "size": [-1]})
        dims = apply_op(registry, "concat", [[lead, tail]], {"axis": 0})
        zero = constant(np.zeros((), dtype=capture.dtype))
        no_index = constant(np.zeros(index.shape, dtype=index.dtype))
    return apply_op(registry, "fill_dims", [dims, zero], {}), no_index


def _gather(history: Tensor, i: Tensor) -> Tensor:
    return apply_op(builtin_registry(), "gather", [history, i], {"axis": 0})


def _zeros(t: Tensor) -> Tensor:
    return apply_op(builtin_registry(), "zeros_like", [t], {})


def _add(a: Tensor, b: Tensor) -> Tensor:
    return apply_op(builtin_registry(), "add", [a, b], {}, name="grad_sum")


register_gradient_rule("cond", cond_gradient, wants_inputs=True)
register_gradient_rule("while_loop", while_gradient, wants_inputs=True)
