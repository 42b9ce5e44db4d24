"""TF1's Python-function ops: `tf.py_func`, `tf.numpy_function` and `tf.py_function`, over
opsdk's `py_func` node (opsdk/runtime/frontend/py_func.py).

The function runs when the step runs, in the process that built the graph, on NumPy arrays; its
results are converted to `Tout` as TensorFlow converts them. `tf.py_function` hands it arrays
that also answer `.numpy()`, as TensorFlow's eager tensors do; TF ops called inside it build
graph nodes instead of computing (compute with NumPy there). No gradient passes through any of
them (TensorFlow registers none either).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from opsdk.runtime.frontend.py_func import py_func as _py_func
from opsdk.v1.dtypes import as_dtype
from opsdk.v1.tensors import convert_to_tensor as _t

__all__ = ["py_func", "numpy_function", "py_function"]


def _tout(Tout: Any) -> Any:
    if isinstance(Tout, (list, tuple)):
        return [as_dtype(t).name for t in Tout]
    return as_dtype(Tout).name


def _inputs(inp: Any) -> list:
    return [_t(v) for v in (inp if isinstance(inp, (list, tuple)) else [inp])]


def py_func(func: Callable[..., Any], inp: Sequence[Any], Tout: Any, stateful: bool = True,
            name: Optional[str] = None) -> Any:
    """func(*arrays) as a node; one tensor for a single dtype `Tout`, a list for a list."""
    return _py_func(func, _inputs(inp), _tout(Tout), stateful=stateful, name=name)


def numpy_function(func: Callable[..., Any], inp: Sequence[Any], Tout: Any,
                   name: Optional[str] = None) -> Any:
    """`py_func` under its TF 1.14 name."""
    return py_func(func, inp, Tout, name=name)


class _EagerValue(np.ndarray):
    """An array that answers `.numpy()`, as the eager tensors `tf.py_function` hands over."""

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


def py_function(func: Callable[..., Any], inp: Sequence[Any], Tout: Any,
                name: Optional[str] = None) -> Any:
    """`py_func` whose function gets arrays with `.numpy()`."""
    def call(*arrays: np.ndarray) -> Any:
        return func(*(np.asarray(a).view(_EagerValue) for a in arrays))
    call.__qualname__ = getattr(func, "__qualname__", "py_function")
    return py_func(call, inp, Tout, name=name)
