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


def _flat(data, segment_ids):
    """The ids as a vector and data as one slice per id."""
    ids = segment_ids.reshape(-1)
    return ids, data.reshape((ids.shape[0],) + tuple(data.shape[segment_ids.ndim:]))


def unsorted_segment_sum(xp, data, segment_ids, num_segments):
    _check_prefix("unsorted_segment_sum", data, segment_ids)
    ids, slices = _flat(data, segment_ids)
    y = xp.zeros((num_segments,) + tuple(slices.shape[1:]), dtype=data.dtype)
    kept = (ids >= 0) & (ids < num_segments)  # the others are dropped
    xp.add.at(y, ids[kept], slices[kept])
    return y


def unsorted_segment_sum_grad(xp, data, segment_ids, grad_y, num_segments):
    kept = (segment_ids >= 0) & (segment_ids < num_segments)
    if grad_y.shape[0] == 0:  # no segments: every id was dropped
        return xp.zeros_like(data)
    rows = xp.take(grad_y, xp.where(kept, segment_ids, 0), axis=0)  # shape: data's
    mask = kept.reshape(tuple(kept.shape) + (1,) * (rows.ndim - kept.ndim))
    return xp.where(mask, rows, xp.zeros((), dtype=rows.dtype))


def segment_sum(xp, data, segment_ids):
    if segment_ids.ndim != 1 or data.ndim == 0 or data.shape[0] != segment_ids.shape[0]:
        raise ValueError(f"segment_sum: segment_ids must be 1-d with one id per row of data; got "
                         f"shape {list(segment_ids.shape)} for data of shape {list(data.shape)}")
    n = segment_ids.shape[0]
    if n and int(segment_ids[0]) < 0:
        raise ValueError(f"segment_sum: segment_ids must be >= 0; the first is "
                         f"{int(segment_ids[0])}")
    if n > 1 and bool(xp.any(segment_ids[1:] < segment_ids[:-1])):
        falls = getattr(xp, "asnumpy", np.asarray)(segment_ids[1:] < segment_ids[:-1])
        i = int(np.argmax(falls))
        raise ValueError(f"segment_sum: segment_ids must be sorted (ascending); "
                         f"segment_ids[{i + 1}] = {int(segment_ids[i + 1])} follows "
                         f"{int(segment_ids[i])} (unsorted_segment_sum takes any order)")
    segments = int(segment_ids[-1]) + 1 if n else 0
    y = xp.zeros((segments,) + tuple(data.shape[1:]), dtype=data.dtype)
    xp.add.at(y, segment_ids, data)
    return y


def segment_sum_grad(xp, data, segment_ids, grad_y):
    return xp.take(grad_y, segment_ids, axis=0)
