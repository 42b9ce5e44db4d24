"""Names the corpus used beyond the first round: tf.assign*, tf.linspace and
tf.contrib.seq2seq.sequence_loss, against NumPy."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_assign_functions_update_the_variable():
    v = tf.Variable(1.0)
    step = tf.assign(v, v + 2.0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(step) == 3.0 and sess.run(tf.assign_add(v, 1.0)) == 4.0
        assert sess.run(tf.assign_sub(v, 0.5)) == 3.5 and sess.run(v) == 3.5
    with pytest.raises(OpsdkError, match="assign: argument 'ref' must be a Variable"):
        tf.assign(tf.constant(1.0), 2.0)


def test_linspace_includes_both_ends():
    x = tf.linspace(-3.0, 3.0, 7)
    assert x.dtype == "float32" and x.shape == (7,)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(x), np.linspace(-3, 3, 7))


def test_sequence_loss_is_the_weighted_mean_cross_entropy():
    rng = np.random.RandomState(0)
    logits, targets = rng.randn(2, 3, 4).astype(np.float32), np.array([[0, 1, 2], [3, 0, 1]])
    weights = np.array([[1, 1, 0], [1, 0.5, 1]], np.float32)
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -np.take_along_axis(log_softmax, targets[..., None], -1)[..., 0]
    both = tf.contrib.seq2seq.sequence_loss(logits, tf.constant(targets), weights)
    per_step = tf.contrib.seq2seq.sequence_loss(logits, tf.constant(targets), weights,
                                                average_across_timesteps=False)
    with tf.Session() as sess:
        got_both, got_steps = sess.run([both, per_step])
    np.testing.assert_allclose(got_both, (ce * weights).sum() / weights.sum(), rtol=1e-5)
    np.testing.assert_allclose(got_steps, (ce * weights).sum(0) / weights.sum(0), rtol=1e-5)


def test_reuse_variables_and_integer_one_hot_labels():
    with tf.variable_scope("d"):
        first = tf.get_variable("w", [2])
        tf.get_variable_scope().reuse_variables()
        assert tf.get_variable("w", [2]) is first
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=tf.constant([[0, 1]]),
                                                   logits=tf.constant([[0.5, 1.5]]))
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(loss), [np.log1p(np.exp(-1.0))], rtol=1e-6)
    tf.reset_default_graph()
    assert tf.get_variable_scope().reuse is False  # a new graph, a fresh root scope


def test_a_new_graph_numbers_default_scope_names_from_the_start():
    # The counts once lived in a table keyed by id(graph): a graph freed and a new one made at
    # the same address (CPython reuses them) started at "kmeans_1" (a flaky k-means test).
    names = []
    for _ in range(20):
        with tf.Graph().as_default():
            with tf.variable_scope(None, default_name="kmeans") as scope:
                names.append(scope.name)
        gc.collect()
    assert names == ["kmeans"] * 20


def test_summaries_merge_and_decode_per_graph_and_die_with_their_graph():
    # Summary layouts and fetch decoders live on their graph: merging a tensor that is not a
    # summary is refused, and nothing of a dropped graph stays alive in a module table.
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [3])
        merged = tf.summary.merge([tf.summary.scalar("mean", tf.reduce_mean(x)),
                                   tf.summary.histogram("x", x)])
        word = tf.constant(b"opsdk")
        with pytest.raises(OpsdkError, match="is not a summary made by"):
            tf.summary.merge([tf.reduce_sum(x)])
        with tf.Session() as sess:
            got, text = sess.run([merged, word], {x: np.arange(3.0)})
    assert isinstance(got, bytes) and b"mean" in got and text == b"opsdk"
    alive = weakref.ref(graph)
    del graph, x, merged, word, sess
    gc.collect()
    assert alive() is None


def test_reentering_a_scope_by_name_numbers_its_default_names_again():
    # golbin's GAN2 and aymericdamien's dcgan build the discriminator twice, the second time
    # under reuse=True: tf.layers' default names must come out the same (TF's rule).
    x = tf.placeholder(tf.float32, [None, 4])

    def discriminator(inputs, reuse=None):
        with tf.variable_scope("D", reuse=reuse):
            hidden = tf.layers.dense(tf.layers.dense(inputs, 3), 2)
            with tf.variable_scope(None, default_name="block"):
                return hidden * tf.get_variable("v", [1])

    real, fake = discriminator(x), discriminator(x * 2.0, reuse=True)
    with tf.variable_scope("D", reuse=tf.AUTO_REUSE):
        with tf.variable_scope(None, default_name="block"):
            tf.get_variable("v", [1])
    assert [v.name for v in tf.global_variables()] == [
        "D/dense/kernel:0", "D/dense/bias:0", "D/dense_1/kernel:0", "D/dense_1/bias:0",
        "D/block/v:0"]
    with tf.variable_scope("E"):
        with tf.variable_scope(None, default_name="block"):
            assert tf.get_variable("w", [1]).name == "E/block/w:0"
        with tf.variable_scope(None, default_name="block"):
            assert tf.get_variable("w", [1]).name == "E/block_1/w:0"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b = sess.run([real, fake], {x: np.ones([1, 4])})
    assert a.shape == b.shape == (1, 2)


def test_assign_converts_numbers_to_the_variables_dtype_where_no_value_changes():
    tf.reset_default_graph()
    step = tf.train.get_or_create_global_step()  # int64
    weight = tf.Variable(1.0)  # float32
    bump, set_weight = tf.assign_add(step, 1), tf.assign(weight, 3)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(bump)
        assert sess.run([step, set_weight]) == [1, 3.0]
    with pytest.raises(OpsdkError, match="is float32; variable 'global_step:0' is int64"):
        tf.assign_add(step, 1.5)  # a value the int64 step cannot hold: refused, as TF does


def test_xw_plus_b_is_a_matmul_and_a_bias_with_their_gradients():
    tf.reset_default_graph()
    x = tf.constant(np.ones((2, 3), np.float32))
    w = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    b = tf.constant(np.array([1.0, -1.0], np.float32))
    y = tf.nn.xw_plus_b(x, w, b)
    gw, gb = tf.gradients(tf.reduce_sum(y), [w, b])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y), [[7.0, 8.0], [7.0, 8.0]])
        np.testing.assert_array_equal(sess.run(gw), np.full((3, 2), 2.0))
        np.testing.assert_array_equal(sess.run(gb), [2.0, 2.0])


def test_layers_take_their_variables_dtype_from_float_inputs_as_tf_does():
    """A float64 model gets float64 weights (TF's layers take the inputs' float dtype): the
    MorvanZhou tf.data tutorial feeds float64 NumPy data straight into tf.layers.dense."""
    x = tf.placeholder(tf.float64, [None, 5, 5, 2])
    c = tf.layers.conv2d(x, 3, 2, activation=tf.nn.relu)
    c1 = tf.layers.conv1d(tf.reshape(x, [-1, 25, 2]), 3, 2)
    y = tf.layers.dense(tf.reshape(c, [-1, 48]), 4)
    kinds = {v.name.split(":")[0]: v.dtype for v in tf.global_variables()}
    assert set(kinds.values()) == {"float64"}, kinds
    assert y.dtype == c1.dtype == "float64"
    loss = tf.reduce_mean(tf.square(y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {x: np.random.default_rng(0).random((3, 5, 5, 2))})
    with tf.variable_scope("given"):
        w = tf.layers.dense(tf.placeholder(tf.float64, [None, 3]), 2, dtype=tf.float64)
    assert w.dtype == "float64"


def test_the_newer_namespaces_reach_the_same_functions():
    """tf.math, tf.random, tf.linalg, tf.initializers, tf.debugging and tf.compat.v1 (TF
    1.13-1.15's spellings) were refused whole; each entry is the top-level function TF's is,
    values as TensorFlow 2.21's compat.v1 gives them (checked by hand)."""
    tf.reset_default_graph()
    assert tf.compat.v1 is tf and tf.math.reduce_sum is tf.reduce_sum
    assert tf.math.softmax is tf.nn.softmax and tf.random.normal is tf.random_normal
    assert tf.initializers.glorot_uniform is tf.glorot_uniform_initializer
    x = tf.constant([-100.0, -1.0, 0.0, 2.0, 100.0])
    with tf.compat.v1.Session() as sess:
        got = sess.run([tf.math.log_sigmoid(x), tf.math.reduce_variance(x),
                        tf.math.reduce_std(x, keepdims=True),
                        tf.math.divide_no_nan(x, tf.constant([0.0, 1.0, 0.0, 2.0, 4.0])),
                        tf.linalg.eye(2), tf.math.top_k(x, 2).values])
    np.testing.assert_allclose(got[0], [-100.0, -1.3132616, -0.6931472, -0.126928, 0.0],
                               rtol=1e-6, atol=1e-30)
    assert got[1] == np.float32(4000.9602) and got[2].shape == (1,)
    np.testing.assert_array_equal(got[3], [0.0, -1.0, 0.0, 1.0, 25.0])
    np.testing.assert_array_equal(got[4], np.eye(2))
    np.testing.assert_array_equal(got[5], [100.0, 2.0])
    with pytest.raises(AttributeError, match="tf.math.bessel_i0 is not provided"):
        tf.math.bessel_i0
    (grad,) = tf.gradients(tf.reduce_sum(tf.math.divide_no_nan(x, tf.zeros([5]))), [x])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(grad), np.zeros(5))


def test_categorical_draws_follow_the_softmax_and_shuffle_permutes_rows():
    """tf.random.categorical / tf.multinomial (Gumbel-max draws, seeded), tf.random_shuffle,
    tf.broadcast_to and tf.norm: refused before."""
    tf.reset_default_graph()
    tf.set_random_seed(3)
    probabilities = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    draws = tf.random.categorical(tf.constant(np.log(probabilities), tf.float32), 20000)
    few = tf.multinomial(tf.zeros([4, 3]), 5, output_dtype=tf.int32)
    rows = tf.constant(np.arange(20.0).reshape(10, 2))
    shuffled = tf.random_shuffle(rows, seed=1)
    (grad,) = tf.gradients(tf.reduce_sum(shuffled * shuffled), [rows])
    x = tf.constant([[3.0, -4.0], [0.0, 1.0]])
    with tf.Session() as sess:
        got, small, order, g, b, flags, norms = sess.run([
            draws, few, shuffled, grad, tf.broadcast_to(tf.constant([1, 2]), [3, 2]),
            tf.broadcast_to(tf.constant([True, False]), [2, 2]),
            [tf.norm(x), tf.norm(x, axis=1), tf.norm(x, ord=1), tf.linalg.norm(x, ord=np.inf)]])
    assert got.dtype == np.int64 and got.shape == (2, 20000)
    for row, p in zip(got, probabilities):
        np.testing.assert_allclose(np.bincount(row, minlength=3) / row.size, p, atol=0.015)
    assert small.dtype == np.int32 and small.shape == (4, 5) and set(small.ravel()) <= {0, 1, 2}
    assert sorted(order[:, 0].tolist()) == list(range(0, 20, 2))
    assert (order[:, 1] == order[:, 0] + 1).all() and order[:, 0].tolist() != list(range(0, 20, 2))
    np.testing.assert_array_equal(g, 2 * np.arange(20.0).reshape(10, 2))
    assert b.tolist() == [[1, 2]] * 3 and flags.tolist() == [[True, False]] * 2
    np.testing.assert_allclose(norms[0], np.sqrt(26.0))
    np.testing.assert_allclose(norms[1], [5.0, 1.0])
    assert norms[2] == 8.0 and norms[3] == 4.0
    with pytest.raises(OpsdkError, match="matrix norm ord=1"):
        tf.norm(x, ord=1, axis=[0, 1])


def test_a_graph_answers_tf1s_lookups_by_name():
    """Graph.get_tensor_by_name / get_operation_by_name (a KeyError for a missing name, as TF
    raises) and tf.get_collection_ref (the live list), refused or absent before; the graph's
    get_all_collection_keys and clear_collection."""
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    with tf.name_scope("scope"):
        z = tf.add(x, 1.0, name="z")
    g = tf.get_default_graph()
    assert g.get_tensor_by_name("scope/z:0") is z and g.get_operation_by_name("x") is x.op
    with pytest.raises(KeyError, match="'nope:0' refers to no tensor"):
        g.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError, match="refers to no operation"):
        g.get_operation_by_name("scope/zz")
    live = tf.get_collection_ref("mine")
    live.append(z)
    assert tf.get_collection("mine") == [z] and "mine" in g.get_all_collection_keys()
    g.clear_collection("mine")
    assert tf.get_collection("mine") == []
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(g.get_tensor_by_name("scope/z:0"),
                                               {g.get_tensor_by_name("x:0"): np.zeros((1, 4))}),
                                      np.ones((1, 4)))


def test_slice_takes_tfs_positional_begin_and_size_known_now_or_at_run_time():
    x = tf.placeholder(tf.float32, [None, 4])
    n = tf.placeholder(tf.int32, [])
    a = np.arange(20, dtype=np.float32).reshape(5, 4)
    now = tf.slice(x, [1, 0], [2, -1])
    late_size = tf.slice(x, [0, 1], [n, 2])
    late_begin = tf.slice(x, tf.stack([n, 0]), [-1, 3])
    grad = tf.gradients(tf.reduce_sum(late_size * 2.0), x)[0]
    with tf.Session() as sess:
        got = sess.run([now, late_size, late_begin, grad], {x: a, n: 2})
        np.testing.assert_array_equal(got[0], a[1:3])
        np.testing.assert_array_equal(got[1], a[0:2, 1:3])
        np.testing.assert_array_equal(got[2], a[2:, 0:3])
        want = np.zeros_like(a)
        want[0:2, 1:3] = 2.0
        np.testing.assert_array_equal(got[3], want)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(tf.slice(x, [4, 0], [3, 1]), {x: a})  # past the end: an error, as TF's
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(tf.slice(x, tf.stack([n, 0]), [3, 1]), {x: a, n: 4})
    with pytest.raises(OpsdkError, match="slice: begin has 1 entries and size 2"):
        tf.slice(x, [0], [1, 1])
    with pytest.raises(OpsdkError, match="slice: size entries must be >= -1"):
        tf.slice(x, [0, 0], [1, -2])


def test_tf_test_answers_whether_a_gpu_is_usable():
    from opsdk.runtime.devices.cuda import probe_cupy

    usable = probe_cupy()[0] is not None
    assert tf.test.is_gpu_available() is usable
    assert tf.test.gpu_device_name() == ("/device:GPU:0" if usable else "")
    assert isinstance(tf.test.is_built_with_cuda(), bool)


def test_a_variables_name_is_its_value_tensors_and_load_and_checkpoints_use_its_node(tmp_path):
    w = tf.get_variable("w", [2], initializer=tf.zeros_initializer())
    assert w.name == "w:0" and w.op.name == "w"
    assert tf.get_default_graph().get_tensor_by_name(w.name).op is w.op
    picked = [v for v in tf.global_variables() if v.name == "w:0"]  # TF1 programs filter so
    assert picked == [w]
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w.load([1.0, 2.0], sess)  # wrote under 'w:0', beside the variable, which kept its value
        np.testing.assert_array_equal(sess.run(w), [1.0, 2.0])
        path = saver.save(sess, str(tmp_path / "model"))
    assert [name for name, _ in tf.train.list_variables(path)] == ["w"]


def test_softmax_cross_entropy_takes_labels_of_another_shape_as_tf_does():
    # A public TF1 program passes labels=tf.stop_gradient([one_hot]) ([1, n, k]) beside [n, k]
    # logits; TF flattens both to rows, broadcasts a single row, and shapes the losses as the
    # logits' rows. Before, opsdk.v1 refused the shapes.
    rng = np.random.default_rng(0)
    logits_value = rng.standard_normal((3, 4)).astype(np.float32)
    logits = tf.constant(logits_value)
    wrapped = tf.nn.softmax_cross_entropy_with_logits_v2(labels=[tf.one_hot([1, 2, 0], 4)],
                                                         logits=logits)
    one_row = tf.nn.softmax_cross_entropy_with_logits_v2(labels=[[0.0, 1.0, 0.0, 0.0]],
                                                         logits=logits)
    grad, = tf.gradients(tf.reduce_sum(wrapped), [logits])
    assert wrapped.get_shape().as_list() == [3] and one_row.get_shape().as_list() == [3]
    log_p = logits_value - np.log(np.exp(logits_value).sum(1, keepdims=True))
    with tf.Session() as sess:
        got, row, got_grad = sess.run([wrapped, one_row, grad])
    np.testing.assert_allclose(got, -log_p[[0, 1, 2], [1, 2, 0]], rtol=1e-5)
    np.testing.assert_allclose(row, -log_p[:, 1], rtol=1e-5)
    np.testing.assert_allclose(got_grad, np.exp(log_p) - np.eye(4)[[1, 2, 0]], rtol=1e-5,
                               atol=1e-6)


def _conv_reference(x, f, dilation=1, stride=1, same=True):
    """Direct NHWC convolution (cross-correlation), TF's SAME/VALID padding, a dilated filter."""
    kh, kw = (f.shape[0] - 1) * dilation + 1, (f.shape[1] - 1) * dilation + 1
    n, h, w, _ = x.shape
    if same:
        oh, ow = -(-h // stride), -(-w // stride)
        ph, pw = max((oh - 1) * stride + kh - h, 0), max((ow - 1) * stride + kw - w, 0)
        x = np.pad(x, [(0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)])
    else:
        oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    out = np.zeros((n, oh, ow, f.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh:dilation, j * stride:j * stride + kw:dilation]
            out[:, i, j] = np.tensordot(patch, f, axes=3)
    return out


def test_dilated_depthwise_and_separable_convolutions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 6, 3))
    f = rng.standard_normal((3, 3, 3, 4))
    dw = rng.standard_normal((3, 3, 3, 2))
    pw = rng.standard_normal((1, 1, 6, 5))
    xt, ft = tf.constant(x), tf.placeholder(tf.float64, [3, 3, 3, 4])
    atrous = tf.nn.atrous_conv2d(xt, ft, 2, "SAME")
    grad, = tf.gradients(tf.reduce_sum(atrous ** 2), [ft])
    depth = tf.nn.depthwise_conv2d(xt, tf.constant(dw), [1, 2, 2, 1], "VALID")
    sep = tf.nn.separable_conv2d(xt, tf.constant(dw), tf.constant(pw), [1, 1, 1, 1], "SAME")
    with tf.Session() as sess:
        a, v, d, s, g = sess.run([atrous, tf.nn.atrous_conv2d(xt, ft, 2, "VALID"), depth, sep,
                                  grad], {ft: f})
        from finite_differences import numeric_grad
        np.testing.assert_allclose(g, numeric_grad(sess, tf.reduce_sum(atrous ** 2), ft,
                                                   {ft: f}), rtol=1e-5)
    np.testing.assert_allclose(a, _conv_reference(x, f, 2), rtol=1e-10)
    np.testing.assert_allclose(v, _conv_reference(x, f, 2, same=False), rtol=1e-10)
    per_channel = [_conv_reference(x[..., c:c + 1], dw[:, :, c:c + 1], stride=2, same=False)
                   for c in range(3)]
    np.testing.assert_allclose(d, np.concatenate(per_channel, axis=3), rtol=1e-10)
    deep = np.concatenate([_conv_reference(x[..., c:c + 1], dw[:, :, c:c + 1]) for c in range(3)],
                          axis=3)
    np.testing.assert_allclose(s, np.tensordot(deep, pw[0, 0], axes=1), rtol=1e-10)


def test_crelu_poisson_loss_and_moments():
    z, c = np.array([0.0, 0.5, 1.0, 2.0, 5.0]), np.array([0.1, -0.3, 0.2, 1.0, 1.5])
    x = np.random.default_rng(1).standard_normal((4, 3))
    w = np.array([[1.0], [2.0], [0.5], [3.0]])
    with tf.Session() as sess:
        crelu, plain, full, (mean, var), (wmean, wvar) = sess.run([
            tf.nn.crelu(c), tf.nn.log_poisson_loss(z, c),
            tf.nn.log_poisson_loss(z, c, compute_full_loss=True),
            tf.nn.normalize_moments(*tf.nn.sufficient_statistics(x, [0])[:3], None),
            tf.nn.weighted_moments(x, [0], w)])
    np.testing.assert_allclose(crelu, np.concatenate([np.maximum(c, 0), np.maximum(-c, 0)]))
    np.testing.assert_allclose(plain, np.exp(c) - c * z)
    stirling = np.where(z > 1, z * np.log(np.where(z > 1, z, 1)) - z + 0.5 * np.log(
        2 * np.pi * np.where(z > 1, z, 1)), 0)
    np.testing.assert_allclose(full, np.exp(c) - c * z + stirling)
    np.testing.assert_allclose(mean, x.mean(0))
    np.testing.assert_allclose(var, x.var(0))
    weights = np.broadcast_to(w, x.shape)
    np.testing.assert_allclose(wmean, (x * weights).sum(0) / weights.sum(0))
    np.testing.assert_allclose(wvar, ((x - wmean) ** 2 * weights).sum(0) / weights.sum(0))


def test_scatter_updates_of_variables_give_tensorflows_values():
    """tf.scatter_update/add/sub and the _nd forms, one after another (the values TF's
    compat.v1 gave for these calls): rows by index (a scalar, a list, an int tensor, indices of
    rank 2), elements by coordinate, ints, repeated rows adding up."""
    v = tf.Variable(np.arange(12.0).reshape(4, 3), name="v")
    w = tf.Variable(np.zeros((2, 3), np.float32), name="w")
    k = tf.Variable(np.arange(5), name="k")
    updates = [tf.scatter_update(v, [2, 0], [[1.0, 1, 1], [2, 2, 2]]),
               tf.scatter_add(v, tf.constant([1, 1, 3]), np.ones((3, 3))),
               tf.scatter_sub(v, [[0], [3]], np.full((2, 1, 3), 0.5)),
               tf.scatter_nd_update(v, [[0, 0], [3, 2]], [-1.0, -2.0]),
               tf.scatter_nd_add(w, [[1]], [[1.0, 2.0, 3.0]]),
               tf.scatter_nd_sub(k, [[4], [0]], [10, 20]),
               tf.scatter_add(k, 2, 100)]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = [sess.run(u).tolist() for u in updates]
    assert got == [
        [[2.0, 2.0, 2.0], [3.0, 4.0, 5.0], [1.0, 1.0, 1.0], [9.0, 10.0, 11.0]],
        [[2.0, 2.0, 2.0], [5.0, 6.0, 7.0], [1.0, 1.0, 1.0], [10.0, 11.0, 12.0]],
        [[1.5, 1.5, 1.5], [5.0, 6.0, 7.0], [1.0, 1.0, 1.0], [9.5, 10.5, 11.5]],
        [[-1.0, 1.5, 1.5], [5.0, 6.0, 7.0], [1.0, 1.0, 1.0], [9.5, 10.5, -2.0]],
        [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]], [-20, 1, 2, 3, -6], [-20, 1, 102, 3, -6]]
    with pytest.raises(OpsdkError, match="scatter_update: argument 'ref' must be a Variable"):
        tf.scatter_update(tf.constant([1.0]), [0], [2.0])


def test_indices_and_expand_dims_of_a_rank_known_only_at_run_time():
    # expand_dims read the rank when the graph was built (TypeError on an unshaped placeholder),
    # so scatter_update of such indices failed; the values are TF's on the same script
    v = tf.Variable(np.zeros((5, 2), np.float32))
    i, u = tf.placeholder(tf.int32), tf.placeholder(tf.float32)
    add = tf.scatter_add(v, i, u)
    x = tf.placeholder(tf.float32)
    grown = [tf.expand_dims(x, axis) for axis in (0, 1, -1, -3)]
    assert all(t.get_shape().dims is None for t in grown)
    (grad,) = tf.gradients(tf.reduce_sum(grown[1] * 3.0), [x])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(add, {i: [1, 3], u: [[1, 2], [3, 4]]})
        sess.run(add, {i: 2, u: [5, 6]})
        got = sess.run(add, {i: [[0], [4]], u: [[[1, 1]], [[2, 2]]]})
        np.testing.assert_array_equal(got, [[1, 1], [1, 2], [5, 6], [3, 4], [2, 2]])
        values = sess.run(grown + [grad], {x: np.ones((2, 3))})
        assert [a.shape for a in values] == [(1, 2, 3), (2, 1, 3), (2, 3, 1), (1, 2, 3), (2, 3)]
        np.testing.assert_array_equal(values[-1], np.full((2, 3), 3.0))
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"expand_dims.*axis -3 is out of range for x of rank 1"):
            sess.run(grown[3], {x: np.ones(4)})
