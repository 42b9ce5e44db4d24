"""CUDA GPUs through CuPy: CuPy arrays, python kernels with `xp=cupy`, and built `cuda` kernels.

A built cuda kernel is called as its generated binding expects (docs/internals.md, "The binding
module"):

    cuda(*inputs, *attrs in declaration order, *unbound type attr names,
         *preallocated outputs (a list of them for a list output), stream pointer) -> None

with the outputs allocated here from the declaration's shape inference on the actual inputs,
and launched on CuPy's current stream, so kernels run in order with CuPy's own work. A kernel with
declared launches that nvcc did not build is compiled through NVRTC at first use instead
(cuda_jit). CuPy is imported only when a GPU is asked for; the probe's answer is kept for the
process.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.infer import infer_call, infer_outputs
from opsdk.registry.spec import ABSENT, OpSpec
from opsdk.runtime.devices.base import Device, KernelCall, compiled_tail, packer
from opsdk.runtime.devices.cuda_jit import JitKernel, check_inputs, run_launches

_probe_lock = threading.Lock()
# id of the `cupy` entry of sys.modules when probed -> (that entry, (cupy or None, what is
# missing)); the entry is held so its id cannot be reused by another module object
_probes: dict[Any, tuple[Any, tuple[Any, Optional[str]]]] = {}


def probe_cupy() -> tuple[Any, Optional[str]]:
    """(the cupy module, None) when CuPy imports and sees a GPU; else (None, what it needs).
    Probed once per CuPy module object (so a test that stands in a fake CuPy, or blocks it with
    None, is seen); before CuPy was ever imported the probe's own import decides the key."""
    key = id(sys.modules["cupy"]) if "cupy" in sys.modules else "absent"
    found = _probes.get(key)
    if found is not None and (key == "absent" or found[0] is sys.modules.get("cupy")):
        return found[1]
    with _probe_lock:
        result = _probe_now()
        if "cupy" in sys.modules:  # the import just made may have added it
            entry = sys.modules["cupy"]
            _probes[id(entry)] = (entry, result)
        else:
            _probes["absent"] = (None, result)
    return result


def _probe_now() -> tuple[Any, Optional[str]]:
    try:
        import cupy
    except ImportError:
        return None, "needs CuPy, which is not installed (pip install '.[gpu]'), and a CUDA GPU"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - any driver failure means: no usable GPU
        return None, f"needs a CUDA GPU; CuPy cannot reach one ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "needs a CUDA GPU; CuPy sees no GPU on this machine"
    return cupy, None


class CudaDevice(Device):
    """One CUDA GPU (`/gpu:N`, `/device:GPU:N`, `cuda`)."""

    type_name = "GPU"
    kernel_kinds = ("cuda", "python")
    auto = True
    fusion_target = "cuda"

    def unavailable(self) -> Optional[str]:
        cupy, why = probe_cupy()
        if cupy is None:
            return why
        if self.index >= int(cupy.cuda.runtime.getDeviceCount()):
            return f"needs GPU {self.index}; this machine has {cupy.cuda.runtime.getDeviceCount()}"
        return None

    @property
    def xp(self) -> Any:
        cupy, why = probe_cupy()
        if cupy is None:
            raise OpsdkError(f"{self.name} {why}")
        return cupy

    def owns(self, value: Any) -> bool:
        return hasattr(value, "__cuda_array_interface__")

    def from_host(self, array: np.ndarray) -> Any:
        return self.xp.asarray(array)

    def to_host(self, value: Any) -> np.ndarray:
        return self.xp.asnumpy(value)

    def call(self, spec: OpSpec, kind: str, fn: Callable, attrs: Mapping[str, Any],
             type_attrs: Mapping[str, str]) -> KernelCall:
        if kind != "cuda":
            return super().call(spec, kind, fn, attrs, type_attrs)
        if isinstance(fn, JitKernel):
            return _JitCall(spec, fn, attrs, type_attrs, self.xp)
        return _BuiltCall(spec, fn, attrs, type_attrs, self.xp)


class _BuiltCall:
    """A built cuda kernel with its attrs bound: allocates the outputs, launches, returns them."""

    def __init__(self, spec: OpSpec, fn: Callable, attrs: Mapping[str, Any],
                 type_attrs: Mapping[str, str], cp: Any):
        self.spec, self.fn, self.cp = spec, fn, cp
        self.attrs = {**attrs, **type_attrs}
        self.pack = packer(spec, attrs)
        self.tail = compiled_tail(spec, attrs, type_attrs)

    def __call__(self, values: Sequence[Any]) -> Any:
        values = _contiguous(values, self.cp)
        grouped = self.pack(values) if self.pack else list(values)
        # None: an absent optional input (the glue takes None for it).
        shapes = [ABSENT if g is None else [a.shape for a in g] if isinstance(g, list) else g.shape
                  for g in grouped]
        dtypes = [ABSENT if g is None else [a.dtype.name for a in g] if isinstance(g, list)
                  else g.dtype.name for g in grouped]
        allocated = _allocate(self.spec, infer_outputs(self.spec, shapes, dtypes, self.attrs), self.cp)
        stream = int(self.cp.cuda.get_current_stream().ptr)
        self.fn(*grouped, *self.tail, *allocated, stream)
        return allocated[0] if len(allocated) == 1 else tuple(allocated)


class _JitCall:
    """A cuda kernel compiled through NVRTC (cuda_jit): allocates the outputs, runs the declared
    launches on CuPy's current stream, returns the outputs."""

    def __init__(self, spec: OpSpec, jit: JitKernel, attrs: Mapping[str, Any],
                 type_attrs: Mapping[str, str], cp: Any):
        self.spec, self.jit, self.cp = spec, jit, cp
        self.attrs = {**attrs, **type_attrs}

    def __call__(self, values: Sequence[Any]) -> Any:
        values = _contiguous(values, self.cp)
        check_inputs(self.spec, values)
        inferred = infer_call(self.spec, [ABSENT if v is None else v.shape for v in values],
                              [ABSENT if v is None else v.dtype.name for v in values], self.attrs)
        allocated = _allocate(self.spec, inferred.outputs, self.cp)
        run_launches(self.spec, self.jit.functions(inferred.types, self.cp), values, allocated,
                     inferred.sizes, self.attrs)
        return allocated[0] if len(allocated) == 1 else tuple(allocated)


def _contiguous(values: Sequence[Any], cp: Any) -> Sequence[Any]:
    """Each GPU array C-contiguous (a copy only where it is not; list inputs element by element):
    compiled kernels index dense rows, so the runtime copies the views it is handed or made itself
    (a transpose node), as the host's calls do (devices/cpu.py). `values` when none needed one."""
    out = None
    for i, v in enumerate(values):
        if isinstance(v, list):
            fixed = _contiguous(v, cp)
        elif v is not None and hasattr(v, "__cuda_array_interface__") and not v.flags.c_contiguous:
            fixed = cp.ascontiguousarray(v)
        else:
            continue
        if fixed is not v:
            out = list(values) if out is None else out
            out[i] = fixed
    return values if out is None else out


def _allocate(spec: OpSpec, outputs: Sequence[tuple[Any, str]], cp: Any) -> list:
    """Uninitialised device arrays for the declared outputs, from their inferred (shape, dtype)
    (a list of N for a list output): the kernel writes every element, as on the CPU."""
    return [_allocate_one(spec, t, shape, dtype, cp) for t, (shape, dtype) in zip(spec.outputs, outputs)]


def _allocate_one(spec: OpSpec, tspec: Any, shape: Any, dtype: str, cp: Any) -> Any:
    if not tspec.is_list:
        return empty(cp, _known(spec, tspec, shape), dtype)
    if not isinstance(shape, list):
        raise OpError(f"{spec.name}: the shapes of list output '{tspec.name}' are unknown for "
                      "these inputs; a cuda kernel's outputs are allocated from them")
    return [empty(cp, _known(spec, tspec, s), dtype) for s in shape]


def empty(cp: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """An uninitialised GPU array: how every output of a cuda kernel (built, NVRTC or fused) is
    allocated (CuPy's memory pool on its current device)."""
    return cp.empty(shape, dtype=dtype)


def _known(spec: OpSpec, tspec: Any, shape: Any) -> tuple[int, ...]:
    if shape is None or any(d is None for d in shape):
        raise OpError(f"{spec.name}: the shape of output '{tspec.name}' is unknown for these "
                      f"inputs ({shape}); a cuda kernel's outputs are allocated from it")
    return tuple(int(d) for d in shape)
