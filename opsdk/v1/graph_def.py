"""TF1's GraphDef of a graph, as far as opsdk can describe it: `graph.as_graph_def()`,
`sess.graph_def`, `tf.train.write_graph` and the graph a FileWriter writes for TensorBoard.

Each node goes out with its name, op type (opsdk's: `matmul`, not TensorFlow's `MatMul`), inputs
(`name`, `name:i` past the first output, `^name` for a control input), device and the static
shapes of its outputs (attr `_output_shapes`, what TensorBoard labels edges with). Attribute
values are not written, so TensorFlow can read and draw such a GraphDef but not import and run
it; opsdk's own graph format (docs/graph_format.md) round-trips a graph.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from opsdk.registry.errors import OpsdkError
from opsdk.v1 import events

PRODUCER = 27  # versions.producer, as TensorFlow 1.15 writes it


class NodeDef:
    """One node: name, op, input (a list), device, and `output_shapes` (per output its dims,
    -1 where unknown; None for an unknown rank)."""

    def __init__(self, name: str, op: str, input: Optional[list] = None,  # noqa: A002 (TF's)
                 device: str = "", output_shapes: Optional[list] = None):
        self.name, self.op, self.device = name, op, device
        self.input: list[str] = list(input or [])
        self.output_shapes: list = list(output_shapes or [])

    def __repr__(self) -> str:
        return f"NodeDef({self.name!r}, op={self.op!r}, input={self.input!r})"

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        out = events._bytes_field(1, self.name.encode()) + events._bytes_field(2, self.op.encode())
        out += b"".join(events._bytes_field(3, i.encode()) for i in self.input)
        if self.device:
            out += events._bytes_field(4, self.device.encode())
        if self.output_shapes:
            shapes = b"".join(events._bytes_field(7, _shape(s)) for s in self.output_shapes)
            entry = (events._bytes_field(1, b"_output_shapes")
                     + events._bytes_field(2, events._bytes_field(1, shapes)))
            out += events._bytes_field(5, entry)
        return out

    def text(self) -> list[str]:
        """The node in protobuf's text format, a line per field."""
        lines = ["node {", f"  name: {_quote(self.name)}", f"  op: {_quote(self.op)}"]
        lines += [f"  input: {_quote(i)}" for i in self.input]
        if self.device:
            lines.append(f"  device: {_quote(self.device)}")
        if self.output_shapes:
            lines += ["  attr {", '    key: "_output_shapes"', "    value {", "      list {"]
            for dims in self.output_shapes:
                if dims is None:
                    lines += ["        shape {", "          unknown_rank: true", "        }"]
                    continue
                lines.append("        shape {")
                for d in dims:
                    lines += ["          dim {", f"            size: {d}", "          }"]
                lines.append("        }")
            lines += ["      }", "    }", "  }"]
        return lines + ["}"]


class GraphDef:
    """A graph's nodes in creation order (`node`), and `versions.producer`."""

    def __init__(self, node: Optional[list] = None):
        self.node: list[NodeDef] = list(node or [])
        self.versions = _Versions()

    @classmethod
    def of(cls, graph: Any) -> "GraphDef":
        nodes = []
        for op in graph.operations:
            inputs = [t.op.name if t.index == 0 else t.name for t in op.inputs if t is not None]
            inputs += ["^" + c.name for c in op.control_inputs]
            shapes = [None if t.shape is None else [-1 if d is None else int(d) for d in t.shape]
                      for t in op.outputs]
            nodes.append(NodeDef(op.name, op.type, inputs, op.device or "", shapes))
        return cls(nodes)

    def SerializeToString(self) -> bytes:  # noqa: N802
        versions = events._bytes_field(4, events._key(1, 0) + events._varint(self.versions.producer))
        return b"".join(events._bytes_field(1, n.SerializeToString()) for n in self.node) + versions

    def ByteSize(self) -> int:  # noqa: N802
        return len(self.SerializeToString())

    def __str__(self) -> str:
        lines = [line for node in self.node for line in node.text()]
        return "\n".join(lines + ["versions {", f"  producer: {self.versions.producer}", "}"]) + "\n"


class _Versions:
    def __init__(self) -> None:
        self.producer = PRODUCER


def as_graph_def(graph: Any, from_version: Any = None, add_shapes: bool = False) -> GraphDef:
    """`graph.as_graph_def()`: the GraphDef of the graph as it is now."""
    return GraphDef.of(graph)


def write_graph(graph_or_graph_def: Any, logdir: Any, name: str, as_text: bool = True) -> str:
    """`tf.train.write_graph`: the GraphDef in `logdir/name`, as protobuf text (the default) or
    binary; the folder is made; the file's path is returned."""
    import opsdk

    graph_def = graph_or_graph_def
    if isinstance(graph_def, opsdk.Graph):
        graph_def = GraphDef.of(graph_def)
    if not isinstance(graph_def, GraphDef):
        raise OpsdkError(f"write_graph: give a tf.Graph or its as_graph_def(), got "
                         f"{type(graph_or_graph_def).__name__}")
    folder = Path(os.fspath(logdir))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if as_text:
        path.write_text(str(graph_def), encoding="utf-8")
    else:
        path.write_bytes(graph_def.SerializeToString())
    return str(path)


def _shape(dims: Optional[list]) -> bytes:
    """A TensorShapeProto: its dims, or unknown_rank."""
    if dims is None:
        return events._key(3, 0) + events._varint(1)
    return b"".join(events._bytes_field(2, events._key(1, 0) + events._varint(d)) for d in dims)


def _quote(text: str) -> str:
    """A string as protobuf's text format writes it: quoted, with C escapes."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'
