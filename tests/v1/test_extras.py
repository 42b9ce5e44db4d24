"""More TF1 names (opsdk/v1/extras.py), each against NumPy's answer (the same calls gave these
values under TensorFlow's compat.v1 when the module was written)."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
IMG = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def run(*fetches):
    with tf.Session() as sess:
        return sess.run(list(fetches))


def test_conversions_and_arithmetic():
    double, scaled, safe, rounded = run(
        tf.to_double(tf.constant([1, 2])), tf.scalar_mul(2.0, tf.constant(X[0])),
        tf.div_no_nan(tf.constant([1., 2.]), tf.constant([0., 4.])),
        tf.rint(tf.constant([0.5, 1.5, -2.5, 2.4])))
    assert double.dtype == np.float64 and double.tolist() == [1.0, 2.0]
    np.testing.assert_array_equal(scaled, 2 * X[0])
    assert safe.tolist() == [0.0, 0.5] and rounded.tolist() == [0.0, 2.0, -2.0, 2.0]


def test_meshgrid_roll_and_strided_slice():
    x = tf.constant(X)
    gx, gy = tf.meshgrid(tf.constant([1, 2, 3]), tf.constant([4, 5]))
    ix, iy = tf.meshgrid(tf.constant([1, 2, 3]), tf.constant([4, 5]), indexing="ij")
    got = run(gx, gy, ix, iy, tf.roll(x, 1, 2), tf.roll(x, [1, -1], [1, 2]),
              tf.strided_slice(x, [0, 1, 0], [2, 3, 4], [1, 1, 2]),
              tf.strided_slice(x, [1, 0, 0], [2, 0, 3], [1, 1, 1], begin_mask=2, end_mask=2,
                               shrink_axis_mask=1))
    want = [*np.meshgrid([1, 2, 3], [4, 5]), *np.meshgrid([1, 2, 3], [4, 5], indexing="ij"),
            np.roll(X, 1, 2), np.roll(X, [1, -1], [1, 2]), X[0:2, 1:3, 0:4:2], X[1, :, 0:3]]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_roll_passes_the_gradient_back():
    x = tf.placeholder(tf.float64, [5])
    loss = tf.reduce_sum(tf.roll(x, 2, 0) * tf.constant(np.arange(5.0)))
    grad, = tf.gradients(loss, [x])
    feed = {x: np.linspace(-1, 1, 5)}
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(grad, feed), numeric_grad(sess, loss, x, feed),
                                   rtol=1e-6)


def test_depth_and_space_batch_gather_partition_and_stitch():
    img = tf.constant(IMG)
    moved = tf.space_to_depth(img, 2)
    got = run(moved, tf.depth_to_space(moved, 2),
              tf.batch_gather(tf.constant([[1, 2, 3], [4, 5, 6]]), tf.constant([[2, 0], [1, 1]])),
              *tf.dynamic_partition(tf.constant([10, 20, 30, 40]), tf.constant([1, 0, 1, 0]), 2),
              tf.dynamic_stitch([tf.constant([0, 2]), tf.constant([1, 3])],
                                [tf.constant([[1., 1]] * 2), tf.constant([[2., 2]] * 2)]))
    blocks = IMG.reshape(2, 2, 2, 2, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, 2, 2, 12)
    np.testing.assert_array_equal(got[0], blocks)
    np.testing.assert_array_equal(got[1], IMG)
    assert got[2].tolist() == [[3, 1], [5, 5]]
    assert got[3].tolist() == [20, 40] and got[4].tolist() == [10, 30]
    assert got[5].tolist() == [[1, 1], [2, 2], [1, 1], [2, 2]]


def test_shapes_and_ensure_shape():
    x = tf.placeholder(tf.float32, [None, 3])
    checked = tf.ensure_shape(x, [2, 3])
    assert checked.get_shape().as_list() == [2, 3]
    sizes = tf.shape_n([x, tf.constant(IMG)])
    with tf.Session() as sess:
        got = sess.run(sizes + [checked], {x: np.ones((2, 3))})
        assert got[0].tolist() == [2, 3] and got[1].tolist() == [2, 4, 4, 3]
        with pytest.raises(OpsdkError, match="does not have the sizes declared"):
            sess.run(checked, {x: np.ones((4, 3))})
    with pytest.raises(OpsdkError, match="not compatible"):
        tf.ensure_shape(x, [2, 4])


def test_counting():
    got = run(tf.bincount(tf.constant([1, 1, 3, 0])), tf.bincount(tf.constant([1, 1, 3]),
                                                                  minlength=6),
              tf.bincount(tf.constant([1, 1, 3]), weights=tf.constant([0.5, 1., 2.])),
              tf.histogram_fixed_width(tf.constant([-1., 0., 1.5, 2., 5., 15.]), [0., 5.],
                                       nbins=5),
              tf.confusion_matrix(tf.constant([1, 2, 4]), tf.constant([2, 2, 4])),
              tf.confusion_matrix([0, 1], [1, 1], num_classes=3, weights=[2, 3]))
    assert got[0].tolist() == np.bincount([1, 1, 3, 0]).tolist()
    assert got[1].tolist() == np.bincount([1, 1, 3], minlength=6).tolist()
    assert got[2].tolist() == np.bincount([1, 1, 3], weights=[0.5, 1, 2]).tolist()
    assert got[3].tolist() == [2, 1, 1, 0, 2]
    want = np.zeros((5, 5), int)
    for a, b in ((1, 2), (2, 2), (4, 4)):
        want[a, b] += 1
    np.testing.assert_array_equal(got[4], want)
    assert got[5].tolist() == [[0, 2, 0], [0, 3, 0], [0, 0, 0]]


def test_index_arithmetic():
    inverse, coords, (kept, where) = run(
        tf.invert_permutation(tf.constant([3, 4, 0, 2, 1])),
        tf.unravel_index(tf.constant([2, 5, 7]), tf.constant([3, 3])),
        tf.setdiff1d(tf.constant([1, 2, 3, 4, 5, 6]), tf.constant([1, 3, 5])))
    assert inverse.tolist() == np.argsort([3, 4, 0, 2, 1]).tolist()
    assert coords.tolist() == [list(c) for c in np.unravel_index([2, 5, 7], (3, 3))]
    assert kept.tolist() == [2, 4, 6] and where.tolist() == [1, 3, 5]


def test_checks():
    fine = tf.check_numerics(tf.constant([1., 2.]), "fine")
    bad = tf.verify_tensor_all_finite(tf.constant([1., np.inf]), "late")
    with tf.Session() as sess:
        assert sess.run(fine).tolist() == [1.0, 2.0]
        with pytest.raises(tf.errors.InvalidArgumentError, match="late : Tensor had NaN or Inf"):
            sess.run(bad)
    with pytest.raises(ValueError, match="must have rank 2, has rank 1"):
        tf.assert_rank(tf.constant([1.0]), 2)
    with pytest.raises(ValueError, match="rank 0"):
        tf.assert_scalar(tf.constant([1.0]))
    with pytest.raises(TypeError, match="is float32, not int32"):
        tf.assert_type(tf.constant([1.0]), tf.int32)
    with pytest.raises(TypeError, match="not an integer"):
        tf.assert_integer(tf.constant([1.0]))
    tf.assert_rank_at_least(tf.constant([[1.0]]), 1)
    assert tf.is_tensor(tf.constant(1)) and not tf.is_tensor(3)


def test_initializers_local_variables_templates_and_hessians():
    w = tf.get_variable("w", [4, 3], initializer=tf.orthogonal_initializer())
    w2 = tf.get_variable("w2", [3, 5], initializer=tf.orthogonal_initializer(gain=2.0))
    local = tf.get_local_variable("loc", [2], initializer=tf.zeros_initializer())
    template = tf.make_template("net", lambda z: tf.layers.dense(z, 2, name="d"))
    first, second = template(tf.ones([1, 3])), template(tf.ones([2, 3]))
    x = tf.constant([1.0, 2.0])
    hessian, = tf.hessians(tf.reduce_sum(x ** 3) + x[0] * x[1], x)
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        a, b, h, one, two = sess.run([w, w2, hessian, first, second])
    np.testing.assert_allclose(a.T @ a, np.eye(3), atol=1e-5)
    np.testing.assert_allclose(b @ b.T, 4 * np.eye(3), atol=1e-4)
    assert [v.name for v in tf.local_variables()] == ["loc:0"] and local not in \
        tf.trainable_variables()
    assert sorted(v.name for v in tf.trainable_variables()) == [
        "net/d/bias:0", "net/d/kernel:0", "w2:0", "w:0"]
    np.testing.assert_allclose(one, two[:1])  # the second call shares the first's variables
    assert h.tolist() == [[6.0, 1.0], [1.0, 12.0]]


def test_glorot_normal_is_tf1s_truncated_normal_of_variance_one_over_fan_avg():
    glorot = run(tf.glorot_normal_initializer(seed=2)([400, 400]))[0]
    assert abs(glorot.std() / np.sqrt(1.0 / 400) - 1) < 0.02
    assert np.abs(glorot).max() <= 2 * np.sqrt(1.0 / 400) / 0.87962566 + 1e-6


def test_variables_state_names():
    """is_variable_initialized, report_uninitialized_variables (TF1's ready_op: every global
    and local variable; none left is an empty list of names, which once failed to fetch) and
    assert_variables_initialized read the running session; the older initializer names."""
    a = tf.Variable(1.0, name="a")
    tf.Variable([2.0, 3.0], name="b")
    tf.Variable(4.0, name="c", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    ready, check = tf.report_uninitialized_variables(), tf.assert_variables_initialized()
    with tf.Session() as sess:
        assert not sess.run(tf.is_variable_initialized(a))
        assert list(sess.run(ready)) == [b"a", b"b", b"c"]
        with pytest.raises(tf.errors.FailedPreconditionError, match="a, b, c"):
            sess.run(check)
        sess.run(tf.initialize_variables([a]))
        assert sess.run(tf.is_variable_initialized(a))
        assert list(sess.run(ready)) == [b"b", b"c"]
        sess.run([tf.global_variables_initializer(), tf.initialize_local_variables(),
                  tf.tables_initializer(), tf.initialize_all_tables()])
        left = sess.run(ready)
        sess.run(check)
        np.testing.assert_allclose(sess.run(tf.lin_space(0.0, 1.0, 5)), np.linspace(0, 1, 5))
    assert left.shape == (0,)


def test_space_to_batch_and_back_are_tensorflows():
    # the values TensorFlow 2.21's compat.v1 gave on the same calls, and each inverse the other
    x = tf.placeholder(tf.float64, [None, 4, 6, 2])
    v = np.arange(2 * 4 * 6 * 2, dtype=np.float64).reshape(2, 4, 6, 2)
    plain = tf.space_to_batch_nd(x, [2, 3], [[0, 0], [0, 0]])
    padded = tf.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]])
    back = tf.batch_to_space_nd(padded, [2, 2], tf.constant([[1, 1], [0, 2]]))
    square = tf.batch_to_space(tf.space_to_batch(x, [[2, 0], [1, 1]], 2), [[2, 0], [1, 1]], 2)
    (g,) = tf.gradients(tf.reduce_sum(padded * padded) + tf.reduce_sum(square * 3.0), x)
    with tf.Session() as sess:
        got = sess.run([plain, padded, back, square, g], {x: v})
    assert got[0].shape == (12, 2, 2, 2) and got[1].shape == (8, 3, 4, 2)
    # TF's: block (0, 1) of the first example first holds v[0, 0::2, 1::3]
    np.testing.assert_array_equal(got[0][2], v[0, 0::2, 1::3])
    # batch entry 1: offset (0, 0) of example 1, after one padded row on top, two columns right
    np.testing.assert_array_equal(got[1][1, 1:, :3], v[1, 1::2, 0::2])
    assert not got[1][1, 0].any() and not got[1][1, :, 3].any()
    np.testing.assert_array_equal(got[2], v)
    np.testing.assert_array_equal(got[3], v)
    np.testing.assert_array_equal(got[4], 2 * v + 3.0)
    with pytest.raises(OpsdkError, match="padded spatial sizes \\[5, 6\\] must be multiples"):
        tf.space_to_batch_nd(x, [2, 2], [[1, 0], [0, 0]])
    with pytest.raises(OpsdkError, match="spatial sizes of input \\[2, None, None, 1\\] must"):
        tf.space_to_batch_nd(tf.placeholder(tf.float32, [2, None, None, 1]), [2, 2],
                             [[0, 0], [0, 0]])


def test_conv2d_backprops_equal_the_gradients_and_tf_nn_has_the_block_moves():
    tf.reset_default_graph()
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(2, 7, 6, 3)))
    f = tf.constant(rng.normal(size=(3, 2, 3, 4)))
    for padding, strides in (("SAME", [1, 2, 2, 1]), ("VALID", [1, 1, 2, 1])):
        y = tf.nn.conv2d(x, f, strides, padding)
        dy = tf.constant(rng.normal(size=[int(d) for d in y.shape]))
        gx, gf = tf.gradients(y, [x, f], dy)
        by_input = tf.nn.conv2d_backprop_input([2, 7, 6, 3], f, dy, strides, padding)
        by_filter = tf.nn.conv2d_backprop_filter(x, [3, 2, 3, 4], dy, strides, padding)
        with tf.Session() as sess:
            want_x, want_f, got_x, got_f = sess.run([gx, gf, by_input, by_filter])
        np.testing.assert_allclose(got_x, want_x, atol=1e-12)
        np.testing.assert_allclose(got_f, want_f, atol=1e-12)
    images = tf.reshape(tf.range(32.0), [1, 4, 4, 2])
    with tf.Session() as sess:
        depth, batch = sess.run([tf.nn.space_to_depth(images, 2),
                                 tf.nn.space_to_batch(images, [[0, 0], [0, 0]], 2)])
    # TF's values on the same calls
    np.testing.assert_array_equal(depth.ravel()[:8], [0, 1, 2, 3, 8, 9, 10, 11])
    np.testing.assert_array_equal(batch.ravel()[:8], [0, 1, 4, 5, 16, 17, 20, 21])
    assert tf.nn.depth_to_space is tf.depth_to_space


def test_create_and_assert_global_step_as_tensorflows():
    tf.reset_default_graph()
    step = tf.train.create_global_step()
    tf.train.assert_global_step(step)
    assert tf.train.get_global_step() is step
    with pytest.raises(ValueError, match="has a global step already"):
        tf.train.create_global_step()
    with pytest.raises(TypeError, match="does not have integer type"):
        tf.train.assert_global_step(tf.constant(1.0))
    with pytest.raises(TypeError, match="is not scalar"):
        tf.train.assert_global_step(tf.constant([1, 2]))


def test_max_pool_with_argmax_and_a_range_cast_to_its_dtype_are_tensorflows():
    # TF 2.21's compat.v1 printed these indices on the same script
    tf.reset_default_graph()
    rng = np.random.default_rng(2)
    v = rng.normal(size=(2, 5, 6, 3)).astype(np.float32) - 3.0
    v[0, 0, 0, 0] = v[0, 0, 1, 0]
    x = tf.placeholder(tf.float32, [None, 5, 6, 3])
    want = {"VALID": ([21, 4, 5, 6, 10, 26, 30, 16, 32, 57, 55, 56],
                      [147, 145, 149, 147, 136, 149, 132, 136, 158, 174, 136, 179], -71.2750244),
            "SAME": ([21, 4, 5, 6, 10, 26, 30, 16, 32, 57, 55, 56],
                     [147, 151, 149, 174, 157, 158, 174, 157, 179, 174, 157, 179], -118.8297806)}
    for padding, (first, last, total) in want.items():
        out, arg = tf.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], padding)
        _, arg2 = tf.nn.max_pool_with_argmax(x, [1, 3, 3, 1], [1, 2, 1, 1], padding,
                                             include_batch_in_index=True)
        (g,) = tf.gradients(tf.reduce_sum(out * out), x)
        with tf.Session() as sess:
            got_out, got_arg, got_arg2, grad = sess.run([out, arg, arg2, g], {x: v})
        assert got_arg.dtype == np.int64
        np.testing.assert_array_equal(got_arg.ravel()[:12], first)
        np.testing.assert_array_equal(got_arg2.ravel()[-12:], last)
        assert float(got_out.sum()) == pytest.approx(total, abs=1e-4)
        assert float(grad.sum()) == pytest.approx(2 * total, abs=1e-4)
        np.testing.assert_array_equal(v.ravel()[got_arg.ravel() + np.repeat(
            [0, 90], got_arg[0].size)], got_out.ravel())  # the indices point at the maxima
    n = tf.placeholder(tf.int32, [])
    with tf.Session() as sess:
        got = sess.run(tf.range(n, dtype=tf.int64), {n: 3})  # refused: int32 bound, int64 list
    assert got.dtype == np.int64 and got.tolist() == [0, 1, 2]


def test_fused_batch_norm_is_tensorflows():
    # TF 2.21's compat.v1 printed these sums and first values on the same script
    tf.reset_default_graph()
    rng = np.random.default_rng(3)
    v = rng.normal(size=(4, 5, 6, 3)).astype(np.float32) * 2 + 1
    x = tf.placeholder(tf.float32, [None, 5, 6, 3])
    xc = tf.placeholder(tf.float32, [4, 3, 5, 6])
    scale, offset = tf.constant([1.0, 2.0, 0.5]), tf.constant([0.0, -1.0, 3.0])
    y, mean, var = tf.nn.fused_batch_norm(x, scale, offset, epsilon=1e-3)
    y2, _, _ = tf.nn.fused_batch_norm(x, scale, offset, mean=tf.constant([0.5, 1.0, 1.5]),
                                      variance=tf.constant([1.0, 4.0, 2.0]), is_training=False)
    y3, mean3, _ = tf.nn.fused_batch_norm(xc, scale, offset, data_format="NCHW")
    grads = tf.gradients(tf.reduce_sum(y * y) + tf.reduce_sum(y2), [x, scale, offset])
    with tf.Session() as sess:
        got = sess.run([y, mean, var, y2, y3, mean3] + grads, {x: v, xc: v.transpose(0, 3, 1, 2)})
    np.testing.assert_allclose(got[1], [1.0418, 1.0846, 1.0765], atol=1e-4)
    np.testing.assert_allclose(got[2], [4.2552, 4.6048, 3.6709], atol=1e-4)  # Bessel-corrected
    np.testing.assert_allclose(got[0].ravel()[:3], [1.9665, -5.8625, 3.1991], atol=1e-4)
    np.testing.assert_allclose(got[3].ravel()[:3], [4.5795, -6.1107, 3.1188], atol=1e-4)
    np.testing.assert_allclose(got[4], got[0].transpose(0, 3, 1, 2), atol=1e-5)
    np.testing.assert_allclose(got[5], got[1], rtol=1e-6)
    np.testing.assert_allclose(got[7], [304.9259, 484.9731, 84.0371], rtol=1e-5)
    np.testing.assert_allclose(got[8], [120.0, -120.0, 840.0], rtol=1e-5)
    with pytest.raises(OpsdkError, match="give mean and variance when is_training=False"):
        tf.nn.fused_batch_norm(x, scale, offset, is_training=False)
