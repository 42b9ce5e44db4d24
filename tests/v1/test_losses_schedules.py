"""tf.losses' weighting and reductions, the learning-rate schedules and the GRU cell, against NumPy
written from TensorFlow's documented formulas (and against TensorFlow itself where installed)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

rng = np.random.default_rng(0)
LABELS = rng.standard_normal((6, 3)).astype(np.float32)
PRED = rng.standard_normal((6, 3)).astype(np.float32)
WEIGHTS = np.array([1.0, 0.0, 2.0, 0.5, 0.0, 1.0], np.float32)[:, None]


def run(build):
    tf.reset_default_graph()
    out = build(tf)
    with tf.Session() as sess:
        return sess.run(out)


def expected(per, weights, reduction):
    w = np.broadcast_to(weights, per.shape)
    weighted = per * w
    return {"none": weighted, "weighted_sum": weighted.sum(),
            "weighted_mean": weighted.sum() / w.sum(),
            "weighted_sum_over_batch_size": weighted.mean(),
            "weighted_sum_by_nonzero_weights": weighted.sum() / np.count_nonzero(w)}[reduction]


@pytest.mark.parametrize("reduction", ["none", "weighted_sum", "weighted_mean",
                                       "weighted_sum_over_batch_size",
                                       "weighted_sum_by_nonzero_weights"])
def test_weighted_reductions_follow_tensorflow(reduction):
    got = run(lambda t: t.losses.mean_squared_error(LABELS, PRED, weights=WEIGHTS, reduction=reduction))
    np.testing.assert_allclose(got, expected((PRED - LABELS) ** 2, WEIGHTS, reduction), rtol=1e-5)


def test_zero_weights_mask_examples_out_of_the_default_mean():
    got = run(lambda t: t.losses.absolute_difference(LABELS, PRED, weights=WEIGHTS))
    kept = WEIGHTS[:, 0] != 0
    manual = (np.abs(PRED - LABELS) * WEIGHTS)[kept].sum() / (kept.sum() * 3)
    assert got == pytest.approx(manual, rel=1e-5)
    assert run(lambda t: t.losses.absolute_difference(LABELS, PRED, weights=0.0)) == 0.0


def test_huber_hinge_and_sigmoid_label_smoothing():
    err = np.abs(PRED - LABELS)
    quad = np.minimum(err, 0.5)
    huber = run(lambda t: t.losses.huber_loss(LABELS, PRED, delta=0.5))
    assert huber == pytest.approx(np.mean(0.5 * quad ** 2 + 0.5 * (err - quad)), rel=1e-5)
    bits = (LABELS > 0).astype(np.float32)
    hinge = run(lambda t: t.losses.hinge_loss(bits, PRED))
    assert hinge == pytest.approx(np.mean(np.maximum(0, 1 - (2 * bits - 1) * PRED)), rel=1e-5)
    smooth = bits * 0.8 + 0.5 * 0.2
    sig = run(lambda t: t.losses.sigmoid_cross_entropy(bits, PRED, label_smoothing=0.2))
    manual = np.maximum(PRED, 0) - PRED * smooth + np.log1p(np.exp(-np.abs(PRED)))
    assert sig == pytest.approx(manual.mean(), rel=1e-5)


def test_collections_and_errors():
    tf.reset_default_graph()
    tf.losses.mean_squared_error(LABELS, PRED)
    tf.losses.mean_squared_error(LABELS, PRED, loss_collection=None)
    assert len(tf.losses.get_losses()) == 1
    with pytest.raises(OpsdkError, match="unknown reduction 'mean'"):
        tf.losses.mean_squared_error(LABELS, PRED, reduction="mean")
    with pytest.raises(OpsdkError, match="tf.contrib.slim is not provided"):
        tf.contrib.slim
    assert not hasattr(tf.contrib, "slim") and not hasattr(tf.contrib.rnn, "NASCell")


def test_the_regularization_loss_sums_the_layers_regularizers():
    """tf.losses.get_regularization_loss: 0.0 with none, else the sum of the collection's
    (an L2 kernel regularizer of a dense layer and a bias's), per scope too."""
    tf.reset_default_graph()
    with tf.Session() as sess:
        assert sess.run(tf.losses.get_regularization_loss()) == 0.0
    x = tf.placeholder(tf.float32, [None, 4])
    with tf.variable_scope("a"):
        tf.layers.dense(x, 3, kernel_initializer=tf.constant_initializer(0.5),
                        kernel_regularizer=tf.nn.l2_loss)
    with tf.variable_scope("b"):
        tf.layers.dense(x, 2, kernel_initializer=tf.constant_initializer(1.0),
                        kernel_regularizer=lambda w: 2.0 * tf.reduce_sum(w))
    total, only_b = tf.losses.get_regularization_loss(), tf.losses.get_regularization_loss("b")
    assert total.op.name.startswith("total_regularization_loss")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_total, got_b = sess.run([total, only_b])
    assert got_b == pytest.approx(16.0) and got_total == pytest.approx(12 * 0.25 / 2 + 16.0)


@pytest.mark.parametrize("staircase", [False, True])
def test_exponential_decay(staircase):
    tf.reset_default_graph()
    step = tf.placeholder(tf.int64, [])
    rate = tf.train.exponential_decay(0.1, step, 10, 0.5, staircase=staircase)
    with tf.Session() as sess:
        got = [sess.run(rate, {step: s}) for s in (0, 9, 10, 25)]
    exponent = np.array([0, 9, 10, 25]) / 10
    exponent = np.floor(exponent) if staircase else exponent
    np.testing.assert_allclose(got, 0.1 * 0.5 ** exponent, rtol=1e-6)
    with pytest.raises(OpsdkError, match="decay_steps must be > 0"):
        tf.train.exponential_decay(0.1, step, 0, 0.5)


def test_gru_cell_is_tensorflows():
    """Gates' bias 1, candidate's 0, TF's variable names, and one step by the formula."""
    tf.reset_default_graph()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    h = rng.standard_normal((2, 4)).astype(np.float32)
    cell = tf.nn.rnn_cell.GRUCell(4)
    out, state = cell(tf.constant(x), tf.constant(h))
    names = sorted(v.name.split(":")[0] for v in tf.trainable_variables())
    assert names == ["gru_cell/candidate/bias", "gru_cell/candidate/kernel",
                     "gru_cell/gates/bias", "gru_cell/gates/kernel"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        gk, gb, ck, cb = sess.run(list(cell._vars))
        got = sess.run(out)
    assert np.all(gb == 1.0) and np.all(cb == 0.0)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    r, u = np.split(sig(np.concatenate([x, h], 1) @ gk + gb), 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ ck + cb)
    np.testing.assert_allclose(got, u * h + (1 - u) * c, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf])")
def test_weighted_losses_equal_tensorflows():
    import tensorflow.compat.v1 as real
    real.disable_eager_execution()
    for fn in ("mean_squared_error", "absolute_difference", "huber_loss"):
        with real.Graph().as_default():
            theirs = real.Session().run(getattr(real.losses, fn)(LABELS, PRED, weights=WEIGHTS))
        ours = run(lambda t: getattr(t.losses, fn)(LABELS, PRED, weights=WEIGHTS))
        assert ours == pytest.approx(theirs, rel=1e-5), fn


STEPS = [0, 1, 5, 10, 37, 100, 250, 1000]


def _schedules(api, step):
    """Every other schedule of tf.train, as TF1 programs call them."""
    t = api.train
    return [t.piecewise_constant(step, [10, 100], [1.0, 0.5, 0.1]),
            t.polynomial_decay(0.1, step, 100, 0.001, 2.0),
            t.polynomial_decay(0.1, step, 100, 0.001, 1.0, cycle=True),
            t.natural_exp_decay(0.1, step, 50, 0.5),
            t.natural_exp_decay(0.1, step, 50, 0.5, staircase=True),
            t.inverse_time_decay(0.1, step, 50, 0.5),
            t.inverse_time_decay(0.1, step, 50, 0.5, staircase=True),
            t.cosine_decay(0.1, step, 200, 0.1),
            t.cosine_decay_restarts(0.1, step, 20, 2.0, 0.8, 0.05),
            t.cosine_decay_restarts(0.1, step, 20, 1.0),
            t.linear_cosine_decay(0.1, step, 300, 1.5)]


def _our_schedules() -> list:
    tf.reset_default_graph()
    step = tf.placeholder(tf.int64, [])
    rates = _schedules(tf, step)
    with tf.Session() as sess:
        return [sess.run(rates, {step: s}) for s in STEPS]


def test_schedules_follow_their_formulas():
    got = np.array(_our_schedules(), np.float64)  # [step, schedule]
    s = np.array(STEPS, np.float64)
    held = np.minimum(s, 100)
    cycled = 100 * np.where(s == 0, 1, np.ceil(s / 100))
    expected = [
        np.where(s <= 10, 1.0, np.where(s <= 100, 0.5, 0.1)),
        (0.1 - 0.001) * (1 - held / 100) ** 2 + 0.001,
        (0.1 - 0.001) * (1 - s / cycled) + 0.001,
        0.1 * np.exp(-0.5 * s / 50), 0.1 * np.exp(-0.5 * np.floor(s / 50)),
        0.1 / (1 + 0.5 * s / 50), 0.1 / (1 + 0.5 * np.floor(s / 50)),
        0.1 * (0.9 * 0.5 * (1 + np.cos(np.pi * np.minimum(s, 200) / 200)) + 0.1),
    ]
    for i, want in enumerate(expected):
        np.testing.assert_allclose(got[:, i], want, rtol=2e-6, atol=1e-8, err_msg=str(i))
    # restarts every 20 steps (t_mul 1): step 25 is 5 steps into its second period
    np.testing.assert_allclose(got[STEPS.index(37), 9], 0.1 * 0.5 * (1 + np.cos(np.pi * 17 / 20)),
                               rtol=2e-6)
    assert all(r.dtype == np.float32 for r in _our_schedules()[0])


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf]): the formulas "
                           "are checked above")
def test_schedules_equal_tensorflows():
    import tensorflow.compat.v1 as real
    real.disable_eager_execution()
    with real.Graph().as_default():
        step = real.placeholder(real.int64, [])
        rates = _schedules(real, step)
        with real.Session() as sess:
            theirs = [sess.run(rates, {step: s}) for s in STEPS]
    np.testing.assert_allclose(np.array(_our_schedules()), np.array(theirs), rtol=1e-5, atol=1e-7)


def test_schedules_refuse_bad_arguments():
    tf.reset_default_graph()
    step = tf.placeholder(tf.int64, [])
    with pytest.raises(OpsdkError, match="piecewise_constant: give one value more than"):
        tf.train.piecewise_constant(step, [10], [1.0])
    with pytest.raises(OpsdkError, match="cosine_decay: decay_steps must be > 0"):
        tf.train.cosine_decay(0.1, step, 0)
