"""Reading the shape of an input or output: dim names, sizes, `...`, free dims (`_`) and dim
expressions (computed for outputs, checked for inputs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .diagnostics import Diagnostics, clip, describe, did_you_mean, is_identifier, name_problem
from .located_yaml import YNode, YScalar
from .shapes import (FREE, BinOp, BoolOp, Call, Compare, ConstDim, EllipsisDim, Expr, ExprDim, ExprSyntaxError,
                     FreeDim, IfExpr, Name, Str, SymDim, expr_names, free_dim_name, parse_expr)

if TYPE_CHECKING:  # parse_signature imports this module
    from .parse_signature import Signature


def read_shape(node: YNode, d: Diagnostics, sig: Signature, kind: str, tensor: str) -> Optional[tuple]:
    """The shape of input or output (kind) `tensor`: a list of dims, or None for `any`."""
    what, reader = f"{kind} '{tensor}'", (_input_dim if kind == "input" else _output_dim)
    if isinstance(node, YScalar) and node.value == "any":
        return None
    seq = d.sequence(node, f"the shape of {what} (like [n, p], or 'any')")
    if seq is None:
        return None
    dims: list = []
    for index, item in enumerate(seq.items):
        if isinstance(item, YScalar) and item.value == "...":
            if index != 0:
                d.error(item.line, f"{what}: '...' may only lead a shape, as in [..., n]")
            else:
                dims.append(EllipsisDim())
            continue
        if isinstance(item, YScalar) and item.value == FREE:
            k = len([x for x in dims if not isinstance(x, EllipsisDim)])
            dim = _free_dim(item, d, what, free_dim_name(tensor, k), kind == "input")
        else:
            dim = reader(item, d, sig, what)
        if dim is not None:
            dims.append(dim)
    return tuple(dims)


def _free_dim(item: YScalar, d: Diagnostics, what: str, name: str, is_input: bool) -> Optional[FreeDim]:
    """`_`: fixes the rank, not the size (the kernel reads it as dims.<input>_<k>)."""
    if is_input:
        return FreeDim(name)
    d.error(item.line, f"{what}: '_' (a free dim) may stand only in input shapes: the glue allocates "
                       f"outputs, so each output size must follow from input dims and int attrs; "
                       f"name the dim in an input and write that name here")
    return None


def _const(item: YScalar, d: Diagnostics, what: str) -> Optional[ConstDim]:
    if item.value < 0:
        d.error(item.line, f"{what}: a size must be >= 0, got {item.value}")
        return None
    return ConstDim(item.value)


def _input_dim(item: YNode, d: Diagnostics, sig: Signature, what: str):
    if isinstance(item, YScalar) and type(item.value) is int:
        return _const(item, d, what)
    text = item.text if isinstance(item, YScalar) and item.value is not None else None
    if text is None or isinstance(item.value, float):
        d.error(item.line, f"{what}: a dim must be a name or a size >= 0, got {describe(item)}")
        return None
    problem = name_problem(text) if text.isidentifier() else None  # an expression is no name
    if problem:
        d.error(item.line, f"{what}: dim name '{clip(text)}' {problem}; choose another")
        return None
    attr = sig.attr(text) if is_identifier(text) else None
    if not is_identifier(text) or (attr is not None and attr.type == "int") or text in sig.derived:
        # An expression, or an int attr's name: the size that axis must have, not a dim to bind.
        return _input_expr(item, d, sig, what, text)
    if attr is not None:
        d.error(item.line, f"{what}: dim '{text}' has the name of {attr.type} attr '{text}'; rename one "
                           f"(only int attrs may give sizes)")
        return None
    sig.bound_dims.setdefault(text, item.line)
    return SymDim(text)


def _input_expr(item: YScalar, d: Diagnostics, sig: Signature, what: str, text: str) -> Optional[ExprDim]:
    """`"n + 1"` in an input shape: the size that axis must have. Its names are checked once
    every input is read (_check_input_dims), as a later input may bind them."""
    if text in sig.derived:
        return ExprDim(Name(text), text)
    try:
        dim = ExprDim(parse_expr(text), text.strip())
    except ExprSyntaxError as exc:
        d.error(item.line, f"{what}: {exc}")
        return None
    sig.input_exprs.append((what, dim, item.line))
    return dim


def parse_named_dims(node: YNode, d: Diagnostics, sig: Signature) -> None:
    """`dims: {oh: "(h - k) // stride + 1", ...}`: named derived dims, read before the inputs (so
    a shape naming one checks that size instead of binding it); their names are checked once every
    input is read (check_input_dims)."""
    mapping = d.mapping(node, "dims (a mapping like {oh: \"(h - k) // stride + 1\"})")
    for entry in mapping.entries if mapping else ():
        problem = name_problem(entry.key)
        if problem or not is_identifier(entry.key):
            d.error(entry.key_line, f"dim name '{clip(entry.key)}' {problem or 'must be an identifier'}; choose another")
            continue
        if sig.attr(entry.key) is not None:
            d.error(entry.key_line, f"dim '{entry.key}' has the name of attr '{entry.key}'; rename one")
            continue
        value = entry.value
        if not isinstance(value, YScalar) or value.value is None or isinstance(value.value, (bool, float)):
            d.error(value.line, f"dim '{entry.key}': expected a dim expression (like \"(h - k) // stride + 1\"), "
                                f"got {describe(value)}")
            continue
        try:
            expr = parse_expr(value.text)
        except ExprSyntaxError as exc:
            d.error(value.line, f"dim '{entry.key}': {exc}")
            continue
        sig.derived[entry.key] = (ExprDim(expr, value.text.strip()), value.line)


def parse_requires(node: YNode, d: Diagnostics, sig: Signature) -> tuple:
    """`requires: ["extra_h < stride_h", ...]`: conditions on attrs alone (int attrs, bool attrs,
    choice attrs compared with one of their choices), each kept with its line."""
    from .spec import Requirement

    if isinstance(node, YScalar):
        items: tuple = (node,)
    else:
        seq = d.sequence(node, 'requires (a list of conditions like "extra_h < stride_h")')
        items = seq.items if seq else ()
    found = []
    for item in items:
        text = d.string(item, "a requirement")
        if text is None:
            continue
        try:
            expr = parse_expr(text)
        except ExprSyntaxError as exc:
            d.error(item.line, f"requires: {str(exc).replace('dim expression', 'condition')}")
            continue
        problem = _requirement_problem(expr, sig)
        if problem:
            d.error(item.line, f"requires: '{clip(text.strip())}' {problem}")
            continue
        found.append(Requirement(expr, text.strip(), d.location(item.line)))
    return tuple(found)


def _requirement_problem(expr: Expr, sig: Signature) -> Optional[str]:
    """Why `expr` cannot be a requirement: it reads something but attrs, or is no condition."""
    if not isinstance(expr, (Compare, BoolOp)) and not (
            isinstance(expr, Name) and getattr(sig.attr(expr.name), "type", None) == "bool"):
        return "is not a condition: write a comparison (extra_h < stride_h), joined by and/or/not"
    others = sorted(n for n in expr_names(expr) if sig.attr(n) is None)
    if others:
        return (f"reads '{others[0]}', which is not an attr of the op: a requirement reads attrs "
                f"only (a kernel checks what depends on input sizes)")
    problem = _expr_problem(expr, sig, set(), True)
    return problem[1] if problem and problem[0] == "error" else None


def check_input_dims(d: Diagnostics, sig: Signature) -> None:
    """After all inputs: every name of an input expression or named dim is a bound dim or an int
    attr (a named dim may read those named before it), and no free dim's generated name is also
    the name of a dim or attr."""
    before: set = set()
    for name, (dim, line) in sig.derived.items():
        if name in sig.bound_dims:
            d.error(line, f"dim '{name}' is named under dims: and bound by an input; rename one")
        _check_expr_names(dim, d, sig, f"dim '{name}'", line, "; name it alone in an input shape to bind it",
                          derived_before=set(before))
        before.add(name)
    for what, dim, line in sig.input_exprs:
        _check_expr_names(dim, d, sig, what, line, "; name it alone in an input shape to bind it "
                                                   "(an input's expression checks a size, it binds nothing)")
    for tensor in sig.inputs:
        for dim in tensor.shape or ():
            if isinstance(dim, FreeDim) and (dim.name in sig.bound_dims or sig.attr(dim.name)
                                             or dim.name in sig.derived):
                d.error(tensor.location.line, f"input '{tensor.name}': its '_' is dims.{dim.name} to "
                                              f"kernels, and '{dim.name}' also names a dim or attr; rename that one")


def _output_dim(item: YNode, d: Diagnostics, sig: Signature, what: str):
    if isinstance(item, YScalar) and type(item.value) is int:
        return _const(item, d, what)
    if not isinstance(item, YScalar) or item.value is None or isinstance(item.value, (bool, float)):
        d.error(item.line, f"{what}: a dim must be a name, a size >= 0 or an expression, got {describe(item)}")
        return None
    text = item.text.strip()
    if text in sig.derived:
        return ExprDim(Name(text), text)
    if is_identifier(text) and text in sig.bound_dims:
        if sig.optional_only(text):
            d.error(item.line, f"{what}: {_optional_only_text(sig, text)}")
            return None
        return SymDim(text)
    try:
        expr = parse_expr(text)
    except ExprSyntaxError as exc:
        d.error(item.line, f"{what}: {exc}")
        return None
    dim = ExprDim(expr, text)
    return dim if _check_expr_names(dim, d, sig, what, item.line) else None


def _check_expr_names(dim: ExprDim, d: Diagnostics, sig: Signature, what: str, line: int, fix: str = "",
                      derived_before: Optional[set] = None) -> bool:
    """Each name of a dim expression is a dim some input binds, a named dim (`dims:`; for a
    named dim, one defined before it) or an int attr; a condition may also test a bool attr or
    compare a choice attr with one of its choices (else one error)."""
    derived = set(sig.derived) if derived_before is None else derived_before
    problem = _expr_problem(dim.expr, sig, derived, condition=False)
    if problem is None:
        return True
    kind, text = problem
    if kind == "optional":
        d.error(line, f"{what}: {_optional_only_text(sig, text)}")
    elif kind == "unbound":
        int_attrs = [a.name for a in sig.attrs if a.type == "int"]
        hint = did_you_mean(text, list(sig.bound_dims) + sorted(derived) + sorted(int_attrs))
        d.derived(line, f"{what} uses dim '{text}' that no input binds{hint}{fix}")
    else:
        d.error(line, f"{what}: {text}")
    return False


def _expr_problem(expr: Expr, sig: Signature, derived: set, condition: bool) -> Optional[tuple[str, str]]:
    """("unbound", name) or ("error", message) for the first misuse in `expr`, else None.
    `condition`: expr stands where a truth value is read (the test of `a if cond else b`)."""
    if isinstance(expr, Name):
        return _name_problem(expr.name, sig, derived, condition)
    if isinstance(expr, Str):
        return ("error", f"the string '{clip(expr.value)}' may stand only in a comparison with a "
                         f"choice attr (padding == '{clip(expr.value)}')")
    if isinstance(expr, Compare) and (isinstance(expr.left, Str) or isinstance(expr.right, Str)):
        return _choice_compare_problem(expr, sig)
    if isinstance(expr, BoolOp):
        return _first(_expr_problem(a, sig, derived, True) for a in expr.args)
    if isinstance(expr, IfExpr):
        return _first([_expr_problem(expr.cond, sig, derived, True), _expr_problem(expr.then, sig, derived, False),
                       _expr_problem(expr.other, sig, derived, False)])
    if isinstance(expr, (BinOp, Compare)):
        return _first(_expr_problem(a, sig, derived, False) for a in (expr.left, expr.right))
    if isinstance(expr, Call):
        return _first(_expr_problem(a, sig, derived, False) for a in expr.args)
    return None


def _first(problems) -> Optional[tuple[str, str]]:
    return next((p for p in problems if p is not None), None)


def _name_problem(name: str, sig: Signature, derived: set, condition: bool) -> Optional[tuple[str, str]]:
    attr = sig.attr(name)
    if attr is None and sig.optional_only(name) and name not in derived:
        return ("optional", name)
    if attr is None:
        return None if name in sig.bound_dims or name in derived else ("unbound", name)
    if attr.type == "int" or (attr.type == "bool" and condition):
        return None
    if attr.type == "bool":
        return ("error", f"bool attr '{name}' may stand only as a condition ('a if {name} else b')")
    if attr.type == "str" and attr.choices:
        return ("error", f"str attr '{name}' may stand only in a comparison with one of its choices "
                         f"({name} == '{attr.choices[0]}')")
    return ("error", f"attr '{name}' is a {attr.type}; dim expressions may use only int attrs "
                     f"(and, in conditions, bool attrs and str attrs with choices)")


def _choice_compare_problem(expr: Compare, sig: Signature) -> Optional[tuple[str, str]]:
    """`padding == 'same'`: a choice attr, == or !=, and one of its choices."""
    name, literal = (expr.left, expr.right) if isinstance(expr.right, Str) else (expr.right, expr.left)
    attr = sig.attr(name.name) if isinstance(name, Name) else None
    if attr is None or attr.type != "str" or not attr.choices or not isinstance(literal, Str):
        return ("error", f"a string ('{clip(getattr(literal, 'value', ''))}') may be compared only with a "
                         f"str attr that has choices")
    if expr.op not in ("==", "!="):
        return ("error", f"str attr '{attr.name}' may be compared only with == or !=, not {expr.op}")
    if literal.value not in attr.choices:
        hint = did_you_mean(literal.value, [str(c) for c in attr.choices])
        return ("error", f"'{clip(literal.value)}' is not a choice of attr '{attr.name}' "
                         f"({', '.join(map(str, attr.choices))}){hint}")
    return None


def _optional_only_text(sig: Signature, name: str) -> str:
    owner = sig.optional_only(name)
    return (f"dim '{name}' is bound only by optional input '{owner}', so it has no size when "
            f"'{owner}' is absent; bind '{name}' in a required input too, or compute this size "
            f"from the required inputs' dims and int attrs")


def check_output_ellipsis(d: Diagnostics, sig: Signature) -> None:
    """An output's `...` copies the inputs' leading dims, so some (required) input must have them.
    Optional inputs alone may not share them either: the one that binds them may be absent."""
    if any(t.has_ellipsis and not t.optional for t in sig.inputs):
        return
    optional = [t for t in sig.inputs if t.has_ellipsis]
    if len(optional) > 1:
        d.error(optional[1].location.line, f"input '{optional[1].name}': '...' is shared only by "
                                           f"optional inputs ({', '.join(t.name for t in optional)}), "
                                           f"one of which may be absent; give a required input '...' too")
    for out in sig.outputs:
        if not out.has_ellipsis:
            continue
        if sig.has_ellipsis_input:
            d.error(out.location.line, f"output '{out.name}' uses '...', which only optional inputs "
                                       f"have (absent, they give no leading dims); give a required "
                                       f"input '...' too")
        else:
            d.derived(out.location.line, f"output '{out.name}' uses '...' but no input has '...'")
