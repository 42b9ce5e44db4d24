"""Lists that mix tensors with Python numbers (`tf.stack([tf.shape(x)[0], 10])`,
`tf.constant`-like lists holding a tensor), packed as TF packs them: the numbers take the dtype
of the first tensor in the list (searched through nested lists), so `[n64, 4]` is int64 and
`[1.5, t64]` float64; a number that dtype cannot hold exactly (1.5 among int32 tensors) and
tensors of two dtypes are refused naming the function and the element."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

import opsdk
from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1.args import graph_value
from opsdk.v1.dtypes import default_array, name_of


def elements(who: str, values: Any, dtype: Any = None) -> list:
    """`values` as tensors of one dtype: `dtype` when given, else the first tensor's."""
    values = list(values)
    target = name_of(dtype) if dtype is not None else first_dtype(values)
    return [_element(who, value, target, i) for i, value in enumerate(values)]


def first_dtype(values: list) -> Optional[str]:
    """The dtype of the first tensor in `values` (nested lists searched), or None."""
    for value in values:
        value = graph_value(value)
        if isinstance(value, opsdk.Tensor):
            return value.dtype
        if isinstance(value, (list, tuple)):
            found = first_dtype(list(value))
            if found is not None:
                return found
    return None


def _holds_tensor(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and first_dtype(list(value)) is not None


def _element(who: str, value: Any, target: Optional[str], index: int) -> Any:
    value = graph_value(value)
    if isinstance(value, opsdk.Tensor):
        if target is not None and value.dtype != target:
            raise OpsdkError(f"{who}: element {index} is tensor '{value.name}' of dtype "
                             f"{value.dtype}, the list's tensors are {target} (cast it first)")
        return value
    if _holds_tensor(value):
        return _ops.stack(elements(who, value, target))
    if target is None:
        return opsdk.constant(np.array(default_array(value), order="C"))
    return opsdk.constant(np.array(_exactly(who, value, target, index), order="C"))


def _exactly(who: str, value: Any, target: str, index: int) -> np.ndarray:
    """`value` as `target`, refused where that changes it (TF refuses such a conversion)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        raise OpsdkError(f"{who}: element {index} ({value!r}) is not a number or a list of "
                         "numbers") from None
    if array.dtype.kind not in "biuf":
        raise OpsdkError(f"{who}: element {index} ({value!r}) is not a number or a list of "
                         "numbers")
    kind = np.dtype(target).kind
    if kind == "b":
        fits = array.dtype.kind == "b"
    elif kind in "iu" and array.dtype.kind in "iuf":
        info = np.iinfo(target)
        with np.errstate(invalid="ignore"):
            fits = bool(np.all((array >= info.min) & (array <= info.max)
                               & (np.trunc(array) == array)))
    else:
        fits = True  # a number into a float dtype: rounded, as TF converts it
    if not fits:
        raise OpsdkError(f"{who}: element {index} ({value!r}) is not a value of dtype {target}, "
                         "the dtype of the list's tensors")
    return array.astype(target)
