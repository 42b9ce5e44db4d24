"""`tf.summary.image` (opsdk/v1/summary.py): the first `max_outputs` images of a batch, each a
PNG holding the pixels TensorFlow's rule gives (uint8 as they are, float scaled per image), tagged
as TensorFlow tags them; a merged summary keeps them beside scalars; bad shapes and counts are
refused naming the summary."""

from __future__ import annotations

import importlib.util
import struct
import zlib

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.v1 import events
from protobuf_fields import fields


def _unpng(blob: bytes) -> np.ndarray:
    """The pixels of a PNG written unfiltered (as opsdk writes them), checking every chunk."""
    assert blob[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(blob):
        (size,) = struct.unpack(">I", blob[at:at + 4])
        kind, data = blob[at + 4:at + 8], blob[at + 8:at + 8 + size]
        (crc,) = struct.unpack(">I", blob[at + 8 + size:at + 12 + size])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF
        chunks[kind] = data
        at += 12 + size
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {0: 1, 2: 3, 6: 4}[color]
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, -1)
    assert depth == 8 and (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(height, width, channels)


def _images(summary: bytes) -> dict[str, tuple]:
    """tag -> (height, width, colorspace, pixels) of each image value of a Summary."""
    found = {}
    for value in fields(summary)[1]:
        parts = fields(value)
        if 4 in parts:
            image = fields(parts[4][0])
            found[parts[1][0].decode()] = (image[1][0], image[2][0], image[3][0],
                                           _unpng(image[4][0]))
    return found


def test_uint8_images_are_written_as_they_are_and_tagged_by_position():
    tf.reset_default_graph()
    pixels = np.random.default_rng(0).integers(0, 256, size=(5, 4, 3, 3), dtype=np.uint8)
    x = tf.placeholder(tf.uint8, [None, 4, 3, 3])
    with tf.name_scope("input"):
        many = tf.summary.image("faces", x, max_outputs=3)
    one = tf.summary.image("first", x, max_outputs=1)
    with tf.Session() as sess:
        got_many, got_one = sess.run([many, one], {x: pixels})
    found = _images(got_many)
    assert sorted(found) == [f"input/faces/image/{i}" for i in range(3)]
    for i in range(3):
        height, width, colorspace, image = found[f"input/faces/image/{i}"]
        assert (height, width, colorspace) == (4, 3, 3)
        np.testing.assert_array_equal(image, pixels[i])
    [(tag, (_, _, _, image))] = _images(got_one).items()
    assert tag == "first/image"
    np.testing.assert_array_equal(image, pixels[0])


def test_float_images_are_scaled_per_image_as_tensorflow_scales_them():
    tf.reset_default_graph()
    positive = np.array([[0.0, 0.5], [1.0, 2.0]], np.float32).reshape(1, 2, 2, 1)
    signed = np.array([[-1.0, 0.0], [0.5, 0.25]], np.float32).reshape(1, 2, 2, 1)
    x = tf.placeholder(tf.float32, [None, 2, 2, 1])
    summary = tf.summary.image("img", x, max_outputs=4)  # a batch of 2: two images
    with tf.Session() as sess:
        found = _images(sess.run(summary, {x: np.concatenate([positive, signed])}))
    assert sorted(found) == ["img/image/0", "img/image/1"]
    # no negative value: the largest becomes 255
    np.testing.assert_array_equal(found["img/image/0"][3][..., 0], [[0, 64], [128, 255]])
    # a negative value: 0 becomes 128 and the largest magnitude (1.0) 127 away from it
    np.testing.assert_array_equal(found["img/image/1"][3][..., 0], [[1, 128], [192, 160]])
    assert found["img/image/0"][2] == 1


def test_an_image_summary_merges_with_scalars_and_reaches_the_event_file(tmp_path):
    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 3, 3, 4])
    tf.summary.image("rgba", x)
    tf.summary.scalar("mean", tf.reduce_mean(x))
    merged = tf.summary.merge_all()
    batch = np.random.default_rng(1).random((2, 3, 3, 4)).astype(np.float32)
    with tf.Session() as sess:
        summary = sess.run(merged, {x: batch})
    assert sorted(_images(summary)) == ["rgba/image/0", "rgba/image/1"]
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_summary(summary, 3)
    writer.close()
    assert events.read_summaries(tmp_path) == [(3, summary)]


def test_bad_shapes_and_counts_are_refused_naming_the_summary():
    tf.reset_default_graph()
    with pytest.raises(tf.OpsdkError, match=r"summary.image 'flat'.*shape \[\?, 36\]"):
        tf.summary.image("flat", tf.placeholder(tf.float32, [None, 36]))
    with pytest.raises(tf.OpsdkError, match="1, 3 or 4 channels"):
        tf.summary.image("two", tf.placeholder(tf.float32, [None, 6, 6, 2]))
    with pytest.raises(tf.OpsdkError, match="max_outputs must be a whole number >= 1"):
        tf.summary.image("none", tf.placeholder(tf.float32, [None, 6, 6, 1]), max_outputs=0)


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is not installed (pip install opsdk[tf]): nothing to "
                           "decode the images with but this module")
def test_tensorflow_decodes_the_summary_and_its_pngs():
    import tensorflow as real_tf

    tf.reset_default_graph()
    pixels = np.random.default_rng(2).integers(0, 256, size=(2, 5, 7, 1), dtype=np.uint8)
    x = tf.placeholder(tf.uint8, [None, 5, 7, 1])
    summary = tf.summary.image("g", x, max_outputs=2)
    with tf.Session() as sess:
        serialized = sess.run(summary, {x: pixels})
    parsed = real_tf.compat.v1.Summary.FromString(serialized)
    assert [v.tag for v in parsed.value] == ["g/image/0", "g/image/1"]
    for value, expected in zip(parsed.value, pixels):
        assert (value.image.height, value.image.width, value.image.colorspace) == (5, 7, 1)
        # in a graph of its own: another test of the process may have turned eager mode off
        with real_tf.Graph().as_default(), real_tf.compat.v1.Session() as sess:
            decoded = sess.run(real_tf.io.decode_png(value.image.encoded_image_string))
        np.testing.assert_array_equal(decoded, expected)
