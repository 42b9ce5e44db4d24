"""Python kernels of the reductions and their gradients (reduce.yaml).

attr `axes`: the axes to reduce (negative counts from the end); empty means every axis.
attr `keepdims`: keep reduced axes as size 1.
"""

from __future__ import annotations

import numpy as np


def _axes(axes, ndim):
    """`axes` as non-negative ints; empty means all (the shape fn has already checked range)."""
    return tuple(range(ndim)) if not axes else tuple(a % ndim for a in axes)


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _expand(xp, grad_y, x, axes):
    """grad_y (reduced, with or without kept dims) broadcast back to x's shape."""
    kept = xp.reshape(grad_y, _kept_shape(x.shape, axes))
    return xp.broadcast_to(kept, x.shape)


def _expand_copy(xp, grad_y, x, axes, keepdims=False):
    """_expand as a new writeable array (a gradient may be accumulated in place). Assigning into
    an empty array broadcasts in C: several times cheaper than broadcast_to + copy on small x.
    A grad_y that already broadcasts against x (0-d, or reduced with kept dims) needs no
    reshape, nor are the `axes` (the attr as given) normalised for it: on tiny arrays that
    Python-level work cost more than the whole copy."""
    out = xp.empty(x.shape, dtype=grad_y.dtype)
    out[...] = grad_y if keepdims or grad_y.ndim == 0 else grad_y.reshape(
        _kept_shape(x.shape, _axes(axes, x.ndim)))
    return out


def reduce_sum(xp, x, axes, keepdims):
    # dtype=x.dtype: NumPy would widen small ints to int64; the op keeps T. On NumPy the ufunc's
    # reduce skips np.sum's Python-level dispatch (the same reduction, a third of the cost);
    # axis=None for every axis spares building the tuple of all axes.
    axis = None if not axes else _axes(axes, x.ndim)
    total = (xp.add.reduce(x, axis=axis, keepdims=keepdims, dtype=x.dtype) if xp is np
             else xp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype))
    return xp.asarray(total)


def reduce_sum_grad(xp, x, grad_y, axes, keepdims):
    return _expand_copy(xp, grad_y, x, axes, keepdims)  # normalises axes only if it reshapes


def reduce_mean(xp, x, axes, keepdims):
    return xp.asarray(xp.mean(x, axis=_axes(axes, x.ndim), keepdims=keepdims))


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def reduce_mean_grad(xp, x, grad_y, axes, keepdims, out=None):
    axes = _axes(axes, x.ndim)
    # A Python float scale keeps grad_y's dtype under NumPy 2 promotion. out may be x's buffer
    # (only its shape is read) or one the runtime keeps: no fresh allocation per call.
    scale = 1.0 / max(_count(x.shape, axes), 1)
    return xp.asarray(xp.multiply(_expand(xp, grad_y, x, axes), scale, out=out))


def _empty_extremum(xp, x, axes, keepdims, largest):
    """The extremum over no elements, as TensorFlow's: -inf (inf) for floats, the dtype's
    lowest (highest) value otherwise, in the reduced shape (NumPy's max refuses to)."""
    axes = _axes(axes, x.ndim)
    if x.dtype.kind == "f":
        fill = -np.inf if largest else np.inf
    elif x.dtype.kind == "b":
        fill = not largest
    else:
        info = np.iinfo(x.dtype)
        fill = info.min if largest else info.max
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes)
    return xp.full(shape, fill, dtype=x.dtype)


def reduce_max(xp, x, axes, keepdims):
    if x.size == 0:
        return _empty_extremum(xp, x, axes, keepdims, True)
    return xp.asarray(xp.max(x, axis=_axes(axes, x.ndim), keepdims=keepdims))


def reduce_min(xp, x, axes, keepdims):
    if x.size == 0:
        return _empty_extremum(xp, x, axes, keepdims, False)
    return xp.asarray(xp.min(x, axis=_axes(axes, x.ndim), keepdims=keepdims))


def _extremum_grad(xp, x, y, grad_y, axes):
    """The gradient goes to the elements equal to the extremum, shared equally among ties."""
    axes = _axes(axes, x.ndim)
    hit = xp.equal(x, _expand(xp, y, x, axes))
    ties = xp.sum(hit, axis=axes, keepdims=True, dtype=x.dtype)
    share = xp.divide(_expand(xp, grad_y, x, axes), ties)
    return xp.asarray(xp.where(hit, share, xp.zeros_like(share)))


def reduce_max_grad(xp, x, y, grad_y, axes, keepdims):
    return _extremum_grad(xp, x, y, grad_y, axes)


def reduce_min_grad(xp, x, y, grad_y, axes, keepdims):
    return _extremum_grad(xp, x, y, grad_y, axes)


def argmin(xp, x, axis):
    return xp.asarray(xp.argmin(x, axis=axis)).astype(xp.int64)


def argmax(xp, x, axis):
    return xp.asarray(xp.argmax(x, axis=axis)).astype(xp.int64)


def reduce_prod(xp, x, axes, keepdims):
    axis = None if not axes else _axes(axes, x.ndim)
    return xp.asarray(xp.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype))


def reduce_prod_grad(xp, x, grad_y, axes, keepdims):
    """grad_y times the product of the other elements of each reduced group: the reduced axes
    moved last and flattened, the products before and after each element multiplied (no
    division, so zeros in x are exact)."""
    reduced = _axes(axes, x.ndim)
    kept = [i for i in range(x.ndim) if i not in reduced]
    order = kept + list(reduced)
    moved = xp.transpose(x, order)
    group = int(np.prod([x.shape[i] for i in reduced], dtype=np.int64))
    flat = moved.reshape(moved.shape[:len(kept)] + (group,))
    ones = xp.ones(flat.shape[:-1] + (1,), dtype=x.dtype)
    before = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=x.dtype)
    after = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], ones], axis=-1), -1),
                               axis=-1, dtype=x.dtype), -1)
    others = (before * after).reshape(moved.shape)
    others = xp.transpose(others, np.argsort(order))
    return _expand(xp, grad_y, x, reduced) * others


def _cumsum_axis(x, axis):
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for x of rank {x.ndim}")
    return axis % x.ndim


def _running(xp, scan, first, x, axis, exclusive, reverse):
    """cumsum's and cumprod's shared form: `scan` along axis, from the end with reverse, shifted
    by one (its first value `first`: 0 or 1) with exclusive."""
    a = _cumsum_axis(x, axis)
    values = xp.flip(x, a) if reverse else x
    runs = scan(values, axis=a, dtype=x.dtype)
    if exclusive:
        runs = xp.concatenate([xp.full_like(xp.take(runs, [0], axis=a), first),
                               xp.take(runs, range(runs.shape[a] - 1), axis=a)], axis=a)
    return xp.ascontiguousarray(xp.flip(runs, a) if reverse else runs)


def cumsum(xp, x, axis, exclusive, reverse):
    return _running(xp, xp.cumsum, 0, x, axis, exclusive, reverse)


def cumsum_grad(xp, x, grad_y, axis, exclusive, reverse):
    return cumsum(xp, grad_y, axis, exclusive, not reverse)


def cumprod(xp, x, axis, exclusive, reverse):
    return _running(xp, xp.cumprod, 1, x, axis, exclusive, reverse)


def cumprod_grad(xp, x, grad_y, axis, exclusive, reverse):
    """d/dx[j] of sum_i g[i] y[i], exact where x holds zeros (no division by x): with the
    products running forward, E[j] = x[0] ... x[j-1] and R[j] = sum over the products y[i] that
    take x[j] of g[i] x[j+1] ... x[i] (R[j] = g[j] + x[j+1] R[j+1]; exclusive: R[j] = g[j+1] +
    x[j+1] R[j+1]), the gradient is E[j] R[j]. A scan along the axis, one step per element."""
    a = _cumsum_axis(x, axis)
    if x.shape[a] == 0:
        return xp.zeros_like(x)
    xs, gs = xp.moveaxis(x, a, 0), xp.moveaxis(grad_y, a, 0)
    if reverse:
        xs, gs = xs[::-1], gs[::-1]
    n = xs.shape[0]
    before = cumprod(xp, xs, 0, True, False)  # E
    running = xp.zeros_like(xs)
    carried = xp.zeros_like(xs[0])
    for j in range(n - 1, -1, -1):
        if exclusive:
            carried = (gs[j + 1] + xs[j + 1] * carried) if j + 1 < n else xp.zeros_like(xs[0])
        else:
            carried = gs[j] + (xs[j + 1] * carried if j + 1 < n else 0)
        running[j] = carried
    grad = before * running
    if reverse:
        grad = grad[::-1]
    return xp.ascontiguousarray(xp.moveaxis(grad, 0, a))


# ---- einsum ----------------------------------------------------------------------------------

def einsum(xp, xs, equation, N):
    return xp.asarray(xp.einsum(equation, *xs), order="C")  # 0-d stays 0-d


def einsum_grad(xp, xs, grad_y, equation, N):
    """Per operand: grad_y contracted with every other operand onto the letters this operand
    shares with them or the output; letters it alone sums over are broadcast back."""
    terms, out = equation.replace(" ", "").split("->")
    terms = terms.split(",")
    grads = []
    for k, (x, term) in enumerate(zip(xs, terms)):
        others = [(t, v) for j, (t, v) in enumerate(zip(terms, xs)) if j != k]
        kept = "".join(c for c in term if c in out or any(c in t for t, _ in others))
        spec = ",".join([out, *(t for t, _ in others)]) + "->" + kept
        part = xp.asarray(xp.einsum(spec, grad_y, *(v for _, v in others)))
        alone = tuple(i for i, c in enumerate(term) if c not in kept)
        if alone:
            part = xp.expand_dims(part, alone)
        grads.append(xp.array(xp.broadcast_to(part, x.shape), dtype=x.dtype, order="C"))
    return grads
