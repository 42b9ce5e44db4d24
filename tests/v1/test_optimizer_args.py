"""TF1's optimizer and tf.gradients arguments: accepted in TF's order, checked, and the ones that
change results (grad_loss, unconnected_gradients) honoured."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


def _trained(make, **kwargs):
    with tf.Graph().as_default():
        w = tf.Variable([1.0, -2.0], name="w")
        loss = tf.reduce_sum(tf.square(w - [3.0, 4.0]))
        train = make().minimize(loss, **kwargs)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(3):
                sess.run(train)
            return sess.run(w)


@pytest.mark.parametrize("make, plain", [
    (lambda: tf.train.GradientDescentOptimizer(0.1, True, "gd"),
     lambda: tf.train.GradientDescentOptimizer(0.1)),
    (lambda: tf.train.MomentumOptimizer(0.1, 0.9, True, "m", True),
     lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True)),
    (lambda: tf.train.AdagradOptimizer(0.1, 0.2, True, "ada"),
     lambda: tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.2)),
    (lambda: tf.train.AdamOptimizer(0.1, 0.8, 0.99, 1e-7, True, "adam"),
     lambda: tf.train.AdamOptimizer(0.1, beta1=0.8, beta2=0.99, epsilon=1e-7)),
    (lambda: tf.train.RMSPropOptimizer(0.1, 0.8, 0.5, 1e-6, True, False, "rms"),
     lambda: tf.train.RMSPropOptimizer(0.1, decay=0.8, momentum=0.5, epsilon=1e-6)),
], ids=["gd", "momentum", "adagrad", "adam", "rmsprop"])
def test_the_constructors_take_tf1s_arguments_in_its_order(make, plain):
    assert make()._name != plain()._name
    np.testing.assert_array_equal(
        _trained(make, gate_gradients=tf.train.Optimizer.GATE_GRAPH,
                 aggregation_method=tf.AggregationMethod.EXPERIMENTAL_TREE,
                 colocate_gradients_with_ops=True),
        _trained(plain))


def test_grad_loss_starts_the_gradient():
    with tf.Graph().as_default():
        w = tf.Variable(2.0)
        (grad, _), = tf.train.AdamOptimizer().compute_gradients(w * w, grad_loss=tf.constant(3.0))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(grad) == 12.0


def test_bad_options_and_centered_rmsprop_are_refused():
    with tf.Graph().as_default():
        w = tf.Variable(2.0)
        with pytest.raises(OpsdkError, match="gate_gradients must be"):
            tf.train.GradientDescentOptimizer(0.1).minimize(w * w, gate_gradients=5)
        with pytest.raises(OpsdkError, match="aggregation_method must be"):
            tf.train.GradientDescentOptimizer(0.1).compute_gradients(w * w,
                                                                     aggregation_method="sum")
    with pytest.raises(OpsdkError, match="centered=True .* not provided"):
        tf.train.RMSPropOptimizer(0.1, centered=True)


def test_tf_gradients_takes_tf1s_arguments():
    with tf.Graph().as_default():
        x, z = tf.Variable(3.0), tf.Variable([1.0, 2.0])
        y = x * x
        zero = tf.gradients(y, [x, z], colocate_gradients_with_ops=True, gate_gradients=True,
                            unconnected_gradients=tf.UnconnectedGradients.ZERO)
        assert tf.gradients(y, [x, z])[1] is None
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run(zero)
        assert got[0] == 6.0
        np.testing.assert_array_equal(got[1], [0.0, 0.0])
        with pytest.raises(OpsdkError, match="stop_gradients is not provided"):
            tf.gradients(y, [x], stop_gradients=[y])
        with pytest.raises(OpsdkError, match="unconnected_gradients must be"):
            tf.gradients(y, [x], unconnected_gradients="nan")


def test_adadelta_trains_as_tensorflows():
    # TensorFlow 2.21's compat.v1 printed these losses and weights on the same script
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(np.array([[0.1], [-0.2], [0.3]], np.float32))
    b = tf.Variable(np.zeros([1], np.float32))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    opt = tf.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-6)
    step = opt.minimize(loss)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(64, 3)).astype(np.float32)
    target = (data @ np.array([[1.0], [2.0], [-1.0]]) + 0.5).astype(np.float32)
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(200):
            losses.append(sess.run([step, loss], {x: data, y: target})[1])
        weights, accum = sess.run([w, opt.get_slot(w, "accum")])
    np.testing.assert_allclose([losses[i] for i in (0, 50, 100, 150, 199)],
                               [5.63561, 4.45012, 3.38207, 2.47675, 1.75887], rtol=1e-5)
    np.testing.assert_allclose(weights.ravel(), [0.75287, 0.59466, -0.43039], rtol=1e-5)
    np.testing.assert_allclose(accum.ravel(), [0.349713, 4.546744, 0.709998], rtol=1e-5)
    assert opt.get_slot_names() == ["accum", "accum_update"]
