"""Python kernels of the random builtin ops (random.yaml).

Seed semantics: `seed: 0` (the default) draws fresh values on every execution, from OS entropy.
Any other seed makes the op a pure function of (seed, shape, dtype, parameters): every execution,
in every process and on every device, returns the same values, like TensorFlow's stateless random
ops. The values are drawn on the host by NumPy's PCG64 (`numpy.random.default_rng(seed)`) and
moved to the device with `xp.asarray`, so that CPU and GPU agree bit for bit.
"""

from __future__ import annotations

import numpy as np


def _rng(seed):
    return np.random.default_rng(None if seed == 0 else seed)


def random_uniform(xp, shape, seed, minval, maxval, dtype):
    if not minval < maxval:
        raise ValueError(f"random_uniform: minval {minval} must be less than maxval {maxval}")
    u = _rng(seed).random(tuple(shape))  # float64 in [0, 1), then scaled and narrowed
    values = (minval + (maxval - minval) * u).astype(dtype)
    # Narrowing can round up onto maxval; keep the interval half-open.
    top = np.nextafter(np.asarray(maxval, dtype=dtype), np.asarray(minval, dtype=dtype))
    return xp.asarray(np.minimum(values, top))


def random_normal(xp, shape, seed, mean, stddev, dtype):
    z = _rng(seed).standard_normal(tuple(shape))
    return xp.asarray((mean + stddev * z).astype(dtype))
