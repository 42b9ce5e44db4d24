"""`opsdk build [OP...]`: regenerate and compile the stale kernels of the workspace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import error_text, workspace_root

EXAMPLES = """\
opsdk build                      # compile every op whose sources changed
opsdk build scaled_square -j 2   # only this op, two compiles at a time
opsdk build --cuda off           # CPU kernels only, even where nvcc is installed
opsdk build --wheel -o dist      # pack the workspace's ops into a wheel"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `build` parser."""
    p = subparsers.add_parser("build", help="compile the kernels that changed",
                              description="Regenerate generated/, then compile every op whose "
                                          "sources, headers or flags changed since its last build.",
                              epilog="examples: opsdk build;  opsdk build my_op -j 4;  "
                                     "opsdk build --wheel -o dist")
    p.add_argument("ops", nargs="*", metavar="OP", help="only these ops (default: all)")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="parallel compiles (default: the number of CPUs)")
    p.add_argument("--cuda", choices=("auto", "on", "off"), default="auto",
                   help="auto: compile cuda kernels whenever nvcc is present, GPU or not; "
                        "on: the same, and a missing nvcc is an error; off: never")
    p.add_argument("--all-archs", action="store_true",
                   help="compile cuda kernels for every default GPU arch (the fat binary a wheel "
                        "ships; --wheel implies it); default: the GPUs of this machine, or one "
                        "PTX target where there is none")
    p.add_argument("--no-progress", action="store_true", help="print only the summary")
    p.add_argument("--builtin", action="store_true",
                   help="build opsdk's own builtin ops (an installed wheel without their kernels)")
    p.add_argument("--wheel", action="store_true",
                   help="pack the workspace's ops into a wheel for other machines of this "
                        "platform (kernels built for its portable baseline, not -march=native)")
    p.add_argument("-o", "--out-dir", type=Path, default=Path("dist"),
                   help="where --wheel writes the wheel (default: dist/)")
    p.add_argument("--wheel-version", default="0.1.0", help="the wheel's version (default 0.1.0)")
    p.add_argument("--package-name", default=None,
                   help="the package --wheel makes (default: the `name:` of opsdk.yaml, else the "
                        "workspace folder's name)")
    return p


def run(args: argparse.Namespace) -> int:
    """Build, then print the notes and a one-line summary; compile errors exit 1."""
    from ..build.driver import build_workspace
    from ..build.diagnostics import BuildError
    from ..registry import OpDefErrors

    if args.jobs is not None and args.jobs < 1:
        print("opsdk build: error: -j needs a positive number of jobs", file=sys.stderr)
        return 1
    if args.wheel:
        from ..build.wheel import build_wheel

        path = build_wheel(workspace_root(args), args.out_dir, version=args.wheel_version,
                           name=args.package_name)
        print(f"wrote {path} (cpu kernels built for the platform's portable baseline; cuda "
              "kernels, where nvcc is, for every default GPU arch)")
        return 0
    reported: list = []

    def report_now(errors) -> None:  # before compiling anything: seconds, not minutes
        print(error_text("build", errors), file=sys.stderr, flush=True)
        reported.append(errors)

    try:
        root = _builtin_root() if args.builtin else workspace_root(args)
        report = build_workspace(root, ops=args.ops or None, jobs=args.jobs,
                                 cuda=args.cuda, progress=not args.no_progress,
                                 all_archs=args.all_archs,
                                 on_declaration_errors=report_now)
    except BuildError as exc:
        print(str(exc), file=sys.stderr)
        if exc.report is not None:
            print(f"opsdk build: {exc.report.summary()}", file=sys.stderr)
        return 1
    except OpDefErrors as exc:
        if not reported:
            raise
        print(f"opsdk build: {len(exc.errors)} declaration error(s) (above); the other ops are "
              "built", file=sys.stderr)
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
