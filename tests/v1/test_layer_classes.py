"""tf.layers' layer objects (opsdk/v1/layer_classes.py): one object applied twice shares its
variables, as TF's; its variables are its attributes."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_a_layer_object_called_twice_shares_its_variables_and_matches_the_function():
    x = tf.placeholder(tf.float32, [None, 8, 8, 3])
    training = tf.placeholder(tf.bool, [])
    conv = tf.layers.Conv2D(4, 3, padding="same", activation=tf.nn.relu,
                            kernel_initializer=tf.ones_initializer())
    pool, flat = tf.layers.MaxPooling2D(2, 2), tf.layers.Flatten()
    norm, drop = tf.layers.BatchNormalization(), tf.layers.Dropout(0.5)
    dense = tf.layers.Dense(3, kernel_initializer=tf.constant_initializer(0.1), name="head")
    with tf.variable_scope("outer"):
        first = dense(drop(flat(pool(norm(conv(x), training=training))), training=training))
        second = dense.apply(flat(pool(conv(x * 2.0))))
    assert sorted(v.name for v in tf.global_variables()) == sorted([
        "outer/conv2d/kernel:0", "outer/conv2d/bias:0", "outer/batch_normalization/beta:0",
        "outer/batch_normalization/gamma:0", "outer/batch_normalization/moving_mean:0",
        "outer/batch_normalization/moving_variance:0", "outer/head/kernel:0",
        "outer/head/bias:0"])
    assert dense.kernel.name == "outer/head/kernel:0" and conv.bias.name == "outer/conv2d/bias:0"
    assert dense.built and dense.name == "head" and len(dense.trainable_variables) == 2
    assert len(norm.variables) == 4 and len(norm.trainable_variables) == 2
    assert norm.moving_mean in norm.non_trainable_variables
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2
    a = np.linspace(-1, 1, 2 * 8 * 8 * 3).reshape(2, 8, 8, 3).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run([first, second], {x: a, training: False})
    # the same weights: ones in the convolution, 0.1 in the head; the second input is doubled
    # and skips batch norm (an identity at its initial averages, up to epsilon)
    np.testing.assert_allclose(got[1], 2 * got[0], rtol=1e-3)
    assert got[0][1, 0] > 0 and np.all(got[0][1] == got[0][1, 0])


def test_a_layers_variables_asked_for_before_its_first_call_are_refused_naming_the_call():
    dense = tf.layers.Dense(2)
    assert not dense.built and dense.variables == []
    with pytest.raises(tf.OpsdkError, match="Dense.kernel: the layer makes its variables when "
                                            "first called"):
        dense.kernel
    assert dense.units == 2 and dense.activation is None and dense.use_bias is True
    conv = tf.layers.Conv2D(4, (3, 3), strides=2, activation=tf.nn.relu)
    assert conv.filters == 4 and conv.kernel_size == (3, 3) and conv.strides == 2
    assert conv.activation is tf.nn.relu and conv.padding == "valid"
    with pytest.raises(AttributeError, match="Dense has no attribute 'nonsense'"):
        dense.nonsense
