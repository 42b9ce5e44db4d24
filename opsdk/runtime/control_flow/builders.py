"""Functional control flow: `cond` and `while_loop` nodes that hold traced sub-graphs.

Each branch, loop condition and loop body is traced once into a `SubGraph` (func_graph.py); outer
tensors it uses become explicit inputs of the node, so pruning, placement and export see every
dependency. At run time the node runs only the sub-graph it needs: the branch taken, or cond and
body until the condition is false, each compiled by the same pipeline and run on the same
executor as the step itself (control_flow/run.py).

    x = placeholder("float32", shape=[3])
    y = cond(x[0] > 0.0, lambda: x * 2.0, lambda: -x)
    i, s = while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s + x), [0, zeros])

Autodiff reads the nodes (see docs/internals.md, "Control flow nodes"): the sub-graphs in attrs,
the captured inputs after the node's own, and for a loop built with `keep_intermediates=True`
the number of iterations and every iteration's loop values as extra trailing outputs.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.ir.func_graph import SubGraph, building_graph, trace
from opsdk.runtime.ir.graph import Graph, Operation, constant
from opsdk.runtime.ir.nest import LEAF, flatten, pack, same_structure, structure_text
from opsdk.runtime.ir.tensor import Shape, Tensor

__all__ = ["cond", "while_loop", "loop_intermediates", "record_intermediates", "recorded",
           "history_outputs", "shape_histories", "stash_intermediates", "stashed",
           "stashed_shapes", "with_final",
           "compatible", "join_shapes"]


# --------------------------------------------------------------------------------------- shapes
def compatible(a: Shape, b: Shape) -> bool:
    """Whether some value could have both static shapes (unknown dims and ranks match anything)."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def join_shapes(a: Shape, b: Shape) -> Shape:
    """The most specific shape that holds every value of either shape."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def shape_text(shape: Shape) -> str:
    """`[3, ?]`, or `any` for an unknown rank."""
    return "any" if shape is None else "[" + ", ".join("?" if d is None else str(d)
                                                      for d in shape) + "]"


def fits(shape: Shape, value_shape: tuple) -> bool:
    """Whether a concrete shape satisfies a static one."""
    return shape is None or (len(shape) == len(value_shape) and all(
        d is None or d == v for d, v in zip(shape, value_shape)))


# ----------------------------------------------------------------------------------------- cond
def cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any],
         name: Optional[str] = None) -> Any:
    """`true_fn()` if `pred` else `false_fn()`, decided at run time; only that branch runs.

    Both branches return the same structure (a tensor, a number, or nested lists/tuples of them)
    with the same dtypes and compatible shapes. A Python bool `pred` just calls one function.

    >>> y = cond(x > 0.0, lambda: x * 2.0, lambda: -x, name="relu2")   # doctest: +SKIP
    """
    if isinstance(pred, (bool, np.bool_)):
        return true_fn() if pred else false_fn()
    if not isinstance(pred, Tensor):
        raise OpsdkError(f"cond: pred must be a bool Tensor or a Python bool, not "
                         f"{type(pred).__name__}")
    graph = building_graph(pred)
    node = graph.unique_name(name or "cond")
    who = f"cond (node '{node}')"
    _check_pred(who, pred)
    then_g, _, then_out = trace(graph, true_fn, (), f"{node}/then")
    else_g, _, else_out = trace(graph, false_fn, (), f"{node}/else")
    then_flat, tree = _flat_outputs(who, "true_fn", then_g, then_out)
    else_flat, else_tree = _flat_outputs(who, "false_fn", else_g, else_out)
    if not same_structure(tree, else_tree):
        raise OpsdkError(f"{who}: the branches return different structures: true_fn "
                         f"{structure_text(tree)}, false_fn {structure_text(else_tree)}")
    outputs = []
    for i, (a, b) in enumerate(zip(then_flat, else_flat)):
        if a.dtype != b.dtype:
            raise OpsdkError(f"{who}: output {i} is {a.dtype} in true_fn but {b.dtype} in "
                             "false_fn; cast one branch")
        if not compatible(a.shape, b.shape):
            raise OpsdkError(f"{who}: output {i} has shape {shape_text(a.shape)} in true_fn but "
                             f"{shape_text(b.shape)} in false_fn")
        outputs.append((join_shapes(a.shape, b.shape), a.dtype))
    captured = _union_captures(then_g, else_g)
    then_sub = _seal(then_g, captured, then_flat)
    else_sub = _seal(else_g, captured, else_flat)
    op = graph.create_op("cond", [pred, *captured],
                         {"then_branch": then_sub, "else_branch": else_sub}, outputs,
                         name=node, reserved_name=True)
    return pack(tree, list(op.outputs))


def _check_pred(who: str, pred: Tensor) -> None:
    if pred.dtype != "bool":
        raise OpsdkError(f"{who}: pred '{pred.name}' is {pred.dtype}; it must be bool "
                         "(compare, e.g. `x > 0.0`)")
    if pred.shape is not None and any(d != 1 for d in pred.shape):
        raise OpsdkError(f"{who}: pred '{pred.name}' has shape {shape_text(pred.shape)}; it must "
                         "be a scalar (reduce it first, e.g. with reduce_max)")


def _flat_outputs(who: str, fn_name: str, graph: Graph, result: Any) -> tuple[list[Tensor], Any]:
    """The function's result as tensors of its graph (numbers become constants there)."""
    leaves, tree = flatten(result)
    tensors = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            tensors.append(graph.capture(leaf) if leaf.graph is not graph else leaf)
            continue
        try:
            with graph.as_default():
                tensors.append(constant(leaf))
        except (OpsdkError, TypeError, ValueError):
            raise OpsdkError(f"{who}: {fn_name} returned a {type(leaf).__name__} (output {i}); "
                             "return tensors, numbers or arrays") from None
    return tensors, tree


def _union_captures(*graphs) -> list[Tensor]:
    """Every outer tensor any of the graphs captured, first-seen order, each once."""
    seen: dict[Tensor, None] = {}
    for g in graphs:
        for outer, _ in g.captures:
            seen.setdefault(outer, None)
    return list(seen)


def _seal(graph, captured: Sequence[Tensor], outputs: Sequence[Tensor],
          leading: Sequence[Tensor] = ()) -> SubGraph:
    """The SubGraph whose inputs are `leading` then one placeholder per node capture (a capture
    only the other function uses still gets a placeholder: both share one signature)."""
    inner = [graph.capture(t) for t in captured]
    return SubGraph(graph, (*leading, *inner), tuple(outputs))


# ----------------------------------------------------------------------------------- while_loop
def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any,
               shape_invariants: Any = None, maximum_iterations: Optional[int] = None,
               keep_intermediates: Any = False, name: Optional[str] = None) -> Any:
    """Repeat `loop_vars = body(*loop_vars)` while `cond(*loop_vars)`; returns the final values.

    `loop_vars`: a tensor/number, or nested lists/tuples of them (a list or tuple is unpacked into
    the arguments of `cond` and `body`). `shape_invariants`: the same structure of shapes (None
    dims allowed) each iteration's values must fit; default: the initial static shapes.
    `maximum_iterations`: stop after that many iterations. `keep_intermediates`: also record
    every iteration's loop values for the gradient (see `loop_intermediates`); a list of loop
    variable positions (in the flattened loop_vars) records only those (a gradient through the
    loop turns on the others' recording).

    >>> i, s = while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s * 2.0), [0, x])  # doctest: +SKIP
    """
    leaves, tree = flatten(loop_vars)
    anchor = next((t for t in leaves if isinstance(t, Tensor)), None)
    graph = building_graph(anchor)
    node = graph.unique_name(name or "while")
    who = f"while_loop (node '{node}')"
    if maximum_iterations is not None and (not isinstance(maximum_iterations, (int, np.integer))
                                           or maximum_iterations < 0):
        raise OpsdkError(f"{who}: maximum_iterations must be a non-negative int or None")
    with graph.as_default():
        init = [t if isinstance(t, Tensor) else constant(t) for t in leaves]
    init = [graph.capture(t) if t.graph is not graph else t for t in init]
    invariants = _invariants(who, tree, init, shape_invariants)
    names = _var_names(tree, init)
    spread = isinstance(loop_vars, (list, tuple))
    cond_sub, body_sub, captured = _trace_loop(graph, who, node, (cond, body), spread, tree,
                                               init, invariants, names)
    attrs = {"cond": cond_sub, "body": body_sub,
             "shape_invariants": list(invariants), "loop_var_names": list(names),
             "maximum_iterations": None if maximum_iterations is None else int(maximum_iterations),
             "keep_intermediates": bool(keep_intermediates is not False
                                        and keep_intermediates is not None)}
    if isinstance(keep_intermediates, (list, tuple)):
        chosen = sorted({int(v) for v in keep_intermediates})
        if not chosen or any(not 0 <= v < len(init) for v in chosen):
            raise OpsdkError(f"{who}: keep_intermediates lists loop variable positions "
                             f"0..{len(init) - 1}, at least one; got {list(keep_intermediates)}")
        if len(chosen) < len(init):
            attrs["recorded"] = chosen
    outputs = [(shape, t.dtype) for t, shape in zip(init, invariants)] + [((), "int64")]
    outputs += history_outputs(attrs, [t.dtype for t in init])
    op = graph.create_op("while_loop", [*init, *captured], attrs, outputs, name=node,
                         reserved_name=True)
    return pack(tree, list(op.outputs[:len(init)]))


def _trace_loop(graph: Graph, who: str, node: str, fns: tuple, spread: bool, tree: Any,
                init: list[Tensor], invariants: list[Shape], names: list[str]
                ) -> tuple[SubGraph, SubGraph, list[Tensor]]:
    """Trace cond and body over placeholders shaped by the invariants; both share the captures."""
    args = [(t.dtype, shape) for t, shape in zip(init, invariants)]

    def call(fn: Callable) -> Callable:
        if spread:  # a list/tuple of loop vars is unpacked into arguments, as in TensorFlow
            return lambda *params: fn(*pack(tree, list(params)))
        return lambda *params: fn(pack(tree, list(params)))
    cond_g, cond_params, cond_out = trace(graph, call(fns[0]), args, f"{node}/cond")
    body_g, body_params, body_out = trace(graph, call(fns[1]), args, f"{node}/body")
    pred = _loop_pred(who, cond_g, cond_out)
    new = _loop_body_outputs(who, body_g, body_out, tree, init, invariants, names)
    captured = _union_captures(cond_g, body_g)
    return (_seal(cond_g, captured, [pred], cond_params),
            _seal(body_g, captured, new, body_params), captured)


def _invariants(who: str, tree: Any, init: list[Tensor], given: Any) -> list[Shape]:
    if given is None:
        return [t.shape for t in init]
    leaves, given_tree = flatten(given, shapes=True)
    if not same_structure(tree, given_tree):
        raise OpsdkError(f"{who}: shape_invariants {structure_text(given_tree)} do not match "
                         f"loop_vars {structure_text(tree)}")
    shapes = [None if s is None else tuple(None if d is None else int(d) for d in s)
              for s in leaves]
    for label, t, shape in zip(_var_names(tree, init), init, shapes):
        if not compatible(t.shape, shape):  # an unknown rank is checked when the loop runs
            raise OpsdkError(f"{who}: loop variable {label} starts with shape "
                             f"{shape_text(t.shape)}, which does not fit its shape invariant "
                             f"{shape_text(shape)}")
    return shapes


def _var_names(tree: Any, init: list[Tensor]) -> list[str]:
    return [f"loop_vars{path} ('{t.name}')" for path, t in zip(_paths(tree), init)]


def _paths(tree: Any, prefix: str = "") -> list[str]:
    if tree == LEAF:
        return [prefix]
    return [p for i, child in enumerate(tree[1]) for p in _paths(child, f"{prefix}[{i}]")]


def _loop_pred(who: str, graph, result: Any) -> Tensor:
    flat, _ = _flat_outputs(who, "cond", graph, result)
    if len(flat) != 1:
        raise OpsdkError(f"{who}: cond must return one bool tensor, it returned {len(flat)}")
    _check_pred(f"{who} cond", flat[0])
    return flat[0]


def _loop_body_outputs(who: str, graph, result: Any, tree: Any, init: list[Tensor],
                       invariants: list[Shape], names: list[str]) -> list[Tensor]:
    if tree != LEAF and len(tree[1]) == 1 and isinstance(result, Tensor):
        result = [result]  # `loop_vars=[x]` with a body returning x alone
    flat, out_tree = _flat_outputs(who, "body", graph, result)
    if not same_structure(tree, out_tree, loose=True):
        raise OpsdkError(f"{who}: body returns {structure_text(out_tree)} but the loop variables "
                         f"are {structure_text(tree)}")
    for t, start, shape, label in zip(flat, init, invariants, names):
        if t.dtype != start.dtype:
            raise OpsdkError(f"{who}: body turns loop variable {label} from {start.dtype} into "
                             f"{t.dtype}; cast it back in the body")
        if not compatible(t.shape, shape):
            raise OpsdkError(f"{who}: body gives loop variable {label} the shape "
                             f"{shape_text(t.shape)}, which does not fit its shape invariant "
                             f"{shape_text(shape)}; pass shape_invariants with None dims")
    return flat


def recorded(attrs: dict, n: int) -> list[int]:
    """The positions of the loop variables whose histories a while_loop node records (all of
    them unless attr `recorded` lists some), none when it keeps no intermediates."""
    if not attrs.get("keep_intermediates"):
        return []
    chosen = attrs.get("recorded")
    return list(range(n)) if chosen is None else list(chosen)


def shape_histories(attrs: dict) -> frozenset[int]:
    """The recorded loop variables whose histories hold their shapes, not their values (attr
    `shape_histories`: what a gradient needs of them is their shape, see record_intermediates)."""
    return frozenset(attrs.get("shape_histories") or ())


def history_outputs(attrs: dict, dtypes: Sequence[str]) -> list:
    """(shape, dtype) of each history output: (count, *var shape) per recorded variable, or
    (count, rank) int64 for one whose shapes are recorded."""
    invariants, shapes = attrs["shape_invariants"], shape_histories(attrs)
    return [_history_output(invariants[v], dtypes[v], v in shapes)
            for v in recorded(attrs, len(invariants))]


def _history_output(invariant: Any, dtype: str, shape_only: bool) -> tuple:
    if shape_only:
        return ((None, len(invariant)), "int64")
    return (None if invariant is None else (None, *invariant), dtype)


def loop_intermediates(op: Operation) -> tuple[Tensor, tuple[Tensor, ...]]:
    """(iteration count, per loop variable its history) of a `while_loop` node built with
    `keep_intermediates`. History `h` has shape (count, *var shape); `h[i]` is the value the
    body received on iteration i, so a gradient can run the body's gradient for i = count-1 .. 0.
    One history per recorded loop variable, in the order of attr `recorded` (all of them, in
    order, unless the loop was built with a list of positions)."""
    if op.type != "while_loop":
        raise OpsdkError(f"node '{op.name}' is a {op.type}, not a while_loop")
    n = len(op.attrs["shape_invariants"])
    if not op.attrs["keep_intermediates"]:
        raise OpsdkError(f"while_loop (node '{op.name}') does not keep its intermediates; build "
                         "it with while_loop(..., keep_intermediates=True) to differentiate it")
    return op.outputs[n], tuple(op.outputs[n + 1:n + 1 + len(recorded(op.attrs, n))])


def stashed(op: Operation) -> dict[tuple[Tensor, bool], Tensor]:
    """Per (body tensor, whether its shapes) a while_loop node records (`stash_intermediates`),
    its history output."""
    body, n = op.attrs["body"], len(op.attrs["shape_invariants"])
    extra = body.outputs[n:]
    shapes = stashed_shapes(op.attrs)
    return {(t, j in shapes): h for j, (t, h) in enumerate(
        zip(extra, op.outputs[len(op.outputs) - len(extra):]))}


def stashed_shapes(attrs: dict) -> frozenset[int]:
    """The positions among a loop's stashed values (attr `stashed`) whose shapes it records."""
    return frozenset(attrs.get("stashed_shapes") or ())


def stash_intermediates(op: Operation, tensors: Sequence[Tensor],
                        shapes: Sequence[Tensor] = ()) -> list[Tensor]:
    """Per tensor of the loop's body (made by a node of it, of one shape on every iteration),
    its history: (count, *shape), row i the value iteration i computed; then per tensor of
    `shapes` (of known rank) the history of its shapes, (count, rank) int64. The body gains
    them as outputs after the loop variables' (attr `stashed` counts them, attr
    `stashed_shapes` lists those recorded as shapes) and the node the histories after every
    loop variable's, which must all be recorded already (record_intermediates); a tensor
    recorded before keeps its history. A loop's gradient reads these rows instead of computing
    the body's values again."""
    if op.type != "while_loop":
        raise OpsdkError(f"node '{op.name}' is a {op.type}, not a while_loop")
    n = len(op.attrs["shape_invariants"])
    wanted = [(t, False) for t in tensors] + [(t, True) for t in shapes]
    with _recording_lock:
        if len(recorded(op.attrs, n)) != n:
            raise OpsdkError(f"while_loop (node '{op.name}'): record every loop variable "
                             "(record_intermediates) before stashing intermediates")
        have = stashed(op)
        new = [key for key in dict.fromkeys(wanted) if key not in have]
        body = op.attrs["body"]
        if any(t.graph is not body.graph or t in body.inputs or shape and t.shape is None
               for t, shape in new):
            raise OpsdkError(f"while_loop (node '{op.name}'): only tensors its body's nodes "
                             "compute (of known rank, for their shapes) can be stashed")
        if new:
            # The attrs first (a plan built before runs the old body: no extra values)
            start = len(body.outputs) - n
            op.attrs["body"] = replace(body, outputs=(*body.outputs, *(t for t, _ in new)))
            op.attrs["stashed"] = start + len(new)
            marked = sorted(stashed_shapes(op.attrs)
                            | {start + j for j, (_, shape) in enumerate(new) if shape})
            if marked:
                op.attrs["stashed_shapes"] = marked
            op.graph.add_outputs(op, [_history_output(t.shape, t.dtype, shape)
                                      for t, shape in new])
        have = stashed(op)
    return [have[key] for key in wanted]


def record_intermediates(op: Operation, shapes_only: Sequence[int] = ()
                         ) -> tuple[Tensor, tuple[Tensor, ...]]:
    """(iteration count, one history per loop variable in order), first turning recording on
    where it is off: for a loop built without `keep_intermediates=True` the node gains the
    history outputs, and for one recording some variables those of the others, after its own
    (the outputs a user holds are unchanged); from then on every run of it records them.
    Autodiff calls this, so a loop is recorded exactly when a gradient flows through it.
    Variables of `shapes_only` (of known rank) that recording starts for here record their
    shapes, a (count, rank) int64 history: a gradient that reads only their shapes (a
    TensorArray's buffer) then keeps no copy of each iteration's values."""
    if op.type != "while_loop":
        raise OpsdkError(f"node '{op.name}' is a {op.type}, not a while_loop")
    invariants = op.attrs["shape_invariants"]
    n = len(invariants)
    with _recording_lock:
        # The attrs first: a run that records before a plan has slots for the new histories
        # only returns extra values (ignored); a plan built after sees both attrs and outputs.
        if not op.attrs["keep_intermediates"]:
            op.attrs["keep_intermediates"] = True
            missing = list(range(n))
        else:
            have = recorded(op.attrs, n)
            missing = [v for v in range(n) if v not in have]
            if missing:
                op.attrs["recorded"] = have + missing
        shapes = [v for v in missing if v in shapes_only and invariants[v] is not None]
        if shapes:
            op.attrs["shape_histories"] = sorted(shape_histories(op.attrs) | set(shapes))
        if missing:
            op.graph.add_outputs(op, [_history_output(invariants[v], op.outputs[v].dtype,
                                                      v in shapes) for v in missing])
    count, histories = loop_intermediates(op)
    by_var = dict(zip(recorded(op.attrs, n), histories))
    return count, tuple(by_var[v] for v in range(n))


def with_final(history: Tensor, final: Tensor, computed: bool = False) -> Tensor:
    """A loop variable's history with the value the loop ended with as one more row:
    [h[0], ..., h[count-1], final], what each iteration received and then the end. With
    `computed`, from h[1] on: [h[1], ..., final], what each iteration computed (no rows for a
    loop that ran none)."""
    registry = builtin_registry()
    every = apply_op(registry, "concat",
                     [[history, apply_op(registry, "stack", [[final]], {"axis": 0})]],
                     {"axis": 0})
    if not computed:
        return every
    if every.shape is None:
        raise OpsdkError(f"the history '{history.name}' has no known rank")
    rank = len(every.shape)
    return apply_op(registry, "slice", [every], {"begin": [1] + [0] * (rank - 1),
                                                 "size": [-1] * rank})


_recording_lock = threading.Lock()
