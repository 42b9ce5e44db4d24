"""Reading an op's signature: type attrs, attrs, inputs and outputs (with their shapes)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from .attrs import attr_value_problem, yaml_attr_value
from .diagnostics import Diagnostics, clip, describe, did_you_mean, is_identifier, name_problem
from .dtypes import DTYPE_GROUPS, DTYPE_NAMES
from .located_yaml import YEntry, YMap, YNode
from .parse_shape import check_input_dims, read_shape
from .parse_shape import check_output_ellipsis as check_output_ellipsis  # parse.py reads it here
from .shapes import ExprDim, SymDim
from .spec import ATTR_TYPES, NO_DEFAULT, AttrSpec, TensorSpec, TypeAttr

ATTR_KEYS = ("type", "default", "min", "max", "choices", "doc")
TENSOR_KEYS = ("dtype", "shape", "doc", "list", "inplace", "optional", "shape_only")
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
    # `dims:` of the declaration: name -> (its expression, line), in declaration order.
    derived: dict[str, tuple[ExprDim, int]] = field(default_factory=dict)
    # Dims some required input binds; a dim only optional inputs bind -> the first such input.
    required_dims: set[str] = field(default_factory=set)
    optional_binders: dict[str, str] = field(default_factory=dict)

    def optional_only(self, name: str) -> Optional[str]:
        """The optional input that alone binds dim `name`, or None."""
        return None if name in self.required_dims else self.optional_binders.get(name)

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
        check_input_dims(d, sig)


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
        shape = read_shape(keys["shape"].value, d, sig, kind, name)
    elif kind == "input" and not sig.has_shape_fn:
        d.error(body.line, f"input '{name}' needs a shape (a list like [n, p], or 'any')")
    if kind == "output" and shape is None and not sig.has_shape_fn and d.count() == errors:
        d.error(body.line, f"output '{name}' needs a shape (a list like [n, m]), or give the op a shape_fn")
    doc = d.string(keys["doc"].value, f"the doc of {kind} '{name}'") if "doc" in keys else ""
    inplace = _inplace(keys["inplace"].value, d, sig, kind, name, dtype) if "inplace" in keys else ()
    optional = _optional(keys["optional"], d, kind, name, list_len) if "optional" in keys else False
    shape_only = _shape_only(keys["shape_only"], d, kind, name) if "shape_only" in keys else False
    if kind == "input":
        _record_binders(sig, name, shape, optional)
    if d.count() != errors or dtype is None:
        return None
    return TensorSpec(name, dtype, shape, d.location(entry.key_line), doc or "", list_len,
                      inplace, optional, shape_only)


def _shape_only(entry: YEntry, d: Diagnostics, kind: str, name: str) -> bool:
    """`shape_only: true` on an input: the kernel reads its shape and dtype, never its values."""
    value = d.boolean(entry.value, f"{kind} '{name}': shape_only")
    if value and kind != "input":
        d.error(entry.key_line, f"output '{name}': only an input may be shape_only (the kernel "
                                f"reads that input's shape alone); remove 'shape_only'")
        return False
    return bool(value)


def _optional(entry: YEntry, d: Diagnostics, kind: str, name: str, list_len: Optional[str]) -> bool:
    """`optional: true` on an input: the caller may pass None (PyTorch's `Tensor?`)."""
    value = d.boolean(entry.value, f"{kind} '{name}': optional")
    if not value:
        return False
    if kind != "input":
        d.error(entry.key_line, f"output '{name}': only an input may be optional (outputs are "
                                f"always computed); remove 'optional'")
        return False
    if list_len is not None:
        d.error(entry.key_line, f"input '{name}': a list input cannot be optional; declare its "
                                f"length attr with min: 0 ({list_len}: {{type: int, min: 0}}) so "
                                f"the list may be empty")
        return False
    return True


def _record_binders(sig: Signature, name: str, shape: Optional[tuple], optional: bool) -> None:
    """Which dims a required input binds, and which only an optional one does (so far)."""
    for dim in shape or ():
        if isinstance(dim, SymDim):
            if optional:
                sig.optional_binders.setdefault(dim.name, name)
            else:
                sig.required_dims.add(dim.name)


def _inplace(node: YNode, d: Diagnostics, sig: Signature, kind: str, name: str,
             dtype: Optional[str]) -> tuple[str, ...]:
    """`inplace: [x, y]`: the inputs whose buffer output `name` may be written into."""
    if kind != "output":
        d.error(node.line, f"input '{name}': only an output may say 'inplace'")
        return ()
    names = _strings(node, d, name)
    inputs = {t.name: t for t in sig.inputs}
    for n in names or ():
        t = inputs.get(n)
        if t is None:
            d.error(node.line, f"output '{name}': inplace names '{n}', which is not an input "
                               f"(inputs: {', '.join(inputs) or 'none'})")
        elif t.is_list or t.dtype != dtype:
            d.error(node.line, f"output '{name}': inplace input '{n}' must be a single tensor of "
                               f"the output's dtype ({dtype})")
    return tuple(names or ())


def _strings(node: YNode, d: Diagnostics, name: str) -> Optional[list[str]]:
    values = getattr(node, "items", None)
    if values is None or not all(isinstance(getattr(v, "value", None), str) for v in values):
        d.error(node.line, f"output '{name}': inplace is a list of input names, like [x]")
        return None
    return [v.value for v in values]


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
