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
            tf.unsorted_segment_sum(data, [1, -1, -7], 2),  # negative ids are dropped
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


def _signed(v):
    """v with each column's sign making its entry of largest magnitude positive."""
    big = np.take_along_axis(v, np.abs(v).argmax(-2)[..., None, :], -2)
    return v * np.where(big < 0, -1.0, 1.0)


def test_self_adjoint_eig_and_eigvals_match_numpy():
    x = tf.placeholder(tf.float64, [None, None, None])
    e, v = tf.self_adjoint_eig(x)
    e2, v2 = tf.linalg.eigh(x)
    outs = [e, v, tf.self_adjoint_eigvals(x), e2, v2, tf.linalg.eigvalsh(x)]
    with tf.Session() as sess:
        got = sess.run(outs, {x: SPD})
    want_e, want_v = np.linalg.eigh(SPD)
    for k in (0, 2, 3, 5):
        np.testing.assert_allclose(got[k], want_e, rtol=1e-10)
    for k in (1, 4):
        np.testing.assert_allclose(got[k], _signed(want_v), rtol=1e-8, atol=1e-10)
    float32 = tf.self_adjoint_eigvals(tf.constant(SPD[0], tf.float32))
    assert float32.dtype == tf.float32


def test_self_adjoint_eig_gradients_match_finite_differences():
    x = tf.placeholder(tf.float64, [2, 3, 3])
    w = RNG.standard_normal((2, 3, 3))
    e, v = tf.linalg.eigh(x)
    sqrtm = tf.matmul(v * tf.expand_dims(tf.sqrt(e), -2), v, transpose_b=True)  # sign-free
    loss = (tf.reduce_sum(tf.square(tf.self_adjoint_eigvals(x))) + tf.reduce_sum(sqrtm * w)
            + tf.reduce_sum(v * w))  # the op fixes v's signs: a function of x too
    _gradient_matches_finite_differences(x, loss, SPD)


def test_self_adjoint_eig_mistakes_are_named():
    with pytest.raises(tf.OpsdkError, match="self_adjoint_eig: .* must hold square matrices"):
        tf.self_adjoint_eig(tf.zeros([2, 3]))
    with pytest.raises(tf.OpsdkError, match="self_adjoint_eigvals: .* is int32; give float32"):
        tf.linalg.eigvalsh(tf.zeros([2, 2], tf.int32))


def test_svd_matches_numpy():
    x = tf.placeholder(tf.float64, [None, None, None])
    s, u, v = tf.svd(x)
    s2, u2, v2 = tf.linalg.svd(x, full_matrices=True)
    values_only = tf.svd(x, compute_uv=False)
    assert not isinstance(values_only, tuple)
    a = RNG.standard_normal((2, 4, 3))
    with tf.Session() as sess:
        got = sess.run([s, u, v, s2, u2, v2, values_only], {x: a})
    for full, (gs, gu, gv) in ((False, got[:3]), (True, got[3:6])):
        want_u, want_s, want_vt = np.linalg.svd(a, full_matrices=full)
        np.testing.assert_allclose(gs, want_s, rtol=1e-10)
        np.testing.assert_allclose(gu, _signed(want_u), rtol=1e-8, atol=1e-10)
        assert gv.shape == want_vt.shape
        np.testing.assert_allclose((gu[..., :3] * gs[..., None, :]) @ gv.transpose(0, 2, 1), a,
                                   rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[6], np.linalg.svd(a, compute_uv=False), rtol=1e-10)


def _gradient_matches_finite_differences(x, loss, at):
    (grad,) = tf.gradients(loss, [x])
    with tf.Session() as sess:
        analytic = sess.run(grad, {x: at})
        numeric = numeric_grad(sess, loss, x, {x: at})
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6)


def test_svd_gradients_match_finite_differences():
    x = tf.placeholder(tf.float64, [2, 4, 3])
    w = RNG.standard_normal((2, 4, 3))
    s, u, v = tf.svd(x)
    loss = (tf.reduce_sum(tf.svd(x, compute_uv=False))  # the nuclear norm
            + tf.reduce_sum(tf.matmul(u, v, transpose_b=True) * w)  # the polar factor: sign-free
            + tf.reduce_sum(tf.square(s)) + tf.reduce_sum(v * w[:, :3]))
    _gradient_matches_finite_differences(x, loss, RNG.standard_normal((2, 4, 3)))


def test_svd_mistakes_are_named():
    with pytest.raises(tf.OpsdkError, match="svd: .* must have rank >= 2"):
        tf.svd(tf.zeros([3]))
    with pytest.raises(tf.OpsdkError, match="svd: .* is int32; give float32"):
        tf.linalg.svd(tf.zeros([2, 3], tf.int32))


def test_qr_matches_numpy():
    x = tf.placeholder(tf.float64, [None, None, None])
    q, r = tf.qr(x)
    q2, r2 = tf.linalg.qr(x, full_matrices=True)
    a = RNG.standard_normal((2, 4, 3))
    with tf.Session() as sess:
        got = sess.run([q, r, q2, r2], {x: a})
    for full, (gq, gr) in ((False, got[:2]), (True, got[2:])):
        want_q, want_r = np.linalg.qr(a, mode="complete" if full else "reduced")
        assert gq.shape == want_q.shape and gr.shape == want_r.shape
        signs = np.ones(want_r.shape[:-1])
        signs[..., :3] = np.sign(np.diagonal(want_r, axis1=-2, axis2=-1))
        np.testing.assert_allclose(gr, want_r * signs[..., :, None], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gq[..., :3], (want_q * signs[..., None, :])[..., :3],
                                   rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gq @ gr, a, rtol=1e-10, atol=1e-12)


def test_qr_gradients_match_finite_differences():
    x = tf.placeholder(tf.float64, [2, 4, 3])
    w = RNG.standard_normal((2, 4, 3))
    q, r = tf.qr(x)
    loss = tf.reduce_sum(q * w) + tf.reduce_sum(tf.square(r)) + tf.reduce_sum(tf.qr(x[:, :2])[0])
    _gradient_matches_finite_differences(x, loss, RNG.standard_normal((2, 4, 3)))


def test_qr_mistakes_are_named():
    with pytest.raises(tf.OpsdkError, match="qr: .* must have rank >= 2"):
        tf.qr(tf.zeros([3]))
    with pytest.raises(tf.OpsdkError, match="qr: .* is int32; give float32"):
        tf.linalg.qr(tf.zeros([2, 3], tf.int32))


def test_segment_maxima_minima_and_sqrt_n_give_tensorflows_values():
    """The values and the gradient TF's compat.v1 gave for these calls (float32; sqrt_n within
    a float's rounding): empty segments hold 0 in the sorted ops and the dtype's extreme value
    in the unsorted ones; a negative id is dropped; ties share the gradient."""
    d = tf.placeholder(tf.float32, [None, 2])
    value = np.array([[1.0, 5.0], [3.0, 5.0], [3.0, 2.0], [7.0, 0.0], [-1.0, 4.0]], np.float32)
    outs = [tf.segment_max(d, [0, 0, 2, 2, 2]), tf.segment_min(d, tf.constant([0, 1, 1, 3, 3])),
            tf.unsorted_segment_max(d, [1, 0, 1, -1, 1], 3),
            tf.math.unsorted_segment_min(d, [2, 0, 1, 0, 2], 3),
            tf.unsorted_segment_sqrt_n(d, [0, 0, 2, 2, 2], 3),
            tf.unsorted_segment_max(tf.constant([[1, 2], [3, 0]]), [0, 0], 2)]
    loss = (tf.reduce_sum(outs[0] * 2) + tf.reduce_sum(outs[2][0])
            + tf.reduce_sum(outs[4] * outs[4]))
    with tf.Session() as sess:
        *got, grad = sess.run(outs + tf.gradients(loss, d), {d: value})
    low = np.finfo(np.float32).min
    want = [[[3, 5], [0, 0], [7, 4]], [[1, 5], [3, 2], [0, 0], [-1, 0]],
            [[3, 5], [3, 5], [low, low]], [[3, 0], [3, 2], [-1, 4]],
            [[2.828427, 7.071068], [0, 0], [5.196152, 3.464102]],
            [[3, 2], [-2147483648, -2147483648]]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w, g.dtype), rtol=3e-7)
    np.testing.assert_allclose(grad, [[4, 11], [7, 12], [6, 4], [8, 4], [6, 6]], rtol=1e-6)
