"""Shape functions of the ops shaped by a `dims` input (dims.yaml), and of split (array.yaml)."""

from __future__ import annotations


def from_dims(shapes, attrs):
    """One unknown size per entry of dims: the rank is dims' length, the sizes come at run time."""
    dims = shapes["dims"]
    if dims is None or dims[0] is None:
        return [None]
    return [(None,) * dims[0]]


def one_unknown_dim(shapes, attrs):
    """A vector whose length comes at run time (arange)."""
    return [(None,)]


def coordinates(shapes, attrs):
    """One row per true element, as many columns as x has dims (where_indices)."""
    x = shapes["x"]
    return [(None, None if x is None else len(x))]


def reshape_dims(shapes, attrs):
    """The rank is dims' length; a size is known where attr shape declares it (>= 0)."""
    dims, known = shapes["dims"], [int(d) for d in attrs["shape"]]
    rank = None if dims is None else dims[0]
    if known and rank is not None and len(known) != rank:
        raise ValueError(f"attr shape {known} has {len(known)} sizes; dims has {rank}")
    if known:
        return [tuple(None if d < 0 else d for d in known)]
    return [None if rank is None else (None,) * rank]


def expand_dims(shapes, attrs):
    """x's shape with a 1 at attr axis; unknown where x's rank is."""
    x, axis = shapes["x"], int(attrs["axis"])
    if x is None:
        return [None]
    rank = len(x)
    if not -rank - 1 <= axis <= rank:
        raise ValueError(f"attr axis {axis} is out of range for x of rank {rank} (from "
                         f"{-rank - 1} to {rank})")
    at = axis if axis >= 0 else rank + 1 + axis
    return [tuple(x[:at]) + (1,) + tuple(x[at:])]


def searchsorted(shapes, attrs):
    """values' shape, once both are of one rank (at least 1) with the same leading dims."""
    seq, values = shapes["sorted_sequence"], shapes["values"]
    if seq is not None and len(seq) == 0 or values is not None and len(values) == 0:
        raise ValueError("sorted_sequence and values must have at least one dim")
    if seq is not None and values is not None:
        if len(seq) != len(values) or any(a is not None and b is not None and a != b
                                          for a, b in zip(seq[:-1], values[:-1])):
            raise ValueError(f"sorted_sequence {list(seq)} and values {list(values)} must "
                             "have the same leading dims (one row of each per search)")
    return [None if values is None else tuple(values)]


def like_x(shapes, attrs):
    """A gradient shaped like the forward input x."""
    return [shapes["x"]]


def distinct(shapes, attrs):
    """y and count as long as x has distinct values (known at run time), idx as x (unique)."""
    x = shapes["x"]
    if x is not None and len(x) != 1:
        raise ValueError(f"x must be 1-d, not of rank {len(x)}")
    return [(None,), (None,) if x is None else tuple(x), (None,)]


def pieces(shapes, attrs):
    """split: x's shape with the size along axis replaced by each piece's."""
    x, sizes, n = shapes["x"], [int(s) for s in attrs["sizes"]], int(attrs["N"])
    if len(sizes) != n or any(s < 0 for s in sizes):
        raise ValueError(f"sizes {sizes} must be {n} sizes >= 0 (attr N)")
    if x is None:
        return [[None] * n]
    if not x:
        raise ValueError("x is a scalar: there is no axis to split")
    axis = int(attrs["axis"])
    if not -len(x) <= axis < len(x):
        raise ValueError(f"axis {axis} is out of range for rank {len(x)}")
    axis %= len(x)
    if x[axis] is not None and sum(sizes) != x[axis]:
        raise ValueError(f"sizes {sizes} add up to {sum(sizes)}, but x has {x[axis]} along "
                         f"axis {axis}")
    return [[tuple(s if i == axis else d for i, d in enumerate(x)) for s in sizes]]


def joined(shapes, attrs):
    """split_grad: the pieces' gradients joined along axis (x's shape when they fit it)."""
    pieces = shapes["grad_ys"]
    if any(p is None for p in pieces):
        return [shapes["x"]]
    rank = len(pieces[0])
    if not rank or any(len(p) != rank for p in pieces):
        raise ValueError("grad_ys must be pieces of one rank >= 1")
    axis = int(attrs["axis"]) % rank
    along = [p[axis] for p in pieces]
    size = None if None in along else sum(along)
    return [tuple(size if i == axis else pieces[0][i] for i in range(rank))]


def selected_boxes(shapes, attrs):
    """non_max_suppression: a vector whose length the op finds."""
    return [(None,)]
