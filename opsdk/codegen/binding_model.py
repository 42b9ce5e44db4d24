"""What a generated binding checks and calls, decided in Python from an OpSpec.

The binding templates (templates/binding.cc.j2, templates/cuda_binding.cu.j2) only loop over the
steps built here. A `Step` is either a check (`if (cond) raise(exc, message)`) or a plain statement
(binding a dim, recording a dtype). Inputs are read into `opsdk::glue::Arg a.<name>` first;
everything here reads those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from opsdk.registry import launch as launches
from opsdk.registry.shapes import ConstDim, EllipsisDim, ExprDim, SymDim
from opsdk.registry.spec import OpSpec, TensorSpec

from . import messages as msg
from . import names


@dataclass(frozen=True)
class Step:
    """`if (cond) raise(exc, message);` when cond is set, else the statement `code`."""
    code: str = ""
    cond: str = ""
    exc: str = ""
    message: str = ""


def _check(cond: str, message: msg.Message) -> Step:
    return Step(cond=cond, exc=msg.cpp_exception(message), message=msg.cpp_message(message))


@dataclass(frozen=True)
class InputGlue:
    """One input: its C++ parameter, how to view it, and the steps checking it."""
    name: str
    param: str  # the binding function's parameter (a py::handle)
    is_list: bool
    arg_type: str  # how Args holds it: one Arg, or a vector of them for a list input
    view: str  # the expression building the kernel's view from Args `a`
    not_array: str  # C++ message expression when the parameter is not an array
    not_list: str  # same, when a list input is not a list/tuple ("" for plain inputs)
    length_check: Optional[Step]  # list inputs: len(xs) == N
    steps: tuple[Step, ...]  # run with `arg` naming the input (or the list element) and `i` its index
    # Likewise, once every input has bound its dims and the attrs are read: the dims declared by
    # expressions (`grad_y: [num_segments, d]`), which may read dims that later inputs bind.
    computed_steps: tuple[Step, ...] = ()
    # `optional: true`: None is accepted (the Arg stays empty, `obj` null) and skips the checks.
    optional: bool = False


@dataclass(frozen=True)
class OutputGlue:
    name: str
    dtype_code: str  # C++ expression of its dtype code
    shape: str  # C++ expression of its shape (a container of int64_t)
    shape_param: str  # a std::vector<int64_t> parameter when a Python shape function decides it
    what: str  # "op: output 'z'" for the negative-size message
    view_type: str
    count: str  # list outputs: the C++ expression of N; "" for one tensor
    shape_param_type: str  # the C++ type of shape_param
    # The inputs a given output may not share memory with (those its `inplace` does not name):
    # (name, is_list) each.
    apart: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class AttrGlue:
    name: str
    param: str
    cpp_type: str


@dataclass(frozen=True)
class TypeAttrGlue:
    """An unbound type attr, passed by name (`"float32"`) and checked against its allowed list."""
    name: str
    param: str
    index: int
    check: Step


@dataclass(frozen=True)
class Case:
    """One dtype combination: the switch key and the kernel's template arguments."""
    key: str
    args: str
    dtypes: tuple[str, ...]


@dataclass(frozen=True)
class LaunchGlue:
    """One declared CUDA launch as the generated host function `cuda()` runs it."""
    kernel: str
    grid: tuple[str, ...]  # 3 C++ int64 expressions
    block: tuple[str, ...]
    shared: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class BindingModel:
    op: str
    namespace: str
    header: str
    kernel_source: str
    not_written: str
    template_prefix: str
    template_args: str
    inputs: tuple[InputGlue, ...]
    outputs: tuple[OutputGlue, ...]
    attrs: tuple[AttrGlue, ...]
    unbound: tuple[TypeAttrGlue, ...]
    n_type_attrs: int
    key_expr: str  # C++ expression packing codes[] into the dispatch key
    cases: tuple[Case, ...]
    no_case: str  # message when no case matched (cannot happen after the dtype checks)
    params: tuple[str, ...]  # the binding function's parameters: inputs, attrs, unbound type attrs
    # The inputs in the order check_inputs binds dims: required ones first, then optional ones
    # (opsdk.registry.infer.binding_order), so no required check depends on an absent input.
    checked: tuple[InputGlue, ...] = ()
    has_computed: bool = False  # some input has computed_steps (the glue emits check_computed)
    # The named dims (`dims:`), computed in order once the attrs are read, each checked >= 0.
    derived: tuple[Step, ...] = ()
    launches: tuple[LaunchGlue, ...] = ()  # cuda: declared launches (the glue defines cuda())
    # (line in the declaration, static_assert) per launch and dtype combination
    launch_checks: tuple[tuple[int, str], ...] = ()
    declaration: str = ""  # the declaration file, named in comments
    # The CPU glue's message when given outputs are neither all of them nor none.
    given_count: str = ""


class _DimState:
    """Which dims, `...` and type attrs earlier inputs already bound, and by which tensor."""

    def __init__(self) -> None:
        self.dims: dict[str, str] = {}
        self.batch: Optional[str] = None
        self.types: dict[str, str] = {}


def _label(tensor: TensorSpec):
    """The input's name in messages: `x`, or `xs[2]` for a list element."""
    if tensor.is_list:
        return msg.Value(f'std::string("{tensor.name}[") + std::to_string(i) + "]"', "std")
    return tensor.name


def _first_label(tensor: TensorSpec) -> str:
    return f"{tensor.name}[0]" if tensor.is_list else tensor.name


def _shape_steps(spec: OpSpec, tensor: TensorSpec, state: _DimState) -> list[Step]:
    op, label = spec.name, _label(tensor)
    shape = tensor.shape
    if shape is None:
        return []
    trailing = [d for d in shape if not isinstance(d, EllipsisDim)]
    k = len(trailing)
    rank_msg = msg.rank_mismatch(op, label, tensor, msg.Value("arg.ndim"))
    steps = [_check(f"arg.ndim < {k}" if tensor.has_ellipsis else f"arg.ndim != {k}", rank_msg)]
    if tensor.has_ellipsis:
        steps += _batch_steps(spec, tensor, state, k)
    for j, dim in enumerate(trailing):
        axis = f"arg.ndim - {k - j}" if tensor.has_ellipsis else str(j)
        size = f"arg.shape[{axis}]"
        if isinstance(dim, ConstDim):
            want = _phrase(tensor, msg.Value(str(dim.size)), axis, j, k)
            steps.append(_check(f"{size} != {dim.size}", msg.const_mismatch(
                op, label, want, msg.Value(size))))
        elif isinstance(dim, SymDim):
            got = _phrase(tensor, msg.Value(size), axis, j, k)
            steps += _sym_steps(spec, tensor, state, dim.name, size, got)
    return steps


def _computed_steps(spec: OpSpec, tensor: TensorSpec) -> list[Step]:
    """`arg.shape[axis] != <expr>` for each input dim declared by an expression (the rank was
    checked before, with the other dims)."""
    trailing = [d for d in tensor.shape or () if not isinstance(d, EllipsisDim)]
    k, steps = len(trailing), []
    for j, dim in enumerate(trailing):
        if not isinstance(dim, ExprDim):
            continue
        axis = f"arg.ndim - {k - j}" if tensor.has_ellipsis else str(j)
        want = names.output_dim_cpp(spec, dim)
        steps.append(_check(f"arg.shape[{axis}] != {want}", msg.computed_mismatch(
            spec.name, _label(tensor), _phrase(tensor, msg.Value(want), axis, j, k), dim.text,
            msg.Value(f"arg.shape[{axis}]"))))
    return steps


def _phrase(tensor: TensorSpec, size: msg.Value, axis: str, j: int, k: int) -> tuple:
    """`4 columns`: fixed wording for fixed ranks, worded at run time under `...`."""
    if tensor.has_ellipsis:
        return msg.runtime_size_phrase(size, msg.Value(f"({axis})"), msg.Value("arg.ndim"))
    return msg.size_phrase(size, j, k)


def _sym_steps(spec: OpSpec, tensor: TensorSpec, state: _DimState, dim: str, size: str,
               got: tuple) -> list[Step]:
    ref = f"dims.{dim}"
    mismatch = msg.dim_mismatch(spec.name, _label(tensor), got,
                                state.dims.get(dim, _first_label(tensor)), msg.Value(ref), dim)
    if tensor.optional and dim in spec.optional_only_dims:
        # The first optional input given binds it (-1 until then); the others must agree.
        state.dims.setdefault(dim, _first_label(tensor))
        return [Step(code=f"if ({ref} < 0) {ref} = {size};"), _check(f"{size} != {ref}", mismatch)]
    if dim in state.dims:
        return [_check(f"{size} != {ref}", mismatch)]
    state.dims[dim] = _first_label(tensor)
    if tensor.is_list:
        # The first element binds the dim; the others must match it.
        return [Step(code=f"if (i == 0) {ref} = {size};"), _check(f"{size} != {ref}", mismatch)]
    return [Step(code=f"{ref} = {size};")]


def _batch_steps(spec: OpSpec, tensor: TensorSpec, state: _DimState, k: int) -> list[Step]:
    lead = f"arg.ndim - {k}"
    mismatch = msg.batch_mismatch(
        spec.name, _label(tensor), msg.Value(f"opsdk::glue::shape_str(arg.shape, {lead})", "std"),
        state.batch or _first_label(tensor),
        msg.Value("opsdk::glue::shape_str(dims.batch.data(), (int)dims.batch.size())", "std"))
    check = _check(f"!opsdk::glue::same_dims(arg.shape, {lead}, dims.batch)", mismatch)
    if state.batch is not None:
        return [check]
    state.batch = _first_label(tensor)
    bind = Step(code=f"dims.batch.assign(arg.shape, arg.shape + ({lead}));")
    if tensor.is_list:
        return [Step(code=f"if (i == 0) dims.batch.assign(arg.shape, arg.shape + ({lead}));"), check]
    return [bind]


def _dtype_steps(spec: OpSpec, tensor: TensorSpec, state: _DimState) -> list[Step]:
    op, label = spec.name, _label(tensor)
    got = msg.Value("arg.dtype", "dtype")
    options = spec.dtype_options(tensor)
    allowed = " || ".join(f"arg.dtype == {names.dtype_enum(d)}" for d in options)
    not_allowed = _check(f"!({allowed})", msg.dtype_not_allowed(op, spec, tensor, label, got))
    params = names.template_params(spec)
    if tensor.dtype not in params:
        return [not_allowed]
    index = params.index(tensor.dtype)
    code = f"codes[{index}]"
    if tensor.dtype in state.types:
        conflict = msg.dtype_conflict(op, label, got, state.types[tensor.dtype],
                                      msg.Value(code, "dtype"), tensor.dtype)
        return [_check(f"arg.dtype != {code}", conflict)]
    state.types[tensor.dtype] = _first_label(tensor)
    steps = [not_allowed, Step(code=f"if (i == 0) {code} = arg.dtype;" if tensor.is_list
                               else f"{code} = arg.dtype;")]
    if tensor.is_list:
        steps.append(_check(f"arg.dtype != {code}", msg.dtype_conflict(
            op, label, got, _first_label(tensor), msg.Value(code, "dtype"), tensor.dtype)))
    return steps


# What a kernel of each device takes, in the message for a wrong argument.
_ARRAY_KIND = {"cpu": "a numpy.ndarray", "cuda": "a GPU array (CuPy, or any __cuda_array_interface__)"}


def _input_glue(spec: OpSpec, tensor: TensorSpec, state: _DimState, device: str) -> InputGlue:
    op = spec.name
    type_name = msg.Value("opsdk::glue::type_name(obj)", "std")
    steps = _shape_steps(spec, tensor, state) + _dtype_steps(spec, tensor, state)
    steps.append(_check("!arg.c_contiguous", msg.not_contiguous(op, _label(tensor))))
    length = None
    view = "optional_view" if tensor.optional else "views" if tensor.is_list else "view"
    if tensor.is_list and tensor.list_len in {a.name for a in spec.attrs}:
        length = _check(f"(int64_t)a.{tensor.name}.size() != attr_{tensor.list_len}", msg.list_length(
            op, tensor, msg.Value(f"a.{tensor.name}.size()"), msg.Value(f"attr_{tensor.list_len}")))
    return InputGlue(
        name=tensor.name, param=f"in_{tensor.name}", is_list=tensor.is_list,
        arg_type="std::vector<Arg>" if tensor.is_list else "Arg",
        view=f"opsdk::glue::{view}<const {names.tensor_cpp_type(spec, tensor)}>(a.{tensor.name})",
        not_array=msg.cpp_message(msg.not_an_array(op, _label(tensor), type_name, _ARRAY_KIND[device]
                                                   + (" or None (it is optional)" if tensor.optional else ""))),
        not_list=msg.cpp_message(msg.not_a_list(op, tensor, type_name)) if tensor.is_list else "",
        length_check=length, steps=tuple(steps), computed_steps=tuple(_computed_steps(spec, tensor)),
        optional=tensor.optional)


def _output_glue(spec: OpSpec, tensor: TensorSpec) -> OutputGlue:
    params = names.template_params(spec)
    if tensor.dtype in params:
        code = f"codes[{params.index(tensor.dtype)}]"
    else:
        code = names.dtype_enum(tensor.dtype)
    shape_param = ""
    if tensor.shape is None:
        # Python's shape function decided: one shape, or one per tensor of a list output.
        shape_param = f"shape_{tensor.name}"
        shape = f"{shape_param}[i]" if tensor.is_list else shape_param
    else:
        dims = [names.output_dim_cpp(spec, d) for d in tensor.shape if not isinstance(d, EllipsisDim)]
        if tensor.has_ellipsis:
            shape = f"opsdk::glue::with_batch(dims.batch, {{{', '.join(dims)}}})"
        else:
            shape = f"std::array<int64_t, {len(dims)}>{{{', '.join(dims)}}}"
    return OutputGlue(name=tensor.name, dtype_code=code, shape=shape, shape_param=shape_param,
                      what=msg.cpp_string_literal(f"{spec.name}: output '{tensor.name}'"),
                      view_type=names.tensor_cpp_type(spec, tensor),
                      count=f"attrs.{tensor.list_len}" if tensor.is_list else "",
                      shape_param_type=("std::vector<std::vector<int64_t>>" if tensor.is_list
                                        else "std::vector<int64_t>"),
                      apart=tuple((t.name, t.is_list) for t in spec.inputs
                                  if t.name not in tensor.inplace))


def _type_attr_glue(spec: OpSpec) -> list[TypeAttrGlue]:
    params = names.template_params(spec)
    out = []
    for ta in spec.unbound_type_attrs:
        param = f"dtype_{ta.name}"
        index = params.index(ta.name)
        allowed = " || ".join(f"codes[{index}] == {names.dtype_enum(d)}" for d in ta.allowed)
        message = msg.bad_type_attr(spec.name, ta.name, ta.allowed, msg.Value(param, "std"))
        out.append(TypeAttrGlue(ta.name, param, index, _check(f"!({allowed})", message)))
    return out


def _cases(spec: OpSpec) -> list[Case]:
    cases = []
    for combo in names.dtype_combinations(spec):
        key = names.dispatch_key(tuple(names.dtype_code(d) for d in combo))
        args = ", ".join(names.CPP_TYPES[d] for d in combo)
        cases.append(Case(key=str(key), args=f"<{args}>" if combo else "", dtypes=combo))
    return cases


def _key_expr(n: int) -> str:
    expr = "0"
    for i in range(n):
        expr = f"codes[{i}]" if expr == "0" else f"({expr}) * {names.DISPATCH_RADIX} + codes[{i}]"
    return expr


def _derived_steps(spec: OpSpec) -> list[Step]:
    """`dims.oh = <expr>;` and its check, per named dim, in declaration order."""
    steps = []
    for dim in spec.derived_dims:
        ref = f"dims.{dim.name}"
        expr = names.output_dim_cpp(spec, ExprDim(dim.expr, dim.text))
        steps += [Step(code=f"{ref} = {expr};"),
                  _check(f"{ref} < 0", msg.negative_dim(spec.name, dim.name, dim.text, msg.Value(ref)))]
    return steps


def binding_model(spec: OpSpec, device: str = "cpu") -> BindingModel:
    """Everything the binding template of `device` (cpu or cuda) substitutes for one op."""
    kernel = spec.kernel(device)
    source = kernel.source if kernel else f"opdefs/{spec.name}_{device}"
    state = _DimState()
    order = [t for t in spec.inputs if not t.optional] + [t for t in spec.inputs if t.optional]
    glued = {t.name: _input_glue(spec, t, state, device) for t in order}
    inputs = tuple(glued[t.name] for t in spec.inputs)
    attrs = tuple(AttrGlue(a.name, f"attr_{a.name}", names.attr_cpp_type(a)) for a in spec.attrs)
    unbound = tuple(_type_attr_glue(spec))
    params = ([f"py::handle {t.param}" for t in inputs] + [f"{a.cpp_type} {a.param}" for a in attrs]
              + [f"const std::string& {u.param}" for u in unbound])
    return BindingModel(
        op=spec.name, namespace=names.namespace(spec), header=names.header_file(spec),
        kernel_source=source, not_written=msg.not_written(spec.name, source),
        template_prefix=names.template_prefix(spec), template_args=names.template_args(spec),
        inputs=inputs, outputs=tuple(_output_glue(spec, t) for t in spec.outputs),
        attrs=attrs, unbound=unbound, params=tuple(params), n_type_attrs=len(spec.type_attrs),
        checked=tuple(glued[t.name] for t in order),
        has_computed=any(t.computed_steps for t in inputs), derived=tuple(_derived_steps(spec)),
        key_expr=_key_expr(len(spec.type_attrs)), cases=tuple(_cases(spec)),
        launches=tuple(_launch_glue(spec, kernel)) if device == "cuda" and kernel else (),
        launch_checks=tuple(_launch_checks(spec, kernel)) if device == "cuda" and kernel else (),
        declaration=spec.file, given_count=_given_count(spec),
        no_case=msg.cpp_string_literal(f"{spec.name}: no kernel instantiated for these dtypes"))


def _given_count(spec: OpSpec) -> str:
    """The message for a wrong number of given outputs (the glue appends the count it got)."""
    outs = ", ".join(t.name for t in spec.outputs)
    return msg.cpp_string_literal(
        f"{spec.name}: given outputs must be all {len(spec.outputs)} of them ({outs}), after the "
        f"inputs and attrs, or none; got ")


def _launch_glue(spec: OpSpec, kernel) -> list[LaunchGlue]:
    """The declared launches of a cuda kernel, as C++ of the op's namespace (T a template param)."""
    def name(n: str) -> str:
        return names.size_ref(spec, n)
    out = []
    for launch in kernel.launches:
        grid, block, shared = launches.cpp_sizes(launch, name)
        out.append(LaunchGlue(launch.kernel, tuple(grid), tuple(block), shared,
                              tuple(launches.cpp_arg(a, name) for a in launch.args)))
    return out


def _launch_checks(spec: OpSpec, kernel) -> list[tuple[int, str]]:
    """A static_assert per launch and dtype combination, on the kernel's parameter types."""
    params = names.template_params(spec)
    return [(launch.location.line, launches.signature_check(spec, launch, i, dict(zip(params, combo))))
            for combo in names.dtype_combinations(spec) for i, launch in enumerate(kernel.launches)]
