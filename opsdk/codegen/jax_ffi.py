"""generated/cpp/<op>_jax_ffi.cc: an XLA FFI handler per op that JAX can call without Python.

`supports_jax_ffi` says which ops get one (a compiled cpu kernel, tensors that are not lists,
outputs with declared shapes: what opsdk.jax can describe to XLA at trace time); the other ops
stay on `jax.pure_callback`. `render_jax_ffi` is a pure function of the declaration, like every
renderer (render.py); templates/jax_ffi.cc.j2 substitutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from opsdk.registry.spec import OpSpec

from . import names
from .binding_model import binding_model
from .render import generated_header, render_template

# How the handler reads each attr type from the FFI attribute dictionary, and the Attrs member
# made of it (`{v}` the decoded value). opsdk.jax passes bools as int64 0/1, lists as int64 or
# float64 arrays (jax.ffi.ffi_call's attribute kinds).
_FFI_ATTRS: dict[str, tuple[str, str]] = {
    "int": ("int64_t", "*{v}"),
    "float": ("double", "*{v}"),
    "bool": ("int64_t", "*{v} != 0"),
    "str": ("std::string_view", "std::string(*{v})"),
    "list(int)": ("ffi::Span<const int64_t>", "vector_of(*{v})"),
    "list(float)": ("ffi::Span<const double>", "vector_of(*{v})"),
}


@dataclass(frozen=True)
class FfiTensor:
    name: str
    cpp_type: str


@dataclass(frozen=True)
class FfiAttr:
    name: str
    ffi_type: str
    value: str  # the C++ expression of the Attrs member


def jax_ffi_file(spec: OpSpec) -> str:
    return f"{spec.name}_jax_ffi.cc"


def jax_ffi_symbol(spec: OpSpec) -> str:
    """The handler's exported C symbol (opsdk.jax looks it up by this name)."""
    return f"opsdk_jax_ffi_{spec.name}"


def supports_jax_ffi(spec: OpSpec) -> bool:
    """Whether the op gets an FFI handler: a cpu kernel, no list tensors, no optional inputs
    (an XLA FFI call has a fixed buffer list: opsdk.jax runs such an op through pure_callback),
    declared outputs."""
    return (spec.kernel("cpu") is not None and spec.shape_fn is None
            and not any(t.is_list or t.optional for t in (*spec.inputs, *spec.outputs))
            and all(t.shape is not None for t in spec.outputs))


def render_jax_ffi(spec: OpSpec) -> str:
    """The handler's source; `supports_jax_ffi(spec)` must hold."""
    attrs = [FfiAttr(a.name, _FFI_ATTRS[a.type][0],
                     _FFI_ATTRS[a.type][1].format(v=f"attr_{a.name}")) for a in spec.attrs]
    return render_template(
        "jax_ffi.cc.j2", header=generated_header([spec.file], "//"),
        m=binding_model(spec, "cpu"), dims=list(spec.dim_names),
        has_batch=any(t.has_ellipsis for t in spec.inputs), attrs=attrs,
        inputs=[FfiTensor(t.name, names.tensor_cpp_type(spec, t)) for t in spec.inputs],
        outputs=[FfiTensor(t.name, names.tensor_cpp_type(spec, t)) for t in spec.outputs],
        symbol=jax_ffi_symbol(spec))
