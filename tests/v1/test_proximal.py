"""tf.train.ProximalGradientDescentOptimizer and ProximalAdagradOptimizer (builtin ops
apply_proximal_gradient_descent and apply_proximal_adagrad): three steps of a least squares fit
give the weights and slots TensorFlow 2.21's compat.v1 gave for the same program."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

CASES = [
    ("ProximalGradientDescentOptimizer", dict(learning_rate=0.05),
     [0.02284698, -0.7031001, 0.428583, 1.006967], []),
    ("ProximalGradientDescentOptimizer",
     dict(learning_rate=0.05, l1_regularization_strength=0.3, l2_regularization_strength=0.2),
     [0.0, -0.6480058, 0.3974556, 0.9510432], []),
    ("ProximalAdagradOptimizer", dict(learning_rate=0.2),
     [0.0895651, -0.6708407, 0.4964511, 1.566605], [37.96382, 3.095477, 1.780458, 247.3691]),
    ("ProximalAdagradOptimizer",
     dict(learning_rate=0.2, initial_accumulator_value=0.5, l1_regularization_strength=0.1,
          l2_regularization_strength=0.3),
     [0.08002926, -0.6235041, 0.4634189, 1.539725], [36.71454, 3.165344, 2.61188, 245.7663]),
]


@pytest.mark.parametrize("kind, settings, weights, accumulator", CASES)
def test_three_steps_give_tensorflows_weights(kind, settings, weights, accumulator):
    with tf.Graph().as_default():
        w = tf.Variable(np.array([[0.5, -1.0], [0.25, 2.0]], np.float32), name="w")
        x = tf.constant(np.array([[1.0, 2.0], [-1.5, 0.5], [0.3, -0.2]], np.float32))
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w) - 1.0))
        opt = getattr(tf.train, kind)(**settings)
        step = opt.minimize(loss)
        assert [v.op.name for v in tf.global_variables()] == (
            ["w", "w/ProximalAdagrad"] if accumulator else ["w"])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(3):
                s.run(step)
            np.testing.assert_allclose(s.run(w).ravel(), weights, rtol=2e-6, atol=1e-7)
            if accumulator:
                np.testing.assert_allclose(s.run(opt.get_slot(w, "accumulator")).ravel(),
                                           accumulator, rtol=2e-6)


def test_a_proximal_adagrad_needs_a_positive_accumulator():
    with pytest.raises(OpsdkError, match="initial_accumulator_value must be positive"):
        tf.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0)
