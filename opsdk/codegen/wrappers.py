"""What each generated Python wrapper looks like: signature, call, docstring with a runnable example.

The example in a docstring is deterministic: inputs are drawn from a seeded generator at sizes
chosen here (dims 2, 3, 4, ... in the order inputs bind them), and it prints the result's shape,
computed now from the declaration, so the doctest checks the op against its own declaration.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Optional

from opsdk.registry.attrs import normalize_attrs
from opsdk.registry.dtypes import COMPLEX_DTYPES, FLOAT_DTYPES, INT_DTYPES
from opsdk.registry.errors import OpsdkError
from opsdk.registry.infer import dim_env, infer_outputs
from opsdk.registry.shapes import ConstDim, EllipsisDim, ExprDim, SymDim, eval_expr, format_shape
from opsdk.registry.spec import NO_DEFAULT, AttrSpec, OpSpec, TensorSpec

from . import names

EXAMPLE_BATCH = (2,)  # what `...` stands for in examples
EXAMPLE_LIST_LEN = 2  # tensors in an example list input


@dataclass(frozen=True)
class Param:
    """One wrapper parameter: the name, its stub annotation and its default (source text or None)."""
    name: str
    annotation: str
    default: Optional[str]


@dataclass(frozen=True)
class WrapperModel:
    name: str
    positional: tuple[Param, ...]
    keyword: tuple[Param, ...]
    inputs_expr: str  # `[x, list(xs)]`
    attrs_expr: str  # `{"k": k, "N": len(xs)}`
    returns: str  # stub return annotation
    docstring: str  # the body of the docstring, not indented


def _attr_default(attr: AttrSpec) -> Optional[str]:
    if attr.default is NO_DEFAULT:
        return None
    if attr.type.startswith("list("):
        return repr(tuple(attr.default))
    return repr(attr.default)


def attr_annotation(attr: AttrSpec) -> str:
    """The stub type of an attr: its Python type, or `Literal[...]` of its declared choices."""
    if not attr.choices:
        return names.ATTR_PY_TYPES[attr.type]
    literal = f"Literal[{', '.join(repr(c) for c in attr.choices)}]"
    return f"Sequence[{literal}]" if attr.type.startswith("list(") else literal


def _input_params(spec: OpSpec) -> tuple[list[Param], list[Param]]:
    """(positional, keyword-only) input parameters. Inputs are positional in declaration order;
    an optional one defaults to None (`Optional[Input] = None`, as PyTorch's `Tensor? w=None`).
    Python allows no required positional parameter after a defaulted one, so from the first
    required input that follows an optional one, inputs are keyword-only (still in order)."""
    positional: list[Param] = []
    keyword: list[Param] = []
    seen_optional = False
    for t in spec.inputs:
        if t.optional:
            param = Param(t.name, "Optional[Input]", "None")
        else:
            param = Param(t.name, "Sequence[Input]" if t.is_list else "Input", None)
        (keyword if keyword or (seen_optional and not t.optional) else positional).append(param)
        seen_optional = seen_optional or t.optional
    return positional, keyword


def _params(spec: OpSpec) -> tuple[list[Param], list[Param]]:
    list_lens = {t.list_len for t in spec.inputs if t.is_list}
    positional, keyword = _input_params(spec)
    keyword += [Param(a.name, attr_annotation(a), _attr_default(a))
                for a in spec.attrs if a.name not in list_lens]
    for ta in spec.unbound_type_attrs:
        keyword.append(Param(names.python_type_attr_param(spec, ta), "DTypeLike",
                             repr(ta.default) if ta.default else None))
    keyword.append(Param("name", "Optional[str]", "None"))
    return positional, keyword


def _call_exprs(spec: OpSpec) -> tuple[str, str]:
    inputs = ", ".join(f"_tensor_list({spec.name!r}, {t.name!r}, {t.name})" if t.is_list else t.name
                       for t in spec.inputs)
    entries = []
    list_lens = {}
    for t in spec.inputs:
        if t.is_list:
            list_lens.setdefault(t.list_len, t.name)
    for a in spec.attrs:
        value = f"len({list_lens[a.name]})" if a.name in list_lens else a.name
        entries.append(f"{a.name!r}: {value}")
    for ta in spec.unbound_type_attrs:
        entries.append(f"{ta.name!r}: {names.python_type_attr_param(spec, ta)}")
    return f"[{inputs}]", "{" + ", ".join(entries) + "}"


def _dtype_text(spec: OpSpec, tensor: TensorSpec) -> str:
    options = spec.dtype_options(tensor)
    return " or ".join(options) if len(options) <= 3 else f"{tensor.dtype} (one of {', '.join(options)})"


def _shape_text(tensor: TensorSpec) -> str:
    return "shape from the op's shape function" if tensor.shape is None else f"shape {format_shape(tensor.shape)}"


def _attr_line(attr: AttrSpec) -> str:
    parts = [attr.type]
    if attr.default is not NO_DEFAULT:
        parts.append(f"default {_attr_default(attr)}")
    if attr.min is not None and attr.max is not None:
        parts.append(f"{_num(attr.min)} <= {attr.name} <= {_num(attr.max)}")
    elif attr.min is not None:
        parts.append(f">= {_num(attr.min)}")
    elif attr.max is not None:
        parts.append(f"<= {_num(attr.max)}")
    if attr.choices:
        parts.append("one of " + ", ".join(repr(c) for c in attr.choices))
    text = f"{attr.name}: {', '.join(parts)}."
    return f"{text} {attr.doc}" if attr.doc else text


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _tensor_line(spec: OpSpec, tensor: TensorSpec) -> str:
    count = f"a sequence of {tensor.list_len} tensors, each " if tensor.is_list else ""
    count = "optional (None leaves it out), " if tensor.optional else count
    text = f"{tensor.name}: {count}{_dtype_text(spec, tensor)}, {_shape_text(tensor)}."
    return f"{text} {tensor.doc}" if tensor.doc else text


def _section(title: str, lines: list[str]) -> list[str]:
    out = [f"{title}:"]
    for line in lines:
        wrapped = textwrap.wrap(line, width=92, subsequent_indent="    ")
        out += ["    " + w for w in wrapped]
    return out + [""]


def _docstring(spec: OpSpec, forward: Optional[OpSpec]) -> str:
    list_lens = _list_lens(spec)
    lines = [spec.summary.strip() or f"The op {spec.name}.", ""]
    if spec.doc.strip():
        lines += spec.doc.strip().splitlines() + [""]
    args = [_tensor_line(spec, t) for t in spec.inputs]
    args += [_attr_line(a) for a in spec.attrs if a.name not in list_lens]
    for ta in spec.unbound_type_attrs:
        default = f", default {ta.default}" if ta.default else ""
        args.append(f"{names.python_type_attr_param(spec, ta)}: the dtype {ta.name} of the result, "
                    f"one of {', '.join(ta.allowed)}{default}.")
    args.append("name: the node's name when called inside a graph.")
    lines += _section("Args", args)
    lines += _section("Returns", [_tensor_line(spec, t) for t in spec.outputs])
    lines += ["Example:"] + ["    " + line for line in example_lines(spec, forward)]
    return "\n".join(lines).replace('"""', "'''").rstrip() + "\n"


def _example_attr(attr: AttrSpec, list_lens: set[str]) -> Any:
    if attr.name in list_lens:
        return EXAMPLE_LIST_LEN
    if attr.default is not NO_DEFAULT:
        return attr.default
    if attr.choices:
        return attr.choices[0]
    fallback = {"int": 1, "float": 1.0, "bool": False, "str": "", "list(int)": [], "list(float)": []}
    value = fallback[attr.type]
    if attr.min is not None and attr.type in ("int", "float"):
        value = type(value)(attr.min)
    return value


def _example_dims(spec: OpSpec) -> dict[str, int]:
    return {name: 2 + i for i, name in enumerate(spec.dim_names)}


def _example_shape(tensor: TensorSpec, env: dict[str, Any]) -> Optional[tuple]:
    if tensor.shape is None:
        return None
    out: list = []
    for d in tensor.shape:
        if isinstance(d, EllipsisDim):
            out += EXAMPLE_BATCH
        elif isinstance(d, ConstDim):
            out.append(d.size)
        elif isinstance(d, SymDim):
            out.append(env[d.name])
        elif isinstance(d, ExprDim):
            out.append(eval_expr(d.expr, env))
    return tuple(out)


def _draw(spec: OpSpec, tensor: TensorSpec, shape: tuple) -> str:
    dtype = spec.dtype_options(tensor)[0]
    lo, hi = spec.gradcheck.domain
    if dtype in FLOAT_DTYPES:
        return f"rng.uniform({lo}, {hi}, size={shape}).astype(np.{dtype})"
    if dtype in COMPLEX_DTYPES:
        return f"(rng.uniform({lo}, {hi}, size={shape}) + 1j * rng.uniform({lo}, {hi}, size={shape})).astype(np.{dtype})"
    if dtype in INT_DTYPES:
        # Every example dim is at least 2, so 0 and 1 are valid indices along any axis.
        return f"rng.integers(0, 2, size={shape}).astype(np.{dtype})"
    return f"rng.random(size={shape}) < 0.5"


def _result_shapes(spec: OpSpec, env: dict[str, Any], in_shapes: dict, attrs: dict) -> list:
    """The example's output shapes, from the registry's own inference over the example inputs
    (None per output where it cannot say)."""
    shapes = [in_shapes[t.name] for t in spec.inputs]
    dtypes = [[spec.dtype_options(t)[0]] * len(s) if t.is_list else spec.dtype_options(t)[0]
              for t, s in zip(spec.inputs, shapes)]
    given = {**attrs, **{ta.name: ta.default or ta.allowed[0] for ta in spec.unbound_type_attrs}}
    try:
        inferred = infer_outputs(spec, shapes, dtypes, normalize_attrs(spec, given))
    except (OpsdkError, ValueError, KeyError, TypeError):
        return [None] * len(spec.outputs)
    return [shape for shape, _ in inferred]


def _input_shapes(spec: OpSpec, env: dict[str, Any]) -> dict[str, Any]:
    """Example shape per input (a list of shapes for a list input); (2, 3) where undeclared."""
    shapes: dict[str, Any] = {}
    for t in spec.inputs:
        shape = _example_shape(t, env)
        if shape is None:  # no declared shape: any will do for a shape function's op
            shape = (2, 3)
        shapes[t.name] = [shape] * EXAMPLE_LIST_LEN if t.is_list else shape
    return shapes


def _example_env(spec: OpSpec, attrs: dict[str, Any]) -> dict[str, Any]:
    """The example's dims, the attrs dim expressions read and the named dims (`dims:`)."""
    try:
        return dim_env(spec, _example_dims(spec), attrs)
    except OpsdkError:  # a named dim the example sizes make negative: the shapes show None
        return {**attrs, **_example_dims(spec)}


def _gradient_input_shapes(spec: OpSpec, forward: OpSpec, attrs: dict[str, Any]) -> dict[str, Any]:
    """A gradient op's example takes its forward op's example inputs, outputs and output grads,
    so that shapes only a shape function relates still agree (the registry's signature rule)."""
    f_attrs = {a.name: attrs.get(a.name, _example_attr(a, _list_lens(forward))) for a in forward.attrs}
    f_env = _example_env(forward, f_attrs)
    f_inputs = _input_shapes(forward, f_env)
    f_outputs = _result_shapes(forward, f_env, f_inputs, f_attrs)
    known = dict(f_inputs)
    for t, shape in zip(forward.outputs, f_outputs):
        known[t.name] = known[f"grad_{t.name}"] = shape
    shapes = _input_shapes(spec, _example_env(spec, attrs))
    for name in shapes:
        if _known(known.get(name)) is not None:  # a size known only when it runs: the default
            shapes[name] = known[name]
    return shapes


def _list_lens(spec: OpSpec) -> set[str]:
    return {t.list_len for t in spec.inputs if t.is_list}


def example_lines(spec: OpSpec, forward: Optional[OpSpec] = None) -> list[str]:
    """A doctest calling the op on seeded random inputs and printing its result's shape(s).

    `forward` is the op whose gradient `spec` is, when there is one: its example feeds this one.
    """
    list_lens = _list_lens(spec)
    # Declared example values (`example:`), the forward op's for a gradient op's inputs and attrs
    # of its names.
    given = {**dict(forward.example if forward else ()), **dict(spec.example)}
    attrs = {a.name: given.get(a.name, _example_attr(a, list_lens)) for a in spec.attrs}
    env = _example_env(spec, attrs)
    in_shapes = _gradient_input_shapes(spec, forward, attrs) if forward else _input_shapes(spec, env)
    in_shapes.update((name, _nested_shape(value)) for name, value in given.items() if name in in_shapes)
    lines = [">>> import numpy as np", ">>> rng = np.random.default_rng(0)"]
    for t in spec.inputs:
        if t.name in given:
            value = _as_list(given[t.name])
            lines.append(f">>> {t.name} = np.array({value!r}, dtype=np.{spec.dtype_options(t)[0]})")
        elif t.is_list:
            draw = _draw(spec, t, in_shapes[t.name][0])
            lines.append(f">>> {t.name} = [{draw} for _ in range({EXAMPLE_LIST_LEN})]")
        else:
            lines.append(f">>> {t.name} = {_draw(spec, t, in_shapes[t.name])}")
    # attrs without a default, and those `example:` sets apart from their default (the result
    # shown was computed with them)
    kwargs = [f"{a.name}={attrs[a.name]!r}" for a in spec.attrs
              if a.name not in list_lens and (a.default is NO_DEFAULT or (
                  a.name in given and given[a.name] != a.default))]
    kwargs += [f"{names.python_type_attr_param(spec, ta)}={ta.allowed[0]!r}"
               for ta in spec.unbound_type_attrs if not ta.default]
    positional, keyword_inputs = _input_params(spec)
    args = [p.name for p in positional] + [f"{p.name}={p.name}" for p in keyword_inputs] + kwargs
    call = f"{spec.name}({', '.join(args)})"
    shapes = _result_shapes(spec, env, in_shapes, attrs)
    return lines + _show_result(spec, call, shapes)


def _nested_shape(value: Any) -> tuple:
    return (len(value), *_nested_shape(value[0])) if isinstance(value, tuple) and value else (
        (0,) if isinstance(value, tuple) else ())


def _as_list(value: Any) -> Any:
    return [_as_list(v) for v in value] if isinstance(value, tuple) else value


def _known(shape: Any) -> Any:
    """`shape` when every size in it is known before the call, else None (a size that depends on
    an input's values, as `fill_dims`'s do, is only known by running the example)."""
    if shape is None:
        return None
    sizes = [d for s in shape for d in s] if shape and isinstance(shape[0], (list, tuple)) \
        else list(shape)
    return None if any(d is None for d in sizes) else shape


def _show_result(spec: OpSpec, call: str, shapes: list) -> list[str]:
    """The doctest line printing the result's shape(s) (dtypes where no shape is known)."""
    shapes = [_known(s) for s in shapes]
    if len(spec.outputs) == 1:
        out, shape = spec.outputs[0], shapes[0]
        if shape is not None and out.is_list:
            return [f">>> [item.shape for item in {call}]", repr([tuple(s) for s in shape])]
        if shape is not None:
            return [f">>> {call}.shape", repr(tuple(shape))]
        if out.is_list:
            return [f">>> [item.dtype.name for item in {call}]",
                    repr([_out_dtype(spec, out)] * EXAMPLE_LIST_LEN)]
        return [f">>> {call}.dtype.name", repr(_out_dtype(spec, out))]
    # Several outputs: unpack them, then show each (a list output item by item).
    names_ = [t.name for t in spec.outputs]
    lines = [f">>> {', '.join(names_)} = {call}"]
    if all(s is not None for s in shapes):
        shown = [f"[item.shape for item in {t.name}]" if t.is_list else f"{t.name}.shape"
                 for t in spec.outputs]
        values = tuple([tuple(x) for x in s] if t.is_list else tuple(s)
                       for t, s in zip(spec.outputs, shapes))
    else:
        shown = [f"[item.dtype.name for item in {t.name}]" if t.is_list else f"{t.name}.dtype.name"
                 for t in spec.outputs]
        values = tuple([_out_dtype(spec, t)] * EXAMPLE_LIST_LEN if t.is_list else _out_dtype(spec, t)
                       for t in spec.outputs)
    return lines + [f">>> {', '.join(shown)}", repr(values)]


def _out_dtype(spec: OpSpec, tensor: TensorSpec) -> str:
    for ta in spec.unbound_type_attrs:
        if ta.name == tensor.dtype:
            return ta.default or ta.allowed[0]
    return spec.dtype_options(tensor)[0]


def return_annotation(outputs: list[str]) -> str:
    """A stub's return annotation for outputs annotated `outputs`: the one, or a tuple of them
    (`tuple[()]` for an op with no outputs: `tuple[]` is not Python, found by the declaration fuzz)."""
    return outputs[0] if len(outputs) == 1 else f"tuple[{', '.join(outputs) or '()'}]"


def wrapper_model(spec: OpSpec, forward: Optional[OpSpec] = None) -> WrapperModel:
    """The wrapper of one op: its parameters, the `_apply` call and its docstring.

    `forward`: the op whose gradient op `spec` is (its example then feeds this one's)."""
    positional, keyword = _params(spec)
    inputs_expr, attrs_expr = _call_exprs(spec)
    returns = return_annotation(["Output"] * len(spec.outputs))
    return WrapperModel(name=spec.name, positional=tuple(positional), keyword=tuple(keyword),
                        inputs_expr=inputs_expr, attrs_expr=attrs_expr, returns=returns,
                        docstring=_docstring(spec, forward))
