"""Shape functions of the scans in reduce.yaml."""

from __future__ import annotations


def along_axis(shapes, attrs):
    """x's shape, attr axis checked against its rank (cumsum)."""
    x, axis = shapes["x"], int(attrs["axis"])
    if x is not None and (len(x) == 0 or not -len(x) <= axis < len(x)):
        raise ValueError(f"axis {axis} is out of range for x of rank {len(x)}")
    return [x]
