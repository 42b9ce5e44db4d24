"""Feeds as TF1's session takes them: numbers converted to an integer or bool placeholder's dtype
when no value changes (and refused, naming the placeholder, when one would), and tuples of
tensors (an LSTMStateTuple) fed a like tuple of values."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.uint8])
def test_whole_float_labels_feed_an_integer_placeholder(dtype):
    labels = tf.placeholder(dtype, [None], name="labels")
    doubled = labels * 2
    with tf.Session() as sess:
        out = sess.run(doubled, {labels: np.array([0.0, 1.0, 3.0], np.float32)})
        assert out.dtype == np.dtype(dtype.name) and out.tolist() == [0, 2, 6]
        assert sess.run(doubled, {labels: [1.0, 2.0]}).tolist() == [2, 4]  # a list of floats
        assert sess.run(doubled, {labels: np.zeros([0])}).shape == (0,)


@pytest.mark.parametrize("value, shown", [(3.7, "3.7"), (2.0 ** 40, "1099511627776.0"),
                                          (-1.0, "-1.0"), (float("nan"), "nan")])
def test_a_float_that_the_conversion_would_change_is_refused_naming_the_placeholder(value, shown):
    labels = tf.placeholder(tf.int32 if value != -1.0 else tf.uint8, [2], name="labels")
    with tf.Session() as sess:
        with pytest.raises(OpsdkError, match=rf"feed for 'labels:0' holds {shown}, which is not "
                                             r"a value of dtype u?int(32|8) \(TF would convert it to"):
            sess.run(labels + 1, {labels: [1.0, value]})


def test_wider_ints_out_of_range_are_still_refused_by_the_runtime():
    labels = tf.placeholder(tf.int32, [1], name="labels")
    with tf.Session() as sess, pytest.raises(OpsdkError, match="int32 cannot represent"):
        sess.run(labels, {labels: np.array([2 ** 40], np.int64)})


def test_bool_placeholders_take_zeros_and_ones_only():
    flag = tf.placeholder(tf.bool, [], name="flag")
    picked = tf.cast(flag, tf.float32)
    with tf.Session() as sess:
        assert sess.run(picked, {flag: 1}) == 1.0 and sess.run(picked, {flag: 0.0}) == 0.0
        with pytest.raises(OpsdkError, match="feed for 'flag:0' holds 2, which is not a value of dtype bool"):
            sess.run(picked, {flag: 2})


def test_an_lstm_state_tuple_is_fed_a_tuple_of_values():
    cell = tf.nn.rnn_cell.BasicLSTMCell(3)
    x = tf.placeholder(tf.float32, [2, 4, 5])
    init = cell.zero_state(2, tf.float32)
    outputs, final = tf.nn.dynamic_rnn(cell, x, initial_state=init)
    inputs = np.random.RandomState(0).randn(2, 4, 5).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        state = sess.run(final, {x: inputs})
        assert isinstance(state, tf.nn.rnn_cell.LSTMStateTuple)
        carried = sess.run(outputs, {x: inputs, init: state})
        fresh = sess.run(outputs, {x: inputs})
        zeros = sess.run(outputs, {x: inputs, init: (np.zeros([2, 3]), np.zeros([2, 3]))})
    np.testing.assert_allclose(zeros, fresh, rtol=1e-6)
    assert not np.allclose(carried, fresh)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(OpsdkError, match="the feed for a LSTMStateTuple of 2 tensors must be "
                                             "a tuple or list of as many values, got ndarray"):
            sess.run(outputs, {x: inputs, init: np.zeros([2, 3])})


def test_zero_state_takes_a_run_time_batch_size():
    cell = tf.nn.rnn_cell.BasicLSTMCell(3)
    x = tf.placeholder(tf.float32, [None, 4, 5])
    init = cell.zero_state(tf.shape(x)[0], tf.float32)
    assert init.c.get_shape().as_list() == [None, 3]
    outputs, _ = tf.nn.dynamic_rnn(cell, x, initial_state=init)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for batch in (1, 6):
            got = sess.run([outputs, init.h], {x: np.ones([batch, 4, 5], np.float32)})
            assert got[0].shape == (batch, 4, 3) and not got[1].any()
