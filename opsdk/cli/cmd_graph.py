"""`opsdk graph FILE.json [-o out.svg|out.dot]`: draw an exported graph with Graphviz."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..registry.errors import OpsdkError

EXAMPLES = """\
opsdk graph model.json           # print the graph as Graphviz DOT
opsdk graph model.json -o model.svg   # draw it (needs Graphviz's dot)"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `graph` parser."""
    p = subparsers.add_parser(
        "graph", help="draw an exported graph (.json) as DOT or SVG",
        description="Read a graph written by opsdk.runtime.io.serialize.save_graph and print its "
                    "Graphviz DOT text, or write it to -o FILE (.dot, or .svg when Graphviz's "
                    "`dot` is installed).")
    p.add_argument("file", type=Path, metavar="FILE.json", help="the exported graph")
    p.add_argument("-o", "--output", type=Path, default=None, metavar="OUT",
                   help="write OUT.dot or OUT.svg instead of printing DOT")
    return p


def run(args: argparse.Namespace) -> int:
    """Load the graph against the workspace's ops, then print or render it."""
    from ..runtime.io.dot import render, to_dot
    from ..runtime.io.serialize import load_graph

    graph = load_graph(args.file, _registry(args))
    if args.output is None:
        sys.stdout.write(to_dot(graph, title=args.file.stem))
        return 0
    result = render(graph, args.output)
    if args.output.suffix == ".svg" and result.svg_path is None:
        print(f"opsdk graph: {result.note}", file=sys.stderr)
        return 1
    print(result.note)
    return 0


def _registry(args: argparse.Namespace):
    """The builtin ops plus the workspace's (-C, else found upwards); builtin only outside one."""
    from ..registry.registry import load_registry
    from .common import workspace_root

    try:
        root = workspace_root(args)
    except OpsdkError:
        if args.workspace is not None:
            raise
        return load_registry(None)
    return load_registry(root)
