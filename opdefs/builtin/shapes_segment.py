"""Shape functions of the segment sums (segment.yaml)."""

from __future__ import annotations


def unsorted_segments(shapes, attrs):
    """[num_segments, *data.shape[segment_ids.ndim:]], segment_ids' shape a prefix of data's."""
    data, ids = shapes["data"], shapes["segment_ids"]
    if data is None or ids is None:
        return [None]
    prefix = data[:len(ids)]
    if len(ids) > len(data) or any(a is not None and b is not None and a != b
                                   for a, b in zip(ids, prefix)):
        raise ValueError(f"segment_ids has shape {list(ids)}, which is not a prefix of data's "
                         f"shape {list(data)}")
    return [(int(attrs["num_segments"]), *data[len(ids):])]


def sorted_segments(shapes, attrs):
    """[segment_ids[-1] + 1 (known at run time), *data.shape[1:]], one id per row of data."""
    data, ids = shapes["data"], shapes["segment_ids"]
    if ids is not None and len(ids) != 1:
        raise ValueError(f"segment_ids must be 1-d, not of rank {len(ids)}")
    if data is None:
        return [None]
    if not data:
        raise ValueError("data is a scalar: it has no rows to sum")
    if ids is not None and None not in (ids[0], data[0]) and ids[0] != data[0]:
        raise ValueError(f"segment_ids has {ids[0]} ids but data has {data[0]} rows")
    return [(None, *data[1:])]


def like_data(shapes, attrs):
    """A gradient shaped like the forward input data."""
    return [shapes["data"]]
