"""TF1 functions composed of builtin ops (opsdk/v1/composed.py, the activations and losses of
nn, nn.l2_normalize, nn.lrn, nn.conv1d, nn.top_k, the 1-D layers, gather_nd, boolean_mask,
one-argument where, sort and argsort, einsum, and the wrappers of the reduce_prod and cumsum ops): values as NumPy computes them (and TensorFlow, where installed), gradients through
them, gradient clipping inside a training step, and bad arguments refused naming the
function."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError

RNG = np.random.default_rng(3)
A = RNG.normal(size=(3, 4)).astype(np.float32)
B = RNG.normal(size=(3, 4)).astype(np.float32)
SPECIAL = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
BIG = np.array([[1000.0, 1000.0, -3.0], [0.0, -np.inf, 2.0]], np.float32)
SEQ = RNG.normal(size=(2, 7, 3)).astype(np.float32)
SEQ_B = RNG.normal(size=(3, 5, 3)).astype(np.float32)
IMAGES = RNG.normal(size=(2, 4, 4, 7)).astype(np.float32)
TIES = np.array([[1, 5, 2, 5, 0], [9, 8, 7, 6, 5], [3, 3, 3, 3, 3]], np.float32)
FILTER = RNG.normal(size=(3, 3, 4)).astype(np.float32)


def _conv1d(x: np.ndarray, f: np.ndarray, stride: int, same: bool) -> np.ndarray:
    """NumPy's 1-D convolution of [batch, width, in] by [k, in, out], TF's padding rules."""
    width, k = x.shape[1], f.shape[0]
    out = -(-width // stride) if same else (width - k) // stride + 1
    total = max((out - 1) * stride + k - width, 0) if same else 0
    x = np.pad(x, [(0, 0), (total // 2, total - total // 2), (0, 0)])
    return np.stack([np.einsum("bki,kio->bo", x[:, j * stride:j * stride + k], f)
                     for j in range(out)], axis=1)


def _cases(api):
    """name -> tensor, built with `api` (opsdk.v1 or TensorFlow's compat.v1)."""
    a, b = api.constant(A), api.constant(B)
    clipped, norm = api.clip_by_global_norm([a, None, b], 1.5)
    flags_x, flags_y = api.constant([True, False, True, False]), api.constant([True, True, False, False])
    return {
        "add_n": api.add_n([a, b, a]), "global_norm": api.global_norm([a, b]),
        "clip_by_norm": api.clip_by_norm(a, 1.0), "clip_by_norm_rows": api.clip_by_norm(a, 1.0, axes=[1]),
        "clipped_a": clipped[0], "clipped_b": clipped[2], "norm": norm,
        "size": api.size(a), "mask": api.sequence_mask(api.constant([1, 3, 0]), 4),
        "mask_float": api.sequence_mask(api.constant([2, 1]), dtype=api.float32),
        "eye": api.eye(3, 2), "eye_batch": api.eye(2, batch_shape=[2]),
        "is_nan": api.is_nan(api.constant(SPECIAL)), "is_inf": api.is_inf(api.constant(SPECIAL)),
        "is_finite": api.is_finite(api.constant(SPECIAL)),
        "and": api.logical_and(flags_x, flags_y), "or": api.logical_or(flags_x, flags_y),
        "not": api.logical_not(flags_x), "xor": api.logical_xor(flags_x, flags_y),
        "all": api.reduce_all(api.constant([[True, False], [True, True]]), axis=1),
        "count": api.count_nonzero(api.constant([[0.0, 1.0], [2.0, 0.0]])),
        "count_rows": api.count_nonzero(api.constant([[0, 1], [2, 3]]), axis=1, keepdims=True),
        "logsumexp": api.reduce_logsumexp(api.constant(BIG), axis=1),
        "logsumexp_all": api.reduce_logsumexp(api.constant(A)),
        "l2_normalize": api.nn.l2_normalize(a, axis=1),
        "reverse": api.reverse(a, [1]), "reverse_both": api.reverse(a, [0, 1]),
        "tile": api.tile(a, [2, 3]),
        "tile_run_time": api.tile(a, api.stack([api.size(api.constant([1, 2])), 1])),
        "pad": api.pad(a, [[1, 0], [2, 1]], constant_values=-1.0),
        "pad_reflect": api.pad(a, [[2, 1], [3, 2]], mode="REFLECT"),
        "pad_symmetric": api.pad(a, [[1, 3], [0, 4]], mode="SYMMETRIC"),
        "conv1d": api.nn.conv1d(api.constant(SEQ), api.constant(FILTER), 2, "SAME"),
        "conv1d_valid": api.nn.conv1d(api.constant(SEQ), api.constant(FILTER), 1, "VALID"),
        "top_k_values": api.nn.top_k(api.constant(TIES), 3).values,
        "top_k_indices": api.nn.top_k(api.constant(TIES), 3).indices,
        "top_k_vector": api.nn.top_k(api.constant(TIES[0]), 2).values,
        "top_k_rank3": api.nn.top_k(api.constant(SEQ), 2).indices,
        "selu": api.nn.selu(a), "softsign": api.nn.softsign(a), "swish": api.nn.swish(a),
        "relu_layer": api.nn.relu_layer(a, api.constant(B.T), api.constant(np.ones(3, np.float32))),
        "weighted_ce": api.nn.weighted_cross_entropy_with_logits(
            labels=api.constant((B > 0).astype(np.float32)), logits=a, pos_weight=3.0),
        "lrn": api.nn.lrn(api.constant(IMAGES), 2, 1.5, 0.3, 0.75),
        "max_pool2d": api.nn.max_pool2d(api.constant(IMAGES), 2, 2, "VALID"),
        "gather_nd": api.gather_nd(api.constant(SEQ), [[0, 1, 2], [1, 6, 0]]),
        "gather_nd_rows": api.gather_nd(api.constant(SEQ), [[[1, 3]], [[0, 0]]]),
        "where_indices": api.where(api.constant(TIES > 4)),
        "boolean_mask": api.boolean_mask(api.constant(SEQ), api.constant(SEQ[..., 0] > 0)),
        "boolean_mask_axis": api.boolean_mask(api.constant(SEQ), api.constant([True, False, True]),
                                              axis=2),
        "reduce_prod": api.reduce_prod(api.constant(SEQ), axis=[0, 2], keepdims=True),
        "reduce_prod_int": api.reduce_prod(api.constant([[2, 3], [4, 0]]), 1),
        "cumsum": api.cumsum(a, axis=1), "cumsum_rev_excl": api.cumsum(a, 0, True, True),
        "sort": api.sort(api.constant(TIES)), "argsort": api.argsort(api.constant(TIES)),
        "sort_down": api.sort(api.constant(TIES), direction="DESCENDING"),
        "argsort_axis0": api.argsort(api.constant(TIES), axis=0),
    }


def _ours() -> dict:
    tf.reset_default_graph()
    cases = _cases(tf)
    with tf.Session() as sess:
        return dict(zip(cases, sess.run(list(cases.values()))))


def test_values_are_numpys():
    got = _ours()
    norm = np.sqrt((A ** 2).sum() + (B ** 2).sum())
    expected = {
        "add_n": A + B + A, "global_norm": norm,
        "clip_by_norm": A * 1.0 / max(np.sqrt((A ** 2).sum()), 1.0),
        "clip_by_norm_rows": A / np.maximum(np.sqrt((A ** 2).sum(1, keepdims=True)), 1.0),
        "clipped_a": A * 1.5 / max(norm, 1.5), "clipped_b": B * 1.5 / max(norm, 1.5), "norm": norm,
        "size": 12, "mask": np.arange(4) < np.array([[1], [3], [0]]),
        "mask_float": (np.arange(2) < np.array([[2], [1]])).astype(np.float32),
        "eye": np.eye(3, 2), "eye_batch": np.stack([np.eye(2)] * 2),
        "is_nan": np.isnan(SPECIAL), "is_inf": np.isinf(SPECIAL), "is_finite": np.isfinite(SPECIAL),
        "and": [True, False, False, False], "or": [True, True, True, False],
        "not": [False, True, False, True], "xor": [False, True, True, False],
        "all": [False, True], "count": 2, "count_rows": [[1], [2]],
        "logsumexp": [1000 + np.log(2), np.log(np.exp(0) + np.exp(2))],
        "logsumexp_all": np.log(np.exp(A.astype(np.float64)).sum()),
        "l2_normalize": A / np.sqrt((A ** 2).sum(1, keepdims=True)),
        "reverse": A[:, ::-1], "reverse_both": A[::-1, ::-1], "tile": np.tile(A, [2, 3]),
        "tile_run_time": np.tile(A, [2, 1]),
        "pad": np.pad(A, [[1, 0], [2, 1]], constant_values=-1.0),
        "pad_reflect": np.pad(A, [[2, 1], [3, 2]], mode="reflect"),
        "pad_symmetric": np.pad(A, [[1, 3], [0, 4]], mode="symmetric"),
        "conv1d": _conv1d(SEQ, FILTER, 2, True), "conv1d_valid": _conv1d(SEQ, FILTER, 1, False),
        "top_k_values": [[5, 5, 2], [9, 8, 7], [3, 3, 3]],
        "top_k_indices": [[1, 3, 2], [0, 1, 2], [0, 1, 2]],  # equal values in index order
        "top_k_vector": [5, 5], "top_k_rank3": np.argsort(-SEQ, -1, kind="stable")[..., :2],
        "selu": 1.0507009873554805 * np.where(A > 0, A, 1.6732632423543772 * np.expm1(A)),
        "softsign": A / (1 + np.abs(A)), "swish": A / (1 + np.exp(-A)),
        "relu_layer": np.maximum(A @ B.T + 1, 0),
        "weighted_ce": (1 - (B > 0)) * A + (1 + 2 * (B > 0)) * (np.log1p(np.exp(-np.abs(A)))
                                                                + np.maximum(-A, 0)),
        "lrn": IMAGES / (1.5 + 0.3 * np.stack([(np.pad(IMAGES, [(0, 0)] * 3 + [(2, 2)]) ** 2)[
            ..., c:c + 5].sum(-1) for c in range(7)], -1)) ** 0.75,
        "max_pool2d": IMAGES.reshape(2, 2, 2, 2, 2, 7).max(axis=(2, 4)),
        "gather_nd": [SEQ[0, 1, 2], SEQ[1, 6, 0]], "gather_nd_rows": [[SEQ[1, 3]], [SEQ[0, 0]]],
        "where_indices": np.argwhere(TIES > 4), "boolean_mask": SEQ[SEQ[..., 0] > 0],
        "boolean_mask_axis": SEQ[..., [0, 2]],
        "reduce_prod": SEQ.prod(axis=(0, 2), keepdims=True), "reduce_prod_int": [6, 0],
        "cumsum": np.cumsum(A, 1),
        "cumsum_rev_excl": np.flip(np.cumsum(np.flip(A, 0), 0) - np.flip(A, 0), 0),
        "sort": np.sort(TIES), "argsort": np.argsort(TIES, kind="stable"),
        "sort_down": -np.sort(-TIES), "argsort_axis0": np.argsort(TIES, 0, kind="stable"),
    }
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert got["mask"].dtype == np.bool_ and got["count"].dtype == np.int64
    assert got["size"].dtype == np.int32 and got["mask_float"].dtype == np.float32


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf]): NumPy's values "
                           "are checked above")
def test_values_are_tensorflows():
    import tensorflow as real_tf

    api = real_tf.compat.v1
    with real_tf.Graph().as_default():
        cases = _cases(api)
        with api.Session() as sess:
            theirs = dict(zip(cases, sess.run(list(cases.values()))))
    ours = _ours()
    for name in theirs:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-5, atol=1e-6, err_msg=name)
        assert np.asarray(ours[name]).dtype == np.asarray(theirs[name]).dtype, name


def test_a_training_step_clips_its_gradients_by_their_global_norm():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4])
    w = tf.Variable(np.full((4, 1), 5.0, np.float32))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
    tvars = tf.trainable_variables()
    grads, norm = tf.clip_by_global_norm(tf.gradients(loss, tvars), 0.5)
    train = tf.train.GradientDescentOptimizer(1.0).apply_gradients(zip(grads, tvars))
    batch = np.ones((2, 4), np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(w)
        raw_norm, _ = sess.run([norm, train], {x: batch})
        step = before - sess.run(w)
    # the raw gradient is 2 * 20 * x's column means = 40 per weight, norm 80: clipped to 0.5
    np.testing.assert_allclose(raw_norm, 80.0, rtol=1e-6)
    np.testing.assert_allclose(np.sqrt((step ** 2).sum()), 0.5, rtol=1e-6)


def test_gradients_flow_through_reverse_tile_and_pad():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3])
    w = RNG.normal(size=(4, 9)).astype(np.float32)
    tiled_w = RNG.normal(size=(4, 6)).astype(np.float32)
    padded = tf.pad(tf.reverse(x, [1]), [[1, 1], [3, 3]], mode="CONSTANT")
    loss = tf.reduce_sum(padded * w) + tf.reduce_sum(tf.tile(x, [2, 2]) * tiled_w)
    (grad,) = tf.gradients(loss, [x])
    with tf.Session() as sess:
        got = sess.run(grad, {x: A[:2, :3]})
    # pad: the inner block of w; reverse: its columns reversed; tile: the four copies summed
    expected = w[1:3, 3:6][:, ::-1] + sum(tiled_w[r:r + 2, c:c + 3] for r in (0, 2) for c in (0, 3))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_gather_nd_and_boolean_mask_take_run_time_shapes_and_pass_gradients():
    tf.reset_default_graph()
    outputs = tf.placeholder(tf.float32, [None, None, 3])  # [batch, time, units]
    lengths = tf.placeholder(tf.int32, [None])
    keep = tf.placeholder(tf.bool, [None, None])
    # the last relevant output of each sequence, as TF1 seq2seq programs pick it
    last = tf.gather_nd(outputs, tf.stack([tf.range(tf.shape(outputs)[0]), lengths - 1], 1))
    kept = tf.boolean_mask(outputs, keep)
    assert last.shape == (None, 3) and kept.shape == (None, 3)
    loss = tf.reduce_sum(last) + 10 * tf.reduce_sum(kept)
    (grad,) = tf.gradients(loss, [outputs])
    mask = SEQ[..., 1] > 0
    with tf.Session() as sess:
        got_last, got_kept, got_grad = sess.run([last, kept, grad], {
            outputs: SEQ, lengths: [3, 7], keep: mask})
    np.testing.assert_array_equal(got_last, SEQ[[0, 1], [2, 6]])
    np.testing.assert_array_equal(got_kept, SEQ[mask])
    expected = 10.0 * np.repeat(mask[..., None], 3, axis=-1)
    expected[0, 2] += 1
    expected[1, 6] += 1
    np.testing.assert_array_equal(got_grad, expected)


def test_print_passes_its_input_on_and_prints_its_data_on_one_line_per_run(capfd):
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.Print(x * 2.0, [x, tf.shape(x)], message="x and its shape: ", summarize=4)
    (grad,) = tf.gradients(tf.reduce_sum(y), [x])
    batch = np.array([[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]], np.float32)
    capfd.readouterr()
    with tf.Session() as sess:
        for _ in range(2):
            value, got = sess.run([y, grad], {x: batch})
    np.testing.assert_array_equal(value, 2 * batch)
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0))
    assert capfd.readouterr().err.splitlines() == ["x and its shape: [0.5 1 2 3...][2 3]"] * 2
    assert tf.Print(x, []).op.type == "identity"


def test_print_writes_string_data_as_text_as_tensorflow_does(capfd):
    """String constants and a fed string placeholder print as [hello] and [ab c], as TF 2.21's
    compat.v1 tf.Print writes them (they printed their UTF-8 bytes as numbers)."""
    tf.reset_default_graph()
    x = tf.constant(1.5)
    name = tf.placeholder(tf.string, [])
    y = tf.Print(x, [x, tf.constant("hello"), tf.constant(["ab", "c", "d", "e"]), name],
                 message="m ")
    capfd.readouterr()
    with tf.Session() as sess:
        assert sess.run(y, {name: "fed"}) == 1.5
    assert capfd.readouterr().err.splitlines() == ["m [1.5][hello][ab c d...][fed]"]


@pytest.mark.parametrize("seq_axis, batch_axis", [(1, 0), (0, 1)])
def test_reverse_sequence_reverses_each_prefix_and_passes_gradients(seq_axis, batch_axis):
    """Per batch entry its first length entries reversed (a length of 0 keeps all, as TF's),
    with run-time batch and time sizes; the gradient is the weights reversed likewise."""
    tf.reset_default_graph()
    lengths = np.array([2, 5, 0])
    data = SEQ_B if batch_axis == 0 else np.transpose(SEQ_B, (1, 0, 2))
    x = tf.placeholder(tf.float32, [None, None, 3])
    n = tf.placeholder(tf.int64, [None])
    y = tf.reverse_sequence(x, n, seq_axis=seq_axis, batch_axis=batch_axis)
    weights = tf.constant(RNG.normal(size=data.shape).astype(np.float32))
    (grad,) = tf.gradients(tf.reduce_sum(y * weights), [x])
    with tf.Session() as sess:
        got, got_grad, w = sess.run([y, grad, weights], {x: data, n: lengths})

    def reversed_(a):
        a = a if batch_axis == 0 else np.transpose(a, (1, 0, 2))
        out = a.copy()
        for b, k in enumerate(lengths):
            out[b, :k] = a[b, :k][::-1]
        return out if batch_axis == 0 else np.transpose(out, (1, 0, 2))
    np.testing.assert_array_equal(got, reversed_(data))
    np.testing.assert_array_equal(got_grad, reversed_(w))
    with pytest.raises(OpsdkError, match="seq_axis and batch_axis are both 1"):
        tf.reverse_sequence(x, n, seq_axis=1, batch_axis=1)


def test_the_gradient_of_top_k_reaches_the_entries_picked():
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 5])
    values, _ = tf.nn.top_k(x, 2)
    (grad,) = tf.gradients(tf.reduce_sum(values * tf.constant([1.0, 10.0])), [x])
    with tf.Session() as sess:
        got = sess.run(grad, {x: TIES})
    np.testing.assert_array_equal(got, [[0, 1, 0, 10, 0], [1, 10, 0, 0, 0], [1, 10, 0, 0, 0]])
    with pytest.raises(tf.OpsdkError, match="k=6 is more than the 5 elements"):
        with tf.Session() as sess:
            sess.run(tf.nn.top_k(x, 6).values, {x: TIES})
    # a last axis known only at run time (the distances of a nearest-neighbour program)
    late = tf.placeholder(tf.float32, [None, None])
    values, indices = tf.nn.top_k(late, 2)
    (grad,) = tf.gradients(tf.reduce_sum(values * tf.constant([1.0, 10.0])), [late])
    with tf.Session() as sess:
        got = sess.run([values, indices, grad], {late: TIES})
    np.testing.assert_array_equal(got[2], [[0, 1, 0, 10, 0], [1, 10, 0, 0, 0], [1, 10, 0, 0, 0]])
    np.testing.assert_array_equal(got[0], np.take_along_axis(np.asarray(TIES), got[1], axis=1))
    with pytest.raises(tf.OpsdkError, match="top_k: .* needs a rank of at least 1 known"):
        tf.nn.top_k(tf.placeholder(tf.float32, None), 1)


def test_layers_conv1d_and_pooling_keep_their_static_shapes_and_train():
    tf.reset_default_graph()
    seq = tf.placeholder(tf.float32, [None, 10, 3])
    y = tf.layers.conv1d(seq, 4, 3, padding="same", activation=tf.nn.relu)
    pooled = tf.layers.max_pooling1d(y, 2, 2)
    mean = tf.layers.average_pooling1d(y, 5, 5)
    assert (y.shape, pooled.shape, mean.shape) == ((None, 10, 4), (None, 5, 4), (None, 2, 4))
    kernel = [v for v in tf.trainable_variables() if v.name.startswith("conv1d/kernel")]
    assert len(kernel) == 1 and tuple(kernel[0].shape) == (3, 3, 4)
    loss = tf.reduce_mean(tf.square(tf.layers.dense(tf.layers.flatten(pooled), 1) - 1.0))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    batch = RNG.normal(size=(8, 10, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {seq: batch})
        for _ in range(30):
            sess.run(train, {seq: batch})
        assert sess.run(loss, {seq: batch}) < 0.5 * first


def test_bad_arguments_are_refused_naming_the_function():
    tf.reset_default_graph()
    with pytest.raises(tf.OpsdkError, match="add_n: give a non-empty list"):
        tf.add_n([])
    with pytest.raises(tf.OpsdkError, match="add_n: .* give tensors of one shape"):
        tf.add_n([tf.zeros([2]), tf.zeros([3])])
    with pytest.raises(tf.OpsdkError, match="add_n: .* give tensors of one dtype"):
        tf.add_n([tf.zeros([2]), tf.zeros([2], dtype=tf.int32)])
    with pytest.raises(tf.OpsdkError, match="clip_by_global_norm: t_list must be a list"):
        tf.clip_by_global_norm(tf.zeros([2]), 1.0)
    with pytest.raises(tf.OpsdkError, match="sequence_mask: lengths must be int32 or int64"):
        tf.sequence_mask(tf.constant([1.5]))
    with pytest.raises(tf.OpsdkError, match="logical_and: .* give bool tensors"):
        tf.logical_and(tf.zeros([2]), tf.constant([True, False]))
    with pytest.raises(tf.OpsdkError, match=r"tile: multiples \[2\] must hold 2 counts"):
        tf.tile(tf.zeros([2, 2]), [2])
    with pytest.raises(tf.OpsdkError, match="pad: REFLECT adds 3 along axis 0 of size 2"):
        tf.pad(tf.zeros([2, 2]), [[3, 0], [0, 0]], mode="REFLECT")
    with pytest.raises(tf.OpsdkError, match="pad: REFLECT along axis 0 needs its size known"):
        tf.pad(tf.placeholder(tf.float32, [None, 2]), [[1, 0], [0, 0]], mode="REFLECT")
    with pytest.raises(tf.OpsdkError, match="pad: mode 'WRAP'"):
        tf.pad(tf.zeros([2]), [[1, 1]], mode="wrap")
    with pytest.raises(tf.OpsdkError, match="reverse: axis 2 is out of range"):
        tf.reverse(tf.zeros([2, 2]), [2])
    with pytest.raises(tf.OpsdkError, match="gather_nd: coordinates of 3 entries"):
        tf.gather_nd(tf.zeros([2, 2]), [[0, 0, 0]])
    with pytest.raises(tf.OpsdkError, match="boolean_mask: mask must be bool"):
        tf.boolean_mask(tf.zeros([2]), tf.constant([1, 0]))
    with pytest.raises(tf.OpsdkError, match="where: give both x and y, or neither"):
        tf.where(tf.constant([True]), tf.zeros([1]))


def test_einsum_takes_tfs_implicit_form_and_its_operands_as_arguments():
    rng = np.random.default_rng(3)
    a, b, c = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5)), rng.normal(size=3)
    with tf.Graph().as_default():
        ys = [tf.einsum("bij,bjk", a, b), tf.einsum("bij, bjk -> bik", [a, b]),
              tf.einsum("i,i", c, c), tf.einsum("ij,jk->ki", a[0], b[0], name="ki")]
        assert ys[3].op.name == "ki"
        with pytest.raises(OpsdkError, match="unexpected arguments"):
            tf.einsum("i,i", c, c, optimize="greedy")
        with tf.Session() as sess:
            got = sess.run(ys)
    # implicit: the letters used once, so b is summed over as well
    for value, expected in zip(got, [np.einsum("bij,bjk", a, b), a @ b, c @ c, (a[0] @ b[0]).T]):
        np.testing.assert_allclose(value, expected, rtol=1e-12)


def test_unique_keeps_the_order_of_first_appearance():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        y, idx = tf.unique(x)
        counted = tf.unique_with_counts(x, out_idx=tf.int64)
        assert y.get_shape().as_list() == [None] and idx.dtype == tf.int32
        assert counted.count.dtype == tf.int64
        with pytest.raises(OpsdkError, match="x must be 1-d"):
            tf.unique(tf.zeros([2, 2]))
        with tf.Session() as sess:
            values = np.array([3, 1, 3, 2, 1, 1], np.float32)
            got_y, got_idx, (cy, cidx, count) = sess.run([y, idx, counted], {x: values})
            empty = sess.run(y, {x: np.zeros(0, np.float32)})
    np.testing.assert_array_equal(got_y, [3, 1, 2])
    np.testing.assert_array_equal(got_y[got_idx], values)  # y[idx[i]] == x[i]
    np.testing.assert_array_equal(count, [2, 3, 1])
    assert cidx.dtype == np.int64 and empty.shape == (0,)
