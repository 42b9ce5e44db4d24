"""The image file ops and whole-file ops (opdefs/builtin/image_codec.yaml), called eagerly and in
graphs: decoding PNG, JPEG, BMP and GIF files that Pillow writes against the pixels they hold,
channels converted as TensorFlow's decoders convert them (the values below that Pillow's own
conversions would not give were read from TensorFlow 2.21), 16-bit PNGs, encode_* round trips,
read_file and write_file, and the errors for bad bytes and for what Pillow cannot do."""

from __future__ import annotations

import io
import struct
import sys
import zlib

import numpy as np
import pytest

import opsdk
from opsdk import ops
from opsdk.registry.errors import OpsdkError

Image = pytest.importorskip("PIL.Image")

RNG = np.random.default_rng(3)
RGBA = RNG.integers(0, 256, (5, 7, 4), dtype=np.uint8)


def _file(image, kind, **options) -> np.ndarray:
    """The bytes of `image` (a Pillow image or an array) as a file, as a uint8 vector."""
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    buffer = io.BytesIO()
    image.save(buffer, format=kind, **options)
    return np.frombuffer(buffer.getvalue(), np.uint8)


def _pillow(contents, mode=None):
    image = Image.open(io.BytesIO(contents.tobytes()))
    pixels = np.asarray(image.convert(mode) if mode else image)
    return pixels if pixels.ndim == 3 else pixels[..., None]


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def _raw_png(rows: list, width: int, depth: int, colour: int, extra: bytes = b"") -> np.ndarray:
    """A PNG of unfiltered rows, for the bit depths and chunks Pillow does not write."""
    header = struct.pack(">IIBBBBB", width, len(rows), depth, colour, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + extra
            + _png_chunk(b"IDAT", zlib.compress(b"".join(b"\0" + r for r in rows)))
            + _png_chunk(b"IEND", b""))
    return np.frombuffer(data, np.uint8)


def _tf_gray(rgb):
    """libpng's gray with TensorFlow's weights: 15-bit fixed point, truncated."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    return ((9797 * r + 19234 * g + 3737 * b) >> 15).astype(np.uint8)[..., None]


# ---- PNG -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode, channels", [("L", 1), ("LA", 2), ("RGB", 3), ("RGBA", 4)])
def test_png_decodes_to_the_pixels_pillow_wrote(mode, channels):
    pixels = RGBA[..., :channels] if channels > 1 else RGBA[..., 0]
    got = ops.decode_png(_file(Image.fromarray(pixels, mode), "PNG"))
    assert got.dtype == np.uint8 and got.shape == (5, 7, channels)
    np.testing.assert_array_equal(got, RGBA[..., :channels])


def test_png_channels_are_converted_as_tensorflows_libpng_converts_them():
    rgba = _file(RGBA, "PNG")
    np.testing.assert_array_equal(ops.decode_png(rgba, channels=3), RGBA[..., :3])  # alpha dropped
    np.testing.assert_array_equal(ops.decode_png(rgba, channels=1), _tf_gray(RGBA))
    # TensorFlow's values (Pillow's own conversion rounds (1, 2, 3) up to 2)
    pixels = np.array([[[1, 2, 3], [10, 20, 30], [9, 9, 9]]], np.uint8)
    np.testing.assert_array_equal(ops.decode_png(_file(pixels, "PNG"), channels=1)[..., 0],
                                  [[1, 18, 9]])
    assert _pillow(_file(pixels, "PNG"), "L")[0, 0, 0] == 2
    gray = _file(RGBA[..., 0], "PNG")
    np.testing.assert_array_equal(ops.decode_png(gray, channels=4),
                                  np.concatenate([np.repeat(RGBA[..., :1], 3, -1),
                                                  np.full((5, 7, 1), 255, np.uint8)], -1))
    la = _file(Image.fromarray(RGBA[..., :2], "LA"), "PNG")
    np.testing.assert_array_equal(ops.decode_png(la, channels=3), np.repeat(RGBA[..., :1], 3, -1))
    np.testing.assert_array_equal(ops.decode_png(la, channels=4)[..., 3], RGBA[..., 1])


def test_a_palette_gives_its_colours_and_its_transparency_as_alpha():
    palette = Image.fromarray(RGBA[..., :3]).quantize(16)
    colours = np.asarray(palette.convert("RGB"))
    plain = _file(palette, "PNG")
    np.testing.assert_array_equal(ops.decode_png(plain), colours)
    np.testing.assert_array_equal(ops.decode_png(plain, channels=4)[..., 3], 255)
    alphas = RNG.integers(0, 256, 16, dtype=np.uint8)
    clear = _file(palette, "PNG", transparency=alphas.tobytes())
    got = ops.decode_png(clear)  # channels 0: RGBA, as TensorFlow counts a tRNS palette
    np.testing.assert_array_equal(got[..., :3], colours)
    np.testing.assert_array_equal(got[..., 3], alphas[np.asarray(palette)])


def test_a_transparent_gray_gives_alpha_for_four_channels_only():
    key = int(RGBA[0, 0, 0])
    png = _file(RGBA[..., 0], "PNG", transparency=key)
    assert ops.decode_png(png).shape == (5, 7, 1)
    np.testing.assert_array_equal(ops.decode_png(png, channels=4)[..., 3],
                                  np.where(RGBA[..., 0] == key, 0, 255))
    # 2-bit gray (0, 1, 2, 3 widened to 0, 85, 170, 255), the value 2 transparent
    two_bits = _raw_png([bytes([0b00011011])], 4, 2, 0, _png_chunk(b"tRNS", struct.pack(">H", 2)))
    got = ops.decode_png(two_bits, channels=4)
    np.testing.assert_array_equal(got[0, :, 0], [0, 85, 170, 255])
    np.testing.assert_array_equal(got[0, :, 3], [255, 255, 0, 255])


def test_sixteen_bit_gray_and_wide_values():
    values = RNG.integers(0, 65536, (4, 6), dtype=np.uint16)
    png = _file(Image.fromarray(values), "PNG")
    np.testing.assert_array_equal(ops.decode_png(png, dtype="uint16")[..., 0], values)
    np.testing.assert_array_equal(ops.decode_png(png)[..., 0], values >> 8)  # not clipped
    got = ops.decode_png(png, channels=4, dtype="uint16")
    np.testing.assert_array_equal(got[..., :3], np.repeat(values[..., None], 3, -1))
    np.testing.assert_array_equal(got[..., 3], 65535)
    # 8-bit samples widened as libpng widens them
    wide = ops.decode_png(_file(RGBA, "PNG"), dtype="uint16")
    assert wide.dtype == np.uint16
    np.testing.assert_array_equal(wide, RGBA.astype(np.uint16) * 257)


def test_sixteen_bit_colour_decodes_to_uint8_and_refuses_uint16():
    values = RNG.integers(0, 65536, (3, 4, 3), dtype=np.uint16)
    png = _raw_png([row.astype(">u2").tobytes() for row in values], 4, 16, 2)
    np.testing.assert_array_equal(ops.decode_png(png), values >> 8)
    with pytest.raises(OpsdkError, match=r"^decode_png: this PNG has 16-bit colour, which "
                                         r"Pillow reads at 8 bits only"):
        ops.decode_png(png, dtype="uint16")


# ---- JPEG ----------------------------------------------------------------------------------------

SMOOTH = np.stack(np.broadcast_arrays(np.arange(24)[None, :] * 10, np.arange(16)[:, None] * 15,
                                      np.full((16, 24), 90)), -1).astype(np.uint8)


def test_jpeg_decodes_as_libjpeg_does_with_the_accurate_dct():
    jpeg = _file(SMOOTH, "JPEG", quality=90)
    got = ops.decode_jpeg(jpeg)
    np.testing.assert_array_equal(got, _pillow(jpeg))
    assert np.abs(got.astype(int) - SMOOTH).max() < 12  # lossy, but near the original
    # gray is libjpeg's own (the Y of YCbCr), not a weighted sum of the decoded RGB
    draft = Image.open(io.BytesIO(jpeg.tobytes()))
    draft.draft("L", draft.size)
    np.testing.assert_array_equal(ops.decode_jpeg(jpeg, channels=1)[..., 0], np.asarray(draft))
    gray = _file(SMOOTH[..., 0], "JPEG")
    assert ops.decode_jpeg(gray).shape == (16, 24, 1)
    np.testing.assert_array_equal(ops.decode_jpeg(gray, channels=3),
                                  np.repeat(_pillow(gray), 3, -1))


@pytest.mark.parametrize("ratio", [2, 4, 8])
def test_jpeg_ratio_scales_down_by_libjpegs_dct_scaling(ratio):
    jpeg = _file(SMOOTH[:15, :21], "JPEG")
    got = ops.decode_jpeg(jpeg, ratio=ratio)
    assert got.shape == (-(-15 // ratio), -(-21 // ratio), 3)
    assert abs(int(got[..., 2].mean()) - 90) < 8  # the blue plane stays near 90


def test_cmyk_jpeg_gives_rgb_by_tensorflows_arithmetic():
    jpeg = _file(Image.fromarray(SMOOTH).convert("CMYK"), "JPEG")
    cmyk = 255 - _pillow(jpeg).astype(np.int64)  # libjpeg's values (Pillow inverts Adobe's)
    got = ops.decode_jpeg(jpeg)
    np.testing.assert_array_equal(got, cmyk[..., :3] * cmyk[..., 3:] // 255)
    assert np.abs(got.astype(int) - SMOOTH).max() < 12
    with pytest.raises(OpsdkError, match="^decode_jpeg: a CMYK JPEG cannot be decoded to gray"):
        ops.decode_jpeg(jpeg, channels=1)


# ---- BMP and GIF ---------------------------------------------------------------------------------

def test_bmp_of_24_and_32_bits_and_8_bits_without_their_palette():
    np.testing.assert_array_equal(ops.decode_bmp(_file(RGBA[..., :3], "BMP")), RGBA[..., :3])
    np.testing.assert_array_equal(ops.decode_bmp(_file(RGBA[..., :3], "BMP"), channels=4),
                                  np.concatenate([RGBA[..., :3], np.full((5, 7, 1), 255)], -1))
    thirty_two = _file(RGBA, "BMP")  # its fourth byte is alpha, as TensorFlow reads it
    np.testing.assert_array_equal(ops.decode_bmp(thirty_two), RGBA)
    np.testing.assert_array_equal(ops.decode_bmp(thirty_two, channels=3), RGBA[..., :3])
    palette = Image.fromarray(RGBA[..., :3]).quantize(16)
    got = ops.decode_bmp(_file(palette, "BMP"))
    np.testing.assert_array_equal(got[..., 0], np.asarray(palette))  # the indices, as TF's
    with pytest.raises(OpsdkError, match=r"^decode_bmp: this BMP has 1 bit a pixel; "
                                         r"TensorFlow's decoder, and so opsdk's, reads 8, 24 "):
        ops.decode_bmp(_file(Image.fromarray(RGBA[..., 0]).convert("1"), "BMP"))


def _indexed(index):
    image = Image.fromarray(index.astype(np.uint8), "P")
    image.putpalette([0, 0, 0, 200, 10, 10, 10, 200, 10, 10, 10, 200] + [0] * 756)
    return image


def test_gif_frames_each_of_the_whole_canvas():
    first = RNG.integers(0, 4, (6, 9))
    second = first.copy()
    second[1:3, 2:5] = (second[1:3, 2:5] + 1) % 4  # Pillow stores only this box of it
    frames = [_indexed(first), _indexed(second)]
    gif = _file(frames[0], "GIF", save_all=True, append_images=frames[1:])
    got = ops.decode_gif(gif)
    assert got.shape == (2, 6, 9, 3) and got.dtype == np.uint8
    for k, frame in enumerate(frames):
        np.testing.assert_array_equal(got[k], np.asarray(frame.convert("RGB")))
    clear = _file(_indexed(first), "GIF", transparency=1)  # transparent pixels no frame drew: 0
    np.testing.assert_array_equal(ops.decode_gif(clear)[0],
                                  np.where((first == 1)[..., None], 0,
                                           np.asarray(_indexed(first).convert("RGB"))))
    with pytest.raises(OpsdkError, match=r"^decode_png: got 2 frames, but animated GIFs can only "
                                         r"be decoded by decode_gif or decode_image"):
        ops.decode_png(gif)
    np.testing.assert_array_equal(ops.decode_image(gif, expand_animations=False), got[0])
    # one frame of another format
    assert ops.decode_gif(_file(RGBA, "PNG")).shape == (1, 5, 7, 3)


def test_decode_image_reads_every_format_and_converts_the_dtype():
    files = {"PNG": _file(RGBA[..., :3], "PNG"), "BMP": _file(RGBA[..., :3], "BMP"),
             "GIF": _file(_indexed(RGBA[..., 0] % 4), "GIF"), "JPEG": _file(SMOOTH, "JPEG")}
    for kind, contents in files.items():
        pixels = _pillow(contents, "RGB")
        got = ops.decode_image(contents)
        np.testing.assert_array_equal(got, pixels[None] if kind == "GIF" else pixels)
        first = ops.decode_image(contents, expand_animations=False)
        np.testing.assert_array_equal(first, pixels)
        floats = ops.decode_image(contents, expand_animations=False, dtype="float32")
        assert floats.dtype == np.float32
        np.testing.assert_allclose(floats, pixels / 255.0, rtol=1e-6)
        wide = ops.decode_image(contents, expand_animations=False, dtype="uint16")
        # a PNG's 8 bits widened by libpng (* 257), the others' by a shift (* 256)
        np.testing.assert_array_equal(wide, pixels.astype(np.uint16) * (257 if kind == "PNG"
                                                                         else 256))
    with pytest.raises(OpsdkError, match="^decode_image: channels must be 0 or 3 for a GIF"):
        ops.decode_image(files["GIF"], channels=1)
    with pytest.raises(OpsdkError, match="^decode_image: a JPEG decodes to 1 or 3 channels"):
        ops.decode_image(files["JPEG"], channels=4)


# ---- encoding ------------------------------------------------------------------------------------

@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_encode_png_round_trips(channels):
    image = RGBA[..., :channels]
    contents = ops.encode_png(image)
    assert contents.dtype == np.uint8 and contents.ndim == 1
    np.testing.assert_array_equal(ops.decode_png(contents), image)
    np.testing.assert_array_equal(_pillow(contents), image)


def test_encode_png_levels_and_sixteen_bit_gray():
    flat = np.zeros((64, 64, 3), np.uint8)
    stored, packed = ops.encode_png(flat, compression=0), ops.encode_png(flat, compression=9)
    assert len(stored) > 3 * 64 * 64 > 20 * len(packed)
    for contents in (stored, packed):
        np.testing.assert_array_equal(ops.decode_png(contents), flat)
    values = RNG.integers(0, 65536, (3, 5, 1), dtype=np.uint16)
    np.testing.assert_array_equal(ops.decode_png(ops.encode_png(values), dtype="uint16"), values)
    with pytest.raises(OpsdkError, match="^encode_png: Pillow writes 16-bit PNGs in gray only"):
        ops.encode_png(np.zeros((2, 2, 3), np.uint16))
    with pytest.raises(OpsdkError, match=r"^encode_png: image must have 1 or 2 or 3 or 4 channels"):
        ops.encode_png(np.zeros((2, 2, 5), np.uint8))


def test_encode_jpeg_honours_its_options():
    plain = ops.encode_jpeg(SMOOTH)
    np.testing.assert_array_equal(ops.decode_jpeg(plain), _pillow(plain))
    assert np.abs(ops.decode_jpeg(plain).astype(int) - SMOOTH).max() < 12
    info = Image.open(io.BytesIO(plain.tobytes())).info
    assert info["dpi"] == (300, 300) and not info.get("progressive")
    assert len(ops.encode_jpeg(SMOOTH, quality=10)) < len(plain)
    assert len(ops.encode_jpeg(SMOOTH, chroma_downsampling=False)) > len(plain)
    tagged = ops.encode_jpeg(SMOOTH, progressive=True, x_density=72, y_density=96,
                             xmp_metadata="<x:xmpmeta>opsdk</x:xmpmeta>")
    info = Image.open(io.BytesIO(tagged.tobytes())).info
    assert info["progressive"] and info["dpi"] == (72, 96)
    assert info["xmp"] == b"<x:xmpmeta>opsdk</x:xmpmeta>"
    gray = ops.encode_jpeg(SMOOTH[..., :1])
    assert _pillow(gray).shape == (16, 24, 1)
    start = gray.tobytes().index(b"\xff\xc0")  # one component sampled 1 x 1, as TensorFlow's
    assert gray[start + 10:start + 13].tolist() == [1, 0x11, 0]
    with pytest.raises(OpsdkError, match=r"^encode_jpeg: image must have 3 channels"):
        ops.encode_jpeg(SMOOTH[..., :1], format="rgb")


# ---- files and errors ----------------------------------------------------------------------------

def _text(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), np.uint8)


def test_write_file_makes_folders_and_read_file_reads_on_every_run(tmp_path):
    path = tmp_path / "a" / "b" / "image.png"
    contents = ops.encode_png(RGBA)
    assert int(ops.write_file(_text(str(path)), contents)) == len(contents)
    assert path.read_bytes() == contents.tobytes()
    np.testing.assert_array_equal(ops.read_file(_text(str(path))), contents)
    g = opsdk.Graph()
    with g.as_default():
        read = ops.read_file(opsdk.constant(_text(str(path))))
    with opsdk.Session(g) as sess:
        first = sess.run(read)
        path.write_bytes(b"changed")
        assert sess.run(read).tobytes() == b"changed" != first.tobytes()  # not folded
    with pytest.raises(OpsdkError, match=r"^read_file: cannot read '.*missing': No such file"):
        ops.read_file(_text(str(tmp_path / "missing")))


def test_bad_bytes_are_errors_naming_the_op_and_the_format():
    with pytest.raises(OpsdkError, match=r"^decode_png: unknown image file format \(the contents "
                                         r"begin b'GIF9 no '\); one of JPEG, PNG, GIF, BMP "):
        ops.decode_png(_text("GIF9 no image"))
    broken = _file(RGBA, "PNG")[:40]
    with pytest.raises(OpsdkError, match=r"^decode_image: invalid PNG data \(40 bytes\)"):
        ops.decode_image(broken)
    jpeg = _file(SMOOTH, "JPEG")
    with pytest.raises(OpsdkError, match=r"^decode_jpeg: invalid JPEG data"):
        ops.decode_jpeg(jpeg[:len(jpeg) // 2])
    with pytest.raises(OpsdkError, match=r"^decode_png: the contents are a BMP file, which "
                                         r"decode_png does not decode; use decode_bmp"):
        ops.decode_png(_file(RGBA[..., :3], "BMP"))
    with pytest.raises(OpsdkError, match=r"^decode_bmp: the contents are a PNG file"):
        ops.decode_bmp(_file(RGBA, "PNG"))


def test_in_a_graph_height_and_width_are_known_when_the_file_is_read():
    g = opsdk.Graph()
    with g.as_default():
        contents = opsdk.placeholder("uint8", [None])
        four = ops.decode_png(contents, channels=4, name="png")
        own = ops.decode_png(contents)
        frames = ops.decode_gif(contents)
        image = ops.decode_image(contents)
        first = ops.decode_image(contents, channels=3, expand_animations=False)
    assert four.shape == (None, None, 4) and own.shape == (None, None, None)
    assert frames.shape == (None, None, None, 3) and image.shape is None
    assert first.shape == (None, None, 3)
    with opsdk.Session(g) as sess:
        got = sess.run(four, {contents: _file(RGBA[..., :3], "PNG")})
        np.testing.assert_array_equal(got[..., :3], RGBA[..., :3])
        with pytest.raises(OpsdkError, match=r"^decode_png \(node 'png'\): unknown image file"):
            sess.run(four, {contents: _text("nothing")})


def test_without_pillow_the_op_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `from PIL import Image` fails
    for call in (lambda: ops.decode_png(_raw_png([b"\0"], 1, 8, 0)),
                 lambda: ops.encode_jpeg(SMOOTH)):
        with pytest.raises(OpsdkError, match=r"^(decode_png|encode_jpeg): reading and writing "
                                             r"image files needs Pillow, which is not installed: "
                                             r"pip install pillow"):
            call()
