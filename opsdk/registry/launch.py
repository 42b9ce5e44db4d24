"""What a declared CUDA launch (`kernels: cuda: launch:`) means in C++, for both of its users:
the generated nvcc host code (opsdk.codegen) and the NVRTC path (opsdk.build.nvrtc, run by
opsdk.runtime.devices.cuda_jit).

Both check the kernel's parameter types against what the launch passes, with

    static_assert(opsdk::same_type<decltype(&KERNEL), void (*)(const float*, int64_t)>::value, ...)

so a kernel taking `int n` where an int64_t is passed fails to compile instead of reading
garbage; they differ only in whether the type attrs are template parameters (nvcc: `T`) or
already bound (NVRTC: `float`).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Optional

from .dtypes import CPP_TYPES
from .shapes import render_cpp
from .spec import LaunchArg, LaunchSpec, OpSpec

# C++ types of the values a launch passes that are not tensors (docs/opdefs.md, "CUDA kernels without host code").
ATTR_ARG_TYPES = {"float": "double", "bool": "bool"}
INT_ARG_TYPE = "int64_t"


def op_namespace(spec: OpSpec) -> str:
    """The C++ namespace of an op's generated types and its kernels (`opsdk_op_<op>`).

    It names the op only, not its workspace: kernel files written by authors open it, and two
    workspaces' ops of one name never meet in one binary (each op is its own extension, linked
    with hidden visibility and loaded with private symbols, or its own NVRTC program)."""
    return f"opsdk_op_{spec.name}"


def launch_problem(spec: OpSpec) -> Optional[str]:
    """Why `spec`'s cuda kernel cannot be launched from its declaration (so NVRTC cannot take
    it), or None when it can: it must declare `launch` and have no list input or output."""
    kernel = spec.kernel("cuda")
    if kernel is None:
        return "it declares no cuda kernel"
    if not kernel.launches:
        return (f"its cuda kernel ({kernel.source}) launches from host code, which only nvcc "
                "compiles; declare `launch:` to compile it through NVRTC at first use")
    if any(t.is_list for t in spec.inputs + spec.outputs):
        return "it has a list input or output, which only a kernel built by nvcc takes"
    return None


def element_type(spec: OpSpec, tensor_name: str, types: Optional[Mapping[str, str]] = None) -> str:
    """A tensor's C++ element type: its type attr's name (or, with `types`, the bound dtype's C++
    type), or the C++ type of its fixed dtype."""
    tensor = next(t for t in spec.inputs + spec.outputs if t.name == tensor_name)
    if any(ta.name == tensor.dtype for ta in spec.type_attrs):
        return CPP_TYPES[types[tensor.dtype]] if types is not None else tensor.dtype
    return CPP_TYPES[tensor.dtype]


def param_types(spec: OpSpec, launch: LaunchSpec,
                types: Optional[Mapping[str, str]] = None) -> tuple[str, ...]:
    """The C++ parameter types of the launched kernel, in `args` order."""
    out = []
    for arg in launch.args:
        if arg.kind == "input":
            out.append(f"const {element_type(spec, arg.name, types)}*")
        elif arg.kind == "output":
            out.append(f"{element_type(spec, arg.name, types)}*")
        elif arg.kind == "attr":
            out.append(ATTR_ARG_TYPES[spec.attr(arg.name).type])
        else:
            out.append(INT_ARG_TYPE)
    return tuple(out)


def bind_kernel_name(spec: OpSpec, launch: LaunchSpec, types: Mapping[str, str]) -> str:
    """The kernel's name with each type attr replaced by its bound dtype's C++ type."""
    names = {ta.name for ta in spec.type_attrs}
    return re.sub(r"(?<![\w:])[A-Za-z_]\w*",
                  lambda m: CPP_TYPES[types[m.group(0)]] if m.group(0) in names else m.group(0),
                  launch.kernel)


def signature_check(spec: OpSpec, launch: LaunchSpec, index: int, types: Mapping[str, str]) -> str:
    """A static_assert (at namespace scope) that the launch's kernel, its type attrs bound to
    `types`, takes exactly the parameters the launch passes."""
    kernel = f"{op_namespace(spec)}::{bind_kernel_name(spec, launch, types)}"
    wanted = f"void (*)({', '.join(param_types(spec, launch, types))})"
    text = (f"op '{spec.name}': launch {index + 1} passes ({', '.join(param_types(spec, launch))}) "
            f"to {launch.kernel}; declare its parameters with exactly these types, in the order of "
            f"args")
    return (f"static_assert(opsdk::same_type<decltype(&{kernel}), {wanted}>::value, "
            f"{_cpp_literal(text)});")


def cpp_sizes(launch: LaunchSpec, name: Callable[[str], str]) -> tuple[list[str], list[str], str]:
    """Grid, block (padded to 3 with 1) and shared bytes as C++ int64 expressions."""
    def pad(exprs):
        return [render_cpp(e, name) for e in exprs] + ["1"] * (3 - len(exprs))
    return pad(launch.grid), pad(launch.block), render_cpp(launch.shared, name)


def cpp_arg(arg: LaunchArg, name: Callable[[str], str]) -> str:
    """One argument as the nvcc host code passes it."""
    if arg.kind == "input" and arg.optional:  # a null pointer where the caller gave None
        return f"(in.{arg.name} ? in.{arg.name}->data : nullptr)"
    if arg.kind == "input":
        return f"in.{arg.name}.data"
    if arg.kind == "output":
        return f"out.{arg.name}.data"
    if arg.kind == "attr":
        return f"attrs.{arg.name}"
    return f"static_cast<int64_t>({render_cpp(arg.expr, name)})"


def _cpp_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
