"""A fused elementwise kernel (registry.elementwise.FusedKernel) as C++ source for the CPU, or
CUDA source for the GPU.

Pure: the same description gives the same bytes. Python decides every name and translates every
expression (`c_expr`, one printer for both targets, each target's spelling of the functions in
its table); templates/fused/fused_cpu.cc.j2 and fused_cuda.cu.j2 only substitute. Arithmetic is
done in the kernel's type, operation by operation, so a chain of adds or multiplies rounds
exactly as the unfused ops do. On the CPU exp, tanh and sigmoid are computed in double and
rounded once; on the GPU they are CUDA's own functions of the kernel's type (expf, tanhf for
float32), the ones CuPy's kernels call, so the fused kernel computes what the unfused GPU ops do.
"""

from __future__ import annotations

from math import factorial
from typing import Optional

from opsdk.registry.elementwise import (Apply, Expr, FusedKernel, Num, Var, input_period,
                                       kernel_problem)

from .render import environment

CTYPES = {"float32": "float", "float64": "double"}
# How each target spells the functions of the language ({0}, {1}: the arguments, of type T).
# exp, tanh and sigmoid are overloaded for float and double (templates/fused/fused_cpu.cc.j2).
CPU_CALLS = {
    "exp": "opsdk_exp({0})", "tanh": "opsdk_tanh({0})", "sigmoid": "opsdk_sigmoid({0})",
    "sqrt": "std::sqrt({0})", "abs": "std::fabs({0})",
    "min": "opsdk_min<T>({0}, {1})", "max": "opsdk_max<T>({0}, {1})",
}
# NVRTC compiles without headers (no std::): templates/fused/fused_cuda.cu.j2 defines these for
# float and double.
CUDA_CALLS = {name: f"opsdk_{name}({{0}})" for name in ("exp", "tanh", "sigmoid", "sqrt", "abs")}
CUDA_CALLS.update(min="opsdk_min<T>({0}, {1})", max="opsdk_max<T>({0}, {1})")
# CUDA's 16-byte vector type of each kernel type, and how many elements it holds.
CUDA_VECTORS = {"float32": ("float4", 4), "float64": ("double2", 2)}
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")
# exp(r) for |r| <= ln2/2 by Horner from the r^12 term down (the template starts at 1/12!).
EXP_COEFFICIENTS = tuple(repr(1.0 / factorial(k)) for k in range(11, -1, -1))
# The float version's, from r^6 down (the template starts at 1/7!), as float literals.
EXP_COEFFICIENTS_FLOAT = tuple(f"{1.0 / factorial(k):.9e}" for k in range(6, -1, -1))
# tanh(a) = a * P(a^2) for small a: the odd Taylor coefficients from a^11 down to a^1.
TANH_COEFFICIENTS = ("0.00359212803657248102", "-0.00886323552990219657",
                     "0.0218694885361552028", "-0.0539682539682539683",
                     "0.133333333333333333", "-0.333333333333333333", "1.0")


def c_name(name: str) -> str:
    """The C variable of a value: inputs `in3` -> `v_in3`, steps `t2` -> `v_t2`."""
    return f"v_{name}"


def c_expr(expr: Expr, var=c_name, calls=CPU_CALLS) -> str:
    """One expression in C++ (or CUDA), of type `T` (the kernel's type); `var` spells a value's
    name, `calls` the functions (CPU_CALLS, CUDA_CALLS)."""
    if isinstance(expr, Var):
        return var(expr.name)
    if isinstance(expr, Num):
        return f"static_cast<T>({float(expr.value)!r})"
    a = [c_expr(x, var, calls) for x in expr.args]
    op = expr.op
    if op in ("+", "-", "*", "/"):
        return f"({a[0]} {op} {a[1]})"
    if op == "neg":
        return f"(-{a[0]})"
    if op in _COMPARE:
        return f"(({a[0]} {op} {a[1]}) ? static_cast<T>(1) : static_cast<T>(0))"
    if op in calls:
        return calls[op].format(*a)
    if op == "where":
        return f"(({a[0]}) != static_cast<T>(0) ? {a[1]} : {a[2]})"
    raise ValueError(f"no C translation for '{op}'")


def _period_input(i: int, period: int, ctype: str, loads: list, body: list, block: list,
                  chunk: Optional[list]) -> None:
    """The lines reading input i, whose element i is its value i % period: in the blocked loop,
    and in the rows kernel's chunks of B elements (`chunk`, the lines run once per chunk; None
    for a kernel without a reduction), from a copy extended by a block (e_in[k] = in[k %
    period]), so that a block starting at any remainder loads contiguous values; one element at
    a time by the remainder in the elementwise kernel's tail. One remainder per element made a
    reduction over a bias-added region three times slower than the same region without it."""
    b = 512 // (4 if ctype == "float" else 8)  # B of the template: eight 512-bit vectors
    name = c_name(f"in{i}")
    loads += [f"const T* __restrict__ p_in{i} = static_cast<const T*>(in[{i}]);",
              f"T e_in{i}[{period + b}];",
              f"for (int k = 0; k < {period + b}; ++k) e_in{i}[k] = p_in{i}[k % {period}];"]
    block += [f"T {name}[B];", f"const std::int64_t r_in{i} = i0 % {period};", "#pragma omp simd",
              f"for (int j = 0; j < B; ++j) {name}[j] = e_in{i}[r_in{i} + j];"]
    if chunk is None:
        body.append(f"const T {name} = p_in{i}[i % {period}];")
    else:
        chunk.append(f"const std::int64_t r_in{i} = i0 % {period};")
        body.append(f"const T {name} = e_in{i}[r_in{i} + (i - i0)];")


def render_fused_cpu(kernel: FusedKernel) -> str:
    """The C++ source of `kernel` for the CPU: `extern "C" void opsdk_fused(in, out, n, threads)`
    with `in`/`out` arrays of data pointers (a scalar input points at its one value); a kernel
    ending in a reduction is `opsdk_fused_rows(in, out, rows, inner, threads)` instead, its last
    output one value per row of `inner` elements."""
    problem = kernel_problem(kernel)
    if problem is not None:
        raise ValueError(f"fused kernel {kernel.key()}: {problem}")
    loads, body, block = [], [], []
    # the rows kernel's lines per chunk of B elements
    chunk: Optional[list] = [] if kernel.reduction else None
    arrays = {f"in{i}" for i, kind in enumerate(kernel.inputs) if kind != "scalar"}
    arrays.update(name for name, _ in kernel.steps)
    written = kernel.outputs[:-1] if kernel.reduction else kernel.outputs

    def element(name: str) -> str:  # in the blocked loop: an array value's element j
        return f"{c_name(name)}[j]" if name in arrays else c_name(name)

    for i, kind in enumerate(kernel.inputs):
        if kind == "array":
            loads.append(f"const T* __restrict__ p_in{i} = static_cast<const T*>(in[{i}]);")
            body.append(f"const T {c_name(f'in{i}')} = p_in{i}[i];")
            block += [f"T {c_name(f'in{i}')}[B];", "#pragma omp simd",
                      f"for (int j = 0; j < B; ++j) {c_name(f'in{i}')}[j] = p_in{i}[i0 + j];"]
        elif kind == "scalar":
            loads.append(f"const T {c_name(f'in{i}')} = static_cast<const T*>(in[{i}])[0];")
        else:
            _period_input(i, input_period(kind), CTYPES[kernel.dtype], loads, body, block, chunk)
    stores = [f"T* __restrict__ p_out{j} = static_cast<T*>(out[{j}]);"
              for j in range(len(kernel.outputs))]
    for name, expr in kernel.steps:
        body.append(f"const T {c_name(name)} = {c_expr(expr)};")
        block += [f"T {c_name(name)}[B];", "#pragma omp simd",
                  f"for (int j = 0; j < B; ++j) {c_name(name)}[j] = {c_expr(expr, element)};"]
    body.extend(f"p_out{j}[i] = {c_name(name)};" for j, name in enumerate(written))
    for j, name in enumerate(written):
        block += ["#pragma omp simd", f"for (int j = 0; j < B; ++j) p_out{j}[i0 + j] = {element(name)};"]
    reduce = None
    if kernel.reduction is not None:
        kind, step = kernel.reduction
        reduce = {"out": len(kernel.outputs) - 1, "value": c_name(step),
                  "scale": "1.0 / static_cast<double>(inner)" if kind == "mean" else "1.0"}
    return environment().get_template("fused/fused_cpu.cc.j2").render(
        key=kernel.key(), ctype=CTYPES[kernel.dtype], loads=loads, stores=stores, body=body,
        block=block, reduce=reduce, chunk=chunk or [],
        exp_coefficients=EXP_COEFFICIENTS, tanh_coefficients=TANH_COEFFICIENTS,
        exp_coefficients_float=EXP_COEFFICIENTS_FLOAT)


def render_fused_cuda(kernel: FusedKernel) -> str:
    """The CUDA source of `kernel` for NVRTC: `extern "C" __global__ void opsdk_fused(in0, ...,
    out0, ..., n, vectorised)`, one pointer per input (a scalar input points at its one value)
    and per output, a grid-stride loop over the n elements; with `vectorised` nonzero (every
    array 16-byte aligned) it moves 16-byte vectors, the last n % lanes elements one by one.

    A kernel ending in a reduction is `opsdk_fused_rows(in0, ..., out0, ..., rows, inner, chunk,
    parts, group, partial)` instead, its last output one value per row of `inner` elements, and
    `opsdk_fused_rows_finish(partial, out, rows, inner, parts)`, which adds the partial sums of
    rows split into `parts` pieces (kernels/fused_cuda.py chooses the launch)."""
    problem = kernel_problem(kernel)
    if problem is not None:
        raise ValueError(f"fused kernel {kernel.key()}: {problem}")
    arrays = [i for i, kind in enumerate(kernel.inputs) if kind == "array"]
    params = [f"const T* __restrict__ in{i}" for i in range(len(kernel.inputs))]
    params += [f"T* __restrict__ out{j}" for j in range(len(kernel.outputs))]
    written = kernel.outputs[:-1] if kernel.reduction else kernel.outputs
    vector, lanes = CUDA_VECTORS[kernel.dtype]
    reduce = None
    if kernel.reduction is not None:
        kind, step = kernel.reduction
        reduce = {"out": f"out{len(kernel.outputs) - 1}", "value": c_name(step),
                  "scale": "1.0 / static_cast<double>(inner)" if kind == "mean" else "1.0"}
    return environment().get_template("fused/fused_cuda.cu.j2").render(
        key=kernel.key(), ctype=CTYPES[kernel.dtype], vector=vector, lanes=lanes,
        params=params, reduce=reduce,
        scalars=[f"const T {c_name(f'in{i}')} = in{i}[0];"
                 for i, kind in enumerate(kernel.inputs) if kind == "scalar"],
        vector_loads=[f"Pack p_in{i}; p_in{i}.v = reinterpret_cast<const Vec*>(in{i})[j];"
                      for i in arrays],
        lane_loads=[f"const T {c_name(f'in{i}')} = p_in{i}.s[k];" for i in arrays],
        loads=[f"const T {c_name(f'in{i}')} = in{i}[i];" for i in arrays],
        steps=[f"const T {c_name(name)} = {c_expr(expr, calls=CUDA_CALLS)};"
               for name, expr in kernel.steps],
        packs=[f"Pack p_out{j};" for j in range(len(written))],
        lane_stores=[f"p_out{j}.s[k] = {c_name(name)};" for j, name in enumerate(written)],
        vector_stores=[f"reinterpret_cast<Vec*>(out{j})[j] = p_out{j}.v;"
                       for j in range(len(written))],
        stores=[f"out{j}[i] = {c_name(name)};" for j, name in enumerate(written)])
