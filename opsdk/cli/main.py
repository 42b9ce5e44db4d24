"""The `opsdk` command: a thin shell over the library, one module per subcommand.

Subcommands are the modules `opsdk/cli/cmd_<name>.py`, found at start-up; each exposes
`register(subparsers)` (adds its parser), `run(args) -> int` and `EXAMPLES` (command lines shown
at the end of its `--help`; tests/cli checks that each one parses). Modules import their heavy
dependencies inside `run`, so `opsdk build` with nothing to do stays well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from .. import __version__

COMMAND_PREFIX = "cmd_"
WORKSPACE_HELP = ("the workspace (a folder with opdefs/); default: found from the current "
                  "directory upwards")


def command_modules() -> list:
    """Every `opsdk.cli.cmd_*` module, sorted by name."""
    package = sys.modules[__package__]
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                   if m.name.startswith(COMMAND_PREFIX))
    return [importlib.import_module(f"{__package__}.{name}") for name in names]


EXAMPLES = """\
opsdk new scaled_square          # start a workspace here with one op
opsdk build                      # compile what changed
opsdk gradcheck scaled_square    # check its gradient
opsdk list --all                 # every op, the builtin ones included
opsdk build --help               # each command's options and examples"""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but an `examples:` epilog keeps its lines (one command each)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def _examples(text: str) -> str:
    return "examples:\n" + "\n".join("  " + line for line in text.splitlines())


def make_parser() -> argparse.ArgumentParser:
    """The top-level parser with every discovered subcommand."""
    parser = argparse.ArgumentParser(
        prog="opsdk", description="Declare tensor ops in YAML, write only the kernel body.",
        epilog=_examples(EXAMPLES), formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"opsdk {__version__}")
    parser.add_argument("-C", "--workspace", metavar="DIR", type=Path, default=None,
                        help=WORKSPACE_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules():
        sub = module.register(subparsers)
        sub.epilog, sub.formatter_class = _examples(module.EXAMPLES), _HelpFormatter
        _accept_workspace_after_command(sub)
        sub.set_defaults(_run=module.run)
    return parser


def _accept_workspace_after_command(sub: argparse.ArgumentParser) -> None:
    # `opsdk build -C dir` as well as `opsdk -C dir build`; SUPPRESS keeps a global -C intact.
    try:
        sub.add_argument("-C", "--workspace", metavar="DIR", type=Path,
                         default=argparse.SUPPRESS, help=WORKSPACE_HELP)
    except argparse.ArgumentError:
        pass  # the command declares -C itself


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one `opsdk` command; user mistakes print one message and return 1, bugs raise."""
    from ..registry.errors import OpsdkError

    args = make_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except OpsdkError as exc:
        from .common import error_text

        print(error_text(args.command, exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"opsdk {args.command}: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The `opsdk` console script."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`opsdk list --all | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    sys.exit(code)
