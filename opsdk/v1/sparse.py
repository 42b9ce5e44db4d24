"""TF1's sparse tensors: `tf.SparseTensor(indices, values, dense_shape)`, `tf.sparse_placeholder`,
`tf.SparseTensorValue` (what `Session.run` hands out for a SparseTensor, and what a sparse
placeholder is fed), and the ops TF1 programs use on them.

A SparseTensor is three tensors, as in TensorFlow: `indices` ([n, rank] int64, a coordinate per
entry), `values` (n entries) and `dense_shape` ([rank] int64). Its values may be strings: opsdk's
runtime has numeric tensors only, so string values travel as a uint8 matrix, one zero-padded row
of UTF-8 bytes per entry (opsdk/v1/strings.py), and are handed out as bytes.

Made of builtin ops (`scatter_nd` and `edit_distance`, opdefs/builtin/sparse.yaml; gathers and
segment sums), so gradients flow to the values (and to a dense operand) as TF's do:
`sparse_tensor_to_dense` (`tf.sparse.to_dense`), `sparse_to_dense`, `tf.sparse.from_dense`,
`sparse_add`, `sparse_reduce_sum`, `sparse_tensor_dense_matmul`, `sparse_retain`,
`sparse_softmax`, `sparse_segment_sum`/`mean`/`sqrt_n`, `nn.embedding_lookup_sparse` and
`edit_distance`. Differences from TF: entries are taken in the order given (TF's ops expect
row-major order and some check it; `sparse_reorder` is not provided), and `sparse_add` of two
sparse tensors goes through their dense sum, so an entry whose sum is 0 is dropped where TF keeps
it (at the default `thresh`, 0).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Optional, Sequence

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import dtypes, strings
from opsdk.v1 import linalg as _linalg
from opsdk.v1 import partitioned as _partitioned
from opsdk.v1 import session as _session
from opsdk.v1.tensors import TensorShape
from opsdk.v1.tensors import convert_to_tensor as _t


class SparseTensorValue(namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])):
    """A sparse tensor's arrays: what `Session.run` hands out for a SparseTensor, and what a
    sparse placeholder is fed (a plain tuple of the three works too)."""

    __slots__ = ()


def _int64(who: str, what: str, value: Any) -> Any:
    if isinstance(value, (opsdk.Tensor, opsdk.Variable)) or hasattr(value, "_as_graph_element"):
        tensor = _t(value)
        if tensor.dtype not in ("int32", "int64"):
            raise OpsdkError(f"{who}: {what} '{tensor.name}' is {tensor.dtype}; give int64 (or "
                             "int32) coordinates")
        return tensor if tensor.dtype == "int64" else _ops.cast(tensor, dtype="int64")
    array = np.asarray(value)
    if array.size and array.dtype.kind not in "iu":
        raise OpsdkError(f"{who}: {what} must be whole numbers, got {array.dtype} values")
    return opsdk.constant(array.astype(np.int64))


class SparseTensor:
    """`tf.SparseTensor(indices, values, dense_shape)`: entry i of `values` sits at coordinate
    `indices[i]` of a tensor of shape `dense_shape`, every other element being zero (or the
    default of the op that reads it). Each argument may be a tensor or a Python value."""

    def __init__(self, indices: Any, values: Any, dense_shape: Any):
        self.indices = _int64("SparseTensor", "indices", indices)
        self.values = values if isinstance(values, opsdk.Tensor) else _t(values)
        if isinstance(dense_shape, (opsdk.Tensor, opsdk.Variable)):
            self.dense_shape = _int64("SparseTensor", "dense_shape", dense_shape)
            size = self.dense_shape.shape
            rank = None if size is None or size[0] is None else int(size[0])
            self._shape = None if rank is None else (None,) * rank
        else:
            sizes = [None if d is None or (not isinstance(d, opsdk.Tensor) and int(d) < 0)
                     else d for d in (list(dense_shape.as_list()) if isinstance(
                         dense_shape, TensorShape) else list(np.asarray(dense_shape).reshape(-1)))]
            if None in sizes:
                raise OpsdkError("SparseTensor: dense_shape must hold every size (or be a tensor "
                                 f"known at run time), got {list(dense_shape)}")
            self._shape = tuple(int(d) for d in sizes)
            self.dense_shape = opsdk.constant(np.asarray(self._shape, np.int64))
        index_shape = self.indices.shape
        if index_shape is not None and len(index_shape) != 2:
            raise OpsdkError(f"SparseTensor: indices must be a matrix [n, rank], got shape "
                             f"{list(index_shape)}")
        rank = None if self._shape is None else len(self._shape)
        if rank is not None and index_shape is not None and index_shape[1] not in (None, rank):
            raise OpsdkError(f"SparseTensor: indices have {index_shape[1]} coordinates per "
                             f"entry; dense_shape has rank {rank}")
        self._string = strings.is_string(self.values)
        _session.enable_sparse()

    @classmethod
    def from_value(cls, value: Any) -> "SparseTensor":
        """A SparseTensor of constants from a SparseTensorValue (or a SparseTensor, as it is)."""
        if isinstance(value, SparseTensor):
            return value
        indices, values, dense_shape = _triple("SparseTensor.from_value", value)
        return cls(indices, values, dense_shape)

    @property
    def dtype(self) -> Any:
        return dtypes.string if self._string else dtypes.as_dtype(self.values.dtype)

    @property
    def shape(self) -> TensorShape:
        return TensorShape(None if self._shape is None else list(self._shape))

    def get_shape(self) -> TensorShape:
        return self.shape

    @property
    def graph(self) -> Any:
        return self.values.graph

    @property
    def op(self) -> Any:
        return self.values.op

    def _components(self) -> SparseTensorValue:
        return SparseTensorValue(self.indices, self.values, self.dense_shape)

    @staticmethod
    def _feed_values(value: Any) -> tuple:
        """What Session.run feeds indices, values and dense_shape for the SparseTensorValue
        (or 3-tuple) `value`."""
        indices, values, dense_shape = _triple("Session.run: the feed for a SparseTensor", value)
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size == 0:
            indices = indices.reshape(0, np.asarray(dense_shape).size)
        return indices, values, np.asarray(dense_shape, dtype=np.int64)

    def eval(self, feed_dict: Any = None, session: Any = None) -> SparseTensorValue:
        """This tensor's value in `session` (default: the default session)."""
        return _session._session_for("SparseTensor.eval", session).run(self, feed_dict)

    def __repr__(self) -> str:
        return (f"SparseTensor(indices={self.indices!r}, values={self.values!r}, "
                f"dense_shape={self.dense_shape!r})")


def _triple(who: str, value: Any) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise OpsdkError(f"{who}: give a SparseTensorValue or an (indices, values, dense_shape) "
                         f"tuple, got {type(value).__name__}")
    return tuple(value)


def _encode_strings(label: str) -> Any:
    def encode(value: Any) -> np.ndarray:
        try:
            return strings.byte_rows(list(np.asarray(value, dtype=object).reshape(-1)))
        except OpsdkError:
            raise TypeError(f"Session.run: the values fed to sparse placeholder '{label}' must be "
                            "str or bytes") from None
    return encode


def sparse_placeholder(dtype: Any, shape: Any = None, name: Optional[str] = None) -> SparseTensor:
    """`tf.sparse_placeholder(dtype, shape=None, name=None)`: a SparseTensor whose indices, values
    and dense_shape are fed (a SparseTensorValue or an (indices, values, dense_shape) tuple);
    strings are fed as str or bytes."""
    rank = None
    if shape is not None:
        dims = shape.as_list() if isinstance(shape, TensorShape) else list(shape)
        if dims is not None:
            rank = len(dims)
    prefix = name or "Placeholder"
    dense_shape = opsdk.placeholder("int64", [rank], name=f"{prefix}/shape")
    if dtype is dtypes.string or dtype is str or dtype == "string":
        values = opsdk.placeholder("uint8", [None, None], name=f"{prefix}/values")
        _session.register_encoder(values, _encode_strings(values.name))
        _session.register_decoder(values, strings._decode_list)
    else:
        values = opsdk.placeholder(dtypes.name_of(dtype), [None], name=f"{prefix}/values")
    indices = opsdk.placeholder("int64", [None, rank], name=f"{prefix}/indices")
    tensor = SparseTensor(indices, values, dense_shape)
    if shape is not None and dims is not None and None not in dims:
        tensor._shape = tuple(int(d) for d in dims)
    return tensor


def _sparse(who: str, value: Any) -> SparseTensor:
    if isinstance(value, SparseTensor):
        return value
    if isinstance(value, SparseTensorValue):
        return SparseTensor.from_value(value)
    raise OpsdkError(f"{who}: give a SparseTensor, got {type(value).__name__}")


def _known(sp: SparseTensor) -> list:
    return [] if sp._shape is None else [-1 if d is None else int(d) for d in sp._shape]


def _scatter(sp: SparseTensor, values: Any, name: Optional[str] = None) -> Any:
    """`values` (one per entry) at sp's coordinates of a zero tensor of sp's dense shape; string
    rows keep their width as a last axis."""
    dims, known = sp.dense_shape, _known(sp)
    if sp._string:
        width = _ops.cast(_ops.slice(_ops.shape(values), begin=[1], size=[1]), dtype="int64")
        dims = _ops.concat([dims, width], axis=0)
        known = known + [-1] if known else []
    return _ops.scatter_nd(sp.indices, values, dims, shape=known, name=name)


def sparse_tensor_to_dense(sp_input: Any, default_value: Any = None, validate_indices: bool = True,
                           name: Optional[str] = None) -> Any:
    """The dense tensor: each entry's value at its coordinate, default_value (0, or b'' for
    strings) elsewhere. A repeated coordinate adds up where TF refuses it."""
    sp = _sparse("sparse_tensor_to_dense", sp_input)
    if sp._string:
        if default_value not in (None, "", b""):
            raise OpsdkError("sparse_tensor_to_dense: opsdk.v1 fills a string tensor with b'' "
                             f"only, not {default_value!r}")
        dense = _scatter(sp, sp.values, name=name)
        _session.register_decoder(dense, strings._decode_list)
        return dense
    if default_value is None:
        return _scatter(sp, sp.values, name=name)
    default = _ops.cast(_t(default_value), dtype=sp.values.dtype)
    count = _scatter(sp, _ops.ones_like(sp.values))  # entries at each element
    present = _ops.not_equal(count, _ops.zeros_like(count))
    return _ops.where(present, _scatter(sp, sp.values), default, name=name)


def to_dense(sp_input: Any, default_value: Any = None, validate_indices: bool = True,
             name: Optional[str] = None) -> Any:
    """`tf.sparse.to_dense`: as sparse_tensor_to_dense."""
    return sparse_tensor_to_dense(sp_input, default_value, validate_indices, name)


def sparse_to_dense(sparse_indices: Any, output_shape: Any, sparse_values: Any,
                    default_value: Any = 0, validate_indices: bool = True,
                    name: Optional[str] = None) -> Any:
    """`tf.sparse_to_dense`: sparse_indices a scalar, a vector (coordinates of a vector) or an
    [n, rank] matrix; sparse_values one per index or a scalar for all of them."""
    idx = _int64("sparse_to_dense", "sparse_indices", sparse_indices)
    if idx.shape is None or len(idx.shape) > 2:
        raise OpsdkError("sparse_to_dense: sparse_indices must be a scalar, a vector or a "
                         "matrix of known rank")
    if len(idx.shape) < 2:
        idx = _ops.reshape(idx, shape=[-1, 1])
    values = _t(sparse_values)
    if values.shape is not None and len(values.shape) == 0:  # one value for every index
        first = _ops.reshape(_ops.slice(idx, begin=[0, 0], size=[-1, 1]), shape=[-1])
        values = _ops.add(_ops.zeros_like(_ops.cast(first, dtype=values.dtype)), values)
    shape = output_shape if isinstance(output_shape, (opsdk.Tensor, opsdk.Variable)) \
        else np.asarray(output_shape, dtype=np.int64).reshape(-1)
    sp = SparseTensor(idx, values, shape)
    return sparse_tensor_to_dense(sp, default_value, name=name)


def from_dense(tensor: Any, name: Optional[str] = None) -> SparseTensor:
    """`tf.sparse.from_dense`: the nonzero elements of tensor, in row-major order."""
    x = _t(tensor)
    indices = _ops.where_indices(_ops.not_equal(x, _ops.zeros_like(x)), name=name)
    from opsdk.v1.composed import gather_nd

    sp = SparseTensor(indices, gather_nd(x, indices), _ops.shape(x))
    if x.shape is not None:
        sp._shape = tuple(x.shape)
    return sp


def sparse_add(a: Any, b: Any, thresh: Any = 0, threshold: Any = None) -> Any:
    """`tf.sparse_add` / `tf.sparse.add`: a sparse and a dense tensor give their dense sum; two
    sparse tensors a sparse one, through their dense sum (entries of magnitude below thresh
    dropped; an entry summing to 0 is dropped even at thresh 0, where TF keeps it)."""
    if threshold is not None:
        thresh = threshold
    sparse_a, sparse_b = isinstance(a, SparseTensor), isinstance(b, SparseTensor)
    if not (sparse_a or sparse_b):
        raise OpsdkError("sparse_add: give at least one SparseTensor")
    if sparse_a != sparse_b:
        sp, dense = (a, b) if sparse_a else (b, a)
        return _ops.add(sparse_tensor_to_dense(sp), _t(dense))
    total = _ops.add(sparse_tensor_to_dense(a), sparse_tensor_to_dense(b))
    limit = _ops.cast(_t(thresh), dtype=total.dtype)
    kept = _ops.where(_ops.greater_equal(_ops.abs(total), limit), total, _ops.zeros_like(total))
    sp = from_dense(kept)
    sp._shape = a._shape if a._shape is not None else b._shape
    return sp


def sparse_reduce_sum(sp_input: Any, axis: Any = None, keepdims: Any = None,
                      reduction_axes: Any = None, keep_dims: Any = None,
                      name: Optional[str] = None) -> Any:
    """The sum of the dense tensor over axis (all: the values' sum)."""
    from opsdk.v1 import math_ops

    sp = _sparse("sparse_reduce_sum", sp_input)
    axis = reduction_axes if axis is None else axis
    keep = bool(keep_dims if keepdims is None else keepdims)
    if axis is None and not keep:
        return _ops.reduce_sum(sp.values, name=name)
    return math_ops.reduce_sum(sparse_tensor_to_dense(sp), axis=axis, keepdims=keep, name=name)


def sparse_reduce_max(sp_input: Any, axis: Any = None, keepdims: Any = None,
                      reduction_axes: Any = None, keep_dims: Any = None,
                      name: Optional[str] = None) -> Any:
    """The largest of the entries over axis (all when None); the missing elements take no part,
    and a group without entries gives 0, as TF's."""
    from opsdk.v1 import math_ops

    sp = _sparse("sparse_reduce_max", sp_input)
    kind = np.dtype(sp.values.dtype)
    lowest = np.finfo(kind).min if kind.kind == "f" else np.iinfo(kind).min
    axis = reduction_axes if axis is None else axis
    keep = bool(keep_dims if keepdims is None else keepdims)
    dense = sparse_tensor_to_dense(sp, default_value=lowest.item())
    best = math_ops.reduce_max(dense, axis=axis, keepdims=keep)
    count = math_ops.reduce_sum(_scatter(sp, _ops.ones_like(sp.values)), axis=axis,
                                keepdims=keep)
    return _ops.where(_ops.greater(count, _ops.zeros_like(count)), best,
                      _ops.zeros_like(best), name=name)


def sparse_slice(sp_input: Any, start: Any, size: Any, name: Optional[str] = None) -> SparseTensor:
    """The entries inside the box [start, start + size), their coordinates from start; the
    dense shape the part of the box inside the tensor, as TF's."""
    sp = _sparse("sparse_slice", sp_input)
    first, _ = _dims("sparse_slice", start)
    extent, _ = _dims("sparse_slice", size)

    def cut(indices: np.ndarray, shape: np.ndarray, lo: np.ndarray, n: np.ndarray) -> list:
        inside = np.all((indices >= lo) & (indices < lo + n), axis=1) if len(indices) else \
            np.zeros(0, bool)
        kept = np.flatnonzero(inside).astype(np.int64)
        return [kept, (indices[kept] - lo).astype(np.int64),
                np.maximum(np.minimum(n, shape - lo), 0).astype(np.int64)]
    kept, indices, dense = _index_op("sparse_slice", cut,
                                     [sp.indices, sp.dense_shape, first, extent],
                                     ["int64", "int64", "int64"])
    rank = None if sp._shape is None else len(sp._shape)
    kept.set_shape([None])
    indices.set_shape([None, rank])
    dense.set_shape([rank])
    return SparseTensor(indices, _ops.gather(sp.values, kept, axis=0, name=name), dense)


def sparse_tensor_dense_matmul(sp_a: Any, b: Any, adjoint_a: bool = False,
                               adjoint_b: bool = False, name: Optional[str] = None) -> Any:
    """`sp_a @ b` for a sparse matrix sp_a ([m, k]) and a dense b ([k, n]), each entry of sp_a
    scaling its row of b into its row of the result; adjoints transpose."""
    sp = _sparse("sparse_tensor_dense_matmul", sp_a)
    dense = _t(b)
    if adjoint_b:
        dense = _ops.transpose(dense, perm=[1, 0])
    if dense.shape is not None and len(dense.shape) != 2:
        raise OpsdkError(f"sparse_tensor_dense_matmul: b must be a matrix, got shape "
                         f"{list(dense.shape)}")
    rows = _ops.slice(sp.indices, begin=[0, 1 if adjoint_a else 0], size=[-1, 1])
    cols = _ops.reshape(_ops.slice(sp.indices, begin=[0, 0 if adjoint_a else 1], size=[-1, 1]),
                        shape=[-1])
    picked = _ops.gather(dense, cols, axis=0)
    scaled = _ops.mul(picked, _ops.reshape(sp.values, shape=[-1, 1]))
    m = _ops.slice(sp.dense_shape, begin=[1 if adjoint_a else 0], size=[1])
    n = _ops.cast(_ops.slice(_ops.shape(dense), begin=[1], size=[1]), dtype="int64")
    known_m = -1 if sp._shape is None or sp._shape[1 if adjoint_a else 0] is None \
        else int(sp._shape[1 if adjoint_a else 0])
    known_n = -1 if dense.shape is None or dense.shape[1] is None else int(dense.shape[1])
    return _ops.scatter_nd(rows, scaled, _ops.concat([m, n], axis=0), shape=[known_m, known_n],
                           name=name)


def sparse_retain(sp_input: Any, to_retain: Any) -> SparseTensor:
    """The entries where the bool vector to_retain holds, in their order."""
    from opsdk.v1.composed import boolean_mask

    sp = _sparse("sparse_retain", sp_input)
    keep = _t(to_retain)
    kept = SparseTensor(boolean_mask(sp.indices, keep), boolean_mask(sp.values, keep),
                        sp.dense_shape)
    kept._shape = sp._shape
    return kept


def sparse_softmax(sp_input: Any, name: Optional[str] = None) -> SparseTensor:
    """Softmax over each innermost row's entries (the missing elements take no part)."""
    from opsdk.v1 import nn
    from opsdk.v1.composed import gather_nd

    sp = _sparse("sparse_softmax", sp_input)
    lowest = np.finfo(np.dtype(sp.values.dtype)).min if np.dtype(sp.values.dtype).kind == "f" \
        else None
    if lowest is None:
        raise OpsdkError(f"sparse_softmax: values must be floats, got {sp.values.dtype}")
    dense = sparse_tensor_to_dense(sp, default_value=float(lowest))
    soft = gather_nd(nn.softmax(dense), sp.indices, name=name)
    out = SparseTensor(sp.indices, soft, sp.dense_shape)
    out._shape = sp._shape
    return out


def sparse_segment_sum(data: Any, indices: Any, segment_ids: Any, name: Optional[str] = None,
                       num_segments: Any = None) -> Any:
    """The rows data[indices] summed by sorted segment id (`tf.sparse.segment_sum`)."""
    return _segment_reduce("sparse_segment_sum", data, indices, segment_ids, None, num_segments,
                           name)


def sparse_segment_mean(data: Any, indices: Any, segment_ids: Any, name: Optional[str] = None,
                        num_segments: Any = None) -> Any:
    """The rows data[indices] averaged by sorted segment id."""
    return _segment_reduce("sparse_segment_mean", data, indices, segment_ids, "mean",
                           num_segments, name)


def sparse_segment_sqrt_n(data: Any, indices: Any, segment_ids: Any, name: Optional[str] = None,
                          num_segments: Any = None) -> Any:
    """The rows data[indices] summed by sorted segment id, divided by sqrt(segment's size)."""
    return _segment_reduce("sparse_segment_sqrt_n", data, indices, segment_ids, "sqrt_n",
                           num_segments, name)


def _segment_reduce(who: str, data: Any, indices: Any, segment_ids: Any, scale: Any,
                    num_segments: Any, name: Optional[str]) -> Any:
    rows = _ops.gather(_t(data), _t(indices), axis=0)
    ids = _t(segment_ids)
    if num_segments is None:
        total = _linalg.segment_sum(rows, ids)
        count = _linalg.segment_sum(_ops.ones_like(_ops.cast(ids, dtype=rows.dtype)), ids)
    else:
        total = _linalg.unsorted_segment_sum(rows, ids, num_segments)
        count = _linalg.unsorted_segment_sum(_ops.ones_like(_ops.cast(ids, dtype=rows.dtype)),
                                            ids, num_segments)
    if scale is None:
        return _ops.identity(total, name=name)
    count = _ops.maximum(count, _ops.ones_like(count))
    if scale == "sqrt_n":
        count = _ops.sqrt(count)
    extra = len(total.shape) - 1 if total.shape is not None else 0
    return _ops.div(total, _ops.reshape(count, shape=[-1] + [1] * extra), name=name)


def embedding_lookup_sparse(params: Any, sp_ids: Any, sp_weights: Any,
                            partition_strategy: str = "mod", name: Optional[str] = None,
                            combiner: Optional[str] = None, max_norm: Any = None) -> Any:
    """`tf.nn.embedding_lookup_sparse`: per row of sp_ids (its first coordinate, rows sorted),
    the embeddings of its ids combined: 'sum', 'mean' (the default) or 'sqrtn', weighted by
    sp_weights' values when given. params: one table, a list of tables or a
    PartitionedVariable, as embedding_lookup reads them (partition_strategy, max_norm)."""
    combiner = combiner or "mean"
    if combiner not in ("sum", "mean", "sqrtn"):
        raise OpsdkError(f"embedding_lookup_sparse: combiner {combiner!r}; give 'sum', 'mean' "
                         "or 'sqrtn'")
    ids = _sparse("embedding_lookup_sparse", sp_ids)
    segments = _ops.reshape(_ops.slice(ids.indices, begin=[0, 0], size=[-1, 1]), shape=[-1])
    rows = _partitioned.lookup("embedding_lookup_sparse", params, ids.values, partition_strategy,
                               max_norm)
    if sp_weights is None:
        weights = _ops.ones_like(_ops.cast(ids.values, dtype=rows.dtype))
    else:
        weights = _sparse("embedding_lookup_sparse", sp_weights).values
        rows = _ops.mul(rows, _ops.reshape(weights, shape=[-1, 1]))
    total = _linalg.segment_sum(rows, segments)
    if combiner == "sum":
        return _ops.identity(total, name=name)
    norm = _linalg.segment_sum(weights if combiner == "mean" else _ops.mul(weights, weights),
                              segments)
    if combiner == "sqrtn":
        norm = _ops.sqrt(norm)
    empty = _ops.equal(norm, _ops.zeros_like(norm))  # a row without ids: zeros, as TF's
    norm = _ops.where(empty, _ops.ones_like(norm), norm)
    return _ops.div(total, _ops.reshape(norm, shape=[-1, 1]), name=name)


def sparse_fill_empty_rows(sp_input: Any, default_value: Any,
                           name: Optional[str] = None) -> tuple[SparseTensor, Any]:
    """(the sparse tensor with an entry `default_value` at [row, 0, ...] in each row that has
    none, row-major; a bool vector marking those rows). A gradient reaches the values and the
    default value (summed over the rows it filled)."""
    sp = _sparse("sparse_fill_empty_rows", sp_input)
    fill = _ops.cast(_t(default_value), dtype=sp.values.dtype) \
        if not isinstance(default_value, (int, float, np.number)) else \
        opsdk.constant(np.asarray(default_value, dtype=sp.values.dtype))
    indices, source, empty = _index_op("sparse_fill_empty_rows", _filled,
                                       [sp.indices, sp.dense_shape], ["int64", "int64", "bool"])
    rank = None if sp._shape is None else len(sp._shape)
    indices.set_shape([None, rank])
    source.set_shape([None])
    empty.set_shape([None if sp._shape is None else sp._shape[0]])
    values = _ops.gather(_ops.concat([sp.values, _ops.reshape(fill, shape=[1])], axis=0), source,
                         axis=0)
    out = SparseTensor(indices, values, sp.dense_shape)
    out._shape = sp._shape
    return out, _ops.identity(empty, name=name) if name else empty


def _filled(indices: np.ndarray, dense_shape: np.ndarray) -> list:
    """(indices with [row, 0, ...] added for each empty row, row-major; per entry the position
    of its value in values + [default]; the empty rows)."""
    rows = int(dense_shape[0]) if len(dense_shape) else 0
    if len(indices) and ((indices[:, 0] < 0).any() or (indices[:, 0] >= rows).any()):
        raise ValueError(f"sparse_fill_empty_rows: an entry's row is outside [0, {rows})")
    empty = np.ones(rows, bool)
    empty[indices[:, 0]] = False
    extra = np.zeros((int(empty.sum()), indices.shape[1] if indices.ndim == 2
                      else len(dense_shape)), np.int64)
    extra[:, 0] = np.flatnonzero(empty)
    every = np.concatenate([indices.reshape(-1, extra.shape[1]), extra]).astype(np.int64)
    source = np.concatenate([np.arange(len(indices)), np.full(len(extra), len(indices))])
    order = _row_major(every)
    return [every[order], source[order].astype(np.int64), empty]


def safe_embedding_lookup_sparse(embedding_weights: Any, sparse_ids: Any,
                                 sparse_weights: Any = None, combiner: str = "mean",
                                 default_id: Any = None, name: Optional[str] = None,
                                 partition_strategy: str = "div", max_norm: Any = None) -> Any:
    """`tf.nn.safe_embedding_lookup_sparse`: embedding_lookup_sparse over the ids >= 0 (and,
    with weights, of a weight > 0), each row of sparse_ids without one getting the embedding of
    `default_id`, or zeros; ids of rank above 2 are rows of all but their last dim, and the
    result has those dims then the embedding's."""
    ids = _sparse("safe_embedding_lookup_sparse", sparse_ids)
    weights = None if sparse_weights is None else _sparse("safe_embedding_lookup_sparse",
                                                          sparse_weights)
    rank = None if ids._shape is None else len(ids._shape)
    if rank is None:
        raise OpsdkError("safe_embedding_lookup_sparse: sparse_ids must have a known rank")
    if rank > 2:
        outer = _ops.slice(ids.dense_shape, begin=[0], size=[rank - 1])
        last = _ops.slice(ids.dense_shape, begin=[rank - 1], size=[1])
        flat = _ops.concat([opsdk.constant(np.asarray([-1], np.int64)), last], axis=0)
        ids = sparse_reshape(ids, flat)
        weights = None if weights is None else sparse_reshape(weights, flat)
    keep = _ops.greater_equal(ids.values, _ops.zeros_like(ids.values))
    if weights is not None:
        positive = _ops.greater(weights.values, _ops.zeros_like(weights.values))
        keep = _ops.where(positive, keep, _ops.zeros_like(keep))  # both hold
        weights = sparse_retain(weights, keep)
    ids = sparse_retain(ids, keep)
    ids, empty = sparse_fill_empty_rows(ids, 0 if default_id is None else default_id)
    if weights is not None:
        weights, _ = sparse_fill_empty_rows(weights, 1.0)
    result = embedding_lookup_sparse(embedding_weights, ids, weights, partition_strategy,
                                     combiner=combiner, max_norm=max_norm)
    if default_id is None:  # rows without ids: zeros
        mask = _ops.reshape(empty, shape=[-1] + [1] * (len(result.shape or [0, 0]) - 1))
        result = _ops.where(mask, _ops.zeros_like(result), result)
    if rank > 2:
        row = _ops.slice(_ops.cast(_ops.shape(result), dtype="int64"), begin=[1], size=[-1])
        result = _ops.reshape_dims(result, _ops.concat([outer, row], axis=0))
    return _ops.identity(result, name=name) if name else result


def edit_distance(hypothesis: Any, truth: Any, normalize: bool = True,
                  name: str = "edit_distance") -> Any:
    """The Levenshtein distance between the sequences of two sparse tensors (their entries
    grouped by all but the last coordinate, in the order given), divided by the truth's length
    when normalize (inf for an empty truth, 0 when both are empty); float32 of shape
    max(both dense shapes)[:-1]."""
    h, t = _sparse("edit_distance", hypothesis), _sparse("edit_distance", truth)
    if h._string != t._string:
        raise OpsdkError("edit_distance: hypothesis and truth must hold values of one dtype "
                         "(one holds strings, the other not)")
    if not h._string and h.values.dtype != t.values.dtype:
        raise OpsdkError(f"edit_distance: hypothesis holds {h.values.dtype} values and truth "
                         f"{t.values.dtype}; give one dtype")
    return _ops.edit_distance(h.indices, h.values, h.dense_shape, t.indices, t.values,
                              t.dense_shape, normalize=bool(normalize), name=name)


def _index_op(who: str, fn: Any, inputs: list, outs: list) -> list:
    """A py_func computing int64 index arrays (no gradient: indices have none)."""
    from opsdk.runtime.frontend.py_func import py_func_node

    return list(py_func_node(fn, inputs, outs, name=who).outputs)


def _row_major(indices: np.ndarray) -> np.ndarray:
    """The permutation sorting coordinates in row-major order (stable)."""
    if not len(indices):
        return np.zeros(0, np.int64)
    return np.lexsort(indices.T[::-1]).astype(np.int64)


def _permuted(sp: SparseTensor, indices: Any, perm: Any, dense_shape: Any,
              static: Optional[tuple]) -> SparseTensor:
    out = SparseTensor(_ops.gather(indices, perm, axis=0), _ops.gather(sp.values, perm, axis=0),
                       dense_shape)
    out._shape = static
    return out


def sparse_reorder(sp_input: Any, name: Optional[str] = None) -> SparseTensor:
    """The same sparse tensor with its entries in row-major order (a gradient reaches each
    value where it came from)."""
    sp = _sparse("sparse_reorder", sp_input)
    perm, = _index_op("sparse_reorder", _row_major, [sp.indices], ["int64"])
    perm.set_shape([None])
    return _permuted(sp, sp.indices, perm, sp.dense_shape, sp._shape)


def sparse_transpose(sp_input: Any, perm: Any = None, name: Optional[str] = None) -> SparseTensor:
    """The sparse tensor with its axes permuted (default: reversed), entries reordered."""
    sp = _sparse("sparse_transpose", sp_input)
    rank = None if sp._shape is None else len(sp._shape)
    if perm is None:
        if rank is None:
            raise OpsdkError("sparse_transpose: the rank must be known to reverse the axes")
        perm = list(range(rank))[::-1]
    order = opsdk.constant(np.asarray([int(p) for p in perm], np.int64))
    moved = SparseTensor(_ops.gather(sp.indices, order, axis=1), sp.values,
                         _ops.gather(sp.dense_shape, order, axis=0))
    if sp._shape is not None:
        moved._shape = tuple(sp._shape[int(p)] for p in perm)
    return sparse_reorder(moved, name=name)


def sparse_reshape(sp_input: Any, shape: Any, name: Optional[str] = None) -> SparseTensor:
    """The sparse tensor seen with another dense shape of as many elements (one -1 allowed),
    its entries at the same row-major positions."""
    sp = _sparse("sparse_reshape", sp_input)
    dims, sizes = _dims("sparse_reshape", shape)

    def move(indices: np.ndarray, old: np.ndarray, new: np.ndarray) -> list:
        total = int(np.prod(old))
        new = np.asarray(new, np.int64).copy()
        if (new == -1).sum() > 1 or (new < -1).any():
            raise ValueError(f"sparse_reshape: shape {new.tolist()} may hold one -1 and sizes "
                             ">= 0")
        if (new == -1).any():
            known = int(np.prod(new[new != -1]))
            new[new == -1] = total // known if known else 0
        if int(np.prod(new)) != total:
            raise ValueError(f"sparse_reshape: cannot reshape a tensor of {total} elements to "
                             f"shape {new.tolist()}")
        flat = np.ravel_multi_index(tuple(indices.T), tuple(old)) if len(indices) else \
            np.zeros(0, np.int64)
        moved = np.stack(np.unravel_index(flat, tuple(new)), axis=1) if len(indices) else \
            np.zeros((0, len(new)), np.int64)
        return [moved.astype(np.int64), new]
    indices, dense = _index_op("sparse_reshape", move, [sp.indices, sp.dense_shape, dims],
                               ["int64", "int64"])
    rank = len(sizes) if sizes else None
    indices.set_shape([None, rank])
    dense.set_shape([rank])
    out = SparseTensor(indices, sp.values, dense)
    if sizes and -1 not in sizes:
        out._shape = tuple(sizes)
    return out


def sparse_concat(axis: int, sp_inputs: Sequence[Any], name: Optional[str] = None,
                  expand_nonconcat_dim: bool = False, concat_dim: Any = None,
                  expand_nonconcat_dims: Any = None) -> SparseTensor:
    """The sparse tensors joined along axis (their other sizes equal, or the largest with
    expand_nonconcat_dim), entries in row-major order."""
    a = int(concat_dim if concat_dim is not None else axis)
    expand = bool(expand_nonconcat_dims if expand_nonconcat_dims is not None
                  else expand_nonconcat_dim)
    parts = [_sparse("sparse_concat", p) for p in sp_inputs]
    if not parts:
        raise OpsdkError("sparse_concat: give at least one sparse tensor")

    def join(*arrays: np.ndarray) -> list:
        pairs = [(arrays[2 * k], arrays[2 * k + 1]) for k in range(len(parts))]
        rank = len(pairs[0][1])
        axis_ = a % rank
        shapes = np.stack([p[1] for p in pairs])
        others = np.delete(shapes, axis_, axis=1)
        if not expand and (others != others[0]).any():
            raise ValueError(f"sparse_concat: the sparse tensors' sizes outside axis {axis_} "
                             f"differ: {shapes.tolist()} (expand_nonconcat_dim=True takes the "
                             "largest)")
        offset, moved = 0, []
        for index, shape in pairs:
            shifted = np.array(index, np.int64, copy=True).reshape(-1, rank)
            shifted[:, axis_] += offset
            moved.append(shifted)
            offset += int(shape[axis_])
        out_shape = shapes.max(axis=0)
        out_shape[axis_] = offset
        return [np.concatenate(moved), out_shape.astype(np.int64)]
    inputs = [t for p in parts for t in (p.indices, p.dense_shape)]
    indices, dense = _index_op("sparse_concat", join, inputs, ["int64", "int64"])
    indices.set_shape([None, None])
    values = _ops.concat([p.values for p in parts], axis=0)
    joined = SparseTensor(indices, values, dense)
    return sparse_reorder(joined, name=name)


def _dims(who: str, shape: Any) -> tuple:
    """A shape given as a tensor or as Python sizes: (int64 tensor, sizes known or [])."""
    if isinstance(shape, (opsdk.Tensor, opsdk.Variable)):
        dims = _int64(who, "shape", shape)
        return dims, []
    sizes = [int(d) for d in np.asarray(shape).reshape(-1)]
    return opsdk.constant(np.asarray(sizes, np.int64)), sizes


def scatter_nd(indices: Any, updates: Any, shape: Any, name: Optional[str] = None) -> Any:
    """`tf.scatter_nd`: zeros of `shape` with each update added at its coordinate (indices
    [..., k] address the first k dims); repeated coordinates add up. Differentiable in
    updates."""
    dims, sizes = _dims("scatter_nd", shape)
    return _ops.scatter_nd(_int64("scatter_nd", "indices", indices), _t(updates), dims,
                           shape=sizes, name=name)


def _tensor_scatter(who: str, tensor: Any, indices: Any, updates: Any) -> tuple:
    x = _t(tensor)
    idx = _int64(who, "indices", indices)
    dims = _ops.cast(_ops.shape(x), dtype="int64")
    sizes = [] if x.shape is None else [-1 if d is None else int(d) for d in x.shape]
    return x, _ops.scatter_nd(idx, _ops.cast(_t(updates), dtype=x.dtype), dims, shape=sizes), \
        (idx, dims, sizes)


def tensor_scatter_nd_add(tensor: Any, indices: Any, updates: Any,
                          name: Optional[str] = None) -> Any:
    """`tf.tensor_scatter_nd_add`: tensor with the updates added at their coordinates."""
    x, scattered, _ = _tensor_scatter("tensor_scatter_nd_add", tensor, indices, updates)
    return _ops.add(x, scattered, name=name)


def tensor_scatter_nd_sub(tensor: Any, indices: Any, updates: Any,
                          name: Optional[str] = None) -> Any:
    """`tf.tensor_scatter_nd_sub`: tensor with the updates subtracted at their coordinates."""
    x, scattered, _ = _tensor_scatter("tensor_scatter_nd_sub", tensor, indices, updates)
    return _ops.sub(x, scattered, name=name)


def tensor_scatter_nd_update(tensor: Any, indices: Any, updates: Any,
                             name: Optional[str] = None) -> Any:
    """`tf.tensor_scatter_nd_update`: tensor with the elements (or slices) at the coordinates
    replaced by the updates. A coordinate given twice gets the sum of its updates (TF leaves
    which one wins undefined)."""
    x, scattered, (idx, dims, sizes) = _tensor_scatter("tensor_scatter_nd_update", tensor,
                                                       indices, updates)
    ones = _ops.ones_like(_ops.cast(_t(updates), dtype=x.dtype))
    hit = _ops.scatter_nd(idx, ones, dims, shape=sizes)
    return _ops.where(_ops.not_equal(hit, _ops.zeros_like(hit)), scattered, x, name=name)


def convert_to_tensor_or_sparse_tensor(value: Any, dtype: Any = None,
                                       name: Optional[str] = None) -> Any:
    """A SparseTensor (a SparseTensorValue made one) as it is, anything else as a tensor."""
    if isinstance(value, (SparseTensor, SparseTensorValue)):
        return SparseTensor.from_value(value)
    return _t(value, dtype=dtype, name=name)


NAMES = {"SparseTensor": SparseTensor, "SparseTensorValue": SparseTensorValue,
         "sparse_placeholder": sparse_placeholder, "sparse_tensor_to_dense": sparse_tensor_to_dense,
         "sparse_to_dense": sparse_to_dense, "sparse_add": sparse_add,
         "sparse_reduce_sum": sparse_reduce_sum,
         "sparse_tensor_dense_matmul": sparse_tensor_dense_matmul, "sparse_retain": sparse_retain,
         "sparse_fill_empty_rows": sparse_fill_empty_rows,
         "sparse_softmax": sparse_softmax, "sparse_segment_sum": sparse_segment_sum,
         "sparse_segment_mean": sparse_segment_mean,
         "sparse_segment_sqrt_n": sparse_segment_sqrt_n, "edit_distance": edit_distance,
         "sparse_reorder": sparse_reorder, "sparse_transpose": sparse_transpose,
         "sparse_reduce_max": sparse_reduce_max, "sparse_slice": sparse_slice,
         "sparse_reshape": sparse_reshape, "sparse_concat": sparse_concat,
         "convert_to_tensor_or_sparse_tensor": convert_to_tensor_or_sparse_tensor,
         "scatter_nd": scatter_nd, "tensor_scatter_nd_add": tensor_scatter_nd_add,
         "tensor_scatter_nd_sub": tensor_scatter_nd_sub,
         "tensor_scatter_nd_update": tensor_scatter_nd_update,
         "tensor_scatter_add": tensor_scatter_nd_add, "tensor_scatter_sub": tensor_scatter_nd_sub,
         "tensor_scatter_update": tensor_scatter_nd_update}
# tf.sparse's names
SPARSE = {"SparseTensor": SparseTensor, "placeholder": sparse_placeholder, "to_dense": to_dense,
          "from_dense": from_dense, "add": sparse_add, "reduce_sum": sparse_reduce_sum,
          "sparse_dense_matmul": sparse_tensor_dense_matmul, "matmul": sparse_tensor_dense_matmul,
          "retain": sparse_retain, "fill_empty_rows": sparse_fill_empty_rows,
          "softmax": sparse_softmax, "segment_sum": sparse_segment_sum,
          "segment_mean": sparse_segment_mean, "segment_sqrt_n": sparse_segment_sqrt_n,
          "reorder": sparse_reorder, "transpose": sparse_transpose, "reshape": sparse_reshape,
          "concat": sparse_concat, "reduce_max": sparse_reduce_max, "slice": sparse_slice}
NN = {"embedding_lookup_sparse": embedding_lookup_sparse,
      "safe_embedding_lookup_sparse": safe_embedding_lookup_sparse}
