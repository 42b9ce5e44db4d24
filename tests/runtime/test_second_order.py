"""Gradients of gradients (opsdk/runtime/autodiff/second_order.py): per builtin op, the
gradient of a penalty on its first gradient against central differences of that penalty, and a
gradient-penalty training step (WGAN-GP's) in the v1 front end."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk
from opsdk import ops
from opsdk.registry.errors import OpsdkError

from finite_differences import numeric_grad

rng = np.random.default_rng(11)


def _away_from(values, points, gap=0.2):
    """Values moved off the kinks at `points` (relu's 0, maximum's ties)."""
    for p in points:
        values = np.where(np.abs(values - p) < gap, values + 2 * gap, values)
    return values


# name -> (input shapes, the forward as a function of the placeholders, positive inputs)
CASES = {
    "add": ([(2, 3), (3,)], lambda x, y: x + y, False),
    "sub": ([(2, 3), (2, 1)], lambda x, y: x - y, False),
    "mul": ([(2, 3), (3,)], lambda x, y: x * y, False),
    "div": ([(2, 3), (3,)], lambda x, y: x / y, True),
    "pow": ([(2, 3), (3,)], lambda x, y: ops.pow(x, y), True),
    "matmul": ([(2, 3), (3, 4)], lambda x, y: ops.matmul(x, y), False),
    "bias_add": ([(2, 3), (3,)], lambda x, b: ops.bias_add(x, b), False),
    "maximum": ([(2, 3), (3,)], lambda x, y: ops.maximum(x, y), False),
    "minimum": ([(2, 3), (2, 3)], lambda x, y: ops.minimum(x, y), False),
    "relu": ([(2, 3)], lambda x: ops.relu(x), False),
    "abs": ([(2, 3)], lambda x: ops.abs(x), False),
    "neg": ([(2, 3)], lambda x: -x, False),
    "sigmoid": ([(2, 3)], lambda x: ops.sigmoid(x), False),
    "tanh": ([(2, 3)], lambda x: ops.tanh(x), False),
    "exp": ([(2, 3)], lambda x: ops.exp(x), False),
    "sqrt": ([(2, 3)], lambda x: ops.sqrt(x), True),
    "square": ([(2, 3)], lambda x: ops.square(x), False),
    "log": ([(2, 3)], lambda x: ops.log(x), True),
    "softmax": ([(2, 4)], lambda x: ops.softmax(x, axis=-1), False),
    "reduce_sum": ([(2, 3, 2)], lambda x: ops.reduce_sum(x, axes=[1]), False),
    "reduce_mean": ([(2, 3)], lambda x: ops.reduce_mean(x, axes=[0], keepdims=True), False),
    "reshape": ([(2, 3)], lambda x: ops.reshape(x, shape=[3, 2]), False),
    "transpose": ([(2, 3, 4)], lambda x: ops.transpose(x, perm=[2, 0, 1]), False),
    "slice": ([(4, 3)], lambda x: ops.slice(x, begin=[1, 0], size=[2, -1]), False),
    "conv2d": ([(2, 5, 5, 2), (3, 3, 2, 3)], lambda x, w: ops.conv2d(x, w), False),
    "conv2d_strided": ([(1, 6, 7, 2), (2, 3, 2, 2)],
                       lambda x, w: ops.conv2d(x, w, stride_h=2, stride_w=2, same=0), False),
    "avg_pool": ([(1, 4, 4, 2)], lambda x: ops.avg_pool(x, ksize_h=2, ksize_w=2, stride_h=2,
                                                        stride_w=2, same=0), False),
    "stack": ([(2, 3), (2, 3)], lambda a, b: ops.stack([a, b], axis=1), False),
    "concat": ([(2, 3), (2, 1)], lambda a, b: ops.concat([a, b], axis=1), False),
    "where": ([(2, 3), (3,)], lambda a, b: ops.where(
        opsdk.constant(np.array([[True, False, True], [False, False, True]])), a, b), False),
    "log_softmax": ([(2, 4)], lambda x: ops.log_softmax(x, axis=-1), False),
    "identity": ([(2, 3)], lambda x: ops.identity(x), False),
    "dropout": ([(2, 3)], lambda x: ops.dropout(x, opsdk.constant(np.float64(0.7)), opsdk.constant(
        np.array([[0.1, 0.9, 0.5], [0.8, 0.2, 0.69]]))), False),  # fixed noise: a fixed mask
    "split": ([(2, 3)], lambda x: ops.concat([p * float(k + 1) for k, p in enumerate(
        ops.split(x, axis=1, sizes=[1, 2], N=2))], axis=1), False),
    "gather": ([(5, 2)], lambda x: ops.gather(x, opsdk.constant(np.array([3, 0, 3], np.int32))),
               False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_gradient_of_a_gradient_equals_finite_differences(name):
    shapes, forward, positive = CASES[name]
    g = opsdk.Graph()
    with g.as_default():
        xs = [opsdk.placeholder("float64", list(s), name=f"in{k}") for k, s in enumerate(shapes)]
        f = forward(*xs)
        r = opsdk.constant(rng.uniform(0.5, 1.5, size=f.shape))
        loss = ops.reduce_sum(r * f + f * f)  # the first gradient is not linear in f
        firsts = opsdk.gradients(loss, xs)
        qs = [opsdk.constant(rng.uniform(-1, 1, size=s)) for s in shapes]
        penalty = sum(ops.reduce_sum(q * d) for q, d in zip(qs, firsts))
        seconds = opsdk.gradients(penalty, xs)
    feeds = {}
    for x, s in zip(xs, shapes):
        v = rng.uniform(0.5, 2.0, size=s) if positive else rng.uniform(-1.5, 1.5, size=s)
        feeds[x] = _away_from(v, [0.0])
    if name in ("maximum", "minimum"):  # no ties
        feeds[xs[1]] = feeds[xs[1]] + 0.05
    with opsdk.Session(g) as sess:
        got = sess.run([s for s in seconds if s is not None], feeds)
        for x, s, value in zip(xs, seconds, got):
            want = numeric_grad(sess, penalty, x, feeds)
            np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {x.name}")
        for x, s in zip(xs, seconds):
            if s is None:  # none flows: the penalty does not move with x
                np.testing.assert_allclose(numeric_grad(sess, penalty, x, feeds), 0, atol=1e-6)


def test_a_gradient_op_without_a_second_order_rule_is_named():
    g = opsdk.Graph()
    with g.as_default():
        x = opsdk.placeholder("float64", [1, 4, 4, 1])
        pooled = ops.max_pool(x, ksize_h=2, ksize_w=2, stride_h=2, stride_w=2)
        first = opsdk.gradients(ops.reduce_sum(pooled * pooled), [x])[0]
        with pytest.raises(OpsdkError, match="no gradient for op 'max_pool_grad'"):
            opsdk.gradients(ops.reduce_sum(first * first), [x])


def test_a_gradient_penalty_trains_in_the_v1_front_end():
    """WGAN-GP's penalty: (|d critic / d x| - 1)^2 on a two-layer critic, minimised by Adam;
    the norm of the critic's input gradient moves to 1 (over eight seeds the penalty fell to
    1-5% of where it started)."""
    import opsdk.v1 as tf
    tf.reset_default_graph()
    tf.set_random_seed(1)  # the critic's initial weights (unseeded, the final penalty varied)
    x = tf.placeholder(tf.float32, [None, 4])
    h = tf.layers.dense(x, 16, activation=tf.nn.relu)
    critic = tf.layers.dense(h, 1)
    grad = tf.gradients(critic, [x])[0]
    norm = tf.sqrt(tf.reduce_sum(tf.square(grad), axis=1) + 1e-12)
    penalty = tf.reduce_mean(tf.square(norm - 1.0))
    train = tf.train.AdamOptimizer(0.01).minimize(penalty)
    batch = np.random.default_rng(3).normal(size=(64, 4)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(penalty, {x: batch})
        for _ in range(150):
            sess.run(train, {x: batch})
        after = sess.run(penalty, {x: batch})
    assert after < 0.1 * before and before > 0.05  # 0.279 -> 0.0075 with this seed
