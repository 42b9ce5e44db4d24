"""generated/python/torch_ops.pyi and jax_ops.pyi: a workspace's ops as typed PyTorch and JAX ops.

`opsdk.torch.load_ops(ws)` and `opsdk.jax.load_ops(ws)` build their ops at run time, so a type
checker sees only their generic call; these stubs give each op its signature (inputs as the
framework's arrays, attrs as keywords with their Python types or `Literal` choices, unbound type
attrs as dtype names) for a script that imports them under TYPE_CHECKING (the stub's header).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from opsdk.registry.spec import OpSpec

from .render import generated_header, render_template
from .wrappers import Param, _attr_default, attr_annotation, return_annotation

# framework -> (module whose load_ops makes the ops, stub name, imports, Input, Output)
FRAMEWORKS = {
    "torch": ("opsdk.torch", "torch_ops", "import torch", "torch.Tensor", "torch.Tensor"),
    "jax": ("opsdk.jax", "jax_ops", "import jax\nimport numpy as np",
            "Union[jax.Array, np.ndarray, float]", "jax.Array"),
}


@dataclass(frozen=True)
class StubOp:
    name: str
    params: str
    returns: str


def _stub_op(spec: OpSpec) -> StubOp:
    list_lens = {t.list_len for t in spec.inputs if t.is_list}
    params = [_param_text(p) for p in _framework_inputs(spec)]
    keyword = []
    for attr in spec.attrs:
        if attr.name not in list_lens:
            default = _attr_default(attr)
            keyword.append(f"{attr.name}: {attr_annotation(attr)}"
                           + ("" if default is None else f" = {default}"))
    for ta in spec.unbound_type_attrs:
        keyword.append(f"{ta.name}: str" + (f" = {ta.default!r}" if ta.default else ""))
    if keyword:
        params += ["*", *keyword]
    outs = ["list[Output]" if t.is_list else "Output" for t in spec.outputs]
    return StubOp(spec.name, ", ".join(params), return_annotation(outs))


def _framework_inputs(spec: OpSpec) -> list[Param]:
    """Every input positional, as torch schemas and opsdk.jax take them: an optional input is
    `Optional[Input]`, defaulting to None only where no required input follows it."""
    params = []
    for i, t in enumerate(spec.inputs):
        if t.optional:
            trailing = all(u.optional for u in spec.inputs[i + 1:])
            params.append(Param(t.name, "Optional[Input]", "None" if trailing else None))
        else:
            params.append(Param(t.name, "Sequence[Input]" if t.is_list else "Input", None))
    return params


def _param_text(p: Param) -> str:
    return f"{p.name}: {p.annotation}" + ("" if p.default is None else f" = {p.default}")


def stub_file(framework: str) -> str:
    return f"generated/python/{FRAMEWORKS[framework][1]}.pyi"


def render_framework_stubs(specs: Sequence[OpSpec], framework: str) -> str:
    """The typed stub of the workspace's ops in `framework` ("torch" or "jax")."""
    module, stub, imports, input_type, output_type = FRAMEWORKS[framework]
    ordered = sorted(specs, key=lambda s: s.name)
    return render_template(
        "framework_ops.pyi.j2", header=generated_header([s.file for s in ordered], "#"),
        framework={"torch": "PyTorch", "jax": "JAX"}[framework], module=module, stub=stub,
        imports=imports, input_type=input_type, output_type=output_type,
        ops=[_stub_op(s) for s in ordered])
