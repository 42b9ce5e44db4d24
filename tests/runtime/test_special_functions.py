"""erf, erfc, lgamma and digamma (opdefs/builtin/special.yaml): SciPy's values where SciPy is
installed, and the same values from Python's math module and the series of kernels_special.py
where it is not; TensorFlow's values at the poles; gradients through a graph."""

from __future__ import annotations

import math

import numpy as np
import pytest

import opsdk
from opdefs.builtin import kernels_special as kernels
from opsdk import ops

special = pytest.importorskip("scipy.special", reason="SciPy (the test extra) is the yardstick")

# both sides of the reflection at 0.5, the recurrence's range and the asymptotic series' own
POINTS = np.concatenate([np.linspace(-7.75, 30.25, 153), [1e-6, 0.49, 0.51, 9.99, 10.01, 250.0,
                                                        1e4, -0.999, -2.0001]])


@pytest.mark.parametrize("name", ["erf", "erfc", "lgamma", "digamma"])
def test_without_scipy_the_values_are_scipys(monkeypatch, name):
    with_scipy = getattr(kernels, name)(np, POINTS)
    monkeypatch.setattr(kernels, "_special", lambda xp: None)
    without = getattr(kernels, name)(np, POINTS)
    # below 0 the reflection's pi / tan(pi x) amplifies any rounding (1e-12 next to the pole at
    # -2 on both sides); above, the two agree to a few units in the last place
    positive = POINTS > 0
    np.testing.assert_allclose(without[positive], with_scipy[positive], rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(without, with_scipy, rtol=5e-12, atol=1e-300)


def test_the_series_trigamma_is_scipys_polygamma():
    positive = POINTS > 0
    np.testing.assert_allclose(kernels._trigamma(POINTS[positive]),
                               special.polygamma(1, POINTS[positive]), rtol=1e-14)
    np.testing.assert_allclose(kernels._trigamma(POINTS), special.polygamma(1, POINTS),
                               rtol=5e-12)


def test_poles_hold_tensorflows_values_with_and_without_scipy(monkeypatch):
    x = np.array([0.0, -1.0, -3.0])
    for _ in range(2):
        assert np.isnan(kernels.digamma(np, x)).all()
        assert np.isposinf(kernels.lgamma(np, x)).all()
        assert np.isposinf(kernels._trigamma(x)).all()
        monkeypatch.setattr(kernels, "_special", lambda xp: None)


def test_known_values_and_gradients_through_a_graph():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [4], name="x")
        ys = [ops.erf(x), ops.erfc(x), ops.lgamma(x), ops.digamma(x)]
        grads = [opsdk.gradients(ops.reduce_sum(y), [x])[0] for y in ys]
    value = np.array([0.5, 1.0, 2.0, 3.5])
    with opsdk.Session(g) as sess:
        (erf, erfc, lgamma, digamma), grads = sess.run([ys, grads], {x: value})
    np.testing.assert_allclose(erf + erfc, 1.0, rtol=1e-15)
    assert erf[1] == pytest.approx(0.8427007929497149, rel=1e-15)
    assert lgamma[0] == pytest.approx(math.log(math.sqrt(math.pi)), rel=1e-15)
    assert digamma[1] == pytest.approx(-0.5772156649015329, rel=1e-15)  # -Euler's gamma
    slope = 2 / math.sqrt(math.pi) * np.exp(-value * value)
    np.testing.assert_allclose(grads[0], slope, rtol=1e-15)
    np.testing.assert_allclose(grads[1], -slope, rtol=1e-15)
    np.testing.assert_allclose(grads[2], digamma, rtol=1e-15)
    assert grads[3][1] == pytest.approx(math.pi ** 2 / 6, rel=1e-14)  # trigamma(1)


def test_float32_is_computed_in_float64_and_rounded():
    x = np.array([0.3, 3.7, -1.5], np.float32)
    for name in ("erf", "erfc", "lgamma", "digamma"):
        got = getattr(ops, name)(x)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, getattr(kernels, name)(np, x.astype(np.float64))
                                      .astype(np.float32))
