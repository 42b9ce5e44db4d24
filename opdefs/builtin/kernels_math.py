"""Python kernels of the elementwise builtin ops and their gradients (math.yaml, compare.yaml).

Every kernel is `fn(xp, *inputs, **attrs)` over functions NumPy and CuPy share, so one body
serves CPU and GPU. Results go through `_array` because NumPy ufuncs return scalars, not
arrays, for 0-d inputs. Python scalar constants keep the input dtype under NumPy 2's promotion
rules (float32 * 2.0 is float32).

`scalar_form` on a kernel tells the executor it may compute a node whose inputs and output are
all 0-d floats with that Python operator on NumPy scalars instead (~0.1 us, against ~2 us for a
ufunc call on 0-d arrays; docs/internals.md). Only correctly rounded IEEE operations declare
one (+ - * / and negation), so both ways give the same bits.
"""

from __future__ import annotations

import math
import operator

import numpy as _np

from opsdk.runtime.kernels.host_blas import MIN_FLOPS
from opsdk.runtime.kernels.host_blas import product as _host_product
from opsdk.runtime.kernels.threads import blas_threads


def _array(xp, z):
    """`z` as an array: NumPy gives a scalar for 0-d inputs; an array passes through as is
    (`xp.asarray` on it would return it too, after a call)."""
    return z if z.ndim else xp.asarray(z)


def _scalar_form(op):
    """Mark a kernel with the operator that computes it on 0-d floats (see the module doc)."""
    def mark(fn):
        fn.scalar_form = op
        return fn
    return mark


def unbroadcast(xp, grad, shape):
    """Sum `grad` down to `shape`: the adjoint of NumPy broadcasting `shape` up to grad's shape."""
    shape = tuple(shape)
    if tuple(grad.shape) == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and grad.shape[lead + i] != 1)
    if lead and axes == tuple(range(lead)):  # a bias's gradient: the sum of grad's rows
        sums = _row_sums(grad, lead)
        if sums is not None:
            return sums.reshape(shape)
    return xp.reshape(xp.sum(grad, axis=axes, dtype=grad.dtype), shape)


_ONES: dict = {}  # dtype -> a read-only run of ones, grown as needed


def _row_sums(grad, lead):
    """The sum over the `lead` leading axes of a NumPy float array as the product ones @ rows on
    the host's gemm path (kernels/host_blas.py), or None where that path does not take it. NumPy
    sums a reduction over leading axes row by row: a conv layer's bias gradient over [50, 28, 28,
    32] float32 took 0.82 ms, as a product 0.21 ms, with the same error against a float64 sum."""
    if (not isinstance(grad, _np.ndarray) or grad.dtype not in (_np.float32, _np.float64)
            or 2 * grad.size < MIN_FLOPS):
        return None  # small (an empty one among them): NumPy's sum
    rows = math.prod(grad.shape[:lead])
    ones = _ONES.get(grad.dtype)
    if ones is None or ones.size < rows:
        ones = _np.ones(max(rows, 1), grad.dtype)
        ones.flags.writeable = False
        _ONES[grad.dtype] = ones
    return _host_product(ones[:rows].reshape(1, rows), grad.reshape(rows, -1))


# ---- binary arithmetic ---------------------------------------------------------------------

@_scalar_form(operator.add)
def add(xp, x, y, out=None):
    return _array(xp, xp.add(x, y, out=out))


def add_grad(xp, x, y, grad_z):
    return unbroadcast(xp, grad_z, x.shape), unbroadcast(xp, grad_z, y.shape)


@_scalar_form(operator.sub)
def sub(xp, x, y, out=None):
    return _array(xp, xp.subtract(x, y, out=out))


def sub_grad(xp, x, y, grad_z):
    return unbroadcast(xp, grad_z, x.shape), unbroadcast(xp, xp.negative(grad_z), y.shape)


@_scalar_form(operator.mul)
def mul(xp, x, y, out=None):
    return _array(xp, xp.multiply(x, y, out=out))


def _halves(grad_x, grad_y):
    """The `partial` of a binary op's gradient kernel whose two outputs are computed apart: the
    one read alone when the other is read by nobody (compile/steps.py:partial_kernel), as the
    gradient of `x * c` or `x ** 2` with respect to a constant."""
    def partial(needed):
        if needed == (True, False):
            return lambda xp, *inputs: (grad_x(xp, *inputs), None)
        if needed == (False, True):
            return lambda xp, *inputs: (None, grad_y(xp, *inputs))
        return None
    return partial


def _mul_grad_x(xp, x, y, grad_z):
    return unbroadcast(xp, xp.multiply(grad_z, y), x.shape)


def _mul_grad_y(xp, x, y, grad_z):
    return unbroadcast(xp, xp.multiply(grad_z, x), y.shape)


def mul_grad(xp, x, y, grad_z):
    return _mul_grad_x(xp, x, y, grad_z), _mul_grad_y(xp, x, y, grad_z)


mul_grad.partial = _halves(_mul_grad_x, _mul_grad_y)


@_scalar_form(operator.truediv)
def div(xp, x, y, out=None):
    return _array(xp, xp.divide(x, y, out=out))


def div_grad(xp, x, y, grad_z):
    gx = xp.divide(grad_z, y)
    return unbroadcast(xp, gx, x.shape), _div_y_of(xp, x, y, gx)


def _div_y_of(xp, x, y, gx):
    """d/dy of x / y from grad_z / y (grad_x before it is summed): -(grad_z / y) * (x / y), in
    the one temporary x / y where it has gx's shape (a fresh array of the batch's size at every
    call otherwise three)."""
    t = xp.divide(x, y)
    if isinstance(t, xp.ndarray) and t.shape == gx.shape and t.dtype == gx.dtype:
        t = xp.multiply(gx, t, out=t)
        return unbroadcast(xp, xp.negative(t, out=t), y.shape)
    return unbroadcast(xp, xp.negative(xp.multiply(gx, t)), y.shape)


def _div_grad_x(xp, x, y, grad_z):
    return unbroadcast(xp, xp.divide(grad_z, y), x.shape)


def _div_grad_y(xp, x, y, grad_z):
    return _div_y_of(xp, x, y, xp.divide(grad_z, y))


div_grad.partial = _halves(_div_grad_x, _div_grad_y)


def pow_(xp, x, y):  # trailing _: not the builtin
    return _array(xp, xp.power(x, y))


def _pow_grad_x(xp, x, y, z, grad_z):
    return unbroadcast(xp, xp.multiply(grad_z, xp.multiply(y, xp.power(x, y - 1))), x.shape)


def _pow_grad_y(xp, x, y, z, grad_z):
    # d/dy x**y = log(x) x**y, defined for x > 0; elsewhere the gradient is taken as 0.
    positive = x > 0
    safe_x = xp.where(positive, x, xp.ones_like(x))
    gy = xp.where(positive, xp.multiply(grad_z, xp.multiply(xp.log(safe_x), z)), xp.zeros_like(z))
    return unbroadcast(xp, gy, y.shape)


def pow_grad(xp, x, y, z, grad_z):
    return _pow_grad_x(xp, x, y, z, grad_z), _pow_grad_y(xp, x, y, z, grad_z)


pow_grad.partial = _halves(_pow_grad_x, _pow_grad_y)


def atan2(xp, y, x):
    return _array(xp, xp.arctan2(y, x))


def atan2_grad(xp, y, x, grad_z):
    norm = xp.add(xp.multiply(x, x), xp.multiply(y, y))
    return (unbroadcast(xp, xp.divide(xp.multiply(grad_z, x), norm), y.shape),
            unbroadcast(xp, xp.divide(xp.negative(xp.multiply(grad_z, y)), norm), x.shape))


def maximum(xp, x, y):
    return _array(xp, xp.maximum(x, y))


def minimum(xp, x, y):
    return _array(xp, xp.minimum(x, y))


def _select_grad(xp, x, y, grad_z, to_x):
    """maximum/minimum: the gradient goes to whichever input was picked (x on ties)."""
    zero = xp.zeros_like(grad_z)
    gx = xp.where(to_x, grad_z, zero)
    gy = xp.where(to_x, zero, grad_z)
    return unbroadcast(xp, gx, x.shape), unbroadcast(xp, gy, y.shape)


def maximum_grad(xp, x, y, grad_z):
    return _select_grad(xp, x, y, grad_z, xp.broadcast_to(x >= y, grad_z.shape))


def minimum_grad(xp, x, y, grad_z):
    return _select_grad(xp, x, y, grad_z, xp.broadcast_to(x <= y, grad_z.shape))


# ---- unary ---------------------------------------------------------------------------------

@_scalar_form(operator.neg)
def neg(xp, x, out=None):
    return _array(xp, xp.negative(x, out=out))


def neg_grad(xp, x, grad_y, out=None):
    return _array(xp, xp.negative(grad_y, out=out))


def abs_(xp, x, out=None):  # trailing _: not the builtin
    return _array(xp, xp.abs(x, out=out))


def abs_grad(xp, x, grad_y, out=None):
    # sign(x) * grad_y in one array (out may be x's buffer), as square_grad.
    r = xp.sign(x, out=out)
    if not isinstance(r, xp.ndarray) or (out is None and r.shape != getattr(grad_y, "shape", None)):
        return _array(xp, xp.multiply(grad_y, r))
    return xp.multiply(r, grad_y, out=r)


def sign(xp, x, out=None):
    return _array(xp, xp.sign(x, out=out))


def exp(xp, x, out=None):
    return _array(xp, xp.exp(x, out=out))


def exp_grad(xp, x, y, grad_y, out=None):
    return _array(xp, xp.multiply(grad_y, y, out=out))


def log(xp, x, out=None):
    return _array(xp, xp.log(x, out=out))


def log_grad(xp, x, grad_y, out=None):
    return _array(xp, xp.divide(grad_y, x, out=out))


def sqrt(xp, x, out=None):
    return _array(xp, xp.sqrt(x, out=out))


def sqrt_grad(xp, x, y, grad_y, out=None):
    # grad_y / y / 2 in one array (out may be any input's buffer); halving is exact, so this is
    # grad_y / (2 * y) without a temporary.
    r = xp.divide(grad_y, y, out=out)
    if not isinstance(r, xp.ndarray):
        return _array(xp, r * 0.5)
    return xp.multiply(r, 0.5, out=r)


def square(xp, x, out=None):
    return _array(xp, xp.square(x, out=out))


def square_grad(xp, x, grad_y, out=None):
    # One array for the result, written in place (out may be x's or grad_y's buffer): a
    # temporary of x's size is a fresh allocation, page faults and all, at every call.
    product = xp.multiply(x, grad_y, out=out)
    if isinstance(product, xp.ndarray):
        return xp.multiply(product, 2, out=product)
    return _array(xp, product * 2)


def identity(xp, x):
    return x


def identity_grad(xp, x, grad_y):
    return grad_y


# ---- comparisons and selection -------------------------------------------------------------

def equal(xp, x, y):
    return _array(xp, xp.equal(x, y))


def not_equal(xp, x, y):
    return _array(xp, xp.not_equal(x, y))


def less(xp, x, y):
    return _array(xp, xp.less(x, y))


def less_equal(xp, x, y):
    return _array(xp, xp.less_equal(x, y))


def greater(xp, x, y):
    return _array(xp, xp.greater(x, y))


def greater_equal(xp, x, y):
    return _array(xp, xp.greater_equal(x, y))


def where(xp, cond, x, y):
    return _array(xp, xp.where(cond, x, y))


def where_grad(xp, cond, x, y, grad_z):
    zero = xp.zeros_like(grad_z)
    return (unbroadcast(xp, xp.where(cond, grad_z, zero), x.shape),
            unbroadcast(xp, xp.where(cond, zero, grad_z), y.shape))


# ---- matmul --------------------------------------------------------------------------------

def matmul(xp, x, y):
    z = _host_product(x, y)
    if z is not None:
        return z
    _blas_threads(xp)
    return _array(xp, xp.matmul(x, y))


def gemm(xp, a, b, transpose_a, transpose_b):
    """op(a) @ op(b), through NumPy (the gemm op's python kernel, also the GPUs')."""
    _blas_threads(xp)
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"op(a) is {a.shape[0]} x {a.shape[1]} but op(b) is {b.shape[0]} x "
                         f"{b.shape[1]} (transpose_a={transpose_a}, transpose_b={transpose_b}): "
                         "the contracted sizes must agree")
    return _array(xp, xp.matmul(a, b))


def matmul_grad(xp, x, y, grad_z):
    # Batch dims are the same `...` for x, y and z (declared), so no reduction over them.
    return _grad_x(xp, y, grad_z), _grad_y(xp, x, grad_z)


def _blas_threads(xp):
    """NumPy's BLAS on the free cores only (opsdk/runtime/kernels/threads.py)."""
    if xp.__name__ == "numpy":
        blas_threads()


def _grad_x(xp, y, grad_z):
    gx = _host_product(grad_z, y, tb=True)
    if gx is not None:
        return gx
    _blas_threads(xp)
    return _array(xp, xp.matmul(grad_z, xp.swapaxes(y, -1, -2)))


def _grad_y(xp, x, grad_z):
    gy = _host_product(x, grad_z, ta=True)
    if gy is not None:
        return gy
    _blas_threads(xp)
    return _array(xp, xp.matmul(xp.swapaxes(x, -1, -2), grad_z))


def _matmul_grad_partial(needed):
    """One of the two products when only one gradient is read (a first layer's input x needs
    none): the runtime asks for it by `needed` (compile/steps.py:partial_kernel)."""
    if needed == (True, False):
        return lambda xp, x, y, grad_z: (_grad_x(xp, y, grad_z), None)
    if needed == (False, True):
        return lambda xp, x, y, grad_z: (None, _grad_y(xp, x, grad_z))
    return None


matmul_grad.partial = _matmul_grad_partial
