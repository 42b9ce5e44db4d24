"""Python kernels of the random builtin ops (random.yaml).

Seed semantics: `seed: 0` (the default) draws fresh values on every execution, from OS entropy.
Any other seed makes the op a pure function of (seed, shape, dtype, parameters): every execution,
in every process and on every device, returns the same values, like TensorFlow's stateless random
ops. With attr `sequence` the step hands the kernel `rng=`, the node's generator of the session,
seeded so on its first draw: each execution draws the next values (TensorFlow's seeded ops). The
values are drawn on the host by NumPy's PCG64 (`numpy.random.default_rng(seed)`) and moved to
the device with `xp.asarray`, so that CPU and GPU agree bit for bit.
"""

from __future__ import annotations

import numpy as np


def _rng(seed, rng=None):
    """The generator to draw from: the step's (`rng`: a seeded sequence's, kept by the session),
    else a fresh one, from the seed or (seed 0) from OS entropy."""
    return rng if rng is not None else np.random.default_rng(None if seed == 0 else seed)


def random_uniform(xp, shape, seed, minval, maxval, dtype, sequence=False, rng=None):
    if not minval < maxval:
        raise ValueError(f"random_uniform: minval {minval} must be less than maxval {maxval}")
    u = _rng(seed, rng).random(tuple(shape))  # float64 in [0, 1), then scaled and narrowed
    values = (minval + (maxval - minval) * u).astype(dtype)
    # Narrowing can round up onto maxval; keep the interval half-open.
    top = np.nextafter(np.asarray(maxval, dtype=dtype), np.asarray(minval, dtype=dtype))
    return xp.asarray(np.minimum(values, top))


def random_normal(xp, shape, seed, mean, stddev, dtype, sequence=False, rng=None):
    z = _rng(seed, rng).standard_normal(tuple(shape))
    return xp.asarray((mean + stddev * z).astype(dtype))


def _parameters(xp, *values):
    """The parameters on the host, broadcast together, in float64."""
    host = [np.asarray(v if xp is np else xp.asnumpy(v), np.float64) for v in values]
    return np.broadcast_arrays(*host)


def random_gamma(xp, alpha, beta, shape, seed, sequence=False, rng=None):
    a, b = _parameters(xp, alpha, beta)
    if (a <= 0).any() or (b <= 0).any() or np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("random_gamma: alpha and beta must be > 0")
    draws = _rng(seed, rng).gamma(a, 1.0 / b, size=tuple(shape) + a.shape)
    return xp.asarray(draws.astype(alpha.dtype))


def random_poisson(xp, lam, shape, seed, dtype, sequence=False, rng=None):
    (rate,) = _parameters(xp, lam)
    if (rate < 0).any() or np.isnan(rate).any():
        raise ValueError("random_poisson: lam must be >= 0")
    draws = _rng(seed, rng).poisson(rate, size=tuple(shape) + rate.shape)
    return xp.asarray(draws.astype(dtype))
