"""CUDA kernels with declared launches, compiled through NVRTC at first use where nvcc built none.

A cuda kernel declared as `{source: x_cuda.cu, launch: [...]}` holds device code only, so NVRTC can
compile it on the machine that runs it. The runtime does not compile (docs/internals.md, "Layers"): it asks
a narrow interface (`KernelCompiler`) that it is handed (`set_compiler`), by default the one the
package declares as its `opsdk.kernel_compilers` entry point (opsdk.build.nvrtc), and runs what
comes back: on the first call of each dtype combination
the compiler gives a cubin (or PTX) for the GPU's architecture and the kernels' lowered names; this
module loads it with CuPy, then per call computes each launch's grid, block and arguments from the
dims and attrs and launches the kernels in order on CuPy's current stream.

`OPSDK_CUDA_JIT` chooses: `auto` (default) compiles through NVRTC only when `opsdk build` built
no cuda kernel for the op (no nvcc); `always` uses NVRTC even then; `never` turns it off.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol, Sequence

import numpy as np

from opsdk.registry.callables import entry_point
from opsdk.registry.errors import OpError, OpsdkError
from opsdk.registry.launch import launch_problem
from opsdk.registry.shapes import eval_expr
from opsdk.registry.spec import LaunchSpec, OpSpec

JIT_ENV = "OPSDK_CUDA_JIT"
JIT_MODES = ("auto", "always", "never")
GRID_MAX = (2147483647, 65535, 65535)
BLOCK_MAX = (1024, 1024, 64)
_AXES = ("x", "y", "z")


class CompiledKernels(Protocol):
    """A compiled program: the binary's path and each launch's lowered kernel name."""
    path: Path
    lowered: tuple[str, ...]


class KernelCompiler(Protocol):
    """What compiles a kernel's declared launches: why it cannot here (or None), and a compile of
    one dtype binding for one arch (a compute capability as an int, 90 for sm_90)."""

    def problem(self) -> Optional[str]: ...

    def compile(self, spec: OpSpec, types: Mapping[str, str], arch: int) -> CompiledKernels: ...


COMPILER_GROUP = "opsdk.kernel_compilers"  # the entry-point group the compiler is found in
_compiler: Optional[KernelCompiler] = None
_looked_up = False


def compiler() -> Optional[KernelCompiler]:
    """The compiler of declared launches: the one `set_compiler` gave, else the `nvrtc` entry point
    of group `opsdk.kernel_compilers` (pyproject.toml names opsdk.build.nvrtc:COMPILER), looked
    up once, at first need, so neither `import opsdk` nor the runtime imports the build layer."""
    global _compiler, _looked_up
    if _compiler is None and not _looked_up:
        _compiler = entry_point(COMPILER_GROUP, "nvrtc")
        _looked_up = True
    return _compiler


def set_compiler(given: Optional[KernelCompiler]) -> None:
    """Hand the runtime a compiler of declared launches (None: look the entry point up again)."""
    global _compiler, _looked_up
    _compiler, _looked_up = given, False


def jit_mode() -> str:
    """`OPSDK_CUDA_JIT`, checked: auto, always or never."""
    mode = os.environ.get(JIT_ENV, "auto").strip().lower() or "auto"
    if mode not in JIT_MODES:
        raise OpsdkError(f"{JIT_ENV}={mode!r}; use one of {', '.join(JIT_MODES)}")
    return mode


def jit_problem(spec: OpSpec) -> Optional[str]:
    """Why `spec`'s cuda kernel cannot compile through NVRTC here, or None when it can."""
    problem = launch_problem(spec)
    if problem is not None:
        return problem
    if jit_mode() == "never":
        return f"{JIT_ENV}=never"
    found = compiler()
    if found is None:
        return (f"no compiler of declared launches is installed (entry point group "
                f"{COMPILER_GROUP}; reinstall opsdk: pip install -e .)")
    return found.problem()


# -- launching ------------------------------------------------------------------------------------

def launch_shapes(spec: OpSpec, launch: LaunchSpec, sizes: Mapping[str, Optional[int]]
                  ) -> Optional[tuple[tuple[int, ...], tuple[int, ...], int]]:
    """(grid, block, shared bytes) of one launch for these sizes, checked against CUDA's limits
    like the nvcc host code; None when the grid is empty (the launch is skipped)."""
    def values(exprs):
        out = [eval_expr(e, sizes) for e in exprs]
        if any(v is None for v in out):
            raise OpError(f"{spec.name}: launch of {launch.kernel} reads a size that is unknown")
        return out + [1] * (3 - len(out))
    grid, block = values(launch.grid), values(launch.block)
    shared = values((launch.shared,))[0]
    for axis, g, b, gmax, bmax in zip(_AXES, grid, block, GRID_MAX, BLOCK_MAX):
        if not 0 <= g <= gmax:
            raise OpError(f"{spec.name}: launch of {launch.kernel}: grid {axis} is {g}; CUDA "
                          f"allows 0 to {gmax}")
        if not 1 <= b <= bmax:
            raise OpError(f"{spec.name}: launch of {launch.kernel}: block {axis} is {b}; CUDA "
                          f"allows 1 to {bmax}")
    if block[0] * block[1] * block[2] > 1024:
        raise OpError(f"{spec.name}: launch of {launch.kernel}: a block of "
                      f"{block[0] * block[1] * block[2]} threads; CUDA allows at most 1024")
    if not 0 <= shared <= 2147483647:
        raise OpError(f"{spec.name}: launch of {launch.kernel}: {shared} bytes of shared memory")
    if 0 in grid:
        return None
    return tuple(grid), tuple(block), shared


def launch_args(spec: OpSpec, launch: LaunchSpec, arrays: Mapping[str, Any],
                sizes: Mapping[str, Optional[int]], attrs: Mapping[str, Any]) -> tuple:
    """The kernel's arguments: device arrays (passed as pointers), int64, float64 and bool
    scalars, in `args` order."""
    out: list[Any] = []
    for arg in launch.args:
        if arg.kind in ("input", "output"):
            value = arrays[arg.name]
            # An absent optional input: a null pointer (a 64-bit zero, as a pointer is passed).
            out.append(np.uint64(0) if value is None else value)
        elif arg.kind == "attr":
            attr = spec.attr(arg.name)
            value = attrs.get(arg.name, attr.default)
            out.append(np.float64(value) if attr.type == "float" else np.bool_(value))
        else:
            out.append(np.int64(eval_expr(arg.expr, sizes)))
    return tuple(out)


class JitKernel:
    """`spec`'s cuda kernel through NVRTC: what `choose_kernel` hands the cuda device in place of
    a built kernel (the device calls it its own way: devices/cuda.py, _JitCall)."""

    def __init__(self, spec: OpSpec):
        self.spec = spec
        self._functions: dict[tuple, tuple] = {}  # (dtypes, device id) -> kernel function per launch
        self._lock = threading.Lock()

    def functions(self, types: Mapping[str, str], cp: Any) -> tuple:
        """The loaded kernel functions of each launch for this dtype binding, on CuPy's device."""
        device = cp.cuda.Device()
        key = (tuple(sorted(types.items())), int(device.id))
        found = self._functions.get(key)
        if found is None:
            with self._lock:
                found = self._functions.get(key)
                if found is None:
                    arch = int(str(device.compute_capability))
                    given = compiler()
                    if given is None:
                        raise OpsdkError(f"{self.spec.name}: {jit_problem(self.spec)}")
                    program = checked_program(self.spec, given.compile(self.spec, types, arch))
                    module = cp.RawModule(path=str(program.path))
                    found = tuple(module.get_function(name) for name in program.lowered)
                    self._functions[key] = found
        return found


def checked_program(spec: OpSpec, program: CompiledKernels) -> CompiledKernels:
    """What a compiler handed back, checked before CuPy loads it: a regular file (never a link,
    which could lead anywhere) and one lowered kernel name per declared launch."""
    path = Path(program.path)
    launches = len(spec.kernel("cuda").launches)
    lowered = program.lowered
    if path.is_symlink() or not path.is_file():
        raise OpsdkError(f"{spec.name}: the compiled cuda kernel {path} is not a regular file "
                         "(a link or missing); remove it and run again to recompile")
    if (not isinstance(lowered, tuple) or len(lowered) != launches
            or not all(isinstance(name, str) and name.isascii() and name for name in lowered)):
        raise OpsdkError(f"{spec.name}: the compiler gave {lowered!r} as the kernels' names; "
                         f"expected {launches} name(s), one per declared launch")
    return program


_kernels: dict[tuple, JitKernel] = {}


def jit_kernel(spec: OpSpec) -> JitKernel:
    """The process's one JitKernel of `spec`'s cuda kernel: each dtype binding is compiled (or
    read from the cache) and loaded once; a later edit of the source is seen by a new process,
    as a rebuilt nvcc kernel is."""
    key = (spec.workspace, spec.name, spec.kernel("cuda"))
    found = _kernels.get(key)
    if found is None:
        found = _kernels.setdefault(key, JitKernel(spec))
    return found


def run_launches(spec: OpSpec, functions: Sequence[Any], inputs: Sequence[Any], outputs: Sequence[Any],
                 sizes: Mapping[str, Optional[int]], attrs: Mapping[str, Any]) -> None:
    """Launch each declared kernel in order on CuPy's current stream, as a RawKernel call does
    (inputs checked by `check_inputs`)."""
    arrays = {t.name: v for t, v in zip(spec.inputs, inputs)}
    arrays.update((t.name, v) for t, v in zip(spec.outputs, outputs))
    for launch, function in zip(spec.kernel("cuda").launches, functions):
        shapes = launch_shapes(spec, launch, sizes)
        if shapes is None:
            continue
        grid, block, shared = shapes
        function(grid, block, launch_args(spec, launch, arrays, sizes, attrs), shared_mem=shared)


def check_inputs(spec: OpSpec, values: Sequence[Any]) -> None:
    """Each input is a C-contiguous GPU array, as the nvcc glue demands."""
    for tensor, value in zip(spec.inputs, values):
        if value is None and tensor.optional:
            continue  # absent: a launch passes it as a null pointer
        if not hasattr(value, "__cuda_array_interface__"):
            raise OpError(f"{spec.name}: input '{tensor.name}' must be a GPU array (CuPy), "
                          f"got {type(value).__name__}")
        if not value.flags.c_contiguous:
            raise OpError(f"{spec.name}: input '{tensor.name}' is not C-contiguous; pass "
                          f"cupy.ascontiguousarray({tensor.name})")
