"""Fused elementwise kernels on CUDA GPUs: the compiled binary loaded with CuPy and launched.

The fuse pass (compile/fuse.py) asks `cuda_fused_call(kernel, device)` for a region placed on a
GPU. Compiling and caching go as on the CPU (kernels/fused.py): the compiler is the `cuda` entry
point of group `opsdk.fusion_compilers` (opsdk.build.fusion_cuda, NVRTC), handed the GPU's
compute capability; until the binary is ready, or where NVRTC is missing, the region runs
unfused. A call launches `opsdk_fused` (templates/fused/fused_cuda.cu.j2) on CuPy's current
stream, where the runtime's other CUDA kernels run, into outputs allocated as every cuda
kernel's are (devices/cuda.py, `empty`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, cast

import numpy as np

from opsdk.registry.elementwise import FusedKernel
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.devices.base import Device
from opsdk.runtime.devices.cuda import empty
from opsdk.runtime.kernels.fused import FusedCall, fused_call

BLOCK = 256  # threads per block
BLOCKS_PER_SM = 32  # a grid-stride loop needs no more blocks than keep every SM busy
VECTOR_BYTES = 16  # the kernel's vector loads: float4, double2


class CudaFusedCall(FusedCall):
    """One fused kernel for GPUs of one compute capability (`args` = (arch,)): ready once its
    binary is compiled; loaded into each GPU's context at its first launch there."""

    target = "cuda"

    def __init__(self, kernel: FusedKernel, arch: int):
        super().__init__(kernel, arch)
        self.path: Optional[Path] = None
        self.dtype = np.dtype(kernel.dtype)
        self.lanes = VECTOR_BYTES // self.dtype.itemsize
        self.arrays = [i for i, kind in enumerate(kernel.inputs) if kind == "array"]
        self._functions: dict[int, tuple[Any, int]] = {}  # device id -> (kernel, SM count)
        self._load_lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.path is not None

    def load(self, path: Any) -> None:
        """Take the compiler's binary; CuPy loads it at the first launch on each GPU."""
        path = Path(path)
        if path.is_symlink() or not path.is_file():
            raise OpsdkError(f"the compiled fused GPU kernel {path} is not a regular file (a "
                             "link or missing); remove it and run again to recompile")
        self.path = path

    def _function(self, cp: Any) -> tuple[Any, int]:
        device = cp.cuda.Device()
        found = self._functions.get(device.id)
        if found is None:
            with self._load_lock:
                found = self._functions.get(device.id)
                if found is None:
                    module = cp.RawModule(path=str(self.path))
                    found = (module.get_function("opsdk_fused"),
                             int(device.attributes["MultiProcessorCount"]))
                    self._functions[device.id] = found
        return found

    def __call__(self, device: Device, inputs: Sequence[Any], n_out: int) -> Optional[tuple]:
        """The region's outputs, computed by one launch; None when the values' shapes (known
        only now) do not fit one pass, and the caller runs the region unfused."""
        cp = device.xp
        values = [cp.asarray(v, dtype=self.dtype) for v in inputs]
        if not self.arrays:
            return None
        shape = values[self.arrays[0]].shape
        if any(values[i].shape != shape for i in self.arrays) or any(
                values[i].size != 1 for i in range(len(values)) if i not in self.arrays):
            return None
        # (ascontiguousarray would make a 0-d value 1-d, and the outputs with it)
        values = [v if v.flags.c_contiguous else cp.ascontiguousarray(v) for v in values]
        outs = tuple(empty(cp, shape, self.dtype) for _ in range(n_out))
        n = values[self.arrays[0]].size
        if n == 0:
            return outs
        function, sms = self._function(cp)
        # CuPy's allocations are aligned; a view of an array at an offset may not be.
        aligned = all(a.data.ptr % VECTOR_BYTES == 0
                      for a in [*(values[i] for i in self.arrays), *outs])
        units = n // self.lanes if aligned else n
        blocks = max(1, min(-(-units // BLOCK), sms * BLOCKS_PER_SM))
        function((blocks,), (BLOCK,), (*values, *outs, np.int64(n), np.int32(aligned)))
        return outs


def cuda_fused_call(kernel: FusedKernel, device: Device) -> CudaFusedCall:
    """The process's one call of `kernel` for the compute capability of CuPy's current GPU (the
    one `device`'s kernels run on): ready now if the compiler's cache holds it, else compiling
    in the background."""
    arch = int(str(device.xp.cuda.Device().compute_capability))
    return cast(CudaFusedCall, fused_call(kernel, CudaFusedCall, arch))


def cuda_fused_run(kernel: FusedKernel, device: Device, unfused: Callable[[list], tuple],
                   n_out: int) -> Callable[[Any, Any, list], tuple]:
    """The `_fused` node's run on a GPU: the kernel once it is ready and the values fit one
    pass, else `unfused` (the members' own kernels in order)."""
    call = cuda_fused_call(kernel, device)

    def run(ctx: Any, node: Any, inputs: list) -> tuple:
        outs = call(device, inputs, n_out) if call.ready else None
        return unfused(inputs) if outs is None else outs
    return run
