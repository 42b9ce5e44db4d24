"""TF1 functions made of opsdk's builtin ops, as TensorFlow's own Python defines most of them:
`add_n`, norms and gradient clipping (`global_norm`, `clip_by_norm`, `clip_by_global_norm`),
`size`, `sequence_mask`, `eye`, NaN and infinity tests, logical ops, the reductions
`reduce_all`, `count_nonzero` and `reduce_logsumexp`, `reverse`, `tile` and `pad` (gathers,
concatenations and broadcasts), `gather_nd`, `reverse_sequence` and `boolean_mask` (gathers of
flat positions), and
`sort` and `argsort` (through nn.top_k), and `Print` (print_tensor nodes). Gradients flow
through them as through the ops they are made of.
"""

from __future__ import annotations

import builtins
import collections
from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.control_flow.builders import compatible
from opsdk.v1 import args, graph_state, math_ops
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
        if not compatible(t.shape, first.shape):
            raise OpsdkError(f"add_n: '{t.name}' has shape {t.shape}, '{first.name}' "
                             f"{first.shape}: give tensors of one shape")
    if len(tensors) == 1:
        return _ops.identity(first, name=name)
    total = first
    for i, t in enumerate(tensors[1:], 1):
        total = _ops.add(total, t, name=name if i == len(tensors) - 1 else None)
    return total


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
    return _ops.greater(least, _ops.zeros_like(least), name=name)  # none: int32's largest


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


def _dim(x: Any, axis: int) -> Any:
    """x's size along axis: an int when known when the graph is built, else a 0-d int32."""
    if x.shape is not None and x.shape[axis] is not None:
        return int(x.shape[axis])
    return _ops.reshape(_ops.slice(math_ops.shape(x), begin=[axis], size=[1]), shape=[])


def _axis(who: str, x: Any, axis: Any) -> int:
    if x.shape is None:
        raise OpsdkError(f"{who}: '{x.name}' has an unknown rank")
    a = args.static_int(who, "axis", axis)
    if not -len(x.shape) <= a < len(x.shape):
        raise OpsdkError(f"{who}: axis {a} is out of range for '{x.name}' of rank {len(x.shape)}")
    return a % len(x.shape)


def reverse(tensor: Any, axis: Any, name: Optional[str] = None) -> Any:
    """tensor with the order of its elements reversed along each axis in `axis` (TF1's
    tf.reverse, reverse_v2): a gather of the indices n-1 .. 0."""
    x = _t(tensor)
    axes = args.static_dims("reverse", axis, "axis") if isinstance(axis, (list, tuple)) or (
        args.is_tensor(axis) and _t(axis).ndim == 1) else [axis]
    for a in sorted({_axis("reverse", x, a) for a in axes}):
        n = _dim(x, a)
        if isinstance(n, int):
            indices = opsdk.constant(np.arange(n - 1, -1, -1, dtype=np.int32))
        else:
            indices = math_ops.range(n - 1, -1, -1)
        x = _ops.gather(x, indices, axis=a)
    return _ops.identity(x, name=name)


def tile(input: Any, multiples: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """input repeated multiples[i] times along axis i. Multiples known when the graph is built
    concatenate copies; multiples known only at run time need input's shape known, and
    broadcast it."""
    x = _t(input)
    if x.shape is None:
        raise OpsdkError(f"tile: '{x.name}' has an unknown rank")
    rank = len(x.shape)
    if not args.is_tensor(multiples) and all(not args.is_tensor(m) for m in multiples):
        counts = [int(m) for m in multiples]
        if len(counts) != rank or any(m < 0 for m in counts):
            raise OpsdkError(f"tile: multiples {counts} must hold {rank} counts >= 0 for "
                             f"'{x.name}' of shape {x.shape}")
        for a, m in enumerate(counts):
            if m != 1:
                x = _ops.concat([x] * m, axis=a) if m else _ops.slice(
                    x, begin=[0] * rank, size=[0 if i == a else -1 for i in builtins.range(rank)])
        return _ops.identity(x, name=name)
    if None in x.shape:
        raise OpsdkError(f"tile: multiples known only at run time need '{x.name}''s shape known "
                         f"when the graph is built, got {x.shape}")
    counts = _ops.cast(_ops.reshape(_t(multiples) if args.is_tensor(multiples) else _ops.stack(
        [_ops.cast(_t(m), dtype="int32") for m in multiples]), shape=[rank]), dtype="int32")
    interleaved = [d for dim in x.shape for d in (1, int(dim))]
    spread = _ops.reshape(x, shape=interleaved)  # [1, d0, 1, d1, ...]
    ones = opsdk.constant(np.ones(rank, np.int32))
    grid = _ops.reshape(_ops.stack([counts, ones], axis=1), shape=[2 * rank])  # [m0, 1, m1, 1..]
    zeros = _ops.fill_dims(grid, opsdk.constant(np.zeros((), dtype=x.dtype)))
    sizes = _ops.mul(counts, opsdk.constant(np.asarray(x.shape, np.int32)))
    return _ops.reshape_dims(_ops.add(spread, zeros), sizes, shape=[-1] * rank, name=name)


def pad(tensor: Any, paddings: Any, mode: str = "CONSTANT", name: Optional[str] = None,
        constant_values: Any = 0) -> Any:
    """tensor with paddings[i] = [before, after] elements added along axis i (known when the
    graph is built): constant_values (CONSTANT), or tensor's elements mirrored without its edge
    (REFLECT) or with it (SYMMETRIC); a mirrored axis's size must be known."""
    x = _t(tensor)
    if x.shape is None:
        raise OpsdkError(f"pad: '{x.name}' has an unknown rank")
    rank, mode = len(x.shape), str(mode).upper()
    if mode not in ("CONSTANT", "REFLECT", "SYMMETRIC"):
        raise OpsdkError(f"pad: mode {mode!r}; give 'CONSTANT', 'REFLECT' or 'SYMMETRIC'")
    amounts = np.asarray(_static_paddings(paddings), dtype=np.int64)
    if amounts.size != 2 * rank or (amounts < 0).any():
        raise OpsdkError(f"pad: paddings must be {rank} pairs [before, after] >= 0 for "
                         f"'{x.name}' of shape {x.shape}, got {amounts.reshape(-1).tolist()}")
    fill = np.asarray(constant_values, dtype=x.dtype)  # a tensor only where a block needs one
    for a, (before, after) in enumerate(amounts.reshape(rank, 2).tolist()):
        if not before and not after:
            continue
        known = [(-1 if d is None else int(d) + (before + after if i == a else 0))
                 for i, d in enumerate(x.shape)]
        pieces = [_pad_piece(x, a, before, True, mode, fill), x,
                  _pad_piece(x, a, after, False, mode, fill)]
        x = _ops.concat([p for p in pieces if p is not None], axis=a)
        if tuple(x.shape) != tuple(None if d < 0 else d for d in known):
            # a block filled to a run-time shape: the sizes known when the graph is built back
            x = _ops.reshape_dims(x, math_ops.shape(x), shape=known)
    return _ops.identity(x, name=name)


def _static_paddings(paddings: Any) -> list:
    """The paddings' numbers, flat: a nested list, an array, or a tensor of constants."""
    if args.is_tensor(paddings):
        found = args.entries(paddings)
        if found is None or any(v is None for v in found):
            raise OpsdkError("pad: paddings must be known when the graph is built")
        return [int(v) for v in found]
    return [int(v) for v in np.asarray(paddings).reshape(-1).tolist()]


def _pad_piece(x: Any, axis: int, count: int, first: bool, mode: str, fill: np.ndarray) -> Any:
    """The `count` elements put before (first) or after x along axis, or None for none."""
    if not count:
        return None
    rank = len(x.shape)
    if mode == "CONSTANT":
        sizes = [count if i == axis else d for i, d in enumerate(x.shape)]
        if None not in sizes:
            return opsdk.constant(np.full(sizes, fill, dtype=x.dtype))
        dims = _ops.concat([_ops.slice(math_ops.shape(x), begin=[0], size=[axis]),
                            opsdk.constant(np.asarray([count], np.int32)),
                            _ops.slice(math_ops.shape(x), begin=[axis + 1], size=[-1])], axis=0)
        return _ops.fill_dims(dims, opsdk.constant(fill))
    n = x.shape[axis]
    if n is None:
        raise OpsdkError(f"pad: {mode} along axis {axis} needs its size known when the graph is "
                         f"built ('{x.name}' has shape {x.shape})")
    edge = 1 if mode == "REFLECT" else 0
    if count > n - edge:
        raise OpsdkError(f"pad: {mode} adds {count} along axis {axis} of size {n}; at most "
                         f"{n - edge}")
    start = edge if first else n - count - edge
    begin = [start if i == axis else 0 for i in builtins.range(rank)]
    size = [count if i == axis else -1 for i in builtins.range(rank)]
    return reverse(_ops.slice(x, begin=begin, size=size), axis)


def _sizes(x: Any, start: int, stop: Optional[int] = None) -> Any:
    """x's run-time sizes along axes start..stop as an int64 vector."""
    dims = _ops.cast(math_ops.shape(x), dtype="int64")
    end = len(x.shape) if stop is None else stop
    return _ops.slice(dims, begin=[start], size=[max(end - start, 0)])


def _size_product(x: Any, start: int, stop: int) -> Any:
    """The product of x's run-time sizes along axes start..stop - 1, a 0-d int64."""
    sizes = _sizes(x, start, stop)
    product = None
    for i in builtins.range(stop - start):
        d = _ops.reshape(_ops.slice(sizes, begin=[i], size=[1]), shape=[])
        product = d if product is None else _ops.mul(product, d)
    return product


def _static_or(x: Any, start: int, stop: Optional[int] = None) -> list:
    return [-1 if d is None else int(d) for d in x.shape[start:stop]]


def gather_nd(params: Any, indices: Any, name: Optional[str] = None, batch_dims: int = 0) -> Any:
    """params at the coordinates of indices' last axis: [..., m] coordinates pick elements (m =
    params' rank) or slices (m smaller). A gather of a flat index, so a gradient flows to the
    elements picked; m must be known when the graph is built."""
    if batch_dims:
        raise OpsdkError("gather_nd: batch_dims is not supported by opsdk.v1")
    p, idx = _t(params), _t(indices)
    if idx.dtype not in ("int32", "int64"):
        raise OpsdkError(f"gather_nd: indices must be int32 or int64, got {idx.dtype}")
    if idx.shape is None or not idx.shape or idx.shape[-1] is None or p.shape is None:
        raise OpsdkError("gather_nd: indices' last axis and params' rank must be known when the "
                         "graph is built")
    m, rank = int(idx.shape[-1]), len(p.shape)
    if m > rank:
        raise OpsdkError(f"gather_nd: coordinates of {m} entries for params of rank {rank}")
    idx = _ops.cast(idx, dtype="int64")
    flat = None
    for j in builtins.range(m):  # the flat position: sum of coordinate j * the sizes after it
        coordinate = _ops.reshape(_ops.slice(idx, begin=[0] * (len(idx.shape) - 1) + [j],
                                             size=[-1] * (len(idx.shape) - 1) + [1]),
                                  shape=_static_or(idx, 0, -1) or [])
        if j + 1 < m:
            after = p.shape[j + 1:m]
            stride = (opsdk.constant(np.int64(np.prod(after, dtype=np.int64)))
                      if None not in after else _size_product(p, j + 1, m))
            coordinate = _ops.mul(coordinate, stride)
        flat = coordinate if flat is None else _ops.add(flat, coordinate)
    rest = _static_or(p, m)
    if -1 in rest:
        table = _ops.reshape_dims(p, _ops.concat([opsdk.constant(np.asarray([-1], np.int64)),
                                                 _sizes(p, m)], axis=0), shape=[-1, *rest])
    else:
        table = _ops.reshape(p, shape=[-1, *rest])
    return _ops.gather(table, flat, axis=0, name=name)


def reverse_sequence(input: Any, seq_lengths: Any, seq_axis: Any = None,  # noqa: A002
                     batch_axis: Any = None, name: Optional[str] = None, seq_dim: Any = None,
                     batch_dim: Any = None) -> Any:
    """Per slice b along batch_axis, its first seq_lengths[b] entries along seq_axis reversed and
    the rest kept (a bidirectional RNN's backward pass over sequences of their own lengths). A
    gather, so a gradient reaches each entry where it came from."""
    x, lengths = _t(input), _t(seq_lengths)
    seq = seq_dim if seq_axis is None else seq_axis
    batch = 0 if (batch_axis is None and batch_dim is None) else (
        batch_dim if batch_axis is None else batch_axis)
    if seq is None:
        raise OpsdkError("reverse_sequence: give seq_axis")
    if x.shape is None:
        raise OpsdkError("reverse_sequence: input's rank must be known when the graph is "
                         "built")
    s, b = _axis("reverse_sequence", x, seq), _axis("reverse_sequence", x, batch)
    if s == b:
        raise OpsdkError(f"reverse_sequence: seq_axis and batch_axis are both {s}")
    if lengths.dtype not in ("int32", "int64") or lengths.shape is None or len(lengths.shape) != 1:
        raise OpsdkError("reverse_sequence: seq_lengths must be a vector of int32 or int64")
    # batch first, sequence second, then the rest in order; back at the end
    perm = [b, s] + [i for i in builtins.range(len(x.shape)) if i not in (b, s)]
    moved = _ops.transpose(x, perm=perm) if perm != list(builtins.range(len(x.shape))) else x
    dims = math_ops.shape(moved, out_type="int64")
    count = _ops.gather(dims, opsdk.constant(np.int64(1)))             # T
    steps = _ops.cast(math_ops.range(count), dtype="int64")            # [T]: t
    length = _ops.reshape(_ops.cast(lengths, dtype="int64"), shape=[-1, 1])  # [B, 1]
    inside = _ops.less(_ops.reshape(steps, shape=[1, -1]), length)     # [B, T]
    flipped = _ops.sub(_ops.sub(length, opsdk.constant(np.int64(1))), steps)
    source = _ops.where(inside, flipped, _ops.add(_ops.zeros_like(flipped), steps))  # [B, T]
    batches = _ops.gather(dims, opsdk.constant(np.int64(0)))           # B
    rows = _ops.reshape(_ops.cast(math_ops.range(batches), dtype="int64"), shape=[-1, 1])
    flat = _ops.reshape(_ops.add(_ops.mul(rows, count), source), shape=[-1])  # b * T + source
    rest = [moved.shape[i] for i in builtins.range(2, len(moved.shape))]
    if None in rest:
        raise OpsdkError("reverse_sequence: input's sizes beyond the batch and sequence axes "
                         "must be known when the graph is built")
    table = _ops.reshape(moved, shape=[-1, *rest])
    picked = _ops.reshape_dims(_ops.gather(table, flat, axis=0), dims,
                               shape=[-1 if d is None else d for d in moved.shape])
    if moved is x:
        return _ops.identity(picked, name=name)
    return _ops.transpose(picked, perm=list(np.argsort(perm)), name=name)


def boolean_mask(tensor: Any, mask: Any, name: str = "boolean_mask", axis: Any = None) -> Any:
    """tensor's entries (along axis .. axis + mask's rank) where mask is true, in row-major
    order: those axes become one of the number of true entries. A gather, so a gradient flows
    to the entries kept."""
    x, keep = _t(tensor), _t(mask)
    if keep.dtype != "bool":
        raise OpsdkError(f"boolean_mask: mask must be bool, got {keep.dtype}")
    if x.shape is None or keep.shape is None or not keep.shape:
        raise OpsdkError("boolean_mask: tensor's and mask's ranks must be known (mask rank >= 1)")
    a = 0 if axis is None else _axis("boolean_mask", x, axis)
    k = len(keep.shape)
    if a + k > len(x.shape):
        raise OpsdkError(f"boolean_mask: a mask of rank {k} at axis {a} exceeds tensor "
                         f"'{x.name}' of rank {len(x.shape)}")
    known = [*_static_or(x, 0, a), -1, *_static_or(x, a + k)]
    dims = _ops.concat([_sizes(x, 0, a), opsdk.constant(np.asarray([-1], np.int64)),
                        _sizes(x, a + k)], axis=0)
    folded = _ops.reshape_dims(x, dims, shape=known)
    picked = _ops.reshape(_ops.where_indices(_ops.reshape(keep, shape=[-1])), shape=[-1])
    return _ops.gather(folded, picked, axis=a, name=name)


def argsort(values: Any, axis: int = -1, direction: str = "ASCENDING", stable: bool = False,
            name: Optional[str] = None) -> Any:
    """The int32 indices that sort `values` along axis (equal values in index order: stable
    either way)."""
    return _sorted("argsort", values, axis, direction, name)[1]


def sort(values: Any, axis: int = -1, direction: str = "ASCENDING",
         name: Optional[str] = None) -> Any:
    """`values` sorted along axis; a gather, so a gradient reaches each element where it came
    from."""
    return _sorted("sort", values, axis, direction, name)[0]


def _sorted(who: str, values: Any, axis: Any, direction: str, name: Optional[str]) -> tuple:
    """(sorted values, indices) through nn.top_k over the last axis (of -x for ascending), the
    axis moved last and back."""
    from opsdk.v1 import nn

    x = _t(values)
    a = _axis(who, x, axis)
    direction = str(direction).upper()
    if direction not in ("ASCENDING", "DESCENDING"):
        raise OpsdkError(f"{who}: direction {direction!r}; give 'ASCENDING' or 'DESCENDING'")
    if x.dtype == "bool" or (direction == "ASCENDING" and x.dtype.startswith("uint")):
        raise OpsdkError(f"{who}: values of dtype {x.dtype} are not supported by opsdk.v1")
    last = len(x.shape) - 1
    perm = [i for i in builtins.range(len(x.shape)) if i != a] + [a]
    moved = x if a == last else _ops.transpose(x, perm=perm)
    if moved.shape[-1] is None:
        raise OpsdkError(f"{who}: the size of axis {a} of '{x.name}' must be known when the "
                         "graph is built")
    key = _ops.neg(moved) if direction == "ASCENDING" else moved
    _, indices = nn.top_k(key, int(moved.shape[-1]))
    picked = nn.top_k_values(moved, indices)
    if a != last:
        back = list(np.argsort(perm))
        picked, indices = (_ops.transpose(picked, perm=back), _ops.transpose(indices, perm=back))
    return _ops.identity(picked, name=name), indices


def Print(input_: Any, data: Any, message: Optional[str] = None, first_n: Any = None,  # noqa: N802 (TF's name)
          summarize: Any = None, name: Optional[str] = None) -> Any:
    """input_ unchanged, printing `message` and each tensor of `data` (its first `summarize`
    elements, 3 by default) to standard error, on one line, whenever it is computed: a chain of
    `print_tensor` nodes, each passing input_ on. first_n is not honoured: every run prints."""
    x = _t(input_)
    items = [_t(item) for item in (data if isinstance(data, (list, tuple)) else [data])]
    count = 3 if summarize is None else args.static_int("Print", "summarize", summarize)
    out = x
    for i, item in enumerate(items):
        last = i == len(items) - 1
        strings = graph_state.table(item.graph, "decoders").get(item.name) is not None
        out = _ops.print_tensor(out, item, message=str(message or "") if i == 0 else "",
                                summarize=count, end=last, text=strings,
                                name=name if last else None)
    return out if items else _ops.identity(x, name=name)


NAMES = ("add_n", "global_norm", "clip_by_norm", "clip_by_global_norm", "size", "sequence_mask",
         "eye", "is_nan", "is_inf", "is_finite", "logical_not", "logical_and", "logical_or",
         "logical_xor", "reduce_all", "count_nonzero", "reduce_logsumexp", "reverse", "tile",
         "pad", "gather_nd", "reverse_sequence", "boolean_mask", "argsort", "sort", "Print")


def einsum(equation: str, *inputs: Any, **kwargs: Any) -> Any:
    """TF's einsum over the builtin op `einsum`: the implicit form ("ij,jk", its output the
    letters used once, in alphabetical order) is made explicit first. Each term's letters must be
    distinct and `...` is not taken (the op says so, naming the equation)."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise OpsdkError(f"einsum: unexpected arguments {', '.join(sorted(kwargs))}")
    if not isinstance(equation, str):
        raise OpsdkError(f"einsum: equation must be a string, not {type(equation).__name__}")
    equation = equation.replace(" ", "")
    xs = [_t(x) for x in (inputs[0] if len(inputs) == 1 and isinstance(inputs[0], (list, tuple))
                          else inputs)]
    if "..." in equation:
        equation = _without_ellipsis(equation, xs)
    if "->" not in equation:
        letters = [c for c in equation if c.isalpha()]
        equation += "->" + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return _ops.einsum(xs, equation=equation, name=name)


def _without_ellipsis(equation: str, xs: list) -> str:
    """The equation with each `...` spelled as letters no term uses, from the operands' ranks
    (right-aligned as NumPy's: an operand with fewer such dims takes the last letters). The
    dims behind one letter must have one size: `...` does not broadcast a 1 against n here."""
    terms, arrow, out = equation.partition("->")
    inputs = terms.split(",")
    if len(inputs) != len(xs):
        raise OpsdkError(f"einsum: equation {equation!r} has {len(inputs)} operand terms for "
                         f"{len(xs)} operands")
    spare = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             if c not in equation]
    counts = []
    for term, x in zip(inputs, xs):
        if "..." not in term:
            counts.append(0)
            continue
        if x.shape is None:
            raise OpsdkError(f"einsum: '...' needs the rank of '{x.name}' known when the graph "
                             "is built")
        named = len(term.replace("...", ""))
        if len(x.shape) < named:
            raise OpsdkError(f"einsum: term {term!r} names {named} dims of '{x.name}', which has "
                             f"rank {len(x.shape)}")
        counts.append(len(x.shape) - named)
    width = max(counts, default=0)
    if width > len(spare):
        raise OpsdkError(f"einsum: '...' stands for {width} dims; at most {len(spare)} letters "
                         "are free")
    letters = "".join(spare[:width])
    spelled = [t.replace("...", letters[width - n:]) for t, n in zip(inputs, counts)]
    if width and "..." not in out:  # TF sums no '...' dims away: it refuses the equation
        raise OpsdkError(f"einsum: {equation!r}: its '...' stands for {width} dims, which the "
                         "output must keep, as TF's einsum asks (write '...' in the output: "
                         "'...ij,...jk->...ik')")
    if arrow:
        out = out.replace("...", letters)
    else:
        used = [c for c in "".join(spelled) if c.isalpha()]
        out = "".join(sorted(c for c in set(used) if used.count(c) == 1))
    return ",".join(spelled) + "->" + out


Unique = collections.namedtuple("Unique", ["y", "idx"])
UniqueWithCounts = collections.namedtuple("UniqueWithCounts", ["y", "idx", "count"])


def unique(x: Any, out_idx: Any = "int32", name: Optional[str] = None) -> Any:
    """(y, idx): x's distinct values in the order they first appear, and per element of x the
    position of its value in y (the builtin op `unique`, x 1-d)."""
    y, idx, _ = _ops.unique(_t(x), dtype=name_of(out_idx), name=name)
    return Unique(y, idx)


def unique_with_counts(x: Any, out_idx: Any = "int32", name: Optional[str] = None) -> Any:
    """`unique` and how often each value appears."""
    return UniqueWithCounts(*_ops.unique(_t(x), dtype=name_of(out_idx), name=name))


def slice_(input_: Any, begin: Any, size: Any, name: Optional[str] = None) -> Any:
    """TF's `tf.slice(input_, begin, size)`: the block of `input_` starting at `begin` with
    `size` entries per axis (-1: to the end). Entries known when the graph is built make one
    `slice` node; an entry known only at run time (a tensor) makes a gather of an `arange` on its
    axis. A block past the end is an error, as TF's."""
    x = _t(input_)
    b, s = args.dims("slice", begin, "begin"), args.dims("slice", size, "size")
    if len(b.known) != len(s.known) or (x.ndim is not None and len(b.known) != x.ndim):
        raise OpsdkError(f"slice: begin has {len(b.known)} entries and size {len(s.known)}; "
                         f"give one per axis of '{x.name}' (rank {x.ndim})")
    for arg, known in (("begin", b.known), ("size", s.known)):
        low = 0 if arg == "begin" else -1
        bad = [v for v in known if v is not None and v < low]
        if bad:
            raise OpsdkError(f"slice: {arg} entries must be >= {low}, got {known}")
    late = [i for i in builtins.range(len(b.known)) if b.known[i] is None or s.known[i] is None]
    if not late:
        return _ops.slice(x, begin=b.known, size=s.known, name=name)
    # the axes known now in one slice node, then a gather per axis known at run time
    result = _ops.slice(x, begin=[0 if i in late else b.known[i] for i in builtins.range(x.ndim)],
                        size=[-1 if i in late else s.known[i] for i in builtins.range(x.ndim)])
    begins, sizes = b.tensor(), s.tensor()
    for i in late:
        first = math_ops.gather(begins, i)
        count = math_ops.gather(sizes, i)
        to_end = math_ops.gather(math_ops.shape(result, out_type="int32"), i)
        stop = math_ops.where(math_ops.less(count, 0), to_end, _ops.add(first, count))
        indices = math_ops.range(first, stop)
        result = math_ops.gather(result, indices, axis=i,
                                 name=name if i == late[-1] else None)
    return result


def tensordot(a: Any, b: Any, axes: Any, name: Optional[str] = None) -> Any:
    """TF's `tf.tensordot`: the sum over `axes` of a's and b's products, as one `einsum`.
    `axes` is an int N (a's last N axes with b's first N) or a pair of axis lists (or ints);
    both ranks must be known when the graph is built."""
    x, y = _t(a), _t(b)
    if x.shape is None or y.shape is None:
        raise OpsdkError("tensordot: the ranks of a and b must be known when the graph is built")
    rank_a, rank_b = len(x.shape), len(y.shape)
    if isinstance(axes, (int, np.integer)) or (args.is_tensor(axes) and _t(axes).ndim == 0):
        n = args.static_int("tensordot", "axes", axes)
        if not 0 <= n <= min(rank_a, rank_b):
            raise OpsdkError(f"tensordot: axes={n}, but a has rank {rank_a} and b {rank_b}")
        pairs = (list(builtins.range(rank_a - n, rank_a)), list(builtins.range(n)))
    elif isinstance(axes, (list, tuple)) and len(axes) == 2:
        pairs = tuple([axes[i]] if isinstance(axes[i], (int, np.integer)) else
                      list(args.static_dims("tensordot", axes[i], "axes")) for i in (0, 1))
    else:
        raise OpsdkError(f"tensordot: axes must be an int or a pair of axis lists, got {axes!r}")
    on_a = [_axis("tensordot", x, i) for i in pairs[0]]
    on_b = [_axis("tensordot", y, i) for i in pairs[1]]
    if len(on_a) != len(on_b) or len(set(on_a)) != len(on_a) or len(set(on_b)) != len(on_b):
        raise OpsdkError(f"tensordot: axes {pairs[0]} of a and {pairs[1]} of b must be as many "
                         "and distinct")
    for i, j in zip(on_a, on_b):
        if x.shape[i] is not None and y.shape[j] is not None and x.shape[i] != y.shape[j]:
            raise OpsdkError(f"tensordot: axis {i} of a has size {x.shape[i]}, axis {j} of b "
                             f"{y.shape[j]}")
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    term_a = [next(letters) for _ in builtins.range(rank_a)]
    term_b = [next(letters) for _ in builtins.range(rank_b)]
    for i, j in zip(on_a, on_b):
        term_b[j] = term_a[i]
    out = ([term_a[i] for i in builtins.range(rank_a) if i not in on_a]
           + [term_b[j] for j in builtins.range(rank_b) if j not in on_b])
    return _ops.einsum([x, y], equation=f"{''.join(term_a)},{''.join(term_b)}->{''.join(out)}",
                       name=name)
