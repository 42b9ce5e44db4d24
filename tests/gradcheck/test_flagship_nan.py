"""The flagship's gradient treats NaN and infinities as its reference does, in the vector part and
the scalar tail alike (a NaN row of 19 columns once gave sixteen 1s then three 0s)."""

from __future__ import annotations

import numpy as np
import pytest

from opsdk import ops


def _reference(x, y, g):
    s = np.sign(x[:, None, :] - y[None, :, :])
    return (g[:, :, None] * s).sum(1), -(g[:, :, None] * s).sum(0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [3, 16, 19, 40, 67])
def test_nan_and_infinities_give_what_the_reference_gives(dtype, p):
    rng = np.random.default_rng(p)
    x, y, g = (rng.random(s).astype(dtype) for s in ((5, p), (4, p), (5, 4)))
    x[1] = np.nan                                   # a NaN row: NaN wherever it reaches
    x[3, 0] = y[0, 0] = np.inf                      # inf - inf is NaN
    y[2, p // 2], x[4, -1] = np.inf, -np.inf        # against finite values: a sign, no NaN
    gx, gy = ops.pairwise_manhattan_grad(x, y, g)
    want_x, want_y = _reference(x, y, g)
    np.testing.assert_array_equal(np.isnan(gx), np.isnan(want_x))
    np.testing.assert_array_equal(np.isnan(gy), np.isnan(want_y))
    np.testing.assert_allclose(gx, want_x, rtol=1e-5)
    np.testing.assert_allclose(gy, want_y, rtol=1e-5)
    assert np.isnan(gx[1]).all()


def test_a_nan_row_of_19_columns_is_nan_throughout():
    x = np.full((1, 19), np.nan)
    gx, gy = ops.pairwise_manhattan_grad(x, np.ones((2, 19)), np.ones((1, 2)))
    assert np.isnan(gx).all() and np.isnan(gy).all()
