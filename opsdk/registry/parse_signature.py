"""Reading an op's signature: type attrs, attrs, inputs and outputs (with their shapes)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from .attrs import attr_value_problem, yaml_attr_value
from .diagnostics import Diagnostics, clip, describe, did_you_mean, is_identifier, name_problem
from .dtypes import DTYPE_GROUPS, DTYPE_NAMES
from .located_yaml import YEntry, YMap, YNode, YScalar, YSeq
from .shapes import (FREE, ConstDim, EllipsisDim, ExprDim, ExprSyntaxError, FreeDim, SymDim, expr_names,
                     free_dim_name, parse_expr)
from .spec import ATTR_TYPES, NO_DEFAULT, AttrSpec, TensorSpec, TypeAttr

ATTR_KEYS = ("type", "default", "min", "max", "choices", "doc")
TENSOR_KEYS = ("dtype", "shape", "doc", "list")
TYPE_ATTR_KEYS = ("allowed", "default")
_NUMERIC_ATTR_TYPES = ("int", "float", "list(int)", "list(float)")
_VALID_DTYPES = "dtypes are " + ", ".join(DTYPE_NAMES)


@dataclass
class Signature:
    """What the parts of a declaration read so far tell the parts read later."""

    type_attrs: list[TypeAttr] = field(default_factory=list)
    attrs: list[AttrSpec] = field(default_factory=list)
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    has_shape_fn: bool = False
    shape_fn: Optional[str] = None
    bound_dims: dict[str, int] = field(default_factory=dict)  # dim -> line that first bound it
    # Input dim expressions (what, expr, line), checked once every input has bound its dims.
    input_exprs: list[tuple[str, ExprDim, int]] = field(default_factory=list)

    def attr(self, name: str) -> Optional[AttrSpec]:
        return next((a for a in self.attrs if a.name == name), None)

    @property
    def has_ellipsis_input(self) -> bool:
        return any(t.has_ellipsis for t in self.inputs)


# -- type attrs ------------------------------------------------------------------------------------

def parse_type_attrs(node: YNode, d: Diagnostics, sig: Signature) -> None:
    """`type_attrs: {T: [float32, float64], DstT: {allowed: [floats], default: float32}}`."""
    mapping = d.mapping(node, "type_attrs")
    for entry in mapping.entries if mapping else ():
        if not _check_name(entry, d, "type attr"):
            continue
        if entry.key in DTYPE_NAMES or entry.key in DTYPE_GROUPS:
            d.error(entry.key_line, f"type attr '{entry.key}' has the name of a dtype; call it e.g. T")
            continue
        allowed_node, default_node = entry.value, None
        if isinstance(entry.value, YMap):
            keys = d.known_keys(entry.value, TYPE_ATTR_KEYS, f"type attr '{entry.key}'")
            if "allowed" not in keys:
                d.error(entry.value.line, f"type attr '{entry.key}' needs 'allowed: [dtypes]'")
                continue
            allowed_node = keys["allowed"].value
            default_node = keys["default"].value if "default" in keys else None
        allowed = _dtype_list(allowed_node, d, entry.key)
        if allowed is None:
            continue
        default = _type_attr_default(default_node, allowed, d, entry.key)
        sig.type_attrs.append(TypeAttr(entry.key, allowed, d.location(entry.key_line), default))


def _dtype_list(node: YNode, d: Diagnostics, name: str) -> Optional[tuple[str, ...]]:
    seq = d.sequence(node, f"type attr '{name}'")
    if seq is None:
        return None
    allowed: list[str] = []
    ok = True
    for item in seq.items:
        text = d.string(item, f"a dtype of type attr '{name}'")
        if text is None:
            ok = False
        elif text in DTYPE_GROUPS:
            allowed.extend(n for n in DTYPE_GROUPS[text] if n not in allowed)
        elif text in DTYPE_NAMES:
            if text not in allowed:
                allowed.append(text)
        else:
            hint = did_you_mean(text, DTYPE_NAMES + tuple(DTYPE_GROUPS)) or (
                f"; {_VALID_DTYPES} (groups: {', '.join(DTYPE_GROUPS)})")
            d.error(item.line, f"type attr '{name}': unknown dtype '{clip(text)}'{hint}")
            ok = False
    if ok and not allowed:
        d.error(seq.line, f"type attr '{name}' allows no dtype; list at least one")
        return None
    return tuple(allowed) if ok else None


def _type_attr_default(node: Optional[YNode], allowed: tuple[str, ...], d: Diagnostics,
                       name: str) -> Optional[str]:
    if node is None:
        return None
    text = d.string(node, f"the default of type attr '{name}'")
    if text is not None and text not in allowed:
        d.error(node.line, f"type attr '{name}': default '{text}' is not one of its dtypes ({', '.join(allowed)})")
        return None
    return text


# -- attrs -----------------------------------------------------------------------------------------

def parse_attrs(node: YNode, d: Diagnostics, sig: Signature) -> None:
    """`attrs: {k: {type: int, default: 1, min: 1, max: 64, choices: [...], doc: ...}}`."""
    mapping = d.mapping(node, "attrs")
    for entry in mapping.entries if mapping else ():
        if not _check_name(entry, d, "attr"):
            continue
        body = d.mapping(entry.value, f"attr '{entry.key}'")
        if body is None:
            continue
        attr = _parse_attr(entry, body, d)
        if attr is not None:
            sig.attrs.append(attr)


def _parse_attr(entry: YEntry, body: YMap, d: Diagnostics) -> Optional[AttrSpec]:
    name = entry.key
    keys = d.known_keys(body, ATTR_KEYS, f"attr '{name}'")
    if "type" not in keys:
        d.error(body.line, f"attr '{name}' needs a type ({', '.join(ATTR_TYPES)})")
        return None
    type_ = d.string(keys["type"].value, f"the type of attr '{name}'")
    if type_ is not None and type_ not in ATTR_TYPES:
        d.error(keys["type"].value.line,
                f"attr '{name}': unknown type '{type_}'{did_you_mean(type_, ATTR_TYPES)}; "
                f"use one of {', '.join(ATTR_TYPES)}")
        return None
    if type_ is None:
        return None
    errors = d.count()
    bounds = [_bound(keys.get(k), type_, d, name, k) for k in ("min", "max")]
    if None not in bounds and bounds[0] > bounds[1]:
        d.error(keys["max"].value.line, f"attr '{name}': min {bounds[0]:g} is above max {bounds[1]:g}")
    choices = _choices(keys.get("choices"), type_, d, name)
    doc = d.string(keys["doc"].value, f"the doc of attr '{name}'") if "doc" in keys else ""
    attr = AttrSpec(name, type_, NO_DEFAULT, bounds[0], bounds[1], choices, doc or "", d.location(entry.key_line))
    if "default" in keys:
        default = _default(keys["default"].value, attr, d)
        attr = replace(attr, default=default)
    return attr if d.count() == errors else None


def _bound(entry: Optional[YEntry], type_: str, d: Diagnostics, name: str, key: str) -> Optional[float]:
    if entry is None:
        return None
    if type_ not in _NUMERIC_ATTR_TYPES:
        d.error(entry.key_line, f"attr '{name}': '{key}' applies only to int, float and list attrs, not {type_}")
        return None
    value = d.number(entry.value, f"attr '{name}': {key}")
    if value is not None and type_ in ("int", "list(int)") and value == int(value):
        return int(value)
    return value


def _choices(entry: Optional[YEntry], type_: str, d: Diagnostics, name: str) -> Optional[tuple]:
    if entry is None:
        return None
    if type_ not in ("int", "float", "str"):
        d.error(entry.key_line, f"attr '{name}': 'choices' applies only to int, float and str attrs, not {type_}")
        return None
    seq = d.sequence(entry.value, f"attr '{name}': choices")
    if seq is None:
        return None
    values = []
    for item in seq.items:
        value, problem = yaml_attr_value(item, type_)
        if problem:
            d.error(item.line, f"attr '{name}': choice {describe(item)} {problem}")
        else:
            values.append(value)
    if not values and not seq.items:
        d.error(seq.line, f"attr '{name}': choices is empty; list the allowed values")
    return tuple(values)


def _default(node: YNode, attr: AttrSpec, d: Diagnostics):
    value, problem = yaml_attr_value(node, attr.type)
    if problem is None:
        problem = attr_value_problem(attr, value)
    if problem:
        d.error(node.line, f"attr '{attr.name}': default {describe(node)} {problem}")
        return NO_DEFAULT
    return value


# -- inputs and outputs ----------------------------------------------------------------------------

def parse_tensors(node: YNode, d: Diagnostics, sig: Signature, kind: str) -> None:
    """`inputs:` or `outputs:` (kind 'input' or 'output'): name -> {dtype, shape, doc, list}."""
    mapping = d.mapping(node, f"{kind}s")
    for entry in mapping.entries if mapping else ():
        if not _check_name(entry, d, kind):
            continue
        body = d.mapping(entry.value, f"{kind} '{entry.key}'")
        if body is None:
            continue
        tensor = _parse_tensor(entry, body, d, sig, kind)
        if tensor is not None:
            (sig.inputs if kind == "input" else sig.outputs).append(tensor)
    if kind == "input":
        _check_input_dims(d, sig)


def _parse_tensor(entry: YEntry, body: YMap, d: Diagnostics, sig: Signature, kind: str) -> Optional[TensorSpec]:
    name, errors = entry.key, d.count()
    keys = d.known_keys(body, TENSOR_KEYS, f"{kind} '{name}'")
    dtype = None
    if "dtype" not in keys:
        d.error(body.line, f"{kind} '{name}' needs a dtype (a type attr like T, or a dtype like float32)")
    else:
        dtype = _tensor_dtype(keys["dtype"].value, d, sig, f"{kind} '{name}'")
    list_len = _list_len(keys["list"], d, sig, kind, name) if "list" in keys else None
    shape = None
    if "shape" in keys:
        reader = _input_dim if kind == "input" else _output_dim
        shape = _shape(keys["shape"].value, d, sig, f"{kind} '{name}'", reader, name)
    elif kind == "input" and not sig.has_shape_fn:
        d.error(body.line, f"input '{name}' needs a shape (a list like [n, p], or 'any')")
    if kind == "output" and shape is None and not sig.has_shape_fn and d.count() == errors:
        d.error(body.line, f"output '{name}' needs a shape (a list like [n, m]), or give the op a shape_fn")
    doc = d.string(keys["doc"].value, f"the doc of {kind} '{name}'") if "doc" in keys else ""
    if d.count() != errors or dtype is None:
        return None
    return TensorSpec(name, dtype, shape, d.location(entry.key_line), doc or "", list_len)


def _tensor_dtype(node: YNode, d: Diagnostics, sig: Signature, what: str) -> Optional[str]:
    text = d.string(node, f"the dtype of {what}")
    if text is None:
        return None
    type_attrs = [t.name for t in sig.type_attrs]
    if text in type_attrs or text in DTYPE_NAMES:
        return text
    if text in DTYPE_GROUPS:
        d.error(node.line, f"{what}: dtype '{text}' is a group; declare a type attr "
                           f"(type_attrs: {{T: [{text}]}}) and write dtype: T")
    elif did_you_mean(text, DTYPE_NAMES):
        d.error(node.line, f"{what}: unknown dtype '{text}'{did_you_mean(text, DTYPE_NAMES)}")
    else:
        # A lower-case word was meant as a dtype name (type attrs are written like T): list them.
        hint = did_you_mean(text, type_attrs) or (f"; {_VALID_DTYPES}" if text.islower() else "")
        d.derived(node.line, f"{what}: dtype '{clip(text)}' is neither a type attr nor a dtype name "
                             f"(declare it under type_attrs){hint}")
    return None


def _list_len(entry: YEntry, d: Diagnostics, sig: Signature, kind: str, name: str) -> Optional[str]:
    n = d.string(entry.value, f"{kind} '{name}': list")
    if n is None or not _valid_name(n):
        if n is not None:
            d.error(entry.value.line, f"{kind} '{name}': list takes the name of an int attr (like N), got '{n}'")
        return None
    attr = sig.attr(n)
    if attr is not None and attr.type != "int":
        d.error(entry.value.line, f"{kind} '{name}': list length '{n}' is a {attr.type} attr; it must be an int attr")
        return None
    if attr is None and kind == "output":
        d.error(entry.value.line, f"output '{name}': list length '{n}' is no int attr "
                                  f"(use the N of a list input, or declare an int attr)")
        return None
    if attr is None:
        sig.attrs.append(AttrSpec(n, "int", NO_DEFAULT, 1, None, None, f"the number of tensors in '{name}'",
                                  d.location(entry.value.line)))
    return n


def _shape(node: YNode, d: Diagnostics, sig: Signature, what: str, reader, tensor: str) -> Optional[tuple]:
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
            dim = _free_dim(item, d, what, tensor, len([x for x in dims if not isinstance(x, EllipsisDim)]),
                            reader is _input_dim)
        else:
            dim = reader(item, d, sig, what)
        if dim is not None:
            dims.append(dim)
    return tuple(dims)


def _free_dim(item: YScalar, d: Diagnostics, what: str, tensor: str, index: int,
              is_input: bool) -> Optional[FreeDim]:
    """`_`: fixes the rank, not the size (the kernel reads it as dims.<input>_<k>)."""
    if is_input:
        return FreeDim(free_dim_name(tensor, index))
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
    problem = name_problem(text)
    if problem:
        d.error(item.line, f"{what}: dim name '{clip(text)}' {problem}; choose another")
        return None
    attr = sig.attr(text) if _valid_name(text) else None
    if not _valid_name(text) or (attr is not None and attr.type == "int"):
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


def _check_input_dims(d: Diagnostics, sig: Signature) -> None:
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
    if _valid_name(text) and text in sig.bound_dims:
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


# -- names -----------------------------------------------------------------------------------------

_RESERVED = ("name",)


def _valid_name(text: str) -> bool:
    return is_identifier(text)


def _check_name(entry: YEntry, d: Diagnostics, kind: str) -> bool:
    problem = name_problem(entry.key)
    if problem:
        d.error(entry.key_line, f"{kind} name '{clip(entry.key)}' {problem}; choose another")
        return False
    if not _valid_name(entry.key):
        d.error(entry.key_line, f"{kind} name '{entry.key}' must be an identifier like x or grad_x "
                                f"(letters, digits, _; not a Python or C++ keyword)")
        return False
    if entry.key in _RESERVED:
        d.error(entry.key_line, f"{kind} name '{entry.key}' is reserved (it names the node); choose another")
        return False
    return True
