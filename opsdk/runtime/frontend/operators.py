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
from opsdk.runtime.ir.func_graph import building_graph
from opsdk.runtime.ir.graph import constant
from opsdk.runtime.ir.tensor import Tensor

# Python operator -> builtin op. The op library is YAML; these are only names.
OPERATORS: dict[str, str] = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "matmul": "matmul",
    "neg": "neg", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
    "pow": "pow", "getitem": "slice", "reshape": "reshape", "floordiv": "floor_div",
    "mod": "floor_mod", "identity": "identity",
}


def _forward(which: str) -> Any:
    return lambda self, other: _binary(which, self, other)


def _reflected(which: str) -> Any:
    return lambda self, other: _binary(which, other, self)


def install() -> None:
    """Attach the operators to Tensor (idempotent)."""
    for which in ("add", "sub", "mul", "truediv", "matmul", "pow", "floordiv", "mod"):
        setattr(Tensor, f"__{which}__", _forward(which))
        setattr(Tensor, f"__r{which}__", _reflected(which))
    for which in ("lt", "le", "gt", "ge"):
        setattr(Tensor, f"__{which}__", _forward(which))
    Tensor.__neg__ = lambda self: _apply("neg", [self], {})  # type: ignore[assignment]
    Tensor.__getitem__ = _getitem  # type: ignore[assignment]


def _binary(which: str, a: Any, b: Any) -> Any:
    anchor = a if isinstance(a, Tensor) else b
    x, y = lift(a, anchor), lift(b, anchor)
    if which == "truediv":
        x, y = true_division_operands(x, y)
    return _apply(which, [x, y], {})


# True division of integers is of floats, as in NumPy and TensorFlow: float32 for 8- and 16-bit
# integers, float64 for 32- and 64-bit ones.
_TRUE_DIVISION = {"int8": "float32", "uint8": "float32", "int16": "float32",
                  "uint16": "float32", "int32": "float64", "uint32": "float64",
                  "int64": "float64", "uint64": "float64"}


def true_division_operands(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """x and y for `div`: both cast to a float dtype where both are integers of one dtype
    (`x / y` of int32 tensors is float64); other operands as given (the op checks them)."""
    to = _TRUE_DIVISION.get(x.dtype)
    if to is None or y.dtype != x.dtype:
        return x, y
    return (apply_op(builtin_registry(), "cast", [x], {"DstT": to}),
            apply_op(builtin_registry(), "cast", [y], {"DstT": to}))


def lift(value: Any, anchor: Optional[Tensor] = None) -> Tensor:
    """A Python or NumPy operand becomes a constant in the graph being built (a branch or loop
    body reading an outer tensor makes it there, not in the tensor's graph), of the tensor's
    dtype when the value is a plain Python number (TF1's rule: `x * 2` keeps x's dtype);
    without an anchor, a constant of the value's own dtype in the default graph."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "_as_graph_element"):  # a Variable: `x @ w` reads its value
        return value._as_graph_element()
    if anchor is None:
        return constant(value)
    dtype = anchor.dtype if isinstance(value, (int, float, bool, list, tuple)) else None
    with building_graph(anchor).as_default():  # inside a branch or loop body: made there
        return constant(value, dtype=dtype)


def _apply(which: str, inputs: list, attrs: dict) -> Any:
    return apply_op(builtin_registry(), OPERATORS[which], inputs, attrs)


def _getitem(tensor: Tensor, key: Any) -> Tensor:
    """NumPy's basic indexing, as TensorFlow's strided slices take it: ints, slices, `...` and
    None (a new axis of size 1), plus a scalar int tensor as an index (`x[i]` in a loop body).

    Ints and step-1 slices become one `slice` node (a slice's stop past the end of its axis stops
    there, as in Python, also where the axis's size is known only at run time: the slice's
    `clamp`); a tensor index and a slice of another step each become a `gather` on their axis;
    a final `reshape` drops the indexed axes and inserts the new ones."""
    keys = _expand_ellipsis(tensor, key if isinstance(key, tuple) else (key,))
    axis_keys = [k for k in keys if k is not None]
    if len(axis_keys) > tensor.ndim:
        raise OpsdkError(f"tensor '{tensor.name}': {len(axis_keys)} indices for a "
                         f"rank-{tensor.ndim} tensor")
    # a negative int or slice bound on an axis whose size is known only at run time is
    # counted from that size when the step runs, as a gather
    axis_keys = [_from_end(k) if tensor.shape[axis] is None and _negative(k) else k
                 for axis, k in enumerate(axis_keys)]
    basic = tuple(slice(None) if _is_tensor(k) or _stepped(k) or isinstance(k, _FromEnd) else k
                  for k in axis_keys)
    begin, size, kept = _slice_plan(tensor, basic)
    result = tensor
    if any(b != 0 for b in begin) or any(z != -1 for z in size):
        attrs: dict[str, Any] = {"begin": begin, "size": size}
        if any(tensor.shape[axis] is None and (size[axis] != -1 or begin[axis] > 0)
               for axis in kept):
            attrs["clamp"] = True  # x[:3] of a dim unknown until run time: at most 3, as in Python
        result = _apply("getitem", [tensor], attrs)
    dropped = {axis for axis in range(tensor.ndim) if axis not in kept}
    for axis, k in enumerate(axis_keys):
        if isinstance(k, _FromEnd):
            with tensor.graph.as_default():
                result = _gather(result, constant(np.asarray([k.index], np.int32)), axis)
            dropped.add(axis)
        elif _is_tensor(k):
            result = _gather(result, _scalar_index(tensor, axis, k), axis)
            dropped.add(axis)
        elif _stepped(k):
            result = _gather(result, _stepped_indices(tensor, axis, k), axis)
    # the output's axes: each kept axis in order, a new axis of size 1 where a None stands
    layout: list[Optional[int]] = []
    axis = 0
    for k in keys:
        if k is None:
            layout.append(None)
            continue
        if axis not in dropped:
            layout.append(axis)
        axis += 1
    layout += [a for a in range(axis, tensor.ndim) if a not in dropped]
    if layout == list(range(tensor.ndim)):
        return result if result is not tensor else _apply("identity", [tensor], {})
    return _reshaped(result, layout)


def _reshaped(value: Tensor, layout: list) -> Tensor:
    """value reshaped to its axes listed in `layout` (None: a new axis of size 1)."""
    dims = [1 if a is None else value.shape[a] for a in layout]
    if dims.count(None) <= 1:
        return _apply("reshape", [value], {"shape": [-1 if d is None else d for d in dims]})
    # several sizes known only at run time: read from the value's shape (a 1 appended for the
    # new axes)
    registry = builtin_registry()
    with value.graph.as_default():
        axes = constant(np.asarray([value.ndim if a is None else a for a in layout], np.int32))
        one = constant(np.ones(1, np.int32))
    sizes = apply_op(registry, "gather",
                     [apply_op(registry, "concat", [[apply_op(registry, "shape", [value], {}),
                                                     one]], {"axis": 0}), axes], {"axis": 0})
    return apply_op(registry, "reshape_dims", [value, sizes],
                    {"shape": [-1 if d is None else d for d in dims]})


def _expand_ellipsis(tensor: Tensor, keys: tuple) -> tuple:
    if tensor.ndim is None:
        raise OpsdkError(f"tensor '{tensor.name}': cannot index a tensor of unknown rank")
    dots = [i for i, k in enumerate(keys) if k is Ellipsis]
    if len(dots) > 1:
        raise OpsdkError(f"tensor '{tensor.name}': an index can have only one ellipsis (...)")
    if not dots:
        return keys
    used = sum(1 for k in keys if k is not None and k is not Ellipsis)
    fill = (slice(None),) * max(tensor.ndim - used, 0)
    return keys[:dots[0]] + fill + keys[dots[0] + 1:]


class _FromEnd:
    """A negative int index on an axis of run-time size (the gather kernel counts it)."""

    def __init__(self, index: int):
        self.index = index


def _negative(k: Any) -> bool:
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        return k < 0
    return isinstance(k, slice) and any(
        isinstance(b, (int, np.integer)) and b < 0 for b in (k.start, k.stop))


def _from_end(k: Any) -> Any:
    """The run-time form of a negative index: a gather of one index, or a slice taken by the
    stepped path (which clamps its bounds to the run-time size)."""
    if isinstance(k, slice):
        return slice(k.start, k.stop, 1 if k.step is None else k.step)
    return _FromEnd(int(k))


def _is_tensor(k: Any) -> bool:
    return isinstance(k, Tensor) or hasattr(k, "_as_graph_element")


def _stepped(k: Any) -> bool:
    """A slice taken as a gather of its indices: a step other than 1, or (step 1 given) negative
    bounds on an axis of run-time size."""
    return isinstance(k, slice) and k.step is not None and (k.step != 1 or _negative(k))


def _gather(value: Tensor, indices: Tensor, axis: int) -> Tensor:
    return apply_op(builtin_registry(), "gather", [value, indices], {"axis": axis})


def _scalar_index(tensor: Tensor, axis: int, k: Any) -> Tensor:
    """A scalar int tensor as a one-element index vector (its axis is then dropped); negative
    counts from the end, out of range fails when the step runs."""
    t = k._as_graph_element() if not isinstance(k, Tensor) else k
    if t.dtype not in ("int32", "int64") or (t.shape is not None and len(t.shape) != 0):
        raise OpsdkError(f"tensor '{tensor.name}': a tensor index must be an int32 or int64 "
                         f"scalar; '{t.name}' is {t.dtype} of shape "
                         f"{'unknown' if t.shape is None else list(t.shape)} (use gather for "
                         "several indices)")
    return apply_op(builtin_registry(), "reshape", [t], {"shape": [1]})


def _stepped_indices(tensor: Tensor, axis: int, k: slice) -> Tensor:
    """The indices a slice with a step picks on one axis, as Python's `slice.indices` gives
    them: constants when the axis's size is known, else an `arange` over bounds clamped to the
    size read at run time."""
    for bound in (k.start, k.stop, k.step):
        if bound is not None and not isinstance(bound, (int, np.integer)):
            raise OpsdkError(f"tensor '{tensor.name}': slice bounds must be ints, not "
                             f"{type(bound).__name__}")
    if k.step == 0:
        raise OpsdkError(f"tensor '{tensor.name}': a slice step cannot be zero")
    dim = tensor.shape[axis]
    if dim is not None:
        with tensor.graph.as_default():
            return constant(np.arange(*slice(k.start, k.stop, k.step).indices(dim),
                                      dtype=np.int32))
    registry = builtin_registry()
    with tensor.graph.as_default():
        axis_c = constant(np.int32(axis))
    n = apply_op(registry, "gather", [apply_op(registry, "shape", [tensor], {}), axis_c],
                 {"axis": 0})
    step = int(k.step)
    lo, hi = (0, n) if step > 0 else (-1, n - 1)

    def bound(value: Optional[int], default: Any) -> Any:
        if value is None:
            return default
        at = int(value) if value >= 0 else n + int(value)
        clamped = apply_op(registry, "minimum", [lift(at, n), lift(hi, n)], {})
        return apply_op(registry, "maximum", [clamped, lift(lo, n)], {})
    with tensor.graph.as_default():
        delta = constant(np.int32(step))
    first, stop = bound(k.start, lo if step > 0 else hi), bound(k.stop, hi if step > 0 else lo)
    return apply_op(registry, "arange", [lift(first, n), lift(stop, n), delta], {})


def _slice_plan(tensor: Tensor, key: Any) -> tuple[list[int], list[int], list[int]]:
    """(begin, size, axes kept) for `tensor[key]`, key a tuple of ints and step-1 slices."""
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
            for bound in (k.start, k.stop):
                if bound is not None and not isinstance(bound, (int, np.integer)):
                    raise OpsdkError(f"tensor '{tensor.name}': slice bounds must be ints, not "
                                     f"{type(bound).__name__} (slice a run-time range with "
                                     "gather)")
            start = 0 if k.start is None else _index(tensor, axis, int(k.start), dim)
            stop = None if k.stop is None else _index(tensor, axis, int(k.stop), dim)
            if dim is not None:
                start = min(max(start, 0), dim)
                stop = dim if stop is None else min(max(stop, start), dim)
            begin[axis] = start
            size[axis] = -1 if stop is None else max(stop - start, 0)
        else:
            raise OpsdkError(f"tensor '{tensor.name}': index {k!r} is not supported "
                             "(use ints, slices, ..., None and scalar int tensors)")
    return begin, size, kept


def _index(tensor: Tensor, axis: int, i: int, dim: Optional[int]) -> int:
    if i >= 0:
        return i
    if dim is None:
        raise OpsdkError(f"tensor '{tensor.name}': negative index {i} on axis {axis}, whose size is "
                         "unknown at graph-build time")
    return dim + i


install()
