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
  accumulates the captured inputs' gradients.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from opsdk.registry.dtypes import is_differentiable_dtype
from opsdk.registry.errors import OpsdkError

from opsdk.runtime.autodiff.gradients import group_values, register_gradient_rule
from opsdk.runtime.frontend.api import apply_op, node_of
from opsdk.runtime.frontend.registries import SpecRegistry, builtin_registry
from opsdk.runtime.control_flow.builders import cond, record_intermediates, while_loop
from opsdk.runtime.ir.func_graph import SubGraph
from opsdk.runtime.ir.graph import Operation, constant, get_default_graph
from opsdk.runtime.ir.tensor import Tensor

Differentiate = Callable[[Sequence[Tensor], Sequence[Tensor], Sequence[Tensor]],
                         list[Optional[Tensor]]]


# ------------------------------------------------------------------------------------ replay
def replay(sub: SubGraph, inputs: Sequence[Tensor], who: str) -> list[Tensor]:
    """Rebuild in the default graph the ops of `sub` its outputs need, with `sub.inputs` bound to
    `inputs`; returns the rebuilt outputs."""
    graph = get_default_graph()
    mapping: dict[Tensor, Tensor] = dict(zip(sub.inputs, inputs))
    for op in _needed_ops(sub):
        if all(t in mapping for t in op.outputs):
            continue
        new_outputs = _replay_op(graph, op, [mapping[t] for t in op.inputs], who)
        mapping.update(zip(op.outputs, new_outputs))
    return [mapping[t] for t in sub.outputs]


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
    if op.type in ("cond", "while_loop", "identity"):
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
    reached: set[Tensor] = set()
    stack = [sub.inputs[k]]
    while stack:
        t = stack.pop()
        if t in reached or not is_differentiable_dtype(t.dtype):
            continue
        reached.add(t)
        for consumer in t.consumers():
            stack.extend(consumer.outputs)
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
    hist_grads = list(out_grads[n + 1:2 * n + 1]) + [None] * max(0, n - len(out_grads[n + 1:]))
    if all(g is None for g in out_grads[:n]) and all(g is None for g in hist_grads):
        return [None] * len(op.inputs)
    count, histories = record_intermediates(op)  # recording starts here if it was off
    init, captured = list(op.inputs[:n]), list(op.inputs[n:])
    floats = [v for v in range(n) if is_differentiable_dtype(init[v].dtype)]
    float_caps = [k for k, c in enumerate(captured) if is_differentiable_dtype(c.dtype)
                  and (wanted is None or wanted[n + k])]
    body: SubGraph = op.attrs["body"]
    invariants = op.attrs["shape_invariants"]
    start = [out_grads[v] if out_grads[v] is not None else _zeros(op.outputs[v]) for v in floats]
    accs = [_zeros(captured[k]) for k in float_caps]
    seen = [(j, hist_grads[v]) for j, v in enumerate(floats) if hist_grads[v] is not None]

    def step(i: Tensor, *carried: Tensor) -> list[Tensor]:
        inner = get_default_graph()
        g_vars, g_accs = carried[:len(floats)], carried[len(floats):]
        values = [_gather(h, i) for h in histories]
        args = [*values, *(inner.capture(c) for c in captured)]
        outs = replay(body, args, f"{who}, in '{body.name}'")
        xs = [values[v] for v in floats] + [args[n + k] for k in float_caps]
        grads = differentiate([outs[v] for v in floats], xs, list(g_vars))
        new_vars = [g if g is not None else _zeros(x) for g, x in zip(grads, xs)]
        for j, g_hist in seen:  # what reads h[i] reads the value iteration i received
            new_vars[j] = _add(new_vars[j], _gather(inner.capture(g_hist), i))
        new_accs = [acc if g is None else _add(acc, g)
                    for acc, g in zip(g_accs, grads[len(floats):])]
        return [i - 1, *new_vars[:len(floats)], *new_accs]

    shapes = [(), *(invariants[v] for v in floats), *(captured[k].shape for k in float_caps)]
    result = while_loop(lambda i, *rest: i >= 0, step, [count - 1, *start, *accs],
                        shape_invariants=shapes, name=f"{op.name.split('/')[-1]}_grad")
    grads: list[Optional[Tensor]] = [None] * len(op.inputs)
    for v, g in zip(floats, result[1:1 + len(floats)]):
        grads[v] = g
    for k, g in zip(float_caps, result[1 + len(floats):]):
        grads[n + k] = g
    return grads


def _gather(history: Tensor, i: Tensor) -> Tensor:
    return apply_op(builtin_registry(), "gather", [history, i], {"axis": 0})


def _zeros(t: Tensor) -> Tensor:
    return apply_op(builtin_registry(), "zeros_like", [t], {})


def _add(a: Tensor, b: Tensor) -> Tensor:
    return apply_op(builtin_registry(), "add", [a, b], {}, name="grad_sum")


register_gradient_rule("cond", cond_gradient, wants_inputs=True)
register_gradient_rule("while_loop", while_gradient, wants_inputs=True)
