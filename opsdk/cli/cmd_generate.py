"""`opsdk generate [--check]`: write generated/ from the declarations (or check it is current)."""

from __future__ import annotations

import argparse
import sys

from .common import workspace_root

EXAMPLES = """\
opsdk generate                   # rewrite generated/ from opdefs/
opsdk generate --check           # exit 1 if generated/ is stale (for CI)"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `generate` parser."""
    p = subparsers.add_parser("generate", help="regenerate generated/ from opdefs/",
                              description="Write the glue code of every op into generated/ "
                                          "(only files whose content changes).")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if generated/ is not what the declarations give")
    return p


def run(args: argparse.Namespace) -> int:
    """Generate, or with --check list the stale files and fail."""
    from ..codegen.generate import generate_workspace

    root = workspace_root(args)
    result = generate_workspace(root, check=args.check)
    if args.check:
        stale = list(result.stale)
        if stale:
            print(f"opsdk generate --check: {len(stale)} generated file(s) out of date:",
                  file=sys.stderr)
            for path in stale:
                print(f"  {path}", file=sys.stderr)
            print("run `opsdk generate` and commit the result", file=sys.stderr)
            return 1
        print("generated/ is up to date")
        return 0
    for path in result.changed:
        print(f"wrote {path}")
    if not result.changed:
        print("generated/ is up to date")
    return 0
