"""Symbolic shapes: dims that bind across inputs, fixed sizes, `...`, and dim expressions.

A declared shape is a tuple of `Dim`s. Inputs may use `SymDim` (binds a name to a size; a second
use must match), `FreeDim` (`_`: an axis whose size nothing else shares), `ConstDim`, one leading
`EllipsisDim`, and `ExprDim`, an integer expression over dim names and int attrs (`n + m`,
`(n - k) // s + 1`, `max(n, 1)`, `n // s if padding == 'same' else n - k + 1`): outputs are
allocated with it, inputs are checked against it. Conditions (`a if cond else b`) compare a choice
(`str` with `choices`) attr with one of its choices, test a bool attr, or compare int expressions.
Unknown sizes are `None` at graph time, and every evaluation propagates `None`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

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


@dataclass(frozen=True)
class Str:
    """A string literal: only as an operand of a comparison with a choice attr."""
    value: str


@dataclass(frozen=True)
class Compare:
    op: str  # one of == != < <= > >=
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class BoolOp:
    op: str  # and, or, not (one operand)
    args: tuple["Expr", ...]


@dataclass(frozen=True)
class IfExpr:
    """`then if cond else other`."""
    cond: "Expr"
    then: "Expr"
    other: "Expr"


Expr = Union[Num, Name, BinOp, Call, Str, Compare, BoolOp, IfExpr]

_BINOPS: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_CMPOPS: dict[type, str] = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_FUNCS = ("max", "min")
_ALLOWED = ("integers, dim and attr names, + - * // %, max()/min() and "
            "'a if cond else b' (cond: comparisons, and/or/not)")


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
    return _convert_condition(node, text)


def _convert_condition(node: ast.AST, text: str) -> Expr:
    if isinstance(node, ast.IfExp):
        return IfExpr(_convert(node.test, text), _convert(node.body, text), _convert(node.orelse, text))
    if isinstance(node, ast.Constant) and type(node.value) is str:
        return Str(node.value)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
        return Compare(_CMPOPS[type(node.ops[0])], _convert(node.left, text), _convert(node.comparators[0], text))
    if isinstance(node, ast.BoolOp):
        return BoolOp("and" if isinstance(node.op, ast.And) else "or", tuple(_convert(v, text) for v in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return BoolOp("not", (_convert(node.operand, text),))
    raise ExprSyntaxError(f"dim expression '{text}' may use only {_ALLOWED}")


def expr_names(expr: Expr) -> set[str]:
    """The dim and attr names an expression reads."""
    if isinstance(expr, Name):
        return {expr.name}
    if isinstance(expr, (BinOp, Compare)):
        return expr_names(expr.left) | expr_names(expr.right)
    if isinstance(expr, (Call, BoolOp)):
        return set().union(*(expr_names(a) for a in expr.args))
    if isinstance(expr, IfExpr):
        return expr_names(expr.cond) | expr_names(expr.then) | expr_names(expr.other)
    return set()


def eval_expr(expr: Expr, env: Mapping[str, Any]) -> Any:
    """Evaluate with sizes (and the attrs conditions read) from env; any unknown (None) operand
    makes the result unknown."""
    if isinstance(expr, (Num, Str)):
        return expr.value
    if isinstance(expr, (Compare, BoolOp, IfExpr)):
        return _eval_condition(expr, env)
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


def _eval_condition(expr: Expr, env: Mapping[str, Any]) -> Any:
    if isinstance(expr, IfExpr):
        cond = eval_expr(expr.cond, env)
        return None if cond is None else eval_expr(expr.then if cond else expr.other, env)
    if isinstance(expr, Compare):
        a, b = eval_expr(expr.left, env), eval_expr(expr.right, env)
        if a is None or b is None:
            return None
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[expr.op]
    values = [eval_expr(a, env) for a in expr.args]
    if any(v is None for v in values):
        return None
    if expr.op == "not":
        return not values[0]
    return all(values) if expr.op == "and" else any(values)


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
    if isinstance(expr, Call):
        return call(expr.fn, [_render(a, name, floordiv, mod, call) for a in expr.args])
    return _render_condition(expr, lambda e: _render(e, name, floordiv, mod, call), cpp=call is _cpp_call)


def _render_condition(expr: Expr, sub: Callable[[Expr], str], cpp: bool) -> str:
    if isinstance(expr, Str):
        return _cpp_string(expr.value) if cpp else repr(expr.value)
    if isinstance(expr, Compare):
        return f"({sub(expr.left)} {expr.op} {sub(expr.right)})"
    if isinstance(expr, IfExpr):
        if cpp:
            return f"({sub(expr.cond)} ? {sub(expr.then)} : {sub(expr.other)})"
        return f"({sub(expr.then)} if {sub(expr.cond)} else {sub(expr.other)})"
    if expr.op == "not":
        return f"(!{sub(expr.args[0])})" if cpp else f"(not {sub(expr.args[0])})"
    joiner = {"and": " && ", "or": " || "}[expr.op] if cpp else f" {expr.op} "
    return "(" + joiner.join(sub(a) for a in expr.args) + ")"


def _cpp_string(value: str) -> str:
    """A C++ string literal (choices are plain text; quotes and backslashes escaped, others as
    octal escapes)."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and ord(ch) < 128:
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
    return 'std::string("' + "".join(out) + '")'


def render_python(expr: Expr, name: Callable[[str], str] = lambda n: n) -> str:
    """The expression as Python source, with each name mapped through `name`."""
    return _render(expr, name, lambda a, b: f"({a} // {b})", lambda a, b: f"({a} % {b})",
                   lambda fn, args: f"{fn}({', '.join(args)})")


def render_cpp(expr: Expr, name: Callable[[str], str]) -> str:
    """The expression as C++ over int64_t, with Python's floor semantics for // and %."""
    return _render(expr, name, lambda a, b: f"opsdk::floordiv({a}, {b})",
                   lambda a, b: f"opsdk::floormod({a}, {b})",
                   _cpp_call)


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
