"""`tf.Variable(collections=...)` puts the variable in those collections alone (a trainable one in
TRAINABLE_VARIABLES too), as TensorFlow does: a local variable is not a global one, so the
global initializer and a default Saver leave it out."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


def test_given_collections_replace_the_global_one():
    with tf.Graph().as_default():
        local = tf.Variable(tf.zeros([2]), collections=[tf.GraphKeys.LOCAL_VARIABLES], name="l")
        plain = tf.Variable(1.0, name="g")
        mine = tf.Variable(2.0, trainable=False, collections=["mine"], name="m")
        named = tf.get_variable("v", [1], collections=[tf.GraphKeys.LOCAL_VARIABLES])
        assert tf.global_variables() == [plain]
        assert tf.local_variables() == [local, named]
        assert tf.trainable_variables() == [local, plain, named]
        assert tf.get_collection("mine") == [mine]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(plain) == 1.0
            with pytest.raises(tf.errors.FailedPreconditionError, match="'l' is not initialised"):
                sess.run(local)
            sess.run(tf.local_variables_initializer())
            np.testing.assert_array_equal(sess.run(local), [0.0, 0.0])
        assert tf.train.Saver().var_list == [plain]
