"""Attr values: checking declared defaults and normalising the attrs of a call.

One set of rules serves both the parser (a default in YAML) and the runtime (`normalize_attrs`),
so a value the declaration accepts is exactly a value a call accepts. List attrs normalise to
tuples, so attrs stay hashable (plan caches and common-subexpression elimination key on them).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Mapping, Optional, Sequence

from .diagnostics import as_number, did_you_mean
from .errors import OpError
from .located_yaml import YNode, YScalar, YSeq
from .shapes import eval_expr, expr_names
from .spec import AttrSpec, OpSpec, Requirement

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1
_KIND_WORDS = {"int": "an int", "float": "a number", "bool": "true or false", "str": "a string",
               "list(int)": "a list of ints", "list(float)": "a list of numbers"}


def _numpy() -> Any:
    """NumPy if something already imported it, else None: a value can only be a NumPy scalar or
    array once NumPy is loaded, and the CLI (parsing declarations) should not pay for importing it."""
    return sys.modules.get("numpy")


def _scalar(type_: str, value: Any) -> tuple[Any, Optional[str]]:
    """(value as the Python type, None) or (None, problem) for one scalar of an attr type."""
    np = _numpy()
    ints, floats, bools = ((int, np.integer), (int, float, np.integer, np.floating),
                           (bool, np.bool_)) if np else (int, (int, float), bool)
    is_bool = isinstance(value, bools)
    if type_ == "int":
        if isinstance(value, ints) and not is_bool:
            value = int(value)
            if not INT64_MIN <= value <= INT64_MAX:  # what a compiled kernel's int64_t holds
                return None, "must be an int in int64's range (-2**63 .. 2**63 - 1)"
            return value, None
    elif type_ == "float":
        if isinstance(value, floats) and not is_bool:
            return _float_attr(value)
    elif type_ == "bool":
        if is_bool:
            return bool(value), None
    elif isinstance(value, str):
        return value, None
    return None, f"must be {_KIND_WORDS[type_]}"


def _float_attr(value: Any) -> tuple[Any, Optional[str]]:
    """A float attr's value: a float, except an integer that float64 cannot hold exactly, which
    stays a Python int (fill's value 2**63 - 1 into int64 must not round to 2**63; a compiled
    kernel still receives the nearest double)."""
    if isinstance(value, float):
        return value, None
    try:
        as_float = float(value)
    except OverflowError:
        return None, "must be a number within float64's range"
    if isinstance(value, int) or (hasattr(value, "dtype") and value.dtype.kind in "iu"):
        exact = int(value)
        return (exact if as_float != exact else as_float), None
    return as_float, None


def coerce_attr_value(type_: str, value: Any) -> tuple[Any, Optional[str]]:
    """A Python value (incl. NumPy scalars and 1-D arrays) as the attr type, or a problem phrase."""
    if not type_.startswith("list("):
        return _scalar(type_, value)
    np = _numpy()
    if np is not None and isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        return None, f"must be {_KIND_WORDS[type_]}"
    items = []
    for item in value:
        converted, problem = _scalar(type_[5:-1], item)
        if problem:
            return None, (f"items {problem}" if "range" in problem
                          else f"must be {_KIND_WORDS[type_]}")
        items.append(converted)
    return tuple(items), None


def yaml_attr_value(node: YNode, type_: str) -> tuple[Any, Optional[str]]:
    """A YAML node as an attr value; floats may be written `1e-4` (YAML 1.1 reads a string)."""
    if isinstance(node, YSeq):
        raw: Any = [_yaml_scalar(item, type_[5:-1]) for item in node.items]
    elif isinstance(node, YScalar):
        raw = _yaml_scalar(node, type_)
    else:
        return None, f"must be {_KIND_WORDS[type_]}"
    if any(isinstance(v, float) and not math.isfinite(v) for v in (raw if isinstance(raw, list) else [raw])):
        return None, "must be a finite number (.inf and .nan have no literal in the generated code)"
    return coerce_attr_value(type_, raw)


def _yaml_scalar(node: YNode, type_: str) -> Any:
    if not isinstance(node, YScalar):
        return node
    if type_ == "float" and isinstance(node.value, str):
        number = as_number(node)
        return node.value if number is None else number
    return node.value


def attr_value_problem(attr: AttrSpec, value: Any) -> Optional[str]:
    """Bounds and choices of an already-typed value: a phrase like 'must be >= 1', or None."""
    items = value if isinstance(value, tuple) else (value,)
    which = "items " if isinstance(value, tuple) else ""
    if attr.min is not None and any(v < attr.min for v in items):
        return f"{which}must be >= {attr.min:g}"
    if attr.max is not None and any(v > attr.max for v in items):
        return f"{which}must be <= {attr.max:g}"
    if attr.choices is not None and value not in attr.choices:
        return "must be one of " + ", ".join(str(c) for c in attr.choices)
    return None


def _shown(value: Any) -> str:
    np = _numpy()
    text = repr(value.tolist()) if np is not None and isinstance(value, np.ndarray) else repr(
        value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def normalize_attrs(spec: OpSpec, attrs: Mapping[str, Any],
                    inputs: Optional[Sequence[Any] | Mapping[str, Any]] = None) -> dict[str, Any]:
    """The attrs of a call, checked, with defaults filled, in declaration order.

    Unbound type attrs (`dtype=` of zeros, `DstT` of cast) are included as dtype names. The length
    attr of a list input (N) is taken from `inputs` when given (a sequence in input order or a
    mapping by name) and must agree with an explicit N. Raises OpError "<op>: ...".

    >>> normalize_attrs(spec, {"k": np.int64(3)})   # doctest: +SKIP
    {'k': 3, 'mode': 'sum'}
    """
    declared = {a.name: a for a in spec.attrs}
    unbound = {t.name: t for t in spec.unbound_type_attrs}
    given: dict[str, Any] = {}
    for key, value in attrs.items():
        if key in declared:
            given[key] = _checked(spec, declared[key], value)
        elif key in unbound:
            given[key] = _checked_dtype(spec, unbound[key], value)
        else:
            _unknown(spec, key)
    given.update(_list_lengths(spec, inputs, given))
    result: dict[str, Any] = {}
    for attr in spec.attrs:
        if attr.name in given:
            result[attr.name] = given[attr.name]
        elif not attr.required:
            result[attr.name] = attr.default
        else:
            raise OpError(f"{spec.name}: missing attr '{attr.name}' ({_KIND_WORDS[attr.type]})")
    for ta in unbound.values():
        if ta.name in given:
            result[ta.name] = given[ta.name]
        elif ta.default is not None:
            result[ta.name] = ta.default
        else:
            raise OpError(f"{spec.name}: missing type attr '{ta.name}' (one of {', '.join(ta.allowed)})")
    broken = unmet_requirement(spec, result)
    if broken is not None:
        values = ", ".join(f"{n}={_shown(result[n])}" for n in sorted(expr_names(broken.expr)))
        raise OpError(f"{spec.name}: attrs must meet `{broken.text}` (requires: at {broken.location}), "
                      f"got {values}")
    return result


def unmet_requirement(spec: OpSpec, attrs: Mapping[str, Any]) -> Optional[Requirement]:
    """The first of the op's `requires:` conditions that `attrs` (all of them, defaults filled)
    break, or None."""
    for requirement in spec.requires:
        if eval_expr(requirement.expr, attrs) is False:
            return requirement
    return None


def _checked(spec: OpSpec, attr: AttrSpec, value: Any) -> Any:
    converted, problem = coerce_attr_value(attr.type, value)
    if problem is None:
        problem = attr_value_problem(attr, converted)
    if problem:
        raise OpError(f"{spec.name}: attr '{attr.name}' {problem}, got {_shown(value)}")
    return converted


def _checked_dtype(spec: OpSpec, ta, value: Any) -> str:
    name = dtype_name(value)
    if name not in ta.allowed:
        raise OpError(f"{spec.name}: type attr '{ta.name}' must be one of {', '.join(ta.allowed)}, "
                      f"got {_shown(value) if name is None else name}")
    return name


def dtype_name(value: Any) -> Optional[str]:
    """'float32' from 'float32', np.float32 or np.dtype('float32'); None when it is no dtype."""
    if isinstance(value, str):
        return value
    import numpy as np  # a dtype object or type: NumPy is loaded already

    try:
        return np.dtype(value).name
    except (TypeError, ValueError):
        return None


def _unknown(spec: OpSpec, key: str) -> None:
    bound = next((t for t in spec.type_attrs if t.name == key), None)
    if bound is not None:
        carrier = next(t.name for t in spec.inputs if t.dtype == key)
        raise OpError(f"{spec.name}: type attr '{key}' comes from the dtype of input '{carrier}'; "
                      f"don't pass it")
    names = [a.name for a in spec.attrs] + [t.name for t in spec.unbound_type_attrs]
    known = f"; its attrs are {', '.join(names)}" if names else "; it has no attrs"
    raise OpError(f"{spec.name}: unknown attr '{key}'{did_you_mean(key, names)}{known}")


def _list_lengths(spec: OpSpec, inputs, given: dict[str, Any]) -> dict[str, int]:
    """N of each list input from the length of the list passed, checked against an explicit N."""
    if inputs is None:
        return {}
    found: dict[str, tuple[str, int]] = {}
    for index, tensor in enumerate(spec.inputs):
        if not tensor.is_list:
            continue
        value = inputs.get(tensor.name) if isinstance(inputs, Mapping) else (
            inputs[index] if index < len(inputs) else None)
        if not isinstance(value, (list, tuple)):
            continue
        n, other = len(value), found.get(tensor.list_len)
        if other is not None and other[1] != n:
            raise OpError(f"{spec.name}: inputs '{other[0]}' and '{tensor.name}' must hold the same number "
                          f"of tensors ({tensor.list_len}), got {other[1]} and {n}")
        if tensor.list_len in given and given[tensor.list_len] != n:
            raise OpError(f"{spec.name}: attr '{tensor.list_len}' is {given[tensor.list_len]} but input "
                          f"'{tensor.name}' holds {n} tensors")
        found[tensor.list_len] = (tensor.name, n)
    result = {name: n for name, (_, n) in found.items()}
    for name, n in result.items():
        problem = attr_value_problem(spec.attr(name), n)
        if problem:
            raise OpError(f"{spec.name}: list input of length {n}: '{name}' {problem}")
    return result
