"""Collecting declaration mistakes, and reading typed values out of the located YAML tree.

Every reader reports a wrong value through `Diagnostics.error` and returns None, so one pass over
a file finds all its mistakes instead of stopping at the first.
"""

from __future__ import annotations

import difflib
import keyword
import math
from typing import Any, Iterable, Optional

from .errors import Location, OpDefError
from .located_yaml import KIND_NAMES, YEntry, YMap, YNode, YScalar, YSeq


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(str(word), sorted(set(choices)), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def describe(node: YNode) -> str:
    """How a wrong value is shown: scalars as written (clipped), containers by kind."""
    if isinstance(node, YScalar):
        return "nothing" if node.value is None else clip(repr(node.value) if isinstance(node.value, str)
                                                          else node.text)
    return KIND_NAMES[type(node)]


def clip(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, so a huge value never floods a message."""
    return text if len(text) <= limit else text[:limit] + "..."


class Diagnostics:
    """The errors of one file; `op` is the op being read, named in each message."""

    def __init__(self, file: str):
        self.file = file
        self.op: Optional[str] = None
        self.errors: list[OpDefError] = []

    def location(self, line: int) -> Location:
        return Location(self.file, line)

    def error(self, line: int, message: str, *, derived: bool = False) -> None:
        self.errors.append(OpDefError(self.location(line), self.op, message, derived=derived))

    def derived(self, line: int, message: str) -> None:
        """A mistake that may be a consequence of another (listed after the root causes)."""
        self.error(line, message, derived=True)

    def sorted_errors(self) -> list[OpDefError]:
        """Root causes first, then consequences, each by line."""
        return sorted(self.errors, key=lambda e: (e.derived, e.location.line if e.location else 0))

    def count(self) -> int:
        return len(self.errors)

    # -- typed readers: each returns None after reporting a wrong value --------------------------

    def mapping(self, node: YNode, what: str) -> Optional[YMap]:
        if isinstance(node, YMap):
            return node
        self.error(node.line, f"{what} must be a mapping of names to settings, got {describe(node)}")
        return None

    def sequence(self, node: YNode, what: str) -> Optional[YSeq]:
        if isinstance(node, YSeq):
            return node
        self.error(node.line, f"{what} must be a list, got {describe(node)}")
        return None

    def string(self, node: YNode, what: str) -> Optional[str]:
        if isinstance(node, YScalar) and isinstance(node.value, str) and node.value.strip():
            return node.value
        self.error(node.line, f"{what} must be a non-empty string, got {describe(node)}")
        return None

    def boolean(self, node: YNode, what: str) -> Optional[bool]:
        if isinstance(node, YScalar) and isinstance(node.value, bool):
            return node.value
        self.error(node.line, f"{what} must be true or false, got {describe(node)}")
        return None

    def integer(self, node: YNode, what: str, minimum: Optional[int] = None) -> Optional[int]:
        if isinstance(node, YScalar) and type(node.value) is int:
            if minimum is not None and node.value < minimum:
                self.error(node.line, f"{what} must be >= {minimum}, got {node.value}")
                return None
            return node.value
        self.error(node.line, f"{what} must be an integer, got {describe(node)}")
        return None

    def number(self, node: YNode, what: str, minimum: Optional[float] = None) -> Optional[float]:
        value = as_number(node)
        if value is None:
            self.error(node.line, f"{what} must be a number, got {describe(node)}")
            return None
        if minimum is not None and value < minimum:
            self.error(node.line, f"{what} must be >= {minimum:g}, got {value:g}")
            return None
        return value

    def known_keys(self, node: YMap, known: tuple[str, ...], where: str) -> dict[str, YEntry]:
        """The entries whose key is known; each other key is reported with a did-you-mean."""
        found: dict[str, YEntry] = {}
        for entry in node.entries:
            if entry.key in known:
                found[entry.key] = entry
            else:
                self.error(entry.key_line, f"unknown key '{entry.key}' in {where}{did_you_mean(entry.key, known)}")
        return found


def as_number(node: YNode) -> Optional[float]:
    """An int or float scalar as float; also `1e-4`, which YAML 1.1 reads as a string."""
    if not isinstance(node, YScalar) or isinstance(node.value, bool):
        return None
    value: Any = node.value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


# Names become file names, C++ identifiers and Python arguments; real ones are far shorter.
MAX_NAME_LENGTH = 64


def is_identifier(name: str) -> bool:
    """A name usable as a Python argument and a C++ field (keywords excluded)."""
    return (name.isidentifier() and name.isascii() and len(name) <= MAX_NAME_LENGTH
            and not is_keyword(name))


def name_problem(name: str) -> Optional[str]:
    """Why `name` cannot name an op, input, output, attr or dim ('is a C++ keyword'), or None."""
    if len(name) > MAX_NAME_LENGTH:
        return f"is {len(name)} characters long; names may have at most {MAX_NAME_LENGTH}"
    if keyword.iskeyword(name):
        return "is a Python keyword, which the generated wrapper cannot take as a name"
    if name in _CPP_WORDS:
        return "is a C++ keyword, which the generated glue cannot take as a name"
    return None


def is_keyword(name: str) -> bool:
    """A word of Python or C++ that no generated name may be."""
    return keyword.iskeyword(name) or name in _CPP_WORDS


# Names that would break the generated C++ structs even though Python accepts them.
_CPP_WORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
char16_t char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern false float
for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private
protected public register reinterpret_cast requires return short signed sizeof static static_assert
static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned
using virtual void volatile wchar_t while xor xor_eq""".split())
