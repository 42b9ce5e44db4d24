"""`opsdk graph FILE.json [-o out.svg|out.dot]`: draw an exported graph with Graphviz."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


EXAMPLES = """\
opsdk graph model.json           # print the graph as Graphviz DOT
opsdk graph model.json -o model.svg   # draw it (needs Graphviz's dot)"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `graph` parser."""
    p = subparsers.add_parser(
        "graph", help="draw an exported graph (.json) as DOT or SVG",
        description="Read a graph written by opsdk.runtime.io.serialize.save_graph and print its "
                    "Graphviz DOT text, or write it to -o FILE (.dot, or .svg when Graphviz's "
                    "`dot` is installed). The file is read as data: no op is resolved and no "
                    "workspace code runs.")
    p.add_argument("file", type=Path, metavar="FILE.json", help="the exported graph")
    p.add_argument("-o", "--output", type=Path, default=None, metavar="OUT",
                   help="write OUT.dot or OUT.svg instead of printing DOT")
    return p


def run(args: argparse.Namespace) -> int:
    """Read the graph file as data (no registry, no workspace code: docs/trust.md), then print
    or render it."""
    from ..runtime.io.dot import render, to_dot
    from ..runtime.io.graph_data import load_graph_data

    graph = load_graph_data(args.file)
    if args.output is None:
        sys.stdout.write(to_dot(graph, title=args.file.stem))
        return 0
    result = render(graph, args.output)
    if args.output.suffix == ".svg" and result.svg_path is None:
        print(f"opsdk graph: {result.note}", file=sys.stderr)
        return 1
    print(result.note)
    return 0
