"""TensorFlow 1's dtypes and its rules for choosing one (`placeholder("float")` is float32,
Python floats become float32 and ints int32 in `constant` and `Variable`).

The dtypes are names (`DTypeName`, a str that answers TF's questions of a dtype and NumPy
takes as one): `tf.float32 == "float32"`, `tf.float32 == np.float32` and `x.dtype ==
tf.float32` hold, and `tf.float32.as_numpy_dtype` is `np.float32`. `string` is a marker: opsdk's runtime has no string tensors, so
`opsdk.v1` keeps string constants as bytes (see `strings.py`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opsdk.registry.errors import OpsdkError
from opsdk.runtime.ir.tensor import DTypeName

float16, float32, float64 = DTypeName("float16"), DTypeName("float32"), DTypeName("float64")
int8, int16, int32, int64 = (DTypeName(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16 = DTypeName("uint8"), DTypeName("uint16")
bool_ = DTypeName("bool")
half, double = float16, float64


class _StringDType:
    """TF's `tf.string`: only constants and fetches of strings are supported."""

    name = "string"

    def __repr__(self) -> str:
        return "tf.string"


string = _StringDType()

# TF's spellings that NumPy reads differently ("float" is float64 to NumPy, float32 to TF).
_TF_NAMES = {"float": float32, "double": float64, "half": float16, "int": int32,
             "long": int64, "bool": bool_}


def as_dtype(dtype: Any) -> DTypeName:
    """The dtype TF means by `dtype` (a dtype, a name, or a Python type), as a DTypeName (the
    name, which NumPy takes as a dtype and which answers `is_floating`, `as_numpy_dtype` and the
    rest of TF's questions)."""
    if dtype is string or dtype is str or dtype == "string":
        return string  # type: ignore[return-value]
    if isinstance(dtype, str) and dtype in _TF_NAMES:
        return _TF_NAMES[dtype]
    if dtype is float:
        return float32
    if dtype is int:
        return int32
    if dtype is bool:
        return bool_
    try:
        return DTypeName(np.dtype(dtype).name)
    except TypeError:
        raise OpsdkError(f"'{dtype}' is not a dtype (use e.g. tf.float32)") from None


def name_of(dtype: Any) -> str:
    """The registry's name of a TF dtype (`tf.float32` -> 'float32')."""
    return as_dtype(dtype).name


def default_array(value: Any, dtype: Any = None) -> np.ndarray:
    """`value` as an array by TF's rules: Python floats float32, ints int32 (int64 when too
    large), bools bool; NumPy arrays keep their dtype unless `dtype` is given."""
    if dtype is not None:
        return np.asarray(value, dtype=as_dtype(dtype))
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return np.asarray(value)
    array = np.asarray(value)
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if array.dtype == np.int64 and array.size and np.abs(array).max() < 2 ** 31:
        return array.astype(np.int32)
    if array.dtype == np.int64 and not array.size:
        return array.astype(np.int32)
    return array
