"""TF1's tf.TensorArray in opsdk.v1 (opsdk/v1/tensor_array.py): written and read in Python and in
tf.while_loop, gradients through writes and reads against central differences, and the same
values TF's compat.v1 gives where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def custom_rnn(v1, dtype, dynamic=False):
    """A hand-written RNN loop as TF1 programs write one: inputs unstacked into an array, one
    output written per step, stacked after the loop. Steps and batch known at run time; with
    `dynamic`, the outputs' array starts empty and grows at each write."""
    rng = np.random.default_rng(0)
    x = v1.placeholder(dtype, [None, None, 4])
    w = v1.placeholder(dtype, [6, 2])
    steps = v1.shape(x)[0]
    inputs = v1.TensorArray(dtype, size=steps).unstack(x)

    def body(t, h, outs):
        h = v1.tanh(v1.matmul(v1.concat([inputs.read(t), h], 1), w))
        return t + 1, h, outs.write(t, h)
    _, last, outs = v1.while_loop(lambda t, h, o: t < steps, body,
                                  [0, v1.zeros([v1.shape(x)[1], 2], dtype=dtype),
                                   v1.TensorArray(dtype, size=0, dynamic_size=True) if dynamic
                                   else v1.TensorArray(dtype, size=steps)])
    y = outs.stack()
    feeds = {x: rng.standard_normal((5, 3, 4)).astype(dtype), w: rng.standard_normal((6, 2))
             .astype(dtype)}
    return x, w, y, last, feeds


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_loop_writes_one_output_per_step_and_the_gradient_flows_back(dynamic):
    """The gradient reads the outputs' array only for its shape: the loop records its shapes,
    not a copy of the array per iteration (which grew as the square of the steps, and failed
    for an array growing in the loop: its recorded values changed shape)."""
    x, w, y, last, feeds = custom_rnn(tf, np.float64, dynamic)
    loss = tf.reduce_sum(y * y) + tf.reduce_sum(last)
    grads = tf.gradients(loss, [x, w])
    (loop,) = [op for op in tf.get_default_graph().get_operations() if op.type == "while_loop"
               and "grad" not in op.name]
    assert loop.attrs["shape_histories"] == [2]  # (t, h, outs): the array's shapes
    assert y.get_shape().as_list() == [None, None, 2]
    with tf.Session() as sess:
        got_y, got_last, got_grads = sess.run([y, last, grads], feeds)
        for p, g in zip((x, w), got_grads):
            np.testing.assert_allclose(g, numeric_grad(sess, loss, p, feeds), rtol=1e-6,
                                       atol=1e-9)
    h = np.zeros((3, 2))
    for t in range(5):  # the same recurrence in NumPy
        h = np.tanh(np.concatenate([feeds[x][t], h], 1) @ feeds[w])
        np.testing.assert_allclose(got_y[t], h, rtol=1e-12)
    np.testing.assert_allclose(got_last, h, rtol=1e-12)


def test_the_loop_matches_tensorflow():
    tensorflow = pytest.importorskip("tensorflow", reason="the comparison needs TensorFlow")
    theirs = tensorflow.compat.v1
    theirs.disable_eager_execution()
    graph = theirs.Graph()
    with graph.as_default():
        x, w, y, last, feeds = custom_rnn(theirs, np.float32)
        with theirs.Session() as sess:
            want = sess.run([y, theirs.gradients(theirs.reduce_sum(y * y), [w])[0]], feeds)
    x, w, y, last, feeds = custom_rnn(tf, np.float32)
    with tf.Session() as sess:
        got = sess.run([y, tf.gradients(tf.reduce_sum(y * y), [w])[0]], feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_dynamic_size_writes_reads_and_a_loop_that_reads_its_own_elements():
    grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    for i in range(3):
        grown = grown.write(i, tf.constant(float(i) * 2))
    fib = tf.TensorArray(tf.int32, size=2, dynamic_size=True).write(0, 0).write(1, 1)
    _, fib = tf.while_loop(lambda i, f: i < 10,
                           lambda i, f: (i + 1, f.write(i, f.read(i - 1) + f.read(i - 2))),
                           [2, fib])
    with tf.Session() as sess:
        stacked, size, second = sess.run([grown.stack(), grown.size(), grown.read(1)])
        sequence, count = sess.run([fib.stack(), fib.size()])
    np.testing.assert_array_equal(stacked, [0.0, 2.0, 4.0])
    assert size == 3 and second == 2.0
    np.testing.assert_array_equal(sequence, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34])
    assert count == 10


def test_scatter_gather_concat_and_size():
    ta = tf.TensorArray(tf.float32, size=4, element_shape=[2])
    ta = ta.scatter([0, 2], tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    assert ta.stack().get_shape().as_list() == [4, 2]
    with tf.Session() as sess:
        stacked, picked, joined, size = sess.run([ta.stack(), ta.gather([2, 0]), ta.concat(),
                                                  ta.size()])
    np.testing.assert_array_equal(stacked, [[1, 2], [0, 0], [3, 4], [0, 0]])
    np.testing.assert_array_equal(picked, [[3, 4], [1, 2]])
    np.testing.assert_array_equal(joined, [1, 2, 0, 0, 3, 4, 0, 0])
    assert size == 4


def test_a_loop_that_never_runs_leaves_the_array_as_it_was():
    n = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=3, element_shape=[2])
    _, ta = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a.write(i, tf.ones([2]))),
                          [0, ta])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(ta.stack(), {n: 0}), np.zeros((3, 2)))
        np.testing.assert_array_equal(sess.run(ta.stack(), {n: 2}), [[1, 1], [1, 1], [0, 0]])


def test_mistakes_are_named():
    ta = tf.TensorArray(tf.float32, size=2)
    with pytest.raises(OpsdkError, match="element shape is not known yet; write an element "
                                         "first or give element_shape="):
        ta.read(0)
    with pytest.raises(OpsdkError, match="the array holds float32, the value .* is int32"):
        ta.write(0, tf.constant([1, 2]))
    written = ta.write(0, tf.constant([1.0, 2.0]))
    with pytest.raises(OpsdkError, match=r"a value of shape \[3\] does not fit the array's "
                                         r"elements of shape \[2\]"):
        written.write(1, tf.constant([1.0, 2.0, 3.0]))
    with pytest.raises(OpsdkError, match="give size"):
        tf.TensorArray(tf.float32)
    late = written.write(5, tf.constant([0.0, 0.0]))
    with tf.Session() as sess, pytest.raises(OpsdkError, match="index 5 is outside the "
                                                               "buffer's 2 rows"):
        sess.run(late.stack())
