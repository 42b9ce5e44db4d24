"""Shape function of the ops shaped by a `dims` input (dims.yaml)."""

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
