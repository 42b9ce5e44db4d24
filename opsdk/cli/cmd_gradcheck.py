"""`opsdk gradcheck [OP...]`: check every differentiable op's gradient op by finite differences."""

from __future__ import annotations

import argparse
import sys

from .common import print_table, workspace_root

EXAMPLES = """\
opsdk gradcheck                  # every differentiable op of the workspace
opsdk gradcheck scaled_square    # one op
opsdk gradcheck conv2d --seed 3 --max-examples 200   # more cases, another seed"""


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
                   help="drawn cases per op and device (default: the declaration's "
                        "gradcheck.max_examples), besides one stress case per gradcheck.stress_sizes")
    # Also accepted after the subcommand; SUPPRESS keeps `opsdk -C DIR gradcheck` working.
    p.add_argument("-C", "--workspace", metavar="DIR", default=argparse.SUPPRESS,
                   help="the workspace (a folder with opdefs/)")
    return p


def run(args: argparse.Namespace) -> int:
    """Check, print the table and the counterexamples; 1 when any check fails."""
    from ..gradcheck.report import TABLE_HEADERS, summary_lines, table_rows, table_title
    from ..gradcheck.runner import DEFAULT_SEED, run_gradcheck
    from ..registry import load_registry

    if args.max_examples is not None and args.max_examples < 1:
        print("opsdk gradcheck: error: --max-examples needs a positive number", file=sys.stderr)
        return 1
    registry = load_registry(workspace_root(args))
    seed_value = DEFAULT_SEED if args.seed is None else args.seed
    report = run_gradcheck(registry, args.ops, seed_value=seed_value,
                           max_examples=args.max_examples, progress=_progress())
    print_table(table_title(report), TABLE_HEADERS, table_rows(report))
    # The reproduce line names the workspace the way this command line did.
    extra = ("-C", args.workspace) if getattr(args, "workspace", None) is not None else ()
    for line in summary_lines(report, extra):
        print(line)
    return 0 if report.ok else 1


def _progress():
    """On a terminal, name each op as it starts (a full run takes a while); silent otherwise."""
    if not sys.stderr.isatty():
        return None
    return lambda name: print(f"checking {name} ...", file=sys.stderr)
