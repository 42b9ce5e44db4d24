"""TF1 functions made of opsdk's builtin ops, as TensorFlow's own Python defines most of them:
`add_n`, norms and gradient clipping (`global_norm`, `clip_by_norm`, `clip_by_global_norm`),
`size`, `sequence_mask`, `eye`, NaN and infinity tests, logical ops, and the reductions
`reduce_all`, `count_nonzero` and `reduce_logsumexp`. Gradients flow through them as through
the ops they are made of.
"""

from __future__ import annotations

import builtins
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args, math_ops
from opsdk.v1.dtypes import name_of
from opsdk.v1.tensors import convert_to_tensor as _t


def add_n(inputs: Any, name: Optional[str] = None) -> Any:
    """The elementwise sum of a non-empty list of tensors of one dtype and shape."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise OpsdkError("add_n: give a non-empty list of tensors")
    tensors = [_t(x) for x in inputs]
    first = tensors[0]
    for t in tensors[1:]:
        if t.dtype != first.dtype:
            raise OpsdkError(f"add_n: '{t.name}' is {t.dtype}, '{first.name}' {first.dtype}: "
                             "give tensors of one dtype")
        if not _same_shape(t.shape, first.shape):
            raise OpsdkError(f"add_n: '{t.name}' has shape {t.shape}, '{first.name}' "
                             f"{first.shape}: give tensors of one shape")
    if len(tensors) == 1:
        return _ops.identity(first, name=name)
    total = first
    for i, t in enumerate(tensors[1:], 1):
        total = _ops.add(total, t, name=name if i == len(tensors) - 1 else None)
    return total


def _same_shape(a: Optional[tuple], b: Optional[tuple]) -> bool:
    """Whether two static shapes may be the same (unknown dims and ranks agree with anything)."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def global_norm(t_list: Any, name: Optional[str] = None) -> Any:
    """sqrt(sum of every element squared) over the tensors of the list (None entries left out)."""
    tensors = _tensor_list("global_norm", t_list)
    if not tensors:
        raise OpsdkError("global_norm: the list holds no tensor")
    squares = [math_ops.reduce_sum(_ops.square(t)) for t in tensors]
    dtype = tensors[0].dtype
    total = add_n([_ops.cast(s, dtype=dtype) for s in squares])
    return _ops.sqrt(total, name=name)


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: Optional[str] = None) -> Any:
    """t scaled so that its L2 norm (over `axes`, None: all) is at most clip_norm:
    t * clip_norm / max(norm, clip_norm), a norm of 0 leaving t as it is (with a gradient)."""
    t = _t(t)
    l2sum = math_ops.reduce_sum(_ops.square(t), axes, keepdims=True)
    positive = math_ops.greater(l2sum, 0.0)
    safe = _ops.where(positive, l2sum, _ops.ones_like(l2sum))
    l2norm = _ops.where(positive, _ops.sqrt(safe), l2sum)
    clip = math_ops.cast(clip_norm, t.dtype)
    return _ops.div(_ops.mul(t, clip), math_ops.maximum(l2norm, clip), name=name)


def clip_by_global_norm(t_list: Any, clip_norm: Any, use_norm: Any = None,
                        name: Optional[str] = None) -> tuple[list, Any]:
    """(the tensors scaled by clip_norm / max(global_norm, clip_norm), the global norm), None
    entries kept as None; a norm that is infinite or NaN makes every value NaN, as in TF."""
    if not isinstance(t_list, (list, tuple)):
        raise OpsdkError("clip_by_global_norm: t_list must be a list or tuple of tensors, as "
                         "compute_gradients or tf.gradients give")
    tensors = _tensor_list("clip_by_global_norm", t_list)
    norm = global_norm(tensors) if use_norm is None else _t(use_norm)
    dtype = norm.dtype
    clip = math_ops.cast(clip_norm, dtype)
    one = opsdk.constant(np.asarray(1.0, dtype=dtype))
    scale = _ops.mul(clip, math_ops.minimum(_ops.div(one, norm), _ops.div(one, clip)))
    clipped = [None if t is None else _ops.mul(_t(t), _ops.cast(scale, dtype=_t(t).dtype))
               for t in t_list]
    return clipped, norm


def _tensor_list(who: str, t_list: Any) -> list:
    if not isinstance(t_list, (list, tuple)):
        raise OpsdkError(f"{who}: give a list of tensors")
    return [_t(t) for t in t_list if t is not None]


def size(input: Any, name: Optional[str] = None, out_type: Any = "int32") -> Any:  # noqa: A002
    """The number of elements: a constant when the shape is known when the graph is built, else
    the product of the run-time dims."""
    x, dtype = _t(input), name_of(out_type)
    if x.shape is not None and None not in x.shape:
        return opsdk.constant(np.asarray(int(np.prod(x.shape, dtype=np.int64)), dtype=dtype),
                              name=name)
    if x.shape is None:  # an unknown rank: count the elements
        return math_ops.reduce_sum(_ops.cast(_ops.ones_like(x), dtype=dtype), name=name)
    dims = _ops.cast(math_ops.shape(x), dtype=dtype)
    product = None
    for i in builtins.range(len(x.shape)):
        d = _ops.reshape(_ops.slice(dims, begin=[i], size=[1]), shape=[])
        product = d if product is None else _ops.mul(product, d)
    return _ops.identity(product if product is not None else opsdk.constant(
        np.asarray(1, dtype=dtype)), name=name)


def sequence_mask(lengths: Any, maxlen: Any = None, dtype: Any = "bool",
                  name: Optional[str] = None) -> Any:
    """mask[..., j] = j < lengths[...]: `lengths` with a last axis of maxlen (default: the
    largest length) more."""
    lengths = _t(lengths)
    if lengths.dtype not in ("int32", "int64"):
        raise OpsdkError(f"sequence_mask: lengths must be int32 or int64, got {lengths.dtype}")
    limit = math_ops.reduce_max(lengths) if maxlen is None else maxlen
    positions = math_ops.range(0, limit, 1, dtype=lengths.dtype) if args.is_tensor(limit) \
        else opsdk.constant(np.arange(int(limit), dtype=lengths.dtype))
    positions = _ops.cast(positions, dtype=lengths.dtype)
    mask = math_ops.less(positions, math_ops.expand_dims(lengths, -1))
    dtype = name_of(dtype)
    return _ops.identity(mask, name=name) if dtype == "bool" else _ops.cast(mask, dtype=dtype,
                                                                              name=name)


def eye(num_rows: Any, num_columns: Any = None, batch_shape: Any = None, dtype: Any = "float32",
        name: Optional[str] = None) -> Any:
    """The identity matrix (num_rows x num_columns, default square), repeated over batch_shape;
    its sizes must be known when the graph is built."""
    rows = args.static_int("eye", "num_rows", num_rows)
    cols = rows if num_columns is None else args.static_int("eye", "num_columns", num_columns)
    batch = [] if batch_shape is None else args.static_dims("eye", batch_shape, "batch_shape")
    matrix = np.eye(rows, cols, dtype=name_of(dtype))
    return opsdk.constant(np.broadcast_to(matrix, (*batch, rows, cols)).copy(), name=name)


def is_nan(x: Any, name: Optional[str] = None) -> Any:
    x = _t(x)
    return _ops.not_equal(x, x, name=name)


def is_inf(x: Any, name: Optional[str] = None) -> Any:
    x = _t(x)
    return _ops.equal(_ops.abs(x), opsdk.constant(np.asarray(np.inf, dtype=x.dtype)), name=name)


def is_finite(x: Any, name: Optional[str] = None) -> Any:
    """|x| < inf: false for infinities and NaN (which compares false)."""
    x = _t(x)
    return _ops.less(_ops.abs(x), opsdk.constant(np.asarray(np.inf, dtype=x.dtype)), name=name)


def _bools(who: str, *values: Any) -> list:
    tensors = [_t(v) for v in values]
    for t in tensors:
        if t.dtype != "bool":
            raise OpsdkError(f"{who}: '{t.name}' is {t.dtype}; give bool tensors")
    return tensors


def logical_not(x: Any, name: Optional[str] = None) -> Any:
    (x,) = _bools("logical_not", x)
    return _ops.equal(x, opsdk.constant(np.asarray(False)), name=name)


def logical_and(x: Any, y: Any, name: Optional[str] = None) -> Any:
    x, y = _bools("logical_and", x, y)
    both = _ops.minimum(_ops.cast(x, dtype="int8"), _ops.cast(y, dtype="int8"))
    return _ops.cast(both, dtype="bool", name=name)


def logical_or(x: Any, y: Any, name: Optional[str] = None) -> Any:
    x, y = _bools("logical_or", x, y)
    either = _ops.maximum(_ops.cast(x, dtype="int8"), _ops.cast(y, dtype="int8"))
    return _ops.cast(either, dtype="bool", name=name)


def logical_xor(x: Any, y: Any, name: str = "LogicalXor") -> Any:
    x, y = _bools("logical_xor", x, y)
    return _ops.not_equal(x, y, name=name)


def reduce_all(input_tensor: Any, axis: Any = None, keepdims: Any = None,
               name: Optional[str] = None, reduction_indices: Any = None,
               keep_dims: Any = None) -> Any:
    """Whether every element (over `axis`) is true."""
    as_int = _ops.cast(_t(input_tensor), dtype="int32")
    least = math_ops.reduce_min(as_int, axis, keepdims, None, reduction_indices, keep_dims)
    return _ops.cast(least, dtype="bool", name=name)


def count_nonzero(input_tensor: Any = None, axis: Any = None, keepdims: Any = None,
                  dtype: Any = "int64", name: Optional[str] = None,
                  reduction_indices: Any = None, keep_dims: Any = None, input: Any = None) -> Any:  # noqa: A002
    """How many elements (over `axis`) are not zero (not False)."""
    x = _t(input if input_tensor is None else input_tensor)
    zero = opsdk.constant(np.zeros((), dtype=x.dtype))
    counted = _ops.cast(_ops.not_equal(x, zero), dtype=name_of(dtype))
    return math_ops.reduce_sum(counted, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_logsumexp(input_tensor: Any, axis: Any = None, keepdims: Any = None,
                     name: Optional[str] = None, reduction_indices: Any = None,
                     keep_dims: Any = None) -> Any:
    """log(sum(exp(x))) over `axis`, computed as TF does: the largest value is taken out first
    (its gradient stopped; an infinite one replaced by 0) so no exp overflows."""
    x = _t(input_tensor)
    keep = bool(keepdims if keepdims is not None else keep_dims)
    top = math_ops.reduce_max(x, axis, True, None, reduction_indices)
    top = math_ops.stop_gradient(_ops.where(is_finite(top), top, _ops.zeros_like(top)))
    summed = math_ops.reduce_sum(_ops.exp(_ops.sub(x, top)), axis, keep, None,
                                 reduction_indices)
    shift = top if keep else math_ops.reduce_max(top, axis, False, None, reduction_indices)
    return _ops.add(_ops.log(summed), shift, name=name)


NAMES = ("add_n", "global_norm", "clip_by_norm", "clip_by_global_norm", "size", "sequence_mask",
         "eye", "is_nan", "is_inf", "is_finite", "logical_not", "logical_and", "logical_or",
         "logical_xor", "reduce_all", "count_nonzero", "reduce_logsumexp")
