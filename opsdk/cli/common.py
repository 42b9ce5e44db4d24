"""What the subcommands share: the workspace they act on and how they print tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..registry.errors import OpsdkError


def workspace_root(args: argparse.Namespace) -> Path:
    """`-C DIR` when given (it must hold opdefs/), else the workspace around the cwd."""
    if args.workspace is not None:
        root = Path(args.workspace).resolve()
        if not (root / "opdefs").is_dir():
            raise OpsdkError(f"{root} is not an opsdk workspace (no opdefs/ folder); "
                             "create one with `opsdk new NAME` there, or pass another -C DIR")
        return root
    from ..registry import find_workspace

    return Path(find_workspace(Path.cwd())).resolve()


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A rich table on a terminal; aligned plain text otherwise (pipes, logs, tests)."""
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title or None)
        for header in headers:
            table.add_column(header)
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    if title:
        print(title)
    for row in [headers, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())


def error_text(command: str, exc: OpsdkError) -> str:
    """How every command reports an error. Declaration mistakes are one line each, compiler-style
    (`opdefs/x.yaml:4: error: op 'x': unknown key ...`), so that the first line names the file and
    line and editors can jump to it; anything else is `opsdk <command>: error: ...`."""
    from ..registry.errors import OpDefError, OpDefErrors

    if isinstance(exc, OpDefErrors):
        return "\n".join(declaration_line(e) for e in exc.errors)
    if isinstance(exc, OpDefError):
        return declaration_line(exc)
    return f"opsdk {command}: error: {exc}"


def declaration_line(error) -> str:
    """`FILE:LINE: error: op 'x': message` of one OpDefError."""
    where = f"{error.location}: " if error.location else ""
    who = f"op '{error.op}': " if error.op else ""
    return f"{where}error: {who}{error.message}"

