"""Small OpSpecs built directly from the model, for testing strategies without YAML."""

from __future__ import annotations

from opsdk.registry.errors import Location
from opsdk.registry.shapes import ConstDim, EllipsisDim, SymDim
from opsdk.registry.spec import NO_DEFAULT, AttrSpec, GradCheckSpec, KernelSpec, OpSpec, TensorSpec, TypeAttr

HERE = Location("opdefs/test.yaml", 1)


def tensor(name: str, shape, dtype: str = "T", list_len: str | None = None) -> TensorSpec:
    dims = None if shape is None else tuple(
        EllipsisDim() if d == "..." else ConstDim(d) if isinstance(d, int) else SymDim(d) for d in shape)
    return TensorSpec(name, dtype, dims, HERE, list_len=list_len)


def attr(name: str, type_: str, default=NO_DEFAULT, lo=None, hi=None, choices=None) -> AttrSpec:
    return AttrSpec(name, type_, default, lo, hi, choices, "", HERE)


def op(name: str, inputs, outputs, attrs=(), allowed=("float32", "float64"), gradcheck=None,
       differentiable=None, gradient="g") -> OpSpec:
    """An op with a type attr T and a python kernel."""
    return OpSpec(name=name, summary="", doc="", type_attrs=(TypeAttr("T", tuple(allowed), HERE),),
                  attrs=tuple(attrs), inputs=tuple(inputs), outputs=tuple(outputs), gradient=gradient,
                  differentiable=tuple(differentiable if differentiable is not None
                                       else [t.name for t in inputs]),
                  kernels=(KernelSpec("python", "k.py:f", HERE),), reference=None, shape_fn=None,
                  gradcheck=gradcheck or GradCheckSpec(), location=HERE)
