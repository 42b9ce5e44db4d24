"""Python kernels of math_extra.yaml's elementwise functions and their gradients (NumPy and
CuPy share each function, so one body serves CPU and GPU)."""

from __future__ import annotations


def _array(xp, z):
    """`z` as an array (NumPy ufuncs give scalars for 0-d inputs)."""
    return z if z.ndim else xp.asarray(z)


def sin(xp, x):
    return _array(xp, xp.sin(x))


def sin_grad(xp, x, grad_y):
    return _array(xp, xp.multiply(grad_y, xp.cos(x)))


def cos(xp, x):
    return _array(xp, xp.cos(x))


def cos_grad(xp, x, grad_y):
    return _array(xp, xp.negative(xp.multiply(grad_y, xp.sin(x))))


def tan(xp, x):
    return _array(xp, xp.tan(x))


def tan_grad(xp, x, y, grad_y):
    return _array(xp, xp.multiply(grad_y, 1 + xp.square(y)))


def asin(xp, x):
    return _array(xp, xp.arcsin(x))


def asin_grad(xp, x, grad_y):
    return _array(xp, xp.divide(grad_y, xp.sqrt(1 - xp.square(x))))


def acos(xp, x):
    return _array(xp, xp.arccos(x))


def acos_grad(xp, x, grad_y):
    return _array(xp, xp.negative(xp.divide(grad_y, xp.sqrt(1 - xp.square(x)))))


def atan(xp, x):
    return _array(xp, xp.arctan(x))


def atan_grad(xp, x, grad_y):
    return _array(xp, xp.divide(grad_y, 1 + xp.square(x)))


def sinh(xp, x):
    return _array(xp, xp.sinh(x))


def sinh_grad(xp, x, grad_y):
    return _array(xp, xp.multiply(grad_y, xp.cosh(x)))


def cosh(xp, x):
    return _array(xp, xp.cosh(x))


def cosh_grad(xp, x, grad_y):
    return _array(xp, xp.multiply(grad_y, xp.sinh(x)))


def expm1(xp, x):
    return _array(xp, xp.expm1(x))


def expm1_grad(xp, x, y, grad_y):
    return _array(xp, xp.multiply(grad_y, y + 1))


def log1p(xp, x):
    return _array(xp, xp.log1p(x))


def log1p_grad(xp, x, grad_y):
    return _array(xp, xp.divide(grad_y, 1 + x))


def floor(xp, x):
    return _array(xp, xp.floor(x))


def ceil(xp, x):
    return _array(xp, xp.ceil(x))


def round_(xp, x):
    return _array(xp, xp.round(x))
