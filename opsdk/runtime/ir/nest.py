"""Nested structures of values (lists and tuples of leaves), flattened and rebuilt.

A structure's *tree* is `LEAF` for a single value, `("list", children)` / `("tuple", children)`
for a list or tuple, and `NONE` for None (no values). Control flow flattens what a traced
function returns into tensors and packs the node's outputs back into the same shape.

    leaves, tree = flatten([x, (y, z)])   # [x, y, z], ("list", ("*", ("tuple", ("*", "*"))))
    pack(tree, [a, b, c])                 # [a, (b, c)]
"""

from __future__ import annotations

from typing import Any

LEAF = "*"
NONE = ("none", ())


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in value)


def flatten(value: Any, shapes: bool = False) -> tuple[list, Any]:
    """The leaves of `value` in order and its tree. With `shapes`, a list of ints/None (or None)
    is one leaf: a shape, as in `shape_invariants=[[None, 3], []]`."""
    if shapes and (value is None or _is_shape(value)):
        return [value], LEAF
    if value is None:
        return [], NONE
    if isinstance(value, (list, tuple)):
        leaves: list = []
        children = []
        for item in value:
            sub, tree = flatten(item, shapes)
            leaves.extend(sub)
            children.append(tree)
        return leaves, ("list" if isinstance(value, list) else "tuple", tuple(children))
    return [value], LEAF


def pack(tree: Any, leaves: list) -> Any:
    """The structure `tree` rebuilt with `leaves` in order (consumes the list)."""
    rebuilt = _pack(tree, list(reversed(leaves)))
    return rebuilt


def _pack(tree: Any, stack: list) -> Any:
    if tree == LEAF:
        return stack.pop()
    kind, children = tree
    if kind == "none":
        return None
    items = [_pack(child, stack) for child in children]
    return items if kind == "list" else tuple(items)


def same_structure(a: Any, b: Any, loose: bool = False) -> bool:
    """Whether two trees match; `loose`: a list and a tuple of the same children match."""
    if a == LEAF or b == LEAF:
        return a == b
    (kind_a, kids_a), (kind_b, kids_b) = a, b
    if kind_a != kind_b and not (loose and {kind_a, kind_b} <= {"list", "tuple"}):
        return False
    return len(kids_a) == len(kids_b) and all(
        same_structure(x, y, loose) for x, y in zip(kids_a, kids_b))


def structure_text(tree: Any) -> str:
    """A readable form: `[*, (*, *)]`, `*`, `None`."""
    if tree == LEAF:
        return "a tensor"
    return _text(tree)


def _text(tree: Any) -> str:
    if tree == LEAF:
        return "*"
    kind, children = tree
    if kind == "none":
        return "None"
    inner = ", ".join(_text(c) for c in children)
    return f"[{inner}]" if kind == "list" else f"({inner}{',' if len(children) == 1 else ''})"
