"""TF1's `tf.TensorArray`: a list of same-shaped tensors written and read by index, the usual way
a `tf.while_loop` collects one output per step (`ta = ta.write(t, out)`, then `ta.stack()`).

opsdk keeps a TensorArray as one tensor, its *buffer*: one row per element, the element
flattened (`[size, elements' size]`), and each operation returns a new TensorArray over a new
buffer, as TF's do over their flow. A write replaces a row (`tensor_scatter_nd_update`), a
read gathers one and reshapes it to the element shape, `stack` reshapes the whole buffer. So
gradients flow through writes and reads as through those ops, inside loops too (the buffer is
a loop variable). The element shape may be unknown when the array is made: the buffer starts
with rows of one zero, which the first write's value widens by broadcasting (`[n, 1] +
[1, k]`), so the rows take the element's size when the step runs; the element shape seen by
the first write is kept for reads and `stack` (at most one of its sizes may be unknown when the
graph is built, as a batch size).

Differences from TF: a write copies the buffer (a step costs the array's size, so a loop of n
writes costs n times the array); `clear_after_read` is not enforced (an element may be read
twice); writing one index twice replaces the element where TF refuses; `concat` takes
same-shaped elements only; `split` is not provided.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import dtypes
from opsdk.v1.tensors import TensorShape, zeros
from opsdk.v1.tensors import convert_to_tensor as _t


def _first_size(x: Any) -> Any:
    """x's run-time size along its first axis, as an int64 vector of one."""
    return _ops.cast(_ops.slice(_ops.shape(x), begin=[0], size=[1]), dtype="int64")


class _Meta:
    """What every TensorArray derived from one shares: dtype, element shape (learned from the
    first write when not given), whether it grows."""

    def __init__(self, dtype: str, element_shape: Optional[list], dynamic_size: bool,
                 size: Optional[int]):
        self.dtype, self.element_shape = dtype, element_shape
        self.dynamic_size, self.size = dynamic_size, size


def _scalar_index(who: str, index: Any) -> Any:
    i = _t(index)
    if i.dtype not in ("int32", "int64") or (i.shape is not None and len(i.shape) != 0):
        raise OpsdkError(f"TensorArray.{who}: the index must be a scalar int, got "
                         f"{i.dtype}{list(i.shape or [])}")
    return _ops.cast(i, dtype="int64")


class TensorArray:
    """`tf.TensorArray(dtype, size=None, dynamic_size=None, clear_after_read=None,
    tensor_array_name=None, handle=None, flow=None, infer_shape=True, element_shape=None,
    colocate_with_first_write_call=True, name=None)`."""

    def __init__(self, dtype: Any, size: Any = None, dynamic_size: Any = None,
                 clear_after_read: Any = None, tensor_array_name: Any = None, handle: Any = None,
                 flow: Any = None, infer_shape: bool = True, element_shape: Any = None,
                 colocate_with_first_write_call: bool = True, name: Optional[str] = None,
                 _buffer: Any = None, _meta: Optional[_Meta] = None, _widened: bool = True):
        if _meta is not None:
            self._meta, self._buffer, self._widened = _meta, _buffer, _widened
            return
        if handle is not None or flow is not None:
            raise OpsdkError("TensorArray: handle= and flow= are not supported by opsdk.v1")
        name_of = dtypes.name_of(dtype)
        shape = None
        if element_shape is not None:
            given = element_shape if isinstance(element_shape, TensorShape) \
                else TensorShape(element_shape)
            shape = None if given.dims is None else given.as_list()
        static = size if isinstance(size, (int, np.integer)) and not isinstance(size, bool) \
            else None
        if size is None and not dynamic_size:
            raise OpsdkError("TensorArray: give size (or dynamic_size=True)")
        self._meta = _Meta(name_of, shape, bool(dynamic_size),
                           None if static is None else int(static))
        rows = _t(0 if size is None else size)
        if rows.dtype not in ("int32", "int64") or (rows.shape is not None and rows.shape != ()):
            raise OpsdkError(f"TensorArray: size must be a scalar int, got {rows.dtype}")
        width = 1
        # whether the rows have the elements' width already (else a write widens them)
        self._widened = shape is not None and None not in shape
        if self._widened:
            width = int(np.prod(shape, dtype=np.int64))
        self._buffer = zeros(_ops.stack([_ops.cast(rows, dtype="int64"),
                                         opsdk.constant(np.int64(width))]), dtype=name_of,
                             name=name or tensor_array_name)

    # ---------------------------------------------------------------------- what it holds
    @property
    def dtype(self) -> Any:
        return dtypes.as_dtype(self._meta.dtype)

    @property
    def element_shape(self) -> TensorShape:
        return TensorShape(self._meta.element_shape)

    @property
    def flow(self) -> Any:
        """The buffer: the tensor this array's value lives in."""
        return self._buffer

    @property
    def handle(self) -> Any:
        return self._buffer

    def _new(self, buffer: Any, widened: bool = True) -> "TensorArray":
        return TensorArray(None, _buffer=buffer, _meta=self._meta, _widened=widened)

    def size(self, name: Optional[str] = None) -> Any:
        """The number of elements, an int32 scalar."""
        if self._meta.size is not None and not self._meta.dynamic_size:
            return opsdk.constant(np.int32(self._meta.size), name=name)
        count = _ops.reshape(_ops.slice(_ops.shape(self._buffer), begin=[0], size=[1]),
                             shape=[])
        return _ops.cast(count, dtype="int32", name=name)

    def _learn(self, who: str, shape: Any) -> None:
        """Record (or check) the element shape a value brings."""
        if shape is None:
            return
        shape = list(shape)
        known = self._meta.element_shape
        if known is None:
            self._meta.element_shape = shape
            return
        if len(known) != len(shape) or any(a is not None and b is not None and a != b
                                           for a, b in zip(known, shape)):
            raise OpsdkError(f"TensorArray.{who}: a value of shape {shape} does not fit the "
                             f"array's elements of shape {known}")
        self._meta.element_shape = [a if a is not None else b for a, b in zip(known, shape)]

    def _value(self, who: str, value: Any) -> Any:
        x = _t(value)
        if x.dtype != self._meta.dtype:
            raise OpsdkError(f"TensorArray.{who}: the array holds {self._meta.dtype}, the value "
                             f"'{x.name}' is {x.dtype}")
        return x

    def _element_dims(self, who: str) -> list:
        shape = self._meta.element_shape
        if shape is None:
            raise OpsdkError(f"TensorArray.{who}: the element shape is not known yet; write an "
                             "element first or give element_shape=")
        if sum(d is None for d in shape) > 1:
            raise OpsdkError(f"TensorArray.{who}: elements of shape {shape} have more than one "
                             "size unknown when the graph is built; give element_shape= with "
                             "at most one None")
        return [-1 if d is None else int(d) for d in shape]

    def _rows(self, rows: Any, count: int, who: str, name: Optional[str]) -> Any:
        """Flat rows ([count, k]; count -1 when known only at run time) reshaped to [count,
        *element shape]: a static reshape where at most one size is unknown, else the sizes
        read when the step runs."""
        dims = self._element_dims(who)
        if count != -1 or -1 not in dims:
            return _ops.reshape(rows, shape=[count, *dims], name=name)
        target = _ops.concat([_first_size(rows), opsdk.constant(np.asarray(dims, np.int64))],
                             axis=0)
        return _ops.reshape_dims(rows, target, shape=[-1, *dims], name=name)

    # ------------------------------------------------------------------------- writing
    def _wide_rows(self, flat: Any, last: Any) -> Any:
        """The buffer with rows as wide as flat's (broadcast from rows of one zero), grown to
        hold index `last` when the array is dynamic."""
        base = _ops.add(self._buffer, _ops.zeros_like(_ops.slice(flat, begin=[0, 0],
                                                                 size=[1, -1])))
        if not self._meta.dynamic_size:
            return base
        missing = _ops.maximum(_ops.sub(_ops.add(last, opsdk.constant(np.int64(1))),
                                        _first_size(base)),
                               opsdk.constant(np.int64(0)))
        width = _ops.cast(_ops.slice(_ops.shape(flat), begin=[1], size=[1]), dtype="int64")
        extra = zeros(_ops.concat([_ops.reshape(missing, shape=[1]), width], axis=0),
                      dtype=self._meta.dtype)
        return _ops.concat([base, extra], axis=0)

    def write(self, index: Any, value: Any, name: Optional[str] = None) -> "TensorArray":
        """A new array with element `index` set to value (the builtin op write_row, which
        writes into the old buffer's array when nothing else reads it)."""
        i = _scalar_index("write", index)
        x = self._value("write", value)
        self._learn("write", x.shape)
        return self._new(_ops.write_row(self._buffer, i, _ops.reshape(x, shape=[-1]),
                                        grow=self._meta.dynamic_size, name=name))

    def scatter(self, indices: Any, value: Any, name: Optional[str] = None) -> "TensorArray":
        """A new array with elements indices[j] set to value[j]."""
        from opsdk.v1.sparse import tensor_scatter_nd_update

        idx = _ops.cast(_t(indices), dtype="int64")
        rows = self._flat_rows("scatter", value)
        base = self._wide_rows(rows, _ops.reduce_max(idx))
        return self._new(tensor_scatter_nd_update(base, _ops.reshape(idx, shape=[-1, 1]), rows,
                                                  name=name))

    def unstack(self, value: Any, name: Optional[str] = None) -> "TensorArray":
        """A new array whose elements are value's slices along its first axis."""
        return self._new(self._flat_rows("unstack", value, name))

    def _flat_rows(self, who: str, value: Any, name: Optional[str] = None) -> Any:
        """value's slices along its first axis, each flattened into a row; their shape becomes
        (or is checked against) the element shape."""
        x = self._value(who, value)
        if x.shape is None or not x.shape:
            raise OpsdkError(f"TensorArray.{who}: give a value of known rank >= 1")
        rest = x.shape[1:]
        self._learn(who, rest)
        if None not in rest:
            return _ops.reshape(x, shape=[-1, int(np.prod(rest, dtype=np.int64))], name=name)
        target = _ops.concat([_first_size(x), opsdk.constant(np.asarray([-1], np.int64))],
                             axis=0)
        return _ops.reshape_dims(x, target, shape=[-1, -1], name=name)

    # ------------------------------------------------------------------------- reading
    def read(self, index: Any, name: Optional[str] = None) -> Any:
        """Element `index`."""
        i = _scalar_index("read", index)
        row = _ops.gather(self._buffer, _ops.reshape(i, shape=[1]), axis=0)
        return _ops.reshape(row, shape=self._element_dims("read"), name=name)

    def gather(self, indices: Any, element_shape: Any = None,
               name: Optional[str] = None) -> Any:
        """The elements at indices, stacked."""
        idx = _ops.cast(_t(indices), dtype="int64")
        rows = _ops.gather(self._buffer, _ops.reshape(idx, shape=[-1]), axis=0)
        count = idx.shape[0] if idx.shape is not None and len(idx.shape) == 1 \
            and idx.shape[0] is not None else None
        return self._rows(rows, -1 if count is None else int(count), "gather", name)

    def stack(self, name: Optional[str] = None) -> Any:
        """All elements stacked along a new first axis."""
        count = self._meta.size if self._meta.size is not None and not self._meta.dynamic_size \
            else -1
        return self._rows(self._buffer, count, "stack", name)

    def concat(self, name: Optional[str] = None) -> Any:
        """The elements joined along their first axis (elements of one shape only)."""
        stacked = self.stack()
        dims = self._element_dims("concat")
        if not dims:
            raise OpsdkError("TensorArray.concat: the elements are scalars; use stack()")
        if -1 in dims[1:]:
            raise OpsdkError(f"TensorArray.concat: elements of shape {dims} need their sizes "
                             "after the first known when the graph is built")
        return _ops.reshape(stacked, shape=[-1, *dims[1:]], name=name)

    def split(self, value: Any, lengths: Any, name: Optional[str] = None) -> "TensorArray":
        raise OpsdkError("TensorArray.split is not provided by opsdk.v1; use unstack on "
                         "equal-length pieces")

    def identity(self) -> "TensorArray":
        return self._new(_ops.identity(self._buffer), self._widened)

    def close(self, name: Optional[str] = None) -> Any:
        """Nothing to free: an operation that does nothing."""
        return _ops.identity(self._buffer, name=name).op

    def mark_used(self) -> None:
        """TF's check for arrays never used; nothing to do."""

    def __repr__(self) -> str:
        return (f"<TensorArray dtype={self._meta.dtype} element_shape="
                f"{self._meta.element_shape} buffer={self._buffer!r}>")


def to_leaves(value: Any) -> tuple[Any, list]:
    """value with each TensorArray (at any depth of lists and tuples) replaced by its buffer, and
    the arrays replaced, in order: loop variables a `while_loop` can carry."""
    found: list = []

    def walk(v: Any) -> Any:
        if isinstance(v, TensorArray):
            found.append(v)
            return v._buffer
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            items = [walk(x) for x in v]
            return items if isinstance(v, list) else tuple(items)
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*(walk(x) for x in v))
        return v
    return walk(value), found


def from_leaves(value: Any, like: Any) -> Any:
    """`value` (a loop's values, arrays as buffers) with a TensorArray wherever `like` has one,
    over the buffer in that place; other values as they are."""
    if isinstance(like, TensorArray):
        return like._new(value, like._widened)
    if isinstance(like, (list, tuple)) and isinstance(value, (list, tuple)) \
            and len(like) == len(value):
        items = [from_leaves(v, lk) for v, lk in zip(value, like)]
        if hasattr(like, "_fields"):
            return type(like)(*items)
        return items if isinstance(like, list) else tuple(items)
    return value


def invariants(loop_vars: Any, given: Any) -> Any:
    """Shape invariants for loop_vars with their arrays' buffers free to change shape ([None,
    None]: rows widen on the first write, a dynamic array grows); the others as given, or their
    own static shapes."""
    if isinstance(loop_vars, TensorArray):
        return [None, None]
    if isinstance(loop_vars, (list, tuple)):
        subs = list(given) if isinstance(given, (list, tuple)) \
            and len(given) == len(loop_vars) else [None] * len(loop_vars)
        inner = [invariants(v, g) for v, g in zip(loop_vars, subs)]
        return inner if isinstance(loop_vars, list) else tuple(inner)
    if given is not None:
        return given
    x = _t(loop_vars)
    return None if x.shape is None else list(x.shape)


def unwidened(arrays: list) -> bool:
    """Whether a loop's first write may widen an array's rows (a shape change the recording
    of a loop's iterations for its gradient cannot take)."""
    return any(not array._widened for array in arrays)


def relaxed(value: Any) -> Any:
    """value with each array's buffer of static shape [?, ?] (one cond branch may widen it, the
    other not)."""
    if isinstance(value, TensorArray):
        b = value._buffer
        dims = _ops.cast(_ops.shape(b), dtype="int64")
        return value._new(_ops.reshape_dims(b, dims, shape=[-1, -1]), value._widened)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(relaxed(v) for v in value))
    if isinstance(value, (list, tuple)):
        items = [relaxed(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def mark_widened(value: Any) -> Any:
    """value with its arrays taken as widened (after a first iteration ran outside the loop)."""
    if isinstance(value, TensorArray):
        return value._new(value._buffer, True)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        items = [mark_widened(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value
