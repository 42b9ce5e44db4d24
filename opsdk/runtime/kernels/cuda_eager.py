"""Eager calls on the GPU: `apply_op(..., device="cuda")` over CuPy arrays.

The op's inputs are CuPy arrays (NumPy inputs are copied to the device first); its results are
CuPy arrays, left on the device. A declared cuda kernel (built by `opsdk build --cuda on`) is
called as its generated binding expects (docs/internals.md, "The binding module"):

    cuda(*inputs, *attrs in declaration order, *unbound type attr names,
         *preallocated outputs (a list of them for a list output), stream pointer) -> None

with the outputs allocated here from `infer_outputs` and the current CuPy stream, so the kernel
runs in order with CuPy's own work. An op with only a python kernel runs it with `xp=cupy`.
CuPy is imported only here, only when a call asks for the GPU.

    z = apply_op(registry, "pairwise_manhattan", [x, y], {}, device="cuda")   # a cupy.ndarray
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.spec import OpSpec

from opsdk.runtime.kernels.choice import KernelChoice, bind_kernel, kernel_failure, load_python_kernel


def cupy_module(op: str) -> Any:
    """The `cupy` module when it is installed and sees a GPU; else an OpsdkError saying which."""
    try:
        import cupy
    except ImportError:
        raise OpsdkError(f"{op}: device='cuda' needs CuPy, which is not installed "
                         "(pip install '.[gpu]'), and a CUDA GPU") from None
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - any driver failure means: no usable GPU
        raise OpsdkError(f"{op}: device='cuda' needs a CUDA GPU; CuPy cannot reach one "
                         f"({type(exc).__name__}: {exc})") from None
    if count < 1:
        raise OpsdkError(f"{op}: device='cuda' needs a CUDA GPU; CuPy sees no GPU on this machine")
    return cupy


def run(spec: OpSpec, grouped: Sequence[Any], attrs: Mapping[str, Any],
        type_attrs: Mapping[str, str], outputs: Sequence[tuple], cp: Any) -> list:
    """The op's outputs, one CuPy array per graph output (a list output's N arrays in a row).

    `grouped`: CuPy arrays per declared input (a list for a list input); `outputs`: the
    (shape, dtype) per declared output that `infer_outputs` gave for these inputs."""
    if spec.kernel("cuda") is not None:
        return _run_compiled(spec, grouped, attrs, type_attrs, outputs, cp)
    if spec.kernel("python") is not None:
        bound = bind_kernel(spec, KernelChoice("python", load_python_kernel(spec)), attrs,
                            type_attrs, xp=cp)
        flat = [a for g in grouped for a in (g if isinstance(g, list) else [g])]
        try:
            return [cp.asarray(o) for o in bound(flat)]
        except Exception as exc:  # any kernel failure becomes one error naming the op
            raise kernel_failure(spec.name, exc) from exc
    raise OpsdkError(f"op '{spec.name}': no cuda or python kernel declared, so it cannot run on "
                     f"the GPU (kernels: {', '.join(spec.devices) or 'none'})")


def _run_compiled(spec: OpSpec, grouped: Sequence[Any], attrs: Mapping[str, Any],
                  type_attrs: Mapping[str, str], outputs: Sequence[tuple], cp: Any) -> list:
    from opsdk.runtime.kernels.loader import load_kernel  # imports the built module; only needed here
    fn = load_kernel(spec, "cuda")
    allocated = [_allocate(spec, tspec, shape, dtype, cp)
                 for tspec, (shape, dtype) in zip(spec.outputs, outputs)]
    tail = [attrs[a.name] for a in spec.attrs] + [type_attrs[t.name]
                                                  for t in spec.unbound_type_attrs]
    stream = int(cp.cuda.get_current_stream().ptr)
    try:
        fn(*grouped, *tail, *allocated, stream)
    except Exception as exc:  # the glue's checks and the kernel's failures, naming the op
        raise kernel_failure(spec.name, exc) from exc
    return [a for out in allocated for a in (out if isinstance(out, list) else [out])]


def _allocate(spec: OpSpec, tspec: Any, shape: Any, dtype: str, cp: Any) -> Any:
    """An uninitialised device array for one declared output (a list of N for a list output):
    the kernel writes every element, as on the CPU."""
    if not tspec.is_list:
        return cp.empty(_known(spec, tspec, shape), dtype=dtype)
    if not isinstance(shape, list):
        raise OpError(f"{spec.name}: the shapes of list output '{tspec.name}' are unknown for "
                      "these inputs; a cuda kernel's outputs are allocated from them")
    return [cp.empty(_known(spec, tspec, s), dtype=dtype) for s in shape]


def _known(spec: OpSpec, tspec: Any, shape: Any) -> tuple[int, ...]:
    if shape is None or any(d is None for d in shape):
        raise OpError(f"{spec.name}: the shape of output '{tspec.name}' is unknown for these "
                      f"inputs ({shape}); a cuda kernel's outputs are allocated from it")
    return tuple(int(d) for d in shape)
