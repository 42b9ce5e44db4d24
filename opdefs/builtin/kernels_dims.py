"""Python kernels of the ops shaped by a `dims` input (dims.yaml). The random ones draw as
kernels_random.py does (NumPy's PCG64; seed 0 fresh values, any other seed fixed ones, or with
attr sequence the step's generator, `rng=`)."""

from __future__ import annotations

import numpy as np


def _shape(op, xp, dims):
    # dims may live on a device (a GPU, the test device): read it on the host, as CuPy's
    # asnumpy does (NumPy has none: there it is already a host array).
    shape = tuple(int(d) for d in getattr(xp, "asnumpy", np.asarray)(dims).reshape(-1))
    if any(d < 0 for d in shape):
        raise ValueError(f"{op}: input 'dims' {list(shape)} has a negative size")
    return shape


def _rng(seed, rng=None):
    """The generator to draw from: the step's (`rng`: a seeded sequence's, kept by the session),
    else a fresh one, from the seed or (seed 0) from OS entropy."""
    return rng if rng is not None else np.random.default_rng(None if seed == 0 else seed)


def fill_dims(xp, dims, value):
    return xp.full(_shape("fill_dims", xp, dims), value, dtype=value.dtype)


def zeros_view_dims(xp, dims, dtype, shape=()):
    target = tuple(dims.tolist()) if xp is np else _shape("zeros_view_dims", xp, dims)
    key = (id(xp), target, dtype, tuple(shape))
    view = _ZERO_VIEWS.get(key)
    if view is None:  # (a loop's gradient asks for the same few views on every iteration)
        if any(d < 0 for d in target):
            raise ValueError(f"zeros_view_dims: input 'dims' {list(target)} has a negative size")
        _check_declared(target, shape, f"input 'dims' {list(target)}")
        view = xp.broadcast_to(xp.zeros((), dtype=dtype), target)  # read-only: safe to share
        if len(_ZERO_VIEWS) >= 256:
            _ZERO_VIEWS.clear()
        _ZERO_VIEWS[key] = view
    return view


_ZERO_VIEWS: dict = {}  # (array module, shape, dtype, declared sizes) -> a shared zeros view


def random_uniform_dims(xp, dims, seed, dtype, sequence=False, rng=None):
    u = _rng(seed, rng).random(_shape("random_uniform_dims", xp, dims)).astype(dtype)
    # Narrowing can round up onto 1; keep the interval half-open.
    return xp.asarray(np.minimum(u, np.nextafter(np.asarray(1, dtype), np.asarray(0, dtype))))


def random_normal_dims(xp, dims, seed, dtype, sequence=False, rng=None):
    z = _rng(seed, rng).standard_normal(_shape("random_normal_dims", xp, dims))
    return xp.asarray(z.astype(dtype))


def truncated_normal_dims(xp, dims, seed, dtype, sequence=False, rng=None):
    rng = _rng(seed, rng)
    z = rng.standard_normal(_shape("truncated_normal_dims", xp, dims))
    bad = np.abs(z) > 2
    while bad.any():  # redraw outside two standard deviations, as TensorFlow does
        z[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(z) > 2
    return xp.asarray(z.astype(dtype))


def where_indices(xp, x):
    return xp.argwhere(x).astype(np.int64)


def arange(xp, start, limit, delta):
    if delta == 0:
        raise ValueError("arange: input 'delta' is 0; give a non-zero step")
    return xp.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


def reshape_dims(xp, x, dims, shape):
    target = tuple(int(d) for d in dims.reshape(-1).tolist())  # tolist: a CuPy dims too
    if sum(d == -1 for d in target) > 1 or any(d < -1 for d in target):
        raise ValueError(f"input 'dims' {list(target)} may hold one -1 and otherwise sizes >= 0")
    rest = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if (rest != x.size) if -1 not in target else (rest == 0 or x.size % rest):
        raise ValueError(f"cannot reshape x of shape {list(x.shape)} ({x.size} elements) to "
                         f"input 'dims' {list(target)}")
    y = xp.reshape(x, target)
    _check_declared(y.shape, shape, f"x reshaped to {list(y.shape)} (input 'dims' {list(target)})")
    return y


def _check_declared(sizes, declared, what):
    """The sizes known when the graph was built (attr shape: -1 where open; [] none) hold."""
    if declared and (len(declared) != len(sizes)
                     or any(k >= 0 and k != d for k, d in zip(declared, sizes))):
        raise ValueError(f"{what} does not have the sizes declared when the graph was built, "
                         f"{list(declared)} (-1: any)")


def reshape_dims_grad(xp, x, dims, grad_y):
    return xp.reshape(grad_y, x.shape)


def expand_dims(xp, x, axis):
    rank = x.ndim
    if not -rank - 1 <= axis <= rank:  # the rank was unknown when the graph was built
        raise ValueError(f"attr axis {axis} is out of range for x of shape {list(x.shape)} "
                         f"(from {-rank - 1} to {rank})")
    return xp.expand_dims(x, axis)


def expand_dims_grad(xp, x, grad_y, axis):
    return xp.reshape(grad_y, x.shape)


def searchsorted(xp, sorted_sequence, values, side, out_type):
    seq = np.asarray(sorted_sequence if xp is np else xp.asnumpy(sorted_sequence))
    vals = np.asarray(values if xp is np else xp.asnumpy(values))
    rows = seq.reshape(int(np.prod(seq.shape[:-1], dtype=np.int64)), seq.shape[-1])
    queries = vals.reshape(rows.shape[0], vals.shape[-1])
    out = np.empty(queries.shape, dtype=out_type)
    for r in range(rows.shape[0]):
        out[r] = np.searchsorted(rows[r], queries[r], side=side)
    return xp.asarray(out.reshape(vals.shape))


def unique(xp, x, out_idx):
    """NumPy's sorted unique values put back in the order they first appear in x."""
    values, first, inverse, counts = np.unique(np.asarray(x), return_index=True,
                                               return_inverse=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    return (xp.asarray(values[order]), xp.asarray(position[inverse.reshape(-1)].astype(out_idx)),
            xp.asarray(counts[order].astype(out_idx)))


def non_max_suppression(xp, boxes, scores, max_output_size, iou_threshold, score_threshold):
    b = np.asarray(boxes if xp is np else xp.asnumpy(boxes), np.float64)
    s = np.asarray(scores if xp is np else xp.asnumpy(scores), np.float64)
    limit = int(max_output_size)
    if limit < 0:
        raise ValueError(f"max_output_size must be >= 0, got {limit}")
    if not 0.0 <= iou_threshold <= 1.0:
        raise ValueError(f"iou_threshold must be in [0, 1], got {iou_threshold}")
    y1, y2 = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    x1, x2 = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    area = (y2 - y1) * (x2 - x1)
    order = [int(i) for i in np.argsort(-s, kind="stable") if s[i] > score_threshold]
    chosen: list[int] = []
    for i in order:
        if len(chosen) >= limit:
            break
        if chosen:
            c = np.asarray(chosen)
            inter = (np.clip(np.minimum(y2[i], y2[c]) - np.maximum(y1[i], y1[c]), 0, None)
                     * np.clip(np.minimum(x2[i], x2[c]) - np.maximum(x1[i], x1[c]), 0, None))
            union = area[i] + area[c] - inter
            with np.errstate(divide="ignore", invalid="ignore"):
                iou = np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
            if (iou > iou_threshold).any():
                continue
        chosen.append(i)
    return xp.asarray(np.asarray(chosen, dtype=np.int32))
