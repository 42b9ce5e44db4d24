"""tf.train.FtrlOptimizer (builtin op apply_ftrl), ProximalGradientDescentOptimizer and
ProximalAdagradOptimizer (apply_proximal_gradient_descent, apply_proximal_adagrad): three steps
of a least squares fit under each setting give the weights and slots TensorFlow 2.21's
compat.v1 gave for the same program (printed there, to float32's last digits); bad settings are
refused as TF refuses them."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

# (settings, weights, accum slot, linear slot) after 3 steps, from TensorFlow
CASES = [
    ({'learning_rate': 0.3},
     [-0.08387613, -0.5715217, 0.5646188, 1.319736],
     [28.58756, 3.595787, 1.78996, 211.2061],
     [1.494878, 3.612504, -2.518, -63.9321]),
    ({'learning_rate': 0.2, 'l1_regularization_strength': 0.05, 'l2_regularization_strength': 0.1},
     [0.06165295, -0.6353512, 0.4969794, 1.501798],
     [34.15686, 2.859404, 2.473064, 239.5709],
     [-1.863949, 5.548892, -4.05714, -116.5751]),
    ({'learning_rate': 0.1, 'learning_rate_power': -0.7, 'initial_accumulator_value': 0.5, 'l1_regularization_strength': 0.01},
     [0.3498583, -0.6794075, 0.321993, 1.870494],
     [45.63171, 3.632002, 6.299822, 311.3175],
     [-50.75332, 16.7684, -11.68821, -1040.406]),
    ({'learning_rate': 0.2, 'l2_shrinkage_regularization_strength': 0.3, 'l2_regularization_strength': 0.05},
     [0.0482794, -0.5724242, 0.4682907, 1.456489],
     [32.87163, 3.482393, 2.832213, 237.0937],
     [-1.388848, 5.398295, -3.987304, -112.2796]),
    ({'learning_rate': 0.2, 'learning_rate_power': 0.0, 'l1_regularization_strength': 0.02},
     [-0.6486291, -1.394918, 0.05508766, -1.038805],
     [55.35902, 128.1572, 52.21627, 825.7711],
     [3.263146, 6.994591, -0.2954383, 5.214025]),
    ({'learning_rate': 0.2, 'beta': 0.5, 'l2_regularization_strength': 0.1},
     [0.06661968, -0.5772519, 0.4575755, 1.435276],
     [30.99791, 4.370514, 5.352766, 227.7876],
     [-2.034424, 7.592529, -6.528697, -112.1857]),
]


def _fit(optimizer):
    """(w, its optimizer's train op) of the least squares fit of every case."""
    w = tf.Variable(np.array([[0.5, -1.0], [0.25, 2.0]], np.float32), name="w")
    x = tf.constant(np.array([[1.0, 2.0], [-1.5, 0.5], [0.3, -0.2]], np.float32))
    loss = tf.reduce_sum(tf.square(tf.matmul(x, w) - 1.0))
    return w, optimizer.minimize(loss)


@pytest.mark.parametrize("settings, weights, accum, linear", CASES)
def test_three_steps_give_tensorflows_weights_and_slots(settings, weights, accum, linear):
    with tf.Graph().as_default():
        opt = tf.train.FtrlOptimizer(**settings)
        w, step = _fit(opt)
        assert [s.op.name for s in (opt.get_slot(w, "accum"), opt.get_slot(w, "linear"))] == [
            "w/Ftrl", "w/Ftrl_1"]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(3):
                s.run(step)
            np.testing.assert_allclose(s.run(w).ravel(), weights, rtol=2e-6, atol=1e-6)
            np.testing.assert_allclose(s.run(opt.get_slot(w, "accum")).ravel(), accum, rtol=2e-6)
            np.testing.assert_allclose(s.run(opt.get_slot(w, "linear")).ravel(), linear,
                                       rtol=2e-6, atol=1e-6)


def test_the_l1_dead_zone_gives_zeros():
    with tf.Graph().as_default():
        w = tf.Variable(np.array([0.3, -0.2], np.float32))
        loss = tf.reduce_sum(w * np.array([0.01, -0.01], np.float32))
        step = tf.train.FtrlOptimizer(0.5, l1_regularization_strength=1.0).minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(step)
            np.testing.assert_array_equal(s.run(w), [0.0, 0.0])


@pytest.mark.parametrize("settings, words", [
    (dict(learning_rate_power=0.5), "learning_rate_power 0.500000 needs to be negative or zero"),
    (dict(initial_accumulator_value=-1.0),
     "initial_accumulator_value -1.000000 needs to be positive or zero"),
    (dict(l1_regularization_strength=-1.0),
     "l1_regularization_strength -1.000000 needs to be positive or zero"),
    (dict(l2_shrinkage_regularization_strength=-0.1),
     "l2_shrinkage_regularization_strength -0.100000 needs to be positive or zero"),
])
def test_bad_settings_are_refused_as_tensorflow_refuses_them(settings, words):
    with pytest.raises(OpsdkError, match=words):
        tf.train.FtrlOptimizer(0.1, **settings)


PROXIMAL = [
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


@pytest.mark.parametrize("kind, settings, weights, accumulator", PROXIMAL)
def test_proximal_steps_give_tensorflows_weights(kind, settings, weights, accumulator):
    with tf.Graph().as_default():
        opt = getattr(tf.train, kind)(**settings)
        w, step = _fit(opt)
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
