"""tf.image's and tf.io's image files and whole files (opsdk/v1/image.py over the builtin ops of
opdefs/builtin/image_codec.yaml): a TensorBoard program's decode_png of a plot, read_file and
write_file, decode_image on each format, encode_png and decode_png as inverses, strings fetched
as bytes, and the arguments refused when the graph is built."""

from __future__ import annotations

import io

import numpy as np
import pytest

import opsdk.v1 as tf
from opsdk.registry.errors import OpsdkError
from opsdk.v1 import events

Image = pytest.importorskip("PIL.Image")

RNG = np.random.default_rng(5)
RGBA = RNG.integers(0, 256, (6, 8, 4), dtype=np.uint8)


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _file(pixels, kind, **options) -> bytes:
    buffer = io.BytesIO()
    (pixels if isinstance(pixels, Image.Image) else Image.fromarray(pixels)).save(
        buffer, format=kind, **options)
    return buffer.getvalue()


def _pillow(contents: bytes, mode: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(contents)).convert(mode))


def test_a_plot_decoded_for_an_image_summary():
    # TensorBoard programs: plt.savefig(buf, format='png'), then decode_png(buf.getvalue(), 4)
    plot_buf = io.BytesIO()
    Image.fromarray(RGBA[..., :3]).save(plot_buf, format="png")
    plot_buf.seek(0)
    image = tf.image.decode_png(plot_buf.getvalue(), channels=4)
    assert image.shape.as_list() == [None, None, 4] and image.dtype == tf.uint8
    image = tf.expand_dims(image, 0)
    image_summary_op = tf.summary.image("Linear_Plot", image)
    with tf.Session() as sess:
        summary, pixels = sess.run([image_summary_op, image])
    opaque = np.concatenate([RGBA[..., :3], np.full((6, 8, 1), 255, np.uint8)], -1)
    np.testing.assert_array_equal(pixels[0], opaque)
    assert events.png(opaque) in summary  # the summary holds the decoded image's PNG


def test_write_file_then_read_file(tmp_path):
    path = tmp_path / "out" / "plot.png"  # the folder is made, as TF's write_file makes it
    contents = tf.image.encode_png(tf.constant(RGBA))
    write = tf.io.write_file(str(path), contents)
    assert isinstance(write, tf.Operation)
    read = tf.read_file(str(path))
    with tf.Session() as sess:
        assert sess.run(write) is None
        data = sess.run(read)
        assert isinstance(data, bytes) and data == path.read_bytes()
        np.testing.assert_array_equal(_pillow(data, "RGBA"), RGBA)
        sess.run(tf.write_file(tf.constant(str(tmp_path / "note.txt")), "héllo"))
        assert (tmp_path / "note.txt").read_bytes() == "héllo".encode()
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"^read_file \(node 'ReadFile_1'\): cannot read '.*nothing'"):
            sess.run(tf.io.read_file(str(tmp_path / "nothing")))


def test_decode_image_on_each_format(tmp_path):
    files = {"png": _file(RGBA, "PNG"), "jpeg": _file(RGBA[..., :3], "JPEG"),
             "bmp": _file(RGBA[..., :3], "BMP"),
             "gif": _file(Image.fromarray(RGBA[..., :3]).quantize(8), "GIF")}
    for kind, data in files.items():
        (tmp_path / f"x.{kind}").write_bytes(data)
    with tf.Session() as sess:
        for kind, data in files.items():
            contents = tf.read_file(str(tmp_path / f"x.{kind}"))
            animated = tf.image.decode_image(contents)
            still = tf.io.decode_image(contents, channels=3, expand_animations=False)
            floats = tf.image.decode_image(contents, dtype=tf.float32, expand_animations=False)
            assert animated.get_shape().ndims is None and still.shape.as_list() == [None, None, 3]
            got, first, scaled = sess.run([animated, still, floats])
            own = _pillow(data, "RGBA" if kind == "png" else "RGB")
            np.testing.assert_array_equal(got, own[None] if kind == "gif" else own)
            np.testing.assert_array_equal(first, own[..., :3])
            np.testing.assert_allclose(scaled, own / 255.0, rtol=1e-6)


def test_encode_png_then_decode_png_is_the_identity():
    images = tf.placeholder(tf.uint8, [None, None, None])
    back = tf.image.decode_png(tf.image.encode_png(images))
    jpeg = tf.image.encode_jpeg(images[..., :3], quality=100, chroma_downsampling=False)
    with tf.Session() as sess:
        for channels in (1, 2, 3, 4):
            np.testing.assert_array_equal(sess.run(back, {images: RGBA[..., :channels]}),
                                          RGBA[..., :channels])
        data = sess.run(jpeg, {images: RGBA})
    assert isinstance(data, bytes) and data.startswith(b"\xff\xd8\xff")
    assert np.abs(_pillow(data, "RGB").astype(int) - RGBA[..., :3]).max() <= 8


def test_contents_from_a_string_placeholder_and_a_string_constant():
    contents = tf.placeholder(tf.string, [])
    pixels = tf.image.decode_jpeg(contents, channels=1, dct_method="INTEGER_ACCURATE")
    data = _file(RGBA[..., :3], "JPEG")
    gray = Image.open(io.BytesIO(data))
    gray.draft("L", gray.size)  # libjpeg's own gray, as TF's decoder asks for it
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(pixels, {contents: data})[..., 0], np.asarray(gray))
        bmp = sess.run(tf.io.decode_bmp(tf.constant(_file(RGBA[..., :3], "BMP"))))
    np.testing.assert_array_equal(bmp, RGBA[..., :3])


def test_names_where_tf1_has_them():
    for name in ("decode_png", "decode_jpeg", "decode_bmp", "decode_gif", "decode_image",
                 "encode_png", "encode_jpeg"):
        assert getattr(tf.io, name) is getattr(tf.image, name)
    assert tf.read_file is tf.io.read_file and tf.write_file is tf.io.write_file
    with pytest.raises(OpsdkError, match=r"tf\.image\.read_file is not provided"):
        tf.image.read_file  # noqa: B018 - TF1 has it in tf.io and at the top level only


@pytest.mark.parametrize("build, message", [
    (lambda: tf.image.decode_png(b"", channels=2),
     r"^image\.decode_png: channels must be 0, 1, 3 or 4, got 2"),
    (lambda: tf.image.decode_png(b"", dtype=tf.float32),
     r"^image\.decode_png: dtype must be tf\.uint8 or tf\.uint16, got float32"),
    (lambda: tf.image.decode_jpeg(b"", ratio=3), r"^image\.decode_jpeg: ratio must be 1, 2, 4"),
    (lambda: tf.image.decode_jpeg(b"", fancy_upscaling=False),
     r"^image\.decode_jpeg: fancy_upscaling=False is not supported by opsdk\.v1"),
    (lambda: tf.image.decode_jpeg(b"", try_recover_truncated=True),
     r"^image\.decode_jpeg: try_recover_truncated=True is not supported by opsdk\.v1"),
    (lambda: tf.image.decode_jpeg(b"", dct_method="FLOAT"),
     r"^image\.decode_jpeg: dct_method must be one of"),
    (lambda: tf.io.decode_bmp(b"", channels=1), r"^image\.decode_bmp: channels must be 0, 3 or 4"),
    (lambda: tf.image.decode_png(tf.zeros([4])),
     r"^image\.decode_png: contents must be one string .* got '.*' of dtype float32"),
    (lambda: tf.image.encode_jpeg(tf.zeros([2, 2, 3], tf.uint8), density_unit="cm"),
     r"^image\.encode_jpeg: density_unit='cm' is not supported by opsdk\.v1"),
    (lambda: tf.image.encode_jpeg(tf.zeros([2, 2, 4], tf.uint8)),
     r"^encode_jpeg.*image must have 1 or 3 channels"),
    (lambda: tf.image.encode_png(tf.zeros([2, 2, 3])),
     r"^image\.encode_png: image must be \[height, width, channels\] of uint8 or uint16"),
])
def test_arguments_refused_when_the_graph_is_built(build, message):
    with pytest.raises(OpsdkError, match=message):
        build()


def test_bad_bytes_fail_the_run_naming_the_op():
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"^decode_png \(node 'DecodePng'\): unknown image file format"):
            sess.run(tf.image.decode_png(b"not an image"))
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"^decode_jpeg \(node 'DecodeJpeg'\): invalid JPEG data"):
            sess.run(tf.image.decode_jpeg(_file(RGBA[..., :3], "JPEG")[:300]))
