"""TF1's linear algebra and segment sums (opsdk/v1/linalg.py) against NumPy: values, shapes
known only at run time, and gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf

from finite_differences import numeric_grad


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


RNG = np.random.default_rng(1)
A = RNG.standard_normal((2, 3, 3))
SPD = A @ A.transpose(0, 2, 1) + 3 * np.eye(3)
B = RNG.standard_normal((2, 3, 2))


def test_decompositions_and_solvers_match_numpy_on_batches_of_unknown_size():
    x = tf.placeholder(tf.float64, [None, None, None])
    outs = {"inv": tf.matrix_inverse(x), "det": tf.matrix_determinant(x),
            "chol": tf.cholesky(x), "solve": tf.matrix_solve(x, B),
            "upper": tf.matrix_triangular_solve(x, B, lower=False),
            "cho_solve": tf.linalg.cholesky_solve(tf.cholesky(x), B),
            "logdet": tf.linalg.logdet(x), "inv_t": tf.linalg.inv(x, adjoint=True)}
    with tf.Session() as sess:
        got = sess.run(outs, {x: SPD})
    np.testing.assert_allclose(got["inv"], np.linalg.inv(SPD), rtol=1e-10)
    np.testing.assert_allclose(got["inv_t"], np.linalg.inv(SPD.transpose(0, 2, 1)), rtol=1e-10)
    np.testing.assert_allclose(got["det"], np.linalg.det(SPD), rtol=1e-10)
    np.testing.assert_allclose(got["chol"], np.linalg.cholesky(SPD), rtol=1e-10)
    np.testing.assert_allclose(got["solve"], np.linalg.solve(SPD, B), rtol=1e-10)
    np.testing.assert_allclose(got["upper"], np.linalg.solve(np.triu(SPD), B), rtol=1e-10)
    np.testing.assert_allclose(got["cho_solve"], np.linalg.solve(SPD, B), rtol=1e-10)
    np.testing.assert_allclose(got["logdet"], np.linalg.slogdet(SPD)[1], rtol=1e-10)


def test_gradients_of_the_compositions_match_finite_differences():
    x = tf.placeholder(tf.float64, [2, 3, 3])
    w = RNG.standard_normal((2, 3, 3))
    loss = (tf.reduce_sum(tf.cholesky(x) * w) + tf.reduce_sum(tf.matrix_determinant(x))
            + tf.reduce_sum(tf.matrix_solve(x, B) * B) + tf.reduce_sum(tf.linalg.logdet(x))
            + tf.reduce_sum(tf.square(tf.trace(x)))
            + tf.reduce_sum(tf.matrix_band_part(x, 1, 0) * w))
    (grad,) = tf.gradients(loss, [x])
    with tf.Session() as sess:
        analytic = sess.run(grad, {x: SPD})
        numeric = numeric_grad(sess, loss, x, {x: SPD})
    # cholesky reads one triangle of a matrix it takes as symmetric, and its gradient is the
    # symmetric one (as TF's): the two agree on symmetric perturbations
    def sym(g):
        return (g + g.transpose(0, 2, 1)) / 2
    np.testing.assert_allclose(sym(analytic), sym(numeric), rtol=1e-5, atol=1e-6)


def test_diagonals_bands_and_cross_products():
    x = tf.placeholder(tf.float32, [None, None])
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    t = np.arange(4, dtype=np.float32).reshape(2, 2)
    outs = [tf.diag(v), tf.diag(t), tf.diag_part(tf.diag(t)), tf.matrix_diag_part(x),
            tf.trace(x), tf.matrix_band_part(x, 1, 0), tf.matrix_band_part(x, -1, 0),
            tf.matrix_band_part(x, 0, -1), tf.matrix_diag([[1.0, 2.0], [3.0, 4.0]]),
            tf.matrix_set_diag(tf.ones([2, 2]), [7.0, 8.0]), tf.cross([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]),
            tf.linalg.transpose(tf.zeros([2, 3, 4]))]
    with tf.Session() as sess:
        got = sess.run(outs, {x: a})
    rows, cols = np.indices(a.shape)
    np.testing.assert_array_equal(got[0], np.diag(v))
    want = np.zeros((2, 2, 2, 2), np.float32)
    for i in range(2):
        for j in range(2):
            want[i, j, i, j] = t[i, j]
    np.testing.assert_array_equal(got[1], want)
    np.testing.assert_array_equal(got[2], t)
    np.testing.assert_array_equal(got[3], np.diagonal(a))
    assert got[4] == np.trace(a)
    np.testing.assert_array_equal(got[5], a * ((rows - cols <= 1) & (cols - rows <= 0)))
    np.testing.assert_array_equal(got[6], np.tril(a))
    np.testing.assert_array_equal(got[7], np.triu(a))
    np.testing.assert_array_equal(got[8], [np.diag([1.0, 2.0]), np.diag([3.0, 4.0])])
    np.testing.assert_array_equal(got[9], [[7.0, 1.0], [1.0, 8.0]])
    np.testing.assert_array_equal(got[10], [0.0, 0.0, 1.0])
    assert got[11].shape == (2, 4, 3)


def test_segment_sums_and_means():
    data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    outs = [tf.unsorted_segment_sum(data, [1, 0, 1], 3),
            tf.unsorted_segment_sum(data, [1, -1, 7], 2),  # ids out of range are dropped
            tf.math.unsorted_segment_mean(data, [1, 1, 0], 3),
            tf.segment_sum(data, [0, 0, 2]), tf.math.segment_mean(data, [0, 0, 2])]
    with tf.Session() as sess:
        got = sess.run(outs)
    np.testing.assert_array_equal(got[0], [[3, 4], [6, 8], [0, 0]])
    np.testing.assert_array_equal(got[1], [[0, 0], [1, 2]])
    np.testing.assert_array_equal(got[2], [[5, 6], [2, 3], [0, 0]])
    np.testing.assert_array_equal(got[3], [[4, 6], [0, 0], [5, 6]])
    np.testing.assert_array_equal(got[4], [[2, 3], [0, 0], [5, 6]])


def test_mistakes_are_named():
    with pytest.raises(tf.OpsdkError, match="matrix_inverse: .* must hold square matrices"):
        tf.matrix_inverse(tf.zeros([2, 3]))
    with pytest.raises(tf.OpsdkError, match="cholesky: .* is int32; give float32 or float64"):
        tf.cholesky(tf.zeros([2, 2], tf.int32))
    with pytest.raises(tf.OpsdkError, match="cross: .* must have 3 entries in its last axis"):
        tf.cross([1.0, 2.0], [3.0, 4.0])
    with pytest.raises(tf.OpsdkError, match="segment_ids .* must be int32 or int64"):
        tf.unsorted_segment_sum([1.0], [0.5], 1)
    x = tf.placeholder(tf.float64, [2, 2])
    with tf.Session() as sess:
        with pytest.raises(tf.OpsdkError, match="cholesky"):
            sess.run(tf.cholesky(x), {x: [[1.0, 2.0], [2.0, 1.0]]})  # not positive definite
        with pytest.raises(tf.OpsdkError, match="matrix_inverse"):
            sess.run(tf.matrix_inverse(x), {x: [[1.0, 2.0], [2.0, 4.0]]})  # singular
