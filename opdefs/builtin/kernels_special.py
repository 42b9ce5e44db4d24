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
        except (ValueError, OverflowError):  # math.lgamma at 0, -1, ...: TF's value is inf
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


def _shifted_series(x, reflect, sign, term, tail, at_pole):
    """f of a float64 NumPy array for f = digamma or trigamma: below 0.5 by the reflection
    f(x) = reflect(x) + sign * f(1 - x), then by the recurrence f(x) = f(x + 1) + term(x) until
    x is at least 10, where the asymptotic series tail(x) ends it; `at_pole` at 0, -1, -2, ..."""
    x = np.array(x, np.float64)
    out = np.zeros_like(x)
    pole = (x <= 0) & (x == np.floor(x))
    low = x < 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        out[low] = reflect(x[low])
        signs = np.where(low, sign, 1.0)
        x = np.where(low, 1.0 - x, x)
        for _ in range(10):
            small = x < 10
            out[small] += signs[small] * term(x[small])
            x = np.where(small, x + 1.0, x)
        out += signs * tail(x)
    out[pole] = at_pole
    return out


def _digamma_tail(x):
    """log x - 1/(2x) - sum of B_2k / (2k x^2k), to x^-14."""
    inv2 = 1.0 / (x * x)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (
        1 / 240 - inv2 * (1 / 132 - inv2 * (691 / 32760 - inv2 / 12))))))
    return np.log(x) - 0.5 / x - series


def _trigamma_tail(x):
    """1/x + 1/(2x^2) + sum of B_2k / x^(2k+1), to x^-15."""
    inv = 1.0 / x
    inv2 = inv * inv
    return inv + inv2 / 2 + inv * inv2 * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 * (
        1 / 30 - inv2 * (5 / 66 - inv2 * (691 / 2730 - inv2 * 7 / 6))))))


def _digamma(x):
    """psi(x) of a float64 NumPy array; nan at the poles 0, -1, -2, ... (TensorFlow's too)."""
    return _shifted_series(x, lambda v: -np.pi / np.tan(np.pi * v), 1.0, lambda v: -1.0 / v,
                           _digamma_tail, np.nan)


def _trigamma(x):
    """psi'(x) of a float64 NumPy array; inf at the poles 0, -1, -2, ..."""
    return _shifted_series(x, lambda v: (np.pi / np.sin(np.pi * v)) ** 2, -1.0,
                           lambda v: 1.0 / (v * v), _trigamma_tail, np.inf)


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
