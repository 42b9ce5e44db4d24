"""tf.fill and tf.one_hot keep integer values exactly (they went through float())."""

from __future__ import annotations

import numpy as np

import opsdk.v1 as tf


def test_fill_and_one_hot_keep_int64_values():
    graph = tf.Graph()
    with graph.as_default():
        big = tf.fill([2], 2**63 - 1)
        odd = tf.fill([1], np.int64(9007199254740993))
        hot = tf.one_hot(tf.constant([0, 2]), 3, on_value=np.int64(2**62 + 1),
                         off_value=np.int64(-2**63), dtype=tf.int64)
        flags = tf.one_hot(tf.constant([1]), 2, dtype=tf.bool)
        with tf.Session() as sess:
            b, o, h, f = sess.run([big, odd, hot, flags])
    assert b.dtype == np.int64 and b.tolist() == [2**63 - 1] * 2
    assert o.tolist() == [9007199254740993]
    assert h.tolist() == [[2**62 + 1, -2**63, -2**63], [-2**63, -2**63, 2**62 + 1]]
    assert f.tolist() == [[False, True]]
