"""TF1 has no eager mode: ops without tensor inputs are graph nodes even outside
`with graph.as_default():`, random ones draw anew at every run, and dropout masks and sampled
candidates change at every step even under a graph seed. A seeded op draws a reproducible
sequence, one value of it per run, which a new session starts again; the graph seed is the
graph's own."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk
import opsdk.v1 as tf


def test_input_free_ops_are_nodes_of_the_default_graph():
    tf.reset_default_graph()
    made = [tf.zeros([2]), tf.ones([2, 1]), tf.fill([2], 7.0), tf.random_uniform([3]),
            tf.random_normal([3]), tf.truncated_normal([3])]
    assert all(isinstance(t, opsdk.Tensor) for t in made)
    with tf.Session() as sess:
        assert list(made[0].eval()) == [0, 0] and list(sess.run(made[2])) == [7, 7]
        first, second = sess.run(made[3]), sess.run(made[3])
        assert not np.array_equal(first, second)  # drawn at every run, as in TF


def test_variables_are_initialised_anew_by_their_random_initialiser():
    tf.reset_default_graph()
    v = tf.Variable(tf.random_normal([4]))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(v)
        sess.run(tf.global_variables_initializer())
        assert not np.array_equal(first, sess.run(v))


def test_dropout_masks_change_at_every_step_under_a_graph_seed():
    tf.reset_default_graph()
    tf.set_random_seed(1)
    x = tf.ones([8, 16])
    masks = [tf.nn.dropout(x, 0.5), tf.nn.dropout(x, keep_prob=0.5, seed=3),
             tf.layers.dropout(x, rate=0.5, training=tf.constant(True))]
    with tf.Session() as sess:
        for mask in masks:
            a, b = sess.run(mask), sess.run(mask)
            assert set(np.unique(a)) <= {0.0, 2.0} and not np.array_equal(a, b)


def test_sampled_candidates_change_at_every_step():
    tf.reset_default_graph()
    tf.set_random_seed(2)
    weights = tf.constant(np.ones((50, 4), np.float32))
    loss = tf.nn.nce_loss(weights=weights, biases=tf.zeros([50]),
                          labels=tf.constant(np.zeros((3, 1), np.int64)),
                          inputs=tf.constant(np.random.rand(3, 4).astype(np.float32)),
                          num_sampled=5, num_classes=50)
    with tf.Session() as sess:
        values = {tuple(np.round(sess.run(loss), 5)) for _ in range(5)}
    assert len(values) > 1


def test_integer_random_uniform_draws_every_value_of_the_range():
    import pytest
    from opsdk.registry.errors import OpsdkError
    tf.reset_default_graph()
    ints = tf.random_uniform([20000], -3, 4, dtype=tf.int32)
    fed = tf.placeholder(tf.int32, [None])
    shaped = tf.random_uniform(tf.shape(fed), minval=0, maxval=tf.constant(2, tf.int64),
                               dtype=tf.int64, seed=5)
    with tf.Session() as sess:
        drawn = sess.run(ints)
        assert drawn.dtype == np.int32 and drawn.min() == -3 and drawn.max() == 3
        counts = np.bincount(drawn + 3)
        assert counts.min() > 20000 / 7 * 0.9  # uniform: every value about as often
        twice = [sess.run(shaped, {fed: np.zeros(50, np.int32)}) for _ in range(2)]
    with tf.Session() as sess:  # seeded: a new session draws the same sequence again
        again = [sess.run(shaped, {fed: np.zeros(50, np.int32)}) for _ in range(2)]
    assert twice[0].dtype == np.int64 and twice[0].shape == (50,)
    assert set(twice[0].tolist()) == {0, 1} and not np.array_equal(*twice)
    assert all(np.array_equal(a, b) for a, b in zip(twice, again))
    with pytest.raises(OpsdkError, match=r"an integer dtype \(int32\) needs maxval"):
        tf.random_uniform([2], dtype=tf.int32)
    with pytest.raises(OpsdkError, match=r"minval \(5\) must be below maxval \(5\)"):
        tf.random_uniform([2], 5, 5, dtype=tf.int32)
    with pytest.raises(OpsdkError, match="argument 'maxval' must be an int for dtype int32"):
        tf.random_uniform([2], 0, 2.5, dtype=tf.int32)


def test_a_seeded_op_draws_the_next_values_of_its_sequence_at_every_run():
    tf.reset_default_graph()
    tf.set_random_seed(11)
    ops = [tf.random_normal([4]), tf.random_uniform([4]), tf.truncated_normal([4]),
           tf.random_normal([4], seed=5), tf.random_uniform(tf.shape(tf.zeros([3])), seed=6),
           tf.nn.dropout(tf.ones([4, 8]), 0.5, seed=7)]
    with tf.Session() as sess:
        first = [[sess.run(op) for _ in range(3)] for op in ops]
    with tf.Session() as sess:
        second = [[sess.run(op) for _ in range(3)] for op in ops]
    for runs, again in zip(first, second):
        assert not np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[1], runs[2])
        assert all(np.array_equal(a, b) for a, b in zip(runs, again))
    # the first draw is what the seed alone gives: a seeded initialiser keeps its values
    graph = opsdk.Graph()
    with graph.as_default():
        fixed = opsdk.ops.random_normal(shape=[4], seed=ops[3].op.attrs["seed"])
    with opsdk.Session(graph) as sess:
        np.testing.assert_array_equal(sess.run(fixed), first[3][0])
        np.testing.assert_array_equal(sess.run(fixed), first[3][0])  # no sequence: the same


def test_the_graph_seed_belongs_to_its_graph():
    tf.reset_default_graph()
    tf.set_random_seed(3)
    seeded = tf.random_normal([2])
    with tf.Graph().as_default():
        unseeded = tf.random_normal([2])  # a new graph has no seed until one is set, as in TF
    tf.reset_default_graph()
    fresh = tf.random_normal([2])
    assert seeded.op.attrs["seed"] != 0
    assert unseeded.op.attrs["seed"] == 0 and fresh.op.attrs["seed"] == 0


def test_gamma_and_poisson_draws_have_tensorflows_shapes_dtypes_and_moments():
    # the summary TensorFlow 2.21's compat.v1 printed for the same script (its draws differ)
    tf.reset_default_graph()
    tf.set_random_seed(5)
    a = tf.random_gamma([20000], [0.5, 2.0, 7.0], beta=[1.0, 4.0, 0.5])
    b = tf.random_gamma([3, 2], 2.0, dtype=tf.float64)
    c = tf.random_poisson([0.5, 4.0], [20000])
    d = tf.random_poisson(3.0, [5], dtype=tf.int64)
    e = tf.random.gamma([4], tf.constant([[1.0], [3.0]]))
    with tf.Session() as sess:
        ra, rb, rc, rd, re = sess.run([a, b, c, d, e])
        again = sess.run(a)
    assert (ra.shape, ra.dtype, rb.shape, rb.dtype) == ((20000, 3), np.float32, (3, 2), np.float64)
    np.testing.assert_allclose(ra.mean(0), [0.5, 0.5, 14.0], rtol=0.05)
    np.testing.assert_allclose(ra.var(0), [0.5, 0.125, 28.0], rtol=0.1)
    assert rc.shape == (20000, 2) and rc.dtype == np.float32 and (rc == np.round(rc)).all()
    np.testing.assert_allclose(rc.mean(0), [0.5, 4.0], rtol=0.05)
    assert (rd.shape, rd.dtype, re.shape) == ((5,), np.int64, (4, 2, 1))
    assert not np.array_equal(again, ra)  # a seeded sequence: the next values
    with pytest.raises(tf.errors.InvalidArgumentError, match="alpha and beta must be > 0"):
        with tf.Session() as sess:
            sess.run(tf.random_gamma([2], [1.0, -1.0]))
    alpha = tf.constant(2.0)
    with pytest.raises(Exception, match="no gradient for op 'random_gamma'"):
        tf.gradients(tf.reduce_sum(tf.random_gamma([2], alpha)), [alpha])
