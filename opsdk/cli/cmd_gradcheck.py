"""`opsdk gradcheck [OP...]`: check every differentiable op's gradient op by finite differences."""

from __future__ import annotations

import argparse
import sys

from .common import workspace_root


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `gradcheck` parser."""
    p = subparsers.add_parser(
        "gradcheck", help="check gradient ops against finite differences",
        description="For every differentiable op (or the ones named), draw inputs from the "
                    "declaration with hypothesis, compare the forward with its reference and the "
                    "gradient op with central finite differences, on every kernel device here.")
    p.add_argument("ops", nargs="*", metavar="OP", help="only these ops (default: all)")
    p.add_argument("--seed", type=int, default=None,
                   help="hypothesis seed (default: 0); a failure prints the seed that reproduces it")
    p.add_argument("--max-examples", type=int, default=None, metavar="K",
                   help="cases per op and device (default: the declaration's gradcheck.max_examples)")
    # Also accepted after the subcommand; SUPPRESS keeps `opsdk -C DIR gradcheck` working.
    p.add_argument("-C", "--workspace", metavar="DIR", default=argparse.SUPPRESS,
                   help="the workspace (a folder with opdefs/)")
    return p


def run(args: argparse.Namespace) -> int:
    """Check, print the table and the counterexamples; 1 when any check fails."""
    from rich.console import Console

    from ..gradcheck.report import print_report
    from ..gradcheck.runner import DEFAULT_SEED, run_gradcheck
    from ..registry import load_registry

    if args.max_examples is not None and args.max_examples < 1:
        print("opsdk gradcheck: error: --max-examples needs a positive number", file=sys.stderr)
        return 1
    registry = load_registry(workspace_root(args))
    console = Console(width=None if sys.stdout.isatty() else 160)
    seed_value = DEFAULT_SEED if args.seed is None else args.seed
    progress = (lambda name: console.print(f"checking {name}", style="dim")) if console.is_terminal else None
    report = run_gradcheck(registry, args.ops, seed_value=seed_value,
                           max_examples=args.max_examples, progress=progress)
    print_report(report, console)
    return 0 if report.ok else 1
