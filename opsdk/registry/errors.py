"""Errors raised for mistakes in op declarations and in calls of ops."""

from __future__ import annotations

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
