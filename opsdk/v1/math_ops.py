"""TF1's math and array functions with TF's positional signatures and keyword aliases
(`tf.argmax(x, 1)`, `tf.reduce_mean(x, reduction_indices=[1], keep_dims=True)`,
`tf.cast(x, tf.float32)`, `tf.reshape(x, [-1, 28, 28, 1])`), over opsdk's builtin ops.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import builtins

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.operators import true_division_operands
from opsdk.v1 import args, packing
from opsdk.v1.dtypes import default_array, name_of
from opsdk.v1.tensors import TensorShape, convert_to_tensor


def _t(x: Any) -> Any:
    return convert_to_tensor(x)


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Two operands as tensors; a Python number takes the other's dtype (TF's rule)."""
    a, b = (x._as_graph_element() if hasattr(x, "_as_graph_element") else x for x in (a, b))
    if isinstance(a, opsdk.Tensor) and not isinstance(b, opsdk.Tensor):
        return a, opsdk.constant(np.asarray(b, dtype=a.dtype))
    if isinstance(b, opsdk.Tensor) and not isinstance(a, opsdk.Tensor):
        return opsdk.constant(np.asarray(a, dtype=b.dtype)), b
    return _t(a), _t(b)


def _binary(op: str) -> Callable:
    fn = getattr(_ops, op)

    def binary(x: Any, y: Any, name: Optional[str] = None) -> Any:
        return fn(*_pair(x, y), name=name)
    binary.__name__ = op
    binary.__doc__ = f"`{op}` of x and y (broadcasting), TF's signature."
    return binary


def _unary(op: str) -> Callable:
    fn = getattr(_ops, op)

    def unary(x: Any, name: Optional[str] = None) -> Any:
        return fn(_t(x), name=name)
    unary.__name__ = op
    unary.__doc__ = f"`{op}` of x elementwise, TF's signature."
    return unary


add, subtract, multiply = (_binary(n) for n in ("add", "sub", "mul"))
maximum, minimum, pow = _binary("maximum"), _binary("minimum"), _binary("pow")


def truediv(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x / y; integers are divided as floats (float64 for int32 and int64), as TF's."""
    return _ops.div(*true_division_operands(*_pair(x, y)), name=name)


def div(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """TF1's `tf.div`, Python 2's division: integers floor-divided, floats divided."""
    a, b = _pair(x, y)
    if a.dtype.is_integer:
        return _ops.floor_div(a, b, name=name)
    return _ops.div(a, b, name=name)


def truncatediv(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x / y rounded toward zero (C's division: -7 / 5 is -1), ints and floats."""
    a, b = _pair(x, y)
    magnitude = _ops.floor_div(_ops.abs(a), _ops.abs(b))
    return _ops.mul(_ops.mul(_ops.sign(a), _ops.sign(b)), magnitude, name=name)


def truncatemod(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """The remainder of truncatediv, with the sign of x (C's fmod: -7 mod 5 is -2)."""
    a, b = _pair(x, y)
    return _ops.sub(a, _ops.mul(truncatediv(a, b), b), name=name)


def realdiv(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """x / y for floats (TF's RealDiv); integers are refused (use truncatediv or floordiv)."""
    a, b = _pair(x, y)
    if not a.dtype.is_floating:
        raise OpsdkError(f"realdiv: '{a.name}' is {a.dtype}; realdiv takes floats (truediv, "
                         "floordiv or truncatediv divide integers)")
    return _ops.div(a, b, name=name)


divide = truediv
equal, not_equal, less, less_equal = (_binary(n) for n in ("equal", "not_equal", "less",
                                                           "less_equal"))
greater, greater_equal = _binary("greater"), _binary("greater_equal")
floordiv = floor_div = _binary("floor_div")  # x // y
floormod = mod = _binary("floor_mod")        # x % y, the sign of y
exp, log, sqrt, square, abs, sign = (_unary(n) for n in ("exp", "log", "sqrt", "square", "abs",
                                                         "sign"))
negative, identity, stop_gradient = _unary("neg"), _unary("identity"), _unary("stop_gradient")
tanh, sigmoid = _unary("tanh"), _unary("sigmoid")
sin, cos, tan, asin, acos, atan = (_unary(n) for n in ("sin", "cos", "tan", "asin", "acos", "atan"))
sinh, cosh, expm1, log1p = (_unary(n) for n in ("sinh", "cosh", "expm1", "log1p"))
asinh, acosh, atanh = (_unary(n) for n in ("asinh", "acosh", "atanh"))
erf, erfc, lgamma, digamma = (_unary(n) for n in ("erf", "erfc", "lgamma", "digamma"))
atan2 = _binary("atan2")  # atan2(y, x), TensorFlow's order
floor, ceil, round = (_unary(n) for n in ("floor", "ceil", "round"))  # noqa: A001 - TF's names
sub, mul = subtract, multiply


def rsqrt(x: Any, name: Optional[str] = None) -> Any:
    return _ops.div(_ops.ones_like(_t(x)), _ops.sqrt(_t(x)), name=name)


def reciprocal(x: Any, name: Optional[str] = None) -> Any:
    return _ops.div(_ops.ones_like(_t(x)), _t(x), name=name)


def squared_difference(x: Any, y: Any, name: Optional[str] = None) -> Any:
    """(x - y) ** 2 elementwise, broadcasting (a Python number takes the other's dtype)."""
    x, y = _pair(x, y)
    return _ops.square(_ops.sub(x, y), name=name)


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, a_is_sparse: bool = False,
           b_is_sparse: bool = False, name: Optional[str] = None) -> Any:
    """a @ b, either side transposed first."""
    a, b = _t(a), _t(b)
    if transpose_a or adjoint_a:
        a = _ops.transpose(a, perm=_swap_last(a))
    if transpose_b or adjoint_b:
        b = _ops.transpose(b, perm=_swap_last(b))
    return _ops.matmul(a, b, name=name)


def _swap_last(x: Any) -> list[int]:
    if x.ndim is None or x.ndim < 2:
        raise OpsdkError(f"matmul: transposing '{x.name}' needs a known rank of at least 2")
    perm = list(builtins.range(x.ndim))
    perm[-2:] = perm[-1], perm[-2]
    return perm


def cast(x: Any, dtype: Any, name: Optional[str] = None) -> Any:
    """x converted to `dtype` (`tf.cast(correct, tf.float32)`)."""
    x = _t(x)
    if x.dtype == name_of(dtype):
        return x if name is None else _ops.identity(x, name=name)
    return _ops.cast(x, dtype=name_of(dtype), name=name)


to_float = lambda x, name=None: cast(x, "float32", name)  # noqa: E731 - TF's names
to_int32 = lambda x, name=None: cast(x, "int32", name)  # noqa: E731
to_int64 = lambda x, name=None: cast(x, "int64", name)  # noqa: E731


def _axes(axis: Any, alias: Any, who: str) -> list[int]:
    if axis is not None and alias is not None:
        raise OpsdkError(f"{who}: give axis or reduction_indices, not both")
    axis = alias if axis is None else axis
    if axis is None:
        return []
    if (args.is_tensor(axis) and _t(axis).ndim == 1) or isinstance(axis, (list, tuple)):
        return args.static_dims(who, axis, "axis")
    return [args.static_int(who, "axis", axis)]


def _reduction(op: str) -> Callable:
    fn = getattr(_ops, op)

    def reduce(input_tensor: Any, axis: Any = None, keepdims: Any = None, name: Optional[str] = None,
               reduction_indices: Any = None, keep_dims: Any = None) -> Any:
        keep = bool(keepdims if keepdims is not None else keep_dims)
        x = _t(input_tensor)
        axes = _axes(axis, reduction_indices, op)
        if op == "reduce_mean" and x.dtype not in ("float16", "float32", "float64"):
            raise OpsdkError(f"reduce_mean of integer tensor '{x.name}': cast it to a float first")
        return fn(x, axes=axes, keepdims=keep, name=name)
    reduce.__name__ = op
    reduce.__doc__ = f"`{op}` over `axis` (None: all; alias reduction_indices), TF's signature."
    return reduce


reduce_sum, reduce_mean = _reduction("reduce_sum"), _reduction("reduce_mean")
reduce_max, reduce_min = _reduction("reduce_max"), _reduction("reduce_min")
reduce_prod = _reduction("reduce_prod")


def cumsum(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False,
           name: Optional[str] = None) -> Any:
    """Running sums along `axis` (exclusive: each leaves its own element out; reverse: from
    the end), TF's signature."""
    return _ops.cumsum(_t(x), axis=args.static_int("cumsum", "axis", axis),
                       exclusive=bool(exclusive), reverse=bool(reverse), name=name)


def reduce_any(input_tensor: Any, axis: Any = None, keepdims: Any = None,
               name: Optional[str] = None, reduction_indices: Any = None,
               keep_dims: Any = None) -> Any:
    as_int = _ops.cast(_t(input_tensor), dtype="int32")
    total = reduce_max(as_int, axis, keepdims, None, reduction_indices, keep_dims)
    return _ops.greater(total, _ops.zeros_like(total), name=name)  # none: int32's lowest


def _arg(op: str) -> Callable:
    fn = getattr(_ops, op)

    def arg(input: Any, axis: Any = None, name: Optional[str] = None, dimension: Any = None,
            output_type: Any = "int64") -> Any:
        axis = dimension if axis is None else axis
        axis = 0 if axis is None else args.static_int(op, "axis", axis)
        out = fn(_t(input), axis=axis, name=name)
        return out if out.dtype == name_of(output_type) else _ops.cast(out, dtype=name_of(output_type))
    arg.__name__ = op
    return arg


argmax, argmin = _arg("argmax"), _arg("argmin")
arg_max, arg_min = argmax, argmin  # TF1's older spellings


def reshape(tensor: Any, shape: Any, name: Optional[str] = None) -> Any:
    """x with a new shape: a list (ints, -1, scalar tensors) or an int tensor (`tf.shape(y)`).
    One size known only at run time becomes the -1 of opsdk's reshape; with more, the shape is
    read when the op runs (`reshape_dims`), the sizes known now declared on its result."""
    x, dims = _t(tensor), args.dims("reshape", shape)
    known = [-1 if d is None else d for d in dims.known]
    if known.count(-1) <= 1:
        return _ops.reshape(x, shape=known, name=name)
    return _ops.reshape_dims(x, dims.tensor(), shape=known, name=name)


def reshape_to(x: Any, sizes: list, name: Optional[str] = None) -> Any:
    """x reshaped to `sizes`, each an int (-1: inferred) or a pair (tensor, axis) standing for
    that tensor's size along axis: its number when known when the graph is built, else read from
    its run-time shape, which only happens where two or more sizes are unknown (so a graph whose
    shapes are known has no `shape` nodes)."""
    static = [s if isinstance(s, int) else s[0].shape[s[1]] for s in sizes]
    if sum(d is None or d == -1 for d in static) <= 1:
        return _ops.reshape(x, shape=[-1 if d is None else d for d in static], name=name)
    parts = [d if d is not None else _size(s[0], s[1]) for s, d in zip(sizes, static)]
    return reshape(x, parts, name=name)


def _size(t: Any, axis: int) -> Any:
    """t's run-time size along axis, a 0-d int32 tensor."""
    return _ops.reshape(_ops.slice(_ops.shape(t), begin=[axis], size=[1]), shape=[])


def _sizes(x: Any, skip: Any = ()) -> list:
    """x's sizes as reshape_to takes them, leaving out the axes in skip."""
    return [(x, i) for i in builtins.range(x.ndim) if i not in skip]


def transpose(a: Any, perm: Any = None, name: Optional[str] = None, conjugate: bool = False) -> Any:
    perm = [] if perm is None else args.static_dims("transpose", perm, "perm")
    return _ops.transpose(_t(a), perm=perm, name=name)


def concat(values: Any, axis: int, name: Optional[str] = None) -> Any:
    return _ops.concat([_t(v) for v in values], axis=args.static_int("concat", "axis", axis),
                       name=name)


def stack(values: Any, axis: int = 0, name: Optional[str] = None) -> Any:
    """The values (tensors, numbers taking the tensors' dtype, nested lists) along a new axis."""
    return _ops.stack(packing.elements("stack", values),
                      axis=args.static_int("stack", "axis", axis), name=name)


pack = stack


def expand_dims(input: Any, axis: Any = None, name: Optional[str] = None, dim: Any = None) -> Any:
    x = _t(input)
    axis = args.static_int("expand_dims", "axis", dim if axis is None else axis)
    if x.shape is None:  # rank known only at run time: axis is checked against it then
        return _ops.expand_dims(x, axis=axis, name=name)
    sizes = _sizes(x)
    axis = axis if axis >= 0 else len(sizes) + 1 + axis
    return reshape_to(x, sizes[:axis] + [1] + sizes[axis:], name=name)


def squeeze(input: Any, axis: Any = None, name: Optional[str] = None,
            squeeze_dims: Any = None) -> Any:
    """x without its axes of size 1 (those of `axis`, else all). With no axis given and a size
    known only at run time, the axes are chosen when the step runs, and the result's rank is
    unknown until then, as in TF."""
    x = _t(input)
    axis = squeeze_dims if axis is None else axis
    if axis is None and (x.shape is None or None in x.shape):
        sizes = _ops.shape(x)
        kept = _ops.where_indices(_ops.not_equal(sizes, _ops.ones_like(sizes)))
        return _ops.reshape_dims(x, _ops.gather(sizes, _ops.reshape(kept, shape=[-1]), axis=0),
                                 name=name)
    drop = ({a % x.ndim for a in np.atleast_1d(axis)} if axis is not None
            else {i for i, d in enumerate(x.shape) if d == 1})
    return reshape_to(x, _sizes(x, drop), name=name)


def unstack(value: Any, num: Optional[int] = None, axis: int = 0,
            name: Optional[str] = None) -> list:
    """The slices of `value` along `axis` (its size must be known), each without that axis."""
    x = _t(value)
    axis = axis % x.ndim
    size = x.shape[axis] if num is None else args.static_int("unstack", "num", num)
    if size is None:
        raise OpsdkError(f"unstack: axis {axis} of '{x.name}' has an unknown size; pass num=")
    return [_take(x, axis, i, 1, squeeze=True) for i in builtins.range(size)]


unpack = unstack


def split(value: Any, num_or_size_splits: Any, axis: Any = 0, num: Any = None,
          name: Optional[str] = None) -> list:
    """`value` cut along `axis` into equal parts (an int) or parts of the given sizes. Equal
    parts of an axis whose size is known only at run time are cut at run time."""
    x = _t(value)
    axis = args.static_int("split", "axis", axis) % x.ndim
    total = x.shape[axis]
    if isinstance(num_or_size_splits, (list, tuple)) or (
            args.is_tensor(num_or_size_splits) and _t(num_or_size_splits).ndim == 1):
        sizes = args.static_dims("split", num_or_size_splits, "num_or_size_splits")
        return _cut(x, axis, _filled_sizes(x, axis, sizes))
    parts = args.static_int("split", "num_or_size_splits", num_or_size_splits)
    if total is None:
        return _split_at_run_time(x, axis, parts)
    if parts < 1 or total % parts:
        raise OpsdkError(f"split: axis {axis} of '{x.name}' (size {total}) does not split "
                         f"into {parts} equal parts")
    return _cut(x, axis, [total // parts] * parts)


def _filled_sizes(x: Any, axis: int, sizes: list) -> list:
    """Sizes with one -1 taking the rest (TF's rule), which needs the axis' size."""
    if -1 not in sizes:
        return sizes
    if sizes.count(-1) > 1 or x.shape[axis] is None:
        raise OpsdkError(f"split: sizes {sizes} of '{x.name}' along axis {axis} (size "
                         f"{x.shape[axis]}): one -1 is allowed, and only when the size is known")
    rest = x.shape[axis] - sum(s for s in sizes if s != -1)
    return [rest if s == -1 else s for s in sizes]


def _cut(x: Any, axis: int, sizes: list) -> list:
    """One split node: its gradient joins the pieces' gradients in one concat (a slice per piece
    would take a zero-filled gradient of x's size per piece, then a sum of them)."""
    if x.shape[axis] is not None and sum(sizes) != x.shape[axis]:
        raise OpsdkError(f"split: sizes {sizes} add up to {sum(sizes)}, but axis {axis} of "
                         f"'{x.name}' has size {x.shape[axis]}")
    return list(_ops.split(x, axis=axis, sizes=[int(s) for s in sizes], N=len(sizes)))


def _split_at_run_time(x: Any, axis: int, parts: int) -> list:
    """Equal parts of an axis of unknown size: x seen as [..., parts, size / parts, ...] (a
    reshape, checked at run time), then one index of the new axis per part."""
    sizes = _sizes(x)
    grouped = reshape_to(x, sizes[:axis] + [parts, -1] + sizes[axis + 1:], name="split")
    return [_take(grouped, axis, i, 1, squeeze=True) for i in builtins.range(parts)]


def _take(x: Any, axis: int, begin: int, size: int, squeeze: bool) -> Any:
    starts, sizes = [0] * x.ndim, [-1] * x.ndim
    starts[axis], sizes[axis] = begin, size
    part = _ops.slice(x, begin=starts, size=sizes)
    return reshape_to(part, _sizes(part, {axis})) if squeeze else part


def gather(params: Any, indices: Any, validate_indices: Any = None, name: Optional[str] = None,
           axis: int = 0) -> Any:
    return _ops.gather(_t(params), _t(indices), axis=args.static_int("gather", "axis", axis),
                       name=name)


def where(condition: Any, x: Any = None, y: Any = None, name: Optional[str] = None) -> Any:
    """x where condition holds, else y; with condition alone, the coordinates of its true
    elements ([number true, rank] int64, row-major order), as TF1's. A condition of rank 1
    against x of a higher rank picks whole rows (TF1's rule: its size is x's first dim), not
    the trailing axis NumPy's broadcasting would align it with."""
    if x is None and y is None:
        return _ops.where_indices(_t(condition), name=name)
    if x is None or y is None:
        raise OpsdkError("where: give both x and y, or neither (the true elements' coordinates)")
    x, y = _pair(x, y)
    cond = _t(condition)
    if cond.shape is not None and len(cond.shape) == 1:
        if x.shape is not None and len(x.shape) > 1:
            cond = _ops.reshape(cond, shape=[-1] + [1] * (len(x.shape) - 1))
        elif x.shape is None:  # x's rank comes at run time: [n, 1, ..., 1] of it
            ones = _ops.ones_like(_ops.slice(_ops.shape(x), begin=[1], size=[-1]))
            dims = _ops.concat([opsdk.constant(np.array([-1], np.int32)), ones], axis=0)
            cond = _ops.reshape_dims(cond, dims)
    return _ops.where(cond, x, y, name=name)


def where_v2(condition: Any, x: Any = None, y: Any = None, name: Optional[str] = None) -> Any:
    """x where condition holds, else y, the three broadcast together as NumPy does (TF2's
    where); with condition alone, the coordinates of its true elements."""
    if x is None and y is None:
        return _ops.where_indices(_t(condition), name=name)
    if x is None or y is None:
        raise OpsdkError("where_v2: give both x and y, or neither (the true elements' "
                         "coordinates)")
    x, y = _pair(x, y)
    return _ops.where(_t(condition), x, y, name=name)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any,
                  name: Optional[str] = None) -> Any:
    t = _t(t)
    return minimum(maximum(t, clip_value_min), clip_value_max, name=name)


def one_hot(indices: Any, depth: int, on_value: Any = 1.0, off_value: Any = 0.0, axis: int = -1,
            dtype: Any = "float32", name: Optional[str] = None) -> Any:
    """1 where the last axis equals the index, else 0 (axis=-1 only)."""
    idx = _t(indices)
    classes = opsdk.constant(np.arange(args.static_int("one_hot", "depth", depth), dtype=idx.dtype))
    hit = _ops.equal(expand_dims(idx, -1), classes)
    on, off = (np.asarray(v, dtype=name_of(dtype)) for v in (on_value, off_value))
    # Exact Python numbers (float() rounded an int64 on_value of 2**62 + 1); bools as 0/1.
    on, off = (v.item() if v.dtype.kind in "iu" else float(v) for v in (on, off))
    return _ops.where(hit, _ops.fill(shape=[1], value=on, dtype=name_of(dtype)),
                      _ops.fill(shape=[1], value=off, dtype=name_of(dtype)), name=name)


def shape(input: Any, name: Optional[str] = None, out_type: Any = "int32") -> Any:
    """The dynamic shape of `input` as an int32 vector (known when the graph runs)."""
    out = _ops.shape(_t(input), name=name)
    return out if out.dtype == name_of(out_type) else _ops.cast(out, dtype=name_of(out_type))


def rank(input: Any, name: Optional[str] = None) -> Any:
    x = _t(input)
    if x.ndim is None:
        raise OpsdkError(f"rank: '{x.name}' has an unknown rank")
    return opsdk.constant(np.int32(x.ndim), name=name or "Rank")


def range(start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None,
          name: Optional[str] = "range") -> Any:
    """`tf.range(n)`, `tf.range(a, b, step)` (Python ints become int32, floats float32, as in
    TF): a constant when the bounds are known when the graph is built, else the `arange` op,
    the numbers taking the tensors' dtype (`tf.range(tf.shape(x)[0]) * 3`), or `dtype`, to
    which tensor bounds are cast (as TF's)."""
    bounds = (start, limit, delta) if limit is not None else (0, start, delta)
    bounds = [args.scalar("range", arg, b) for arg, b in zip(("start", "limit", "delta"), bounds)]
    if args.numbers_or_tensors(bounds):
        if dtype is not None:  # as TF's: the bounds cast to the dtype asked for
            bounds = [cast(b, dtype) if args.is_tensor(b) else b for b in bounds]
        parts = packing.elements("range", bounds, dtype)
        return _ops.arange(*(_ops.reshape(p, shape=[]) for p in parts), name=name)
    array = np.arange(*bounds)
    array = default_array(array.tolist()) if dtype is None else array.astype(name_of(dtype))
    return opsdk.constant(array, name=name)


def attach() -> None:
    """Python operators TF1 tensors have beyond opsdk's (`abs`, `&` and `~` of bools)."""
    opsdk.Tensor.__abs__ = lambda self: abs(self)
    opsdk.Tensor.__and__ = lambda a, b: _ops.equal(
        _ops.cast(a, dtype="int8") + _ops.cast(_t(b), dtype="int8"), opsdk.constant(np.int8(2)))
    opsdk.Tensor.__invert__ = lambda a: _ops.equal(a, opsdk.constant(np.asarray(False)))


def linspace(start: Any, stop: Any, num: Any, name: Optional[str] = None, axis: int = 0) -> Any:
    """`num` evenly spaced values from start to stop, both included (bounds known when the graph
    is built; the dtype is start's, float32 for Python floats)."""
    bounds = [args.scalar("linspace", a, v) for a, v in (("start", start), ("stop", stop))]
    if args.numbers_or_tensors(bounds):
        raise OpsdkError("linspace: opsdk.v1 needs start and stop known when the graph is built")
    count = args.static_int("linspace", "num", num)
    dtype = _t(start).dtype if args.is_tensor(start) else default_array(float(bounds[0])).dtype
    return opsdk.constant(np.linspace(*bounds, count).astype(dtype), name=name or "LinSpace")


class AggregationMethod:
    """`tf.AggregationMethod`: how gradients reaching one tensor are summed (here always added)."""

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


class UnconnectedGradients:
    """`tf.UnconnectedGradients`: what `tf.gradients` gives for an x no y depends on."""

    NONE = "none"
    ZERO = "zero"


def gradients(ys: Any, xs: Any, grad_ys: Any = None, name: str = "gradients",
              colocate_gradients_with_ops: bool = False, gate_gradients: bool = False,
              aggregation_method: Any = None, stop_gradients: Any = None,
              unconnected_gradients: str = UnconnectedGradients.NONE) -> list:
    """`tf.gradients` with TF1's arguments. `colocate_gradients_with_ops`, `gate_gradients` and
    `aggregation_method` are checked and change nothing (see `Optimizer.compute_gradients`);
    `unconnected_gradients="zero"` gives zeros where no y depends on an x."""
    from opsdk.runtime.train.optimizers import check_gradient_options

    check_gradient_options("tf.gradients", int(gate_gradients) if isinstance(
        gate_gradients, (bool, np.bool_)) else gate_gradients, aggregation_method,
        colocate_gradients_with_ops)
    if stop_gradients is not None:
        raise OpsdkError("tf.gradients: stop_gradients is not provided; compute those tensors "
                         "through tf.stop_gradient instead")
    mode = getattr(unconnected_gradients, "value", unconnected_gradients)
    if mode not in (UnconnectedGradients.NONE, UnconnectedGradients.ZERO):
        raise OpsdkError(f"tf.gradients: unconnected_gradients must be 'none' or 'zero', got "
                         f"{unconnected_gradients!r}")
    grads = opsdk.gradients(ys, xs, grad_ys, name)
    if mode == UnconnectedGradients.NONE:
        return grads
    x_list = xs if isinstance(xs, (list, tuple)) else [xs]
    return [g if g is not None else _ops.zeros_like(_t(x)) for g, x in zip(grads, x_list)]
