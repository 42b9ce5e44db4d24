"""Shape functions of the ops shaped by a `dims` input (dims.yaml)."""

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


def like_x(shapes, attrs):
    """A gradient shaped like the forward input x."""
    return [shapes["x"]]


def distinct(shapes, attrs):
    """y and count as long as x has distinct values (known at run time), idx as x (unique)."""
    x = shapes["x"]
    if x is not None and len(x) != 1:
        raise ValueError(f"x must be 1-d, not of rank {len(x)}")
    return [(None,), (None,) if x is None else tuple(x), (None,)]
