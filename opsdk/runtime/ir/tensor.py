"""Tensor: an edge of the graph (one output of one node), with its static shape and dtype.

The IR knows no front end: Python operators (`x * 2.0`) are attached to Tensor by
`opsdk.runtime.frontend.operators`, which maps them onto builtin YAML ops. `==` and `hash` stay
identity (as in TensorFlow 1) because tensors are dict keys in `feed_dict`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional


import numpy as np

from opsdk.registry.errors import OpsdkError

if TYPE_CHECKING:
    from opsdk.runtime.ir.graph import Graph, Operation

Shape = Optional[tuple]  # tuple of int | None per dim; None when even the rank is unknown


class StaticShape(tuple):
    """A tensor's static shape: a tuple of sizes, None for a dim known only at run time. It
    also answers what TF1 programs ask of a shape (`x.shape.as_list()`, `.ndims`, `.rank`,
    `.is_fully_defined()`, `.num_elements()`, a slice as a shape); an item is the int or None,
    as TensorFlow 2's shapes, and its compat.v1, give it."""

    __slots__ = ()

    def as_list(self) -> list:
        return list(self)

    @property
    def ndims(self) -> int:
        return len(self)

    rank = ndims

    @property
    def dims(self) -> list:
        return list(self)

    def is_fully_defined(self) -> bool:
        return None not in self

    def num_elements(self) -> Optional[int]:
        """The number of elements, or None while a dim is unknown."""
        return None if None in self else math.prod(self)

    def is_compatible_with(self, other: Any) -> bool:
        """Whether a shape could be both: the same rank, and each pair of known dims equal."""
        other = tuple(other)
        return len(other) == len(self) and all(
            a is None or b is None or a == b for a, b in zip(self, other))

    def __getitem__(self, item: Any) -> Any:
        got = tuple.__getitem__(self, item)
        return StaticShape(got) if isinstance(item, slice) else got


class DTypeName(str):
    """A tensor's dtype, and opsdk.v1's `tf.float32` and the like: its name (`'float32'`), a
    str, which also answers what TF1 programs ask of a dtype (`x.dtype.name`, `.base_dtype`,
    `.is_floating`, `.is_integer`, `.is_bool`, `.as_numpy_dtype`, `.size`, `.min`, `.max`) and
    what code written for NumPy's dtypes reads (`.kind`, `.itemsize`, `.type`)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        # a NumPy dtype or scalar type equals its name (`tf.float32 == np.float32`), as NumPy's
        # dtypes do
        if isinstance(other, str):  # the common case first: names compared as strings
            return str.__eq__(self, other)
        if isinstance(other, (np.dtype, type)):
            try:
                return np.dtype(other) == self._numpy
            except TypeError:
                return False
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    @property
    def _numpy(self) -> np.dtype:
        return np.dtype(str(self))

    @property
    def name(self) -> str:
        return str(self)

    @property
    def base_dtype(self) -> "DTypeName":
        return self

    @property
    def as_numpy_dtype(self) -> type:
        return self._numpy.type

    @property
    def is_floating(self) -> bool:
        return self._numpy.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self._numpy.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self._numpy.kind == "u"

    @property
    def is_bool(self) -> bool:
        return self._numpy.kind == "b"

    @property
    def is_complex(self) -> bool:
        return self._numpy.kind == "c"

    @property
    def size(self) -> int:
        return self._numpy.itemsize

    # what code written for NumPy's dtypes reads (`d.kind`, `d.itemsize`, `d.type(0)`)
    @property
    def kind(self) -> str:
        return self._numpy.kind

    itemsize = size

    @property
    def type(self) -> type:
        return self._numpy.type

    @property
    def min(self) -> Any:
        d = self._numpy
        return d.type(np.finfo(d).min if d.kind in "fc" else np.iinfo(d).min if d.kind in "iu"
                      else False)

    @property
    def max(self) -> Any:
        d = self._numpy
        return d.type(np.finfo(d).max if d.kind in "fc" else np.iinfo(d).max if d.kind in "iu"
                      else True)


class Tensor:
    """Output `index` of node `op`. `shape` has None for unknown dims (None: unknown rank); it
    is a StaticShape (a tuple) whatever is assigned, and `dtype` a DTypeName (a str)."""

    __slots__ = ("op", "index", "_shape", "_dtype")
    __array_priority__ = 100  # `ndarray + tensor` defers to Tensor.__radd__

    def __init__(self, op: "Operation", index: int, shape: Shape, dtype: str):
        self.op = op
        self.index = index
        self.shape = shape
        self.dtype = dtype

    @property
    def shape(self) -> Optional[StaticShape]:
        return self._shape

    @property
    def dtype(self) -> DTypeName:
        return self._dtype

    @dtype.setter
    def dtype(self, value: str) -> None:
        self._dtype = value if type(value) is DTypeName else DTypeName(value)

    @shape.setter
    def shape(self, value: Shape) -> None:
        self._shape = (value if value is None or type(value) is StaticShape
                       else StaticShape(value))

    @property
    def name(self) -> str:
        """`node:index`, e.g. 'dist:0'."""
        return f"{self.op.name}:{self.index}"

    @property
    def graph(self) -> "Graph":
        return self.op.graph

    @property
    def device(self) -> str:
        """The device its node asked for (its scope's device string; '' if none)."""
        return self.op.device

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
