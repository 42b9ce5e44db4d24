"""Reading the shape of an input or output: dim names, sizes, `...`, free dims (`_`) and dim
expressions (computed for outputs, checked for inputs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .diagnostics import Diagnostics, clip, describe, did_you_mean, is_identifier, name_problem
from .located_yaml import YNode, YScalar
from .shapes import (FREE, ConstDim, EllipsisDim, ExprDim, ExprSyntaxError, FreeDim, SymDim, expr_names,
                     free_dim_name, parse_expr)

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
    if not is_identifier(text) or (attr is not None and attr.type == "int"):
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
    try:
        dim = ExprDim(parse_expr(text), text.strip())
    except ExprSyntaxError as exc:
        d.error(item.line, f"{what}: {exc}")
        return None
    sig.input_exprs.append((what, dim, item.line))
    return dim


def check_input_dims(d: Diagnostics, sig: Signature) -> None:
    """After all inputs: every name of an input expression is a bound dim or an int attr, and no
    free dim's generated name is also the name of a dim or attr."""
    for what, dim, line in sig.input_exprs:
        _check_expr_names(dim, d, sig, what, line, "; name it alone in an input shape to bind it "
                                                   "(an input's expression checks a size, it binds nothing)")
    for tensor in sig.inputs:
        for dim in tensor.shape or ():
            if isinstance(dim, FreeDim) and (dim.name in sig.bound_dims or sig.attr(dim.name)):
                d.error(tensor.location.line, f"input '{tensor.name}': its '_' is dims.{dim.name} to "
                                              f"kernels, and '{dim.name}' also names a dim or attr; rename that one")


def _output_dim(item: YNode, d: Diagnostics, sig: Signature, what: str):
    if isinstance(item, YScalar) and type(item.value) is int:
        return _const(item, d, what)
    if not isinstance(item, YScalar) or item.value is None or isinstance(item.value, (bool, float)):
        d.error(item.line, f"{what}: a dim must be a name, a size >= 0 or an expression, got {describe(item)}")
        return None
    text = item.text.strip()
    if is_identifier(text) and text in sig.bound_dims:
        return SymDim(text)
    try:
        expr = parse_expr(text)
    except ExprSyntaxError as exc:
        d.error(item.line, f"{what}: {exc}")
        return None
    dim = ExprDim(expr, text)
    return dim if _check_expr_names(dim, d, sig, what, item.line) else None


def _check_expr_names(dim: ExprDim, d: Diagnostics, sig: Signature, what: str, line: int, fix: str = "") -> bool:
    """Each name of a dim expression is a dim some input binds or an int attr (else one error)."""
    int_attrs = {a.name for a in sig.attrs if a.type == "int"}
    for name in sorted(expr_names(dim.expr)):
        if name in sig.bound_dims or name in int_attrs:
            continue
        attr = sig.attr(name)
        if attr is not None:
            d.error(line, f"{what}: attr '{name}' is a {attr.type}; dim expressions may use only int attrs")
        else:
            hint = did_you_mean(name, list(sig.bound_dims) + sorted(int_attrs))
            d.derived(line, f"{what} uses dim '{name}' that no input binds{hint}{fix}")
        return False
    return True


def check_output_ellipsis(d: Diagnostics, sig: Signature) -> None:
    """An output's `...` copies the inputs' leading dims, so some input must have them."""
    if sig.has_ellipsis_input:
        return
    for out in sig.outputs:
        if out.has_ellipsis:
            d.derived(out.location.line, f"output '{out.name}' uses '...' but no input has '...'")
