"""TF1's ops on strings: `tf.equal` and `tf.not_equal` between strings, `tf.string_join`,
`tf.string_split`, `tf.substr`, `tf.string_to_number`, `tf.as_string`, `tf.string_strip`,
`tf.regex_replace`, `tf.reduce_join`, and under `tf.strings` their names and `length`, `lower`,
`upper`, `regex_full_match`, `to_number`.

Strings travel as opsdk/v1/strings.py keeps them (a string's bytes; several strings as rows of
bytes, zero-padded, along a last axis), so each op here is a py_func node that turns its string
inputs into NumPy arrays of bytes, computes with NumPy's broadcasting, and gives its strings
back in that form (fetched as bytes). Like every py_func it runs in the process that built the
graph, and passes no gradient (TF's string ops have none either).
"""

from __future__ import annotations

import builtins
import re
from typing import Any, Callable, Optional, Sequence

import numpy as np

import opsdk
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.frontend.py_func import py_func_node
from opsdk.v1 import dtypes, strings
from opsdk.v1 import session as _session
from opsdk.v1.tensors import convert_to_tensor as _t


def _is_text(value: Any) -> bool:
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, opsdk.Tensor):
        return strings.is_string(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        flat = np.asarray(value, dtype=object).reshape(-1)
        return bool(flat.size) and all(isinstance(v, (str, bytes)) for v in flat)
    return False


def _string_tensor(who: str, value: Any) -> tuple[Any, int]:
    """(the tensor of strings, their rank)."""
    if isinstance(value, opsdk.Tensor):
        if not strings.is_string(value):
            raise OpsdkError(f"{who}: '{value.name}' is {value.dtype}, not strings")
        t = value
    elif isinstance(value, (str, bytes)):
        t = strings.string_constant(value)
    else:
        array = np.asarray(value, dtype=object)
        if array.ndim > 1:
            rows = strings.byte_rows_of(array)
            t = opsdk.constant(rows)
            _session.register_decoder(t, strings._decode_list)
        else:
            t = strings.string_constant(list(array))
    scalar = _decoder(t) is strings._decode_scalar
    rank = 0 if scalar else (None if t.shape is None else len(t.shape) - 1)
    return t, rank


def _decoder(t: Any) -> Any:
    from opsdk.v1 import graph_state

    return graph_state.table(t.graph, "decoders").get(t.name)


def _texts(array: np.ndarray, rank: Optional[int]) -> np.ndarray:
    """A string input's value as an object array of bytes of the strings' shape."""
    if rank == 0:
        out = np.empty((), dtype=object)
        out[()] = strings._decode_scalar(array)
        return out
    return strings._decode_list(array)


def _apply(who: str, fn: Callable[..., Any], inputs: Sequence[tuple[Any, Optional[int]]],
           out_kinds: Sequence[str], out_ranks: Sequence[Optional[int]],
           name: Optional[str]) -> list:
    """fn over the inputs' strings (object arrays; other inputs as arrays) as a py_func node;
    outputs of kind "string" (object arrays of bytes) kept as strings are."""
    tensors = [t for t, _ in inputs]
    ranks = [r for _, r in inputs]

    def run(*arrays: np.ndarray) -> list:
        values = [_texts(a, r) if r != -1 else a for a, r in zip(arrays, ranks)]
        results = fn(*values)
        results = results if isinstance(results, (list, tuple)) else [results]
        out = []
        for value, kind in zip(results, out_kinds):
            if kind == "string":
                out.append(strings.byte_rows_of(value))
            else:
                out.append(np.asarray(value, dtype=kind))
        return out
    kinds = ["uint8" if k == "string" else k for k in out_kinds]
    outs = list(py_func_node(run, tensors, kinds, name=name or who).outputs)
    for out, kind, rank in zip(outs, out_kinds, out_ranks):
        if kind == "string":
            if rank is not None:
                out.set_shape([None] * (rank + 1))
            _session.register_decoder(out, strings._decode_scalar if rank == 0
                                      else strings._decode_list)
        elif rank is not None:
            out.set_shape([None] * rank)
    return outs


def _broadcast_rank(*ranks: Optional[int]) -> Optional[int]:
    return None if any(r is None for r in ranks) else max(ranks)


def _other(value: Any) -> tuple[Any, int]:
    """A non-string input: the tensor, and -1 (passed as an array)."""
    return _t(value), -1


# ------------------------------------------------------------------------------ comparisons
def _compare(who: str, x: Any, y: Any, equal: bool, name: Optional[str]) -> Any:
    a, b = _string_tensor(who, x), _string_tensor(who, y)

    def compare(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        try:
            same = np.equal(p, q)
        except ValueError:
            raise ValueError(f"{who}: strings of shapes {list(p.shape)} and {list(q.shape)} do "
                             "not broadcast") from None
        return same if equal else np.logical_not(same)
    return _apply(who, compare, [a, b], ["bool"], [_broadcast_rank(a[1], b[1])], name)[0]


def string_aware(numeric: Callable[..., Any], equal: bool) -> Callable[..., Any]:
    """tf.equal / tf.not_equal: strings compared as strings, anything else by `numeric`."""
    def compare(x: Any, y: Any, name: Optional[str] = None) -> Any:
        if _is_text(x) or _is_text(y):
            return _compare("equal" if equal else "not_equal", x, y, equal, name)
        return numeric(x, y, name=name)
    compare.__name__ = numeric.__name__ if hasattr(numeric, "__name__") else "compare"
    compare.__doc__ = ("x == y elementwise" if equal else "x != y elementwise") + \
        ", with NumPy broadcasting; strings are compared as strings."
    return compare


# ------------------------------------------------------------------------------- the ops
def string_join(inputs: Sequence[Any], separator: str = "", name: Optional[str] = None) -> Any:
    """The strings of inputs joined elementwise (broadcast) with separator."""
    if not inputs:
        raise OpsdkError("string_join: give at least one input")
    parts = [_string_tensor("string_join", v) for v in inputs]
    sep = strings._bytes(separator)

    def join(*values: np.ndarray) -> np.ndarray:
        shaped = np.broadcast_arrays(*values)
        out = np.empty(shaped[0].shape, dtype=object)
        for index in np.ndindex(out.shape):
            out[index] = sep.join(v[index] for v in shaped)
        return out
    return _apply("string_join", join, parts, ["string"],
                  [_broadcast_rank(*(r for _, r in parts))], name)[0]


def string_split(source: Any, delimiter: Any = " ", skip_empty: bool = True,
                 sep: Any = None, name: Optional[str] = None) -> Any:
    """A SparseTensor of the pieces of each string of the vector source, split at any
    character of delimiter (each character a delimiter, as TF1's); empty pieces dropped when
    skip_empty. An empty delimiter splits into single characters."""
    from opsdk.v1.sparse import SparseTensor

    delimiter = sep if sep is not None else delimiter
    text, rank = _string_tensor("string_split", source)
    if rank != 1:
        raise OpsdkError(f"string_split: source must be a vector of strings, has rank {rank}")
    chars = strings._bytes(delimiter)

    def split(values: np.ndarray) -> list:
        pieces = []
        for s in values:
            if not chars:
                items = [bytes([c]) for c in s]
            else:
                items = re.split(b"[" + re.escape(chars) + b"]", s) if s else [b""]
                if skip_empty:
                    items = [p for p in items if p]
            pieces.append(items)
        indices = [[r, k] for r, items in enumerate(pieces) for k in range(len(items))]
        flat = [p for items in pieces for p in items]
        longest = max((len(items) for items in pieces), default=0)
        return [np.asarray(indices, np.int64).reshape(-1, 2), np.asarray(flat, dtype=object),
                np.asarray([len(pieces), longest], np.int64)]
    indices, values, shape = _apply("string_split", split, [(text, rank)],
                                    ["int64", "string", "int64"], [2, 1, 1], name)
    indices.set_shape([None, 2])
    return SparseTensor(indices, values, shape)


def substr(input: Any, pos: Any, len: Any, name: Optional[str] = None,  # noqa: A002
           unit: str = "BYTE") -> Any:
    """The len bytes of each string from pos (both broadcast against the strings; a negative
    pos counts from the end, as TF 1.13+'s)."""
    if unit != "BYTE":
        raise OpsdkError("substr: opsdk.v1 takes unit='BYTE' only")
    text = _string_tensor("substr", input)
    where, size = _other(pos), _other(len)

    def cut(values: np.ndarray, p: np.ndarray, n: np.ndarray) -> np.ndarray:
        v, p, n = np.broadcast_arrays(values, p, n)
        out = np.empty(v.shape, dtype=object)
        for index in np.ndindex(out.shape):
            s, start = v[index], int(p[index])
            start = start + builtins.len(s) if start < 0 else start
            if not 0 <= start <= builtins.len(s):
                raise ValueError(f"substr: pos {int(p[index])} is out of range for a string of "
                                 f"{builtins.len(s)} bytes")
            out[index] = s[start:start + max(int(n[index]), 0)]
        return out
    return _apply("substr", cut, [text, where, size], ["string"], [text[1]], name)[0]


def string_to_number(string_tensor: Any, out_type: Any = "float32",
                     name: Optional[str] = None) -> Any:
    """Each string read as a number of out_type (float32, float64, int32, int64)."""
    text = _string_tensor("string_to_number", string_tensor)
    kind = dtypes.name_of(out_type)
    if kind not in ("float32", "float64", "int32", "int64"):
        raise OpsdkError(f"string_to_number: out_type {kind}; give float32, float64, int32 or "
                         "int64")

    def number(values: np.ndarray) -> np.ndarray:
        out = np.empty(values.shape, dtype=kind)
        for index in np.ndindex(values.shape):
            s = values[index].decode("utf-8", errors="replace").strip()
            try:
                out[index] = float(s) if kind.startswith("float") else int(s)
            except ValueError:
                raise ValueError(f"string_to_number: StringToNumberOp could not correctly "
                                 f"convert string: {s}") from None
        return out
    return _apply("string_to_number", number, [text], [kind], [text[1]], name)[0]


def as_string(input: Any, precision: int = -1, scientific: bool = False,  # noqa: A002
              shortest: bool = False, width: int = -1, fill: str = "",
              name: Optional[str] = None) -> Any:
    """Each number as a string (floats with 6 decimals by default, as TF's)."""
    x = _t(input)
    kind = np.dtype(x.dtype)

    def text(values: np.ndarray) -> np.ndarray:
        out = np.empty(values.shape, dtype=object)
        for index in np.ndindex(values.shape):
            v = values[index]
            if kind.kind == "f":
                spec = ("e" if scientific else ("g" if shortest else "f"))
                digits = 6 if precision < 0 else precision
                s = format(float(v), f".{digits}{spec}") if not shortest else repr(float(v))
            elif kind.kind == "b":
                s = "true" if v else "false"
            else:
                s = str(int(v))
            if width > 0:
                s = s.rjust(width, fill or " ")
            out[index] = s.encode()
        return out
    rank = None if x.shape is None else len(x.shape)
    return _apply("as_string", text, [(x, -1)], ["string"], [rank], name)[0]


def _elementwise(who: str, fn: Callable[[bytes], Any], kind: str) -> Callable[..., Any]:
    def op(input: Any, name: Optional[str] = None, **unused: Any) -> Any:  # noqa: A002
        text = _string_tensor(who, input)

        def each(values: np.ndarray) -> np.ndarray:
            out = np.empty(values.shape, dtype=object if kind == "string" else kind)
            for index in np.ndindex(values.shape):
                out[index] = fn(values[index])
            return out
        return _apply(who, each, [text], [kind], [text[1]], name)[0]
    op.__name__ = who
    return op


string_strip = _elementwise("string_strip", lambda s: s.strip(), "string")
length = _elementwise("length", lambda s: builtins.len(s), "int32")
lower = _elementwise("lower", lambda s: s.lower(), "string")
upper = _elementwise("upper", lambda s: s.upper(), "string")


def regex_replace(input: Any, pattern: str, rewrite: str, replace_global: bool = True,  # noqa: A002
                  name: Optional[str] = None) -> Any:
    """Each string with the matches of pattern replaced by rewrite (`\\1` for groups)."""
    compiled = re.compile(strings._bytes(pattern))
    repl = strings._bytes(rewrite)
    return _elementwise("regex_replace", lambda s: compiled.sub(repl, s, count=0 if
                                                                replace_global else 1),
                        "string")(input, name=name)


def regex_full_match(input: Any, pattern: str, name: Optional[str] = None) -> Any:  # noqa: A002
    compiled = re.compile(strings._bytes(pattern))
    return _elementwise("regex_full_match", lambda s: compiled.fullmatch(s) is not None,
                        "bool")(input, name=name)


def reduce_join(inputs: Any, axis: Any = None, keep_dims: bool = False, separator: str = "",
                name: Optional[str] = None, reduction_indices: Any = None,
                keepdims: Any = None) -> Any:
    """The strings joined along axis (all when None) with separator."""
    text = _string_tensor("reduce_join", inputs)
    axis = reduction_indices if axis is None else axis
    keep = bool(keep_dims if keepdims is None else keepdims)
    sep = strings._bytes(separator)
    rank = text[1]
    if rank is None:
        raise OpsdkError("reduce_join: the strings' rank must be known")
    axes = tuple(range(rank)) if axis is None else tuple(
        a % rank for a in np.atleast_1d(axis))

    def join(values: np.ndarray) -> np.ndarray:
        moved = np.moveaxis(values, axes, range(-len(axes), 0)) if axes else values
        lead = moved.shape[:moved.ndim - len(axes)]
        flat = moved.reshape(lead + (-1,))
        out = np.empty(lead, dtype=object)
        for index in np.ndindex(lead):
            out[index] = sep.join(flat[index])
        if keep:
            out = out.reshape([1 if k in axes else values.shape[k] for k in range(rank)])
        return out
    out_rank = rank if keep else rank - len(axes)
    return _apply("reduce_join", join, [text], ["string"], [out_rank], name)[0]


TOP_LEVEL = {"string_join": string_join, "string_split": string_split, "substr": substr,
             "string_to_number": string_to_number, "as_string": as_string,
             "string_strip": string_strip, "regex_replace": regex_replace,
             "reduce_join": reduce_join}
STRINGS = {"join": string_join, "substr": substr, "to_number": string_to_number,
           "as_string": as_string, "strip": string_strip, "regex_replace": regex_replace,
           "regex_full_match": regex_full_match, "reduce_join": reduce_join, "length": length,
           "lower": lower, "upper": upper}


# ------------------------------------------------------ structural ops that take strings too
# reshape, expand_dims, squeeze, transpose, concat, stack and gather keep working on numbers as
# before (`numeric`); given strings they move whole strings (a py_func over arrays of bytes), where
# the numeric op would move the strings' bytes.
def _static_sizes(who: str, shape: Any) -> list:
    if isinstance(shape, (opsdk.Tensor, opsdk.Variable)):
        raise OpsdkError(f"{who}: for strings, give the shape as a list of ints (opsdk.v1)")
    return [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]


def _strings_or(numeric: Callable[..., Any], strings_fn: Callable[..., Any],
                first: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if _is_text_like(first(*args, **kwargs)):
            return strings_fn(*args, **kwargs)
        return numeric(*args, **kwargs)
    call.__name__ = getattr(numeric, "__name__", "op")
    call.__doc__ = (numeric.__doc__ or "").rstrip() + "\n\nStrings are moved as whole strings."
    return call


def _is_text_like(value: Any) -> bool:
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (str, bytes)):
        return any(isinstance(v, opsdk.Tensor) and strings.is_string(v) for v in value)
    return isinstance(value, opsdk.Tensor) and strings.is_string(value)


def _reshape_strings(tensor: Any, shape: Any, name: Optional[str] = None) -> Any:
    t = _string_tensor("reshape", tensor)
    sizes = _static_sizes("reshape", shape)
    return _apply("reshape", lambda v: v.reshape(sizes), [t], ["string"], [len(sizes)], name)[0]


def _expand_dims_strings(input: Any, axis: Any = None, name: Optional[str] = None,  # noqa: A002
                         dim: Any = None) -> Any:
    t = _string_tensor("expand_dims", input)
    a = int(dim if axis is None else axis)
    rank = None if t[1] is None else t[1] + 1
    return _apply("expand_dims", lambda v: np.expand_dims(v, a), [t], ["string"], [rank],
                  name)[0]


def _squeeze_strings(input: Any, axis: Any = None, name: Optional[str] = None,  # noqa: A002
                     squeeze_dims: Any = None) -> Any:
    t = _string_tensor("squeeze", input)
    axis = squeeze_dims if axis is None else axis
    axes = None if axis is None else tuple(int(a) for a in np.atleast_1d(axis))
    rank = None if t[1] is None or axes is None else t[1] - len(axes)
    return _apply("squeeze", lambda v: np.squeeze(v, axis=axes), [t], ["string"], [rank],
                  name)[0]


def _transpose_strings(a: Any, perm: Any = None, name: Optional[str] = None,
                       conjugate: bool = False) -> Any:
    t = _string_tensor("transpose", a)
    order = None if perm is None else [int(p) for p in perm]
    return _apply("transpose", lambda v: np.transpose(v, order), [t], ["string"], [t[1]],
                  name)[0]


def _concat_strings(values: Any, axis: int, name: Optional[str] = None) -> Any:
    parts = [_string_tensor("concat", v) for v in values]
    a = int(axis)
    return _apply("concat", lambda *vs: np.concatenate(vs, axis=a), parts, ["string"],
                  [parts[0][1]], name)[0]


def _stack_strings(values: Any, axis: int = 0, name: Optional[str] = None) -> Any:
    parts = [_string_tensor("stack", v) for v in values]
    a = int(axis)
    rank = None if parts[0][1] is None else parts[0][1] + 1
    return _apply("stack", lambda *vs: np.stack(vs, axis=a), parts, ["string"], [rank],
                  name)[0]


def _gather_strings(params: Any, indices: Any, validate_indices: Any = None,
                    name: Optional[str] = None, axis: int = 0) -> Any:
    t = _string_tensor("gather", params)
    idx = _other(indices)
    a = int(axis)
    index_rank = None if idx[0].shape is None else len(idx[0].shape)
    rank = None if t[1] is None or index_rank is None else t[1] - 1 + index_rank
    return _apply("gather", lambda v, i: np.take(v, i, axis=a), [t, idx], ["string"], [rank],
                  name)[0]


def structural(names: dict) -> dict:
    """The structural ops of `names` (opsdk.v1's) taking strings too."""
    first = lambda x=None, *a, **k: x  # noqa: E731 - their first argument
    by_name = {"reshape": _reshape_strings, "expand_dims": _expand_dims_strings,
               "squeeze": _squeeze_strings, "transpose": _transpose_strings,
               "concat": _concat_strings, "stack": _stack_strings, "gather": _gather_strings}
    return {n: _strings_or(names[n], fn, first) for n, fn in by_name.items()}
