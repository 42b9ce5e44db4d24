"""TF1's run-time assertions: `tf.Assert` and the `tf.assert_*` comparisons (also under
`tf.debugging`).

`Assert(condition, data)` is an op that, when it runs, raises `tf.errors.InvalidArgumentError`
("assertion failed: ..." with `data` written out) if `condition` is false, as TF's does; make
other ops depend on it with `tf.control_dependencies`, or fetch it. It is a `py_func` node: it
runs in the process that built the graph (as every py_func of opsdk.v1 does). The comparisons
build `Assert(reduce_all(x OP y), [message, x, y])`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from opsdk import ops as _ops
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import math_ops as _m
from opsdk.v1.args import is_tensor
from opsdk.v1.composed import reduce_all
from opsdk.v1.errors import InvalidArgumentError
from opsdk.v1.script_ops import py_func
from opsdk.v1.tensors import convert_to_tensor as _t


def Assert(condition: Any, data: Sequence[Any], summarize: Optional[int] = None,  # noqa: N802
           name: Optional[str] = None) -> Any:
    """An op that raises InvalidArgumentError when `condition` (a bool scalar) is false,
    writing out `data` (tensors, and Python values as they are; at most `summarize` entries of
    each tensor, 3 by default)."""
    if not isinstance(data, (list, tuple)):
        raise OpsdkError(f"Assert: data must be a list of tensors and values, got {data!r}")
    cond = _t(condition)
    if cond.dtype != "bool" or (cond.shape is not None and len(cond.shape) != 0):
        raise OpsdkError(f"Assert: condition '{cond.name}' must be a bool scalar, got "
                         f"{cond.dtype} of shape {cond.shape}")
    shown = 3 if summarize is None else int(summarize)
    slots = [is_tensor(d) for d in data]
    tensors = [_t(d) for d, s in zip(data, slots) if s]
    literals = [d for d, s in zip(data, slots) if not s]

    def check(ok: np.ndarray, *values: np.ndarray) -> np.ndarray:
        if not bool(ok):
            it, lit = iter(values), iter(literals)
            parts = [_summary(next(it), shown) if s else str(next(lit)) for s in slots]
            raise InvalidArgumentError(None, None, "assertion failed: " + " ".join(
                f"[{p}]" for p in parts))
        return np.bool_(True)
    check.__qualname__ = "Assert"
    return py_func(check, [cond, *tensors], "bool", stateful=True,
                   name=name or "Assert").op


def _summary(value: np.ndarray, shown: int) -> str:
    flat = np.asarray(value).reshape(-1)
    if flat.dtype.kind in "SO":
        flat = np.asarray([v.decode() if isinstance(v, bytes) else v for v in flat])
    if shown >= 0 and flat.size > shown:
        return " ".join(map(str, flat[:shown])) + "..."
    return " ".join(map(str, flat))


def _compare(who: str, op: Any, x: Any, y: Any, data: Any, summarize: Optional[int],
             message: Optional[str], name: Optional[str]) -> Any:
    x, y = _t(x), _t(y)
    if y.dtype != x.dtype:  # a Python number against a float tensor
        y = _ops.cast(y, dtype=x.dtype)
    if data is None:
        data = [message or "", f"Condition x {who} y did not hold element-wise:",
                f"x (name = {x.name}) = ", x, f"y (name = {y.name}) = ", y]
    elif message:
        data = [message, *data]
    return Assert(reduce_all(op(x, y)), data, summarize, name=name)


def _comparison(who: str, op: Any, doc: str) -> Any:
    def check(x: Any, y: Any, data: Any = None, summarize: Optional[int] = None,
              message: Optional[str] = None, name: Optional[str] = None) -> Any:
        return _compare(who, op, x, y, data, summarize, message, name or check.__name__)
    check.__name__ = check.__qualname__ = f"assert_{_NAMES[who]}"
    check.__doc__ = f"An Assert that every x {doc} y (broadcast), as TF's tf.{check.__name__}."
    return check


def _sign(who: str, op: Any, doc: str) -> Any:
    def check(x: Any, data: Any = None, summarize: Optional[int] = None,
              message: Optional[str] = None, name: Optional[str] = None) -> Any:
        x = _t(x)
        if data is None:
            data = [message or "", f"Condition x {doc} 0 did not hold element-wise:",
                    f"x (name = {x.name}) = ", x]
            message = None
        return _compare(doc, op, x, _ops.zeros_like(x), data, summarize, message, name or who)
    check.__name__ = check.__qualname__ = who
    check.__doc__ = f"An Assert that every entry of x is {doc} 0, as TF's tf.{who}."
    return check


_NAMES = {"==": "equal", "!=": "none_equal", "<": "less", "<=": "less_equal", ">": "greater",
          ">=": "greater_equal"}
_OPS = {"==": _m.equal, "!=": _m.not_equal, "<": _m.less, "<=": _m.less_equal,
        ">": _m.greater, ">=": _m.greater_equal}
_WORDS = {"==": "equals", "!=": "differs from", "<": "is less than", "<=": "is at most",
          ">": "is greater than", ">=": "is at least"}
COMPARISONS = {f"assert_{_NAMES[k]}": _comparison(k, _OPS[k], _WORDS[k]) for k in _NAMES}
SIGNS = {"assert_positive": _sign("assert_positive", _m.greater, ">"),
         "assert_negative": _sign("assert_negative", _m.less, "<"),
         "assert_non_negative": _sign("assert_non_negative", _m.greater_equal, ">="),
         "assert_non_positive": _sign("assert_non_positive", _m.less_equal, "<=")}
NAMES = {"Assert": Assert, **COMPARISONS, **SIGNS}
