"""tf.RegisterGradient and Graph.gradient_override_map (opsdk/v1/gradient_overrides.py over
opsdk's register_gradient): the values TensorFlow 2.21's compat.v1 gave on the same script, and
the mistakes named."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk
import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.autodiff.gradients import register_gradient
from opsdk.v1.gradient_overrides import op_type


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_overridden_gradients_are_tensorflows():
    @tf.RegisterGradient("test_v1_flip")
    def _flip(op, grad):
        return [tf.negative(grad) * 0.5]

    @tf.RegisterGradient("test_v1_clip01")
    def _clip(op, grad):
        x = op.inputs[0]
        assert op.get_attr("T") == tf.float32
        return grad * tf.cast(tf.logical_and(x >= 0.0, x <= 1.0), grad.dtype)

    g = tf.get_default_graph()
    x = tf.placeholder(tf.float32, [4])
    with g.gradient_override_map({"Identity": "test_v1_flip"}):
        a = tf.identity(x * 3.0)
    with g.gradient_override_map({"Round": "Identity", "Sign": "Identity"}):
        b = tf.round(x * 2.0)  # the straight-through estimator
        c = tf.sign(x)
    with g.gradient_override_map({"Sigmoid": "test_v1_clip01"}):
        d = tf.sigmoid(x)
    plain = tf.round(x)  # made outside: its own gradient (none)
    grads = [tf.gradients(tf.reduce_sum(o * o), x)[0] for o in (a, b, c, d)]
    with tf.Session() as sess:
        got = sess.run(grads, {x: [0.3, -1.2, 0.8, 2.0]})
    np.testing.assert_allclose(got[0], [-2.7, 10.8, -7.2, -18.0], rtol=1e-6)
    np.testing.assert_allclose(got[1], [4.0, -8.0, 8.0, 16.0], rtol=1e-6)
    np.testing.assert_allclose(got[2], [2.0, -2.0, 2.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(got[3], [2 * 0.574442, 0.0, 2 * 0.689974, 0.0], rtol=1e-5)
    assert plain.op.gradient_override is None and b.op.gradient_override == "Identity"


def test_tensorflows_type_names_become_opsdks():
    assert [op_type(n) for n in ("Identity", "MatMul", "BiasAdd", "Sign", "AddV2", "relu")] == \
        ["identity", "matmul", "bias_add", "sign", "add", "relu"]


def test_mistakes_are_named():
    x = tf.placeholder(tf.float32, [2])
    g = tf.get_default_graph()
    with g.gradient_override_map({"Identity": "test_v1_nobody"}):
        y = tf.identity(x)
    with pytest.raises(OpsdkError, match="overridden by 'test_v1_nobody', but no gradient is "
                                         "registered under that name"):
        tf.gradients(y, x)
    tf.RegisterGradient("test_v1_twice")(lambda op, grad: grad)
    with pytest.raises(OpsdkError, match="a gradient named 'test_v1_twice' is registered"):
        tf.RegisterGradient("test_v1_twice")(lambda op, grad: grad)
    tf.RegisterGradient("test_v1_two")(lambda op, grad: [grad, grad])
    with g.gradient_override_map({"Identity": "test_v1_two"}):
        z = tf.identity(x)
    with pytest.raises(OpsdkError, match="returned 2 gradient\\(s\\) for its 1 input"):
        tf.gradients(z, x)


def test_the_runtime_takes_opsdks_names_and_inner_maps_add_to_outer():
    register_gradient("test_rt_twice")(lambda op, grad: grad * 2.0)
    register_gradient("test_rt_zero")(lambda op, grad: grad * 0.0)
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [2], name="x")
        with g.gradient_override_map({"identity": "test_rt_twice", "neg": "test_rt_zero"}):
            with g.gradient_override_map({"neg": "test_rt_twice"}):
                y = opsdk.ops.neg(opsdk.ops.identity(x))
        (gx,) = opsdk.gradients(opsdk.ops.reduce_sum(y), [x])
    with opsdk.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(gx, {x: [1.0, 5.0]}), [4.0, 4.0])
