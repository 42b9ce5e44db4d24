"""TF1's Python-function ops: `tf.py_func`, `tf.numpy_function` and `tf.py_function`, over
opsdk's `py_func` node (opsdk/runtime/frontend/py_func.py), and `tf.print` on the same node.

The function runs when the step runs, in the process that built the graph, on NumPy arrays; its
results are converted to `Tout` as TensorFlow converts them. `tf.py_function` hands it arrays
that also answer `.numpy()`, as TensorFlow's eager tensors do; TF ops called inside it build
graph nodes instead of computing (compute with NumPy there). No gradient passes through any of
them (TensorFlow registers none either).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Sequence

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.py_func import py_func as _py_func, py_func_node
from opsdk.v1 import graph_state
from opsdk.v1.dtypes import as_dtype
from opsdk.v1.tensors import convert_to_tensor as _t

__all__ = ["py_func", "numpy_function", "py_function", "print_"]


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


def print_(*inputs: Any, output_stream: Any = sys.stderr, summarize: int = 3, sep: str = " ",
           end: str = "\n", name: Optional[str] = None) -> Any:
    """TF's `tf.print`: an op that writes its inputs (tensors as NumPy prints them, at most
    `summarize` items from each end of every axis, -1 all; anything else as `str` gives it)
    joined by `sep`, then `end`, to `output_stream` (sys.stderr, sys.stdout, an object with
    `write`, or "file://path" to append to) whenever it runs: fetch it, or make other ops depend
    on it with `tf.control_dependencies`, as in TF1."""
    if not (isinstance(summarize, int) and summarize >= -1):
        raise OpsdkError(f"tf.print: summarize must be an int >= -1, not {summarize!r}")
    if not (hasattr(output_stream, "write") or (
            isinstance(output_stream, str) and output_stream.startswith("file://"))):
        raise OpsdkError("tf.print: output_stream must be sys.stderr, sys.stdout, an object "
                         f"with write() or 'file://path', not {output_stream!r}")
    slots = [i for i, v in enumerate(inputs) if _is_graph_value(v)]
    tensors = [_t(inputs[i]) for i in slots]
    # string tensors travel as their bytes; the fetch decoder (opsdk/v1/strings.py) reads them
    decoders = [graph_state.table(t.graph, "decoders").get(t.name) for t in tensors]

    def show(*values: np.ndarray) -> None:
        parts = [str(v) for v in inputs]
        for i, value, decode in zip(slots, values, decoders):
            parts[i] = (_text(value, summarize) if decode is None
                        else _strings_text(decode(value), summarize))
        line = sep.join(parts) + end
        if isinstance(output_stream, str):
            with open(output_stream[len("file://"):], "a", encoding="utf-8") as f:
                f.write(line)
        else:
            output_stream.write(line)
            getattr(output_stream, "flush", lambda: None)()
    return py_func_node(show, tensors, [], name=name or "PrintV2")


def _strings_text(value: Any, summarize: int) -> str:
    """A string tensor's value as TF's print writes it: "text", or ["a" "b"] (at most the
    first and last `summarize` items, `...` between)."""
    def quoted(b: bytes) -> str:
        return '"' + b.decode("utf-8", errors="replace") + '"'
    if isinstance(value, bytes):
        return quoted(value)
    items = [quoted(b) for b in np.asarray(value).reshape(-1)]
    if 0 <= summarize and len(items) > 2 * summarize:
        items = items[:summarize] + ["..."] + (items[-summarize:] if summarize else [])
    return "[" + " ".join(items) + "]"


def _is_graph_value(value: Any) -> bool:
    return isinstance(value, opsdk.Tensor) or hasattr(value, "_as_graph_element")


def _text(value: np.ndarray, summarize: int) -> str:
    """A tensor's value as TF's print writes it: nested brackets, numbers unpadded (float32 to 9
    significant digits, float64 the shortest text that reads back), bools as 1 and 0, and only the
    first and last `summarize` items of a longer axis, `...` between."""
    array = np.asarray(value)
    digits = 9 if array.dtype == np.float32 else 5

    def number(v: Any) -> str:
        if array.dtype == np.float64:  # the shortest text that reads back, as TF's
            text = repr(float(v))
            return text[:-2] if text.endswith(".0") else text
        return f"{v:.{digits}g}"
    formatter = {"float_kind": number, "bool": lambda v: str(int(v)), "int": str}
    if array.ndim == 0:
        return formatter["bool"](array) if array.dtype == bool else (
            formatter["float_kind"](array) if array.dtype.kind == "f" else str(array))
    limit = sys.maxsize if summarize < 0 else max(2 * summarize, 1)
    return np.array2string(array, threshold=limit, edgeitems=max(summarize, 1), separator=" ",
                           formatter=formatter, max_line_width=sys.maxsize)
