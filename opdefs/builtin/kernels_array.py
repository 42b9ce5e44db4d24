"""Python kernels of the shape-changing and creation builtin ops and their gradients (array.yaml).

Attrs arrive normalised (defaults filled, ranges checked by the op's shape function at graph
time). Gradients that are slices of another array are copied: a view would alias the incoming
gradient, which the runtime may accumulate into in place.
"""

from __future__ import annotations


def _axis(axis, ndim):
    return axis % ndim if ndim else 0


def _copy(xp, a):
    return xp.array(a, copy=True)


# ---- reshape, transpose --------------------------------------------------------------------

def reshape(xp, x, shape):
    return xp.reshape(x, tuple(shape))


def reshape_grad(xp, x, grad_y, shape):
    return xp.reshape(grad_y, x.shape)


def _perm(perm, ndim):
    return tuple(p % ndim for p in perm) if perm else tuple(range(ndim))[::-1]


def transpose(xp, x, perm):
    return xp.transpose(x, _perm(perm, x.ndim))


def transpose_grad(xp, x, grad_y, perm):
    forward = _perm(perm, x.ndim)
    inverse = [0] * len(forward)
    for i, p in enumerate(forward):
        inverse[p] = i
    return xp.transpose(grad_y, tuple(inverse))


# ---- concat, stack (list input `xs`; N is its length, an implicit attr) ---------------------

def concat(xp, xs, axis, N):
    return xp.concatenate(list(xs), axis=axis)


def concat_grad(xp, xs, grad_y, axis, N):
    """One piece of grad_y per input, cut at the inputs' sizes along axis (a list output)."""
    ax = _axis(axis, grad_y.ndim)
    pieces, start = [], 0
    for x in xs:
        stop = start + x.shape[ax]
        index = (slice(None),) * ax + (slice(start, stop),)
        pieces.append(_copy(xp, grad_y[index]))
        start = stop
    return pieces


def split(xp, x, axis, sizes, N):
    """Views of x, one per size along axis (the shape function checked the sizes)."""
    ax = _axis(axis, x.ndim)
    pieces, start = [], 0
    for size in sizes:
        pieces.append(x[(slice(None),) * ax + (slice(start, start + size),)])
        start += size
    if start != x.shape[ax]:
        raise ValueError(f"sizes {list(sizes)} add up to {start}, but x has {x.shape[ax]} "
                         f"along axis {axis}")
    return pieces


def split_grad(xp, x, grad_ys, axis, N):
    return xp.concatenate(list(grad_ys), axis=_axis(axis, x.ndim))


def stack(xp, xs, axis, N):
    return xp.stack(list(xs), axis=axis)


def stack_grad(xp, xs, grad_y, axis, N):
    ax = _axis(axis, grad_y.ndim)
    return [_copy(xp, grad_y[(slice(None),) * ax + (i,)]) for i in range(len(xs))]


# ---- slice, gather -------------------------------------------------------------------------

def _slices(x_shape, begin, size):
    """Index of the slice; empty begin means all zeros, empty size all -1 (to the end)."""
    begin, size = begin or [0] * len(x_shape), size or [-1] * len(x_shape)
    return tuple(slice(b, d if s == -1 else b + s) for b, s, d in zip(begin, size, x_shape))


def slice_(xp, x, begin, size, clamp=False):  # trailing _: `slice` is a builtin the module needs
    # Python's slicing stops at x's end: with clamp a longer block is cut there; without, the
    # runtime's shape check has refused it before the kernel runs
    return _copy(xp, x[_slices(x.shape, begin, size)])


def slice_grad(xp, x, grad_y, begin, size, clamp=False):
    grad_x = xp.zeros_like(x)
    grad_x[_slices(x.shape, begin, size)] = grad_y
    return grad_x


def gather(xp, params, indices, axis):
    ax = _axis(axis, params.ndim)
    if ax == 0 and indices.ndim == 0 and params.ndim:
        # one row (a loop reading its sequence, or a recorded history, at step i): a view, no
        # copy. Out-of-range indices fail as take's do; the view is never handed out as a
        # buffer (kernels/buffers.py pools only arrays owning their memory).
        return params[int(indices)]
    return xp.take(params, indices, axis=ax)


def gather_grad(xp, params, indices, grad_y, axis):
    """Scatter-add grad_y back: an index that appears twice receives both contributions."""
    ax = _axis(axis, params.ndim)
    grad_params = xp.zeros_like(params)
    xp.add.at(grad_params, (slice(None),) * ax + (indices,), grad_y)
    return grad_params



# ---- cast, identity-like, creation ---------------------------------------------------------

def cast(xp, x, DstT):
    return x.astype(DstT)


def cast_grad(xp, x, grad_y):
    return grad_y.astype(x.dtype)


def stop_gradient(xp, x):
    return x


def zeros(xp, shape, dtype):
    return xp.zeros(tuple(shape), dtype=dtype)


def ones(xp, shape, dtype):
    return xp.ones(tuple(shape), dtype=dtype)


def fill(xp, shape, value, dtype):
    # An integer (or bool) dtype holds an in-range value exactly; out of range, NumPy's cast
    # would wrap or saturate silently (2**63 into int64 gave INT64_MIN).
    kind = xp.dtype(dtype).kind
    if kind in "iu":
        info = xp.iinfo(dtype)
        if not info.min <= value <= info.max:  # NaN fails too
            raise ValueError(f"value {value!r} does not fit {xp.dtype(dtype).name} "
                             f"({info.min} .. {info.max})")
    elif kind in "fc" and value == value and abs(value) != float("inf") and abs(value) > float(
            xp.finfo(dtype).max):  # a finite value that would become infinite
        raise ValueError(f"value {value!r} overflows {xp.dtype(dtype).name} (largest "
                         f"{float(xp.finfo(dtype).max)!r})")
    return xp.full(tuple(shape), value, dtype=dtype)
