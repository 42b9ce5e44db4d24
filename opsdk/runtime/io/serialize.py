"""Graph interchange: a graph as versioned, deterministic JSON, and back (docs/graph_format.md).

    text = export_graph(graph)           # same graph, same bytes
    g2 = import_graph(text)              # nodes keep their names: g2.get_tensor("y:0")
    Session(g2).run("y:0", {"x:0": value})

Every node is listed in creation order (a topological order) with its op, inputs as `node:index`,
control inputs, typed attrs, unbound type attrs, device and output signature; control-flow nodes
carry their sub-graphs as attrs of type `graph`. Importing re-validates declared ops through the
registry, so a file that no longer fits the ops (an attr out of range, a shape clash) is reported
with the node's name, as are unknown ops, missing inputs, cycles and a version this code does not
read.
"""

from __future__ import annotations

import base64
import heapq
import json
import math
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from opsdk.registry.diagnostics import did_you_mean
from opsdk.registry.errors import OpDefErrors, OpsdkError

from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.control_flow import builders as control_flow  # noqa: F401 - registers the cond and while_loop node types
from opsdk.runtime.compile import sendrecv  # noqa: F401 - registers the _send and _recv node types
from opsdk.runtime.train import update as train_update  # noqa: F401 - registers apply_updates
from opsdk.runtime.autodiff import custom_gradient  # noqa: F401 - registers _custom_gradient
from opsdk.runtime.io.graph_checks import (GraphFileError, check_collections, check_outputs,
                                          dtype_field, primitive_outputs, scalar_attr, shape_field)
from opsdk.runtime.ir.func_graph import FuncGraph, SubGraph
from opsdk.runtime.ir.graph import Graph, GraphKeys, Operation
from opsdk.runtime.ir.primitives import PRIMITIVES
from opsdk.runtime.ir.tensor import Tensor

__all__ = ["FORMAT", "VERSION", "export_graph", "import_graph", "save_graph", "load_graph",
           "GraphFileError"]

FORMAT = "opsdk-graph"
VERSION = 1
_INLINE_ELEMENTS = 64  # tensors up to this size are written as nested lists (readable diffs)


# ------------------------------------------------------------------------------------- export
def export_graph(graph: Graph) -> str:
    """The graph as JSON text (sorted keys, fixed indentation: deterministic)."""
    document = {"format": FORMAT, "version": VERSION, "nodes": _export_nodes(graph),
                "collections": _export_collections(graph)}
    return json.dumps(document, sort_keys=True, indent=1, allow_nan=False) + "\n"


def save_graph(graph: Graph, path: str | Path) -> Path:
    """Write `export_graph(graph)` to `path` (UTF-8) and return the path."""
    path = Path(path)
    path.write_text(export_graph(graph), encoding="utf-8")
    return path


def _export_nodes(graph: Graph) -> list[dict]:
    return [_export_node(op) for op in graph.operations]


def _export_node(op: Operation) -> dict:
    spec = getattr(op, "spec", None)
    absent = getattr(op, "absent", ())
    # Optional inputs left out have no edge: written by name, only where there are some.
    return {**({"absent": sorted(absent)} if absent else {}),
        "name": op.name,
        # A declared op by its qualified name (`myws::foo`): unique whichever workspaces are loaded.
        "op": op.type if spec is None else spec.qualified_name,
        "inputs": [t.name for t in op.inputs],
        "control_inputs": [c.name for c in op.control_inputs],
        "attrs": {k: encode_attr(v, f"node '{op.name}': attr '{k}'") for k, v in op.attrs.items()},
        "type_attrs": dict(op.type_attrs),
        "device": op.device,
        "outputs": [{"dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)}
                    for t in op.outputs],
    }


def _export_collections(graph: Graph) -> dict:
    """Collections of graph elements and variables, by name; other objects are left out."""
    out: dict[str, list] = {}
    for key in sorted(getattr(graph, "_collections", {})):
        items = [_collection_item(v) for v in graph.get_collection(key)]
        if items and all(i is not None for i in items):
            out[key] = items
    return out


def _collection_item(value: Any) -> Optional[dict]:
    if isinstance(value, Tensor):
        return {"kind": "tensor", "name": value.name}
    if isinstance(value, Operation):
        return {"kind": "operation", "name": value.name}
    if hasattr(value, "initializer") and isinstance(getattr(value, "op", None), Operation):
        return {"kind": "variable", "name": value.op.name, "initializer": value.initializer.name,
                "trainable": bool(getattr(value, "trainable", True))}
    return None


def encode_attr(value: Any, where: str) -> dict:
    """One attr value as `{"type": ..., "value": ...}` (see docs/graph_format.md)."""
    if value is None:
        return {"type": "none"}
    if isinstance(value, (bool, np.bool_)):
        return {"type": "bool", "value": bool(value)}
    if isinstance(value, int):
        return {"type": "int", "value": value}
    if isinstance(value, float):
        return {"type": "float", "value": _float_out(value)}
    if isinstance(value, str):
        return {"type": "str", "value": value}
    if isinstance(value, np.dtype):
        return {"type": "dtype", "value": value.name}
    if isinstance(value, (np.ndarray, np.generic)):
        kind = "tensor" if isinstance(value, np.ndarray) else "scalar"
        return {"type": kind, **encode_array(np.asarray(value))}
    if isinstance(value, SubGraph):
        return {"type": "graph", "value": {
            "name": value.name, "nodes": _export_nodes(value.graph),
            "inputs": [t.name for t in value.inputs], "outputs": [t.name for t in value.outputs]}}
    if isinstance(value, tuple) and all(d is None or isinstance(d, int) for d in value):
        return {"type": "shape", "value": list(value)}
    if isinstance(value, (list, tuple)):
        return {"type": "list", "value": [encode_attr(v, where) for v in value]}
    raise OpsdkError(f"{where}: cannot export a {type(value).__name__} attr value")


def _float_out(x: float) -> Any:
    return x if math.isfinite(x) else repr(x)  # 'nan', 'inf', '-inf': JSON has no literal


def encode_array(array: np.ndarray) -> dict:
    """dtype, shape and the data: nested lists when small and finite, else little-endian base64."""
    data: dict[str, Any] = {"dtype": array.dtype.name, "shape": list(array.shape)}
    finite = not np.issubdtype(array.dtype, np.inexact) or bool(np.isfinite(array).all())
    if array.size <= _INLINE_ELEMENTS and finite and not np.iscomplexobj(array):
        data["value"] = array.tolist()
    else:
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        data["base64"] = base64.b64encode(np.ascontiguousarray(little).tobytes()).decode("ascii")
    return data


# ------------------------------------------------------------------------------------- import
def load_graph(path: str | Path, registry: Any = None) -> Graph:
    """`import_graph` of a file; a missing file is an error naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GraphFileError(f"{path}: cannot read the graph file ({exc.strerror})") from None
    try:
        return import_graph(text, registry)
    except GraphFileError as exc:
        raise GraphFileError(f"{path}: {exc}") from None


def import_graph(text: str, registry: Any = None) -> Graph:
    """A new Graph from `export_graph` text; node names are kept, so fetches and feeds can be
    looked up by name. `registry`: the ops to resolve (default: the builtin registry), or a list
    of registries for a graph mixing several workspaces' ops (each qualified name resolves in the
    first that holds it).

    >>> import_graph(text, [load_registry("geo"), load_registry("text")])   # doctest: +SKIP
    """
    document = parse_json(text)
    _check_header(document)
    graph = Graph()
    registry = registry if registry is not None else builtin_registry()
    if isinstance(registry, (list, tuple)):
        registry = _Registries(registry)
    _build_nodes(graph, document["nodes"], registry)
    _import_collections(graph, document.get("collections", {}))
    return graph


def parse_json(text: str) -> Any:
    """The JSON document of a graph file; GraphFileError for text that is no JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphFileError(f"not a graph file: invalid JSON at line {exc.lineno} "
                             f"({exc.msg})") from None
    except RecursionError:
        raise GraphFileError("not a graph file: its JSON is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise GraphFileError(f"not a graph file: {exc}") from None


class _Registries:
    """Several registries read as one for resolving a graph file's ops: `find` and `get` ask each
    in order (a qualified name is held by the registry of its workspace; a bare name resolves in
    the first that has it), iteration and names cover all of them."""

    def __init__(self, registries: Sequence[Any]):
        if not registries:
            raise OpsdkError("import_graph: the list of registries is empty")
        self.registries = tuple(registries)

    def find(self, name: str) -> Any:
        return next((s for r in self.registries if (s := r.find(name)) is not None), None)

    def get(self, name: str) -> Any:
        found = self.find(name)
        if found is not None:
            return found
        for r in self.registries:
            try:
                return r.get(name)
            except OpDefErrors:
                raise
            except OpsdkError:
                continue
        return self.registries[0].get(name)  # the first registry's own error

    def __iter__(self):
        seen = set()
        for r in self.registries:
            for spec in r:
                key = (spec.namespace, spec.name)
                if key not in seen:
                    seen.add(key)
                    yield spec

    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for r in self.registries for n in r.names()))

    def qualified_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for r in self.registries for n in r.qualified_names()))


def _check_header(document: Any) -> None:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise GraphFileError(f"not a graph file: the top level must be an object with "
                             f"\"format\": \"{FORMAT}\"")
    version = document.get("version")
    if version != VERSION:
        newer = isinstance(version, int) and version > VERSION
        raise GraphFileError(f"graph file version {version!r} is not readable by this opsdk "
                             f"(reads version {VERSION}){'; upgrade opsdk' if newer else ''}")
    if not isinstance(document.get("nodes"), list):
        raise GraphFileError("not a graph file: \"nodes\" must be a list")


def _build_nodes(graph: Graph, nodes: list, registry: Any) -> None:
    for node in _ordered(nodes):
        _build_node(graph, node, registry)


# The keys of a node and what each must be: the file is data, checked before anything is built.
_NODE_KEYS: dict[str, tuple[type, str]] = {
    "name": (str, "a string"), "op": (str, "a string"), "device": (str, "a string"),
    "inputs": (list, "a list of 'node:index' strings"),
    "control_inputs": (list, "a list of node names"), "attrs": (dict, "an object"),
    "type_attrs": (dict, "an object of dtype names"), "outputs": (list, "a list of objects"),
    "absent": (list, "a list of the names of optional inputs left out"),
}


def _check_node(i: int, node: Any) -> None:
    """Refuse a node of the wrong shape, naming it and the key (before any use of it)."""
    if not isinstance(node, dict):
        raise GraphFileError(f"node #{i}: must be an object, not {type(node).__name__}")
    name = node.get("name")
    where = f"node '{name}'" if isinstance(name, str) else f"node #{i}"
    for key in ("name", "op"):
        if not isinstance(node.get(key), str):
            raise GraphFileError(f"{where}: needs a string \"{key}\"")
    for key, value in node.items():
        if key not in _NODE_KEYS:
            raise GraphFileError(f"{where}: unknown key '{key}'{did_you_mean(key, _NODE_KEYS)}")
        kind, what = _NODE_KEYS[key]
        if not isinstance(value, kind):
            raise GraphFileError(f"{where}: \"{key}\" must be {what}, not {value!r:.40}")
    for key in ("inputs", "control_inputs", "absent"):
        if not all(isinstance(ref, str) for ref in node.get(key, [])):
            raise GraphFileError(f"{where}: \"{key}\" must hold strings only")
    if not all(isinstance(v, str) for v in node.get("type_attrs", {}).values()):
        raise GraphFileError(f"{where}: \"type_attrs\" values must be dtype names")
    for k, out in enumerate(node.get("outputs", [])):
        if not isinstance(out, dict) or set(out) - {"dtype", "shape"}:
            raise GraphFileError(f"{where}: output {k} must be an object with \"dtype\" and "
                                 f"\"shape\", not {out!r:.60}")
        dtype_field(f"{where}: output {k}", out.get("dtype"))
        shape_field(f"{where}: output {k}", out.get("shape"))


def _ordered(nodes: list) -> list[dict]:
    """The nodes in dependency order (file order breaks ties); missing inputs and cycles are
    errors naming the node."""
    by_name: dict[str, dict] = {}
    for i, node in enumerate(nodes):
        _check_node(i, node)
        name = node["name"]
        if name in by_name:
            raise GraphFileError(f"node '{name}': the name is used twice")
        by_name[name] = node
    deps: dict[str, set[str]] = {}
    for name, node in by_name.items():
        deps[name] = set()
        for ref in node.get("inputs", []):
            deps[name].add(_producer(name, ref, by_name))
        for ref in node.get("control_inputs", []):
            if ref not in by_name:
                raise GraphFileError(f"node '{name}': control input '{ref}' names no node in "
                                     f"the file{did_you_mean(ref, by_name)}")
            deps[name].add(ref)
    return [by_name[n] for n in _kahn(list(by_name), deps)]


def _kahn(names: list[str], deps: dict[str, set[str]]) -> list[str]:
    """Kahn's order, the earliest node in the file first among the ready ones."""
    position = {n: i for i, n in enumerate(names)}
    users: dict[str, list[str]] = {n: [] for n in names}
    for n, ds in deps.items():
        for d in ds:
            users[d].append(n)
    count = {n: len(ds) for n, ds in deps.items()}
    ready = [position[n] for n in names if count[n] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        n = names[heapq.heappop(ready)]
        order.append(n)
        for user in users[n]:
            count[user] -= 1
            if count[user] == 0:
                heapq.heappush(ready, position[user])
    if len(order) != len(names):
        stuck = [f"'{n}'" for n in names if count[n] > 0][:6]
        raise GraphFileError(f"the graph has a cycle among nodes {', '.join(stuck)}; a node "
                             "cannot depend on itself")
    return order


def _producer(name: str, ref: Any, by_name: dict) -> str:
    node, _, index = str(ref).rpartition(":")
    if not node or not index.isdigit():
        raise GraphFileError(f"node '{name}': input '{ref}' must be 'node:index'")
    if node not in by_name:
        raise GraphFileError(f"node '{name}': input '{ref}' names no node in the file"
                             f"{did_you_mean(node, by_name)}")
    return node


def _build_node(graph: Graph, node: dict, registry: Any) -> None:
    name, op_type = node["name"], node["op"]
    where = f"node '{name}' ({op_type})"
    inputs = [_input(graph, where, ref) for ref in node.get("inputs", [])]
    controls = [graph.get_operation(c) for c in node.get("control_inputs", [])]
    attrs = {k: decode_attr(v, f"{where}: attr '{k}'", graph, registry)
             for k, v in node.get("attrs", {}).items()}
    outputs = [(shape_field(where, o.get("shape")), o["dtype"]) for o in node.get("outputs", [])]
    device = node.get("device") or ""
    spec = None if op_type in PRIMITIVES else _resolve(where, op_type, registry)
    if spec is None:  # a primitive's outputs follow from its inputs and attrs, not the file
        expected = primitive_outputs(where, graph, op_type, inputs, attrs)
        if expected is not None:
            check_outputs(where, expected, outputs)
    try:
        scope = graph.device(device) if device else nullcontext()
        with scope, graph.control_dependencies(controls):
            if op_type in PRIMITIVES:
                op = graph.create_op(op_type, inputs, attrs, outputs, name=name)
            else:
                op = _build_declared(graph, registry, spec, node, inputs, attrs)
    except GraphFileError:
        raise
    except OpsdkError as exc:  # the graph's own checks (a constant's dtype, shapes, ...)
        raise GraphFileError(f"{where}: {exc}") from None
    if op.name != name:
        raise GraphFileError(f"{where}: imported under the name '{op.name}'; node names must be "
                             "unique")
    check_outputs(where, [(t.shape, t.dtype) for t in op.outputs], outputs)


def _resolve(where: str, op_type: str, registry: Any) -> Any:
    """The spec a node's "op" names: `ns::name` exactly, a bare name (files written before ops
    had namespaces) as the registry resolves it; GraphFileError naming the node otherwise."""
    found = registry.find(op_type)
    if found is not None:
        return found
    try:
        registry.get(op_type)  # a broken declaration's own errors
    except OpDefErrors as exc:
        raise GraphFileError(f"{where}: op '{op_type}' is declared with errors:\n{exc}") from None
    except OpsdkError:
        pass
    namespace, _, _ = op_type.rpartition("::")
    if namespace and namespace not in {s.namespace for s in registry}:
        raise GraphFileError(f"{where}: op '{op_type}' is in namespace '{namespace}', whose workspace "
                             f"this registry does not hold; import with "
                             f"registry=load_registry(<that workspace>), or a list of registries "
                             f"for a graph of several workspaces")
    known = [*registry.names(), *registry.qualified_names(), *PRIMITIVES]
    raise GraphFileError(f"{where}: unknown op '{op_type}'{did_you_mean(op_type, known)}")


def _build_declared(graph: Graph, registry: Any, spec: Any, node: dict, inputs: list,
                    attrs: dict) -> Operation:
    from opsdk.runtime.frontend.api import add_node, node_of  # api imports the graph layer; only import needs it
    grouped, i = [], 0
    absent = set(node.get("absent", []))
    optional = {t.name for t in spec.inputs if t.optional}
    if absent - optional:
        raise GraphFileError(f"node '{node['name']}' ({spec.name}): \"absent\" names "
                             f"{sorted(absent - optional)}, which are not optional inputs of the op "
                             f"(optional: {', '.join(sorted(optional)) or 'none'})")
    for tspec in spec.inputs:
        if tspec.name in absent:
            grouped.append(None)
            continue
        size = int(attrs.get(tspec.list_len, 0)) if tspec.is_list else None
        grouped.append(inputs[i] if size is None else inputs[i:i + size])
        i += 1 if size is None else size
    if i != len(inputs):
        raise GraphFileError(f"node '{node['name']}' ({spec.name}): {len(inputs)} inputs, the op "
                             f"takes {i}")
    result = add_node(graph, registry, spec, grouped, {**attrs, **node.get("type_attrs", {})},
                      node["name"], None)
    return node_of(result)  # a list output comes back as a list of tensors


def _input(graph: Graph, where: str, ref: str) -> Tensor:
    try:
        return graph.get_tensor(ref)
    except OpsdkError as exc:
        raise GraphFileError(f"{where}: input '{ref}': {exc}") from None


_MAX_ATTR_DEPTH = 32  # lists and sub-graphs nested in attrs


def decode_attr(data: Any, where: str, graph: Graph, registry: Any, depth: int = 0) -> Any:
    """The inverse of `encode_attr`; sub-graphs are rebuilt inside `graph`. A value of the
    wrong type is an error naming `where`."""
    if depth > _MAX_ATTR_DEPTH:
        raise GraphFileError(f"{where}: attrs nested more than {_MAX_ATTR_DEPTH} levels deep")
    try:
        return _decode_attr(data, where, graph, registry, depth)
    except (TypeError, ValueError, OverflowError) as exc:
        raise GraphFileError(f"{where}: bad value {data!r:.60} ({exc})") from None


def _decode_attr(data: Any, where: str, graph: Graph, registry: Any, depth: int) -> Any:
    if not isinstance(data, dict) or "type" not in data:
        raise GraphFileError(f"{where}: an attr must be {{\"type\": ..., \"value\": ...}}")
    kind, value = data["type"], data.get("value")
    if kind == "none":
        return None
    if kind in ("bool", "int", "str", "float"):  # exactly that JSON type: "false" is no bool
        return scalar_attr(kind, value, where)
    if kind == "dtype":
        return np.dtype(dtype_field(where, value))
    if kind == "shape":  # also any tuple of ints (axes), so negative ints are allowed
        if not isinstance(value, list) or not all(type(d) is int or d is None for d in value):
            raise GraphFileError(f"{where}: a shape attr's value must be a list of ints and "
                                 f"nulls, not {value!r:.60}")
        return tuple(value)
    if kind == "list":
        if not isinstance(value, list):
            raise GraphFileError(f"{where}: a list attr's value must be a JSON list, not "
                                 f"{value!r:.60}")
        return [decode_attr(v, where, graph, registry, depth + 1) for v in value]
    if kind in ("tensor", "scalar"):
        array = decode_array(data, where)
        return array if kind == "tensor" else array[()]
    if kind == "graph":
        if not isinstance(value, dict):
            raise GraphFileError(f"{where}: a graph attr must be an object")
        return _decode_subgraph(value, where, graph, registry)
    raise GraphFileError(f"{where}: unknown attr type '{kind}'")


def decode_array(data: dict, where: str) -> np.ndarray:
    """The array of an `encode_array` record (read-only, as constants are)."""
    dtype = np.dtype(dtype_field(where, data.get("dtype")))
    shape = shape_field(where, data.get("shape"), dims_only=True)
    try:
        if "base64" in data:
            raw = base64.b64decode(data["base64"])
            array = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
        else:
            array = np.array(data["value"], dtype=dtype).reshape(shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise GraphFileError(f"{where}: bad tensor value ({exc})") from None
    array.setflags(write=False)
    return array


def _decode_subgraph(value: dict, where: str, outer: Graph, registry: Any) -> SubGraph:
    sub = FuncGraph(outer, str(value.get("name", "subgraph")))
    try:
        _build_nodes(sub, value["nodes"], registry)
        inputs = tuple(sub.get_tensor(n) for n in value["inputs"])
        outputs = tuple(sub.get_tensor(n) for n in value["outputs"])
    except GraphFileError as exc:
        raise GraphFileError(f"{where}, sub-graph '{sub.name}': {exc}") from None
    except (KeyError, TypeError) as exc:
        raise GraphFileError(f"{where}: a graph attr needs nodes, inputs and outputs "
                             f"({exc})") from None
    except OpsdkError as exc:
        raise GraphFileError(f"{where}, sub-graph '{sub.name}': {exc}") from None
    return SubGraph(sub, inputs, outputs)


def _import_collections(graph: Graph, collections: Any) -> None:
    collections = check_collections(collections)
    for key in sorted(collections):
        for i, item in enumerate(collections[key]):
            kind, name = item["kind"], item["name"]
            try:
                if kind == "tensor":
                    graph.add_to_collection(key, graph.get_tensor(name))
                elif kind == "operation":
                    graph.add_to_collection(key, graph.get_operation(name))
                elif kind == "variable" and key == GraphKeys.GLOBAL_VARIABLES:
                    variable = _restore_variable(graph, item)
                    graph.add_to_collection(key, variable)
                    if variable.trainable:
                        graph.add_to_collection(GraphKeys.TRAINABLE_VARIABLES, variable)
            except OpsdkError as exc:
                raise GraphFileError(f"collection '{key}', item {i}: {exc}") from None


def _restore_variable(graph: Graph, item: dict) -> Any:
    """A Variable over nodes that already exist (its constructor would add new ones)."""
    from opsdk.runtime.frontend.variables import Variable
    op, init = graph.get_operation(item["name"]), graph.get_operation(item["initializer"])
    if op.type != "variable" or init.type != "assign" or init.attrs.get("variable") != op.name:
        raise GraphFileError(f"variable '{item['name']}' must name a variable node and its "
                             f"initializer an assign node of it")
    variable = Variable.__new__(Variable)
    variable.graph = graph
    variable.trainable = item.get("trainable", True)
    variable.op = op
    variable.initializer = init
    return variable
