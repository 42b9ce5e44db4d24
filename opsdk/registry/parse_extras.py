"""Reading the parts of a declaration around its signature: kernels, shape_fn, gradcheck, reference."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any, Optional, Sequence

from .attrs import attr_value_problem, yaml_attr_value
from .diagnostics import Diagnostics, clip, describe, did_you_mean, is_identifier
from .located_yaml import YEntry, YMap, YNode, YScalar, YSeq
from .parse_launch import parse_launches
from .parse_signature import Signature
from .shapes import SymDim
from .spec import DEVICES, AttrSpec, GradCheckSpec, KernelSpec, TensorSpec

GRADCHECK_KEYS = ("rtol", "atol", "domain", "avoid", "min_gap", "dims", "max_examples", "eps", "enabled",
                  "attrs", "stress_dims", "stress_sizes", "max_combinations")
MAX_STRESS_SIZE = 512  # a stressed dim of a few hundred already passes every SIMD width and tile
_SOURCE_SUFFIXES = {"cpu": (".cc", ".cpp", ".cxx"), "cuda": (".cu",)}
# What `#include "path"` cannot carry: its closing quote, backslashes (not escapes there, and
# implementation-defined) and line breaks or other controls.
_UNINCLUDABLE = re.compile(r'["\\\x00-\x1f\x7f]')


class Paths:
    """The folders that relative paths in one declaration file are read against."""

    def __init__(self, declaration: Path, workspace_root: Path):
        self.root = workspace_root.resolve()
        self.folder = declaration.resolve().parent

    def relative(self, text: str, line: int, d: Diagnostics, what: str) -> Optional[str]:
        """`text` (relative to the declaration's folder) as a path relative to the workspace root,
        reporting a path outside the workspace or a missing file."""
        # normpath, not resolve(): one lexical step per path keeps loading ~80 ops fast.
        target = Path(os.path.normpath(self.folder / text))
        try:
            shown = target.relative_to(self.root).as_posix()
        except ValueError:
            d.error(line, f"{what} '{text}' lies outside the workspace {self.root}; keep it under opdefs/")
            return None
        if not target.is_file():
            d.error(line, f"{what} '{shown}' does not exist (create it, or fix the path: it is relative "
                          f"to the declaration's folder)")
            return None
        return shown


def parse_kernels(node: YNode, d: Diagnostics, paths: Paths,
                  sig: Optional[Signature] = None) -> tuple[KernelSpec, ...]:
    """`kernels: {cpu: x_cpu.cc, cuda: x_cuda.cu, python: kernels.py:x}`; the cuda kernel may also
    be `{source: x_cuda.cu, launch: [...]}` (opsdk.registry.parse_launch)."""
    mapping = d.mapping(node, "kernels")
    if mapping is None:
        return ()
    if not mapping.entries:
        d.error(mapping.line, f"kernels is empty; give at least one of {', '.join(DEVICES)}")
    kernels = []
    for entry in mapping.entries:
        if entry.key not in DEVICES:
            d.error(entry.key_line, f"unknown kernel device '{entry.key}'{did_you_mean(entry.key, DEVICES)}; "
                                    f"devices are {', '.join(DEVICES)}")
            continue
        value, launches = entry.value, ()
        if entry.key == "cuda" and isinstance(value, YMap):
            value, launches = _cuda_mapping(value, d, sig)
            if value is None:
                continue
        text = d.string(value, f"the {entry.key} kernel")
        if text is None:
            continue
        line = value.line
        if entry.key == "python":
            source = callable_ref(text, line, d, paths, "python kernel")
        elif not text.endswith(_SOURCE_SUFFIXES[entry.key]):
            d.error(line, f"a {entry.key} kernel must be a {' or '.join(_SOURCE_SUFFIXES[entry.key])} file, "
                          f"got '{text}'")
            source = None
        else:
            source = paths.relative(text, line, d, f"{entry.key} kernel file")
            if source is not None and _UNINCLUDABLE.search(source):
                d.error(line, f"{entry.key} kernel file path {source!r} holds a quote, a backslash or a "
                              f"control character, which the generated #include cannot name; rename the "
                              f"file or its folder")
                source = None
        if source is not None:
            kernels.append(KernelSpec(entry.key, source, d.location(entry.key_line), launches))
    return tuple(kernels)


def _cuda_mapping(node: YMap, d: Diagnostics, sig: Optional[Signature]) -> tuple[Optional[YNode], tuple]:
    """`cuda: {source: x_cuda.cu, launch: [...]}` -> (the source's node, the launches)."""
    keys = d.known_keys(node, ("source", "launch"), "the cuda kernel")
    if "source" not in keys:
        d.error(node.line, "the cuda kernel misses 'source' (the .cu file holding its __global__ functions)")
        return None, ()
    launches = ()
    if "launch" not in keys:
        d.error(node.line, "the cuda kernel misses 'launch'; without launches write it as "
                           "`cuda: file.cu` with the host function cuda() in the file")
    elif sig is not None:
        launches = parse_launches(keys["launch"].value, d, sig)
    return keys["source"].value, launches


def callable_ref(text: str, line: int, d: Diagnostics, paths: Paths, what: str) -> Optional[str]:
    """`file.py:function`, the file made relative to the workspace root.

    Only files of the workspace: a module name would import whatever is installed under it
    (`shape_fn: "this:x"` would run `this`), code that is not the workspace's (docs/trust.md).
    """
    parts = text.strip().split(":")
    if len(parts) != 2 or not parts[0] or not is_identifier(parts[1]):
        d.error(line, f"{what} '{clip(text)}' must be 'file.py:function' (a file of the workspace, relative "
                      f"to the declaration's folder)")
        return None
    module, function = parts
    if not module.endswith(".py"):
        d.error(line, f"{what} '{clip(text)}' names a module, not a file: a {what} resolves only to a .py "
                      f"file inside the workspace; write 'file.py:{function}'")
        return None
    relative = paths.relative(module, line, d, f"{what} file")
    return None if relative is None else f"{relative}:{function}"


def parse_shape_fn(node: YNode, d: Diagnostics, paths: Paths) -> Optional[str]:
    """A name in SHAPE_FNS, or a `file.py:function` reference (resolved lazily)."""
    text = d.string(node, "shape_fn")
    if text is None:
        return None
    if ":" in text:
        return callable_ref(text, node.line, d, paths, "shape_fn")
    from .shape_fns import SHAPE_FNS  # filled by the builtin library; read at parse time

    if text not in SHAPE_FNS:
        d.error(node.line, f"unknown shape_fn '{text}'{did_you_mean(text, SHAPE_FNS)}; use a name from "
                           f"opsdk.registry.SHAPE_FNS, or 'file.py:function'")
        return None
    return text


def parse_reference(node: YNode, d: Diagnostics) -> Optional[str]:
    """A NumPy expression over the inputs and attrs; only its syntax can be checked here."""
    text = d.string(node, "reference")
    if text is None:
        return None
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        d.error(node.line, f"reference is not a Python expression: {exc.msg} (column {exc.offset})")
        return None
    return text


def parse_example(node: YNode, d: Diagnostics, inputs: Sequence[TensorSpec],
                  attrs: Sequence[AttrSpec] = ()) -> tuple:
    """`example: {input: value, attr: value}`: values the docstring example gives those inputs
    instead of random draws (numbers, or nested lists of them), for inputs whose values must
    agree with each other, as a shape does with the tensor it reshapes; and values it gives
    attrs instead of their defaults (an einsum's equation), checked like a default.
    ((name, value), ...)."""
    mapping = d.mapping(node, "example")
    if mapping is None:
        return ()
    names = {t.name: t for t in inputs}
    lengths = {t.list_len for t in inputs if t.is_list}
    declared = {a.name: a for a in attrs if a.name not in lengths}
    out = []
    for entry in mapping.entries:
        tensor = names.get(entry.key)
        if tensor is None and entry.key in declared:
            attr = declared[entry.key]
            value, problem = yaml_attr_value(entry.value, attr.type)
            if problem is None:
                problem = attr_value_problem(attr, value)
            if problem:
                d.error(entry.value.line, f"example: attr '{attr.name}': {_shown(entry.value)} "
                                          f"{problem}")
            else:
                out.append((entry.key, value))
            continue
        if tensor is None or tensor.is_list:
            given = [n for n, t in names.items() if not t.is_list] + list(declared)
            d.error(entry.key_line, f"example: '{entry.key}' is neither an input (not a list) nor "
                                    f"an attr of the op (give values for {', '.join(given)})")
            continue
        value = _example_value(entry.value)
        if value is None:
            d.error(entry.key_line, f"example: input '{entry.key}' must be a number or a nested list "
                                    "of numbers, e.g. [3, 2]")
            continue
        out.append((entry.key, value))
    return tuple(out)


def _example_value(node: YNode) -> Any:
    if isinstance(node, YScalar):
        value = node.value
        return value if isinstance(value, (int, float)) else None
    if isinstance(node, YSeq):
        items = [_example_value(item) for item in node.items]
        return None if any(v is None for v in items) else tuple(items)
    return None


def parse_gradcheck(node: YNode, d: Diagnostics, attrs: Sequence[AttrSpec] = (),
                    inputs: Sequence[TensorSpec] = ()) -> GradCheckSpec:
    """`gradcheck: {rtol, atol, domain: [lo, hi], avoid: [...], min_gap, dims: [lo, hi], ...,
    attrs: {name: [values]}}`; `attrs` and `inputs` are the op's, which the listed values must fit."""
    mapping = d.mapping(node, "gradcheck")
    if mapping is None:
        return GradCheckSpec()
    keys = d.known_keys(mapping, GRADCHECK_KEYS, "gradcheck")
    values: dict = {"location": d.location(mapping.line)}
    for key in ("rtol", "atol", "min_gap"):
        if key in keys:
            values[key] = d.number(keys[key].value, f"gradcheck {key}", minimum=0.0)
    if "eps" in keys:
        values["eps"] = _positive(keys["eps"].value, d, "gradcheck eps")
    if "max_examples" in keys:
        values["max_examples"] = d.integer(keys["max_examples"].value, "gradcheck max_examples", minimum=1)
    if "max_combinations" in keys:
        values["max_combinations"] = d.integer(keys["max_combinations"].value, "gradcheck max_combinations",
                                               minimum=0)
    if "enabled" in keys:
        values["enabled"] = d.boolean(keys["enabled"].value, "gradcheck enabled")
    if "domain" in keys:
        values["domain"] = _pair(keys["domain"].value, d, "gradcheck domain", integer=False)
    if "dims" in keys:
        values["dim_range"] = _pair(keys["dims"].value, d, "gradcheck dims", integer=True)
    if "avoid" in keys:
        values["avoid"] = _numbers(keys["avoid"].value, d, "gradcheck avoid")
    if "attrs" in keys:
        values["attr_values"] = _attr_values(keys["attrs"].value, d, attrs, inputs)
    if "stress_dims" in keys:
        values["stress_dims"] = _stress_dims(keys["stress_dims"].value, d, inputs)
    if "stress_sizes" in keys:
        values["stress_sizes"] = _stress_sizes(keys["stress_sizes"].value, d)
    return GradCheckSpec(**{k: v for k, v in values.items() if v is not None})


def _attr_values(node: YNode, d: Diagnostics, attrs: Sequence[AttrSpec],
                 inputs: Sequence[TensorSpec]) -> Optional[tuple[tuple[str, tuple], ...]]:
    """`attrs: {axes: [[], [0]], keepdims: [true, false]}`: each value checked like a default
    (type, bounds, choices), so the checker only ever passes values the declaration allows."""
    mapping = d.mapping(node, "gradcheck attrs")
    if mapping is None:
        return None
    declared = {a.name: a for a in attrs}
    lengths = {t.list_len: t.name for t in inputs if t.is_list}
    listed = []
    for entry in mapping.entries:
        attr = declared.get(entry.key)
        if entry.key in lengths:
            d.error(entry.key_line, f"gradcheck attrs: '{entry.key}' is the length of list input "
                                    f"'{lengths[entry.key]}', drawn from its bounds; remove it")
        elif attr is None:
            known = [a for a in declared if a not in lengths]
            hint = f"; its attrs are {', '.join(known)}" if known else "; the op declares no attrs"
            d.error(entry.key_line, f"gradcheck attrs: '{entry.key}' is not an attr of the op"
                                    f"{did_you_mean(entry.key, known)}{hint}")
        else:
            values = _values_of(entry, attr, d)
            if values is not None:
                listed.append((attr.name, values))
    return tuple(listed)


def _values_of(entry: YEntry, attr: AttrSpec, d: Diagnostics) -> Optional[tuple]:
    what = f"gradcheck attrs: '{attr.name}'"
    if not isinstance(entry.value, YSeq):
        d.error(entry.value.line, f"{what} must be a list of values to draw from, got {describe(entry.value)}")
        return None
    if not entry.value.items:
        d.error(entry.value.line, f"{what} lists no values; give at least one, or remove it")
        return None
    values, errors = [], d.count()
    for item in entry.value.items:
        value, problem = yaml_attr_value(item, attr.type)
        if problem is None:
            problem = attr_value_problem(attr, value)
        if problem is None and value in values:
            problem = "is listed twice"
        if problem:
            hint = f" (each value of a {attr.type} attr is a list: [[0, 1]])" if (
                attr.type.startswith("list(") and not isinstance(item, YSeq)) else ""
            d.error(item.line, f"{what}: value {_shown(item)} {problem}{hint}")
        else:
            values.append(value)
    return tuple(values) if d.count() == errors else None


def _shown(node: YNode) -> str:
    """A value as written: scalars as `describe` shows them, lists item by item (clipped)."""
    if isinstance(node, YSeq):
        return clip("[" + ", ".join(_shown(item) for item in node.items) + "]")
    return describe(node)


def _positive(node: YNode, d: Diagnostics, what: str) -> Optional[float]:
    value = d.number(node, what)
    if value is not None and value <= 0:
        d.error(node.line, f"{what} must be > 0, got {value:g}")
        return None
    return value


def _numbers(node: YNode, d: Diagnostics, what: str) -> Optional[tuple[float, ...]]:
    seq = d.sequence(node, what)
    if seq is None:
        return None
    values = [d.number(item, f"{what} values") for item in seq.items]
    return None if None in values else tuple(values)


def _pair(node: YNode, d: Diagnostics, what: str, integer: bool) -> Optional[tuple]:
    seq = d.sequence(node, f"{what} ([low, high])")
    if seq is None:
        return None
    if len(seq.items) != 2:
        d.error(seq.line, f"{what} must be [low, high], got {len(seq.items)} values")
        return None
    if integer:
        values = [d.integer(item, f"{what} values", minimum=0) for item in seq.items]
    else:
        values = [d.number(item, f"{what} values") for item in seq.items]
    if None in values:
        return None
    if values[0] > values[1] or (not integer and values[0] == values[1]):
        relation = "<=" if integer else "<"
        d.error(seq.line, f"{what} must have low {relation} high, got [{values[0]:g}, {values[1]:g}]")
        return None
    return tuple(values)


def _stress_dims(node: YNode, d: Diagnostics, inputs: Sequence[TensorSpec]) -> Optional[tuple[str, ...]]:
    """`stress_dims: [p]`: dims of the op's inputs (`[]`: no stress cases)."""
    seq = d.sequence(node, "gradcheck stress_dims (a list of dim names)")
    if seq is None:
        return None
    dims = [dim.name for t in inputs for dim in t.shape or () if isinstance(dim, SymDim)]
    names: list[str] = []
    for item in seq.items:
        name = d.string(item, "an entry of gradcheck stress_dims")
        if name is not None and name not in dims:
            hint = did_you_mean(name, dims) or (f"; its dims are {', '.join(dict.fromkeys(dims))}" if dims
                                                else "; the op's inputs name no dims")
            d.error(item.line, f"gradcheck stress_dims: '{clip(name)}' is not a dim of the op's inputs{hint}")
        elif name is not None and name not in names:
            names.append(name)
    return tuple(names)


def _stress_sizes(node: YNode, d: Diagnostics) -> Optional[tuple[int, ...]]:
    """`stress_sizes: [7, 8, 9]`: the sizes stress cases give a stress dim."""
    seq = d.sequence(node, "gradcheck stress_sizes (a list of sizes)")
    if seq is None:
        return None
    sizes = [d.integer(item, "gradcheck stress_sizes values", minimum=0) for item in seq.items]
    for item, size in zip(seq.items, sizes):
        if size is not None and size > MAX_STRESS_SIZE:
            d.error(item.line, f"gradcheck stress_sizes: {size} is above {MAX_STRESS_SIZE} (finite "
                               f"differences cost two calls per element); use a smaller size")
            return None
    return None if None in sizes else tuple(dict.fromkeys(sizes))
