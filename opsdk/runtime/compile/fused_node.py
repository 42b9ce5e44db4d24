"""The `_fused` node at run time: a region's generated kernel called over its inputs, and the
region run member by member with the members' own kernels while that kernel compiles (or when
the values' shapes known only at run time do not fit one pass). The fuse pass (compile/fuse.py)
makes these nodes."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from opsdk.registry.elementwise import FusedKernel, input_period
from opsdk.runtime.ir.context import in_context, node_label
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.primitives import Primitive, register_primitive
from opsdk.runtime.kernels.choice import bind_kernel
from opsdk.runtime.kernels.fused import fused_call, rows_of
from opsdk.runtime.kernels.fused_cuda import cuda_fused_run
from opsdk.runtime.kernels.threads import kernel_threads

FUSED = "_fused"
_PARALLEL_ELEMENTS = 1 << 16  # from here a fused kernel uses the cores


def member_values(k: int, count: int) -> tuple[str, ...]:
    """The kernel's names of member `k`'s `count` outputs: `tk`, then `tk_1`, `tk_2`, ... (a
    member of several outputs, such as mul_grad)."""
    return (f"t{k}",) + tuple(f"t{k}_{j}" for j in range(1, count))


def _prepare_fused(op: Operation, device: Any, options: Any):
    kernel: FusedKernel = op.attrs["kernel"]
    members: tuple[Operation, ...] = op.attrs["region"]
    unfused = _unfused(op, members)
    reduced = op.attrs.get("reduced")
    if op.attrs["target"] == "cuda":
        return cuda_fused_run(kernel, device, unfused, len(op.outputs), reduced)
    call = fused_call(kernel)
    dtype = np.dtype(kernel.dtype)
    arrays = [i for i, kind in enumerate(kernel.inputs) if kind == "array"]
    # per input, how many values it must hold: None for an array, 1 for a scalar, M for a period
    sizes = [None if kind == "array" else input_period(kind) or 1 for kind in kernel.inputs]
    n_out = len(op.outputs)

    def run(ctx: Any, node: Operation, inputs: list) -> tuple:
        if call.fn is None or not arrays:
            return unfused(inputs)
        values = [np.ascontiguousarray(v, dtype) for v in inputs]
        shape = values[arrays[0]].shape
        if any(values[i].shape != shape for i in arrays) or any(
                size is not None and values[i].size != size for i, size in enumerate(sizes)):
            return unfused(inputs)  # shapes known only now do not fit one pass: run unfused
        n = values[arrays[0]].size
        threads = 0 if n < _PARALLEL_ELEMENTS else _threads()
        pool = getattr(ctx, "buffers", None)
        if reduced is None:
            outs = [_buffer(pool, device, dtype, shape) for _ in range(n_out)]
            call(values, outs, n, threads)
            return tuple(outs)
        rows, inner, reduced_shape = rows_of(shape, reduced)  # one value per row
        outs = [_buffer(pool, device, dtype, shape) for _ in range(n_out - 1)]
        outs.append(_buffer(pool, device, dtype, reduced_shape))
        call(values, outs, rows, inner, threads)
        return tuple(outs)
    return run


def _buffer(pool: Any, device: Any, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """An output buffer from the session's pool (a dead value of this device, dtype and shape
    that nothing else holds; the plan gives fused outputs back to it, compile/memory.py), or a
    new one. The kernel writes every element. A fresh array each step page-faulted its memory
    in anew: the TF1 autoencoder's region of three 800 kB outputs took 1.29 ms a call, 0.39 ms
    with glibc keeping freed memory."""
    buf = None if pool is None else pool.take((device.name, dtype, shape))
    return np.empty(shape, dtype) if buf is None else buf


def _threads() -> int:
    return kernel_threads()  # the session's budget


def _unfused(node: Operation, members: tuple[Operation, ...]):
    """The region run node by node with the members' own kernels (while the kernel compiles,
    or when the values' shapes do not fit one pass); each value is dropped after its last
    reader, as the executor would."""
    kernel: FusedKernel = node.attrs["kernel"]
    reads: tuple[tuple[str, ...], ...] = node.attrs["reads"]
    calls = [bind_kernel(op.spec, choice, op.attrs, op.type_attrs)
             for op, choice in zip(members, node.attrs["kernels"])]
    wanted = kernel.outputs
    last: dict[str, int] = {}
    for k, names in enumerate(reads):
        for name in names:
            last[name] = k
    drop = [[n for n in set(names) if last[n] == k and n not in wanted]
            for k, names in enumerate(reads)]

    def run(inputs: list) -> tuple:
        env: dict[str, Any] = {f"in{i}": v for i, v in enumerate(inputs)}
        for k, (op, call) in enumerate(zip(members, calls)):
            try:
                result = call([env[name] for name in reads[k]])
            except Exception as exc:
                raise in_context(node_label(op.type, op.name), exc) from exc
            if isinstance(result, (tuple, list)):
                env.update(zip(member_values(k, len(op.outputs)), result))
            else:
                env[f"t{k}"] = result
            for name in drop[k]:
                del env[name]
        return tuple(env[name] for name in wanted)
    return run


def _check_fused(attrs: dict, outputs: list) -> Optional[str]:
    return None if isinstance(attrs.get("kernel"), FusedKernel) else "no kernel description"


register_primitive(Primitive(FUSED, False, None, "a region of elementwise nodes run as one kernel",
                             prepare=_prepare_fused, check=_check_fused))
