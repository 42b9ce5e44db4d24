"""Pure functions OpSpec -> generated text, over the Jinja2 templates in the repository's templates/.

Python decides every name, type and message (names.py, messages.py, binding_model.py, wrappers.py);
the templates only loop and substitute. Same specs in, same bytes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

import jinja2

from opsdk.registry import BUILTIN_ROOT
from opsdk.registry.shapes import EllipsisDim, FreeDim, format_shape
from opsdk.registry.spec import OpSpec, TensorSpec

from . import names
from .binding_model import binding_model
from .messages import cpp_string_literal
from .wrappers import wrapper_model

# templates/ of the checkout, or the copy an installed wheel carries (see registry/workspace.py).
TEMPLATES_DIR = BUILTIN_ROOT / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The one Jinja2 environment: strict (a missing value is an error), no autoescape (code)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["cpp_str"] = cpp_string_literal
    env.filters["py_str"] = repr
    return env


def render_template(template: str, **values) -> str:
    """Render templates/<template> with `values`."""
    return environment().get_template(template).render(**values)


def generated_header(sources: Iterable[str], comment: str) -> str:
    """The do-not-edit first line(s), naming the declaration files (workspace-relative)."""
    listed = comment_text(", ".join(sorted(set(sources))))
    return (f"{comment} {names.GENERATED_MARK} from {listed}. Do not edit: "
            f"run `opsdk generate` to rewrite it.")


def comment_text(text: str) -> str:
    """Text made safe for one `//` or `#` comment line: every line break (including \\r, \\f,
    U+2028) and run of spaces becomes one space, and a trailing backslash, which would splice the
    next line of C++ into the comment, is followed by a full stop.

    >>> comment_text("a path\\nwith C:\\\\")
    'a path with C:\\\\.'
    """
    one = " ".join(text.split())
    return one + "." if one.endswith("\\") else one


@dataclass(frozen=True)
class MemberModel:
    name: str
    cpp_type: str
    comment: str
    init: str = "0"  # Dims: the value before the inputs bind it


def _tensor_comment(tensor: TensorSpec) -> str:
    shape = "shape from the shape function" if tensor.shape is None else format_shape(tensor.shape)
    count = f"{tensor.list_len} tensors, each " if tensor.is_list else ""
    optional = "optional (empty when the caller gives None), " if tensor.optional else ""
    text = f"{optional}{count}{tensor.dtype} {shape}"
    return f"{text}: {tensor.doc}" if tensor.doc else text


def _dims(spec: OpSpec) -> list[MemberModel]:
    """Dims members: every bound dim; a free one (`_`) commented with where it stands."""
    comments = {}
    for t in spec.inputs:
        core = [d for d in t.shape or () if not isinstance(d, EllipsisDim)]
        after = " after '...'" if t.has_ellipsis else ""
        comments.update({d.name: f"the '_' at dim {k}{after} of input '{t.name}' {format_shape(t.shape)}"
                         for k, d in enumerate(core) if isinstance(d, FreeDim)})
    optional = set(spec.optional_only_dims)
    for name in optional:  # -1 tells the kernel that no input binding it was given
        owners = [t.name for t in spec.inputs if any(getattr(d, "name", None) == name for d in t.shape or ())]
        absent = " and ".join(f"'{o}'" for o in owners)
        comments[name] = f"{comments[name]}; " if name in comments else ""
        comments[name] += f"-1 when optional input {absent} {'is' if len(owners) == 1 else 'are'} absent"
    members = [MemberModel(name, "int64_t", comment_text(comments.get(name, "")),
                           "-1" if name in optional else "0") for name in spec.dim_names]
    return members + [MemberModel(d.name, "int64_t", comment_text(f"dims: {d.text}")) for d in spec.derived_dims]


def render_op_header(spec: OpSpec) -> str:
    """generated/cpp/<op>_op.h: Attrs, Dims, Inputs, Outputs and the kernel declarations."""
    attrs = [MemberModel(a.name, names.attr_cpp_type(a), comment_text(a.doc)) for a in spec.attrs]
    inputs = [MemberModel(t.name, names.input_member_type(spec, t), comment_text(_tensor_comment(t)))
              for t in spec.inputs]
    outputs = [MemberModel(t.name, names.output_member_type(spec, t), comment_text(_tensor_comment(t)))
               for t in spec.outputs]
    return render_template(
        "op.h.j2", header=generated_header([spec.file], "//"), op=spec.name,
        op_ns=names.namespace(spec), attrs=attrs, dims=_dims(spec),
        has_batch=any(t.has_ellipsis for t in spec.inputs), inputs=inputs, outputs=outputs,
        has_optional=any(t.optional for t in spec.inputs),
        template_prefix=names.template_prefix(spec), template_args=names.template_args(spec))


def _binding_values(spec: OpSpec, device: str) -> dict:
    model = binding_model(spec, device)
    return dict(header=generated_header([spec.file], "//"), m=model,
                module_doc=f"opsdk {device} binding of op '{spec.name}' ({spec.file})")


def render_binding(spec: OpSpec) -> str:
    """generated/cpp/<op>_binding.cc: the pybind11 module whose `cpu` runs the author's kernel."""
    values = _binding_values(spec, "cpu")
    shape_outputs = [o for o in values["m"].outputs if o.shape_param]
    values["shape_params"] = [f"const {o.shape_param_type}& {o.shape_param}" for o in shape_outputs]
    values["shape_args"] = "".join(f", {o.shape_param}" for o in shape_outputs)
    values["kernel_unit"] = f"generated/cpp/{names.kernel_unit_file(spec)}"
    return render_template("binding.cc.j2", **values)


def render_kernel_unit(spec: OpSpec) -> str:
    """generated/cpp/<op>_kernel.cc: the author's cpu kernel plus its explicit instantiations.

    One instantiation per dtype combination the binding dispatches to, so the binding (compiled
    apart, with pybind11) links against them; an op without type attrs has a plain function.
    """
    values = _binding_values(spec, "cpu")
    instances = [case.args[1:-1] for case in values["m"].cases if case.args]
    return render_template("instances.cc.j2", header=values["header"], m=values["m"],
                           instances=instances)


def render_cuda_binding(spec: OpSpec) -> str:
    """generated/cuda/<op>_cuda_binding.cu: the same checks over __cuda_array_interface__ objects."""
    values = _binding_values(spec, "cuda")
    values["out_params"] = [f"py::handle out_{o.name}" for o in values["m"].outputs]
    values["kernel_unit"] = f"generated/cuda/{names.cuda_kernel_unit_file(spec)}"
    return render_template("cuda_binding.cu.j2", **values)


def render_cuda_kernel_unit(spec: OpSpec) -> str:
    """generated/cuda/<op>_cuda_kernel.cu: the author's cuda kernel, the host side of its declared
    launches and their type checks, and the kernel's explicit instantiations (no pybind11)."""
    values = _binding_values(spec, "cuda")
    instances = [case.args[1:-1] for case in values["m"].cases if case.args]
    return render_template("cuda_kernel.cu.j2", header=values["header"], m=values["m"],
                           instances=instances,
                           glue_file=f"generated/cuda/{names.cuda_binding_file(spec)}")


def _sorted(specs: Sequence[OpSpec]) -> list[OpSpec]:
    return sorted(specs, key=lambda s: s.name)


def _forward_ops(specs: Sequence[OpSpec]) -> dict[str, OpSpec]:
    """gradient op name -> the op it is the gradient of (its docstring example borrows from it)."""
    return {s.gradient_op: s for s in _sorted(specs) if s.gradient_op}


def render_wrappers(specs: Sequence[OpSpec], workspace_name: str) -> str:
    """generated/python/ops.py: one documented wrapper function per op of the workspace."""
    ordered = _sorted(specs)
    forward = _forward_ops(ordered)
    return render_template(
        "ops.py.j2", header=generated_header([s.file for s in ordered], "#"),
        workspace_name=workspace_name, ops=[wrapper_model(s, forward.get(s.name)) for s in ordered])


def render_stubs(specs: Sequence[OpSpec]) -> str:
    """generated/python/ops.pyi: typed signatures of the wrappers, for editors and type checkers."""
    ordered = _sorted(specs)
    return render_template("ops.pyi.j2", header=generated_header([s.file for s in ordered], "#"),
                           ops=[wrapper_model(s) for s in ordered])
