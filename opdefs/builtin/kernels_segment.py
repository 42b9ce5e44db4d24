"""Python kernels of the segment sums and their gradients (segment.yaml).

A sum scatter-adds each slice of data into its segment's row (`add.at`: an id that repeats gets
every contribution); a gradient gathers grad_y's rows back at the ids.
"""

from __future__ import annotations

import numpy as np


def _check_prefix(op, data, segment_ids):
    # The shape function checked what was known when the graph was built; a size known only now
    # is checked here.
    rank = segment_ids.ndim
    if rank > data.ndim or tuple(data.shape[:rank]) != tuple(segment_ids.shape):
        raise ValueError(f"{op}: segment_ids has shape {list(segment_ids.shape)}, which is not a "
                         f"prefix of data's shape {list(data.shape)}")


def _check_range(op, segment_ids, num_segments):
    """An id at or past num_segments is an error (as TensorFlow's): dropping it would lose data
    silently. A negative id is dropped, as documented."""
    past = segment_ids >= num_segments
    if bool(past.any()):
        at = np.unravel_index(int(np.argmax(getattr(past, "get", lambda: past)())), past.shape)
        raise ValueError(f"{op}: segment_ids[{', '.join(str(int(i)) for i in at)}] = "
                         f"{int(segment_ids[at])} is out of range [0, {num_segments}) "
                         f"(num_segments = {num_segments}; a negative id drops its slice)")


def _flat(data, segment_ids):
    """The ids as a vector and data as one slice per id."""
    ids = segment_ids.reshape(-1)
    return ids, data.reshape((ids.shape[0],) + tuple(data.shape[segment_ids.ndim:]))


def unsorted_segment_sum(xp, data, segment_ids, num_segments):
    _check_prefix("unsorted_segment_sum", data, segment_ids)
    _check_range("unsorted_segment_sum", segment_ids, num_segments)
    ids, slices = _flat(data, segment_ids)
    y = xp.zeros((num_segments,) + tuple(slices.shape[1:]), dtype=data.dtype)
    kept = ids >= 0  # a negative id is dropped
    xp.add.at(y, ids[kept], slices[kept])
    return y


def unsorted_segment_sum_grad(xp, data, segment_ids, grad_y, num_segments):
    kept = (segment_ids >= 0) & (segment_ids < num_segments)
    if grad_y.shape[0] == 0:  # no segments: every id was dropped
        return xp.zeros_like(data)
    rows = xp.take(grad_y, xp.where(kept, segment_ids, 0), axis=0)  # shape: data's
    mask = kept.reshape(tuple(kept.shape) + (1,) * (rows.ndim - kept.ndim))
    return xp.where(mask, rows, xp.zeros((), dtype=rows.dtype))


def _sorted_count(xp, op, data, segment_ids):
    """The number of segments of sorted ids (the last + 1), after checking them."""
    if segment_ids.ndim != 1 or data.ndim == 0 or data.shape[0] != segment_ids.shape[0]:
        raise ValueError(f"{op}: segment_ids must be 1-d with one id per row of data; got "
                         f"shape {list(segment_ids.shape)} for data of shape {list(data.shape)}")
    n = segment_ids.shape[0]
    if n and int(segment_ids[0]) < 0:
        raise ValueError(f"{op}: segment_ids must be >= 0; the first is "
                         f"{int(segment_ids[0])}")
    if n > 1 and bool(xp.any(segment_ids[1:] < segment_ids[:-1])):
        falls = getattr(xp, "asnumpy", np.asarray)(segment_ids[1:] < segment_ids[:-1])
        i = int(np.argmax(falls))
        raise ValueError(f"{op}: segment_ids must be sorted (ascending); "
                         f"segment_ids[{i + 1}] = {int(segment_ids[i + 1])} follows "
                         f"{int(segment_ids[i])} (unsorted_{op} takes any order)")
    return int(segment_ids[-1]) + 1 if n else 0


def segment_sum(xp, data, segment_ids):
    segments = _sorted_count(xp, "segment_sum", data, segment_ids)
    y = xp.zeros((segments,) + tuple(data.shape[1:]), dtype=data.dtype)
    xp.add.at(y, segment_ids, data)
    return y


def segment_sum_grad(xp, data, segment_ids, grad_y):
    return xp.take(grad_y, segment_ids, axis=0)


# -- maxima and minima -------------------------------------------------------------------------
# Each segment's largest (smallest) slice, elementwise; the gradient goes to the slices equal to
# it, shared equally among ties (as TensorFlow's). An empty segment holds the dtype's lowest
# (highest) value in the unsorted ops, 0 in the sorted ones.

def _extreme(xp, op, data, segment_ids, segments, largest, empty):
    """`empty`: what a segment no id names holds (None: the dtype's lowest or highest value,
    which every segment starts from)."""
    ids, slices = _flat(data, segment_ids)
    info = np.finfo(data.dtype) if data.dtype.kind == "f" else np.iinfo(data.dtype)
    y = xp.full((segments,) + tuple(slices.shape[1:]), info.min if largest else info.max,
                dtype=data.dtype)
    kept = (ids >= 0) & (ids < segments)
    (xp.maximum if largest else xp.minimum).at(y, ids[kept], slices[kept])
    if empty is not None:
        y[xp.bincount(ids[kept], minlength=segments) == 0] = empty
    return y


def _extreme_grad(xp, data, segment_ids, y, grad_y):
    if y.shape[0] == 0:  # no segments: every id was dropped
        return xp.zeros_like(data)
    ids, slices = _flat(data, segment_ids)
    kept = (ids >= 0) & (ids < y.shape[0])
    safe = xp.where(kept, ids, 0)
    picked = slices == xp.take(y, safe, axis=0)
    picked &= kept.reshape(tuple(kept.shape) + (1,) * (picked.ndim - 1))
    count = xp.zeros(y.shape, dtype=grad_y.dtype)
    xp.add.at(count, ids[kept], picked[kept].astype(grad_y.dtype))
    share = xp.take(grad_y / xp.maximum(count, 1), safe, axis=0)
    return xp.where(picked, share, xp.zeros((), dtype=share.dtype)).reshape(data.shape)


def unsorted_segment_max(xp, data, segment_ids, num_segments):
    _check_prefix("unsorted_segment_max", data, segment_ids)
    _check_range("unsorted_segment_max", segment_ids, num_segments)
    return _extreme(xp, "unsorted_segment_max", data, segment_ids, num_segments, True, None)


def unsorted_segment_min(xp, data, segment_ids, num_segments):
    _check_prefix("unsorted_segment_min", data, segment_ids)
    _check_range("unsorted_segment_min", segment_ids, num_segments)
    return _extreme(xp, "unsorted_segment_min", data, segment_ids, num_segments, False, None)


def segment_max(xp, data, segment_ids):
    n = _sorted_count(xp, "segment_max", data, segment_ids)
    return _extreme(xp, "segment_max", data, segment_ids, n, True, 0)


def segment_min(xp, data, segment_ids):
    n = _sorted_count(xp, "segment_min", data, segment_ids)
    return _extreme(xp, "segment_min", data, segment_ids, n, False, 0)


def unsorted_segment_max_grad(xp, data, segment_ids, y, grad_y, num_segments):
    return _extreme_grad(xp, data, segment_ids, y, grad_y)


unsorted_segment_min_grad = unsorted_segment_max_grad


def segment_max_grad(xp, data, segment_ids, y, grad_y):
    return _extreme_grad(xp, data, segment_ids, y, grad_y)


segment_min_grad = segment_max_grad


# -- products ----------------------------------------------------------------------------------
# Each segment's slices multiplied elementwise; a segment no id names holds 1. The gradient of a
# slice is grad_y's row times the product of the segment's other slices, counted without
# dividing by a zero: where the segment holds one zero, that slice gets the product of the
# others and the rest 0; with two or more zeros every slice gets 0 (TensorFlow's rule).

def _product(xp, data, segment_ids, segments):
    ids, slices = _flat(data, segment_ids)
    y = xp.ones((segments,) + tuple(slices.shape[1:]), dtype=data.dtype)
    kept = ids >= 0
    xp.multiply.at(y, ids[kept], slices[kept])
    return y


def _product_grad(xp, data, segment_ids, grad_y, segments):
    ids, slices = _flat(data, segment_ids)
    kept = ids >= 0
    safe = xp.where(kept, ids, 0)
    zero = slices == 0
    zeros = xp.zeros((segments,) + tuple(slices.shape[1:]), dtype=np.int64)
    xp.add.at(zeros, ids[kept], zero[kept].astype(np.int64))
    nonzero = xp.ones((segments,) + tuple(slices.shape[1:]), dtype=data.dtype)
    xp.multiply.at(nonzero, ids[kept], xp.where(zero, 1, slices)[kept])
    if segments == 0:
        return xp.zeros_like(data)
    count, rest = xp.take(zeros, safe, axis=0), xp.take(nonzero, safe, axis=0)
    others = xp.where(zero, xp.where(count == 1, rest, 0),
                      xp.where(count == 0, rest / xp.where(zero, 1, slices), 0))
    grad = xp.take(grad_y, safe, axis=0) * others
    mask = kept.reshape(tuple(kept.shape) + (1,) * (grad.ndim - 1))
    return xp.where(mask, grad, xp.zeros((), dtype=grad.dtype)).astype(data.dtype).reshape(
        data.shape)


def unsorted_segment_prod(xp, data, segment_ids, num_segments):
    _check_prefix("unsorted_segment_prod", data, segment_ids)
    _check_range("unsorted_segment_prod", segment_ids, num_segments)
    return _product(xp, data, segment_ids, num_segments)


def unsorted_segment_prod_grad(xp, data, segment_ids, grad_y, num_segments):
    return _product_grad(xp, data, segment_ids, grad_y, num_segments)


def segment_prod(xp, data, segment_ids):
    return _product(xp, data, segment_ids, _sorted_count(xp, "segment_prod", data, segment_ids))


def segment_prod_grad(xp, data, segment_ids, grad_y):
    return _product_grad(xp, data, segment_ids, grad_y, grad_y.shape[0])
