"""tf.metrics: streaming values over the batches updated so far, reset by the local initializer."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


def test_accuracy_and_mean_stream_over_batches_and_reset():
    tf.reset_default_graph()
    labels, predictions = tf.placeholder(tf.int64, [None]), tf.placeholder(tf.int64, [None])
    accuracy, update = tf.metrics.accuracy(labels=labels, predictions=predictions)
    mean, update_mean = tf.metrics.mean(tf.cast(labels, tf.float32), weights=2.0)
    assert len(tf.local_variables()) == 4
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        assert sess.run(accuracy) == 0.0  # no batch yet: 0, not NaN
        assert sess.run(update, {labels: [1, 2, 3, 4], predictions: [1, 2, 0, 0]}) == 0.5
        got = sess.run(update, {labels: [1, 1], predictions: [1, 1]})
        assert got == pytest.approx(4 / 6) and sess.run(accuracy) == pytest.approx(4 / 6)
        assert sess.run(update_mean, {labels: [1, 4]}) == 2.5
        sess.run(tf.local_variables_initializer())
        assert sess.run(accuracy) == 0.0 and sess.run(mean) == 0.0
    with pytest.raises(AttributeError, match=r"tf\.metrics\.auc is not provided"):
        tf.metrics.auc
