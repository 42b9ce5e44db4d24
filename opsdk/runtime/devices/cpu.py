"""The host: NumPy arrays, the built `cpu` kernels, and python kernels with `xp=numpy`.

A built kernel is called as its generated binding expects (docs/internals.md, "The binding
module"): `cpu(*inputs, *attrs in declaration order, *unbound type attr names)`, returning its
outputs. The glue refuses strided inputs rather than copying them behind the caller's back; the
runtime, which made those views itself (transpose, slice), copies them, but only after such a
refusal: checking every input's flags on every call would cost more than small kernels. Likewise
a NumPy scalar (what a python kernel's NumPy call returns for a 0-d result, e.g. a 0-d
variable's gradient) is refused by the glue, then passed again as a 0-d array.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from opsdk.registry.spec import OpSpec
from opsdk.runtime.devices.base import Device, GivenCall, KernelCall, compiled_tail, packer


class CpuDevice(Device):
    """The host CPU."""

    type_name = "CPU"
    kernel_kinds = ("cpu", "python")
    auto = True
    is_host = True
    fusion_target = "cpu"

    @property
    def xp(self) -> Any:
        return np

    def owns(self, value: Any) -> bool:
        # A GPU array may subclass ndarray and still live on the device (it says so).
        return (isinstance(value, (np.ndarray, np.generic))
                and not hasattr(value, "__cuda_array_interface__"))

    def from_host(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_host(self, value: Any) -> np.ndarray:
        return value if isinstance(value, np.ndarray) else np.asarray(value)

    def call(self, spec: OpSpec, kind: str, fn: Callable, attrs: Mapping[str, Any],
             type_attrs: Mapping[str, str]) -> KernelCall:
        if kind != "cpu":
            return super().call(spec, kind, fn, attrs, type_attrs)
        return _built_call(fn, packer(spec, attrs), compiled_tail(spec, attrs, type_attrs))

    def star_call(self, spec: OpSpec, kind: str, fn: Callable, attrs: Mapping[str, Any],
                  type_attrs: Mapping[str, str]) -> Optional[tuple[Callable, bool]]:
        """A built kernel without attrs, unbound type attrs or list inputs is its glue function
        itself, retried through `call` (which copies strided and scalar inputs) on ValueError or
        TypeError."""
        if kind != "cpu":
            return super().star_call(spec, kind, fn, attrs, type_attrs)
        if packer(spec, attrs) is not None or compiled_tail(spec, attrs, type_attrs):
            return None
        return fn, True

    def call_into(self, spec: OpSpec, kind: str, fn: Callable, attrs: Mapping[str, Any],
                  type_attrs: Mapping[str, str]) -> Optional[GivenCall]:
        """A built kernel's glue takes given outputs after its other arguments: `cpu(*inputs,
        *attrs, *type attr names, *outputs)` (docs/internals.md, The binding module); the
        caller (kernels/choice.py) knows whether this build's glue does."""
        if kind != "cpu":
            return super().call_into(spec, kind, fn, attrs, type_attrs)
        if any(t.is_list or t.shape is None for t in spec.outputs):
            return None
        return _built_call(fn, packer(spec, attrs), compiled_tail(spec, attrs, type_attrs), True)


def _built_call(fn: Callable, pack: Any, tail: tuple, given: bool = False) -> Any:
    if given:
        def call_into(values: Sequence[Any], outs: tuple) -> Any:
            args = pack(values) if pack else values
            try:
                return fn(*args, *tail, *outs)
            except (ValueError, TypeError):
                copies = _contiguous(args)
                if copies is args:
                    raise
            return fn(*copies, *tail, *outs)
        return call_into

    def call(values: Sequence[Any]) -> Any:
        args = pack(values) if pack else values
        try:
            return fn(*args, *tail)
        except (ValueError, TypeError):
            copies = _contiguous(args)
            if copies is args:  # nothing strided nor scalar: the kernel's own error
                raise
        return fn(*copies, *tail)
    return call


def _contiguous(values: Sequence[Any]) -> Sequence[Any]:
    """Each array C-contiguous (a copy only where it is not) and each NumPy scalar a 0-d array;
    list inputs element by element. `values` itself when nothing needed a copy."""
    out = []
    for v in values:
        if isinstance(v, list):
            out.append(_contiguous(v))
        elif isinstance(v, np.ndarray) and not v.flags.c_contiguous:
            out.append(np.ascontiguousarray(v))
        elif isinstance(v, np.generic):
            out.append(np.asarray(v))
        else:
            out.append(v)
    return values if all(a is b for a, b in zip(out, values)) else out
