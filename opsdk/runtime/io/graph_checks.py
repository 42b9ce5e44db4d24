"""What a graph file may say, checked as data: dtype names, shapes, attr values of exactly their
declared type, collections, and every recorded output against what the node gives.

A graph file is data (docs/trust.md): a crafted one must not make a step compute silently wrong
results. So on import the recorded outputs are never trusted: a declared op's are inferred from
its declaration, a runtime primitive's from its inputs and attrs (an `identity` gives its input's
dtype and shape, an `assign` its variable's, `cond` and `while_loop` what their sub-graphs give),
and the file must say exactly that.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from opsdk.registry.dtypes import DTYPE_NAMES
from opsdk.registry.errors import OpsdkError

from opsdk.runtime.ir.graph import Graph
from opsdk.runtime.ir.tensor import Tensor

Shape = Optional[tuple]


class GraphFileError(OpsdkError):
    """A graph file that cannot be read back: names the node and what is wrong."""


_DTYPES_TEXT = ", ".join(DTYPE_NAMES)


def dtype_field(where: str, value: Any) -> str:
    """A dtype name of the file: one of the dtypes ops may declare."""
    if not isinstance(value, str) or value not in DTYPE_NAMES:
        raise GraphFileError(f"{where}: dtype {value!r:.60} is not a dtype name ({_DTYPES_TEXT})")
    return value


def shape_field(where: str, value: Any, dims_only: bool = False) -> Shape:
    """A shape of the file: null (unknown rank) or a list of non-negative ints and nulls
    (`dims_only`: ints only, the shape of a tensor value)."""
    if value is None and not dims_only:
        return None
    ok = isinstance(value, list) and all(
        (type(d) is int and d >= 0) or (d is None and not dims_only) for d in value)
    if not ok:
        what = "non-negative ints" if dims_only else "non-negative ints and nulls, or null"
        raise GraphFileError(f"{where}: shape {value!r:.60} must be a list of {what}")
    return tuple(value)


def scalar_attr(kind: str, value: Any, where: str) -> Any:
    """The value of a `bool`, `int`, `str` or `float` attr, which must be of exactly that JSON
    type (`"false"` is a string, not a bool; `true` is not an int)."""
    ok = {"bool": lambda v: type(v) is bool, "int": lambda v: type(v) is int,
          "str": lambda v: isinstance(v, str),
          "float": lambda v: type(v) in (int, float) or v in ("nan", "inf", "-inf")}[kind](value)
    if not ok:
        raise GraphFileError(f"{where}: a {kind} attr's value must be a JSON "
                             f"{_JSON_WORDS[kind]}, not {value!r:.60}")
    return float(value) if kind == "float" else value


_JSON_WORDS = {"bool": "true or false", "int": "integer", "str": "string",
               "float": "number (or \"nan\", \"inf\", \"-inf\")"}


# ------------------------------------------------------------------------------ outputs
def check_outputs(where: str, expected: list, recorded: list) -> None:
    """The outputs the file lists must be those the node gives ((shape, dtype) pairs)."""
    if len(recorded) != len(expected):
        raise GraphFileError(f"{where}: the file lists {len(recorded)} outputs, the op has "
                             f"{len(expected)}")
    for i, ((shape, dtype), (want_shape, want_dtype)) in enumerate(zip(recorded, expected)):
        if dtype != want_dtype:
            raise GraphFileError(f"{where}: output {i} is {want_dtype} but the file says {dtype}")
        if shape != want_shape:
            raise GraphFileError(f"{where}: output {i} has shape {_text(want_shape)} but the file "
                                 f"says {_text(shape)}")


def primitive_outputs(where: str, graph: Graph, op_type: str, inputs: list[Tensor],
                      attrs: dict) -> Optional[list]:
    """What a primitive node gives, from its inputs and attrs, or None for a primitive that
    checks its own outputs (placeholder, const, variable: their attrs say it) or that has no
    rule here (one registered by another package: its `check` is what holds it)."""
    rule = _RULES.get(op_type)
    return None if rule is None else rule(where, graph, inputs, attrs)


def _identity(where: str, graph: Graph, inputs: list, attrs: dict) -> list:
    _arity(where, inputs, 1)
    return [(inputs[0].shape, inputs[0].dtype)]


def _assign(where: str, graph: Graph, inputs: list, attrs: dict) -> list:
    _arity(where, inputs, 1)
    name = attrs.get("variable")
    if not isinstance(name, str):
        raise GraphFileError(f"{where}: attr 'variable' must name the variable it stores into")
    try:
        var = graph.get_operation(name)
    except OpsdkError:
        var = None
    if var is None or var.type != "variable":
        raise GraphFileError(f"{where}: attr 'variable' is {name!r}, which is not a variable node "
                             "of the file")
    return [(var.outputs[0].shape, var.outputs[0].dtype)]


def _no_outputs(where: str, graph: Graph, inputs: list, attrs: dict) -> list:
    return []


def _cond(where: str, graph: Graph, inputs: list, attrs: dict) -> list:
    then, other = attrs.get("then_branch"), attrs.get("else_branch")
    for key, sub in (("then_branch", then), ("else_branch", other)):
        if not hasattr(sub, "outputs") or len(inputs) != 1 + len(sub.inputs):
            raise GraphFileError(f"{where}: attr '{key}' must be a graph taking the node's inputs "
                                 "after the predicate")
    if len(then.outputs) != len(other.outputs):
        raise GraphFileError(f"{where}: the branches give {len(then.outputs)} and "
                             f"{len(other.outputs)} outputs")
    outputs = []
    for i, (a, b) in enumerate(zip(then.outputs, other.outputs)):
        if a.dtype != b.dtype:
            raise GraphFileError(f"{where}: output {i} is {a.dtype} in then_branch but {b.dtype} "
                                 "in else_branch")
        same = a.shape is not None and b.shape is not None and len(a.shape) == len(b.shape)
        outputs.append((tuple(x if x == y else None for x, y in zip(a.shape, b.shape))
                        if same else None, a.dtype))
    return outputs


def _while(where: str, graph: Graph, inputs: list, attrs: dict) -> list:
    invariants, body = attrs.get("shape_invariants"), attrs.get("body")
    if not isinstance(invariants, list) or not hasattr(body, "outputs") or not hasattr(
            attrs.get("cond"), "outputs"):
        raise GraphFileError(f"{where}: a while_loop needs graph attrs cond and body and a list "
                             "attr shape_invariants")
    n = len(invariants)
    extra = attrs.get("stashed", 0)
    if not isinstance(extra, int) or isinstance(extra, bool) or extra < 0:
        raise GraphFileError(f"{where}: attr stashed must be a count of the body's recorded "
                             f"intermediates, not {extra!r:.60}")
    if len(body.outputs) != n + extra or len(inputs) < n:
        raise GraphFileError(f"{where}: {n} shape invariants and {extra} stashed values, but the "
                             f"body gives {len(body.outputs)} values and the node has "
                             f"{len(inputs)} inputs")
    shapes = [None if s is None else tuple(s) for s in invariants]
    outputs = [(s, t.dtype) for s, t in zip(shapes, inputs)] + [((), "int64")]
    chosen = attrs.get("recorded")
    if chosen is not None and (not isinstance(chosen, list) or not chosen or any(
            not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < n for v in chosen)
            or len(set(chosen)) != len(chosen)):
        raise GraphFileError(f"{where}: attr recorded must list distinct loop variable "
                             f"positions 0..{n - 1}, not {chosen!r:.60}")
    kept = list(range(n) if chosen is None else chosen)
    as_shapes = attrs.get("shape_histories")
    if as_shapes is not None and (not isinstance(as_shapes, list) or any(
            not isinstance(v, int) or isinstance(v, bool) or v not in kept or shapes[v] is None
            for v in as_shapes) or not attrs.get("keep_intermediates")):
        raise GraphFileError(f"{where}: attr shape_histories must list recorded loop variables "
                             f"of known rank, not {as_shapes!r:.60}")
    if extra and (not attrs.get("keep_intermediates") or len(kept) != n):
        raise GraphFileError(f"{where}: a loop that stashes intermediates (attr stashed) records "
                             "every loop variable (attr keep_intermediates, each position in attr recorded)")
    if attrs.get("keep_intermediates"):
        outputs += [((None, len(shapes[v])), "int64") if v in (as_shapes or ())
                    else (None if shapes[v] is None else (None, *shapes[v]), inputs[v].dtype)
                    for v in kept]
    marked = attrs.get("stashed_shapes")
    if marked is not None and (not isinstance(marked, list) or any(
            not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < extra
            or body.outputs[n + j].shape is None for j in marked)):
        raise GraphFileError(f"{where}: attr stashed_shapes must list stashed values (0.."
                             f"{extra - 1}) of known rank, not {marked!r:.60}")
    outputs += [((None, len(t.shape)), "int64") if j in (marked or ())
                else (None if t.shape is None else (None, *t.shape), t.dtype)
                for j, t in enumerate(body.outputs[n:])]
    return outputs


def _arity(where: str, inputs: list, n: int) -> None:
    if len(inputs) != n:
        raise GraphFileError(f"{where}: {len(inputs)} inputs; this node takes {n}")


_RULES: dict[str, Callable[..., list]] = {
    "identity": _identity, "assign": _assign, "assign_add": _assign, "assign_sub": _assign,
    "read_variable": _assign,
    "no_op": _no_outputs, "apply_updates": _no_outputs, "cond": _cond, "while_loop": _while,
}


# ------------------------------------------------------------------------------ collections
def check_collections(collections: Any) -> dict:
    """The "collections" object: name -> list of items, each an object with a "kind" and a
    "name" (a variable also its "initializer" and a bool "trainable")."""
    if not isinstance(collections, dict):
        raise GraphFileError(f"\"collections\" must be an object of lists, not "
                             f"{collections!r:.40}")
    for key, items in collections.items():
        where = f"collection '{key}'"
        if not isinstance(items, list):
            raise GraphFileError(f"{where}: must be a list of items, not {items!r:.40}")
        for i, item in enumerate(items):
            _check_item(f"{where}, item {i}", item)
    return collections


def _check_item(where: str, item: Any) -> None:
    if not isinstance(item, dict):
        raise GraphFileError(f"{where}: must be an object with \"kind\" and \"name\", not "
                             f"{item!r:.40}")
    kind = item.get("kind")
    keys = {"tensor": {"kind", "name"}, "operation": {"kind", "name"},
            "variable": {"kind", "name", "initializer", "trainable"}}.get(kind)
    if keys is None:
        raise GraphFileError(f"{where}: \"kind\" must be \"tensor\", \"operation\" or "
                             f"\"variable\", not {kind!r:.40}")
    unknown = set(item) - keys
    if unknown:
        raise GraphFileError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    for key in ("name", "initializer") if kind == "variable" else ("name",):
        if not isinstance(item.get(key), str):
            raise GraphFileError(f"{where}: \"{key}\" must be a string")
    if kind == "variable" and type(item.get("trainable", True)) is not bool:
        raise GraphFileError(f"{where}: \"trainable\" must be true or false")


def _text(shape: Shape) -> str:
    return "null (unknown rank)" if shape is None else "[" + ", ".join(
        "null" if d is None else str(d) for d in shape) + "]"
