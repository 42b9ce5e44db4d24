"""tf.data with strings and files in opsdk.v1 (opsdk/v1/data.py): TextLineDataset and
TFRecordDataset mapped through decode_csv and parse_single_example, string components through
map and batch, as TF's compat.v1 gave them on the same files."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_text_lines_through_decode_csv(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"1,2\n3,4\r\n5,6\n")
    rows = tf.data.TextLineDataset([str(tmp_path / "a.txt")]).map(
        lambda line: tf.decode_csv(line, [[0.0], [0]]))
    x, y = rows.make_one_shot_iterator().get_next()
    raw = tf.data.TextLineDataset(str(tmp_path / "a.txt")).batch(2).make_one_shot_iterator()
    lines = raw.get_next()
    assert lines.get_shape().as_list() == [None]
    with tf.Session() as sess:
        got = [sess.run([x, y]) for _ in range(3)]
        assert [sess.run(lines).tolist(), sess.run(lines).tolist()] == [[b"1,2", b"3,4"],
                                                                       [b"5,6"]]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(x)
    assert [[float(a), int(b)] for a, b in got] == [[1.0, 2], [3.0, 4], [5.0, 6]]


def test_tfrecords_through_parse_single_example_and_batch(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.python_io.TFRecordWriter(path) as writer:
        for i in range(5):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i * 2.0])),
                "w": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"w%d" % i]))}))
                .SerializeToString())

    def parse(record):
        f = tf.parse_single_example(record, {"x": tf.FixedLenFeature([2], tf.float32),
                                             "w": tf.FixedLenFeature([], tf.string)})
        return f["x"], f["w"]
    iterator = tf.data.TFRecordDataset(path).map(parse).batch(2).make_initializable_iterator()
    x, w = iterator.get_next()
    assert w.get_shape().as_list() == [None]
    with tf.Session() as sess:
        sess.run(iterator.initializer)
        got = [sess.run([x, w]) for _ in range(3)]
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]),
                                  [[i, 2 * i] for i in range(5)])
    assert sum((g[1].tolist() for g in got), []) == [b"w0", b"w1", b"w2", b"w3", b"w4"]


def test_string_components_are_mapped_and_padded():
    words = tf.data.Dataset.from_tensor_slices(["a", "bb", "ccc"])
    joined = words.map(lambda s: tf.string_join([s, "!"])).make_one_shot_iterator().get_next()
    pairs = tf.data.Dataset.from_tensor_slices((["x", "y"], [1, 2])).make_one_shot_iterator()
    word, number = pairs.get_next()
    with tf.Session() as sess:
        assert [sess.run(joined) for _ in range(3)] == [b"a!", b"bb!", b"ccc!"]
        assert sess.run([word, number]) == [b"x", 1]


def test_a_missing_file_is_named(tmp_path):
    lines = tf.data.TextLineDataset(str(tmp_path / "none.txt")).make_one_shot_iterator()
    line = lines.get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.NotFoundError, match="none.txt"):
        sess.run(line)


def test_fixed_length_records_and_list_files(tmp_path):
    records = np.arange(14, dtype=np.uint8).reshape(2, 7)
    for name in ("a.bin", "b.bin"):
        (tmp_path / name).write_bytes(b"HH" + records.tobytes() + b"F")
    names = tf.data.Dataset.list_files(str(tmp_path / "*.bin"), shuffle=False)
    pieces = tf.data.FixedLengthRecordDataset(
        [str(tmp_path / "a.bin"), str(tmp_path / "b.bin")], 7, header_bytes=2, footer_bytes=1)
    raw = pieces.map(lambda r: tf.decode_raw(r, tf.uint8)).make_one_shot_iterator().get_next()
    name = names.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = [sess.run(raw) for _ in range(4)]
        listed = [sess.run(name) for _ in range(2)]
    for g, want in zip(got, [records[0], records[1]] * 2):
        np.testing.assert_array_equal(g, want)
    assert listed == [str(tmp_path / "a.bin").encode(), str(tmp_path / "b.bin").encode()]
    with pytest.raises(tf.errors.InvalidArgumentError, match="no files match"):
        tf.data.Dataset.list_files(str(tmp_path / "*.none"))
