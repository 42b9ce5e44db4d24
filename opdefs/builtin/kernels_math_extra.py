"""Python kernels of math_extra.yaml's elementwise functions and their gradients (NumPy and
CuPy share each function, so one body serves CPU and GPU).

Each takes `out=None` (its output declares `inplace`, docs/opdefs.md): given an array, possibly
the buffer of one of the inputs its declaration names, it writes the result there. A gradient
computes its factor of x (or y) first, into a temporary of its own, and only then reads grad_y
and writes `out`, so any of the named inputs may be the output's buffer."""

from __future__ import annotations


def _array(xp, z):
    """`z` as an array (NumPy ufuncs give scalars for 0-d inputs)."""
    return z if z.ndim else xp.asarray(z)


def _again(xp, ufunc, a, *more):
    """ufunc(a, *more) written over `a` where it is an array (a temporary of this kernel's
    own), a new value where it is a NumPy scalar (0-d inputs)."""
    return ufunc(a, *more, out=a) if isinstance(a, xp.ndarray) else ufunc(a, *more)


def sin(xp, x, out=None):
    return _array(xp, xp.sin(x, out=out))


def sin_grad(xp, x, grad_y, out=None):
    return _array(xp, xp.multiply(grad_y, xp.cos(x), out=out))


def cos(xp, x, out=None):
    return _array(xp, xp.cos(x, out=out))


def cos_grad(xp, x, grad_y, out=None):
    r = xp.multiply(grad_y, xp.sin(x), out=out)
    return _array(xp, _again(xp, xp.negative, r))


def tan(xp, x, out=None):
    return _array(xp, xp.tan(x, out=out))


def tan_grad(xp, x, y, grad_y, out=None):
    factor = _again(xp, xp.add, xp.square(y), 1)  # 1 + y^2
    return _array(xp, xp.multiply(grad_y, factor, out=out))


def _one_minus_square_root(xp, x):
    """sqrt(1 - x^2), in one temporary."""
    t = xp.square(x)
    t = xp.subtract(1, t, out=t) if isinstance(t, xp.ndarray) else 1 - t
    return _again(xp, xp.sqrt, t)


def asin(xp, x, out=None):
    return _array(xp, xp.arcsin(x, out=out))


def asin_grad(xp, x, grad_y, out=None):
    return _array(xp, xp.divide(grad_y, _one_minus_square_root(xp, x), out=out))


def acos(xp, x, out=None):
    return _array(xp, xp.arccos(x, out=out))


def acos_grad(xp, x, grad_y, out=None):
    r = xp.divide(grad_y, _one_minus_square_root(xp, x), out=out)
    return _array(xp, _again(xp, xp.negative, r))


def atan(xp, x, out=None):
    return _array(xp, xp.arctan(x, out=out))


def atan_grad(xp, x, grad_y, out=None):
    factor = _again(xp, xp.add, xp.square(x), 1)  # 1 + x^2
    return _array(xp, xp.divide(grad_y, factor, out=out))


def asinh(xp, x, out=None):
    return _array(xp, xp.arcsinh(x, out=out))


def asinh_grad(xp, x, grad_y, out=None):
    factor = _again(xp, xp.sqrt, _again(xp, xp.add, xp.square(x), 1))  # sqrt(x^2 + 1)
    return _array(xp, xp.divide(grad_y, factor, out=out))


def acosh(xp, x, out=None):
    return _array(xp, xp.arccosh(x, out=out))


def acosh_grad(xp, x, grad_y, out=None):
    factor = _again(xp, xp.sqrt, _again(xp, xp.subtract, xp.square(x), 1))  # sqrt(x^2 - 1)
    return _array(xp, xp.divide(grad_y, factor, out=out))


def atanh(xp, x, out=None):
    return _array(xp, xp.arctanh(x, out=out))


def atanh_grad(xp, x, grad_y, out=None):
    factor = xp.subtract(1, xp.square(x))  # 1 - x^2
    return _array(xp, xp.divide(grad_y, factor, out=out))


def sinh(xp, x, out=None):
    return _array(xp, xp.sinh(x, out=out))


def sinh_grad(xp, x, grad_y, out=None):
    return _array(xp, xp.multiply(grad_y, xp.cosh(x), out=out))


def cosh(xp, x, out=None):
    return _array(xp, xp.cosh(x, out=out))


def cosh_grad(xp, x, grad_y, out=None):
    return _array(xp, xp.multiply(grad_y, xp.sinh(x), out=out))


def expm1(xp, x, out=None):
    return _array(xp, xp.expm1(x, out=out))


def expm1_grad(xp, x, y, grad_y, out=None):
    return _array(xp, xp.multiply(grad_y, y + 1, out=out))


def log1p(xp, x, out=None):
    return _array(xp, xp.log1p(x, out=out))


def log1p_grad(xp, x, grad_y, out=None):
    return _array(xp, xp.divide(grad_y, 1 + x, out=out))


def floor(xp, x, out=None):
    return _array(xp, xp.floor(x, out=out))


def ceil(xp, x, out=None):
    return _array(xp, xp.ceil(x, out=out))


def round_(xp, x, out=None):
    return _array(xp, xp.round(x, out=out))


def _integer_divisor(xp, who, x, y):
    if xp.dtype(x.dtype).kind in "iu" and not xp.all(y):
        raise ValueError(f"{who}: integer division by zero")


def floor_div(xp, x, y):
    _integer_divisor(xp, "floor_div", x, y)
    return _array(xp, xp.floor_divide(x, y))


def floor_mod(xp, x, y):
    _integer_divisor(xp, "floor_mod", x, y)
    return _array(xp, xp.mod(x, y))
