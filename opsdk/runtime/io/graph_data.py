"""A graph file read as data only, for drawing it: no registry, no op resolved, no shape inferred,
so no code of any workspace runs (docs/trust.md: `opsdk graph`).

    data = read_graph_data(text)          # GraphFileError naming the node or field
    print(to_dot(data))                   # opsdk.runtime.io.dot draws it like a Graph

The file gets the structural checks of `import_graph` (header, node keys, inputs naming nodes
and outputs that exist, no cycle, dtype names, shapes, attr values of exactly their type,
collections naming nodes of the file); what only the ops' declarations can tell (does the node
fit its op?) is left to `import_graph`, which loads the graph to run it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from opsdk.runtime.io.graph_checks import (GraphFileError, check_collections, dtype_field,
                                          scalar_attr, shape_field)
from opsdk.runtime.io.serialize import _check_header, _ordered, decode_array, parse_json
from opsdk.runtime.ir.primitives import PRIMITIVES

_MAX_DEPTH = 32  # sub-graphs and lists nested in attrs


@dataclass(eq=False)
class DataTensor:
    """One recorded output: `node:index`, its dtype and shape as the file says."""

    op: "DataOp"
    index: int
    dtype: str
    shape: Optional[tuple]

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.index}"


@dataclass(eq=False)
class DataOp:
    """One node as the file records it (`type` is the op's name without its namespace)."""

    name: str
    type: str
    device: str
    attrs: dict
    inputs: list = field(default_factory=list)
    control_inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)

    @property
    def is_primitive(self) -> bool:
        return self.type in PRIMITIVES


@dataclass(eq=False)
class DataGraph:
    """The nodes of a file (or of a sub-graph attr), in dependency order."""

    operations: tuple


@dataclass(eq=False)
class DataSubGraph:
    """A `graph` attr: its nodes, and its inputs and outputs among them."""

    name: str
    graph: DataGraph
    inputs: tuple
    outputs: tuple


def load_graph_data(path: str | Path) -> DataGraph:
    """`read_graph_data` of a file; errors start with the path."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFileError(f"{path}: cannot read the graph file "
                             f"({getattr(exc, 'strerror', None) or exc})") from None
    try:
        return read_graph_data(text)
    except GraphFileError as exc:
        raise GraphFileError(f"{path}: {exc}") from None


def read_graph_data(text: str) -> DataGraph:
    """The graph of `export_graph` text as data (see the module docstring)."""
    document = parse_json(text)
    _check_header(document)
    graph = _read_nodes(document["nodes"], 0)
    collections = check_collections(document.get("collections", {}))
    names = {op.name: op for op in graph.operations}
    for key, items in collections.items():
        for i, item in enumerate(items):
            ref = item["name"]
            known = ref in names if item["kind"] != "tensor" else _tensor(names, ref) is not None
            if not known or (item["kind"] == "variable" and item["initializer"] not in names):
                raise GraphFileError(f"collection '{key}', item {i}: names no "
                                     f"{'tensor' if item['kind'] == 'tensor' else 'node'} of "
                                     f"the file")
            if item["kind"] == "variable" and (
                    names[ref].type != "variable" or names[item["initializer"]].type != "assign"):
                raise GraphFileError(f"collection '{key}', item {i}: variable '{ref}' must name "
                                     "a variable node and its initializer an assign node")
    return graph


def _read_nodes(nodes: Any, depth: int) -> DataGraph:
    if not isinstance(nodes, list):
        raise GraphFileError("not a graph file: \"nodes\" must be a list")
    by_name: dict[str, DataOp] = {}
    for node in _ordered(nodes):  # checks keys, types, references and cycles
        name = node["name"]
        where = f"node '{name}' ({node['op']})"
        op = DataOp(name, node["op"].rpartition("::")[2], node.get("device", ""),
                    {k: _attr(v, f"{where}: attr '{k}'", depth)
                     for k, v in node.get("attrs", {}).items()})
        op.outputs = [DataTensor(op, i, o["dtype"], shape_field(where, o.get("shape")))
                      for i, o in enumerate(node.get("outputs", []))]
        op.inputs = [_input(by_name, where, ref) for ref in node.get("inputs", [])]
        op.control_inputs = [by_name[c] for c in node.get("control_inputs", [])]
        by_name[name] = op
    return DataGraph(tuple(by_name.values()))


def _input(by_name: dict, where: str, ref: str) -> DataTensor:
    found = _tensor(by_name, ref)
    if found is None:
        node = by_name[ref.rpartition(":")[0]]
        raise GraphFileError(f"{where}: input '{ref}': node '{node.name}' has "
                             f"{len(node.outputs)} output(s)")
    return found


def _tensor(by_name: dict, ref: str) -> Optional[DataTensor]:
    node, _, index = ref.rpartition(":")
    op = by_name.get(node)
    if op is None or not index.isdigit() or int(index) >= len(op.outputs):
        return None
    return op.outputs[int(index)]


def _attr(data: Any, where: str, depth: int) -> Any:
    """An attr value with the checks of `decode_attr`; a sub-graph as a DataSubGraph."""
    if depth > _MAX_DEPTH:
        raise GraphFileError(f"{where}: attrs nested more than {_MAX_DEPTH} levels deep")
    if not isinstance(data, dict) or "type" not in data:
        raise GraphFileError(f"{where}: an attr must be {{\"type\": ..., \"value\": ...}}")
    kind, value = data["type"], data.get("value")
    if kind == "none":
        return None
    if kind in ("bool", "int", "str", "float"):
        return scalar_attr(kind, value, where)
    if kind == "dtype":
        return dtype_field(where, value)
    if kind == "shape":
        if not isinstance(value, list) or not all(type(d) is int or d is None for d in value):
            raise GraphFileError(f"{where}: a shape attr's value must be a list of ints and "
                                 f"nulls, not {value!r:.60}")
        return tuple(value)
    if kind == "list":
        if not isinstance(value, list):
            raise GraphFileError(f"{where}: a list attr's value must be a JSON list, not "
                                 f"{value!r:.60}")
        return [_attr(v, where, depth + 1) for v in value]
    if kind in ("tensor", "scalar"):
        return decode_array(data, where)
    if kind == "graph":
        return _subgraph(value, where, depth)
    raise GraphFileError(f"{where}: unknown attr type {kind!r:.40}")


def _subgraph(value: Any, where: str, depth: int) -> DataSubGraph:
    if not isinstance(value, dict) or not all(isinstance(value.get(k), list) for k in (
            "nodes", "inputs", "outputs")):
        raise GraphFileError(f"{where}: a graph attr must be an object with lists \"nodes\", "
                             "\"inputs\" and \"outputs\"")
    name = str(value.get("name", "subgraph"))
    try:
        graph = _read_nodes(value["nodes"], depth + 1)
    except GraphFileError as exc:
        raise GraphFileError(f"{where}, sub-graph '{name}': {exc}") from None
    names = {op.name: op for op in graph.operations}
    ends = []
    for key in ("inputs", "outputs"):
        found = [_tensor(names, ref) if isinstance(ref, str) else None for ref in value[key]]
        if any(t is None for t in found):
            raise GraphFileError(f"{where}, sub-graph '{name}': \"{key}\" must name outputs of "
                                 "its nodes ('node:index')")
        ends.append(tuple(found))
    return DataSubGraph(name, graph, ends[0], ends[1])
