"""tf.nn.conv2d_transpose and tf.layers.conv2d_transpose in opsdk.v1: TF's output_shape (a list
or a tensor), strides and padding, the layer's variables, results and gradients against
TensorFlow's compat.v1 where it is installed, and clear refusals."""

from __future__ import annotations

import os

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

rng = np.random.default_rng(5)
X = rng.standard_normal((3, 7, 6, 4)).astype(np.float32)


def _tensorflow_v1():
    """compat.v1, with tf.layers (TF 2.16+ takes them from tf_keras when TF_USE_LEGACY_KERAS is
    set before their first use)."""
    pytest.importorskip("tf_keras",
                        reason="compat.v1's layers need tf_keras (pip install opsdk[tf])")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    tf1 = pytest.importorskip("tensorflow").compat.v1
    tf1.disable_eager_execution()
    return tf1


def _model(v1):
    x = v1.placeholder(v1.float32, [None, 7, 6, 4])
    w = v1.Variable(rng.standard_normal((3, 3, 5, 4)).astype(np.float32) * 0.3, name="w")
    batch = v1.reshape(v1.shape(x)[0], [1])
    outs = [
        v1.nn.conv2d_transpose(x, w, [3, 14, 12, 5], [1, 2, 2, 1], "SAME"),
        v1.nn.conv2d_transpose(x, w, v1.concat([batch, [13, 11, 5]], 0), [1, 2, 2, 1], "SAME"),
        v1.nn.conv2d_transpose(x, w, [3, 16, 13, 5], [1, 2, 2, 1], "VALID"),
        v1.nn.conv2d_transpose(x, w, [3, 9, 8, 5], [1, 1, 1, 1], padding="VALID"),
        v1.layers.conv2d_transpose(x, 6, 3, strides=2, padding="same", activation=v1.nn.relu),
        v1.layers.conv2d_transpose(x, 2, (4, 3), strides=(3, 2), padding="valid", name="up"),
        v1.layers.conv2d_transpose(x, 3, 2, use_bias=False),
        v1.nn.conv2d_transpose(x, w, [v1.shape(x)[0], 7, 6, 5], [1, 1, 1, 1], "SAME"),
    ]
    loss = sum(v1.reduce_sum(o * o) * (i + 1) for i, o in enumerate(outs))
    variables = sorted(v1.trainable_variables(), key=lambda v: v.name)
    return x, outs, variables, v1.gradients(loss, [x] + variables)


def _run(v1, weights=None):
    with v1.Graph().as_default():
        x, outs, variables, grads = _model(v1)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            names = [v.name.split(":")[0] for v in variables]
            for name, var in zip(names, variables):
                if weights is not None:
                    var.load(weights[name], sess)
            values = dict(zip(names, sess.run(variables)))
            return values, sess.run(outs + grads, {x: X})


def test_shapes_and_variables_are_tf1s():
    with tf.Graph().as_default():
        x, outs, variables, _ = _model(tf)
        # The batch is value's (TF would take output_shape's 3 where value's is unknown).
        assert [o.get_shape().as_list() for o in outs] == [
            [None, 14, 12, 5], [None, 13, 11, 5], [None, 16, 13, 5], [None, 9, 8, 5],
            [None, 14, 12, 6],
            [None, 22, 13, 2], [None, 8, 7, 3], [None, 7, 6, 5]]
        shapes = {v.name.split(":")[0]: v.get_shape().as_list() for v in variables}
    assert shapes == {"w": [3, 3, 5, 4], "conv2d_transpose/kernel": [3, 3, 6, 4],
                      "conv2d_transpose/bias": [6], "up/kernel": [4, 3, 2, 4], "up/bias": [2],
                      "conv2d_transpose_1/kernel": [2, 2, 3, 4]}


def test_results_and_gradients_match_tensorflow():
    tf1 = _tensorflow_v1()
    weights, ours = _run(tf)
    _, theirs = _run(tf1, weights)
    assert len(ours) == len(theirs)
    for mine, real in zip(ours, theirs):  # float32 sums in another order: scale-aware atol
        np.testing.assert_allclose(mine, real, rtol=1e-4,
                                   atol=1e-5 * max(1.0, float(np.abs(real).max())))


def test_an_upsampling_decoder_trains():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 8, 8, 1])
        code = tf.layers.conv2d(x, 8, 3, strides=2, padding="same", activation=tf.nn.relu)
        out = tf.layers.conv2d_transpose(code, 1, 3, strides=2, padding="same")
        loss = tf.reduce_mean(tf.square(out - x))
        train = tf.train.AdamOptimizer(0.01).minimize(loss)
        images = np.zeros((16, 8, 8, 1), np.float32)
        images[:, 2:6, 2:6] = rng.uniform(0.5, 1.0, (16, 1, 1, 1))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            losses = [sess.run([train, loss], {x: images})[1] for _ in range(150)]
    assert losses[-1] < 0.1 * losses[0]


def test_bad_arguments_are_refused_naming_the_function_and_argument():
    x = tf.placeholder(tf.float32, [2, 7, 7, 4])
    w = tf.zeros([3, 3, 5, 4])
    with pytest.raises(OpsdkError, match=r"conv2d_transpose: output_shape \[2, 20, 14, 5\] does "
                                         r"not fit value \[2, 7, 7, 4\]: conv2d of 20 pixels"):
        tf.nn.conv2d_transpose(x, w, [2, 20, 14, 5], [1, 2, 2, 1])
    with pytest.raises(OpsdkError, match="output_shape .* has 6 channels but the filter makes 5"):
        tf.nn.conv2d_transpose(x, w, [2, 14, 14, 6], [1, 2, 2, 1])
    with pytest.raises(OpsdkError, match="output_shape must have 4 entries"):
        tf.nn.conv2d_transpose(x, w, [14, 14, 5], [1, 2, 2, 1])
    with pytest.raises(OpsdkError, match="output_shape's height, width and channels must be known"):
        tf.nn.conv2d_transpose(x, w, tf.shape(tf.zeros([2, 14, 14, 5])), [1, 2, 2, 1])
    with pytest.raises(OpsdkError, match="conv2d_transpose: padding must be 'SAME' or 'VALID'"):
        tf.nn.conv2d_transpose(x, w, [2, 14, 14, 5], [1, 2, 2, 1], padding="FULL")
    with pytest.raises(OpsdkError, match="layers.conv2d_transpose: inputs must be NHWC with known"):
        tf.layers.conv2d_transpose(tf.placeholder(tf.float32, [None, None, 7, 4]), 2, 3)
