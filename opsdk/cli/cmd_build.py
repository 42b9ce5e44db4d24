"""`opsdk build [OP...]`: regenerate and compile the stale kernels of the workspace."""

from __future__ import annotations

import argparse
import sys

from .common import workspace_root


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `build` parser."""
    p = subparsers.add_parser("build", help="compile the kernels that changed",
                              description="Regenerate generated/, then compile every op whose "
                                          "sources, headers or flags changed since its last build.")
    p.add_argument("ops", nargs="*", metavar="OP", help="only these ops (default: all)")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="parallel compiles (default: the number of CPUs)")
    p.add_argument("--cuda", choices=("auto", "on", "off"), default="auto",
                   help="auto: compile cuda kernels when nvcc and a GPU are present; "
                        "on: whenever nvcc is; off: never")
    p.add_argument("--no-progress", action="store_true", help="print only the summary")
    p.add_argument("--builtin", action="store_true",
                   help="build opsdk's own builtin ops (an installed wheel without their kernels)")
    return p


def run(args: argparse.Namespace) -> int:
    """Build, then print the notes and a one-line summary; compile errors exit 1."""
    from ..build.driver import build_workspace
    from ..build.diagnostics import BuildError

    if args.jobs is not None and args.jobs < 1:
        print("opsdk build: error: -j needs a positive number of jobs", file=sys.stderr)
        return 1
    try:
        root = _builtin_root() if args.builtin else workspace_root(args)
        report = build_workspace(root, ops=args.ops or None, jobs=args.jobs,
                                 cuda=args.cuda, progress=not args.no_progress)
    except BuildError as exc:
        print(str(exc), file=sys.stderr)
        if exc.report is not None:
            print(f"opsdk build: {exc.report.summary()}", file=sys.stderr)
        return 1
    for path in report.generated:
        print(f"regenerated {path}")
    for note in report.notes:
        print(note)
    print(report.summary())
    return 0


def _builtin_root():
    from ..registry import BUILTIN_ROOT

    return BUILTIN_ROOT
