"""Symbolic shapes: dims that bind across inputs, fixed sizes, `...`, and dim expressions.

A declared shape is a tuple of `Dim`s. Inputs may use `SymDim` (binds a name to a size; a second
use must match), `FreeDim` (`_`: an axis whose size nothing else shares), `ConstDim`, one leading
`EllipsisDim`, and `ExprDim`, an integer expression over dim names and int attrs (`n + m`,
`(n - k) // s + 1`, `max(n, 1)`): outputs are allocated with it, inputs are checked against it.
Unknown sizes are `None` at graph time, and every evaluation propagates `None`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Mapping, Union

Size = Union[int, None]


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * // %
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class Call:
    fn: str  # max or min
    args: tuple["Expr", ...]


Expr = Union[Num, Name, BinOp, Call]

_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_FUNCS = ("max", "min")


class ExprSyntaxError(ValueError):
    """A dim expression outside the small language; the message says what is allowed."""


def parse_expr(text: str) -> Expr:
    """Parse `n + 2*m` into an Expr; raise ExprSyntaxError naming what is not allowed."""
    try:
        tree = ast.parse(str(text).strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprSyntaxError(f"cannot parse dim expression '{text}': {exc.msg}") from None
    return _convert(tree.body, text)


def _convert(node: ast.AST, text: str) -> Expr:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Num(node.value)
    if isinstance(node, ast.Name):
        return Name(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return BinOp(_BINOPS[type(node.op)], _convert(node.left, text), _convert(node.right, text))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return BinOp("-", Num(0), _convert(node.operand, text))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS
            and node.args and not node.keywords):
        return Call(node.func.id, tuple(_convert(a, text) for a in node.args))
    raise ExprSyntaxError(
        f"dim expression '{text}' may use only integers, dim and attr names, + - * // % and max()/min()")


def expr_names(expr: Expr) -> set[str]:
    """The dim and attr names an expression reads."""
    if isinstance(expr, Name):
        return {expr.name}
    if isinstance(expr, BinOp):
        return expr_names(expr.left) | expr_names(expr.right)
    if isinstance(expr, Call):
        return set().union(*(expr_names(a) for a in expr.args))
    return set()


def eval_expr(expr: Expr, env: Mapping[str, Size]) -> Size:
    """Evaluate with sizes from env; any unknown (None) operand makes the result unknown."""
    if isinstance(expr, Num):
        return expr.value
    if isinstance(expr, Name):
        return env.get(expr.name)
    if isinstance(expr, BinOp):
        a, b = eval_expr(expr.left, env), eval_expr(expr.right, env)
        if a is None or b is None:
            return None
        if expr.op in ("//", "%") and b == 0:
            raise ZeroDivisionError(f"division by zero in dim expression ({render_python(expr)})")
        return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0, "%": a % b if b else 0}[expr.op]
    values = [eval_expr(a, env) for a in expr.args]
    if any(v is None for v in values):
        return None
    return max(values) if expr.fn == "max" else min(values)


def _render(expr: Expr, name: Callable[[str], str], floordiv: Callable[[str, str], str],
            mod: Callable[[str, str], str], call: Callable[[str, list[str]], str]) -> str:
    if isinstance(expr, Num):
        return str(expr.value)
    if isinstance(expr, Name):
        return name(expr.name)
    if isinstance(expr, BinOp):
        left = _render(expr.left, name, floordiv, mod, call)
        right = _render(expr.right, name, floordiv, mod, call)
        if expr.op == "//":
            return floordiv(left, right)
        if expr.op == "%":
            return mod(left, right)
        return f"({left} {expr.op} {right})"
    return call(expr.fn, [_render(a, name, floordiv, mod, call) for a in expr.args])


def render_python(expr: Expr, name: Callable[[str], str] = lambda n: n) -> str:
    """The expression as Python source, with each name mapped through `name`."""
    return _render(expr, name, lambda a, b: f"({a} // {b})", lambda a, b: f"({a} % {b})",
                   lambda fn, args: f"{fn}({', '.join(args)})")


def render_cpp(expr: Expr, name: Callable[[str], str]) -> str:
    """The expression as C++ over int64_t, with Python's floor semantics for // and %."""
    return _render(expr, name, lambda a, b: f"opsdk::floordiv({a}, {b})",
                   lambda a, b: f"opsdk::floormod({a}, {b})",
                   lambda fn, args: _cpp_call(fn, args))


def _cpp_call(fn: str, args: list[str]) -> str:
    out = args[0]
    for a in args[1:]:
        out = f"std::{fn}<int64_t>({out}, {a})"
    return out


@dataclass(frozen=True)
class SymDim:
    """A named dim: the first input that uses it binds its size; later uses must match."""
    name: str


@dataclass(frozen=True)
class FreeDim(SymDim):
    """`_` in an input shape: an axis of any size that no other axis shares. It is a SymDim whose
    name (`<input>_<k>`, made by the parser) nothing else uses, so it binds from its own axis
    alone, and kernels read its size as `dims.<input>_<k>` like any dim's."""


FREE = "_"  # how a free dim is written


def free_dim_name(tensor: str, index: int) -> str:
    """The Dims member of the `index`-th declared dim (after any `...`) of `tensor`, when `_`."""
    return f"{tensor}_{index}"


@dataclass(frozen=True)
class ConstDim:
    size: int


@dataclass(frozen=True)
class ExprDim:
    """A dim computed from input dims and int attrs: an output is allocated with its value, an
    input (a gradient op's `grad_y: [num_segments, d]`) must have it."""
    expr: Expr
    text: str


@dataclass(frozen=True)
class EllipsisDim:
    """`...`: any number of leading dims, the same for every tensor of the op that has it."""


Dim = Union[SymDim, FreeDim, ConstDim, ExprDim, EllipsisDim]
Shape = tuple  # tuple[Dim, ...]


def format_shape(shape: Shape) -> str:
    """`[n, p]`-style text of a declared shape, for docstrings and messages."""
    parts = []
    for d in shape:
        if isinstance(d, FreeDim):
            parts.append(FREE)
        elif isinstance(d, SymDim):
            parts.append(d.name)
        elif isinstance(d, ConstDim):
            parts.append(str(d.size))
        elif isinstance(d, ExprDim):
            parts.append(d.text)
        else:
            parts.append("...")
    return "[" + ", ".join(parts) + "]"
