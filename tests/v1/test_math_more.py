"""tf.cumprod, accumulate_n, saturate_cast, lbeta, is_non_decreasing, is_strictly_increasing and
tf.math's xdivy, xlogy, xlog1py, multiply_no_nan, reciprocal_no_nan, reduce_euclidean_norm and
polyval (opsdk/v1/math_more.py): the values TensorFlow 2.21's compat.v1 gave on the same
script, gradients included, and an exact cumprod gradient where x holds zeros."""

from __future__ import annotations

import math

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

V = np.array([[1.5, 0.0, -2.0, 3.0], [0.0, 2.0, 0.5, -1.0]])
W = np.array([[2.0, 0.0, 4.0, 0.5], [0.0, -1.0, 3.0, 2.0]])


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _run(build, grads=False):
    x = tf.placeholder(tf.float64, [None, 4])
    y = tf.placeholder(tf.float64, [None, 4])
    out = build(x, y)
    fetch = [out] + ([g if g is not None else tf.constant(0.0)
                      for g in tf.gradients(tf.reduce_sum(out), [x, y])] if grads else [])
    with tf.Session() as sess:
        return sess.run(fetch, {x: V, y: W})


def test_the_no_nan_forms_and_their_gradients_are_tensorflows():
    got, gx, gy = _run(tf.math.xdivy, grads=True)
    np.testing.assert_allclose(got, [[0.75, 0, -0.5, 6], [0, -2, 1 / 6, -0.5]], rtol=1e-15)
    np.testing.assert_allclose(gy, [[-0.375, 0, 0.125, -12], [0, -2, -1 / 18, 0.25]], rtol=1e-12)
    got, gx, gy = _run(lambda x, y: tf.math.xlogy(x, tf.abs(y)), grads=True)
    np.testing.assert_allclose(got[1], [0, 0, 0.5 * math.log(3), -math.log(2)], rtol=1e-15)
    assert np.isfinite(gx).all() and gx[1, 0] == 0 and gy[0, 1] == 0
    got, gx, gy = _run(lambda x, y: tf.math.xlog1py(x, tf.abs(y)), grads=True)
    np.testing.assert_allclose(gx[0], np.log1p(np.abs(W[0])) * (V[0] != 0), rtol=1e-15)
    got, gx, gy = _run(tf.math.multiply_no_nan, grads=True)
    np.testing.assert_array_equal(got, V * W)
    np.testing.assert_array_equal(gx, W)
    got, gx, _ = _run(lambda x, y: tf.math.reciprocal_no_nan(x), grads=True)
    np.testing.assert_allclose(got, [[2 / 3, 0, -0.5, 1 / 3], [0, 0.5, 2, -1]], rtol=1e-15)
    np.testing.assert_allclose(gx, [[-4 / 9, 0, -0.25, -1 / 9], [0, -0.25, -4, -1]], rtol=1e-15)
    inf = tf.math.multiply_no_nan(tf.constant([np.inf, np.nan, 2.0]), tf.constant([0.0, 0.0, 3.0]))
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(inf), [0.0, 0.0, 6.0])


def test_norms_polynomials_sums_and_lbeta():
    got, gx = _run(lambda x, y: tf.math.reduce_euclidean_norm(x, 1), grads=True)[:2]
    np.testing.assert_allclose(got, np.sqrt((V * V).sum(1)), rtol=1e-15)
    np.testing.assert_allclose(gx, V / np.sqrt((V * V).sum(1, keepdims=True)), rtol=1e-15)
    two, three = tf.constant(2.0, tf.float64), tf.constant(3.0, tf.float64)
    got, gx, gy = _run(lambda x, y: tf.math.polyval([two, x, three], y), grads=True)
    np.testing.assert_array_equal(got, [[14, 3, 27, 5], [3, 3, 22.5, 9]])
    np.testing.assert_array_equal(gy, 4 * W + V)
    got = _run(lambda x, y: tf.lbeta(tf.abs(y) + 0.5))[0]
    a = np.abs(W) + 0.5
    want = [sum(math.lgamma(v) for v in row) - math.lgamma(row.sum()) for row in a]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_array_equal(_run(lambda x, y: tf.accumulate_n([x, y, x]))[0], 2 * V + W)
    with pytest.raises(OpsdkError, match="accumulate_n: an input of shape \\[None, 4\\] is not"):
        _run(lambda x, y: tf.accumulate_n([x, y], shape=[2, 3]))


def test_order_checks_and_saturating_casts():
    checks = [tf.is_non_decreasing(V), tf.is_strictly_increasing([1, 2, 5]),
              tf.is_non_decreasing([[1, 1], [2, 3]]), tf.is_strictly_increasing([1, 1]),
              tf.is_non_decreasing(tf.zeros([0]))]
    casts = [tf.saturate_cast(V * 200.0, tf.uint8),
             tf.saturate_cast(tf.constant([3e9, -3e9, 7.9]), tf.int32),
             tf.saturate_cast(tf.constant([1e300, -1e300, 1.5], tf.float64), tf.float32),
             tf.saturate_cast(tf.constant([300, -300, 5], tf.int32), tf.int8)]
    with tf.Session() as sess:
        assert sess.run(checks) == [False, True, True, False, True]
        u8, i32, f32, i8 = sess.run(casts)
    np.testing.assert_array_equal(u8, [[255, 0, 0, 255], [0, 255, 100, 0]])
    assert u8.dtype == np.uint8 and i32.dtype == np.int32 and i8.dtype == np.int8
    # TF gave -2147483648 for 3e9 (its float32 bound rounds up past int32's largest)
    np.testing.assert_array_equal(i32, [2147483520, -2147483648, 7])
    np.testing.assert_array_equal(f32, np.array([3.4028234663852886e+38, -3.4028234663852886e+38,
                                                 1.5], np.float32))
    np.testing.assert_array_equal(i8, [127, -128, 5])


def test_cumprod_forms_and_an_exact_gradient_where_x_holds_zeros():
    got, gx = _run(lambda x, y: tf.cumprod(x, axis=1), grads=True)[:2]
    np.testing.assert_array_equal(got, np.cumprod(V, 1))
    # d/dx1 of 1.5 + 1.5 x1 + 1.5 x1 x2 + 1.5 x1 x2 x3 at x1 = 0: 1.5 - 3 - 9 (TF's gives 0)
    np.testing.assert_array_equal(gx, [[1.0, -10.5, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    got, gx = _run(lambda x, y: tf.cumprod(x, axis=1, exclusive=True, reverse=True),
                   grads=True)[:2]
    np.testing.assert_array_equal(got, [[0, -6, 3, 1], [-1, -0.5, -1, 1]])
    np.testing.assert_array_equal(gx, [[0, -6, 3, -1], [0, -0.5, -3, 2.5]])
    rng = np.random.default_rng(5)
    for exclusive in (False, True):
        for reverse in (False, True):
            x0 = rng.normal(size=(3, 5))
            x0[1, 2] = x0[2, 0] = 0.0
            tf.reset_default_graph()
            x = tf.placeholder(tf.float64, [3, 5])
            y = tf.cumprod(x, 1, exclusive, reverse)
            weights = rng.normal(size=(3, 5))
            (g,) = tf.gradients(tf.reduce_sum(y * weights), [x])
            with tf.Session() as sess:
                got = sess.run(g, {x: x0})
                numeric = np.zeros_like(x0)
                for i in np.ndindex(x0.shape):  # a polynomial in each x: exact differences
                    up, down = x0.copy(), x0.copy()
                    up[i] += 0.5
                    down[i] -= 0.5
                    numeric[i] = (sess.run(y, {x: up}) - sess.run(y, {x: down})).ravel() @ \
                        weights.ravel()
            np.testing.assert_allclose(got, numeric, rtol=1e-12, atol=1e-12)


def test_extrema_and_logical_reductions_over_no_elements_are_tensorflows():
    # NumPy's max refused them (zero-size array to reduction operation); reduce_any of nothing
    # then needed its own mending, since int32's lowest cast to bool is True
    outs = [tf.reduce_max(tf.zeros([0])), tf.reduce_min(tf.zeros([0])),
            tf.reduce_max(tf.zeros([0], tf.int32)), tf.reduce_min(tf.zeros([2, 0], tf.float64), 1),
            tf.reduce_any(tf.zeros([0], tf.bool)), tf.reduce_all(tf.zeros([0], tf.bool)),
            tf.reduce_max(tf.zeros([0], tf.uint8)), tf.reduce_max(tf.zeros([2, 0]), 1, keepdims=True),
            tf.reduce_any([[True, False], [False, False]], 1), tf.reduce_all([[True, True]], 1)]
    with tf.Session() as sess:
        got = sess.run(outs)
    assert got[:3] == [-np.inf, np.inf, np.iinfo(np.int32).min] and got[2].dtype == np.int32
    np.testing.assert_array_equal(got[3], [np.inf, np.inf])
    assert got[4:7] == [False, True, 0] and got[6].dtype == np.uint8
    np.testing.assert_array_equal(got[7], [[-np.inf], [-np.inf]])
    np.testing.assert_array_equal(got[8], [True, False])
    np.testing.assert_array_equal(got[9], [True])


def test_segment_products_and_their_gradients_where_segments_hold_zeros():
    # TF 2.21's compat.v1 gave these values on the same script (up to the sign of a zero)
    d = tf.placeholder(tf.float64, [5, 2])
    v = np.array([[2.0, 0.0], [3.0, 4.0], [0.0, 0.0], [5.0, 1.5], [-1.0, 2.0]])
    outs = [tf.segment_prod(d, [0, 0, 1, 3, 3]), tf.unsorted_segment_prod(d, [2, 0, 2, -1, 0], 4),
            tf.math.segment_prod(d, [0, 0, 0, 1, 1]),
            tf.math.unsorted_segment_prod(d, [1, 1, 1, 1, 1], 2)]
    grads = [tf.gradients(tf.reduce_sum(o * o), d)[0] for o in outs]
    with tf.Session() as sess:
        got, got_grads = sess.run([outs, grads], {d: v})
        numeric = []
        for o in outs:  # each product is linear in each element: exact differences
            rows = []
            for i in np.ndindex(v.shape):
                up, down = v.copy(), v.copy()
                up[i] += 0.5
                down[i] -= 0.5
                rows.append((np.sum(sess.run(o, {d: up}) ** 2)
                             - np.sum(sess.run(o, {d: down}) ** 2)))
            numeric.append(np.array(rows).reshape(v.shape))
    np.testing.assert_array_equal(got[0], [[6, 0], [0, 0], [1, 1], [-5, 3]])
    np.testing.assert_array_equal(got[1], [[-3, 8], [1, 1], [0, 0], [1, 1]])
    np.testing.assert_array_equal(got[2], [[0, 0], [-5, 3]])
    np.testing.assert_array_equal(got[3], [[1, 1], [0, 0]])
    np.testing.assert_array_equal(got_grads[1], [[0, 0], [6, 32], [0, 0], [0, 0], [-18, 64]])
    for g, n in zip(got_grads, numeric):  # a central difference (step 1) of a quadratic: exact
        np.testing.assert_allclose(g, n, atol=1e-12)


def test_repeat_and_searchsorted_are_tensorflows():
    x = tf.placeholder(tf.float64, [2, 3])
    v = np.arange(6.0).reshape(2, 3)
    outs = [tf.repeat(x, 2), tf.repeat(x, [1, 3], axis=0), tf.repeat(x, [0, 2, 1], axis=1),
            tf.searchsorted([[0.0, 1.0, 3.0], [2.0, 4.0, 6.0]], [[1.0, 5.0], [2.0, 7.0]]),
            tf.searchsorted([0.0, 1.0, 3.0], [1.0, 5.0, -1.0], side="right", out_type=tf.int64)]
    (g,) = tf.gradients(tf.reduce_sum(outs[1] * outs[1]) + tf.reduce_sum(outs[2]), x)
    with tf.Session() as sess:
        got = sess.run(outs + [g], {x: v})
    np.testing.assert_array_equal(got[0], np.repeat(v, 2))
    np.testing.assert_array_equal(got[1], [[0, 1, 2], [3, 4, 5], [3, 4, 5], [3, 4, 5]])
    np.testing.assert_array_equal(got[2], [[1, 1, 2], [4, 4, 5]])
    assert got[3].dtype == np.int32 and got[4].dtype == np.int64
    np.testing.assert_array_equal(got[3], [[1, 3], [0, 3]])
    np.testing.assert_array_equal(got[4], [2, 3, 0])
    np.testing.assert_array_equal(got[5], [[0, 4, 5], [18, 26, 31]])
    with pytest.raises(OpsdkError, match="repeat: repeats must be one count >= 0 or 3 of them"):
        tf.repeat(x, [1, 2], axis=1)
    with pytest.raises(OpsdkError, match="the size of axis 0 of input must be known"):
        tf.repeat(tf.placeholder(tf.float32, [None, 2]), 2, axis=0)
    with pytest.raises(OpsdkError, match="same leading dims"):
        tf.searchsorted(tf.zeros([2, 3]), tf.zeros([3, 1]))
