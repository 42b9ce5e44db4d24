"""Fused elementwise kernels on CUDA GPUs: the compiled binary loaded with CuPy and launched.

The fuse pass (compile/fuse.py) asks `cuda_fused_call(kernel, device)` for a region placed on a
GPU. Compiling and caching go as on the CPU (kernels/fused.py): the compiler is the `cuda` entry
point of group `opsdk.fusion_compilers` (opsdk.build.fusion_cuda, NVRTC), handed the GPU's
compute capability; until the binary is ready, or where NVRTC is missing, the region runs
unfused. A call launches `opsdk_fused` (templates/fused/fused_cuda.cu.j2) on CuPy's current
stream, where the runtime's other CUDA kernels run, into outputs allocated as every cuda
kernel's are (devices/cuda.py, `empty`). A kernel ending in a reduction launches
`opsdk_fused_rows` (and, for rows split across blocks, `opsdk_fused_rows_finish`) as
`rows_launch` says.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Sequence, cast

import numpy as np

from opsdk.registry.elementwise import FusedKernel
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.devices.base import Device
from opsdk.runtime.devices.cuda import empty
from opsdk.runtime.kernels.fused import FusedCall, fused_call, rows_of

BLOCK = 256  # threads per block
BLOCKS_PER_SM = 32  # a grid-stride loop needs no more blocks than keep every SM busy
VECTOR_BYTES = 16  # the kernel's vector loads: float4, double2
WARP = 32
# Rows of at most this many elements are summed by one warp each (a block per row would leave
# most of its threads idle); longer ones by a block per segment.
WARP_ROW = 1024
# A row split across blocks gets segments of at least this many elements, so each block's
# threads have several elements each to hide the memory's latency behind.
MIN_CHUNK = 8 * BLOCK


class RowsLaunch(NamedTuple):
    """How `opsdk_fused_rows` runs over `rows` rows of `inner` elements: rows of `parts`
    segments of `chunk` elements, each summed by `group` threads, on `blocks` blocks of BLOCK
    threads. With parts > 1, `opsdk_fused_rows_finish` adds each row's partial sums."""

    group: int
    parts: int
    chunk: int
    blocks: int


def rows_launch(rows: int, inner: int, sms: int, block: int = BLOCK) -> RowsLaunch:
    """The launch of a fused reduction on a GPU of `sms` multiprocessors. Short rows: a warp
    each. Long rows: a block each, and when there are fewer rows than the blocks that keep every
    SM busy, each row is split into segments (at least MIN_CHUNK elements) so that they do: one
    row of 16M elements is thousands of blocks, not one."""
    full = sms * BLOCKS_PER_SM
    if inner <= WARP_ROW:
        return RowsLaunch(WARP, 1, max(inner, 1), max(1, min(-(-rows // (block // WARP)), full)))
    parts = 1 if rows >= full else max(1, min(-(-full // rows), inner // MIN_CHUNK))
    chunk = -(-inner // parts)
    parts = -(-inner // chunk)  # rounding chunk up may leave the last segments empty
    return RowsLaunch(block, parts, chunk, max(1, min(rows * parts, full)))


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
        """(the kernel's functions on CuPy's current GPU, its SM count), loaded at first need:
        `opsdk_fused`, or `opsdk_fused_rows` and `opsdk_fused_rows_finish` for a reduction."""
        device = cp.cuda.Device()
        found = self._functions.get(device.id)
        if found is None:
            with self._load_lock:
                found = self._functions.get(device.id)
                if found is None:
                    module = cp.RawModule(path=str(self.path))
                    names = (("opsdk_fused_rows", "opsdk_fused_rows_finish")
                             if self.kernel.reduction else ("opsdk_fused",))
                    found = (tuple(module.get_function(name) for name in names),
                             int(device.attributes["MultiProcessorCount"]))
                    self._functions[device.id] = found
        return found

    def __call__(self, device: Device, inputs: Sequence[Any], n_out: int,
                 reduced: Optional[tuple[int, bool]] = None) -> Optional[tuple]:
        """The region's outputs, computed by one launch (two for rows split across blocks);
        None when the values' shapes (known only now) do not fit one pass, and the caller runs
        the region unfused. `reduced`: (trailing axes, keepdims) of a kernel ending in a
        reduction, whose last output is then one value per row."""
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
        if reduced is not None:
            return self._rows(cp, values, shape, n_out, reduced)
        outs = tuple(empty(cp, shape, self.dtype) for _ in range(n_out))
        n = values[self.arrays[0]].size
        if n == 0:
            return outs
        (function,), sms = self._function(cp)
        # CuPy's allocations are aligned; a view of an array at an offset may not be.
        aligned = all(a.data.ptr % VECTOR_BYTES == 0
                      for a in [*(values[i] for i in self.arrays), *outs])
        units = n // self.lanes if aligned else n
        blocks = max(1, min(-(-units // BLOCK), sms * BLOCKS_PER_SM))
        function((blocks,), (BLOCK,), (*values, *outs, np.int64(n), np.int32(aligned)))
        return outs

    def _rows(self, cp: Any, values: list, shape: tuple, n_out: int,
              reduced: tuple[int, bool]) -> tuple:
        rows, inner, reduced_shape = rows_of(shape, reduced)
        outs = (*(empty(cp, shape, self.dtype) for _ in range(n_out - 1)),
                empty(cp, reduced_shape, self.dtype))
        if rows == 0:
            return outs
        (function, finish), sms = self._function(cp)
        launch = rows_launch(rows, inner, sms)
        partial = empty(cp, (rows * launch.parts if launch.parts > 1 else 1,), np.float64)
        function((launch.blocks,), (BLOCK,),
                 (*values, *outs, np.int64(rows), np.int64(inner), np.int64(launch.chunk),
                  np.int32(launch.parts), np.int32(launch.group), partial))
        if launch.parts > 1:
            finish((max(1, min(rows, sms * BLOCKS_PER_SM)),), (BLOCK,),
                   (partial, outs[-1], np.int64(rows), np.int64(inner), np.int32(launch.parts)))
        return outs


def cuda_fused_call(kernel: FusedKernel, device: Device) -> CudaFusedCall:
    """The process's one call of `kernel` for the compute capability of CuPy's current GPU (the
    one `device`'s kernels run on): ready now if the compiler's cache holds it, else compiling
    in the background."""
    arch = int(str(device.xp.cuda.Device().compute_capability))
    return cast(CudaFusedCall, fused_call(kernel, CudaFusedCall, arch))


def cuda_fused_run(kernel: FusedKernel, device: Device, unfused: Callable[[list], tuple],
                   n_out: int, reduced: Optional[tuple[int, bool]] = None
                   ) -> Callable[[Any, Any, list], tuple]:
    """The `_fused` node's run on a GPU: the kernel once it is ready and the values fit one
    pass, else `unfused` (the members' own kernels in order). `reduced`: the node's (trailing
    axes, keepdims) when its region ends in a reduction."""
    call = cuda_fused_call(kernel, device)

    def run(ctx: Any, node: Any, inputs: list) -> tuple:
        outs = call(device, inputs, n_out, reduced) if call.ready else None
        return unfused(inputs) if outs is None else outs
    return run
