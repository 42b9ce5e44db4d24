"""More of TF1's top-level names, each made of the ops opsdk.v1 already has (so gradients flow
where TF's do): conversions and arithmetic (`to_double`, `scalar_mul`, `div_no_nan`, `rint`),
array manipulation (`meshgrid`, `roll`, `strided_slice`, `space_to_depth`, `depth_to_space`,
`space_to_batch_nd`, `batch_to_space_nd`,
`random_crop`, `batch_gather`, `dynamic_partition`, `dynamic_stitch`, `identity_n`, `shape_n`,
`ensure_shape`), counting (`bincount`, `histogram_fixed_width`, `confusion_matrix`), index
arithmetic (`invert_permutation`, `unravel_index`, `setdiff1d`), checks (`check_numerics`,
`verify_tensor_all_finite`, `add_check_numerics_ops`, `assert_rank`, `assert_rank_at_least`,
`assert_scalar`, `assert_type`, `assert_integer`, `is_tensor`), `glorot_normal_initializer`,
`orthogonal_initializer`, `get_local_variable`, `make_template` and `hessians`.

Sizes that an op's result takes from its inputs' values (a histogram's bins from the largest
value, a stitched tensor's rows from the largest index) are read when the step runs, through
the builtin `scatter_nd` (opdefs/builtin/sparse.yaml).
"""

from __future__ import annotations

import builtins
from typing import Any, Callable, Optional, Sequence

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.py_func import py_func_node, takes_step
from opsdk.v1 import args, dtypes, errors, scopes
from opsdk.v1 import session as _session
from opsdk.v1 import strings as _strings
from opsdk.v1 import math_ops as _m
from opsdk.v1.composed import is_finite, logical_not, pad, reduce_all
from opsdk.v1.tensors import convert_to_tensor as _t, zeros


def _int64(x: Any) -> Any:
    x = _t(x)
    return x if x.dtype == "int64" else _ops.cast(x, dtype="int64")


def _vector(*parts: Any) -> Any:
    """An int64 vector of scalar tensors and Python ints."""
    return _ops.stack([_ops.reshape(_int64(p), shape=[]) for p in parts], axis=0)


# ------------------------------------------------------------------------ conversions, arithmetic
def to_double(x: Any, name: Optional[str] = "ToDouble") -> Any:
    return _m.cast(x, "float64", name)


def scalar_mul(scalar: Any, x: Any, name: Optional[str] = None) -> Any:
    """`scalar * x` for a 0-d scalar."""
    s = _t(scalar) if isinstance(scalar, (opsdk.Tensor, opsdk.Variable)) else scalar
    if isinstance(s, opsdk.Tensor) and s.shape is not None and s.shape != ():
        raise OpsdkError(f"scalar_mul: scalar must be 0-d, got shape {list(s.shape)}")
    return _m.multiply(s, x, name=name)


def div_no_nan(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x / y, and 0 where y is 0."""
    from opsdk.v1.namespaces import divide_no_nan

    return divide_no_nan(x, y, name=name)


def rint(x: Any, name: Optional[str] = None) -> Any:
    """The nearest integer, halves to even (as `tf.round`)."""
    return _ops.round(_t(x), name=name)


# ---------------------------------------------------------------------------- arrays
def meshgrid(*tensors: Any, **kwargs: Any) -> list:
    """Coordinate grids of 1-d tensors; indexing 'xy' (default: the first two axes swapped) or
    'ij'."""
    indexing = kwargs.pop("indexing", "xy")
    kwargs.pop("name", None)
    if kwargs:
        raise OpsdkError(f"meshgrid: unknown arguments {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise OpsdkError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    vectors = [_ops.reshape(_t(v), shape=[-1]) for v in tensors]
    n = len(vectors)
    grids = []
    for k, v in enumerate(vectors):
        shape = [1] * n
        shape[k] = -1
        grids.append(_ops.reshape(v, shape=shape))
    if indexing == "xy" and n >= 2:
        grids = [_ops.transpose(g, perm=[1, 0, *range(2, n)]) for g in grids]
    outs = []
    for g in grids:
        full = g
        for other in grids:
            if other is not g:
                full = _ops.add(full, _ops.zeros_like(_ops.cast(other, dtype=g.dtype)))
        outs.append(full)
    return outs


def roll(input: Any, shift: Any, axis: Any, name: Optional[str] = None) -> Any:  # noqa: A002
    """Elements shifted along each axis by shift, those pushed past the end coming back at the
    start. A gather, so a gradient reaches each element where it came from."""
    x = _t(input)
    shifts = list(np.atleast_1d(shift)) if not isinstance(shift, opsdk.Tensor) else [shift]
    axes = [int(a) for a in np.atleast_1d(axis)]
    if len(shifts) != len(axes):
        raise OpsdkError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    out = x
    for s, a in zip(shifts, axes):
        a = a % len(x.shape)
        size = _int64(_ops.slice(_ops.shape(out), begin=[a], size=[1]))
        size = _ops.reshape(size, shape=[])
        positions = _ops.arange(opsdk.constant(np.int64(0)), size, opsdk.constant(np.int64(1)))
        source = _ops.floor_mod(_ops.sub(positions, _int64(s)), size)
        out = _ops.gather(out, source, axis=a)
    return _ops.identity(out, name=name) if name else out


def strided_slice(input_: Any, begin: Any, end: Any, strides: Any = None, begin_mask: int = 0,
                  end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0, var: Any = None, name: Optional[str] = None) -> Any:
    """`input_[begin:end:strides]` per axis, with TF's masks (known when the graph is built):
    a bit of begin_mask/end_mask drops that bound, ellipsis_mask marks `...`, new_axis_mask a
    new axis, shrink_axis_mask an index that drops its axis."""
    begin = args.static_dims("strided_slice", begin, "begin")
    end = args.static_dims("strided_slice", end, "end")
    strides = [1] * len(begin) if strides is None else \
        args.static_dims("strided_slice", strides, "strides")
    if not len(begin) == len(end) == len(strides):
        raise OpsdkError("strided_slice: begin, end and strides must have one entry per axis")
    key: list = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis_mask & bit:
            key.append(Ellipsis)
        elif new_axis_mask & bit:
            key.append(None)
        elif shrink_axis_mask & bit:
            key.append(b)
        else:
            key.append(builtins.slice(None if begin_mask & bit else b,
                                      None if end_mask & bit else e, s))
    out = _t(input_)[tuple(key)]
    return _ops.identity(out, name=name) if name else out


def space_to_depth(input: Any, block_size: int, name: Optional[str] = None,  # noqa: A002
                   data_format: str = "NHWC") -> Any:
    """[b, h, w, c] blocks of block_size x block_size moved into depth: [b, h/bs, w/bs, c*bs*bs]."""
    x, bs = _nhwc("space_to_depth", input, block_size, data_format)
    b, h, w, c = x.shape
    if h is None or w is None or c is None or h % bs or w % bs:
        raise OpsdkError(f"space_to_depth: height and width must be known multiples of "
                         f"block_size {bs}, got shape {list(x.shape)}")
    y = _ops.reshape(x, shape=[-1, h // bs, bs, w // bs, bs, c])
    y = _ops.transpose(y, perm=[0, 1, 3, 2, 4, 5])
    return _ops.reshape(y, shape=[-1, h // bs, w // bs, c * bs * bs], name=name)


def depth_to_space(input: Any, block_size: int, name: Optional[str] = None,  # noqa: A002
                   data_format: str = "NHWC") -> Any:
    """The inverse of space_to_depth: [b, h, w, c] to [b, h*bs, w*bs, c/(bs*bs)]."""
    x, bs = _nhwc("depth_to_space", input, block_size, data_format)
    b, h, w, c = x.shape
    if h is None or w is None or c is None or c % (bs * bs):
        raise OpsdkError(f"depth_to_space: the depth must be a known multiple of block_size^2 "
                         f"({bs * bs}), got shape {list(x.shape)}")
    y = _ops.reshape(x, shape=[-1, h, w, bs, bs, c // (bs * bs)])
    y = _ops.transpose(y, perm=[0, 1, 3, 2, 4, 5])
    return _ops.reshape(y, shape=[-1, h * bs, w * bs, c // (bs * bs)], name=name)


def _blocks(who: str, x: Any, block_shape: Any, pairs: Any, what: str) -> tuple:
    """(block sizes, [before, after] pairs, the spatial sizes) of a space_to_batch_nd-like call,
    all known when the graph is built."""
    blocks = [int(b) for b in args.static_dims(who, block_shape, "block_shape")]
    if args.is_tensor(pairs):
        pairs = args.entries(args.graph_value(pairs))
        if pairs is None or None in pairs:
            raise OpsdkError(f"{who}: {what} must be known when the graph is built")
    spans = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    m = len(blocks)
    if x.shape is None or len(x.shape) < m + 1 or spans.shape != (m, 2) or min(blocks, default=1) < 1 \
            or (spans < 0).any():
        raise OpsdkError(f"{who}: block_shape {blocks} (each >= 1) and {what} [{m}, 2] (each >= "
                         f"0) must fit input of shape {None if x.shape is None else list(x.shape)}"
                         f" (1 batch dim, then {m} spatial dims)")
    spatial = list(x.shape[1:1 + m])
    if None in spatial:
        raise OpsdkError(f"{who}: the spatial sizes of input {list(x.shape)} must be known")
    return blocks, spans.tolist(), spatial


def space_to_batch_nd(input: Any, block_shape: Any, paddings: Any,  # noqa: A002
                      name: Optional[str] = None) -> Any:
    """input [batch, *spatial, *rest] padded by paddings, then each spatial dim cut into blocks
    of block_shape, the blocks' offsets moved into the batch: [prod(block) * batch,
    *(padded / block), *rest] (TF's order: the offset varies slowest)."""
    x = _t(input)
    blocks, pads, spatial = _blocks("space_to_batch_nd", x, block_shape, paddings, "paddings")
    m, rest = len(blocks), list(x.shape[1 + len(blocks):])
    padded = [s + a + b for s, (a, b) in zip(spatial, pads)]
    if any(p % b for p, b in zip(padded, blocks)):
        raise OpsdkError(f"space_to_batch_nd: the padded spatial sizes {padded} must be "
                         f"multiples of block_shape {blocks}")
    if any(a or b for a, b in pads):
        x = pad(x, [[0, 0], *pads, *([[0, 0]] * len(rest))])
    split = [-1] + [v for p, b in zip(padded, blocks) for v in (p // b, b)] + rest
    y = _m.reshape(x, split)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
        list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    y = _m.transpose(y, perm)
    return _m.reshape(y, [-1] + [p // b for p, b in zip(padded, blocks)] + rest, name=name)


def batch_to_space_nd(input: Any, block_shape: Any, crops: Any,  # noqa: A002
                      name: Optional[str] = None) -> Any:
    """space_to_batch_nd's inverse: the batch's block offsets put back into the spatial dims,
    then crops taken off."""
    x = _t(input)
    blocks, cuts, spatial = _blocks("batch_to_space_nd", x, block_shape, crops, "crops")
    m, rest = len(blocks), list(x.shape[1 + len(blocks):])
    count = int(np.prod(blocks))
    if x.shape[0] is not None and x.shape[0] % count:
        raise OpsdkError(f"batch_to_space_nd: the batch {x.shape[0]} must be a multiple of the "
                         f"blocks' product {count}")
    full = [s * b for s, b in zip(spatial, blocks)]
    if any(a + b > f for (a, b), f in zip(cuts, full)):
        raise OpsdkError(f"batch_to_space_nd: crops {cuts} take more than the sizes {full}")
    y = _m.reshape(x, blocks + [-1] + spatial + rest)
    perm = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + \
        list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    y = _m.reshape(_m.transpose(y, perm), [-1] + full + rest)
    if any(a or b for a, b in cuts):
        key = (slice(None),) + tuple(slice(a, f - b) for (a, b), f in zip(cuts, full))
        y = y[key]
    return _ops.identity(y, name=name) if name else y


def space_to_batch(input: Any, paddings: Any, block_size: int,  # noqa: A002
                   name: Optional[str] = None) -> Any:
    """space_to_batch_nd of a 4-d input with block_size along height and width."""
    return space_to_batch_nd(input, [block_size, block_size], paddings, name=name)


def batch_to_space(input: Any, crops: Any, block_size: int,  # noqa: A002
                   name: Optional[str] = None) -> Any:
    """batch_to_space_nd of a 4-d input with block_size along height and width."""
    return batch_to_space_nd(input, [block_size, block_size], crops, name=name)


def _nhwc(who: str, input_: Any, block_size: Any, data_format: str) -> tuple:
    if data_format != "NHWC":
        raise OpsdkError(f"{who}: opsdk.v1 takes data_format='NHWC' only")
    bs = args.static_int(who, "block_size", block_size)
    if bs < 2:
        raise OpsdkError(f"{who}: block_size must be >= 2, got {bs}")
    x = _t(input_)
    if x.shape is None or len(x.shape) != 4:
        raise OpsdkError(f"{who}: give a 4-d [batch, height, width, depth] tensor")
    return x, bs


def random_crop(value: Any, size: Any, seed: Any = None, name: Optional[str] = None) -> Any:
    """A block of `size` at a random offset of value (each offset uniform over where the block
    fits)."""
    from opsdk.v1.composed import slice_
    from opsdk.v1.tensors import random_uniform

    x = _t(value)
    sizes = args.static_dims("random_crop", size, "size")
    if x.shape is None or len(sizes) != len(x.shape):
        raise OpsdkError(f"random_crop: size {sizes} must have one entry per axis of value")
    room = _ops.add(_ops.sub(_int64(_ops.shape(x)), opsdk.constant(np.asarray(sizes, np.int64))),
                    opsdk.constant(np.int64(1)))
    draw = random_uniform([len(sizes)], 0.0, 1.0, dtype="float32", seed=seed)
    offset = _ops.cast(_ops.floor(_ops.mul(draw, _ops.cast(room, dtype="float32"))),
                       dtype="int64")
    offset = _ops.minimum(offset, _ops.sub(room, opsdk.constant(np.int64(1))))
    return slice_(x, offset, sizes, name=name)


def batch_gather(params: Any, indices: Any, name: Optional[str] = None) -> Any:
    """params[b, indices[b, ...]] for each batch entry b (the first axis)."""
    p, idx = _t(params), _int64(indices)
    if p.shape is None or idx.shape is None or len(idx.shape) < 1:
        raise OpsdkError("batch_gather: params and indices need known ranks")
    rows = _ops.reshape(_int64(_ops.slice(_ops.shape(p), begin=[1], size=[1])), shape=[])
    batch = _ops.arange(opsdk.constant(np.int64(0)),
                        _ops.reshape(_int64(_ops.slice(_ops.shape(p), begin=[0], size=[1])),
                                     shape=[]), opsdk.constant(np.int64(1)))
    offsets = _ops.reshape(_ops.mul(batch, rows), shape=[-1] + [1] * (len(idx.shape) - 1))
    flat = _ops.reshape(p, shape=[-1, *[-1 if d is None else d for d in p.shape[2:]]]) \
        if len(p.shape) > 2 and None not in p.shape[2:] else _ops.reshape(p, shape=[-1])
    return _ops.gather(flat, _ops.add(idx, offsets), axis=0, name=name)


def dynamic_partition(data: Any, partitions: Any, num_partitions: int,
                      name: Optional[str] = None) -> list:
    """data's slices split by partition index, one tensor per partition, in order."""
    from opsdk.v1.composed import boolean_mask

    count = args.static_int("dynamic_partition", "num_partitions", num_partitions)
    x, p = _t(data), _t(partitions)
    if p.dtype != "int32":
        raise OpsdkError(f"dynamic_partition: partitions must be int32, got {p.dtype}")
    return [boolean_mask(x, _ops.equal(p, opsdk.constant(np.int32(k)))) for k in range(count)]


def dynamic_stitch(indices: Sequence[Any], data: Sequence[Any],
                   name: Optional[str] = None) -> Any:
    """merged[indices[m][i]] = data[m][i]: the rows as long as the largest index + 1 (a later
    entry for one index wins, as in TF)."""
    from opsdk.v1.sparse import tensor_scatter_nd_update

    if len(indices) != len(data) or not indices:
        raise OpsdkError("dynamic_stitch: give as many index tensors as data tensors, at least "
                         "one")
    idx = [_ops.reshape(_int64(i), shape=[-1]) for i in indices]
    pieces = []
    for i, d, flat in zip(indices, data, idx):
        x = _t(d)
        rank = len(_t(i).shape)
        rest = [-1 if s is None else s for s in x.shape[rank:]]
        pieces.append(_ops.reshape(x, shape=[-1, *rest]))
    all_idx = _ops.concat(idx, axis=0)
    rows = _ops.concat(pieces, axis=0)
    count = _ops.add(_ops.reduce_max(all_idx), opsdk.constant(np.int64(1)))
    rest_dims = _int64(_ops.slice(_ops.shape(rows), begin=[1], size=[-1]))
    base = zeros(_ops.concat([_ops.reshape(count, shape=[1]), rest_dims], axis=0),
                 dtype=rows.dtype)
    return tensor_scatter_nd_update(base, _ops.reshape(all_idx, shape=[-1, 1]), rows,
                                    name=name)


def identity_n(input: Sequence[Any], name: Optional[str] = None) -> list:  # noqa: A002
    return [_ops.identity(_t(x)) for x in input]


def shape_n(input: Sequence[Any], out_type: Any = "int32",  # noqa: A002
            name: Optional[str] = None) -> list:
    return [_m.shape(x, out_type=out_type) for x in input]


def ensure_shape(x: Any, shape: Any, name: Optional[str] = None) -> Any:
    """x with the static shape `shape` (None for any size), checked when the step runs."""
    t = _t(x)
    if shape is None or (hasattr(shape, "dims") and shape.dims is None):
        return t
    want = [None if d is None else int(d) for d in (shape.as_list() if hasattr(shape, "as_list")
                                                   else shape)]
    known = [-1 if d is None else int(d) for d in want]
    if t.shape is not None and (len(t.shape) != len(known) or any(
            k != -1 and d is not None and k != d for k, d in zip(known, t.shape))):
        raise OpsdkError(f"ensure_shape: tensor '{t.name}' has shape {list(t.shape)}, which is "
                         f"not compatible with {want}")
    return _ops.reshape_dims(t, _int64(_ops.shape(t)), shape=known, name=name)


# ------------------------------------------------------------------------------- counting
def _counts(who: str, positions: Any, length: Any, weights: Any, dtype: str) -> Any:
    """Per position 0..length-1 how often (or how much weight) positions hold it."""
    pos = _ops.reshape(_int64(positions), shape=[-1, 1])
    if weights is None:
        ones = _ops.ones_like(_ops.cast(_ops.reshape(pos, shape=[-1]), dtype=dtype))
    else:
        ones = _ops.reshape(_ops.cast(_t(weights), dtype=dtype), shape=[-1])
    return _ops.scatter_nd(pos, ones, _ops.reshape(_int64(length), shape=[1]))


def bincount(arr: Any, weights: Any = None, minlength: Any = None, maxlength: Any = None,
             dtype: Any = "int32") -> Any:
    """How often each value 0 .. max(arr) (at least minlength, at most maxlength) appears in the
    int32 arr; weights sum instead."""
    x = _t(arr)
    if x.dtype != "int32":
        raise OpsdkError(f"bincount: arr must be int32, got {x.dtype}")
    flat = _ops.reshape(_int64(x), shape=[-1])
    length = _ops.add(_ops.reduce_max(_ops.concat([flat, opsdk.constant(np.asarray(
        [-1], np.int64))], axis=0)), opsdk.constant(np.int64(1)))
    if minlength is not None:
        length = _ops.maximum(length, _int64(minlength))
    if maxlength is not None:
        length = _ops.minimum(length, _int64(maxlength))
        keep = _ops.less(flat, length)
        from opsdk.v1.composed import boolean_mask

        if weights is not None:
            weights = boolean_mask(_ops.reshape(_t(weights), shape=[-1]), keep)
        flat = boolean_mask(flat, keep)
    kind = dtypes.name_of(dtype) if weights is None else _t(weights).dtype
    return _counts("bincount", flat, length, weights, kind)


def histogram_fixed_width(values: Any, value_range: Any, nbins: Any = 100, dtype: Any = "int32",
                          name: Optional[str] = None) -> Any:
    """How many values fall in each of nbins equal bins over value_range (values outside go to
    the first or last bin, as TF's)."""
    v = _ops.reshape(_t(values), shape=[-1])
    bounds = _ops.cast(_t(value_range), dtype=v.dtype)
    lo = _ops.reshape(_ops.slice(bounds, begin=[0], size=[1]), shape=[])
    hi = _ops.reshape(_ops.slice(bounds, begin=[1], size=[1]), shape=[])
    n = args.static_int("histogram_fixed_width", "nbins", nbins)
    scaled = _ops.div(_ops.sub(v, lo), _ops.sub(hi, lo))
    index = _ops.cast(_ops.floor(_ops.mul(scaled, _ops.cast(opsdk.constant(np.float64(n)),
                                                            dtype=v.dtype))), dtype="int64")
    index = _ops.minimum(_ops.maximum(index, opsdk.constant(np.int64(0))),
                         opsdk.constant(np.int64(n - 1)))
    return _counts("histogram_fixed_width", index, n, None, dtypes.name_of(dtype))


def confusion_matrix(labels: Any, predictions: Any, num_classes: Any = None, dtype: Any = "int32",
                     name: Optional[str] = None, weights: Any = None) -> Any:
    """counts[i, j]: how many examples of label i were predicted j (weights sum instead);
    num_classes defaults to the largest label or prediction + 1."""
    lab = _ops.reshape(_int64(labels), shape=[-1])
    pred = _ops.reshape(_int64(predictions), shape=[-1])
    if num_classes is None:
        n = _ops.add(_ops.maximum(_ops.reduce_max(lab), _ops.reduce_max(pred)),
                     opsdk.constant(np.int64(1)))
    else:
        n = _int64(num_classes)
    kind = dtypes.name_of(dtype)
    ones = _ops.ones_like(_ops.cast(lab, dtype=kind)) if weights is None else \
        _ops.reshape(_ops.cast(_t(weights), dtype=kind), shape=[-1])
    pairs = _ops.stack([lab, pred], axis=1)
    return _ops.scatter_nd(pairs, ones, _vector(n, n), name=name)


# -------------------------------------------------------------------------- index arithmetic
def invert_permutation(x: Any, name: Optional[str] = None) -> Any:
    """y with y[x[i]] = i."""
    p = _t(x)
    flat = _int64(p)
    count = _int64(_ops.shape(flat))
    positions = _ops.cast(_ops.arange(opsdk.constant(np.int64(0)), _ops.reshape(count, shape=[]),
                                      opsdk.constant(np.int64(1))), dtype=p.dtype)
    return _ops.scatter_nd(_ops.reshape(flat, shape=[-1, 1]), positions, count, name=name)


def unravel_index(indices: Any, dims: Any, name: Optional[str] = None) -> Any:
    """The coordinates in a tensor of shape dims of flat indices: [len(dims), ...]."""
    idx = _t(indices)
    d = _t(dims)
    if d.shape is None or len(d.shape) != 1 or d.shape[0] is None:
        raise OpsdkError("unravel_index: dims must be a vector of known length")
    rank = int(d.shape[0])
    d = _ops.cast(d, dtype=idx.dtype)
    coords = []
    rest = idx
    sizes = [_ops.reshape(_ops.slice(d, begin=[k], size=[1]), shape=[]) for k in range(rank)]
    for k in reversed(range(rank)):
        coords.append(_ops.floor_mod(rest, sizes[k]))
        rest = _ops.floor_div(rest, sizes[k])
    return _ops.stack(list(reversed(coords)), axis=0, name=name)


def setdiff1d(x: Any, y: Any, index_dtype: Any = "int32", name: Optional[str] = None) -> tuple:
    """(the values of x not in y, in x's order; their positions in x)."""
    from opsdk.v1.composed import boolean_mask

    a, b = _t(x), _t(y)
    if a.dtype != b.dtype:
        raise OpsdkError(f"setdiff1d: x is {a.dtype}, y is {b.dtype}")
    absent = logical_not(_m.reduce_any(
        _ops.equal(_ops.reshape(a, shape=[-1, 1]), _ops.reshape(b, shape=[1, -1])), axis=1))
    kept = boolean_mask(a, absent)
    where = _ops.reshape(_ops.where_indices(absent), shape=[-1])
    return kept, _ops.cast(where, dtype=dtypes.name_of(index_dtype))


# ---------------------------------------------------------------------------------- checks
def check_numerics(tensor: Any, message: str, name: Optional[str] = None) -> Any:
    """tensor, and an InvalidArgumentError when the step finds an infinity or a NaN in it."""
    from opsdk.v1.asserts import Assert

    x = _t(tensor)
    ok = reduce_all(is_finite(x))
    with opsdk.control_dependencies([Assert(ok, [message + " : Tensor had NaN or Inf values"])]):
        return _ops.identity(x, name=name)


def verify_tensor_all_finite(t: Any = None, msg: str = "", name: Optional[str] = None,
                             x: Any = None, message: Any = None) -> Any:
    return check_numerics(t if x is None else x, msg if message is None else message, name)


def add_check_numerics_ops() -> Any:
    """A group checking every float tensor of the default graph for infinities and NaNs."""
    graph = opsdk.get_default_graph()
    checks = []
    for op in list(graph.get_operations()):
        for out in op.outputs:
            if out.dtype in ("float16", "float32", "float64") and out.shape is not None:
                checks.append(check_numerics(out, f"{op.name}:{out.value_index}"))
    return scopes.group(*checks)


def assert_rank(x: Any, rank: int, data: Any = None, summarize: Any = None, message: Any = None,
                name: Optional[str] = None) -> Any:
    """Nothing to check when the graph is built (a no-op), or a ValueError naming the ranks, as
    TF raises when both are known then."""
    return _rank_check("assert_rank", x, lambda r: r == int(rank), f"rank {int(rank)}", message)


def assert_rank_at_least(x: Any, rank: int, data: Any = None, summarize: Any = None,
                         message: Any = None, name: Optional[str] = None) -> Any:
    return _rank_check("assert_rank_at_least", x, lambda r: r >= int(rank),
                       f"rank at least {int(rank)}", message)


def assert_scalar(tensor: Any, name: Optional[str] = None, message: Any = None) -> Any:
    _rank_check("assert_scalar", tensor, lambda r: r == 0, "rank 0 (a scalar)", message)
    return _t(tensor)


def _rank_check(who: str, x: Any, ok: Callable[[int], bool], what: str, message: Any) -> Any:
    t = _t(x)
    if t.shape is None:
        raise OpsdkError(f"{who}: tensor '{t.name}' has an unknown rank; opsdk.v1 checks ranks "
                         "known when the graph is built")
    if not ok(len(t.shape)):
        raise ValueError(f"{message + ' ' if message else ''}{who}: tensor '{t.name}' must have "
                         f"{what}, has rank {len(t.shape)}")
    return scopes.no_op()


def assert_type(tensor: Any, tf_type: Any, message: Any = None, name: Optional[str] = None) -> Any:
    t = _t(tensor)
    if t.dtype != dtypes.name_of(tf_type):
        raise TypeError(f"{message + ' ' if message else ''}assert_type: tensor '{t.name}' is "
                        f"{t.dtype}, not {dtypes.name_of(tf_type)}")
    return scopes.no_op()


def assert_integer(x: Any, message: Any = None, name: Optional[str] = None) -> Any:
    t = _t(x)
    if np.dtype(t.dtype).kind not in "iu":
        raise TypeError(f"{message + ' ' if message else ''}assert_integer: tensor '{t.name}' is "
                        f"{t.dtype}, not an integer dtype")
    return scopes.no_op()


def is_tensor(x: Any) -> bool:
    from opsdk.v1.sparse import SparseTensor

    return isinstance(x, (opsdk.Tensor, opsdk.Variable, SparseTensor))


# ---------------------------------------------------------------------- variables, templates
def glorot_normal_initializer(seed: Any = None, dtype: Any = None) -> Any:
    """TF1's: a truncated normal of variance 1 / mean(fan_in, fan_out)."""
    return scopes.variance_scaling_initializer(1.0, "fan_avg", "truncated_normal", seed, dtype)


class orthogonal_initializer(scopes._Initializer):  # noqa: N801 - TF's name
    """`tf.orthogonal_initializer(gain=1.0, seed=None, dtype=float32)`: the Q of a random normal
    matrix's QR decomposition (rows or columns orthonormal), times gain; shapes of rank > 2 are
    flattened to [prod(shape[:-1]), shape[-1]]."""

    def __init__(self, gain: float = 1.0, seed: Any = None, dtype: Any = None):
        self.gain, self.seed, self.dtype = float(gain), seed, dtype

    def make(self, shape: list, dtype: np.dtype) -> Any:
        from opsdk.v1.tensors import random_normal

        if len(shape) < 2:
            raise OpsdkError(f"orthogonal_initializer: a shape of rank >= 2, got {shape}")
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        tall = (max(rows, cols), min(rows, cols))
        draw = random_normal(list(tall), 0.0, 1.0, "float64", self.seed)
        q, r = _ops.qr(draw, full_matrices=False)  # r's diagonal is made positive by the op
        if rows < cols:
            q = _ops.transpose(q, perm=[1, 0])
        return _ops.cast(_ops.mul(_ops.reshape(q, shape=shape), opsdk.constant(self.gain)),
                         dtype=np.dtype(dtype).name)


def get_local_variable(name: str, shape: Any = None, dtype: Any = None, initializer: Any = None,
                       **kwargs: Any) -> Any:
    """get_variable in LOCAL_VARIABLES, not trainable."""
    kwargs.pop("collections", None)
    kwargs.pop("trainable", None)
    return scopes.get_variable(name, shape, dtype, initializer, trainable=False,
                               collections=[scopes.GraphKeys.LOCAL_VARIABLES], **kwargs)


def make_template(name_: str, func_: Callable[..., Any], create_scope_now_: bool = False,
                  unique_name_: Any = None, custom_getter_: Any = None, **kwargs: Any) -> Any:
    """func_ wrapped so that its first call makes its variables in a scope of its own and every
    later call shares them."""
    if custom_getter_ is not None:
        raise OpsdkError("make_template: custom_getter_ is not supported by opsdk.v1")
    state: dict = {}

    def template(*a: Any, **kw: Any) -> Any:
        call = {**kwargs, **kw}
        if "scope" not in state:
            with scopes.variable_scope(unique_name_ or None, default_name=name_) as scope:
                state["scope"] = scope
                return func_(*a, **call)
        with scopes.variable_scope(state["scope"], reuse=True):
            return func_(*a, **call)
    return template


def hessians(ys: Any, xs: Any, name: str = "hessians", colocate_gradients_with_ops: bool = False,
             gate_gradients: bool = False, aggregation_method: Any = None) -> list:
    """For each x of xs, the Hessian of sum(ys): [*x.shape, *x.shape], x's size known when the
    graph is built (one gradient per element)."""
    xs_list = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    from opsdk.v1.composed import add_n

    total = _m.reduce_sum(ys) if not isinstance(ys, (list, tuple)) else add_n(
        [_m.reduce_sum(y) for y in ys])
    out = []
    for x in xs_list:
        x_t = _t(x)
        if x_t.shape is None or None in x_t.shape:
            raise OpsdkError(f"hessians: the shape of '{x_t.name}' must be known")
        grad = _m.gradients(total, [x])[0]
        flat = _ops.reshape(grad, shape=[-1])
        n = int(np.prod(x_t.shape))
        rows = [_ops.reshape(_m.gradients(_ops.gather(flat, opsdk.constant(np.int64(i))),
                                          [x])[0], shape=[-1]) for i in range(n)]
        out.append(_ops.reshape(_ops.stack(rows, axis=0), shape=[*x_t.shape, *x_t.shape]))
    return out


# -- variables' state -----------------------------------------------------------------------------

def _store_names(who: str, var_list: Any) -> list[str]:
    """The variable store's names of var_list (default: every global and local variable)."""
    if var_list is None:
        var_list = [*scopes.global_variables(), *scopes.local_variables()]
    names = []
    for v in var_list:
        node = getattr(v, "op", None)
        if node is None or getattr(node, "type", None) != "variable":
            raise OpsdkError(f"{who}: {v!r:.60} is not a variable")
        names.append(node.name)
    return names


def is_variable_initialized(variable: Any, name: Optional[str] = None) -> Any:
    """A bool scalar: whether `variable` has a value in the session running the step."""
    (key,) = _store_names("is_variable_initialized", [variable])

    @takes_step
    def check(ctx: Any) -> np.ndarray:
        return np.asarray(ctx.variables.initialised(key))
    return py_func_node(check, [], ["bool"], name=name or "IsVariableInitialized").outputs[0]


def report_uninitialized_variables(var_list: Any = None,
                                   name: str = "report_uninitialized_variables") -> Any:
    """A 1-D string tensor: the names of the variables of var_list (default: every global and
    local one) that have no value in the session running the step (TF1's `ready_op`)."""
    keys = _store_names("report_uninitialized_variables", var_list)

    @takes_step
    def missing(ctx: Any) -> np.ndarray:
        return _strings.byte_rows([k for k in keys if not ctx.variables.initialised(k)])
    out = py_func_node(missing, [], ["uint8"], name=name).outputs[0]
    _session.register_decoder(out, _strings._decode_list)
    return out


def assert_variables_initialized(var_list: Any = None) -> Any:
    """An op that fails with FailedPreconditionError, naming them, when variables of var_list
    (default: every global and local one) have no value in the session running it."""
    keys = _store_names("assert_variables_initialized", var_list)

    @takes_step
    def check(ctx: Any) -> None:
        missing = [k for k in keys if not ctx.variables.initialised(k)]
        if missing:
            raise errors.FailedPreconditionError(
                None, None, f"variables not initialized: {', '.join(missing)}")
    return py_func_node(check, [], [], name="assert_variables_initialized")


def initialize_variables(var_list: Any, name: str = "init") -> Any:
    """TF1's older name of variables_initializer."""
    return scopes.variables_initializer(var_list, name=name)


def initialize_local_variables() -> Any:
    """TF1's older name of local_variables_initializer."""
    return scopes.local_variables_initializer()


def tables_initializer(name: str = "init_all_tables") -> Any:
    """The op initializing every lookup table: opsdk.v1 has none (tf.lookup is not provided),
    so a no-op for the programs that run it beside their variables' initializer."""
    return scopes.group(name=name)


NAMES = {name: globals()[name] for name in (
    "to_double", "scalar_mul", "div_no_nan", "rint", "meshgrid", "roll", "strided_slice",
    "space_to_depth", "depth_to_space", "space_to_batch_nd", "batch_to_space_nd",
    "space_to_batch", "batch_to_space", "random_crop", "batch_gather", "dynamic_partition",
    "dynamic_stitch", "identity_n", "shape_n", "ensure_shape", "bincount",
    "histogram_fixed_width", "confusion_matrix", "invert_permutation", "unravel_index",
    "setdiff1d", "check_numerics", "verify_tensor_all_finite", "add_check_numerics_ops",
    "assert_rank", "assert_rank_at_least", "assert_scalar", "assert_type", "assert_integer",
    "is_tensor", "glorot_normal_initializer", "orthogonal_initializer", "get_local_variable",
    "make_template", "hessians", "is_variable_initialized", "report_uninitialized_variables",
    "assert_variables_initialized", "initialize_variables", "initialize_local_variables",
    "tables_initializer")}
NAMES["initialize_all_tables"] = tables_initializer  # TF1's older name
