"""Reverse-mode autodiff over the graph IR, from each op's declared gradient op.

`gradients(ys, xs)` walks the nodes between `xs` and `ys` backwards (creation order is a
topological order) and, for each node that receives a gradient, calls its gradient op through
`apply_op`, so gradients are ordinary nodes: they fold, merge, place and run like any other.
The gradient op takes the forward inputs, optionally the forward outputs, then `grad_<output>`
per output (zeros for an output that got none), and returns `grad_<input>` per differentiable
input (the signature rule of `opsdk.registry.gradients`). Contributions along several paths are
summed. Nodes that are not declared ops (runtime primitives, `cond`, `while_loop`) are
differentiated by the rule registered for their type (`register_gradient_rule`); control flow
registers its rules beside its builders.

    loss = reduce_mean(square(w * x - y))
    gw, gx = gradients(loss, [w, x])
"""

from __future__ import annotations

from contextlib import nullcontext

from typing import Any, Callable, Collection, Iterable, Optional, Sequence

from opsdk.registry.dtypes import is_differentiable_dtype
from opsdk.registry.errors import OpsdkError
from opsdk.registry.spec import OpSpec

from opsdk.runtime.frontend.api import apply_op, node_of
from opsdk.runtime.frontend.registries import SpecRegistry, builtin_registry, gradient_spec
from opsdk.runtime.ir.graph import Graph, Operation, constant
from opsdk.runtime.ir.tensor import Tensor

__all__ = ["gradients", "differentiate", "group_inputs", "group_values", "zeros_like", "ones_like",
           "add_all", "forward_reach", "register_gradient_rule", "GRADIENT_RULES"]

# rule(op, out_grads, differentiate[, wanted]) -> per data input of op its gradient (None: none
# flows)
GradientRule = Callable[..., list]
GRADIENT_RULES: dict[str, GradientRule] = {}
_WANTS_INPUTS: set[str] = set()


def register_gradient_rule(op_type: str, rule: GradientRule,
                           wants_inputs: bool = False) -> GradientRule:
    """The gradient of nodes of type `op_type` (a runtime primitive, cond, while_loop, ...).
    With `wants_inputs` the rule gets a fourth argument, per data input whether a gradient is
    wanted for it (it lies on a path from the xs): a loop then carries no sum for the others."""
    GRADIENT_RULES[op_type] = rule
    if wants_inputs:
        _WANTS_INPUTS.add(op_type)
    else:
        _WANTS_INPUTS.discard(op_type)
    return rule


# name -> fn(op, *grads_of_its_outputs): gradients by name, for Graph.gradient_override_map
NAMED_GRADIENTS: dict[str, Callable[..., Any]] = {}


def register_gradient(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator registering `fn(op, *output_grads)` under `name`: nodes made inside
    `graph.gradient_override_map({op_type: name})` take their gradient from it (one tensor or
    None per data input, a single one for a node of one input; TensorFlow's RegisterGradient).
    A name is registered once."""
    if not isinstance(name, str) or not name:
        raise OpsdkError(f"register_gradient: the name must be a non-empty string, got {name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in NAMED_GRADIENTS:
            raise OpsdkError(f"register_gradient: a gradient named '{name}' is registered "
                             "already")
        if not callable(fn):
            raise OpsdkError(f"register_gradient('{name}'): {fn!r} is not callable")
        NAMED_GRADIENTS[name] = fn
        return fn
    return register


def _overridden_gradient(op: Operation, out_grads: list[Optional[Tensor]]
                         ) -> list[Optional[Tensor]]:
    name = op.gradient_override
    fn = NAMED_GRADIENTS.get(name or "")
    who = f"{op.type} (node '{op.name}')"
    if fn is None:
        raise OpsdkError(f"{who}: its gradient is overridden by '{name}', but no gradient is "
                         "registered under that name (register_gradient)")
    filled = filled_grads(op, out_grads)
    got = fn(op, *filled)
    grads = list(got) if isinstance(got, (list, tuple)) else [got]
    if len(grads) != len(op.inputs):
        raise OpsdkError(f"{who}: the gradient '{name}' returned {len(grads)} gradient(s) for "
                         f"its {len(op.inputs)} input(s)")
    for g, x in zip(grads, op.inputs):
        if g is not None and not isinstance(g, Tensor):
            raise OpsdkError(f"{who}: the gradient '{name}' gave {type(g).__name__} for input "
                             f"'{x.name}'; give a tensor or None")
    return grads


def gradients(ys: Any, xs: Any, grad_ys: Any = None, name: str = "gradients"
              ) -> list[Optional[Tensor]]:
    """d(sum of ys)/d(x) for each x of `xs`: a Tensor of x's shape, or None when no y depends on
    x through differentiable tensors. `ys`/`xs` are Tensors or Variables (a variable's gradient
    is that of its value), single or in a list. `grad_ys`: the gradient each y starts with
    (default: ones of y's shape).

    Raises OpsdkError naming the op, its node and the path from ys to xs when the path crosses
    an op declared with `gradient: null`.

    >>> gw, gb = gradients(loss, [w, b])                                   # doctest: +SKIP
    """
    y_list, x_list = _tensors(ys, "ys"), _tensors(xs, "xs")
    graph = _one_graph(y_list + x_list)
    seeds = _seeds(y_list, grad_ys)
    with graph.as_default(), graph.name_scope(name):
        seeds = [ones_like(y) if s is None else _as_seed(s, y) for y, s in zip(y_list, seeds)]
        return differentiate(y_list, x_list, seeds)


def differentiate(ys: Sequence[Tensor], xs: Sequence[Tensor], seeds: Sequence[Tensor]
                  ) -> list[Optional[Tensor]]:
    """The core of `gradients`: adds gradient nodes to the default graph (a control-flow
    gradient calls it while tracing a branch or loop body, on that sub-graph's tensors)."""
    reached = forward_reach(xs)
    needed = _backward_reach(ys)
    between = sorted((op for op in needed if any(t in reached for t in op.inputs)),
                     key=lambda op: op._id, reverse=True)
    grads: dict[Tensor, list[Tensor]] = {}
    for y, seed in zip(ys, seeds):
        if is_differentiable_dtype(y.dtype):
            grads.setdefault(y, []).append(seed)
    for op in between:
        out_grads = [_total(grads, t) for t in op.outputs]
        if all(g is None for g in out_grads):
            continue
        # a node made to live with another (a lookup with its table) has its gradient there
        home = op.colocated if op.colocated is not None and op.colocated.graph is op.graph \
            else None
        with op.graph.colocate_with(home) if home is not None else nullcontext():
            in_grads = _op_gradient(op, out_grads, _Path(ys, xs, reached, needed))
        for t, g in zip(op.inputs, in_grads):
            if g is not None and t in reached and is_differentiable_dtype(t.dtype):
                grads.setdefault(t, []).append(g)
    return [_total(grads, x) for x in xs]


def _op_gradient(op: Operation, out_grads: list[Optional[Tensor]], path: "_Path"
                 ) -> list[Optional[Tensor]]:
    """Per data input of `op`, its gradient (None: none flows)."""
    if op.gradient_override is not None:
        return _overridden_gradient(op, out_grads)
    if op.spec is not None:
        if op.spec.stops_gradient:
            return [None] * len(op.inputs)
        if op.spec.gradient_op is None and op.type in GRADIENT_RULES:
            # a builtin gradient op's own gradient (opsdk/runtime/autodiff/second_order.py)
            return GRADIENT_RULES[op.type](op, out_grads, differentiate)
        if op.spec.gradient_op is None:
            raise OpsdkError(f"no gradient for op '{op.type}' (node '{op.name}'), on the path "
                             f"{path.through(op)}; declare a gradient op for '{op.type}' or put "
                             "stop_gradient() where no gradient should flow")
        return _declared_gradient(op, out_grads)
    rule = GRADIENT_RULES.get(op.type)
    if rule is not None and op.type in _WANTS_INPUTS:
        return rule(op, out_grads, differentiate, [t in path.reached for t in op.inputs])
    if rule is not None:
        return rule(op, out_grads, differentiate)
    raise OpsdkError(f"no gradient for op '{op.type}' (node '{op.name}'), on the path "
                     f"{path.through(op)}; a '{op.type}' node passes no gradient")


def _declared_gradient(op: Operation, out_grads: list[Optional[Tensor]]) -> list[Optional[Tensor]]:
    """Call the op's gradient op on (inputs, [outputs,] grad_outputs); map its results back."""
    spec: OpSpec = op.spec
    grad_spec = gradient_spec(spec)
    values: dict[str, Any] = dict(zip((t.name for t in spec.inputs), group_inputs(op)))
    outputs = group_values(op.outputs, spec.outputs, op.attrs)
    filled = filled_grads(op, out_grads)
    grouped = group_values(filled, spec.outputs, op.attrs)
    for tspec, out, grad in zip(spec.outputs, outputs, grouped):
        values[tspec.name] = out
        values[f"grad_{tspec.name}"] = grad
    attrs = {a.name: op.attrs[a.name] for a in grad_spec.attrs if a.name in op.attrs}
    attrs.update({ta.name: op.type_attrs[ta.name] for ta in grad_spec.unbound_type_attrs
                  if ta.name in op.type_attrs})
    result = apply_op(SpecRegistry(grad_spec), grad_spec.name, [values[t.name] for t in grad_spec.inputs], attrs,
                      name=f"{op.name}_grad", device=op.device or None)
    grad_op = node_of(result)
    by_input = dict(zip((t.name[len("grad_"):] for t in grad_spec.outputs),
                        group_values(grad_op.outputs, grad_spec.outputs, grad_op.attrs,
                                     f"{grad_spec.name} (node '{grad_op.name}')")))
    flat: list[Optional[Tensor]] = []
    for tspec, value in zip(spec.inputs, group_inputs(op)):
        got = by_input.get(tspec.name)
        if tspec.name in op.absent:
            continue  # no edge, no gradient (the gradient op got None for it)
        if tspec.is_list:
            flat.extend(list(got) if got is not None else [None] * len(value))
        else:
            flat.append(got)
    return flat


def group_inputs(op: Operation) -> list:
    """The node's flat inputs grouped as its declaration's inputs (a list input as a list, None
    for an absent optional input)."""
    return group_values(op.inputs, op.spec.inputs, op.attrs, absent=op.absent)


def group_values(flat: Sequence[Any], specs: Sequence[Any], attrs: dict, who: str = "",
                 absent: Collection[str] = ()) -> list:
    """Flat values (a node's inputs or outputs) grouped per declared tensor, by the list attrs;
    None for each of the `absent` ones (optional inputs left out, which have no value here)."""
    if absent:
        present = [t for t in specs if t.name not in absent]
        values = iter(group_values(flat, present, attrs, who))
        return [None if t.name in absent else next(values) for t in specs]
    sizes = [int(attrs[t.list_len]) if t.is_list else None for t in specs]
    expected = sum(1 if n is None else n for n in sizes)
    if len(flat) != expected:
        names = ", ".join(t.name for t in specs)
        raise OpsdkError(f"{who or 'gradients'}: {len(flat)} values for {expected} declared "
                         f"tensors ({names}): a list output must be one graph output per element")
    grouped, at = [], 0
    for n in sizes:
        grouped.append(flat[at] if n is None else list(flat[at:at + n]))
        at += 1 if n is None else n
    return grouped


# ------------------------------------------------------------------------------ building blocks
def zeros_like(t: Tensor) -> Tensor:
    """Zeros of t's shape and dtype, as a node of the default graph."""
    return apply_op(builtin_registry(), "zeros_like", [t], {})


def filled_grads(op: Operation, out_grads: Sequence[Optional[Tensor]]) -> list[Tensor]:
    """One gradient per output of `op`: zeros of its shape where none flows."""
    return [g if g is not None else zeros_like(t) for t, g in zip(op.outputs, out_grads)]


def ones_like(t: Tensor) -> Tensor:
    """Ones of t's shape and dtype, as a node of the default graph."""
    return apply_op(builtin_registry(), "ones_like", [t], {})


def add_all(terms: Sequence[Tensor]) -> Tensor:
    """The sum of `terms` (one or more tensors of one dtype) as a chain of `add` nodes."""
    total = terms[0]
    for term in terms[1:]:
        total = apply_op(builtin_registry(), "add", [total, term], {}, name="grad_sum")
    return total


def _total(grads: dict[Tensor, list[Tensor]], t: Tensor) -> Optional[Tensor]:
    terms = grads.get(t)
    if not terms:
        return None
    if len(terms) > 1:
        grads[t] = [add_all(terms)]  # summed once, however many times it is asked for
    return grads[t][0]


# ---------------------------------------------------------------------------- reachability
def forward_reach(xs: Iterable[Tensor]) -> set[Tensor]:
    """Tensors that depend on an x through differentiable (float or complex) tensors."""
    reached: set[Tensor] = set()
    stack = [x for x in xs if is_differentiable_dtype(x.dtype)]
    while stack:
        t = stack.pop()
        if t in reached:
            continue
        reached.add(t)
        for consumer in t.consumers():
            stack.extend(o for o in consumer.outputs if is_differentiable_dtype(o.dtype))
    return reached


def _backward_reach(ys: Iterable[Tensor]) -> set[Operation]:
    """Nodes some y depends on through data edges."""
    seen: set[Operation] = set()
    stack = [y.op for y in ys]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
    return seen


class _Path:
    """Names one path ys <- ... <- op <- ... <- xs, for the error of an op with no gradient."""

    def __init__(self, ys: Sequence[Tensor], xs: Sequence[Tensor], reached: set[Tensor],
                 needed: set[Operation]):
        self.ys, self.xs, self.reached, self.needed = ys, xs, reached, needed

    def through(self, op: Operation) -> str:
        up = self._to_y(op)
        down = self._to_x(op)
        return " <- ".join([*reversed(up), op.name, *down])

    def _to_y(self, op: Operation) -> list[str]:
        """Node names from op's consumer up to a y's node (nearest first), by breadth-first search."""
        targets = {y.op for y in self.ys}
        parent: dict[Operation, Optional[Operation]] = {op: None}
        queue = [op]
        while queue:
            current = queue.pop(0)
            if current in targets:
                names = []
                while current is not op:
                    names.append(current.name)
                    current = parent[current]
                return list(reversed(names))
            for nxt in current.consumers():
                if nxt in self.needed and nxt not in parent:
                    parent[nxt] = current
                    queue.append(nxt)
        return []

    def _to_x(self, op: Operation) -> list[str]:
        """Node names from op's input down to an x's node (nearest first)."""
        targets = set(self.xs)
        parent: dict[Tensor, Optional[Tensor]] = {}
        queue = [t for t in op.inputs if t in self.reached]
        for t in queue:
            parent[t] = None
        while queue:
            current = queue.pop(0)
            if current in targets:
                names = []
                node: Optional[Tensor] = current
                while node is not None:
                    names.append(node.op.name)
                    node = parent[node]
                return list(reversed(names))
            for t in current.op.inputs:
                if t in self.reached and t not in parent:
                    parent[t] = current
                    queue.append(t)
        return []


# ------------------------------------------------------------------------------- arguments
def _tensors(value: Any, what: str) -> list[Tensor]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if hasattr(item, "_as_graph_element"):
            item = item._as_graph_element()  # a Variable: its value
        if not isinstance(item, Tensor):
            raise OpsdkError(f"gradients: {what} must be Tensors or Variables, got a "
                             f"{type(item).__name__}")
        out.append(item)
    if not out:
        raise OpsdkError(f"gradients: {what} is empty")
    return out


def _one_graph(tensors: Sequence[Tensor]) -> Graph:
    graph = tensors[0].graph
    for t in tensors:
        if t.graph is not graph:
            raise OpsdkError(f"gradients: '{t.name}' belongs to another graph than "
                             f"'{tensors[0].name}'; ys and xs must be in one graph")
    return graph


def _seeds(ys: list[Tensor], grad_ys: Any) -> list[Any]:
    if grad_ys is None:
        return [None] * len(ys)
    seeds = list(grad_ys) if isinstance(grad_ys, (list, tuple)) else [grad_ys]
    if len(seeds) != len(ys):
        raise OpsdkError(f"gradients: {len(ys)} ys but {len(seeds)} grad_ys; give one per y "
                         "(None for the default ones)")
    return seeds


def _as_seed(seed: Any, y: Tensor) -> Tensor:
    tensor = seed if isinstance(seed, Tensor) else constant(seed, dtype=y.dtype)
    if tensor.dtype != y.dtype:
        raise OpsdkError(f"gradients: grad_ys for '{y.name}' is {tensor.dtype} but the tensor is "
                         f"{y.dtype}")
    return tensor


# Primitives through which a gradient passes unchanged (input i <- output i), and those that
# start a graph, where a gradient simply stops.
register_gradient_rule("identity", lambda op, out_grads, _: list(out_grads[:len(op.inputs)]))
register_gradient_rule("read_variable", lambda op, out_grads, _: [out_grads[0]])
for _leaf in ("placeholder", "const", "variable"):
    register_gradient_rule(_leaf, lambda op, out_grads, _: [])
# A Python function is opaque: no gradient passes it (as TensorFlow's PyFunc is not
# differentiable), so an input reached only through one gets None.
register_gradient_rule("py_func", lambda op, out_grads, _: [None] * len(op.inputs))
