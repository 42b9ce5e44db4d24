"""Graphviz DOT pictures of graphs: nodes labelled op and name, edges labelled dtype and shape,
clusters for name scopes and for the sub-graphs of control-flow nodes, dashed control edges.

    print(to_dot(graph))
    render(graph, "model.svg")   # writes model.dot, and model.svg where Graphviz is installed

Output is deterministic: nodes in creation order, attributes in a fixed order.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from opsdk.registry.errors import OpsdkError

from opsdk.runtime.io.graph_data import DataGraph, DataSubGraph
from opsdk.runtime.ir.func_graph import SubGraph
from opsdk.runtime.ir.graph import Graph, Operation
from opsdk.runtime.ir.tensor import Tensor

__all__ = ["to_dot", "render", "RenderResult"]

_CONTROL_FLOW_STYLE = 'style="rounded,filled", fillcolor="#eef3fb"'
_PRIMITIVE_STYLE = 'style="filled", fillcolor="#f2f2f2"'
_SUBGRAPHS = (SubGraph, DataSubGraph)


def to_dot(graph: Graph | DataGraph, title: str = "graph") -> str:
    """The DOT text of `graph` (and of its control-flow sub-graphs, as clusters): a Graph, or a
    graph file read as data (`graph_data.read_graph_data`), which draws the same."""
    lines = [f"digraph {_quote(title)} {{",
             '  graph [rankdir=TB, fontname="Helvetica", fontsize=10];',
             '  node [shape=box, fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    _emit_graph(graph, "", lines, indent="  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _emit_graph(graph: Graph | DataGraph, prefix: str, lines: list[str], indent: str) -> None:
    """Nodes (inside name-scope clusters), then edges, then sub-graph clusters; ids get `prefix`
    so a sub-graph's 'add' never collides with the outer one."""
    ops = graph.operations
    _emit_scope_tree(_scope_tree(ops), prefix, lines, indent, path="")
    for op in ops:
        for t in op.inputs:
            lines.append(f"{indent}{_id(prefix, t.op)} -> {_id(prefix, op)} "
                         f"[label={_quote(edge_label(t))}];")
        for c in op.control_inputs:
            lines.append(f"{indent}{_id(prefix, c)} -> {_id(prefix, op)} "
                         "[style=dashed, arrowhead=odot];")
    for op in ops:
        for key, value in sorted(op.attrs.items()):  # as a graph file holds them: by name
            if isinstance(value, _SUBGRAPHS):
                _emit_subgraph(op, key, value, prefix, lines, indent)


def _emit_subgraph(op: Operation, key: str, sub: SubGraph, prefix: str, lines: list[str],
                   indent: str) -> None:
    inner = f"{prefix}{op.name}.{key}/"
    lines.append(f"{indent}subgraph {_quote('cluster_' + inner)} {{")
    lines.append(f"{indent}  label={_quote(f'{op.type} {op.name}: {key}')}; style=dashed;")
    _emit_graph(sub.graph, inner, lines, indent + "  ")
    lines.append(f"{indent}}}")
    # Dotted edges tie the cluster to its node: the node's inputs feed the sub-graph's inputs
    # (cond's predicate stays outside), its outputs go back to the node.
    bound = op.inputs[len(op.inputs) - len(sub.inputs):]
    for outer, param in zip(bound, sub.inputs):
        lines.append(f"{indent}{_id(prefix, outer.op)} -> {_id(inner, param.op)} "
                     "[style=dotted, arrowhead=none];")
    for result in sub.outputs:
        lines.append(f"{indent}{_id(inner, result.op)} -> {_id(prefix, op)} "
                     "[style=dotted, arrowhead=empty];")


def _scope_tree(ops: tuple[Operation, ...]) -> dict:
    """{"ops": [...], "scopes": {name: subtree}} from the `/` in node names, order kept."""
    root: dict = {"ops": [], "scopes": {}}
    for op in ops:
        node = root
        for part in op.name.split("/")[:-1]:
            node = node["scopes"].setdefault(part, {"ops": [], "scopes": {}})
        node["ops"].append(op)
    return root


def _emit_scope_tree(tree: dict, prefix: str, lines: list[str], indent: str, path: str) -> None:
    for op in tree["ops"]:
        lines.append(f"{indent}{_id(prefix, op)} [label={_quote(node_label(op))}{_style(op)}];")
    for name, sub in tree["scopes"].items():
        scope = f"{path}{name}/"
        lines.append(f"{indent}subgraph {_quote('cluster_' + prefix + scope)} {{")
        lines.append(f"{indent}  label={_quote(scope.rstrip('/'))}; style=rounded; "
                     'color="#999999";')
        _emit_scope_tree(sub, prefix, lines, indent + "  ", scope)
        lines.append(f"{indent}}}")


def node_label(op: Operation) -> str:
    """Two lines: the op type and the node's name."""
    device = f"\n{op.device}" if op.device else ""
    return f"{op.type}\n{op.name}{device}"


def edge_label(t: Tensor) -> str:
    """`float32[?,3]`, or `float32[*]` for an unknown rank; `:k` added for outputs after 0."""
    shape = "[*]" if t.shape is None else "[" + ",".join(
        "?" if d is None else str(d) for d in t.shape) + "]"
    index = f":{t.index} " if t.index else ""
    return f"{index}{t.dtype}{shape}"


def _style(op: Operation) -> str:
    if any(isinstance(v, _SUBGRAPHS) for v in op.attrs.values()):
        return ", " + _CONTROL_FLOW_STYLE
    if op.is_primitive:
        return ", " + _PRIMITIVE_STYLE
    return ""


def _id(prefix: str, op: Operation) -> str:
    return _quote(prefix + op.name)


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


@dataclass(frozen=True)
class RenderResult:
    """What `render` wrote: always the .dot file; the .svg when Graphviz ran; else why not."""

    dot_path: Path
    svg_path: Optional[Path]
    note: str


def render(graph: Graph | DataGraph, path: str | Path, dot_binary: Optional[str] = None) -> RenderResult:
    """Write `path` (.dot or .svg). For .svg the .dot is written next to it and Graphviz's `dot`
    draws the picture; without Graphviz the result says so and how to get it."""
    path = Path(path)
    if path.suffix not in (".dot", ".svg", ".gv"):
        raise OpsdkError(f"{path}: write a .dot or .svg file")
    dot_path = path if path.suffix in (".dot", ".gv") else path.with_suffix(".dot")
    dot_path.write_text(to_dot(graph), encoding="utf-8")
    if path.suffix != ".svg":
        return RenderResult(dot_path, None, f"wrote {dot_path}")
    binary = dot_binary or shutil.which("dot")
    if binary is None:
        return RenderResult(dot_path, None, f"wrote {dot_path}; Graphviz's `dot` is not installed, "
                            f"so no {path.name} (install graphviz, e.g. `apt-get install graphviz`, "
                            f"or open the .dot file in a DOT viewer)")
    done = subprocess.run([binary, "-Tsvg", str(dot_path), "-o", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise OpsdkError(f"Graphviz failed on {dot_path}: {done.stderr.strip()[:500]}")
    return RenderResult(dot_path, path, f"wrote {dot_path} and {path}")
