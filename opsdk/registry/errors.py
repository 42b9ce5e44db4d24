"""Errors raised for mistakes in op declarations and in calls of ops."""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """Where a piece of a declaration stands: a file and a 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class OpsdkError(Exception):
    """Base of every error opsdk raises for a user mistake (the CLI prints these without a traceback)."""


def in_context(exc: OpsdkError, message: str) -> OpsdkError:
    """`exc` again with `message` (its own message inside some context): the same class and
    the same attributes (a `PyFuncError`'s `raised`), whatever its constructor takes."""
    again = type(exc).__new__(type(exc))
    again.__dict__.update(exc.__dict__)
    again.args = (message,)
    return again


class OpDefError(OpsdkError):
    """A mistake in a declaration: `file:line: op 'name': what is wrong (the fix)`.

    `derived` marks a mistake that may only follow from another one (a dim no input binds when
    the input that would bind it was refused); those are listed after the root causes.
    """

    def __init__(self, location: Location | None, op: str | None, message: str, *, derived: bool = False):
        self.location = location
        self.op = op
        self.message = message
        self.derived = derived
        where = f"{location}: " if location else ""
        who = f"op '{op}': " if op else ""
        super().__init__(f"{where}{who}{message}")


class OpDefErrors(OpsdkError):
    """Several declaration mistakes found in one pass, reported together."""

    def __init__(self, errors: list[OpDefError]):
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


class OpError(OpsdkError, ValueError):
    """A bad call of an op at run time (shape, dtype, attr); names the op, the node and the input."""


class KernelNotBuiltError(OpsdkError):
    """A compiled kernel was asked for before `opsdk build` produced it."""


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # opsdk/


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """`warnings.warn(message)` attributed to the first caller outside opsdk: the user's line that
    led to it (a `Session.run`, a `load_ops`), however deep inside opsdk it was found. Where no
    frame is outside (a thread of opsdk's own), the line that called this."""
    frame, level = sys._getframe(1), 2  # stacklevel 2: this function's caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        # warnings.warn does not count the import system's frames: neither do we
        while frame is not None and _import_frame(frame.f_code.co_filename):
            frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)


def _import_frame(filename: str) -> bool:
    """A frame warnings.warn skips when it counts a stack level (its _is_internal_frame)."""
    return "importlib" in filename and "_bootstrap" in filename
