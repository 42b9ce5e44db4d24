"""Python operators on graph Tensors: `x * 2.0`, `x @ w`, `x[0, 1:3]`, as builtin ops.

The IR's Tensor has no operators (the IR never imports the op-calling front end); this module
attaches them when the front end is imported. Each operator is a builtin YAML op called through
`apply_op` in the builtin registry: the runtime holds no math of its own.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.ir.graph import constant
from opsdk.runtime.ir.tensor import Tensor

# Python operator -> builtin op. The op library is YAML; these are only names.
OPERATORS: dict[str, str] = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "matmul": "matmul",
    "neg": "neg", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
    "pow": "pow", "getitem": "slice", "reshape": "reshape",
}


def _forward(which: str) -> Any:
    return lambda self, other: _binary(which, self, other)


def _reflected(which: str) -> Any:
    return lambda self, other: _binary(which, other, self)


def install() -> None:
    """Attach the operators to Tensor (idempotent)."""
    for which in ("add", "sub", "mul", "truediv", "matmul", "pow"):
        setattr(Tensor, f"__{which}__", _forward(which))
        setattr(Tensor, f"__r{which}__", _reflected(which))
    for which in ("lt", "le", "gt", "ge"):
        setattr(Tensor, f"__{which}__", _forward(which))
    Tensor.__neg__ = lambda self: _apply("neg", [self], {})  # type: ignore[assignment]
    Tensor.__getitem__ = _getitem  # type: ignore[assignment]


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
    dtype = anchor.dtype if isinstance(value, (int, float, bool, list, tuple)) else None
    with anchor.graph.as_default():
        return constant(value, dtype=dtype)


def _apply(which: str, inputs: list, attrs: dict) -> Any:
    return apply_op(builtin_registry(), OPERATORS[which], inputs, attrs)


def _getitem(tensor: Tensor, key: Any) -> Tensor:
    """Basic indexing (ints and step-1 slices) as a `slice` node, then a `reshape` dropping the
    int-indexed axes. A slice's stop past the end of its axis stops there, as in Python, also
    where the axis's size is known only at run time (the slice's `clamp`)."""
    begin, size, kept = _slice_plan(tensor, key)
    attrs: dict[str, Any] = {"begin": begin, "size": size}
    if any(tensor.shape[axis] is None and size[axis] != -1 for axis in kept):
        attrs["clamp"] = True  # x[:3] of a dim unknown until run time: at most 3, as in Python
    sliced = _apply("getitem", [tensor], attrs)
    if len(kept) == len(begin):
        return sliced
    dims = [sliced.shape[i] for i in kept]
    if dims.count(None) <= 1:
        return _apply("reshape", [sliced], {"shape": [-1 if d is None else d for d in dims]})
    # several sizes known only at run time: the kept ones are read from the slice's shape
    registry = builtin_registry()
    with tensor.graph.as_default():
        axes = constant(np.asarray(kept, np.int32))
    sizes = apply_op(registry, "gather", [apply_op(registry, "shape", [sliced], {}), axes],
                     {"axis": 0})
    return apply_op(registry, "reshape_dims", [sliced, sizes],
                    {"shape": [-1 if d is None else d for d in dims]})


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


install()
