"""`tf.assign`, `tf.assign_add`, `tf.assign_sub`: a variable's update as a node (the functions
TF1 programs use beside `Variable.assign`)."""

from __future__ import annotations

from typing import Any, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.v1.tensors import convert_to_tensor


def _update(who: str, method: str, ref: Any, value: Any, name: Optional[str]) -> Any:
    if not hasattr(ref, method):
        raise OpsdkError(f"{who}: argument 'ref' must be a Variable, got {type(ref).__name__}")
    value = convert_to_tensor(value)
    if value.dtype != ref.dtype:
        raise OpsdkError(f"{who}: value '{value.name}' is {value.dtype}; variable "
                         f"'{ref.name}' is {ref.dtype}")
    return getattr(ref, method)(value, name=name)


def assign(ref: Any, value: Any, validate_shape: Any = None, use_locking: Any = None,
           name: Optional[str] = None) -> Any:
    """ref = value; the result is the new value."""
    return _update("assign", "assign", ref, value, name)


def assign_add(ref: Any, value: Any, use_locking: Any = None, name: Optional[str] = None) -> Any:
    return _update("assign_add", "assign_add", ref, value, name)


def assign_sub(ref: Any, value: Any, use_locking: Any = None, name: Optional[str] = None) -> Any:
    return _update("assign_sub", "assign_sub", ref, value, name)
