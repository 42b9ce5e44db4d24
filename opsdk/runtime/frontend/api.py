"""Calling an op: add a graph node (graph mode) or run its kernel now (eager mode).

`apply_op` is what generated wrappers, Tensor operators and the gradient checker call. Graph mode
is chosen inside `with g.as_default():` or when any input is a graph Tensor; otherwise the op runs
eagerly on NumPy arrays. Both modes validate through the registry (`normalize_attrs`,
`infer_outputs`), so a shape mistake is reported at node creation with the node's name.

    >>> ops = workspace_applier(".")
    >>> z = ops("pairwise_manhattan", [x, y], {}, name="dist")      # doctest: +SKIP
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence


from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.spec import ABSENT, OpSpec

from opsdk.runtime.ir.graph import Graph, constant, get_default_graph, in_graph_context
from opsdk.runtime.kernels.call_cache import eager_key
from opsdk.runtime.kernels.choice import group_outputs
from opsdk.runtime.kernels.interop import as_kernel_inputs, first_foreign, like
from opsdk.runtime.kernels.eager import (infer, input_array, normalize, refuse_graph_values,
                                         run_eager, run_eager_keyed, scalar_dtypes)
from opsdk.runtime.ir.nest import flatten
from opsdk.runtime.ir.tensor import Tensor

Applier = Callable[..., Any]


def apply_op(registry: Any, op_name: str, inputs: Sequence[Any], attrs: Mapping[str, Any],
             name: Optional[str] = None, device: Optional[str] = None) -> Any:
    """Add a node (graph mode) and return its output Tensor(s), or run the op eagerly and return
    NumPy array(s) (arrays of the caller's kind when an input is another DLPack producer's: a
    torch tensor, a JAX array; they come in and go back without a copy where memory allows). `inputs` follow the declaration's order; a list input is a list. A Variable
    given for an input stands for its value (graph mode, in the variable's graph). A list output
    (`list: N`) comes back as a list of N Tensors (or arrays); several outputs as a tuple.

    `device` forces a kernel: "python", "cpu" or "cuda" eagerly ("cuda" returns CuPy arrays);
    in a graph, a device name ('/cpu:0') recorded on the node.

    >>> apply_op(load_registry(), "add", [np.ones(2), np.ones(2)], {})   # doctest: +SKIP
    array([2., 2.])
    """
    spec = registry.get(op_name)
    if not in_graph_context():
        key = eager_key(spec, inputs, attrs, device)
        if key is not None:  # NumPy arrays only, outside a graph: an eager call for sure
            return run_eager_keyed(spec, inputs, attrs, device, key)
    if len(inputs) != len(spec.inputs):
        raise OpError(f"{spec.name}: takes {len(spec.inputs)} input(s) "
                      f"({', '.join(t.name for t in spec.inputs)}), got {len(inputs)}")
    if device == "python":
        refuse_graph_values(spec, inputs, "an eager call (device='python')")
    inputs = [_read_variables(value) for value in inputs]
    graph = _graph_of(inputs)
    if graph is not None:
        return add_node(graph, registry, spec, inputs, attrs, name, device)
    foreign = first_foreign(inputs)
    if foreign is not None:  # torch, JAX, ... arrays: in by DLPack, results back as their kind
        return like(run_eager(spec, as_kernel_inputs(spec, inputs), attrs, device), foreign)
    return run_eager(spec, inputs, attrs, device)


def _graph_of(inputs: Sequence[Any]) -> Optional[Graph]:
    """The graph a call builds into: its Tensor inputs' graph, else the context's, else None."""
    graphs = {id(t.graph): t.graph for t in _flat(inputs) if isinstance(t, Tensor)}
    if graphs and in_graph_context():
        # A function traced for control flow (func_graph.FuncGraph) captures outer tensors.
        reaches = getattr(get_default_graph(), "reaches", None)
        if reaches is not None and all(reaches(g) for g in graphs.values()):
            return get_default_graph()
    if len(graphs) > 1:
        raise OpsdkError("inputs come from different graphs; build all ops of a step in one graph")
    if graphs:
        return next(iter(graphs.values()))
    return get_default_graph() if in_graph_context() else None


def _read_variables(value: Any) -> Any:
    """A Variable (anything with `_as_graph_element`) given for an input becomes the tensor of
    its value, also inside a list input, so `matmul(x, w)` reads w as `x @ w` does."""
    if hasattr(value, "_as_graph_element"):
        return value._as_graph_element()
    if isinstance(value, (list, tuple)) and any(hasattr(v, "_as_graph_element") for v in value):
        return [v._as_graph_element() if hasattr(v, "_as_graph_element") else v for v in value]
    return value


def _flat(inputs: Sequence[Any]) -> list:
    out: list = []
    for value in inputs:
        if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
            out.extend(value)
        else:
            out.append(value)
    return out


def add_node(graph: Graph, registry: Any, spec: OpSpec, inputs: Sequence[Any],
             attrs: Mapping[str, Any], name: Optional[str], device: Optional[str]) -> Any:
    """Graph mode of `apply_op`: infer shapes (errors name the node) and add the node."""
    wanted = scalar_dtypes(spec, inputs)
    with graph.as_default():
        node_name = graph.unique_name(name or spec.name)
        who = f"{spec.name} (node '{node_name}')"
        grouped = [None if value is None  # absent: the registry refuses it for a required input
                   else [_as_tensor(who, tspec.name, v, d) for v in value] if tspec.is_list
                   else _as_tensor(who, tspec.name, value, d)
                   for tspec, value, d in zip(spec.inputs, inputs, wanted)]
    attrs, type_attrs = normalize(spec, inputs, attrs, who)
    shapes = [ABSENT if g is None else [t.shape for t in g] if isinstance(g, list) else g.shape
              for g in grouped]
    dtypes = [ABSENT if g is None else [t.dtype for t in g] if isinstance(g, list) else g.dtype
              for g in grouped]
    outputs = expand_outputs(spec, infer(spec, shapes, dtypes, attrs, type_attrs, who), attrs, who)
    # An absent optional input is no edge: the node records its name instead.
    absent = [t.name for t, g in zip(spec.inputs, grouped) if g is None]
    flat = [t for g in grouped if g is not None for t in (g if isinstance(g, list) else [g])]
    if device == "python":
        raise OpsdkError(f"{who}: device='python' is for eager calls; in a graph use a device "
                         "name such as '/cpu:0'")
    scope = graph.device(device) if device is not None else nullcontext()
    with scope:
        op = graph.create_op(spec.name, flat, attrs, outputs, spec=spec, name=node_name,
                             type_attrs=type_attrs, reserved_name=True, absent=absent)
    return output_values(op)


def expand_outputs(spec: OpSpec, outputs: list, attrs: Mapping[str, Any], who: str) -> list:
    """Per *graph* output a (shape, dtype): a list output (`list: N`) becomes N outputs, N read
    from its length attr, each with its own shape (unknown when the shape function gave none)."""
    flat: list = []
    for tspec, (shape, dtype) in zip(spec.outputs, outputs):
        if not tspec.is_list:
            flat.append((shape, dtype))
            continue
        n = int(attrs[tspec.list_len])
        shapes = list(shape) if isinstance(shape, list) else [None] * n  # None: not inferred
        if len(shapes) != n:
            raise OpError(f"{who}: the shape function gave {len(shapes)} shapes for list output "
                          f"'{tspec.name}' of {n} tensors ({tspec.list_len})")
        flat.extend((s, dtype) for s in shapes)
    return flat


def node_of(result: Any) -> Any:
    """The Operation behind what graph-mode `apply_op` returned (a Tensor, or lists/tuples of
    them for list or several outputs)."""
    tensors = [t for t in flatten(result)[0] if isinstance(t, Tensor)]
    if not tensors:
        raise OpsdkError(f"no graph node behind {result!r}: it holds no output tensor")
    return tensors[0].op


def output_values(op: Any) -> Any:
    """What apply_op returns for a declared op's node: its one output, a list of Tensors for a
    list output, or a tuple of those for several outputs."""
    values = group_outputs(op.spec, op.outputs, op.attrs)
    return values[0] if len(values) == 1 else tuple(values)


def _as_tensor(who: str, name: str, value: Any, dtype: Optional[str]) -> Tensor:
    """A value given for an input as a graph tensor: a constant cast as eager calls cast it."""
    if isinstance(value, Tensor):
        return value
    return constant(input_array(who, name, value, dtype))


def workspace_applier(root: str | Path | None) -> Applier:
    """`applier(op_name, inputs, attrs, name=None, device=None)` over the registry of `root`
    (builtin ops + the workspace's), loaded on first call, once. Generated wrappers use this."""
    lock = threading.Lock()
    holder: list = []

    def applier(op_name: str, inputs: Sequence[Any], attrs: Mapping[str, Any],
                name: Optional[str] = None, device: Optional[str] = None) -> Any:
        if not holder:
            with lock:
                if not holder:
                    from opsdk.registry import load_registry
                    # One broken declaration must not stop the workspace's other ops.
                    holder.append(load_registry(None if root is None else Path(root), strict=False))
        return apply_op(holder[0], op_name, inputs, attrs, name=name, device=device)

    return applier
