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

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.spec import OpSpec

from .graph import Graph, constant, get_default_graph, in_graph_context
from .kernels import bind_kernel, choose_kernel, kernel_failure
from .tensor import Tensor

Applier = Callable[..., Any]


def apply_op(registry: Any, op_name: str, inputs: Sequence[Any], attrs: Mapping[str, Any],
             name: Optional[str] = None, device: Optional[str] = None) -> Any:
    """Add a node (graph mode) and return its output Tensor(s), or run the op eagerly and return
    NumPy array(s). `inputs` follow the declaration's order; a list input is a list.

    `device` forces a kernel: "python", "cpu" or "cuda" eagerly; in a graph, a device name
    ('/cpu:0') recorded on the node.

    >>> apply_op(load_registry(), "add", [np.ones(2), np.ones(2)], {})   # doctest: +SKIP
    array([2., 2.])
    """
    spec = registry.get(op_name)
    if len(inputs) != len(spec.inputs):
        raise OpError(f"{spec.name}: takes {len(spec.inputs)} input(s) "
                      f"({', '.join(t.name for t in spec.inputs)}), got {len(inputs)}")
    graph = _graph_of(inputs)
    if graph is not None:
        return add_node(graph, registry, spec, inputs, attrs, name, device)
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


def _flat(inputs: Sequence[Any]) -> list:
    out: list = []
    for value in inputs:
        if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
            out.extend(value)
        else:
            out.append(value)
    return out


def normalize(spec: OpSpec, inputs: Sequence[Any], attrs: Mapping[str, Any], who: str
              ) -> tuple[dict, dict[str, str]]:
    """The call's attrs checked and completed by the registry, split into scalar attrs and the
    values of unbound type attrs (`{"DstT": "float32"}`); errors name `who`."""
    from opsdk.registry import normalize_attrs
    try:
        attrs = normalize_attrs(spec, attrs, inputs)
    except OpError as exc:
        raise OpError(_relabel(str(exc), spec.name, who)) from None
    type_attrs: dict[str, str] = {}
    for ta in spec.unbound_type_attrs:
        if ta.name not in attrs:
            raise OpError(f"{who}: type attr '{ta.name}' must be given "
                          f"(one of {', '.join(ta.allowed)})")
        type_attrs[ta.name] = attrs.pop(ta.name)
    return attrs, type_attrs


def _infer(spec: OpSpec, shapes: list, dtypes: list, attrs: dict, type_attrs: dict,
           who: str) -> list:
    from opsdk.registry import infer_outputs
    try:
        return infer_outputs(spec, shapes, dtypes, {**attrs, **type_attrs})
    except OpError as exc:
        raise OpError(_relabel(str(exc), spec.name, who)) from None


def _relabel(message: str, op: str, who: str) -> str:
    """'<op>: ...' from the registry becomes "<op> (node 'n'): ..." for a graph node."""
    return who + message[len(op):] if message.startswith(f"{op}:") else f"{who}: {message}"


def _scalar_dtypes(spec: OpSpec, values: Sequence[Any]) -> list[Optional[str]]:
    """The dtype a Python number or list given for each input should take: that of another input
    sharing its type attr (so `add(x_float32, 2)` stays float32); None leaves NumPy's choice."""
    bound: dict[str, str] = {}
    for tspec, value in zip(spec.inputs, values):
        first = value[0] if tspec.is_list and value else value
        if isinstance(first, (Tensor, np.ndarray, np.generic)):
            bound.setdefault(tspec.dtype, str(first.dtype))
    return [bound.get(t.dtype) for t in spec.inputs]


def add_node(graph: Graph, registry: Any, spec: OpSpec, inputs: Sequence[Any],
             attrs: Mapping[str, Any], name: Optional[str], device: Optional[str]) -> Any:
    """Graph mode of `apply_op`: infer shapes (errors name the node) and add the node."""
    if graph.registry is None:
        graph.registry = registry
    wanted = _scalar_dtypes(spec, inputs)
    with graph.as_default():
        grouped = [[_as_tensor(v, d) for v in value] if tspec.is_list else _as_tensor(value, d)
                   for tspec, value, d in zip(spec.inputs, inputs, wanted)]
    node_name = graph.unique_name(name or spec.name)
    who = f"{spec.name} (node '{node_name}')"
    attrs, type_attrs = normalize(spec, inputs, attrs, who)
    shapes = [[t.shape for t in g] if isinstance(g, list) else g.shape for g in grouped]
    dtypes = [[t.dtype for t in g] if isinstance(g, list) else g.dtype for g in grouped]
    outputs = _infer(spec, shapes, dtypes, attrs, type_attrs, who)
    flat = [t for g in grouped for t in (g if isinstance(g, list) else [g])]
    if device == "python":
        raise OpsdkError(f"{who}: device='python' is for eager calls; in a graph use a device "
                         "name such as '/cpu:0'")
    scope = graph.device(device) if device is not None else nullcontext()
    with scope:
        op = graph.create_op(spec.name, flat, attrs, outputs, spec=spec, name=node_name,
                             type_attrs=type_attrs, reserved_name=True)
    return op.outputs[0] if len(op.outputs) == 1 else op.outputs


def _as_tensor(value: Any, dtype: Optional[str]) -> Tensor:
    return value if isinstance(value, Tensor) else constant(value, dtype=dtype)


def run_eager(spec: OpSpec, inputs: Sequence[Any], attrs: Mapping[str, Any],
              device: Optional[str] = None) -> Any:
    """Eager mode of `apply_op`: validate, run the kernel now, return NumPy array(s)."""
    wanted = _scalar_dtypes(spec, inputs)
    grouped = [[_as_array(v, d) for v in value] if tspec.is_list else _as_array(value, d)
               for tspec, value, d in zip(spec.inputs, inputs, wanted)]
    attrs, type_attrs = normalize(spec, inputs, attrs, spec.name)
    shapes = [[a.shape for a in g] if isinstance(g, list) else g.shape for g in grouped]
    dtypes = [[a.dtype.name for a in g] if isinstance(g, list) else g.dtype.name for g in grouped]
    _infer(spec, shapes, dtypes, attrs, type_attrs, spec.name)
    bound = bind_kernel(spec, choose_kernel(spec, device), attrs, type_attrs)
    flat = [a for g in grouped for a in (g if isinstance(g, list) else [g])]
    try:
        outputs = bound(flat)
    except Exception as exc:  # any kernel failure becomes one error naming the op
        raise kernel_failure(spec.name, exc) from exc
    # A list output stays a list of arrays (one per element), as docs/internals.md says.
    arrays = tuple([np.asarray(e) for e in o] if tspec.is_list else np.asarray(o)
                   for tspec, o in zip(spec.outputs, outputs))
    return arrays[0] if len(arrays) == 1 else arrays


def _as_array(value: Any, dtype: Optional[str]) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return np.asarray(value, dtype=dtype)


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
                    holder.append(load_registry(None if root is None else Path(root)))
        return apply_op(holder[0], op_name, inputs, attrs, name=name, device=device)

    return applier
