"""A fused elementwise kernel (registry.elementwise.FusedKernel) as C++ source.

Pure: the same description gives the same bytes. Python decides every name and translates every
expression (`c_expr`); templates/fused/fused_cpu.cc.j2 only substitutes. Arithmetic is done in
the kernel's type, operation by operation, so a chain of adds or multiplies rounds exactly as the
unfused ops do; exp, tanh and sigmoid are computed in double and rounded once.
"""

from __future__ import annotations

from math import factorial

from opsdk.registry.elementwise import Apply, Expr, FusedKernel, Num, Var, kernel_problem

from .render import environment

CTYPES = {"float32": "float", "float64": "double"}
_DOUBLE_FNS = {"exp": "opsdk_exp", "tanh": "opsdk_tanh", "sigmoid": "opsdk_sigmoid"}
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")
# exp(r) for |r| <= ln2/2 by Horner from the r^12 term down (the template starts at 1/12!).
EXP_COEFFICIENTS = tuple(repr(1.0 / factorial(k)) for k in range(11, -1, -1))
# tanh(a) = a * P(a^2) for small a: the odd Taylor coefficients from a^11 down to a^1.
TANH_COEFFICIENTS = ("0.00359212803657248102", "-0.00886323552990219657",
                     "0.0218694885361552028", "-0.0539682539682539683",
                     "0.133333333333333333", "-0.333333333333333333", "1.0")


def c_name(name: str) -> str:
    """The C variable of a value: inputs `in3` -> `v_in3`, steps `t2` -> `v_t2`."""
    return f"v_{name}"


def c_expr(expr: Expr, var=c_name) -> str:
    """One expression in C++, of type `T` (the kernel's type); `var` spells a value's name."""
    if isinstance(expr, Var):
        return var(expr.name)
    if isinstance(expr, Num):
        return f"static_cast<T>({float(expr.value)!r})"
    a = [c_expr(x, var) for x in expr.args]
    op = expr.op
    if op in ("+", "-", "*", "/"):
        return f"({a[0]} {op} {a[1]})"
    if op == "neg":
        return f"(-{a[0]})"
    if op in _COMPARE:
        return f"(({a[0]} {op} {a[1]}) ? static_cast<T>(1) : static_cast<T>(0))"
    if op in _DOUBLE_FNS:
        return f"static_cast<T>({_DOUBLE_FNS[op]}(static_cast<double>({a[0]})))"
    if op == "sqrt":
        return f"std::sqrt({a[0]})"
    if op == "abs":
        return f"std::fabs({a[0]})"
    if op in ("min", "max"):
        return f"opsdk_{op}<T>({a[0]}, {a[1]})"
    if op == "where":
        return f"(({a[0]}) != static_cast<T>(0) ? {a[1]} : {a[2]})"
    raise ValueError(f"no C translation for '{op}'")


def render_fused_cpu(kernel: FusedKernel) -> str:
    """The C++ source of `kernel` for the CPU: `extern "C" void opsdk_fused(in, out, n, threads)`
    with `in`/`out` arrays of data pointers (a scalar input points at its one value)."""
    problem = kernel_problem(kernel)
    if problem is not None:
        raise ValueError(f"fused kernel {kernel.key()}: {problem}")
    loads, body, block = [], [], []
    arrays = {f"in{i}" for i, kind in enumerate(kernel.inputs) if kind == "array"}
    arrays.update(name for name, _ in kernel.steps)

    def element(name: str) -> str:  # in the blocked loop: an array value's element j
        return f"{c_name(name)}[j]" if name in arrays else c_name(name)

    for i, kind in enumerate(kernel.inputs):
        if kind == "array":
            loads.append(f"const T* __restrict__ p_in{i} = static_cast<const T*>(in[{i}]);")
            body.append(f"const T {c_name(f'in{i}')} = p_in{i}[i];")
            block += [f"T {c_name(f'in{i}')}[B];", "#pragma omp simd",
                      f"for (int j = 0; j < B; ++j) {c_name(f'in{i}')}[j] = p_in{i}[i0 + j];"]
        else:
            loads.append(f"const T {c_name(f'in{i}')} = static_cast<const T*>(in[{i}])[0];")
    stores = [f"T* __restrict__ p_out{j} = static_cast<T*>(out[{j}]);"
              for j in range(len(kernel.outputs))]
    for name, expr in kernel.steps:
        body.append(f"const T {c_name(name)} = {c_expr(expr)};")
        block += [f"T {c_name(name)}[B];", "#pragma omp simd",
                  f"for (int j = 0; j < B; ++j) {c_name(name)}[j] = {c_expr(expr, element)};"]
    body.extend(f"p_out{j}[i] = {c_name(name)};" for j, name in enumerate(kernel.outputs))
    for j, name in enumerate(kernel.outputs):
        block += ["#pragma omp simd", f"for (int j = 0; j < B; ++j) p_out{j}[i0 + j] = {element(name)};"]
    return environment().get_template("fused/fused_cpu.cc.j2").render(
        key=kernel.key(), ctype=CTYPES[kernel.dtype], loads=loads, stores=stores, body=body,
        block=block,
        exp_coefficients=EXP_COEFFICIENTS, tanh_coefficients=TANH_COEFFICIENTS)
