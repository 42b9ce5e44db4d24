"""Shape functions of the windowed ops (conv.yaml): NHWC, TensorFlow's SAME/VALID sizes."""

from __future__ import annotations


def _out(size, k, stride, padding):
    if size is None or k is None:
        return None
    if padding == "VALID":
        if size < k:
            raise ValueError(f"a window of {k} does not fit in a size of {size} (VALID padding)")
        return (size - k) // stride + 1
    return -(-size // stride)


def _check_rank(name, shape, rank):
    if shape is not None and len(shape) != rank:
        raise ValueError(f"input '{name}' must have rank {rank} (NHWC), got rank {len(shape)}")


def _check_pairs(attrs, *names):
    for name in names:
        values = list(attrs[name])
        if len(values) != 2 or min(values) < 1:
            raise ValueError(f"attr '{name}' must be two positive ints (height, width), "
                             f"got {values}")


def conv2d(shapes, attrs):
    """[n, h, w, c] * [kh, kw, c, o] -> [n, oh, ow, o]."""
    x, f = shapes["x"], shapes["filter"]
    _check_rank("x", x, 4)
    _check_rank("filter", f, 4)
    _check_pairs(attrs, "strides")
    if x is None or f is None:
        return [None]
    if x[3] is not None and f[2] is not None and x[3] != f[2]:
        raise ValueError(f"x has {x[3]} channels but filter expects {f[2]}")
    (sh, sw), pad = attrs["strides"], attrs["padding"]
    return [(x[0], _out(x[1], f[0], sh, pad), _out(x[2], f[1], sw, pad), f[3])]


def pool(shapes, attrs):
    """[n, h, w, c] -> [n, oh, ow, c] for windows attr ksize."""
    x = shapes["x"]
    _check_rank("x", x, 4)
    _check_pairs(attrs, "ksize", "strides")
    if x is None:
        return [None]
    (kh, kw), (sh, sw), pad = attrs["ksize"], attrs["strides"], attrs["padding"]
    return [(x[0], _out(x[1], kh, sh, pad), _out(x[2], kw, sw, pad), x[3])]


def shape_of(shapes, attrs):
    """The `shape` op: a vector with one entry per dim of x (of unknown length where x's rank is
    unknown)."""
    x = shapes["x"]
    return [(None,) if x is None else (len(x),)]


def like_x_filter(shapes, attrs):
    """conv2d_grad: gradients shaped like x and like filter."""
    return [shapes["x"], shapes["filter"]]


def like_value_bias(shapes, attrs):
    return [shapes["value"], shapes["bias"]]


def drawn_per_parameter(shapes, attrs):
    """random_gamma, random_poisson: attr shape, then the parameters' broadcast shape."""
    lead = [int(d) for d in attrs["shape"]]
    if any(d < 0 for d in lead):
        raise ValueError(f"shape {lead} has a negative size")
    params = [shapes[name] for name in ("alpha", "beta", "lam") if name in shapes]
    if any(p is None for p in params):
        return [None]
    rank = max(len(p) for p in params)
    dims = []
    for i in range(rank):
        sizes = {p[len(p) - rank + i] for p in params if len(p) - rank + i >= 0}
        known = {d for d in sizes if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(f"the parameters' shapes {[list(p) for p in params]} do not "
                             "broadcast together")
        dims.append(known.pop() if known else (None if None in sizes else 1))
    return [tuple(lead) + tuple(dims)]
