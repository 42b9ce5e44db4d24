"""tf.py_func, tf.numpy_function and tf.py_function (opsdk/v1/script_ops.py)."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


def test_the_three_forms_call_python_when_the_step_runs():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        top = tf.py_func(lambda a: np.sort(a)[::-1], [x], tf.float32)
        n, wide = tf.py_func(lambda a: (a.size, a + 1), [x], [tf.int64, tf.float64])
        total = tf.py_function(lambda a: a.numpy().sum(), [x], tf.float32)  # eager-style
        head = tf.numpy_function(lambda a, k: a[:k], [x, 2], tf.float32)
        assert top.get_shape().dims is None  # known when the function has run
        top.set_shape([None])  # declared: checked when it runs
        assert top.get_shape().as_list() == [None]
        pair = tf.py_func(lambda a: a[:2], [x], tf.float32)
        pair.set_shape([3])
        w = tf.Variable(2.0)
        assert tf.gradients(tf.reduce_sum(top * w), [x]) == [None]  # none passes, as in TF
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run([top, n, wide, total, head], {x: [3.0, 1.0, 2.0]})
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"result 0 has shape \[2\], but its tensor was declared \[3\]"):
                sess.run(pair, {x: [3.0, 1.0, 2.0]})
            with pytest.raises(tf.errors.InvalidArgumentError, match="ZeroDivisionError"):
                sess.run(tf.py_func(lambda a: a / 0 if a.size else 1 // 0, [x], tf.float32),
                         {x: []})
    np.testing.assert_array_equal(got[0], [3, 2, 1])
    assert got[1] == 3 and got[2].dtype == np.float64 and got[3] == 6.0
    np.testing.assert_array_equal(got[4], [3, 1])
