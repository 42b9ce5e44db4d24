"""TF1's elementwise math names (math_extra.yaml's builtin ops and squared_difference): values
against NumPy, gradients against the derivatives, and Python numbers taken as TF takes them."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


# name, NumPy's function, its derivative (None: TF's passes no gradient)
FUNCTIONS = [
    ("sin", np.sin, np.cos), ("cos", np.cos, lambda x: -np.sin(x)),
    ("tan", np.tan, lambda x: 1 + np.tan(x) ** 2),
    ("asin", np.arcsin, lambda x: 1 / np.sqrt(1 - x * x)),
    ("acos", np.arccos, lambda x: -1 / np.sqrt(1 - x * x)),
    ("atan", np.arctan, lambda x: 1 / (1 + x * x)), ("sinh", np.sinh, np.cosh),
    ("cosh", np.cosh, np.sinh), ("expm1", np.expm1, np.exp),
    ("log1p", np.log1p, lambda x: 1 / (1 + x)),
    ("asinh", np.arcsinh, lambda x: 1 / np.sqrt(x * x + 1)),
    ("atanh", np.arctanh, lambda x: 1 / (1 - x * x)),
    ("floor", np.floor, None), ("ceil", np.ceil, None), ("round", np.round, None),
]


@pytest.mark.parametrize("name, values, derivative", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_elementwise_functions_and_their_gradients(name, values, derivative):
    x = np.array([-0.75, -0.5, 0.0, 1e-9, 0.3, 0.5, 0.9], np.float64)
    t = tf.placeholder(tf.float64, [None])
    y = getattr(tf, name)(t)
    grads = tf.gradients(tf.reduce_sum(y * 2.0), [t])
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {t: x}), values(x), rtol=1e-12, atol=0)
        if derivative is None:
            assert grads[0] is None or not sess.run(grads[0], {t: x}).any()
        else:
            np.testing.assert_allclose(sess.run(grads[0], {t: x}), 2 * derivative(x), rtol=1e-12)


def test_acosh_and_atan2_and_their_gradients():
    x = np.array([1.0001, 1.5, 3.0, 40.0])
    y = np.array([-2.0, 0.0, 0.5, -1e-3])
    tx, ty = tf.placeholder(tf.float64, [None]), tf.placeholder(tf.float64, [None])
    a, b = tf.acosh(tx), tf.atan2(ty, tx - 2.0)
    grads = tf.gradients(tf.reduce_sum(a) + tf.reduce_sum(b * 3.0), [tx, ty])
    with tf.Session() as sess:
        got_a, got_b, (gx, gy) = sess.run([a, b, grads], {tx: x, ty: y})
    np.testing.assert_allclose(got_a, np.arccosh(x), rtol=1e-12)
    np.testing.assert_allclose(got_b, np.arctan2(y, x - 2.0), rtol=1e-12)  # all four quadrants
    norm = (x - 2.0) ** 2 + y ** 2
    np.testing.assert_allclose(gx, 1 / np.sqrt(x * x - 1) - 3.0 * y / norm, rtol=1e-10)
    np.testing.assert_allclose(gy, 3.0 * (x - 2.0) / norm, rtol=1e-10)
    assert tf.math.atan2 is tf.atan2 and tf.math.acosh is tf.acosh


@pytest.mark.parametrize("rank_known", [True, False])
def test_where_with_a_vector_condition_picks_rows_as_tf1s_does(rank_known):
    """TF1's where takes a condition of rank 1 as one choice per row of x; NumPy's
    broadcasting would align it with x's last axis: a square x then came out transposed in its
    choices, silently. where_v2 broadcasts as NumPy does."""
    x = np.arange(9.0).reshape(3, 3)
    cond = tf.placeholder(tf.bool, [None])
    tx = tf.placeholder(tf.float64, [None, None] if rank_known else None)
    rows = tf.where(cond, tx, -tx)
    columns = tf.where_v2(cond, tx, -tx)
    with tf.Session() as sess:
        got_rows, got_columns = sess.run([rows, columns], {cond: [True, False, True], tx: x})
    np.testing.assert_array_equal(got_rows, np.where([[True], [False], [True]], x, -x))
    np.testing.assert_array_equal(got_columns, np.where([True, False, True], x, -x))


def test_accurate_near_zero_and_python_numbers_are_float32():
    with tf.Session() as sess:
        assert sess.run(tf.expm1(tf.constant(1e-10, tf.float64))) == np.expm1(1e-10)
        assert sess.run(tf.log1p(tf.constant(1e-10, tf.float64))) == np.log1p(1e-10)
        got = sess.run(tf.sin(1.0))
        assert got.dtype == np.float32 and got == np.sin(np.float32(1.0))
        assert sess.run(tf.round(tf.constant([0.5, 1.5, 2.5, -0.5]))).tolist() == [0, 2, 2, -0]


def test_squared_difference_broadcasts_and_takes_numbers():
    x = tf.constant([[1.0, 2.0], [3.0, 5.0]])
    with tf.Session() as sess:
        assert sess.run(tf.squared_difference(x, [1.0, 1.0])).tolist() == [[0, 1], [4, 16]]
        assert sess.run(tf.squared_difference(x, 2)).tolist() == [[1, 0], [1, 9]]
        g = sess.run(tf.gradients(tf.reduce_sum(tf.squared_difference(x, 2.0)), [x])[0])
    assert g.tolist() == [[-2, 0], [2, 6]]


def test_integers_divide_as_tensorflows_do():
    """`/`, tf.truediv and tf.divide of integers give floats (float64 from int32, float32 from
    int16); TF1's tf.div floor-divides integers (Python 2's division); floats divide. These
    were refused (div takes floats only). Values and dtypes as TensorFlow 2.21's compat.v1."""
    a, b = tf.constant([3, 4, -7]), tf.constant([2, 2, 2])
    small = tf.constant([7], tf.int16) / tf.constant([2], tf.int16)
    with tf.Session() as sess:
        got = sess.run([a / b, tf.truediv(a, b), tf.divide(a, b), a / 2, tf.div(a, b),
                        tf.div(tf.constant(3.0), 2.0), small])
    for quotient in got[:3]:
        assert quotient.dtype == np.float64 and quotient.tolist() == [1.5, 2.0, -3.5]
    assert got[3].tolist() == [1.5, 2.0, -3.5]
    assert got[4].dtype == np.int32 and got[4].tolist() == [1, 2, -4]
    assert got[5] == np.float32(1.5) and small.dtype == "float32"
    with pytest.raises(tf.OpsdkError, match="dtype"):
        tf.constant([1], tf.int32) / tf.constant([1], tf.int64)


def test_truncating_division_rounds_toward_zero_as_c_does():
    a = np.array([-7, 7, -7, 7, 0], np.int32)
    b = np.array([5, 5, -5, -5, 3], np.int32)
    with tf.Session() as sess:
        quotient, remainder, floats, real = sess.run([
            tf.truncatediv(a, b), tf.truncatemod(a, b),
            tf.truncatediv(a.astype(np.float32), b.astype(np.float32)), tf.realdiv(1.0, 4.0)])
    np.testing.assert_array_equal(quotient, np.trunc(a / b).astype(np.int32))
    np.testing.assert_array_equal(remainder, np.fmod(a, b))
    np.testing.assert_array_equal(floats, np.trunc(a / b))
    assert quotient.dtype == np.int32 and real == 0.25
    with pytest.raises(tf.OpsdkError, match="realdiv: .* is int32; realdiv takes floats"):
        tf.realdiv(a, b)


def test_tensordot_sums_over_the_axes_given_as_numpys_does():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 3, 5)).astype(np.float32)
    c = rng.standard_normal((3, 4)).astype(np.float32)
    x = tf.placeholder(tf.float32, [2, 3, 4])
    cases = [((x, b, 1), 1), ((x, b, [[1, 2], [1, 0]]), ([1, 2], [1, 0])), ((c, c, 0), 0),
             ((x, c, [[1, 2], [0, 1]]), ([1, 2], [0, 1])), ((c, c, [[-1], [1]]), ([-1], [1])),
             ((x, b, [2, 0]), ([2], [0]))]
    outs = [tf.tensordot(*call) for call, _ in cases]
    (grad,) = tf.gradients(tf.reduce_sum(outs[1]), [x])
    with tf.Session() as sess:
        got = sess.run(outs + [grad], {x: a})
    for (call, axes), value in zip(cases, got):
        left = a if call[0] is x else call[0]
        np.testing.assert_allclose(value, np.tensordot(left, call[1], axes), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[-1], np.broadcast_to(b.sum(axis=2).T, (2, 3, 4)), rtol=1e-5)
    with pytest.raises(tf.OpsdkError, match="tensordot: axis 2 of a has size 4, axis 0 of b 3"):
        tf.tensordot(x, c, 1)


def test_tfs_dtype_objects_answer_tfs_questions_and_equal_numpys():
    assert tf.int32.as_numpy_dtype is np.int32 and tf.float32.as_numpy_dtype(1) == 1.0
    assert tf.float32 == np.float32 and tf.float32 == np.dtype("float32") and tf.float32 == "float32"
    assert tf.float32 != np.float64 and tf.float32 != tf.float64 and tf.float32 is not None
    assert tf.as_dtype("float").is_floating and tf.as_dtype(np.int64).is_integer
    assert tf.as_dtype(float) is tf.float32 and tf.bool.is_bool and tf.uint8.max == 255
    assert np.zeros(2, dtype=tf.float16).dtype == np.float16 and tf.float64.kind == "f"
    assert {tf.float32: "x"}["float32"] == "x"
    x = tf.placeholder(tf.float32, [1])
    assert x.dtype == tf.float32 and x.dtype == np.float32 and x.dtype.base_dtype == tf.float32


def test_einsum_spells_an_ellipsis_as_letters_and_refuses_what_tf_refuses():
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 4, 5)).astype(np.float32)
    b = rng.random((2, 3, 5, 6)).astype(np.float32)
    v = rng.random(5).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 3, 4, 5])
    outs = [tf.einsum("...ij,...jk->...ik", x, b), tf.einsum("...j,j->...", x, v),
            tf.einsum("...ij->...ji", x), tf.einsum("i...,i", v, v)]
    (grad,) = tf.gradients(tf.reduce_sum(outs[0]), [x])
    with tf.Session() as sess:
        got = sess.run(outs + [grad], {x: a})
    np.testing.assert_allclose(got[0], np.einsum("...ij,...jk->...ik", a, b), rtol=1e-5)
    np.testing.assert_allclose(got[1], np.einsum("...j,j->...", a, v), rtol=1e-5)
    np.testing.assert_array_equal(got[2], np.swapaxes(a, -1, -2))
    np.testing.assert_allclose(got[3], v @ v, rtol=1e-5)
    np.testing.assert_allclose(got[4], np.broadcast_to(b.sum(axis=3)[:, :, None, :], a.shape),
                               rtol=1e-5)
    with pytest.raises(tf.OpsdkError, match="stands for 2 dims, which the output must keep"):
        tf.einsum("b...j,j->b", x, v)
    with pytest.raises(tf.OpsdkError, match="stands for 2 dims, which the output must keep"):
        tf.einsum("...ij,...jk", x, b)
