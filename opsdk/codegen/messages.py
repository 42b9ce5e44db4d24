"""The glue's error messages, decided in Python and emitted as C++ string expressions.

A message is a sequence of literal text and C++ expressions (`Value`) that are only known at run
time (a size, a dtype code). `cpp_message` turns one into a `std::string` expression that the
generated code evaluates only after a check has failed, so the success path builds no strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from opsdk.registry.infer import axis_phrase, dtype_list_text
from opsdk.registry.shapes import format_shape
from opsdk.registry.spec import OpSpec, TensorSpec


@dataclass(frozen=True)
class Value:
    """A run-time value in a message: a C++ expression and how to turn it into text."""
    cpp: str
    kind: str = "int"  # int: std::to_string; dtype: a glue dtype code; str: a C string; std: a std::string


Part = Union[str, Value]


@dataclass(frozen=True)
class Message:
    """A Python exception type (ValueError/TypeError) and the parts of its text."""
    exc: str
    parts: tuple[Part, ...]

    def text(self, values: dict[str, str]) -> str:
        """The message with each Value replaced from `values` (keyed by its C++ text); for tests."""
        return "".join(p if isinstance(p, str) else values[p.cpp] for p in self.parts)


_TO_TEXT = {
    "int": "std::to_string({})",
    "dtype": "std::string(opsdk::glue::dtype_name({}))",
    "str": "std::string({})",
    "std": "{}",
}


_CPP_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def cpp_string_literal(text: str) -> str:
    """A C++ string literal (UTF-8 at run time) for any text, in plain ASCII source.

    Printable ASCII stays as it is (but '??', which could start a trigraph, becomes '?\\?');
    quotes, backslashes and controls are escaped (controls as
    three-digit octal, which no following character can extend, unlike \\x); every other
    character is a universal character name, \\u for the BMP and \\U beyond it (a non-BMP
    character has no \\u form: JSON's surrogate pairs are not valid C++).

    >>> print(cpp_string_literal('say "hi" \\U0001F600'))
    "say \\"hi\\" \\U0001f600"
    """
    # A '?' after a '?' is escaped: '??/' and friends are trigraphs to older compilers.
    return '"' + "".join("\\?" if c == "?" and text[i - 1:i] == "?" else _cpp_char(c)
                         for i, c in enumerate(text)) + '"'


def _cpp_char(c: str) -> str:
    if c in _CPP_ESCAPES:
        return _CPP_ESCAPES[c]
    code = ord(c)
    if 0x20 <= code < 0x7F:
        return c
    if code < 0x20 or code == 0x7F:
        return f"\\{code:03o}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def cpp_message(message: Message) -> str:
    """A C++ expression of type std::string building the message."""
    pieces: list[str] = []
    merged: list[Part] = []
    for part in message.parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        elif part != "":
            merged.append(part)
    for part in merged:
        if isinstance(part, str):
            pieces.append(cpp_string_literal(part))
        else:
            pieces.append(_TO_TEXT[part.kind].format(part.cpp))
    if not pieces:
        return 'std::string()'
    if pieces[0].startswith('"'):
        pieces[0] = f"std::string({pieces[0]})"
    return " + ".join(pieces)


def cpp_exception(message: Message) -> str:
    """The CPython exception object for the message's type."""
    return {"ValueError": "PyExc_ValueError", "TypeError": "PyExc_TypeError"}[message.exc]


_HOLE = "\x00"


def with_value(text: str, value: Value) -> tuple[Part, ...]:
    """Split a registry-made phrase built around the placeholder `_HOLE` into parts."""
    before, _, after = text.partition(_HOLE)
    return (before, value, after)


def size_phrase(size: Value, axis: int, rank: int) -> tuple[Part, ...]:
    """`4 columns` / `size 4 in axis 2`, worded by the registry's axis_phrase."""
    return with_value(axis_phrase(_HOLE, axis, rank), size)


def runtime_size_phrase(size: Value, axis: Value, rank: Value) -> tuple[Part, ...]:
    """The same, for `...` shapes whose rank is known only at run time (opsdk::glue::axis_phrase
    mirrors opsdk.registry.axis_phrase; a compile test compares the two)."""
    return (Value(f"opsdk::glue::axis_phrase({size.cpp}, {axis.cpp}, {rank.cpp})", "std"),)


def not_an_array(op: str, label: Part, got_type: Value, what: str) -> Message:
    return Message("TypeError", (f"{op}: input '", label, f"' must be {what}, got ", got_type))


def not_a_list(op: str, tensor: TensorSpec, got_type: Value) -> Message:
    return Message("TypeError", (f"{op}: input '{tensor.name}' must be a list or tuple of arrays, "
                                 "got ", got_type))


def list_length(op: str, tensor: TensorSpec, got: Value, want: Value) -> Message:
    return Message("ValueError", (f"{op}: input '{tensor.name}' has ", got,
                                  f" arrays but {tensor.list_len} is ", want))


def rank_mismatch(op: str, label: Part, tensor: TensorSpec, got: Value) -> Message:
    """Wrong number of dims (for `...` shapes: too few), worded as opsdk.registry.infer does."""
    core = len(tensor.shape) - (1 if tensor.has_ellipsis else 0)
    need = f"rank >= {core}" if tensor.has_ellipsis else f"rank {core}"
    return Message("ValueError", (f"{op}: input '", label, f"' must have {need} "
                                  f"({format_shape(tensor.shape)}), got rank ", got))


def const_mismatch(op: str, label: Part, want: tuple[Part, ...], got: Value) -> Message:
    return Message("ValueError", (f"{op}: input '", label, "' must have ", *want, ", got ", got))


def computed_mismatch(op: str, label: Part, want: tuple[Part, ...], text: str, got: Value) -> Message:
    """`op: input 'grad_y' must have 4 rows (num_segments), got 3`, as opsdk.registry.infer says."""
    return Message("ValueError", (f"{op}: input '", label, "' must have ", *want, f" ({text}), got ", got))


def dim_mismatch(op: str, label: Part, got: tuple[Part, ...], bound_label: Part, want: Value,
                 dim: str) -> Message:
    """`op: input 'y' has 3 columns but x has 4 (dim p)`."""
    return Message("ValueError", (f"{op}: input '", label, "' has ", *got, " but ", bound_label,
                                  " has ", want, f" (dim {dim})"))


def batch_mismatch(op: str, label: Part, got: Value, bound_label: str, want: Value) -> Message:
    return Message("ValueError", (f"{op}: input '", label, "' has leading dims ", got,
                                  f" but {bound_label} has ", want, " (the '...' dims)"))


def dtype_not_allowed(op: str, spec: OpSpec, tensor: TensorSpec, label: Part, got: Value) -> Message:
    options = spec.dtype_options(tensor)
    if tensor.dtype in {ta.name for ta in spec.type_attrs}:
        expected = f"{dtype_list_text(options)} (type attr {tensor.dtype})"
    else:
        expected = tensor.dtype
    return Message("TypeError", (f"{op}: input '", label, "' has dtype ", got, f"; expected {expected}"))


def dtype_conflict(op: str, label: Part, got: Value, bound_label: str, want: Value,
                   type_attr: str) -> Message:
    return Message("TypeError", (f"{op}: inputs '{bound_label}' and '", label,
                                 f"' share type attr {type_attr} but have ", want, " and ", got))


def negative_dim(op: str, dim: str, text: str, got: Value) -> Message:
    return Message("ValueError", (f"{op}: dim '{dim}' ({text}) would be ", got, "; check the inputs and attrs"))


def not_contiguous(op: str, label: Part) -> Message:
    return Message("ValueError", (f"{op}: input '", label, "' is not C-contiguous; pass "
                                  "np.ascontiguousarray(", label, ")"))


def bad_type_attr(op: str, type_attr: str, allowed: tuple[str, ...], got: Value) -> Message:
    return Message("TypeError", (f"{op}: type attr '{type_attr}' must be {dtype_list_text(allowed)}, "
                                 "got '", got, "'"))


def not_written(op: str, kernel_source: str) -> str:
    """The NotImplementedError text of a kernel whose body is still OPSDK_NOT_IMPLEMENTED()."""
    return f"op '{op}': kernel body not written yet ({kernel_source})"
