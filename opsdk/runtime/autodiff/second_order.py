"""Gradients of the builtin gradient ops, so that a gradient can be differentiated again (a
gradient penalty, double backpropagation, a Hessian-vector product).

The builtin gradient ops declare `gradient: null` (opdefs/builtin/*.yaml); here each common one
gets a rule composed of builtin ops, registered with autodiff's `register_gradient_rule`, which
`gradients` uses for an op whose declaration names no gradient op. A rule gets the node and the
gradients of its outputs (`gg`, None where none flows) and returns one per data input. Most
gradient ops are linear in their incoming gradient `g`: the gradient for `g` is then the
adjoint map applied to `gg` (for the self-adjoint ones the op itself), and the gradient for
the values they read comes from the product rule. Gradient ops that read their inputs only for
shapes or signs (add_grad, relu_grad, maximum_grad, ...) pass none to those inputs: their
derivative is zero wherever it exists.

Each rule is checked against finite differences of the first gradient in
tests/runtime/test_second_order.py.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from opsdk.runtime.autodiff.gradients import register_gradient_rule
from opsdk.runtime.frontend.api import apply_op
from opsdk.runtime.frontend.registries import builtin_registry
from opsdk.runtime.ir.graph import Operation
from opsdk.runtime.ir.tensor import Tensor

__all__ = ["SECOND_ORDER"]

Grads = list[Optional[Tensor]]


def _op(name: str, inputs: Sequence[Any], attrs: Optional[dict] = None) -> Any:
    return apply_op(builtin_registry(), name, list(inputs), dict(attrs or {}))


def _or_zeros(g: Optional[Tensor], like: Tensor) -> Tensor:
    return g if g is not None else _op("zeros_like", [like])


def _sum(*terms: Optional[Tensor]) -> Optional[Tensor]:
    present = [t for t in terms if t is not None]
    if not present:
        return None
    total = present[0]
    for t in present[1:]:
        total = _op("add", [total, t])
    return total


def _unbroadcast(g: Tensor, like: Tensor) -> Tensor:
    """`g` summed down to `like`'s shape (NumPy broadcasting undone), as add's gradient does."""
    return _op("add_grad", [like, like, g])[0]


def _spread(g: Tensor, like: Tensor) -> Tensor:
    """`g` broadcast to `like`'s shape."""
    return _op("add", [g, _op("zeros_like", [like])])


# -- binary: (x, y, grad_z) -> (grad_x, grad_y) ---------------------------------------------------

def _add_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    x, y, g = op.inputs
    return [None, None, _spread(_sum(*gg), g)] if any(v is not None for v in gg) else [None] * 3


def _sub_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    x, y, g = op.inputs
    ggx, ggy = gg
    minus = None if ggy is None else _op("neg", [ggy])
    total = _sum(ggx, minus)
    return [None, None, None if total is None else _spread(total, g)]


def _mul_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # grad_x = unb(g * y), grad_y = unb(g * x)
    x, y, g = op.inputs
    ggx, ggy = gg
    dx = None if ggy is None else _op("mul_grad", [x, ggy, g])[0]
    dy = None if ggx is None else _op("mul_grad", [ggx, y, g])[1]
    dg = _sum(None if ggx is None else _op("mul", [ggx, y]),
              None if ggy is None else _op("mul", [x, ggy]))
    return [dx, dy, None if dg is None else _spread(dg, g)]


def _div_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # grad_x = unb(g / y), grad_y = unb(-g * x / y^2)
    x, y, g = op.inputs
    ggx, ggy = gg
    y2 = _op("square", [y])
    dx = dy = dg = None
    if ggx is not None:
        dg = _op("div", [ggx, y])
        dy = _unbroadcast(_op("neg", [_op("div", [_op("mul", [g, ggx]), y2])]), y)
    if ggy is not None:
        # -g * ggy / y^2 for x; 2 g x ggy / y^3 for y; -ggy x / y^2 for g
        t = _op("div", [_op("mul", [g, ggy]), y2])
        dx = _unbroadcast(_op("neg", [t]), x)
        twice = _op("div", [_op("mul", [_op("add", [t, t]), x]), y])
        dy = _sum(dy, _unbroadcast(twice, y))
        dg = _sum(dg, _op("neg", [_op("div", [_op("mul", [ggy, x]), y2])]))
    return [dx, dy, None if dg is None else _spread(dg, g)]


def _pow_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # grad_x = unb(g * y * x^(y-1)), grad_y = unb(g * z * L) with L = log(x) where x > 0, else 0
    # (the kernel's safe log); z = x^y is an input, its dependence on x and y reaches them
    # through pow's own gradient
    x, y, z, g = op.inputs
    ggx, ggy = gg
    if ggx is None and ggy is None:
        return [None] * 4
    one = _op("ones_like", [y])
    positive = _op("greater", [x, _op("zeros_like", [x])])
    safe_x = _op("where", [positive, x, _op("ones_like", [x])])
    log_x = _op("where", [positive, _op("log", [safe_x]), _op("zeros_like", [x])])
    before = _op("pow", [x, _op("sub", [y, one])])  # x^(y-1)
    dx = dy = dz = dg = None
    if ggx is not None:
        term = _op("mul", [g, ggx])
        # d/dx: g ggx y (y-1) x^(y-2); d/dy: g ggx (x^(y-1) + y x^(y-1) log x)
        twice = _op("pow", [x, _op("sub", [y, _op("add", [one, one])])])
        dx = _unbroadcast(_op("mul", [term, _op("mul", [_op("mul", [y, _op("sub", [y, one])]),
                                                         twice])]), x)
        dy = _unbroadcast(_op("mul", [term, _op("mul", [before, _op("add", [
            _op("ones_like", [log_x]), _op("mul", [y, log_x])])])]), y)
        dg = _op("mul", [ggx, _op("mul", [y, before])])
    if ggy is not None:
        term = _op("mul", [g, ggy])
        # d/dx: g ggy z / x where x > 0; d/dz: g ggy log x
        over_x = _op("where", [positive, _op("div", [_op("mul", [term, z]), safe_x]),
                               _op("zeros_like", [_op("mul", [term, z])])])
        dx = _sum(dx, _unbroadcast(over_x, x))
        dz = _unbroadcast(_op("mul", [term, log_x]), z)
        dg = _sum(dg, _op("mul", [ggy, _op("mul", [z, log_x])]))
    return [dx, dy, dz, None if dg is None else _spread(dg, g)]


def _matmul_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # grad_x = g @ y^T, grad_y = x^T @ g: bilinear, so matmul_grad itself gives the rest
    x, y, g = op.inputs
    ggx, ggy = gg
    dx, dy = _op("matmul_grad", [_or_zeros(ggx, x), _or_zeros(ggy, y), g])
    dg = _sum(None if ggx is None else _op("matmul", [ggx, y]),
              None if ggy is None else _op("matmul", [x, ggy]))
    return [dx if ggy is not None else None, dy if ggx is not None else None, dg]


def _conv2d_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # bilinear in (x, filter) as matmul: conv2d_grad itself gives the gradients for both
    x, w, g = op.inputs
    ggx, ggw = gg
    dx, dw = _op("conv2d_grad", [_or_zeros(ggx, x), _or_zeros(ggw, w), g], op.attrs)
    dg = _sum(None if ggx is None else _op("conv2d", [ggx, w], op.attrs),
              None if ggw is None else _op("conv2d", [x, ggw], op.attrs))
    return [dx if ggw is not None else None, dw if ggx is not None else None, dg]


def _where_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    cond, x, y, g = op.inputs
    ggx, ggy = gg
    if ggx is None and ggy is None:
        return [None] * 4
    picked = _op("where", [cond, _or_zeros(ggx, x), _or_zeros(ggy, y)])
    return [None, None, None, _spread(picked, g)]


def _select_grad(keep: str) -> Callable:
    # maximum_grad / minimum_grad: g to x where x wins (ties included), to y elsewhere
    def rule(op: Operation, gg: Grads, _: Callable) -> Grads:
        x, y, g = op.inputs
        ggx, ggy = gg
        if ggx is None and ggy is None:
            return [None] * 3
        wins = _op(keep, [x, y])
        dg = _op("where", [wins, _or_zeros(ggx, x), _or_zeros(ggy, y)])
        return [None, None, _spread(dg, g)]
    return rule


def _bias_add_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    value, bias, g = op.inputs
    ggv, ggb = gg
    if ggv is None and ggb is None:
        return [None] * 3
    dg = ggv if ggb is None else _op("bias_add", [_or_zeros(ggv, g), ggb])
    return [None, None, dg]


# -- unary: (x, [y,] grad_y) -> grad_x -------------------------------------------------------------

def _linear(name: str) -> Callable:
    """A gradient op that is its own adjoint in grad_y and reads x (and y) only for signs or
    shapes: relu_grad, abs_grad, ..."""
    def rule(op: Operation, gg: Grads, _: Callable) -> Grads:
        (ggx,) = gg
        if ggx is None:
            return [None] * len(op.inputs)
        again = _op(name, [*op.inputs[:-1], ggx], op.attrs)
        return [None] * (len(op.inputs) - 1) + [again]
    return rule


def _linear_adjoint(name: str) -> Callable:
    """A gradient op of (x, grad_y) linear in grad_y whose adjoint is the forward op `name`
    (avg_pool_grad spreads each window's gradient evenly; avg_pool averages it back)."""
    def rule(op: Operation, gg: Grads, _: Callable) -> Grads:
        (ggx,) = gg
        return [None, None if ggx is None else _op(name, [ggx], op.attrs)]
    return rule


def _through_y(name: str, dy: Callable[[Tensor, Tensor, Tensor], Tensor]) -> Callable:
    """A gradient op of (x, y, grad_y), linear in grad_y, whose factor depends on y = f(x): the
    gradient for y is `dy(y, grad_y, ggx)` (and reaches x through f's own gradient)."""
    def rule(op: Operation, gg: Grads, _: Callable) -> Grads:
        x, y, g = op.inputs
        (ggx,) = gg
        if ggx is None:
            return [None] * 3
        return [None, dy(y, g, ggx), _op(name, [x, y, ggx])]
    return rule


def _through_x(name: str, dx: Callable[[Tensor, Tensor, Tensor], Tensor]) -> Callable:
    """As `_through_y`, for a gradient op of (x, grad_y) whose factor depends on x."""
    def rule(op: Operation, gg: Grads, _: Callable) -> Grads:
        x, g = op.inputs
        (ggx,) = gg
        if ggx is None:
            return [None] * 2
        return [dx(x, g, ggx), _op(name, [x, ggx], op.attrs)]
    return rule


def _along(t: Tensor, axis: int) -> Tensor:
    """`t` summed along `axis`, kept as a dim of 1 (a softmax's sums)."""
    return _op("reduce_sum", [t], {"axes": [axis], "keepdims": True})


def _softmax_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # grad_x = y * (g - sum(g * y)); its Jacobian in g is symmetric
    x, y, g = op.inputs
    (ggx,) = gg
    if ggx is None:
        return [None] * 3
    axis = op.attrs["axis"]
    s = _along(_op("mul", [g, y]), axis)
    dy = _op("sub", [_op("mul", [ggx, _op("sub", [g, s])]),
                     _op("mul", [g, _along(_op("mul", [ggx, y]), axis)])])
    return [None, dy, _op("softmax_grad", [x, y, ggx], {"axis": axis})]


def _log_softmax_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # grad_x = g - exp(y) * sum(g), y = log_softmax(x)
    x, y, g = op.inputs
    (ggx,) = gg
    if ggx is None:
        return [None] * 3
    axis = op.attrs["axis"]
    p = _op("exp", [y])
    dy = _op("neg", [_op("mul", [_op("mul", [ggx, p]), _along(g, axis)])])
    dg = _op("sub", [ggx, _along(_op("mul", [ggx, p]), axis)])
    return [None, dy, dg]


def _list_grad(name: str) -> Callable:
    # stack_grad / concat_grad split grad_y into the list's parts: the adjoint joins them
    def rule(op: Operation, gg: Grads, _: Callable) -> Grads:
        parts = op.inputs[:-1]
        if all(v is None for v in gg):
            return [None] * len(op.inputs)
        joined = _op(name, [[_or_zeros(v, p) for v, p in zip(gg, parts)]],
                     {"axis": op.attrs["axis"]})
        return [None] * len(parts) + [joined]
    return rule


def _split_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # split_grad joins the pieces' gradients: the adjoint cuts at the pieces' sizes again
    (ggx,) = gg
    pieces = op.inputs[1:]
    if ggx is None:
        return [None] * len(op.inputs)
    cut = _op("concat_grad", [list(pieces), ggx], {"axis": op.attrs["axis"]})
    return [None, *cut]


def _reduction(name: str) -> Callable:
    # reduce_sum_grad / reduce_mean_grad broadcast g back over the reduced axes: the adjoint is
    # the reduction itself
    def rule(op: Operation, gg: Grads, _: Callable) -> Grads:
        (ggx,) = gg
        if ggx is None:
            return [None, None]
        return [None, _op(name, [ggx], {k: op.attrs[k] for k in ("axes", "keepdims")
                                        if k in op.attrs})]
    return rule


def _reshape_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    # reshape_grad puts grad_y back into x's shape; the adjoint is the forward reshape
    (ggx,) = gg
    return [None, None if ggx is None else _op("reshape", [ggx], {"shape": op.attrs["shape"]})]


def _transpose_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    (ggx,) = gg
    return [None, None if ggx is None else _op("transpose", [ggx], {"perm": op.attrs["perm"]})]


def _slice_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    (ggx,) = gg
    if ggx is None:
        return [None, None]
    attrs = {k: op.attrs[k] for k in ("begin", "size", "clamp") if k in op.attrs}
    return [None, _op("slice", [ggx], attrs)]


def _gather_grad(op: Operation, gg: Grads, _: Callable) -> Grads:
    (ggp,) = gg
    params, indices, g = op.inputs
    return [None, None, None if ggp is None else _op("gather", [ggp, indices],
                                                      {"axis": op.attrs.get("axis", 0)})]


SECOND_ORDER: dict[str, Callable] = {
    "add_grad": _add_grad, "sub_grad": _sub_grad, "mul_grad": _mul_grad, "div_grad": _div_grad,
    "matmul_grad": _matmul_grad, "bias_add_grad": _bias_add_grad, "pow_grad": _pow_grad,
    "maximum_grad": _select_grad("greater_equal"), "minimum_grad": _select_grad("less_equal"),
    "relu_grad": _linear("relu_grad"), "abs_grad": _linear("abs_grad"),
    "neg_grad": _linear("neg_grad"), "dropout_grad": _linear("dropout_grad"),
    "sigmoid_grad": _through_y("sigmoid_grad", lambda y, g, gg: _op("mul", [
        _op("mul", [g, gg]), _op("sub", [_op("ones_like", [y]), _op("add", [y, y])])])),
    "tanh_grad": _through_y("tanh_grad", lambda y, g, gg: _op("neg", [
        _op("mul", [_op("mul", [g, gg]), _op("add", [y, y])])])),
    "exp_grad": _through_y("exp_grad", lambda y, g, gg: _op("mul", [g, gg])),
    "sqrt_grad": _through_y("sqrt_grad", lambda y, g, gg: _op("neg", [
        _op("div", [_op("mul", [g, gg]), _op("add", [_op("square", [y]), _op("square", [y])])])])),
    "square_grad": _through_x("square_grad", lambda x, g, gg: _op("square_grad", [g, gg])),
    "log_grad": _through_x("log_grad", lambda x, g, gg: _op("neg", [
        _op("div", [_op("mul", [g, gg]), _op("square", [x])])])),
    "softmax_grad": _softmax_grad,
    "reduce_sum_grad": _reduction("reduce_sum"), "reduce_mean_grad": _reduction("reduce_mean"),
    "reshape_grad": _reshape_grad, "transpose_grad": _transpose_grad,
    "slice_grad": _slice_grad, "gather_grad": _gather_grad,
    "conv2d_grad": _conv2d_grad, "where_grad": _where_grad,
    "avg_pool_grad": _linear_adjoint("avg_pool"), "identity_grad": _linear("identity_grad"),
    "log_softmax_grad": _log_softmax_grad,
    "stack_grad": _list_grad("stack"), "concat_grad": _list_grad("concat"),
    "split_grad": _split_grad,
}

for _name, _rule in SECOND_ORDER.items():
    register_gradient_rule(_name, _rule)
