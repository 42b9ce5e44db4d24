"""Scalar semantics of elementwise ops, and the description of a fused elementwise kernel.

An op that computes each output element from the elements at the same position of its inputs
(NumPy broadcasting: an input of size 1 stands for every position) may say so in its
declaration, as one expression over its input names and its int/float attrs:

    elementwise: "0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))"

An op of several outputs gives one per output (`elementwise: {grad_x: "grad_z * y", grad_y:
"grad_z * x"}`): each output element then depends on the inputs' elements at its position where
every input has the outputs' shape (a gradient summed over broadcast axes is not elementwise,
so the fusion pass joins such a node only where no input is broadcast).

The language is small and C-like: numbers, names, `+ - * /`, unary `-`, comparisons (`< <= > >=
== !=`, giving 1 or 0), `c ? a : b` written `where(c, a, b)`, and the functions in `FUNCTIONS`.
Its values are of the op's (one) float type. The runtime's fusion pass joins chains of such ops
into one generated kernel (docs/internals.md, "Fusion"); an expression is checked here, when the
declaration is read, so a mistake is a `file:line` error.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

# name -> number of arguments. Each has a C translation (codegen) and a NumPy one (below).
FUNCTIONS = {"exp": 1, "tanh": 1, "sigmoid": 1, "sqrt": 1, "abs": 1, "min": 2, "max": 2,
             "where": 3}
BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
MAX_NODES = 256  # an expression longer than this is not a scalar formula
FLOAT_TYPES = ("float32", "float64")


@dataclass(frozen=True)
class Var:
    """An input (or, in a fused kernel, a value computed earlier) by name."""
    name: str


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Apply:
    """An operator (`+`, `<`, `neg`, ...) or a function of FUNCTIONS applied to arguments."""
    op: str
    args: tuple["Expr", ...]


Expr = Union[Var, Num, Apply]


class ElementwiseError(ValueError):
    """What is wrong with an expression (the parser adds file:line)."""


def parse_expression(text: str, names: frozenset[str]) -> Expr:
    """The expression `text` over `names`; raises ElementwiseError saying what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ElementwiseError("write the scalar formula as a string, e.g. \"x + y\"")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ElementwiseError(f"cannot read {text!r}: {exc.msg}") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise ElementwiseError(f"the formula has {count} parts; at most {MAX_NODES}")
    return _convert(tree, names)


def _convert(node: ast.AST, names: frozenset[str]) -> Expr:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Num(float(node.value))
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names)) or "none"
            raise ElementwiseError(f"unknown name '{node.id}' (inputs and number attrs: {known})")
        return Var(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _convert(node.operand, names)
        return Apply("neg", (inner,)) if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        return Apply(BINARY[type(node.op)], (_convert(node.left, names),
                                             _convert(node.right, names)))
    if (isinstance(node, ast.Compare) and len(node.ops) == 1
            and type(node.ops[0]) in COMPARE):
        return Apply(COMPARE[type(node.ops[0])], (_convert(node.left, names),
                                                  _convert(node.comparators[0], names)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        fn = node.func.id
        if fn not in FUNCTIONS:
            raise ElementwiseError(f"unknown function '{fn}' (functions: "
                                   f"{', '.join(sorted(FUNCTIONS))})")
        if len(node.args) != FUNCTIONS[fn]:
            raise ElementwiseError(f"{fn}() takes {FUNCTIONS[fn]} argument(s), got "
                                   f"{len(node.args)}")
        return Apply(fn, tuple(_convert(a, names) for a in node.args))
    raise ElementwiseError(f"'{ast.unparse(node)}' is not part of the formula language (numbers, "
                           "names, + - * /, comparisons, and the functions "
                           f"{', '.join(sorted(FUNCTIONS))})")


def output_formulas(elementwise: Any) -> tuple[Expr, ...]:
    """An op's formulas, one per output (OpSpec.elementwise holds one expression for an op of
    one output, a tuple of them for an op of several)."""
    return elementwise if isinstance(elementwise, tuple) else (elementwise,)


def names_in(expr: Expr) -> set[str]:
    """The names an expression reads."""
    if isinstance(expr, Var):
        return {expr.name}
    if isinstance(expr, Apply):
        return set().union(*(names_in(a) for a in expr.args))
    return set()


def substitute(expr: Expr, values: Mapping[str, Expr]) -> Expr:
    """`expr` with each name of `values` replaced by its expression."""
    if isinstance(expr, Var):
        return values.get(expr.name, expr)
    if isinstance(expr, Apply):
        return Apply(expr.op, tuple(substitute(a, values) for a in expr.args))
    return expr


def evaluate(expr: Expr, env: Mapping[str, Any], xp: Any) -> Any:
    """The expression over arrays (`xp` is NumPy or CuPy), with NumPy's broadcasting: the
    executable meaning of the language, which tests hold the generated kernels to."""
    if isinstance(expr, Var):
        return env[expr.name]
    if isinstance(expr, Num):
        return expr.value
    args = [evaluate(a, env, xp) for a in expr.args]
    return _NUMPY[expr.op](xp, *args)


_NUMPY = {
    "+": lambda xp, a, b: a + b, "-": lambda xp, a, b: a - b, "*": lambda xp, a, b: a * b,
    "/": lambda xp, a, b: a / b, "neg": lambda xp, a: -a,
    "<": lambda xp, a, b: _number(xp, a < b, a, b), "<=": lambda xp, a, b: _number(xp, a <= b, a, b),
    ">": lambda xp, a, b: _number(xp, a > b, a, b), ">=": lambda xp, a, b: _number(xp, a >= b, a, b),
    "==": lambda xp, a, b: _number(xp, a == b, a, b), "!=": lambda xp, a, b: _number(xp, a != b, a, b),
    "exp": lambda xp, a: xp.exp(a), "tanh": lambda xp, a: xp.tanh(a),
    "sigmoid": lambda xp, a: 1 / (1 + xp.exp(-a)), "sqrt": lambda xp, a: xp.sqrt(a),
    "abs": lambda xp, a: xp.abs(a), "min": lambda xp, a, b: xp.minimum(a, b),
    "max": lambda xp, a, b: xp.maximum(a, b), "where": lambda xp, c, a, b: xp.where(c != 0, a, b),
}


def _number(xp, truth, a, b):
    """A comparison's value: 1 or 0 in the operands' type (the language has no booleans)."""
    return xp.asarray(truth).astype(xp.result_type(a, b))


# ------------------------------------------------------------------------- fused kernels
# The reductions a fused kernel may end in (FusedKernel.reduction).
REDUCTIONS = ("sum", "mean")


@dataclass(frozen=True)
class FusedKernel:
    """One generated kernel for a region of elementwise nodes: pure data, which the runtime
    builds and a compiler (found through an entry point; docs/internals.md) turns into code.

    `inputs`: per input, whether it is a full array ("array": one value per element), a
    single value broadcast to every element ("scalar"), or M values repeating along the
    elements ("period:M": element i reads value i % M; a [C] bias over [n, C]). `steps`:
    `(name, expr)` in order, each expression over the inputs `in0, in1, ...` and earlier step
    names; `outputs`: the step names written out, in order. Every value has type `dtype`.

    `reduction`: None, or `(kind, step)` for a region that ends in a reduction (`sum` or `mean`)
    of the value `step` over its trailing axes. Such a kernel runs over rows (the reduced
    extent is a row's length, known at run time) and its last output is the reduced value, one
    per row, named after the reduction's node rather than a step."""

    dtype: str
    inputs: tuple[str, ...]
    steps: tuple[tuple[str, Expr], ...]
    outputs: tuple[str, ...]
    reduction: Optional[tuple[str, str]] = None

    def key(self) -> str:
        """A content key: the same kernel gives the same key in every process."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:24]


def input_period(kind: str) -> Optional[int]:
    """M of a "period:M" input kind (M >= 2), else None."""
    head, _, tail = kind.partition(":")
    if head != "period" or not tail.isdigit() or int(tail) < 2:
        return None
    return int(tail)


def kernel_problem(kernel: FusedKernel) -> Optional[str]:
    """Why the description cannot be a kernel (None when it can): checked before compiling."""
    if kernel.dtype not in FLOAT_TYPES:
        return f"dtype {kernel.dtype}: fused kernels are float32 or float64"
    if any(kind not in ("array", "scalar") and input_period(kind) is None
           for kind in kernel.inputs):
        return "an input kind other than 'array', 'scalar' or 'period:M' (M >= 2)"
    known = {f"in{i}" for i in range(len(kernel.inputs))}
    for name, expr in kernel.steps:
        missing = names_in(expr) - known
        if missing:
            return f"step {name} reads {', '.join(sorted(missing))} before it is computed"
        known.add(name)
    written = kernel.outputs
    if kernel.reduction is not None:
        kind, step = kernel.reduction
        if kind not in REDUCTIONS:
            return f"reduction '{kind}': fused reductions are {', '.join(REDUCTIONS)}"
        if step not in known:
            return f"the reduction reads {step}, which no step computes"
        written = kernel.outputs[:-1]
    if not kernel.outputs or set(written) - known:
        return "an output that no step computes"
    return None
