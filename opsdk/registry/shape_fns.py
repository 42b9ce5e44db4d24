"""Named shape functions for ops whose output shapes no declaration can express.

An op names one with `shape_fn: <name>`. Each takes `(shapes, attrs)`: `shapes` maps every input
name to a tuple of `int | None` (None: unknown dim), to None (unknown rank), or, for a list input,
to a list of those; `attrs` are the op's normalised attrs. It returns one shape (or None) per
output. Unknown dims and ranks propagate; shapes that cannot work raise ValueError with a plain
message, which the registry prefixes with the op and node.

    >>> SHAPE_FNS["broadcast"]({"x": (2, 1), "y": (None, 3)}, {})
    [(2, 3)]
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Optional, Sequence, Union

ShapeT = Optional[tuple]  # tuple[int | None, ...], or None for an unknown rank
ShapeArg = Union[ShapeT, list]
ShapeFn = Callable[[Mapping[str, ShapeArg], Mapping[str, object]], list]


def fmt(shape: ShapeT) -> str:
    """`(2, ?, 3)` for messages; `<unknown rank>` for None."""
    if shape is None:
        return "<unknown rank>"
    inner = ", ".join("?" if d is None else str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """A possibly negative axis as an index into a rank-`rank` shape; ValueError when out of range."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for rank {rank} (use -{rank} .. {rank - 1})"
                         if rank else f"{what} {axis} is out of range: the input is a scalar")
    return axis % rank


def _broadcast_dim(a: Optional[int], b: Optional[int]) -> Optional[int]:
    """One dim of a NumPy broadcast; ValueError when two known sizes clash."""
    if a == 1:
        return b
    if b == 1:
        return a
    if a is None:
        return b  # unknown is either 1 (-> b) or b (-> b); None stays None
    if b is None or a == b:
        return a
    raise ValueError(f"{a} vs {b}")


def broadcast_shapes(named: Sequence[tuple[str, ShapeT]]) -> ShapeT:
    """NumPy broadcasting over several (name, shape) pairs; names are for the error message."""
    if any(shape is None for _, shape in named):
        return None
    rank = max((len(s) for _, s in named), default=0)
    out: list[Optional[int]] = [1] * rank
    for i in range(1, rank + 1):
        for _, shape in named:
            if i > len(shape):
                continue
            try:
                out[-i] = _broadcast_dim(out[-i], shape[-i])
            except ValueError:
                listed = " and ".join(f"input '{n}' has shape {fmt(s)}" for n, s in named)
                raise ValueError(f"{listed}: they do not broadcast (dim -{i}: "
                                 f"{', '.join(str(s[-i]) for _, s in named if i <= len(s))})") from None
    return tuple(out)


def broadcast(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """Elementwise ops: the NumPy broadcast of every input's shape (one output)."""
    return [broadcast_shapes(list(shapes.items()))]


def _axes(attrs: Mapping[str, object], rank: int) -> list[int]:
    """The attr `axes` normalised and checked; empty means every axis."""
    axes = list(attrs.get("axes") or [])
    if not axes:
        return list(range(rank))
    norm = [normalize_axis(a, rank, "axes entry") for a in axes]
    if len(set(norm)) != len(norm):
        raise ValueError(f"axes {axes} name the same axis twice")
    return norm


def reduce(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """Reductions over attr `axes` (empty: all) of input `x`, keeping them as 1 when `keepdims`."""
    x = shapes["x"]
    if x is None:
        return [None]
    axes = set(_axes(attrs, len(x)))
    if attrs.get("keepdims"):
        return [tuple(1 if i in axes else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in axes)]


def reshape(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """attr `shape` with at most one -1, which takes what is left of x's element count."""
    target = [int(d) for d in attrs["shape"]]
    if target.count(-1) > 1:
        raise ValueError(f"shape {target} has more than one -1 (at most one dim may be inferred)")
    if any(d < -1 for d in target):
        raise ValueError(f"shape {target} has a negative size other than -1")
    x = shapes["x"]
    known = math.prod(d for d in target if d != -1)
    total = None if x is None or any(d is None for d in x) else math.prod(x)
    if total is None:
        return [tuple(None if d == -1 else d for d in target)]
    if -1 in target:
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape x of shape {fmt(x)} ({total} elements) to {target}")
        return [tuple(total // known if d == -1 else d for d in target)]
    if known != total:
        raise ValueError(f"cannot reshape x of shape {fmt(x)} ({total} elements) to {target} "
                         f"({known} elements)")
    return [tuple(target)]


def transpose_perm(perm: Sequence[int], rank: int) -> list[int]:
    """attr `perm` checked against the rank; empty means reverse the axes."""
    perm = list(perm)
    if not perm:
        return list(range(rank))[::-1]
    if sorted(p % rank if -rank <= p < rank else p for p in perm) != list(range(rank)):
        raise ValueError(f"perm {perm} is not a permutation of the {rank} axes of x")
    return [p % rank for p in perm]


def transpose(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """x's dims reordered by attr `perm` (empty: reversed)."""
    x = shapes["x"]
    if x is None:
        perm = attrs.get("perm") or []
        return [tuple(None for _ in perm) if perm else None]  # a given perm fixes the rank
    return [tuple(x[p] for p in transpose_perm(attrs.get("perm") or [], len(x)))]


def _list_shapes(value: ShapeArg, name: str) -> list[ShapeT]:
    """A list input's shapes (the registry passes a list of shapes for it)."""
    if isinstance(value, list):
        return value
    raise ValueError(f"input '{name}' must be a list of tensors")


def _merge_dim(a: Optional[int], b: Optional[int]) -> Optional[int]:
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise ValueError(f"{a} vs {b}")


def _merge_list(items: list[ShapeT], name: str, skip_axis: Optional[int]) -> Optional[list]:
    """The common shape of a list input (dims may differ only at skip_axis); None if rank unknown."""
    known = [(i, s) for i, s in enumerate(items) if s is not None]
    if not known:
        return None
    rank = len(known[0][1])
    merged: list[Optional[int]] = [None] * rank
    for i, s in known:
        if len(s) != rank:
            raise ValueError(f"input '{name}'[{i}] has rank {len(s)} but '{name}'[{known[0][0]}] "
                             f"has rank {rank}")
        for d in range(rank):
            if d == skip_axis:
                continue
            try:
                merged[d] = _merge_dim(merged[d], s[d])
            except ValueError:
                raise ValueError(f"input '{name}'[{i}] has shape {fmt(s)} but the others have "
                                 f"{merged[d]} at dim {d}") from None
    return merged


def concat(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """The list input `xs` joined along attr `axis`; other dims must agree."""
    items = _list_shapes(shapes["xs"], "xs")
    if not items:
        raise ValueError("input 'xs' is empty: concat needs at least one tensor")
    rank = next((len(s) for s in items if s is not None), None)
    if rank is None:
        return [None]
    axis = normalize_axis(int(attrs.get("axis", 0)), rank)
    merged = _merge_list(items, "xs", axis)
    sizes = [None if s is None else s[axis] for s in items]
    merged[axis] = None if None in sizes else sum(sizes)
    return [tuple(merged)]


def stack(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """The list input `xs` (all one shape) stacked along a new attr `axis`."""
    items = _list_shapes(shapes["xs"], "xs")
    if not items:
        raise ValueError("input 'xs' is empty: stack needs at least one tensor")
    merged = _merge_list(items, "xs", None)
    if merged is None:
        return [None]
    axis = normalize_axis(int(attrs.get("axis", 0)), len(merged) + 1)
    merged.insert(axis, len(items))
    return [tuple(merged)]


def slice_(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """attrs `begin` and `size`, one entry per dim of x (size -1: to the end); an empty `begin`
    means all zeros and an empty `size` all -1. With attr `clamp` a block running past x's end
    stops there (its length unknown until x's is)."""
    begin, size = list(attrs.get("begin") or []), list(attrs.get("size") or [])
    clamp = bool(attrs.get("clamp", False))
    x = shapes["x"]
    if not begin or not size:
        rank = len(begin or size) if x is None else len(x)
        if x is None and not (begin or size):
            return [None]
        begin, size = begin or [0] * rank, size or [-1] * rank
    if len(begin) != len(size):
        raise ValueError(f"begin {begin} and size {size} differ in length")
    if x is not None and len(x) != len(begin):
        raise ValueError(f"begin and size have {len(begin)} entries but x has rank {len(x)}")
    out: list[Optional[int]] = []
    for d, (b, s) in enumerate(zip(begin, size)):
        dim = None if x is None else x[d]
        if b < 0 or s < -1:
            raise ValueError(f"dim {d}: begin {b} must be >= 0 and size {s} >= -1")
        if clamp:
            end = None if dim is None else (dim if s == -1 else min(b + s, dim))
            out.append(None if end is None else max(end - b, 0))
            continue
        if dim is not None and (b > dim or (s != -1 and b + s > dim)):
            raise ValueError(f"dim {d}: begin {b} + size {s} exceeds x's size {dim}")
        out.append(s if s != -1 else (None if dim is None else dim - b))
    return [tuple(out)]


def gather(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """params[..., indices, ...] along attr `axis`: params' dims with `axis` replaced by indices' dims."""
    params, indices = shapes["params"], shapes["indices"]
    if params is None or indices is None:
        return [None]
    axis = normalize_axis(int(attrs.get("axis", 0)), len(params))
    return [tuple(params[:axis]) + tuple(indices) + tuple(params[axis + 1:])]


def from_shape_attr(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """Creation ops (zeros, random_uniform, ...): the output shape is attr `shape`."""
    shape = [int(d) for d in attrs["shape"]]
    if any(d < 0 for d in shape):
        raise ValueError(f"shape {shape} has a negative size")
    return [tuple(shape)]


def like_inputs(*names: str) -> ShapeFn:
    """Gradient ops: output i has the shape of input names[i] (`grad_x` is shaped like `x`)."""
    def fn(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
        return [shapes[n] for n in names]
    fn.__name__ = "like_" + "_".join(names)
    fn.__doc__ = f"One output per input {', '.join(names)}, each shaped like it."
    return fn


def reduce_axis(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """Reductions of `x` over the single int attr `axis` (argmin, argmax): that axis is dropped."""
    x = shapes["x"]
    if x is None:
        return [None]
    axis = normalize_axis(int(attrs["axis"]), len(x))
    return [tuple(d for i, d in enumerate(x) if i != axis)]


def along_axis(shapes: Mapping[str, ShapeArg], attrs: Mapping[str, object]) -> list:
    """Ops that work along the int attr `axis` of `x` and keep its shape (softmax, log_softmax):
    the axis must exist."""
    x = shapes["x"]
    if x is not None:
        normalize_axis(int(attrs["axis"]), len(x))
    return [x]


SHAPE_FNS: dict[str, ShapeFn] = {
    "broadcast": broadcast,
    "along_axis": along_axis,
    "reduce_axis": reduce_axis,
    "reduce": reduce,
    "reshape": reshape,
    "transpose": transpose,
    "concat": concat,
    "stack": stack,
    "slice": slice_,
    "gather": gather,
    "from_shape_attr": from_shape_attr,
}
# Gradient ops' outputs mirror forward inputs; one entry per input-name tuple the builtins use.
for _names in (("x",), ("x", "y"), ("y", "x"), ("params",), ("xs",), ("labels", "logits")):
    SHAPE_FNS["like_" + "_".join(_names)] = like_inputs(*_names)
