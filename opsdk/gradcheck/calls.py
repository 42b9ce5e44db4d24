"""Calling an op eagerly on one kernel device, through the runtime's `apply_op`."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from opsdk.registry.spec import OpSpec


def call_op(registry: Any, spec: OpSpec, inputs: dict[str, Any], attrs: dict[str, Any],
            device: str) -> tuple:
    """Run `spec` on `device` with inputs by name; always a tuple of outputs (NumPy arrays)."""
    from opsdk.runtime.frontend.api import apply_op

    args = [list(inputs[t.name]) if t.is_list else inputs[t.name] for t in spec.inputs]
    result = apply_op(registry, spec.qualified_name, args, attrs, device=device)  # never a namesake
    outs = tuple(result) if isinstance(result, (tuple, list)) and len(spec.outputs) > 1 else (result,)
    return tuple(_list_output(_to_numpy(o)) if t.is_list else _to_numpy(o)
                 for t, o in zip(spec.outputs, outs))


def _list_output(value: Any) -> tuple:
    """A list output as a tuple of arrays. Eager calls may hand back the pieces stacked into one
    array (NumPy's asarray of a list of equal shapes); its first axis then counts the pieces."""
    return tuple(value) if isinstance(value, (tuple, list, np.ndarray)) else (value,)


def _to_numpy(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_to_numpy(v) for v in value)
    if hasattr(value, "get") and not isinstance(value, np.ndarray):
        return value.get()  # a CuPy array
    return np.asarray(value)


def gpu_available() -> bool:
    """Whether CuPy is installed and sees at least one CUDA device."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any CUDA driver failure means: no usable GPU
        return False


def devices_to_check(spec: OpSpec) -> tuple[str, ...]:
    """The op's kernel devices that can run here: python and cpu always, cuda with a GPU."""
    order = ("python", "cpu", "cuda")
    have = set(spec.devices)
    return tuple(d for d in order if d in have and (d != "cuda" or gpu_available()))
