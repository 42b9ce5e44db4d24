"""Reshapes by a shape known only at run time (`tf.reshape(x, shape_tensor)` with two or more
unknown sizes, the `reshape_dims` op) and what is built on reshape: `tf.layers.dense` on
[batch, time, depth] with batch and time unknown, expand_dims, squeeze, unstack, split and
`sequence_loss`. Values and gradients against TensorFlow's compat.v1 where it is installed, and
the gradient against finite differences everywhere."""

from __future__ import annotations

import os

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

RNG = np.random.default_rng(11)
X = RNG.standard_normal((3, 5, 4)).astype(np.float32)
KERNEL = RNG.standard_normal((4, 6)).astype(np.float32)


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _tensorflow_v1():
    """compat.v1, with tf.layers (TF 2.16+ takes them from tf_keras when TF_USE_LEGACY_KERAS is
    set before their first use)."""
    pytest.importorskip("tf_keras", reason="compat.v1's tf.layers need tf_keras "
                        "(pip install opsdk[tf])")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    tf1 = pytest.importorskip("tensorflow").compat.v1
    tf1.disable_eager_execution()
    return tf1


def _dense_model(v1):
    """dense on [batch, time, depth] (both unknown), then a loss over every output."""
    x = v1.placeholder(v1.float32, [None, None, 4])
    init = v1.constant_initializer(KERNEL)
    y = v1.layers.dense(x, 6, kernel_initializer=init, bias_initializer=v1.ones_initializer())
    weights = v1.constant(np.arange(3 * 5 * 6, dtype=np.float32).reshape(3, 5, 6) / 90.0)
    loss = v1.reduce_sum(y * y * weights)
    return x, y, loss


def _run_dense(v1):
    graph = v1.Graph()
    with graph.as_default():
        x, y, loss = _dense_model(v1)
        variables = sorted(v1.trainable_variables(), key=lambda v: v.name)
        grads = v1.gradients(loss, [x] + variables)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            return y.get_shape().as_list(), sess.run([y] + grads, {x: X})


def test_dense_over_unknown_batch_and_time_keeps_the_units_and_trains():
    shape, (y, gx, gbias, gkernel) = _run_dense(tf)  # variables by name: bias, kernel
    assert shape == [None, None, 6] and y.shape == (3, 5, 6)
    assert gx.shape == X.shape and gkernel.shape == (4, 6) and gbias.shape == (6,)


def test_dense_over_unknown_batch_and_time_matches_tensorflow():
    tf1 = _tensorflow_v1()
    shape, ours = _run_dense(tf)
    tf_shape, theirs = _run_dense(tf1)
    assert shape == tf_shape
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def test_reshape_by_a_run_time_shape_gives_values_and_the_gradient():
    x = tf.placeholder(tf.float32, [None, None, 4])
    batch, time = tf.shape(x)[0], tf.shape(x)[1]
    flat = tf.reshape(x, tf.stack([batch * time, 4]))
    back = tf.reshape(flat * 2.0, [batch, time, 2, 2])
    assert flat.get_shape().as_list() == [None, 4]
    assert back.get_shape().as_list() == [None, None, 2, 2]
    weights = RNG.standard_normal((3, 5, 2, 2)).astype(np.float32)
    [grad] = tf.gradients(tf.reduce_sum(back * weights), [x])
    with tf.Session() as sess:
        got, got_grad = sess.run([back, grad], {x: X})
    np.testing.assert_array_equal(got, 2.0 * X.reshape(3, 5, 2, 2))
    np.testing.assert_allclose(got_grad, 2.0 * weights.reshape(X.shape), rtol=1e-6)


def test_the_gradient_of_a_run_time_reshape_matches_finite_differences():
    x = tf.placeholder(tf.float64, [None, None])
    y = tf.reshape(x, tf.stack([tf.shape(x)[1], tf.shape(x)[0]]))
    weights = RNG.standard_normal((3, 2))
    loss = tf.reduce_sum(tf.sin(y) * weights)
    [grad] = tf.gradients(loss, [x])
    value = RNG.standard_normal((2, 3))
    with tf.Session() as sess:
        analytic = sess.run(grad, {x: value})
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            step = np.zeros_like(value)
            step[index] = 1e-6
            up, down = (sess.run(loss, {x: value + s}) for s in (step, -step))
            numeric[index] = (up - down) / 2e-6
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_a_run_time_shape_with_a_minus_one_and_the_reshape_of_tensorflow():
    tf1 = _tensorflow_v1()
    results = []
    for v1 in (tf, tf1):
        graph = v1.Graph()
        with graph.as_default():
            x = v1.placeholder(v1.float32, [None, None, 4])
            y = v1.reshape(x, [v1.shape(x)[0], -1, 2])
            with v1.Session() as sess:
                results.append((y.get_shape().as_list(), sess.run(y, {x: X})))
    assert results[0][0] == results[1][0] == [None, None, 2]
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_shape_helpers_built_on_reshape_take_two_unknown_sizes():
    x = tf.placeholder(tf.float32, [None, None, 4])
    wide = tf.expand_dims(x, 1)
    narrow = tf.squeeze(tf.expand_dims(x, -1), [3])
    rows = tf.unstack(x, axis=2)
    cube = tf.placeholder(tf.float32, [None, None, None])
    parts = tf.split(cube, 2, axis=1)
    assert wide.get_shape().as_list() == [None, 1, None, 4]
    assert rows[0].get_shape().as_list() == [None, None]
    with tf.Session() as sess:
        got = sess.run([wide, narrow, rows[3]], {x: X})
        halves = sess.run(parts, {cube: np.ones((2, 6, 3))})
    np.testing.assert_array_equal(got[0], X[:, None])
    np.testing.assert_array_equal(got[1], X)
    np.testing.assert_array_equal(got[2], X[:, :, 3])
    assert [h.shape for h in halves] == [(2, 3, 3), (2, 3, 3)]


def test_squeeze_without_axes_drops_the_sizes_of_one_known_only_at_run_time():
    # Before, the axes were chosen from the static shape: an unknown size that was 1 when the
    # step ran was kept, and a program gathering from the squeezed vector failed (a public TF1
    # address-matching program: tf.squeeze of a [None, n] distance fed one row).
    rows = tf.placeholder(tf.float32, [None, 4])
    flat = tf.squeeze(rows)
    picked = tf.gather(flat, tf.argmax(rows, 1))
    assert flat.get_shape().ndims is None  # as TF's: unknown until the step runs
    loss = tf.reduce_sum(flat * tf.constant([1.0, 2.0, 3.0, 4.0]))
    grad, = tf.gradients(loss, rows)
    with tf.Session() as sess:
        got_flat, got_picked, got_grad = sess.run([flat, picked, grad],
                                                  {rows: [[3.0, 9.0, 1.0, 2.0]]})
        several = sess.run(flat, {rows: np.ones((2, 4))})
    np.testing.assert_array_equal(got_flat, [3.0, 9.0, 1.0, 2.0])
    np.testing.assert_array_equal(got_picked, [9.0])
    np.testing.assert_array_equal(got_grad, [[1.0, 2.0, 3.0, 4.0]])
    assert several.shape == (2, 4)


def test_sequence_loss_over_unknown_batch_and_time():
    logits = tf.placeholder(tf.float32, [None, None, 4])
    targets = tf.placeholder(tf.int32, [None, None])
    weights = tf.ones_like(tf.cast(targets, tf.float32))
    loss = tf.contrib.seq2seq.sequence_loss(logits, targets, weights)
    labels = RNG.integers(0, 4, size=(3, 5))
    with tf.Session() as sess:
        got = sess.run(loss, {logits: X, targets: labels})
    z = X - X.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    want = -np.take_along_axis(log_p, labels[..., None], -1).mean()
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_run_time_shape_that_does_not_fit_names_the_op_and_the_shape():
    x = tf.placeholder(tf.float32, [None, None, 4])
    y = tf.reshape(x, [tf.shape(x)[0], tf.shape(x)[1], 3])
    with tf.Session() as sess:
        with pytest.raises(Exception, match=r"reshape_dims.*cannot reshape x of shape \[3, 5, 4\]"):
            sess.run(y, {x: X})
    with pytest.raises(OpsdkError, match=r"reshape: argument 'shape' .* unknown length"):
        tf.reshape(x, tf.placeholder(tf.int32, [None]))


def test_flatten_of_sizes_known_only_at_run_time():
    x = tf.placeholder(tf.float32, [None, None, 4])
    flat = tf.layers.flatten(x)
    assert flat.get_shape().as_list() == [None, None]
    [grad] = tf.gradients(tf.reduce_sum(flat * 3.0), [x])
    with tf.Session() as sess:
        got, got_grad = sess.run([flat, grad], {x: X})
    np.testing.assert_array_equal(got, X.reshape(3, 20))
    np.testing.assert_array_equal(got_grad, np.full(X.shape, 3.0, np.float32))
