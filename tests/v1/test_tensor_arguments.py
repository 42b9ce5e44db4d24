"""Arguments TF1 takes as a number or a tensor (opsdk/v1/args.py), shapes known only at run
time, and 0-d values that stay 0-d."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_a_python_number_constant_is_0d_through_kernels_to_fetches():
    a, b = tf.constant(2), tf.constant(3)
    assert a.get_shape().as_list() == [] and (a + b).shape == ()
    with tf.Session() as sess:
        total = sess.run(a + b)
    assert np.shape(total) == () and "%i" % total == "5"
    assert tf.constant(2.5, shape=[2]).shape == (2,)


def test_a_scalar_variable_trains_with_gradient_descent():
    w, b = tf.Variable(0.3), tf.Variable(-0.3)
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    loss = tf.reduce_sum(tf.square(w * x + b - y))
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    feed = {x: [1, 2, 3, 4], y: [0, -1, -2, -3]}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(1000):
            sess.run(train, feed)
        got_w, got_b, final = sess.run([w, b, loss], feed)
    assert np.shape(got_w) == () and abs(got_w + 1) < 1e-2 and abs(got_b - 1) < 3e-2
    assert final < 1e-3


def test_random_ops_take_tensors_for_their_parameters_and_shape():
    x = tf.placeholder(tf.float32, [None, 3])
    s = tf.placeholder(tf.float32, [])
    normal = tf.random_normal(tf.shape(x), mean=10.0, stddev=s)
    uniform = tf.random_uniform([tf.shape(x)[0], 3], minval=-s, maxval=s)
    truncated = tf.truncated_normal([2000], stddev=s * 2)
    assert normal.get_shape().as_list() == [None, 3] and uniform.shape == (None, 3)
    with tf.Session() as sess:
        n, u, t = sess.run([normal, uniform, truncated], {x: np.zeros((1000, 3)), s: 0.5})
    assert n.shape == (1000, 3) and u.shape == (1000, 3) and n.dtype == np.float32
    assert abs(n.mean() - 10) < 0.05 and abs(n.std() - 0.5) < 0.05
    assert -0.5 <= u.min() and u.max() < 0.5 and abs(u.mean()) < 0.05
    assert np.abs(t).max() <= 2.0 and abs(t.std() - 0.88) < 0.1  # truncated at 2 stddev (1.0)


def test_static_arguments_given_as_tensors_build_the_same_nodes():
    known = tf.random_normal(tf.shape(tf.zeros([2, 3])), stddev=tf.constant(0.5), seed=1)
    assert known.op.type == "random_normal" and known.op.attrs["stddev"] == 0.5
    assert known.op.attrs["shape"] == (2, 3)


def test_zeros_ones_and_fill_take_run_time_shapes():
    x = tf.placeholder(tf.float32, [None, 4])
    z = tf.zeros([tf.shape(x)[0], 10])
    o = tf.ones(tf.shape(x), tf.int32)
    f = tf.fill(tf.shape(x), tf.reduce_sum(x))
    assert z.get_shape().as_list() == [None, 10]
    with tf.Session() as sess:
        got = sess.run([z, o, f], {x: np.ones((3, 4))})
    assert got[0].shape == (3, 10) and not got[0].any()
    assert got[1].dtype == np.int32 and (got[1] == 1).all() and got[1].shape == (3, 4)
    assert (got[2] == 12).all()


def test_reshape_and_split_take_run_time_sizes():
    x = tf.placeholder(tf.float32, [None, 4])
    parts = tf.split(x, 2, 0)
    r = tf.reshape(x, [tf.shape(x)[0], 2, 2])
    assert [p.shape for p in parts] == [(None, 4), (None, 4)] and r.shape == (None, 2, 2)
    value = np.arange(24, dtype=np.float32).reshape(6, 4)
    with tf.Session() as sess:
        first, second, reshaped = sess.run(parts + [r], {x: value})
        np.testing.assert_array_equal(first, value[:3])
        np.testing.assert_array_equal(second, value[3:])
        assert reshaped.shape == (6, 2, 2)
        with pytest.raises(OpsdkError, match="split"):
            sess.run(parts, {x: value[:5]})


def test_an_int_placeholder_shape_is_1d_and_tf1_spellings_exist():
    assert tf.placeholder(tf.float32, shape=(5)).shape == (5,)
    x = tf.constant([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    with tf.Session() as sess:
        got = sess.run([tf.arg_max(x, 1), tf.arg_min(x, 1), tf.reduce_sum(x, tf.constant(1))])
    assert got[0].tolist() == [1, 0] and got[1].tolist() == [0, 1] and got[2].tolist() == [8, 10]


@pytest.mark.parametrize("call, message", [
    (lambda: tf.random_normal([2], stddev="big"), r"random_normal: argument 'stddev' must be a number"),
    (lambda: tf.random_uniform([2], maxval=[1, 2]), r"random_uniform: argument 'maxval' must be a number"),
    (lambda: tf.zeros("abc"), r"zeros: argument 'shape' must be a list of ints"),
    (lambda: tf.zeros([2.5]), r"zeros: argument 'shape' has a non-integer size"),
    (lambda: tf.split(tf.zeros([4]), tf.placeholder(tf.int32, [])),
     r"split: argument 'num_or_size_splits' .* must be known when the graph is built"),
    (lambda: tf.zeros(tf.constant([[2]])), r"zeros: argument 'shape' .* must be a 1-d"),
])
def test_bad_arguments_name_the_function_and_the_argument(call, message):
    with pytest.raises(OpsdkError, match=message):
        call()


def test_numbers_in_a_stacked_list_take_the_dtype_of_its_tensors():
    x = tf.placeholder(tf.float32, [None, 3])
    batch64 = tf.cast(tf.shape(x)[0], tf.int64)
    shapes = [tf.stack([batch64, 4]), tf.stack([[1, 2], [batch64, 3]]),
              tf.convert_to_tensor([tf.shape(x)[0], 7]), tf.stack([1, 2, 3])]
    mixed = tf.stack([1.5, tf.constant(2.0, tf.float64)], axis=0)
    assert [s.dtype for s in shapes] == ["int64", "int64", "int32", "int32"]
    assert mixed.dtype == "float64"
    with tf.Session() as sess:
        got = sess.run(shapes + [mixed], {x: np.zeros([5, 3])})
    assert [g.tolist() for g in got] == [[5, 4], [[1, 2], [5, 3]], [5, 7], [1, 2, 3], [1.5, 2.0]]
    with pytest.raises(OpsdkError, match=r"stack: element 0 \(1.5\) is not a value of dtype "
                                         "int64, the dtype of the list's tensors"):
        tf.stack([1.5, batch64])
    with pytest.raises(OpsdkError, match="stack: element 1 is tensor 'Const.*' of dtype int32, "
                                         r"the list's tensors are int64 \(cast it first\)"):
        tf.stack([batch64, tf.constant(1)])


def test_range_with_run_time_bounds_runs_the_arange_op():
    x = tf.placeholder(tf.float32, [None, 3])
    rows = tf.range(0, tf.shape(x)[0]) * 3 + 2  # aymericdamien's dynamic_rnn indexing
    halves = tf.range(1.0, tf.cast(tf.shape(x)[0], tf.float32), 0.5)
    down = tf.range(tf.shape(x)[0], 0, -2)
    assert rows.dtype == "int32" and rows.get_shape().as_list() == [None]
    with tf.Session() as sess:
        got = sess.run([rows, halves, down], {x: np.zeros([4, 3])})
        assert got[0].tolist() == [2, 5, 8, 11] and got[2].tolist() == [4, 2]
        assert got[1].tolist() == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
        with pytest.raises(OpsdkError, match=r"arange \(node 'range.*'\): input 'delta' is 0"):
            sess.run(tf.range(0, tf.shape(x)[0], 0), {x: np.zeros([4, 3])})
    with pytest.raises(OpsdkError, match=r"range: element 0 \(1.5\) is not a value of dtype int32"):
        tf.range(1.5, tf.shape(x)[0])


def test_a_tensors_shape_answers_as_tensorflows_does():
    """`x.shape.as_list()` and the other questions TF1 programs ask of `tensor.shape` and
    `variable.shape` (the shape was a plain tuple, which has no as_list); items are ints or None,
    as in TensorFlow 2's compat.v1."""
    x = tf.placeholder(tf.float32, [None, 3, 4])
    w = tf.Variable(tf.zeros([3, 5]))
    v = tf.get_variable("v", [2, 2])
    assert x.shape.as_list() == [None, 3, 4] and w.shape.as_list() == [3, 5]
    assert v.shape.as_list() == [2, 2] and tf.reshape(x, [-1, 12]).shape.as_list() == [None, 12]
    assert x.shape[1:].as_list() == [3, 4] and x.shape[1] == 3 and x.shape[0] is None
    assert x.shape.ndims == 3 and x.shape.rank == 3 and w.shape.num_elements() == 15
    assert not x.shape.is_fully_defined() and w.shape.is_fully_defined()
    assert x.shape.num_elements() is None
    assert x.shape.is_compatible_with([7, 3, 4]) and not x.shape.is_compatible_with([7, 3])
    assert x.shape == (None, 3, 4) and isinstance(x.shape, tuple)
    # printed as TF1 prints get_shape(): `print(x.get_shape())` is a common line
    assert str(x.get_shape()) == "(?, 3, 4)" and str(x.get_shape()[0]) == "?"
    assert str(tf.constant([1, 2]).get_shape()) == "(2,)"
    assert str(tf.constant(1.0).get_shape()) == "()"
    assert str(tf.placeholder(tf.float32).get_shape()) == "<unknown>"
    zeros = tf.zeros(w.shape.as_list())  # the idiom that failed
    with tf.Session() as sess:
        assert sess.run(zeros).shape == (3, 5)


def test_a_0d_fetch_is_a_numpy_scalar_as_tensorflows_session_gives():
    """sess.run of a 0-d tensor gives np.float32(6.0) (it was a 0-d array): usable as a dict
    key, with a scalar's repr; in lists, dicts, namedtuples and through Tensor.eval alike."""
    import collections

    pair = collections.namedtuple("pair", "a b")
    c = tf.constant(2.0)
    with tf.Session() as sess:
        alone = sess.run(c * 3)
        nested = sess.run([c, {"k": c, "v": tf.ones([2])}, pair(c, tf.constant(1)), (c,)])
        evaluated = c.eval()
    assert type(alone) is np.float32 and repr(alone) == repr(np.float32(6.0))
    assert {alone: "key"}[np.float32(6.0)] == "key"
    assert type(nested[0]) is np.float32 and type(nested[1]["k"]) is np.float32
    assert nested[1]["v"].shape == (2,) and type(nested[2].b) is np.int32
    assert isinstance(nested[2], pair) and type(nested[3][0]) is np.float32
    assert type(evaluated) is np.float32


def test_a_tensors_dtype_answers_as_a_tensorflow_dtype_does():
    """`x.dtype.name`, `.base_dtype`, `.is_floating`, `.as_numpy_dtype` and the like: the dtype
    was a plain str, which has none of them; it still equals tf.float32 and 'float32'."""
    x = tf.placeholder(tf.float32, [None, 2])
    i = tf.constant([1, 2], dtype=tf.int64)
    b = tf.constant([True])
    assert x.dtype == tf.float32 and x.dtype == "float32" and x.dtype.name == "float32"
    assert x.dtype.base_dtype == tf.float32 and x.dtype.is_floating and not x.dtype.is_integer
    assert i.dtype.is_integer and not i.dtype.is_unsigned and b.dtype.is_bool
    assert x.dtype.as_numpy_dtype is np.float32 and i.dtype.size == 8
    assert i.dtype.max == np.iinfo(np.int64).max and x.dtype.min == np.finfo(np.float32).min
    zeros = np.zeros(3, dtype=x.dtype.as_numpy_dtype)
    with tf.Session() as sess:
        assert sess.run(x, {x: zeros[None, :2]}).dtype == np.float32
    v = tf.Variable(tf.zeros([2]))
    assert v.dtype.base_dtype == tf.float32
