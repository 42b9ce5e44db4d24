"""Bidirectional RNNs, sequence_length and dynamic_rnn over a run-time number of steps
(opsdk/v1/rnn_run.py): outputs, final states and gradients against TensorFlow's compat.v1 where
TensorFlow is installed, and TF1's semantics checked directly everywhere."""

from __future__ import annotations

import os

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError
from opsdk.runtime.kernels.fused import wait_for_fused_kernels

RNG = np.random.default_rng(7)
BATCH, TIME, DEPTH, UNITS = 3, 5, 4, 6
X = RNG.standard_normal((BATCH, TIME, DEPTH)).astype(np.float32)
LENGTHS = np.array([5, 2, 0], dtype=np.int32)


@pytest.fixture(autouse=True)
def fresh_graph():
    """Tests that build in the default graph leave none of it to the next."""
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _cells(v1, kind):
    if kind == "lstm":
        return v1.nn.rnn_cell.BasicLSTMCell(UNITS), v1.nn.rnn_cell.BasicLSTMCell(UNITS)
    if kind == "multi":  # stacked cells: TF's names put each cell's scope inside cell_<i>
        return tuple(v1.nn.rnn_cell.MultiRNNCell([v1.nn.rnn_cell.BasicLSTMCell(UNITS),
                                                  v1.nn.rnn_cell.GRUCell(UNITS)])
                     for _ in range(2))
    if kind == "gru":
        return v1.nn.rnn_cell.GRUCell(UNITS), v1.nn.rnn_cell.GRUCell(UNITS)
    return v1.nn.rnn_cell.BasicRNNCell(UNITS), v1.nn.rnn_cell.BasicRNNCell(UNITS)


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flatten(v)]
    return [value]


# What each model returns: (feeds' placeholder, a list of tensors to compare).
def _dynamic(v1, kind, lengths, time_known=True):
    x = v1.placeholder(v1.float32, [None, TIME if time_known else None, DEPTH])
    cell, _ = _cells(v1, kind)
    seq = None if lengths is None else v1.constant(lengths)
    out, state = v1.nn.dynamic_rnn(cell, x, sequence_length=seq, dtype=v1.float32)
    return x, [out, *_flatten(state)]


def _bidirectional_dynamic(v1, kind, lengths, time_known=True):
    x = v1.placeholder(v1.float32, [None, TIME if time_known else None, DEPTH])
    fw, bw = _cells(v1, kind)
    seq = None if lengths is None else v1.constant(lengths)
    (out_fw, out_bw), states = v1.nn.bidirectional_dynamic_rnn(fw, bw, x, sequence_length=seq,
                                                               dtype=v1.float32)
    return x, [out_fw, out_bw, *_flatten(states)]


def _bidirectional_time_major(v1, kind, lengths, time_known=True):
    x = v1.placeholder(v1.float32, [None, TIME if time_known else None, DEPTH])
    fw, bw = _cells(v1, kind)
    seq = None if lengths is None else v1.constant(lengths)
    (out_fw, out_bw), states = v1.nn.bidirectional_dynamic_rnn(
        fw, bw, v1.transpose(x, [1, 0, 2]), sequence_length=seq, dtype=v1.float32,
        time_major=True)
    return x, [out_fw, out_bw, *_flatten(states)]


def _static(v1, kind, lengths, time_known=True):
    x = v1.placeholder(v1.float32, [None, TIME, DEPTH])
    cell, _ = _cells(v1, kind)
    seq = None if lengths is None else v1.constant(lengths)
    outs, state = v1.nn.static_rnn(cell, v1.unstack(x, TIME, 1), sequence_length=seq,
                                   dtype=v1.float32)
    return x, [*outs, *_flatten(state)]


def _static_bidirectional(v1, kind, lengths, time_known=True):
    x = v1.placeholder(v1.float32, [None, TIME, DEPTH])
    fw, bw = _cells(v1, kind)
    seq = None if lengths is None else v1.constant(lengths)
    outs, s_fw, s_bw = v1.nn.static_bidirectional_rnn(
        fw, bw, v1.unstack(x, TIME, 1), sequence_length=seq, dtype=v1.float32)
    return x, [*outs, *_flatten(s_fw), *_flatten(s_bw)]


def _stack(v1, kind, lengths, dynamic):
    """Two bidirectional layers: opsdk.v1's tf.contrib.rnn.stack_bidirectional_(dynamic_)rnn, and
    for TF (whose compat.v1 has no contrib) the layers those functions were made of in TF1."""
    fws, bws = zip(*(_cells(v1, kind) for _ in range(2)))
    seq = None if lengths is None else v1.constant(lengths)
    x = v1.placeholder(v1.float32, [None, TIME, DEPTH])
    inputs = x if dynamic else v1.unstack(x, TIME, 1)
    if hasattr(v1, "contrib"):
        stack = (v1.contrib.rnn.stack_bidirectional_dynamic_rnn if dynamic
                 else v1.contrib.rnn.stack_bidirectional_rnn)
        out, s_fw, s_bw = stack(list(fws), list(bws), inputs, sequence_length=seq,
                                dtype=v1.float32)
        return x, [*(out if isinstance(out, list) else [out]), *_flatten((s_fw, s_bw))]
    states = []
    with v1.variable_scope("stack_bidirectional_rnn"):
        for i, (fw, bw) in enumerate(zip(fws, bws)):
            with v1.variable_scope(f"cell_{i}"):
                if dynamic:
                    outs, pair = v1.nn.bidirectional_dynamic_rnn(
                        fw, bw, inputs, sequence_length=seq, dtype=v1.float32)
                    inputs = v1.concat(outs, 2)
                else:
                    inputs, *pair = v1.nn.static_bidirectional_rnn(
                        fw, bw, inputs, sequence_length=seq, dtype=v1.float32)
            states.append(pair)
    fw_states, bw_states = [s[0] for s in states], [s[1] for s in states]
    return x, [*(inputs if isinstance(inputs, list) else [inputs]),
               *_flatten((fw_states, bw_states))]


def _stack_static(v1, kind, lengths, time_known=True):
    return _stack(v1, kind, lengths, dynamic=False)


def _stack_dynamic(v1, kind, lengths, time_known=True):
    return _stack(v1, kind, lengths, dynamic=True)


def _run(v1, model, kind, lengths, weights=None, time_known=True):
    """The model's values and the gradients of a weighted sum of them with respect to the inputs
    and every variable, with the variables set to `weights` (by name) when given."""
    graph = v1.Graph()
    with graph.as_default():
        x, values = model(v1, kind, lengths, time_known)
        loss = sum(v1.reduce_sum(v * float(i + 1)) for i, v in enumerate(values))
        variables = sorted(v1.trainable_variables(), key=lambda v: v.name)
        grads = v1.gradients(loss, [x] + variables)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            if weights is not None:
                for var in variables:
                    var.load(weights[var.name.split(":")[0]], sess)
            names = [v.name.split(":")[0] for v in variables]
            current = dict(zip(names, sess.run(variables)))
            # A fused region runs unfused until its kernel is compiled (in the background, on
            # first sight), and fused and unfused float32 differ by some ulps: so that two graphs
            # compare like with like, whatever the fused-kernel cache holds, the values are those
            # of a run after the compiles (fused, or unfused where no compiler is present).
            sess.run(values + grads, feed_dict={x: X})
            wait_for_fused_kernels(300)
            fetched = sess.run(values + grads, feed_dict={x: X})
    return current, fetched[:len(values)], fetched[len(values):]


def _tensorflow_v1():
    """TensorFlow's compat.v1 with its RNN cells, which TF 2.16+ takes from tf_keras when asked by
    TF_USE_LEGACY_KERAS (read at the first use of those names)."""
    pytest.importorskip("tf_keras", reason="compat.v1's RNN cells need tf_keras "
                        "(pip install opsdk[tf])")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    tf1 = pytest.importorskip("tensorflow").compat.v1
    tf1.disable_eager_execution()
    return tf1


MODELS = {"dynamic": _dynamic, "bidirectional_dynamic": _bidirectional_dynamic,
          "bidirectional_time_major": _bidirectional_time_major,
          "static": _static, "static_bidirectional": _static_bidirectional,
          "stack_static": _stack_static, "stack_dynamic": _stack_dynamic}


@pytest.mark.parametrize("kind,model", [
    *((kind, model) for kind in ("lstm", "gru", "basic") for model in sorted(MODELS)),
    ("multi", "dynamic"), ("multi", "bidirectional_dynamic"), ("multi", "static")])
@pytest.mark.parametrize("lengths", [None, LENGTHS], ids=["full", "lengths"])
def test_outputs_states_and_gradients_match_tensorflow(model, kind, lengths):
    tf1 = _tensorflow_v1()
    weights, values, grads = _run(tf, MODELS[model], kind, lengths)
    tf_weights, tf_values, tf_grads = _run(tf1, MODELS[model], kind, lengths, weights)
    assert sorted(weights) == sorted(tf_weights)  # TF's variable names
    for ours, theirs in zip(values + grads, tf_values + tf_grads):
        # float32 sums in another order: a rounding error of the array's largest terms
        scale = max(1.0, float(np.abs(theirs).max()))
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6 * scale)


def test_contrib_rnn_has_the_static_bidirectional_rnn_of_tf1():
    assert tf.contrib.rnn.static_bidirectional_rnn is tf.nn.static_bidirectional_rnn
    assert tf.contrib.rnn.static_rnn is tf.nn.static_rnn


@pytest.mark.parametrize("model", ["dynamic", "bidirectional_dynamic",
                                   "bidirectional_time_major"])
def test_a_run_time_number_of_steps_gives_what_a_known_one_does(model):
    weights, values, grads = _run(tf, MODELS[model], "lstm", LENGTHS)
    _, late_values, late_grads = _run(tf, MODELS[model], "lstm", LENGTHS, weights,
                                      time_known=False)
    for known, late in zip(values + grads, late_values + late_grads):
        np.testing.assert_allclose(late, known, rtol=1e-6, atol=1e-7)


def test_sequence_length_zeroes_outputs_and_freezes_the_state():
    weights, (out, c, h), _ = _run(tf, _dynamic, "lstm", LENGTHS)
    _, (full, *_), _ = _run(tf, _dynamic, "lstm", None, weights)
    for b, n in enumerate(LENGTHS):
        np.testing.assert_array_equal(out[b, n:], 0.0)
        np.testing.assert_allclose(out[b, :n], full[b, :n], rtol=1e-6)
        if n:  # the state after the last valid step: its h is that step's output
            np.testing.assert_allclose(h[b], full[b, n - 1], rtol=1e-6)
    np.testing.assert_array_equal(c[2], 0.0)  # length 0: the initial (zero) state


def test_the_backward_direction_reads_each_sequence_from_its_end():
    # Example 1 (length 2) reversed within its length is a sequence of its own: the backward
    # outputs at steps 0 and 1 are a forward run over x[1], x[0] read back in reverse.
    weights, (out_fw, out_bw, *_), _ = _run(tf, _bidirectional_dynamic, "basic", LENGTHS)
    kernel = weights["bidirectional_rnn/bw/basic_rnn_cell/kernel"]
    bias = weights["bidirectional_rnn/bw/basic_rnn_cell/bias"]
    h = np.zeros(UNITS, dtype=np.float32)
    expect = []
    for t in (1, 0):
        h = np.tanh(np.concatenate([X[1, t], h]) @ kernel + bias)
        expect.append(h)
    np.testing.assert_allclose(out_bw[1, :2], np.stack(expect[::-1]), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out_bw[1, 2:], 0.0)


def test_training_through_a_run_time_number_of_steps_learns():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, None, 1])
        y = tf.placeholder(tf.float32, [None, 1])
        out, state = tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(8), x, dtype=tf.float32)
        pred = tf.layers.dense(state, 1)
        loss = tf.reduce_mean(tf.square(pred - y))
        train = tf.train.AdamOptimizer(0.05).minimize(loss)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            losses = []
            for step in range(120):
                steps = 3 + step % 5  # sequences of a different length at every step
                xs = RNG.uniform(0, 1, (16, steps, 1)).astype(np.float32)
                _, value = sess.run([train, loss], {x: xs, y: xs.sum(1) / steps})
                losses.append(value)
    assert np.mean(losses[-10:]) < 0.1 * np.mean(losses[:10])


def test_bad_sequence_lengths_are_refused_naming_the_function():
    x = tf.placeholder(tf.float32, [None, TIME, DEPTH])
    with pytest.raises(OpsdkError, match="dynamic_rnn: sequence_length must be int32 or int64"):
        tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicRNNCell(2), x, sequence_length=[1.5, 2.0],
                          dtype=tf.float32)
    with pytest.raises(OpsdkError, match="static_rnn: sequence_length must be a vector"):
        tf.nn.static_rnn(tf.nn.rnn_cell.BasicRNNCell(2), tf.unstack(x, TIME, 1),
                         sequence_length=[[1, 2]], dtype=tf.float32)
    with pytest.raises(OpsdkError, match="bidirectional_dynamic_rnn: inputs must be"):
        tf.nn.bidirectional_dynamic_rnn(tf.nn.rnn_cell.BasicRNNCell(2),
                                        tf.nn.rnn_cell.BasicRNNCell(2), tf.placeholder(
                                            tf.float32, [None, DEPTH]), dtype=tf.float32)
    with pytest.raises(OpsdkError, match="stack_bidirectional_dynamic_rnn: cells_fw and cells_bw "
                                         "must be non-empty lists of one length, got 2 and 1"):
        tf.contrib.rnn.stack_bidirectional_dynamic_rnn(
            [tf.nn.rnn_cell.GRUCell(2)] * 2, [tf.nn.rnn_cell.GRUCell(2)], x, dtype=tf.float32)


def test_dropout_wrapper_in_dynamic_rnn_takes_its_gradient_through_the_forward_mask():
    """With the recurrent weights zero each step's output is tanh(x_t @ Wx + b), so the mask of
    a run is its dropped outputs over those values, and the gradient of the bias must hold that
    same mask (the loop's gradient runs the body again: a fresh draw would give another)."""
    x = tf.placeholder(tf.float32, [None, None, DEPTH])
    cell = tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicRNNCell(UNITS), output_keep_prob=0.5)
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    w = RNG.standard_normal(UNITS).astype(np.float32)
    bias, kernel = sorted(tf.trainable_variables(), key=lambda v: v.name)
    grads = tf.gradients(tf.reduce_sum(outputs * w), [kernel, bias])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        wx = sess.run(kernel)[:DEPTH]
        kernel.load(np.concatenate([wx, np.zeros((UNITS, UNITS), np.float32)]), sess)
        bias.load(RNG.standard_normal(UNITS).astype(np.float32), sess)
        out, (g_kernel, g_bias), b = sess.run([outputs, grads, bias], {x: X})
    h = np.tanh(X @ wx + b)
    scale = out / h  # the mask over keep_prob: 0 or 2
    assert set(np.round(scale, 4).ravel()) == {0.0, 2.0}
    g_pre = w * scale * (1 - h ** 2)
    np.testing.assert_allclose(g_bias, g_pre.sum(axis=(0, 1)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g_kernel[:DEPTH], np.einsum("btd,btu->du", X, g_pre),
                               rtol=1e-4, atol=1e-5)


def test_stacked_dropout_wrappers_in_dynamic_rnn_train():
    x = tf.placeholder(tf.float32, [None, None, DEPTH])
    keep = tf.placeholder(tf.float32, [])
    cells = [tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicLSTMCell(UNITS),
                                           input_keep_prob=keep, output_keep_prob=keep),
             tf.nn.rnn_cell.BasicLSTMCell(UNITS)]
    outputs, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.MultiRNNCell(cells), x, dtype=tf.float32)
    loss = tf.reduce_mean(tf.square(outputs - 0.5))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: X, keep: 1.0})
        for _ in range(30):
            sess.run(train, {x: X, keep: 0.8})
        last = sess.run(loss, {x: X, keep: 1.0})
    assert np.isfinite(last) and last < first


def test_dropout_wrapper_refuses_state_keep_prob():
    with pytest.raises(OpsdkError, match="DropoutWrapper: state_keep_prob is not provided"):
        tf.nn.rnn_cell.DropoutWrapper(tf.nn.rnn_cell.BasicRNNCell(UNITS), state_keep_prob=0.5)


def _one_result(dynamic, bidirectional):
    """A model giving outputs [batch, time, units] (fw and bw concatenated) and the final
    states, from dynamic_rnn's loop or static_rnn's unrolled steps."""
    def model(v1, kind, lengths, time_known=True):
        x = v1.placeholder(v1.float32, [None, TIME if time_known else None, DEPTH])
        seq = None if lengths is None else v1.constant(lengths)
        fw, bw = _cells(v1, kind)
        if dynamic and bidirectional:
            outs, states = v1.nn.bidirectional_dynamic_rnn(fw, bw, x, sequence_length=seq,
                                                           dtype=v1.float32)
            out = v1.concat(outs, 2)
        elif dynamic:
            out, states = v1.nn.dynamic_rnn(fw, x, sequence_length=seq, dtype=v1.float32)
        elif bidirectional:
            outs, s_fw, s_bw = v1.nn.static_bidirectional_rnn(
                fw, bw, v1.unstack(x, TIME, 1), sequence_length=seq, dtype=v1.float32)
            out, states = v1.stack(outs, 1), (s_fw, s_bw)
        else:
            outs, states = v1.nn.static_rnn(fw, v1.unstack(x, TIME, 1), sequence_length=seq,
                                            dtype=v1.float32)
            out = v1.stack(outs, 1)
        return x, [out, *_flatten(states)]
    return model


@pytest.mark.parametrize("kind", ["lstm", "gru", "basic", "multi"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "bidirectional"])
@pytest.mark.parametrize("lengths", [None, LENGTHS], ids=["full", "lengths"])
def test_the_loop_over_time_gives_what_the_unrolled_steps_give(kind, bidirectional, lengths):
    # dynamic_rnn's outputs are its loop's recorded history; static_rnn builds every step: two
    # paths, one result, values and gradients (TensorFlow itself is compared above, where it
    # is installed)
    weights, values, grads = _run(tf, _one_result(False, bidirectional), kind, lengths)
    for time_known in (True, False):
        same, looped, looped_grads = _run(tf, _one_result(True, bidirectional), kind, lengths,
                                          weights, time_known)
        assert sorted(same) == sorted(weights)  # one naming of the variables
        assert looped[0].shape == (BATCH, TIME, UNITS * (2 if bidirectional else 1))
        for ours, theirs in zip(looped + looped_grads, values + grads):
            scale = max(1.0, float(np.abs(theirs).max()))
            np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6 * scale)


def test_no_loop_value_holds_every_step_so_a_step_costs_its_own_output():
    # Each iteration carries its step's output [batch, units], never a [time, batch, units]
    # sum: such a value costs a pass over all steps per step, and its recorded history (which
    # the gradient needs) time times that memory.
    # The gradient's loop, asked for the weights' gradients only, carries no sum for the
    # inputs' gradient either ([time, batch, depth]: a pass over it per step).
    x = tf.placeholder(tf.float32, [None, None, DEPTH])
    out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(UNITS), x, dtype=tf.float32)
    tf.gradients(tf.reduce_sum(out), tf.trainable_variables())
    loops = [op for op in tf.get_default_graph().get_operations() if op.type == "while_loop"]
    assert len(loops) == 2
    for loop in loops:
        ranks = {len(s) for s in loop.attrs["shape_invariants"] if s is not None}
        assert ranks <= {0, 1, 2}, (loop.name, loop.attrs["shape_invariants"])


def test_the_gradient_loop_adds_no_zeros_for_the_output_sequence():
    # dynamic_rnn's output sequence reaches the loss through its recorded rows only: the
    # gradient's body took zeros for the body's own (absent) gradient of it and added the row
    # to them, a zeros_like and an add over [batch, units] per iteration
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [4, 6, 3])
    out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(5), x, dtype=tf.float32)
    loss = tf.reduce_sum(out * out)
    grads = tf.gradients(loss, [x] + tf.trainable_variables())
    loops = [op for op in tf.get_default_graph().get_operations()
             if op.type == "while_loop" and "grad" in op.name]
    (loop,) = loops
    body = loop.attrs["body"].graph.operations
    assert not [op.name for op in body if op.type == "zeros_like"]

    value = np.random.default_rng(4).normal(size=(4, 6, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(grads, {x: value})
    assert all(np.isfinite(g).all() and g.any() for g in got)
