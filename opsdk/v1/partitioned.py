"""Partitioned variables: `tf.get_variable(..., partitioner=...)` makes one variable per shard
(`name/part_0`, `name/part_1`, ...), split along one axis, each an ordinary variable (a replica
device setter puts the shards on ps tasks in turn); a `PartitionedVariable` holds them. Reading
it whole concatenates the shards; `tf.nn.embedding_lookup` of it (or of a list of tables) reads
each shard only at the ids it holds, TensorFlow's "mod" or "div" strategy, so each shard's
gradient is its own rows.

    emb = tf.get_variable("emb", [10000, 64], partitioner=tf.fixed_size_partitioner(4))
    rows = tf.nn.embedding_lookup(emb, ids)      # shard id % 4 holds id, at row id // 4
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import args as _args, scopes as _scopes, tensors as _tensors
from opsdk.v1.dtypes import as_dtype, float32
from opsdk.v1.tensors import TensorShape, convert_to_tensor as _t

__all__ = ["PartitionedVariable", "fixed_size_partitioner", "min_max_variable_partitioner",
           "variable_axis_size_partitioner", "partition_sizes", "lookup"]


# ----------------------------------------------------------------------------- partitioners
def _dims(who: str, shape: Any) -> list[int]:
    dims = list(shape.as_list() if hasattr(shape, "as_list") else shape)
    if any(d is None for d in dims) or not dims:
        raise OpsdkError(f"{who}: the variable's shape {dims} must be fully known and not a scalar")
    return [int(d) for d in dims]


def _along(who: str, shape: Any, axis: int) -> tuple[list[int], int]:
    """(the variable's sizes, the axis to split, from 0)."""
    dims = _dims(who, shape)
    if not -len(dims) <= axis < len(dims):
        raise OpsdkError(f"{who}: axis {axis} is out of range for a variable of rank {len(dims)}")
    return dims, axis % len(dims)


def _item_bytes(dtype: Any, per_string: int) -> int:
    kind = as_dtype(dtype or "float32")
    return per_string if kind == object or kind.kind in "SUO" else kind.itemsize


def _partitions(dims: list[int], axis: int, count: int) -> list[int]:
    return [count if i == axis else 1 for i in range(len(dims))]


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Callable:
    """A partitioner of `num_shards` shards along `axis`."""
    count = _args.static_int("fixed_size_partitioner", "num_shards", num_shards)
    if count < 1:
        raise OpsdkError(f"fixed_size_partitioner: num_shards must be at least 1, not {count}")

    def partitioner(shape: Any, dtype: Any = None) -> list[int]:
        dims, ax = _along("fixed_size_partitioner", shape, axis)
        return _partitions(dims, ax, count)
    return partitioner


def variable_axis_size_partitioner(max_shard_bytes: int, axis: int = 0,
                                   bytes_per_string_element: int = 16,
                                   max_shards: Optional[int] = None) -> Callable:
    """A partitioner of shards of at most `max_shard_bytes` each along `axis` (at least one
    slice a shard), at most `max_shards` of them."""
    if max_shard_bytes < 1 or (max_shards is not None and max_shards < 1):
        raise OpsdkError("variable_axis_size_partitioner: max_shard_bytes and max_shards must "
                         "be positive")

    def partitioner(shape: Any, dtype: Any = None) -> list[int]:
        dims, ax = _along("variable_axis_size_partitioner", shape, axis)
        slice_bytes = math.prod(d for i, d in enumerate(dims) if i != ax) * _item_bytes(
            dtype, bytes_per_string_element)
        per_shard = max(1, max_shard_bytes // max(slice_bytes, 1))
        count = max(1, math.ceil(dims[ax] / per_shard))
        return _partitions(dims, ax, min(count, max_shards) if max_shards else count)
    return partitioner


def min_max_variable_partitioner(max_partitions: int = 1, axis: int = 0,
                                 min_slice_size: int = 256 << 10,
                                 bytes_per_string_element: int = 16) -> Callable:
    """A partitioner of as many shards along `axis` as leaves each at least `min_slice_size`
    bytes, at most `max_partitions` (and at most the axis' size)."""
    if max_partitions < 1 or min_slice_size < 1:
        raise OpsdkError("min_max_variable_partitioner: max_partitions and min_slice_size must be "
                         "positive")

    def partitioner(shape: Any, dtype: Any = None) -> list[int]:
        dims, ax = _along("min_max_variable_partitioner", shape, axis)
        total = math.prod(dims) * _item_bytes(dtype, bytes_per_string_element)
        count = min(max_partitions, dims[ax], max(1, math.ceil(total / min_slice_size)))
        return _partitions(dims, ax, max(count, 1))
    return partitioner


def partition_sizes(who: str, dims: Sequence[int], partitions: Any) -> tuple[int, list[int]]:
    """(axis, each shard's size along it) for a partitioner's result: one entry per dim, all 1
    but one; the axis' size split as evenly as it goes, the first shards one larger."""
    parts = [int(p) for p in partitions]
    if len(parts) != len(dims) or any(p < 1 for p in parts) or sum(p > 1 for p in parts) > 1:
        raise OpsdkError(f"{who}: the partitioner gave {parts} for shape {list(dims)}; it must "
                         "give one positive count per dim, more than 1 in one dim at most")
    axis = next((i for i, p in enumerate(parts) if p > 1), 0)
    count = parts[axis]
    if count > dims[axis]:
        raise OpsdkError(f"{who}: {count} shards of a dim of size {dims[axis]} (shape "
                         f"{list(dims)}); use fewer shards")
    base, extra = divmod(dims[axis], count)
    return axis, [base + 1 if k < extra else base for k in range(count)]


class PartitionInfo:
    """What an initializer is told of a shard: the whole variable's shape and where the shard
    starts in it (TF's partition_info argument)."""

    def __init__(self, full_shape: Sequence[int], var_offset: Sequence[int]):
        self.full_shape, self.var_offset = list(full_shape), list(var_offset)


# ------------------------------------------------------------------------ the variable itself
class PartitionedVariable:
    """The shards of one variable, split along one axis (`tf.get_variable` with a partitioner):
    iterating gives the shard variables; as a tensor it is their concatenation."""

    def __init__(self, name: str, shape: Sequence[int], dtype: Any, variables: Sequence[Any],
                 partitions: Sequence[int]):
        self._name, self._shape, self._dtype = name, list(shape), as_dtype(dtype)
        self._variables, self._partitions = list(variables), list(partitions)
        self._axis = next((i for i, p in enumerate(self._partitions) if p > 1), 0)

    def __iter__(self):
        return iter(self._variables)

    def __len__(self) -> int:
        return len(self._variables)

    def _get_variable_list(self) -> list:
        return list(self._variables)

    def _get_partitions(self) -> list[int]:
        return list(self._partitions)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._shape)

    def get_shape(self) -> TensorShape:
        return TensorShape(self._shape)

    @property
    def graph(self) -> Any:
        return self._variables[0].graph

    def as_tensor(self) -> Any:
        """The shards' values concatenated: the whole variable."""
        if len(self._variables) == 1:
            return _ops.identity(_t(self._variables[0]))
        return _ops.concat([_t(v) for v in self._variables], axis=self._axis,
                           name=f"{self._name.split('/')[-1]}/concat")

    def _as_graph_element(self) -> Any:
        return self.as_tensor()

    def assign(self, value: Any, use_locking: bool = False, name: Optional[str] = None) -> Any:
        """Assign each shard its slice of `value` (of the whole variable's shape)."""
        whole = _t(value)
        sizes = [int(v.shape[self._axis]) for v in self._variables]
        pieces = _ops.split(whole, sizes=sizes, axis=self._axis, N=len(sizes)) \
            if len(sizes) > 1 else [whole]
        assigns = [v.assign(p) for v, p in zip(self._variables, pieces)]
        return opsdk.get_default_graph().create_op(
            "no_op", [], {}, [], name=name or f"{self._name.split('/')[-1]}/assign",
            control_inputs=[a.op if isinstance(a, opsdk.Tensor) else a for a in assigns])

    def __repr__(self) -> str:
        return (f"<PartitionedVariable '{self._name}' shape={self._shape} "
                f"partitions={self._partitions}>")


def make_shards(who: str, full: str, dims: list[int], dtype: Any, partitions: Any,
                shard: Callable[[str, list[int], PartitionInfo], Any]) -> PartitionedVariable:
    """A PartitionedVariable of the shards `shard(name, shape, partition_info)` makes."""
    axis, sizes = partition_sizes(who, dims, partitions)
    variables, start = [], 0
    for k, size in enumerate(sizes):
        shape = [size if i == axis else d for i, d in enumerate(dims)]
        offset = [start if i == axis else 0 for i in range(len(dims))]
        variables.append(shard(f"{full}/part_{k}", shape, PartitionInfo(dims, offset)))
        start += size
    parts = [len(sizes) if i == axis else 1 for i in range(len(dims))]
    return PartitionedVariable(full, dims, dtype, variables, parts)


def expand(variables: Any) -> list:
    """A list of variables with each PartitionedVariable replaced by its shards."""
    out: list = []
    for v in variables:
        out.extend(v._get_variable_list() if isinstance(v, PartitionedVariable) else [v])
    return out


def create_partitioned_variables(shape: Any, slicing: Any, initializer: Any,
                                 dtype: Any = float32, trainable: bool = True,
                                 collections: Any = None, name: Optional[str] = None,
                                 reuse: Any = None) -> list:
    """The shards of a variable split as `slicing` says (one count per dim), as a list (TF1's
    older form of get_variable with a partitioner)."""
    graph = opsdk.get_default_graph()
    with _scopes.variable_scope(name, default_name="PartitionedVariable", reuse=reuse) as scope:
        store, full = _scopes._store(graph), scope.name  # the shards are `scope/part_k`, as TF's
        if full not in store or not scope.reuse:
            store[full] = make_partitioned(graph, full, shape, as_dtype(dtype), initializer,
                                           lambda *_, **__: list(slicing), None, trainable,
                                           collections)
    return store[full]._get_variable_list()


def make_partitioned(graph: Any, full: str, shape: Any, dtype: np.dtype, init: Any,
                     partitioner: Any, regularizer: Any, trainable: bool,
                     collections: Any) -> PartitionedVariable:
    """The shards of variable `full` (get_variable with a partitioner), split as
    `partitioner(shape, dtype)` says, each initialised with its slice (a callable initializer
    is told the slice: partition_info)."""
    who = f"get_variable ('{full}')"
    array = None
    if not callable(init) and init is not None:
        if isinstance(init, opsdk.Tensor):
            raise OpsdkError(f"{who}: a partitioned variable's initializer must be an initializer "
                             f"or an array, not the tensor '{init.name}'")
        array = np.asarray(init, dtype=dtype)
        if shape is not None:
            array = np.broadcast_to(array, [int(d) for d in shape])
        shape = array.shape
    if shape is None:
        raise OpsdkError(f"{who}: a partitioned variable needs a shape")
    dims = [int(d) for d in _tensors._static_shape("get_variable", shape)]
    init = init if init is not None else _scopes.glorot_uniform_initializer()

    def shard(name: str, part: list, info: PartitionInfo) -> Any:
        with graph.control_dependencies(None):
            if array is not None:
                value = array[tuple(slice(o, o + d) for o, d in zip(info.var_offset, part))].copy()
            else:
                with _scopes._outside_name_scopes(graph), opsdk.name_scope(name):
                    value = init(part, dtype=dtype, partition_info=info)
            with _scopes._outside_name_scopes(graph):
                var = _tensors.Variable(value, trainable=trainable, name=name,
                                        collections=collections)
        if var.op.name != name:
            raise OpsdkError(f"get_variable: a node named '{name}' exists already (not made by "
                             "get_variable); choose another name")
        if regularizer is not None:
            penalty = regularizer(var)
            if penalty is not None:
                graph.add_to_collection(_scopes.GraphKeys.REGULARIZATION_LOSSES, penalty)
        return var
    return make_shards(who, full, dims, dtype, partitioner(
        TensorShape(dims), dtype=dtype), shard)


_scopes._PARTITIONED["make"] = make_partitioned


# ------------------------------------------------------------------------------- the lookup
def tables_of(who: str, params: Any) -> list:
    """The tables `params` names: a PartitionedVariable's shards, a list's items, or itself."""
    if isinstance(params, PartitionedVariable):
        return params._get_variable_list()
    if isinstance(params, (list, tuple)):
        tables = expand(params)
        if not tables:
            raise OpsdkError(f"{who}: params is an empty list; give at least one table")
        return tables
    return [params]


def lookup(who: str, params: Any, ids: Any, partition_strategy: str = "mod",
           max_norm: Any = None, name: Optional[str] = None) -> Any:
    """Rows of the table(s) at `ids` (any shape; the result is ids' shape then a row's). Of
    several tables, strategy "mod": id lives in table id % n at row id // n; "div": the tables
    hold consecutive ranges of ids, the first ones one row more where the count does not divide.
    Each table is read only at its own ids. `max_norm`: rows of a larger L2 norm scaled down to
    it."""
    if partition_strategy not in ("mod", "div"):
        raise OpsdkError(f"{who}: partition_strategy {partition_strategy!r}; give 'mod' or 'div'")
    given = tables_of(who, params)
    index = _t(ids)
    if index.dtype not in ("int32", "int64"):
        raise OpsdkError(f"{who}: ids must be int32 or int64, got {index.dtype}")
    graph = opsdk.get_default_graph()
    # Each table is read, and its rows gathered, where it lives (colocated, as TF's lookup): a
    # table on a ps task sends the rows asked for, not itself, and gets their gradient back.
    if len(given) == 1:
        with graph.colocate_with(_node(given[0])):
            rows = _ops.gather(_t(given[0]), index, axis=0)
        return _clipped(rows, max_norm, index, name)
    flat = _ops.reshape(index, shape=[-1])
    shard, local = _placement(who, [_static_shape(p) for p in given], flat, partition_strategy)
    pieces, positions = [], []
    for k, table in enumerate(given):
        at = _ops.reshape(_ops.where_indices(_ops.equal(shard, _const(k, shard.dtype))),
                          shape=[-1])
        positions.append(at)
        wanted = _ops.gather(local, at, axis=0)
        with graph.colocate_with(_node(table)):
            pieces.append(_ops.gather(_t(table), wanted, axis=0))
    # every position is in one shard's list: the rows back in the ids' order are those lists'
    # rows at the inverse of their concatenated positions
    order = _ops.concat(positions, axis=0)
    count = _shape64(order)
    inverse = _ops.scatter_nd(_ops.reshape(order, shape=[-1, 1]),
                              _ops.arange(_const(0, "int64"), _ops.reshape(count, shape=[]),
                                          _const(1, "int64")), count)
    rows = _ops.gather(_ops.concat(pieces, axis=0), inverse, axis=0)
    row_shape = _ops.slice(_shape64(rows), begin=[1], size=[-1])
    known = None if index.shape is None or rows.shape is None else [
        -1 if d is None else d for d in (*index.shape, *rows.shape[1:])]
    whole = _ops.reshape_dims(rows, _ops.concat([_shape64(index), row_shape], axis=0),
                              shape=known or [])
    return _clipped(whole, max_norm, index, name)


def _static_shape(table: Any) -> Optional[tuple]:
    """A table's shape known when the graph is built (None: unknown rank), read without a node."""
    shape = table.shape if hasattr(table, "shape") else np.shape(table)
    shape = shape.as_list() if hasattr(shape, "as_list") else shape
    return None if shape is None else tuple(shape)


def _node(table: Any) -> Any:
    """The node a table lives on: a variable's, or the tensor's."""
    return table.op if hasattr(table, "op") else _t(table)


def _shape64(t: Any) -> Any:
    return _ops.cast(_ops.shape(t), dtype="int64")


def _const(value: int, dtype: str) -> Any:
    return opsdk.constant(np.asarray(value, dtype=dtype))


def _placement(who: str, shapes: list, flat: Any, strategy: str) -> tuple[Any, Any]:
    """(the shard of each id, its row there), of tables of the static `shapes`."""
    n, dtype = len(shapes), flat.dtype
    if strategy == "mod":
        return _ops.floor_mod(flat, _const(n, dtype)), _ops.floor_div(flat, _const(n, dtype))
    sizes = [s[0] if s else None for s in shapes]
    if None in sizes:
        raise OpsdkError(f"{who}: partition_strategy 'div' needs tables of known row counts, "
                         f"got {sizes}")
    per, extra = divmod(sum(sizes), n)
    if per == 0:
        raise OpsdkError(f"{who}: {sum(sizes)} rows cannot be split 'div' over {n} tables")
    big = extra * (per + 1)  # ids below it are in the first `extra` tables, per + 1 rows each
    low = _ops.less(flat, _const(big, dtype))
    rest = _ops.sub(flat, _const(extra, dtype))
    shard = _ops.where(low, _ops.floor_div(flat, _const(per + 1, dtype)),
                       _ops.floor_div(rest, _const(per, dtype)))
    local = _ops.where(low, _ops.floor_mod(flat, _const(per + 1, dtype)),
                       _ops.floor_mod(rest, _const(per, dtype)))
    return shard, local


def _clipped(rows: Any, max_norm: Any, index: Any, name: Optional[str]) -> Any:
    """Each looked-up row scaled down to L2 norm `max_norm` where larger (the axes after ids')."""
    if max_norm is None:
        return _ops.identity(rows, name=name) if name else rows
    lead = len(index.shape) if index.shape is not None else None
    if lead is None or rows.shape is None:
        raise OpsdkError("embedding_lookup: max_norm needs ids and params of known rank")
    axes = list(range(lead, len(rows.shape)))
    if not axes:
        return rows
    limit = _ops.cast(_t(max_norm), dtype=rows.dtype)
    norm = _ops.sqrt(_ops.reduce_sum(_ops.square(rows), axes=axes, keepdims=True))
    return _ops.div(_ops.mul(rows, limit), _ops.maximum(norm, limit), name=name)


TOP_LEVEL = {"create_partitioned_variables": create_partitioned_variables,
             "fixed_size_partitioner": fixed_size_partitioner,
             "min_max_variable_partitioner": min_max_variable_partitioner,
             "variable_axis_size_partitioner": variable_axis_size_partitioner}
