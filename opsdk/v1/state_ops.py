"""`tf.assign`, `tf.assign_add`, `tf.assign_sub`: a variable's update as a node (the functions
TF1 programs use beside `Variable.assign`)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import math_ops as _m
from opsdk.v1 import sparse as _sparse
from opsdk.v1.tensors import convert_to_tensor


def _update(who: str, method: str, ref: Any, value: Any, name: Optional[str]) -> Any:
    if not hasattr(ref, method):
        raise OpsdkError(f"{who}: argument 'ref' must be a Variable, got {type(ref).__name__}")
    value = convert_to_tensor(_as_dtype_of(ref, value))
    if value.dtype != ref.dtype:
        raise OpsdkError(f"{who}: value '{value.name}' is {value.dtype}; variable "
                         f"'{ref.name}' is {ref.dtype}")
    return getattr(ref, method)(value, name=name)


def _as_dtype_of(ref: Any, value: Any) -> Any:
    """A number (or array) given for a variable in its dtype, as TF converts it, where that
    changes no value (`tf.assign_add(global_step, 1)` on an int64 step); else as it was."""
    if isinstance(value, (opsdk.Tensor, opsdk.Variable)) or not isinstance(
            value, (int, float, bool, list, tuple, np.ndarray, np.generic)):
        return value
    try:
        given = np.asarray(value)
        converted = given.astype(ref.dtype)
    except (TypeError, ValueError):
        return value
    if given.dtype.kind not in "biuf" or not np.array_equal(converted, given):
        return value
    return converted


def assign(ref: Any, value: Any, validate_shape: Any = None, use_locking: Any = None,
           name: Optional[str] = None) -> Any:
    """ref = value; the result is the new value."""
    return _update("assign", "assign", ref, value, name)


def assign_add(ref: Any, value: Any, use_locking: Any = None, name: Optional[str] = None) -> Any:
    return _update("assign_add", "assign_add", ref, value, name)


def assign_sub(ref: Any, value: Any, use_locking: Any = None, name: Optional[str] = None) -> Any:
    return _update("assign_sub", "assign_sub", ref, value, name)


# -- scattered updates --------------------------------------------------------------------------
# TF1's scatter ops update rows (or, the _nd forms, elements and slices) of a variable. Here each
# computes the variable's new value with tensor_scatter_nd_* and assigns it whole: the same
# result, at the cost of a copy of the variable per run.

def _scatter(who: str, first_axis: bool, how: str, doc: str) -> Any:
    """TF1's `who(ref, indices, updates, use_locking, name)`: ref's new value computed with
    tensor_scatter_nd_`how` (indices of rows of its first axis with `first_axis`, else
    coordinates indices[..., :k]) and assigned whole."""
    def scatter(ref: Any, indices: Any, updates: Any, use_locking: Any = None,
                name: Optional[str] = None) -> Any:
        if not hasattr(ref, "assign"):
            raise OpsdkError(f"{who}: argument 'ref' must be a Variable, got "
                             f"{type(ref).__name__}")
        idx = convert_to_tensor(indices)
        if first_axis:  # indices of rows: coordinates of one dim each
            idx = _m.expand_dims(idx, -1)
        value = convert_to_tensor(_as_dtype_of(ref, updates))
        new = getattr(_sparse, f"tensor_scatter_nd_{how}")(convert_to_tensor(ref), idx, value)
        return ref.assign(new, name=name)
    scatter.__name__, scatter.__doc__ = who, doc
    return scatter


scatter_update = _scatter("scatter_update", True, "update", """ref[indices[i]] = updates[i]
    (rows of ref's first axis); the variable's new value. A row given twice gets the sum of its
    updates (TF leaves which one wins undefined).""")
scatter_add = _scatter("scatter_add", True, "add",
                       "ref[indices[i]] += updates[i]; repeated rows add up.")
scatter_sub = _scatter("scatter_sub", True, "sub",
                       "ref[indices[i]] -= updates[i]; repeated rows add up.")
scatter_nd_update = _scatter("scatter_nd_update", False, "update",
                             "ref's elements (or slices) at the coordinates indices[..., :k] set "
                             "to updates.")
scatter_nd_add = _scatter("scatter_nd_add", False, "add",
                          "updates added to ref at the coordinates indices[..., :k].")
scatter_nd_sub = _scatter("scatter_nd_sub", False, "sub",
                          "updates subtracted from ref at the coordinates indices[..., :k].")
