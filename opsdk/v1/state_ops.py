"""`tf.assign`, `tf.assign_add`, `tf.assign_sub`: a variable's update as a node (the functions
TF1 programs use beside `Variable.assign`)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
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
