"""More of TF1's math names, made of builtin ops (so gradients flow where TF's do): `tf.cumprod`,
`accumulate_n`, `saturate_cast`, `lbeta`, `is_non_decreasing`, `is_strictly_increasing`,
`searchsorted`, `repeat`, and
`tf.math`'s `xdivy`, `xlogy`, `xlog1py`, `multiply_no_nan`, `reciprocal_no_nan`,
`reduce_euclidean_norm` and `polyval`.

The `*_no_nan` and `x*` forms give 0 where TensorFlow's do, and so do their gradients: the
unselected side of each `where` is computed from a safe stand-in (1 in place of a zero), so no
inf or nan reaches a gradient through it.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args, dtypes
from opsdk.v1 import math_ops as _m
from opsdk.v1.composed import add_n, reduce_all
from opsdk.v1.tensors import convert_to_tensor as _t


def cumprod(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False,
            name: Optional[str] = None) -> Any:
    """Running products along `axis` (exclusive: each leaves its own element out; reverse: from
    the end), TF's signature. The gradient is exact where x holds zeros (TF's divides by x)."""
    return _ops.cumprod(_t(x), axis=args.static_int("cumprod", "axis", axis),
                        exclusive=bool(exclusive), reverse=bool(reverse), name=name)


def accumulate_n(inputs: Any, shape: Any = None, tensor_dtype: Any = None,
                 name: Optional[str] = None) -> Any:
    """The sum of the tensors (tf.add_n's result; shape and tensor_dtype, when given, are
    checked against them)."""
    values = [_t(v) for v in inputs]
    if tensor_dtype is not None and any(v.dtype != dtypes.name_of(tensor_dtype) for v in values):
        raise OpsdkError(f"accumulate_n: the inputs' dtypes {[v.dtype for v in values]} are not "
                         f"tensor_dtype {dtypes.name_of(tensor_dtype)}")
    if shape is not None:
        want = list(shape.as_list() if hasattr(shape, "as_list") else shape)
        for v in values:
            if v.shape is not None and (len(v.shape) != len(want) or any(
                    a is not None and b is not None and a != b for a, b in zip(v.shape, want))):
                raise OpsdkError(f"accumulate_n: an input of shape {list(v.shape)} is not of "
                                 f"the given shape {want}")
    return add_n(values, name=name)


def saturate_cast(value: Any, dtype: Any, name: Optional[str] = None) -> Any:
    """value cast to dtype, clamped first to the range dtype holds (where value's dtype holds
    more), so a float 300.0 becomes uint8 255 rather than wrapping around."""
    x, target = _t(value), np.dtype(dtypes.name_of(dtype))
    source = np.dtype(x.dtype)
    if target.kind in "iu" or (target.kind == "f" and source.kind == "f"
                               and target.itemsize < source.itemsize):
        info = np.iinfo(target) if target.kind in "iu" else np.finfo(target)
        low, high = info.min, info.max
        have = np.iinfo(source) if source.kind in "iu" else (
            np.finfo(source) if source.kind == "f" else None)
        if have is not None:
            # a bound past what the source dtype holds is no bound; one it holds only roughly
            # (a float's 2^31 - 1) is the largest source value not above it
            def bound(v: float, down: bool) -> Any:
                v = max(min(v, have.max), have.min)
                b = np.asarray(v).astype(source)
                if source.kind == "f" and (float(b) > v if down else float(b) < v):  # exactly
                    b = np.nextafter(b, -np.inf if down else np.inf, dtype=source)
                return b
            x = _ops.maximum(x, _t(np.asarray(bound(low, False), source)))
            x = _ops.minimum(x, _t(np.asarray(bound(high, True), source)))
    return _m.cast(x, dtype, name=name)


def lbeta(x: Any, name: Optional[str] = None) -> Any:
    """log |B(x)| over the last axis: the sum of lgamma(x) less lgamma of x's sum."""
    x = _t(x)
    return _ops.sub(_m.reduce_sum(_ops.lgamma(x), -1), _ops.lgamma(_m.reduce_sum(x, -1)),
                    name=name)


def _pairwise(name: str, test: str, x: Any) -> Any:
    x = _m.reshape(_t(x), [-1])
    ordered = getattr(_ops, test)(x[1:], x[:-1])
    return reduce_all(ordered, name=name)


def is_non_decreasing(x: Any, name: Optional[str] = None) -> Any:
    """True where each element of x (flattened) is at least the one before (an empty or
    one-element x is)."""
    return _pairwise(name, "greater_equal", x)


def is_strictly_increasing(x: Any, name: Optional[str] = None) -> Any:
    """True where each element of x (flattened) is greater than the one before."""
    return _pairwise(name, "greater", x)


def _zero_where(test: Any, value: Any, name: Optional[str]) -> Any:
    return _ops.where(test, _ops.zeros_like(value), value, name=name)


def _safe(test: Any, v: Any) -> Any:
    """v with 1 where test holds: the stand-in the unselected side computes with."""
    return _ops.where(test, _ops.ones_like(v), v)


def xdivy(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x / y, and 0 where x is 0 (whatever y is)."""
    a, b = _m._pair(x, y)
    zero = _ops.equal(a, _ops.zeros_like(a))
    return _zero_where(zero, _ops.div(a, _safe(zero, b)), name)


def xlogy(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x * log(y), and 0 where x is 0 (whatever y is)."""
    a, b = _m._pair(x, y)
    zero = _ops.equal(a, _ops.zeros_like(a))
    return _zero_where(zero, _ops.mul(a, _ops.log(_safe(zero, b))), name)


def xlog1py(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x * log1p(y), and 0 where x is 0 (whatever y is)."""
    a, b = _m._pair(x, y)
    zero = _ops.equal(a, _ops.zeros_like(a))
    return _zero_where(zero, _ops.mul(a, _ops.log1p(_ops.where(zero, _ops.zeros_like(b), b))),
                       name)


def multiply_no_nan(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x * y, and 0 where y is 0 (even where x is inf or nan)."""
    a, b = _m._pair(x, y)
    zero = _ops.equal(b, _ops.zeros_like(b))
    return _zero_where(zero, _ops.mul(_ops.where(zero, _ops.zeros_like(a), a), b), name)


def reciprocal_no_nan(x: Any, name: Optional[str] = None) -> Any:
    """1 / x, and 0 where x is 0."""
    x = _t(x)
    zero = _ops.equal(x, _ops.zeros_like(x))
    return _zero_where(zero, _ops.div(_ops.ones_like(x), _safe(zero, x)), name)


def reduce_euclidean_norm(input_tensor: Any, axis: Any = None, keepdims: bool = False,
                          name: Optional[str] = None) -> Any:
    """sqrt(sum(x^2)) over `axis` (all axes by default)."""
    x = _t(input_tensor)
    return _ops.sqrt(_m.reduce_sum(_ops.square(x), axis, keepdims), name=name)


def polyval(coeffs: Any, x: Any, name: Optional[str] = None) -> Any:
    """coeffs[0] * x^(n-1) + ... + coeffs[n-1], by Horner's rule; coeffs is a list of tensors
    (or numbers) as in TF; an empty list gives zeros like x."""
    x = _t(x)
    if not isinstance(coeffs, (list, tuple)):
        raise OpsdkError("polyval: coeffs must be a list of tensors or numbers, highest power "
                         "first")
    if not coeffs:
        return _ops.zeros_like(x, name=name)
    total = _m._pair(coeffs[0], x)[0]
    for c in coeffs[1:]:
        total = _ops.add(*_m._pair(_ops.mul(*_m._pair(total, x)), c))
    return _ops.identity(total, name=name) if name else total


def searchsorted(sorted_sequence: Any, values: Any, side: str = "left", out_type: Any = None,
                 name: Optional[str] = None) -> Any:
    """Per row, where each of values would go in sorted_sequence's row (`side` 'left' or
    'right'), as TF's; out_type int32 (default) or int64."""
    out = "int32" if out_type is None else dtypes.name_of(out_type)
    return _ops.searchsorted(_t(sorted_sequence), _t(values), side=side, dtype=out, name=name)


def repeat(input: Any, repeats: Any, axis: Any = None, name: Optional[str] = None) -> Any:  # noqa: A002
    """input's elements (flattened, without axis) or its slices along axis, each `repeats`
    times (an int, or one int per slice): a gather of known indices, so repeats and the axis's
    size must be known when the graph is built."""
    x = _t(input)
    if axis is None:
        x, axis = _m.reshape(x, [-1]), 0
    axis = args.static_int("repeat", "axis", axis)
    if x.shape is None or not -len(x.shape) <= axis < len(x.shape):
        raise OpsdkError(f"repeat: axis {axis} is out of range for input of shape "
                         f"{None if x.shape is None else list(x.shape)}")
    n = x.shape[axis]
    try:
        counts = np.asarray(repeats, dtype=np.int64)
    except (TypeError, ValueError):
        raise OpsdkError("repeat: repeats must be an int or a list of ints known when the graph "
                         "is built (a tensor of them is not supported)") from None
    if n is None:
        raise OpsdkError(f"repeat: the size of axis {axis} of input must be known when the "
                         "graph is built")
    if counts.ndim > 1 or (counts.ndim == 1 and counts.size not in (1, n)) or (counts < 0).any():
        raise OpsdkError(f"repeat: repeats must be one count >= 0 or {n} of them (one per "
                         f"slice), got {counts.tolist()}")
    index = np.repeat(np.arange(n, dtype=np.int64), counts.reshape(-1) if counts.ndim else counts)
    return _ops.gather(x, _t(index), axis=axis % len(x.shape), name=name)


TOP_LEVEL = {"searchsorted": searchsorted, "repeat": repeat, "cumprod": cumprod, "accumulate_n": accumulate_n, "saturate_cast": saturate_cast,
             "lbeta": lbeta, "is_non_decreasing": is_non_decreasing,
             "is_strictly_increasing": is_strictly_increasing}
MATH = {**{k: v for k, v in TOP_LEVEL.items() if k not in ("saturate_cast", "searchsorted",
                                                              "repeat")},
        "xdivy": xdivy, "xlogy": xlogy, "xlog1py": xlog1py, "multiply_no_nan": multiply_no_nan,
        "reciprocal_no_nan": reciprocal_no_nan, "reduce_euclidean_norm": reduce_euclidean_norm,
        "polyval": polyval}
