"""Python kernels of special.yaml: erf, erfc, lgamma, digamma and their gradients.

NumPy has none of these functions. They come from SciPy's `scipy.special` where SciPy is
installed (CuPy's `cupyx.scipy.special` on a GPU); without SciPy, erf, erfc and lgamma are
Python's `math` functions applied per element (exact, slower), and digamma and its derivative
(trigamma, for digamma's gradient) are computed here: shifted up by their recurrences until x is
at least 10, then summed from their asymptotic series (relative error about 1e-16), with the
reflection formulas below 0.5. Float32 values are computed in float64 and rounded.
"""

from __future__ import annotations

import math

import numpy as np

_TWO_OVER_SQRT_PI = 1.1283791670955126


def _special(xp):
    """scipy.special (cupyx.scipy.special for CuPy), or None without SciPy."""
    try:
        if xp is np:
            import scipy.special as special
        else:
            import cupyx.scipy.special as special
        return special
    except ImportError:
        return None


def _per_element(fn, x):
    """`fn` of each element of a NumPy array, in float64; a pole (ValueError) is +inf."""
    def safe(v):
        try:
            return fn(v)
        except ValueError:  # math.lgamma at 0, -1, -2, ...: TensorFlow's value there is inf
            return math.inf
        except OverflowError:
            return math.inf
    flat = np.asarray(x, np.float64).reshape(-1)
    return np.fromiter((safe(float(v)) for v in flat), np.float64, flat.size).reshape(np.shape(x))


def _out(xp, x, value):
    return xp.asarray(value).astype(x.dtype, copy=False)


def erf(xp, x):
    special = _special(xp)
    return _out(xp, x, special.erf(x) if special else _per_element(math.erf, x))


def erfc(xp, x):
    special = _special(xp)
    return _out(xp, x, special.erfc(x) if special else _per_element(math.erfc, x))


def lgamma(xp, x):
    special = _special(xp)
    return _out(xp, x, special.gammaln(x) if special else _per_element(math.lgamma, x))


def _digamma(x):
    """psi(x) of a float64 NumPy array; nan at the poles 0, -1, -2, ... (TensorFlow's too)."""
    x = np.array(x, np.float64)
    out = np.zeros_like(x)
    pole = (x <= 0) & (x == np.floor(x))
    low = x < 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        # psi(x) = psi(1 - x) - pi / tan(pi x) below 0.5
        out[low] = -np.pi / np.tan(np.pi * x[low])
        x = np.where(low, 1.0 - x, x)
        for _ in range(10):  # psi(x) = psi(x + 1) - 1 / x, until x >= 10
            small = x < 10
            out[small] -= 1.0 / x[small]
            x = np.where(small, x + 1.0, x)
        inv2 = 1.0 / (x * x)
        series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (
            1 / 240 - inv2 * (1 / 132 - inv2 * (691 / 32760 - inv2 / 12))))))
        out += np.log(x) - 0.5 / x - series
    out[pole] = np.nan
    return out


def _trigamma(x):
    """psi'(x) of a float64 NumPy array; inf at the poles 0, -1, -2, ..."""
    x = np.array(x, np.float64)
    out = np.zeros_like(x)
    pole = (x <= 0) & (x == np.floor(x))
    low = x < 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        # psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x) below 0.5
        sign = np.where(low, -1.0, 1.0)
        out[low] = (np.pi / np.sin(np.pi * x[low])) ** 2
        x = np.where(low, 1.0 - x, x)
        for _ in range(10):  # psi'(x) = psi'(x + 1) + 1 / x^2, until x >= 10
            small = x < 10
            out[small] += sign[small] / (x[small] * x[small])
            x = np.where(small, x + 1.0, x)
        inv = 1.0 / x
        inv2 = inv * inv
        series = inv + inv2 / 2 + inv * inv2 * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 * (
            1 / 30 - inv2 * (5 / 66 - inv2 * (691 / 2730 - inv2 * 7 / 6))))))
        out += sign * series
    out[pole] = np.inf
    return out


def _host(xp, x):
    return np.asarray(x if xp is np else xp.asnumpy(x), np.float64)


def digamma(xp, x):
    special = _special(xp)
    if not special:
        return _out(xp, x, _digamma(_host(xp, x)))
    pole = (x <= 0) & (x == xp.floor(x))  # SciPy's -inf at 0: nan there, as at -1, -2, ...
    return _out(xp, x, xp.where(pole, xp.nan, special.digamma(x)))


def erf_grad(xp, x, grad_y):
    return grad_y * _out(xp, x, _TWO_OVER_SQRT_PI * xp.exp(-xp.square(x)))


def erfc_grad(xp, x, grad_y):
    return grad_y * _out(xp, x, -_TWO_OVER_SQRT_PI * xp.exp(-xp.square(x)))


def lgamma_grad(xp, x, grad_y):
    return grad_y * digamma(xp, x)


def digamma_grad(xp, x, grad_y):
    special = _special(xp)
    slope = special.polygamma(1, x) if special else _trigamma(_host(xp, x))
    return grad_y * _out(xp, x, slope)
