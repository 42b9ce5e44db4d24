"""Arguments TF1 takes as a Python value or a tensor: shapes, sizes, counts and scalars.

TensorFlow accepts a tensor for most such arguments (`tf.random_normal(tf.shape(x), stddev=s)`,
`tf.zeros([batch, 10])` with `batch = tf.shape(x)[0]`). opsdk's ops take some of them as attrs,
fixed when the graph is built. Every wrapper of opsdk.v1 reads these arguments here:

- what is known when the graph is built (numbers, constants, the static dims behind `tf.shape`,
  stacks and slices of those) is folded into a Python value, so the graph is the same as if the
  program had written the number;
- the rest stays a tensor, for the wrappers that have a run-time path (`dims.yaml`'s ops for
  shapes, graph arithmetic for scalars), and is refused with the function's and the argument's
  name by the ones that have none;
- anything else (a string where a number belongs) is refused naming the function and argument.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError

Entries = Optional[list]  # a flat list of values, None for each entry unknown until run time


def graph_value(value: Any) -> Any:
    """A Variable as its value tensor; anything else as it is."""
    return value._as_graph_element() if hasattr(value, "_as_graph_element") else value


def is_tensor(value: Any) -> bool:
    return isinstance(graph_value(value), opsdk.Tensor)


def entries(tensor: Any) -> Entries:
    """The flat values of `tensor` as far as they are known when the graph is built (None per
    unknown entry), or None when even their number is unknown."""
    op = tensor.op
    kind = op.type
    if kind == "const":
        return np.asarray(op.attrs["value"]).reshape(-1).tolist()
    if kind == "shape":
        dims = op.inputs[0].shape
        return None if dims is None else list(dims)
    if kind in ("reshape", "identity", "cast", "stop_gradient"):
        inner = entries(op.inputs[0])
        if inner is not None and kind == "cast":
            inner = [None if v is None else np.asarray(v).astype(tensor.dtype).item() for v in inner]
        return inner
    if kind == "stack" and all(t.shape == () for t in op.inputs):
        parts = [entries(t) for t in op.inputs]
        return None if any(p is None for p in parts) else [p[0] for p in parts]
    if kind == "concat" and all(t.ndim == 1 for t in op.inputs):
        parts = [entries(t) for t in op.inputs]
        return None if any(p is None for p in parts) else sum(parts, [])
    if kind == "slice" and op.inputs[0].ndim == 1:
        inner = entries(op.inputs[0])
        begin, size = (list(op.attrs.get(k) or ()) for k in ("begin", "size"))
        if inner is None or len(begin) != 1:
            return None
        stop = len(inner) if size[0] == -1 else begin[0] + size[0]
        return inner[begin[0]:stop]
    size = None if tensor.shape is None or None in tensor.shape else int(np.prod(tensor.shape))
    return None if size is None else [None] * size


def scalar(who: str, arg: str, value: Any) -> Union[float, int, bool, Any]:
    """A number argument (stddev, mean, minval, keep_prob...): its Python value when known when
    the graph is built, else the tensor itself (0-d or one element)."""
    value = graph_value(value)
    if isinstance(value, opsdk.Tensor):
        known = entries(value)
        if known is not None and len(known) != 1:
            raise OpsdkError(f"{who}: argument '{arg}' must be a scalar, got tensor "
                             f"'{value.name}' of shape {list(value.shape)}")
        return value if known is None or known[0] is None else known[0]
    array = np.asarray(value) if isinstance(value, (int, float, bool, np.generic, np.ndarray)) else None
    if array is None or array.size != 1 or array.dtype.kind not in "biuf":
        raise OpsdkError(f"{who}: argument '{arg}' must be a number or a scalar tensor, "
                         f"got {value!r}")
    return array.reshape(()).item()


def static_int(who: str, arg: str, value: Any) -> int:
    """An int argument the graph's structure depends on (a number of splits, an axis)."""
    got = scalar(who, arg, value)
    if isinstance(got, opsdk.Tensor):
        raise OpsdkError(f"{who}: argument '{arg}' (tensor '{got.name}') must be known when the "
                         "graph is built: its value decides the number of nodes or an axis")
    if float(got) != int(got):
        raise OpsdkError(f"{who}: argument '{arg}' must be an int, got {got!r}")
    return int(got)


class Dims:
    """A shape argument: `known` has one entry per dim (None where known only at run time);
    `tensor()` is the shape as an int32 vector node, for the ops shaped at run time."""

    def __init__(self, who: str, known: list, source: Any):
        self.who, self.known, self._source = who, known, source

    @property
    def static(self) -> bool:
        return None not in self.known

    def tensor(self) -> Any:
        source = self._source
        if isinstance(source, opsdk.Tensor):
            return source if source.dtype in ("int32", "int64") else _ops.cast(source, dtype="int32")
        return _ops.stack([_dim_tensor(d) for d in source], axis=0)


def _dim_tensor(dim: Any) -> Any:
    if isinstance(dim, opsdk.Tensor):
        scalar_dim = dim if dim.shape == () else _ops.reshape(dim, shape=[])
        return scalar_dim if dim.dtype == "int32" else _ops.cast(scalar_dim, dtype="int32")
    return opsdk.constant(np.int32(dim))


def dims(who: str, shape: Any, arg: str = "shape") -> Dims:
    """A shape given as a list (of ints, Dimensions, scalar tensors), an int, a TensorShape or a
    1-d int tensor."""
    shape = graph_value(shape)
    if hasattr(shape, "as_list") and not isinstance(shape, opsdk.Tensor):
        shape = shape.as_list()
    if isinstance(shape, opsdk.Tensor):
        if shape.ndim not in (None, 1) or shape.dtype not in ("int32", "int64"):
            raise OpsdkError(f"{who}: argument '{arg}' (tensor '{shape.name}') must be a 1-d "
                             f"int32 or int64 tensor, got {shape.dtype} of shape {shape.shape}")
        known = entries(shape)
        if known is None:
            raise OpsdkError(f"{who}: argument '{arg}' (tensor '{shape.name}') has an unknown "
                             "length; the rank of the result must be known when the graph is built")
        return Dims(who, [None if d is None else int(d) for d in known], shape)
    if isinstance(shape, (int, np.integer)):
        shape = [shape]
    if not isinstance(shape, (list, tuple, np.ndarray)):
        raise OpsdkError(f"{who}: argument '{arg}' must be a list of ints or an int tensor, "
                         f"got {shape!r}")
    parts = [graph_value(getattr(d, "value", d)) for d in shape]
    known = [_known_dim(who, arg, d) for d in parts]
    return Dims(who, known, parts)


def _known_dim(who: str, arg: str, dim: Any) -> Optional[int]:
    if dim is None:
        return None
    got = scalar(who, arg, dim)
    if isinstance(got, opsdk.Tensor):
        return None
    if float(got) != int(got):
        raise OpsdkError(f"{who}: argument '{arg}' has a non-integer size {got!r}")
    return int(got)


def static_dims(who: str, shape: Any, arg: str = "shape") -> list:
    """A shape that must be known when the graph is built (no run-time path)."""
    got = dims(who, shape, arg)
    if not got.static:
        raise OpsdkError(f"{who}: argument '{arg}' must be known when the graph is built; "
                         f"its sizes {got.known} are known only at run time (None)")
    return got.known


def numbers_or_tensors(values: Sequence[Any]) -> bool:
    """Whether any of `values` is a tensor."""
    return any(isinstance(v, opsdk.Tensor) for v in values)
