"""tf.data (opsdk/v1/data.py): pipelines read through iterators, against NumPy and, where
TensorFlow is installed, against its compat.v1 element by element."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _drain(sess, element, limit=1000):
    out = []
    try:
        for _ in range(limit):
            out.append(sess.run(element))
    except tf.errors.OutOfRangeError:
        return out
    raise AssertionError("the iterator did not end")


def test_slices_mapped_and_batched_end_with_out_of_range():
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.arange(5)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2.0, b + 1)).batch(2)
    assert ds.output_types == (np.float32, np.int64)
    assert [s.as_list() for s in ds.output_shapes] == [[None, 2], [None]]
    a, b = ds.make_one_shot_iterator().get_next()
    assert a.shape == (None, 2) and b.shape == (None,)
    with tf.Session() as sess:
        got = _drain(sess, [a, b])
    assert len(got) == 3
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), x * 2)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), y + 1)
    assert got[-1][0].shape == (1, 2)  # the remainder


def test_a_placeholder_is_fed_at_initialization_and_a_rerun_starts_again():
    p = tf.placeholder(tf.float32, [None, 3])
    it = tf.data.Dataset.from_tensor_slices(p).batch(2).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
            sess.run(nxt)
        sess.run(it.initializer, {p: np.ones((3, 3))})
        first = sess.run(nxt)
        sess.run(it.initializer, {p: np.zeros((5, 3))})
        again = _drain(sess, nxt)
    np.testing.assert_array_equal(first, np.ones((2, 3)))
    assert [a.shape[0] for a in again] == [2, 2, 1] and not any(a.any() for a in again)


def test_two_get_next_nodes_read_two_elements_and_a_fed_element_reads_none():
    it = tf.data.Dataset.range(10).make_one_shot_iterator()
    a, b = it.get_next(), it.get_next()
    with tf.Session() as sess:
        first = sess.run([a, b])
        assert sorted(first) == [0, 1]
        assert sess.run(a + b, {a: 100, b: 200}) == 300  # fed: the iterator does not move
        assert sess.run(a) == 2


def test_shuffle_draws_a_permutation_seeded_and_reshuffles_per_epoch():
    def epochs(**kw):
        tf.reset_default_graph()
        ds = tf.data.Dataset.range(20).shuffle(20, seed=7, **kw).batch(20).repeat(2)
        nxt = ds.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            return [list(e) for e in _drain(sess, nxt)]
    one, two = epochs(), epochs()
    assert one == two  # seeded: the same orders in a new graph
    assert sorted(one[0]) == list(range(20)) and one[0] != one[1] != list(range(20))
    same = epochs(reshuffle_each_iteration=False)
    assert same[0] == same[1] and sorted(same[0]) == list(range(20))
    tf.reset_default_graph()
    tf.set_random_seed(3)  # the graph-level seed seeds a shuffle without its own
    nxt = tf.data.Dataset.range(50).shuffle(50).batch(50).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        seeded = list(sess.run(nxt))
    tf.reset_default_graph()
    tf.set_random_seed(3)
    nxt = tf.data.Dataset.range(50).shuffle(50).batch(50).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert list(sess.run(nxt)) == seeded


def test_a_small_buffer_shuffles_nearby_elements_only():
    nxt = tf.data.Dataset.range(100).shuffle(5, seed=1).batch(100).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        order = sess.run(nxt)
    assert sorted(order) == list(range(100))
    # an element leaves the buffer at the earliest 4 places before its own
    assert all(pos >= value - 4 for pos, value in enumerate(order))


def test_structure_switching_iterator_reads_either_dataset():
    train = tf.data.Dataset.from_tensor_slices({"x": np.ones((4, 2), np.float32),
                                                "y": np.arange(4, dtype=np.int32)}).batch(2)
    test = tf.data.Dataset.from_tensor_slices({"x": np.zeros((3, 2), np.float32),
                                               "y": np.arange(3, dtype=np.int32)}).batch(3)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    element = it.get_next()
    assert sorted(element) == ["x", "y"] and element["x"].shape == (None, 2)
    use_train, use_test = it.make_initializer(train), it.make_initializer(test)
    with tf.Session() as sess:
        sess.run(use_train)
        assert sess.run(element)["x"].sum() == 4
        sess.run(use_test)
        got = sess.run(element)
        assert got["x"].shape == (3, 2) and not got["x"].any()
    wrong = tf.data.Dataset.from_tensor_slices({"x": np.zeros((3, 2), np.float64),
                                                "y": np.arange(3, dtype=np.int32)})
    with pytest.raises(OpsdkError, match="elements .* differ from the iterator's"):
        it.make_initializer(wrong)


def test_a_model_trains_on_a_repeated_shuffled_dataset():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(256, 3)).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.25
    x, y = (tf.data.Dataset.from_tensor_slices((xs, ys)).shuffle(256, seed=2).batch(32)
            .repeat().make_one_shot_iterator().get_next())
    pred = tf.layers.dense(x, 1)
    loss = tf.reduce_mean(tf.square(pred - y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        losses = [sess.run([train, loss])[1] for _ in range(200)]
    assert losses[-1] < 1e-3 < losses[0]


def test_from_generator_checks_what_it_yields():
    def gen():
        yield np.ones(3), 1
        yield np.ones(4), 2
    ds = tf.data.Dataset.from_generator(gen, (tf.float32, tf.int32), ([3], []))
    a, b = ds.make_one_shot_iterator().get_next()
    assert a.shape == (3,) and b.shape == ()
    with tf.Session() as sess:
        assert sess.run(b) == 1
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"component 0 has shape \[4\], but the dataset declares \[3\]"):
            sess.run(a)


def test_batches_of_unlike_shapes_are_refused_and_padded_batch_pads_them():
    def gen():
        for n in (1, 3, 2):
            yield np.arange(n, dtype=np.int32) + 1
    ds = tf.data.Dataset.from_generator(gen, tf.int32, [None])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="cannot batch component 0"):
            sess.run(ds.batch(3).make_one_shot_iterator().get_next())
        padded = ds.padded_batch(3, padded_shapes=[None], padding_values=-1)
        got = sess.run(padded.make_one_shot_iterator().get_next())
        fixed = sess.run(ds.padded_batch(2, [4]).make_one_shot_iterator().get_next())
    np.testing.assert_array_equal(got, [[1, -1, -1], [1, 2, 3], [1, 2, -1]])
    np.testing.assert_array_equal(fixed, [[1, 0, 0, 0], [1, 2, 3, 0]])


def test_mistakes_are_named():
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(OpsdkError, match="first dimensions differ"):
        tf.data.Dataset.from_tensor_slices((np.ones(3), np.ones(4)))
    with pytest.raises(OpsdkError, match="component 0 is a scalar"):
        tf.data.Dataset.from_tensor_slices(np.float32(1))
    with pytest.raises(OpsdkError, match="reads placeholder 'Placeholder:0'.*initializable"):
        tf.data.Dataset.from_tensor_slices(p).make_one_shot_iterator()
    with pytest.raises(OpsdkError, match="numbers, bools and strings"):
        tf.data.Dataset.from_tensor_slices(np.array([1 + 2j, 3j]))
    with pytest.raises(OpsdkError, match="batch_size must be a Python int >= 1"):
        tf.data.Dataset.range(3).batch(0)
    with pytest.raises(OpsdkError, match="one scalar bool tensor"):
        tf.data.Dataset.range(3).filter(lambda v: v + 1)
    outer = tf.constant(1, tf.int64)
    with pytest.raises(OpsdkError, match="different graphs"):
        tf.data.Dataset.range(3).map(lambda v: v + outer)
    with pytest.raises(AttributeError, match="opsdk.v1 does not provide tf.data.NumpyIterator"):
        tf.data.NumpyIterator
    with pytest.raises(OpsdkError, match="scalar strings only"):
        tf.placeholder(tf.string, [2])
    handle = tf.placeholder(tf.string, [])
    feedable = tf.data.Iterator.from_string_handle(handle, tf.int64)
    with pytest.raises(OpsdkError, match="initialize that one"):
        feedable.make_initializer(tf.data.Dataset.range(3))
    with pytest.raises(OpsdkError, match="string tensor the handle is fed to"):
        tf.data.Iterator.from_string_handle("train", tf.int64)
    with pytest.raises(AttributeError, match="opsdk.v1's Dataset has no 'window'"):
        tf.data.Dataset.range(3).window
    with pytest.raises(OpsdkError, match="iterated in a session"):
        iter(tf.data.Dataset.range(3))


def _pipelines(fw):
    """Pipelines without randomness, built with either framework's tf.data (`fw`: opsdk.v1 or
    TensorFlow's compat.v1)."""
    D = fw.data.Dataset
    squares = D.range(12).map(lambda v: v * v)
    return {
        "filter_batch": squares.filter(lambda v: fw.equal(v % 2, 0)).batch(4),
        "drop_remainder": D.range(10).batch(3, drop_remainder=True),
        "zip_enumerate": D.zip((D.range(5), squares)).enumerate(start=3).take(4),
        "skip_shard_concat": D.range(20).skip(3).shard(4, 1).concatenate(D.range(2)),
        "unbatch_repeat": D.range(6).batch(4).unbatch().repeat(2).take(9),
        "padded": D.range(1, 5).map(lambda v: fw.fill(fw.reshape(v, [1]), v)).padded_batch(2, [None]),
        "cache_repeat": D.range(3).cache().repeat(3),
        "flat_map": D.range(1, 4).flat_map(
            lambda v: D.from_tensor_slices(fw.fill(fw.reshape(v, [1]), v))),
        "interleave": D.range(1, 6).interleave(
            lambda v: D.from_tensors(v).repeat(v), cycle_length=2, block_length=2),
        "interleave_blocks": D.range(1, 8).interleave(
            lambda v: D.zip((D.range(v), D.from_tensors(v).repeat())), cycle_length=3,
            block_length=1),
        "dict_map": D.from_tensor_slices({"a": np.arange(6.0).reshape(3, 2),
                                          "b": np.arange(3)}).map(lambda e: (e["a"] * 2.0,
                                                                             e["b"] + 1)),
    }


def _leaves(element):
    if isinstance(element, dict):
        return [v for k in sorted(element) for v in _leaves(element[k])]
    if isinstance(element, (list, tuple)):
        return [v for e in element for v in _leaves(e)]
    return [np.asarray(element)]


def _elements(fw, name):
    fw.reset_default_graph()
    nxt = fw.data.make_one_shot_iterator(_pipelines(fw)[name]).get_next()
    with fw.Session() as sess:
        out = []
        while True:
            try:
                out.append(_leaves(sess.run(nxt)))
            except fw.errors.OutOfRangeError:
                return out


@pytest.mark.parametrize("name", sorted(_pipelines(tf)))
def test_pipelines_give_the_elements_tensorflow_gives(name):
    mine = _elements(tf, name)
    assert mine  # each pipeline has elements
    tensorflow = pytest.importorskip("tensorflow", reason="the comparison needs TensorFlow "
                                     "(pip install opsdk[tf])")
    theirs_tf = tensorflow.compat.v1
    theirs_tf.disable_eager_execution()
    theirs = _elements(theirs_tf, name)
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            assert u.dtype == v.dtype
            np.testing.assert_array_equal(u, v)


def _switched(fw):
    """TF1's feedable-iterator idiom: one get_next reading a repeated training dataset (one-shot)
    or a validation dataset (initializable), chosen per run by the handle fed."""
    fw.reset_default_graph()
    D = fw.data.Dataset
    train = D.from_tensor_slices((np.arange(10, dtype=np.float32), np.arange(10))).batch(4)
    train = train.repeat()
    val = D.from_tensor_slices((np.arange(100, 106, dtype=np.float32), np.arange(6))).batch(4)
    handle = fw.placeholder(fw.string, shape=[])
    iterator = fw.data.Iterator.from_string_handle(handle, fw.data.get_output_types(train),
                                                   fw.data.get_output_shapes(train))
    x, y = iterator.get_next()
    total = fw.reduce_sum(x) + fw.cast(fw.reduce_sum(y), fw.float32)
    train_it = fw.data.make_one_shot_iterator(train)
    val_it = fw.data.make_initializable_iterator(val)
    out = []
    with fw.Session() as sess:
        th, vh = sess.run([train_it.string_handle(), val_it.string_handle()])
        assert isinstance(th, bytes) and th != vh
        out += [sess.run([x, y], {handle: th}) for _ in range(2)]
        for _ in range(2):  # two validation passes, training in between
            sess.run(val_it.initializer)
            while True:
                try:
                    out.append(sess.run([total], {handle: vh}))
                except fw.errors.OutOfRangeError:
                    break
            out.append(sess.run([x, y], {handle: th}))
        try:
            sess.run(x, {handle: b"no such iterator"})
            out.append("no error")
        except fw.errors.InvalidArgumentError:
            out.append("invalid")
    return out


def test_a_feedable_iterator_switches_between_datasets_as_tensorflows_does():
    mine = _switched(tf)
    assert mine[-1] == "invalid" and len(mine) == 9
    np.testing.assert_array_equal(mine[2][0], 100 + 101 + 102 + 103 + 0 + 1 + 2 + 3)
    tensorflow = pytest.importorskip("tensorflow", reason="the comparison needs TensorFlow "
                                     "(pip install opsdk[tf])")
    theirs_tf = tensorflow.compat.v1
    theirs_tf.disable_eager_execution()
    theirs = _switched(theirs_tf)
    assert len(mine) == len(theirs) and theirs[-1] == "invalid"
    for a, b in zip(mine[:-1], theirs[:-1]):
        for u, v in zip(a, b):
            assert np.asarray(u).dtype == np.asarray(v).dtype
            np.testing.assert_array_equal(u, v)


def test_a_string_placeholder_is_fed_str_or_bytes_and_fetched_as_bytes():
    p = tf.placeholder(tf.string, shape=[], name="path")
    with tf.Session() as sess:
        assert sess.run(p, {p: "data/train.bin"}) == b"data/train.bin"
        assert sess.run(p, {p: b"\xff\x00"}) == b"\xff\x00"
        with pytest.raises(TypeError, match="string placeholder 'path:0' must be a str or bytes"):
            sess.run(p, {p: 3})
