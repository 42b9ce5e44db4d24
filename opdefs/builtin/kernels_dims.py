"""Python kernels of the ops shaped by a `dims` input (dims.yaml). The random ones draw as
kernels_random.py does (NumPy's PCG64; seed 0 fresh values, any other seed fixed ones)."""

from __future__ import annotations

import numpy as np


def _shape(op, xp, dims):
    # dims may live on a device (a GPU, the test device): read it on the host, as CuPy's
    # asnumpy does (NumPy has none: there it is already a host array).
    shape = tuple(int(d) for d in getattr(xp, "asnumpy", np.asarray)(dims).reshape(-1))
    if any(d < 0 for d in shape):
        raise ValueError(f"{op}: input 'dims' {list(shape)} has a negative size")
    return shape


def _rng(seed):
    return np.random.default_rng(None if seed == 0 else seed)


def fill_dims(xp, dims, value):
    return xp.full(_shape("fill_dims", xp, dims), value, dtype=value.dtype)


def random_uniform_dims(xp, dims, seed, dtype):
    u = _rng(seed).random(_shape("random_uniform_dims", xp, dims)).astype(dtype)
    # Narrowing can round up onto 1; keep the interval half-open.
    return xp.asarray(np.minimum(u, np.nextafter(np.asarray(1, dtype), np.asarray(0, dtype))))


def random_normal_dims(xp, dims, seed, dtype):
    return xp.asarray(_rng(seed).standard_normal(_shape("random_normal_dims", xp, dims)).astype(dtype))


def truncated_normal_dims(xp, dims, seed, dtype):
    rng = _rng(seed)
    z = rng.standard_normal(_shape("truncated_normal_dims", xp, dims))
    bad = np.abs(z) > 2
    while bad.any():  # redraw outside two standard deviations, as TensorFlow does
        z[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(z) > 2
    return xp.asarray(z.astype(dtype))


def arange(xp, start, limit, delta):
    if delta == 0:
        raise ValueError("arange: input 'delta' is 0; give a non-zero step")
    return xp.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)
