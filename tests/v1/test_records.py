"""TFRecord files, tf.train.Example and its parsing in opsdk.v1 (opsdk/v1/records.py): the bytes
TensorFlow writes for the same messages, files round trip (compressed too), corruption named,
and parsing through a TFRecordReader and a batch, as TF parses them."""

from __future__ import annotations

import numpy as np
import pytest

import opsdk.v1 as tf

# TF 2.21's SerializeToString() of these one-feature Examples (map order plays no part)
GOLDEN = {
    "0a180a160a017612111a0f0a0d00ffffffffffffffffff01ac02":
        ("v", "int64_list", tf.train.Int64List, [0, -1, 300]),
    "0a130a110a0166120c120a0a080000c03f000000c0":
        ("f", "float_list", tf.train.FloatList, [1.5, -2.0]),
    "0a100a0e0a016212090a070a036162000a00":
        ("b", "bytes_list", tf.train.BytesList, [b"ab\x00", b""]),
}


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i, -i])),
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5 * i, 1.0, 2.5])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"item%d" % i, b""])),
        "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i)))),
        "zero": tf.train.Feature(int64_list=tf.train.Int64List(value=[0])),
    }))


FEATURES = {"label": tf.FixedLenFeature([2], tf.int64), "x": tf.FixedLenFeature([3], tf.float32),
            "name": tf.FixedLenFeature([2], tf.string), "tags": tf.VarLenFeature(tf.int64),
            "zero": tf.FixedLenFeature([], tf.int64),
            "missing": tf.FixedLenFeature([], tf.float32, default_value=-1.0)}


@pytest.mark.parametrize("hexed", sorted(GOLDEN))
def test_examples_serialize_to_tensorflows_bytes_and_back(hexed):
    key, kind, cls, values = GOLDEN[hexed]
    message = tf.train.Example(features=tf.train.Features(
        feature={key: tf.train.Feature(**{kind: cls(value=values)})}))
    assert message.SerializeToString().hex() == hexed
    back = tf.train.Example.FromString(bytes.fromhex(hexed))
    assert getattr(back.features.feature[key], kind).value == values
    assert back == message and back.features.feature[key].WhichOneof("kind") == kind


def test_files_round_trip_compressed_or_not_and_corruption_is_named(tmp_path):
    plain, packed = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord.gz"
    with tf.python_io.TFRecordWriter(str(plain)) as w:
        for i in range(3):
            w.write(example(i).SerializeToString())
    options = tf.python_io.TFRecordOptions(tf.python_io.TFRecordCompressionType.GZIP)
    with tf.io.TFRecordWriter(str(packed), options=options) as w:
        w.write(b"hello")
    records = list(tf.python_io.tf_record_iterator(str(plain)))
    assert [tf.train.Example.FromString(r) for r in records] == [example(i) for i in range(3)]
    assert list(tf.io.tf_record_iterator(str(packed), options=options)) == [b"hello"]
    data = bytearray(plain.read_bytes())
    data[20] ^= 0xFF
    plain.write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError, match="corrupted record at byte 0"):
        list(tf.python_io.tf_record_iterator(str(plain)))
    with pytest.raises(ValueError, match="not a valid message"):
        tf.train.Example.FromString(b"\x0a\x05ab")


def test_a_reader_reads_records_and_parse_functions_parse_them(tmp_path):
    path = str(tmp_path / "a.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for i in range(3):
            w.write(example(i).SerializeToString())
    files = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
    key, value = tf.TFRecordReader().read(files)
    one = tf.parse_single_example(value, FEATURES)
    batch = tf.train.batch([value], batch_size=3)  # rows zero-padded to the longest
    many = tf.parse_example(batch, FEATURES)
    assert one["x"].get_shape().as_list() == [3] and many["x"].get_shape().as_list() == [None, 3]
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got = sess.run(many)
        coord.request_stop()
        coord.join(threads)
    np.testing.assert_array_equal(got["label"], [[0, 0], [1, -1], [2, -2]])
    np.testing.assert_array_equal(got["x"], [[0, 1, 2.5], [0.5, 1, 2.5], [1, 1, 2.5]])
    assert got["name"].tolist() == [[b"item0", b""], [b"item1", b""], [b"item2", b""]]
    assert got["zero"].tolist() == [0, 0, 0] and got["missing"].tolist() == [-1.0] * 3
    tags = got["tags"]
    assert tags.indices.tolist() == [[1, 0], [2, 0], [2, 1]]
    assert tags.values.tolist() == [0, 0, 1] and tags.dense_shape.tolist() == [3, 2]


def test_parsing_names_what_is_wrong():
    serialized = tf.placeholder(tf.string, [])
    parsed = tf.parse_single_example(serialized, {"a": tf.FixedLenFeature([2], tf.float32)})
    wrong = tf.parse_single_example(serialized, {"a": tf.FixedLenFeature([], tf.int64)})
    two = tf.train.Example(features=tf.train.Features(feature={
        "a": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0]))}))
    with tf.Session() as sess:
        assert sess.run(parsed, {serialized: two.SerializeToString()})["a"].tolist() == [1, 2]
        with pytest.raises(tf.errors.InvalidArgumentError, match="'a' is required but missing"):
            sess.run(parsed, {serialized: tf.train.Example().SerializeToString()})
        with pytest.raises(tf.errors.InvalidArgumentError, match="holds a float_list, not the "
                                                                 "int64_list"):
            sess.run(wrong, {serialized: two.SerializeToString()})
        with pytest.raises(tf.errors.InvalidArgumentError, match="not a serialized Example"):
            sess.run(parsed, {serialized: b"\x0a\x05ab"})
    with pytest.raises(tf.OpsdkError, match="give a FixedLenFeature or a VarLenFeature"):
        tf.parse_single_example(serialized, {"a": tf.float32})


def test_the_checksum_is_crc32c_with_and_without_the_fast_library():
    from opsdk.v1 import events

    assert events._crc32c_python(b"123456789") == 0xE3069283  # the standard check value
    data = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    assert events.crc32c(data) == events._crc32c_python(data)
    assert events.crc32c(b"123456789") == 0xE3069283
