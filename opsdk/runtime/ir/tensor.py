"""Tensor: an edge of the graph (one output of one node), with its static shape and dtype.

Python operators map onto builtin YAML ops by name (`OPERATORS`), resolved through the graph's
registry like any other op: the runtime holds no math of its own. `==` and `hash` stay identity
(as in TensorFlow 1) because tensors are dict keys in `feed_dict`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError

if TYPE_CHECKING:
    from opsdk.runtime.ir.graph import Graph, Operation

Shape = Optional[tuple]  # tuple of int | None per dim; None when even the rank is unknown

# Python operator -> builtin op. The op library is YAML; these are only names.
OPERATORS: dict[str, str] = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "matmul": "matmul",
    "neg": "neg", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
    "pow": "pow", "getitem": "slice", "reshape": "reshape",
}


class Tensor:
    """Output `index` of node `op`. `shape` has None for unknown dims (None: unknown rank)."""

    __slots__ = ("op", "index", "shape", "dtype")
    __array_priority__ = 100  # `ndarray + tensor` defers to Tensor.__radd__

    def __init__(self, op: "Operation", index: int, shape: Shape, dtype: str):
        self.op = op
        self.index = index
        self.shape = shape
        self.dtype = dtype

    @property
    def name(self) -> str:
        """`node:index`, e.g. 'dist:0'."""
        return f"{self.op.name}:{self.index}"

    @property
    def graph(self) -> "Graph":
        return self.op.graph

    @property
    def ndim(self) -> Optional[int]:
        return None if self.shape is None else len(self.shape)

    def consumers(self) -> list["Operation"]:
        """The nodes that read this tensor."""
        return [op for op in self.op.consumers() if any(t is self for t in op.inputs)]

    def __repr__(self) -> str:
        shape = "?" if self.shape is None else "(" + ", ".join(
            "?" if d is None else str(d) for d in self.shape) + ")"
        return f"<Tensor '{self.name}' shape={shape} dtype={self.dtype}>"

    def __bool__(self) -> bool:
        raise OpsdkError(f"tensor '{self.name}' has no truth value at graph-build time; "
                         "use cond() for data-dependent branches")

    def __iter__(self):
        raise OpsdkError(f"tensor '{self.name}' is not iterable at graph-build time")

    # Arithmetic ------------------------------------------------------------------------------
    def __add__(self, other): return _binary("add", self, other)
    def __radd__(self, other): return _binary("add", other, self)
    def __sub__(self, other): return _binary("sub", self, other)
    def __rsub__(self, other): return _binary("sub", other, self)
    def __mul__(self, other): return _binary("mul", self, other)
    def __rmul__(self, other): return _binary("mul", other, self)
    def __truediv__(self, other): return _binary("truediv", self, other)
    def __rtruediv__(self, other): return _binary("truediv", other, self)
    def __matmul__(self, other): return _binary("matmul", self, other)
    def __rmatmul__(self, other): return _binary("matmul", other, self)
    def __pow__(self, other): return _binary("pow", self, other)
    def __rpow__(self, other): return _binary("pow", other, self)
    def __lt__(self, other): return _binary("lt", self, other)
    def __le__(self, other): return _binary("le", self, other)
    def __gt__(self, other): return _binary("gt", self, other)
    def __ge__(self, other): return _binary("ge", self, other)

    def __neg__(self):
        return _apply("neg", [self], {})

    def __getitem__(self, key):
        return _getitem(self, key)


def _binary(which: str, a: Any, b: Any) -> Any:
    anchor = a if isinstance(a, Tensor) else b
    return _apply(which, [_lift(a, anchor), _lift(b, anchor)], {})


def _lift(value: Any, anchor: Tensor) -> Tensor:
    """A Python or NumPy operand becomes a constant in the tensor's graph, of its dtype when the
    value is a plain Python number (TF1's rule: `x * 2` keeps x's dtype)."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "_as_graph_element"):  # a Variable: `x @ w` reads its value
        return value._as_graph_element()
    from opsdk.runtime.ir.graph import constant  # graph imports this module
    dtype = anchor.dtype if isinstance(value, (int, float, bool, list, tuple)) else None
    with anchor.graph.as_default():
        return constant(value, dtype=dtype)


def _apply(which: str, inputs: list, attrs: dict) -> Any:
    from opsdk.runtime.frontend.api import apply_op  # api imports graph, which imports this module
    graph = inputs[0].graph
    return apply_op(graph.get_registry(), OPERATORS[which], inputs, attrs)


def _getitem(tensor: Tensor, key: Any) -> Tensor:
    """Basic indexing (ints and step-1 slices) as a `slice` node, then a `reshape` dropping the
    int-indexed axes."""
    begin, size, kept = _slice_plan(tensor, key)
    sliced = _apply("getitem", [tensor], {"begin": begin, "size": size})
    if len(kept) == len(begin):
        return sliced
    dims = [sliced.shape[i] for i in kept]
    if dims.count(None) > 1:
        raise OpsdkError(f"tensor '{tensor.name}': indexing with an int here leaves {dims.count(None)} "
                         "unknown dims; give the placeholder more known dims, or slice with i:i+1")
    return _apply("reshape", [sliced], {"shape": [-1 if d is None else d for d in dims]})


def _slice_plan(tensor: Tensor, key: Any) -> tuple[list[int], list[int], list[int]]:
    """(begin, size, axes kept) for `tensor[key]`."""
    keys = key if isinstance(key, tuple) else (key,)
    if tensor.ndim is None:
        raise OpsdkError(f"tensor '{tensor.name}': cannot index a tensor of unknown rank")
    if len(keys) > tensor.ndim:
        raise OpsdkError(f"tensor '{tensor.name}': {len(keys)} indices for a rank-{tensor.ndim} "
                         "tensor")
    begin, size, kept = [0] * tensor.ndim, [-1] * tensor.ndim, []
    for axis in range(tensor.ndim):
        k = keys[axis] if axis < len(keys) else slice(None)
        dim = tensor.shape[axis]
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            begin[axis], size[axis] = _index(tensor, axis, int(k), dim), 1
            if dim is not None and not 0 <= begin[axis] < dim:
                raise OpsdkError(f"tensor '{tensor.name}': index {k} is out of range for axis "
                                 f"{axis} of size {dim}")
        elif isinstance(k, slice) and k.step in (None, 1):
            kept.append(axis)
            start = 0 if k.start is None else _index(tensor, axis, int(k.start), dim)
            stop = None if k.stop is None else _index(tensor, axis, int(k.stop), dim)
            if dim is not None:
                start = min(max(start, 0), dim)
                stop = dim if stop is None else min(max(stop, start), dim)
            begin[axis] = start
            size[axis] = -1 if stop is None else max(stop - start, 0)
        else:
            raise OpsdkError(f"tensor '{tensor.name}': index {k!r} is not supported "
                             "(use ints and slices with step 1)")
    return begin, size, kept


def _index(tensor: Tensor, axis: int, i: int, dim: Optional[int]) -> int:
    if i >= 0:
        return i
    if dim is None:
        raise OpsdkError(f"tensor '{tensor.name}': negative index {i} on axis {axis}, whose size is "
                         "unknown at graph-build time")
    return dim + i
