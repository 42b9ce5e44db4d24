"""A variable read inside `tf.control_dependencies([op])` reads the value after `op`, as in TF
(the `read_variable` node of opsdk/runtime/frontend/variables.py), and gradients still reach the
variable through such a read."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _program(v1):
    """Reads of a variable after an assign_add, each made under control_dependencies([inc]);
    fetched one run at a time, so each run adds one first."""
    graph = v1.Graph()
    with graph.as_default():
        v = v1.Variable(1.0)
        inc = v1.assign_add(v, 1.0)
        with v1.control_dependencies([inc]):
            reads = [v + 0.0, v1.identity(v), v.read_value(), v1.square(v)]
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            return [float(sess.run(r)) for r in reads]


def test_a_read_under_control_dependencies_comes_after_them():
    # 1.0, then one assign_add per run: 2, 3, 4, and 5 squared
    assert _program(tf) == [2.0, 3.0, 4.0, 25.0]


def test_reads_under_control_dependencies_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow").compat.v1
    tf1.disable_eager_execution()
    assert _program(tf) == _program(tf1)


def test_a_gradient_reaches_the_variable_through_a_read_after_an_update():
    w = tf.Variable(np.array([1.0, 2.0], np.float32))
    counter = tf.Variable(0.0, trainable=False)
    step = tf.assign_add(counter, 1.0)
    with tf.control_dependencies([step]):
        loss = tf.reduce_sum(tf.square(w))
    [grad] = tf.gradients(loss, [w])
    train = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(grad), [2.0, 4.0])
        sess.run(train)
        np.testing.assert_array_equal(sess.run(w), [0.5, 1.0])


def test_outside_control_dependencies_a_variable_is_its_one_value_node():
    v = tf.Variable(1.0)
    assert (v + 1.0).op.inputs[0] is v.value()
    with tf.control_dependencies(None):
        assert tf.identity(v).op.inputs[0] is v.value()


def _averaged_after_a_step(v1):
    graph = v1.Graph()
    with graph.as_default():
        v = v1.Variable(1.0)
        step = v1.assign_add(v, 1.0)
        ema = v1.train.ExponentialMovingAverage(0.5)
        with v1.control_dependencies([step]):
            update = ema.apply([v])
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(update)
            return [float(x) for x in sess.run([v, ema.average(v)])]


def test_a_moving_average_under_control_dependencies_averages_the_new_value():
    # the shadow starts at 1.0; the step makes v 2.0, and the shadow moves half way to it
    assert _averaged_after_a_step(tf) == [2.0, 1.5]


def test_a_moving_average_after_a_step_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow").compat.v1
    tf1.disable_eager_execution()
    assert _averaged_after_a_step(tf) == _averaged_after_a_step(tf1)


def _values_read_after_a_step(v1):
    """`v.value()` called inside `control_dependencies([inc])`, fetched alone and in an op, then
    once outside the block: TF 1.15's resource variables (and compat.v1's) make a new read at
    each `value()` call, so the reads inside run after `inc` and the one outside waits for
    nothing."""
    graph = v1.Graph()
    with graph.as_default():
        v = v1.Variable(1.0)
        inc = v1.assign_add(v, 1.0)
        with v1.control_dependencies([inc]):
            alone, doubled = v.value(), v.value() * 2.0
        outside = v.value()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            return [float(sess.run(t)) for t in (alone, doubled, outside)]


def test_value_called_under_control_dependencies_reads_after_them():
    # each fetch inside the block adds one first: 2, then 3 doubled; outside, v stays 3
    assert _values_read_after_a_step(tf) == [2.0, 6.0, 3.0]


def test_value_under_control_dependencies_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow").compat.v1
    tf1.disable_eager_execution()
    assert _values_read_after_a_step(tf) == _values_read_after_a_step(tf1)


def test_value_outside_control_dependencies_is_the_variable_node():
    v = tf.Variable(1.0)
    assert v.value() is v.op.outputs[0]
    with tf.control_dependencies([tf.no_op()]):
        assert v.value() is not v.op.outputs[0] and v.value().op.type == "read_variable"
