"""Calling an op's gradient op by the naming contract of the declaration language.

A gradient op's inputs are named after the forward op's inputs (`x`), outputs (`z`) and
cotangents (`grad_z`); its outputs are `grad_<input>` for the inputs it differentiates, or, when
not named so, one per `differentiable` input in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opsdk.registry.dtypes import FLOAT_DTYPES
from opsdk.registry.errors import OpsdkError
from opsdk.registry.spec import OpSpec

from .calls import call_op
from .numeric import Slot
from .strategies import OpPlan

_GRAD = "grad_"


@dataclass(frozen=True)
class GradientCall:
    """How to feed the gradient op of `forward` and which forward input each output belongs to."""

    forward: OpSpec
    grad: OpSpec
    output_targets: tuple[str, ...]  # per gradient-op output, the forward input it differentiates
    targets: tuple[str, ...]  # forward inputs whose gradients are checked (float, differentiable)
    registry: Any = field(compare=False, default=None)

    @classmethod
    def for_op(cls, registry: Any, plan: OpPlan) -> "GradientCall":
        """Resolve the gradient op of `plan.spec`; OpsdkError when the two do not fit together."""
        spec = plan.spec
        resolve = getattr(registry, "resolve", None)  # from the forward op's namespace
        grad = resolve(spec.gradient_op, spec.namespace) if resolve else registry.get(spec.gradient_op)
        names = {t.name for t in spec.inputs} | {t.name for t in spec.outputs}
        names |= {_GRAD + t.name for t in spec.outputs}
        for t in grad.inputs:
            if t.name not in names:
                raise OpsdkError(f"{grad.file}: op '{grad.name}': input '{t.name}' is neither an "
                                 f"input, an output nor a grad_<output> of '{spec.name}'")
        targets = _output_targets(spec, grad)
        checked = tuple(n for n in spec.differentiable
                        if n in targets and plan.dtype_of(n) in FLOAT_DTYPES)
        return cls(forward=spec, grad=grad, output_targets=targets, targets=checked, registry=registry)

    def run(self, inputs: dict[str, Any], attrs: dict[str, Any], outputs: tuple,
            cotangents: tuple, device: str) -> dict[Slot, np.ndarray]:
        """Call the gradient op eagerly; its outputs keyed by the forward input slot they belong to."""
        spec, grad = self.forward, self.grad
        values: dict[str, Any] = dict(inputs)
        for t, out, cot in zip(spec.outputs, outputs, cotangents):
            values[t.name] = out
            values[_GRAD + t.name] = cot if cot is not None else (
                [np.zeros_like(o) for o in out] if t.is_list else np.zeros_like(out))
        passed = [a.name for a in grad.attrs] + [t.name for t in grad.unbound_type_attrs]
        grad_attrs = {name: attrs[name] for name in passed if name in attrs}
        results = call_op(self.registry, grad, {t.name: values[t.name] for t in grad.inputs},
                          grad_attrs, _device_for(grad, device))
        slots: dict[Slot, np.ndarray] = {}
        for target, value in zip(self.output_targets, results):
            if isinstance(value, (list, tuple)):
                slots.update({(target, k): np.asarray(v) for k, v in enumerate(value)})
            else:
                slots[(target, None)] = np.asarray(value)
        return slots


def _output_targets(spec: OpSpec, grad: OpSpec) -> tuple[str, ...]:
    inputs = {t.name for t in spec.inputs}
    named = [t.name[len(_GRAD):] for t in grad.outputs if t.name.startswith(_GRAD)]
    if len(named) == len(grad.outputs) and all(n in inputs for n in named):
        return tuple(named)
    if len(grad.outputs) != len(spec.differentiable):
        raise OpsdkError(f"{grad.file}: op '{grad.name}': has {len(grad.outputs)} outputs but "
                         f"'{spec.name}' has {len(spec.differentiable)} differentiable inputs; "
                         "name them grad_<input>")
    return tuple(spec.differentiable)


def _device_for(grad: OpSpec, device: str) -> str:
    """The forward's device when the gradient op has a kernel there, else one it has."""
    if device in grad.devices:
        return device
    return next((d for d in ("python", "cpu") if d in grad.devices), device)
