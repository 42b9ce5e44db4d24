"""DLPack in and out: any array offering `__dlpack__` as NumPy (or CuPy) without a copy, and back.

An eager call receives torch tensors, JAX arrays, CuPy arrays or any other DLPack producer; the
kernels take NumPy arrays on the CPU and CuPy arrays on a GPU. `as_kernel_array` makes the one
from the other by DLPack (zero-copy where the producer's memory allows), and `like` turns a result
back into the kind of array the caller passed, again by DLPack.

    >>> import numpy as np
    >>> arr = as_kernel_array(np.arange(3.0))
    >>> like(arr * 2, np.arange(3.0))
    array([0., 2., 4.])
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from opsdk.registry.errors import OpError

# DLPack device types (dlpack.h: DLDeviceType): where an array's memory lives.
DLPACK_CPU = 1
DLPACK_CUDA_HOST = 3
_HOST_DEVICES = (DLPACK_CPU, DLPACK_CUDA_HOST)


def is_foreign_array(value: Any) -> bool:
    """Whether `value` is a DLPack array that kernels cannot take as it is: not a NumPy array or
    scalar, and not a CuPy array (GPU kernels take those directly)."""
    return (hasattr(value, "__dlpack__") and not isinstance(value, (np.ndarray, np.generic))
            and type(value).__module__.split(".")[0] != "cupy")


def _detached(value: Any) -> Any:
    # A torch tensor that requires grad refuses export: the kernel reads values only.
    detach = getattr(value, "detach", None)
    return detach() if callable(detach) and type(value).__module__.startswith("torch") else value


def on_host(value: Any) -> bool:
    """Whether a DLPack array's memory is CPU memory (NumPy can view it)."""
    device = getattr(value, "__dlpack_device__", None)
    return device is None or int(device()[0]) in _HOST_DEVICES


def as_kernel_array(value: Any) -> Any:
    """NumPy array (CPU memory) or CuPy array (GPU memory) viewing `value`; others unchanged.

    Raises TypeError naming the array's type when its memory is on a GPU and CuPy is missing.
    """
    if not is_foreign_array(value):
        return value
    value = _detached(value)
    if on_host(value):
        return np.from_dlpack(value)
    try:
        import cupy
    except ImportError:
        raise TypeError(f"a {type(value).__module__}.{type(value).__name__} on a GPU needs CuPy "
                        "to run opsdk kernels: pip install 'opsdk[gpu]'") from None
    return cupy.from_dlpack(value)


def as_kernel_inputs(spec: Any, inputs: Any) -> list:
    """An eager call's inputs (a list input a list) as kernel arrays, refusing what a kernel
    cannot take with an error naming the op and the input: a torch tensor that requires grad
    while autograd is on (the result would silently carry no gradient: `opsdk.torch` runs the
    op with its declared gradient), or an array NumPy cannot view (bfloat16: the op's dtypes)."""
    out: list = []
    for tspec, value in zip(spec.inputs, inputs):
        items = value if isinstance(value, (list, tuple)) else None
        converted = [_kernel_input(spec, tspec.name, v) for v in (items if items is not None
                                                                 else [value])]
        out.append(converted if items is not None else converted[0])
    return out


def _kernel_input(spec: Any, name: str, value: Any) -> Any:
    if not is_foreign_array(value):
        return value
    if getattr(value, "requires_grad", False) and _torch_grad_enabled():
        raise OpError(f"{spec.name}: input '{name}' is a torch tensor that requires grad; an eager "
                      f"opsdk call would return a result without a gradient. Call the op through "
                      f"opsdk.torch (`from opsdk.torch import ops; ops.{spec.name}(...)`: autograd "
                      f"records it), or pass `.detach()`")
    try:
        return as_kernel_array(value)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        if isinstance(exc, TypeError) and "CuPy" in str(exc):
            raise
        dtype = str(getattr(value, "dtype", "?")).rsplit(".", 1)[-1]
        raise OpError(f"{spec.name}: input '{name}' has dtype {dtype}, which opsdk's kernels "
                      f"cannot read ({exc}); the op takes {_dtypes_text(spec, name)}: cast it "
                      f"first (for torch: `.float()`)") from None


def _dtypes_text(spec: Any, name: str) -> str:
    tensor = next(t for t in spec.inputs if t.name == name)
    for ta in spec.type_attrs:
        if ta.name == tensor.dtype:
            return ", ".join(ta.allowed)
    return tensor.dtype


def _torch_grad_enabled() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.is_grad_enabled())


def _producer_module(value: Any) -> Any:
    """The top-level module of `value`'s type (torch, jax, cupy, ...), if imported."""
    root = type(value).__module__.split(".")[0]
    if root == "jaxlib":
        root = "jax"
    return sys.modules.get(root)


def like(result: Any, example: Any) -> Any:
    """`result` (an array, or a tuple/list of them) as the kind of array `example` is.

    NumPy or non-array examples leave `result` as it is; torch gets `torch.from_dlpack`, JAX
    `jax.dlpack.from_dlpack`, any other producer module its `from_dlpack`.
    """
    if isinstance(result, (tuple, list)):
        return type(result)(like(item, example) for item in result)
    if not is_foreign_array(example) or not hasattr(result, "__dlpack__"):
        return result
    module = _producer_module(example)
    if module is None:
        return result
    if module.__name__ == "jax":
        import jax.dlpack

        return jax.dlpack.from_dlpack(result)
    from_dlpack = getattr(module, "from_dlpack", None)
    return from_dlpack(result) if callable(from_dlpack) else result


def first_foreign(values: Any) -> Any:
    """The first DLPack array (not NumPy) among `values` and the lists in it, or None."""
    for value in values:
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            if is_foreign_array(item):
                return item
    return None
