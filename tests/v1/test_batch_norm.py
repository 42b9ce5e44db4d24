"""Batch normalization and moving averages as TF1 has them: tf.layers.batch_normalization and
tf.contrib.layers.batch_norm (training a bool or a bool tensor, moving averages updated by the
ops in UPDATE_OPS or in place), tf.nn.batch_normalization and
tf.train.ExponentialMovingAverage, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


X = np.random.RandomState(0).randn(8, 3).astype(np.float32) * 2 + 1


def _normalized(x, mean, var, eps=1e-3):
    return (x - mean) / np.sqrt(var + eps)


def _vars(prefix="batch_normalization"):
    return {v.op.name[len(prefix) + 1:]: v for v in tf.global_variables()
            if v.op.name.startswith(prefix)}


def test_training_uses_the_batch_moments_and_update_ops_move_the_averages():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.layers.batch_normalization(x, momentum=0.9, training=True)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2 and sorted(_vars()) == ["beta", "gamma", "moving_mean",
                                                     "moving_variance"]
    assert sorted(v.name for v in tf.trainable_variables()) == ["batch_normalization/beta:0",
                                                                "batch_normalization/gamma:0"]
    mean, var = X.mean(0), X.var(0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(y, {x: X}), _normalized(X, mean, var), atol=1e-5)
        assert not sess.run(_vars()["moving_mean"]).any()  # the output alone updates nothing
        sess.run(updates, {x: X})
        np.testing.assert_allclose(sess.run(_vars()["moving_mean"]), 0.1 * mean, rtol=1e-5)
        np.testing.assert_allclose(sess.run(_vars()["moving_variance"]), 0.9 + 0.1 * var,
                                   rtol=1e-5)


def test_a_training_tensor_picks_the_moments_at_run_time():
    x, training = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.bool)
    y = tf.layers.batch_normalization(x, momentum=0.5, training=training, epsilon=0.01)
    loss = tf.reduce_sum(y * y)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        step = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    mean, var = X.mean(0), X.var(0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(step, {x: X, training: True})
        moving = sess.run([_vars()["moving_mean"], _vars()["moving_variance"]])
        np.testing.assert_allclose(moving[0], 0.5 * mean, rtol=1e-5)
        np.testing.assert_allclose(moving[1], 0.5 + 0.5 * var, rtol=1e-5)
        gamma, beta = sess.run([_vars()["gamma"], _vars()["beta"]])
        assert not np.allclose(gamma, 1.0)
        # not training: the moving averages normalize, and the update ops keep them
        got = sess.run(y, {x: X, training: False})
        np.testing.assert_allclose(got, _normalized(X, moving[0], moving[1], 0.01) * gamma + beta,
                                   rtol=1e-4, atol=1e-5)
        sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS), {x: X, training: False})
        np.testing.assert_allclose(sess.run(_vars()["moving_mean"]), moving[0])


def test_inference_with_a_python_false_makes_no_update_ops():
    y = tf.layers.batch_normalization(tf.constant(X), training=False, name="bn")
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(y), X / np.sqrt(1 + 1e-3), rtol=1e-6)


def test_four_d_inputs_are_fused_as_in_tf_so_the_moving_variance_is_unbiased():
    images = np.random.RandomState(1).randn(2, 3, 3, 4).astype(np.float32)
    tf.layers.batch_normalization(tf.constant(images), momentum=0.0, training=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
        np.testing.assert_allclose(sess.run(_vars()["moving_variance"]),
                                   images.var((0, 1, 2), ddof=1), rtol=1e-5)


def test_contrib_batch_norm_in_fully_connected_under_arg_scope_updates_in_place():
    x, training = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.bool)
    params = {"is_training": training, "decay": 0.9, "updates_collections": None}
    with tf.contrib.framework.arg_scope([tf.contrib.layers.fully_connected],
                                        normalizer_fn=tf.contrib.layers.batch_norm,
                                        normalizer_params=params, activation_fn=None):
        y = tf.contrib.layers.fully_connected(x, 2, scope="h1",
                                              weights_initializer=tf.ones_initializer())
    made = sorted(v.op.name for v in tf.global_variables())
    assert made == ["h1/BatchNorm/beta", "h1/BatchNorm/moving_mean",
                    "h1/BatchNorm/moving_variance", "h1/weights"]
    h = X.sum(1, keepdims=True) * np.ones([1, 2], np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(y, {x: X, training: True}),
                                   _normalized(h, h.mean(0), h.var(0)), atol=1e-4)
        moving = sess.run(_vars("h1/BatchNorm")["moving_mean"])  # 2-d: fused, as TF's
        np.testing.assert_allclose(moving, 0.1 * h.mean(0), rtol=1e-5)
        sess.run(y, {x: X, training: False})
        np.testing.assert_allclose(sess.run(_vars("h1/BatchNorm")["moving_mean"]), moving)


def test_nn_batch_normalization_and_the_global_normalization_form():
    mean, var = X.mean(0), X.var(0)
    scale, offset = np.float32([1, 2, 3]), np.float32([0, 1, -1])
    with tf.Session() as sess:
        got = sess.run(tf.nn.batch_normalization(X, mean, var, offset, scale, 1e-3))
        plain = sess.run(tf.nn.batch_norm_with_global_normalization(
            X, mean, var, offset, scale, 1e-3, False))
    np.testing.assert_allclose(got, _normalized(X, mean, var) * scale + offset, atol=1e-5)
    np.testing.assert_allclose(plain, _normalized(X, mean, var) + offset, atol=1e-5)


def test_bad_arguments_are_refused_naming_the_function():
    with pytest.raises(OpsdkError, match=r"layers.batch_normalization: the size of axis 1"):
        tf.layers.batch_normalization(tf.placeholder(tf.float32, [2, None]))
    with pytest.raises(OpsdkError, match="training must be a Python bool or a bool tensor"):
        tf.layers.batch_normalization(tf.constant(X), training=tf.constant(1.0))
    with pytest.raises(OpsdkError, match="arg_scope: 'relu' does not take arg_scope defaults"):
        with tf.contrib.framework.arg_scope([tf.nn.relu], name="x"):
            pass


def test_exponential_moving_average_of_a_variable_and_a_tensor():
    w = tf.Variable(1.0, name="w")
    doubled = w * 2.0
    ema = tf.train.ExponentialMovingAverage(0.9)
    update = ema.apply([w, doubled])
    assert ema.average(w).name == "w/ExponentialMovingAverage:0" and ema.average(tf.constant(1.0)) is None
    assert ema.average_name(w) == "w/ExponentialMovingAverage"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(ema.average(w)) == 1.0 and sess.run(ema.average(doubled)) == 0.0
        sess.run(w.assign(3.0))
        sess.run(update)
        np.testing.assert_allclose(sess.run([ema.average(w), ema.average(doubled)]), [1.2, 0.6],
                                   rtol=1e-6)
    with pytest.raises(OpsdkError, match="'w' is averaged already"):
        ema.apply([w])


def test_num_updates_makes_the_early_decay_smaller():
    w, step = tf.Variable(3.0), tf.Variable(0, trainable=False)
    ema = tf.train.ExponentialMovingAverage(0.9, num_updates=step)
    update = ema.apply([w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(w.assign(5.0))
        sess.run(update)  # decay min(0.9, 1 / 10): the shadow moves 90% of the way
        np.testing.assert_allclose(sess.run(ema.average(w)), 3.0 + 0.9 * 2.0, rtol=1e-6)


def _tensorflow_v1():
    """TensorFlow's compat.v1, whose tf.layers come from tf_keras in TF 2.16+."""
    pytest.importorskip("tf_keras", reason="compat.v1's tf.layers need tf_keras "
                        "(pip install opsdk[tf])")
    import os
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    tf1 = pytest.importorskip("tensorflow").compat.v1
    tf1.disable_eager_execution()
    return tf1


def _two_steps(tf_module, values, shape):
    """A training step, then an inference run, of batch_normalization with a training tensor:
    the outputs and the moving averages after each, under `tf_module`."""
    graph = tf_module.Graph()
    with graph.as_default():
        x, training = tf_module.placeholder(tf_module.float32, shape), tf_module.placeholder(
            tf_module.bool)
        y = tf_module.layers.batch_normalization(
            x, momentum=0.8, training=training,
            gamma_initializer=tf_module.constant_initializer(1.5),
            beta_initializer=tf_module.constant_initializer(-0.5))
        loss = tf_module.reduce_sum(y * y * tf_module.constant(values))
        with tf_module.control_dependencies(tf_module.get_collection(
                tf_module.GraphKeys.UPDATE_OPS)):
            step = tf_module.train.GradientDescentOptimizer(0.01).minimize(loss)
        names = sorted(v.name.split(":")[0] for v in tf_module.global_variables())
        ordered = sorted(tf_module.global_variables(), key=lambda v: v.name)
        with tf_module.Session(graph=graph) as sess:
            sess.run(tf_module.global_variables_initializer())
            first = sess.run([y, step], {x: values, training: True})[0]
            after = sess.run(ordered)
            second = sess.run(y, {x: values * 0.5, training: False})
    return names, first, after, second


@pytest.mark.parametrize("shape", [[6, 3], [2, 3, 3, 4]], ids=["2d", "4d-fused"])
def test_batch_normalization_agrees_with_tensorflow(shape):
    tf1 = _tensorflow_v1()
    values = np.random.RandomState(2).randn(*shape).astype(np.float32) * 3 + 1
    theirs = _two_steps(tf1, values, [None] + shape[1:])
    ours = _two_steps(tf, values, [None] + shape[1:])
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-4)
    for mine, their in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(mine, their, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-4, atol=1e-4)


def test_variables_made_under_control_dependencies_initialise_without_the_step():
    # TF1's idiom: the optimizer's slots, an average's shadows and get_variable's variables are
    # made inside `with tf.control_dependencies(...)`, and initialised without running it.
    x, training = tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.bool)
    loss = tf.reduce_sum(tf.layers.batch_normalization(x, training=training) ** 2)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        step = tf.train.AdamOptimizer(0.1).minimize(loss)
        late = tf.get_variable("late", [2], initializer=tf.random_normal_initializer())
        plain = tf.Variable(lambda: tf.ones([2]) * 2.0)
    with tf.control_dependencies([step]):
        averaged = tf.train.ExponentialMovingAverage(0.5).apply(tf.trainable_variables())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())  # no feed: nothing waits for the step
        assert sess.run(late).shape == (2,) and sess.run(plain).tolist() == [2, 2]
        sess.run(averaged, {x: X, training: True})
